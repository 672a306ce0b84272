//! The PostgreSQL backend against a real server: bad input (an unreachable server, a newer
//! schema, another program's database) as typed errors with nothing modified and no password
//! in any message, and a connection lost after `COMMIT` was sent reported as ambiguous and
//! resolved by `submit` from the receipt; a database written by schema 1 migrating and reading
//! as before; a retry from a handle whose cache missed the first commit.
#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use loopx_kernel::seams::{AppendRequest, Store, StoreError};
use loopx_kernel::{Command, NewTodo, OperationId, TodoId, stamp};
use loopx_store::{
    POSTGRES_SCHEMA_VERSION, PostgresOptions, PostgresStore, Retention, digest, submit,
};
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
    let options = PostgresOptions::default().connect_timeout(StdDuration::from_secs(2));
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

/// A TCP proxy in front of the server that, once armed, forwards the next `COMMIT` a client
/// sends and then drops that connection without passing the server's answer back: the commit
/// happens, the client never learns it.
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
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buffer[..n];
            let commit = chunk.windows(6).any(|w| w == b"COMMIT");
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
        };
        proxy.armed.store(true, Ordering::SeqCst);
        let result = store.append(request).await;
        assert!(
            proxy.fired.load(Ordering::SeqCst),
            "the proxy never cut a commit"
        );
        assert_eq!(
            result,
            Err(StoreError::Ambiguous {
                operation: operation.clone()
            })
        );
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
        drop(store);

        let client = rewrite_as_schema_1(&url, &events).await;
        let old_rows = event_json(&client).await;
        assert!(old_rows[0].contains("\"revision\":1"));

        // A fresh handle migrates and reads the old rows as they were.
        let store = PostgresStore::connect(&url).await.unwrap();
        assert_eq!(
            version(&url).await,
            i32::try_from(POSTGRES_SCHEMA_VERSION).unwrap()
        );
        assert_eq!(store.load(&goal_id()).await.unwrap(), state);
        assert_eq!(
            store.events(&goal_id(), 0, usize::MAX).await.unwrap(),
            events
        );
        assert_eq!(
            store.operations(&goal_id(), 0, usize::MAX).await.unwrap(),
            operations
        );

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
        };
        assert_eq!(stale.append(request).await, Ok(first.receipt.clone()));
        assert_eq!(stale.load(&goal_id()).await.unwrap(), Some(first.state));
    });
}
