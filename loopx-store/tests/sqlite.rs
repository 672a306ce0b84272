//! SQLite specifics: file permissions and journal mode, only `create` making a store and
//! concurrent creators agreeing, snapshots bounding
//! the tail a load reads, the durability setting, a file written by schema 1 migrating and
//! reading as before, and calls running in place on a multi-threaded runtime.

mod support;

use loopx_kernel::submit;
use std::fs;
use std::path::{Path, PathBuf};

use loopx_kernel::seams::{Store, StoreError};
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
    let store =
        SqliteStore::create_with(&path, SqliteOptions::default().snapshot_every(10)).unwrap();
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
        let store = SqliteStore::create_with(&path, options.clone()).unwrap();
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
    let store = SqliteStore::create(&path).unwrap();
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
fn open_never_creates_or_fills_in_a_file_and_create_does() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    match SqliteStore::open(&missing) {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("no store at"), "{detail}");
        }
        other => panic!("a missing store must be refused, got {other:?}"),
    }
    assert!(!missing.exists(), "open created the file");

    let empty = dir.path().join("empty.db");
    fs::write(&empty, b"").unwrap();
    for opened in [SqliteStore::open(&empty), SqliteStore::create(&empty)] {
        match opened {
            Err(StoreError::Corrupt { detail }) => {
                assert!(detail.contains("is empty"), "{detail}");
            }
            other => panic!("an empty file must be refused, got {other:?}"),
        }
    }
    assert_eq!(
        fs::metadata(&empty).unwrap().len(),
        0,
        "the empty file was filled in"
    );
    assert!(files(&empty)[1].1.is_none() && files(&empty)[2].1.is_none());

    let store = SqliteStore::create(&missing).unwrap();
    assert!(store.created());
    assert_eq!(block_on(store.goals(now())), Ok(vec![]));
    drop(store);
    let again = SqliteStore::create(&missing).unwrap();
    assert!(!again.created(), "the second create opens the store");
    assert!(!SqliteStore::open(&missing).unwrap().created());
    let strays: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .filter(|n| n.to_string_lossy().ends_with(".creating"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

#[test]
fn an_empty_sqlite_database_is_not_filled_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blank.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 7;")
        .unwrap();
    let before = files(&path);
    match SqliteStore::open(&path) {
        Err(StoreError::Corrupt { detail }) => assert!(detail.contains("empty"), "{detail}"),
        other => panic!("an empty SQLite database must be refused, got {other:?}"),
    }
    assert_eq!(files(&path), before);
}

/// Creators and openers racing on one path agree: exactly one creator creates the store, the
/// other creators open it, an opener finds either nothing or the complete store. Repeated, so
/// that the race is run many ways.
#[test]
fn concurrent_creates_and_opens_agree() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared.db");
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let path = shared.clone();
                std::thread::spawn(move || {
                    if i % 2 == 0 {
                        SqliteStore::create(&path).map(|store| Some(store.created()))
                    } else {
                        match SqliteStore::open(&path) {
                            Ok(store) => block_on(store.goals(now())).map(|goals| {
                                assert!(goals.is_empty());
                                None
                            }),
                            Err(StoreError::Unavailable { detail })
                                if detail.contains("no store at") =>
                            {
                                Ok(None)
                            }
                            Err(error) => Err(error),
                        }
                    }
                })
            })
            .collect();
        let mut created = 0;
        for handle in handles {
            match handle.join().unwrap() {
                Ok(Some(true)) => created += 1,
                Ok(_) => {}
                Err(error) => panic!("round {round}: {error:?}"),
            }
        }
        assert_eq!(created, 1, "round {round}");
        let conn = Connection::open(&shared).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}

/// Turns a store written by this build back into what schema 5 wrote: no dead letters (schema
/// 11), no archive (schema 9), no goal subjects (schema 8), no authorship with the receipts;
/// version 5.
fn rewrite_as_schema_5(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP TABLE dead_letters;
         DROP TABLE archived_events;
         DROP TABLE goal_subjects;
         DROP VIEW commits;
         ALTER TABLE events DROP COLUMN authorship;
         ALTER TABLE receipts DROP COLUMN authorship;
         CREATE VIEW commits AS
             SELECT goal, operation, digest, revision, commit_events AS events, at AS committed_at,
                    NULL AS actor, NULL AS kinds, NULL AS seq
                 FROM events WHERE operation IS NOT NULL
             UNION ALL
             SELECT goal, operation, digest, revision, events, committed_at, actor, kinds, seq
                 FROM receipts;
         UPDATE schema_version SET version = 5;",
    )
    .unwrap();
}

