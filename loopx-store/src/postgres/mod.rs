//! The PostgreSQL backend: one database shared by a fleet of agent hosts on several machines.

mod listen;
mod ops;
mod schema;
mod tls;

use std::fmt;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use loopx_kernel::seams::{
    Appended, Commit, DeadLetter, DeadLetters, GoalSummary, PastState, Receipt, Store, StoreError,
};
use loopx_kernel::{
    AgentId, Duration, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Subject, Timestamp,
    TodoId,
};
use tokio::sync::broadcast::error::RecvError;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{NoTls, Socket};

use crate::cache::StateCache;
use crate::clock::StoreClock;
use crate::commit::Prepared;
use crate::dialect::ops as shared;
use crate::group::{Group, GroupStats};
use crate::retention::{Compaction, OperationRecord, Retention, RetentionPolicy};
use crate::rows::RowDamage;
use crate::watch::deadline;
use listen::{Connector, Listener, Signal};

pub use schema::SCHEMA_VERSION;

/// How many times one `changed` call reopens a lost notification connection before it gives up.
const LISTEN_ATTEMPTS: u32 = 3;

/// One plain client connection to `url`, over TLS as its `sslmode` says, driven on the current
/// runtime: for the test cluster's administration and tests that read behind the store's back.
#[cfg(feature = "test-cluster")]
pub(crate) async fn connect_client(url: &str) -> Result<tokio_postgres::Client, StoreError> {
    let (url, settings) = tls::split(url, &|name| std::env::var(name).ok())?;
    let connector = tls::connector(&settings)?;
    let (client, connection) = tokio_postgres::connect(&url, connector)
        .await
        .map_err(|error| StoreError::Unavailable {
            detail: error.to_string(),
        })?;
    tokio::spawn(connection);
    Ok(client)
}

/// Settings of a [`PostgresStore`]. Every setting has a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    max_connections: usize,
    connect_timeout: StdDuration,
    wait_timeout: StdDuration,
    snapshot_every: u64,
    clock: StoreClock,
    cached_goals: usize,
    retention: RetentionPolicy,
    group_commit: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            max_connections: 16,
            connect_timeout: StdDuration::from_secs(5),
            wait_timeout: StdDuration::from_secs(30),
            snapshot_every: 100,
            clock: StoreClock::System,
            cached_goals: crate::cache::DEFAULT_CACHED_GOALS,
            retention: RetentionPolicy::default(),
            group_commit: true,
        }
    }
}

impl PostgresOptions {
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

    /// How many pooled connections this handle opens at most (default 16, at least 1); a
    /// handle that waits on [`Store::changed`] opens one more, for notifications. Size it so
    /// that hosts × (pool + 1) stays under the server's `max_connections`.
    #[must_use]
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How long opening one connection may take before it fails with
    /// [`StoreError::Unavailable`] (default 5 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout.to_std();
        self
    }

    /// How long a call waits for a free pooled connection before it fails with
    /// [`StoreError::Unavailable`] (default 30 s).
    #[must_use]
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout.to_std();
        self
    }

    /// After how many events since the last snapshot a commit writes a new one (default 100,
    /// at least 1). Loading a goal reads one snapshot and at most this many events.
    #[must_use]
    pub fn snapshot_every(mut self, events: u64) -> Self {
        self.snapshot_every = events.max(1);
        self
    }

    /// Whether concurrent commits through this handle share one transaction on one connection
    /// (default `true`; see [`PostgresStore`]'s group commit). With `false` each commit is one
    /// call on a pooled connection of its own.
    #[must_use]
    pub fn group_commit(mut self, group: bool) -> Self {
        self.group_commit = group;
        self
    }

    /// The clock a store is created with (default [`StoreClock::System`], the server's
    /// `now()`), recorded in the database: [`StoreClock::Test`] for tests and scripts that move
    /// time. It applies only when [`connect`](PostgresStore::connect_with) creates the schema
    /// (a database with no loopx schema yet); an existing store keeps the clock it was created
    /// with ([`PostgresStore::clock`] tells which).
    #[must_use]
    pub fn clock(mut self, clock: StoreClock) -> Self {
        self.clock = clock;
        self
    }
}

