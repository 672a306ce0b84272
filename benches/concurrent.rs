//! Settle commits with many agents at once: 1, 4, 16 and 64 agents, each cycling turns (claim,
//! begin, settle) on a goal of its own through one shared store handle on a multi-threaded
//! runtime, as the agents of one host do; settled turns per second and the ratio of each to the
//! single agent's rate, measured in one run. On SQLite (`synchronous=FULL`) and on PostgreSQL
//! (`fsync` on), each with group commit and, beside it, with one transaction per commit; on
//! PostgreSQL also 64 agents from 4 processes of 16.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;

use loopx_store::PostgresOptions;

use super::{
    AGENTS, Command, Failure, GoalId, Instant, Keys, NewTodo, OperationId, Path, Runtime,
    SqliteOptions, SqliteStore, StdDuration, Store, Timestamp, agent, id, median, no_frames, owner,
    paced_submit, per_second, seeded_goal, spec, turn_cycle,
};
use loopx_benches::{Goal, against};
use loopx_store::PostgresStore;
use tokio::runtime::Builder;

/// The numbers of agents measured.
const COUNTS: [usize; 4] = [1, 4, 16, 64];
/// Turns settled per figure, shared among its agents (each runs at least [`MIN_TURNS`]).
const TURNS: usize = 384;
const MIN_TURNS: usize = 6;
/// Processes of the 64 agents on PostgreSQL, and agents in each.
const PROCESSES: usize = 4;
/// The environment variable that makes the benchmark binary one of those processes.
const CHILD: &str = "LOOPX_BENCH_AGENTS_CHILD";

fn now() -> Result<Timestamp, Failure> {
    Ok(Timestamp::parse("2026-11-29T10:00:00Z")?)
}

fn runtime() -> Result<Runtime, Failure> {
    Ok(Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Creates one goal per agent, named `{label}-{k}`, each with one idempotent todo `t0`.
fn goals<S: Store>(
    runtime: &Runtime,
    store: &S,
    label: &str,
    agents: usize,
) -> Result<(), Failure> {
    for k in 0..agents {
        runtime.block_on(seeded_goal(store, &format!("{label}-{k}"), 1, now()?))?;
    }
    Ok(())
}

/// Runs `agents` agents at once on the goals [`goals`] made under `label`, each settling `turns`
/// turns; returns how long they took together.
fn run<S: Store + 'static>(
    runtime: &Runtime,
    store: &Arc<S>,
    keys: Option<&Arc<Keys>>,
    (label, agents): (&str, usize),
    turns: usize,
) -> Result<std::time::Duration, Failure> {
    let now = now()?;
    // Turns of every run are named apart, so that a run on goals that ran before starts anew.
    let nth = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let start = Instant::now();
    runtime.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for k in 0..agents {
            let store = Arc::clone(store);
            let keys = keys.map(Arc::clone);
            let goal = id(format!("{label}-{k}"));
            let label = label.to_owned();
            set.spawn(async move {
                let (todo, who) = (id("t0"), agent(k % AGENTS));
                for t in 0..turns {
                    let turn = format!("{label}-{k}-{t}-{nth}");
                    let keys = keys.as_deref();
                    turn_cycle(keys, &*store, &goal, &who, &todo, &turn, now, &no_frames).await?;
                }
                Ok::<_, Failure>(())
            });
        }
        while let Some(done) = set.join_next().await {
            done??;
        }
        Ok::<_, Failure>(())
    })?;
    Ok(start.elapsed())
}

/// Runs of [`run`] so far.
static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Turns each of `agents` agents settles in one figure.
fn turns_each(agents: usize) -> usize {
    (TURNS / agents).max(MIN_TURNS)
}

/// Settled turns per second of `agents` agents at once through `store`, on goals of their own.
fn rate<S: Store + 'static>(
    runtime: &Runtime,
    store: &Arc<S>,
    label: &str,
    agents: usize,
) -> Result<f64, Failure> {
    goals(runtime, &**store, label, agents)?;
    let turns = turns_each(agents);
    let took = run(runtime, store, None, (label, agents), turns)?;
    Ok(per_second(agents * turns, took))
}

