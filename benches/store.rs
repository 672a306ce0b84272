//! Durable store figures on SQLite, printed as a table with every ratio measured in the same run:
//!
//! - settle-turn commits per second through `submit`, against raw single-row commits per second
//!   of the same engine with the same settings (target ≥ 0.7× at `synchronous=FULL`);
//! - turn cycles per second with several agents committing at once;
//! - cold load of a goal with 100k events (target ≤ 100 ms);
//! - stored bytes per settled turn (target ≤ 2 KiB).
//!
//! Run with `cargo bench -p loopx-benches --bench store`. The files live in a temporary
//! directory on the machine's disk, so the figures include its `fsync` cost.

use std::path::Path;
use std::thread;
use std::time::{Duration as StdDuration, Instant};

use loopx_benches::{Goal, against};
use loopx_kernel::seams::{AppendRequest, Store};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Duration, GoalId, GoalSpec, GoalState, Limits,
    NewTodo, OperationId, PersonId, Policy, Settlement, SourceId, Timestamp, TodoId, Transition,
    TurnId, Verdict, VerdictOutcome, execute, stamp,
};
use loopx_store::{Durability, SqliteOptions, SqliteStore, submit};
use tokio::runtime::{Builder, Runtime};

/// Turns timed for the settle-commit figure.
const TURNS: usize = 300;
/// Raw single-row commits timed for the baseline.
const RAW_COMMITS: usize = 300;
/// Concurrent agents in the batched figure, and turns each runs.
const AGENTS: usize = 4;
const TURNS_PER_AGENT: usize = 60;
/// Events in the cold-load goal.
const COLD_EVENTS: usize = 100_000;

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Failure> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let runtime = Builder::new_current_thread().enable_all().build()?;
    println!("store @sqlite (WAL), figures from one run on this machine's disk");
    for durability in [Durability::Full, Durability::Normal] {
        let name = match durability {
            Durability::Full => "full",
            Durability::Normal => "normal",
        };
        let raw = raw_commits_per_second(&dir.path().join(format!("raw-{name}.db")), name)?;
        let path = dir.path().join(format!("settle-{name}.db"));
        let options = SqliteOptions::default().durability(durability);
        let (settles, bytes) = settle_commits(&runtime, &path, options)?;
        // The target is set for the durable default; without an fsync per commit the store's own
        // work (load, validate, fold, index rows) dominates, and the ratio is shown as is.
        let verdict = match durability {
            Durability::Full => format!(
                "target ≥ 0.7x: {}",
                against(settles / raw, 0.7, Goal::AtLeast)
            ),
            Durability::Normal => "no target".to_owned(),
        };
        println!(
            "settle-turn commits @{name}: {settles:.0}/s vs raw single-row commits {raw:.0}/s = {:.2}x ({verdict})",
            settles / raw,
        );
        println!(
            "stored bytes per settled turn @{name}: {bytes:.0} B (claim, begin and settle, with receipts, index rows and snapshots; target 2048 B: {})",
            against(bytes, 2048.0, Goal::AtMost),
        );
    }
    let batched = batched_turns(&dir.path().join("batched.db"))?;
    println!(
        "turn cycles with {AGENTS} agents at once @full: {:.0} cycles/s on one goal, {:.0} cycles/s on {AGENTS} goals (no target)",
        batched.0, batched.1
    );
    let (load, events) = cold_load(&runtime, &dir.path().join("cold.db"))?;
    println!(
        "cold load of a goal with {events} events: {:.1} ms (target 100 ms: {})",
        load * 1000.0,
        against(load * 1000.0, 100.0, Goal::AtMost),
    );
    Ok(())
}

/// Single-row commits with the engine and settings the store uses: WAL, the same `synchronous`.
fn raw_commits_per_second(path: &Path, synchronous: &str) -> Result<f64, Failure> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.execute(
        "CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
        [],
    )?;
    let body = vec![7u8; 400];
    let start = Instant::now();
    for _ in 0..RAW_COMMITS {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        conn.execute("INSERT INTO rows (body) VALUES (?1)", [&body])?;
        conn.execute_batch("COMMIT")?;
    }
    Ok(per_second(RAW_COMMITS, start.elapsed()))
}

fn per_second(count: usize, elapsed: StdDuration) -> f64 {
    #[allow(clippy::cast_precision_loss)] // counts stay far below 2^52
    let count = count as f64;
    count / elapsed.as_secs_f64().max(1e-9)
}

fn id<T: TryFrom<String>>(text: impl Into<String>) -> T {
    match T::try_from(text.into()) {
        Ok(id) => id,
        Err(_) => unreachable!("benchmark ids are valid"),
    }
}

