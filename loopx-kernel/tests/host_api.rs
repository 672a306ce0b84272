//! The host API as a host writes it: the goal handle, the builders, seams from closures, and
//! the typed errors a host matches on. Over the memory store and a manual clock.

use std::sync::Arc;

use loopx_kernel::engine::EngineError;
use loopx_kernel::prelude::*;
use loopx_kernel::{Continuation, SubmitError, Transition};
use loopx_store::MemoryStore;

fn start() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a valid instant")
}

fn spec(goal: &str) -> GoalSpec {
    GoalSpec::builder(goal, "add --format json to the CLI", "maintainer")
        .agent("agent-a")
        .budget(Limits::turns(5))
        .declared_identity()
        .build()
        .expect("valid ids")
}

fn edit() -> Command {
    let todo = NewTodo::advance(
        "edit".parse().expect("a valid id"),
        "change the output layer",
    );
    Command::AddTodo { todo }
}

#[tokio::test]
async fn a_retried_write_through_the_handle_replays_its_first_receipt() {
    let store = MemoryStore::new();
    let spec = spec("json-output");
    let goal = store.goal(&spec.id);
    let created = goal.create(&spec, start()).await.expect("created");
    assert!(!created.replayed);
    let again = goal.create(&spec, start()).await.expect("replayed");
    assert!(
        again.replayed,
        "the same create is a retry, not a second goal"
    );
    assert_eq!(again.receipt, created.receipt);

    let owner = spec.owner_actor();
    let first = goal.submit(&owner, start(), &edit()).await.expect("added");
    let retry = goal
        .submit(&owner, start(), &edit())
        .await
        .expect("replayed");
    assert!(retry.replayed);
    assert_eq!(retry.receipt, first.receipt);
    assert_eq!(goal.state().await.expect("a goal").revision, 2);

    // Another actor's identical command is another operation: the kernel judges it anew.
    let agent = Actor::Agent("agent-a".parse().expect("a valid id"));
    let refused = goal.submit(&agent, start(), &edit()).await;
    assert!(
        matches!(&refused, Err(SubmitError::Refused(r)) if r.code() == "duplicate_id"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_handle_refuses_a_spec_of_another_goal_and_reads_only_existing_goals() {
    let store = MemoryStore::new();
    let handle = store.goal(&"one".parse().expect("a valid id"));
    let mismatch = handle.create(&spec("other"), start()).await;
    assert!(
        matches!(&mismatch, Err(SubmitError::GoalMismatch { created, .. }) if created.as_str() == "other"),
        "{mismatch:?}"
    );
    assert!(matches!(
        handle.state().await,
        Err(loopx_kernel::seams::StoreError::UnknownGoal { .. })
    ));
    let invalid = handle.decide("not an id", start()).await;
    assert!(matches!(
        invalid,
        Err(loopx_kernel::HandleError::InvalidId(_))
    ));
}

#[test]
fn the_spec_builder_reports_the_first_invalid_id() {
    let error = GoalSpec::builder("g", "x", "maintainer")
        .agent("agent a")
        .agent("also bad")
        .build()
        .expect_err("a space is no id character");
    assert_eq!(error.kind, "agent id");
    assert_eq!(error.shown, "agent a");
    let spec = GoalSpec::builder("g", "x", "maintainer")
        .agent("agent-a")
        .build()
        .expect("valid");
    assert_eq!(
        spec.budget,
        Limits::GOAL_DEFAULT,
        "a finite budget unless asked otherwise"
    );
    assert_eq!(spec.agents.len(), 1);
}

/// A capability that proposes creating another goal: a bug in the capability, which the
/// engine names as such instead of calling the goal contended.
struct CreatesAnotherGoal(SourceId);

impl Capability for CreatesAnotherGoal {
    fn source(&self) -> &SourceId {
        &self.0
    }

    fn judge(&self, _: &GoalState, _: &AgentId, _: Timestamp) -> Vec<Proposal> {
        let spec = spec("elsewhere");
        vec![Proposal::new(
            Command::CreateGoal { spec },
            "a confused capability",
        )]
    }
}

#[tokio::test]
async fn a_capability_creating_another_goal_is_a_goal_mismatch_not_contention() {
    let store = Arc::new(MemoryStore::new());
    let spec = spec("json-output");
    store
        .goal(&spec.id)
        .create(&spec, start())
        .await
        .expect("created");
    let clock = Arc::new(ManualClock::new(start()));
    let agent = executor_fn(|turn| async move { Ok(TurnReport::complete(turn.title)) });
    let check = validator_fn("tests", |_, _| async { Ok(Validation::passed("ok")) }).expect("id");
    let engine = Engine::builder("agent-a".parse().expect("id"), store, clock, agent, check)
        .capability(Arc::new(CreatesAnotherGoal(
            "confused".parse().expect("id"),
        )))
        .build();
    let error = engine
        .step(&spec.id)
        .await
        .expect_err("the proposal cannot be submitted");
    assert!(
        matches!(&error, EngineError::GoalMismatch { created, .. } if created.as_str() == "elsewhere"),
        "{error:?}"
    );
}

#[tokio::test]
async fn closures_run_as_the_turn_and_the_check_and_the_engine_names_the_validator() {
    let store = Arc::new(MemoryStore::new());
    let spec = spec("json-output");
    let goal = store.goal(&spec.id);
    goal.create(&spec, start()).await.expect("created");
    goal.submit(&spec.owner_actor(), start(), &edit())
        .await
        .expect("added");
    let clock = Arc::new(ManualClock::new(start()));
    let agent = executor_fn(|turn| async move {
        let done = Transition::Complete {
            continuation: Continuation::NoFollowUp,
        };
        Ok(TurnReport::new(done, format!("did {}", turn.title)).with_usage(Amounts::ONE_TURN))
    });
    let check = validator_fn("tests", |_, report| async move {
        Ok(Validation::passed(format!("checked: {}", report.summary)))
    })
    .expect("id");
    let engine = Engine::builder(
        "agent-a".parse().expect("id"),
        store.clone(),
        clock,
        agent,
        check,
    )
    .build();
    let report = engine.step(&spec.id).await.expect("a step");
    assert!(
        matches!(&report.turn, Some(TurnOutcome::Settled { verdict: VerdictOutcome::Passed, summary, .. }) if summary == "did change the output layer"),
        "{report:?}"
    );
    let state = goal.state().await.expect("a goal");
    let settled = state
        .todos
        .get(&"edit".parse().expect("id"))
        .expect("the todo");
    assert!(matches!(
        settled.status,
        loopx_kernel::TodoStatus::Done { .. }
    ));
    assert_eq!(state.ledger.spent.turns, 1, "one turn charged");
}
