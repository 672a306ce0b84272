//! Classifying a run against its matched baseline. Pure: two [`Run`]s and the contract in, a
//! [`Verdict`] and the guardrail readings out.
//!
//! The checks run in a fixed order, and the first that speaks decides:
//!
//! 1. the run's state: still running (or unreadable) is [`Verdict::Pending`];
//! 2. failure attribution: an abnormal end is an [`Verdict::InfrastructureFailure`], unless
//!    the run reports that training diverged (a fact about the model, so a failed guardrail);
//! 3. identity: the split, then the baseline's dataset fingerprint, evaluation window and
//!    budget must match, or the comparison is invalid ([`Verdict::InvalidComparison`]);
//! 4. guardrails: any failed guardrail blocks the run ([`Verdict::BlockedByGuardrail`]);
//! 5. completeness: a fact still unknown makes the run [`Inconclusive::MissingFacts`];
//! 6. the primary metric's gain over the baseline: a candidate, a regression, or within the
//!    minimum effect.
//!
//! Because attribution comes before any comparison, an infrastructure failure can never be
//! classified as a regression.

use serde::Serialize;

use crate::contract::{Direction, ExperimentContract, Guardrails};
use crate::facts::{ExitReason, Fact, Run, RunState, Split, split_of};

/// How one guardrail stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailStatus {
    /// Within its limit.
    Clean,
    /// Within its limit but close to it (or a secondary metric regressed within tolerance).
    Warning,
    /// Beyond its limit: the run cannot be promoted.
    Failed,
    /// The facts needed to judge it are missing or unreadable.
    Unknown,
}

/// One guardrail's reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardrailReading {
    /// `primary_finite`, `cost_cap`, `time_cap` or `secondary:<metric>`.
    pub guardrail: String,
    /// Its status.
    pub status: GuardrailStatus,
    /// What was seen, in words.
    pub detail: String,
    /// For an unknown guardrail: the fact that would decide it, e.g. `cost`,
    /// `baseline latency_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<String>,
}

/// Why a run ended abnormally without saying anything about the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", content = "text", rename_all = "snake_case")]
pub enum InfraCause {
    /// The process crashed.
    Crash,
    /// Out of memory.
    Oom,
    /// Preempted.
    Preempted,
    /// No metrics file.
    MissingMetrics,
    /// Failed for a reason nobody attributed (kept verbatim, or `unreported`).
    Unattributed(String),
}

/// Which identity fact differs between a run and its baseline (or its own name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mismatch", rename_all = "snake_case")]
pub enum Mismatch {
    /// A run's `split` fact contradicts its name.
    Split {
        /// The experiment.
        experiment: String,
        /// The split its name implies.
        expected: Split,
        /// The split it reports.
        found: Split,
    },
    /// Different dataset fingerprints.
    Dataset {
        /// The run's.
        run: String,
        /// The baseline's.
        baseline: String,
    },
    /// Different evaluation windows.
    EvalWindow {
        /// The run's.
        run: String,
        /// The baseline's.
        baseline: String,
    },
    /// Different training budgets.
    Budget {
        /// The run's.
        run: String,
        /// The baseline's.
        baseline: String,
    },
}

impl std::fmt::Display for InfraCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InfraCause::Crash => f.write_str("crash"),
            InfraCause::Oom => f.write_str("out of memory"),
            InfraCause::Preempted => f.write_str("preempted"),
            InfraCause::MissingMetrics => f.write_str("no metrics file"),
            InfraCause::Unattributed(reason) => write!(f, "unattributed ({reason})"),
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, ours, theirs) = match self {
            Mismatch::Split {
                experiment,
                expected,
                found,
            } => {
                return write!(
                    f,
                    "{experiment} reports split {} but is named for {}",
                    found.as_str(),
                    expected.as_str()
                );
            }
            Mismatch::Dataset { run, baseline } => ("dataset", run, baseline),
            Mismatch::EvalWindow { run, baseline } => ("evaluation window", run, baseline),
            Mismatch::Budget { run, baseline } => ("budget", run, baseline),
        };
        write!(f, "{what} {ours} differs from the baseline's {theirs}")
    }
}