fn owner() -> Actor {
    Actor::Person(id("owner"))
}

fn agent(n: usize) -> AgentId {
    id(format!("agent-{n}"))
}

fn spec(goal: &str, todos_owner: &PersonId) -> GoalSpec {
    GoalSpec {
        id: id(goal),
        objective: "measure the store".into(),
        owner: todos_owner.clone(),
        criteria: vec![],
        agents: (0..AGENTS).map(agent).collect(),
        budget: Limits::UNLIMITED,
        policy: Policy {
            lease_ttl: Duration::hours(1),
            ..Policy::default()
        },
        grants: std::collections::BTreeMap::new(),
    }
}

/// A goal with `todos` idempotent todos `t0…`, created through `submit`.
async fn seeded_goal<S: Store>(
    store: &S,
    goal: &str,
    todos: usize,
    now: Timestamp,
) -> Result<GoalId, Failure> {
    let goal_id: GoalId = id(goal);
    let create = Command::CreateGoal {
        spec: spec(goal, &id("owner")),
    };
    submit(
        store,
        &goal_id,
        &owner(),
        now,
        &create,
        &id(format!("{goal}-create")),
    )
    .await?;
    for t in 0..todos {
        let mut todo = NewTodo::advance(id(format!("t{t}")), "measured work");
        todo.idempotent = true;
        let op: OperationId = id(format!("{goal}-add-{t}"));
        submit(
            store,
            &goal_id,
            &owner(),
            now,
            &Command::AddTodo { todo },
            &op,
        )
        .await?;
    }
    Ok(goal_id)
}

/// Claim, begin and settle one turn on `todo` (kept open, so it can cycle again). Returns the
/// time the settle commit took.
async fn turn_cycle<S: Store>(
    store: &S,
    goal: &GoalId,
    who: &AgentId,
    todo: &TodoId,
    turn: &str,
    now: Timestamp,
) -> Result<StdDuration, Failure> {
    let me = Actor::Agent(who.clone());
    let claim = Command::Claim {
        todo: todo.clone(),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    let claimed = submit(store, goal, &me, now, &claim, &id(format!("{turn}-claim"))).await?;
    let epoch = claimed.state.todos.get(todo).map_or(0, |t| t.last_epoch);
    let turn_id: TurnId = id(turn);
    let begin = Command::BeginTurn {
        todo: todo.clone(),
        epoch,
        turn: turn_id.clone(),
        reserve: None,
    };
    submit(store, goal, &me, now, &begin, &id(format!("{turn}-begin"))).await?;
    let settle = Command::SettleTurn(Settlement {
        todo: todo.clone(),
        epoch,
        turn: turn_id,
        verdict: Verdict {
            validator: Actor::Validator(id::<SourceId>("tests")),
            outcome: VerdictOutcome::Progress,
            summary: "a bounded step proven".into(),
        },
        evidence: vec![],
        observations: vec![],
        transition: Transition::KeepOpen,
        usage: Amounts {
            tokens: 12_000,
            wall_ms: 30_000,
            ..Amounts::ONE_TURN
        },
    });
    let start = Instant::now();
    submit(
        store,
        goal,
        &me,
        now,
        &settle,
        &id(format!("{turn}-settle")),
    )
    .await?;
    Ok(start.elapsed())
}

fn file_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum()
}

/// Settle commits per second, and stored bytes per settled turn (file growth over the turns,
/// after a checkpoint folds the log into the database).
fn settle_commits(
    runtime: &Runtime,
    path: &Path,
    options: SqliteOptions,
) -> Result<(f64, f64), Failure> {
    let store = SqliteStore::open_with(path, options)?;
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let todos = 20;
    let goal = runtime.block_on(seeded_goal(&store, "settle", todos, now))?;
    checkpoint(path)?;
    let before = file_bytes(path);
    let mut settling = StdDuration::ZERO;
    for n in 0..TURNS {
        let todo: TodoId = id(format!("t{}", n % todos));
        let who = agent(n % AGENTS);
        settling += runtime.block_on(turn_cycle(
            &store,
            &goal,
            &who,
            &todo,
            &format!("turn-{n}"),
            now,
        ))?;
    }
    checkpoint(path)?;
    let grown = file_bytes(path).saturating_sub(before);
    #[allow(clippy::cast_precision_loss)] // byte counts stay far below 2^52
    let per_turn = grown as f64 / TURNS as f64;
    Ok((per_second(TURNS, settling), per_turn))
}

fn checkpoint(path: &Path) -> Result<(), Failure> {
    let conn = rusqlite::Connection::open(path)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
}

