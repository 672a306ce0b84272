//! Durable store figures on SQLite and PostgreSQL, printed as a table with every ratio measured
//! in the same run:
//!
//! - settle-turn commits per second through `submit`, against raw single-row commits per second
//!   of the same engine with the same settings (target ≥ 0.7× on SQLite at `synchronous=FULL`,
//!   ≥ 0.5× on PostgreSQL over loopback). The two alternate in ten blocks of 30, so that both
//!   see the same machine (disk and CPU load from anything else running weighs on both
//!   alike); the line also shows the ratio of median commit latencies, which stalls caused by
//!   other processes do not move. On SQLite the store runs on a multi-threaded tokio runtime,
//!   as a host's `#[tokio::main]` gives it, and at `FULL` also on a current-thread one;
//! - turn cycles per second with several agents committing at once, and settled turns per
//!   second with 1, 4, 16 and 64 agents at once on goals of their own through one handle (on
//!   SQLite with group commit and without it; on PostgreSQL also 64 agents from 4 processes),
//!   against the single agent's rate (targets: 16 agents ≥ 3× on SQLite, 64 agents ≥ 5× on
//!   PostgreSQL; see `concurrent.rs`);
//! - cold load of a goal with 100k events (target ≤ 100 ms);
//! - stored bytes per settled turn (target ≤ 2 KiB): file growth on SQLite, growth of
//!   `pg_total_relation_size` over the store's tables on PostgreSQL;
//! - what signing costs a settle commit on SQLite at `FULL`: settle commits on a signed goal
//!   (every command signed by its actor, the verdict by its validator, both verified) against
//!   the same on a declared goal, alternating in blocks (target ≥ 0.9×), beside the time the
//!   two verifications of one settle take.
//!
//! Run with `cargo bench -p loopx-benches --bench store`; `-- cold` runs only the cold loads
//! (with the time decoding the snapshot alone takes), `-- agents` only the figures of agents at
//! once, `-- signed` only the signed settle commits against declared ones, `-- sqlite` only the
//! other SQLite figures,
//! `-- postgres` only the PostgreSQL ones. The SQLite files live in a temporary
//! directory on the machine's disk, so the figures include its `fsync` cost. PostgreSQL runs as
//! a throwaway cluster (`loopx_store::test_cluster`) on 127.0.0.1 with its durable defaults
//! (`fsync` on), started from the `initdb` and `pg_ctl` on `PATH` or in `LOOPX_PG_BIN`; without
//! them the benchmark says so and exits with a failure.

use loopx_kernel::write::stamp;
use loopx_kernel::{
    Identity, RegisteredKey, SecretKey, Signer, StoreExt, SubmitError, Submitted, identity,
};
use loopx_provider::clock::SystemClock;
use std::path::Path;
use std::thread;
use std::time::{Duration as StdDuration, Instant};

use loopx_benches::{Goal, against};
use loopx_kernel::seams::{AppendRequest, Commit, Store};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Duration, GoalId, GoalSpec, GoalState, NewTodo,
    OperationId, PersonId, Settlement, Snapshot, SourceId, Timestamp, TodoId, Transition, TurnId,
    Verdict, VerdictOutcome, execute,
};
use loopx_store::test_cluster::Cluster;
use loopx_store::{Durability, PostgresStore, SqliteOptions, SqliteStore};
use tokio::runtime::{Builder, Runtime};
use tokio_postgres::NoTls;

/// Turns timed for the settle-commit figure.
const TURNS: usize = 300;
/// Raw single-row commits timed for the baseline.
const RAW_COMMITS: usize = 300;
/// Untimed commits before either is timed, so that both run in steady state: on SQLite, past
/// the first checkpoint, after which the write-ahead log is reused rather than grown (a growing
/// log costs every commit a metadata sync, a reused one does not). A raw commit writes one or
/// two pages of the log; a turn cycles three commits of about eight pages each.
const WARM_RAW: usize = 1_200;
/// Untimed turns before the timed ones (see [`WARM_RAW`]).
const WARM_TURNS: usize = 60;
/// Rounds in which raw commits and settle turns alternate (each round runs a share of both):
/// 30 raw commits, then 30 settled turns. Blocks rather than single commits, so that one
/// engine's `fsync` does not land in the other's timing at every step.
const ROUNDS: usize = 10;
/// Concurrent agents in the batched figure, and turns each runs.
const AGENTS: usize = 4;
const TURNS_PER_AGENT: usize = 60;
/// Todos in each goal of the settle figures.
const TODOS: usize = 20;
/// Goals in the many-goals figure, and the turns settled on each while it is timed.
const MANY_GOALS: usize = 50;
const TURNS_PER_GOAL: usize = 8;
/// Events in the cold-load goal.
const COLD_EVENTS: usize = 100_000;
/// Turns timed on the cold-load goal after its loads, and on a new goal beside it.
const AGED_TURNS: usize = 40;

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[path = "peers/peers.rs"]
mod peers;

#[path = "concurrent.rs"]
mod concurrent;

fn main() -> Result<(), Failure> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    // One of the processes of the figure of agents from several processes.
    if let Some(child) = concurrent::child() {
        return child;
    }
    // Started first, so that a machine without PostgreSQL fails at once.
    let cluster = match Cluster::start_durable() {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("the store benchmark cannot start its PostgreSQL cluster: {error}");
            std::process::exit(1);
        }
    };
    let dir = tempfile::tempdir()?;
    let runtime = Builder::new_current_thread().enable_all().build()?;
    let only = |part: &str| std::env::args().skip(1).any(|a| a == part);
    if only("cold") {
        return cold_figures(&runtime, &cluster, dir.path());
    }
    if only("postgres") {
        return postgres_figures(&runtime, &cluster);
    }
    if only("peers") {
        return peers::figures(&cluster, dir.path());
    }
    if only("signed") {
        return signature_cost(dir.path());
    }
    if only("agents") {
        concurrent::alone(dir.path())?;
        concurrent::sqlite(dir.path())?;
        concurrent::signed(dir.path())?;
        return concurrent::postgres(&cluster);
    }
    sqlite_figures(dir.path())?;
    if only("sqlite") {
        return Ok(());
    }
    sqlite_cold(&runtime, dir.path())?;
    postgres_figures(&runtime, &cluster)
}

