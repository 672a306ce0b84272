//! Failed and idle turns, built through commands only: the retry policy's backoff and its
//! replan obligation, stall detection, and the default budget a goal gets when it names none.

mod world;

use loopx_kernel::{
    Command, Decision, Duration, Event, FailureClass, GoalSpec, Limits, ObligationCause,
    PlanChange, ReplanReason, RetryPolicy, Timestamp, Transition, TurnFailure, TurnResult,
    VerdictOutcome, WaitReason, decide, next_wake,
};
use world::{World, ag, agent, ev, tid, todo};

fn exit_1(s: &mut loopx_kernel::Settlement) {
    s.transition = Transition::KeepOpen;
    s.failure = Some(TurnFailure {
        class: FailureClass::Exited,
        detail: "`sh turn.sh` exit 1".into(),
    });
}

fn rejected(s: &mut loopx_kernel::Settlement) {
    s.transition = Transition::KeepOpen;
    s.verdict.outcome = VerdictOutcome::Failed;
}

/// The result the last `turn_settled` recorded.
fn last_result(w: &World) -> TurnResult {
    w.log
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::TurnSettled { result, .. } => result.clone(),
            _ => None,
        })
        .expect("a classified settlement")
}

fn claim(todo: &str) -> Command {
    Command::Claim {
        todo: tid(todo),
        ttl: None,
        workspace: None,
        grant_reason: None,
    }
}

/// Fails `edit` until the retry policy's obligation, checking at each failure that the todo
/// is held back exactly until its pause ends: `decide` waits with the pause's end as its wake
/// time, a claim before it is refused and one at it is accepted.
fn fail_to_obligation(w: &mut World, fail: fn(&mut loopx_kernel::Settlement)) {
    let policy = RetryPolicy::default();
    let goal = w.goal.spec.id.clone();
    for n in 1..=3 {
        w.turn("a", "edit", fail);
        assert!(last_result(w).is_failure());
        if n == 3 {
            break;
        }
        let until = w.now.plus(policy.delay(&goal, &tid("edit"), n));
        assert_eq!(
            w.decide("a"),
            Decision::Wait {
                until: Some(until),
                reasons: vec![WaitReason::Backoff {
                    todo: tid("edit"),
                    failures: n,
                    until,
                }],
            }
        );
        assert_eq!(next_wake(&w.goal, w.now), Some(until));
        w.now = Timestamp::from_millis(until.as_millis() - 1);
        assert_eq!(w.refuse(&ag("b"), claim("edit")).code(), "backing_off");
        w.now = until;
    }
    let Decision::Replan {
        reason:
            ReplanReason::Obligation {
                cause:
                    ObligationCause::TurnsFailing {
                        todo,
                        failures,
                        last,
                    },
                ..
            },
    } = w.decide("b")
    else {
        panic!("expected the failing obligation, got {:?}", w.decide("b"));
    };
    assert_eq!((todo, failures, last.len()), (tid("edit"), 3, 3));
}

#[test]
fn failed_executor_turns_back_off_then_raise_a_replan_naming_the_todo() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));

    fail_to_obligation(&mut w, exit_1);

    assert_eq!(
        last_result(&w),
        TurnResult::ExecutorFailed {
            class: FailureClass::Exited,
            detail: "`sh turn.sh` exit 1".into()
        }
    );
    // Every agent is told to replan, not only the one that ran the turns.
    for who in ["a", "b", "c"] {
        assert_eq!(w.decide(who).kind(), "replan", "{who}");
    }
}

#[test]
fn failed_validations_back_off_then_raise_a_replan_naming_the_todo() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));

    fail_to_obligation(&mut w, rejected);

    assert!(matches!(
        last_result(&w),
        TurnResult::ValidationFailed { .. }
    ));
}

