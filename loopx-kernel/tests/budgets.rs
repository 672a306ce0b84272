//! Budgets in every dimension: each turn reserves its todo's expected usage (or the policy's
//! default) when it begins, a reservation that does not fit is never begun, usage beyond the
//! reservation is charged in full and recorded as an overrun, and the next decision asks the
//! owner until the owner amends the budget or the policy.

mod world;

use loopx_kernel::{
    Amendment, Amounts, Command, Decision, Dimension, Event, GoalState, Limits, Overrun, Question,
    Refusal,
};
use world::{World, ag, owner, tid, todo, turn};

fn tokens(n: u64) -> Amounts {
    Amounts {
        tokens: n,
        ..Amounts::ONE_TURN
    }
}

/// A goal bounded at 10 000 tokens whose turns reserve 1 000 tokens by default.
fn bounded() -> World {
    World::with(|s| {
        s.budget = Limits {
            tokens: Some(10_000),
            ..Limits::UNLIMITED
        };
        s.policy.default_reservation = tokens(1_000);
    })
}

fn settled(w: &World) -> (Amounts, Amounts) {
    w.log
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::TurnSettled {
                charged, overrun, ..
            } => Some((*charged, *overrun)),
            _ => None,
        })
        .expect("a settled turn")
}

#[test]
fn an_overrun_is_charged_in_full_recorded_and_asks_the_owner() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.turn("a", "edit", |s| s.usage = tokens(3_000));

    // The truth is charged; what went beyond the reservation is recorded on the settlement.
    let (charged, overrun) = settled(&w);
    assert_eq!(charged.tokens, 3_000);
    assert_eq!(
        overrun,
        Amounts {
            tokens: 2_000,
            ..Amounts::ZERO
        }
    );
    assert_eq!(w.goal.ledger.spent.tokens, 3_000);
    assert_eq!(w.goal.ledger.overrun.tokens, 2_000);

    // The budget still has room, but no new turn begins before the owner has answered.
    let Decision::Ask { questions, .. } = w.decide("a") else {
        panic!("expected an ask, got {:?}", w.decide("a"));
    };
    let [
        Question::Overrun {
            todo,
            by,
            dimension,
            ..
        },
    ] = questions.as_slice()
    else {
        panic!("expected the overrun question, got {questions:?}");
    };
    assert_eq!(todo, &tid("edit"));
    assert_eq!(by.tokens, 2_000);
    assert_eq!(*dimension, Dimension::Tokens);
    let fix = questions[0].fix();
    assert_eq!(fix.verb, "goal amend");
    assert_eq!(fix.call.as_deref(), Some("amend_goal"));
    insta::assert_json_snapshot!(w.seen("a"));

    // Amending the budget (here: keeping it) is the owner's answer; work goes on.
    let limits = w.goal.spec.budget;
    w.amend(vec![Amendment::SetBudget { limits }]);
    assert!(w.goal.overrun.is_none());
    assert!(matches!(w.decide("a"), Decision::Continue(_)));
}

#[test]
fn a_new_reservation_policy_answers_the_overrun_too() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.turn("a", "edit", |s| s.usage = tokens(1_500));
    assert!(matches!(w.decide("a"), Decision::Ask { .. }));

    let mut policy = w.goal.spec.policy.clone();
    policy.default_reservation = tokens(2_000);
    w.amend(vec![Amendment::SetPolicy { policy }]);

    let Decision::Continue(assignment) = w.decide("a") else {
        panic!("expected continue, got {:?}", w.decide("a"));
    };
    assert_eq!(assignment.reserve.tokens, 2_000);
}