/// Why no conclusion can be drawn.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Inconclusive {
    /// Facts the comparison needs are missing or unreadable.
    MissingFacts {
        /// Which, e.g. `cost`, `baseline accuracy`.
        facts: Vec<String>,
    },
    /// The gain is smaller than the contract's minimum effect, either way.
    WithinNoise {
        /// The gain (positive is better).
        gain: f64,
    },
}

/// The classification of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Not finished yet, or nothing to compare with yet.
    Pending {
        /// What it waits for.
        waiting_for: String,
    },
    /// The run itself: the reference others are compared with.
    Reference,
    /// The run ended for infrastructure reasons: no evidence about the model either way.
    InfrastructureFailure {
        /// Why.
        cause: InfraCause,
    },
    /// The baseline does not match the run: no comparison can be made.
    InvalidComparison {
        /// What differs.
        mismatch: Mismatch,
    },
    /// A guardrail failed.
    BlockedByGuardrail {
        /// The failed guardrails.
        failed: Vec<String>,
    },
    /// Better than the baseline by at least the minimum effect, guardrails clear.
    Candidate {
        /// The gain.
        gain: f64,
    },
    /// Worse than the baseline by at least the minimum effect, guardrails clear.
    Regressed {
        /// The gain (negative).
        gain: f64,
    },
    /// No conclusion.
    Inconclusive(Inconclusive),
}

impl Verdict {
    /// A stable snake-case name for the verdict.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pending { .. } => "pending",
            Verdict::Reference => "reference",
            Verdict::InfrastructureFailure { .. } => "infrastructure_failure",
            Verdict::InvalidComparison { .. } => "invalid_comparison",
            Verdict::BlockedByGuardrail { .. } => "blocked_by_guardrail",
            Verdict::Candidate { .. } => "candidate",
            Verdict::Regressed { .. } => "regressed",
            Verdict::Inconclusive(_) => "inconclusive",
        }
    }
}

/// A verdict with the guardrail readings behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// The verdict.
    pub verdict: Verdict,
    /// Every guardrail's reading (empty when the run never got that far).
    pub guardrails: Vec<GuardrailReading>,
}

impl Classification {
    fn bare(verdict: Verdict) -> Self {
        Classification {
            verdict,
            guardrails: Vec::new(),
        }
    }
}

/// Classifies the baseline run itself: only its own failures matter.
pub fn classify_reference(run: &Run) -> Classification {
    Classification::bare(lifecycle(run).unwrap_or(Verdict::Reference))
}

/// Classifies `run` against `baseline` (its matched counterpart on the same split).
pub fn classify(
    contract: &ExperimentContract,
    run: &Run,
    baseline: Option<&Run>,
) -> Classification {
    if let Some(verdict) = lifecycle(run) {
        return Classification::bare(verdict);
    }
    let Some(baseline) = baseline.filter(|b| b.state == RunState::Finished) else {
        return Classification::bare(Verdict::Pending {
            waiting_for: "a finished baseline run".into(),
        });
    };
    let mut missing = Vec::new();
    if let Some(mismatch) = identity(run, baseline, &mut missing) {
        return Classification::bare(Verdict::InvalidComparison { mismatch });
    }
    let guardrails = guardrails(contract, run, baseline);
    let failed: Vec<String> = guardrails
        .iter()
        .filter(|g| g.status == GuardrailStatus::Failed)
        .map(|g| g.guardrail.clone())
        .collect();
    let verdict = if failed.is_empty() {
        compare(contract, run, baseline, &guardrails, missing)
    } else {
        Verdict::BlockedByGuardrail { failed }
    };
    Classification {
        verdict,
        guardrails,
    }
}