/// Full turn cycles per second with `AGENTS` threads, each with its own store handle (its own
/// connections), first all on one goal (compare-and-set contention), then one goal each.
fn batched_turns(path: &Path) -> Result<(f64, f64), Failure> {
    let setup = Builder::new_current_thread().enable_all().build()?;
    let store = SqliteStore::open(path)?;
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let shared = setup.block_on(seeded_goal(&store, "shared", AGENTS, now))?;
    let own: Vec<GoalId> = (0..AGENTS)
        .map(|n| setup.block_on(seeded_goal(&store, &format!("own-{n}"), 1, now)))
        .collect::<Result<_, _>>()?;
    let run = |goals: Vec<(GoalId, TodoId)>, label: &str| -> Result<f64, Failure> {
        let start = Instant::now();
        let workers: Vec<_> = goals
            .into_iter()
            .enumerate()
            .map(|(n, (goal, todo))| {
                let path = path.to_owned();
                let label = label.to_owned();
                thread::spawn(move || -> Result<(), Failure> {
                    let runtime = Builder::new_current_thread().enable_all().build()?;
                    let store = SqliteStore::open(&path)?;
                    for k in 0..TURNS_PER_AGENT {
                        let turn = format!("{label}-{n}-{k}");
                        runtime.block_on(turn_cycle(
                            &store,
                            &goal,
                            &agent(n),
                            &todo,
                            &turn,
                            now,
                        ))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a benchmark thread panicked")??;
        }
        Ok(per_second(AGENTS * TURNS_PER_AGENT, start.elapsed()))
    };
    let one_goal = run(
        (0..AGENTS)
            .map(|n| (shared.clone(), id(format!("t{n}"))))
            .collect(),
        "shared",
    )?;
    let own_goals = run(own.into_iter().map(|g| (g, id("t0"))).collect(), "own")?;
    Ok((one_goal, own_goals))
}

/// Builds a goal of about `COLD_EVENTS` events in memory with the kernel, appends it in large
/// batches, then times `load` on fresh handles (no cache) and returns the median.
fn cold_load(runtime: &Runtime, path: &Path) -> Result<(f64, usize), Failure> {
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let goal_id: GoalId = id("cold");
    let created = execute(
        None,
        &owner(),
        now,
        &Command::CreateGoal {
            spec: spec("cold", &id("owner")),
        },
    )?;
    let mut log = stamp(0, &owner(), now, created);
    let mut state = GoalState::replay(&log)?;
    let mut n = 0;
    while log.len() < COLD_EVENTS {
        let todo: TodoId = id(format!("t{n}"));
        log.extend(state.handle(
            &owner(),
            now,
            &Command::AddTodo {
                todo: NewTodo::advance(todo.clone(), "cold work"),
            },
        )?);
        let me = Actor::Agent(agent(n % AGENTS));
        let epoch = state.todos.get(&todo).map_or(0, |t| t.last_epoch) + 1;
        log.extend(state.handle(
            &me,
            now,
            &Command::Claim {
                todo: todo.clone(),
                ttl: None,
                workspace: None,
                grant_reason: None,
            },
        )?);
        let turn: TurnId = id(format!("c{n}"));
        log.extend(state.handle(
            &me,
            now,
            &Command::BeginTurn {
                todo: todo.clone(),
                epoch,
                turn: turn.clone(),
                reserve: None,
            },
        )?);
        let settle = Settlement {
            todo,
            epoch,
            turn,
            verdict: Verdict {
                validator: Actor::Validator(id::<SourceId>("tests")),
                outcome: VerdictOutcome::Passed,
                summary: String::new(),
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            usage: Amounts::ONE_TURN,
        };
        log.extend(state.handle(&me, now, &Command::SettleTurn(settle))?);
        n += 1;
    }
    let store = SqliteStore::open(path)?;
    let mut written = 0u64;
    for (k, batch) in log.chunks(5_000).enumerate() {
        let request = AppendRequest {
            goal: goal_id.clone(),
            expected_revision: written,
            operation: id(format!("load-{k}")),
            digest: format!("load-{k}"),
            at: now,
            events: batch.to_vec(),
        };
        runtime.block_on(store.append(request))?;
        written += batch.len() as u64;
    }
    drop(store);
    let mut times = Vec::new();
    for _ in 0..5 {
        let fresh = SqliteStore::open(path)?;
        let start = Instant::now();
        let loaded = runtime.block_on(fresh.load(&goal_id))?;
        times.push(start.elapsed().as_secs_f64());
        if loaded.as_ref().map(|s| s.revision) != Some(written) {
            return Err("the cold goal did not load at its last revision".into());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], log.len()))
}
