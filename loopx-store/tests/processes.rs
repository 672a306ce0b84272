//! The durable backends under real processes: a crash test (a child settles turns in a loop and
//! is killed with SIGKILL at random moments; on PostgreSQL the server is also stopped with an
//! immediate shutdown mid-load a few times) and a race test (16 threads and 4 processes compete
//! for leases over 1,000 todos), on SQLite and, with the `postgres` feature, on PostgreSQL; and
//! a SQLite waiter woken by another process's commit.
//!
//! The binary re-executes itself as the child processes: with `LOOPX_STORE_CHILD` set it runs
//! one child role instead of the tests. `LOOPX_TEST_SEED` replays a run's random choices (each
//! run prints its seed); `LOOPX_CRASH_ROUNDS` changes the number of kills.

use loopx_kernel::{SubmitError, submit};
use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::io::{BufRead, BufReader, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration as StdDuration, Instant, SystemTime, UNIX_EPOCH};

use loopx_kernel::StoreExt;
use loopx_kernel::seams::{AppendRequest, Commit, Store};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Duration, Event, GoalId, GoalSpec, GoalState,
    Limits, NewTodo, OperationId, PersonId, Policy, Refusal, Settlement, Snapshot, SourceId,
    Timestamp, TodoId, Transition, TurnId, Verdict, VerdictOutcome, check_invariants, frontier,
    next_wake,
};
use loopx_provider::clock::SystemClock;
use loopx_store::{SqliteOptions, SqliteStore};
use tokio::runtime::Runtime;

#[cfg(feature = "postgres")]
mod support;

const CHILD: &str = "LOOPX_STORE_CHILD";

// ----- a tiny harness -----------------------------------------------------------------------

fn main() -> ExitCode {
    if let Ok(role) = env::var(CHILD) {
        let args: Vec<String> = env::args().skip(1).collect();
        let code = match role.as_str() {
            "crash" => crash_child(&args, false),
            "reopening-crash" => crash_child(&args, true),
            "group-crash" => group_crash_child(&args),
            "race" => race_child(&args),
            "wake" => wake_child(&args),
            other => {
                eprintln!("unknown child role `{other}`");
                2
            }
        };
        return ExitCode::from(code);
    }
    let tests: Vec<(&str, fn())> = vec![
        ("crash_loses_no_acknowledged_commit", crash),
        ("crash_mid_group_loses_no_acknowledged_commit", group_crash),
        (
            "kills_among_concurrent_writers_never_lock_the_store",
            concurrent_crash,
        ),
        ("races_never_double_lease_or_settle_stale", races),
        (
            "a_sqlite_waiter_wakes_on_another_process_commit_before_the_fallback",
            wake_across_processes,
        ),
        #[cfg(feature = "postgres")]
        (
            "postgres_crash_loses_no_acknowledged_commit",
            postgres::crash,
        ),
        #[cfg(feature = "postgres")]
        (
            "postgres_races_never_double_lease_or_settle_stale",
            postgres::races,
        ),
    ];
    let args: Vec<String> = env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<_> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let (mut passed, mut failed) = (0, 0);
    for (name, test) in &selected {
        let started = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(test));
        let took = started.elapsed().as_secs_f64();
        if result.is_ok() {
            passed += 1;
            println!("test {name} ... ok ({took:.1}s)");
        } else {
            failed += 1;
            println!("test {name} ... FAILED ({took:.1}s)");
        }
    }
    let filtered = tests.len() - selected.len();
    let verdict = if failed == 0 { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {failed} failed; 0 ignored; 0 measured; {filtered} filtered out\n"
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// xorshift64*: reproducible random choices from a printed seed.
struct Rng(u64);

impl Rng {
    fn seeded(name: &str) -> Rng {
        let seed = env::var("LOOPX_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos();
                u64::try_from(nanos % u128::from(u64::MAX)).unwrap() | 1
            });
        println!("{name}: LOOPX_TEST_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn wall_clock() -> Timestamp {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Timestamp::from_millis(i64::try_from(millis).unwrap())
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Where a store lives, as passed to child processes: `sqlite:<path>` or `postgres:<url>`.
#[derive(Debug, Clone)]
enum Target {
    Sqlite(PathBuf),
    #[cfg(feature = "postgres")]
    Postgres(String),
}

impl Target {
    fn arg(&self) -> String {
        match self {
            Target::Sqlite(path) => format!("sqlite:{}", path.display()),
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => format!("postgres:{url}"),
        }
    }

    /// Every event `goal` recorded, from its archive (the events compaction moved out) and
    /// its kept history.
    async fn history(&self, goal: &GoalId) -> Vec<loopx_kernel::RecordedEvent> {
        match self {
            Target::Sqlite(path) => {
                let store = SqliteStore::open(path).unwrap();
                loopx_store::history(&store, goal, 0, usize::MAX)
                    .await
                    .unwrap()
            }
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => {
                let store = loopx_store::PostgresStore::connect_with(
                    url,
                    loopx_store::PostgresOptions::default().max_connections(1),
                    tokio_postgres::NoTls,
                )
                .await
                .unwrap();
                loopx_store::history(&store, goal, 0, usize::MAX)
                    .await
                    .unwrap()
            }
        }
    }

    fn parse(arg: &str) -> Target {
        match arg.split_once(':') {
            Some(("sqlite", path)) => Target::Sqlite(PathBuf::from(path)),
            #[cfg(feature = "postgres")]
            Some(("postgres", url)) => Target::Postgres(url.to_owned()),
            _ => panic!("unknown store `{arg}`"),
        }
    }

    /// Opens the store, with a snapshot every `snapshot_every` events.
    #[cfg_attr(
        not(feature = "postgres"),
        allow(clippy::unused_async, reason = "opening SQLite does not wait")
    )]
    async fn open(
        &self,
        snapshot_every: u64,
    ) -> Result<Box<dyn Store>, loopx_kernel::seams::StoreError> {
        match self {
            Target::Sqlite(path) => {
                let options = SqliteOptions::default().snapshot_every(snapshot_every);
                Ok(Box::new(SqliteStore::create_with(path, options)?))
            }
            #[cfg(feature = "postgres")]
            Target::Postgres(url) => {
                let options = loopx_store::PostgresOptions::default()
                    .snapshot_every(snapshot_every)
                    .max_connections(2);
                Ok(Box::new(
                    loopx_store::PostgresStore::connect_with(url, options, tokio_postgres::NoTls)
                        .await?,
                ))
            }
        }
    }
}

fn owner() -> Actor {
    Actor::Person(PersonId::new("olivia").unwrap())
}

fn validator() -> Actor {
    Actor::Validator(SourceId::new("ci").unwrap())
}

fn spec(goal: &GoalId, agents: &[AgentId]) -> GoalSpec {
    GoalSpec {
        id: goal.clone(),
        objective: format!("survive {goal}"),
        owner: PersonId::new("olivia").unwrap(),
        criteria: vec![],
        agents: agents.iter().cloned().collect(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}

fn settlement(todo: &TodoId, epoch: u64, turn: &TurnId, transition: Transition) -> Command {
    Command::SettleTurn(Settlement {
        todo: todo.clone(),
        epoch,
        turn: turn.clone(),
        verdict: Verdict {
            validator: validator(),
            outcome: VerdictOutcome::Passed,
            summary: "checked".into(),
            signature: None,
        },
        evidence: vec![],
        observations: vec![],
        transition,
        usage: Amounts {
            tokens: 10,
            ..Amounts::ZERO
        },
        failure: None,
    })
}

fn spawn_child(role: &str, args: &[String]) -> Child {
    Process::new(env::current_exe().unwrap())
        .env(CHILD, role)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Forwards every complete line of `stream` (a torn last line is dropped) to a channel.
fn lines_of(
    stream: impl Read + Send + 'static,
) -> (mpsc::Receiver<String>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if line.last() == Some(&b'\n') => {
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                    if tx.send(text).is_err() {
                        break;
                    }
                }
                Ok(_) => break,
            }
        }
    });
    (rx, reader)
}

fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut text);
    }
    text
}

// ----- wake ---------------------------------------------------------------------------------

/// How long the waiter's fallback re-read waits: the waiter must wake well before it.
const WAKE_FALLBACK: StdDuration = StdDuration::from_secs(10);

/// A child that opens the SQLite store at `args[0]`, adds a todo to goal `args[1]` and exits.
fn wake_child(args: &[String]) -> u8 {
    let (Some(path), Some(goal)) = (args.first(), args.get(1)) else {
        eprintln!("wake: a store path and a goal");
        return 2;
    };
    let goal: GoalId = goal.parse().unwrap();
    runtime().block_on(async {
        let store = SqliteStore::open(path).unwrap();
        let todo = NewTodo::advance(TodoId::new("woken").unwrap(), "wake the waiter");
        store
            .goal(&goal)
            .submit(&owner(), wall_clock(), &Command::AddTodo { todo })
            .await
            .unwrap();
    });
    0
}

/// A waiter on a SQLite store whose fallback re-read comes only every 10 s returns the goal
/// another process committed to before the fallback could have seen it: the commit woke it
/// (the file watch on the write-ahead log), and what it returns really moved.
fn wake_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wake.db");
    let goal = GoalId::new("waited-on").unwrap();
    runtime().block_on(async {
        let options = SqliteOptions::default().change_poll(Duration::seconds(10));
        let store = SqliteStore::create_with(&path, options).unwrap();
        let created = store
            .goal(&goal)
            .create(&spec(&goal, &[worker_agent()]), wall_clock())
            .await
            .unwrap();
        let revision = created.state.revision;
        let waiter = {
            let store = store.clone();
            let goal = goal.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let moved = store
                    .changed(&[(goal, revision)], Duration::seconds(30))
                    .await
                    .unwrap();
                (moved, started.elapsed())
            })
        };
        // The waiter is asleep (its first read found nothing) before the child starts.
        tokio::time::sleep(StdDuration::from_millis(200)).await;
        let mut child = spawn_child(
            "wake",
            &[path.display().to_string(), goal.as_str().to_owned()],
        );
        let status = tokio::task::spawn_blocking(move || {
            let status = child.wait().unwrap();
            (status, stderr_of(&mut child))
        })
        .await
        .unwrap();
        assert!(status.0.success(), "the child failed: {}", status.1);
        let (moved, slept) = waiter.await.unwrap();
        assert_eq!(
            moved,
            vec![goal.clone()],
            "the waiter returns the moved goal"
        );
        assert!(
            slept < WAKE_FALLBACK,
            "woken by the commit, not by the fallback re-read ({slept:?})"
        );
        let state = store.load(&goal).await.unwrap().unwrap();
        assert!(state.revision > revision);
    });
}

// ----- crash --------------------------------------------------------------------------------

const CRASH_GOALS: [&str; 2] = ["crash-a", "crash-b"];

fn worker_agent() -> AgentId {
    AgentId::new("worker").unwrap()
}

/// The next step of the crash child on `state`: finish its own lease's turn, or claim the next
/// todo, or add the first one. Operation ids follow from the state, so a restarted child retries
/// exactly the step its predecessor may have been killed in.
fn next_step(state: &GoalState, now: Timestamp) -> (Command, String) {
    let me = worker_agent();
    let mine = state
        .todos
        .values()
        .find(|t| t.lease.as_ref().is_some_and(|l| l.holder == me));
    if let Some(todo) = mine {
        let lease = todo.lease.as_ref().unwrap();
        let epoch = lease.epoch;
        let turn = TurnId::new(format!("turn-{}-{epoch}", todo.id)).unwrap();
        if lease.turn.is_none() {
            let command = Command::BeginTurn {
                todo: todo.id.clone(),
                epoch,
                turn,
                reserve: None,
            };
            return (command, format!("begin-{}-{epoch}", todo.id));
        }
        let n: u64 = todo.id.as_str()[1..].parse().unwrap();
        // Every fourth todo is kept open once, so it is claimed again under a new epoch.
        let transition = if n % 4 == 3 && epoch == 1 {
            Transition::KeepOpen
        } else {
            let next = NewTodo::advance(TodoId::new(format!("t{}", n + 1)).unwrap(), "carry on");
            Transition::Complete {
                continuation: Continuation::Successors(vec![next]),
            }
        };
        return (
            settlement(&todo.id, epoch, &turn, transition),
            format!("settle-{}-{epoch}", todo.id),
        );
    }
    if let Some(todo) = frontier(state, &me, now).first() {
        let epoch = state.todos.get(todo).map_or(0, |t| t.last_epoch) + 1;
        let command = Command::Claim {
            todo: todo.clone(),
            ttl: Some(Duration::hours(1)),
            workspace: None,
            grant_reason: None,
        };
        return (command, format!("claim-{todo}-{epoch}"));
    }
    let first = NewTodo::advance(TodoId::new("t0").unwrap(), "start");
    (Command::AddTodo { todo: first }, "add-t0".into())
}

