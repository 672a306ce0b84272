//! SQLite specifics: file permissions and journal mode, concurrent opens, snapshots bounding
//! the tail a load reads, the durability setting, a file written by schema 1 migrating and
//! reading as before, and calls running in place on a multi-threaded runtime.

mod support;

use loopx_kernel::submit;
use std::fs;
use std::path::{Path, PathBuf};

use loopx_kernel::seams::Store;
use loopx_kernel::{Actor, AgentId, Command, GoalState, NewTodo, OperationId, TodoId};
use loopx_store::{Durability, Retention, SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use support::{block_on, create_goal, goal_id, now, owner, spec};

/// Creates goal `g` and adds `todos` todos, one commit each.
fn populate(store: &SqliteStore, todos: usize) -> GoalState {
    block_on(async {
        let create = Command::CreateGoal { spec: spec() };
        let mut state = submit(
            store,
            &goal_id(),
            &owner(),
            now(),
            &create,
            &OperationId::new("create").unwrap(),
        )
        .await
        .unwrap()
        .state;
        let agent = Actor::Agent(AgentId::new("a").unwrap());
        for i in 0..todos {
            let todo = NewTodo::advance(TodoId::new(format!("t{i}")).unwrap(), "work");
            let op = OperationId::new(format!("add-{i}")).unwrap();
            state = submit(
                store,
                &goal_id(),
                &agent,
                now(),
                &Command::AddTodo { todo },
                &op,
            )
            .await
            .unwrap()
            .state;
        }
        state
    })
}

fn files(path: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let file = PathBuf::from(name);
            let bytes = fs::read(&file).ok();
            (file, bytes)
        })
        .collect()
}

#[test]
fn snapshots_bound_the_tail_a_load_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open_with(&path, SqliteOptions::default().snapshot_every(10)).unwrap();
    let state = populate(&store, 94);
    assert_eq!(state.revision, 95);
    let conn = Connection::open(&path).unwrap();
    let snapshots: Vec<i64> = conn
        .prepare("SELECT revision FROM snapshots WHERE goal = 'g' ORDER BY revision")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        snapshots,
        vec![90],
        "one periodic snapshot is kept, the newest"
    );
    let tail: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE goal = 'g' AND revision > 90",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tail, 5);
    // A new handle has no cached state: it loads the snapshot and the tail.
    drop(store);
    let fresh = SqliteStore::open(&path).unwrap();
    assert_eq!(
        block_on(fresh.load(&goal_id())).unwrap(),
        Some(state.clone())
    );

    // Compaction keeps its base snapshot next to the periodic one.
    block_on(fresh.compact(&goal_id(), 42)).unwrap();
    let snapshots: Vec<i64> = conn
        .prepare("SELECT revision FROM snapshots WHERE goal = 'g' ORDER BY revision")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(snapshots, vec![42, 90]);
    drop(fresh);
    let fresh = SqliteStore::open(&path).unwrap();
    assert_eq!(block_on(fresh.load(&goal_id())).unwrap(), Some(state));
}

#[test]
fn both_durability_settings_keep_every_commit_across_reopening() {
    for durability in [Durability::Full, Durability::Normal] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let options = SqliteOptions::default().durability(durability);
        let store = SqliteStore::open_with(&path, options.clone()).unwrap();
        assert_eq!(store.options(), &options);
        let state = populate(&store, 20);
        drop(store);
        let store = SqliteStore::open_with(&path, options).unwrap();
        assert_eq!(
            block_on(store.load(&goal_id())).unwrap(),
            Some(state),
            "{durability:?}"
        );
        block_on(store.integrity_check()).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn a_new_database_is_owner_only_and_in_wal_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    block_on(async {
        create_goal(&store).await;
    });
    for (file, bytes) in files(&path) {
        if bytes.is_some() {
            let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} has mode {mode:o}", file.display());
        }
    }
    let conn = Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: u32 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SQLITE_SCHEMA_VERSION);
}

#[test]
fn an_empty_file_becomes_a_store_and_concurrent_opens_agree() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    fs::write(&empty, b"").unwrap();
    let store = SqliteStore::open(&empty).unwrap();
    assert_eq!(block_on(store.goals(now())), Ok(vec![]));

    let shared = dir.path().join("shared.db");
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let path = shared.clone();
            std::thread::spawn(move || SqliteStore::open(&path).map(|_| ()))
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), Ok(()));
    }
    let conn = Connection::open(&shared).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

