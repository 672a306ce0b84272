//! Properties over arbitrary observation sequences, nonsense facts included.
//!
//! - `never_panics_and_keeps_invariants`: whatever is observed, judging never panics and the
//!   kernel's invariants hold after every step.
//! - `promotion_gate_needs_passing_holdout_at_current_revision`: every promotion gate the
//!   kernel accepts was proposed while fresh passing holdout evidence existed for that
//!   experiment at its current revision.
//! - `infrastructure_failure_never_regresses`: no regression obligation is accepted for a run
//!   whose current classification is an infrastructure failure, and the classifier never
//!   calls a failed run a regression or a candidate.
//! - `judging_twice_changes_nothing`: right after a judgement, another one proposes nothing
//!   the kernel accepts (proposals converge).

mod common;

use common::*;
use loopx_capability_automl::facts::{ExitReason, Run, RunState};
use loopx_capability_automl::{
    AutoMl, HoldoutStanding, Verdict, assess_run, classify, holdout_evidence, holdout_standing,
    scoped_id,
};
use loopx_kernel::facts::metrics::{self, Metric, RunStatus};
use loopx_kernel::testkit::scenario::{self, Scenario, ScenarioStep, StepRecord};
use loopx_kernel::{
    Actor, Command, Duration, GoalState, Observation, PersonId, Revision, Subject, Timestamp,
};
use proptest::prelude::*;

const EXPERIMENTS: [&str; 5] = ["base", "exp-a", "exp-b", "base@holdout", "exp-a@holdout"];
const CANDIDATES: [&str; 2] = ["exp-a", "exp-b"];
const REVISIONS: [&str; 3] = [BASE, R1, R2];
const RUN_FACTS: [&str; 10] = [
    RunStatus::state,
    RunStatus::exit_reason,
    RunStatus::split,
    RunStatus::dataset,
    RunStatus::eval_window,
    RunStatus::budget,
    RunStatus::cost,
    RunStatus::wall_time_secs,
    RunStatus::attempt,
    "junk",
];
const METRICS: [&str; 3] = ["accuracy", "latency_ms", "junk"];
const VALUES: [&str; 27] = [
    "finished",
    "running",
    "failed",
    "crash",
    "oom",
    "preempted",
    "missing_metrics",
    "diverged",
    "dev",
    "holdout",
    "ds1",
    "ds2",
    "2026-10",
    "steps=1000",
    "0.8",
    "0.85",
    "0.9",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "1e308",
    "",
    "abc",
    "3",
    "0",
    "9000",
];

/// An arbitrary observation: run stream or metric, experiment, metric, revision, and facts
/// as (name, value) indexes.
type Noise = (bool, usize, usize, usize, Vec<(usize, usize)>);

#[derive(Debug, Clone)]
enum Action {
    /// Arbitrary observations, nonsense included.
    Noise(Vec<Noise>),
    /// A well-formed finished run of an experiment (and the matching baseline).
    Sane {
        experiment: usize,
        revision: usize,
        accuracy: u8,
    },
    /// A candidate and its holdout evaluation at one revision, with both baselines.
    Story {
        revision: usize,
        dev: u8,
        holdout: u8,
    },
    Holdout,
    Answer(bool),
    Advance(u16),
    Judge,
}

fn action() -> impl Strategy<Value = Action> {
    let fact = (0..RUN_FACTS.len().max(METRICS.len()), 0..VALUES.len());
    let noise = (
        any::<bool>(),
        0..EXPERIMENTS.len(),
        0..METRICS.len(),
        0..REVISIONS.len(),
        prop::collection::vec(fact, 0..6),
    );
    prop_oneof![
        3 => prop::collection::vec(noise, 1..4).prop_map(Action::Noise),
        3 => (0..EXPERIMENTS.len(), 1..REVISIONS.len(), 60u8..100).prop_map(|(experiment, revision, accuracy)| Action::Sane { experiment, revision, accuracy }),
        2 => (1..REVISIONS.len(), 60u8..100, 60u8..100).prop_map(|(revision, dev, holdout)| Action::Story { revision, dev, holdout }),
        2 => Just(Action::Holdout),
        1 => any::<bool>().prop_map(Action::Answer),
        1 => (1u16..600).prop_map(Action::Advance),
        1 => Just(Action::Judge),
    ]
}

