//! The holdout evidence builder: when it refuses, what it binds to, and how a new revision
//! makes its evidence stale by the kernel's own rule.

mod common;

use common::*;
use loopx_capability_automl::{HoldoutError, HoldoutStanding, holdout_evidence, holdout_standing};
use loopx_kernel::facts::metrics::RunStatus;
use loopx_kernel::testkit::{roster, scenario};
use loopx_kernel::{
    Actor, Command, Freshness, GoalState, Observation, Outcome, PersonId, Revision, SourceId,
};

fn goal(observations: Vec<Observation>) -> GoalState {
    let owner = Actor::Person(PersonId::new("olivia").expect("person"));
    let spec = scenario::spec("automl").expect("spec");
    let mut goal = GoalState::create(&owner, roster::start(), &spec).expect("goal");
    record(&mut goal, observations);
    goal
}

fn record(goal: &mut GoalState, observations: Vec<Observation>) {
    let provider = Actor::Provider(SourceId::new("metrics").expect("source"));
    for observation in observations {
        goal.handle(
            &provider,
            roster::start(),
            &Command::RecordObservation { observation },
        )
        .expect("recorded");
    }
}

fn story(dev: &str, holdout_rev: &str, holdout: &str) -> Vec<Observation> {
    let mut all = baseline();
    all.extend(baseline_holdout());
    all.extend(finished("exp-a", R1, dev, "20"));
    all.extend(finished("exp-a@holdout", holdout_rev, holdout, "20"));
    all
}

#[test]
fn passing_holdout_is_bound_to_the_current_revision_with_lineage() {
    let goal = goal(story("0.85", R1, "0.83"));
    let evidence = holdout_evidence(&contract(), &goal, "exp-a", roster::start()).expect("built");
    assert_eq!(evidence.outcome, Outcome::Pass);
    assert_eq!(evidence.subject.as_str(), "experiment:exp-a");
    assert_eq!(evidence.revision.as_str(), R1);
    let cited: Vec<&str> = evidence
        .inputs
        .observations
        .iter()
        .map(|o| o.key.as_str())
        .collect();
    assert!(
        cited.contains(&"run:exp-a@holdout") && cited.contains(&"metric:base@holdout/accuracy")
    );
}

#[test]
fn a_worse_holdout_fails_and_a_missing_one_is_refused() {
    let worse = goal(story("0.85", R1, "0.70"));
    let evidence = holdout_evidence(&contract(), &worse, "exp-a", roster::start()).expect("built");
    assert_eq!(evidence.outcome, Outcome::Fail);
    let mut none = baseline();
    none.extend(finished("exp-a", R1, "0.85", "20"));
    let refused = holdout_evidence(&contract(), &goal(none), "exp-a", roster::start());
    assert!(matches!(refused, Err(HoldoutError::NoHoldoutRun { .. })));
    let refused = holdout_evidence(&contract(), &goal(vec![]), "exp-a", roster::start());
    assert!(matches!(refused, Err(HoldoutError::NoRun { .. })));
}

#[test]
fn a_holdout_of_another_revision_or_a_crashed_one_is_refused() {
    let other = goal(story("0.85", R2, "0.83"));
    let refused = holdout_evidence(&contract(), &other, "exp-a", roster::start());
    assert!(matches!(
        refused,
        Err(HoldoutError::RevisionMismatch { .. })
    ));
    let mut crashed = story("0.85", R1, "0.83");
    crashed.push(run("exp-a@holdout", R1).failed("crash").obs());
    let refused = holdout_evidence(&contract(), &goal(crashed), "exp-a", roster::start());
    assert!(
        matches!(&refused, Err(HoldoutError::NotConclusive { verdict }) if verdict == "infrastructure_failure"),
        "{refused:?}"
    );
}

#[test]
fn a_new_revision_makes_holdout_evidence_stale() {
    let mut goal = goal(story("0.85", R1, "0.83"));
    let evidence = holdout_evidence(&contract(), &goal, "exp-a", roster::start()).expect("built");
    let id = evidence.id.clone();
    let validator = Actor::Validator(SourceId::new("holdout-check").expect("source"));
    goal.handle(
        &validator,
        roster::start(),
        &Command::RecordEvidence { evidence },
    )
    .expect("recorded");
    let r1 = Revision::new(R1).expect("revision");
    assert_eq!(
        holdout_standing(&goal, "exp-a", &r1, roster::start()),
        HoldoutStanding::Passed(id.clone())
    );
    record(
        &mut goal,
        vec![run("exp-a", R2).with(RunStatus::state, "running").obs()],
    );
    assert!(matches!(
        goal.freshness(&id, roster::start()),
        Freshness::Superseded { .. }
    ));
    assert_eq!(
        holdout_standing(&goal, "exp-a", &r1, roster::start()),
        HoldoutStanding::Missing
    );
}
