//! The engine over real seams in one process: the memory store, a manual clock, and small
//! executors and validators written for each case. Crashes of a real process are in
//! `engine_crash.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use loopx_kernel::ManualClock;
use loopx_kernel::engine::{
    Engine, EngineBuilder, EngineOptions, JudgeRound, StepReport, TurnOutcome, Until,
    record_observation,
};
use loopx_kernel::retire::RETIRE_BATCH;
use loopx_kernel::seams::{
    Capability, Clock, Executor, ObserveRequest, Proposal, Provider, ProviderError, Recovery,
    Store, TurnError, TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::*;
use loopx_store::MemoryStore;

fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap_or_else(|_| panic!("`{text}` is a valid id"))
}

fn start() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a valid instant")
}

fn owner() -> Actor {
    Actor::Person(id("olivia"))
}

fn agent() -> AgentId {
    id("alice")
}

/// Runs a future to completion on a single-threaded runtime.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// A goal with one criterion (`tests` about `repo`), owned by olivia, worked by alice.
async fn goal(store: &MemoryStore, todos: &[NewTodo]) -> GoalId {
    let spec = GoalSpec {
        id: id("g"),
        objective: "add --format json".into(),
        owner: id("olivia"),
        criteria: vec![Criterion {
            id: id("json-tested"),
            text: "the JSON output has tests".into(),
            check: id("tests"),
            subject: id("repo"),
        }],
        agents: [agent(), id("bob")].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    };
    let goal = spec.id.clone();
    submit(
        store,
        &goal,
        &owner(),
        start(),
        &Command::CreateGoal { spec },
        &id("create"),
    )
    .await
    .expect("the goal is created");
    for todo in todos {
        let op = id::<OperationId>(&format!("add-{}", todo.id));
        let command = Command::AddTodo { todo: todo.clone() };
        submit(store, &goal, &owner(), start(), &command, &op)
            .await
            .expect("the todo is added");
    }
    goal
}

fn todo(name: &str) -> NewTodo {
    NewTodo::advance(id(name), format!("do {name}"))
}

/// Something the executor does while its turn runs.
type During = Box<dyn Fn(&TurnRequest) -> BoxFuture<'static, ()> + Send + Sync>;

/// An executor that completes every todo, counts its runs, and may act while it runs.
struct Scripted {
    runs: AtomicUsize,
    during: During,
    recovery: Recovery,
}

impl Scripted {
    fn completing() -> Self {
        Scripted::during(|_| Box::pin(async {}))
    }

    /// Completes every todo after acting with `during`.
    fn during(
        during: impl Fn(&TurnRequest) -> BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        Scripted {
            runs: AtomicUsize::new(0),
            during: Box::new(during),
            recovery: Recovery::Unknown,
        }
    }
}

#[async_trait]
impl Executor for Scripted {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        (self.during)(turn).await;
        // Let the engine's lease renewal observe any clock movement made above.
        YieldOnce(false).await;
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            observations: vec![],
            usage: Amounts {
                tokens: 100,
                ..Amounts::ZERO
            },
            summary: format!("did {}", turn.todo),
            usage_problem: None,
        })
    }

    async fn recover(&self, _: &TurnRequest) -> Recovery {
        self.recovery.clone()
    }
}

struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// Passes every turn with evidence `tests` about `repo` at revision `r1`.
struct Passing;

#[async_trait]
impl Validator for Passing {
    fn actor(&self) -> Actor {
        Actor::Validator(id("ci"))
    }

    async fn validate(&self, turn: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation {
            outcome: VerdictOutcome::Passed,
            summary: "tests pass".into(),
            evidence: vec![NewEvidence {
                id: id(&format!("tests-{}", turn.turn)),
                check: id("tests"),
                subject: id("repo"),
                revision: id("r1"),
                outcome: Outcome::Pass,
                summary: "tests pass".into(),
                observed_at: start(),
                ttl: None,
                inputs: Lineage::default(),
            }],
        })
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
}

impl Harness {
    fn new() -> Self {
        Harness {
            // Time moves by hand here: the store follows the manual clock's times.
            store: Arc::new(MemoryStore::with_test_clock()),
            clock: Arc::new(ManualClock::new(start())),
        }
    }