/// The SQLite figures but the cold load: settle against raw commits and bytes per turn at both
/// durabilities, then several agents at once.
fn sqlite_figures(dir: &Path) -> Result<(), Failure> {
    println!("store @sqlite (WAL), figures from one run on this machine's disk");
    // A host's `#[tokio::main]` runtime is multi-threaded; the durable default is also measured
    // on a current-thread runtime, where every SQLite call goes to the blocking pool and back.
    let runs = [
        (Durability::Full, true, "full"),
        (Durability::Full, false, "full, current-thread runtime"),
        (Durability::Normal, true, "normal"),
    ];
    // The settle figure's median-latency ratio at `FULL` on the multi-threaded runtime.
    let mut settle_medians = 0.0;
    for (durability, multi_threaded, name) in runs {
        let runtime = if multi_threaded {
            Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?
        } else {
            Builder::new_current_thread().enable_all().build()?
        };
        let file = name.replace(", ", "-").replace(' ', "-");
        let synchronous = match durability {
            Durability::Full => "full",
            Durability::Normal => "normal",
        };
        let figures = sqlite_settles(&runtime, dir, &file, durability, synchronous)?;
        let (settles, raw, bytes) = (figures.settles, figures.raw, figures.bytes);
        let medians = figures.median_ratio;
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
            "settle-turn commits @{name}: {settles:.0}/s vs raw single-row commits {raw:.0}/s = {:.2}x ({verdict}; median latencies {medians:.2}x)",
            settles / raw,
        );
        if multi_threaded && durability == Durability::Full {
            settle_medians = medians;
        }
        if multi_threaded {
            println!(
                "stored bytes per settled turn @{name}: {bytes:.0} B (claim, begin and settle, with receipts, index rows and snapshots; target 2048 B: {})",
                against(bytes, 2048.0, Goal::AtMost),
            );
        }
    }
    let floor = sqlite_floor(dir, FloorRows::SettleCommit)?;
    println!(
        "floor @full: the rows a settle commit must write, as plain SQL (an event row with its receipt, the goal row with its wake, a frontier row), vs raw single-row commits: median latencies {:.2}x ({:.0}/s vs {:.0}/s = {:.2}x); settle commits reach {:.2}x of it by median latency (no target)",
        floor.2,
        floor.0,
        floor.1,
        floor.0 / floor.1,
        settle_medians / floor.2.max(1e-9),
    );
    let least = sqlite_floor(dir, FloorRows::EventOnly)?;
    println!(
        "floor @full, least: the event row alone with its entry in the index by operation (the least any commit writes that keeps compare-and-set and operation-id idempotency, with every index row and the goal row off the commit path), vs raw single-row commits: median latencies {:.2}x ({:.0}/s vs {:.0}/s = {:.2}x; issue 19's target ≥ 0.9x: {})",
        least.2,
        least.0,
        least.1,
        least.0 / least.1,
        against(least.2, 0.9, Goal::AtLeast),
    );
    signature_cost(dir)?;
    let runtime = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let many = many_goals(&runtime, &|name: &str| {
        let path = dir.join(format!("{name}.db"));
        Ok((SqliteStore::create(&path)?, wal_frames(&path)))
    })?;
    print_many_goals("full", many);
    let batched_path = dir.join("batched.db");
    let batched = batched_turns(move |_| Ok(SqliteStore::create(&batched_path)?))?;
    println!(
        "turn cycles with {AGENTS} agents at once @full: {:.0} cycles/s on one goal, {:.0} cycles/s on {AGENTS} goals, `submit` gave up contended {} times, retried (no target)",
        batched.0, batched.1, batched.2
    );
    concurrent::alone(dir)?;
    concurrent::sqlite(dir)?;
    concurrent::signed(dir)
}

/// Only the cold-load figures (`-- cold`): SQLite, then PostgreSQL.
fn cold_figures(runtime: &Runtime, cluster: &Cluster, dir: &Path) -> Result<(), Failure> {
    sqlite_cold(runtime, dir)?;
    postgres_cold(runtime, cluster)
}

fn sqlite_cold(runtime: &Runtime, dir: &Path) -> Result<(), Failure> {
    let cold_path = dir.join("cold.db");
    let cold = cold_load(runtime, |_| Ok(SqliteStore::create(&cold_path)?))?;
    println!(
        "cold load of a goal with {} events: {:.1} ms (target 100 ms: {})",
        cold.events,
        cold.load * 1000.0,
        against(cold.load * 1000.0, 100.0, Goal::AtMost),
    );
    println!(
        "  of which decoding its {:.1} MB snapshot alone: {:.1} ms (no target)",
        cold.decode.bytes / 1e6,
        cold.decode.seconds * 1000.0,
    );
    print_aged(&cold, "");
    Ok(())
}

/// The settle commits on the old goal against those on a new one.
fn print_aged(cold: &Cold, at: &str) {
    println!(
        "  then a settle commit on it{at}: median {:.0} µs, on a new goal in the same store {:.0} µs = {:.2}x (no target: a commit costs what it changes, not the goal's history)",
        cold.aged.as_secs_f64() * 1e6,
        cold.young.as_secs_f64() * 1e6,
        cold.aged.as_secs_f64() / cold.young.as_secs_f64().max(1e-9),
    );
}

fn postgres_cold(runtime: &Runtime, cluster: &Cluster) -> Result<(), Failure> {
    let cold_url = cluster.create_database("cold")?;
    let cold = cold_load(runtime, |runtime| {
        Ok(runtime.block_on(PostgresStore::connect(&cold_url))?)
    })?;
    println!(
        "cold load of a goal with {} events @postgres: {:.1} ms (target 100 ms: {})",
        cold.events,
        cold.load * 1000.0,
        against(cold.load * 1000.0, 100.0, Goal::AtMost),
    );
    print_aged(&cold, " @postgres");
    Ok(())
}