#[test]
fn discharging_the_obligation_starts_the_streak_over() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    fail_to_obligation(&mut w, exit_1);
    let obligation = w.goal.obligations.keys().next().cloned().expect("raised");

    w.run(
        &w.goal.spec.owner_actor(),
        Command::Discharge {
            obligation,
            changes: vec![PlanChange::AddTodo {
                todo: todo("fix-env", "give the turn its credentials"),
            }],
        },
    );

    assert!(w.goal.streaks.is_empty(), "{:?}", w.goal.streaks);
    assert_eq!(w.decide("a").kind(), "continue");
}

#[test]
fn a_progress_turn_ends_a_failing_streak() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.turn("a", "edit", exit_1);
    w.now = w.now.plus(Duration::hours(1));

    w.turn("a", "edit", |s| {
        s.transition = Transition::KeepOpen;
        s.evidence = vec![ev("e1", "tests", "r1")];
    });

    assert_eq!(last_result(&w), TurnResult::Progress);
    assert!(
        w.goal
            .streaks
            .get(&tid("edit"))
            .is_none_or(|s| s.failures == 0)
    );
}

#[test]
fn turns_that_change_nothing_raise_a_stall_obligation() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    // The first turn establishes a fact; the next ones only repeat it.
    w.turn("a", "edit", |s| {
        s.transition = Transition::KeepOpen;
        s.evidence = vec![ev("e0", "tests", "r1")];
    });
    assert_eq!(last_result(&w), TurnResult::Progress);
    for n in 1..=5 {
        w.turn("a", "edit", |s| {
            s.transition = Transition::KeepOpen;
            s.evidence = vec![ev(&format!("e{n}"), "tests", "r1")];
        });
        assert_eq!(last_result(&w), TurnResult::NoProgress, "turn {n}");
        let raised = w
            .goal
            .obligations
            .values()
            .any(|o| matches!(&o.cause, ObligationCause::NoProgress { todo, turns: 5 } if todo == &tid("edit")));
        assert_eq!(raised, n == 5, "after {n} idle turns");
    }
    assert_eq!(w.decide("b").kind(), "replan");
}

#[test]
fn new_evidence_an_observation_or_a_transition_is_progress() {
    let mut w = World::new();
    w.add(todo("edit", "change the output layer"));
    w.turn("a", "edit", |s| {
        s.transition = Transition::KeepOpen;
        s.evidence = vec![ev("e0", "tests", "r1")];
    });
    for n in 1..=4 {
        w.turn("a", "edit", |s| {
            s.transition = Transition::KeepOpen;
            s.evidence = vec![ev(&format!("e{n}"), "tests", "r1")];
        });
    }
    assert_eq!(w.goal.streaks[&tid("edit")].idle, 4);

    // The same check at a new revision is a new fact.
    w.turn("a", "edit", |s| {
        s.transition = Transition::KeepOpen;
        s.evidence = vec![ev("e5", "tests", "r2")];
    });

    assert_eq!(last_result(&w), TurnResult::Progress);
    assert!(!w.goal.streaks.contains_key(&tid("edit")));
    assert!(w.goal.obligations.is_empty());
}

#[test]
fn the_policy_is_data_in_the_goal_and_old_specs_decode_with_its_defaults() {
    let old = serde_json::json!({
        "id": "g", "objective": "o", "owner": "p", "criteria": [], "agents": ["a"],
        "budget": {"turns": null, "tokens": null, "cost_micros": null, "wall_ms": null},
        "policy": {"lease_ttl": 900_000, "monitor_no_change_limit": 3}
    });
    let spec: GoalSpec = serde_json::from_value(old).expect("an old spec decodes");
    assert_eq!(spec.policy.retry, RetryPolicy::default());
    assert_eq!(spec.policy.stall_turns, 5);
    assert!(spec.budget.is_unlimited(), "an explicit budget is kept");

    let tiny = serde_json::json!({
        "id": "g", "objective": "o", "owner": "p", "criteria": [], "agents": ["a"],
        "policy": {"retry": {"attempts": 1, "backoff": 10}, "stall_turns": 0}
    });
    let spec: GoalSpec = serde_json::from_value(tiny).expect("a partial policy decodes");
    assert_eq!(spec.policy.retry.attempts, 1);
    assert_eq!(spec.policy.retry.backoff, Duration::from_millis(10));
    assert_eq!(spec.policy.retry.max_backoff, Duration::minutes(15));
    assert_eq!(spec.policy.stall_turns, 0);
}