/// Steps 1 and 2: a run that has not finished normally.
fn lifecycle(run: &Run) -> Option<Verdict> {
    if run.exit_reason == Some(ExitReason::MissingMetrics) {
        return Some(Verdict::InfrastructureFailure {
            cause: InfraCause::MissingMetrics,
        });
    }
    match run.state {
        RunState::Finished => None,
        RunState::Running => Some(Verdict::Pending {
            waiting_for: "the run to finish".into(),
        }),
        RunState::Unknown => Some(Verdict::Pending {
            waiting_for: "a readable run state".into(),
        }),
        RunState::Failed => Some(match &run.exit_reason {
            Some(ExitReason::Diverged) => Verdict::BlockedByGuardrail {
                failed: vec!["primary_finite".into()],
            },
            reason => Verdict::InfrastructureFailure {
                cause: attribute(reason.as_ref()),
            },
        }),
    }
}

/// Maps an exit reason to its infrastructure cause. An unattributed failure is treated as
/// infrastructure: without attribution, blaming the model would be unfounded.
pub fn attribute(reason: Option<&ExitReason>) -> InfraCause {
    match reason {
        Some(ExitReason::Crash) => InfraCause::Crash,
        Some(ExitReason::Oom) => InfraCause::Oom,
        Some(ExitReason::Preempted) => InfraCause::Preempted,
        Some(ExitReason::MissingMetrics) => InfraCause::MissingMetrics,
        Some(ExitReason::Other(text)) => InfraCause::Unattributed(text.clone()),
        Some(ExitReason::Diverged) | None => InfraCause::Unattributed("unreported".into()),
    }
}

/// Step 3: the first identity mismatch; facts missing on either side are collected instead.
fn identity(run: &Run, baseline: &Run, missing: &mut Vec<String>) -> Option<Mismatch> {
    for side in [run, baseline] {
        match side.split {
            Fact::Known(found) if found != split_of(&side.experiment) => {
                return Some(Mismatch::Split {
                    experiment: side.experiment.clone(),
                    expected: split_of(&side.experiment),
                    found,
                });
            }
            Fact::Known(_) => {}
            _ => missing.push(format!("split of {}", side.experiment)),
        }
    }
    let pairs = [
        ("dataset", &run.dataset, &baseline.dataset),
        ("eval_window", &run.eval_window, &baseline.eval_window),
        ("budget", &run.budget, &baseline.budget),
    ];
    for (name, ours, theirs) in pairs {
        match (ours.known(), theirs.known()) {
            (Some(a), Some(b)) if a != b => {
                let (run, baseline) = (a.clone(), b.clone());
                return Some(match name {
                    "dataset" => Mismatch::Dataset { run, baseline },
                    "eval_window" => Mismatch::EvalWindow { run, baseline },
                    _ => Mismatch::Budget { run, baseline },
                });
            }
            (Some(_), Some(_)) => {}
            (None, _) => missing.push(name.to_owned()),
            (_, None) => missing.push(format!("baseline {name}")),
        }
    }
    None
}

/// Steps 5 and 6.
fn compare(
    contract: &ExperimentContract,
    run: &Run,
    baseline: &Run,
    guardrails: &[GuardrailReading],
    mut missing: Vec<String>,
) -> Verdict {
    missing.extend(
        guardrails
            .iter()
            .filter(|g| g.status == GuardrailStatus::Unknown)
            .map(|g| g.needs.clone().unwrap_or_else(|| g.guardrail.clone())),
    );
    let reference = finite(&baseline.primary);
    if reference.is_none() {
        missing.push(format!("baseline {}", contract.primary));
    }
    let (Some(value), Some(reference), true) =
        (finite(&run.primary), reference, missing.is_empty())
    else {
        return Verdict::Inconclusive(Inconclusive::MissingFacts { facts: missing });
    };
    effect(contract.direction, contract.min_effect, value, reference)
}

/// The verdict for a gain of `value` over `reference`: at least `min_effect` either way
/// decides; a zero gain never does.
pub fn effect(direction: Direction, min_effect: f64, value: f64, reference: f64) -> Verdict {
    let gain = direction.gain(value, reference);
    if gain > 0.0 && gain >= min_effect {
        Verdict::Candidate { gain }
    } else if gain < 0.0 && -gain >= min_effect {
        Verdict::Regressed { gain }
    } else {
        Verdict::Inconclusive(Inconclusive::WithinNoise { gain })
    }
}