/// The same figures on PostgreSQL: the throwaway cluster on loopback, `fsync` on, one database
/// per figure.
fn postgres_figures(runtime: &Runtime, cluster: &Cluster) -> Result<(), Failure> {
    println!("store @postgres (loopback, fsync on), figures from one run on this machine's disk");
    let figures = postgres_settles(runtime, cluster, "")?;
    let (settles, raw, bytes) = (figures.settles, figures.raw, figures.bytes);
    println!(
        "settle-turn commits @postgres: {settles:.0}/s vs raw single-row commits {raw:.0}/s = {:.2}x (target ≥ 0.5x: {}; median latencies {:.2}x)",
        settles / raw,
        against(settles / raw, 0.5, Goal::AtLeast),
        figures.median_ratio,
    );
    println!(
        "stored bytes per settled turn @postgres: {bytes:.0} B (pg_total_relation_size of the store's tables, with indexes and TOAST; target 2048 B: {})",
        against(bytes, 2048.0, Goal::AtMost),
    );
    println!(
        "  of which, per settled turn: {}",
        figures
            .by_part
            .iter()
            .map(|(table, bytes)| format!("{table} {bytes:.0} B"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let many = many_goals(runtime, &|name: &str| {
        let url = cluster.create_database(name)?;
        Ok((
            runtime.block_on(PostgresStore::connect(&url))?,
            Box::new(no_frames),
        ))
    })?;
    print_many_goals("postgres", many);
    let batched_url = cluster.create_database("batched")?;
    let batched =
        batched_turns(move |runtime| Ok(runtime.block_on(PostgresStore::connect(&batched_url))?))?;
    println!(
        "turn cycles with {AGENTS} agents at once @postgres: {:.0} cycles/s on one goal, {:.0} cycles/s on {AGENTS} goals, `submit` gave up contended {} times, retried (no target)",
        batched.0, batched.1, batched.2
    );
    concurrent::postgres(cluster)?;
    postgres_cold(runtime, cluster)
}

/// The settle figure on a SQLite file of `file`'s name at `durability`, against raw commits at
/// the same `synchronous`, bytes measured after a checkpoint.
fn sqlite_settles(
    runtime: &Runtime,
    dir: &Path,
    file: &str,
    durability: Durability,
    synchronous: &str,
) -> Result<SettleFigures, Failure> {
    let raw_db = raw_sqlite(&dir.join(format!("raw-{file}.db")), synchronous)?;
    let path = dir.join(format!("settle-{file}.db"));
    let options = SqliteOptions::default().durability(durability);
    let store = SqliteStore::create_with(&path, options)?;
    settle_commits(
        runtime,
        &store,
        &mut |n| raw_sqlite_commits(&raw_db, n),
        &|| {
            checkpoint(&path)?;
            Ok(vec![("file".to_owned(), file_bytes(&path))])
        },
    )
}

/// The settle figure on PostgreSQL, in databases named `{prefix}raw` and `{prefix}settle`.
fn postgres_settles(
    runtime: &Runtime,
    cluster: &Cluster,
    prefix: &str,
) -> Result<SettleFigures, Failure> {
    let raw = cluster.create_database(&format!("{prefix}raw"))?;
    let (raw_client, insert) = runtime.block_on(raw_postgres(&raw))?;
    let url = cluster.create_database(&format!("{prefix}settle"))?;
    let store = runtime.block_on(PostgresStore::connect(&url))?;
    let (client, connection) = runtime.block_on(tokio_postgres::connect(&url, NoTls))?;
    runtime.spawn(connection);
    settle_commits(
        runtime,
        &store,
        &mut |n| runtime.block_on(raw_postgres_commits(&raw_client, &insert, n)),
        &|| runtime.block_on(stored_bytes(&client)),
    )
}

/// The raw baseline's connection on the same server: one tokio-postgres connection (no pool),
/// a table of 400-byte rows and its prepared `INSERT`.
async fn raw_postgres(
    url: &str,
) -> Result<(tokio_postgres::Client, tokio_postgres::Statement), Failure> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE rows (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")
        .await?;
    let insert = client
        .prepare("INSERT INTO rows (body) VALUES ($1)")
        .await?;
    Ok((client, insert))
}

/// `n` single-row commits, each `BEGIN`, one prepared `INSERT` of a 400-byte row, `COMMIT`;
/// returns the time each took.
async fn raw_postgres_commits(
    client: &tokio_postgres::Client,
    insert: &tokio_postgres::Statement,
    n: usize,
) -> Result<Vec<StdDuration>, Failure> {
    let body = vec![7u8; 400];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        client.batch_execute("BEGIN").await?;
        client.execute(insert, &[&body]).await?;
        client.batch_execute("COMMIT").await?;
        times.push(start.elapsed());
    }
    Ok(times)
}

/// Bytes on disk of each table of the store's schema, with its indexes and TOAST.
async fn stored_bytes(client: &tokio_postgres::Client) -> Result<Vec<(String, u64)>, Failure> {
    let rows = client
        .query(
            "SELECT c.relname::text, pg_total_relation_size(c.oid)::BIGINT \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY 1",
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.get::<_, String>(0),
                u64::try_from(row.get::<_, i64>(1))?,
            ))
        })
        .collect()
}

/// The raw baseline's database: the engine and settings the store uses (WAL, the same
/// `synchronous`), one table of 400-byte rows.
fn raw_sqlite(path: &Path, synchronous: &str) -> Result<rusqlite::Connection, Failure> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.execute(
        "CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
        [],
    )?;
    Ok(conn)
}

/// `n` single-row commits, each `BEGIN IMMEDIATE`, one `INSERT` of a 400-byte row, `COMMIT`;
/// returns the time each took.
fn raw_sqlite_commits(conn: &rusqlite::Connection, n: usize) -> Result<Vec<StdDuration>, Failure> {
    let body = vec![7u8; 400];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        conn.execute_batch("BEGIN IMMEDIATE")?;
        conn.execute("INSERT INTO rows (body) VALUES (?1)", [&body])?;
        conn.execute_batch("COMMIT")?;
        times.push(start.elapsed());
    }
    Ok(times)
}

/// Which rows a floor commit writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FloorRows {
    /// What a settle commit changes: the event row with its receipt (and its entry in the index
    /// by operation), the goal row's revision and wake (and its entry in the index by wake), and
    /// one frontier row.
    SettleCommit,
    /// The event row and its entry in the index by operation alone: its primary key is the
    /// compare-and-set on the revision, its index the operation id's idempotency.
    EventOnly,
}

