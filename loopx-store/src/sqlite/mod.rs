//! The SQLite backend: one file, several processes, the embedded default.

mod ops;
mod schema;
mod wake;
mod wal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use loopx_kernel::seams::{
    Appended, Commit, DeadLetter, DeadLetters, GoalSummary, PastState, Receipt, Store, StoreError,
};
use loopx_kernel::{
    AgentId, Duration, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Subject, Timestamp,
    TodoId,
};
use rusqlite::Connection;
use tokio::runtime::RuntimeFlavor;

use crate::clock::StoreClock;
use crate::commit::Prepared;
use crate::dialect::ops as shared;
use crate::group::{Group, GroupStats};
use crate::retention::{Compaction, OperationRecord, Retention, RetentionPolicy};
use crate::rows::RowDamage;
use ops::Sqlite;

pub use schema::SCHEMA_VERSION;
pub use wal::WalDamage;

/// The first and the last pause of the re-reads after a wake that found nothing moved (see
/// [`SqliteStore`]'s `changed`).
const SETTLE_FIRST: StdDuration = StdDuration::from_millis(1);
const SETTLE_LAST: StdDuration = StdDuration::from_millis(512);

/// How hard a commit waits for the disk before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: the write-ahead log is synced to disk at every commit. A commit
    /// that returned survives a process crash and a power loss or kernel panic.
    #[default]
    Full,
    /// `synchronous=NORMAL`: the log is synced only at checkpoints. A commit that returned
    /// survives a process crash, but the last commits before a power loss or operating-system
    /// crash may be lost (never half applied: the database stays consistent).
    Normal,
}

/// Settings of a [`SqliteStore`]. Every setting has a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    durability: Durability,
    busy_timeout: StdDuration,
    snapshot_every: u64,
    max_connections: usize,
    change_poll: StdDuration,
    accept_wal_loss: bool,
    clock: StoreClock,
    cached_goals: usize,
    retention: RetentionPolicy,
    group_commit: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::Full,
            busy_timeout: StdDuration::from_secs(5),
            snapshot_every: 100,
            max_connections: 8,
            change_poll: StdDuration::from_secs(1),
            accept_wal_loss: false,
            clock: StoreClock::System,
            cached_goals: crate::cache::DEFAULT_CACHED_GOALS,
            retention: RetentionPolicy::default(),
            group_commit: true,
        }
    }
}

impl SqliteOptions {
    /// When this handle compacts a goal on its own after a commit (default
    /// [`RetentionPolicy::default`]; [`RetentionPolicy::off`] for never). Compaction archives
    /// the events it takes out of the kept history.
    #[must_use]
    pub fn retention(mut self, policy: RetentionPolicy) -> Self {
        self.retention = policy;
        self
    }

    /// How many goals' folded states this handle keeps in memory, so that loading or
    /// committing to one of them reads only its revision and skips decoding (default
    /// [`DEFAULT_CACHED_GOALS`](crate::DEFAULT_CACHED_GOALS); `0` keeps none). Size it to the
    /// goals a host touches: the board lists every goal on each request.
    #[must_use]
    pub fn cached_goals(mut self, goals: usize) -> Self {
        self.cached_goals = goals;
        self
    }

    /// Whether concurrent commits through this handle share one transaction and one sync
    /// (default `true`; see [`SqliteStore`]'s group commit). With `false` every commit is a
    /// transaction of its own, and concurrent ones queue for SQLite's write lock.
    #[must_use]
    pub fn group_commit(mut self, group: bool) -> Self {
        self.group_commit = group;
        self
    }