/// A [`Store`] in one PostgreSQL database, shared by agent hosts on several machines.
///
/// - **Row-level compare-and-set**: every append is one transaction that locks the goal's row
///   (`SELECT ... FOR UPDATE`), checks the operation id and the expected revision, and writes
///   the events, the receipt, the goal's index rows and, every
///   [`PostgresOptions::snapshot_every`] events, a snapshot. The commit is folded and encoded
///   on the host first, then sent as one call of the schema's `loopx_append` function, a
///   statement that commits on its own: one network round trip per commit. Writers of different
///   goals never wait for each other; writers of one goal queue on its row.
/// - **Ambiguous commits are reported, not guessed**: when the connection is lost after the
///   call was sent and before its answer arrived, the append fails with
///   [`StoreError::Ambiguous`] with the append's attempt id; [`submit`](loopx_kernel::submit)
///   then reads the outcome back ([`Store::resolve`]), which counts as that append's commit
///   only when the receipt carries its attempt id.
/// - **Waking waiters**: a commit that moves a goal sends `NOTIFY` inside its transaction (so
///   it is delivered only if it commits); [`Store::changed`] listens on a dedicated connection
///   and re-reads the watched revisions after subscribing, so no commit is missed.
/// - **Fails closed**: an unreachable server, a database holding another program's tables, or
///   a schema newer than this build is refused at [`connect`](PostgresStore::connect) with a
///   typed error and nothing written; a damaged row is [`StoreError::Corrupt`] when read.
/// - **Secrets stay secret**: errors and `Debug` name the host, port, database and user of the
///   URL, never its password.
///
/// The handle is cheap to clone and `Send + Sync`; clones share one connection pool and a
/// small cache of folded goal states (used only when the database shows the goal at exactly
/// the cached revision). It needs a tokio runtime with I/O and timers enabled.
#[derive(Clone)]
pub struct PostgresStore {
    shared: Arc<Shared>,
}

