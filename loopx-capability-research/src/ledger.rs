//! The hypothesis ledger: where each hypothesis stands, derived from the goal state alone
//! (observations, evidence, gates and todos), so every judge and every host sees the same one.

use std::collections::{BTreeMap, BTreeSet};

use loopx_kernel::{
    Actor, AgentId, GateStatus, GoalState, ObservationKey, Outcome, Revision, Subject,
};
use serde::Serialize;

use crate::facts::{self, Edge, FactError, FindingFacts, HypothesisFacts, Split};
use crate::ids::{self, LineTodo};

/// Where a hypothesis stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No finding decides it yet.
    Active,
    /// A qualifying holdout finding supports it and nothing qualifying refutes it. Never
    /// reached on dev findings alone.
    Supported,
    /// Doubt without proof: a refutation that does not qualify (dev, or holdout evaluated by
    /// its own producer), or a dependency that was refuted or retired.
    Weakened,
    /// A qualifying holdout finding refutes it. Leads to a retirement gate and a replan
    /// obligation, never to a silent retirement.
    Refuted,
    /// A person resolved its retirement gate.
    Retired,
}

impl Status {
    /// The status as its JSON form spells it (`active`, `supported`, …).
    pub fn name(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Supported => "supported",
            Status::Weakened => "weakened",
            Status::Refuted => "refuted",
            Status::Retired => "retired",
        }
    }
}

/// How much a finding can prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Weight {
    /// Measured on the dev split: local evidence, never enough to support or refute.
    Local,
    /// Holdout, evaluated by the agent that produced it and not yet confirmed by evidence.
    SelfEvaluated,
    /// Holdout, evaluated by someone other than its producer.
    Independent,
    /// Holdout, confirmed by fresh holdout evidence recorded by a validator or provider.
    Confirmed,
}

impl Weight {
    /// The weight of a finding on `split`, evaluated independently or not, confirmed by
    /// evidence or not. Dev findings are local whatever else holds.
    pub fn of(split: Split, independent: bool, confirmed: bool) -> Weight {
        match split {
            Split::Dev => Weight::Local,
            Split::Holdout if confirmed => Weight::Confirmed,
            Split::Holdout if independent => Weight::Independent,
            Split::Holdout => Weight::SelfEvaluated,
        }
    }

    /// True when the finding may support or refute its hypothesis.
    pub fn qualifies(self) -> bool {
        matches!(self, Weight::Independent | Weight::Confirmed)
    }
}

/// Where the person's promotion decision stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Promotion {
    /// Not asked.
    NotAsked,
    /// The promotion gate waits for a person.
    Pending,
    /// A person promoted it.
    Promoted,
    /// A person declined.
    Declined,
    /// The gate was withdrawn (the support it rested on went away).
    Withdrawn,
}

/// An evidence gap: something the line of work lacks before it can be decided.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "gap", rename_all = "snake_case")]
pub enum Gap {
    /// No finding at all: run a first experiment.
    NoExperiment,
    /// Dev findings only: run the holdout.
    NoHoldout,
    /// Holdout findings, none independently evaluated or confirmed by evidence.
    Unconfirmed,
    /// A hypothesis this one depends on was refuted or retired.
    DependencyDown {
        /// That hypothesis.
        dependency: String,
    },
    /// A qualifying refutation: the line needs a replan (and a person's retirement decision).
    Refuted,
    /// Retired, with work of the line still open.
    OpenWorkAfterRetirement,
}

/// A finding as the ledger shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingEntry {
    /// The observation stream that carries it.
    pub key: ObservationKey,
    /// What it reports.
    #[serde(flatten)]
    pub facts: FindingFacts,
    /// How much it can prove.
    pub weight: Weight,
}

/// One hypothesis: its line of work and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HypothesisEntry {
    /// What its observation declares.
    #[serde(flatten)]
    pub facts: HypothesisFacts,
    /// Where it stands.
    pub status: Status,
    /// Where the promotion decision stands.
    pub promotion: Promotion,
    /// Its findings, by key.
    pub findings: Vec<FindingEntry>,
    /// What its line lacks, in a stable order.
    pub gaps: Vec<Gap>,
}

