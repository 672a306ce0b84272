//! The PostgreSQL backend against a real server: bad input (an unreachable server, a newer
//! schema, another program's database) as typed errors with nothing modified and no password
//! in any message, and a connection lost after `COMMIT` was sent reported as ambiguous and
//! resolved by `submit` from the receipt; databases written by schemas 1 and 2 migrating and
//! reading as before; a retry from a handle whose cache missed the first commit.
#![cfg(feature = "postgres")]

mod support;

use loopx_kernel::submit;
use loopx_kernel::write::digest;
use loopx_kernel::write::stamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use loopx_kernel::seams::{AppendRequest, Appended, Commit, Store, StoreError};
use loopx_kernel::{Command, NewTodo, OperationId, TodoId};
use loopx_store::{POSTGRES_SCHEMA_VERSION, PostgresOptions, PostgresStore, Retention};
use support::postgres::cluster;
use support::{create_goal, goal_id, now, owner, spec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn sql(url: &str, statement: &str) -> Vec<tokio_postgres::Row> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.simple_query(statement).await.unwrap();
    client.query("SELECT 1", &[]).await.unwrap()
}

async fn version(url: &str) -> i32 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query_one("SELECT version FROM schema_version", &[])
        .await
        .unwrap()
        .get(0)
}

/// The URL of `url`'s database with a password added (the test server trusts every login,
/// so the password is accepted and ignored).
fn with_password(url: &str, password: &str) -> String {
    url.replacen("://loopx@", &format!("://loopx:{password}@"), 1)
}

#[test]
fn an_unreachable_server_is_unavailable_and_the_password_is_never_shown() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://loopx:hunter2-secret@127.0.0.1:{port}/nowhere");
    let options = PostgresOptions::default().connect_timeout(loopx_kernel::Duration::seconds(2));
    let result = runtime().block_on(PostgresStore::connect_with(
        &url,
        options,
        tokio_postgres::NoTls,
    ));
    match result {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains(&format!("127.0.0.1:{port}")), "{detail}");
            assert!(detail.contains("nowhere"), "{detail}");
            assert!(!detail.contains("hunter2"), "the password leaked: {detail}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let bad = runtime().block_on(PostgresStore::connect(
        "postgres://loopx:hunter2@host:notaport/db",
    ));
    match bad {
        Err(StoreError::Unavailable { detail }) => {
            assert!(detail.contains("URL"), "{detail}");
            assert!(!detail.contains("hunter2"), "the password leaked: {detail}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn the_store_never_shows_its_password() {
    let url = with_password(&cluster().database(), "hunter2-secret");
    let store = runtime().block_on(PostgresStore::connect(&url)).unwrap();
    let shown = format!("{store:?} {}", store.target());
    assert!(shown.contains("127.0.0.1"), "{shown}");
    assert!(!shown.contains("hunter2"), "the password leaked: {shown}");
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        let store = PostgresStore::connect(&url).await.unwrap();
        create_goal(&store).await;
        drop(store);
        assert_eq!(
            version(&url).await,
            i32::try_from(POSTGRES_SCHEMA_VERSION).unwrap()
        );
        sql(&url, "UPDATE schema_version SET version = 99").await;
        match PostgresStore::connect(&url).await {
            Err(StoreError::NewerSchema { found, supported }) => {
                assert_eq!((found, supported), (99, POSTGRES_SCHEMA_VERSION));
            }
            other => panic!("expected NewerSchema, got {other:?}"),
        }
        assert_eq!(
            version(&url).await,
            99,
            "the refused open changed the schema"
        );
    });
}

#[test]
fn another_programs_database_is_refused() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        sql(&url, "CREATE TABLE goals (name TEXT)").await;
        match PostgresStore::connect(&url).await {
            Err(StoreError::Corrupt { detail }) => {
                assert!(detail.contains("not a loopx store"), "{detail}");
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let exists: bool = client
            .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
            .await
            .unwrap()
            .get(0);
        assert!(!exists, "the refused open created tables");
    });
}

