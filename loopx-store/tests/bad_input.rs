//! Bad input to the SQLite backend: files that are not (complete, loopx) databases, schemas
//! written by a newer version, damaged rows, a damaged write-ahead log. Each is a typed error with an actionable message,
//! and nothing is modified.

mod support;

use loopx_kernel::{SubmitError, submit};
use std::fs;
use std::path::{Path, PathBuf};

use loopx_kernel::seams::{Store, StoreError};
use loopx_kernel::{Actor, AgentId, Command, NewTodo, OperationId, TodoId};
use loopx_store::{SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use support::{block_on, create_goal, goal_id, now};

/// A store at `path` holding goal `g` with `todos` todos (one event each after creation).
fn populated(path: &Path, todos: usize, options: SqliteOptions) {
    let store = SqliteStore::create_with(path, options).unwrap();
    block_on(async {
        create_goal(&store).await;
        let agent = Actor::Agent(AgentId::new("a").unwrap());
        for i in 0..todos {
            let todo = NewTodo::advance(TodoId::new(format!("t{i}")).unwrap(), "x".repeat(300));
            let op = OperationId::new(format!("add-{i}")).unwrap();
            submit(
                &store,
                &goal_id(),
                &agent,
                now(),
                &Command::AddTodo { todo },
                &op,
            )
            .await
            .unwrap();
        }
    });
}

/// Every file of the database: main, `-wal` and `-shm`, with their bytes (absent ones `None`).
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

fn corrupt(result: Result<SqliteStore, StoreError>) -> String {
    match result {
        Err(StoreError::Corrupt { detail }) => detail,
        other => panic!("expected a corrupt-store error, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    fs::write(&path, "these are my notes, not a database\n".repeat(200)).unwrap();
    let before = files(&path);
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("is not a SQLite database"), "{detail}");
    assert!(detail.contains("nothing was changed"), "{detail}");
    assert_eq!(files(&path), before);
}

#[test]
fn a_file_shorter_than_a_header_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.db");
    fs::write(&path, b"SQLite format 3\0abc").unwrap();
    let before = files(&path);
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("19 bytes"), "{detail}");
    assert_eq!(files(&path), before);
}

#[test]
fn a_truncated_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 200, SqliteOptions::default());
    let (_, wal) = &files(&path)[1];
    assert!(
        wal.as_ref().is_none_or(Vec::is_empty),
        "a cleanly closed store leaves no log"
    );
    let full = fs::read(&path).unwrap();
    assert!(
        full.len() > 16 * 4096,
        "the database should span many pages"
    );
    fs::write(&path, &full[..full.len() / 2]).unwrap();
    let before = files(&path);
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("is truncated"), "{detail}");
    assert_eq!(files(&path), before);
}

#[test]
fn another_programs_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ann');")
            .unwrap();
    }
    let before = files(&path);
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("not a loopx store"), "{detail}");
    assert!(detail.contains("users"), "{detail}");
    assert_eq!(files(&path), before);
}

#[test]
fn a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 3, SqliteOptions::default());
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE schema_version SET version = 99", [])
            .unwrap();
    }
    let before = files(&path);
    match SqliteStore::open(&path) {
        Err(
            error @ StoreError::NewerSchema {
                found: 99,
                supported,
            },
        ) => {
            assert_eq!(supported, SQLITE_SCHEMA_VERSION);
            assert!(error.to_string().contains("upgrade loopx"), "{error}");
        }
        other => panic!("expected a newer-schema error, got {other:?}"),
    }
    assert_eq!(files(&path)[0], before[0], "the database file changed");
}

#[test]
fn a_damaged_schema_version_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 1, SqliteOptions::default());
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute("INSERT INTO schema_version VALUES (1)", [])
            .unwrap();
    }
    let before = files(&path);
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("2 rows instead of one"), "{detail}");
    assert_eq!(files(&path)[0], before[0]);
}