struct Shared {
    pool: Pool,
    target: String,
    options: PostgresOptions,
    cache: StateCache,
    connect_listener: Connector,
    listener: tokio::sync::Mutex<Option<Arc<Listener>>>,
    /// The clock recorded when the store was created, read at connect.
    clock: std::sync::OnceLock<StoreClock>,
    /// The commits waiting for the next group, and whether one is being written.
    group: Arc<Group<Prepared, Result<Appended, StoreError>>>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.shared.target)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`) with
    /// the default [`PostgresOptions`], over TLS as the URL's `sslmode` and `sslrootcert` say
    /// (see [`PostgresStore::connect_with_options`]).
    ///
    /// # Errors
    /// See [`PostgresStore::connect_with_options`].
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with_options(url, PostgresOptions::default()).await
    }

    /// Connects to the database at `url` with `options`, over TLS as libpq users configure it:
    /// `sslmode` (`disable`, `allow`, `prefer` — the default —, `require`, `verify-ca`,
    /// `verify-full`) and `sslrootcert` (a PEM file of root certificates, or `system`) in the
    /// URL's query or the key-value string, else `PGSSLMODE` and `PGSSLROOTCERT` from the
    /// environment. `verify-full` checks that the server's certificate leads to one of the roots
    /// and was issued for the host connected to; `verify-ca` only the first; `require` and
    /// `prefer` encrypt without checking unless roots are given. TLS is spoken by rustls.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] for an unknown `sslmode`, roots that cannot be read, a
    /// server that offers no TLS when it is required or whose certificate fails the check;
    /// otherwise as [`PostgresStore::connect_with`].
    pub async fn connect_with_options(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let (url, settings) = tls::split(url, &|name| std::env::var(name).ok())?;
        let connector = tls::connector(&settings)?;
        PostgresStore::connect_with(&url, options, connector).await
    }

    /// Connects to the database at `url` with `options` and without TLS.
    ///
    /// # Errors
    /// See [`PostgresStore::connect_with`].
    pub async fn connect_without_tls(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with(url, options, NoTls).await
    }

    /// Connects to the database at `url` over `tls` (e.g. a `tokio-postgres-rustls` or
    /// `postgres-native-tls` connector; [`NoTls`] for none) and brings its schema to
    /// [`SCHEMA_VERSION`].
    ///
    /// The URL may also be a key-value string (`host=... user=... dbname=...`); its `sslmode`
    /// and other libpq options apply as tokio-postgres reads them. The first connection is
    /// opened here, so a wrong address fails now rather than at the first commit. Migrations
    /// run in one transaction under an advisory lock: hosts starting together migrate once.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL cannot be read or the server cannot be reached
    /// or refuses the login, [`StoreError::NewerSchema`] for a database written by a newer
    /// loopx, [`StoreError::Corrupt`] for a database that holds another program's tables.
    /// Nothing is written in any of these cases.
    pub async fn connect_with<T>(
        url: &str,
        options: PostgresOptions,
        tls: T,
    ) -> Result<PostgresStore, StoreError>
    where
        T: MakeTlsConnect<Socket> + Clone + Sync + Send + 'static,
        T::Stream: Sync + Send,
        T::TlsConnect: Sync + Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|error| StoreError::Unavailable {
                detail: format!(
                    "the PostgreSQL URL cannot be read ({error}); expected postgres://user:password@host:port/database"
                ),
            })?;
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("loopx");
        }
        let target = schema::describe(&config);
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|error| StoreError::Unavailable {
                detail: format!("cannot set up the connection pool for {target}: {error}"),
            })?;
        let cached_goals = options.cached_goals;
        let store = PostgresStore {
            shared: Arc::new(Shared {
                pool,
                connect_listener: listen::connector(config, tls, target.clone()),
                target,
                options,
                cache: StateCache::new(cached_goals),
                listener: tokio::sync::Mutex::new(None),
                clock: std::sync::OnceLock::new(),
                group: Group::new(),
            }),
        };
        let mut client = store.client().await?;
        let created_with = store.shared.options.clock;
        let clock = schema::migrate(&mut client, &store.shared.target, created_with).await?;
        store.shared.clock.get_or_init(|| clock);
        drop(client);
        shared::index_subjects(&mut store.dialect().await?).await?;
        Ok(store)
    }

    /// The clock the store was created with, which bounds the time of every commit (see
    /// [`StoreClock`]); read when this handle connected.
    pub fn clock(&self) -> StoreClock {
        self.shared.clock.get().copied().unwrap_or_default()
    }

    /// The settings this handle was opened with.
    pub fn options(&self) -> &PostgresOptions {
        &self.shared.options
    }

    /// Where this handle points: database, host, port and user (never the password).
    pub fn target(&self) -> &str {
        &self.shared.target
    }

    async fn client(&self) -> Result<Object, StoreError> {
        self.shared.client().await
    }

    /// How many groups this handle (with its clones) committed since it opened, how many
    /// commits they held, and how many commits wait for the next group now.
    pub fn group_stats(&self) -> GroupStats {
        self.shared.group.stats()
    }

    /// Appends `commit` through the group commit: prepared on the caller's task, then written
    /// by whichever append leads the group it joins, on a task of its own (so that a caller
    /// that stops waiting does not stop its group halfway).
    async fn append_grouped(&self, commit: Commit) -> Result<Appended, StoreError> {
        let prepared = crate::commit::prepare(commit, &self.shared.cache)?;
        // Should its leader vanish mid-group, the outcome is read back.
        let lost = shared::lost_group(&prepared);
        let leadership = match self.shared.group.lead(prepared, Err(lost.clone())).await {
            Ok(leadership) => leadership,
            Err(outcome) => return outcome,
        };
        let shared = Arc::clone(&self.shared);
        let led = tokio::spawn(async move {
            leadership
                .run_async(|group| async move { shared.write_group(group).await })
                .await
        });
        match led.await {
            Ok(Some(outcome)) => outcome,
            Ok(None) | Err(_) => Err(lost),
        }
    }
}

impl Shared {
    /// Writes `group` on a pooled connection in one transaction (see
    /// [`shared::append_group`]); a connection that cannot be had fails every commit alike.
    async fn write_group(&self, group: Vec<Prepared>) -> Vec<Result<Appended, StoreError>> {
        let client = match self.client().await {
            Ok(client) => client,
            Err(error) => return group.iter().map(|_| Err(error.clone())).collect(),
        };
        let mut dialect = ops::Pg::new(
            client,
            &self.target,
            &self.cache,
            self.options.snapshot_every,
        );
        shared::append_group(&mut dialect, group).await
    }

    /// A pooled connection.
    async fn client(&self) -> Result<Object, StoreError> {
        let target = &self.target;
        self.pool.get().await.map_err(|error| {
            let detail = match error {
                PoolError::Backend(error) => format!(
                    "cannot reach PostgreSQL ({target}): {}; check that the server runs and accepts connections from this host, and the URL's host, port, user, password and database",
                    schema::pg(target, &error)
                ),
                PoolError::Timeout(kind) => format!(
                    "no connection to PostgreSQL ({target}) within the timeout ({kind:?}); the server is slow or unreachable, or every pooled connection is busy: raise `max_connections` or `wait_timeout`"
                ),
                other => format!("no connection to PostgreSQL ({target}): {other}"),
            };
            StoreError::Unavailable { detail }
        })
    }
}

impl PostgresStore {
    /// The dialect the shared algorithms run over, on a pooled connection.
    async fn dialect(&self) -> Result<ops::Pg<'_>, StoreError> {
        Ok(ops::Pg::new(
            self.client().await?,
            &self.shared.target,
            &self.shared.cache,
            self.shared.options.snapshot_every,
        ))
    }

    /// The handle's notification connection, opened (again) when there is none alive.
    async fn listener(&self) -> Result<Arc<Listener>, StoreError> {
        let mut slot = self.shared.listener.lock().await;
        if let Some(listener) = slot.as_ref().filter(|l| l.is_alive()) {
            return Ok(Arc::clone(listener));
        }
        let listener = Arc::new((self.shared.connect_listener)().await?);
        *slot = Some(Arc::clone(&listener));
        Ok(listener)
    }

    async fn moved(&self, watch: &[(GoalId, u64)]) -> Result<Vec<GoalId>, StoreError> {
        shared::moved(&mut self.dialect().await?, watch).await
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn load(&self, goal: &GoalId) -> Result<Option<GoalState>, StoreError> {
        shared::load(&mut self.dialect().await?, goal).await
    }

    /// The newest state of the goal this handle's cache holds (a commit through it, or a load).
    fn cached(&self, goal: &GoalId) -> Option<GoalState> {
        self.shared.cache.newest(goal)
    }

    #[tracing::instrument(name = "commit", skip_all, fields(goal = %commit.request().goal, revision = commit.state().revision))]
    /// Written through the group commit (unless [`PostgresOptions::group_commit`] is off).
    async fn append(&self, commit: Commit) -> Result<Appended, StoreError> {
        let appended = if self.shared.options.group_commit {
            self.append_grouped(commit).await?
        } else {
            shared::append(&mut self.dialect().await?, commit).await?
        };
        if let Appended::Committed(receipt) = &appended
            && receipt.events > 0
        {
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
        shared::resolve(&mut self.dialect().await?, goal, operation, attempt).await
    }

    async fn receipt(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        shared::receipt(&mut self.dialect().await?, goal, operation).await
    }

    async fn events(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        shared::events(&mut self.dialect().await?, goal, after, limit).await
    }

    async fn state_at(
        &self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<PastState>, StoreError> {
        shared::past_state(&mut self.dialect().await?, goal, revision).await
    }

    async fn latest_operations(
        &self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        shared::latest_operations(&mut self.dialect().await?, goal, up_to, limit).await
    }

    async fn goals(&self, now: Timestamp) -> Result<Vec<GoalSummary>, StoreError> {
        shared::goals(&mut self.dialect().await?, now).await
    }

    async fn frontier(
        &self,
        agent: &AgentId,
        now: Timestamp,
    ) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
        shared::frontier(&mut self.dialect().await?, agent, now).await
    }

    async fn next_wake(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        shared::next_wake(&mut self.dialect().await?, now).await
    }

    async fn keep_dead_letter(&self, letter: DeadLetter) -> Result<(), StoreError> {
        shared::keep_dead_letter(&mut self.dialect().await?, letter).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<DeadLetters, StoreError> {
        shared::dead_letters(&mut self.dialect().await?, limit).await
    }

    async fn drop_dead_letter(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        shared::drop_dead_letter(&mut self.dialect().await?, goal, operation).await
    }

    /// From the `goal_subjects` index: one statement for all the subjects.
    async fn watching(
        &self,
        subjects: &[Subject],
        now: Timestamp,
    ) -> Result<Vec<GoalId>, StoreError> {
        shared::watching(&mut self.dialect().await?, subjects, now).await
    }

    /// Waits on `LISTEN`: subscribes to the handle's notification connection, re-reads the
    /// watched revisions (so a commit just before the subscription is not missed), then sleeps
    /// until a notification names a watched goal past its revision or the timeout passes. A
    /// lost notification connection is reopened (and the revisions re-read) up to three times
    /// per call; after that the call fails with [`StoreError::Unavailable`].
    async fn changed(
        &self,
        watch: &[(GoalId, u64)],
        timeout: Duration,
    ) -> Result<Vec<GoalId>, StoreError> {
        let deadline = deadline(timeout)?;
        if watch.is_empty() {
            tokio::time::sleep_until(deadline).await;
            return Ok(Vec::new());
        }
        for _ in 0..LISTEN_ATTEMPTS {
            let listener = self.listener().await?;
            let mut signals = listener.signals.subscribe();
            if !listener.is_alive() {
                continue;
            }
            let moved = self.moved(watch).await?;
            if !moved.is_empty() {
                return Ok(moved);
            }
            loop {
                let Ok(signal) = tokio::time::timeout_at(deadline, signals.recv()).await else {
                    return Ok(Vec::new());
                };
                match signal {
                    Ok(Signal::Changed(goal, revision)) => {
                        let watched = watch.iter().any(|(g, seen)| *g == goal && revision > *seen);
                        if !watched {
                            continue;
                        }
                    }
                    // Fell behind: some notifications were dropped, read the revisions.
                    Err(RecvError::Lagged(_)) => {}
                    Ok(Signal::Lost) | Err(RecvError::Closed) => break,
                }
                let moved = self.moved(watch).await?;
                if !moved.is_empty() {
                    return Ok(moved);
                }
            }
        }
        Err(StoreError::Unavailable {
            detail: format!(
                "the notification connection to PostgreSQL ({}) kept failing; retry once the server is back",
                self.shared.target
            ),
        })
    }
}

#[async_trait]
impl Retention for PostgresStore {
    async fn compact(&self, goal: &GoalId, keep_after: u64) -> Result<Compaction, StoreError> {
        shared::compact(&mut self.dialect().await?, goal, keep_after).await
    }

    async fn base(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        shared::base(&mut self.dialect().await?, goal).await
    }

    async fn archived(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        shared::archived(&mut self.dialect().await?, goal, after, limit).await
    }

    async fn archive_origin(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        shared::archive_origin(&mut self.dialect().await?, goal).await
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
        shared::operations(&mut self.dialect().await?, goal, after, limit).await
    }

    async fn check_rows(
        &self,
        state: &GoalState,
        now: Timestamp,
    ) -> Result<Vec<RowDamage>, StoreError> {
        shared::check_rows(&mut self.dialect().await?, state, now).await
    }

    async fn stored_goals(&self) -> Result<Vec<GoalId>, StoreError> {
        shared::stored_goals(&mut self.dialect().await?).await
    }

    async fn orphans(&self) -> Result<Vec<RowDamage>, StoreError> {
        shared::orphans(&mut self.dialect().await?).await
    }
}
