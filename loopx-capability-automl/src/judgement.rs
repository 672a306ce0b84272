//! Judging every run the goal has observed: which role it plays, its matched baseline, and its
//! classification. Derived afresh from the goal state every time, never remembered.

use loopx_kernel::{GoalState, Observation};
use serde::Serialize;

use crate::classify::{Classification, classify, classify_reference};
use crate::contract::ExperimentContract;
use crate::facts::{HOLDOUT_SUFFIX, Run, Split, experiments, holdout_of, split_of};

/// The part a run plays under the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The baseline, or the baseline's holdout evaluation.
    Reference,
    /// An experiment compared with the baseline on the dev split.
    Experiment,
    /// An experiment's holdout evaluation, compared with the baseline's.
    Holdout,
}

/// One run, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// Its role.
    pub role: Role,
    /// The run as read.
    pub run: Run,
    /// Its classification.
    pub classification: Classification,
    /// The matched baseline run, when one was observed.
    #[serde(skip)]
    pub baseline: Option<Run>,
}

impl Judgement {
    /// The experiment a holdout evaluation belongs to (the experiment itself otherwise).
    pub fn experiment(&self) -> &str {
        self.run
            .experiment
            .strip_suffix(HOLDOUT_SUFFIX)
            .unwrap_or(&self.run.experiment)
    }

    /// Every observation the classification read, the baseline's included.
    pub fn inputs(&self) -> impl Iterator<Item = &Observation> {
        self.run
            .inputs
            .iter()
            .chain(self.baseline.iter().flat_map(|b| b.inputs.iter()))
    }
}

/// Judges every run the goal has observed, in key order.
pub fn assess(contract: &ExperimentContract, state: &GoalState) -> Vec<Judgement> {
    experiments(state)
        .iter()
        .filter_map(|experiment| assess_run(contract, state, experiment))
        .collect()
}

/// Judges one run; `None` when it has no run-status observation.
pub fn assess_run(
    contract: &ExperimentContract,
    state: &GoalState,
    experiment: &str,
) -> Option<Judgement> {
    let secondary: Vec<&str> = contract
        .guardrails
        .secondary
        .iter()
        .map(|s| s.metric.as_str())
        .collect();
    let read = |name: &str| Run::read(state, name, &contract.primary, &secondary);
    let run = read(experiment)?;
    let split = split_of(experiment);
    let baseline_name = match split {
        Split::Dev => contract.baseline.clone(),
        Split::Holdout => holdout_of(&contract.baseline),
    };
    if experiment == baseline_name {
        let classification = classify_reference(&run);
        return Some(Judgement {
            role: Role::Reference,
            run,
            classification,
            baseline: None,
        });
    }
    let baseline = read(&baseline_name);
    let classification = classify(contract, &run, baseline.as_ref());
    Some(Judgement {
        role: match split {
            Split::Dev => Role::Experiment,
            Split::Holdout => Role::Holdout,
        },
        run,
        classification,
        baseline,
    })
}