    /// How hard commits wait for the disk (default [`Durability::Full`]).
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// How long a write waits for another writer (in this or another process) before it
    /// fails with [`StoreError::Unavailable`] (default 5 s).
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout.to_std();
        self
    }

    /// After how many events since the last snapshot a commit writes a new one (default 100,
    /// at least 1). Loading a goal reads one snapshot and at most this many events.
    #[must_use]
    pub fn snapshot_every(mut self, events: u64) -> Self {
        self.snapshot_every = events.max(1);
        self
    }

    /// How many connections this handle opens at most; callers beyond it wait for one
    /// (default 8, at least 1).
    #[must_use]
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// The fallback interval of [`Store::changed`]: how often a waiter re-reads the watched
    /// goals' revisions (one small indexed read) even when nothing woke it (default 1 s, at
    /// least 1 ms). A waiter wakes at once on a commit through any handle of the file in this
    /// process, and on one of another process when the platform reports changes to the file's
    /// write-ahead log (inotify on Linux, `FSEvents` on macOS, Windows' directory changes); this
    /// interval bounds the latency where it cannot (a file system that reports nothing, the
    /// platform's watch limits reached) and is the safety net against a missed report.
    #[must_use]
    pub fn change_poll(mut self, interval: Duration) -> Self {
        self.change_poll = interval.to_std().max(StdDuration::from_millis(1));
        self
    }

    /// Whether opening a store whose write-ahead log is damaged before committed frames goes
    /// ahead (default `false`: the open fails with [`StoreError::Corrupt`] and nothing is
    /// changed). With `true` the log is first copied to `<file>-wal.damaged` (or
    /// `.damaged.1`, … when that exists) and SQLite then opens the store without the
    /// transactions after the damage; its first checkpoint makes that loss permanent. See
    /// [`SqliteStore::wal_damage`].
    #[must_use]
    pub fn accept_wal_loss(mut self, accept: bool) -> Self {
        self.accept_wal_loss = accept;
        self
    }

    /// The clock a store that [`create`](SqliteStore::create_with) makes is created with
    /// (default [`StoreClock::System`]), recorded in the store: [`StoreClock::Test`] for tests
    /// and scripts that move time. It applies only when the store is created; an existing store
    /// keeps the clock it was created with ([`SqliteStore::clock`] tells which).
    #[must_use]
    pub fn clock(mut self, clock: StoreClock) -> Self {
        self.clock = clock;
        self
    }
}

/// A [`Store`] in one SQLite file, shared safely by several processes.
///
/// - **Durable commits**: WAL journal, `synchronous=FULL` by default (see [`Durability`]); every
///   append is one `BEGIN IMMEDIATE` transaction holding the events, the receipt, the goal's
///   index rows and, every [`SqliteOptions::snapshot_every`] events, a snapshot.
/// - **Several processes**: writers serialize on SQLite's lock and wait up to the busy
///   timeout; the compare-and-set on the goal revision keeps concurrent writers honest.
/// - **Group commit**: concurrent commits through one handle (its clones included) share one
///   transaction and one sync. A commit that finds no other writing is written at once, alone;
///   commits that arrive while one is written queue, and the oldest of them then writes
///   everything queued in one `BEGIN IMMEDIATE` transaction, each commit inside a savepoint
///   of its own with its own compare-and-set, operation-id and clock checks, and answers each
///   with exactly its own outcome once the transaction committed (see
///   [`SqliteStore::group_stats`] and [`SqliteOptions::group_commit`]).
/// - **Created once**: only [`create`](SqliteStore::create) makes a store; it appears at its
///   path complete (built under a temporary name, then linked into place), so concurrent
///   creators and openers agree. [`open`](SqliteStore::open) never creates, migrates or
///   writes a missing, empty or foreign file.
/// - **Fails closed**: a file that is empty, is not SQLite, is truncated, belongs to another
///   program or was written by a newer schema is refused at [`open`](SqliteStore::open) with
///   nothing written; so is a write-ahead log damaged before committed frames (see
///   [`SqliteStore::wal_damage`]); a damaged row is [`StoreError::Corrupt`] when read.
/// - **Waiting**: [`Store::changed`] wakes when a commit lands — through any handle of the
///   file in this process at once, from another process when the platform reports the change
///   to the file's write-ahead log (inotify on Linux) — and re-reads the watched revisions
///   every [`SqliteOptions::change_poll`] (1 s by default) as a fallback.
/// - **Owner-only**: a new database file is created with mode `0600` on Unix (its `-wal` and
///   `-shm` companions inherit it); an existing file keeps the mode it has.
///
/// Store methods run their blocking SQLite work in place on a multi-threaded tokio runtime
/// (`block_in_place`: the worker's other tasks move to another thread meanwhile), on tokio's
/// blocking pool on a current-thread runtime, and inline outside a runtime;
/// [`open`](SqliteStore::open) and [`create`](SqliteStore::create) always run inline (file
/// checks and migrations), so call them at
/// start-up. The handle is cheap to clone and
/// `Send + Sync`; its clones share a pool of connections and a small cache of folded goal
/// states (used only when the database shows the goal at exactly the cached revision).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    options: SqliteOptions,
    created: bool,
    /// The clock recorded when the store was created.
    clock: StoreClock,
    pool: Mutex<Pool>,
    returned: Condvar,
    cache: crate::cache::StateCache,
    /// How this handle's waiters learn of commits, shared by every handle of the file in this
    /// process.
    wake: Arc<wake::Wake>,
    /// The commits waiting for the next group, and whether one is being written.
    group: Arc<Commits>,
}

