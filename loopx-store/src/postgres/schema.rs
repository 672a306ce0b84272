//! Reaching the server, the forward migrations, and PostgreSQL errors as store errors.

use loopx_kernel::seams::StoreError;
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;

use crate::clock::StoreClock;
use crate::dialect::TABLES;

/// The newest database schema this build reads and writes.
pub const SCHEMA_VERSION: u32 = 11;

/// The migrations, in order: migration `n` takes the schema from `n - 1` to `n`.
const MIGRATIONS: &[(u32, &str)] = &[
    (
        1,
        include_str!("../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        include_str!("../../migrations/postgres/0002_append_function.sql"),
    ),
    (
        3,
        include_str!("../../migrations/postgres/0003_compact_receipts.sql"),
    ),
    (
        4,
        include_str!("../../migrations/postgres/0004_receipts_on_events.sql"),
    ),
    (
        5,
        include_str!("../../migrations/postgres/0005_history_integrity.sql"),
    ),
    (
        6,
        include_str!("../../migrations/postgres/0006_store_settings.sql"),
    ),
    (
        7,
        include_str!("../../migrations/postgres/0007_authorship.sql"),
    ),
    (
        8,
        include_str!("../../migrations/postgres/0008_goal_subjects.sql"),
    ),
    (
        9,
        include_str!("../../migrations/postgres/0009_archive.sql"),
    ),
    (
        10,
        include_str!("../../migrations/postgres/0010_receipt_digests.sql"),
    ),
    (
        11,
        include_str!("../../migrations/postgres/0011_dead_letters.sql"),
    ),
];

/// The advisory lock key that serializes migrations of one database across hosts
/// (`loopx` in ASCII).
const MIGRATION_LOCK: i64 = 0x006c_6f6f_7078;

/// Where a configuration points, for messages: host, port, database and user, never the
/// password.
pub(super) fn describe(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "the default host".to_owned()
    } else {
        hosts.join(",")
    };
    format!(
        "database `{}` on {hosts} as `{}`",
        config.get_dbname().unwrap_or("(default)"),
        config.get_user().unwrap_or("(default)")
    )
}

/// A PostgreSQL error as a store error. Damage reported by the server is
/// [`StoreError::Corrupt`]; everything else (a lost connection, a server shutting down, an
/// exhausted resource, a refused login) is [`StoreError::Unavailable`], naming `target`.
pub(super) fn pg(target: &str, error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(db)
            if *db.code() == SqlState::DATA_CORRUPTED
                || *db.code() == SqlState::INDEX_CORRUPTED =>
        {
            StoreError::Corrupt {
                detail: format!(
                    "PostgreSQL reports damage in {target} ({}); restore the database from a backup",
                    db.message()
                ),
            }
        }
        Some(db) => StoreError::Unavailable {
            detail: format!(
                "PostgreSQL ({target}) failed: {} (SQLSTATE {})",
                db.message(),
                db.code().code()
            ),
        },
        None if error.is_closed() => StoreError::Unavailable {
            detail: format!(
                "the connection to PostgreSQL ({target}) was lost ({error}); retry once the server is back"
            ),
        },
        None => StoreError::Unavailable {
            detail: format!(
                "cannot talk to PostgreSQL ({target}): {}",
                with_causes(error)
            ),
        },
    }
}