/// A floor: the rows of `rows`, written as plain SQL with the store's layout and settings
/// (`synchronous=FULL`) and no reads, validation or encoding. Alternates with raw single-row
/// commits as the settle figure does; returns commits per second of each and the ratio of their
/// median latencies.
fn sqlite_floor(dir: &Path, rows: FloorRows) -> Result<(f64, f64, f64), Failure> {
    let name = match rows {
        FloorRows::SettleCommit => "floor",
        FloorRows::EventOnly => "floor-least",
    };
    let raw_db = raw_sqlite(&dir.join(format!("raw-{name}.db")), "full")?;
    let floor = rusqlite::Connection::open(dir.join(format!("{name}.db")))?;
    floor.pragma_update(None, "journal_mode", "WAL")?;
    floor.pragma_update(None, "synchronous", "full")?;
    floor.execute_batch(
        "CREATE TABLE events (goal TEXT NOT NULL, revision INTEGER NOT NULL, at INTEGER NOT NULL,
             json TEXT NOT NULL, operation TEXT, digest TEXT, commit_events INTEGER,
             PRIMARY KEY (goal, revision)) WITHOUT ROWID;
         CREATE UNIQUE INDEX events_by_operation ON events (goal, operation)
             WHERE operation IS NOT NULL;
         CREATE TABLE goals (goal TEXT PRIMARY KEY NOT NULL, revision INTEGER NOT NULL,
             updated_at INTEGER NOT NULL, valid_until INTEGER) WITHOUT ROWID;
         CREATE INDEX goals_by_valid_until ON goals (valid_until);
         CREATE TABLE frontier (agent TEXT NOT NULL, goal TEXT NOT NULL, todos TEXT NOT NULL,
             PRIMARY KEY (agent, goal)) WITHOUT ROWID;
         INSERT INTO goals VALUES ('settle', 0, 0, NULL);
         INSERT INTO frontier VALUES ('agent-0', 'settle', '[]');",
    )?;
    let json = format!(
        r#"{{"schema":{},"actor":{{"agent":"agent-0"}},"event":{{"type":"turn_settled","summary":"{}"}}}}"#,
        loopx_kernel::SCHEMA_VERSION,
        "x".repeat(200)
    );
    let digest = "0".repeat(64);
    let mut revision = 0_i64;
    let mut floor_commits = |n: usize| -> Result<Vec<StdDuration>, Failure> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            revision += 1;
            let start = Instant::now();
            floor.execute_batch("BEGIN IMMEDIATE")?;
            floor.execute(
                "INSERT INTO events VALUES ('settle', ?1, ?1, ?2, ?3, ?4, 1)",
                rusqlite::params![revision, json, format!("op-{revision}"), digest],
            )?;
            if rows == FloorRows::SettleCommit {
                // A claim sets the goal's wake (its lease's expiry), a settlement clears it.
                floor.execute(
                    "UPDATE goals SET revision = ?1, updated_at = ?1, valid_until = ?2 WHERE goal = 'settle'",
                    rusqlite::params![revision, (revision % 2 == 0).then_some(revision)],
                )?;
                floor.execute(
                    "UPDATE frontier SET todos = ?1 WHERE agent = 'agent-0' AND goal = 'settle'",
                    [format!("[[1,\"t{}\"]]", revision % 20)],
                )?;
            }
            floor.execute_batch("COMMIT")?;
            times.push(start.elapsed());
        }
        Ok(times)
    };
    raw_sqlite_commits(&raw_db, WARM_RAW)?;
    floor_commits(WARM_RAW / 4)?;
    let (mut raw_times, mut floor_times) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        raw_times.extend(raw_sqlite_commits(&raw_db, RAW_COMMITS / ROUNDS)?);
        floor_times.extend(floor_commits(TURNS / ROUNDS)?);
    }
    Ok((
        per_second(floor_times.len(), floor_times.iter().sum()),
        per_second(raw_times.len(), raw_times.iter().sum()),
        median(&mut raw_times).as_secs_f64() / median(&mut floor_times).as_secs_f64().max(1e-9),
    ))
}

fn median(times: &mut [StdDuration]) -> StdDuration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
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

/// The keys of a signed goal's actors: the owner, each agent, the validator.
struct Keys {
    owner: SecretKey,
    agents: Vec<SecretKey>,
    validator: SecretKey,
}

impl Keys {
    fn new() -> Keys {
        let key = |n: usize| SecretKey::from_seed([u8::try_from(n % 250).unwrap_or(0) + 1; 32]);
        Keys {
            owner: key(200),
            agents: (0..AGENTS).map(key).collect(),
            validator: key(201),
        }
    }

    /// The signer of `actor`, if it is one of these.
    fn of(&self, actor: &Actor) -> Option<&dyn Signer> {
        match actor {
            Actor::Person(_) => Some(&self.owner),
            Actor::Validator(_) => Some(&self.validator),
            Actor::Agent(agent) => (0..AGENTS)
                .find(|n| self::agent(*n) == *agent)
                .map(|n| &self.agents[n] as &dyn Signer),
            _ => None,
        }
    }

    /// `spec` made signed, with every key registered.
    fn sign(&self, mut spec: GoalSpec) -> GoalSpec {
        spec.identity = Identity::Signed;
        let validator = Actor::Validator(id("tests"));
        spec.keys = [(owner(), &self.owner), (validator, &self.validator)]
            .into_iter()
            .chain((0..AGENTS).map(|n| (Actor::Agent(agent(n)), &self.agents[n])))
            .map(|(actor, key)| RegisteredKey {
                actor,
                key: key.public_key(),
            })
            .collect();
        spec
    }
}