impl HypothesisEntry {
    /// The agent owning the line.
    pub fn owner(&self) -> &AgentId {
        &self.facts.owner
    }
}

/// An observation the ledger could not use, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// The observation stream.
    pub key: ObservationKey,
    /// What is wrong with it.
    #[serde(flatten)]
    pub error: FactError,
}

/// The hypothesis ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ledger {
    /// Every declared hypothesis, by id.
    pub hypotheses: Vec<HypothesisEntry>,
    /// Observations under this crate's keys that could not be used.
    pub problems: Vec<Problem>,
}

impl Ledger {
    /// The hypothesis with id `id`.
    pub fn get(&self, id: &str) -> Option<&HypothesisEntry> {
        self.hypotheses.iter().find(|h| h.facts.id == id)
    }

    /// The status of hypothesis `id`, if declared.
    pub fn status(&self, id: &str) -> Option<Status> {
        self.get(id).map(|h| h.status)
    }

    /// The lines of work `agent` owns, by hypothesis id: the agent's research frontier.
    pub fn lines_of<'l>(&'l self, agent: &'l AgentId) -> impl Iterator<Item = &'l HypothesisEntry> {
        self.hypotheses.iter().filter(move |h| h.owner() == agent)
    }
}

/// Derives the ledger from the goal state. Pure and total: the same state always gives the
/// same ledger, and no observation, however malformed, makes it panic.
///
/// Holdout evidence counts only when it carries no time-to-live (the ledger reads no clock)
/// and is fresh by revision and lineage.
pub fn ledger(state: &GoalState) -> Ledger {
    let mut problems = Vec::new();
    let mut declared = BTreeMap::new();
    let mut findings: Vec<(ObservationKey, FindingFacts)> = Vec::new();
    for (key, observation) in &state.observations {
        if let Some(parsed) = facts::parse_hypothesis(observation) {
            match parsed {
                Ok(h) => {
                    declared.insert(h.id.clone(), h);
                }
                Err(error) => problems.push(problem(key, error)),
            }
        } else if let Some(parsed) = facts::parse_finding(observation) {
            match parsed {
                Ok(f) => findings.push((key.clone(), f)),
                Err(error) => problems.push(problem(key, error)),
            }
        }
    }
    let mut by_hypothesis: BTreeMap<String, Vec<FindingEntry>> = BTreeMap::new();
    for (key, finding) in findings {
        let Some(hypothesis) = declared.get(&finding.hypothesis) else {
            let hypothesis = finding.hypothesis.clone();
            problems.push(problem(&key, FactError::UnknownHypothesis { hypothesis }));
            continue;
        };
        let (entry, own_evidence) = weigh(state, hypothesis, key, finding);
        problems.extend(own_evidence);
        by_hypothesis
            .entry(entry.facts.hypothesis.clone())
            .or_default()
            .push(entry);
    }
    let down = down_hypotheses(state, &declared, &by_hypothesis);
    let hypotheses = declared
        .into_values()
        .map(|facts| {
            let findings = by_hypothesis.remove(&facts.id).unwrap_or_default();
            entry(state, facts, findings, &down)
        })
        .collect();
    Ledger {
        hypotheses,
        problems,
    }
}

fn problem(key: &ObservationKey, error: FactError) -> Problem {
    Problem {
        key: key.clone(),
        error,
    }
}

/// Hypotheses that are refuted or retired on their own findings and gates: what makes their
/// dependants weakened. Dependants' own standing never feeds back, so cycles are harmless.
fn down_hypotheses(
    state: &GoalState,
    declared: &BTreeMap<String, HypothesisFacts>,
    findings: &BTreeMap<String, Vec<FindingEntry>>,
) -> BTreeSet<String> {
    declared
        .keys()
        .filter(|id| {
            retired(state, id)
                || findings
                    .get(*id)
                    .is_some_and(|f| qualifying(f, Edge::Refutes))
        })
        .cloned()
        .collect()
}