/// The crash child: `args[0]` is the store, the rest the goals it works in turn (by default
/// [`CRASH_GOALS`]). With `reopen` it opens the store anew for every step, as each `loopx`
/// command does, so that every step first reads the write-ahead log the others leave.
fn crash_child(args: &[String], reopen: bool) -> u8 {
    let target = Target::parse(&args[0]);
    let goals: Vec<GoalId> = if args.len() > 1 {
        args[1..]
            .iter()
            .map(|g| GoalId::new(g.as_str()).unwrap())
            .collect()
    } else {
        CRASH_GOALS
            .iter()
            .map(|g| GoalId::new(*g).unwrap())
            .collect()
    };
    let rt = runtime();
    let store = match rt.block_on(target.open(8)) {
        Ok(store) => store,
        Err(error) => {
            eprintln!("open failed: {error}");
            return 3;
        }
    };
    let store = &*store;
    rt.block_on(async {
        for goal in &goals {
            if let Err(code) = create_crash_goal(store, goal).await {
                return code;
            }
        }
        println!("ready");
        for i in 0_usize.. {
            let goal = &goals[i % goals.len()];
            let stepped = if reopen {
                match target.open(8).await {
                    Ok(store) => crash_step(&*store, goal).await,
                    Err(error) => {
                        eprintln!("open failed: {error}");
                        Err(3)
                    }
                }
            } else {
                crash_step(store, goal).await
            };
            if let Err(code) = stepped {
                return code;
            }
        }
        0
    })
}

/// Creates `goal` for the crash children's worker and prints its acknowledgement; `Err` with
/// the child's exit code when it fails.
async fn create_crash_goal<S: Store + ?Sized>(store: &S, goal: &GoalId) -> Result<(), u8> {
    let create = Command::CreateGoal {
        spec: spec(goal, &[worker_agent()]),
    };
    let op = OperationId::new("create").unwrap();
    if let Err(error) = submit(store, goal, &owner(), wall_clock(), &create, &op).await {
        eprintln!("create failed: {error}");
        return Err(4);
    }
    println!("ack {goal} create");
    Ok(())
}

/// Commits the next step of `goal` as the crash children's worker and prints its
/// acknowledgement once `submit` returned; `Err` with the child's exit code when it fails.
async fn crash_step<S: Store + ?Sized>(store: &S, goal: &GoalId) -> Result<(), u8> {
    let now = wall_clock();
    let state = match store.load(goal).await {
        Ok(Some(state)) => state,
        other => {
            eprintln!("load failed: {other:?}");
            return Err(5);
        }
    };
    let (command, op) = next_step(&state, now);
    let operation = OperationId::new(op.clone()).unwrap();
    let worker = Actor::Agent(worker_agent());
    if let Err(error) = submit(store, goal, &worker, now, &command, &operation).await {
        eprintln!("`{op}` on {goal} failed: {error}");
        return Err(6);
    }
    println!("ack {goal} {op}");
    Ok(())
}

fn crash() {
    let rounds: u64 = env::var("LOOPX_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Sqlite(dir.path().join("crash.db"));
    let kills = crash_rounds(&target, &Crash::Sequential, rounds, &mut |_| None).kills;
    assert!(kills >= 50, "only {kills} kills");
}

/// How many crash children write to one store at once in [`concurrent_crash`].
const WRITERS: usize = 4;

/// The crash test with concurrent writers: [`WRITERS`] processes commit to one SQLite store,
/// each on a goal of its own and opening the store for every step as `loopx` does, and one of them at a time is killed with SIGKILL at a random
/// moment while the others go on, then started again. A killed writer leaves frames in the
/// write-ahead log that the next writer partly overwrites; that is a crash's ordinary tail,
/// never damage. After every kill the store opens with the default options (no loss
/// accepted), the killed writer's goal keeps every acknowledged commit, replays to what loads,
/// re-verifies command by command (`doctor --verify`) and agrees with its rows; no writer is
/// ever refused on its own.
fn concurrent_crash() {
    let kills: u64 = env::var("LOOPX_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let mut rng = Rng::seeded("concurrent-crash");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("concurrent.db");
    let target = Target::Sqlite(path.clone());
    let goals: Vec<GoalId> = (0..WRITERS)
        .map(|n| GoalId::new(format!("writer-{n}")).unwrap())
        .collect();
    let mut writers: Vec<Writer> = goals.iter().map(|g| Writer::start(&target, g)).collect();
    let mut acked: BTreeSet<(String, String)> = BTreeSet::new();
    for kill in 0..kills {
        let n = usize::try_from(rng.below(WRITERS as u64)).unwrap();
        thread::sleep(StdDuration::from_millis(rng.below(30)));
        let new = writers[n].kill(kill);
        acked.extend(new.iter().cloned());
        for (m, other) in writers.iter_mut().enumerate() {
            if m != n {
                other.assert_running(kill);
            }
        }
        // The killed writer's goal is still while it is checked; the others keep writing.
        let rt = runtime();
        rt.block_on(async {
            let store = SqliteStore::open(&path).unwrap_or_else(|error| {
                panic!("kill {kill}: the store does not open after the kill: {error}")
            });
            let verified = loopx_store::verify_history(&store, &goals[n])
                .await
                .unwrap();
            assert!(
                verified.findings.is_empty(),
                "kill {kill}: {:?}",
                verified.findings
            );
        });
        verify_crashed(&target, &goals[n..=n], &new);
        writers[n] = Writer::start(&target, &goals[n]);
    }
    for writer in &mut writers {
        acked.extend(writer.kill(kills));
    }
    verify_crashed(&target, &goals, &acked.iter().cloned().collect::<Vec<_>>());
    let settled = acked
        .iter()
        .filter(|(_, op)| op.starts_with("settle-"))
        .count();
    println!(
        "concurrent crash: {kills} kills of {WRITERS} writers, {} acknowledged commits ({settled} settlements)",
        acked.len()
    );
    assert!(
        settled >= 100,
        "only {settled} settlements were acknowledged: the writers did too little"
    );
}

/// One crash child of [`concurrent_crash`], working one goal.
struct Writer {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: Option<thread::JoinHandle<()>>,
    /// What it printed so far.
    seen: Vec<String>,
}

impl Writer {
    /// Starts a writer on `goal` and waits until it is ready.
    fn start(target: &Target, goal: &GoalId) -> Writer {
        let mut child = spawn_child("reopening-crash", &[target.arg(), goal.as_str().to_owned()]);
        let (lines, reader) = lines_of(child.stdout.take().unwrap());
        let mut seen = Vec::new();
        loop {
            match lines.recv_timeout(StdDuration::from_secs(60)) {
                Ok(line) if line == "ready" => break,
                Ok(line) => seen.push(line),
                Err(error) => panic!(
                    "the writer on `{goal}` never got ready ({error}): {}",
                    stderr_of(&mut child)
                ),
            }
        }
        Writer {
            child,
            lines,
            reader: Some(reader),
            seen,
        }
    }

    /// Panics with its error when the writer ended on its own: a refusal, a failed open.
    fn assert_running(&mut self, kill: u64) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "kill {kill}: a writer ended on its own ({status}): {}",
                stderr_of(&mut self.child)
            );
        }
    }

    /// Kills the writer with SIGKILL and returns the (goal, operation) pairs it acknowledged.
    fn kill(&mut self, kill: u64) -> Vec<(String, String)> {
        self.assert_running(kill);
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.seen.extend(self.lines.try_iter());
        acknowledged(std::mem::take(&mut self.seen))
    }
}