/// The rates for [`COUNTS`] agents, then the single agent again: the single-agent base is the
/// mean of its two runs, so that a drift of the machine over the figure shows.
fn rates<S: Store + 'static>(
    runtime: &Runtime,
    store: &Arc<S>,
    label: &str,
) -> Result<(f64, Vec<(usize, f64)>), Failure> {
    // Warm: the log past its first checkpoints, the pool's connections open.
    rate(runtime, store, &format!("{label}-warm"), 16)?;
    let mut measured = Vec::new();
    for agents in COUNTS {
        measured.push((
            agents,
            rate(runtime, store, &format!("{label}-{agents}"), agents)?,
        ));
    }
    let again = rate(runtime, store, &format!("{label}-1-again"), 1)?;
    Ok((f64::midpoint(measured[0].1, again), measured))
}

/// `1 agent 310/s, 4 agents 1020/s (3.29x), …`
fn line(single: f64, measured: &[(usize, f64)]) -> String {
    measured
        .iter()
        .map(|(agents, rate)| {
            if *agents == 1 {
                format!("1 agent {rate:.0}/s")
            } else {
                format!("{agents} agents {rate:.0}/s ({:.2}x)", rate / single)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratio(single: f64, measured: &[(usize, f64)], agents: usize) -> f64 {
    measured
        .iter()
        .find(|(n, _)| *n == agents)
        .map_or(0.0, |(_, rate)| rate / single)
}

/// The SQLite figures, with group commit and with one transaction per commit, each on a file
/// of its own in `dir`.
pub(super) fn sqlite(dir: &Path) -> Result<(), Failure> {
    let runtime = runtime()?;
    for (grouped, name) in [
        (true, "group commit"),
        (false, "one transaction per commit"),
    ] {
        let path = dir.join(format!(
            "agents-{}.db",
            if grouped { "group" } else { "alone" }
        ));
        let options = SqliteOptions::default().group_commit(grouped);
        let store = Arc::new(SqliteStore::create_with(&path, options)?);
        let (single, measured) = rates(&runtime, &store, "a")?;
        let sixteen = ratio(single, &measured, 16);
        let stats = store.group_stats();
        #[allow(clippy::cast_precision_loss, reason = "commit counts are small")]
        let held = stats.commits as f64 / stats.groups.max(1) as f64;
        let groups = if grouped {
            format!("; a group held {held:.1} commits on average, setup included")
        } else {
            String::new()
        };
        println!(
            "settled turns with agents at once @full, {name}: {} (single {single:.0}/s, the mean of its two runs; target 16 agents ≥ 3x: {}{groups})",
            line(single, &measured),
            against(sixteen, 3.0, Goal::AtLeast),
        );
    }
    Ok(())
}

/// Turns of the single-agent comparison and of the signed figure, in rounds that alternate.
const ALTERNATE_TURNS: usize = 240;
const ALTERNATE_ROUNDS: usize = 8;
/// Untimed turns on each file of the single-agent comparison first.
const WARM_TURNS: usize = 100;

/// One agent alone, with group commit on and off, on two files, alternating every four turns
/// after a warm-up of each: the median settle commit of each. A commit with nothing beside it must cost what it did.
pub(super) fn alone(dir: &Path) -> Result<(), Failure> {
    let runtime = runtime()?;
    let open = |name: &str, grouped: bool| -> Result<SqliteStore, Failure> {
        let options = SqliteOptions::default().group_commit(grouped);
        Ok(SqliteStore::create_with(
            dir.join(format!("{name}.db")),
            options,
        )?)
    };
    let stores = [open("alone-group", true)?, open("alone-plain", false)?];
    let now = now()?;
    for store in &stores {
        runtime.block_on(seeded_goal(store, "alone", 1, now))?;
    }
    let (todo, who, goal) = (id("t0"), agent(0), id("alone"));
    // Each file past its log's first checkpoints first (a turn writes about 24 log pages), so
    // that neither pays for a growing log the other does not.
    for (n, store) in stores.iter().enumerate() {
        for t in 0..WARM_TURNS {
            let turn = format!("warm-{n}-{t}");
            let cycle = turn_cycle(None, store, &goal, &who, &todo, &turn, now, &no_frames);
            runtime.block_on(cycle)?;
        }
    }
    let mut times: [Vec<StdDuration>; 2] = [Vec::new(), Vec::new()];
    for round in 0..ALTERNATE_TURNS / 4 {
        for (n, (store, times)) in stores.iter().zip(&mut times).enumerate() {
            for t in 0..4 {
                let turn = format!("alone-{n}-{round}-{t}");
                let cycle = turn_cycle(None, store, &goal, &who, &todo, &turn, now, &no_frames);
                times.push(runtime.block_on(cycle)?.0);
            }
        }
    }
    let [mut grouped, mut plain] = times;
    let (grouped, plain) = (median(&mut grouped), median(&mut plain));
    println!(
        "one agent alone @full: median settle commit {:.0} µs with group commit, {:.0} µs with one transaction per commit = {:.2}x (no target; alternating every four turns)",
        grouped.as_secs_f64() * 1e6,
        plain.as_secs_f64() * 1e6,
        plain.as_secs_f64() / grouped.as_secs_f64().max(1e-9),
    );
    Ok(())
}

/// Goals `{label}-{k}` for `agents` agents, signed with `keys`, each with one idempotent todo.
fn signed_goals(
    runtime: &Runtime,
    store: &SqliteStore,
    keys: &Keys,
    label: &str,
    agents: usize,
) -> Result<(), Failure> {
    let now = now()?;
    for k in 0..agents {
        let name = format!("{label}-{k}");
        let goal: GoalId = id(name.clone());
        let create = Command::CreateGoal {
            spec: keys.sign(spec(&name, &id("owner"))),
        };
        let mut todo = NewTodo::advance(id("t0"), "measured work");
        todo.idempotent = true;
        let add = Command::AddTodo { todo };
        runtime.block_on(async {
            let (create_op, add_op): (OperationId, OperationId) = (id("create"), id("add"));
            paced_submit(Some(keys), store, &goal, &owner(), now, &create, &create_op).await?;
            paced_submit(Some(keys), store, &goal, &owner(), now, &add, &add_op).await?;
            Ok::<_, Failure>(())
        })?;
    }
    Ok(())
}

/// Settled turns per second of 16 agents at once on signed goals against declared ones, with
/// group commit: each agent's signatures are made and verified on its own task, before its
/// commit joins a group, so verification runs beside the writer rather than in its way.
pub(super) fn signed(dir: &Path) -> Result<(), Failure> {
    const SIGNED_AGENTS: usize = 16;
    let runtime = runtime()?;
    let keys = Arc::new(Keys::new());
    let open = |name: &str| -> Result<Arc<SqliteStore>, Failure> {
        Ok(Arc::new(SqliteStore::create(
            dir.join(format!("{name}.db")),
        )?))
    };
    let (declared, signed) = (open("agents-declared")?, open("agents-signed")?);
    goals(&runtime, &*declared, "d", SIGNED_AGENTS)?;
    signed_goals(&runtime, &signed, &keys, "s", SIGNED_AGENTS)?;
    let turns = ALTERNATE_TURNS / ALTERNATE_ROUNDS / 2;
    let (mut plain, mut with_keys) = (StdDuration::ZERO, StdDuration::ZERO);
    for round in 0..=ALTERNATE_ROUNDS {
        let plain_took = run(&runtime, &declared, None, ("d", SIGNED_AGENTS), turns)?;
        let signed_took = run(&runtime, &signed, Some(&keys), ("s", SIGNED_AGENTS), turns)?;
        // The first round warms both files and is not counted.
        if round > 0 {
            plain += plain_took;
            with_keys += signed_took;
        }
    }
    let count = SIGNED_AGENTS * turns * ALTERNATE_ROUNDS;
    let (plain, with_keys) = (per_second(count, plain), per_second(count, with_keys));
    println!(
        "signed settled turns with {SIGNED_AGENTS} agents at once @full, group commit: {with_keys:.0}/s vs declared {plain:.0}/s = {:.2}x (no target; alternating rounds)",
        with_keys / plain,
    );
    Ok(())
}

/// The PostgreSQL figures: agents at once through one handle of one process, with group commit
/// and with one transaction per commit, then (with group commit) 64 agents from [`PROCESSES`]
/// processes of 16, each with its own handle.
pub(super) fn postgres(cluster: &loopx_store::test_cluster::Cluster) -> Result<(), Failure> {
    let runtime = runtime()?;
    for (grouped, name) in [
        (true, "group commit"),
        (false, "one transaction per commit"),
    ] {
        let url = cluster.create_database(if grouped { "agents" } else { "agents_alone" })?;
        let options = PostgresOptions::default()
            .max_connections(64)
            .group_commit(grouped);
        let store = Arc::new(runtime.block_on(PostgresStore::connect_with_options(&url, options))?);
        let (single, measured) = rates(&runtime, &store, "a")?;
        let sixty_four = ratio(single, &measured, 64);
        let spread = if grouped {
            let spread = processes(&url)?;
            let stats = store.group_stats();
            #[allow(clippy::cast_precision_loss, reason = "commit counts are small")]
            let held = stats.commits as f64 / stats.groups.max(1) as f64;
            format!(
                "; 64 agents from {PROCESSES} processes {spread:.0}/s ({:.2}x); a group held {held:.1} commits on average, setup included",
                spread / single
            )
        } else {
            String::new()
        };
        println!(
            "settled turns with agents at once @postgres, {name}, one process (a pool of 64): {} (single {single:.0}/s, the mean of its two runs; target 64 agents ≥ 5x: {}{spread})",
            line(single, &measured),
            against(sixty_four, 5.0, Goal::AtLeast),
        );
    }
    Ok(())
}

/// Settled turns per second of 64 agents from [`PROCESSES`] processes of this binary, started
/// together once each has made its goals.
fn processes(url: &str) -> Result<f64, Failure> {
    let agents = 64 / PROCESSES;
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|p| {
            Process::new(&exe)
                .env(CHILD, format!("{url} p{p} {agents}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut out = BufReader::new(child.stdout.take().ok_or("a child without stdout")?);
        let mut ready = String::new();
        out.read_line(&mut ready)?;
        if ready.trim() != "ready" {
            return Err(format!("a child process did not get ready: {ready:?}").into());
        }
        outputs.push(out);
    }
    let start = Instant::now();
    for child in &mut children {
        writeln!(child.stdin.as_mut().ok_or("a child without stdin")?, "go")?;
    }
    let mut turns = 0;
    for out in &mut outputs {
        let mut done = String::new();
        out.read_line(&mut done)?;
        turns += done
            .trim()
            .strip_prefix("done ")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| format!("a child process failed: {done:?}"))?;
    }
    let took = start.elapsed();
    for mut child in children {
        child.wait()?;
    }
    Ok(per_second(turns, took))
}

/// When this binary runs as one of the processes of [`processes`]: makes its goals, says
/// `ready`, waits for `go` on its input, runs its agents and says `done <turns>`. `None` when it
/// is not such a process.
pub(super) fn child() -> Option<Result<(), Failure>> {
    let setting = std::env::var(CHILD).ok()?;
    Some((|| {
        let mut parts = setting.split(' ');
        let (Some(url), Some(label), Some(agents)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{CHILD} is `url label agents`, not {setting:?}").into());
        };
        let agents: usize = agents.parse()?;
        let runtime = runtime()?;
        let options = PostgresOptions::default().max_connections(agents);
        let store = Arc::new(runtime.block_on(PostgresStore::connect_with_options(url, options))?);
        goals(&runtime, &*store, label, agents)?;
        println!("ready");
        let mut go = String::new();
        std::io::stdin().read_line(&mut go)?;
        let turns = turns_each(64);
        run(&runtime, &store, None, (label, agents), turns)?;
        println!("done {}", agents * turns);
        Ok(())
    })())
}
