//! The engine's budget accounting with a real `CommandExecutor` process: the turn writes its
//! usage file, the engine charges the tokens and cost it reports and the wall-clock time its
//! own clock measured around the run, an overrun asks the owner, and a turn whose reservation
//! does not fit is never begun.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use loopx_kernel::engine::{Engine, StepReport, TurnOutcome};
use loopx_kernel::seams::{
    Executor, Recovery, Store, TurnError, TurnReport, TurnRequest, UsageProblem, Validation,
    Validator,
};
use loopx_kernel::*;
use loopx_provider::executor::CommandExecutor;
use loopx_provider::process::CommandSpec;
use loopx_store::MemoryStore;

fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap_or_else(|_| panic!("`{text}` is a valid id"))
}

fn start() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a valid instant")
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// What every turn reserves here: 2 000 tokens, 5 000 micro-units and 15 minutes.
const RESERVED: Amounts = Amounts {
    turns: 1,
    tokens: 2_000,
    cost_micros: 5_000,
    wall_ms: 15 * 60 * 1000,
};

/// A goal bounded in every dimension, with two todos.
async fn goal(store: &MemoryStore, budget: Limits) -> GoalId {
    let spec = GoalSpec {
        id: id("g"),
        objective: "add --format json".into(),
        owner: id("olivia"),
        criteria: vec![],
        agents: [id::<AgentId>("alice")].into(),
        budget,
        // Leases outlast the longest turn here, so no settlement meets an expired lease.
        policy: Policy {
            default_reservation: RESERVED,
            lease_ttl: Duration::hours(1),
            ..Policy::default()
        },
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    };
    let goal = spec.id.clone();
    let owner = Actor::Person(id("olivia"));
    submit(
        store,
        &goal,
        &owner,
        start(),
        &Command::CreateGoal { spec },
        &id("create"),
    )
    .await
    .expect("the goal is created");
    for name in ["edit", "docs"] {
        let todo = NewTodo::advance(id(name), format!("do {name}"));
        let op = id::<OperationId>(&format!("add-{name}"));
        submit(
            store,
            &goal,
            &owner,
            start(),
            &Command::AddTodo { todo },
            &op,
        )
        .await
        .expect("the todo is added");
    }
    goal
}

fn bounded() -> Limits {
    Limits {
        turns: Some(10),
        tokens: Some(100_000),
        cost_micros: Some(1_000_000),
        wall_ms: Some(8 * 60 * 60 * 1000),
    }
}

/// A real command executor whose run takes `minutes` on the engine's manual clock (the process
/// itself is quick: the clock, not the machine, says how long the turn took).
struct Timed {
    inner: CommandExecutor,
    clock: Arc<ManualClock>,
    minutes: i64,
    runs: AtomicUsize,
}

#[async_trait]
impl Executor for Timed {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let report = self.inner.run(turn).await;
        self.clock.advance(Duration::minutes(self.minutes));
        report
    }

    async fn recover(&self, turn: &TurnRequest) -> Recovery {
        self.inner.recover(turn).await
    }
}

/// Passes every turn, with no evidence.
struct Passing;

#[async_trait]
impl Validator for Passing {
    fn actor(&self) -> Actor {
        Actor::Validator(id("ci"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation {
            outcome: VerdictOutcome::Passed,
            summary: "tests pass".into(),
            evidence: vec![],
        })
    }
}

struct Setup {
    store: Arc<MemoryStore>,
    executor: Arc<Timed>,
    engine: Engine,
    _journal: tempfile::TempDir,
}

/// The engine of alice over a memory store, running `script` as each turn for `minutes`.
fn setup(script: &str, minutes: i64) -> Setup {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(start()));
    let journal = tempfile::tempdir().expect("a temporary directory");
    let command = CommandSpec::new("sh").arg("-c").arg(script);
    let executor = Arc::new(Timed {
        inner: CommandExecutor::new(command, journal.path()),
        clock: clock.clone(),
        minutes,
        runs: AtomicUsize::new(0),
    });
    let engine = Engine::builder(
        id("alice"),
        store.clone(),
        clock,
        executor.clone(),
        Arc::new(Passing),
    )
    .build();
    Setup {
        store,
        executor,
        engine,
        _journal: journal,
    }
}

fn settled(report: &StepReport) -> (Amounts, Amounts) {
    match &report.turn {
        Some(TurnOutcome::Settled {
            charged: Some(charged),
            overrun,
            ..
        }) => (*charged, *overrun),
        other => panic!("expected a settled turn, got {other:?}"),
    }
}

