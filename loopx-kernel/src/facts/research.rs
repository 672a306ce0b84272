//! Research: hypotheses and the findings that bear on them.

use crate::facts::{Finite, Split};
use crate::ids::AgentId;

fact_schema! {
    /// A hypothesis declaration, on stream `hypothesis:<id>`; its subject is what the
    /// hypothesis is about (holdout evidence is bound to it).
    pub struct Hypothesis, read as HypothesisRead, kind "hypothesis", prefix "hypothesis:" {
        /// The agent that owns its line of work.
        req owner: AgentId,
        /// Ids of the hypotheses it depends on.
        opt depends_on: Vec<String>,
        /// The claim, in words.
        opt statement: String,
    }
}

impl Hypothesis {
    /// The stream `hypothesis:<id>`.
    pub fn key(id: &str) -> String {
        format!("{}{id}", Self::PREFIX)
    }

    /// The id in a `hypothesis:<id>` key, unchecked; `None` for another key.
    pub fn id_of(key: &str) -> Option<&str> {
        key.strip_prefix(Self::PREFIX)
    }
}

fact_enum! {
    /// How a finding bears on its hypothesis.
    pub enum Edge {
        /// The result is what the hypothesis predicts.
        Supports = "supports",
        /// The result contradicts the hypothesis.
        Refutes = "refutes",
    }
}

fact_schema! {
    /// An experiment finding, on stream `finding:<id>`.
    pub struct Finding, read as FindingRead, kind "finding", prefix "finding:" {
        /// The hypothesis it bears on.
        req hypothesis: String,
        /// The data it was measured on.
        req split: Split,
        /// How it bears on the hypothesis.
        req edge: Edge,
        /// Who evaluated the result.
        req evaluator: String,
        /// The agent that produced the result.
        opt producer: String,
        /// The metric lift.
        opt lift: Finite,
    }
}

impl Finding {
    /// The stream `finding:<id>`.
    pub fn key(id: &str) -> String {
        format!("{}{id}", Self::PREFIX)
    }

    /// The id in a `finding:<id>` key, unchecked; `None` for another key.
    pub fn id_of(key: &str) -> Option<&str> {
        key.strip_prefix(Self::PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, FactSchema};

    #[test]
    fn a_finding_round_trips_and_lifts_are_finite() {
        let finding = Finding {
            hypothesis: "h1".into(),
            split: Split::Holdout,
            edge: Edge::Supports,
            evaluator: "bob".into(),
            producer: None,
            lift: Finite::new(0.02),
        };
        let facts = finding.to_facts();
        assert_eq!(facts.get("lift").map(String::as_str), Some("0.02"));
        let read = Finding::read(&facts);
        assert_eq!(read.edge, Fact::Known(Edge::Supports));
        assert_eq!(read.lift.known().map(|l| l.get()), Some(0.02));
        assert_eq!(read.producer, Fact::Missing);
        for bad in ["nan", "inf", "1e400", "abc"] {
            assert_eq!(Fact::<Finite>::read(Some(bad)), Fact::Invalid(bad.into()));
        }
        assert_eq!(Finding::key("f1"), "finding:f1");
        assert_eq!(Finding::id_of("finding:f1"), Some("f1"));
    }

    #[test]
    fn a_hypothesis_reads_its_owner_as_an_agent() {
        let hypothesis = Hypothesis {
            owner: AgentId::new("alice").expect("valid"),
            depends_on: Some(vec!["h2".into(), "h3".into()]),
            statement: None,
        };
        let facts = hypothesis.to_facts();
        assert_eq!(facts.get("depends_on").map(String::as_str), Some("h2,h3"));
        let read = Hypothesis::read(&facts);
        assert_eq!(read.owner.known().map(AgentId::as_str), Some("alice"));
        let mut bad = facts;
        bad.insert(Hypothesis::owner.into(), "two words".into());
        assert_eq!(
            Hypothesis::read(&bad).owner,
            Fact::Invalid("two words".into())
        );
    }
}