/// Settle commits on a signed goal against the same on a declared one, on SQLite at `FULL`, in
/// alternating blocks; and the time the two verifications of one settle take alone.
fn signature_cost(dir: &Path) -> Result<(), Failure> {
    let runtime = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let keys = Keys::new();
    let open = |name: &str| {
        let d = if std::env::var("XNORMAL").is_ok() {
            Durability::Normal
        } else {
            Durability::Full
        };
        let options = SqliteOptions::default().durability(d);
        SqliteStore::create_with(dir.join(format!("{name}.db")), options)
    };
    let (declared, signed) = (open("declared")?, open("signed")?);
    let (declared_frames, signed_frames) = (
        wal_frames(&dir.join("declared.db")),
        wal_frames(&dir.join("signed.db")),
    );
    let declared_goal = runtime.block_on(seeded_goal(&declared, "declared", TODOS, now))?;
    let signed_goal: GoalId = id("signed");
    runtime.block_on(async {
        let spec = keys.sign(spec("signed", &id("owner")));
        let create = Command::CreateGoal { spec };
        paced_submit(
            Some(&keys),
            &signed,
            &signed_goal,
            &owner(),
            now,
            &create,
            &id("create"),
        )
        .await?;
        for t in 0..TODOS {
            let mut todo = NewTodo::advance(id(format!("t{t}")), "measured work");
            todo.idempotent = true;
            let add = Command::AddTodo { todo };
            let op: OperationId = id(format!("signed-add-{t}"));
            paced_submit(Some(&keys), &signed, &signed_goal, &owner(), now, &add, &op).await?;
        }
        Ok::<_, Failure>(())
    })?;
    let (mut plain, mut with_keys) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for n in (round * TURNS / ROUNDS)..((round + 1) * TURNS / ROUNDS) {
            let todo: TodoId = id(format!("t{}", n % TODOS));
            let who = agent(n % AGENTS);
            let turn = format!("turn-{n}");
            let cycle = |keys, store, goal, frames: &Frames| {
                runtime.block_on(turn_cycle(
                    keys, store, goal, &who, &todo, &turn, now, frames,
                ))
            };
            plain.push(cycle(None, &declared, &declared_goal, &declared_frames)?);
            with_keys.push(cycle(Some(&keys), &signed, &signed_goal, &signed_frames)?);
        }
    }
    let (plain_pages, signed_pages) = (mean_pages(&plain), mean_pages(&with_keys));
    let mut plain: Vec<StdDuration> = plain.into_iter().map(|(time, _)| time).collect();
    let mut with_keys: Vec<StdDuration> = with_keys.into_iter().map(|(time, _)| time).collect();
    let (plain_rate, signed_rate) = (
        per_second(plain.len(), plain.iter().sum()),
        per_second(with_keys.len(), with_keys.iter().sum()),
    );
    let verify = verification_time(&runtime, &signed, &signed_goal, &keys)?;
    let sign = signing_time(&keys);
    let (plain_median, signed_median) = (median(&mut plain), median(&mut with_keys));
    println!(
        "signed settle commits @full: {signed_rate:.0}/s vs declared {plain_rate:.0}/s = {:.2}x (target ≥ 0.9x: {}); median latency {:.0} µs vs {:.0} µs, of the difference signing the command takes {:.0} µs and verifying it and the verdict {:.0} µs; pages written per settle {} vs {}",
        signed_rate / plain_rate,
        against(signed_rate / plain_rate, 0.9, Goal::AtLeast),
        signed_median.as_secs_f64() * 1e6,
        plain_median.as_secs_f64() * 1e6,
        sign.as_secs_f64() * 1e6,
        verify.as_secs_f64() * 1e6,
        signed_pages.map_or("?".into(), |p| format!("{p:.1}")),
        plain_pages.map_or("?".into(), |p| format!("{p:.1}")),
    );
    Ok(())
}

/// The mean number of log pages of the cycles that could count them.
fn mean_pages(cycles: &[(StdDuration, Option<u64>)]) -> Option<f64> {
    let counted: Vec<u64> = cycles.iter().filter_map(|(_, pages)| *pages).collect();
    #[allow(clippy::cast_precision_loss, reason = "page counts are small")]
    (!counted.is_empty()).then(|| counted.iter().sum::<u64>() as f64 / counted.len() as f64)
}

/// The mean time an agent takes to sign one command's message.
fn signing_time(keys: &Keys) -> StdDuration {
    let message = identity::command_message(&id("signed"), &id("op-sign"), &"0".repeat(64));
    let start = Instant::now();
    for _ in 0..VERIFY_RUNS {
        std::hint::black_box(keys.agents[0].sign(std::hint::black_box(&message)));
    }
    start.elapsed() / VERIFY_RUNS
}

/// Verifications timed for the mean.
const VERIFY_RUNS: u32 = 2_000;

/// The mean time of the two verifications a signed settle takes (the command's signature, the
/// verdict's), on a settlement of the signed goal's shape.
fn verification_time(
    runtime: &Runtime,
    store: &SqliteStore,
    goal: &GoalId,
    keys: &Keys,
) -> Result<StdDuration, Failure> {
    let state = runtime
        .block_on(store.load(goal))?
        .ok_or("the signed goal is gone")?;
    let (todo, turn): (TodoId, TurnId) = (id("t0"), id("turn-verify"));
    let validator = Actor::Validator(id("tests"));
    let verdict = Verdict {
        validator,
        outcome: VerdictOutcome::Progress,
        summary: "a bounded step proven".into(),
        signature: None,
    };
    let verdict = identity::sign_verdict(&keys.validator, goal, &todo, &turn, 1, verdict, &[]);
    let settlement = Settlement {
        todo,
        epoch: 1,
        turn,
        verdict,
        evidence: vec![],
        observations: vec![],
        transition: Transition::KeepOpen,
        usage: Amounts::ONE_TURN,
        failure: None,
    };
    let me = Actor::Agent(agent(0));
    let command = Command::SettleTurn(settlement.clone());
    let op: OperationId = id("op-verify");
    let digest = loopx_kernel::write::digest(&me, &command);
    let signature = keys.agents[0].sign(&identity::command_message(goal, &op, &digest));
    let start = Instant::now();
    for _ in 0..VERIFY_RUNS {
        identity::authenticate(
            Some(&state.spec),
            goal,
            &me,
            &command,
            &op,
            &digest,
            Some(&signature),
        )?;
        identity::verify_verdict(&state.spec, &settlement, &[&me])?;
    }
    Ok(start.elapsed() / VERIFY_RUNS)
}

