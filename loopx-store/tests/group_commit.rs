//! SQLite's group commit, with the groups made on purpose: a leader held at SQLite's write lock
//! (another connection holds it) while the other commits queue behind it, so that they are
//! written as one group when the lock is let go. Each commit in the group — a commit on each of
//! two goals, a stale one, a retry, an operation id reused with another payload, one ahead of
//! the store's clock and one that fails midway — is told exactly its own outcome, and the one
//! that failed midway left no row behind while its neighbours committed.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use loopx_kernel::seams::{AppendRequest, Appended, Commit, Store, StoreError};
use loopx_kernel::write::{digest, stamp};
use loopx_kernel::{
    Actor, AgentId, Command, Duration, GoalId, GoalSpec, GoalState, NewTodo, OperationId,
    Timestamp, TodoId, execute,
};
use loopx_store::{GroupStats, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use tokio::task::JoinHandle;

mod support;

use support::owner;

fn at(minutes: i64) -> Timestamp {
    support::now().plus(Duration::minutes(minutes))
}

fn agent() -> Actor {
    Actor::Agent(AgentId::new("a").unwrap())
}

fn spec(goal: &str) -> GoalSpec {
    support::spec_of(GoalId::new(goal).unwrap())
}

/// `command` by `actor` at `now` on `base` (the goal's state, `None` before it exists), as a
/// writer commits it under `op`.
fn commit(
    base: Option<&GoalState>,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    op: &str,
) -> Commit {
    let events = execute(base, actor, now, command).unwrap();
    let expected = base.map_or(0, |s| s.revision);
    let goal = match command {
        Command::CreateGoal { spec } => spec.id.clone(),
        _ => base.unwrap().spec.id.clone(),
    };
    let request = AppendRequest {
        goal,
        expected_revision: expected,
        operation: OperationId::new(op).unwrap(),
        digest: digest(actor, command),
        at: now,
        events: stamp(expected, actor, now, events),
        authorship: None,
        clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
    };
    Commit::fold(base.cloned(), request).unwrap()
}

fn add(name: &str) -> Command {
    Command::AddTodo {
        todo: NewTodo::advance(TodoId::new(name).unwrap(), "work"),
    }
}

async fn committed(store: &SqliteStore, commit: Commit) -> GoalState {
    let state = commit.state().clone();
    match store.append(commit).await {
        Ok(Appended::Committed(_)) => state,
        other => panic!("a setup commit was answered {other:?}"),
    }
}

/// Waits (without a deadline: the test's own timeout is the harness's) until `done` holds.
async fn until(store: &SqliteStore, done: impl Fn(GroupStats) -> bool) {
    while !done(store.group_stats()) {
        tokio::time::sleep(StdDuration::from_millis(1)).await;
    }
}

type Pending = JoinHandle<Result<Appended, StoreError>>;

/// Appends `commit` on a task of its own once the commits before it are queued, and waits until
/// it is queued too: the group holds the commits in this order.
async fn queue(store: &Arc<SqliteStore>, commit: Commit) -> Pending {
    let queued = store.group_stats().queued;
    let handle = {
        let store = Arc::clone(store);
        tokio::spawn(async move { store.append(commit).await })
    };
    until(store, |stats| stats.queued > queued).await;
    handle
}

async fn answer(pending: Pending) -> Result<Appended, StoreError> {
    pending.await.unwrap()
}

fn rows_of(conn: &Connection, table: &str, goal: &str) -> i64 {
    conn.query_row(
        &format!("SELECT count(*) FROM {table} WHERE goal = ?1"),
        [goal],
        |r| r.get(0),
    )
    .unwrap()
}

/// One group of seven behind a held leader: each commit gets exactly its own outcome; the one
/// that fails midway (a trigger refuses its agent rows after its event and goal rows were
/// written) takes back its own rows only; the group was one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_answers_each_commit_with_its_own_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("group.db");
    let options = SqliteOptions::default()
        .busy_timeout(Duration::seconds(120))
        .group_commit(true);
    let store = Arc::new(SqliteStore::create_with(&path, options).unwrap());
    let create = |goal: &str| Command::CreateGoal { spec: spec(goal) };
    let g = committed(
        &store,
        commit(None, &owner(), at(0), &create("g"), "create-g"),
    )
    .await;
    let h = committed(
        &store,
        commit(None, &owner(), at(0), &create("h"), "create-h"),
    )
    .await;
    let x = committed(
        &store,
        commit(None, &owner(), at(0), &create("x"), "create-x"),
    )
    .await;
    let first = commit(Some(&h), &agent(), at(1), &add("h1"), "h-1");
    let h = committed(&store, first.clone()).await;
    let before = store.group_stats();

    // A goal whose agent rows the database refuses, after the rows before them were written.
    let blocker = Connection::open(&path).unwrap();
    blocker
        .execute_batch(
            "CREATE TRIGGER refuse_bad BEFORE INSERT ON goal_agents WHEN NEW.goal = 'bad'
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    // Hold the write lock: the leader waits for it with its group taken.
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let leader = {
        let store = Arc::clone(&store);
        let lead = commit(Some(&x), &agent(), at(1), &add("x1"), "x-1");
        tokio::spawn(async move { store.append(lead).await })
    };
    until(&store, |stats| stats.groups > before.groups).await;

    let win_g = queue(&store, commit(Some(&g), &agent(), at(2), &add("g1"), "g-1")).await;
    let stale = queue(
        &store,
        commit(Some(&g), &agent(), at(2), &add("g2"), "g-stale"),
    )
    .await;
    let retry = queue(&store, first).await;
    let taken = queue(&store, commit(Some(&h), &agent(), at(2), &add("h2"), "h-1")).await;
    let late = Timestamp::parse("2999-01-01T00:00:00Z").unwrap();
    let ahead = queue(
        &store,
        commit(Some(&h), &agent(), late, &add("h3"), "h-ahead"),
    )
    .await;
    let bad = queue(
        &store,
        commit(None, &owner(), at(2), &create("bad"), "create-bad"),
    )
    .await;
    let win_h = queue(&store, commit(Some(&h), &agent(), at(2), &add("h4"), "h-4")).await;
    assert_eq!(store.group_stats().queued, 7);
    blocker.execute_batch("COMMIT").unwrap();

    assert!(matches!(answer(leader).await, Ok(Appended::Committed(r)) if r.revision == 2));
    assert!(matches!(answer(win_g).await, Ok(Appended::Committed(r)) if r.revision == 2));
    assert_eq!(
        answer(stale).await,
        Err(StoreError::Conflict {
            expected: 1,
            current: 2
        }),
        "the stale commit is written after the winner on its goal, in the same group"
    );
    match answer(retry).await {
        Ok(Appended::Replayed(receipt)) => assert_eq!(receipt.revision, 2),
        other => panic!("the retry was answered {other:?}"),
    }
    assert_eq!(
        answer(taken).await,
        Err(StoreError::OperationConflict {
            operation: OperationId::new("h-1").unwrap()
        })
    );
    assert!(matches!(
        answer(ahead).await,
        Err(StoreError::ClockAhead { .. })
    ));
    match answer(bad).await {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("refused by the test"), "{detail}");
        }
        other => panic!("the commit refused midway was answered {other:?}"),
    }
    assert!(matches!(answer(win_h).await, Ok(Appended::Committed(r)) if r.revision == 3));

    // The leader alone, then the seven queued behind it in one group.
    let after = store.group_stats();
    assert_eq!(
        (after.groups - before.groups, after.commits - before.commits),
        (2, 8)
    );
    holds_exactly_the_winners(&store, &path).await;
}