/// Agents of the group crash child, each on a goal of its own, committing at once through one
/// store handle.
const GROUP_AGENTS: usize = 8;

/// What a crash child does.
enum Crash {
    /// One worker, settling turns on [`CRASH_GOALS`] in turn.
    Sequential,
    /// [`GROUP_AGENTS`] workers at once on one handle, each on a goal of its own, so that their
    /// commits share groups.
    Grouped,
}

impl Crash {
    fn role(&self) -> &'static str {
        match self {
            Crash::Sequential => "crash",
            Crash::Grouped => "group-crash",
        }
    }

    fn goals(&self) -> Vec<GoalId> {
        match self {
            Crash::Sequential => CRASH_GOALS
                .iter()
                .map(|g| GoalId::new(*g).unwrap())
                .collect(),
            Crash::Grouped => (0..GROUP_AGENTS)
                .map(|n| GoalId::new(format!("group-{n}")).unwrap())
                .collect(),
        }
    }
}

/// The crash test with group commit: the child's agents commit at once through one SQLite
/// handle, so that most commits share a transaction, and each kill lands mid-group or between
/// groups. No acknowledged commit is lost, and no commit of the group in flight is half
/// written: every goal's rows agree with its events, which replay to what loads.
fn group_crash() {
    let rounds: u64 = env::var("LOOPX_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let target = Target::Sqlite(dir.path().join("group-crash.db"));
    let crashed = crash_rounds(&target, &Crash::Grouped, rounds, &mut |_| None);
    let (groups, commits) = crashed.grouped;
    println!("group crash: {groups} groups held {commits} commits before the kills");
    assert!(
        crashed.kills >= rounds * 3 / 4,
        "only {} kills",
        crashed.kills
    );
    assert!(
        commits > groups + groups / 2,
        "the child's commits hardly shared groups: {commits} commits in {groups} groups"
    );
}

/// The group crash child: [`GROUP_AGENTS`] workers on a multi-threaded runtime, each driving a
/// goal of its own through one SQLite handle; after each acknowledged commit, the first worker
/// also prints the handle's group counts.
fn group_crash_child(args: &[String]) -> u8 {
    #[allow(
        irrefutable_let_patterns,
        reason = "one backend without the postgres feature"
    )]
    let Target::Sqlite(path) = Target::parse(&args[0]) else {
        eprintln!("the group crash child runs on SQLite");
        return 2;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = SqliteOptions::default()
        .snapshot_every(8)
        .group_commit(true);
    let store = match SqliteStore::create_with(&path, options) {
        Ok(store) => std::sync::Arc::new(store),
        Err(error) => {
            eprintln!("open failed: {error}");
            return 3;
        }
    };
    rt.block_on(async {
        let goals = Crash::Grouped.goals();
        let mut workers = tokio::task::JoinSet::new();
        for (n, goal) in goals.into_iter().enumerate() {
            let store = std::sync::Arc::clone(&store);
            workers.spawn(async move { crash_worker(&store, &goal, n == 0).await });
        }
        println!("ready");
        while let Some(done) = workers.join_next().await {
            match done {
                Ok(0) => {}
                Ok(code) => return code,
                Err(error) => {
                    eprintln!("a worker panicked: {error}");
                    return 7;
                }
            }
        }
        0
    })
}

/// One worker of the group crash child: creates its goal, then settles turns on it forever.
async fn crash_worker(store: &SqliteStore, goal: &GoalId, counts: bool) -> u8 {
    if let Err(code) = create_crash_goal(store, goal).await {
        return code;
    }
    loop {
        if let Err(code) = crash_step(store, goal).await {
            return code;
        }
        if counts {
            let grouped = store.group_stats();
            println!("groups {} {}", grouped.groups, grouped.commits);
        }
    }
}

/// What [`crash_rounds`] saw.
struct Crashed {
    /// SIGKILLs.
    kills: u64,
    /// The groups the children's handles wrote and the commits they held (summed over the
    /// rounds, as each child last printed them).
    grouped: (u64, u64),
}

