//! Opening a database file safely: the file checks that run before SQLite touches it, the
//! connection settings, and the forward migrations.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::Path;

use loopx_kernel::seams::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use super::{Durability, SqliteOptions};

/// The newest database schema this build reads and writes.
pub const SCHEMA_VERSION: u32 = 5;

/// The migrations, in order: migration `n` takes the schema from `n - 1` to `n`.
const MIGRATIONS: &[(u32, &str)] = &[
    (1, include_str!("../../migrations/sqlite/0001_initial.sql")),
    (
        2,
        include_str!("../../migrations/sqlite/0002_compact_events.sql"),
    ),
    (
        3,
        include_str!("../../migrations/sqlite/0003_receipts_on_events.sql"),
    ),
    (
        4,
        include_str!("../../migrations/sqlite/0004_frontier_by_goal.sql"),
    ),
    (
        5,
        include_str!("../../migrations/sqlite/0005_receipt_attempts.sql"),
    ),
];

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Creates the file with owner-only permissions when it does not exist; otherwise checks,
/// without writing, that it looks like a complete SQLite database.
pub(super) fn prepare_file(path: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(StoreError::Unavailable {
            detail: format!(
                "`{}` is a directory; give the path of a database file",
                path.display()
            ),
        }),
        Ok(meta) if meta.len() == 0 => Ok(()),
        Ok(meta) => check_header(path, meta.len()),
        Err(error) if error.kind() == ErrorKind::NotFound => create(path),
        Err(error) => Err(StoreError::Unavailable {
            detail: format!("cannot read `{}`: {error}", path.display()),
        }),
    }
}

fn create(path: &Path) -> Result<(), StoreError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        // Another process created it first; it creates it the same way.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(StoreError::Unavailable {
            detail: format!(
                "cannot create the database `{}`: {error}; check that its directory exists and is writable",
                path.display()
            ),
        }),
    }
}

fn check_header(path: &Path, len: u64) -> Result<(), StoreError> {
    let corrupt = |problem: String| StoreError::Corrupt {
        detail: format!(
            "`{}` {problem}; nothing was changed: restore it from a backup or open another path",
            path.display()
        ),
    };
    let mut header = [0_u8; 100];
    let mut file = File::open(path).map_err(|error| StoreError::Unavailable {
        detail: format!("cannot read `{}`: {error}", path.display()),
    })?;
    if len < 100 || file.read_exact(&mut header).is_err() {
        return Err(corrupt(format!(
            "is not a SQLite database: it holds only {len} bytes"
        )));
    }
    if &header[..16] != MAGIC {
        return Err(corrupt(
            "is not a SQLite database (its header is not SQLite's)".into(),
        ));
    }
    let page_size = match u32::from(u16::from_be_bytes([header[16], header[17]])) {
        1 => 65_536,
        size => size,
    };
    if !page_size.is_power_of_two() || !(512..=65_536).contains(&page_size) {
        return Err(corrupt(format!(
            "has a damaged header (page size {page_size})"
        )));
    }
    let pages = u32::from_be_bytes([header[28], header[29], header[30], header[31]]);
    let counter = &header[24..28];
    let valid_for = &header[92..96];
    // The page count in the header is authoritative only when its change counter matches,
    // and only while no write-ahead log holds pages the main file does not have yet.
    let wal_pending = std::fs::metadata(wal_path(path)).is_ok_and(|m| m.len() > 0);
    let expected = u64::from(page_size) * u64::from(pages);
    if counter == valid_for && !wal_pending && pages > 0 && len < expected {
        return Err(corrupt(format!(
            "is truncated: its header counts {pages} pages of {page_size} bytes ({expected} bytes) but it holds {len}"
        )));
    }
    Ok(())
}

fn wal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// Opens one connection with the store's settings. Nothing is written.
pub(super) fn connect(path: &Path, options: &SqliteOptions) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(path, flags).map_err(|error| StoreError::Unavailable {
            detail: format!("cannot open `{}`: {error}", path.display()),
        })?;
    conn.busy_timeout(options.busy_timeout).map_err(sql)?;
    let synchronous = match options.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)
        .map_err(sql)?;
    Ok(conn)
}

/// Brings the database to [`SCHEMA_VERSION`]: refuses a newer or foreign one before writing
/// anything, switches to WAL, then applies the missing migrations in one transaction.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let found = {
        let tx = conn.transaction().map_err(sql)?;
        let found = read_version(&tx)?;
        tx.finish().map_err(sql)?;
        found
    };
    if found > SCHEMA_VERSION {
        return Err(newer(found));
    }
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Unavailable {
            detail: format!(
                "the database cannot use write-ahead logging (journal mode `{mode}`); put it on a local file system"
            ),
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let current = read_version(&tx)?;
    if current > SCHEMA_VERSION {
        return Err(newer(current));
    }
    for (version, script) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.execute_batch(script)
            .map_err(|error| StoreError::Unavailable {
                detail: format!("migration {version} failed ({error}); nothing was changed"),
            })?;
        tx.execute("DELETE FROM schema_version", []).map_err(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            [version],
        )
        .map_err(sql)?;
    }
    tx.commit().map_err(sql)
}

fn newer(found: u32) -> StoreError {
    StoreError::NewerSchema {
        found,
        supported: SCHEMA_VERSION,
    }
}

/// The schema version recorded in the database: 0 for an empty database.
fn read_version(conn: &Connection) -> Result<u32, StoreError> {
    let has_version: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version')",
            [],
            |row| row.get(0),
        )
        .map_err(sql)?;
    if !has_version {
        let foreign: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(sql)?;
        return match foreign {
            None => Ok(0),
            Some(name) => Err(StoreError::Corrupt {
                detail: format!(
                    "this SQLite database is not a loopx store (it holds `{name}` but no schema_version table); nothing was changed: open another path"
                ),
            }),
        };
    }
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM schema_version")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get(0))?
                .collect::<Result<Vec<i64>, _>>()
        })
        .map_err(sql)?;
    match versions.as_slice() {
        [version] => u32::try_from(*version).map_err(|_| StoreError::Corrupt {
            detail: format!("the schema_version row holds {version}, which no loopx writes"),
        }),
        rows => Err(StoreError::Corrupt {
            detail: format!(
                "the schema_version table holds {} rows instead of one; restore the store from a backup",
                rows.len()
            ),
        }),
    }
}

/// A SQLite error as a store error: damage is [`StoreError::Corrupt`], everything else (locks
/// held past the busy timeout, I/O, a full disk, permissions) [`StoreError::Unavailable`].
#[allow(
    clippy::needless_pass_by_value,
    reason = "written for `map_err(sql)`, which hands the error over"
)]
pub(super) fn sql(error: rusqlite::Error) -> StoreError {
    match &error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => StoreError::Corrupt {
                detail: format!("SQLite reports damage ({error}); restore the store from a backup"),
            },
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::Unavailable {
                detail: format!(
                    "the database stayed locked by another writer past the busy timeout ({error}); retry, or raise the busy timeout"
                ),
            },
            ErrorCode::DiskFull => StoreError::Unavailable {
                detail: format!("the disk is full ({error}); free space and retry"),
            },
            _ => StoreError::Unavailable {
                detail: format!("SQLite failed: {error}"),
            },
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => StoreError::Corrupt {
            detail: format!(
                "a stored value has the wrong type ({error}); restore the store from a backup"
            ),
        },
        _ => StoreError::Unavailable {
            detail: format!("SQLite failed: {error}"),
        },
    }
}
