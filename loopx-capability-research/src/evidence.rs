//! Building holdout evidence from a holdout finding.
//!
//! The capability never records evidence (the kernel refuses it). A validator or an independent
//! evaluator — or the validator of the turn that ran the holdout, in its settlement — calls
//! [`holdout_evidence`] and records the result. The ledger then counts the finding as
//! confirmed for as long as the evidence stays fresh: bound to the hypothesis subject's current
//! revision, with the finding observation unchanged since it was read.

use loopx_kernel::{GoalState, Lineage, NewEvidence, ObservationKey, ObservedInput};

use loopx_kernel::facts::research::Hypothesis;

use crate::facts::{self, FactError, Split};
use crate::ids;
use crate::ledger::{bound_revision, expected_outcome, producer};

/// Why holdout evidence cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvidenceError {
    /// The key is not a `finding:<id>` key.
    #[error("`{key}` is not a finding key (`finding:<id>`)")]
    NotAFinding {
        /// The key.
        key: ObservationKey,
    },
    /// The goal holds no observation under the key.
    #[error("no finding `{key}` is recorded")]
    UnknownFinding {
        /// The key.
        key: ObservationKey,
    },
    /// The finding's or its hypothesis' facts are unusable.
    #[error("`{key}`: {error}")]
    Malformed {
        /// The observation at fault.
        key: ObservationKey,
        /// What is wrong.
        error: FactError,
    },
    /// A dev finding is local evidence and never becomes holdout evidence.
    #[error("`{key}` was measured on the dev split; only holdout findings become evidence")]
    NotHoldout {
        /// The finding.
        key: ObservationKey,
    },
    /// The derived evidence id or check id would be invalid.
    #[error("the evidence ids derived from `{key}` are invalid")]
    InvalidId {
        /// The finding.
        key: ObservationKey,
    },
}

/// Builds the evidence a validator records for the holdout finding under `key`: id
/// `holdout:<finding>`, check `holdout:<hypothesis>`, bound to the hypothesis subject at its
/// current revision, passing for a supporting finding and failing for a refuting one, with the
/// finding observation (key and fingerprint) as its lineage and no time-to-live. Pure: it reads
/// only the goal state.
///
/// # Errors
/// [`EvidenceError`] when the key is not a recorded holdout finding of a declared hypothesis.
pub fn holdout_evidence(
    state: &GoalState,
    key: &ObservationKey,
) -> Result<NewEvidence, EvidenceError> {
    let Some(id) = facts::finding_id(key.as_str()) else {
        return Err(EvidenceError::NotAFinding { key: key.clone() });
    };
    let observation = state
        .observations
        .get(key)
        .ok_or_else(|| EvidenceError::UnknownFinding { key: key.clone() })?;
    let finding = finding_facts(key, observation)?;
    if finding.split != Split::Holdout {
        return Err(EvidenceError::NotHoldout { key: key.clone() });
    }
    let hypothesis = hypothesis_facts(state, key, &finding.hypothesis)?;
    let (subject, revision) = bound_revision(state, &hypothesis);
    let (Some(evidence_id), Some(check)) = (
        ids::holdout_evidence(id),
        ids::holdout_check(&hypothesis.id),
    ) else {
        return Err(EvidenceError::InvalidId { key: key.clone() });
    };
    let lift = finding
        .lift
        .map_or_else(String::new, |l| format!(", lift {l}"));
    Ok(NewEvidence {
        id: evidence_id,
        check,
        subject,
        revision,
        outcome: expected_outcome(finding.edge),
        summary: format!(
            "holdout finding {id} {} {} (produced by {}, evaluated by {}{lift})",
            finding.edge,
            hypothesis.id,
            producer(&finding, &hypothesis),
            finding.evaluator,
        ),
        observed_at: observation.observed_at,
        ttl: None,
        inputs: Lineage {
            evidence: vec![],
            observations: vec![ObservedInput {
                key: key.clone(),
                fingerprint: observation.fingerprint.clone(),
            }],
        },
    })
}

fn finding_facts(
    key: &ObservationKey,
    observation: &loopx_kernel::Observation,
) -> Result<facts::FindingFacts, EvidenceError> {
    match facts::parse_finding(observation) {
        Some(Ok(finding)) => Ok(finding),
        Some(Err(error)) => Err(EvidenceError::Malformed {
            key: key.clone(),
            error,
        }),
        None => Err(EvidenceError::NotAFinding { key: key.clone() }),
    }
}