    /// The engine of `agent()` over the harness's store and clock, with `executor` and a
    /// validator that always passes, ready for more settings.
    fn builder(&self, executor: Arc<dyn Executor>) -> EngineBuilder {
        Engine::builder(
            agent(),
            self.store.clone(),
            self.clock.clone(),
            executor,
            Arc::new(Passing),
        )
    }

    fn engine(&self, executor: Arc<dyn Executor>) -> Engine {
        self.builder(executor).build()
    }

    /// The engine with leases of `ttl`, renewed every `renew_every` while a turn runs.
    fn leasing(&self, executor: Arc<dyn Executor>, ttl: Duration, renew_every: Duration) -> Engine {
        let options = EngineOptions {
            lease_ttl: Some(ttl),
            renew_every,
            ..EngineOptions::default()
        };
        self.builder(executor).options(options).build()
    }

    async fn events(&self, goal: &GoalId) -> Vec<RecordedEvent> {
        self.store
            .events(goal, 0, usize::MAX)
            .await
            .expect("events")
    }

    async fn count(&self, goal: &GoalId, name: &str) -> usize {
        let events = self.events(goal).await;
        events.iter().filter(|e| e.event.name() == name).count()
    }
}

#[test]
fn a_step_claims_prepares_runs_validates_and_settles_one_turn() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        let executor = Arc::new(Scripted::completing());
        let engine = h.engine(executor.clone());

        let report = engine.step(&goal).await.expect("a step");

        let Some(TurnOutcome::Settled {
            todo,
            verdict,
            resumed,
            ..
        }) = &report.turn
        else {
            panic!("expected a settled turn, got {:?}", report.turn);
        };
        assert_eq!(todo.as_str(), "edit");
        assert_eq!(*verdict, VerdictOutcome::Passed);
        assert!(!resumed);
        assert_eq!(executor.runs.load(Ordering::SeqCst), 1);
        // The journal entry precedes the settlement, in separate commits.
        let names: Vec<&str> = h
            .events(&goal)
            .await
            .iter()
            .map(|e| e.event.name())
            .collect();
        let begun = names
            .iter()
            .position(|n| *n == "turn_begun")
            .expect("a prepared turn");
        let settled = names
            .iter()
            .position(|n| *n == "turn_settled")
            .expect("a settlement");
        assert!(begun < settled);
        let state = h.store.load(&goal).await.expect("load").expect("the goal");
        assert_eq!(state.ledger.spent.turns, 1);
        assert!(
            state
                .criterion_status(&id("json-tested"), h.clock.now())
                .is_some_and(|s| s.is_met())
        );
        assert_eq!(report.revision, state.revision);
    });
}

#[test]
fn run_until_idle_works_the_whole_frontier_then_stops() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("a"), todo("b"), todo("c")]).await;
        let executor = Arc::new(Scripted::completing());
        let engine = h.engine(executor.clone());
        let mut steps = 0;

        let last = engine
            .run(&goal, Until::Idle, |_| steps += 1)
            .await
            .expect("the run");

        assert_eq!(executor.runs.load(Ordering::SeqCst), 3);
        assert_eq!(steps, 3);
        assert_ne!(last.decision.kind(), "continue");
        assert_eq!(h.count(&goal, "turn_settled").await, 3);
    });
}