fn noise(
    key_is_run: bool,
    experiment: usize,
    metric: usize,
    revision: usize,
    facts: &[(usize, usize)],
) -> Observation {
    let experiment = EXPERIMENTS[experiment];
    let names: &[&str] = if key_is_run {
        &RUN_FACTS
    } else {
        &[Metric::last_value, Metric::name, Metric::points]
    };
    let facts: Vec<(&str, &str)> = facts
        .iter()
        .map(|(n, v)| (names[n % names.len()], VALUES[*v]))
        .collect();
    let key = if key_is_run {
        RunStatus::key(experiment)
    } else {
        Metric::key(experiment, METRICS[metric])
    };
    scenario::observation(
        &key,
        &metrics::subject(experiment),
        REVISIONS[revision],
        &facts,
    )
    .expect("valid observation")
}

fn sane(experiment: usize, revision: usize, accuracy: u8) -> Vec<Observation> {
    let name = EXPERIMENTS[experiment];
    let value = format!("0.{accuracy}");
    let mut all = if name.ends_with("@holdout") {
        baseline_holdout()
    } else {
        baseline()
    };
    all.extend(finished(name, REVISIONS[revision], &value, "20"));
    all
}

/// Turns one action into the scenario step it stands for (none when it cannot apply).
fn step_for(
    action: &Action,
    capability: &AutoMl,
    state: &GoalState,
    now: Timestamp,
) -> Option<ScenarioStep> {
    Some(match action {
        Action::Noise(items) => ScenarioStep::Observe(
            items
                .iter()
                .map(|(run, e, m, r, f)| noise(*run, *e, *m, *r, f))
                .collect(),
        ),
        Action::Sane {
            experiment,
            revision,
            accuracy,
        } => ScenarioStep::Observe(sane(*experiment, *revision, *accuracy)),
        Action::Story {
            revision,
            dev,
            holdout,
        } => {
            let mut all = sane(1, *revision, *dev);
            all.extend(sane(4, *revision, *holdout));
            ScenarioStep::Observe(all)
        }
        Action::Holdout => ScenarioStep::Evidence(
            CANDIDATES
                .iter()
                .find_map(|e| holdout_evidence(capability.contract(), state, e, now).ok())?,
        ),
        Action::Answer(yes) => ScenarioStep::owner_answers_pending(0, *yes),
        Action::Advance(minutes) => ScenarioStep::Advance(Duration::minutes(i64::from(*minutes))),
        Action::Judge => ScenarioStep::Judge,
    })
}

fn accepted(record: &StepRecord) -> impl Iterator<Item = &Command> {
    record.accepted().map(|p| &p.detail)
}

/// The experiment's current revision: its run-status observation's, when that is also the
/// subject's head.
fn current_revision(state: &GoalState, experiment: &str) -> Option<Revision> {
    let run = assess_run(&contract(), state, experiment)?.run;
    let head = state
        .subjects
        .get(&Subject::new(format!("experiment:{experiment}")).ok()?)?;
    (head.revision == run.revision).then_some(run.revision)
}

fn check_promotions(
    record: &StepRecord,
    state: &GoalState,
    now: Timestamp,
) -> Result<(), TestCaseError> {
    for command in accepted(record) {
        if let Command::OpenGate { gate } = command {
            let backed = CANDIDATES.iter().any(|e| {
                current_revision(state, e).is_some_and(|rev| {
                    gate.id.as_str() == scoped_id("promote", e, &[rev.as_str()])
                        && matches!(
                            holdout_standing(state, e, &rev, now),
                            HoldoutStanding::Passed(_)
                        )
                })
            });
            prop_assert!(
                backed,
                "gate {} without passing holdout at the current revision",
                gate.id
            );
        }
    }
    Ok(())
}

