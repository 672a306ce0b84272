//! Fleet queries on PostgreSQL: 10,000 goals shared by 1,000 agents, each goal with three
//! agents, one todo ready and one deferred to a time of its own. Prints the p50 and p99 of
//! `loopx ready --agent` across goals (`Store::frontier`) and of the earliest-wake query
//! (`Store::next_wake`) against the target p99 ≤ 5 ms, and the memory a store handle holds per
//! cached goal (the growth of the process's resident set while a fresh handle loads 1,000
//! goals into its cache).
//!
//! Run with `cargo bench -p loopx-benches --bench fleet` (`-- GOALS AGENTS` for other sizes).
//! It starts a throwaway PostgreSQL; without the server binaries it says so and fails. The
//! tables are analyzed after the goals are created, as autovacuum would.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use loopx_benches::{Goal, against};
use loopx_kernel::prelude::*;
use loopx_kernel::{
    Actor, AgentId, Command, GoalId, NewTodo, PersonId, ResumeCondition, Timestamp, TodoId,
};
use loopx_store::test_cluster::Cluster;
use loopx_store::{PostgresOptions, PostgresStore};
use tokio::runtime::Runtime;

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The query latency every fleet query should keep at p99.
const TARGET_P99_MS: f64 = 5.0;
/// How many times each query is timed.
const SAMPLES: usize = 1_000;
/// How many goals a fresh handle loads to measure the memory per cached goal.
const CACHED: usize = 1_000;
/// Goals created at once.
const WRITERS: usize = 16;

fn main() -> Result<(), Failure> {
    let mut sizes = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse::<usize>().ok());
    let goals = sizes.next().unwrap_or(10_000);
    let agents = sizes.next().unwrap_or(1_000).max(3);
    let cluster = Cluster::start()?;
    let url = cluster.create_database("fleet")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let store = Arc::new(runtime.block_on(PostgresStore::connect(&url))?);
    let now = Timestamp::parse("2026-12-01T09:00:00Z")?;
    let started = Instant::now();
    runtime.block_on(populate(&store, goals, agents, now))?;
    println!(
        "fleet on PostgreSQL: {goals} goals, {agents} agents, 3 agents a goal, created in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // What autovacuum does on its own a little later: the planner learns the tables' sizes, so
    // the queries take their indexes rather than scanning tables it believes empty.
    Cluster::execute(&url, "ANALYZE")?;
    query_figures(&runtime, &store, agents, now)?;
    memory_figure(&runtime, &url, goals)?;
    Ok(())
}

fn goal_id(g: usize) -> Result<GoalId, Failure> {
    Ok(GoalId::new(format!("fleet-{g:05}"))?)
}

fn agent(a: usize) -> Result<AgentId, Failure> {
    Ok(AgentId::new(format!("agent-{a:04}"))?)
}

/// The three agents of goal `g`, spread so that each agent works on about `3 × goals / agents`
/// goals.
fn agents_of(g: usize, agents: usize) -> Result<Vec<AgentId>, Failure> {
    let mut picked = vec![g % agents];
    for step in [agents / 3 + 1, 2 * agents / 3 + 1] {
        let next = (g + step) % agents;
        if !picked.contains(&next) {
            picked.push(next);
        }
    }
    picked.into_iter().map(agent).collect()
}

async fn populate(
    store: &Arc<PostgresStore>,
    goals: usize,
    agents: usize,
    now: Timestamp,
) -> Result<(), Failure> {
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..WRITERS {
        let store = Arc::clone(store);
        writers.spawn(async move {
            for g in (w..goals).step_by(WRITERS) {
                create(&*store, g, agents, now).await?;
            }
            Ok::<(), Failure>(())
        });
    }
    while let Some(written) = writers.join_next().await {
        written??;
    }
    Ok(())
}