/// A TCP proxy in front of the server that, once armed, forwards the next commit a client sends
/// (one execution of the prepared `loopx_append` call) and then drops that connection without
/// passing the server's answer back: the commit happens, the client never learns it.
struct Proxy {
    port: u16,
    armed: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
}

impl Proxy {
    async fn start(server_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (a, f) = (Arc::clone(&armed), Arc::clone(&fired));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(("127.0.0.1", server_port))
                    .await
                    .unwrap();
                tokio::spawn(pump(client, server, Arc::clone(&a), Arc::clone(&f)));
            }
        });
        Proxy { port, armed, fired }
    }
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let cut = Arc::new(AtomicBool::new(false));
    let cut_up = Arc::clone(&cut);
    let up = tokio::spawn(async move {
        let mut buffer = vec![0_u8; 64 * 1024];
        // The names this connection prepared the commit function's call under.
        let mut commit_statements = Vec::new();
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buffer[..n];
            let mut commit = false;
            for (kind, body) in messages(chunk) {
                let mut fields = body.split(|&b| b == 0);
                match kind {
                    b'P' => {
                        let name = fields.next().unwrap_or_default();
                        let sql = fields.next().unwrap_or_default();
                        if sql.windows(12).any(|w| w == b"loopx_append") {
                            commit_statements.push(name.to_vec());
                        }
                    }
                    b'B' => {
                        let statement = fields.nth(1).unwrap_or_default();
                        commit |= commit_statements.iter().any(|s| s == statement);
                    }
                    _ => {}
                }
            }
            if commit && armed.swap(false, Ordering::SeqCst) {
                cut_up.store(true, Ordering::SeqCst);
                fired.store(true, Ordering::SeqCst);
                let _ = server_write.write_all(chunk).await;
                // Let the server commit, then drop the connection to it too.
                tokio::time::sleep(StdDuration::from_millis(300)).await;
                break;
            }
            if server_write.write_all(chunk).await.is_err() {
                break;
            }
        }
    });
    let down = tokio::spawn(async move {
        let mut buffer = vec![0_u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if cut.load(Ordering::SeqCst) {
                break;
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
    });
    let _ = up.await;
    down.abort();
}

/// The frontend messages in `chunk`: (type byte, body). A client's small messages arrive whole.
fn messages(mut chunk: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (&kind, rest) = chunk.split_first()?;
        let length = usize::try_from(u32::from_be_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        let body = rest.get(4..length)?;
        chunk = &rest[length..];
        Some((kind, body))
    })
}

fn port_of(url: &str) -> u16 {
    let after = url.split("@127.0.0.1:").nth(1).unwrap();
    after.split('/').next().unwrap().parse().unwrap()
}

