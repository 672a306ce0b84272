//! Two sessions of one agent on one turn: two real engine instances of the same agent over one
//! store, each with the command executor over one shared journal (as two processes on one host
//! would have), racing on the turn one of them prepared. Whatever the order, the turn runs once
//! and is settled at most once: the session that resumes it takes it over under a new epoch,
//! and the other one is fenced — before it starts (by the journal) or while it runs (by its
//! refused renewal, which cancels its executor).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::channel::oneshot;
use loopx_kernel::ManualClock;
use loopx_kernel::engine::{Engine, EngineOptions, StepReport, TurnOutcome};
use loopx_kernel::seams::{
    Executor, Recovery, Store, TurnError, TurnReport, TurnRequest, Validation, Validator,
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

fn alice() -> AgentId {
    id("alice")
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// A goal worked by alice with one todo, `publish`, whose effect is not safe to repeat.
async fn goal(store: &MemoryStore) -> GoalId {
    let spec = GoalSpec::builder("g", "publish the release notes", "olivia")
        .agent(alice())
        .criterion(
            Criterion::new("published", "the notes are published", "tests", "repo")
                .expect("valid ids"),
        )
        .budget(Limits::UNLIMITED)
        .declared_identity()
        .build()
        .expect("a valid spec");
    let goal = spec.id.clone();
    let owner = spec.owner_actor();
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
    let todo = NewTodo::advance(id("publish"), "publish the notes");
    submit(
        store,
        &goal,
        &owner,
        start(),
        &Command::AddTodo { todo },
        &id("add"),
    )
    .await
    .expect("the todo is added");
    goal
}

/// Passes every turn.
struct Passing;

#[async_trait]
impl Validator for Passing {
    fn actor(&self) -> Actor {
        Actor::Validator(id("ci"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation {
            outcome: VerdictOutcome::Passed,
            summary: "published".into(),
            evidence: vec![],
        })
    }
}

/// The command executor of a session that stalls between preparing its turn and starting it:
/// it says when it got there and starts the command only when let go.
struct Stalled {
    inner: CommandExecutor,
    reached: Mutex<Option<oneshot::Sender<()>>>,
    go: Mutex<Option<oneshot::Receiver<()>>>,
}

#[async_trait]
impl Executor for Stalled {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        let reached = self.reached.lock().expect("lock").take();
        let go = self.go.lock().expect("lock").take();
        if let (Some(reached), Some(go)) = (reached, go) {
            let _ = reached.send(());
            let _ = go.await;
        }
        self.inner.run(turn).await
    }

    async fn recover(&self, turn: &TurnRequest) -> Recovery {
        self.inner.recover(turn).await
    }
}

struct Host {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        Host {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(ManualClock::new(start())),
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn runs_file(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// The command executor over the host's one journal; every run of the turn's command
    /// appends a line to the runs file, then the command does `then`.
    fn executor(&self, then: &str) -> CommandExecutor {
        let script = format!("echo run >> '{}'; {then}", self.runs_file().display());
        let command = CommandSpec::new("sh").arg("-c").arg(script);
        CommandExecutor::new(command, self.dir.path().join("journal"))
    }

    /// One session (engine instance) of alice.
    fn session(&self, executor: Arc<dyn Executor>) -> Engine {
        Engine::builder(
            alice(),
            self.store.clone(),
            self.clock.clone(),
            executor,
            Arc::new(Passing),
        )
        .options(EngineOptions {
            lease_ttl: Some(Duration::minutes(10)),
            renew_every: Duration::minutes(1),
            ..EngineOptions::default()
        })
        .build()
    }

    async fn count(&self, goal: &GoalId, name: &str) -> usize {
        let events = self
            .store
            .events(goal, 0, usize::MAX)
            .await
            .expect("events");
        events.iter().filter(|e| e.event.name() == name).count()
    }
}

fn runs(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

fn lost_to_a_newer_epoch(report: &StepReport) -> bool {
    matches!(
        &report.turn,
        Some(TurnOutcome::LeaseLost { refusal, .. }) if refusal.code() == "stale_lease_epoch"
    )
}

/// Session A prepares the turn and stalls before starting it; session B resumes it, takes it
/// over, finds it never started, runs it and settles it. When A wakes, the journal refuses to
/// start the turn under its dead epoch, and A settles nothing.
#[test]
fn a_session_fenced_before_it_starts_never_runs_the_turn() {
    block_on(async {
        let host = Host::new();
        let goal = goal(&host.store).await;
        let (reached_tx, reached) = oneshot::channel();
        let (go, go_rx) = oneshot::channel();
        let a = host.session(Arc::new(Stalled {
            inner: host.executor("true"),
            reached: Mutex::new(Some(reached_tx)),
            go: Mutex::new(Some(go_rx)),
        }));
        let b = host.session(Arc::new(host.executor("true")));

        let first = a.step(&goal);
        let second = async {
            reached.await.expect("session A prepares its turn");
            let report = b.step(&goal).await.expect("session B steps");
            let _ = go.send(());
            report
        };
        let (first, second) = tokio::join!(first, second);
        let first = first.expect("session A steps");

        assert!(
            matches!(
                &second.turn,
                Some(TurnOutcome::Settled { resumed: true, .. })
            ),
            "B resumes and settles the turn: {:?}",
            second.turn
        );
        assert!(
            lost_to_a_newer_epoch(&first),
            "A is fenced: {:?}",
            first.turn
        );
        assert_eq!(runs(&host.runs_file()), 1, "the turn ran once");
        assert_eq!(host.count(&goal, "turn_taken_over").await, 1);
        assert_eq!(host.count(&goal, "turn_settled").await, 1);
        let state = host.store.load(&goal).await.expect("load").expect("goal");
        assert_eq!(state.ledger.spent.turns, 1, "charged once");
    });
}

/// Session A is running the turn when session B resumes it: B takes it over, the journal says
/// the turn started and never reported, so B sends it to repair instead of running it again;
/// A's next renewal is refused under its dead epoch, which stops its executor, and A settles
/// nothing either.
#[test]
fn a_session_fenced_mid_turn_stops_and_the_started_turn_goes_to_repair() {
    block_on(async {
        let host = Host::new();
        let goal = goal(&host.store).await;
        let executor = Arc::new(host.executor("sleep 30"));
        let a = host.session(executor.clone());
        let b = host.session(executor);

        let first = a.step(&goal);
        let second = async {
            // Wait until A's command runs (its start is journalled before it is spawned).
            while runs(&host.runs_file()) == 0 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let report = b.step(&goal).await.expect("session B steps");
            // Time for A's next renewal, which the take-over makes stale.
            host.clock.advance(Duration::minutes(1));
            report
        };
        let (first, second) = tokio::join!(first, second);
        let first = first.expect("session A steps");

        assert_eq!(second.decision.kind(), "repair", "{:?}", second.decision);
        assert!(
            matches!(&second.turn, Some(TurnOutcome::Unknown { .. })),
            "{:?}",
            second.turn
        );
        assert!(
            lost_to_a_newer_epoch(&first),
            "A is fenced: {:?}",
            first.turn
        );
        assert_eq!(runs(&host.runs_file()), 1, "the turn ran once");
        assert_eq!(host.count(&goal, "turn_taken_over").await, 1);
        assert_eq!(host.count(&goal, "turn_settled").await, 0);
        let state = host.store.load(&goal).await.expect("load").expect("goal");
        assert_eq!(state.ledger.spent.turns, 0, "nothing charged");
    });
}
