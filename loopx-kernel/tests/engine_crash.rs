//! The engine killed with SIGKILL at each phase of a turn, on SQLite, with a real executor
//! process and its journal; then a fresh engine recovers from what the store and the journal
//! say.
//!
//! Phases: before the prepared-turn record, right after it, during the executor, during
//! validation, before the settlement commit, and after it (committed, not yet acknowledged).
//! Each runs once with an idempotent todo and once with one that is not. Whatever the phase:
//! no turn is charged twice, the acknowledged settlement of the turn before is never lost, the
//! invariants hold, and an effect that may have happened is never repeated: it goes to repair.
//!
//! The binary re-executes itself as the engine process: with `LOOPX_ENGINE_CHILD` set it runs
//! one step per todo and pauses (to be killed) at the phase named there.
#![allow(
    clippy::disallowed_methods,
    reason = "a crash test drives real processes and files; the kernel's own code stays sans-IO"
)]

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use loopx_kernel::engine::{Engine, TurnOutcome};
use loopx_kernel::seams::{
    AppendRequest, Appended, Clock, Store, TurnError, TurnReport, TurnRequest, Validation,
    Validator,
};
use loopx_kernel::{
    Actor, Command, Decision, Event, GoalId, GoalSpec, Limits, NewTodo, Policy, Priority, TurnId,
    VerdictOutcome, check_invariants, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::executor::CommandExecutor;
use loopx_provider::process::CommandSpec;
use loopx_store::{AppendHook, Hooked, SqliteStore};

const CHILD: &str = "LOOPX_ENGINE_CHILD";
const PHASES: [&str; 6] = [
    "before-journal",
    "after-journal",
    "during-executor",
    "during-validation",
    "before-settlement",
    "after-settlement",
];

fn main() -> ExitCode {
    if let Ok(phase) = std::env::var(CHILD) {
        let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_default());
        return match runtime().block_on(child(&dir, &phase)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("engine child: {error}");
                ExitCode::from(2)
            }
        };
    }
    let mut failed = 0;
    for phase in PHASES {
        for idempotent in [true, false] {
            let name = format!(
                "killed {phase} ({})",
                if idempotent {
                    "idempotent"
                } else {
                    "not idempotent"
                }
            );
            if std::panic::catch_unwind(|| crash_and_recover(phase, idempotent)).is_ok() {
                println!("test {name} ... ok");
            } else {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!(
        "\ntest result: {} passed; {failed} failed",
        PHASES.len() * 2 - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned()).unwrap_or_else(|_| panic!("`{text}` is a valid id"))
}

fn goal() -> GoalId {
    id("g")
}

// ----- the parent: crash, then recover ------------------------------------------------------

fn crash_and_recover(phase: &str, idempotent: bool) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    runtime().block_on(create(dir.path(), idempotent));

    let mut child = Process::new(std::env::current_exe().expect("this binary"))
        .arg(dir.path())
        .env(CHILD, phase)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the engine child starts");
    wait_for(&dir.path().join("paused"));
    child.kill().expect("SIGKILL");
    let output = child.wait_with_output().expect("reaped");
    if let Ok(pid) = std::fs::read_to_string(dir.path().join("exec.pid")) {
        let _ = Process::new("kill").args(["-KILL", pid.trim()]).status();
    }
    let acknowledged = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        acknowledged.contains("ack warmup"),
        "the first turn was acknowledged"
    );

    let decision = runtime().block_on(recover(dir.path()));
    runtime().block_on(check(dir.path(), phase, idempotent, &decision));
}

async fn create(dir: &Path, idempotent: bool) {
    let store = SqliteStore::create(dir.join("loopx.db")).expect("the store");
    let owner = Actor::Person(id("olivia"));
    let now = SystemClock.now();
    let spec = GoalSpec {
        id: goal(),
        objective: "survive crashes".into(),
        owner: id("olivia"),
        criteria: vec![],
        agents: [id("alice")].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    };
    submit(
        &store,
        &goal(),
        &owner,
        now,
        &Command::CreateGoal { spec },
        &id("create"),
    )
    .await
    .expect("created");
    let warmup =
        NewTodo::advance(id("warmup"), "a turn that completes").with_priority(Priority::P0);
    let mut work = NewTodo::advance(id("work"), "a turn with an external effect");
    work.idempotent = idempotent;
    work.depends_on = [id("warmup")].into();
    for (n, todo) in [warmup, work].into_iter().enumerate() {
        submit(
            &store,
            &goal(),
            &owner,
            now,
            &Command::AddTodo { todo },
            &id(&format!("add-{n}")),
        )
        .await
        .expect("added");
    }
}

/// A fresh engine over the reopened store and the same journal, stepping until it stops.
async fn recover(dir: &Path) -> Decision {
    let engine = engine(dir, Arc::new(open(dir)), "none");
    let mut last = None;
    for _ in 0..6 {
        let report = engine.step(&goal()).await.expect("a recovery step");
        let stop = report.decision.kind() != "continue";
        last = Some(report.decision);
        if stop {
            break;
        }
    }
    last.expect("at least one step")
}

