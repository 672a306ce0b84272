//! Holdout evidence: the one piece of evidence a promotion rests on.
//!
//! A capability cannot record evidence, so this module offers a pure builder,
//! [`holdout_evidence`], for the validator of the holdout todo (in its turn's settlement) or
//! any validator or provider that watches holdout runs (with `record_evidence`). The evidence
//! is bound to the experiment's subject at its current revision and cites the fingerprints of
//! every observation it was derived from, so a new run, a new config or dataset, or a changed
//! holdout observation makes it stale by the kernel's rules.

use loopx_kernel::{
    CheckId, EvidenceId, GoalState, InvalidId, Lineage, NewEvidence, ObservedInput, Outcome,
    Revision, Subject, Timestamp,
};
use serde::Serialize;

use crate::classify::Verdict;
use crate::contract::ExperimentContract;
use crate::facts::{holdout_of, subject};
use crate::ids::scoped_id;
use crate::judgement::{Judgement, assess_run};

/// The check holdout evidence shows.
pub const HOLDOUT_CHECK: &str = "automl.holdout";

/// Why no holdout evidence can be built yet.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HoldoutError {
    /// The experiment has no run-status observation.
    #[error("experiment `{experiment}` has no observed run")]
    NoRun {
        /// The experiment.
        experiment: String,
    },
    /// The holdout evaluation has no run-status observation.
    #[error("`{experiment}` has no observed holdout evaluation")]
    NoHoldoutRun {
        /// The experiment.
        experiment: String,
    },
    /// The holdout evaluation ran another revision than the experiment's current one.
    #[error("the holdout evaluation ran `{holdout}`, the experiment is at `{current}`")]
    RevisionMismatch {
        /// The experiment's current revision.
        current: Revision,
        /// The holdout evaluation's revision.
        holdout: Revision,
    },
    /// The holdout evaluation says nothing about the model yet (pending, an infrastructure
    /// failure, an invalid comparison or missing facts).
    #[error("the holdout evaluation is not conclusive: {verdict}")]
    NotConclusive {
        /// The holdout evaluation's verdict.
        verdict: String,
    },
    /// An id could not be formed.
    #[error(transparent)]
    Id(#[from] InvalidId),
}

/// Where an experiment's holdout evidence stands at its current revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "holdout", content = "evidence", rename_all = "snake_case")]
pub enum HoldoutStanding {
    /// No fresh holdout evidence at the current revision.
    Missing,
    /// The newest fresh holdout evidence passed.
    Passed(EvidenceId),
    /// The newest fresh holdout evidence failed.
    Failed(EvidenceId),
}

/// Builds the holdout evidence for `experiment` from the goal's observations: pass when its
/// holdout evaluation is a candidate against the baseline's holdout evaluation, fail when it
/// regressed, was blocked by a guardrail or stayed within noise.
///
/// # Errors
/// [`HoldoutError`] when the holdout evaluation is missing, ran another revision, or is not
/// conclusive.
pub fn holdout_evidence(
    contract: &ExperimentContract,
    state: &GoalState,
    experiment: &str,
    observed_at: Timestamp,
) -> Result<NewEvidence, HoldoutError> {
    let holdout = holdout_of(experiment);
    let Some(dev) = assess_run(contract, state, experiment) else {
        return Err(HoldoutError::NoRun {
            experiment: experiment.to_owned(),
        });
    };
    let Some(judged) = assess_run(contract, state, &holdout) else {
        return Err(HoldoutError::NoHoldoutRun {
            experiment: experiment.to_owned(),
        });
    };
    if judged.run.revision != dev.run.revision {
        return Err(HoldoutError::RevisionMismatch {
            current: dev.run.revision.clone(),
            holdout: judged.run.revision.clone(),
        });
    }
    let outcome = match &judged.classification.verdict {
        Verdict::Candidate { .. } => Outcome::Pass,
        Verdict::Regressed { .. }
        | Verdict::BlockedByGuardrail { .. }
        | Verdict::Inconclusive(crate::classify::Inconclusive::WithinNoise { .. }) => Outcome::Fail,
        other => {
            return Err(HoldoutError::NotConclusive {
                verdict: other.name().to_owned(),
            });
        }
    };
    build(experiment, &judged, &dev.run.revision, outcome, observed_at)
}

fn build(
    experiment: &str,
    judged: &Judgement,
    revision: &Revision,
    outcome: Outcome,
    observed_at: Timestamp,
) -> Result<NewEvidence, HoldoutError> {
    let observations: Vec<ObservedInput> = judged
        .inputs()
        .map(|o| ObservedInput {
            key: o.key.clone(),
            fingerprint: o.fingerprint.clone(),
        })
        .collect();
    let mut parts = vec![revision.as_str()];
    parts.extend(observations.iter().map(|o| o.fingerprint.as_str()));
    Ok(NewEvidence {
        id: EvidenceId::new(scoped_id("holdout", experiment, &parts))?,
        check: CheckId::new(HOLDOUT_CHECK)?,
        subject: Subject::new(subject(experiment))?,
        revision: revision.clone(),
        outcome,
        summary: format!(
            "holdout of {experiment}: {}",
            serde_summary(&judged.classification.verdict)
        ),
        observed_at,
        ttl: None,
        inputs: Lineage {
            evidence: Vec::new(),
            observations,
        },
    })
}

fn serde_summary(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Candidate { gain } => format!("candidate, gain {gain:+.4}"),
        Verdict::Regressed { gain } => format!("regressed, gain {gain:+.4}"),
        Verdict::BlockedByGuardrail { failed } => format!("blocked by {}", failed.join(", ")),
        other => other.name().to_owned(),
    }
}

/// Where `experiment`'s holdout evidence stands at `revision` and `now`: the newest evidence
/// of [`HOLDOUT_CHECK`] about it at that revision decides, and only while fresh.
pub fn holdout_standing(
    state: &GoalState,
    experiment: &str,
    revision: &Revision,
    now: Timestamp,
) -> HoldoutStanding {
    let about = subject(experiment);
    let newest = state
        .evidence
        .values()
        .filter(|e| e.check.as_str() == HOLDOUT_CHECK && e.subject.as_str() == about)
        .filter(|e| &e.revision == revision)
        .max_by_key(|e| (e.observed_at, e.seq));
    match newest {
        Some(e) if state.freshness(&e.id, now).is_fresh() => match e.outcome {
            Outcome::Pass => HoldoutStanding::Passed(e.id.clone()),
            Outcome::Fail => HoldoutStanding::Failed(e.id.clone()),
        },
        _ => HoldoutStanding::Missing,
    }
}
