//! A soak: one goal driven through many settled turns on SQLite, with the store's default
//! retention policy, and at each checkpoint (10k and 100k turns unless told otherwise) its
//! figures:
//!
//! - the size of the snapshot a load decodes (the goal's folded state);
//! - the events its kept history holds and the events its archive holds;
//! - cold load: a new store handle (nothing cached) loads the goal (median of five);
//! - settle latency: the median and 99th percentile of the settle commits of the last
//!   [`WINDOW`] turns before the checkpoint, through `submit` as hosts commit them.
//!
//! Then each figure at each checkpoint against the first checkpoint's (the target: within
//! 1.5x). The goal has constant live work and turns it over as a pull request's goal does: eight
//! agents, each with one open todo; every turn claims it, begins, and settles it done with one
//! successor for the next turn, with evidence about the branch at a new commit and two
//! observations (the branch's head, moving on, and a stream of its own for that commit). So
//! every turn leaves a closed todo, a piece of evidence the next commit supersedes, a stream and
//! a subject nothing follows: what the goal's retirement policy (here a horizon of five minutes,
//! with the clock moving a second a turn) lets go of, through a `retire` whenever a batch is due,
//! as the engine issues it. Nothing asserts on timings: the benchmark reports.
//!
//! Run with `cargo bench -p loopx-benches --bench soak`; `LOOPX_SOAK_TURNS=10000,100000,1000000`
//! sets the checkpoints (turns, ascending), and `LOOPX_SOAK_RETIRE=never` runs the same goal
//! with retirement off, to see what it keeps bounded. The store runs at `synchronous=NORMAL`,
//! so that the figures show what the goal's age costs rather than the disk's sync.

use std::path::Path;
use std::time::{Duration as StdDuration, Instant};

use loopx_kernel::seams::Store;
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Duration, GoalId, NewEvidence, NewTodo,
    Observation, OperationId, Outcome, Settlement, SourceId, StoreExt, Timestamp, TodoId,
    Transition, TurnId, Verdict, VerdictOutcome,
};
use loopx_store::{Durability, Retention, SqliteOptions, SqliteStore};
use tokio::runtime::{Builder, Runtime};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Agents, and todos (one per agent).
const AGENTS: usize = 8;
/// The settle commits timed before each checkpoint.
const WINDOW: usize = 1_000;
/// The checkpoints without `LOOPX_SOAK_TURNS`.
const DEFAULT_TURNS: [u64; 2] = [10_000, 100_000];

/// One checkpoint's figures.
struct Figures {
    turns: u64,
    revision: u64,
    snapshot_bytes: u64,
    kept_events: u64,
    archived_events: u64,
    cold_load: StdDuration,
    settle_p50: StdDuration,
    settle_p99: StdDuration,
}

fn main() -> Result<(), Failure> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let checkpoints = checkpoints()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("soak.db");
    let runtime = Builder::new_multi_thread().enable_all().build()?;
    let store = SqliteStore::create_with(&path, options())?;
    let goal: GoalId = id("soak");
    // Early enough that a million turns a second apart stay behind the store's own clock,
    // which refuses a commit stamped ahead of it.
    let now = Timestamp::parse("2026-01-01T00:00:00Z")?;
    let retire_after = match std::env::var("LOOPX_SOAK_RETIRE").as_deref() {
        Ok("never") => None,
        _ => Some(RETIRE_AFTER),
    };
    runtime.block_on(create(&store, &goal, now, retire_after))?;
    println!(
        "soak: one goal, {AGENTS} agents and todos, retention {:?}, retire after {retire_after:?}, checkpoints {checkpoints:?}",
        store.policy()
    );
    let mut figures = Vec::new();
    let mut turn = 0u64;
    for &at in &checkpoints {
        let mut times = Vec::with_capacity(WINDOW);
        while turn < at {
            let settle = runtime.block_on(cycle(&store, &goal, turn, now))?;
            if at - turn <= WINDOW as u64 {
                times.push(settle);
            }
            turn += 1;
        }
        let found = checkpoint(&runtime, &path, &goal, at, &mut times)?;
        print_row(&found);
        figures.push(found);
    }
    print_table(&figures);
    Ok(())
}