#[test]
fn a_turn_is_charged_its_reported_tokens_and_cost_and_the_measured_wall_time() {
    block_on(async {
        let s = setup(
            r#"echo '{"tokens":1200,"cost_micros":300}' > "$LOOPX_USAGE_FILE""#,
            4,
        );
        let goal = goal(&s.store, bounded()).await;

        let report = s.engine.step(&goal).await.expect("a step");

        let (charged, overrun) = settled(&report);
        assert_eq!(
            charged,
            Amounts {
                turns: 1,
                tokens: 1_200,
                cost_micros: 300,
                wall_ms: 4 * 60 * 1000,
            }
        );
        assert!(overrun.is_zero(), "{overrun:?}");
        let state = s.store.load(&goal).await.expect("load").expect("the goal");
        assert_eq!(state.ledger.spent, charged);
        assert!(state.ledger.reserved.is_zero());
        // The turn was begun reserving the policy's reservation in every dimension.
        let events = s.store.events(&goal, 0, usize::MAX).await.expect("events");
        let reserved = events.iter().find_map(|e| match &e.event {
            Event::TurnBegun { reserved, .. } => Some(*reserved),
            _ => None,
        });
        assert_eq!(reserved, Some(RESERVED));
        // Within its reservation: the work goes on.
        assert!(
            matches!(report.decision, Decision::Continue(_)),
            "{:?}",
            report.decision
        );
    });
}

#[test]
fn an_overrun_is_charged_in_full_and_the_next_decision_asks_the_owner() {
    block_on(async {
        // 5 000 tokens against 2 000 reserved, and 20 minutes against 15.
        let s = setup(
            r#"echo '{"tokens":5000,"cost_micros":300}' > "$LOOPX_USAGE_FILE""#,
            20,
        );
        let goal = goal(&s.store, bounded()).await;

        let report = s.engine.step(&goal).await.expect("a step");

        let (charged, overrun) = settled(&report);
        assert_eq!(charged.tokens, 5_000);
        assert_eq!(
            overrun,
            Amounts {
                tokens: 3_000,
                wall_ms: 5 * 60 * 1000,
                ..Amounts::ZERO
            }
        );
        let Decision::Ask { questions, .. } = &report.decision else {
            panic!("expected an ask, got {:?}", report.decision);
        };
        assert!(
            matches!(&questions[..], [Question::Overrun { by, .. }] if *by == overrun),
            "{questions:?}"
        );
        // Asked again, the engine runs nothing until the owner answers.
        let again = s.engine.step(&goal).await.expect("a step");
        assert!(again.turn.is_none(), "{:?}", again.turn);
        assert_eq!(s.executor.runs.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_missing_usage_file_is_reported_and_the_reservation_charged() {
    block_on(async {
        let s = setup("true", 3);
        let goal = goal(&s.store, bounded()).await;

        let report = s.engine.step(&goal).await.expect("a step");

        let Some(TurnOutcome::Settled {
            charged: Some(charged),
            usage_problem,
            ..
        }) = &report.turn
        else {
            panic!("expected a settled turn, got {:?}", report.turn);
        };
        assert_eq!(usage_problem.as_ref(), Some(&UsageProblem::Missing));
        // Tokens and cost unknown: the reservation stands; the measured wall time still counts.
        assert_eq!(
            *charged,
            Amounts {
                wall_ms: 3 * 60 * 1000,
                ..RESERVED
            }
        );
    });
}

#[test]
fn a_turn_whose_reservation_does_not_fit_is_not_begun() {
    block_on(async {
        let s = setup(r#"echo '{"tokens":1}' > "$LOOPX_USAGE_FILE""#, 1);
        let budget = Limits {
            tokens: Some(1_500),
            ..bounded()
        };
        let goal = goal(&s.store, budget).await;

        let report = s.engine.step(&goal).await.expect("a step");

        assert!(report.turn.is_none(), "{:?}", report.turn);
        assert!(
            matches!(&report.decision, Decision::Ask { questions, .. }
                if matches!(&questions[..], [Question::Budget { dimension: Dimension::Tokens, .. }])),
            "{:?}",
            report.decision
        );
        assert_eq!(s.executor.runs.load(Ordering::SeqCst), 0);
        let events = s.store.events(&goal, 0, usize::MAX).await.expect("events");
        assert!(
            !events
                .iter()
                .any(|e| matches!(e.event, Event::TurnBegun { .. })),
            "no turn was begun"
        );
    });
}