#[test]
fn a_commit_whose_answer_is_lost_is_ambiguous_and_submit_resolves_it() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        let proxy = Proxy::start(port_of(&url)).await;
        let proxied = url.replacen(
            &format!(":{}/", port_of(&url)),
            &format!(":{}/", proxy.port),
            1,
        );
        let options = PostgresOptions::default().max_connections(2);
        let store = PostgresStore::connect_with(&proxied, options, tokio_postgres::NoTls)
            .await
            .unwrap();
        let direct = PostgresStore::connect(&url).await.unwrap();
        let create = Command::CreateGoal { spec: spec() };
        let goal = goal_id();
        submit(
            &store,
            &goal,
            &owner(),
            now(),
            &create,
            &OperationId::new("create").unwrap(),
        )
        .await
        .unwrap();

        // The store itself reports the lost answer as ambiguous; the commit did happen.
        let state = store.load(&goal).await.unwrap().unwrap();
        let command = Command::AddTodo {
            todo: NewTodo::advance(TodoId::new("t1").unwrap(), "one"),
        };
        let events = loopx_kernel::execute(Some(&state), &owner(), now(), &command).unwrap();
        let operation = OperationId::new("add-t1").unwrap();
        let request = AppendRequest {
            goal: goal.clone(),
            expected_revision: 1,
            operation: operation.clone(),
            digest: digest(&owner(), &command),
            at: now(),
            events: stamp(1, &owner(), now(), events),
            authorship: None,
            clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
        };
        let commit = Commit::fold(Some(state), request).unwrap();
        proxy.armed.store(true, Ordering::SeqCst);
        let result = store.append(commit).await;
        assert!(
            proxy.fired.load(Ordering::SeqCst),
            "the proxy never cut a commit"
        );
        let Err(StoreError::Ambiguous {
            operation: cut,
            attempt,
        }) = result
        else {
            panic!("a cut commit must be ambiguous, got {result:?}");
        };
        assert_eq!(cut, operation);
        // Read back, the receipt proves that this very attempt wrote it; another attempt id
        // proves nothing.
        assert!(matches!(
            direct.resolve(&goal, &operation, &attempt).await,
            Ok(Some(Appended::Committed(_)))
        ));
        assert!(matches!(
            direct.resolve(&goal, &operation, "another-attempt").await,
            Ok(Some(Appended::Replayed(_)))
        ));
        let receipt = direct.receipt(&goal, &operation).await.unwrap();
        assert_eq!(
            receipt.map(|r| r.revision),
            Some(2),
            "the cut commit did not commit"
        );

        // Through submit, the same situation resolves from the receipt: one commit, no error.
        let command = Command::AddTodo {
            todo: NewTodo::advance(TodoId::new("t2").unwrap(), "two"),
        };
        let operation = OperationId::new("add-t2").unwrap();
        proxy.fired.store(false, Ordering::SeqCst);
        proxy.armed.store(true, Ordering::SeqCst);
        let done = submit(&store, &goal, &owner(), now(), &command, &operation)
            .await
            .unwrap();
        assert!(
            proxy.fired.load(Ordering::SeqCst),
            "the proxy never cut a commit"
        );
        assert_eq!(done.receipt.revision, 3);
        assert_eq!(done.events.len(), 1);
        let loaded = direct.load(&goal).await.unwrap().unwrap();
        assert_eq!(loaded, done.state);
        assert_eq!(direct.events(&goal, 0, usize::MAX).await.unwrap().len(), 3);
    });
}

/// Turns the database at `url` back into what schema 1 wrote: whole recorded events as the
/// rows' JSON, schema 1's indexes and keys, no commit function, version 1. Returns a client on
/// it.
async fn rewrite_as_schema_1(
    url: &str,
    events: &[loopx_kernel::RecordedEvent],
) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    // Without the damage triggers first: rewriting the rows is what they would report.
    rewrite_as_schema_4(&client).await;
    for event in events {
        let json = serde_json::to_string(event).unwrap();
        let revision = i64::try_from(event.revision).unwrap();
        let changed = client
            .execute(
                "UPDATE events SET json = $1 WHERE goal = 'g' AND revision = $2",
                &[&json, &revision],
            )
            .await
            .unwrap();
        assert_eq!(changed, 1);
    }
    rewrite_as_schema_2(&client).await;
    client
        .batch_execute(
            "DROP FUNCTION loopx_append;
             ALTER TABLE goals RESET (fillfactor);
             ALTER TABLE frontier RESET (fillfactor);
             DROP INDEX receipts_by_revision;
             ALTER TABLE receipts ADD PRIMARY KEY (seq);
             CREATE INDEX receipts_by_revision ON receipts (goal, revision);
             CREATE INDEX goals_by_status ON goals (status);
             UPDATE schema_version SET version = 1;",
        )
        .await
        .unwrap();
    client
}