/// The checkpoints from `LOOPX_SOAK_TURNS` (comma-separated, ascending), or the defaults.
fn checkpoints() -> Result<Vec<u64>, Failure> {
    let Ok(text) = std::env::var("LOOPX_SOAK_TURNS") else {
        return Ok(DEFAULT_TURNS.to_vec());
    };
    let turns: Vec<u64> = text
        .split(',')
        .map(|n| n.trim().replace('_', "").parse::<u64>())
        .collect::<Result<_, _>>()?;
    if turns.is_empty() || turns.windows(2).any(|w| w[0] >= w[1]) || turns[0] < WINDOW as u64 {
        return Err(format!(
            "LOOPX_SOAK_TURNS={text}: give ascending turn counts of at least {WINDOW}, e.g. 10000,100000"
        )
        .into());
    }
    Ok(turns)
}

fn options() -> SqliteOptions {
    SqliteOptions::default().durability(Durability::Normal)
}

fn id<T: TryFrom<String>>(text: impl Into<String>) -> T
where
    T::Error: std::fmt::Debug,
{
    match T::try_from(text.into()) {
        Ok(id) => id,
        Err(error) => panic!("the benchmark's ids are valid: {error:?}"),
    }
}

fn owner() -> Actor {
    Actor::Person(id("owner"))
}

fn agent(n: usize) -> AgentId {
    id(format!("agent-{n}"))
}

/// Agent `agent`'s todo in its `round`th turn.
fn todo(agent: usize, round: u64) -> TodoId {
    id(format!("line-{agent}-{round}"))
}

/// The retirement horizon the soak's goal declares (unless `LOOPX_SOAK_RETIRE=never`).
const RETIRE_AFTER: Duration = Duration::minutes(5);

/// The goal and its todos, one per agent.
async fn create(
    store: &SqliteStore,
    goal: &GoalId,
    now: Timestamp,
    retire_after: Option<Duration>,
) -> Result<(), Failure> {
    let mut spec = loopx_benches::declared_spec(
        goal.clone(),
        "run for months",
        id("owner"),
        (0..AGENTS).map(agent),
    );
    spec.policy.retire_after = retire_after;
    let handle = store.goal(goal);
    handle
        .submit_operation(&owner(), now, &Command::CreateGoal { spec }, &id("create"))
        .await?;
    for n in 0..AGENTS {
        let mut new = NewTodo::advance(todo(n, 0), "one line of long work");
        new.assignee = Some(agent(n));
        let add = Command::AddTodo { todo: new };
        handle
            .submit_operation(&owner(), now, &add, &id(format!("add-{n}")))
            .await?;
    }
    Ok(())
}

