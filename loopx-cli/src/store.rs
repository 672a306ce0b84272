//! Opening the store named by `--store` (or `LOOPX_STORE`): a SQLite file path (default
//! `.loopx/loopx.db`) or a `postgres://` URL.

use std::path::{Path, PathBuf};

use loopx_kernel::seams::{Store, StoreError};
#[cfg(feature = "postgres")]
use loopx_store::PostgresStore;
use loopx_store::{Retention, SqliteOptions, SqliteStore, StoreClock, WalDamage};

use crate::error::{CliError, Exit};

/// The store used when neither `--store` nor `LOOPX_STORE` names one.
pub const DEFAULT_STORE: &str = ".loopx/loopx.db";

/// The key directory used when `--keys` names none: beside the store, `<store>.keys/` for a
/// SQLite file (so `.loopx/loopx.db.keys/` by default), `.loopx/keys/` for PostgreSQL (the keys
/// of the actors on this machine, never in the database).
pub fn default_keys(location: &Location) -> PathBuf {
    match location {
        Location::Sqlite(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".keys");
            PathBuf::from(name)
        }
        Location::Postgres(_) => PathBuf::from(".loopx/keys"),
    }
}

/// The service's key directory beside the store: `<store>.service-keys/` for a SQLite file,
/// `.loopx/service-keys/` for PostgreSQL.
pub fn default_service_keys(location: &Location) -> PathBuf {
    match location {
        Location::Sqlite(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".service-keys");
            PathBuf::from(name)
        }
        Location::Postgres(_) => PathBuf::from(".loopx/service-keys"),
    }
}

/// Where the store is.
#[derive(Clone)]
pub enum Location {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (never printed: it may hold a password).
    Postgres(String),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            // The URL may hold a password.
            Location::Postgres(_) => f.write_str("Postgres(<redacted>)"),
        }
    }
}

impl Location {
    pub fn parse(store: Option<&str>) -> Location {
        match store.map(str::trim).filter(|s| !s.is_empty()) {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Location::Postgres(url.to_owned())
            }
            Some(path) => Location::Sqlite(PathBuf::from(path)),
            None => {
                Location::Sqlite(found_upwards().unwrap_or_else(|| PathBuf::from(DEFAULT_STORE)))
            }
        }
    }
}

/// The default store of the working directory or, as git finds its repository, of the nearest
/// directory above it that has one: `loopx` run from a subdirectory of a project works on the
/// project's store instead of asking for a second one. `None` when no directory up to the root
/// has one (then `init` creates it in the working directory).
fn found_upwards() -> Option<PathBuf> {
    let here = std::env::current_dir().ok()?;
    here.ancestors()
        .map(|dir| dir.join(DEFAULT_STORE))
        .find(|candidate| candidate.is_file())
}

/// An open store.
#[derive(Debug)]
pub enum Backend {
    /// One SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(PostgresStore),
}

impl Backend {
    pub fn store(&self) -> &dyn Store {
        match self {
            Backend::Sqlite(store) => store,
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => store,
        }
    }

    pub fn retention(&self) -> &dyn Retention {
        match self {
            Backend::Sqlite(store) => store,
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => store,
        }
    }

    /// The store as a shared handle, for the engine.
    pub fn into_store(self) -> std::sync::Arc<dyn Store> {
        match self {
            Backend::Sqlite(store) => std::sync::Arc::new(store),
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => std::sync::Arc::new(store),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => "postgres",
        }
    }

    /// The clock the store was created with, which bounds every commit's time.
    pub fn clock(&self) -> StoreClock {
        match self {
            Backend::Sqlite(store) => store.clock(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => store.clock(),
        }
    }

    /// Where it is, safe to print: the file path, or the server without its password.
    pub fn describe(&self) -> String {
        match self {
            Backend::Sqlite(store) => store.path().display().to_string(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => store.target().to_owned(),
        }
    }
}

fn missing(path: &Path) -> CliError {
    CliError::new(
        Exit::Store,
        "store_missing",
        format!("no loopx store at `{}`", path.display()),
        "create it with `loopx init` (without --store, loopx finds the nearest `.loopx/loopx.db` in this directory or above it, as git finds a repository), or point --store (LOOPX_STORE) at an existing store",
    )
}

/// Opens the store, refusing a damaged write-ahead log (see [`open_with`]).
pub async fn open(location: &Location, create: bool) -> Result<Backend, CliError> {
    open_with(location, create, false, StoreClock::System).await
}

/// A write-ahead log SQLite would drop committed transactions from.
fn wal_damaged(damage: &WalDamage) -> CliError {
    CliError::new(
        Exit::Store,
        "wal_damaged",
        format!("{damage}; nothing was changed"),
        "restore the store from a backup, or open it without those transactions with `loopx --accept-wal-loss goal list` (the log is first copied to `<store>-wal.damaged`)",
    )
}

/// Opens the store. With `create` (only `loopx init`), a missing SQLite file (and its
/// directory) is created; otherwise a missing file is `store_missing` and nothing is created.
/// An existing file is never filled in: an empty one is `store_corrupt`. With
/// `accept_wal_loss` a store whose write-ahead log is damaged before committed frames opens
/// without them (after a copy of the log is kept); without it that is `wal_damaged`. A store
/// this call creates is created with `clock`; an existing store keeps its own.
pub async fn open_with(
    location: &Location,
    create: bool,
    accept_wal_loss: bool,
    clock: StoreClock,
) -> Result<Backend, CliError> {
    match location {
        Location::Sqlite(path) => {
            let options = SqliteOptions::default()
                .accept_wal_loss(accept_wal_loss)
                .clock(clock);
            let opened = if create {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|error| {
                        CliError::new(
                            Exit::Store,
                            "store_unavailable",
                            format!("cannot create directory `{}`: {error}", dir.display()),
                            "check the path and its permissions",
                        )
                    })?;
                }
                SqliteStore::create_with(path, options)
            } else {
                if !path.exists() {
                    return Err(missing(path));
                }
                SqliteStore::open_with(path, options)
            };
            match opened {
                Ok(store) => Ok(Backend::Sqlite(store)),
                Err(error @ StoreError::Corrupt { .. }) => match SqliteStore::wal_damage(path) {
                    Ok(Some(damage)) if !accept_wal_loss => Err(wal_damaged(&damage)),
                    _ => Err(error.into()),
                },
                Err(error) => Err(error.into()),
            }
        }
        #[cfg(feature = "postgres")]
        Location::Postgres(url) => {
            let options = loopx_store::PostgresOptions::default().clock(clock);
            let store = PostgresStore::connect_with_options(url, options).await?;
            Ok(Backend::Postgres(store))
        }
        #[cfg(not(feature = "postgres"))]
        Location::Postgres(_) => Err(CliError::usage(
            "postgres_unsupported",
            "this loopx was built without the PostgreSQL backend",
            "rebuild loopx-cli with feature `postgres`, or use a SQLite file",
        )),
    }
}

/// True when the SQLite file exists (always true for PostgreSQL).
pub fn exists(location: &Location) -> bool {
    match location {
        Location::Sqlite(path) => path.exists(),
        Location::Postgres(_) => true,
    }
}