/// Runs `rounds` crash rounds of `crash` children against `target`: each starts a child, lets it
/// work and kills it with SIGKILL, then checks the store. `server_stop(round)` may stop the
/// server mid-load first; it returns how to restart it (the child may then fail on its own
/// before the kill).
fn crash_rounds(
    target: &Target,
    crash: &Crash,
    rounds: u64,
    server_stop: &mut dyn FnMut(u64) -> Option<Box<dyn FnOnce()>>,
) -> Crashed {
    let mut rng = Rng::seeded(crash.role());
    let goals = crash.goals();
    let mut acked: BTreeSet<(String, String)> = BTreeSet::new();
    let mut kills = 0;
    let mut grouped = (0, 0);
    for round in 0..rounds {
        let mut child = spawn_child(crash.role(), &[target.arg()]);
        let (lines, reader) = lines_of(child.stdout.take().unwrap());
        // Most rounds kill mid-work; every eighth kills during start-up (open, migration,
        // goal creation) without waiting for the child to be ready.
        let mut fresh = Vec::new();
        if round % 8 == 0 {
            thread::sleep(StdDuration::from_millis(rng.below(40)));
        } else {
            loop {
                match lines.recv_timeout(StdDuration::from_secs(60)) {
                    Ok(line) if line == "ready" => break,
                    Ok(line) => fresh.push(line),
                    Err(error) => panic!(
                        "round {round}: the child never got ready ({error}): {}",
                        stderr_of(&mut child)
                    ),
                }
            }
            thread::sleep(StdDuration::from_millis(rng.below(60)));
        }
        let restart = server_stop(round);
        if let Some(restart) = restart {
            // The server went down mid-load: the child may fail on its own first.
            let _ = child.kill();
            let _ = child.wait();
            reader.join().unwrap();
            fresh.extend(lines.try_iter());
            restart();
            let new = acknowledged(fresh);
            acked.extend(new.iter().cloned());
            verify_crashed(target, &goals, &new);
            continue;
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                status.signal(),
                Some(9),
                "round {round}: the child ended before the kill ({status}): {}",
                stderr_of(&mut child)
            );
        }
        kills += 1;
        reader.join().unwrap();
        fresh.extend(lines.try_iter());
        if let Some((groups, commits)) = last_group_counts(&fresh) {
            grouped = (grouped.0 + groups, grouped.1 + commits);
        }
        let new = acknowledged(fresh);
        acked.extend(new.iter().cloned());
        verify_crashed(target, &goals, &new);
    }
    verify_crashed(target, &goals, &acked.iter().cloned().collect::<Vec<_>>());
    let settled = acked
        .iter()
        .filter(|(_, op)| op.starts_with("settle-"))
        .count();
    println!(
        "crash: {kills} kills, {} acknowledged commits ({settled} settlements)",
        acked.len()
    );
    assert!(
        settled >= 20,
        "only {settled} settlements were acknowledged: the child did too little"
    );
    Crashed { kills, grouped }
}

/// The last group counts (`groups G C`) a child printed.
fn last_group_counts(lines: &[String]) -> Option<(u64, u64)> {
    lines.iter().rev().find_map(|line| {
        let (groups, commits) = line.strip_prefix("groups ")?.split_once(' ')?;
        Some((groups.parse().ok()?, commits.parse().ok()?))
    })
}

/// The (goal, operation) pairs a child printed as acknowledged.
fn acknowledged(lines: Vec<String>) -> Vec<(String, String)> {
    let mut new = Vec::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix("ack ") {
            let (goal, op) = rest.split_once(' ').unwrap();
            new.push((goal.to_owned(), op.to_owned()));
        }
    }
    new
}

/// After a kill: every acknowledged operation is there, every goal's history replays to what
/// the store loads and keeps the kernel's invariants, the receipts, snapshots and index rows
/// agree with the events (nothing half applied), and SQLite's integrity check passes.
fn verify_crashed(target: &Target, goals: &[GoalId], acked: &[(String, String)]) {
    let rt = runtime();
    let store = rt.block_on(target.open(100)).unwrap();
    rt.block_on(async {
        #[allow(
            irrefutable_let_patterns,
            reason = "one backend without the postgres feature"
        )]
        if let Target::Sqlite(path) = target {
            SqliteStore::open(path)
                .unwrap()
                .integrity_check()
                .await
                .unwrap();
        }
        for (goal, op) in acked {
            let goal = GoalId::new(goal.as_str()).unwrap();
            let receipt = store
                .receipt(&goal, &OperationId::new(op.as_str()).unwrap())
                .await
                .unwrap();
            assert!(
                receipt.is_some(),
                "acknowledged `{op}` on `{goal}` is missing"
            );
        }
        for goal in goals {
            let Some(state) = store.load(goal).await.unwrap() else {
                continue;
            };
            let events = target.history(goal).await;
            assert_eq!(
                GoalState::replay(&events).unwrap(),
                state,
                "replay of `{goal}` differs from its load"
            );
            let violations = check_invariants(&state, wall_clock());
            assert!(
                violations.is_empty(),
                "`{goal}` breaks invariants: {violations:?}"
            );
            match target {
                Target::Sqlite(path) => verify_rows(path, goal, &state, &events),
                #[cfg(feature = "postgres")]
                Target::Postgres(url) => postgres::verify_rows(url, goal, &state, &events).await,
            }
        }
        // The cross-goal queries still answer after the crash.
        let goals = store.goals(wall_clock()).await.unwrap();
        assert!(store.goals(wall_clock()).await.unwrap().len() <= goals.len());
    });
}