/// The rows that a damaged history must leave untouched.
fn rows(path: &Path) -> (i64, i64, i64, String) {
    let conn = Connection::open(path).unwrap();
    conn.query_row(
        "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM receipts),
                (SELECT revision FROM goals WHERE goal = 'g'),
                (SELECT group_concat(json, '|') FROM events)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

/// Damages one row as a failing disk would: below SQL, where the schema's damage triggers
/// (which mark a goal whose event rows a statement changed) see nothing, so that what reading
/// the row finds is what the store reports. `damage_marks` covers the triggers.
fn damage(path: &Path, sql: &str) {
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
    assert_eq!(
        conn.execute(sql, []).unwrap(),
        1,
        "the damage must hit one row"
    );
    for (_, create) in &triggers {
        conn.execute_batch(create).unwrap();
    }
}

/// Opens the damaged store and checks that reading and writing goal `g` fail with `expect`,
/// changing nothing.
fn check_damaged(path: &Path, expect: impl Fn(&StoreError) -> bool) {
    let before = rows(path);
    let store =
        SqliteStore::open_with(path, SqliteOptions::default().snapshot_every(1000)).unwrap();
    block_on(async {
        let loaded = store.load(&goal_id()).await;
        assert!(matches!(&loaded, Err(e) if expect(e)), "load: {loaded:?}");
        let agent = Actor::Agent(AgentId::new("a").unwrap());
        let todo = NewTodo::advance(TodoId::new("more").unwrap(), "more");
        let op = OperationId::new("after-damage").unwrap();
        let submitted = submit(
            &store,
            &goal_id(),
            &agent,
            now(),
            &Command::AddTodo { todo },
            &op,
        )
        .await;
        assert!(
            matches!(&submitted, Err(SubmitError::Store(e)) if expect(e)),
            "submit: {submitted:?}"
        );
        assert_eq!(store.receipt(&goal_id(), &op).await, Ok(None));
    });
    drop(store);
    assert_eq!(rows(path), before, "a damaged history was modified");
}

#[test]
fn an_event_row_that_is_not_json_is_reported_with_its_goal_and_revision() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 5, SqliteOptions::default().snapshot_every(1000));
    damage(
        &path,
        "UPDATE events SET json = '{\"schema\": 1, \"revis' WHERE revision = 3",
    );
    check_damaged(
        &path,
        |e| matches!(e, StoreError::Corrupt { detail } if detail.contains("event 3 of goal `g`") && detail.contains("backup")),
    );
    let store = SqliteStore::open(&path).unwrap();
    let events = block_on(store.events(&goal_id(), 0, 100));
    assert!(
        matches!(events, Err(StoreError::Corrupt { .. })),
        "{events:?}"
    );
    let early = block_on(store.events(&goal_id(), 0, 2)).unwrap();
    assert_eq!(early.len(), 2, "rows before the damage still read");
}

#[test]
fn an_event_row_written_by_a_newer_schema_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 5, SqliteOptions::default().snapshot_every(1000));
    damage(
        &path,
        "UPDATE events SET json = json_set(json, '$.schema', 7, '$.event.color', 'blue') WHERE revision = 4",
    );
    check_damaged(&path, |e| {
        matches!(
            e,
            StoreError::NewerSchema {
                found: 7,
                supported: loopx_kernel::SCHEMA_VERSION
            }
        )
    });
}

#[test]
fn an_event_row_stored_at_the_wrong_revision_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 5, SqliteOptions::default().snapshot_every(1000));
    damage(
        &path,
        "UPDATE events SET json = json_set(json, '$.revision', 9) WHERE revision = 2",
    );
    check_damaged(
        &path,
        |e| matches!(e, StoreError::Corrupt { detail } if detail.contains("stored at revision 2")),
    );
}

#[test]
fn an_event_changed_below_sql_that_still_folds_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 5, SqliteOptions::default().snapshot_every(1000));
    // Revision 3 adds todo t1; make it add t9 instead, which decodes and folds.
    damage(
        &path,
        "UPDATE events SET json = json_set(json, '$.event.todo.id', 't9') WHERE revision = 3",
    );
    check_damaged(
        &path,
        |e| matches!(e, StoreError::HistoryDamaged { goal, revision: 3, .. } if goal == &goal_id()),
    );
    let store = SqliteStore::open(&path).unwrap();
    let events = block_on(store.events(&goal_id(), 0, 100));
    assert!(
        matches!(events, Err(StoreError::HistoryDamaged { revision: 3, .. })),
        "{events:?}"
    );
    let early = block_on(store.events(&goal_id(), 0, 2)).unwrap();
    assert_eq!(early.len(), 2, "rows before the damage still read");
}

