//! Opening a database file safely: the file checks that run before SQLite touches it, the
//! connection settings, and the forward migrations.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use loopx_kernel::GoalId;
use loopx_kernel::seams::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use super::{Durability, SqliteOptions, wal};
use crate::clock::StoreClock;

/// The newest database schema this build reads and writes.
pub const SCHEMA_VERSION: u32 = 11;

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
        include_str!("../../migrations/sqlite/0005_history_integrity.sql"),
    ),
    (
        6,
        include_str!("../../migrations/sqlite/0006_store_settings.sql"),
    ),
    (
        7,
        include_str!("../../migrations/sqlite/0007_authorship.sql"),
    ),
    (
        8,
        include_str!("../../migrations/sqlite/0008_goal_subjects.sql"),
    ),
    (9, include_str!("../../migrations/sqlite/0009_archive.sql")),
    (
        10,
        include_str!("../../migrations/sqlite/0010_receipt_digests.sql"),
    ),
    (
        11,
        include_str!("../../migrations/sqlite/0011_dead_letters.sql"),
    ),
];

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Checks, without writing, that `path` holds a complete SQLite database and that its
/// write-ahead log holds no damage SQLite would drop commits over. Nothing is created: a
/// missing file is [`StoreError::Unavailable`], an empty one [`StoreError::Corrupt`].
pub(super) fn check_file(path: &Path, options: &SqliteOptions) -> Result<(), StoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Err(StoreError::Unavailable {
                detail: format!(
                    "no store at `{}`; create one first (`SqliteStore::create`, `loopx init`)",
                    path.display()
                ),
            });
        }
        Err(error) => {
            return Err(StoreError::Unavailable {
                detail: format!("cannot read `{}`: {error}", path.display()),
            });
        }
    };
    if meta.is_dir() {
        return Err(StoreError::Unavailable {
            detail: format!(
                "`{}` is a directory; give the path of a database file",
                path.display()
            ),
        });
    }
    if meta.len() == 0 {
        return Err(StoreError::Corrupt {
            detail: format!(
                "`{}` is empty (0 bytes), not a loopx store; nothing was changed: restore it from a backup, or remove it and create the store again",
                path.display()
            ),
        });
    }
    let page_size = check_header(path, meta.len())?;
    check_log(path, page_size, options)
}

/// Refuses a log with damage before committed frames, or (when the options accept the loss)
/// keeps a copy of it next to the database before SQLite's recovery drops those frames.
fn check_log(path: &Path, page_size: u32, options: &SqliteOptions) -> Result<(), StoreError> {
    let Some(damage) = wal::settled_scan(path, page_size)? else {
        return Ok(());
    };
    if !options.accept_wal_loss {
        return Err(StoreError::Corrupt {
            detail: format!(
                "{damage}; nothing was changed: restore the store from a backup, or open it accepting the loss (`SqliteOptions::accept_wal_loss`), which first keeps a copy of the log"
            ),
        });
    }
    keep_copy(&damage.log).map(|_| ())
}

/// Copies the log to the first free `<log>.damaged`, `<log>.damaged.1`, …; the copy's path.
fn keep_copy(log: &Path) -> Result<PathBuf, StoreError> {
    let failed = |error: std::io::Error| StoreError::Unavailable {
        detail: format!(
            "cannot keep a copy of the damaged log `{}` ({error}); nothing was changed",
            log.display()
        ),
    };
    let mut source = File::open(log).map_err(failed)?;
    for n in 0..1000_u32 {
        let mut name = log.as_os_str().to_owned();
        name.push(".damaged");
        if n > 0 {
            name.push(format!(".{n}"));
        }
        let copy = PathBuf::from(name);
        match owner_only_new(&copy) {
            Ok(mut target) => {
                std::io::copy(&mut source, &mut target).map_err(failed)?;
                target.sync_all().map_err(failed)?;
                return Ok(copy);
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
            Err(error) => return Err(failed(error)),
        }
    }
    Err(failed(std::io::Error::other("too many earlier copies")))
}

/// Creates a new file readable and writable by its owner only; fails if the path exists.
fn owner_only_new(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Tells temporary files of this process's concurrent creators apart.
static CREATING: AtomicU64 = AtomicU64::new(0);

/// Deletes a half-built database and its companions unless it was handed over.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = self.0.as_os_str().to_owned();
            name.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(name));
        }
    }
}

/// Creates a store at `path` when nothing is there: the database is built and synced under a
/// temporary name in the same directory (owner-only, WAL, the current schema) and then linked
/// to `path`, which fails if the path was taken meanwhile. So `path` never names a half-built
/// store, and of several concurrent creators exactly one creates it. True when this call
/// created it; false when something already was (or appeared) at `path`.
pub(super) fn create(path: &Path, options: &SqliteOptions) -> Result<bool, StoreError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => {
            return Err(StoreError::Unavailable {
                detail: format!("cannot read `{}`: {error}", path.display()),
            });
        }
    }
    let cannot = |error: String| StoreError::Unavailable {
        detail: format!(
            "cannot create the database `{}`: {error}; check that its directory exists and is writable",
            path.display()
        ),
    };
    let Some(name) = path.file_name() else {
        return Err(cannot("the path names no file".into()));
    };
    let mut scratch_name = std::ffi::OsString::from(".");
    scratch_name.push(name);
    scratch_name.push(format!(
        ".{}-{}.creating",
        std::process::id(),
        CREATING.fetch_add(1, Ordering::Relaxed)
    ));
    let scratch = Scratch(path.with_file_name(scratch_name));
    owner_only_new(&scratch.0).map_err(|e| cannot(e.to_string()))?;
    let mut conn = connect(&scratch.0, options)?;
    migrate(&mut conn, true)?;
    if options.clock == StoreClock::Test {
        conn.execute(
            "INSERT INTO store_settings (name, value) VALUES ('clock', ?1)",
            [StoreClock::Test.name()],
        )
        .map_err(sql)?;
    }
    // Folds the log into the file so that the file alone is the store once linked.
    let (busy, log, done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .map_err(sql)?;
    if busy != 0 || log != done {
        return Err(cannot(format!(
            "the new database's log was not folded in ({done} of {log} frames)"
        )));
    }
    conn.close().map_err(|(_, error)| sql(error))?;
    File::open(&scratch.0)
        .and_then(|file| file.sync_all())
        .map_err(|e| cannot(e.to_string()))?;
    match std::fs::hard_link(&scratch.0, path) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(false),
        Err(error) => {
            return Err(cannot(format!(
                "{error} (the store is linked into place, which needs a file system with hard links)"
            )));
        }
    }
    // The new name must survive a crash as well; a directory that cannot be synced (not every
    // platform allows opening one) still holds the link.
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let _ = File::open(dir).and_then(|dir| dir.sync_all());
    }
    Ok(true)
}