/// Checks the rows around a goal's events with plain SQL: the goal row's revision, the receipts
/// (each event belongs to exactly one), the latest snapshot and the index rows.
fn verify_rows(
    path: &Path,
    goal: &GoalId,
    state: &GoalState,
    events: &[loopx_kernel::RecordedEvent],
) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let g = goal.as_str();
    let (revision, valid_from, valid_until): (i64, i64, Option<i64>) = conn
        .query_row(
            "SELECT revision, valid_from, valid_until FROM goals WHERE goal = ?1",
            [g],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let revision = u64::try_from(revision).unwrap();
    assert_eq!(revision, state.revision);
    assert_eq!(
        events.len() as u64,
        revision,
        "events of `{goal}` have a gap"
    );
    let committed: i64 = conn
        .query_row(
            "SELECT coalesce(sum(events), 0) FROM commits WHERE goal = ?1",
            [g],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        u64::try_from(committed).unwrap(),
        revision,
        "receipts of `{goal}` do not account for its events"
    );
    let snapshot: Option<(i64, String)> = conn
        .query_row(
            "SELECT revision, json FROM snapshots WHERE goal = ?1 ORDER BY revision DESC LIMIT 1",
            [g],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    if let Some((at, json)) = snapshot {
        let snapshot: Snapshot = serde_json::from_str(&json).unwrap();
        let prefix = usize::try_from(at).unwrap();
        assert_eq!(
            snapshot.into_state().unwrap(),
            GoalState::replay(&events[..prefix]).unwrap()
        );
    }
    let from = Timestamp::from_millis(valid_from);
    assert_eq!(
        valid_until.map(Timestamp::from_millis),
        next_wake(state, from)
    );
    let row: Option<String> = conn
        .query_row(
            "SELECT todos FROM frontier WHERE goal = ?1 AND agent = 'worker'",
            [g],
            |r| r.get(0),
        )
        .ok();
    assert_frontier_row(goal, state, from, row);
}

/// The stored frontier row (JSON of `(priority, todo)` pairs) lists exactly the kernel's
/// frontier for the worker at `from`.
fn assert_frontier_row(goal: &GoalId, state: &GoalState, from: Timestamp, row: Option<String>) {
    let rows: Vec<String> = row
        .map(|json| serde_json::from_str::<Vec<(u8, String)>>(&json).unwrap())
        .unwrap_or_default()
        .into_iter()
        .map(|(_, todo)| todo)
        .collect();
    let expected: Vec<String> = frontier(state, &worker_agent(), from)
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    assert_eq!(
        rows, expected,
        "the frontier rows of `{goal}` are not the kernel's"
    );
}

// ----- races --------------------------------------------------------------------------------

const RACE_GOALS: usize = 10;
const TODOS_PER_GOAL: usize = 100;
const THREADS: usize = 16;
const PROCESSES: usize = 4;
const LEASE_MILLIS: i64 = 60;

fn race_goal(i: usize) -> GoalId {
    GoalId::new(format!("race-{i}")).unwrap()
}

fn race_agents() -> Vec<AgentId> {
    (0..THREADS)
        .map(|i| AgentId::new(format!("thread-{i}")).unwrap())
        .chain((0..PROCESSES).map(|i| AgentId::new(format!("proc-{i}")).unwrap()))
        .collect()
}

/// What one racing worker saw.
#[derive(Debug, Default)]
struct Tally {
    /// Claims it won: goal, todo, epoch.
    claims: Vec<(String, String, u64)>,
    settled: u64,
    /// Settlements refused because another agent had taken the todo over meanwhile.
    stale_refused: u64,
    /// Deliberately stale begins (an older epoch), all of which were refused.
    deliberate_stale: u64,
    /// Claims lost to another worker.
    lost: u64,
}

/// One racing worker: an agent with its own store handle and random choices.
struct Racer {
    store: Box<dyn Store>,
    agent: AgentId,
    actor: Actor,
    rng: Rng,
    ops: u64,
    tally: Tally,
}

impl Racer {
    fn op(&mut self) -> OperationId {
        self.ops += 1;
        OperationId::new(format!("{}-{}", self.agent, self.ops)).unwrap()
    }

    async fn submit(
        &mut self,
        goal: &GoalId,
        command: &Command,
    ) -> Result<loopx_kernel::Submitted, SubmitError> {
        let op = self.op();
        // Racers pause between attempts on a contended goal, as the engine and the CLI do.
        self.store
            .goal(goal)
            .paced(&SystemClock)
            .submit_operation(&self.actor, wall_clock(), command, &op)
            .await
    }

    /// Claims one of the first todos of a random goal's frontier; the epoch it won.
    async fn claim(&mut self, out: &mut dyn FnMut(&str)) -> Option<(GoalId, TodoId, u64)> {
        let goal = race_goal(usize::try_from(self.rng.below(RACE_GOALS as u64)).unwrap());
        let state = self.store.load(&goal).await.unwrap().unwrap();
        let open = frontier(&state, &self.agent, wall_clock());
        if open.is_empty() {
            return None;
        }
        let todo = open[usize::try_from(self.rng.below(open.len().min(6) as u64)).unwrap()].clone();
        let claim = Command::Claim {
            todo: todo.clone(),
            ttl: Some(Duration::from_millis(LEASE_MILLIS)),
            workspace: None,
            grant_reason: None,
        };
        match self.submit(&goal, &claim).await {
            Ok(done) => {
                let lease = done.state.todos.get(&todo).unwrap().lease.as_ref().unwrap();
                let epoch = lease.epoch;
                out(&format!("claim {goal} {todo} {epoch}"));
                self.tally
                    .claims
                    .push((goal.to_string(), todo.to_string(), epoch));
                Some((goal, todo, epoch))
            }
            Err(SubmitError::Refused(_) | SubmitError::Contended { .. }) => {
                self.tally.lost += 1;
                None
            }
            Err(error) => panic!("{}: claim failed: {error}", self.agent),
        }
    }

    /// Begins and settles a turn under `epoch`, sometimes outliving the lease so that another
    /// agent may take the todo over; then checks that the settled turn cannot settle again.
    async fn turn(&mut self, goal: &GoalId, todo: &TodoId, epoch: u64) {
        let turn = TurnId::new(format!("{}-turn-{}", self.agent, self.ops)).unwrap();
        let begin = Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: None,
        };
        match self.submit(goal, &begin).await {
            Ok(_) => {}
            Err(SubmitError::Refused(_) | SubmitError::Contended { .. }) => return,
            Err(error) => panic!("{}: begin failed: {error}", self.agent),
        }
        let pause = if self.rng.below(4) == 0 {
            90
        } else {
            self.rng.below(10)
        };
        thread::sleep(StdDuration::from_millis(pause));
        let transition = if self.rng.below(3) == 0 {
            Transition::Complete {
                continuation: Continuation::GoalStillActive,
            }
        } else {
            Transition::KeepOpen
        };
        let settle = settlement(todo, epoch, &turn, transition);
        match self.submit(goal, &settle).await {
            Ok(_) => self.tally.settled += 1,
            Err(SubmitError::Refused(Refusal::StaleLeaseEpoch {
                presented, current, ..
            })) => {
                assert!(current > presented);
                self.tally.stale_refused += 1;
                return;
            }
            Err(SubmitError::Refused(_) | SubmitError::Contended { .. }) => return,
            Err(error) => panic!("{}: settle failed: {error}", self.agent),
        }
        let again = self.submit(goal, &settle).await;
        assert!(
            matches!(
                again,
                Err(SubmitError::Refused(_) | SubmitError::Contended { .. })
            ),
            "{}: a second settlement of one turn was not refused: {again:?}",
            self.agent
        );
    }

    /// Right after winning `epoch > 1`, begins a turn under the epoch before it: never
    /// accepted, and refused as stale unless the todo moved on meanwhile (another agent took
    /// it over after this lease expired and closed it). Tried at every such claim, so the
    /// check does not hang on how many turns a loaded machine manages to settle in time.
    async fn begin_stale(&mut self, goal: &GoalId, todo: &TodoId, epoch: u64) {
        let old_epoch = Command::BeginTurn {
            todo: todo.clone(),
            epoch: epoch - 1,
            turn: TurnId::new(format!("{}-stale-{}", self.agent, self.ops)).unwrap(),
            reserve: None,
        };
        match self.submit(goal, &old_epoch).await {
            Err(SubmitError::Refused(Refusal::StaleLeaseEpoch { .. })) => {
                self.tally.deliberate_stale += 1;
            }
            Err(SubmitError::Refused(_) | SubmitError::Contended { .. }) => {}
            other => panic!(
                "{}: a begin under a stale epoch was not refused: {other:?}",
                self.agent
            ),
        }
    }
}