fn check_no_infra_regression(record: &StepRecord, state: &GoalState) -> Result<(), TestCaseError> {
    for command in accepted(record) {
        if let Command::RaiseObligation { id, .. } = command
            && id.as_str().starts_with("regressed:")
        {
            let judged = CANDIDATES
                .iter()
                .filter_map(|e| assess_run(&contract(), state, e))
                .find(|j| {
                    id.as_str()
                        == scoped_id("regressed", &j.run.experiment, &[j.run.revision.as_str()])
                });
            let verdict = judged.map(|j| j.classification.verdict);
            prop_assert!(
                matches!(verdict, Some(Verdict::Regressed { .. })),
                "{id} raised for {verdict:?}"
            );
        }
    }
    Ok(())
}

fn check(record: &StepRecord, state: &GoalState, now: Timestamp) -> Result<(), TestCaseError> {
    // never_panics_and_keeps_invariants, and proposes nothing the kernel refuses
    record.check_legal()?;
    // promotion_gate_needs_passing_holdout_at_current_revision
    check_promotions(record, state, now)?;
    // infrastructure_failure_never_regresses
    check_no_infra_regression(record, state)
}

proptest! {
    #![proptest_config(loopx_kernel::testkit::config(256))]

    #[test]
    fn scenario_properties(actions in prop::collection::vec(action(), 1..16)) {
        let capability = capability(contract());
        let spec = scenario::spec("automl").expect("spec");
        // The capability judges after every commit, as the engine does on its next pass.
        let mut scenario = Scenario::new(&capability, &spec).expect("goal").judge_after_settings(true);
        for action in &actions {
            let Some(step) = step_for(action, &capability, scenario.state(), scenario.now()) else {
                continue;
            };
            let record = scenario.step(step);
            check(&record, scenario.state(), scenario.now())?;
            // judging_twice_changes_nothing
            let again = scenario.step(ScenarioStep::Judge);
            prop_assert_eq!(accepted(&again).count(), 0, "a second judgement changed the goal: {:?}", again.proposals);
        }
    }

    #[test]
    fn infrastructure_failure_never_regresses(
        state in prop_oneof![Just("failed"), Just("finished"), Just("running"), Just("??")],
        exit in prop::sample::select(VALUES.to_vec()),
        accuracy in prop::num::f64::ANY,
        latency in prop::num::f64::ANY,
        cost in prop::sample::select(VALUES.to_vec()),
    ) {
        let mut facts = run("exp-a", R1).with(RunStatus::state, state).with(RunStatus::exit_reason, exit).with(RunStatus::cost, cost);
        if exit.is_empty() { facts = facts.without(RunStatus::exit_reason); }
        let mut goal = GoalState::create(
            &Actor::Person(PersonId::new("olivia").expect("person")),
            loopx_kernel::testkit::roster::start(),
            &scenario::spec("automl").expect("spec"),
        ).expect("goal");
        let provider = Actor::Provider(loopx_kernel::SourceId::new("metrics").expect("source"));
        let mut all = baseline();
        all.push(facts.obs());
        all.push(metric("exp-a", "accuracy", R1, &accuracy.to_string()));
        all.push(metric("exp-a", "latency_ms", R1, &latency.to_string()));
        for observation in all {
            goal.handle(&provider, loopx_kernel::testkit::roster::start(), &Command::RecordObservation { observation }).expect("recorded");
        }
        let judged = assess_run(&contract(), &goal, "exp-a").expect("judged");
        let run: &Run = &judged.run;
        let failed = run.state == RunState::Failed || matches!(run.exit_reason, Some(ExitReason::MissingMetrics));
        if failed {
            let concluded = matches!(judged.classification.verdict, Verdict::Regressed { .. } | Verdict::Candidate { .. });
            prop_assert!(!concluded, "a failed run was judged {:?}", judged.classification.verdict);
        }
        let again = classify(&contract(), run, judged.baseline.as_ref());
        prop_assert_eq!(again, judged.classification);
    }
}