/// Turns a store written by this build back into what schema 4 wrote: receipts without the
/// attempt id of the append that wrote them; version 4.
fn rewrite_as_schema_4(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "ALTER TABLE events DROP COLUMN attempt;
         ALTER TABLE receipts DROP COLUMN attempt;
         UPDATE schema_version SET version = 4;",
    )
    .unwrap();
}

/// Turns a store written by this build back into what schema 3 wrote: the frontier rows
/// clustered on (agent, goal) with an index on the goal; version 3.
fn rewrite_as_schema_3(path: &Path) {
    rewrite_as_schema_4(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE frontier_by_agent_rows (
             agent TEXT NOT NULL,
             goal TEXT NOT NULL,
             todos TEXT NOT NULL,
             PRIMARY KEY (agent, goal)
         ) WITHOUT ROWID;
         INSERT INTO frontier_by_agent_rows SELECT agent, goal, todos FROM frontier;
         DROP TABLE frontier;
         ALTER TABLE frontier_by_agent_rows RENAME TO frontier;
         CREATE INDEX frontier_by_goal ON frontier (goal);
         UPDATE schema_version SET version = 3;",
    )
    .unwrap();
}

/// Turns a store written by this build back into what schema 2 wrote: every receipt a row of the
/// receipts table with its actor and event names, numbered in commit order; the event log a
/// rowid table without receipt columns; version 2.
fn rewrite_as_schema_2(path: &Path) {
    rewrite_as_schema_3(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TEMPORARY TABLE every_receipt AS
             SELECT r.goal, r.operation, r.digest, r.revision, r.events, r.committed_at,
                    CASE WHEN r.kinds IS NULL THEN
                        (SELECT json_extract(e.json, '$.actor') FROM events e
                         WHERE e.goal = r.goal AND e.revision = r.revision - r.events + 1)
                    ELSE r.actor END AS actor,
                    coalesce(r.kinds,
                        (SELECT json_group_array(json_extract(e.json, '$.event.type') ORDER BY e.revision)
                         FROM events e WHERE e.goal = r.goal
                           AND e.revision > r.revision - r.events AND e.revision <= r.revision)) AS kinds,
                    row_number() OVER (ORDER BY r.goal, r.revision, r.events = 0, r.seq) AS n
             FROM commits r;
         DELETE FROM receipts;
         INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
             SELECT goal, operation, digest, revision, events, committed_at, actor, kinds
             FROM every_receipt ORDER BY n;
         DROP TABLE every_receipt;
         DROP VIEW commits;
         DROP INDEX events_by_operation;
         CREATE TABLE events_rowid (
             goal TEXT NOT NULL,
             revision INTEGER NOT NULL,
             at INTEGER NOT NULL,
             json TEXT NOT NULL,
             PRIMARY KEY (goal, revision)
         );
         INSERT INTO events_rowid SELECT goal, revision, at, json FROM events;
         DROP TABLE events;
         ALTER TABLE events_rowid RENAME TO events;
         UPDATE schema_version SET version = 2;",
    )
    .unwrap();
}

