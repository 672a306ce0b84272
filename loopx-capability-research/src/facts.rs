//! The observation vocabulary: which keys carry hypotheses and findings, which facts they hold,
//! and what this capability accepts of them. The keys and facts are the kernel's research
//! schemas ([`loopx_kernel::facts::research`]), the same definition their writers use. Facts are
//! outside input: every reader returns a typed [`FactError`] instead of guessing or panicking.

use loopx_kernel::facts::research::{Finding, Hypothesis};
use loopx_kernel::facts::{Fact, FactSchema};
use loopx_kernel::{AgentId, Observation, Revision, Subject};
use serde::Serialize;

/// Key prefix of a hypothesis declaration: `hypothesis:<id>`.
pub const HYPOTHESIS_PREFIX: &str = Hypothesis::PREFIX;
/// Key prefix of an experiment finding: `finding:<id>`.
pub const FINDING_PREFIX: &str = Finding::PREFIX;

/// Fact names read from observations: the kernel schemas' names.
pub mod fact {
    use loopx_kernel::facts::research::{Finding, Hypothesis};

    /// On a hypothesis: the agent that owns its line of work (required).
    pub const OWNER: &str = Hypothesis::owner;
    /// On a hypothesis: comma-separated ids of the hypotheses it depends on (optional).
    pub const DEPENDS_ON: &str = Hypothesis::depends_on;
    /// On a hypothesis: the claim, in words (optional).
    pub const STATEMENT: &str = Hypothesis::statement;
    /// On a finding: the hypothesis it bears on (required).
    pub const HYPOTHESIS: &str = Finding::hypothesis;
    /// On a finding: `dev` or `holdout` (required).
    pub const SPLIT: &str = Finding::split;
    /// On a finding: `supports` or `refutes` (required).
    pub const EDGE: &str = Finding::edge;
    /// On a finding: who evaluated the result (required).
    pub const EVALUATOR: &str = Finding::evaluator;
    /// On a finding: the agent that produced the result (optional; the hypothesis owner).
    pub const PRODUCER: &str = Finding::producer;
    /// On a finding: the metric lift, a finite decimal number (optional).
    pub const LIFT: &str = Finding::lift;
}

/// The longest hypothesis id: derived todo, gate and obligation ids stay within the kernel's
/// id limit.
pub const MAX_HYPOTHESIS_ID: usize = 40;
/// The longest finding id, for the same reason.
pub const MAX_FINDING_ID: usize = 64;

/// Which data a finding was measured on. Only holdout data can support or refute.
pub use loopx_kernel::facts::Split;

/// How a finding bears on its hypothesis: an edge of the evidence graph.
pub use loopx_kernel::facts::research::Edge;

/// A fact that cannot be used. The observation it came from is left out of the ledger and
/// listed as a problem instead.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum FactError {
    /// A required fact is absent.
    #[error("fact `{fact}` is missing")]
    Missing {
        /// The fact.
        fact: &'static str,
    },
    /// A fact's value is not one the vocabulary allows.
    #[error("fact `{fact}` has an unusable value `{value}`")]
    Unusable {
        /// The fact.
        fact: &'static str,
        /// The value, cut to 64 characters.
        value: String,
    },
    /// The lift points the other way from the edge (a support with a negative lift, a
    /// refutation with a positive one).
    #[error("a `{edge}` edge cannot carry lift {lift}")]
    LiftAgainstEdge {
        /// The edge.
        edge: Edge,
        /// The lift.
        lift: f64,
    },
    /// Holdout evidence for the finding was recorded by the hypothesis's owner or by the
    /// finding's producer: support is never established by the one who would gain from it, so
    /// the evidence never confirms the finding.
    #[error("holdout evidence `{evidence}` was recorded by `{by}`, who {role}; it never counts")]
    OwnHoldoutEvidence {
        /// The evidence id.
        evidence: String,
        /// Who recorded it.
        by: String,
        /// Why that actor may not: `owns the hypothesis` or `produced the finding`.
        role: &'static str,
    },
    /// A finding names a hypothesis that no observation declares (yet).
    #[error("the finding bears on hypothesis `{hypothesis}`, which nobody declared")]
    UnknownHypothesis {
        /// The hypothesis named.
        hypothesis: String,
    },
}