/// Turns the database behind `client` back into what schema 2 wrote: digests as text, every
/// receipt with its actor and event names, the unique key on (goal, operation), schema 2's
/// commit function and index settings, version 2.
async fn rewrite_as_schema_2(client: &tokio_postgres::Client) {
    rewrite_as_schema_3(client).await;
    let schema_2 = include_str!("../migrations/postgres/0002_append_function.sql");
    let function = &schema_2[schema_2.find("CREATE FUNCTION").unwrap()..];
    client
        .batch_execute(&format!(
            "DROP FUNCTION loopx_append;
             DROP INDEX receipts_by_operation;
             ALTER INDEX events_pkey RESET (fillfactor);
             ALTER INDEX receipts_by_revision RESET (fillfactor);
             ALTER TABLE receipts ALTER COLUMN digest TYPE TEXT USING (
                 CASE
                     WHEN octet_length(digest) = 32 THEN encode(digest, 'hex')
                     WHEN octet_length(digest) = 33 AND substring(digest FROM 1 FOR 1) = '\\xff'::BYTEA
                         THEN convert_from(substring(digest FROM 2), 'UTF8')
                     ELSE convert_from(digest, 'UTF8')
                 END);
             UPDATE receipts r SET
                 actor = (SELECT (e.json::JSON -> 'actor')::TEXT FROM events e
                          WHERE e.goal = r.goal AND e.revision = r.revision - r.events + 1),
                 kinds = COALESCE((SELECT json_agg(e.json::JSON -> 'event' ->> 'type' ORDER BY e.revision)::TEXT
                                   FROM events e WHERE e.goal = r.goal
                                     AND e.revision > r.revision - r.events AND e.revision <= r.revision), '[]')
                 WHERE r.kinds IS NULL;
             ALTER TABLE receipts ALTER COLUMN kinds SET NOT NULL;
             ALTER TABLE receipts ADD CONSTRAINT receipts_goal_operation_key UNIQUE (goal, operation);
             {function}
             UPDATE schema_version SET version = 2;"
        ))
        .await
        .unwrap();
}

/// Turns the database behind `client` back into what schema 4 wrote: no damage marks, no
/// damage triggers, no stored chains, receipts without the attempt id of the append that
/// wrote them nor authorship, schema 4's commit function and none behind the clock, no store
/// settings (schema 6), no authorship (schema 7), no goal subjects (schema 8) and no archive
/// (schema 9, and with it no authorship in the archive, schema 10), no dead letters (schema 11);
/// version 4. Running it again changes nothing.
async fn rewrite_as_schema_4(client: &tokio_postgres::Client) {
    let schema_4 = include_str!("../migrations/postgres/0004_receipts_on_events.sql");
    let function = &schema_4[schema_4.find("CREATE FUNCTION").unwrap()..];
    client
        .batch_execute(&format!(
            "DROP FUNCTION IF EXISTS loopx_append_clocked;
             DROP VIEW IF EXISTS commits;
             DROP TABLE IF EXISTS dead_letters;
             DROP TABLE IF EXISTS archived_events;
             DROP FUNCTION IF EXISTS loopx_mark_archive_damage;
             DROP FUNCTION IF EXISTS loopx_mark_archive_truncation;
             DROP TABLE IF EXISTS goal_subjects;
             DROP TABLE IF EXISTS store_settings;
             ALTER TABLE events DROP COLUMN IF EXISTS authorship;
             ALTER TABLE receipts DROP COLUMN IF EXISTS authorship;
             CREATE VIEW commits AS
                 SELECT goal, operation, digest, revision, commit_events AS events,
                        at AS committed_at, NULL::TEXT AS actor, NULL::TEXT AS kinds,
                        NULL::BIGINT AS seq
                     FROM events WHERE operation IS NOT NULL
                 UNION ALL
                 SELECT goal, operation, digest, revision, events, committed_at, actor, kinds, seq
                     FROM receipts;
             DROP TRIGGER IF EXISTS events_deleted_outside_loopx ON events;
             DROP TRIGGER IF EXISTS events_changed_outside_loopx ON events;
             DROP TRIGGER IF EXISTS events_truncated_outside_loopx ON events;
             DROP FUNCTION IF EXISTS loopx_mark_damage;
             DROP FUNCTION IF EXISTS loopx_mark_truncation;
             ALTER TABLE goals DROP COLUMN IF EXISTS damaged, DROP COLUMN IF EXISTS chain;
             ALTER TABLE events DROP COLUMN IF EXISTS chain;
             ALTER TABLE snapshots DROP COLUMN IF EXISTS chain;
             ALTER TABLE events DROP COLUMN IF EXISTS attempt;
             ALTER TABLE receipts DROP COLUMN IF EXISTS attempt;
             DROP FUNCTION loopx_append;
             {function}
             UPDATE schema_version SET version = 4;"
        ))
        .await
        .unwrap();
}