/// Step 4: every guardrail's reading, in a fixed order.
fn guardrails(contract: &ExperimentContract, run: &Run, baseline: &Run) -> Vec<GuardrailReading> {
    let limits = &contract.guardrails;
    let mut readings = vec![primary_finite(&contract.primary, &run.primary)];
    if let Some(cap) = limits.cost_cap {
        readings.push(cap_reading("cost_cap", "cost", &run.cost, cap, limits));
    }
    if let Some(cap) = limits.time_cap_secs {
        readings.push(cap_reading(
            "time_cap",
            "wall_time_secs",
            &run.wall_time_secs,
            cap,
            limits,
        ));
    }
    for (index, secondary) in limits.secondary.iter().enumerate() {
        let ours = run.secondary.get(index).unwrap_or(&Fact::Missing);
        let theirs = baseline.secondary.get(index).unwrap_or(&Fact::Missing);
        let (status, detail) =
            secondary_status(secondary.direction, secondary.tolerance, ours, theirs);
        let needs = (status == GuardrailStatus::Unknown).then(|| match ours.known() {
            Some(_) => format!("baseline {}", secondary.metric),
            None => secondary.metric.clone(),
        });
        readings.push(GuardrailReading {
            guardrail: format!("secondary:{}", secondary.metric),
            status,
            detail,
            needs,
        });
    }
    readings
}

fn primary_finite(name: &str, value: &Fact<f64>) -> GuardrailReading {
    let (status, detail) = match value {
        Fact::Known(v) if v.is_finite() => (GuardrailStatus::Clean, format!("{name} = {v}")),
        Fact::Known(v) => (GuardrailStatus::Failed, format!("{name} = {v}: diverged")),
        other => (
            GuardrailStatus::Unknown,
            format!("{name} {}", unknown(other)),
        ),
    };
    GuardrailReading {
        guardrail: "primary_finite".into(),
        status,
        detail,
        needs: (status == GuardrailStatus::Unknown).then(|| name.to_owned()),
    }
}

/// A cost or time cap. A missing, unreadable, negative or non-finite reading is unknown: a
/// cap is a limit on a real quantity, and nonsense cannot show it was kept.
pub fn cap_status(value: &Fact<f64>, cap: f64, warn_fraction: f64) -> GuardrailStatus {
    match value.known() {
        Some(v) if !v.is_finite() || *v < 0.0 => GuardrailStatus::Unknown,
        Some(v) if *v > cap => GuardrailStatus::Failed,
        Some(v) if *v >= cap * warn_fraction => GuardrailStatus::Warning,
        Some(_) => GuardrailStatus::Clean,
        None => GuardrailStatus::Unknown,
    }
}

fn cap_reading(
    name: &str,
    fact: &str,
    value: &Fact<f64>,
    cap: f64,
    limits: &Guardrails,
) -> GuardrailReading {
    let status = cap_status(value, cap, limits.warn_fraction);
    let detail = match value.known() {
        Some(v) => format!("{fact} {v} of {cap}"),
        None => format!("{fact} {}", unknown(value)),
    };
    GuardrailReading {
        guardrail: name.to_owned(),
        status,
        detail,
        needs: (status == GuardrailStatus::Unknown).then(|| fact.to_owned()),
    }
}