async fn check(dir: &Path, phase: &str, idempotent: bool, decision: &Decision) {
    let store = open(dir);
    let state = store.load(&goal()).await.expect("load").expect("the goal");
    let events = store.events(&goal(), 0, usize::MAX).await.expect("events");
    let settled: Vec<&TurnId> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnSettled { turn, .. } => Some(turn),
            _ => None,
        })
        .collect();
    let mut distinct = settled.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        settled.len(),
        "{phase}: a turn settled twice"
    );
    assert_eq!(
        state.ledger.spent.turns,
        settled.len() as u64,
        "{phase}: charged once per settled turn"
    );
    assert!(
        state
            .todos
            .get(&id("warmup"))
            .is_some_and(|t| t.status.is_closed()),
        "{phase}: the acknowledged turn is kept"
    );
    assert!(
        check_invariants(&state, SystemClock.now()).is_empty(),
        "{phase}: invariants"
    );

    let effects = std::fs::read_to_string(dir.join("effects.log")).unwrap_or_default();
    let work_effects: Vec<&str> = effects.lines().filter(|l| l.starts_with("work ")).collect();
    let effect_may_have_happened = phase == "during-executor";
    if effect_may_have_happened && !idempotent {
        assert_eq!(
            decision.kind(),
            "repair",
            "{phase}: an uncertain effect goes to repair"
        );
        assert!(
            work_effects.len() <= 1,
            "{phase}: never repeated: {work_effects:?}"
        );
    } else {
        let work_done = state
            .todos
            .get(&id("work"))
            .is_some_and(|t| t.status.is_closed());
        assert!(
            work_done,
            "{phase}: the interrupted work finished (decision {decision:?})"
        );
        let turns: std::collections::BTreeSet<&str> =
            work_effects.iter().map(|l| &l[5..]).collect();
        assert_eq!(
            turns.len(),
            1,
            "{phase}: one turn id for the work's effects: {work_effects:?}"
        );
    }
}

fn wait_for(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    panic!("{} never appeared", path.display());
}

// ----- the child: an engine that stands still at one phase ---------------------------------

async fn child(dir: &Path, phase: &str) -> Result<(), Box<dyn std::error::Error>> {
    let store = Hooked {
        inner: open(dir),
        hook: Pause {
            phase: phase.to_owned(),
            marker: dir.join("paused"),
        },
    };
    let engine = engine(dir, Arc::new(store), phase);
    for _ in 0..2 {
        let report = engine.step(&goal()).await?;
        if let Some(TurnOutcome::Settled { todo, .. }) = &report.turn {
            println!("ack {todo}");
        }
    }
    Ok(())
}

fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(dir.join("loopx.db")).expect("the store opens")
}

/// The engine of `alice`: the executor appends `TODO TURN` to `effects.log` (the external
/// effect), and in phase `during-executor` then stands still for `work`.
fn engine(dir: &Path, store: Arc<dyn Store>, phase: &str) -> Engine {
    let script = format!(
        "echo \"$LOOPX_TODO $LOOPX_TURN\" >> {effects}; \
         if [ \"$LOOPX_TODO\" = work ] && [ \"{phase}\" = during-executor ]; then \
           echo $$ > {pid}; touch {paused}; sleep 60; fi",
        effects = dir.join("effects.log").display(),
        pid = dir.join("exec.pid").display(),
        paused = dir.join("paused").display(),
    );
    let command = CommandSpec::new("sh")
        .arg("-c")
        .arg(script)
        .allow_env("PATH");
    let executor = CommandExecutor::new(command, dir.join("journal"));
    let validator = Checker {
        pause: (phase == "during-validation").then(|| dir.join("paused")),
    };
    Engine::builder(
        id("alice"),
        store,
        Arc::new(SystemClock),
        Arc::new(executor),
        Arc::new(validator),
    )
    .build()
}

/// Passes every turn; in phase `during-validation` stands still for `work` first.
struct Checker {
    pause: Option<PathBuf>,
}

#[async_trait]
impl Validator for Checker {
    fn actor(&self) -> Actor {
        Actor::Validator(id("checker"))
    }

    async fn validate(&self, turn: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        if let Some(marker) = &self.pause
            && turn.todo.as_str() == "work"
        {
            stand_still(marker);
        }
        Ok(Validation {
            outcome: VerdictOutcome::Passed,
            summary: "checked".into(),
            evidence: vec![],
        })
    }
}

fn stand_still(marker: &Path) -> ! {
    let _ = std::fs::write(marker, "");
    loop {
        std::thread::sleep(StdDuration::from_secs(60));
    }
}

/// Stands still around the commit of `work`'s prepared turn or settlement, in its phase.
struct Pause {
    phase: String,
    marker: PathBuf,
}

impl Pause {
    fn concerns_work(request: &AppendRequest, name: &str) -> bool {
        request.events.iter().any(|e| {
            e.event.name() == name
                && matches!(&e.event, Event::TurnBegun { todo, .. } | Event::TurnSettled { todo, .. } if todo.as_str() == "work")
        })
    }
}

#[async_trait]
impl AppendHook<SqliteStore> for Pause {
    async fn before(&self, _: &SqliteStore, request: &AppendRequest) {
        let event = match self.phase.as_str() {
            "before-journal" => "turn_begun",
            "before-settlement" => "turn_settled",
            _ => return,
        };
        if Self::concerns_work(request, event) {
            stand_still(&self.marker);
        }
    }

    async fn after(&self, _: &SqliteStore, request: &AppendRequest, _: &Appended) {
        let event = match self.phase.as_str() {
            "after-journal" => "turn_begun",
            "after-settlement" => "turn_settled",
            _ => return,
        };
        if Self::concerns_work(request, event) {
            stand_still(&self.marker);
        }
    }
}