/// Once a batch of closed work is older than the goal's retirement horizon (a week by default),
/// the engine's next step retires it, in one `retired` commit; the state then holds only what
/// is still named (the last todo, by the overrun its turn's unreserved tokens recorded) and the
/// evidence the criterion rests on, and the decision is what it was.
#[test]
fn the_engine_retires_a_batch_of_closed_work_once_it_is_past_the_horizon() {
    block_on(async {
        let h = Harness::new();
        let names: Vec<String> = (0..=RETIRE_BATCH).map(|n| format!("t{n}")).collect();
        let todos: Vec<NewTodo> = names.iter().map(|n| todo(n)).collect();
        let goal = goal(&h.store, &todos).await;
        let engine = h.engine(Arc::new(Scripted::completing()));
        engine
            .run(&goal, Until::Idle, |_| {})
            .await
            .expect("the run");
        h.clock.advance(Duration::hours(6 * 24));
        let within = engine.step(&goal).await.expect("a step within the week");
        assert_eq!(h.count(&goal, "retired").await, 0, "a week has not passed");

        h.clock.advance(Duration::hours(2 * 24));
        let after = engine.step(&goal).await.expect("a step after the week");

        let events = h.events(&goal).await;
        let retired: Vec<&RecordedEvent> = events
            .iter()
            .filter(|e| e.event.name() == "retired")
            .collect();
        assert_eq!(retired.len(), 1, "one commit retires the batch");
        let Event::Retired(retirement) = &retired[0].event else {
            unreachable!("filtered by name")
        };
        assert_eq!(retirement.todos.len(), RETIRE_BATCH);
        assert_eq!(retired[0].actor, Actor::Agent(agent()));
        let state = h.store.load(&goal).await.expect("load").expect("the goal");
        let kept: Vec<&str> = state.todos.values().map(|t| t.id.as_str()).collect();
        assert_eq!(kept, [names[RETIRE_BATCH].as_str()]);
        assert!(state.overrun.is_some());
        assert_eq!(state.evidence.len(), 1, "the criterion's evidence stays");
        assert_eq!(after.decision, within.decision);
        let again = engine.step(&goal).await.expect("another step");
        assert_eq!(h.count(&goal, "retired").await, 1, "nothing more is due");
        assert_eq!(again.decision, after.decision);
    });
}

#[test]
fn a_long_turn_renews_its_lease_and_still_settles() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("long")]).await;
        let clock = h.clock.clone();
        // Ten minutes of work against a two-minute lease, renewed every minute.
        let executor = Arc::new(Scripted::during(move |_| {
            let clock = clock.clone();
            Box::pin(async move {
                for _ in 0..30 {
                    clock.advance(Duration::seconds(20));
                    YieldOnce(false).await;
                }
            })
        }));
        let engine = h.leasing(executor, Duration::minutes(2), Duration::seconds(30));

        let report = engine.step(&goal).await.expect("a step");

        assert!(
            matches!(report.turn, Some(TurnOutcome::Settled { .. })),
            "{:?}",
            report.turn
        );
        assert!(
            h.count(&goal, "lease_renewed").await >= 1,
            "the lease was renewed while the turn ran"
        );
    });
}

#[test]
fn a_lease_lost_mid_turn_is_reported_and_nothing_is_settled() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit").idempotent()]).await;
        let (store, clock, goal_id) = (h.store.clone(), h.clock.clone(), goal.clone());
        // The turn outlives its one-minute lease without renewing it, and bob takes the todo.
        let executor = Arc::new(Scripted::during(move |turn| {
            let claim = Command::Claim {
                todo: turn.todo.clone(),
                ttl: None,
                workspace: None,
                grant_reason: None,
            };
            let (store, clock, goal) = (store.clone(), clock.clone(), goal_id.clone());
            Box::pin(async move {
                clock.advance(Duration::minutes(2));
                let bob = Actor::Agent(id("bob"));
                submit(&*store, &goal, &bob, clock.now(), &claim, &id("op-bob"))
                    .await
                    .expect("an expired lease may be claimed");
            })
        }));
        let engine = h.leasing(executor, Duration::minutes(1), Duration::minutes(10));

        let report = engine.step(&goal).await.expect("a step");

        assert!(
            matches!(&report.turn, Some(TurnOutcome::LeaseLost { refusal, .. }) if refusal.code() == "stale_lease_epoch"),
            "{:?}",
            report.turn
        );
        assert_eq!(h.count(&goal, "turn_settled").await, 0);
    });
}

