//! Reading experiment facts out of the goal's observations. Every fact is outside input: each
//! is parsed into a typed value, and a missing or unreadable one stays visible as such
//! ([`Fact::Missing`], [`Fact::Invalid`]) instead of becoming a default or a panic.
//!
//! Two streams are read per experiment `<e>`, both about subject `experiment:<e>` at revision
//! `run:<code>+<config>+<dataset>`:
//!
//! - `run:<e>`, the run-status observation (defined by this crate, recorded by whichever
//!   provider watches the training job): facts `state`, `exit_reason`, `split`, `dataset`,
//!   `eval_window`, `budget`, `cost`, `wall_time_secs`, `attempt`.
//! - `metric:<e>/<name>`, the metrics provider's summary of one metric: fact `last_value`
//!   (the others it records are not needed here).
//!
//! The holdout evaluation of experiment `<e>` is the experiment `<e>@holdout`.

use loopx_kernel::{GoalState, Observation, Revision};
use serde::Serialize;

/// The suffix naming an experiment's holdout evaluation: `<e>@holdout`.
pub const HOLDOUT_SUFFIX: &str = "@holdout";

/// The prefix of run-status observation keys: `run:<e>`.
pub const RUN_PREFIX: &str = "run:";

/// The run-status stream of `experiment`.
pub fn run_key(experiment: &str) -> String {
    format!("{RUN_PREFIX}{experiment}")
}

/// The metrics provider's stream for `metric` of `experiment`.
pub fn metric_key(experiment: &str, metric: &str) -> String {
    format!("metric:{experiment}/{metric}")
}

/// The subject every fact about `experiment` is bound to.
pub fn subject(experiment: &str) -> String {
    format!("experiment:{experiment}")
}

/// The holdout evaluation of `experiment`.
pub fn holdout_of(experiment: &str) -> String {
    format!("{experiment}{HOLDOUT_SUFFIX}")
}

/// A fact as read from an observation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "fact", content = "value", rename_all = "snake_case")]
pub enum Fact<T> {
    /// Not recorded (or recorded for another revision of the run).
    Missing,
    /// Recorded but unreadable; the raw text, cut to 64 characters.
    Invalid(String),
    /// Read.
    Known(T),
}

impl<T> Fact<T> {
    /// The value, when known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(value) => Some(value),
            _ => None,
        }
    }
}

/// Which part of the data a run was evaluated on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// The development split: comparisons and candidates.
    Dev,
    /// The holdout split: confirmation before promotion.
    Holdout,
}

impl Split {
    /// The split an experiment's name says it was evaluated on.
    pub fn of(experiment: &str) -> Split {
        if experiment.ends_with(HOLDOUT_SUFFIX) {
            Split::Holdout
        } else {
            Split::Dev
        }
    }

    /// The split's name as the `split` fact spells it.
    pub fn name(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Holdout => "holdout",
        }
    }

    fn parse(text: &str) -> Option<Split> {
        match text {
            "dev" => Some(Split::Dev),
            "holdout" => Some(Split::Holdout),
            _ => None,
        }
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

/// Why a run ended abnormally, as its `exit_reason` fact says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", content = "text", rename_all = "snake_case")]
pub enum ExitReason {
    /// The process crashed.
    Crash,
    /// Out of memory.
    Oom,
    /// The scheduler took the machine back.
    Preempted,
    /// The run ended without writing its metrics file.
    MissingMetrics,
    /// Training diverged (a non-finite loss): a fact about the model, not the infrastructure.
    Diverged,
    /// Anything else, kept verbatim (cut to 64 characters).
    Other(String),
}

impl ExitReason {
    fn parse(text: &str) -> ExitReason {
        match text {
            "crash" => ExitReason::Crash,
            "oom" => ExitReason::Oom,
            "preempted" => ExitReason::Preempted,
            "missing_metrics" => ExitReason::MissingMetrics,
            "diverged" => ExitReason::Diverged,
            other => ExitReason::Other(cut(other)),
        }
    }
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
        Some(Run {
            experiment: experiment.to_owned(),
            revision: status.revision.clone(),
            state: run_state(status.fact("state")),
            exit_reason: status.fact("exit_reason").map(ExitReason::parse),
            split: parse(status.fact("split"), Split::parse),
            dataset: text(status.fact("dataset")),
            eval_window: text(status.fact("eval_window")),
            budget: text(status.fact("budget")),
            cost: number(status.fact("cost")),
            wall_time_secs: number(status.fact("wall_time_secs")),
            attempt: status
                .fact("attempt")
                .and_then(|a| a.trim().parse::<u32>().ok())
                .filter(|a| *a > 0)
                .unwrap_or(1),
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
        Some(o) if &o.revision == revision => number(o.fact("last_value")),
        _ => Fact::Missing,
    }
}

fn run_state(text: Option<&str>) -> RunState {
    match text {
        Some("running") => RunState::Running,
        Some("finished") => RunState::Finished,
        Some("failed") => RunState::Failed,
        _ => RunState::Unknown,
    }
}

/// Parses a number fact. NaN and infinities are kept as values: a diverged metric is a fact
/// the guardrails judge, not an unreadable one.
pub fn number(text: Option<&str>) -> Fact<f64> {
    parse(text, |t| t.parse::<f64>().ok())
}

fn text(text: Option<&str>) -> Fact<String> {
    parse(text, |t| Some(t.to_owned()))
}

fn parse<T>(text: Option<&str>, read: impl Fn(&str) -> Option<T>) -> Fact<T> {
    match text.map(str::trim) {
        None | Some("") => Fact::Missing,
        Some(t) => read(t).map_or_else(|| Fact::Invalid(cut(t)), Fact::Known),
    }
}

fn cut(text: &str) -> String {
    text.chars().take(64).collect()
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
        assert_eq!(Split::of("exp-a"), Split::Dev);
        assert_eq!(Split::of(&holdout_of("exp-a")), Split::Holdout);
        assert_eq!(run_key("exp-a"), "run:exp-a");
        assert_eq!(metric_key("exp-a", "loss"), "metric:exp-a/loss");
        assert_eq!(ExitReason::parse("oom"), ExitReason::Oom);
        assert_eq!(
            ExitReason::parse("segfault"),
            ExitReason::Other("segfault".into())
        );
        assert_eq!(run_state(Some("paused")), RunState::Unknown);
    }
}