/// Turns the database behind `client` back into what schema 3 wrote: every receipt a row of the
/// receipts table, numbered in commit order; no receipt columns on event rows; schema 3's commit
/// function; version 3.
async fn rewrite_as_schema_3(client: &tokio_postgres::Client) {
    rewrite_as_schema_4(client).await;
    let schema_3 = include_str!("../migrations/postgres/0003_compact_receipts.sql");
    let function = &schema_3[schema_3.find("CREATE FUNCTION").unwrap()..];
    client
        .batch_execute(&format!(
            "CREATE TEMPORARY TABLE every_receipt AS
                 SELECT goal, operation, digest, revision, events, committed_at, actor, kinds,
                        row_number() OVER (ORDER BY goal, revision, events = 0, seq) AS n
                 FROM commits;
             DELETE FROM receipts;
             INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
                 SELECT goal, operation, digest, revision, events, committed_at, actor, kinds
                 FROM every_receipt ORDER BY n;
             DROP TABLE every_receipt;
             DROP VIEW commits;
             DROP INDEX events_by_operation;
             ALTER TABLE events DROP COLUMN operation, DROP COLUMN digest, DROP COLUMN commit_events;
             DROP FUNCTION loopx_append;
             {function}
             UPDATE schema_version SET version = 3;"
        ))
        .await
        .unwrap();
}