fn race_worker(
    target: &Target,
    agent: &AgentId,
    seed: u64,
    millis: u64,
    out: &mut dyn FnMut(&str),
) -> Tally {
    let rt = runtime();
    let mut racer = Racer {
        store: rt.block_on(target.open(100)).unwrap(),
        agent: agent.clone(),
        actor: Actor::Agent(agent.clone()),
        rng: Rng(seed | 1),
        ops: 0,
        tally: Tally::default(),
    };
    let deadline = Instant::now() + StdDuration::from_millis(millis);
    rt.block_on(async {
        while Instant::now() < deadline {
            if let Some((goal, todo, epoch)) = racer.claim(out).await {
                if epoch > 1 {
                    racer.begin_stale(&goal, &todo, epoch).await;
                }
                racer.turn(&goal, &todo, epoch).await;
            }
        }
    });
    racer.tally
}

fn race_child(args: &[String]) -> u8 {
    let target = Target::parse(&args[0]);
    let agent = AgentId::new(args[1].as_str()).unwrap();
    let seed: u64 = args[2].parse().unwrap();
    let millis: u64 = args[3].parse().unwrap();
    let tally = race_worker(&target, &agent, seed, millis, &mut |line| {
        println!("{line}");
    });
    println!(
        "tally {} {} {} {}",
        tally.settled, tally.stale_refused, tally.deliberate_stale, tally.lost
    );
    0
}

/// Creates the race goals: each with every racing agent and 100 idempotent todos, committed as
/// one batch per goal.
fn race_setup(target: &Target) {
    let rt = runtime();
    let store = rt.block_on(target.open(50)).unwrap();
    let now = wall_clock();
    for g in 0..RACE_GOALS {
        let goal = race_goal(g);
        let created = Event::GoalCreated {
            spec: spec(&goal, &race_agents()),
        };
        let mut events = loopx_kernel::write::stamp(0, &owner(), now, vec![created]);
        let mut state = GoalState::replay(&events).unwrap();
        for t in 0..TODOS_PER_GOAL {
            let mut todo = NewTodo::advance(TodoId::new(format!("t{t}")).unwrap(), "race me");
            todo.idempotent = true;
            events.extend(
                state
                    .handle(&owner(), now, &Command::AddTodo { todo })
                    .unwrap(),
            );
        }
        let request = AppendRequest {
            goal: goal.clone(),
            expected_revision: 0,
            operation: OperationId::new("setup").unwrap(),
            digest: "setup".into(),
            at: now,
            events,
            authorship: None,
            clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
        };
        let commit = Commit::fold(None, request).unwrap();
        let receipt = rt.block_on(store.append(commit)).unwrap().into_receipt();
        assert_eq!(receipt.revision, 1 + TODOS_PER_GOAL as u64);
    }
}

fn races() {
    let dir = tempfile::tempdir().unwrap();
    races_on(&Target::Sqlite(dir.path().join("race.db")));
}

fn races_on(target: &Target) {
    let mut rng = Rng::seeded("races");
    race_setup(target);
    let millis: u64 = 6_000;
    let agents = race_agents();
    let mut children: Vec<Child> = agents[THREADS..]
        .iter()
        .map(|agent| {
            let args = [
                target.arg(),
                agent.to_string(),
                rng.next().to_string(),
                millis.to_string(),
            ];
            spawn_child("race", &args)
        })
        .collect();
    let readers: Vec<_> = children
        .iter_mut()
        .map(|c| lines_of(c.stdout.take().unwrap()))
        .collect();
    let threads: Vec<_> = agents[..THREADS]
        .iter()
        .map(|agent| {
            let target = target.clone();
            let agent = agent.clone();
            let seed = rng.next();
            thread::spawn(move || race_worker(&target, &agent, seed, millis, &mut |_| {}))
        })
        .collect();
    let mut tallies: Vec<(AgentId, Tally)> = Vec::new();
    for (agent, handle) in agents[..THREADS].iter().zip(threads) {
        tallies.push((
            agent.clone(),
            handle.join().expect("a racing thread panicked"),
        ));
    }
    for ((agent, mut child), (lines, reader)) in agents[THREADS..]
        .iter()
        .zip(children.drain(..))
        .zip(readers)
    {
        let status = child.wait().unwrap();
        reader.join().unwrap();
        assert!(
            status.success(),
            "racing process {agent} failed: {}",
            stderr_of(&mut child)
        );
        let mut tally = Tally::default();
        for line in lines.try_iter() {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["claim", goal, todo, epoch] => {
                    tally.claims.push((
                        (*goal).to_owned(),
                        (*todo).to_owned(),
                        epoch.parse().unwrap(),
                    ));
                }
                ["tally", settled, stale, deliberate, lost] => {
                    tally.settled = settled.parse().unwrap();
                    tally.stale_refused = stale.parse().unwrap();
                    tally.deliberate_stale = deliberate.parse().unwrap();
                    tally.lost = lost.parse().unwrap();
                }
                _ => panic!("unexpected line from {agent}: {line}"),
            }
        }
        tallies.push((agent.clone(), tally));
    }
    verify_races(target, &tallies);
}

