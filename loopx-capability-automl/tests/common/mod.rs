//! Shared fixtures: the contract, run and metric observations, and a runner for scenario
//! tables whose steps may include a validator recording holdout evidence.

#![allow(dead_code)] // each test binary uses its own share of the fixtures

use std::collections::BTreeMap;

use loopx_capability_automl::{
    AutoMl, Direction, ExperimentContract, Guardrails, holdout_evidence,
};
use loopx_kernel::facts::metrics::{self, Metric, RunStatus};
use loopx_kernel::testkit::scenario::{self, Scenario, ScenarioStep, Transcript};
use loopx_kernel::{Observation, SourceId};

/// The baseline's dev revision and the candidate's two revisions (a config change between).
pub const BASE: &str = "run:base000+cfg0+ds1";
pub const R1: &str = "run:abc1234+cfg1+ds1";
pub const R2: &str = "run:abc1234+cfg2+ds1";

/// One step of a table: the testkit's step.
pub type Step = ScenarioStep;

/// The holdout evidence for `experiment` under the table's [`contract`], built by the crate from
/// the goal as it stands when the step runs and recorded by the scenario's provider.
pub fn record_holdout(experiment: &'static str) -> Step {
    let contract = contract();
    ScenarioStep::derived(move |state, now| {
        let evidence = holdout_evidence(&contract, state, experiment, now)
            .expect("the holdout evaluation is conclusive");
        Some(ScenarioStep::Evidence(evidence))
    })
}

/// accuracy (higher is better, min effect 0.01) against `base`; cost cap 100, time cap 7200 s,
/// `latency_ms` (lower is better) may regress by 5.
pub fn contract() -> ExperimentContract {
    let guardrails = Guardrails::default()
        .with_cost_cap(100.0)
        .with_time_cap_secs(7200.0)
        .with_secondary("latency_ms", Direction::LowerIsBetter, 5.0);
    ExperimentContract::new("accuracy", Direction::HigherIsBetter, "base")
        .with_min_effect(0.01)
        .with_guardrails(guardrails)
}

pub fn capability(contract: ExperimentContract) -> AutoMl {
    AutoMl::new(SourceId::new("automl").expect("valid source"), contract).expect("valid contract")
}

/// A run-status observation under construction: a finished run with every fact present, as
/// texts (so a table may record any text, nonsense included), named by the kernel's schema.
#[derive(Debug, Clone)]
pub struct RunFacts {
    experiment: String,
    revision: String,
    facts: BTreeMap<String, String>,
}

pub fn run(experiment: &str, revision: &str) -> RunFacts {
    let split = if experiment.ends_with("@holdout") {
        "holdout"
    } else {
        "dev"
    };
    let facts = [
        (RunStatus::state, "finished"),
        (RunStatus::split, split),
        (RunStatus::dataset, "ds1"),
        (RunStatus::eval_window, "2026-10"),
        (RunStatus::budget, "steps=1000"),
        (RunStatus::cost, "10"),
        (RunStatus::wall_time_secs, "3600"),
    ];
    RunFacts {
        experiment: experiment.into(),
        revision: revision.into(),
        facts: facts
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
    }
}

impl RunFacts {
    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.facts.insert(name.into(), value.into());
        self
    }

    pub fn without(mut self, name: &str) -> Self {
        self.facts.remove(name);
        self
    }

    pub fn failed(self, reason: &str) -> Self {
        self.with(RunStatus::state, "failed")
            .with(RunStatus::exit_reason, reason)
    }

    pub fn obs(&self) -> Observation {
        let facts: Vec<(&str, &str)> = self
            .facts
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        scenario::observation(
            &RunStatus::key(&self.experiment),
            &metrics::subject(&self.experiment),
            &self.revision,
            &facts,
        )
        .expect("valid run observation")
    }
}

/// The metrics provider's summary of one metric, as the testkit builds it (the value as
/// written, so a table may record text no number reads back as).
pub fn metric(experiment: &str, name: &str, revision: &str, value: &str) -> Observation {
    scenario::observation(
        &Metric::key(experiment, name),
        &metrics::subject(experiment),
        revision,
        &[
            (Metric::name, name),
            (Metric::last_value, value),
            (Metric::points, "10"),
        ],
    )
    .expect("valid metric observation")
}

/// A finished run with its accuracy and latency.
pub fn finished(
    experiment: &str,
    revision: &str,
    accuracy: &str,
    latency: &str,
) -> Vec<Observation> {
    vec![
        run(experiment, revision).obs(),
        metric(experiment, "accuracy", revision, accuracy),
        metric(experiment, "latency_ms", revision, latency),
    ]
}

/// The baseline on the dev split: accuracy 0.80, latency 20.
pub fn baseline() -> Vec<Observation> {
    finished("base", BASE, "0.80", "20")
}

/// The baseline's holdout evaluation: accuracy 0.78, latency 20.
pub fn baseline_holdout() -> Vec<Observation> {
    finished("base@holdout", BASE, "0.78", "20")
}

pub fn observe(observations: Vec<Observation>) -> Step {
    ScenarioStep::Observe(observations)
}

/// Runs a table's steps and returns the transcript.
pub fn play(capability: &AutoMl, steps: Vec<Step>) -> Transcript {
    let spec = scenario::spec("automl").expect("valid spec");
    let mut scenario = Scenario::new(capability, &spec).expect("goal created");
    scenario.run(steps)
}