/// A secondary metric against the baseline's: a regression beyond `tolerance` fails, within
/// it warns. The run's own non-finite value fails (it diverged); a baseline without a usable
/// value leaves the guardrail unknown.
pub fn secondary_status(
    direction: Direction,
    tolerance: f64,
    ours: &Fact<f64>,
    theirs: &Fact<f64>,
) -> (GuardrailStatus, String) {
    match (ours.known(), finite(theirs)) {
        (Some(v), _) if !v.is_finite() => (GuardrailStatus::Failed, format!("{v}: diverged")),
        (Some(v), Some(reference)) => {
            let loss = -direction.gain(*v, reference);
            let status = if loss > tolerance {
                GuardrailStatus::Failed
            } else if loss > 0.0 {
                GuardrailStatus::Warning
            } else {
                GuardrailStatus::Clean
            };
            (
                status,
                format!("{v} vs baseline {reference} (tolerance {tolerance})"),
            )
        }
        (None, _) => (GuardrailStatus::Unknown, unknown(ours).to_owned()),
        (Some(_), None) => (GuardrailStatus::Unknown, "baseline value unusable".into()),
    }
}

fn finite(value: &Fact<f64>) -> Option<f64> {
    value.known().copied().filter(|v| v.is_finite())
}

fn unknown<T>(value: &Fact<T>) -> &'static str {
    match value {
        Fact::Invalid(_) => "unreadable",
        _ => "not observed at this revision",
    }
}

#[cfg(test)]
mod tests {
    use loopx_kernel::Revision;

    use super::*;

    fn contract() -> ExperimentContract {
        let guardrails = Guardrails::default().with_cost_cap(100.0).with_secondary(
            "latency_ms",
            Direction::LowerIsBetter,
            5.0,
        );
        ExperimentContract::new("accuracy", Direction::HigherIsBetter, "base")
            .with_min_effect(0.01)
            .with_guardrails(guardrails)
    }

    fn run(experiment: &str, accuracy: f64) -> Run {
        Run {
            experiment: experiment.into(),
            revision: Revision::new("run:a+b+c").expect("revision"),
            state: RunState::Finished,
            exit_reason: None,
            split: Fact::Known(Split::Dev),
            dataset: Fact::Known("ds1".into()),
            eval_window: Fact::Known("w".into()),
            budget: Fact::Known("b".into()),
            cost: Fact::Known(10.0),
            wall_time_secs: Fact::Known(60.0),
            attempt: 1,
            primary: Fact::Known(accuracy),
            secondary: vec![Fact::Known(20.0)],
            inputs: Vec::new(),
        }
    }

    fn verdict(candidate: &Run) -> Verdict {
        classify(&contract(), candidate, Some(&run("base", 0.8))).verdict
    }

    #[test]
    fn the_gain_decides_only_beyond_the_minimum_effect() {
        assert_eq!(verdict(&run("e", 0.85)).name(), "candidate");
        assert_eq!(verdict(&run("e", 0.70)).name(), "regressed");
        assert_eq!(verdict(&run("e", 0.805)).name(), "inconclusive");
        let zero = effect(Direction::HigherIsBetter, 0.0, 0.8, 0.8);
        assert_eq!(
            zero.name(),
            "inconclusive",
            "a zero gain is never a conclusion"
        );
        assert_eq!(
            effect(Direction::LowerIsBetter, 0.0, 0.7, 0.8).name(),
            "candidate"
        );
    }

    #[test]
    fn failures_are_attributed_before_any_comparison() {
        for reason in [ExitReason::Crash, ExitReason::Oom, ExitReason::Preempted] {
            let mut failed = run("e", 0.1);
            failed.state = RunState::Failed;
            failed.exit_reason = Some(reason);
            assert_eq!(verdict(&failed).name(), "infrastructure_failure");
        }
        let mut unreported = run("e", 0.1);
        unreported.state = RunState::Failed;
        assert_eq!(
            verdict(&unreported),
            Verdict::InfrastructureFailure {
                cause: InfraCause::Unattributed("unreported".into())
            }
        );
        let mut no_metrics = run("e", 0.1);
        no_metrics.exit_reason = Some(ExitReason::MissingMetrics);
        assert_eq!(verdict(&no_metrics).name(), "infrastructure_failure");
        let mut diverged = run("e", f64::NAN);
        diverged.state = RunState::Failed;
        diverged.exit_reason = Some(ExitReason::Diverged);
        assert_eq!(verdict(&diverged).name(), "blocked_by_guardrail");
    }

