//! An engine killed with SIGKILL mid-effect, on `SQLite`, with the real GitHub REST client
//! against a local HTTP stand-in that replays GitHub's shapes; then a fresh engine recovers.
//!
//! Phases: right after the effect's intent committed (the comment not yet posted), and right
//! after the comment was posted (its record not yet committed). In both, the fresh engine finds
//! the intent pending and resolves it by reading it back — absent under the still-live lease:
//! posted once; committed: recorded without posting — and the stand-in shows the comment
//! posted exactly once, the intent recorded once, and the turn settled. A third phase kills
//! the engine right after the intent with a lease that then expires: the intent is fenced, read
//! back absent and recorded absent, and nobody posts it (the turn goes to repair as an unknown
//! outcome, as any expired turn on work that is not idempotent does).
//!
//! The binary re-executes itself as the engine process: with `LOOPX_EFFECT_CHILD` set it runs
//! one step and stands still (to be killed) at the phase named there.
#![allow(
    clippy::disallowed_methods,
    reason = "a crash test drives real processes, files and sockets"
)]

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use loopx_kernel::engine::{Engine, EngineOptions};
use loopx_kernel::seams::{
    AppendRequest, Appended, Clock, EffectRequest, Executor, Recovery, Store, TurnError,
    TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::{
    Actor, Command, Event, GoalId, GoalSpec, Limits, NewTodo, Policy, SourceId, TodoStatus,
    check_invariants, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::GitHubClient;
use loopx_store::{AppendHook, Hooked, SqliteStore};

#[path = "support/github.rs"]
mod standin;
use standin::{Reply, Seen, ok, serve};

const CHILD: &str = "LOOPX_EFFECT_CHILD";
const PHASES: [&str; 3] = ["after-intent", "after-perform", "expired-after-intent"];
/// The child's lease in the phase whose lease expires while it stands still.
const SHORT_LEASE_MS: i64 = 3_000;
const COMMENTS: &str = "/repos/acme/cli/issues/12/comments";

fn main() -> ExitCode {
    if let Ok(phase) = std::env::var(CHILD) {
        let mut args = std::env::args().skip(1);
        let dir = PathBuf::from(args.next().unwrap_or_default());
        let base = args.next().unwrap_or_default();
        return match runtime().block_on(child(&dir, &base, &phase)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("engine child: {error}");
                ExitCode::from(2)
            }
        };
    }
    let mut failed = 0;
    for phase in PHASES {
        let name = format!("killed {phase}");
        if std::panic::catch_unwind(|| crash_and_recover(phase)).is_ok() {
            println!("test {name} ... ok");
        } else {
            println!("test {name} ... FAILED");
            failed += 1;
        }
    }
    println!(
        "\ntest result: {} passed; {failed} failed",
        PHASES.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

// ----- the parent: the stand-in, a crash, a recovery ----------------------------------------

/// GitHub's issue comments for `acme/cli#12`: `POST` appends one, `GET` lists them.
fn github(comments: Arc<Mutex<Vec<String>>>) -> standin::Handler {
    Arc::new(move |seen: &Seen| {
        let mut comments = comments.lock().expect("comments");
        if seen.method == "POST" && seen.path == COMMENTS {
            let body: serde_json::Value = serde_json::from_str(&seen.body).expect("json");
            comments.push(body["body"].as_str().unwrap_or_default().to_owned());
            return Reply {
                status: 201,
                headers: vec![],
                body: "{}".into(),
                delay: StdDuration::ZERO,
            };
        }
        if seen.method == "GET" && seen.path.starts_with(COMMENTS) {
            let list: Vec<serde_json::Value> = comments
                .iter()
                .map(|b| serde_json::json!({ "body": b }))
                .collect();
            return ok(&serde_json::to_string(&list).expect("json"));
        }
        Reply {
            status: 404,
            headers: vec![],
            body: "{}".into(),
            delay: StdDuration::ZERO,
        }
    })
}

fn crash_and_recover(phase: &str) {
    let runtime = runtime();
    let comments = Arc::new(Mutex::new(Vec::new()));
    let server = runtime.block_on(serve(github(comments.clone())));
    let dir = tempfile::tempdir().expect("a temporary directory");
    runtime.block_on(create(dir.path()));

    let mut child = Process::new(std::env::current_exe().expect("this binary"))
        .arg(dir.path())
        .arg(&server.base)
        .env(CHILD, phase)
        .stdout(Stdio::null())
        .spawn()
        .expect("the engine child starts");
    wait_for(&dir.path().join("paused"));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");

    let posted_before = comments.lock().expect("comments").len();
    assert_eq!(
        posted_before,
        usize::from(phase == "after-perform"),
        "{phase}: the child stood still where it should"
    );

    runtime.block_on(async {
        let store = Arc::new(SqliteStore::open(dir.path().join("loopx.db")).expect("the store"));
        if phase == "expired-after-intent" {
            outlive_the_lease(&*store).await;
        }
        let engine = engine(store.clone(), &server.base, None);
        for _ in 0..4 {
            let report = engine.step(&goal()).await.expect("a recovery step");
            if report.decision.kind() != "continue" {
                break;
            }
        }
        let posted = comments.lock().expect("comments").clone();
        if phase == "expired-after-intent" {
            check_fenced(&*store, &posted).await;
        } else {
            check(&*store, phase, &posted).await;
        }
    });
}

async fn check(store: &dyn Store, phase: &str, comments: &[String]) {
    assert_eq!(
        comments.len(),
        1,
        "{phase}: the comment was posted exactly once: {comments:?}"
    );
    assert!(
        comments[0].contains("loopx-effect:"),
        "{phase}: it carries its key"
    );
    let state = store.load(&goal()).await.expect("load").expect("the goal");
    let events = store.events(&goal(), 0, usize::MAX).await.expect("events");
    let count = |name: &str| events.iter().filter(|e| e.event.name() == name).count();
    // A restarted engine takes the turn over under a new epoch: an intent the crashed one left
    // is read back and recorded (absent, or performed), and the effect is intended again under
    // the new epoch only when it was absent. Either way it was performed once (above).
    let intended = count("effect_intended");
    assert!(
        (1..=2).contains(&intended),
        "{phase}: intended {intended} times"
    );
    assert_eq!(
        count("effect_recorded"),
        intended,
        "{phase}: every intent recorded"
    );
    assert_eq!(count("turn_settled"), 1, "{phase}: settled once");
    let recorded = events.iter().rev().find_map(|e| match &e.event {
        Event::EffectRecorded { outcome, .. } => Some(*outcome),
        _ => None,
    });
    assert_eq!(
        recorded,
        Some(loopx_kernel::EffectOutcome::Performed),
        "{phase}: recorded as performed"
    );
    assert!(state.pending_effects.is_empty(), "{phase}: nothing pending");
    assert!(
        matches!(
            state.todos.get(&id("comment")).map(|t| &t.status),
            Some(TodoStatus::Done { .. })
        ),
        "{phase}: the turn completed"
    );
    assert!(
        check_invariants(&state, SystemClock.now()).is_empty(),
        "{phase}: invariants"
    );
}

/// Waits until the system clock is past the child's lease: its intent is then fenced.
async fn outlive_the_lease(store: &dyn Store) {
    let state = store.load(&goal()).await.expect("load").expect("the goal");
    let expires = state
        .todos
        .get(&id("comment"))
        .and_then(|t| t.lease.as_ref().map(|l| l.expires_at))
        .expect("the child's lease");
    for _ in 0..400 {
        if SystemClock.now() > expires {
            return;
        }
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
    panic!("the lease never expired");
}

/// The fenced intent was read back absent and recorded absent; nothing was posted.
async fn check_fenced(store: &dyn Store, comments: &[String]) {
    assert!(
        comments.is_empty(),
        "a fenced intent is never posted: {comments:?}"
    );
    let state = store.load(&goal()).await.expect("load").expect("the goal");
    let events = store.events(&goal(), 0, usize::MAX).await.expect("events");
    let recorded: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::EffectRecorded { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, vec![loopx_kernel::EffectOutcome::Absent]);
    assert!(state.pending_effects.is_empty(), "nothing pending");
    let decision = loopx_kernel::decide(&state, &id("alice"), SystemClock.now());
    assert!(
        matches!(
            decision,
            loopx_kernel::Decision::Repair {
                issue: loopx_kernel::RepairIssue::OutcomeUnknown { .. }
            }
        ),
        "{decision:?}"
    );
}

async fn create(dir: &Path) {
    let store = SqliteStore::create(dir.join("loopx.db")).expect("the store");
    let owner = Actor::Person(id("olivia"));
    let now = SystemClock.now();
    let spec = GoalSpec {
        id: goal(),
        objective: "tell the pull request".into(),
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
    let todo = NewTodo::advance(id("comment"), "comment on the pull request");
    submit(
        &store,
        &goal(),
        &owner,
        now,
        &Command::AddTodo { todo },
        &id("add"),
    )
    .await
    .expect("added");
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

// ----- the engine, in the child and in the recovery -------------------------------------------

/// The engine of `alice`: a turn asks for one comment on `acme/cli#12`, performed by the real
/// REST client against the stand-in at `base`.
fn engine(store: Arc<dyn Store>, base: &str, ttl: Option<loopx_kernel::Duration>) -> Engine {
    let client = GitHubClient::new(
        SourceId::new("github").expect("id"),
        base,
        None,
        loopx_kernel::Duration::seconds(5),
        Arc::new(SystemClock),
    )
    .expect("the client");
    Engine::builder(
        id("alice"),
        store,
        Arc::new(SystemClock),
        Arc::new(Commenting),
        Arc::new(Checker),
    )
    .effector(Arc::new(client))
    .options(EngineOptions {
        lease_ttl: ttl,
        ..EngineOptions::default()
    })
    .build()
}

/// Asks for the comment and keeps its report, as an executor with a journal does: a turn found
/// in flight after a crash is finished, not run again.
struct Commenting;

impl Commenting {
    fn report() -> TurnReport {
        TurnReport::complete("CI is green").with_effect(EffectRequest {
            kind: "github.comment".into(),
            target: "acme/cli#12".into(),
            params: [
                ("repo", "acme/cli"),
                ("number", "12"),
                ("body", "CI is green."),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        })
    }
}

#[async_trait]
impl Executor for Commenting {
    async fn run(&self, _: &TurnRequest) -> Result<TurnReport, TurnError> {
        Ok(Self::report())
    }

    async fn recover(&self, _: &TurnRequest) -> Recovery {
        Recovery::Finished(Self::report())
    }
}

struct Checker;

#[async_trait]
impl Validator for Checker {
    fn actor(&self) -> Actor {
        Actor::Validator(id("checker"))
    }

    async fn validate(&self, _: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        Ok(Validation::passed("checked"))
    }
}

async fn child(dir: &Path, base: &str, phase: &str) -> Result<(), Box<dyn std::error::Error>> {
    let store = Hooked {
        inner: SqliteStore::open(dir.join("loopx.db"))?,
        hook: Pause {
            phase: phase.to_owned(),
            marker: dir.join("paused"),
        },
    };
    let ttl = (phase == "expired-after-intent")
        .then(|| loopx_kernel::Duration::from_millis(SHORT_LEASE_MS));
    engine(Arc::new(store), base, ttl).step(&goal()).await?;
    Ok(())
}

/// Stands still right after the intent commits (`after-intent`), or right before the record
/// commits, once the comment was posted (`after-perform`).
struct Pause {
    phase: String,
    marker: PathBuf,
}

fn holds(request: &AppendRequest, name: &str) -> bool {
    request.events.iter().any(|e| e.event.name() == name)
}

fn stand_still(marker: &Path) -> ! {
    let _ = std::fs::write(marker, "");
    loop {
        std::thread::sleep(StdDuration::from_secs(60));
    }
}

#[async_trait]
impl AppendHook<SqliteStore> for Pause {
    async fn before(&self, _: &SqliteStore, request: &AppendRequest) {
        if self.phase == "after-perform" && holds(request, "effect_recorded") {
            stand_still(&self.marker);
        }
    }

    async fn after(&self, _: &SqliteStore, request: &AppendRequest, _: &Appended) {
        if self.phase.ends_with("after-intent") && holds(request, "effect_intended") {
            stand_still(&self.marker);
        }
    }
}