/// The group commit's queue: prepared commits, answered each with its own outcome.
type Commits = Group<Prepared, Result<Appended, StoreError>>;

#[derive(Debug, Default)]
struct Pool {
    idle: Vec<Connection>,
    open: usize,
}

/// A connection checked out of the pool, returned on drop.
struct Checkout<'a> {
    shared: &'a Shared,
    conn: Option<Connection>,
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let mut pool = self.shared.lock();
            pool.idle.push(conn);
            drop(pool);
            self.shared.returned.notify_one();
        }
    }
}

impl Shared {
    /// An idle pooled connection, if one is free right now; never waits and never opens one.
    fn try_idle(&self) -> Option<Checkout<'_>> {
        let conn = self.lock().idle.pop()?;
        Some(Checkout {
            shared: self,
            conn: Some(conn),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn checkout(&self) -> Result<Checkout<'_>, StoreError> {
        let mut pool = self.lock();
        loop {
            if let Some(conn) = pool.idle.pop() {
                return Ok(Checkout {
                    shared: self,
                    conn: Some(conn),
                });
            }
            if pool.open < self.options.max_connections {
                pool.open += 1;
                drop(pool);
                return match schema::connect(&self.path, &self.options) {
                    Ok(conn) => Ok(Checkout {
                        shared: self,
                        conn: Some(conn),
                    }),
                    Err(error) => {
                        self.lock().open -= 1;
                        self.returned.notify_one();
                        Err(error)
                    }
                };
            }
            pool = self
                .returned
                .wait(pool)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl SqliteStore {
    /// Opens the existing store at `path` with the default [`SqliteOptions`].
    ///
    /// # Errors
    /// See [`SqliteStore::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens the existing store at `path`; nothing is ever created.
    ///
    /// The file is checked before SQLite writes to it: when it is missing, empty, not a SQLite
    /// database, truncated, another program's database (or an empty SQLite one) or holds a
    /// newer schema, or when its write-ahead log is damaged before committed frames (unless
    /// [`SqliteOptions::accept_wal_loss`]), the open fails and the files are left exactly as
    /// they were. An older loopx schema is migrated forward in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when no file is at `path` (create it with
    /// [`SqliteStore::create`]), it is a directory, or it cannot be opened or locked;
    /// [`StoreError::Corrupt`] for a file that is not a (complete) loopx database or a damaged
    /// log; [`StoreError::NewerSchema`] for one written by a newer loopx.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        SqliteStore::start(path.as_ref().to_path_buf(), options, false)
    }

    /// Creates the store at `path` with the default [`SqliteOptions`], or opens the one there.
    ///
    /// # Errors
    /// See [`SqliteStore::create_with`].
    pub fn create(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::create_with(path, SqliteOptions::default())
    }

    /// Creates the store at `path` when nothing is there, then opens it; when something is
    /// already there it is opened as [`open_with`](SqliteStore::open_with) does, with the same
    /// checks (an empty file is refused, not filled in).
    ///
    /// The new store is built under a temporary name in the same directory (mode `0600` on
    /// Unix, WAL, the current schema, synced) and hard-linked to `path`, so `path` never names a
    /// half-built store; of several concurrent creators (threads or processes) exactly one
    /// creates it ([`created`](SqliteStore::created)) and the others open it. The directory
    /// must exist and its file system must support hard links. A creator killed midway leaves
    /// only a `.<name>.<pid>-<n>.creating` file behind, which is safe to delete.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the file cannot be created (no such directory, no
    /// permission, no hard links), and every error of [`open_with`](SqliteStore::open_with).
    pub fn create_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let created = schema::create(&path, &options)?;
        SqliteStore::start(path, options, created)
    }

    fn start(
        path: PathBuf,
        options: SqliteOptions,
        created: bool,
    ) -> Result<SqliteStore, StoreError> {
        schema::check_file(&path, &options)?;
        let mut conn = schema::connect(&path, &options)?;
        schema::migrate(&mut conn, false)?;
        let clock = schema::read_clock(&conn)?;
        let wake = wake::Wake::of(&path);
        let cached_goals = options.cached_goals;
        let store = SqliteStore {
            shared: Arc::new(Shared {
                wake,
                path,
                options,
                created,
                clock,
                pool: Mutex::new(Pool {
                    idle: vec![conn],
                    open: 1,
                }),
                returned: Condvar::new(),
                cache: crate::cache::StateCache::new(cached_goals),
                group: Group::new(),
            }),
        };
        store.index_subjects()?;
        Ok(store)
    }

    /// Indexes the subjects of goals written before schema 8, once (see
    /// [`shared::index_subjects`]).
    fn index_subjects(&self) -> Result<(), StoreError> {
        let mut checkout = self.shared.checkout()?;
        let Some(conn) = checkout.conn.as_mut() else {
            return Err(StoreError::Unavailable {
                detail: "no database connection".into(),
            });
        };
        ops::block(shared::index_subjects(&mut Sqlite::new(conn, &self.shared)))
    }

    /// True when this handle (or the one it was cloned from) came from the
    /// [`create`](SqliteStore::create) call that created the file; false when it opened a
    /// store that was already there.
    pub fn created(&self) -> bool {
        self.shared.created
    }

    /// Reads the write-ahead log of the store at `path` without opening the store: `Some`
    /// when a frame before committed frames is damaged, so that SQLite's recovery would drop
    /// those commits (the open then refuses the store unless
    /// [`SqliteOptions::accept_wal_loss`]). What a crash leaves (a torn tail, a killed
    /// writer's unpublished transaction partly overwritten by the next writer) is `None`: it is
    /// normal and SQLite drops it. Only a transaction after the damage whose frames all verify
    /// counts as committed (see the store's README). The
    /// format cannot tell damage inside the last committed transaction from a torn tail; that
    /// transaction is dropped without a report. A log that another process keeps writing
    /// while it is read is taken as sound.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the log or the database header cannot be read;
    /// [`StoreError::Corrupt`] when the database file itself is damaged.
    pub fn wal_damage(path: impl AsRef<Path>) -> Result<Option<WalDamage>, StoreError> {
        let path = path.as_ref();
        let len = std::fs::metadata(path)
            .map_err(|error| StoreError::Unavailable {
                detail: format!("cannot read `{}`: {error}", path.display()),
            })?
            .len();
        let page_size = schema::check_header(path, len)?;
        wal::settled_scan(path, page_size)
    }

    /// The clock the store was created with, which bounds the time of every commit (see
    /// [`StoreClock`]).
    pub fn clock(&self) -> StoreClock {
        self.shared.clock
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// How many groups this handle (with its clones) committed since it opened, how many
    /// commits they held, and how many commits wait for the next group now.
    pub fn group_stats(&self) -> GroupStats {
        self.shared.group.stats()
    }

    /// The settings this handle was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.shared.options
    }

    /// Runs SQLite's `PRAGMA integrity_check` over the whole file.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] listing the first problems SQLite found.
    pub async fn integrity_check(&self) -> Result<(), StoreError> {
        self.run(ops::integrity_check).await
    }

    /// See [`Store::load`] on this type: `Some` when the cache answers for the goal's current
    /// revision, read without waiting. A goal without a row is loaded the long way, which
    /// tells a goal that does not exist from one whose row is gone while its history is not.
    fn load_inline(&self, goal: &GoalId) -> Option<Result<Option<GoalState>, StoreError>> {
        let mut checkout = self.shared.try_idle()?;
        let conn = checkout.conn.as_mut()?;
        let found = match ops::load_cached(conn, &self.shared, goal) {
            Ok(found) => found,
            // The row was read, and it marks the history damaged: the goal cannot be loaded.
            Err(error @ StoreError::HistoryDamaged { .. }) => return Some(Err(error)),
            Err(_) => {
                // Its busy timeout may not have been restored: close it rather than pool it.
                checkout.conn = None;
                self.shared.lock().open -= 1;
                self.shared.returned.notify_one();
                return None;
            }
        };
        match found {
            ops::Cached::Hit(state) => Some(Ok(Some(*state))),
            ops::Cached::Miss => None,
        }
    }

    async fn run<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Shared) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        offload(move || {
            let mut checkout = shared.checkout()?;
            match checkout.conn.as_mut() {
                Some(conn) => job(conn, &shared),
                None => Err(no_connection()),
            }
        })
        .await?
    }

