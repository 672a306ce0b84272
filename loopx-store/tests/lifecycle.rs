//! The kernel's lifecycle state machine, run against each backend: every command goes through
//! `submit` (load, execute, stamp, append under compare-and-set), the state the machine checks
//! is what the store loads back, and the events the store holds are exactly the events the
//! command returned.
//!
//! Every command is signed with its actor's key from the testkit's roster, so generated signed
//! goals (whose verdicts are signed too) run through the write path's verification as well.
//!
//! `PROPTEST_CASES` sets the number of cases for every backend.
//!
//! The machine's clock starts on 2026-11-29 and moves by its own steps, past the wall clock
//! too: every store here is created with a test clock, which follows the times it is given.

use loopx_kernel::{StoreExt as _, SubmitError};
use std::borrow::Cow;

use loopx_kernel::seams::Store;
use loopx_kernel::testkit::{LifecycleSut, LifecycleTest, config};
use loopx_kernel::{
    Actor, Command, GoalId, GoalSpec, GoalState, OperationId, RecordedEvent, Refusal, Timestamp,
};
use loopx_store::{MemoryStore, SqliteOptions, SqliteStore, StoreClock};
use proptest_state_machine::prop_state_machine;
use tokio::runtime::Runtime;

/// A backend that can make a fresh store for one case.
trait Fresh: Store + Sized {
    fn fresh(runtime: &Runtime) -> (Self, Option<tempfile::TempDir>);
}

impl Fresh for MemoryStore {
    fn fresh(_: &Runtime) -> (Self, Option<tempfile::TempDir>) {
        (MemoryStore::with_test_clock(), None)
    }
}

impl Fresh for SqliteStore {
    fn fresh(_: &Runtime) -> (Self, Option<tempfile::TempDir>) {
        let dir = tempfile::tempdir().unwrap();
        // Snapshots every few events, so loads go through snapshots and tails.
        let options = SqliteOptions::default()
            .snapshot_every(4)
            .clock(StoreClock::Test);
        let store = SqliteStore::create_with(dir.path().join("store.db"), options).unwrap();
        (store, Some(dir))
    }
}

/// One goal in a store, as the kernel's state machine drives it.
struct OverStore<S> {
    store: S,
    goal: GoalId,
    runtime: Runtime,
    ops: u64,
    _dir: Option<tempfile::TempDir>,
}

impl<S: Fresh> OverStore<S> {
    fn submit(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Vec<RecordedEvent>, Refusal> {
        self.ops += 1;
        let op = OperationId::new(format!("op-{}", self.ops)).unwrap();
        let before = self
            .runtime
            .block_on(self.store.load(&self.goal))
            .unwrap()
            .map_or(0, |state| state.revision);
        // Every command is signed with its actor's roster key: a signed generated goal
        // registers them all, and a declared one ignores the signature.
        let key = loopx_kernel::testkit::roster::key(actor);
        let handle = self.store.goal(&self.goal).signed_by(&key);
        let result = self
            .runtime
            .block_on(handle.submit_operation(actor, now, command, &op));
        match result {
            Ok(done) => {
                assert!(!done.replayed);
                let stored = self
                    .runtime
                    .block_on(self.store.events(&self.goal, before, usize::MAX))
                    .unwrap();
                assert_eq!(
                    stored, done.events,
                    "the store holds other events than it returned"
                );
                assert_eq!(
                    done.state,
                    *self.state(),
                    "the state submit returned is not the one loaded"
                );
                Ok(done.events)
            }
            Err(SubmitError::Refused(refusal)) => {
                let receipt = self
                    .runtime
                    .block_on(self.store.receipt(&self.goal, &op))
                    .unwrap();
                assert_eq!(receipt, None, "a refused command left a receipt");
                Err(refusal)
            }
            Err(error) => panic!("the store failed on `{}`: {error}", command.name()),
        }
    }
}

impl<S: Fresh> LifecycleSut for OverStore<S> {
    fn create(
        actor: &Actor,
        now: Timestamp,
        spec: &GoalSpec,
    ) -> Result<(Self, Vec<RecordedEvent>), Refusal> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (store, dir) = S::fresh(&runtime);
        let mut sut = OverStore {
            store,
            goal: spec.id.clone(),
            runtime,
            ops: 0,
            _dir: dir,
        };
        let events = sut.submit(actor, now, &Command::CreateGoal { spec: spec.clone() })?;
        Ok((sut, events))
    }

    fn handle(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Vec<RecordedEvent>, Refusal> {
        self.submit(actor, now, command)
    }

    fn state(&self) -> Cow<'_, GoalState> {
        let loaded = self.runtime.block_on(self.store.load(&self.goal)).unwrap();
        Cow::Owned(loaded.unwrap_or_else(|| panic!("goal `{}` vanished", self.goal)))
    }
}

type MemorySut = OverStore<MemoryStore>;
type SqliteSut = OverStore<SqliteStore>;

prop_state_machine! {
    #![proptest_config(config(128))]

    #[test]
    fn lifecycle_holds_over_the_memory_store(
        sequential 1..40 => LifecycleTest<MemorySut>
    );
}

prop_state_machine! {
    #![proptest_config(config(64))]

    #[test]
    fn lifecycle_holds_over_the_sqlite_store(
        sequential 1..40 => LifecycleTest<SqliteSut>
    );
}

#[cfg(feature = "postgres")]
mod support;

/// Each case gets a database of its own on the binary's one PostgreSQL cluster.
#[cfg(feature = "postgres")]
impl Fresh for loopx_store::PostgresStore {
    fn fresh(runtime: &Runtime) -> (Self, Option<tempfile::TempDir>) {
        let url = support::postgres::cluster().database();
        let options = loopx_store::PostgresOptions::default()
            .snapshot_every(4)
            .max_connections(2)
            .clock(StoreClock::Test);
        let store = runtime
            .block_on(loopx_store::PostgresStore::connect_with(
                &url,
                options,
                tokio_postgres::NoTls,
            ))
            .unwrap();
        (store, None)
    }
}

#[cfg(feature = "postgres")]
type PostgresSut = OverStore<loopx_store::PostgresStore>;

#[cfg(feature = "postgres")]
prop_state_machine! {
    #![proptest_config(config(32))]

    #[test]
    fn lifecycle_holds_over_the_postgres_store(
        sequential 1..40 => LifecycleTest<PostgresSut>
    );
}