#[test]
fn an_event_that_contradicts_the_history_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 5, SqliteOptions::default().snapshot_every(1000));
    // Revision 3 adds todo t1; make it add t0 again, which the fold refuses.
    damage(
        &path,
        "UPDATE events SET json = json_set(json, '$.event.todo.id', 't0') WHERE revision = 3",
    );
    check_damaged(
        &path,
        |e| matches!(e, StoreError::Corrupt { detail } if detail.contains("does not fold")),
    );
}

#[test]
fn a_damaged_snapshot_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    populated(&path, 12, SqliteOptions::default().snapshot_every(5));
    damage(
        &path,
        "UPDATE snapshots SET json = '[]' WHERE revision = (SELECT max(revision) FROM snapshots)",
    );
    check_damaged(
        &path,
        |e| matches!(e, StoreError::Corrupt { detail } if detail.contains("snapshot of goal `g`")),
    );
}

#[test]
fn paths_that_cannot_hold_a_database_are_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    match SqliteStore::open(dir.path()) {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("directory"), "{detail}");
        }
        other => panic!("a directory must be refused, got {other:?}"),
    }
    let missing = dir.path().join("no/such/dir/store.db");
    match SqliteStore::create(&missing) {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("cannot create"), "{detail}");
        }
        other => panic!("a missing directory must be reported, got {other:?}"),
    }
    match SqliteStore::open(&missing) {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("no store at"), "{detail}");
        }
        other => panic!("a missing store must be reported, got {other:?}"),
    }
    assert!(!missing.exists());
}

/// A store whose last commits are still in its write-ahead log, as a crash leaves it: goal `g`
/// with `todos` todos, the database and its log copied while the writer still had it open.
/// The frames' offsets and whether each commits.
fn crashed_with_log(dir: &Path, todos: usize) -> (PathBuf, Vec<(usize, bool)>) {
    let live = dir.join("live.db");
    let store = SqliteStore::create(&live).unwrap();
    block_on(create_goal(&store));
    let copy = dir.join("crashed.db");
    {
        // Keep the log: a second connection stays open while the store commits and is copied.
        let reader = Connection::open(&live).unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM goals", [], |r| r.get(0))
            .unwrap();
        drop(store);
        populated_more(&live, todos);
        fs::copy(&live, &copy).unwrap();
        let mut wal = copy.as_os_str().to_owned();
        wal.push("-wal");
        fs::copy(dir.join("live.db-wal"), PathBuf::from(wal)).unwrap();
    }
    let log = fs::read(dir.join("crashed.db-wal")).unwrap();
    let page = usize::try_from(u32::from_be_bytes([log[8], log[9], log[10], log[11]])).unwrap();
    let frames = (0..(log.len() - 32) / (24 + page))
        .map(|i| {
            let at = 32 + i * (24 + page);
            (at, log[at + 4..at + 8] != [0; 4])
        })
        .collect();
    (copy, frames)
}

/// Adds `todos` todos to goal `g` through a new handle.
fn populated_more(path: &Path, todos: usize) {
    let store = SqliteStore::open(path).unwrap();
    block_on(async {
        let agent = Actor::Agent(AgentId::new("a").unwrap());
        for i in 0..todos {
            let todo = NewTodo::advance(TodoId::new(format!("w{i}")).unwrap(), "logged");
            let op = OperationId::new(format!("log-{i}")).unwrap();
            submit(
                &store,
                &goal_id(),
                &agent,
                now(),
                &Command::AddTodo { todo },
                &op,
            )
            .await
            .unwrap();
        }
    });
}

fn log_of(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at] ^= 0x55;
    fs::write(path, bytes).unwrap();
}