/// A hypothesis as its observation declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HypothesisFacts {
    /// Its id (the key without the prefix).
    pub id: String,
    /// The agent that owns its line of work.
    pub owner: AgentId,
    /// Hypotheses it depends on, sorted, without duplicates.
    pub depends_on: Vec<String>,
    /// The claim, in words.
    pub statement: String,
    /// What the hypothesis is about; holdout evidence is bound to this subject.
    pub subject: Subject,
    /// The revision the declaration saw.
    pub revision: Revision,
}

/// A finding as its observation reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingFacts {
    /// Its id (the key without the prefix).
    pub id: String,
    /// The hypothesis it bears on.
    pub hypothesis: String,
    /// The data it was measured on.
    pub split: Split,
    /// How it bears on the hypothesis.
    pub edge: Edge,
    /// Who evaluated it.
    pub evaluator: String,
    /// The agent that produced the result, when the provider named one.
    pub producer: Option<String>,
    /// The metric lift, when reported.
    pub lift: Option<f64>,
}

/// The hypothesis id in a `hypothesis:<id>` key, if the key has that form and the id is valid.
pub fn hypothesis_id(key: &str) -> Option<&str> {
    key.strip_prefix(HYPOTHESIS_PREFIX)
        .filter(|id| valid_local_id(id, MAX_HYPOTHESIS_ID))
}

/// The finding id in a `finding:<id>` key, if the key has that form and the id is valid.
pub fn finding_id(key: &str) -> Option<&str> {
    key.strip_prefix(FINDING_PREFIX)
        .filter(|id| valid_local_id(id, MAX_FINDING_ID))
}