#[test]
fn a_turn_that_ran_past_its_lease_is_settled_by_readback_not_a_plain_settlement() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("publish")]).await;
        let clock = h.clock.clone();
        // The turn outlives its one-minute lease (no renewal comes in time), nobody else takes
        // the todo, and the executor reports its work.
        let executor = Arc::new(Scripted::during(move |_| {
            let clock = clock.clone();
            Box::pin(async move { clock.advance(Duration::minutes(2)) })
        }));
        let engine = h.leasing(executor, Duration::minutes(1), Duration::minutes(10));

        let report = engine.step(&goal).await.expect("a step");

        assert!(
            matches!(report.turn, Some(TurnOutcome::Settled { .. })),
            "{:?}",
            report.turn
        );
        let events = h.events(&goal).await;
        let settled = events
            .iter()
            .find(|e| e.event.name() == "turn_settled")
            .expect("the turn is settled");
        assert_eq!(settled.actor, Actor::Agent(agent()));
        // The plain settlement was refused (an expired lease), so the report was resolved as
        // the readback: the same settlement, through `resolve_outcome`.
        assert_eq!(h.count(&goal, "turn_settled").await, 1);
        assert_ne!(report.decision.kind(), "repair", "{:?}", report.decision);
    });
}

/// Prepares a turn as alice would have before a crash: claimed and journalled, never settled.
async fn crashed_mid_turn(h: &Harness, goal: &GoalId, todo: &str) -> TurnId {
    let alice = Actor::Agent(agent());
    let claim = Command::Claim {
        todo: id(todo),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    submit(&*h.store, goal, &alice, start(), &claim, &id("crash-claim"))
        .await
        .expect("claim");
    let turn: TurnId = id("before-the-crash");
    let begin = Command::BeginTurn {
        todo: id(todo),
        epoch: 1,
        turn: turn.clone(),
        reserve: None,
    };
    submit(&*h.store, goal, &alice, start(), &begin, &id("crash-begin"))
        .await
        .expect("begin");
    turn
}

#[test]
fn after_a_crash_an_unknown_outcome_goes_to_repair_never_a_silent_rerun() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("publish")]).await;
        let turn = crashed_mid_turn(&h, &goal, "publish").await;
        let executor = Arc::new(Scripted::completing());
        let engine = h.engine(executor.clone());

        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(executor.runs.load(Ordering::SeqCst), 0, "never re-run");
        assert_eq!(report.decision.kind(), "repair");
        assert!(matches!(&report.turn, Some(TurnOutcome::Unknown { turn: t, .. }) if *t == turn));
        assert_eq!(h.count(&goal, "turn_settled").await, 0);
    });
}

#[test]
fn after_a_crash_an_idempotent_turn_runs_again_under_the_same_turn_id() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("format").idempotent()]).await;
        let turn = crashed_mid_turn(&h, &goal, "format").await;
        let executor = Arc::new(Scripted::completing());
        let engine = h.engine(executor.clone());

        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(executor.runs.load(Ordering::SeqCst), 1);
        assert!(
            matches!(&report.turn, Some(TurnOutcome::Settled { turn: t, resumed: true, .. }) if *t == turn),
            "{:?}",
            report.turn
        );
        let state = h.store.load(&goal).await.expect("load").expect("goal");
        assert_eq!(state.ledger.spent.turns, 1, "charged once");
    });
}

#[test]
fn after_a_crash_a_turn_the_executor_never_started_runs_again() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        crashed_mid_turn(&h, &goal, "edit").await;
        let executor = Arc::new(Scripted {
            recovery: Recovery::NotStarted,
            ..Scripted::completing()
        });
        let engine = h.engine(executor.clone());

        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(executor.runs.load(Ordering::SeqCst), 1);
        assert!(matches!(
            report.turn,
            Some(TurnOutcome::Settled { resumed: true, .. })
        ));
    });
}

#[test]
fn after_a_crash_a_finished_turn_is_validated_and_settled_without_running_again() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        crashed_mid_turn(&h, &goal, "edit").await;
        let kept = TurnReport {
            effects: Vec::new(),
            transition: Transition::KeepOpen,
            observations: vec![],
            usage: Amounts::ZERO,
            summary: "finished before the crash".into(),
            usage_problem: None,
        };
        let executor = Arc::new(Scripted {
            recovery: Recovery::Finished(kept),
            ..Scripted::completing()
        });
        let engine = h.engine(executor.clone());

        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(executor.runs.load(Ordering::SeqCst), 0);
        assert!(
            matches!(&report.turn, Some(TurnOutcome::Settled { summary, .. }) if summary == "finished before the crash")
        );
        assert_eq!(h.count(&goal, "turn_settled").await, 1);
    });
}

