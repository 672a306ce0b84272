//! # loopx-store
//!
//! Durable implementations of the kernel's [`Store`](loopx_kernel::seams::Store) trait, and the
//! one path every writer takes through them.
//!
//! - [`MemoryStore`]: everything in process memory, with the same semantics as the durable
//!   backends; for tests and embedding experiments.
//! - `SqliteStore` (feature `sqlite`, on by default): one file, several processes, WAL with
//!   `synchronous=FULL` by default, an append-only event log per goal, periodic snapshots,
//!   receipts keyed by operation id and forward migrations. Only `SqliteStore::create` makes a
//!   store; `open` refuses a missing, empty or foreign file, and a write-ahead log damaged
//!   before committed frames, without touching them.
//! - `PostgresStore` (feature `postgres`): one database shared by agent hosts on several
//!   machines; row-level compare-and-set (`SELECT ... FOR UPDATE` on the goal's row), a
//!   connection pool, `LISTEN`/`NOTIFY` to wake waiters, a lost `COMMIT` answer reported as
//!   ambiguous.
//! - [`Retention`]: bounded history — [`Retention::compact`] folds old events into a base
//!   snapshot and moves them into the goal's archive ([`Retention::archived`], [`history`]),
//!   still verifiable, keeping every receipt; a [`RetentionPolicy`] (on by default) compacts
//!   each goal as it grows — and the doctor's checks of derived rows against the history
//!   ([`Retention::check_rows`], [`Retention::orphans`], as [`RowDamage`]).
//! - [`HistoryChain`]: the chained digest of a goal's history, which exports end with.
//! - A goal whose history was damaged outside loopx (an event row deleted or changed, below
//!   the newest snapshot too; its goal row removed) answers
//!   [`StoreError::HistoryDamaged`](loopx_kernel::seams::StoreError::HistoryDamaged) to every
//!   read and write, found at load time without reading the history.
//! - [`StoreClock`]: the clock a store bounds commit times by, recorded when it is created:
//!   its own (a commit stamped beyond it plus the goal's `clock_skew` is refused,
//!   `clock_ahead`), or a test clock that follows the times it is given.
//! - [`Hooked`]: any store with an [`AppendHook`] around its appends (fault injection, metrics).
//! - `conformance` (feature `conformance`): the suite every backend passes, public so that
//!   other backends run it too.
//! - `test_cluster` (feature `test-cluster`): a throwaway PostgreSQL cluster on loopback, for
//!   tests and benchmarks against a real server.
//!
//! Every backend implements the kernel's `Store::changed`, which lets a waiting engine sleep
//! until its earliest wake time or a change to a goal it waits on: memory wakes through an
//! in-process notification, SQLite polls the goals' revisions at a short bounded interval
//! (other processes share the file), PostgreSQL listens for the notifications each commit
//! sends.
//!
//! Every commit is atomic: the events, the receipt, the goal's index rows and (when due) a
//! snapshot are written together or not at all. A store commits a kernel
//! [`Commit`](loopx_kernel::seams::Commit): the batch already folded into the goal's state with
//! [`GoalState::apply`](loopx_kernel::GoalState::apply) by [`Commit::fold`](loopx_kernel::seams::Commit::fold),
//! which refuses a batch that does not apply, so nothing unfoldable reaches a store. The SQLite
//! and PostgreSQL backends run the same algorithms over a small per-backend dialect that holds
//! their SQL.
//!
//! The cross-goal queries (`goals`, `frontier`, `next_wake`) read index rows that each commit
//! writes, computed with the kernel's [`terminal`](loopx_kernel::terminal),
//! [`frontier`](loopx_kernel::frontier) and [`next_wake`](loopx_kernel::next_wake). Rows
//! computed at `t` are exact for every `now` in
//! `[last_change(state, t), next_wake(state, t))` (see [`last_change`](loopx_kernel::last_change));
//! a query recomputes (and rewrites) only the goals whose window does not cover its `now`.
//!
//! Every writer goes through the kernel's one write path, the goal handle
//! ([`StoreExt::goal`](loopx_kernel::StoreExt::goal)): load → [`execute`](loopx_kernel::execute)
//! → stamp → append under compare-and-set, idempotent by operation id.
//!
//! ```
//! use loopx_kernel::prelude::*;
//! use loopx_store::MemoryStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new();
//! let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
//! // The owner's key (from a key file in a real host: `loopx_provider::keys`).
//! let owner = loopx_kernel::SecretKey::from_seed([7; 32]);
//! let spec = GoalSpec::builder("json-output", "add --format json to the CLI", "maintainer")
//!     .agent("agent-a")
//!     .declared_identity() // an experiment: actors are taken at their word
//!     .build()?;
//! let created = store.goal(&spec.id).signed_by(&owner).create(&spec, now).await?;
//! assert_eq!(created.receipt.revision, 1);
//! assert_eq!(store.load(&spec.id).await?, Some(created.state));
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod cache;
pub mod chain;
mod clock;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod commit;
mod dead_letter;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod dialect;
mod fold;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod group;
mod hooked;
mod index;
mod memory;
mod retention;
mod rows;
pub mod verify;
mod watch;

#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "postgres")]
mod postgres;

#[cfg(feature = "conformance")]
pub mod conformance;

#[cfg(feature = "test-cluster")]
pub mod test_cluster;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use cache::DEFAULT_CACHED_GOALS;
pub use chain::HistoryChain;
pub use clock::StoreClock;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use group::GroupStats;
pub use hooked::{AppendHook, Hooked};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore, SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION};
pub use retention::{Compaction, OperationRecord, Retention, RetentionPolicy, history};
pub use rows::RowDamage;
#[cfg(feature = "sqlite")]
pub use sqlite::{
    Durability, SCHEMA_VERSION as SQLITE_SCHEMA_VERSION, SqliteOptions, SqliteStore, WalDamage,
};
pub use verify::{Finding, RecordedCommit, Verification, verify_commits, verify_history};