#[test]
fn a_goal_without_a_budget_gets_the_finite_default_and_unlimited_must_be_asked_for() {
    let spec = GoalSpec::builder("g", "o", "p")
        .agent("a")
        .declared_identity()
        .build()
        .expect("a spec");
    assert_eq!(spec.budget, Limits::GOAL_DEFAULT);
    assert_eq!(spec.budget.turns, Some(200));
    assert_eq!(spec.budget.wall_ms, Some(8 * 3_600_000));

    let bare = serde_json::json!({
        "id": "g", "objective": "o", "owner": "p", "criteria": [], "agents": ["a"]
    });
    let spec: GoalSpec = serde_json::from_value(bare.clone()).expect("decodes");
    assert_eq!(spec.budget, Limits::GOAL_DEFAULT);
    // The default is stated in the goal's JSON.
    let written = serde_json::to_value(&spec).expect("encodes");
    assert_eq!(written["budget"]["turns"], 200);

    let mut unlimited = bare;
    unlimited["budget"] = "unlimited".into();
    let spec: GoalSpec = serde_json::from_value(unlimited.clone()).expect("decodes");
    assert!(spec.budget.is_unlimited());
    unlimited["budget"] = "boundless".into();
    assert!(serde_json::from_value::<GoalSpec>(unlimited).is_err());
}

#[test]
fn the_default_budget_stops_a_goal_that_never_ends() {
    let mut w = World::with(|spec| {
        spec.budget = Limits::GOAL_DEFAULT;
        spec.policy.stall_turns = 0;
    });
    w.add(todo("edit", "change the output layer"));
    for n in 0..200 {
        w.turn("a", "edit", |s| {
            s.transition = Transition::KeepOpen;
            s.evidence = vec![ev(&format!("e{n}"), "tests", &format!("r{n}"))];
        });
    }
    assert_eq!(
        decide(&w.goal, &agent("a"), w.now).kind(),
        "ask",
        "the owner is asked for more"
    );
}

#[test]
fn idle_turns_spread_over_todos_raise_a_goal_wide_stall() {
    let mut w = World::with(|spec| {
        spec.policy.stall_turns = 5;
        spec.policy.stall_goal_turns = 6;
    });
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document the output"));
    w.add(todo("bench", "benchmark the output"));
    // Two idle turns each, never five on one todo, and still six in a row on the goal.
    for round in 0..2 {
        for name in ["edit", "docs", "bench"] {
            w.turn("a", name, |s| s.transition = Transition::KeepOpen);
            assert_eq!(
                last_result(&w),
                TurnResult::NoProgress,
                "{name} in round {round}"
            );
        }
    }
    assert_eq!(w.goal.idle_turns, 6);
    let stalled: Vec<_> = w
        .goal
        .obligations
        .values()
        .map(|o| o.cause.clone())
        .collect();
    assert_eq!(stalled, vec![ObligationCause::GoalStalled { turns: 6 }]);
    assert_eq!(w.decide("c").kind(), "replan");

    let obligation = w.goal.obligations.keys().next().cloned().expect("raised");
    w.run(
        &w.goal.spec.owner_actor(),
        Command::Discharge {
            obligation,
            changes: vec![PlanChange::AddTodo {
                todo: todo("split", "split the output work"),
            }],
        },
    );
    assert_eq!(
        w.goal.idle_turns, 0,
        "the plan changed: the count starts over"
    );
}