#[test]
fn a_retried_step_commits_nothing_twice() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        let engine = h.engine(Arc::new(Scripted::completing()));
        engine.step(&goal).await.expect("a step");
        let before = h.events(&goal).await.len();

        // Nothing left to do: another step decides and writes nothing.
        let again = engine.step(&goal).await.expect("another step");

        assert!(again.turn.is_none());
        assert_eq!(h.events(&goal).await.len(), before);
    });
}

/// Watches one stream; answers with whatever the test put in.
struct Feed {
    source: SourceId,
    next: Mutex<Vec<Observation>>,
}

#[async_trait]
impl Provider for Feed {
    fn source(&self) -> &SourceId {
        &self.source
    }

    async fn observe(&self, _: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        Ok(self.next.lock().expect("feed").clone())
    }
}

/// Adds a fix todo for every failing check the goal has observed.
struct FixFailures(SourceId);

impl Capability for FixFailures {
    fn source(&self) -> &SourceId {
        &self.0
    }

    fn judge(&self, state: &GoalState, _: &AgentId, now: Timestamp) -> Vec<Proposal> {
        let mut proposals = Proposals::at(state, now);
        let failing = state.observations.values();
        for observation in failing.filter(|o| o.fact("verdict") == Some("fail")) {
            proposals.add_todo(
                todo(&format!("fix-{}", observation.revision)),
                "the check failed",
            );
        }
        proposals.into_vec()
    }
}

fn check(revision: &str, verdict: &str) -> Observation {
    Observation {
        key: id("check:ci"),
        subject: id("repo"),
        revision: id(revision),
        fingerprint: id(&format!("{revision}-{verdict}")),
        observed_at: start(),
        summary: String::new(),
        facts: [("verdict".to_owned(), verdict.to_owned())].into(),
        order: None,
        etag: None,
    }
}

#[test]
fn observations_feed_capabilities_whose_proposals_become_work() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[]).await;
        let feed = Arc::new(Feed {
            source: id("ci"),
            next: Mutex::new(vec![check("r1", "fail")]),
        });
        let executor = Arc::new(Scripted::completing());
        let engine = h
            .builder(executor.clone())
            .watch(feed.clone(), id("check:ci"), Duration::minutes(5))
            .capability(Arc::new(FixFailures(id("fixer"))))
            .build();

        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(report.observed, vec![id::<ObservationKey>("check:ci")]);
        assert_eq!(report.proposals.len(), 1);
        assert_eq!(report.proposals[0].refused, None);
        assert_eq!(report.proposals[0].target.as_deref(), Some("fix-r1"));
        assert!(
            !report.proposals[0].after_turn,
            "judged before the turn it led to"
        );
        assert!(
            matches!(&report.turn, Some(TurnOutcome::Settled { todo, .. }) if todo.as_str() == "fix-r1")
        );

        // The same fact again, within the cadence: not polled, nothing proposed.
        let quiet = engine.step(&goal).await.expect("a quiet step");
        assert!(quiet.observed.is_empty() && quiet.proposals.is_empty());
        // After the cadence the unchanged fact is polled but changes nothing.
        h.clock.advance(Duration::minutes(6));
        let polled = engine.step(&goal).await.expect("a polled step");
        assert!(polled.observed.is_empty() && polled.proposals.is_empty());
        assert_eq!(executor.runs.load(Ordering::SeqCst), 1);
    });
}

/// Asks for a review of every fix todo the goal holds: it sees only what the capabilities
/// before it in a round committed.
struct Reviews(SourceId);

impl Capability for Reviews {
    fn source(&self) -> &SourceId {
        &self.0
    }

    fn judge(&self, state: &GoalState, _: &AgentId, now: Timestamp) -> Vec<Proposal> {
        let mut proposals = Proposals::at(state, now);
        let fixes = state.todos.iter().map(|(id, _)| id);
        for fix in fixes.filter(|id| id.as_str().starts_with("fix-")) {
            proposals.add_todo(todo(&format!("review-{fix}")), "a fix needs a review");
        }
        proposals.into_vec()
    }
}