fn entry(
    state: &GoalState,
    facts: HypothesisFacts,
    findings: Vec<FindingEntry>,
    down: &BTreeSet<String>,
) -> HypothesisEntry {
    let down_dependencies: Vec<String> = facts
        .depends_on
        .iter()
        .filter(|d| down.contains(*d))
        .cloned()
        .collect();
    let status = classify(
        &findings,
        !down_dependencies.is_empty(),
        retired(state, &facts.id),
    );
    let open_work = open_line_work(state, &facts.id);
    let gaps = gaps(status, &findings, &down_dependencies, open_work);
    HypothesisEntry {
        promotion: promotion(state, &facts.id),
        facts,
        status,
        findings,
        gaps,
    }
}

/// The status, by precedence: retired (a person's decision) before refuted (a qualifying
/// refutation, even against qualifying support) before weakened by a dependency before
/// supported (a qualifying support) before weakened by an unqualified refutation before active.
pub fn classify(findings: &[FindingEntry], dependency_down: bool, retired: bool) -> Status {
    if retired {
        Status::Retired
    } else if qualifying(findings, Edge::Refutes) {
        Status::Refuted
    } else if dependency_down {
        Status::Weakened
    } else if qualifying(findings, Edge::Supports) {
        Status::Supported
    } else if findings.iter().any(|f| f.facts.edge == Edge::Refutes) {
        Status::Weakened
    } else {
        Status::Active
    }
}

/// The gaps of a line with `status`, its findings, its refuted or retired dependencies and
/// whether work of the line is still open.
pub fn gaps(
    status: Status,
    findings: &[FindingEntry],
    down_dependencies: &[String],
    open_work: bool,
) -> Vec<Gap> {
    match status {
        Status::Retired if open_work => vec![Gap::OpenWorkAfterRetirement],
        Status::Retired => vec![],
        Status::Refuted => vec![Gap::Refuted],
        Status::Active | Status::Supported | Status::Weakened => {
            let holdout: Vec<&FindingEntry> = findings
                .iter()
                .filter(|f| f.facts.split == Split::Holdout)
                .collect();
            let mut gaps = Vec::new();
            if findings.is_empty() {
                gaps.push(Gap::NoExperiment);
            } else if holdout.is_empty() {
                gaps.push(Gap::NoHoldout);
            } else if !holdout.iter().any(|f| f.weight.qualifies()) {
                gaps.push(Gap::Unconfirmed);
            }
            gaps.extend(down_dependencies.iter().map(|d| Gap::DependencyDown {
                dependency: d.clone(),
            }));
            gaps
        }
    }
}

fn qualifying(findings: &[FindingEntry], edge: Edge) -> bool {
    findings
        .iter()
        .any(|f| f.facts.edge == edge && f.weight.qualifies())
}

/// Weighs a finding, with the problem of any holdout evidence for it that may not count.
/// Independent means evaluated by neither its producer nor the hypothesis's owner.
fn weigh(
    state: &GoalState,
    hypothesis: &HypothesisFacts,
    key: ObservationKey,
    facts: FindingFacts,
) -> (FindingEntry, Option<Problem>) {
    let producer = producer(&facts, hypothesis);
    let independent = facts.evaluator != producer && facts.evaluator != hypothesis.owner.as_str();
    let own = own_evidence(state, &facts, hypothesis, &producer).map(|error| problem(&key, error));
    let confirmed = facts.split == Split::Holdout
        && own.is_none()
        && confirmed(state, &key, &facts, hypothesis);
    let entry = FindingEntry {
        weight: Weight::of(facts.split, independent, confirmed),
        key,
        facts,
    };
    (entry, own)
}

