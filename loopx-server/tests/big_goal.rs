//! A goal of 100,000 todos on the board: every page of it stays under a megabyte, and the time
//! each takes to render is printed (the bound is 200 ms in a release build; the
//! benchmark `cargo bench -p loopx-benches --bench board` measures it there).

use std::sync::Arc;
use std::time::Instant;

use loopx_kernel::seams::{AppendRequest, Clock, Commit, Store};
use loopx_kernel::{Command, GoalSpec, NewTodo, OperationId, StoreExt, TodoId};
use loopx_provider::clock::SystemClock;
use loopx_server::mcp::Tokens;
use loopx_server::{Service, Site};
use loopx_store::MemoryStore;

const TODOS: usize = 100_000;
/// The most a page of the goal may weigh.
const MAX_PAGE: usize = 1024 * 1024;

/// A goal with `TODOS` todos, each depending on the one before, added in one commit.
async fn big_goal(store: &dyn Store, now: loopx_kernel::Timestamp) -> GoalSpec {
    let spec = GoalSpec::builder("big", "a goal of a hundred thousand todos", "maintainer")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("a spec");
    let goal = store.goal(&spec.id);
    goal.create(&spec, now).await.expect("created");
    let base = store
        .load(&spec.id)
        .await
        .expect("loads")
        .expect("the goal");
    let mut state = base.clone();
    let mut events = Vec::with_capacity(TODOS);
    for n in 0..TODOS {
        let mut todo =
            NewTodo::advance(TodoId::new(format!("t{n}")).expect("an id"), "one of many");
        if n > 0 {
            todo.depends_on = [TodoId::new(format!("t{}", n - 1)).expect("an id")].into();
        }
        let command = Command::AddTodo { todo };
        events.extend(
            state
                .handle(&spec.owner_actor(), now, &command)
                .expect("added"),
        );
    }
    let request = AppendRequest {
        goal: spec.id.clone(),
        expected_revision: base.revision,
        operation: OperationId::new("bulk-todos").expect("an id"),
        digest: "bulk-todos".into(),
        at: now,
        events,
        authorship: None,
        clock_skew: loopx_kernel::Duration::minutes(2),
    };
    let commit = Commit::fold(Some(base), request).expect("the batch folds");
    store.append(commit).await.expect("appended");
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_of_a_goal_of_100k_todos_weighs_under_a_megabyte() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let built = Instant::now();
    big_goal(&*store, clock.now()).await;
    println!("built a goal of {TODOS} todos in {:?}", built.elapsed());
    let site = Site::default();
    let board = loopx_server::board::router(store.clone(), clock.clone(), Tokens::new(), &site);
    let router = Service::new(store, clock).mount(board).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(loopx_server::serve(
        listener,
        router,
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    for path in [
        "/goals/big",
        "/goals/big?todos=500",
        "/goals/big?todos=1000",
        "/goals/big?commits=1",
    ] {
        let start = Instant::now();
        let response = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 200, "{path}");
        let page = response.text().await.expect("a page");
        let took = start.elapsed();
        println!("{path}: {} bytes in {took:?}", page.len());
        assert!(page.len() <= MAX_PAGE, "{path} weighs {} bytes", page.len());
        assert_eq!(
            page.matches("<tr id=\"todo-").count(),
            100,
            "{path}: one page of todos"
        );
    }
    // A past revision is folded from the store's history: timed, for the record.
    let start = Instant::now();
    let past = client
        .get(format!("{base}/goals/big?revision=50000"))
        .send()
        .await
        .expect("answered");
    let past = past.text().await.expect("a page");
    println!(
        "/goals/big?revision=50000: {} bytes in {:?}",
        past.len(),
        start.elapsed()
    );
    assert!(
        past.len() <= MAX_PAGE,
        "a past revision weighs {} bytes",
        past.len()
    );
    let last = client
        .get(format!("{base}/goals/big?todos=1000"))
        .send()
        .await
        .expect("answered");
    let last = last.text().await.expect("a page");
    assert!(last.contains("id=\"todo-t99999\"") && last.contains("Page 1000 of 1000"));
    for path in ["/", "/inbox"] {
        let start = Instant::now();
        let page = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("answered");
        let page = page.text().await.expect("a page");
        println!("{path}: {} bytes in {:?}", page.len(), start.elapsed());
        assert!(page.len() <= MAX_PAGE, "{path} weighs {} bytes", page.len());
    }
}