    /// Runs one of the dialect's shared operations on a pooled connection, like [`run`](Self::run).
    async fn run_dialect<T, F>(&self, job: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: AsyncFnOnce(&mut Sqlite<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        self.run(move |conn, cx| ops::block(job(&mut Sqlite::new(conn, cx))))
            .await
    }

    /// Appends `commit` through the group commit: prepared on the caller's task (its index rows
    /// and encoded events), then written by whichever append leads the group it joins.
    async fn append_grouped(&self, commit: Commit) -> Result<Appended, StoreError> {
        let prepared = crate::commit::prepare(commit, &self.shared.cache)?;
        // Should its leader vanish mid-group, the outcome is read back.
        let lost = shared::lost_group(&prepared);
        let leadership = match self.shared.group.lead(prepared, Err(lost.clone())).await {
            Ok(leadership) => leadership,
            Err(outcome) => return outcome,
        };
        let shared = Arc::clone(&self.shared);
        // Leads inside the blocking work, so that a caller that stops waiting still writes its
        // group and hands leadership on.
        match offload(move || leadership.run(|group| write_group(&shared, group))).await {
            Ok(Some(outcome)) => outcome,
            Ok(None) | Err(_) => Err(lost),
        }
    }
}

/// Writes `group` on a pooled connection in one transaction (see [`shared::append_group`]); a
/// connection that cannot be had fails every commit of the group alike.
fn write_group(shared: &Shared, group: Vec<Prepared>) -> Vec<Result<Appended, StoreError>> {
    let commits = group.len();
    let failed = |error: StoreError| (0..commits).map(|_| Err(error.clone())).collect();
    let mut checkout = match shared.checkout() {
        Ok(checkout) => checkout,
        Err(error) => return failed(error),
    };
    let Some(conn) = checkout.conn.as_mut() else {
        return failed(no_connection());
    };
    ops::poll_once(shared::append_group(&mut Sqlite::new(conn, shared), group))
        .unwrap_or_else(|| failed(ops::not_in_place()))
}

fn no_connection() -> StoreError {
    StoreError::Unavailable {
        detail: "no database connection".into(),
    }
}

/// Runs blocking SQLite work: in place on a multi-threaded tokio runtime, on its blocking pool
/// on a current-thread one, inline outside a runtime.
async fn offload<T, F>(work: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        // In place: tokio first hands this worker's other tasks to another thread, which
        // costs far less than sending the work to the blocking pool and waking back up.
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(work))
        }
        Ok(handle) => handle
            .spawn_blocking(work)
            .await
            .map_err(|error| StoreError::Unavailable {
                detail: format!("the store's worker did not finish: {error}"),
            }),
        Err(_) => Ok(work()),
    }
}