    #[test]
    fn identity_mismatch_comes_before_guardrails() {
        let mut other = run("e", 0.9);
        other.dataset = Fact::Known("ds2".into());
        other.cost = Fact::Known(1000.0);
        assert_eq!(verdict(&other).name(), "invalid_comparison");
        let mut labelled = run("e", 0.9);
        labelled.split = Fact::Known(Split::Holdout);
        assert!(matches!(
            verdict(&labelled),
            Verdict::InvalidComparison {
                mismatch: Mismatch::Split { .. }
            }
        ));
    }

    #[test]
    fn guardrails_fail_warn_or_stay_unknown() {
        assert_eq!(
            cap_status(&Fact::Known(101.0), 100.0, 0.9),
            GuardrailStatus::Failed
        );
        assert_eq!(
            cap_status(&Fact::Known(95.0), 100.0, 0.9),
            GuardrailStatus::Warning
        );
        assert_eq!(
            cap_status(&Fact::Known(10.0), 100.0, 0.9),
            GuardrailStatus::Clean
        );
        assert_eq!(
            cap_status(&Fact::Known(f64::NAN), 100.0, 0.9),
            GuardrailStatus::Unknown
        );
        assert_eq!(
            cap_status(&Fact::Known(-1.0), 100.0, 0.9),
            GuardrailStatus::Unknown
        );
        assert_eq!(
            cap_status(&Fact::Missing, 100.0, 0.9),
            GuardrailStatus::Unknown
        );
        let lower = Direction::LowerIsBetter;
        let status = |ours: f64, theirs: Fact<f64>| {
            secondary_status(lower, 5.0, &Fact::Known(ours), &theirs).0
        };
        assert_eq!(status(26.0, Fact::Known(20.0)), GuardrailStatus::Failed);
        assert_eq!(status(24.0, Fact::Known(20.0)), GuardrailStatus::Warning);
        assert_eq!(status(19.0, Fact::Known(20.0)), GuardrailStatus::Clean);
        assert_eq!(
            status(f64::INFINITY, Fact::Known(20.0)),
            GuardrailStatus::Failed
        );
        assert_eq!(
            status(19.0, Fact::Known(f64::NAN)),
            GuardrailStatus::Unknown
        );
    }

    #[test]
    fn a_failed_guardrail_blocks_even_a_large_gain() {
        let mut costly = run("e", 0.99);
        costly.cost = Fact::Known(500.0);
        assert_eq!(
            verdict(&costly),
            Verdict::BlockedByGuardrail {
                failed: vec!["cost_cap".into()]
            }
        );
        assert_eq!(verdict(&run("e", f64::NAN)).name(), "blocked_by_guardrail");
    }

    #[test]
    fn missing_facts_are_inconclusive_never_a_regression() {
        let mut unknown_cost = run("e", 0.1);
        unknown_cost.cost = Fact::Invalid("abc".into());
        assert_eq!(
            verdict(&unknown_cost),
            Verdict::Inconclusive(Inconclusive::MissingFacts {
                facts: vec!["cost".into()]
            })
        );
        let mut no_metric = run("e", 0.1);
        no_metric.primary = Fact::Missing;
        assert_eq!(verdict(&no_metric).name(), "inconclusive");
        let mut baseline = run("base", f64::NAN);
        baseline.primary = Fact::Known(f64::NAN);
        let judged = classify(&contract(), &run("e", 0.1), Some(&baseline)).verdict;
        assert_eq!(
            judged.name(),
            "inconclusive",
            "a broken baseline says nothing"
        );
    }

    #[test]
    fn no_finished_baseline_is_pending() {
        assert_eq!(
            classify(&contract(), &run("e", 0.9), None).verdict.name(),
            "pending"
        );
        let mut running = run("base", 0.8);
        running.state = RunState::Running;
        let judged = classify(&contract(), &run("e", 0.9), Some(&running)).verdict;
        assert_eq!(judged.name(), "pending");
    }
}