/// Folds every goal's history checking, before each event, that no lease was acquired while
/// another was live, and that every begun or settled turn presented the current epoch of its
/// holder; then checks that every claim a worker saw acknowledged is in the history.
fn verify_races(target: &Target, tallies: &[(AgentId, Tally)]) {
    let rt = runtime();
    let store = rt.block_on(target.open(100)).unwrap();
    let mut acquired: BTreeSet<(String, String, u64, String)> = BTreeSet::new();
    let mut settled_in_log = 0_u64;
    rt.block_on(async {
        #[allow(irrefutable_let_patterns, reason = "one backend without the postgres feature")]
        if let Target::Sqlite(path) = target {
            SqliteStore::open(path).unwrap().integrity_check().await.unwrap();
        }
        for g in 0..RACE_GOALS {
            let goal = race_goal(g);
            let events = store.events(&goal, 0, usize::MAX).await.unwrap();
            let mut state = GoalState::genesis(&events[0]).unwrap();
            for recorded in &events[1..] {
                let holder = |todo: &TodoId, state: &GoalState| {
                    state.todos.get(todo).and_then(|t| t.lease.as_ref()).map(|l| (l.holder.clone(), l.epoch, l.is_live(recorded.at)))
                };
                match &recorded.event {
                    Event::LeaseAcquired { todo, holder: who, epoch, .. } => {
                        if let Some((other, _, live)) = holder(todo, &state) {
                            assert!(!live, "{goal}/{todo}: {who} acquired a lease while {other} held a live one");
                        }
                        let last = state.todos.get(todo).unwrap().last_epoch;
                        assert_eq!(*epoch, last + 1, "{goal}/{todo}: epochs must strictly increase");
                        acquired.insert((goal.to_string(), todo.to_string(), *epoch, who.to_string()));
                    }
                    Event::TurnBegun { todo, epoch, .. } | Event::TurnSettled { todo, epoch, .. } => {
                        let (who, current, _) = holder(todo, &state).expect("a turn without a lease");
                        assert_eq!(*epoch, current, "{goal}/{todo}: a stale epoch committed");
                        assert_eq!(Some(&who), recorded.actor.agent(), "{goal}/{todo}: not the holder");
                        if matches!(recorded.event, Event::TurnSettled { .. }) {
                            settled_in_log += 1;
                        }
                    }
                    _ => {}
                }
                state.apply(recorded).unwrap();
            }
            assert_eq!(store.load(&goal).await.unwrap().unwrap(), state);
            let violations = check_invariants(&state, wall_clock());
            assert!(violations.is_empty(), "{goal}: {violations:?}");
        }
    });
    let mut claims = 0;
    let (mut settled, mut stale, mut deliberate, mut lost) = (0, 0, 0, 0);
    for (agent, tally) in tallies {
        for (goal, todo, epoch) in &tally.claims {
            let key = (goal.clone(), todo.clone(), *epoch, agent.to_string());
            assert!(
                acquired.contains(&key),
                "acknowledged claim {key:?} is not in the history"
            );
        }
        claims += tally.claims.len();
        settled += tally.settled;
        stale += tally.stale_refused;
        deliberate += tally.deliberate_stale;
        lost += tally.lost;
    }
    println!(
        "races: {claims} claims won, {lost} lost, {settled} settled, {stale} stale settlements refused, {deliberate} deliberately stale begins refused"
    );
    assert_eq!(
        settled, settled_in_log,
        "acknowledged settlements differ from the history"
    );
    assert!(
        claims >= 100,
        "only {claims} claims: the race did too little"
    );
    assert!(
        stale > 0,
        "no settlement raced a takeover: the race did not test fencing"
    );
    assert!(deliberate > 0, "no deliberately stale begin was tried");
}

/// The same crash and race tests on PostgreSQL.
#[cfg(feature = "postgres")]
mod postgres {
    use super::{
        GoalId, GoalState, Snapshot, Target, Timestamp, assert_frontier_row, crash_rounds,
        next_wake, races_on,
    };
    use crate::support::postgres::{cluster, local_cluster};

    /// At least 10 client kills, plus server stops (`pg_ctl stop -m immediate`) mid-load
    /// followed by a restart, on a throwaway cluster of this binary.
    pub(super) fn crash() {
        let cluster = local_cluster();
        let target = Target::Postgres(cluster.database());
        let rounds: u64 = 15;
        let mut stops = 0;
        let kills = crash_rounds(&target, &super::Crash::Sequential, rounds, &mut |round| {
            if round % 5 != 4 {
                return None;
            }
            stops += 1;
            cluster.local().stop_immediate();
            Some(Box::new(move || {
                cluster
                    .local()
                    .start()
                    .unwrap_or_else(|error| panic!("the server did not come back: {error}"));
            }))
        })
        .kills;
        println!("postgres crash: {kills} client kills, {stops} immediate server stops");
        assert!(kills >= 10, "only {kills} client kills");
        assert!(stops >= 3, "only {stops} server stops");
    }

    pub(super) fn races() {
        races_on(&Target::Postgres(cluster().database()));
    }

    /// Checks the rows around a goal's events with plain SQL, as `super::verify_rows` does on
    /// SQLite.
    pub(super) async fn verify_rows(
        url: &str,
        goal: &GoalId,
        state: &GoalState,
        events: &[loopx_kernel::RecordedEvent],
    ) {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let g = goal.as_str();
        let row = client
            .query_one(
                "SELECT revision, valid_from, valid_until FROM goals WHERE goal = $1",
                &[&g],
            )
            .await
            .unwrap();
        let revision = u64::try_from(row.get::<_, i64>(0)).unwrap();
        let from = Timestamp::from_millis(row.get(1));
        let until: Option<i64> = row.get(2);
        assert_eq!(revision, state.revision);
        assert_eq!(
            events.len() as u64,
            revision,
            "events of `{goal}` have a gap"
        );
        let committed: i64 = client
            .query_one(
                "SELECT coalesce(sum(events), 0)::bigint FROM commits WHERE goal = $1",
                &[&g],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            u64::try_from(committed).unwrap(),
            revision,
            "receipts of `{goal}` do not account for its events"
        );
        if let Some(snapshot) = client
            .query_opt(
                "SELECT revision, json FROM snapshots WHERE goal = $1 ORDER BY revision DESC LIMIT 1",
                &[&g],
            )
            .await
            .unwrap()
        {
            let at = usize::try_from(snapshot.get::<_, i64>(0)).unwrap();
            let json: String = snapshot.get(1);
            let snapshot: Snapshot = serde_json::from_str(&json).unwrap();
            assert_eq!(
                snapshot.into_state().unwrap(),
                GoalState::replay(&events[..at]).unwrap()
            );
        }
        assert_eq!(until.map(Timestamp::from_millis), next_wake(state, from));
        let row: Option<String> = client
            .query_opt(
                "SELECT todos FROM frontier WHERE goal = $1 AND agent = 'worker'",
                &[&g],
            )
            .await
            .unwrap()
            .map(|r| r.get::<_, String>(0));
        assert_frontier_row(goal, state, from, row);
    }
}