/// Checks the 100-byte header; the database's page size.
pub(super) fn check_header(path: &Path, len: u64) -> Result<u32, StoreError> {
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
    let wal_pending = std::fs::metadata(wal::log_path(path)).is_ok_and(|m| m.len() > 0);
    let expected = u64::from(page_size) * u64::from(pages);
    if counter == valid_for && !wal_pending && pages > 0 && len < expected {
        return Err(corrupt(format!(
            "is truncated: its header counts {pages} pages of {page_size} bytes ({expected} bytes) but it holds {len}"
        )));
    }
    Ok(page_size)
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
/// anything, switches to WAL, then applies the missing migrations in one transaction. An empty
/// database (no schema at all) is given one only when `new` (the store is being created);
/// otherwise it is refused as not a loopx store.
pub(super) fn migrate(conn: &mut Connection, new: bool) -> Result<(), StoreError> {
    let found = {
        let tx = conn.transaction().map_err(sql)?;
        let found = read_version(&tx)?;
        tx.finish().map_err(sql)?;
        found
    };
    if found > SCHEMA_VERSION {
        return Err(newer(found));
    }
    if found == 0 && !new {
        return Err(StoreError::Corrupt {
            detail: "this SQLite database is empty, not a loopx store; nothing was changed: open another path, or create the store with `SqliteStore::create` (`loopx init`) at a path where nothing is".into(),
        });
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
        if *version == 5 {
            chain_existing(&tx)?;
        }
        tx.execute("DELETE FROM schema_version", []).map_err(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            [version],
        )
        .map_err(sql)?;
    }
    tx.commit().map_err(sql)
}

/// Schema 5: the chains of the rows written before it (see `crate::chain::link_row`). A
/// compacted goal's chain starts at its base, whose snapshot gets the genesis head: the events
/// before it are gone. Setting a `chain` column fires no damage trigger.
fn chain_existing(tx: &Connection) -> Result<(), StoreError> {
    let goals: Vec<(String, i64)> = {
        let mut statement = tx
            .prepare("SELECT goal, base_revision FROM goals")
            .map_err(sql)?;
        statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?
    };
    for (goal, base) in goals {
        let id: GoalId = crate::dialect::stored_id(goal.clone(), "goal id")?;
        let mut head = crate::chain::genesis(&id);
        tx.execute(
            "UPDATE snapshots SET chain = ?3 WHERE goal = ?1 AND revision = ?2",
            rusqlite::params![goal, base, crate::chain::to_hex(&head)],
        )
        .map_err(sql)?;
        let events: Vec<(i64, i64, String)> = {
            let mut statement = tx
                .prepare("SELECT revision, at, json FROM events WHERE goal = ?1 ORDER BY revision")
                .map_err(sql)?;
            statement
                .query_map([&goal], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(sql)?
                .collect::<Result<_, _>>()
                .map_err(sql)?
        };
        for (revision, at, json) in events {
            let stored = crate::dialect::count(revision, "revision")?;
            head = crate::chain::link_row(&head, stored, at, &json);
            let hex = crate::chain::to_hex(&head);
            tx.execute(
                "UPDATE events SET chain = ?3 WHERE goal = ?1 AND revision = ?2",
                rusqlite::params![goal, revision, hex],
            )
            .map_err(sql)?;
            tx.execute(
                "UPDATE snapshots SET chain = ?3 WHERE goal = ?1 AND revision = ?2",
                rusqlite::params![goal, revision, hex],
            )
            .map_err(sql)?;
        }
        tx.execute(
            "UPDATE goals SET chain = ?2 WHERE goal = ?1",
            rusqlite::params![goal, crate::chain::to_hex(&head)],
        )
        .map_err(sql)?;
    }
    Ok(())
}

/// The clock the store was created with (its `clock` setting; none is the system clock).
pub(super) fn read_clock(conn: &Connection) -> Result<StoreClock, StoreError> {
    let value: Option<String> = conn
        .query_row(
            "SELECT value FROM store_settings WHERE name = 'clock'",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql)?;
    match value.as_deref() {
        None | Some("system") => Ok(StoreClock::System),
        Some("test") => Ok(StoreClock::Test),
        Some(other) => Err(StoreError::Corrupt {
            detail: format!(
                "the store's clock setting holds `{}`, which no loopx writes; restore the store from a backup",
                other.chars().take(32).collect::<String>()
            ),
        }),
    }
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
