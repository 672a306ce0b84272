//! The conformance suite, run against every backend of this crate.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use loopx_store::conformance::{Backend, Tamper};
use loopx_store::{
    Durability, MemoryStore, RetentionPolicy, SqliteOptions, SqliteStore, StoreClock,
};

mod memory {
    use super::*;

    struct Memory;

    #[async_trait]
    impl Backend for Memory {
        type Store = MemoryStore;

        async fn fresh(&self) -> MemoryStore {
            MemoryStore::new()
        }

        async fn fresh_on_test_clock(&self) -> MemoryStore {
            MemoryStore::with_test_clock()
        }

        async fn fresh_retaining(&self, policy: RetentionPolicy) -> MemoryStore {
            MemoryStore::new().with_retention(policy)
        }

        async fn reopen(&self, store: MemoryStore) -> MemoryStore {
            store
        }
    }

    loopx_store::conformance_suite!(Memory);
}

/// Each fresh store is a new file in a temporary directory that lives as long as the backend.
struct Sqlite {
    dir: tempfile::TempDir,
    next: AtomicU32,
    options: SqliteOptions,
}

impl Sqlite {
    fn new(options: SqliteOptions) -> Self {
        Sqlite {
            dir: tempfile::tempdir().unwrap(),
            next: AtomicU32::new(0),
            options,
        }
    }
}

#[async_trait]
impl Backend for Sqlite {
    type Store = SqliteStore;

    async fn fresh(&self) -> SqliteStore {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("store-{n}.db"));
        SqliteStore::create_with(path, self.options.clone()).unwrap()
    }

    async fn fresh_on_test_clock(&self) -> SqliteStore {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("store-{n}.db"));
        let options = self.options.clone().clock(StoreClock::Test);
        SqliteStore::create_with(path, options).unwrap()
    }

    async fn fresh_retaining(&self, policy: RetentionPolicy) -> SqliteStore {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("store-{n}.db"));
        SqliteStore::create_with(path, self.options.clone().retention(policy)).unwrap()
    }

    async fn reopen(&self, store: SqliteStore) -> SqliteStore {
        let path: PathBuf = store.path().to_owned();
        drop(store);
        SqliteStore::open_with(path, self.options.clone()).unwrap()
    }

    async fn second(&self, store: &SqliteStore) -> Option<SqliteStore> {
        Some(SqliteStore::open_with(store.path(), self.options.clone()).unwrap())
    }
}

/// Plain SQL on the store's file over a connection of its own. Without marks, the damage
/// triggers are dropped for the statements and created again afterwards, in one transaction.
#[async_trait]
impl Tamper for Sqlite {
    async fn tamper(&self, store: &SqliteStore, sql: &str, marks: bool) {
        let conn = rusqlite::Connection::open(store.path()).unwrap();
        if marks {
            conn.execute_batch(sql).unwrap();
            return;
        }
        let triggers: Vec<(String, String)> = conn
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(!triggers.is_empty(), "the schema has damage triggers");
        let mut batch = String::from("BEGIN;");
        for (name, _) in &triggers {
            batch.push_str(" DROP TRIGGER ");
            batch.push_str(name);
            batch.push(';');
        }
        batch.push(' ');
        batch.push_str(sql);
        batch.push(';');
        for (_, create) in &triggers {
            batch.push(' ');
            batch.push_str(create);
            batch.push(';');
        }
        batch.push_str(" COMMIT;");
        conn.execute_batch(&batch).unwrap();
    }
}

/// Snapshots every 16 events and two connections per handle, so the suite goes through
/// snapshot loads and connection waits.
mod sqlite {
    use super::*;

    loopx_store::conformance_suite!(Sqlite::new(
        SqliteOptions::default()
            .snapshot_every(16)
            .max_connections(2)
    ));
    loopx_store::damage_suite!(Sqlite::new(
        SqliteOptions::default()
            .snapshot_every(16)
            .max_connections(2)
    ));
}

/// `synchronous=NORMAL`, a snapshot at every commit and a single connection.
mod sqlite_normal {
    use super::*;