fn agent(n: usize) -> AgentId {
    id(format!("agent-{n}"))
}

fn spec(goal: &str, todos_owner: &PersonId) -> GoalSpec {
    loopx_benches::declared_spec(
        id(goal),
        "measure the store",
        todos_owner.clone(),
        (0..AGENTS).map(agent),
    )
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
    paced_submit(
        None,
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
        paced_submit(
            None,
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

/// The write path as hosts and the engine take it: through the goal handle, pausing on a real
/// clock between attempts when other writers move the goal.
async fn paced_submit<S: Store>(
    keys: Option<&Keys>,
    store: &S,
    goal: &GoalId,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    operation: &OperationId,
) -> Result<Submitted, SubmitError> {
    let mut handle = store.goal(goal).paced(&SystemClock);
    if let Some(signer) = keys.and_then(|k| k.of(actor)) {
        handle = handle.signed_by(signer);
    }
    handle
        .submit_operation(actor, now, command, operation)
        .await
}

/// Claim, begin and settle one turn on `todo` (kept open, so it can cycle again). Returns the
/// time the settle commit took and, when `frames` tells and no checkpoint restarted the log
/// meanwhile, how many log frames it wrote.
#[allow(
    clippy::too_many_arguments,
    reason = "the cycle's whole setting, named"
)]
async fn turn_cycle<S: Store>(
    keys: Option<&Keys>,
    store: &S,
    goal: &GoalId,
    who: &AgentId,
    todo: &TodoId,
    turn: &str,
    now: Timestamp,
    frames: &(dyn Fn() -> Option<u64> + Sync),
) -> Result<(StdDuration, Option<u64>), Failure> {
    let me = Actor::Agent(who.clone());
    let claim = Command::Claim {
        todo: todo.clone(),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    let claimed = paced_submit(
        keys,
        store,
        goal,
        &me,
        now,
        &claim,
        &id(format!("{turn}-claim")),
    )
    .await?;
    let epoch = claimed.state.todos.get(todo).map_or(0, |t| t.last_epoch);
    let turn_id: TurnId = id(turn);
    let begin = Command::BeginTurn {
        todo: todo.clone(),
        epoch,
        turn: turn_id.clone(),
        reserve: None,
    };
    paced_submit(
        keys,
        store,
        goal,
        &me,
        now,
        &begin,
        &id(format!("{turn}-begin")),
    )
    .await?;
    let mut verdict = Verdict {
        validator: Actor::Validator(id::<SourceId>("tests")),
        outcome: VerdictOutcome::Progress,
        summary: "a bounded step proven".into(),
        signature: None,
    };
    if let Some(keys) = keys {
        verdict =
            identity::sign_verdict(&keys.validator, goal, todo, &turn_id, epoch, verdict, &[]);
    }
    let settle = Command::SettleTurn(Settlement {
        todo: todo.clone(),
        epoch,
        turn: turn_id,
        verdict,
        evidence: vec![],
        observations: vec![],
        transition: Transition::KeepOpen,
        usage: Amounts {
            tokens: 12_000,
            wall_ms: 30_000,
            ..Amounts::ONE_TURN
        },
        failure: None,
    });
    let before = frames();
    let start = Instant::now();
    paced_submit(
        keys,
        store,
        goal,
        &me,
        now,
        &settle,
        &id(format!("{turn}-settle")),
    )
    .await?;
    let time = start.elapsed();
    let written = before
        .zip(frames())
        .and_then(|(before, after)| after.checked_sub(before));
    Ok((time, written))
}

fn file_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum()
}

/// What [`settle_commits`] measured.
struct SettleFigures {
    /// Settle commits per second.
    settles: f64,
    /// Raw single-row commits per second, in the same rounds.
    raw: f64,
    /// Median raw commit latency over median settle commit latency.
    median_ratio: f64,
    /// Median settle commit latency.
    settle_median: StdDuration,
    /// Stored bytes per settled turn.
    bytes: f64,
    /// Stored bytes per settled turn, by part (table).
    by_part: Vec<(String, f64)>,
}

/// Settle commits per second against raw commits per second (`raw(n)` runs `n` raw commits and
/// returns the time of each), alternating in [`ROUNDS`] rounds after [`WARM_RAW`] raw commits and
/// [`WARM_TURNS`] turns that are not timed; and stored bytes per settled turn (growth of `size`,
/// by part, over all the turns: on SQLite the files after a checkpoint folds the log into the
/// database).
fn settle_commits<S: Store>(
    runtime: &Runtime,
    store: &S,
    raw: &mut dyn FnMut(usize) -> Result<Vec<StdDuration>, Failure>,
    size: &dyn Fn() -> Result<Vec<(String, u64)>, Failure>,
) -> Result<SettleFigures, Failure> {
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let todos = TODOS;
    let goal = runtime.block_on(seeded_goal(store, "settle", todos, now))?;
    let before = size()?;
    raw(WARM_RAW)?;
    for n in 0..WARM_TURNS {
        let todo: TodoId = id(format!("t{}", n % todos));
        runtime.block_on(turn_cycle(
            None,
            store,
            &goal,
            &agent(n % AGENTS),
            &todo,
            &format!("warm-{n}"),
            now,
            &no_frames,
        ))?;
    }
    let mut settling = Vec::with_capacity(TURNS);
    let mut raw_times = Vec::with_capacity(RAW_COMMITS);
    for round in 0..ROUNDS {
        raw_times.extend(raw(RAW_COMMITS / ROUNDS)?);
        for n in (round * TURNS / ROUNDS)..((round + 1) * TURNS / ROUNDS) {
            let todo: TodoId = id(format!("t{}", n % todos));
            let who = agent(n % AGENTS);
            settling.push(
                runtime
                    .block_on(turn_cycle(
                        None,
                        store,
                        &goal,
                        &who,
                        &todo,
                        &format!("turn-{n}"),
                        now,
                        &no_frames,
                    ))?
                    .0,
            );
        }
    }
    let after = size()?;
    #[allow(clippy::cast_precision_loss)] // byte counts stay far below 2^52
    let by_part: Vec<(String, f64)> = after
        .iter()
        .map(|(part, bytes)| {
            let was = before
                .iter()
                .find(|(p, _)| p == part)
                .map_or(0, |(_, b)| *b);
            (
                part.clone(),
                bytes.saturating_sub(was) as f64 / (WARM_TURNS + TURNS) as f64,
            )
        })
        .collect();
    Ok(SettleFigures {
        settles: per_second(settling.len(), settling.iter().sum()),
        raw: per_second(raw_times.len(), raw_times.iter().sum()),
        median_ratio: median(&mut raw_times).as_secs_f64()
            / median(&mut settling).as_secs_f64().max(1e-9),
        settle_median: median(&mut settling),
        bytes: by_part.iter().map(|(_, b)| b).sum(),
        by_part,
    })
}

fn checkpoint(path: &Path) -> Result<(), Failure> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(StdDuration::from_secs(10))?;
    let (busy, log, copied): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    // A log not folded in would be counted as stored bytes.
    if busy != 0 || copied != log {
        return Err(format!("the log was not folded in ({copied} of {log} frames)").into());
    }
    Ok(())
}