fn hypothesis_facts(
    state: &GoalState,
    finding: &ObservationKey,
    hypothesis: &str,
) -> Result<facts::HypothesisFacts, EvidenceError> {
    let unknown = || EvidenceError::Malformed {
        key: finding.clone(),
        error: FactError::UnknownHypothesis {
            hypothesis: hypothesis.to_owned(),
        },
    };
    let key = ObservationKey::new(Hypothesis::key(hypothesis)).map_err(|_| unknown())?;
    let observation = state.observations.get(&key).ok_or_else(unknown)?;
    match facts::parse_hypothesis(observation) {
        Some(Ok(facts)) => Ok(facts),
        Some(Err(error)) => Err(EvidenceError::Malformed { key, error }),
        None => Err(unknown()),
    }
}

#[cfg(test)]
mod tests {
    use loopx_kernel::testkit::{roster, scenario};
    use loopx_kernel::{Actor, Command, Observation, Outcome};

    use super::*;

    fn goal(observations: &[Observation]) -> GoalState {
        let spec = scenario::spec("evidence").expect("valid spec");
        let mut goal = GoalState::create(&Actor::Person(roster::owner()), roster::start(), &spec)
            .expect("created");
        for observation in observations {
            let command = Command::RecordObservation {
                observation: observation.clone(),
            };
            goal.handle(
                &Actor::Provider(roster::provider()),
                roster::start(),
                &command,
            )
            .expect("recorded");
        }
        goal
    }

    fn hypothesis(revision: &str) -> Observation {
        scenario::observation(
            "hypothesis:h1",
            "research/h1",
            revision,
            &[("owner", "alice")],
        )
        .expect("valid ids")
    }

    fn finding(key: &str, split: &str, edge: &str) -> Observation {
        let facts = [
            ("hypothesis", "h1"),
            ("split", split),
            ("edge", edge),
            ("evaluator", "alice"),
        ];
        scenario::observation(key, "run/1", "r1", &facts).expect("valid ids")
    }

    fn key(text: &str) -> ObservationKey {
        ObservationKey::new(text).expect("valid key")
    }

    #[test]
    fn a_holdout_finding_becomes_evidence_bound_to_the_current_revision() {
        let f1 = finding("finding:f1", "holdout", "supports");
        let state = goal(&[hypothesis("v1"), f1.clone(), hypothesis("v2")]);
        let evidence = holdout_evidence(&state, &key("finding:f1")).expect("built");
        assert_eq!(evidence.id.as_str(), "holdout:f1");
        assert_eq!(evidence.check.as_str(), "holdout:h1");
        assert_eq!(evidence.subject.as_str(), "research/h1");
        assert_eq!(evidence.revision.as_str(), "v2");
        assert_eq!(evidence.outcome, Outcome::Pass);
        assert_eq!(evidence.ttl, None);
        assert_eq!(evidence.inputs.observations[0].key, f1.key);
        assert_eq!(evidence.inputs.observations[0].fingerprint, f1.fingerprint);
    }

    #[test]
    fn a_refuting_finding_becomes_failing_evidence() {
        let state = goal(&[
            hypothesis("v1"),
            finding("finding:f1", "holdout", "refutes"),
        ]);
        let evidence = holdout_evidence(&state, &key("finding:f1")).expect("built");
        assert_eq!(evidence.outcome, Outcome::Fail);
    }

    #[test]
    fn only_recorded_holdout_findings_of_declared_hypotheses_qualify() {
        let state = goal(&[
            hypothesis("v1"),
            finding("finding:dev", "dev", "supports"),
            finding("finding:odd", "sideways", "supports"),
        ]);
        assert!(matches!(
            holdout_evidence(&state, &key("hypothesis:h1")),
            Err(EvidenceError::NotAFinding { .. })
        ));
        assert!(matches!(
            holdout_evidence(&state, &key("finding:none")),
            Err(EvidenceError::UnknownFinding { .. })
        ));
        assert!(matches!(
            holdout_evidence(&state, &key("finding:dev")),
            Err(EvidenceError::NotHoldout { .. })
        ));
        assert!(matches!(
            holdout_evidence(&state, &key("finding:odd")),
            Err(EvidenceError::Malformed { .. })
        ));
        let orphan = goal(&[finding("finding:f1", "holdout", "supports")]);
        assert!(matches!(
            holdout_evidence(&orphan, &key("finding:f1")),
            Err(EvidenceError::Malformed {
                error: FactError::UnknownHypothesis { .. },
                ..
            })
        ));
    }
}
