//! Experiments: the metrics provider's summary of each metric of a run, and the run-status
//! observation recorded by whichever provider watches the training job.
//!
//! Both are about subject `experiment:<e>` at revision `run:<code>+<config>+<dataset>`. The key
//! builders take the experiment and metric as written in keys: a writer encodes external text
//! with [`id_component`](crate::ids::id_component) first, a reader passes what it read from a key.

use serde::{Deserialize, Serialize};

use crate::facts::{FactValue, Split, echo};

/// The prefix of an experiment subject: `experiment:<e>`.
pub const SUBJECT_PREFIX: &str = "experiment:";

/// The subject every fact about `experiment` is bound to: `experiment:<e>`.
pub fn subject(experiment: &str) -> String {
    format!("{SUBJECT_PREFIX}{experiment}")
}

fact_schema! {
    /// One metric of one run, on stream `metric:<e>/<name>`.
    pub struct Metric, read as MetricRead, kind "metric", prefix "metric:" {
        /// The metric's name, e.g. `loss`.
        req name: String,
        /// How many points were recorded.
        req points: u64,
        /// The step of the last point (the highest step).
        req last_step: u64,
        /// The value of the last point (NaN and infinities are kept: a diverged loss is a fact).
        req last_value: f64,
        /// The smallest value.
        req min: f64,
        /// The largest value.
        req max: f64,
        /// The commit the training code ran at.
        req code_sha: String,
        /// A hash of the run's configuration.
        req config_hash: String,
        /// The dataset's fingerprint.
        req dataset: String,
    }
}

impl Metric {
    /// The stream `metric:<e>/<name>`.
    pub fn key(experiment: &str, metric: &str) -> String {
        format!("{}{experiment}/{metric}", Self::PREFIX)
    }
}

fact_enum! {
    /// Where a run stands.
    pub enum RunState {
        /// Still running.
        Running = "running",
        /// Finished normally.
        Finished = "finished",
        /// Ended abnormally; the exit reason says why.
        Failed = "failed",
    }
}

/// Why a run ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Anything else, kept verbatim (read back cut to 64 characters).
    Other(String),
}

impl FactValue for ExitReason {
    fn encode(&self) -> String {
        match self {
            ExitReason::Crash => "crash",
            ExitReason::Oom => "oom",
            ExitReason::Preempted => "preempted",
            ExitReason::MissingMetrics => "missing_metrics",
            ExitReason::Diverged => "diverged",
            ExitReason::Other(text) => text,
        }
        .to_owned()
    }

    fn decode(text: &str) -> Option<Self> {
        Some(match text {
            "crash" => ExitReason::Crash,
            "oom" => ExitReason::Oom,
            "preempted" => ExitReason::Preempted,
            "missing_metrics" => ExitReason::MissingMetrics,
            "diverged" => ExitReason::Diverged,
            other => ExitReason::Other(echo(other)),
        })
    }
}

fact_schema! {
    /// A run's status, on stream `run:<e>`.
    pub struct RunStatus, read as RunStatusRead, kind "run_status", prefix "run:" {
        /// Where it stands.
        req state: RunState,
        /// Why it ended abnormally.
        opt exit_reason: ExitReason,
        /// The split it was evaluated on.
        req split: Split,
        /// The dataset fingerprint.
        req dataset: String,
        /// The evaluation window, e.g. `2026-10-01..2026-10-31`.
        req eval_window: String,
        /// The training budget, e.g. `steps=20000`.
        req budget: String,
        /// What it cost, in the experiment's cost unit.
        req cost: f64,
        /// How long it ran, in seconds.
        req wall_time_secs: f64,
        /// Which attempt at this revision, from 1.
        req attempt: u32,
    }
}

impl RunStatus {
    /// The stream `run:<e>`.
    pub fn key(experiment: &str) -> String {
        format!("{}{experiment}", Self::PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, FactSchema};

    #[test]
    fn a_metric_round_trips_non_finite_values() {
        let metric = Metric {
            name: "loss".into(),
            points: 3,
            last_step: 30,
            last_value: f64::NAN,
            min: 0.5,
            max: f64::INFINITY,
            code_sha: "abc".into(),
            config_hash: "cfg".into(),
            dataset: "ds".into(),
        };
        let facts = metric.to_facts();
        assert_eq!(facts.get("last_value").map(String::as_str), Some("NaN"));
        let read = Metric::read(&facts);
        assert!(matches!(read.last_value, Fact::Known(v) if v.is_nan()));
        assert_eq!(read.max, Fact::Known(f64::INFINITY));
        assert_eq!(read.points, Fact::Known(3));
        assert_eq!(Metric::key("exp-a", "loss"), "metric:exp-a/loss");
        assert_eq!(subject("exp-a"), "experiment:exp-a");
    }

    #[test]
    fn a_run_status_round_trips_and_keeps_unknown_reasons() {
        let status = RunStatus {
            state: RunState::Failed,
            exit_reason: Some(ExitReason::Other("segfault".into())),
            split: Split::Holdout,
            dataset: "ds1".into(),
            eval_window: "2026-10".into(),
            budget: "steps=1000".into(),
            cost: 10.0,
            wall_time_secs: 3600.0,
            attempt: 2,
        };
        let facts = status.to_facts();
        assert_eq!(facts.get("cost").map(String::as_str), Some("10"));
        let read = RunStatus::read(&facts);
        assert_eq!(read.state, Fact::Known(RunState::Failed));
        assert_eq!(
            read.exit_reason,
            Fact::Known(ExitReason::Other("segfault".into()))
        );
        assert_eq!(read.split, Fact::Known(Split::Holdout));
        assert_eq!(read.attempt, Fact::Known(2));
        assert_eq!(RunStatus::key("exp-a@holdout"), "run:exp-a@holdout");
        assert_eq!(
            Fact::<u32>::read(Some(" 3 ")),
            Fact::Known(3),
            "numbers are trimmed"
        );
        assert_eq!(
            Fact::<Split>::read(Some(" dev")),
            Fact::Invalid(" dev".into()),
            "words are exact"
        );
    }
}
