//! The board's figures: the pages rendered for a store of 1,000 goals, each with three todos, a
//! turn settled, evidence and an open gate, requested over loopback HTTP and printed as a
//! table of median and p99 time per page (the server renders it, plus one loopback round
//! trip; the target is under 200 ms for each), and then the pages of one goal of 100,000 todos
//! (each list paged at 100 rows; the target is 200 ms and 1 MB).
//!
//! Run with `cargo bench -p loopx-benches --bench board`.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use loopx_kernel::seams::{AppendRequest, Clock, Commit, Store};
use loopx_kernel::{
    Actor, Command, Criterion, ExpiryPolicy, GateScope, GoalSpec, Limits, NewGate, NewTodo,
    StoreExt, TodoId,
};
use loopx_provider::clock::SystemClock;
use loopx_server::Service;
use loopx_server::mcp::Tokens;
use loopx_store::{MemoryStore, SqliteStore};

type Failure = Box<dyn std::error::Error>;

/// Goals in the store.
const GOALS: usize = 1000;
/// Requests timed per page, after `WARM` untimed ones.
const REQUESTS: usize = 20;
const WARM: usize = 3;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Failure> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::create(dir.path().join("loopx.db"))?);
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    println!("| store ({GOALS} goals) | page | median | p99 | bytes |");
    println!("| --- | --- | --- | --- | --- |");
    for (name, store) in [("memory", memory), ("SQLite", sqlite)] {
        fill(&*store).await?;
        let base = serve(store).await?;
        for (page, path) in [
            ("goals", "/"),
            ("goals, filtered", "/?state=waiting&agent=agent-a"),
            ("a goal", "/goals/goal-0500"),
            ("a goal at revision 3", "/goals/goal-0500?revision=3"),
            ("inbox", "/inbox"),
        ] {
            let (median, p99, bytes) = measure(&base, path).await?;
            println!(
                "| {name} | {page} | {:.1} ms | {:.1} ms | {bytes} |",
                ms(median),
                ms(p99)
            );
        }
    }
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    big_goal(&*store).await?;
    let base = serve(store).await?;
    println!();
    println!("| store (a goal of {BIG} todos) | page | median | p99 | bytes |");
    println!("| --- | --- | --- | --- | --- |");
    for path in [
        "/goals/big",
        "/goals/big?todos=500",
        "/goals/big?todos=1000",
        "/goals/big?commits=1",
        "/goals/big?revision=50000",
    ] {
        let (median, p99, bytes) = measure(&base, path).await?;
        println!(
            "| memory | `{path}` | {:.1} ms | {:.1} ms | {bytes} |",
            ms(median),
            ms(p99)
        );
    }
    Ok(())
}

/// Todos of the big goal.
const BIG: usize = 100_000;

/// A goal of `BIG` todos, each depending on the one before, added in one commit.
async fn big_goal(store: &dyn Store) -> Result<(), Failure> {
    let now = SystemClock.now();
    let spec = GoalSpec::builder("big", "a goal of a hundred thousand todos", "maintainer")
        .agent("agent-a")
        .declared_identity()
        .build()?;
    store.goal(&spec.id).create(&spec, now).await?;
    let base = store.load(&spec.id).await?.ok_or("the goal")?;
    let mut state = base.clone();
    let mut events = Vec::with_capacity(BIG);
    for n in 0..BIG {
        let mut todo = NewTodo::advance(TodoId::new(format!("t{n}"))?, "one of many");
        if n > 0 {
            todo.depends_on = [TodoId::new(format!("t{}", n - 1))?].into();
        }
        events.extend(state.handle(&spec.owner_actor(), now, &Command::AddTodo { todo })?);
    }
    let request = AppendRequest {
        goal: spec.id.clone(),
        expected_revision: base.revision,
        operation: "bulk-todos".parse()?,
        digest: "bulk-todos".into(),
        at: now,
        events,
        authorship: None,
        clock_skew: loopx_kernel::Duration::minutes(2),
    };
    store.append(Commit::fold(Some(base), request)?).await?;
    Ok(())
}

/// `GOALS` goals, each planned, with an open gate for its owner.
async fn fill(store: &dyn Store) -> Result<(), Failure> {
    let now = SystemClock.now();
    for n in 0..GOALS {
        let spec = GoalSpec::builder(
            format!("goal-{n:04}"),
            format!("ship feature {n}"),
            "maintainer",
        )
        .agent("agent-a")
        .agent("agent-b")
        .budget(Limits::turns(20))
        .declared_identity()
        .criterion(Criterion::new(
            "tests",
            "the tests pass",
            "ci.tests",
            "repo:acme/cli",
        )?)
        .build()?;
        let goal = store.goal(&spec.id);
        goal.create(&spec, now).await?;
        let agent: Actor = Actor::Agent("agent-a".parse()?);
        let mut todos = Vec::new();
        for (i, title) in ["edit", "test", "document"].iter().enumerate() {
            let mut todo = NewTodo::advance(TodoId::new(format!("{title}-{n}"))?, *title);
            if i > 0 {
                todo.depends_on = [todos.last().cloned().ok_or("a todo")?].into();
            }
            todos.push(todo.id.clone());
            goal.submit(&agent, now, &Command::AddTodo { todo }).await?;
        }
        let gate = NewGate {
            id: format!("question-{n}").parse()?,
            question: format!("May feature {n} change the output?"),
            owner: Actor::Person("maintainer".parse()?),
            scope: GateScope {
                todos: [todos[2].clone()].into(),
                ..GateScope::default()
            },
            deadline: None,
            on_expiry: ExpiryPolicy::default(),
        };
        goal.submit(&agent, now, &Command::OpenGate { gate })
            .await?;
    }
    Ok(())
}

async fn serve(store: Arc<dyn Store>) -> Result<String, Failure> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let router = Service::new(store.clone(), clock.clone())
        .mount(loopx_server::board::router(
            store,
            clock,
            Tokens::new(),
            &loopx_server::Site::default(),
        ))
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

/// The median and p99 time to answer `path`, and the page's size.
async fn measure(base: &str, path: &str) -> Result<(StdDuration, StdDuration, usize), Failure> {
    let client = reqwest::Client::new();
    let mut times = Vec::with_capacity(REQUESTS);
    let mut bytes = 0;
    for i in 0..WARM + REQUESTS {
        let sent = Instant::now();
        let response = client.get(format!("{base}{path}")).send().await?;
        if !response.status().is_success() {
            return Err(format!("{path} answered {}", response.status()).into());
        }
        bytes = response.bytes().await?.len();
        if i >= WARM {
            times.push(sent.elapsed());
        }
    }
    times.sort();
    let p99 = times[(times.len() * 99).div_ceil(100) - 1];
    Ok((times[times.len() / 2], p99, bytes))
}

fn ms(span: StdDuration) -> f64 {
    span.as_secs_f64() * 1000.0
}