/// The proposals a step judged before its turn: who, about what, why.
fn judged_before_turn(report: &StepReport) -> Vec<(String, Option<String>, String)> {
    report
        .proposals
        .iter()
        .filter(|p| !p.after_turn)
        .map(|p| {
            (
                p.capability.to_string(),
                p.target.clone(),
                p.rationale.clone(),
            )
        })
        .collect()
}

#[test]
fn the_engine_runs_the_judge_round_a_goal_in_memory_runs() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[]).await;
        let failing = check("r1", "fail");
        let feed = Arc::new(Feed {
            source: id("ci"),
            next: Mutex::new(vec![failing.clone()]),
        });
        let fixer: Arc<dyn Capability> = Arc::new(FixFailures(id("fixer")));
        let reviewer: Arc<dyn Capability> = Arc::new(Reviews(id("reviewer")));

        // The same phases over the goal held in memory, as `testkit::scenario` runs them.
        let mut state = h.store.load(&goal).await.expect("load").expect("a goal");
        let recorded = record_observation(&id("ci"), failing);
        state
            .handle(&recorded.actor, start(), &recorded.command)
            .expect("the observation is recorded");
        let mut round = JudgeRound::new([&*fixer, &*reviewer], &agent(), start());
        let mut in_memory = Vec::new();
        let mut operations = Vec::new();
        while let Some(proposed) = round.next_proposal(&state) {
            let submission = &proposed.submission;
            assert_eq!(
                submission.actor,
                Actor::Capability(proposed.capability.clone())
            );
            state
                .handle(&submission.actor, start(), &submission.command)
                .expect("accepted");
            let target = submission.command.target().map(str::to_owned);
            in_memory.push((proposed.capability.to_string(), target, proposed.rationale));
            operations.push(submission.operation.clone());
        }
        assert_eq!(
            in_memory,
            vec![
                (
                    "fixer".into(),
                    Some("fix-r1".into()),
                    "the check failed".into()
                ),
                (
                    "reviewer".into(),
                    Some("review-fix-r1".into()),
                    "a fix needs a review".into()
                ),
            ],
            "the reviewer judged the goal after the fixer's proposal committed"
        );

        let engine = h
            .builder(Arc::new(Scripted::completing()))
            .watch(feed, id("check:ci"), Duration::minutes(5))
            .capability(fixer)
            .capability(reviewer)
            .build();
        let report = engine.step(&goal).await.expect("a step");

        assert_eq!(judged_before_turn(&report), in_memory);
        for op in &operations {
            let receipt = h.store.receipt(&goal, op).await.expect("a receipt read");
            assert!(receipt.is_some(), "the engine committed under `{op}`");
        }
    });
}

#[test]
fn waiting_returns_on_a_commit_by_someone_else() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let h = Harness::new();
        let mut gated = todo("ship");
        gated.requires_decisions = [id::<DecisionScope>("release")].into();
        let goal = goal(&h.store, &[gated]).await;
        let engine = h
            .builder(Arc::new(Scripted::completing()))
            .options(EngineOptions {
                max_wait: Duration::minutes(10),
                ..EngineOptions::default()
            })
            .build();
        let report = engine.step(&goal).await.expect("a step");
        assert_ne!(report.decision.kind(), "continue");

        let store = h.store.clone();
        let goal_id = goal.clone();
        let other = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let add = Command::AddTodo {
                todo: todo("unrelated"),
            };
            submit(&*store, &goal_id, &owner(), start(), &add, &id("op-other"))
                .await
                .expect("a commit");
        });
        // The wait may last ten minutes; only the commit can end it within seconds.
        let woken =
            tokio::time::timeout(std::time::Duration::from_secs(30), engine.wait(&report)).await;
        other.await.expect("the writer");
        assert!(
            matches!(woken, Ok(Ok(()))),
            "woken by the commit, not the timeout"
        );
    });
}

/// An executor whose every turn fails the way a command that exits 1 does.
struct Failing;

