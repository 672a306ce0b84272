//! The stable ids this crate derives from domain facts, so that repeated judgements propose the
//! same todo, gate or obligation and converge. Each function returns `None` only if the id
//! would be invalid, which the id checks in [`facts`](crate::facts) rule out for parsed facts.

use loopx_kernel::{CheckId, DecisionScope, EvidenceId, GateId, ObligationId, TodoId};

/// The todos of one line of work, in the order the line runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineTodo {
    /// `experiment:<h>`: run a first (dev) experiment.
    Experiment,
    /// `holdout:<h>`: run the holdout evaluation.
    Holdout,
    /// `confirm:<h>`: evaluate the holdout result independently of whoever produced it.
    Confirm,
    /// `writeup:<h>`: write up the hypothesis once a person has decided to promote it.
    Writeup,
}

impl LineTodo {
    /// Every line todo.
    pub const ALL: [LineTodo; 4] = [
        LineTodo::Experiment,
        LineTodo::Holdout,
        LineTodo::Confirm,
        LineTodo::Writeup,
    ];

    /// The todo's id for hypothesis `hypothesis`.
    pub fn id(self, hypothesis: &str) -> Option<TodoId> {
        let prefix = match self {
            LineTodo::Experiment => "experiment",
            LineTodo::Holdout => "holdout",
            LineTodo::Confirm => "confirm",
            LineTodo::Writeup => "writeup",
        };
        TodoId::new(format!("{prefix}:{hypothesis}")).ok()
    }
}

/// `promote:<h>`: the person's promotion gate, and the decision scope it settles.
pub fn promotion_gate(hypothesis: &str) -> Option<GateId> {
    GateId::new(format!("promote:{hypothesis}")).ok()
}

/// `retire:<h>`: the person's retirement gate.
pub fn retirement_gate(hypothesis: &str) -> Option<GateId> {
    GateId::new(format!("retire:{hypothesis}")).ok()
}

/// `promote:<h>` as a decision scope: the write-up requires it.
pub fn promotion_decision(hypothesis: &str) -> Option<DecisionScope> {
    DecisionScope::new(format!("promote:{hypothesis}")).ok()
}

/// `retire:<h>` as a decision scope.
pub fn retirement_decision(hypothesis: &str) -> Option<DecisionScope> {
    DecisionScope::new(format!("retire:{hypothesis}")).ok()
}

/// `research:<topic>:<h>`: a replan obligation about hypothesis `h`.
pub fn obligation(topic: &str, hypothesis: &str) -> Option<ObligationId> {
    ObligationId::new(format!("research:{topic}:{hypothesis}")).ok()
}

/// `research:dependency:<h>:<dependency>`: the replan obligation raised when a dependency of
/// hypothesis `h` is refuted or retired.
pub fn dependency_obligation(hypothesis: &str, dependency: &str) -> Option<ObligationId> {
    ObligationId::new(format!("research:dependency:{hypothesis}:{dependency}")).ok()
}

/// `holdout:<finding>`: the evidence built from a holdout finding.
pub fn holdout_evidence(finding: &str) -> Option<EvidenceId> {
    EvidenceId::new(format!("holdout:{finding}")).ok()
}

/// `holdout:<h>`: the check holdout evidence about hypothesis `h` shows; a goal criterion on
/// this check and the hypothesis subject is met by passing holdout evidence.
pub fn holdout_check(hypothesis: &str) -> Option<CheckId> {
    CheckId::new(format!("holdout:{hypothesis}")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{MAX_FINDING_ID, MAX_HYPOTHESIS_ID};

    #[test]
    fn derived_ids_fit_the_kernel_for_the_longest_local_ids() {
        let h = "h".repeat(MAX_HYPOTHESIS_ID);
        let f = "f".repeat(MAX_FINDING_ID);
        for todo in LineTodo::ALL {
            assert!(todo.id(&h).is_some());
        }
        assert!(promotion_gate(&h).is_some() && retirement_gate(&h).is_some());
        assert!(promotion_decision(&h).is_some() && retirement_decision(&h).is_some());
        assert!(obligation("no-experiment", &h).is_some());
        assert!(dependency_obligation(&h, &h).is_some());
        assert!(holdout_evidence(&f).is_some() && holdout_check(&h).is_some());
    }

    #[test]
    fn derived_ids_are_stable() {
        assert_eq!(
            LineTodo::Holdout.id("h1").map(String::from),
            Some("holdout:h1".into())
        );
        assert_eq!(
            dependency_obligation("h2", "h1").map(String::from),
            Some("research:dependency:h2:h1".into())
        );
    }
}