/// An error with the causes it wraps (a TLS handshake's reason, say), which its own message
/// leaves out.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// True for a unique-key violation: another writer inserted the same goal or operation first.
pub(super) fn is_unique_violation(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// A value read from a row that has the wrong type.
pub(super) fn column(error: &tokio_postgres::Error) -> StoreError {
    StoreError::Corrupt {
        detail: format!(
            "a stored value has the wrong type ({error}); the schema was changed outside loopx: restore the database from a backup"
        ),
    }
}

/// Brings the database to [`SCHEMA_VERSION`] in one transaction, under an advisory lock so
/// that hosts starting together migrate once. A newer or foreign schema is refused before
/// anything is written. A database this call creates the schema in (none before) is created
/// with `clock`; an existing one keeps the clock it was created with. Returns the clock the
/// store runs on.
pub(super) async fn migrate(
    client: &mut deadpool_postgres::Object,
    target: &str,
    clock: StoreClock,
) -> Result<StoreClock, StoreError> {
    let err = |error: tokio_postgres::Error| pg(target, &error);
    let tx = client.transaction().await.map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(err)?;
    let found = read_version(&tx, target).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        let clock = read_clock(&tx, target).await?;
        tx.rollback().await.map_err(err)?;
        return Ok(clock);
    }
    for (version, script) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.batch_execute(script)
            .await
            .map_err(|error| StoreError::Unavailable {
                detail: format!(
                    "migration {version} of {target} failed ({}); nothing was changed",
                    pg(target, &error)
                ),
            })?;
        tx.execute("DELETE FROM schema_version", &[])
            .await
            .map_err(err)?;
        let version = i32::try_from(*version).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(err)?;
    }
    if found == 0 && clock == StoreClock::Test {
        tx.execute(
            "INSERT INTO store_settings (name, value) VALUES ('clock', $1)",
            &[&StoreClock::Test.name()],
        )
        .await
        .map_err(err)?;
    }
    let clock = read_clock(&tx, target).await?;
    tx.commit().await.map_err(err)?;
    Ok(clock)
}

/// The clock the store was created with (its `clock` setting; none is the server's clock).
async fn read_clock(
    tx: &deadpool_postgres::Transaction<'_>,
    target: &str,
) -> Result<StoreClock, StoreError> {
    let row = tx
        .query_opt("SELECT value FROM store_settings WHERE name = 'clock'", &[])
        .await
        .map_err(|error| pg(target, &error))?;
    let value: Option<String> = row
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(|e| column(&e))?;
    match value.as_deref() {
        None | Some("system") => Ok(StoreClock::System),
        Some("test") => Ok(StoreClock::Test),
        Some(other) => Err(StoreError::Corrupt {
            detail: format!(
                "the clock setting of {target} holds `{}`, which no loopx writes; restore the database from a backup",
                other.chars().take(32).collect::<String>()
            ),
        }),
    }
}

/// The schema version recorded in the database's current schema: 0 for an empty one.
async fn read_version(
    tx: &deadpool_postgres::Transaction<'_>,
    target: &str,
) -> Result<u32, StoreError> {
    let err = |error: tokio_postgres::Error| pg(target, &error);
    let row = tx
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .await
        .map_err(err)?;
    let has_version: bool = row.try_get(0).map_err(|e| column(&e))?;
    if !has_version {
        // The tables schema 1 creates, to tell an empty database from another program's.
        let tables: Vec<String> = TABLES.iter().map(|t| (*t).to_owned()).collect();
        let foreign = tx
            .query_opt(
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relname = ANY($1::text[]) LIMIT 1",
                &[&tables],
            )
            .await
            .map_err(err)?;
        return match foreign {
            None => Ok(0),
            Some(row) => {
                let name: String = row.try_get(0).map_err(|e| column(&e))?;
                Err(StoreError::Corrupt {
                    detail: format!(
                        "{target} is not a loopx store (its schema holds `{name}` but no schema_version table); nothing was changed: use a database (or a schema, with `options=-csearch_path=...`) of its own"
                    ),
                })
            }
        };
    }
    let rows = tx
        .query("SELECT version FROM schema_version", &[])
        .await
        .map_err(err)?;
    match rows.as_slice() {
        [row] => {
            let version: i32 = row.try_get(0).map_err(|e| column(&e))?;
            u32::try_from(version).map_err(|_| StoreError::Corrupt {
                detail: format!("the schema_version row holds {version}, which no loopx writes"),
            })
        }
        rows => Err(StoreError::Corrupt {
            detail: format!(
                "the schema_version table of {target} holds {} rows instead of one; restore the database from a backup",
                rows.len()
            ),
        }),
    }
}
