//! Reading experiment facts out of the goal's observations. The facts and keys are the kernel's
//! experiment schemas ([`loopx_kernel::facts::metrics`]), the same definition the metrics
//! provider and the run watcher write them with. Every fact is outside input: each is read into
//! a typed value, and a missing or unreadable one stays visible as such ([`Fact::Missing`],
//! [`Fact::Invalid`]) instead of becoming a default or a panic.
//!
//! Two streams are read per experiment `<e>`, both about subject `experiment:<e>` at revision
//! `run:<code>+<config>+<dataset>`:
//!
//! - `run:<e>`, the run-status observation ([`RunStatus`], recorded by whichever provider
//!   watches the training job): facts `state`, `exit_reason`, `split`, `dataset`,
//!   `eval_window`, `budget`, `cost`, `wall_time_secs`, `attempt`.
//! - `metric:<e>/<name>`, the metrics provider's summary of one metric ([`Metric`]): fact
//!   `last_value` (the others it records are not needed here).
//!
//! The holdout evaluation of experiment `<e>` is the experiment `<e>@holdout`.

use loopx_kernel::facts::FactSchema;
use loopx_kernel::facts::metrics::{self, Metric, RunStatus};
use loopx_kernel::{GoalState, Observation, Revision};
use serde::Serialize;

/// A fact as read from an observation (the kernel's reading of outside input).
pub use loopx_kernel::facts::Fact;
/// Which part of the data a run was evaluated on, as its `split` fact says: the development
/// split for comparisons and candidates, the holdout split for confirmation before promotion.
pub use loopx_kernel::facts::Split;
/// Why a run ended abnormally, as its `exit_reason` fact says.
pub use loopx_kernel::facts::metrics::ExitReason;

/// The suffix naming an experiment's holdout evaluation: `<e>@holdout`.
pub const HOLDOUT_SUFFIX: &str = "@holdout";

/// The prefix of run-status observation keys: `run:<e>`.
pub const RUN_PREFIX: &str = RunStatus::PREFIX;

/// The run-status stream of `experiment`.
pub fn run_key(experiment: &str) -> String {
    RunStatus::key(experiment)
}

/// The metrics provider's stream for `metric` of `experiment`.
pub fn metric_key(experiment: &str, metric: &str) -> String {
    Metric::key(experiment, metric)
}

/// The subject every fact about `experiment` is bound to.
pub fn subject(experiment: &str) -> String {
    metrics::subject(experiment)
}

/// The holdout evaluation of `experiment`.
pub fn holdout_of(experiment: &str) -> String {
    format!("{experiment}{HOLDOUT_SUFFIX}")
}

/// The split an experiment's name says it was evaluated on.
pub fn split_of(experiment: &str) -> Split {
    if experiment.ends_with(HOLDOUT_SUFFIX) {
        Split::Holdout
    } else {
        Split::Dev
    }
}

/// Where a run stands, as its `state` fact says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Still running: nothing to conclude yet.
    Running,
    /// Finished normally: its metrics may be compared.
    Finished,
    /// Ended abnormally; `exit_reason` says why.
    Failed,
    /// Missing or unreadable: treated like a run still in progress.
    Unknown,
}

/// One run as its run-status observation and its metric observations describe it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The experiment.
    pub experiment: String,
    /// The run's revision, `run:<code>+<config>+<dataset>`.
    pub revision: Revision,
    /// `state`.
    pub state: RunState,
    /// `exit_reason`, when recorded.
    pub exit_reason: Option<ExitReason>,
    /// `split`.
    pub split: Fact<Split>,
    /// `dataset`: the dataset fingerprint.
    pub dataset: Fact<String>,
    /// `eval_window`: the evaluation window, e.g. `2026-10-01..2026-10-31`.
    pub eval_window: Fact<String>,
    /// `budget`: the training budget, e.g. `steps=20000`.
    pub budget: Fact<String>,
    /// `cost`: what the run cost, in the contract's cost unit.
    pub cost: Fact<f64>,
    /// `wall_time_secs`: how long it ran.
    pub wall_time_secs: Fact<f64>,
    /// `attempt`: which attempt at this revision (1 when missing or unreadable).
    pub attempt: u32,
    /// The primary metric's `last_value` at this revision.
    pub primary: Fact<f64>,
    /// Each secondary metric's `last_value` at this revision, in the contract's order.
    pub secondary: Vec<Fact<f64>>,
    /// The streams read, with their fingerprints, for evidence lineage.
    #[serde(skip)]
    pub inputs: Vec<Observation>,
}