#[async_trait]
impl Store for SqliteStore {
    /// A goal whose state this handle has cached at its current revision is answered on the
    /// calling task: one indexed read of the goal's row on an idle connection, with SQLite's
    /// busy handler off, so it never waits for a lock or a connection. Otherwise (nothing
    /// cached, the goal moved, no idle connection, a lock in the way) the load runs like every
    /// other call (see the type's documentation).
    async fn load(&self, goal: &GoalId) -> Result<Option<GoalState>, StoreError> {
        if let Some(loaded) = self.load_inline(goal) {
            return loaded;
        }
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::load(d, &goal).await)
            .await
    }

    /// The newest state of the goal this handle's cache holds (a commit through it, or a load).
    fn cached(&self, goal: &GoalId) -> Option<GoalState> {
        self.shared.cache.newest(goal)
    }

    /// Written through the group commit (unless [`SqliteOptions::group_commit`] is off). A commit
    /// that moved the goal wakes this process's waiters on the file at once.
    #[tracing::instrument(name = "commit", skip_all, fields(goal = %commit.request().goal, revision = commit.state().revision))]
    async fn append(&self, commit: Commit) -> Result<Appended, StoreError> {
        let appended = if self.shared.options.group_commit {
            self.append_grouped(commit).await?
        } else {
            self.run_dialect(async move |d| shared::append(d, commit).await)
                .await?
        };
        if let Appended::Committed(receipt) = &appended
            && receipt.events > 0
        {
            self.shared.wake.committed();
            crate::retention::retain(self, receipt).await;
        }
        Ok(appended)
    }

    async fn resolve(
        &self,
        goal: &GoalId,
        operation: &OperationId,
        attempt: &str,
    ) -> Result<Option<Appended>, StoreError> {
        let goal = goal.clone();
        let operation = operation.clone();
        let attempt = attempt.to_owned();
        self.run_dialect(async move |d| shared::resolve(d, &goal, &operation, &attempt).await)
            .await
    }

    async fn receipt(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        let goal = goal.clone();
        let operation = operation.clone();
        self.run_dialect(async move |d| shared::receipt(d, &goal, &operation).await)
            .await
    }

    async fn events(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::events(d, &goal, after, limit).await)
            .await
    }

    async fn state_at(
        &self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<PastState>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::past_state(d, &goal, revision).await)
            .await
    }

    async fn latest_operations(
        &self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::latest_operations(d, &goal, up_to, limit).await)
            .await
    }

    async fn goals(&self, now: Timestamp) -> Result<Vec<GoalSummary>, StoreError> {
        self.run_dialect(async move |d| shared::goals(d, now).await)
            .await
    }

    async fn frontier(
        &self,
        agent: &AgentId,
        now: Timestamp,
    ) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
        let agent = agent.clone();
        self.run_dialect(async move |d| shared::frontier(d, &agent, now).await)
            .await
    }

    async fn next_wake(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.run_dialect(async move |d| shared::next_wake(d, now).await)
            .await
    }

    async fn keep_dead_letter(&self, letter: DeadLetter) -> Result<(), StoreError> {
        self.run_dialect(async move |d| shared::keep_dead_letter(d, letter).await)
            .await
    }

    async fn dead_letters(&self, limit: usize) -> Result<DeadLetters, StoreError> {
        self.run_dialect(async move |d| shared::dead_letters(d, limit).await)
            .await
    }

    async fn drop_dead_letter(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        let goal = goal.clone();
        let operation = operation.clone();
        self.run_dialect(async move |d| shared::drop_dead_letter(d, &goal, &operation).await)
            .await
    }

    /// From the `goal_subjects` index: one indexed read per subject.
    async fn watching(
        &self,
        subjects: &[Subject],
        now: Timestamp,
    ) -> Result<Vec<GoalId>, StoreError> {
        let subjects = subjects.to_vec();
        self.run_dialect(async move |d| shared::watching(d, &subjects, now).await)
            .await
    }

    /// Wakes as soon as a commit lands: one through any handle of the file in this process at
    /// once, one of another process when the file's write-ahead log changes (where the
    /// platform reports file changes); and re-reads the watched revisions every
    /// [`SqliteOptions::change_poll`] as well, in case a change went unreported.
    async fn changed(
        &self,
        watch: &[(GoalId, u64)],
        timeout: Duration,
    ) -> Result<Vec<GoalId>, StoreError> {
        let deadline = crate::watch::deadline(timeout)?;
        let mut commits = self.shared.wake.subscribe();
        // After a wake that found nothing: the next re-read, sooner than the fallback.
        let mut settle: Option<StdDuration> = None;
        loop {
            if !watch.is_empty() {
                let watched = watch.to_vec();
                let moved = self
                    .run(move |conn, cx| {
                        ops::block(shared::moved(&mut Sqlite::new(conn, cx), &watched))
                    })
                    .await?;
                if !moved.is_empty() {
                    return Ok(moved);
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let poll = self.shared.options.change_poll;
            let until = deadline.min(now + settle.map_or(poll, |pause| pause.min(poll)));
            settle = match tokio::time::timeout_at(until, commits.changed()).await {
                // Another process's log changes before its commit becomes visible (SQLite
                // publishes it in the shared-memory index, which reports nothing): a wake that
                // finds nothing reads again after 1, 2, 4 … 512 ms.
                Ok(Ok(())) => Some(SETTLE_FIRST),
                Ok(Err(_)) => {
                    // No sender left (not while this handle lives): wait out the interval.
                    tokio::time::sleep_until(until).await;
                    None
                }
                Err(_) => settle
                    .map(|pause| pause * 2)
                    .filter(|pause| *pause <= SETTLE_LAST),
            };
        }
    }
}

#[async_trait]
impl Retention for SqliteStore {
    async fn compact(&self, goal: &GoalId, keep_after: u64) -> Result<Compaction, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::compact(d, &goal, keep_after).await)
            .await
    }

    async fn base(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::base(d, &goal).await)
            .await
    }

    async fn archived(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::archived(d, &goal, after, limit).await)
            .await
    }

    async fn archive_origin(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::archive_origin(d, &goal).await)
            .await
    }

    fn policy(&self) -> RetentionPolicy {
        self.shared.options.retention
    }

    async fn operations(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let goal = goal.clone();
        self.run_dialect(async move |d| shared::operations(d, &goal, after, limit).await)
            .await
    }

    async fn check_rows(
        &self,
        state: &GoalState,
        now: Timestamp,
    ) -> Result<Vec<RowDamage>, StoreError> {
        let state = state.clone();
        self.run_dialect(async move |d| shared::check_rows(d, &state, now).await)
            .await
    }

    async fn stored_goals(&self) -> Result<Vec<GoalId>, StoreError> {
        self.run_dialect(async move |d| shared::stored_goals(d).await)
            .await
    }

    async fn orphans(&self) -> Result<Vec<RowDamage>, StoreError> {
        self.run_dialect(async move |d| shared::orphans(d).await)
            .await
    }
}