/// Full turn cycles per second with `AGENTS` threads, each with its own store handle from
/// `open` (its own connections), first all on one goal (compare-and-set contention), then one
/// goal each. Also returns how often `submit` gave up with `Contended` on the one goal (each
/// time retried).
fn batched_turns<S, F>(open: F) -> Result<(f64, f64, usize), Failure>
where
    S: Store,
    F: Fn(&Runtime) -> Result<S, Failure> + Clone + Send + 'static,
{
    let setup = Builder::new_current_thread().enable_all().build()?;
    let store = open(&setup)?;
    let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let shared = setup.block_on(seeded_goal(&store, "shared", AGENTS, now))?;
    let own: Vec<GoalId> = (0..AGENTS)
        .map(|n| setup.block_on(seeded_goal(&store, &format!("own-{n}"), 1, now)))
        .collect::<Result<_, _>>()?;
    let run = |goals: Vec<(GoalId, TodoId)>, label: &str| -> Result<(f64, usize), Failure> {
        let start = Instant::now();
        let workers: Vec<_> = goals
            .into_iter()
            .enumerate()
            .map(|(n, (goal, todo))| {
                let open = open.clone();
                let label = label.to_owned();
                thread::spawn(move || -> Result<usize, Failure> {
                    let runtime = Builder::new_current_thread().enable_all().build()?;
                    let store = open(&runtime)?;
                    let mut contended = 0;
                    for k in 0..TURNS_PER_AGENT {
                        let turn = format!("{label}-{n}-{k}");
                        // A `submit` that gives up on a busy goal is retried with the same
                        // operation ids, as its error asks; the give-ups are counted.
                        loop {
                            match runtime.block_on(turn_cycle(
                                None,
                                &store,
                                &goal,
                                &agent(n),
                                &todo,
                                &turn,
                                now,
                                &no_frames,
                            )) {
                                Ok(_) => break,
                                Err(error)
                                    if matches!(
                                        error.downcast_ref::<SubmitError>(),
                                        Some(SubmitError::Contended { .. })
                                    ) =>
                                {
                                    contended += 1;
                                    thread::sleep(StdDuration::from_millis(1));
                                }
                                Err(error) => return Err(error),
                            }
                        }
                    }
                    Ok(contended)
                })
            })
            .collect();
        let mut contended = 0;
        for worker in workers {
            contended += worker.join().map_err(|_| "a benchmark thread panicked")??;
        }
        Ok((
            per_second(AGENTS * TURNS_PER_AGENT, start.elapsed()),
            contended,
        ))
    };
    let one_goal = run(
        (0..AGENTS)
            .map(|n| (shared.clone(), id(format!("t{n}"))))
            .collect(),
        "shared",
    )?;
    let own_goals = run(own.into_iter().map(|g| (g, id("t0"))).collect(), "own")?;
    Ok((one_goal.0, own_goals.0, one_goal.1 + own_goals.1))
}

/// How many frames a store has written to its write-ahead log (SQLite), when there is a way to
/// tell.
type Frames = Box<dyn Fn() -> Option<u64> + Sync>;

/// For stores whose log frames cannot be counted.
fn no_frames() -> Option<u64> {
    None
}

/// A store opened for [`many_goals`], with its [`Frames`].
type Opened<S> = Result<(S, Frames), Failure>;

/// What [`many_goals`] measured for one store.
struct Spread {
    /// The median settle commit.
    median: StdDuration,
    /// The mean number of pages a settle commit wrote to the write-ahead log (SQLite only).
    pages: Option<f64>,
}

/// Settle commits in a store of [`MANY_GOALS`] goals (each with [`AGENTS`] registered agents)
/// against those in a store of one goal, from the two stores `open` gives (each empty, with
/// its [`Frames`]). Both run round-robin turns with a clock that moves on a second per turn, as
/// a host's does.
fn many_goals<S: Store>(
    runtime: &Runtime,
    open: &dyn Fn(&str) -> Opened<S>,
) -> Result<(Spread, Spread), Failure> {
    let start = Timestamp::parse("2026-11-29T10:00:00Z")?;
    let spread = |goals: usize| -> Result<Spread, Failure> {
        let (store, frames) = open(&format!("goals_{goals}"))?;
        let ids: Vec<GoalId> = (0..goals)
            .map(|g| runtime.block_on(seeded_goal(&store, &format!("g{g}"), TODOS, start)))
            .collect::<Result<_, _>>()?;
        let (mut settling, mut pages) = (Vec::new(), Vec::new());
        for k in 0..TURNS_PER_GOAL * MANY_GOALS / goals {
            for (g, goal) in ids.iter().enumerate() {
                let now = start.plus(Duration::seconds(i64::try_from(k * goals + g)?));
                let todo: TodoId = id(format!("t{}", k % TODOS));
                let who = agent(k % AGENTS);
                let turn = format!("turn-{g}-{k}");
                let (time, written) = runtime.block_on(turn_cycle(
                    None, &store, goal, &who, &todo, &turn, now, &frames,
                ))?;
                settling.push(time);
                pages.extend(written);
            }
        }
        #[allow(clippy::cast_precision_loss)] // page counts stay far below 2^52
        let mean = |pages: &[u64]| pages.iter().sum::<u64>() as f64 / pages.len() as f64;
        Ok(Spread {
            median: median(&mut settling),
            pages: (!pages.is_empty()).then(|| mean(&pages)),
        })
    };
    Ok((spread(MANY_GOALS)?, spread(1)?))
}