impl Run {
    /// Reads `experiment`'s run from the goal: `None` when no run-status observation exists.
    /// Metrics observed for another revision than the run status's count as missing.
    pub fn read(
        state: &GoalState,
        experiment: &str,
        primary: &str,
        secondary: &[&str],
    ) -> Option<Run> {
        let status = state.observation(&run_key(experiment))?;
        let metric = |name: &str| metric_value(state, experiment, name, &status.revision);
        let mut inputs = vec![status.clone()];
        inputs.extend(
            std::iter::once(primary)
                .chain(secondary.iter().copied())
                .filter_map(|name| state.observation(&metric_key(experiment, name)))
                .filter(|o| o.revision == status.revision)
                .cloned(),
        );
        let facts = RunStatus::read(&status.facts);
        Some(Run {
            experiment: experiment.to_owned(),
            revision: status.revision.clone(),
            state: match facts.state {
                Fact::Known(metrics::RunState::Running) => RunState::Running,
                Fact::Known(metrics::RunState::Finished) => RunState::Finished,
                Fact::Known(metrics::RunState::Failed) => RunState::Failed,
                Fact::Missing | Fact::Invalid(_) => RunState::Unknown,
            },
            exit_reason: facts.exit_reason.into_known(),
            split: facts.split,
            dataset: trimmed(facts.dataset),
            eval_window: trimmed(facts.eval_window),
            budget: trimmed(facts.budget),
            cost: facts.cost,
            wall_time_secs: facts.wall_time_secs,
            attempt: facts.attempt.into_known().filter(|a| *a > 0).unwrap_or(1),
            primary: metric(primary),
            secondary: secondary.iter().map(|name| metric(name)).collect(),
            inputs,
        })
    }
}

/// Every experiment with a run-status observation in the goal, in key order.
pub fn experiments(state: &GoalState) -> Vec<String> {
    state
        .observations_with_prefix(RUN_PREFIX)
        .filter_map(|o| o.key.as_str().strip_prefix(RUN_PREFIX))
        .filter(|experiment| !experiment.is_empty())
        .map(str::to_owned)
        .collect()
}

fn metric_value(state: &GoalState, experiment: &str, name: &str, revision: &Revision) -> Fact<f64> {
    match state.observation(&metric_key(experiment, name)) {
        Some(o) if &o.revision == revision => Metric::read(&o.facts).last_value,
        _ => Fact::Missing,
    }
}

/// A text compared across runs, without surrounding whitespace; blank is missing.
fn trimmed(fact: Fact<String>) -> Fact<String> {
    match fact {
        Fact::Known(text) if text.trim().is_empty() => Fact::Missing,
        Fact::Known(text) => Fact::Known(text.trim().to_owned()),
        other => other,
    }
}

/// Parses a number fact. NaN and infinities are kept as values: a diverged metric is a fact
/// the guardrails judge, not an unreadable one.
pub fn number(text: Option<&str>) -> Fact<f64> {
    Fact::read(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_non_finite_values_and_flag_nonsense() {
        assert_eq!(number(Some(" 0.5 ")), Fact::Known(0.5));
        assert!(matches!(number(Some("NaN")), Fact::Known(v) if v.is_nan()));
        assert_eq!(number(Some("-inf")), Fact::Known(f64::NEG_INFINITY));
        assert_eq!(number(Some("")), Fact::Missing);
        assert_eq!(number(None), Fact::Missing);
        assert_eq!(number(Some("ten")), Fact::Invalid("ten".into()));
    }

    #[test]
    fn names_and_splits_follow_the_holdout_suffix() {
        assert_eq!(split_of("exp-a"), Split::Dev);
        assert_eq!(split_of(&holdout_of("exp-a")), Split::Holdout);
        assert_eq!(run_key("exp-a"), "run:exp-a");
        assert_eq!(metric_key("exp-a", "loss"), "metric:exp-a/loss");
        assert_eq!(
            trimmed(Fact::Known(" ds1 ".into())),
            Fact::Known("ds1".into())
        );
        assert_eq!(trimmed(Fact::Known("  ".into())), Fact::Missing);
    }
}