/// True for 1 to `max` letters, digits, `.`, `_` and `-`: ids that embed safely in the ids this
/// crate derives (which use `:` as a separator).
pub fn valid_local_id(id: &str, max: usize) -> bool {
    !id.is_empty()
        && id.len() <= max
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Reads a hypothesis declaration. `None` when the key is not a valid `hypothesis:<id>` key.
pub fn parse_hypothesis(observation: &Observation) -> Option<Result<HypothesisFacts, FactError>> {
    let id = hypothesis_id(observation.key.as_str())?;
    Some(hypothesis_facts(id, observation))
}

fn hypothesis_facts(id: &str, observation: &Observation) -> Result<HypothesisFacts, FactError> {
    let read = Hypothesis::read(&observation.facts);
    let owner = required(read.owner, fact::OWNER)?;
    let depends_on = match read.depends_on {
        Fact::Known(ids) => dependencies(id, ids)?,
        _ => vec![],
    };
    Ok(HypothesisFacts {
        id: id.to_owned(),
        owner,
        depends_on,
        statement: read.statement.into_known().unwrap_or_default(),
        subject: observation.subject.clone(),
        revision: observation.revision.clone(),
    })
}

/// Checks a `depends_on` list (blanks already skipped): sorted, without duplicates. A
/// hypothesis cannot depend on itself.
///
/// # Errors
/// [`FactError::Unusable`] when an entry is not a valid hypothesis id or names `own`.
pub fn dependencies(own: &str, mut ids: Vec<String>) -> Result<Vec<String>, FactError> {
    if ids
        .iter()
        .any(|entry| entry == own || !valid_local_id(entry, MAX_HYPOTHESIS_ID))
    {
        return Err(unusable(fact::DEPENDS_ON, &ids.join(",")));
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Reads a finding. `None` when the key is not a valid `finding:<id>` key.
pub fn parse_finding(observation: &Observation) -> Option<Result<FindingFacts, FactError>> {
    let id = finding_id(observation.key.as_str())?;
    Some(finding_facts(id, observation))
}

fn finding_facts(id: &str, observation: &Observation) -> Result<FindingFacts, FactError> {
    let read = Finding::read(&observation.facts);
    let hypothesis = required(text(read.hypothesis), fact::HYPOTHESIS)?;
    if !valid_local_id(&hypothesis, MAX_HYPOTHESIS_ID) {
        return Err(unusable(fact::HYPOTHESIS, &hypothesis));
    }
    let split = required(read.split, fact::SPLIT)?;
    let edge = required(read.edge, fact::EDGE)?;
    let evaluator = required(text(read.evaluator), fact::EVALUATOR)?;
    let producer = read.producer.into_known().filter(|p| !p.is_empty());
    let lift = match read.lift {
        Fact::Missing => None,
        Fact::Known(lift) => Some(lift.get()),
        Fact::Invalid(value) => return Err(unusable(fact::LIFT, &value)),
    };
    check_lift(edge, lift)?;
    Ok(FindingFacts {
        id: id.to_owned(),
        hypothesis,
        split,
        edge,
        evaluator,
        producer,
        lift,
    })
}

/// Checks that a lift does not point against its edge: a support needs a lift of at least
/// zero, a refutation one of at most zero.
///
/// # Errors
/// [`FactError::LiftAgainstEdge`] when it does.
pub fn check_lift(edge: Edge, lift: Option<f64>) -> Result<(), FactError> {
    match (edge, lift) {
        (Edge::Supports, Some(lift)) if lift < 0.0 => {
            Err(FactError::LiftAgainstEdge { edge, lift })
        }
        (Edge::Refutes, Some(lift)) if lift > 0.0 => Err(FactError::LiftAgainstEdge { edge, lift }),
        _ => Ok(()),
    }
}

/// A required text: blank counts as missing.
fn text(fact: Fact<String>) -> Fact<String> {
    match fact {
        Fact::Known(value) if value.trim().is_empty() => Fact::Missing,
        other => other,
    }
}

/// A required fact: missing, or unusable with the text that was recorded.
fn required<T>(fact: Fact<T>, name: &'static str) -> Result<T, FactError> {
    match fact {
        Fact::Known(value) => Ok(value),
        Fact::Missing => Err(FactError::Missing { fact: name }),
        Fact::Invalid(value) => Err(unusable(name, &value)),
    }
}

fn unusable(fact: &'static str, value: &str) -> FactError {
    FactError::Unusable {
        fact,
        value: value.chars().take(64).collect(),
    }
}

#[cfg(test)]
mod tests {
    use loopx_kernel::testkit::scenario;

    use super::*;

    fn observed(key: &str, facts: &[(&str, &str)]) -> Observation {
        scenario::observation(key, "research/h1", "v1", facts).expect("valid test ids")
    }

    #[test]
    fn keys_name_hypotheses_and_findings_with_safe_ids() {
        assert_eq!(hypothesis_id("hypothesis:h1"), Some("h1"));
        assert_eq!(finding_id("finding:run-7.b"), Some("run-7.b"));
        assert_eq!(hypothesis_id("hypothesis:"), None);
        assert_eq!(hypothesis_id("hypothesis:a:b"), None);
        assert_eq!(finding_id("finding:a/b"), None);
        assert_eq!(hypothesis_id("finding:h1"), None);
        assert_eq!(
            hypothesis_id(&format!("hypothesis:{}", "x".repeat(41))),
            None
        );
    }

    #[test]
    fn splits_edges_and_lifts_are_read_by_the_schema() {
        let finding = |split: &str, edge: &str, lift: &str| {
            parse_finding(&observed(
                "finding:f1",
                &[
                    ("hypothesis", "h1"),
                    ("split", split),
                    ("edge", edge),
                    ("evaluator", "bob"),
                    ("lift", lift),
                ],
            ))
            .expect("a finding key")
        };
        assert!(finding("holdout", "supports", " 0.25 ").is_ok());
        assert!(finding("dev", "refutes", "-3").is_ok());
        for (split, edge) in [
            ("DEV", "supports"),
            (" holdout", "supports"),
            ("dev", "depends_on"),
        ] {
            assert!(
                matches!(finding(split, edge, "0"), Err(FactError::Unusable { .. })),
                "{split} {edge}"
            );
        }
        for bad in ["nan", "inf", "-inf", "1e400", "abc"] {
            assert_eq!(
                finding("dev", "supports", bad),
                Err(FactError::Unusable {
                    fact: fact::LIFT,
                    value: bad.to_owned()
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_lift_never_points_against_its_edge() {
        assert!(check_lift(Edge::Supports, Some(0.0)).is_ok());
        assert!(check_lift(Edge::Supports, None).is_ok());
        assert!(check_lift(Edge::Refutes, Some(-0.1)).is_ok());
        assert_eq!(
            check_lift(Edge::Supports, Some(-0.1)),
            Err(FactError::LiftAgainstEdge {
                edge: Edge::Supports,
                lift: -0.1
            })
        );
        assert!(check_lift(Edge::Refutes, Some(0.1)).is_err());
    }

    #[test]
    fn dependencies_are_sorted_unique_and_never_self() {
        let list = |text: &str| {
            parse_hypothesis(&observed(
                "hypothesis:h3",
                &[("owner", "alice"), ("depends_on", text)],
            ))
            .expect("a hypothesis key")
            .map(|h| h.depends_on)
        };
        assert_eq!(
            list(" h2, h1,,h2 "),
            Ok(vec!["h1".to_owned(), "h2".to_owned()])
        );
        assert_eq!(list(""), Ok(vec![]));
        assert!(list("h3").is_err());
        assert!(list("h2,bad id").is_err());
    }

    #[test]
    fn a_hypothesis_needs_a_valid_owner() {
        let missing = parse_hypothesis(&observed("hypothesis:h1", &[])).expect("a hypothesis key");
        assert_eq!(missing, Err(FactError::Missing { fact: fact::OWNER }));
        let bad = parse_hypothesis(&observed("hypothesis:h1", &[("owner", "two words")]))
            .expect("a hypothesis key");
        assert!(matches!(
            bad,
            Err(FactError::Unusable { fact: "owner", .. })
        ));
        let good = parse_hypothesis(&observed(
            "hypothesis:h1",
            &[("owner", "alice"), ("depends_on", "h2")],
        ))
        .expect("a hypothesis key")
        .expect("valid facts");
        assert_eq!(good.owner.as_str(), "alice");
        assert_eq!(good.depends_on, vec!["h2".to_owned()]);
        assert_eq!(good.subject.as_str(), "research/h1");
    }

    #[test]
    fn a_finding_reads_every_fact_and_defaults_the_producer() {
        let facts = [
            ("hypothesis", "h1"),
            ("split", "holdout"),
            ("edge", "supports"),
            ("evaluator", "bob"),
            ("lift", "0.02"),
        ];
        let finding = parse_finding(&observed("finding:f1", &facts))
            .expect("a finding key")
            .expect("valid facts");
        assert_eq!(finding.split, Split::Holdout);
        assert_eq!(finding.edge, Edge::Supports);
        assert_eq!(finding.producer, None);
        assert_eq!(finding.lift, Some(0.02));
        let no_evaluator = parse_finding(&observed("finding:f1", &facts[..3])).expect("a key");
        assert_eq!(
            no_evaluator,
            Err(FactError::Missing {
                fact: fact::EVALUATOR
            })
        );
        assert!(parse_finding(&observed("notes:f1", &facts)).is_none());
    }
}