fn print_many_goals(at: &str, (many, one): (Spread, Spread)) {
    let pages = |spread: &Spread| {
        spread
            .pages
            .map_or(String::new(), |p| format!(" ({p:.1} pages written)"))
    };
    println!(
        "settle commits in a store of {MANY_GOALS} goals with {AGENTS} agents each, clock moving @{at}: median {} µs{}, in a store of one goal {} µs{} = {:.2}x (no target: a commit costs what it changes, not how many goals and agents the store holds)",
        many.median.as_micros(),
        pages(&many),
        one.median.as_micros(),
        pages(&one),
        many.median.as_secs_f64() / one.median.as_secs_f64().max(1e-9),
    );
}

/// The frames in the write-ahead log of the SQLite database at `path`: the `mxFrame` field of
/// the log index's header in the `-shm` file (native byte order), read between commits.
fn wal_frames(path: &Path) -> Frames {
    let shm = format!("{}-shm", path.display());
    Box::new(move || {
        let header = std::fs::read(&shm).ok()?;
        let field: [u8; 4] = header.get(16..20)?.try_into().ok()?;
        Some(u64::from(u32::from_ne_bytes(field)))
    })
}

/// The decoding of a goal's snapshot JSON alone, in memory.
struct Decode {
    /// The JSON's size.
    bytes: f64,
    /// The median time `serde_json` takes to decode it into a [`Snapshot`].
    seconds: f64,
}

/// What [`cold_load`] measured.
struct Cold {
    /// The median time a fresh handle takes to load the goal, in seconds.
    load: f64,
    /// The goal's events.
    events: usize,
    /// Decoding its snapshot alone.
    decode: Decode,
    /// The median settle commit on the goal afterwards.
    aged: StdDuration,
    /// The median settle commit on a new goal in the same store.
    young: StdDuration,
}

/// Builds a goal of about `COLD_EVENTS` events in memory with the kernel, appends it in large
/// batches, then times `load` on fresh handles from `open` (no cache), how long decoding the
/// goal's snapshot JSON alone takes, and settle commits on the goal against those on a new goal
/// in the same store.
#[allow(clippy::too_many_lines)] // one measurement: build the history, then load it cold
fn cold_load<S: Store>(
    runtime: &Runtime,
    open: impl Fn(&Runtime) -> Result<S, Failure>,
) -> Result<Cold, Failure> {
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
                signature: None,
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            usage: Amounts::ONE_TURN,
            failure: None,
        };
        log.extend(state.handle(&me, now, &Command::SettleTurn(settle))?);
        n += 1;
    }
    let store = open(runtime)?;
    let mut base: Option<GoalState> = None;
    for (k, batch) in log.chunks(5_000).enumerate() {
        let request = AppendRequest {
            goal: goal_id.clone(),
            expected_revision: base.as_ref().map_or(0, |state| state.revision),
            operation: id(format!("load-{k}")),
            digest: format!("load-{k}"),
            at: now,
            events: batch.to_vec(),
            authorship: None,
            clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
        };
        let commit = Commit::fold(base.take(), request)?;
        base = Some(commit.state().clone());
        runtime.block_on(store.append(commit))?;
    }
    drop(store);
    let mut times = Vec::new();
    for _ in 0..5 {
        let fresh = open(runtime)?;
        let start = Instant::now();
        let loaded = runtime.block_on(fresh.load(&goal_id))?;
        times.push(start.elapsed().as_secs_f64());
        if loaded.as_ref().map(|s| s.revision) != Some(log.len() as u64) {
            return Err("the cold goal did not load at its last revision".into());
        }
    }
    times.sort_by(f64::total_cmp);
    let store = open(runtime)?;
    let young = runtime.block_on(seeded_goal(&store, "young", 0, now))?;
    Ok(Cold {
        load: times[times.len() / 2],
        events: log.len(),
        decode: decode_figure(&state)?,
        aged: settle_latency(runtime, &store, &goal_id, "aged", now)?,
        young: settle_latency(runtime, &store, &young, "young", now)?,
    })
}

/// The median settle commit over [`AGED_TURNS`] turns on `goal`, each on a todo of its own.
fn settle_latency<S: Store>(
    runtime: &Runtime,
    store: &S,
    goal: &GoalId,
    label: &str,
    now: Timestamp,
) -> Result<StdDuration, Failure> {
    let mut times = Vec::with_capacity(AGED_TURNS);
    for n in 0..AGED_TURNS {
        let todo: TodoId = id(format!("{label}-{n}"));
        let add = Command::AddTodo {
            todo: NewTodo::advance(todo.clone(), "work on an old goal"),
        };
        let operation = id(format!("{label}-add-{n}"));
        runtime.block_on(paced_submit(
            None,
            store,
            goal,
            &owner(),
            now,
            &add,
            &operation,
        ))?;
        let turn = format!("{label}-turn-{n}");
        times.push(
            runtime
                .block_on(turn_cycle(
                    None,
                    store,
                    goal,
                    &agent(n % AGENTS),
                    &todo,
                    &turn,
                    now,
                    &no_frames,
                ))?
                .0,
        );
    }
    Ok(median(&mut times))
}

/// How long decoding the JSON of `state`'s snapshot takes, in memory (the median of five).
fn decode_figure(state: &GoalState) -> Result<Decode, Failure> {
    let json = serde_json::to_string(&state.snapshot())?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let snapshot = Snapshot::decode(&json)?;
        times.push(start.elapsed().as_secs_f64());
        if snapshot.state.revision != state.revision {
            return Err("the cold goal's snapshot did not decode".into());
        }
    }
    times.sort_by(f64::total_cmp);
    #[allow(clippy::cast_precision_loss)] // a snapshot stays far below 2^52 bytes
    Ok(Decode {
        bytes: json.len() as f64,
        seconds: times[times.len() / 2],
    })
}