/// Turns a store written by this build back into what schema 4 wrote: no damage marks, no
/// damage triggers, no stored chains, receipts without the attempt id of the append that
/// wrote them, no store settings (schema 6); version 4.
fn rewrite_as_schema_4(path: &Path) {
    rewrite_as_schema_5(path);
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "DROP TABLE store_settings;
         DROP TRIGGER events_deleted_outside_loopx;
         DROP TRIGGER events_changed_outside_loopx;
         ALTER TABLE goals DROP COLUMN damaged;
         ALTER TABLE goals DROP COLUMN chain;
         ALTER TABLE events DROP COLUMN chain;
         ALTER TABLE snapshots DROP COLUMN chain;
         ALTER TABLE events DROP COLUMN attempt;
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
    let store = SqliteStore::create_with(&path, options.clone()).unwrap();
    let state = populate(&store, 9);
    let events = block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap();
    let operations = block_on(store.operations(&goal_id(), 0, usize::MAX)).unwrap();
    // The old schema kept no command with its receipts: they read back without one.
    let operations: Vec<_> = operations
        .into_iter()
        .map(|mut o| {
            o.authorship = None;
            o
        })
        .collect();
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
    let store = SqliteStore::create(dir.path().join("threads.db")).unwrap();
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

/// Opening reads the write-ahead log while another handle keeps appending to it: a frame read
/// half written must never be taken for damage.
#[test]
fn opening_while_another_handle_writes_never_reports_a_damaged_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let store = SqliteStore::create(&path).unwrap();
    block_on(create_goal(&store));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let agent = Actor::Agent(AgentId::new("a").unwrap());
            for i in 0..80 {
                let todo =
                    NewTodo::advance(TodoId::new(format!("t{i}")).unwrap(), "x".repeat(3000));
                let op = OperationId::new(format!("add-{i}")).unwrap();
                block_on(submit(
                    &store,
                    &goal_id(),
                    &agent,
                    now(),
                    &Command::AddTodo { todo },
                    &op,
                ))
                .unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            let done = std::sync::Arc::clone(&done);
            std::thread::spawn(move || {
                let mut opened = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) || opened == 0 {
                    assert_eq!(SqliteStore::wal_damage(&path), Ok(None));
                    SqliteStore::open(&path).unwrap();
                    opened += 1;
                }
                opened
            })
        })
        .collect();
    writer.join().unwrap();
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
}

/// Runs `sql` on the file with the damage triggers off, as damage below SQL would be.
fn below_sql(path: &Path, sql: &str) {
    let conn = Connection::open(path).unwrap();
    let triggers: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (name, _) in &triggers {
        conn.execute_batch(&format!("DROP TRIGGER {name}")).unwrap();
    }
    assert_eq!(conn.execute(sql, []).unwrap(), 1, "the damage hits one row");
    for (_, create) in &triggers {
        conn.execute_batch(create).unwrap();
    }
}

#[test]
fn migration_5_chains_a_compacted_history_so_later_damage_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let options = SqliteOptions::default().snapshot_every(4);
    let store = SqliteStore::create_with(&path, options.clone()).unwrap();
    // Revision 1 creates the goal, 2 to 10 add t0 to t8; compaction keeps 6 to 10.
    let state = populate(&store, 9);
    block_on(store.compact(&goal_id(), 5)).unwrap();
    let events = block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap();
    drop(store);
    rewrite_as_schema_4(&path);

    // The migration computes the chains from the base on: everything reads as before.
    let store = SqliteStore::open_with(&path, options.clone()).unwrap();
    assert_eq!(
        block_on(store.load(&goal_id())).unwrap(),
        Some(state.clone())
    );
    assert_eq!(
        block_on(store.events(&goal_id(), 0, usize::MAX)).unwrap(),
        events
    );
    drop(store);

    // The first row after the base (below the newest snapshot, at 8) changes below SQL: the
    // events read finds it from the base's head; a load from the snapshot does not read it.
    below_sql(
        &path,
        "UPDATE events SET json = json_set(json, '$.event.todo.id', 'zz') WHERE revision = 6",
    );
    let store = SqliteStore::open_with(&path, options.clone()).unwrap();
    let read = block_on(store.events(&goal_id(), 0, usize::MAX));
    assert!(
        matches!(read, Err(StoreError::HistoryDamaged { revision: 6, .. })),
        "{read:?}"
    );
    assert_eq!(block_on(store.load(&goal_id())).unwrap(), Some(state));
    drop(store);

    // The last row (after the snapshot) changes too: a fresh load reads it and fails there.
    below_sql(
        &path,
        "UPDATE events SET json = json_set(json, '$.event.todo.id', 'zy') WHERE revision = 10",
    );
    let store = SqliteStore::open_with(&path, options).unwrap();
    let loaded = block_on(store.load(&goal_id()));
    assert!(
        matches!(loaded, Err(StoreError::HistoryDamaged { revision: 10, .. })),
        "{loaded:?}"
    );
}