/// Goal `g`: created, one todo ready, one deferred until a time between one minute and about
/// a week ahead, different for each goal.
async fn create(store: &dyn Store, g: usize, agents: usize, now: Timestamp) -> Result<(), Failure> {
    let owner = PersonId::new("olivia")?;
    let mut spec = GoalSpec::builder(goal_id(g)?.as_str(), "a goal of the fleet", owner.as_str())
        .budget(Limits::UNLIMITED)
        .declared_identity()
        .build()?;
    spec.agents = agents_of(g, agents)?.into_iter().collect();
    let person = Actor::Person(owner);
    let handle = store.goal(&spec.id);
    handle
        .submit(&person, now, &Command::CreateGoal { spec })
        .await?;
    let ready = NewTodo::advance(TodoId::new("ready")?, "work ready now");
    let later: TodoId = TodoId::new("later")?;
    let deferred = NewTodo::advance(later.clone(), "work for later");
    let minutes = i64::try_from(1 + (g * 7_919) % 10_000)?;
    let until = ResumeCondition::At {
        at: now.plus(Duration::minutes(minutes)),
    };
    for command in [
        Command::AddTodo { todo: ready },
        Command::AddTodo { todo: deferred },
        Command::Defer {
            todo: later,
            until,
            grant_reason: None,
        },
    ] {
        handle.submit(&person, now, &command).await?;
    }
    Ok(())
}

/// The `percent`th percentile of `sorted`, in milliseconds.
fn percentile_ms(sorted: &[StdDuration], percent: usize) -> f64 {
    loopx_benches::percentile(sorted, percent).as_secs_f64() * 1000.0
}

/// `count` as a float, for averages of counts far below 2^52.
fn float(count: usize) -> f64 {
    u32::try_from(count).map_or(f64::from(u32::MAX), f64::from)
}

fn report(name: &str, mut times: Vec<StdDuration>) {
    times.sort();
    let p50 = percentile_ms(&times, 50);
    let p99 = percentile_ms(&times, 99);
    println!(
        "{name}: p50 {p50:.2} ms, p99 {p99:.2} ms over {} queries; {}",
        times.len(),
        against(p99, TARGET_P99_MS, Goal::AtMost)
    );
}

fn query_figures(
    runtime: &Runtime,
    store: &PostgresStore,
    agents: usize,
    now: Timestamp,
) -> Result<(), Failure> {
    let mut frontier = Vec::with_capacity(SAMPLES);
    let mut sizes = 0usize;
    for sample in 0..SAMPLES {
        let who = agent((sample * 389) % agents)?;
        let start = Instant::now();
        let ready = runtime.block_on(store.frontier(&who, now))?;
        frontier.push(start.elapsed());
        sizes += ready.len();
    }
    report("ready --agent across goals (Store::frontier)", frontier);
    println!(
        "  each agent had {:.1} todos ready on average",
        float(sizes) / float(SAMPLES)
    );
    let mut wake = Vec::with_capacity(SAMPLES);
    let mut earliest = None;
    for _ in 0..SAMPLES {
        let start = Instant::now();
        earliest = runtime.block_on(store.next_wake(now))?;
        wake.push(start.elapsed());
    }
    report("earliest wake across goals (Store::next_wake)", wake);
    println!(
        "  the earliest wake: {}",
        earliest.map_or_else(|| "none".to_owned(), |t| t.to_string())
    );
    Ok(())
}

/// The resident set of this process, in bytes (Linux's `/proc/self/statm`).
fn resident() -> Result<u64, Failure> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("statm has no resident field")?
        .parse()?;
    Ok(pages * 4096)
}

fn memory_figure(runtime: &Runtime, url: &str, goals: usize) -> Result<(), Failure> {
    let count = CACHED.min(goals);
    let options = PostgresOptions::default().cached_goals(count);
    let fresh = runtime.block_on(PostgresStore::connect_with_options(url, options))?;
    // The first load warms the connection and the code paths, so what follows is the cache.
    runtime.block_on(fresh.load(&goal_id(0)?))?;
    let before = resident()?;
    for g in 0..count {
        runtime.block_on(fresh.load(&goal_id(g)?))?;
    }
    let after = resident()?;
    let grown_kib = float(usize::try_from(after.saturating_sub(before) / 1024).unwrap_or(0));
    println!(
        "memory per cached goal: {:.1} KiB (the resident set grew {:.1} MiB while a fresh handle cached {count} goals)",
        grown_kib / float(count),
        grown_kib / 1024.0
    );
    Ok(())
}