/// The digests of the receipts, as text, in commit order.
async fn stored_digests(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query(
            "SELECT digest::TEXT FROM receipts ORDER BY revision, seq",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A recorded no-op at revision 4 of the test goal (`base`, its state there), with operation
/// `odd-{i}` and `digest`.
fn no_op(base: Option<&loopx_kernel::GoalState>, i: usize, digest: &str) -> Commit {
    let request = AppendRequest {
        goal: goal_id(),
        expected_revision: 4,
        operation: OperationId::new(format!("odd-{i}")).unwrap(),
        digest: digest.to_owned(),
        at: now(),
        events: vec![],
        authorship: None,
        clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
    };
    Commit::fold(base.cloned(), request).unwrap()
}

/// Adds todo `id` with operation `operation` through `submit`.
async fn add_todo(store: &PostgresStore, id: &str, operation: &str) -> loopx_kernel::Submitted {
    let todo = NewTodo::advance(TodoId::new(id).unwrap(), "work");
    submit(
        store,
        &goal_id(),
        &owner(),
        now(),
        &Command::AddTodo { todo },
        &OperationId::new(operation).unwrap(),
    )
    .await
    .unwrap()
}

#[test]
fn a_database_written_by_schema_2_migrates_and_reads_as_before() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        let store = PostgresStore::connect(&url).await.unwrap();
        create_goal(&store).await;
        for i in 0..3 {
            add_todo(&store, &format!("t{i}"), &format!("add-{i}")).await;
        }
        // Recorded no-ops with digests that are not SHA-256: short text, text of 32 bytes (the
        // size of a binary digest), and hex in capitals.
        let odd = [
            "short",
            "abcdefghijklmnopqrstuvwxyz012345",
            "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789",
        ];
        let state = store.load(&goal_id()).await.unwrap();
        for (i, text) in odd.iter().enumerate() {
            store.append(no_op(state.as_ref(), i, text)).await.unwrap();
        }
        let events = store.events(&goal_id(), 0, usize::MAX).await.unwrap();
        let operations = store.operations(&goal_id(), 0, usize::MAX).await.unwrap();
        // The old schema kept no command with its receipts: they read back without one.
        let operations: Vec<_> = operations
            .into_iter()
            .map(|mut o| {
                o.authorship = None;
                o
            })
            .collect();
        drop(store);

        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        rewrite_as_schema_2(&client).await;
        let old_digests = stored_digests(&client).await;
        assert!(old_digests.iter().any(|d| d == odd[1]), "{old_digests:?}");

        // A fresh handle migrates; everything reads as it did.
        let store = migrated_and_unchanged(&url, state.as_ref(), &events, &operations).await;
        // SHA-256 digests are stored as their 32 bytes now.
        let sizes: Vec<i32> = client
            .query(
                "SELECT octet_length(digest) FROM receipts ORDER BY revision, seq",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(sizes[..4], [32, 32, 32, 32]);
        assert_eq!(sizes[4..], [5, 33, 64]);

        // Operations committed before the upgrade stay idempotent, with the same digest, and
        // conflict with another.
        for (i, text) in odd.iter().enumerate() {
            let first = operations[4 + i].receipt.clone();
            assert_eq!(
                store.append(no_op(state.as_ref(), i, text)).await,
                Ok(Appended::Replayed(first))
            );
            assert!(matches!(
                store.append(no_op(state.as_ref(), i, "another")).await,
                Err(StoreError::OperationConflict { .. })
            ));
        }
        let again = add_todo(&store, "t0", "add-0").await;
        assert!(again.replayed);
        assert_eq!(again.receipt, operations[1].receipt);

        // New commits land after the old rows, their receipts on their last event row.
        let done = add_todo(&store, "after", "after-upgrade").await;
        assert_eq!(done.receipt.revision, 5);
        let where_kept: (i64, i64) = {
            let row = client
                .query_one(
                    "SELECT (SELECT count(*) FROM receipts WHERE operation = 'after-upgrade'),
                            (SELECT count(*) FROM events WHERE operation = 'after-upgrade'
                                AND revision = 5 AND commit_events = 1)",
                    &[],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1))
        };
        assert_eq!(where_kept, (0, 1));
        let fresh = PostgresStore::connect(&url).await.unwrap();
        assert_eq!(fresh.load(&goal_id()).await.unwrap(), Some(done.state));
        let now_recorded = fresh.operations(&goal_id(), 0, usize::MAX).await.unwrap();
        assert_eq!(now_recorded[..operations.len()], operations[..]);
        assert_eq!(now_recorded.len(), operations.len() + 1);
        assert_eq!(
            fresh
                .receipt(&goal_id(), &OperationId::new("after-upgrade").unwrap())
                .await,
            Ok(Some(done.receipt))
        );
    });
}