    loopx_store::conformance_suite!(Sqlite::new(
        SqliteOptions::default()
            .durability(Durability::Normal)
            .snapshot_every(1)
            .max_connections(1)
    ));
    loopx_store::damage_suite!(Sqlite::new(
        SqliteOptions::default()
            .durability(Durability::Normal)
            .snapshot_every(1)
            .max_connections(1)
    ));
}

#[cfg(feature = "postgres")]
mod support;

/// Each fresh store is a new database on the binary's one PostgreSQL cluster; `second` is
/// another pool on the same database, as another host would have.
#[cfg(feature = "postgres")]
mod postgres {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use loopx_store::{PostgresOptions, PostgresStore};

    use super::*;
    use crate::support::postgres::cluster;

    struct Postgres {
        options: PostgresOptions,
        /// Database URLs by store target.
        urls: Mutex<HashMap<String, String>>,
    }

    impl Postgres {
        fn new(options: PostgresOptions) -> Self {
            Postgres {
                options,
                urls: Mutex::new(HashMap::new()),
            }
        }

        fn url(&self, store: &PostgresStore) -> String {
            self.urls.lock().unwrap()[store.target()].clone()
        }
    }

    #[async_trait]
    impl Backend for Postgres {
        type Store = PostgresStore;

        async fn fresh(&self) -> PostgresStore {
            let url = cluster().database();
            let store =
                PostgresStore::connect_with(&url, self.options.clone(), tokio_postgres::NoTls)
                    .await
                    .unwrap();
            self.urls
                .lock()
                .unwrap()
                .insert(store.target().to_owned(), url);
            store
        }

        async fn fresh_on_test_clock(&self) -> PostgresStore {
            let url = cluster().database();
            let options = self.options.clone().clock(StoreClock::Test);
            let store = PostgresStore::connect_with(&url, options, tokio_postgres::NoTls)
                .await
                .unwrap();
            assert_eq!(store.clock(), StoreClock::Test);
            self.urls
                .lock()
                .unwrap()
                .insert(store.target().to_owned(), url);
            store
        }

        async fn fresh_retaining(&self, policy: RetentionPolicy) -> PostgresStore {
            let url = cluster().database();
            let options = self.options.clone().retention(policy);
            let store = PostgresStore::connect_with(&url, options, tokio_postgres::NoTls)
                .await
                .unwrap();
            self.urls
                .lock()
                .unwrap()
                .insert(store.target().to_owned(), url);
            store
        }

        async fn reopen(&self, store: PostgresStore) -> PostgresStore {
            let url = self.url(&store);
            drop(store);
            PostgresStore::connect_with(&url, self.options.clone(), tokio_postgres::NoTls)
                .await
                .unwrap()
        }

        async fn second(&self, store: &PostgresStore) -> Option<PostgresStore> {
            let url = self.url(store);
            Some(
                PostgresStore::connect_with(&url, self.options.clone(), tokio_postgres::NoTls)
                    .await
                    .unwrap(),
            )
        }
    }

    /// Plain SQL on the store's database over a client of its own. Without marks, the
    /// triggers on the event log and the archive are disabled for the statements, in one
    /// transaction.
    #[async_trait]
    impl Tamper for Postgres {
        async fn tamper(&self, store: &PostgresStore, sql: &str, marks: bool) {
            let url = self.url(store);
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            let driver = tokio::spawn(connection);
            let batch = if marks {
                sql.to_owned()
            } else {
                format!(
                    "BEGIN; ALTER TABLE events DISABLE TRIGGER USER; ALTER TABLE archived_events DISABLE TRIGGER USER; {sql}; ALTER TABLE events ENABLE TRIGGER USER; ALTER TABLE archived_events ENABLE TRIGGER USER; COMMIT;"
                )
            };
            client.batch_execute(&batch).await.unwrap();
            drop(client);
            driver.await.unwrap().unwrap();
        }
    }

    /// Snapshots every 16 events and two pooled connections, so the suite goes through
    /// snapshot loads and connection waits.
    mod postgres_pool2 {
        use super::*;

        loopx_store::conformance_suite!(Postgres::new(
            PostgresOptions::default()
                .snapshot_every(16)
                .max_connections(2)
        ));
        loopx_store::damage_suite!(Postgres::new(
            PostgresOptions::default()
                .snapshot_every(16)
                .max_connections(2)
        ));
    }
}