/// Turn `n`, a second after turn `n - 1`: its agent retires what is due (as the engine does),
/// claims its todo, begins and settles the turn done with a successor, evidence and two
/// observations. Returns how long the settle commit took.
async fn cycle(
    store: &SqliteStore,
    goal: &GoalId,
    n: u64,
    start: Timestamp,
) -> Result<StdDuration, Failure> {
    let now = start.plus(Duration::seconds(i64::try_from(n)?));
    let which = usize::try_from(n % AGENTS as u64)?;
    let round = n / AGENTS as u64;
    let me = Actor::Agent(agent(which));
    let line = todo(which, round);
    let handle = store.goal(goal);
    if handle.state().await?.retirement_due(now) {
        handle
            .submit_operation(&me, now, &Command::Retire {}, &id(format!("{n}-retire")))
            .await?;
    }
    let claim = Command::Claim {
        todo: line.clone(),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    let claimed = handle
        .submit_operation(&me, now, &claim, &id(format!("{n}-claim")))
        .await?;
    let epoch = claimed.state.todos.get(&line).map_or(0, |t| t.last_epoch);
    let turn: TurnId = id(format!("turn-{n}"));
    let begin = Command::BeginTurn {
        todo: line.clone(),
        epoch,
        turn: turn.clone(),
        reserve: None,
    };
    handle
        .submit_operation(&me, now, &begin, &id(format!("{n}-begin")))
        .await?;
    let mut next = NewTodo::advance(todo(which, round + 1), "one line of long work");
    next.assignee = Some(agent(which));
    let settle = Command::SettleTurn(Settlement {
        todo: line,
        epoch,
        turn,
        verdict: Verdict {
            validator: Actor::Validator(id::<SourceId>("tests")),
            outcome: VerdictOutcome::Passed,
            summary: "the line's step is done".into(),
            signature: None,
        },
        evidence: vec![commit_evidence(n, now)],
        observations: commit_observations(n, now),
        transition: Transition::Complete {
            continuation: Continuation::Successors(vec![next]),
        },
        usage: Amounts::ONE_TURN,
        failure: None,
    });
    let operation: OperationId = id(format!("{n}-settle"));
    let start = Instant::now();
    handle
        .submit_operation(&me, now, &settle, &operation)
        .await?;
    Ok(start.elapsed())
}

/// The turn's evidence: the tests passed on the branch at commit `n`.
fn commit_evidence(n: u64, now: Timestamp) -> NewEvidence {
    NewEvidence {
        id: id(format!("tests-{n}")),
        check: id("tests"),
        subject: id("branch:main"),
        revision: id(format!("git:{n}")),
        outcome: Outcome::Pass,
        summary: "tests passed".into(),
        observed_at: now,
        ttl: None,
        inputs: loopx_kernel::Lineage::default(),
    }
}

/// The turn's observations: the branch's head moved to commit `n`, and commit `n`'s own stream.
fn commit_observations(n: u64, now: Timestamp) -> Vec<Observation> {
    let observation = |key: String, subject: String| Observation {
        key: id(key),
        subject: id(subject),
        revision: id(format!("git:{n}")),
        fingerprint: id(format!("f{n}")),
        observed_at: now,
        summary: String::new(),
        facts: std::collections::BTreeMap::new(),
        order: None,
        etag: None,
    };
    vec![
        observation("push:main".into(), "branch:main".into()),
        observation(format!("check:{n}/ci"), format!("commit:{n}")),
    ]
}

/// The figures at a checkpoint of `turns` turns.
fn checkpoint(
    runtime: &Runtime,
    path: &Path,
    goal: &GoalId,
    turns: u64,
    times: &mut [StdDuration],
) -> Result<Figures, Failure> {
    times.sort_unstable();
    let mut loads = Vec::new();
    let mut revision = 0;
    for _ in 0..5 {
        let fresh = SqliteStore::open_with(path, options())?;
        let start = Instant::now();
        let loaded = runtime.block_on(fresh.load(goal))?;
        loads.push(start.elapsed());
        revision = loaded.map_or(0, |s| s.revision);
    }
    loads.sort_unstable();
    let conn = rusqlite::Connection::open(path)?;
    let count = |sql: &str| -> Result<u64, Failure> {
        let n: i64 = conn.query_row(sql, [goal.as_str()], |r| r.get(0))?;
        Ok(u64::try_from(n)?)
    };
    Ok(Figures {
        turns,
        revision,
        snapshot_bytes: count(
            "SELECT coalesce((SELECT length(json) FROM snapshots WHERE goal = ?1 ORDER BY revision DESC LIMIT 1), 0)",
        )?,
        kept_events: count("SELECT count(*) FROM events WHERE goal = ?1")?,
        archived_events: count("SELECT count(*) FROM archived_events WHERE goal = ?1")?,
        cold_load: loads[loads.len() / 2],
        settle_p50: loopx_benches::percentile(times, 50),
        settle_p99: loopx_benches::percentile(times, 99),
    })
}

fn ms(d: StdDuration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_row(f: &Figures) {
    println!(
        "soak @{} turns (revision {}): snapshot {} B, kept events {}, archived {}, cold load {:.2} ms, settle p50 {:.3} ms p99 {:.3} ms",
        f.turns,
        f.revision,
        f.snapshot_bytes,
        f.kept_events,
        f.archived_events,
        ms(f.cold_load),
        ms(f.settle_p50),
        ms(f.settle_p99),
    );
}

/// Each figure against the first checkpoint's (target: within 1.5x).
fn print_table(figures: &[Figures]) {
    let Some(first) = figures.first() else { return };
    #[allow(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    println!();
    println!("| turns | snapshot | kept events | archived | cold load | settle p50 | settle p99 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for f in figures {
        #[allow(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
        let bytes = ratio(f.snapshot_bytes as f64, first.snapshot_bytes as f64);
        println!(
            "| {} | {} B ({:.2}x) | {} | {} | {:.2} ms ({:.2}x) | {:.3} ms ({:.2}x) | {:.3} ms ({:.2}x) |",
            f.turns,
            f.snapshot_bytes,
            bytes,
            f.kept_events,
            f.archived_events,
            ms(f.cold_load),
            ratio(ms(f.cold_load), ms(first.cold_load)),
            ms(f.settle_p50),
            ratio(ms(f.settle_p50), ms(first.settle_p50)),
            ms(f.settle_p99),
            ratio(ms(f.settle_p99), ms(first.settle_p99)),
        );
    }
}