/// A waiter on one handle wakes as soon as another handle of the same file (opened through
/// another spelling of its path) commits: well before its fallback re-read, set to 10 s, could
/// have seen the commit. What it returns really moved.
#[test]
fn a_waiter_on_another_handle_wakes_before_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let fallback = std::time::Duration::from_secs(10);
    let options = SqliteOptions::default().change_poll(loopx_kernel::Duration::seconds(10));
    let writer = SqliteStore::create_with(dir.path().join("wake.db"), options.clone()).unwrap();
    let waiter = SqliteStore::open_with(dir.path().join(".").join("wake.db"), options).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let revision = create_goal(&writer).await.state.revision;
        let started = std::time::Instant::now();
        let watched = [(goal_id(), revision)];
        let wait = waiter.changed(&watched, loopx_kernel::Duration::seconds(30));
        let commit = async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let todo = NewTodo::advance(TodoId::new("woken").unwrap(), "wake the waiter");
            submit(
                &writer,
                &goal_id(),
                &owner(),
                now(),
                &Command::AddTodo { todo },
                &OperationId::new("wake").unwrap(),
            )
            .await
            .unwrap();
        };
        let (moved, ()) = tokio::join!(wait, commit);
        let slept = started.elapsed();
        assert_eq!(moved.unwrap(), vec![goal_id()]);
        assert!(slept < fallback, "woken by the commit ({slept:?})");
        assert!(revision_of(&waiter).await > revision);
    });
}

async fn revision_of(store: &SqliteStore) -> u64 {
    store.load(&goal_id()).await.unwrap().unwrap().revision
}

/// A store written by schema 7 (no `goal_subjects` index) opens at the current schema with
/// every goal's subjects indexed from its history: a goal that follows a subject is found by
/// it, its derived rows check clean, and a second open does nothing more.
#[test]
fn a_store_written_by_schema_7_indexes_the_subjects_of_its_goals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v7.db");
    let pull = loopx_kernel::Subject::new("pr:acme/cli#42").unwrap();
    let state = {
        let store = SqliteStore::create(&path).unwrap();
        let mut spec = spec();
        spec.criteria.push(loopx_kernel::Criterion {
            id: loopx_kernel::CriterionId::new("green").unwrap(),
            text: "CI is green".into(),
            check: loopx_kernel::CheckId::new("ci.green").unwrap(),
            subject: pull.clone(),
        });
        block_on(submit(
            &store,
            &goal_id(),
            &owner(),
            now(),
            &Command::CreateGoal { spec },
            &OperationId::new("create").unwrap(),
        ))
        .unwrap()
        .state
    };
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE dead_letters; DROP TABLE archived_events; DROP TABLE goal_subjects;
         UPDATE schema_version SET version = 7;",
    )
    .unwrap();
    drop(conn);

    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        let found = block_on(store.watching(std::slice::from_ref(&pull), now())).unwrap();
        assert_eq!(found, vec![goal_id()]);
        assert_eq!(block_on(store.check_rows(&state, now())).unwrap(), vec![]);
    }
    let conn = Connection::open(&path).unwrap();
    let version: u32 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SQLITE_SCHEMA_VERSION);
    let pending: i64 = conn
        .query_row(
            "SELECT count(*) FROM store_settings WHERE name = 'goal_subjects'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(pending, 0, "the mark is removed with the rows");
}

#[test]
fn a_handle_without_a_state_cache_reads_what_a_caching_handle_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let uncached =
        SqliteStore::create_with(&path, SqliteOptions::default().cached_goals(0)).unwrap();
    let state = populate(&uncached, 3);
    let caching = SqliteStore::open(&path).unwrap();
    assert_eq!(block_on(caching.load(&goal_id())).unwrap(), Some(state));
    let todo = NewTodo::advance(TodoId::new("late").unwrap(), "work");
    let later = block_on(submit(
        &caching,
        &goal_id(),
        &owner(),
        now(),
        &Command::AddTodo { todo },
        &OperationId::new("late").unwrap(),
    ))
    .unwrap()
    .state;
    assert_eq!(later.revision, 5);
    assert_eq!(block_on(uncached.load(&goal_id())).unwrap(), Some(later));
}