/// The problem with holdout evidence for this finding recorded by the hypothesis's owner or
/// the finding's producer, if there is such evidence.
fn own_evidence(
    state: &GoalState,
    finding: &FindingFacts,
    hypothesis: &HypothesisFacts,
    producer: &str,
) -> Option<FactError> {
    let id = ids::holdout_evidence(&finding.id)?;
    let Actor::Agent(by) = &state.evidence.get(&id)?.produced_by else {
        return None;
    };
    let role = if by == &hypothesis.owner {
        "owns the hypothesis"
    } else if by.as_str() == producer {
        "produced the finding"
    } else {
        return None;
    };
    Some(FactError::OwnHoldoutEvidence {
        evidence: id.to_string(),
        by: by.to_string(),
        role,
    })
}

/// The agent that produced a finding: the one named, else the line's owner.
pub fn producer(finding: &FindingFacts, hypothesis: &HypothesisFacts) -> String {
    finding
        .producer
        .clone()
        .unwrap_or_else(|| hypothesis.owner.to_string())
}

/// The outcome holdout evidence records for a finding with `edge`.
pub fn expected_outcome(edge: Edge) -> Outcome {
    match edge {
        Edge::Supports => Outcome::Pass,
        Edge::Refutes => Outcome::Fail,
    }
}

/// True when fresh holdout evidence for this finding is recorded: the id, check, outcome and
/// lineage this crate's builder gives it, no time-to-live and bound to the current revision.
/// (Evidence by the owner or the producer is ruled out before, as a problem.)
fn confirmed(
    state: &GoalState,
    key: &ObservationKey,
    finding: &FindingFacts,
    hypothesis: &HypothesisFacts,
) -> bool {
    let Some(id) = ids::holdout_evidence(&finding.id) else {
        return false;
    };
    let Some(evidence) = state.evidence.get(&id) else {
        return false;
    };
    evidence.ttl.is_none()
        && Some(&evidence.check) == ids::holdout_check(&hypothesis.id).as_ref()
        && evidence.subject == hypothesis.subject
        && evidence.outcome == expected_outcome(finding.edge)
        && evidence.inputs.observations.iter().any(|i| &i.key == key)
        && state.freshness(&id, evidence.observed_at).is_fresh()
}

fn retired(state: &GoalState, hypothesis: &str) -> bool {
    ids::retirement_gate(hypothesis)
        .and_then(|id| state.gates.get(&id))
        .is_some_and(|g| matches!(g.status, GateStatus::Resolved { .. }))
}

fn promotion(state: &GoalState, hypothesis: &str) -> Promotion {
    let gate = ids::promotion_gate(hypothesis).and_then(|id| state.gates.get(&id));
    match gate.map(|g| &g.status) {
        None => Promotion::NotAsked,
        Some(GateStatus::Pending) => Promotion::Pending,
        Some(GateStatus::Resolved { .. }) => Promotion::Promoted,
        Some(GateStatus::Rejected { .. }) => Promotion::Declined,
        Some(GateStatus::Withdrawn { .. }) => Promotion::Withdrawn,
    }
}

/// True when a todo of the line exists and is not closed.
pub fn open_line_work(state: &GoalState, hypothesis: &str) -> bool {
    !open_line_todos(state, hypothesis).is_empty()
}

/// The line's todos that exist and are not closed.
pub fn open_line_todos(state: &GoalState, hypothesis: &str) -> Vec<loopx_kernel::TodoId> {
    LineTodo::ALL
        .iter()
        .filter_map(|t| t.id(hypothesis))
        .filter(|id| state.todos.get(id).is_some_and(|t| !t.status.is_closed()))
        .collect()
}

/// The subject and revision holdout evidence about `hypothesis` is bound to: the subject's
/// current head when it was observed, else the revision the declaration saw.
pub fn bound_revision(state: &GoalState, hypothesis: &HypothesisFacts) -> (Subject, Revision) {
    let revision = state
        .subjects
        .get(&hypothesis.subject)
        .map_or_else(|| hypothesis.revision.clone(), |head| head.revision.clone());
    (hypothesis.subject.clone(), revision)
}

#[cfg(test)]
mod tests {
    use loopx_kernel::ObservationKey;

    use super::*;