/// The JSON of every event row, in revision order.
async fn event_json(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query("SELECT json FROM events ORDER BY revision", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn a_database_written_by_schema_1_migrates_and_reads_as_before() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        let store = PostgresStore::connect_with(
            &url,
            PostgresOptions::default().snapshot_every(4),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        create_goal(&store).await;
        for i in 0..9 {
            let todo = NewTodo::advance(TodoId::new(format!("t{i}")).unwrap(), "work");
            submit(
                &store,
                &goal_id(),
                &owner(),
                now(),
                &Command::AddTodo { todo },
                &OperationId::new(format!("add-{i}")).unwrap(),
            )
            .await
            .unwrap();
        }
        let state = store.load(&goal_id()).await.unwrap();
        let events = store.events(&goal_id(), 0, usize::MAX).await.unwrap();
        let operations = store.operations(&goal_id(), 0, usize::MAX).await.unwrap();
        // The old schema kept no command with its receipts: they read back without one.
        let operations: Vec<_> = operations
            .into_iter()
            .map(|mut o| {
                o.authorship = None;
                o
            })
            .collect();
        drop(store);

        let client = rewrite_as_schema_1(&url, &events).await;
        let old_rows = event_json(&client).await;
        assert!(old_rows[0].contains("\"revision\":1"));

        // A fresh handle migrates and reads the old rows as they were.
        let store = migrated_and_unchanged(&url, state.as_ref(), &events, &operations).await;

        // New commits go through the new path; the old rows stay as they were.
        let todo = NewTodo::advance(TodoId::new("after").unwrap(), "after the upgrade");
        let done = submit(
            &store,
            &goal_id(),
            &owner(),
            now(),
            &Command::AddTodo { todo },
            &OperationId::new("after-upgrade").unwrap(),
        )
        .await
        .unwrap();
        let now_rows = event_json(&client).await;
        assert_eq!(now_rows[..old_rows.len()], old_rows[..]);
        let newest = now_rows.last().unwrap();
        assert!(!newest.contains("\"revision\"") && !newest.contains("\"at\""));
        let fresh = PostgresStore::connect(&url).await.unwrap();
        let replayed = loopx_kernel::GoalState::replay(
            &fresh.events(&goal_id(), 0, usize::MAX).await.unwrap(),
        )
        .unwrap();
        assert_eq!(replayed, done.state);
        assert_eq!(fresh.load(&goal_id()).await.unwrap(), Some(done.state));
    });
}

#[test]
fn a_retry_from_a_handle_that_missed_the_commit_returns_the_first_receipt_and_caches_nothing_new() {
    let url = cluster().database();
    let rt = runtime();
    rt.block_on(async {
        let stale = PostgresStore::connect(&url).await.unwrap();
        let other = PostgresStore::connect(&url).await.unwrap();
        create_goal(&stale).await;
        // `stale` caches the goal at revision 1; `other` commits the operation meanwhile.
        let at_one = stale.load(&goal_id()).await.unwrap().unwrap();
        let command = Command::AddTodo {
            todo: NewTodo::advance(TodoId::new("t1").unwrap(), "one"),
        };
        let operation = OperationId::new("add-t1").unwrap();
        let first = submit(&other, &goal_id(), &owner(), now(), &command, &operation)
            .await
            .unwrap();
        // The same operation and payload from `stale`, stamped at another time: its folded
        // batch differs from the history, so it must neither commit nor be cached.
        let later = now().plus(loopx_kernel::Duration::seconds(60));
        let events = loopx_kernel::execute(Some(&at_one), &owner(), later, &command).unwrap();
        let request = AppendRequest {
            goal: goal_id(),
            expected_revision: 1,
            operation: operation.clone(),
            digest: digest(&owner(), &command),
            at: later,
            events: stamp(1, &owner(), later, events),
            authorship: None,
            clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
        };
        let commit = Commit::fold(Some(at_one), request).unwrap();
        assert_eq!(
            stale.append(commit).await,
            Ok(Appended::Replayed(first.receipt.clone()))
        );
        assert_eq!(stale.load(&goal_id()).await.unwrap(), Some(first.state));
    });
}

/// Opens `url` with a fresh handle (which migrates it to the current schema) and checks that the
/// goal, its events and its operations read exactly as before the upgrade.
async fn migrated_and_unchanged(
    url: &str,
    state: Option<&loopx_kernel::GoalState>,
    events: &[loopx_kernel::RecordedEvent],
    operations: &[loopx_store::OperationRecord],
) -> PostgresStore {
    let store = PostgresStore::connect(url).await.unwrap();
    assert_eq!(
        version(url).await,
        i32::try_from(POSTGRES_SCHEMA_VERSION).unwrap()
    );
    assert_eq!(store.load(&goal_id()).await.unwrap().as_ref(), state);
    assert_eq!(
        store.events(&goal_id(), 0, usize::MAX).await.unwrap(),
        events
    );
    assert_eq!(
        store.operations(&goal_id(), 0, usize::MAX).await.unwrap(),
        operations
    );
    store
}