#[async_trait]
impl Executor for Failing {
    async fn run(&self, _: &TurnRequest) -> Result<TurnReport, TurnError> {
        Err(TurnError::Exited {
            code: 1,
            detail: "`sh turn.sh` exit 1".into(),
        })
    }
}

/// A validator that fails every turn.
struct Rejecting;

#[async_trait]
impl Validator for Rejecting {
    fn actor(&self) -> Actor {
        Actor::Validator(id("ci"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation::failed("tests fail"))
    }
}

/// Steps `engine` on `goal`, jumping the clock to each wake time it is told to wait for, until
/// it is told to replan (at most 20 steps). Returns the settled turns' results, the pauses it
/// was told to take and the replan reason.
async fn fail_until_replan(
    h: &Harness,
    engine: &Engine,
    goal: &GoalId,
) -> (Vec<TurnResult>, Vec<Duration>, ReplanReason) {
    let mut results = Vec::new();
    let mut pauses = Vec::new();
    for _ in 0..20 {
        let report = engine.step(goal).await.expect("a step");
        if let Some(TurnOutcome::Settled { result, .. }) = report.turn {
            results.push(result.expect("a fresh settlement is classified"));
        }
        match report.decision {
            Decision::Wait {
                until: Some(until),
                reasons,
            } => {
                assert!(
                    matches!(&reasons[..], [WaitReason::Backoff { todo, until: u, .. }] if todo.as_str() == "edit" && *u == until),
                    "{reasons:?}"
                );
                pauses.push(until.since(h.clock.now()));
                h.clock.set(until);
            }
            Decision::Replan { reason } => return (results, pauses, reason),
            other => panic!("expected a backoff wait or a replan, got {other:?}"),
        }
    }
    panic!("no replan after 20 steps: {results:?}");
}

#[test]
fn an_executor_that_always_fails_backs_off_then_ends_at_a_replan_naming_the_todo() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        let engine = h.engine(Arc::new(Failing));

        let (results, pauses, reason) = fail_until_replan(&h, &engine, &goal).await;

        let failed = TurnResult::ExecutorFailed {
            class: FailureClass::Exited,
            detail: "`sh turn.sh` exit 1".into(),
        };
        assert_eq!(
            results,
            vec![failed; 3],
            "three attempts, as the policy says"
        );
        let policy = RetryPolicy::default();
        assert_eq!(pauses.len(), 2, "a pause after each failure but the last");
        for (n, pause) in (1..).zip(&pauses) {
            assert_eq!(*pause, policy.delay(&goal, &id("edit"), n));
            assert!(*pause >= Duration::seconds(30 << (n - 1)), "{pause}");
        }
        let ReplanReason::Obligation {
            cause:
                ObligationCause::TurnsFailing {
                    todo,
                    failures,
                    last,
                },
            ..
        } = reason
        else {
            panic!("expected the failing-turns obligation, got {reason:?}");
        };
        assert_eq!((todo.as_str(), failures, last.len()), ("edit", 3, 3));
        assert_eq!(h.count(&goal, "turn_settled").await, 3);
        // Nothing runs until the plan changes, however long one waits.
        h.clock.advance(Duration::hours(24));
        let report = engine.step(&goal).await.expect("a step");
        assert!(report.turn.is_none(), "{report:?}");
        assert_eq!(report.decision.kind(), "replan");
    });
}

#[test]
fn a_validator_that_always_fails_backs_off_then_ends_at_a_replan() {
    block_on(async {
        let h = Harness::new();
        let goal = goal(&h.store, &[todo("edit")]).await;
        let engine = Engine::builder(
            agent(),
            h.store.clone(),
            h.clock.clone(),
            Arc::new(Scripted::completing()),
            Arc::new(Rejecting),
        )
        .build();

        let (results, pauses, reason) = fail_until_replan(&h, &engine, &goal).await;

        assert_eq!(
            results,
            vec![
                TurnResult::ValidationFailed {
                    detail: "tests fail".into()
                };
                3
            ]
        );
        assert_eq!(pauses.len(), 2);
        assert!(
            matches!(&reason, ReplanReason::Obligation { cause: ObligationCause::TurnsFailing { todo, .. }, .. } if todo.as_str() == "edit"),
            "{reason:?}"
        );
    });
}