/// The store after the group: no row of the commit refused midway, the winners' goals at their
/// revisions (also through a fresh handle), no receipt of a refused commit, SQLite's integrity
/// check passing.
async fn holds_exactly_the_winners(store: &SqliteStore, path: &std::path::Path) {
    let conn = Connection::open(path).unwrap();
    for table in ["events", "goals", "goal_agents", "receipts", "frontier"] {
        assert_eq!(
            rows_of(&conn, table, "bad"),
            0,
            "the failed commit left {table} rows"
        );
    }
    for (goal, revision) in [("g", 2), ("h", 3), ("x", 2)] {
        let id = GoalId::new(goal).unwrap();
        let events = store.events(&id, 0, usize::MAX).await.unwrap();
        assert_eq!(events.len(), revision, "{goal}: {events:?}");
        let loaded = store.load(&id).await.unwrap().unwrap();
        assert_eq!(GoalState::replay(&events).unwrap(), loaded);
        // A fresh handle (no cache) reads the same.
        let fresh = SqliteStore::open(path).unwrap();
        assert_eq!(fresh.load(&id).await.unwrap(), Some(loaded));
    }
    for op in ["g-stale", "h-ahead"] {
        for goal in ["g", "h"] {
            let receipt = store
                .receipt(&GoalId::new(goal).unwrap(), &OperationId::new(op).unwrap())
                .await
                .unwrap();
            assert_eq!(receipt, None, "`{op}` left a receipt on {goal}");
        }
    }
    store.integrity_check().await.unwrap();
}

/// With group commit off, concurrent commits are each a transaction of their own, and the
/// handle counts no groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions::default().group_commit(false);
    let store = Arc::new(SqliteStore::create_with(dir.path().join("alone.db"), options).unwrap());
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..8 {
        let store = Arc::clone(&store);
        let goal = format!("g{n}");
        tasks.spawn(async move {
            let create = Command::CreateGoal { spec: spec(&goal) };
            store
                .append(commit(None, &owner(), at(0), &create, "create"))
                .await
        });
    }
    while let Some(done) = tasks.join_next().await {
        assert!(matches!(done.unwrap(), Ok(Appended::Committed(_))));
    }
    assert_eq!(store.group_stats(), GroupStats::default());
    assert_eq!(store.goals(at(1)).await.unwrap().len(), 8);
}