/// Turns a store written by this build back into what schema 1 wrote: every event row's JSON
/// is the whole recorded event (revision and time included), the standing index exists, and
/// the recorded version is 1.
fn rewrite_as_schema_1(path: &Path, store: &SqliteStore) {
    let events = block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap();
    rewrite_as_schema_2(path);
    let conn = Connection::open(path).unwrap();
    for event in &events {
        let json = serde_json::to_string(event).unwrap();
        let revision = i64::try_from(event.revision).unwrap();
        let changed = conn
            .execute(
                "UPDATE events SET json = ?1 WHERE goal = 'g' AND revision = ?2",
                rusqlite::params![json, revision],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }
    conn.execute_batch(
        "CREATE INDEX goals_by_status ON goals (status); UPDATE schema_version SET version = 1;",
    )
    .unwrap();
}

/// The JSON of every event row, in revision order.
fn event_jsons(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT json FROM events ORDER BY revision")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_store_written_by_schema_1_opens_migrates_and_reads_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let options = SqliteOptions::default().snapshot_every(4);
    let store = SqliteStore::open_with(&path, options.clone()).unwrap();
    let state = populate(&store, 9);
    let events = block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap();
    let operations = block_on(store.operations(&goal_id(), 0, usize::MAX)).unwrap();
    let agent_a = AgentId::new("a").unwrap();
    let frontier = block_on(store.frontier(&agent_a, now())).unwrap();
    assert_eq!(frontier.len(), 9);
    rewrite_as_schema_1(&path, &store);
    drop(store);
    let old_rows = event_jsons(&Connection::open(&path).unwrap());
    assert!(
        old_rows[0].contains("\"revision\":1"),
        "the rows are in the old form"
    );

    // A fresh handle (nothing cached) migrates the file and reads the old rows as they were.
    let store = SqliteStore::open_with(&path, options).unwrap();
    let conn = Connection::open(&path).unwrap();
    let version: u32 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SQLITE_SCHEMA_VERSION);
    let status_index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'goals_by_status'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status_index, 0, "migration 2 drops the unused index");
    assert_eq!(block_on(store.load(&goal_id())).unwrap(), Some(state));
    assert_eq!(
        block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap(),
        events
    );
    assert_eq!(
        block_on(store.operations(&goal_id(), 0, usize::MAX)).unwrap(),
        operations
    );
    assert_eq!(
        block_on(store.frontier(&agent_a, now())).unwrap(),
        frontier,
        "the frontier rows read the same after migration 4 moved them"
    );

    // New commits land after the old rows, which stay untouched; old and new fold together.
    let agent = Actor::Agent(AgentId::new("a").unwrap());
    let todo = NewTodo::advance(TodoId::new("after").unwrap(), "after the upgrade");
    let done = block_on(submit(
        &store,
        &goal_id(),
        &agent,
        now(),
        &Command::AddTodo { todo },
        &OperationId::new("after-upgrade").unwrap(),
    ))
    .unwrap();
    let rows = event_jsons(&conn);
    assert_eq!(rows[..old_rows.len()], old_rows[..]);
    let newest = rows.last().unwrap();
    assert!(
        !newest.contains("\"revision\"") && !newest.contains("\"at\""),
        "new rows leave revision and time to their columns: {newest}"
    );
    let reopened = SqliteStore::open(&path).unwrap();
    let replayed =
        GoalState::replay(&block_on(reopened.events(&goal_id(), 0, usize::MAX)).unwrap()).unwrap();
    assert_eq!(replayed, done.state);
    assert_eq!(
        block_on(reopened.load(&goal_id())).unwrap(),
        Some(done.state)
    );
    // Its receipt is on its event row (migration 3), and the audit trail reads on from the old.
    let where_kept: (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM receipts WHERE operation = 'after-upgrade'),
                    (SELECT count(*) FROM events WHERE operation = 'after-upgrade'
                        AND revision = ?1 AND commit_events = 1)",
            [i64::try_from(done.receipt.revision).unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(where_kept, (0, 1));
    let now_recorded = block_on(reopened.operations(&goal_id(), 0, usize::MAX)).unwrap();
    assert_eq!(now_recorded[..operations.len()], operations[..]);
    assert_eq!(now_recorded.len(), operations.len() + 1);
    assert_eq!(
        block_on(reopened.receipt(&goal_id(), &OperationId::new("after-upgrade").unwrap())),
        Ok(Some(done.receipt))
    );
}

/// On a multi-threaded runtime the store's calls run in place (from worker threads and from
/// the runtime's `block_on` thread alike), concurrently with other tasks committing to the same
/// file: every commit lands once, and the stored history folds to what loads.
#[test]
fn a_multi_threaded_runtime_runs_calls_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("threads.db")).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        create_goal(&store).await;
        let tasks: Vec<_> = (0..6)
            .map(|task| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..8 {
                        let id = format!("t{task}-{i}");
                        let todo = NewTodo::advance(TodoId::new(id.clone()).unwrap(), "work");
                        let operation = OperationId::new(format!("add-{id}")).unwrap();
                        let command = Command::AddTodo { todo };
                        submit(&store, &goal_id(), &owner(), now(), &command, &operation)
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let state = store.load(&goal_id()).await.unwrap().unwrap();
        assert_eq!(state.todos.len(), 48);
        let events = store.events(&goal_id(), 0, usize::MAX).await.unwrap();
        assert_eq!(GoalState::replay(&events).unwrap(), state);
    });
}