#[test]
fn an_overrun_on_an_unbounded_dimension_is_recorded_but_asks_nobody() {
    let mut w = World::with(|s| s.budget = Limits::GOAL_DEFAULT);
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    // The default goal bounds turns and wall-clock time, not tokens.
    w.turn("a", "edit", |s| s.usage = tokens(3_000));

    assert_eq!(
        w.goal.overrun.as_deref(),
        Some(&Overrun {
            todo: tid("edit"),
            turn: turn("edit.t1"),
            by: Amounts {
                tokens: 3_000,
                ..Amounts::ZERO
            },
        })
    );
    assert!(matches!(w.decide("a"), Decision::Continue(_)));
}

#[test]
fn an_overrun_of_wall_clock_time_asks_under_the_default_budget() {
    let mut w = World::with(|s| s.budget = Limits::GOAL_DEFAULT);
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    // The default reservation holds 15 minutes and no tokens; the turn took 40 minutes and
    // used tokens, which the default goal does not bound: the question is about wall time.
    w.turn("a", "edit", |s| {
        s.usage = Amounts {
            tokens: 500,
            wall_ms: 40 * 60 * 1000,
            ..Amounts::ONE_TURN
        };
    });
    let Decision::Ask { questions, .. } = w.decide("a") else {
        panic!("expected an ask, got {:?}", w.decide("a"));
    };
    assert!(
        matches!(&questions[0], Question::Overrun { by, dimension: Dimension::WallClock, .. }
            if by.wall_ms == 25 * 60 * 1000 && by.tokens == 500),
        "{questions:?}"
    );
    assert_eq!(questions[0].fix().args[0].flag, "wall-ms");
}

#[test]
fn a_turn_reserves_its_todos_expected_usage_in_every_dimension() {
    let mut w = bounded();
    let expected = Amounts {
        turns: 7,
        tokens: 3_000,
        cost_micros: 40_000,
        wall_ms: 120_000,
    };
    w.add(todo("edit", "change the output layer").expecting(expected));

    let Decision::Continue(assignment) = w.decide("a") else {
        panic!("expected continue, got {:?}", w.decide("a"));
    };
    // Always exactly one turn; the rest as the todo says, in place of the policy's default.
    let reserved = Amounts {
        turns: 1,
        ..expected
    };
    assert_eq!(assignment.reserve, reserved);
    w.claim("a", "edit");
    // A request may reserve more, never less.
    let epoch = w.epoch("edit");
    w.run(
        &ag("a"),
        Command::BeginTurn {
            todo: tid("edit"),
            epoch,
            turn: turn("t1"),
            reserve: Some(tokens(100)),
        },
    );
    assert_eq!(w.goal.ledger.reserved, reserved);
    let lease = w.goal.todos[&tid("edit")]
        .lease
        .as_deref()
        .expect("a lease");
    assert_eq!(lease.turn.as_ref().map(|t| t.reserved), Some(reserved));
}

#[test]
fn a_turn_whose_reservation_does_not_fit_is_not_begun() {
    let mut w = bounded();
    w.add(todo("big", "rewrite the parser").expecting(tokens(12_000)));

    // The decision does not offer it: the owner is asked for more budget.
    let Decision::Ask { questions, .. } = w.decide("a") else {
        panic!("expected an ask, got {:?}", w.decide("a"));
    };
    assert!(
        matches!(
            questions.as_slice(),
            [Question::Budget {
                dimension: Dimension::Tokens,
                ..
            }]
        ),
        "{questions:?}"
    );
    // And the kernel refuses the turn, changing nothing, even if asked to reserve less.
    w.claim("a", "big");
    let before = w.goal.clone();
    let epoch = w.epoch("big");
    for reserve in [None, Some(tokens(10))] {
        let refusal = w.refuse(
            &ag("a"),
            Command::BeginTurn {
                todo: tid("big"),
                epoch,
                turn: turn("t1"),
                reserve,
            },
        );
        assert!(
            matches!(
                refusal,
                Refusal::BudgetExhausted {
                    dimension: Dimension::Tokens,
                    ..
                }
            ),
            "{refusal:?}"
        );
        assert_eq!(w.goal, before);
    }
}