fn revision_of(path: &Path) -> u64 {
    let store = SqliteStore::open(path).unwrap();
    block_on(store.load(&goal_id())).unwrap().unwrap().revision
}

#[test]
fn a_log_damaged_before_committed_frames_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, frames) = crashed_with_log(dir.path(), 5);
    assert!(frames.iter().filter(|(_, commit)| *commit).count() >= 5);
    assert_eq!(SqliteStore::wal_damage(&path), Ok(None));
    // Damage in the first frame's page: the five commits after it would be dropped.
    flip(&log_of(&path), frames[0].0 + 24 + 200);
    let before = files(&path);
    let damage = SqliteStore::wal_damage(&path)
        .unwrap()
        .expect("damage is found");
    assert_eq!(damage.broken_frame, 1);
    assert_eq!(damage.kept_frames, 0);
    assert!(damage.lost_commits >= 5, "{damage:?}");
    let detail = corrupt(SqliteStore::open(&path));
    assert!(detail.contains("damaged at frame 1"), "{detail}");
    assert!(detail.contains("nothing was changed"), "{detail}");
    assert!(detail.contains("accept_wal_loss"), "{detail}");
    assert_eq!(files(&path), before, "refusing the log changed a file");
    let detail = corrupt(SqliteStore::create(&path));
    assert!(detail.contains("damaged at frame 1"), "{detail}");
    assert_eq!(files(&path), before);

    // Accepting the loss keeps the log first, then opens without the dropped commits.
    let damaged_log = fs::read(log_of(&path)).unwrap();
    let accepting = SqliteOptions::default().accept_wal_loss(true);
    let store = SqliteStore::open_with(&path, accepting).unwrap();
    let loaded = block_on(store.load(&goal_id())).unwrap();
    assert!(
        loaded.as_ref().is_none_or(|state| state.revision < 6),
        "{loaded:?}"
    );
    drop(store);
    let mut kept = log_of(&path).into_os_string();
    kept.push(".damaged");
    assert_eq!(fs::read(PathBuf::from(kept)).unwrap(), damaged_log);
    // The loss is permanent now, and the store opens as any other.
    assert_eq!(SqliteStore::wal_damage(&path), Ok(None));
    SqliteStore::open(&path).unwrap();
}

#[test]
fn a_torn_tail_is_silent_and_so_is_damage_in_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (path, frames) = crashed_with_log(dir.path(), 5);
    let full = {
        let copy = dir.path().join("intact.db");
        fs::copy(&path, &copy).unwrap();
        fs::copy(log_of(&path), log_of(&copy)).unwrap();
        revision_of(&copy)
    };
    assert_eq!(full, 6);
    let log = fs::read(log_of(&path)).unwrap();
    let page = log.len() - frames.last().unwrap().0 - 24;

    // The last frame half written, as a crash mid-commit leaves it.
    let torn = dir.path().join("torn.db");
    fs::copy(&path, &torn).unwrap();
    fs::write(log_of(&torn), &log[..log.len() - page / 2]).unwrap();
    assert_eq!(SqliteStore::wal_damage(&torn), Ok(None));
    assert_eq!(revision_of(&torn), full - 1);

    // A flip in the last commit frame: nothing after it tells it from a torn write, so the
    // last transaction is dropped the same way (documented).
    let late = dir.path().join("late.db");
    fs::copy(&path, &late).unwrap();
    fs::copy(log_of(&path), log_of(&late)).unwrap();
    flip(&log_of(&late), frames.last().unwrap().0 + 24 + 200);
    assert_eq!(SqliteStore::wal_damage(&late), Ok(None));
    assert_eq!(revision_of(&late), full - 1);

    // A damaged log header drops every frame; its frames still verify, so it is reported.
    let header = dir.path().join("header.db");
    fs::copy(&path, &header).unwrap();
    fs::copy(log_of(&path), log_of(&header)).unwrap();
    flip(&log_of(&header), 17);
    let damage = SqliteStore::wal_damage(&header)
        .unwrap()
        .expect("damage is found");
    assert_eq!(damage.broken_frame, 0);
    assert!(corrupt(SqliteStore::open(&header)).contains("its header"));
}