    fn entry(split: Split, edge: Edge, weight: Weight) -> FindingEntry {
        FindingEntry {
            key: ObservationKey::new("finding:f").expect("valid key"),
            facts: FindingFacts {
                id: "f".into(),
                hypothesis: "h1".into(),
                split,
                edge,
                evaluator: "bob".into(),
                producer: None,
                lift: None,
            },
            weight,
        }
    }

    fn dev(edge: Edge) -> FindingEntry {
        entry(Split::Dev, edge, Weight::Local)
    }

    fn holdout(edge: Edge, weight: Weight) -> FindingEntry {
        entry(Split::Holdout, edge, weight)
    }

    #[test]
    fn dev_findings_are_local_whoever_evaluates_them() {
        assert_eq!(Weight::of(Split::Dev, true, true), Weight::Local);
        assert_eq!(Weight::of(Split::Dev, false, false), Weight::Local);
        assert_eq!(
            Weight::of(Split::Holdout, false, false),
            Weight::SelfEvaluated
        );
        assert_eq!(Weight::of(Split::Holdout, true, false), Weight::Independent);
        assert_eq!(Weight::of(Split::Holdout, false, true), Weight::Confirmed);
        assert!(!Weight::Local.qualifies());
        assert!(!Weight::SelfEvaluated.qualifies());
        assert!(Weight::Independent.qualifies() && Weight::Confirmed.qualifies());
    }

    #[test]
    fn classification_follows_its_precedence() {
        use Edge::{Refutes, Supports};
        let support = holdout(Supports, Weight::Independent);
        let refute = holdout(Refutes, Weight::Confirmed);
        let cases: [(&[FindingEntry], bool, bool, Status); 9] = [
            (&[], false, false, Status::Active),
            (&[dev(Supports)], false, false, Status::Active),
            (&[dev(Refutes)], false, false, Status::Weakened),
            (
                &[holdout(Supports, Weight::SelfEvaluated)],
                false,
                false,
                Status::Active,
            ),
            (
                std::slice::from_ref(&support),
                false,
                false,
                Status::Supported,
            ),
            (
                std::slice::from_ref(&support),
                true,
                false,
                Status::Weakened,
            ),
            (
                &[support.clone(), refute.clone()],
                false,
                false,
                Status::Refuted,
            ),
            (
                &[support.clone(), dev(Refutes)],
                false,
                false,
                Status::Supported,
            ),
            (std::slice::from_ref(&refute), true, true, Status::Retired),
        ];
        for (findings, dependency_down, retired, expected) in cases {
            assert_eq!(
                classify(findings, dependency_down, retired),
                expected,
                "{findings:?} dependency_down={dependency_down} retired={retired}"
            );
        }
    }

    #[test]
    fn gaps_name_the_next_missing_evidence() {
        use Edge::Supports;
        assert_eq!(
            gaps(Status::Active, &[], &[], false),
            vec![Gap::NoExperiment]
        );
        assert_eq!(
            gaps(Status::Active, &[dev(Supports)], &[], false),
            vec![Gap::NoHoldout]
        );
        let unconfirmed = [dev(Supports), holdout(Supports, Weight::SelfEvaluated)];
        assert_eq!(
            gaps(Status::Active, &unconfirmed, &[], false),
            vec![Gap::Unconfirmed]
        );
        let supported = [holdout(Supports, Weight::Confirmed)];
        assert_eq!(gaps(Status::Supported, &supported, &[], false), vec![]);
        assert_eq!(
            gaps(Status::Weakened, &supported, &["h0".to_owned()], false),
            vec![Gap::DependencyDown {
                dependency: "h0".into()
            }]
        );
        assert_eq!(
            gaps(Status::Refuted, &supported, &[], true),
            vec![Gap::Refuted]
        );
        assert_eq!(
            gaps(Status::Retired, &supported, &[], true),
            vec![Gap::OpenWorkAfterRetirement]
        );
        assert_eq!(gaps(Status::Retired, &supported, &[], false), vec![]);
    }
}