#[test]
fn after_an_overrun_beyond_the_limit_nothing_is_admitted_until_it_is_raised() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.turn("a", "edit", |s| s.usage = tokens(10_500));
    assert_eq!(w.goal.ledger.spent.tokens, 10_500);

    w.claim("a", "docs");
    let epoch = w.epoch("docs");
    let refusal = w.refuse(
        &ag("a"),
        Command::BeginTurn {
            todo: tid("docs"),
            epoch,
            turn: turn("t2"),
            reserve: None,
        },
    );
    assert!(
        matches!(refusal, Refusal::BudgetExhausted { .. }),
        "{refusal:?}"
    );
    // Raising the limit, even to below what the overrun spent, is the owner's to do.
    w.amend(vec![Amendment::SetBudget {
        limits: Limits {
            tokens: Some(10_200),
            ..Limits::UNLIMITED
        },
    }]);
    w.amend(vec![Amendment::SetBudget {
        limits: Limits {
            tokens: Some(20_000),
            ..Limits::UNLIMITED
        },
    }]);
    assert!(matches!(w.decide("a"), Decision::Continue(_)));
}

#[test]
fn a_limit_may_not_be_lowered_below_what_is_spent_and_reserved() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.add(todo("docs", "document --format json"));
    w.turn("a", "edit", |s| s.usage = tokens(800));
    let expected_revision = w.goal.goal_revision;
    let lower = |n| Command::AmendGoal {
        expected_revision,
        amendments: vec![Amendment::SetBudget {
            limits: Limits {
                tokens: Some(n),
                ..Limits::UNLIMITED
            },
        }],
    };

    let before = w.goal.clone();
    let refusal = w.refuse(&owner(), lower(799));
    assert!(
        matches!(&refusal, Refusal::InvalidInput { field: "budget", problem } if problem.contains("800")),
        "{refusal:?}"
    );
    assert_eq!(w.goal, before);
    // Exactly what is committed is allowed: it stops new turns.
    w.run(&owner(), lower(800));
    assert!(matches!(w.decide("a"), Decision::Ask { .. }));
}

#[test]
fn a_recorded_overrun_that_disagrees_with_the_charge_does_not_fold() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.turn("a", "edit", |s| s.usage = tokens(3_000));
    assert!(GoalState::replay(&w.log).is_ok());

    let mut edited = w.log.clone();
    for recorded in &mut edited {
        if let Event::TurnSettled { overrun, .. } = &mut recorded.event {
            overrun.tokens = 1;
        }
    }
    assert!(GoalState::replay(&edited).is_err());
}

/// A turn is its lease's one run: an id that comes back under a later lease names a new turn,
/// reserved and charged on its own, while the turn it named before is never charged again.
#[test]
fn a_turn_id_under_a_later_lease_is_a_new_turn_charged_once() {
    let mut w = bounded();
    w.add(todo("edit", "change the output layer"));
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    w.settle("a", "edit", "t1", |s| {
        s.transition = loopx_kernel::Transition::KeepOpen;
    });
    assert_eq!(w.goal.ledger.spent.turns, 1);

    // The ended lease's turn settles no more.
    let again = Command::SettleTurn(world::settlement("edit", 1, "t1"));
    let refusal = w.refuse(&ag("a"), again);
    assert!(
        matches!(refusal, Refusal::TurnAlreadyUsed { .. }),
        "{refusal:?}"
    );

    // Under a new lease the same id is another turn, with its own reservation and charge.
    w.claim("a", "edit");
    w.begin("a", "edit", "t1");
    assert_eq!(w.goal.ledger.reserved.tokens, 1_000);
    w.settle("a", "edit", "t1", |_| {});
    assert_eq!(w.goal.ledger.spent.turns, 2);
    assert_eq!(w.goal.ledger.reserved, Amounts::ZERO);
    assert!(w.goal.todos[&tid("edit")].status.is_closed());
}
