//! The conformance suite: one set of checks, written once over the [`Store`] and
//! [`Retention`] traits, that every backend must pass.
//!
//! A backend implements [`Backend`] (how to get a fresh store, and how to reopen one) and names
//! it in [`conformance_suite!`](crate::conformance_suite), which expands to one `#[test]` per
//! case:
//!
//! ```
//! use async_trait::async_trait;
//! use loopx_store::MemoryStore;
//! use loopx_store::conformance::{self, Backend};
//!
//! struct Mine;
//!
//! #[async_trait]
//! impl Backend for Mine {
//!     type Store = MemoryStore; // your store type
//!     async fn fresh(&self) -> MemoryStore {
//!         MemoryStore::new() // a new, empty store (e.g. a new database)
//!     }
//!     async fn fresh_on_test_clock(&self) -> MemoryStore {
//!         MemoryStore::with_test_clock() // the same, created with a test clock
//!     }
//!     async fn fresh_retaining(&self, policy: loopx_store::RetentionPolicy) -> MemoryStore {
//!         MemoryStore::new().with_retention(policy) // compacting goals by `policy`
//!     }
//!     async fn reopen(&self, store: MemoryStore) -> MemoryStore {
//!         store // close it and open the same data again
//!     }
//! }
//!
//! // In a test file: one `#[test]` per case.
//! loopx_store::conformance_suite!(Mine);
//!
//! // Or one case at a time, on a runtime of your own.
//! # fn main() {
//! conformance::block_on(conformance::create_load_and_read_back(&Mine));
//! # }
//! ```
//!
//! Each case is also a public `async fn` taking the backend, for backends that drive their own
//! runtime. A failing case panics with what the backend did and what the suite expected.
#![allow(
    clippy::missing_panics_doc,
    reason = "every case is a test: it panics exactly when the backend fails it"
)]

use loopx_kernel::write::stamp;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use loopx_kernel::seams::{
    AppendRequest, Appended, Commit, DeadLetter, GoalStatus, GoalSummary, PastState, Receipt,
    Store, StoreError,
};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Duration, Event, Fingerprint, GoalId, GoalSpec,
    GoalState, Limits, NewTodo, Observation, ObservationKey, OperationId, PersonId, Policy,
    Priority, RecordedEvent, Refusal, ResumeCondition, Revision, SettledTransition, Settlement,
    SourceId, Subject, Timestamp, TodoId, Transition, Verdict, VerdictOutcome, frontier, next_wake,
    terminal,
};

use crate::hooked::{AppendHook, Hooked};
use crate::retention::{OperationRecord, Retention, RetentionPolicy, history};
use crate::rows::RowDamage;
use loopx_kernel::write::{MAX_ATTEMPTS, digest};
use loopx_kernel::{SubmitError, Submitted, submit};

/// How the suite gets stores from a backend.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The store under test.
    type Store: Retention + 'static;

    /// A new, empty store, independent of every other one this backend returned, on the
    /// backend's own clock (`StoreClock::System`): the suite's fixed times lie in the past.
    async fn fresh(&self) -> Self::Store;

    /// A new, empty store created with a test clock (`StoreClock::Test`), which follows the
    /// times it is given; [`reopen`](Backend::reopen) must keep it on that clock.
    async fn fresh_on_test_clock(&self) -> Self::Store;

    /// A new, empty store like [`fresh`](Backend::fresh) whose handle compacts goals on its own
    /// by `policy` (see [`RetentionPolicy`]).
    async fn fresh_retaining(&self, policy: RetentionPolicy) -> Self::Store;

    /// The same data through a new handle: close `store` and open its data again (a durable
    /// backend must show everything it acknowledged). A backend without persistence returns
    /// `store` itself.
    async fn reopen(&self, store: Self::Store) -> Self::Store;

    /// A second handle on the same data, open alongside `store` (another connection pool,
    /// as another process or machine would have). `None`, the default, for a backend whose
    /// data lives in one handle: the suite then commits through `store` from another task.
    async fn second(&self, store: &Self::Store) -> Option<Self::Store> {
        let _ = store;
        None
    }
}

/// A backend whose stored rows a test can change with plain SQL, as a stray statement of an
/// operator or a failing disk would. The damage suite ([`damage_suite!`](crate::damage_suite))
/// runs on it; the memory backend, whose rows live inside its goals, has none to damage.
#[async_trait]
pub trait Tamper: Backend {
    /// Runs `sql` (statements separated by `;`) on `store`'s data over a connection of its own,
    /// outside the store. With `marks` false the schema's damage triggers are off while it
    /// runs (and on again afterwards), as for damage below SQL (a flipped bit on disk) that no
    /// trigger sees.
    async fn tamper(&self, store: &Self::Store, sql: &str, marks: bool);
}

/// Runs a future to completion on a new single-threaded tokio runtime with its I/O and timer
/// drivers (blocking work may still use tokio's blocking pool). Used by [`conformance_suite!`](crate::conformance_suite).
///
/// # Panics
/// When the runtime cannot be built, and with the case's own panic when a case fails.
pub fn block_on<F: Future>(future: F) -> F::Output {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(future),
        Err(error) => panic!("cannot build a tokio runtime for the conformance suite: {error}"),
    }
}

/// Expands to one `#[test]` per conformance case, each run against a new value of `$backend`
/// (an expression whose type implements [`Backend`]).
#[macro_export]
macro_rules! conformance_suite {
    ($backend:expr) => {
        $crate::conformance_suite!(@cases $backend;
            create_load_and_read_back,
            stale_revision_is_a_conflict,
            operation_ids_are_idempotent,
            concurrent_appends_have_one_winner,
            concurrent_duplicates_have_one_committer,
            concurrent_commits_keep_their_own_outcomes,
            batches_that_do_not_apply_are_refused,
            empty_batch_records_a_no_op,
            submit_revalidates_after_a_moved_goal,
            submit_sees_through_a_stale_cache,
            stale_epochs_never_settle,
            charge_is_exactly_once,
            stored_events_replay_to_the_loaded_state,
            cross_goal_queries_match_the_kernel,
            commits_after_a_refresh_elsewhere_keep_the_rows_exact,
            compaction_keeps_load_and_audit,
            compaction_inside_a_commit_keeps_its_receipt,
            latest_operations_read_the_audit_backwards,
            past_revisions_read_as_they_stood,
            compaction_archives_what_it_removes,
            the_retention_policy_compacts_as_a_goal_grows,
            reopen_keeps_everything,
            changed_wakes_waiters,
            derived_rows_match_the_history,
            time_is_bounded_by_the_store_clock,
            a_test_clock_follows_the_given_times,
            commits_keep_their_authorship,
            a_history_of_an_older_event_schema_verifies,
            watching_finds_each_kind_of_subject,
            watching_lists_many_goals_in_order,
            watching_agrees_with_a_scan_of_every_goal,
            dead_letters_are_kept_counted_and_dropped,
        );
    };
    (@cases $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let backend = $backend;
                $crate::conformance::block_on($crate::conformance::$case(&backend));
            }
        )*
    };
}

/// Expands to one `#[test]` per damage case, each run against a new value of `$backend` (an
/// expression whose type implements [`Tamper`]): rows changed outside the store are found, each
/// as a typed error or finding, and nothing more is written to the damaged goal.
#[macro_export]
macro_rules! damage_suite {
    ($backend:expr) => {
        $crate::conformance_suite!(@cases $backend;
            damage_below_a_snapshot_is_found_at_load,
            a_removed_goal_row_is_damage_not_absence,
            events_never_have_a_gap,
            a_payload_changed_below_sql_breaks_the_chain,
            derived_rows_changed_outside_are_found,
            a_damaged_archive_is_found,
            a_changed_base_snapshot_is_found_by_verification,
            a_compacted_receipt_keeps_its_digest_and_the_archive_its_authorship,
        );
    };
}

// ----- the scenario vocabulary --------------------------------------------------------------

fn id<T: TryFrom<String>>(text: &str) -> T {
    T::try_from(text.to_owned())
        .ok()
        .unwrap_or_else(|| panic!("`{text}` is a valid id in the suite"))
}

/// 2026-11-29 10:00 UTC plus `minutes`.
fn at(minutes: i64) -> Timestamp {
    Timestamp::from_millis(1_795_946_400_000 + minutes * 60_000)
}

fn agent(name: &str) -> AgentId {
    id(name)
}

fn ag(name: &str) -> Actor {
    Actor::Agent(agent(name))
}

fn owner() -> Actor {
    Actor::Person(id("olivia"))
}

fn validator() -> Actor {
    Actor::Validator(id("ci"))
}

fn spec(goal: &str, agents: &[&str]) -> GoalSpec {
    GoalSpec {
        id: id(goal),
        objective: format!("objective of {goal}"),
        owner: id::<PersonId>("olivia"),
        criteria: vec![],
        agents: agents.iter().map(|a| agent(a)).collect(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}

fn todo(name: &str) -> NewTodo {
    NewTodo::advance(id(name), format!("do {name}"))
}

fn add(name: &str) -> Command {
    Command::AddTodo { todo: todo(name) }
}

fn claim(name: &str, ttl_minutes: i64) -> Command {
    Command::Claim {
        todo: id(name),
        ttl: Some(Duration::minutes(ttl_minutes)),
        workspace: None,
        grant_reason: None,
    }
}

fn begin(name: &str, epoch: u64, turn: &str) -> Command {
    Command::BeginTurn {
        todo: id(name),
        epoch,
        turn: id(turn),
        reserve: None,
    }
}

fn settle(name: &str, epoch: u64, turn: &str, transition: Transition) -> Command {
    Command::SettleTurn(Settlement {
        todo: id(name),
        epoch,
        turn: id(turn),
        verdict: Verdict {
            validator: validator(),
            outcome: VerdictOutcome::Passed,
            summary: "checked".into(),
            signature: None,
        },
        evidence: vec![],
        observations: vec![],
        transition,
        usage: Amounts {
            tokens: 100,
            ..Amounts::ZERO
        },
        failure: None,
    })
}

fn done() -> Transition {
    Transition::Complete {
        continuation: Continuation::GoalStillActive,
    }
}

fn observation(key: &str, fingerprint: &str, minutes: i64) -> Command {
    Command::RecordObservation {
        observation: Observation {
            key: id::<ObservationKey>(key),
            subject: id::<Subject>("repo:acme/cli"),
            revision: id::<Revision>("git:abc"),
            fingerprint: id::<Fingerprint>(fingerprint),
            observed_at: at(minutes),
            summary: String::new(),
            facts: BTreeMap::new(),
            order: None,
            etag: None,
        },
    }
}

/// A goal in a store, driven through [`submit`] with fresh operation ids.
struct Goal<'a, S: ?Sized> {
    store: &'a S,
    id: GoalId,
    ops: u64,
}

impl<'a, S: Store + ?Sized> Goal<'a, S> {
    async fn create(store: &'a S, spec: GoalSpec, now: Timestamp) -> Goal<'a, S> {
        let mut goal = Goal {
            store,
            id: spec.id.clone(),
            ops: 0,
        };
        goal.run(&owner(), now, Command::CreateGoal { spec }).await;
        goal
    }

    fn next_op(&mut self) -> OperationId {
        self.ops += 1;
        id(&format!("{}-op-{}", self.id, self.ops))
    }

    async fn submit(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: Command,
    ) -> Result<Submitted, SubmitError> {
        let op = self.next_op();
        submit(self.store, &self.id, actor, now, &command, &op).await
    }

    async fn run(&mut self, actor: &Actor, now: Timestamp, command: Command) -> Submitted {
        let name = command.name();
        match self.submit(actor, now, command).await {
            Ok(done) => done,
            Err(error) => panic!(
                "`{name}` on goal `{}` by {actor:?} failed: {error}",
                self.id
            ),
        }
    }

    async fn refused(&mut self, actor: &Actor, now: Timestamp, command: Command) -> Refusal {
        let name = command.name();
        let before = self.state().await;
        match self.submit(actor, now, command).await {
            Err(SubmitError::Refused(refusal)) => {
                assert_eq!(
                    self.state().await,
                    before,
                    "a refused `{name}` changed goal `{}`",
                    self.id
                );
                refusal
            }
            other => panic!(
                "`{name}` on goal `{}` should be refused, got {other:?}",
                self.id
            ),
        }
    }

    async fn state(&self) -> GoalState {
        load(self.store, &self.id).await
    }

    /// Claims, begins and settles `name` as `who`, returning the epoch it ran under.
    async fn work(&mut self, who: &str, name: &str, now: Timestamp, transition: Transition) -> u64 {
        let claimed = self.run(&ag(who), now, claim(name, 30)).await;
        let epoch = lease_epoch(&claimed.state, name);
        let turn = format!("{name}-turn-{epoch}");
        self.run(&ag(who), now, begin(name, epoch, &turn)).await;
        self.run(&ag(who), now, settle(name, epoch, &turn, transition))
            .await;
        epoch
    }
}

fn lease_epoch(state: &GoalState, name: &str) -> u64 {
    state
        .todos
        .get(&id::<TodoId>(name))
        .and_then(|t| t.lease.as_ref())
        .map_or_else(|| panic!("todo `{name}` has no lease"), |l| l.epoch)
}

async fn load<S: Store + ?Sized>(store: &S, goal: &GoalId) -> GoalState {
    match store.load(goal).await {
        Ok(Some(state)) => state,
        Ok(None) => panic!("goal `{goal}` is missing from the store"),
        Err(error) => panic!("loading goal `{goal}` failed: {error}"),
    }
}

async fn all_events<S: Store + ?Sized>(store: &S, goal: &GoalId) -> Vec<RecordedEvent> {
    match store.events(goal, 0, usize::MAX).await {
        Ok(events) => events,
        Err(error) => panic!("reading the events of goal `{goal}` failed: {error}"),
    }
}

fn ok<T>(result: Result<T, StoreError>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{what} failed: {error}"),
    }
}

/// The receipt of an append that must have written its commit.
fn committed(result: Result<Appended, StoreError>, what: &str) -> Receipt {
    match ok(result, what) {
        Appended::Committed(receipt) => receipt,
        Appended::Replayed(receipt) => {
            panic!("{what} wrote its commit but was answered as a replay of {receipt:?}")
        }
    }
}

/// The receipt of an append that must have replayed an earlier commit.
fn replayed(result: Result<Appended, StoreError>, what: &str) -> Receipt {
    match ok(result, what) {
        Appended::Replayed(receipt) => receipt,
        Appended::Committed(receipt) => {
            panic!("{what} replays an earlier commit but was answered as committed: {receipt:?}")
        }
    }
}

/// A request for `events` after `expected`, built as a writer would.
fn request(
    goal: &GoalId,
    expected: u64,
    op: &str,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    events: Vec<Event>,
) -> AppendRequest {
    AppendRequest {
        goal: goal.clone(),
        expected_revision: expected,
        operation: id(op),
        digest: digest(actor, command),
        at: now,
        events: stamp(expected, actor, now, events),
        authorship: None,
        clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
    }
}

/// `request` folded onto `base` (the goal's state at its expected revision) by the kernel, as
/// a writer commits it.
fn commit(base: Option<&GoalState>, request: AppendRequest) -> Commit {
    match Commit::fold(base.cloned(), request) {
        Ok(commit) => commit,
        Err(error) => panic!("the suite's batch does not fold: {error}"),
    }
}

/// `state` after `command`, folded here without a store: a revision the store never saw.
fn ahead_of(state: &GoalState, actor: &Actor, now: Timestamp, command: &Command) -> GoalState {
    let events = stamp(
        state.revision,
        actor,
        now,
        events_of(state, actor, now, command),
    );
    commit(
        Some(state),
        AppendRequest {
            goal: state.spec.id.clone(),
            expected_revision: state.revision,
            operation: id("local"),
            digest: digest(actor, command),
            at: now,
            events,
            authorship: None,
            clock_skew: state.spec.policy.clock_skew,
        },
    )
    .into_parts()
    .1
}

fn events_of(state: &GoalState, actor: &Actor, now: Timestamp, command: &Command) -> Vec<Event> {
    match loopx_kernel::execute(Some(state), actor, now, command) {
        Ok(events) => events,
        Err(refusal) => panic!(
            "the suite's own `{}` was refused: {refusal}",
            command.name()
        ),
    }
}

fn fold(events: &[RecordedEvent]) -> GoalState {
    match GoalState::replay(events) {
        Ok(state) => state,
        Err(error) => panic!("the stored events do not fold: {error}"),
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_string(value) {
        Ok(text) => text,
        Err(error) => panic!("cannot encode: {error}"),
    }
}

// ----- the cases ----------------------------------------------------------------------------

/// A history an older kernel wrote (event schema 1) loads and verifies: its turn in flight began
/// before a run recorded the epoch it began under (0, so the outbox keeps the keys its intents
/// were made with), and every command, re-executed today, makes the events written then.
pub async fn a_history_of_an_older_event_schema_verifies<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let created = spec("older", &["a"]);
    let goal = created.id.clone();
    let commands = [
        (owner(), Command::CreateGoal { spec: created }),
        (owner(), add("t")),
        (
            ag("a"),
            Command::Claim {
                todo: id("t"),
                ttl: None,
                workspace: None,
                grant_reason: None,
            },
        ),
        (
            ag("a"),
            Command::BeginTurn {
                todo: id("t"),
                epoch: 1,
                turn: id("t1"),
                reserve: None,
            },
        ),
    ];
    let mut state: Option<GoalState> = None;
    for (n, (actor, command)) in (0..).zip(&commands) {
        let events = match loopx_kernel::execute(state.as_ref(), actor, at(n), command) {
            Ok(events) => events,
            Err(refusal) => panic!("the suite's command was refused: {refusal}"),
        };
        let after = state.as_ref().map_or(0, |s| s.revision);
        let op = format!("older-{n}");
        let mut written = request(&goal, after, &op, actor, at(n), command, events);
        for event in &mut written.events {
            event.schema = 1;
        }
        written.authorship = Some(loopx_kernel::seams::Authorship {
            command: command.clone(),
            signature: None,
        });
        ok(
            store.append(commit(state.as_ref(), written)).await,
            "append",
        );
        state = Some(load(&store, &goal).await);
    }
    let store = backend.reopen(store).await;
    let loaded = load(&store, &goal).await;
    let began_under = loaded
        .todos
        .get(&id("t"))
        .and_then(loopx_kernel::Todo::turn_in_flight)
        .map(|turn| turn.began_under);
    assert_eq!(began_under, Some(0));
    let verified = ok(crate::verify_history(&store, &goal).await, "verify");
    assert_eq!(verified.verified, 4, "{verified:?}");
    assert!(verified.findings.is_empty(), "{verified:?}");
}

/// Each commit of a signed goal keeps the command it was made from and its signature with its
/// receipt (schema 7), through a reopen, and the history verifies.
pub async fn commits_keep_their_authorship<B: Backend>(backend: &B) {
    use loopx_kernel::{SecretKey, Signer as _, StoreExt as _};
    let store = backend.fresh().await;
    let key = SecretKey::from_seed([3; 32]);
    let mut spec = spec("signed", &["a"]);
    spec.identity = loopx_kernel::Identity::Signed;
    spec.keys = vec![loopx_kernel::RegisteredKey {
        actor: owner(),
        key: key.public_key(),
    }];
    let handle = store.goal(&spec.id).signed_by(&key);
    let created = match handle.create(&spec, at(0)).await {
        Ok(done) => done,
        Err(error) => panic!("creating a signed goal failed: {error}"),
    };
    let add = Command::AddTodo {
        todo: loopx_kernel::NewTodo::advance(id("t"), "a todo"),
    };
    if let Err(error) = handle.submit(&owner(), at(1), &add).await {
        panic!("a signed command was refused: {error}");
    }
    let store = backend.reopen(store).await;
    let operations = ok(
        store.operations(&spec.id, 0, usize::MAX).await,
        "operations",
    );
    assert_eq!(operations.len(), 2);
    let first = operations[0].authorship.as_ref().map(|a| &a.command);
    assert_eq!(
        first,
        Some(&Command::CreateGoal {
            spec: created.state.spec.clone()
        })
    );
    assert_eq!(
        operations[1].authorship.as_ref().map(|a| &a.command),
        Some(&add)
    );
    assert!(
        operations
            .iter()
            .all(|o| o.authorship.as_ref().is_some_and(|a| a.signature.is_some())),
        "every commit keeps its signature: {operations:?}"
    );
    let verified = ok(crate::verify_history(&store, &spec.id).await, "verify");
    assert_eq!(verified.verified, 2, "{verified:?}");
    assert!(verified.findings.is_empty(), "{verified:?}");
}

/// A created goal loads back equal to the kernel's state; its receipt and events read back; an
/// unknown goal loads as `None` with no events and no receipts.
pub async fn create_load_and_read_back<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let unknown: GoalId = id("nowhere");
    assert_eq!(ok(store.load(&unknown).await, "load"), None);
    assert!(ok(store.events(&unknown, 0, 10).await, "events").is_empty());
    assert_eq!(
        ok(store.receipt(&unknown, &id("op")).await, "receipt"),
        None
    );
    assert!(ok(store.goals(at(0)).await, "goals").is_empty());
    assert_eq!(ok(store.next_wake(at(0)).await, "next_wake"), None);

    let spec = spec("g", &["a"]);
    let expected = match GoalState::create(&owner(), at(0), &spec) {
        Ok(state) => state,
        Err(refusal) => panic!("the suite's goal was refused: {refusal}"),
    };
    let op: OperationId = id("create-g");
    let created = match submit(
        &store,
        &spec.id,
        &owner(),
        at(0),
        &Command::CreateGoal { spec: spec.clone() },
        &op,
    )
    .await
    {
        Ok(created) => created,
        Err(error) => panic!("creating a goal failed: {error}"),
    };
    assert!(!created.replayed);
    assert_eq!(created.state, expected);
    assert_eq!(created.receipt.revision, 1);
    assert_eq!(created.receipt.events, 1);
    assert_eq!(created.receipt.committed_at, at(0));
    assert_eq!(load(&store, &spec.id).await, expected);
    assert_eq!(
        ok(store.receipt(&spec.id, &op).await, "receipt"),
        Some(created.receipt.clone())
    );
    assert_eq!(all_events(&store, &spec.id).await, created.events);
    assert_eq!(
        ok(store.goals(at(1)).await, "goals"),
        vec![GoalSummary {
            goal: spec.id.clone(),
            objective: spec.objective.clone(),
            status: GoalStatus::Active,
            revision: 1,
            next_wake: None,
        }]
    );
    assert_eq!(
        ok(store.receipt(&spec.id, &id("other")).await, "receipt"),
        None
    );
}

/// A batch validated against an old (or future) revision never commits and changes nothing.
pub async fn stale_revision_is_a_conflict<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    let genesis = goal.state().await;
    goal.run(&ag("a"), at(1), add("t1")).await;
    let before = goal.state().await;
    let events_before = all_events(&store, &goal.id).await;

    let command = add("t2");
    let stale = request(
        &goal.id,
        1,
        "stale",
        &ag("a"),
        at(2),
        &command,
        events_of(&genesis, &ag("a"), at(2), &command),
    );
    assert_eq!(
        store.append(commit(Some(&genesis), stale)).await,
        Err(StoreError::Conflict {
            expected: 1,
            current: 2
        })
    );
    // A state at revision 5, folded without the store: three todos it never saw.
    let mut future = before.clone();
    for name in ["f3", "f4", "f5"] {
        future = ahead_of(&future, &ag("a"), at(2), &add(name));
    }
    let ahead = request(
        &goal.id,
        5,
        "ahead",
        &ag("a"),
        at(2),
        &command,
        events_of(&future, &ag("a"), at(2), &command),
    );
    assert_eq!(
        store.append(commit(Some(&future), ahead)).await,
        Err(StoreError::Conflict {
            expected: 5,
            current: 2
        })
    );
    let create = Command::CreateGoal {
        spec: spec("g", &["a"]),
    };
    let recreate = request(
        &goal.id,
        0,
        "again",
        &owner(),
        at(2),
        &create,
        vec![Event::GoalCreated {
            spec: spec("g", &["a"]),
        }],
    );
    assert_eq!(
        store.append(commit(None, recreate)).await,
        Err(StoreError::Conflict {
            expected: 0,
            current: 2
        })
    );

    assert_eq!(goal.state().await, before);
    assert_eq!(all_events(&store, &goal.id).await, events_before);
    for op in ["stale", "ahead", "again"] {
        assert_eq!(
            ok(store.receipt(&goal.id, &id(op)).await, "receipt"),
            None,
            "`{op}` left a receipt"
        );
    }
}

/// The same operation id with the same digest returns the first receipt and changes nothing,
/// even after the goal moved; with another digest it is an operation conflict. Operation ids
/// are per goal.
pub async fn operation_ids_are_idempotent<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    let state = goal.state().await;
    let command = add("t1");
    let first = request(
        &goal.id,
        1,
        "x",
        &ag("a"),
        at(1),
        &command,
        events_of(&state, &ag("a"), at(1), &command),
    );
    let first = commit(Some(&state), first);
    let receipt = committed(store.append(first.clone()).await, "append");
    assert_eq!((receipt.revision, receipt.events), (2, 1));
    assert_eq!(
        replayed(store.append(first.clone()).await, "retried append"),
        receipt
    );
    goal.run(&ag("a"), at(2), add("t2")).await;
    let after = goal.state().await;
    assert_eq!(
        replayed(
            store.append(first.clone()).await,
            "append after the goal moved"
        ),
        receipt
    );
    assert_eq!(goal.state().await, after);
    assert_eq!(all_events(&store, &goal.id).await.len(), 3);

    let mut other = first.request().clone();
    other.digest = "another payload".into();
    assert_eq!(
        store.append(commit(Some(&state), other)).await,
        Err(StoreError::OperationConflict { operation: id("x") })
    );

    // Through submit: a retry replays, another command under the same id conflicts.
    let op: OperationId = id("y");
    let done = match submit(&store, &goal.id, &ag("a"), at(3), &add("t3"), &op).await {
        Ok(done) => done,
        Err(error) => panic!("submit failed: {error}"),
    };
    let again = match submit(&store, &goal.id, &ag("a"), at(4), &add("t3"), &op).await {
        Ok(again) => again,
        Err(error) => panic!("a retried submit failed: {error}"),
    };
    assert!(again.replayed && again.events.is_empty());
    assert_eq!(again.receipt, done.receipt);
    assert_eq!(again.state, done.state);
    match submit(&store, &goal.id, &ag("a"), at(4), &add("t4"), &op).await {
        Err(SubmitError::Store(StoreError::OperationConflict { operation })) => {
            assert_eq!(operation, op);
        }
        other => panic!("another payload under a used operation id must conflict, got {other:?}"),
    }
    assert_eq!(goal.state().await, done.state);

    // The same operation id on another goal is another operation.
    let spec2 = spec("h", &["a"]);
    let created = submit(
        &store,
        &spec2.id,
        &owner(),
        at(5),
        &Command::CreateGoal {
            spec: spec2.clone(),
        },
        &id("x"),
    )
    .await;
    assert!(
        matches!(created, Ok(ref c) if !c.replayed),
        "operation ids are per goal: {created:?}"
    );
}

/// Several writers appending at the same revision at once: exactly one commits, the others see
/// a conflict, and the log holds exactly the winner's events.
pub async fn concurrent_appends_have_one_winner<B: Backend>(backend: &B) {
    let store = Arc::new(backend.fresh().await);
    let mut goal = Goal::create(&*store, spec("g", &["a"]), at(0)).await;
    goal.run(&ag("a"), at(1), add("t0")).await;
    let state = goal.state().await;
    let goal_id = goal.id.clone();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let command = add(&format!("t{}", i + 1));
        let req = request(
            &goal_id,
            2,
            &format!("op-{i}"),
            &ag("a"),
            at(2),
            &command,
            events_of(&state, &ag("a"), at(2), &command),
        );
        let store = Arc::clone(&store);
        let req = commit(Some(&state), req);
        tasks.spawn(async move { store.append(req).await });
    }
    let mut wins = 0;
    let mut conflicts = 0;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(Appended::Committed(receipt))) => {
                wins += 1;
                assert_eq!(receipt.revision, 3);
            }
            Ok(Ok(Appended::Replayed(receipt))) => {
                panic!("a new operation was answered as a replay: {receipt:?}")
            }
            Ok(Err(StoreError::Conflict {
                expected: 2,
                current: 3,
            })) => conflicts += 1,
            Ok(Err(error)) => panic!("a concurrent append failed otherwise: {error}"),
            Err(error) => panic!("a concurrent append panicked: {error}"),
        }
    }
    assert_eq!((wins, conflicts), (1, 7));
    let events = all_events(&*store, &goal_id).await;
    assert_eq!(events.len(), 3);
    assert_eq!(fold(&events), load(&*store, &goal_id).await);
}

/// Many appends of one operation with one payload at once (the same commit retried by several
/// processes, half of them through a second handle where the backend has one): exactly one is
/// answered `Committed`, every other `Replayed` with the same receipt, and the log holds the
/// events once. Through `submit` alike: of concurrent submissions of one operation, exactly
/// one says it committed. `resolve` never claims a commit for an attempt it did not record.
pub async fn concurrent_duplicates_have_one_committer<B: Backend>(backend: &B) {
    const WRITERS: usize = 16;
    let store = Arc::new(backend.fresh().await);
    let second = backend.second(&store).await.map(Arc::new);
    let mut goal = Goal::create(&*store, spec("g", &["a"]), at(0)).await;
    goal.run(&ag("a"), at(1), add("t0")).await;
    let state = goal.state().await;
    let goal_id = goal.id.clone();
    let command = add("t1");
    let once = commit(
        Some(&state),
        request(
            &goal_id,
            2,
            "dup",
            &ag("a"),
            at(2),
            &command,
            events_of(&state, &ag("a"), at(2), &command),
        ),
    );
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..WRITERS {
        let commit = once.clone();
        let target = match (&second, i % 2) {
            (Some(other), 1) => Arc::clone(other),
            _ => Arc::clone(&store),
        };
        tasks.spawn(async move { target.append(commit).await });
    }
    let mut answers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(answer) => answers.push(ok(answer, "a duplicate append")),
            Err(error) => panic!("a duplicate append panicked: {error}"),
        }
    }
    let winners = answers.iter().filter(|a| a.is_committed()).count();
    assert_eq!(winners, 1, "exactly one append commits: {answers:?}");
    let first = answers[0].receipt().clone();
    assert!(answers.iter().all(|a| a.receipt() == &first), "{answers:?}");
    assert_eq!((first.revision, first.events), (3, 1));
    assert_eq!(all_events(&*store, &goal_id).await.len(), 3);

    // An attempt the store never recorded proves nothing; an operation never committed is none.
    let resolved = ok(
        store.resolve(&goal_id, &id("dup"), "not-an-attempt").await,
        "resolve",
    );
    assert_eq!(resolved, Some(Appended::Replayed(first)));
    let absent = ok(store.resolve(&goal_id, &id("never"), "").await, "resolve");
    assert_eq!(absent, None);

    // Through submit, at one revision and one time, from as many tasks.
    let command = add("t2");
    let op: OperationId = id("dup-submit");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..WRITERS {
        let (command, op, goal_id) = (command.clone(), op.clone(), goal_id.clone());
        let store = match (&second, i % 2) {
            (Some(other), 1) => Arc::clone(other),
            _ => Arc::clone(&store),
        };
        tasks.spawn(async move { submit(&*store, &goal_id, &ag("a"), at(3), &command, &op).await });
    }
    let mut done = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(submitted)) => done.push(submitted),
            Ok(Err(error)) => panic!("a duplicate submit failed: {error}"),
            Err(error) => panic!("a duplicate submit panicked: {error}"),
        }
    }
    let committed: Vec<&Submitted> = done.iter().filter(|d| !d.replayed).collect();
    assert_eq!(committed.len(), 1, "exactly one submit commits");
    assert_eq!(committed[0].events.len(), 1);
    assert!(done.iter().all(|d| d.receipt == committed[0].receipt));
    assert!(
        done.iter()
            .filter(|d| d.replayed)
            .all(|d| d.events.is_empty())
    );
    assert_eq!(all_events(&*store, &goal_id).await.len(), 4);
}

/// What one concurrent append of [`concurrent_commits_keep_their_own_outcomes`] must be told.
enum Expect {
    /// Written, at this revision.
    Committed(u64),
    /// A replay of this receipt.
    Replayed(Receipt),
    /// A compare-and-set conflict with this expected revision (the goal stands at one of two
    /// revisions, by whether the round's winner on it was written first).
    Conflict(u64, [u64; 2]),
    /// The operation id is taken by another payload.
    OperationConflict,
    /// Ahead of the store's clock.
    ClockAhead,
}

fn check_expected(op: &str, expect: &Expect, answer: &Result<Appended, StoreError>) {
    let fits = match (expect, answer) {
        (Expect::Committed(revision), Ok(Appended::Committed(receipt))) => {
            receipt.revision == *revision
        }
        (Expect::Replayed(first), Ok(Appended::Replayed(receipt))) => receipt == first,
        (
            Expect::Conflict(expected, currents),
            Err(StoreError::Conflict {
                expected: e,
                current,
            }),
        ) => e == expected && currents.contains(current),
        (Expect::OperationConflict, Err(StoreError::OperationConflict { operation })) => {
            operation.as_str() == op
        }
        (Expect::ClockAhead, Err(StoreError::ClockAhead { .. })) => true,
        _ => false,
    };
    assert!(fits, "`{op}` was answered {answer:?}");
}

/// An append of [`concurrent_commits_keep_their_own_outcomes`]: its operation id, the commit
/// and what it must be told.
type Expected = (String, Commit, Expect);

/// The round before's winner on `g` (retried, it replays) with its receipt, and the operation id
/// of the winner on `h` (reused with another payload).
type LastRound = Option<(Commit, Receipt, String)>;

/// One round's appends on goals `g` and `h` as they stand (`g` created at revision 1) and on
/// `quiet`, which no commit moves (so that the commit ahead of the clock is refused for its
/// time alone, whichever check a backend runs first).
fn round_appends(
    round: usize,
    (state_g, state_h): (&GoalState, &GoalState),
    (genesis_g, quiet): (&GoalState, &GoalState),
    last: LastRound,
) -> Vec<Expected> {
    let minute = i64::try_from(round).unwrap_or(0) + 1;
    let rev_g = state_g.revision;
    let append = |state: &GoalState, op: &str, now: Timestamp, name: &str| {
        let command = add(name);
        let events = events_of(state, &ag("a"), now, &command);
        let req = request(
            &state.spec.id,
            state.revision,
            op,
            &ag("a"),
            now,
            &command,
            events,
        );
        commit(Some(state), req)
    };
    let mut appends: Vec<Expected> = Vec::new();
    for state in [state_g, state_h] {
        let op = format!("win-{}-{round}", state.spec.id);
        let name = format!("{}-{round}", state.spec.id);
        let expect = Expect::Committed(state.revision + 1);
        appends.push((op.clone(), append(state, &op, at(minute), &name), expect));
    }
    let op = format!("stale-{round}");
    let stale = append(genesis_g, &op, at(minute), &op);
    appends.push((op, stale, Expect::Conflict(1, [rev_g, rev_g + 1])));
    let op = format!("ahead-{round}");
    let ahead = append(quiet, &op, wall_clock().plus(Duration::hours(1)), &op);
    appends.push((op, ahead, Expect::ClockAhead));
    if let Some((retry, first, taken)) = last {
        let op = retry.request().operation.to_string();
        appends.push((op, retry, Expect::Replayed(first)));
        let other = append(state_h, &taken, at(minute), &format!("other-{round}"));
        appends.push((taken, other, Expect::OperationConflict));
    }
    appends
}

/// Appends every commit of `appends` at once through `store`, each from a task of its own;
/// their answers, in order.
async fn all_at_once<S: Store + 'static>(
    store: &Arc<S>,
    appends: &[Expected],
) -> Vec<Result<Appended, StoreError>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (n, (_, append, _)) in appends.iter().enumerate() {
        let (store, append) = (Arc::clone(store), append.clone());
        tasks.spawn(async move { (n, store.append(append).await) });
    }
    let mut answers: Vec<Option<Result<Appended, StoreError>>> =
        appends.iter().map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((n, answer)) => answers[n] = Some(answer),
            Err(error) => panic!("a concurrent append panicked: {error}"),
        }
    }
    answers
        .into_iter()
        .zip(appends)
        .map(|(answer, (op, _, _))| answer.unwrap_or_else(|| panic!("`{op}` was never answered")))
        .collect()
}

/// Commits through one handle at once, as many agents of one host make them (on a backend with
/// group commit, they share transactions): in each round, a commit on each of two goals, a
/// stale one that conflicts, a retry of an earlier commit that replays, an operation id reused
/// with another payload and a commit ahead of the store's clock (on a third goal). Each is told exactly its own
/// outcome, whatever else its group held, and the store holds exactly the winners.
pub async fn concurrent_commits_keep_their_own_outcomes<B: Backend>(backend: &B) {
    const ROUNDS: usize = 6;
    let store = Arc::new(backend.fresh().await);
    let g = Goal::create(&*store, spec("g", &["a"]), at(0)).await.id;
    let h = Goal::create(&*store, spec("h", &["a"]), at(0)).await.id;
    let quiet = Goal::create(&*store, spec("quiet", &["a"]), at(0)).await.id;
    let genesis_g = fold(&ok(store.events(&g, 0, 1).await, "events"));
    let quiet_state = load(&*store, &quiet).await;
    let mut last: LastRound = None;
    for round in 0..ROUNDS {
        let (state_g, state_h) = (load(&*store, &g).await, load(&*store, &h).await);
        let appends = round_appends(
            round,
            (&state_g, &state_h),
            (&genesis_g, &quiet_state),
            last.take(),
        );
        let answers = all_at_once(&store, &appends).await;
        for ((op, _, expect), answer) in appends.iter().zip(&answers) {
            check_expected(op, expect, answer);
        }
        let first = match &answers[0] {
            Ok(appended) => appended.receipt().clone(),
            Err(error) => panic!("the winner on `g` failed: {error}"),
        };
        last = Some((appends[0].1.clone(), first, format!("win-{h}-{round}")));
    }
    // Exactly the winners are stored, and every goal loads as its history folds.
    for goal in [&g, &h] {
        let events = all_events(&*store, goal).await;
        assert_eq!(events.len(), 1 + ROUNDS, "`{goal}` holds {events:?}");
        assert_eq!(fold(&events), load(&*store, goal).await);
    }
    assert_eq!(load(&*store, &quiet).await, quiet_state);
    for round in 0..ROUNDS {
        for op in [format!("stale-{round}"), format!("ahead-{round}")] {
            for goal in [&g, &h, &quiet] {
                let receipt = ok(store.receipt(goal, &id(&op)).await, "receipt");
                assert_eq!(
                    receipt, None,
                    "the refused `{op}` left a receipt on `{goal}`"
                );
            }
        }
    }
}

/// Three batches after revision 2 of a goal with todo `t1` that do not fold: a revision gap,
/// a settlement of a turn never begun, a second `goal_created`.
fn bad_batches(goal: &GoalId, state: &GoalState, command: &Command) -> [AppendRequest; 3] {
    let mut gap = request(
        goal,
        2,
        "gap",
        &ag("a"),
        at(2),
        command,
        events_of(state, &ag("a"), at(2), command),
    );
    gap.events[0].revision = 4;
    let settled = Event::TurnSettled {
        todo: id("t1"),
        epoch: 1,
        turn: id("never-begun"),
        verdict: Verdict {
            validator: validator(),
            outcome: VerdictOutcome::Passed,
            summary: String::new(),
            signature: None,
        },
        evidence: vec![],
        observations: vec![],
        transition: SettledTransition::KeepOpen,
        charged: Amounts::ONE_TURN,
        overrun: Amounts::ZERO,
        result: None,
    };
    let contradicts = request(
        goal,
        2,
        "contradicts",
        &ag("a"),
        at(2),
        command,
        vec![settled],
    );
    let created = Event::GoalCreated {
        spec: spec(goal.as_str(), &["a"]),
    };
    let twice = request(goal, 2, "twice", &owner(), at(2), command, vec![created]);
    [gap, contradicts, twice]
}

/// A batch that does not fold into the goal's state never reaches the store: the kernel's
/// `Commit::fold`, the only way to build what `append` takes, refuses it with a typed error, and
/// nothing is written: a revision gap, an event that contradicts the state, a genesis for
/// another goal, a batch folded onto another state than the goal's at its expected revision, an
/// empty batch for a goal that does not exist.
pub async fn batches_that_do_not_apply_are_refused<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    goal.run(&ag("a"), at(1), add("t1")).await;
    let before = goal.state().await;
    let events_before = all_events(&store, &goal.id).await;
    let command = add("t2");

    let [gap, contradicts, twice] = bad_batches(&goal.id, &before, &command);
    for bad in [gap, contradicts, twice] {
        let op = bad.operation.clone();
        match Commit::fold(Some(before.clone()), bad) {
            Err(StoreError::InvalidBatch { .. }) => {}
            other => panic!("`{op}` must be refused as an invalid batch, got {other:?}"),
        }
        assert_eq!(ok(store.receipt(&goal.id, &op).await, "receipt"), None);
    }
    let valid = request(
        &goal.id,
        2,
        "valid",
        &ag("a"),
        at(2),
        &command,
        events_of(&before, &ag("a"), at(2), &command),
    );
    let genesis = fold(&events_before[..1]);
    for base in [Some(genesis), None] {
        match Commit::fold(base, valid.clone()) {
            Err(StoreError::InvalidBatch { .. }) => {}
            other => panic!("a batch folded onto another state must be refused, got {other:?}"),
        }
    }
    assert_eq!(goal.state().await, before);
    assert_eq!(all_events(&store, &goal.id).await, events_before);

    let elsewhere: GoalId = id("elsewhere");
    let create = Command::CreateGoal {
        spec: spec("g2", &["a"]),
    };
    let wrong_goal = request(
        &elsewhere,
        0,
        "wrong",
        &owner(),
        at(3),
        &create,
        vec![Event::GoalCreated {
            spec: spec("g2", &["a"]),
        }],
    );
    assert!(matches!(
        Commit::fold(None, wrong_goal),
        Err(StoreError::InvalidBatch { .. })
    ));
    let empty = request(&elsewhere, 0, "empty", &owner(), at(3), &create, vec![]);
    assert_eq!(
        Commit::fold(None, empty),
        Err(StoreError::UnknownGoal {
            goal: elsewhere.clone()
        })
    );
    assert_eq!(ok(store.load(&elsewhere).await, "load"), None);
    assert_eq!(ok(store.load(&id("g2")).await, "load"), None);
    match submit(
        &store,
        &elsewhere,
        &owner(),
        at(3),
        &create,
        &id("mismatch"),
    )
    .await
    {
        Err(SubmitError::GoalMismatch { goal, created }) => {
            assert_eq!((goal, created), (elsewhere.clone(), id("g2")));
        }
        other => panic!("a create_goal of another goal must be refused, got {other:?}"),
    }
    assert_eq!(ok(store.goals(at(3)).await, "goals").len(), 1);
}

/// A batch without events records a no-op receipt at the current revision and changes nothing
/// else; an unchanged observation submitted twice is such a no-op.
pub async fn empty_batch_records_a_no_op<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    let provider = Actor::Provider(id::<SourceId>("github"));
    let first = goal
        .run(&provider, at(1), observation("ci:acme", "f1", 1))
        .await;
    assert_eq!(first.events.len(), 1);
    let before = goal.state().await;
    let unchanged = goal
        .run(&provider, at(2), observation("ci:acme", "f1", 2))
        .await;
    assert!(unchanged.events.is_empty() && !unchanged.replayed);
    assert_eq!(unchanged.receipt.events, 0);
    assert_eq!(unchanged.receipt.revision, 2);
    assert_eq!(unchanged.state, before);
    assert_eq!(goal.state().await, before);
    assert_eq!(all_events(&store, &goal.id).await.len(), 2);
    let op = unchanged.receipt.operation.clone();
    assert_eq!(
        ok(store.receipt(&goal.id, &op).await, "receipt"),
        Some(unchanged.receipt.clone())
    );

    let raw = request(
        &goal.id,
        2,
        "noop",
        &provider,
        at(3),
        &observation("ci:acme", "f1", 3),
        vec![],
    );
    let raw = commit(Some(&before), raw);
    let receipt = committed(store.append(raw.clone()).await, "empty append");
    assert_eq!((receipt.revision, receipt.events), (2, 0));
    assert_eq!(
        replayed(store.append(raw).await, "retried empty append"),
        receipt
    );
    let stale = request(
        &goal.id,
        1,
        "stale-noop",
        &provider,
        at(3),
        &observation("ci:acme", "f1", 3),
        vec![],
    );
    let genesis = fold(&all_events(&store, &goal.id).await[..1]);
    assert_eq!(
        store.append(commit(Some(&genesis), stale)).await,
        Err(StoreError::Conflict {
            expected: 1,
            current: 2
        })
    );
    assert_eq!(goal.state().await, before);
}

/// Commits a competing command just before forwarding an append, `remaining` times: the
/// submit under test must see the goal move and validate again.
struct Competitor {
    goal: GoalId,
    remaining: Mutex<u32>,
    injected: Mutex<u32>,
}

#[async_trait]
impl<S: Store> AppendHook<S> for Competitor {
    async fn before(&self, store: &S, _: &AppendRequest) {
        let inject = {
            let mut remaining = self
                .remaining
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let inject = *remaining > 0;
            *remaining = remaining.saturating_sub(1);
            inject
        };
        if inject {
            let n = {
                let mut injected = self.injected.lock().unwrap_or_else(PoisonError::into_inner);
                *injected += 1;
                *injected
            };
            let op: OperationId = id(&format!("competitor-{n}"));
            let command = add(&format!("competing-{n}"));
            if let Err(error) = submit(store, &self.goal, &ag("b"), at(5), &command, &op).await {
                panic!("the competing commit failed: {error}");
            }
        }
    }
}

/// [`submit`] validates again when the goal moved between its load and its append, and gives
/// up with [`SubmitError::Contended`] after [`MAX_ATTEMPTS`] moves, having written nothing.
pub async fn submit_revalidates_after_a_moved_goal<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await.id;
    let racing = Hooked {
        inner: store,
        hook: Competitor {
            goal: goal.clone(),
            remaining: Mutex::new(2),
            injected: Mutex::new(0),
        },
    };
    let done = match submit(&racing, &goal, &ag("a"), at(6), &add("mine"), &id("mine")).await {
        Ok(done) => done,
        Err(error) => panic!("submit under contention failed: {error}"),
    };
    assert!(!done.replayed);
    assert_eq!(done.receipt.revision, 4, "two competing commits, then ours");
    assert_eq!(done.state, load(&racing.inner, &goal).await);
    assert_eq!(fold(&all_events(&racing.inner, &goal).await), done.state);

    let store = racing.inner;
    let hopeless = Hooked {
        inner: store,
        hook: Competitor {
            goal: goal.clone(),
            remaining: Mutex::new(u32::MAX),
            injected: Mutex::new(2),
        },
    };
    match submit(
        &hopeless,
        &goal,
        &ag("a"),
        at(7),
        &add("never"),
        &id("never"),
    )
    .await
    {
        Err(SubmitError::Contended { attempts, .. }) => assert_eq!(attempts, MAX_ATTEMPTS),
        other => panic!("a goal that always moves must end in contention, got {other:?}"),
    }
    let store = hopeless.inner;
    assert_eq!(
        ok(store.receipt(&goal, &id("never")).await, "receipt"),
        None
    );
    let state = load(&store, &goal).await;
    assert!(state.todos.get(&id::<TodoId>("never")).is_none());
}

/// A handle's cached state ([`Store::cached`]) may lag behind commits made through another
/// handle; `submit` through the lagging handle still validates against the goal as it is: a
/// command that only the newer state allows commits, one that only the older state allows is
/// refused, and nothing lands at a stale revision.
pub async fn submit_sees_through_a_stale_cache<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let second = backend.second(&store).await;
    let other: &B::Store = second.as_ref().unwrap_or(&store);
    let goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await.id;
    let committed = |result: Result<_, SubmitError>, what: &str| match result {
        Ok(done) => done,
        Err(error) => panic!("{what} failed: {error}"),
    };
    committed(
        submit(&store, &goal, &owner(), at(1), &add("t"), &id("add-t")).await,
        "adding t",
    );
    // Another handle moves the goal on: `u` exists, `t` is claimed by b.
    committed(
        submit(other, &goal, &owner(), at(2), &add("u"), &id("add-u")).await,
        "adding u through the other handle",
    );
    committed(
        submit(
            other,
            &goal,
            &ag("b"),
            at(2),
            &claim("t", 30),
            &id("b-claims-t"),
        )
        .await,
        "b claiming t through the other handle",
    );

    // Only the newer state has `u`: the claim commits after both commits of the other handle.
    let done = committed(
        submit(
            &store,
            &goal,
            &ag("a"),
            at(3),
            &claim("u", 30),
            &id("a-claims-u"),
        )
        .await,
        "claiming u through the lagging handle",
    );
    assert!(!done.replayed);
    assert_eq!(done.state, load(other, &goal).await);
    assert_eq!(done.receipt.revision, done.state.revision);
    assert_eq!(fold(&all_events(other, &goal).await), done.state);

    // Only the older state has `t` free: a's claim of it is refused, and nothing changed.
    let before = load(other, &goal).await;
    match submit(
        &store,
        &goal,
        &ag("a"),
        at(4),
        &claim("t", 30),
        &id("a-claims-t"),
    )
    .await
    {
        Err(SubmitError::Refused(_)) => {}
        other => panic!("claiming a todo held by another agent must be refused, got {other:?}"),
    }
    assert_eq!(load(other, &goal).await, before);
    if let Some(cached) = store.cached(&goal) {
        assert!(
            cached.revision <= before.revision,
            "a handle's cache must never run ahead of the goal"
        );
    }
}

/// Epochs fence settlement: after an idempotent todo's lease expired and another agent took it
/// over, the first holder's settlement (and any begin) under the old epoch is refused through
/// [`submit`] and changes nothing; the new holder settles under the new epoch.
pub async fn stale_epochs_never_settle<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    let mut work = todo("t1");
    work.idempotent = true;
    goal.run(&ag("a"), at(0), Command::AddTodo { todo: work })
        .await;
    goal.run(&ag("a"), at(0), claim("t1", 10)).await;
    goal.run(&ag("a"), at(1), begin("t1", 1, "turn-a")).await;
    let taken = goal.run(&ag("b"), at(11), claim("t1", 10)).await;
    assert_eq!(lease_epoch(&taken.state, "t1"), 2);
    for command in [settle("t1", 1, "turn-a", done()), begin("t1", 1, "turn-a2")] {
        match goal.refused(&ag("a"), at(12), command).await {
            Refusal::StaleLeaseEpoch {
                presented, current, ..
            } => assert_eq!((presented, current), (1, 2)),
            other => panic!("a stale epoch must be refused as such, got {other}"),
        }
    }
    let spent = goal.state().await.ledger.spent;
    assert_eq!(
        spent,
        Amounts::ZERO,
        "a refused settlement charged something"
    );
    goal.run(&ag("b"), at(12), begin("t1", 2, "turn-b")).await;
    let settled = goal
        .run(&ag("b"), at(13), settle("t1", 2, "turn-b", done()))
        .await;
    assert_eq!(settled.state.ledger.spent.turns, 1);
    let settlements: Vec<u64> = all_events(&store, &goal.id)
        .await
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnSettled { epoch, .. } => Some(*epoch),
            _ => None,
        })
        .collect();
    assert_eq!(settlements, vec![2]);
}

/// A turn is charged once: a retried settlement replays its receipt, a second settlement of the
/// same turn is refused, and the log holds exactly one `turn_settled` for it.
pub async fn charge_is_exactly_once<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut limited = spec("g", &["a"]);
    limited.budget = Limits {
        turns: Some(5),
        ..Limits::UNLIMITED
    };
    let mut goal = Goal::create(&store, limited, at(0)).await;
    goal.run(&ag("a"), at(0), add("t1")).await;
    goal.run(&ag("a"), at(0), claim("t1", 30)).await;
    goal.run(&ag("a"), at(1), begin("t1", 1, "turn-1")).await;
    let command = settle("t1", 1, "turn-1", Transition::KeepOpen);
    let op: OperationId = id("settle-turn-1");
    let first = match submit(&store, &goal.id, &ag("a"), at(2), &command, &op).await {
        Ok(first) => first,
        Err(error) => panic!("settling failed: {error}"),
    };
    assert_eq!(first.state.ledger.spent.turns, 1);
    assert_eq!(first.state.ledger.spent.tokens, 100);
    assert_eq!(first.state.ledger.reserved, Amounts::ZERO);
    for minutes in [3, 4] {
        match submit(&store, &goal.id, &ag("a"), at(minutes), &command, &op).await {
            Ok(again) => {
                assert!(again.replayed);
                assert_eq!(again.receipt, first.receipt);
                assert_eq!(again.state.ledger.spent.turns, 1);
            }
            Err(error) => panic!("a retried settlement failed: {error}"),
        }
    }
    goal.refused(&ag("a"), at(5), command.clone()).await;
    let settled = all_events(&store, &goal.id)
        .await
        .iter()
        .filter(
            |e| matches!(&e.event, Event::TurnSettled { turn, .. } if turn.as_str() == "turn-1"),
        )
        .count();
    assert_eq!(settled, 1);
    assert_eq!(goal.state().await.ledger.spent.turns, 1);
}

/// Folding a goal's stored events reproduces the loaded state exactly (past several snapshot
/// intervals), and reading the events in pages gives the same history.
pub async fn stored_events_replay_to_the_loaded_state<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    for i in 0..60 {
        let name = format!("t{i}");
        goal.run(&ag("a"), at(i), add(&name)).await;
        let who = if i % 2 == 0 { "a" } else { "b" };
        let transition = if i % 3 == 0 {
            Transition::KeepOpen
        } else {
            done()
        };
        goal.work(who, &name, at(i), transition).await;
    }
    let loaded = goal.state().await;
    assert_eq!(loaded.revision, 241);
    let events = all_events(&store, &goal.id).await;
    assert_eq!(events.len(), 241);
    let folded = fold(&events);
    assert_eq!(folded, loaded);
    assert_eq!(
        json(&folded),
        json(&loaded),
        "replay must reproduce the state bit for bit"
    );
    let mut paged = Vec::new();
    loop {
        let after = paged.last().map_or(0, |e: &RecordedEvent| e.revision);
        let page = ok(store.events(&goal.id, after, 7).await, "events");
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 7);
        paged.extend(page);
    }
    assert_eq!(paged, events);
    assert!(ok(store.events(&goal.id, 241, 10).await, "events").is_empty());
    assert!(ok(store.events(&goal.id, 0, 0).await, "events").is_empty());
    assert_eq!(
        ok(store.events(&goal.id, 100, 1).await, "events")[0].revision,
        101
    );
}

/// What the kernel says about every goal at `now`, as the cross-goal queries must answer it.
async fn expected_queries<S: Store + ?Sized>(
    store: &S,
    goals: &[GoalId],
    agents: &[&str],
    now: Timestamp,
) -> (
    Vec<GoalSummary>,
    BTreeMap<String, Vec<(GoalId, TodoId)>>,
    Option<Timestamp>,
) {
    let mut summaries = Vec::new();
    let mut states = Vec::new();
    for goal in goals {
        let state = load(store, goal).await;
        summaries.push(GoalSummary {
            goal: goal.clone(),
            objective: state.spec.objective.clone(),
            status: match terminal(&state, now) {
                None => GoalStatus::Active,
                Some(loopx_kernel::TerminalOutcome::Accepted) => GoalStatus::Accepted,
                Some(loopx_kernel::TerminalOutcome::Abandoned) => GoalStatus::Abandoned,
            },
            revision: state.revision,
            next_wake: next_wake(&state, now),
        });
        states.push(state);
    }
    summaries.sort_by(|a, b| a.goal.cmp(&b.goal));
    let mut frontiers = BTreeMap::new();
    for name in agents {
        let who = agent(name);
        let mut rows = Vec::new();
        for state in &states {
            for (rank, todo) in frontier(state, &who, now).into_iter().enumerate() {
                let priority = state.todos.get(&todo).map(|t| t.priority);
                rows.push((priority, state.spec.id.clone(), rank, todo));
            }
        }
        rows.sort();
        frontiers.insert(
            (*name).to_owned(),
            rows.into_iter().map(|(_, g, _, t)| (g, t)).collect(),
        );
    }
    let wake = summaries.iter().filter_map(|s| s.next_wake).min();
    (summaries, frontiers, wake)
}

async fn check_queries<S: Store + ?Sized>(
    store: &S,
    goals: &[GoalId],
    agents: &[&str],
    now: Timestamp,
) {
    let (summaries, frontiers, wake) = expected_queries(store, goals, agents, now).await;
    assert_eq!(
        ok(store.goals(now).await, "goals"),
        summaries,
        "goals at {now}"
    );
    for name in agents {
        let got = ok(store.frontier(&agent(name), now).await, "frontier");
        assert_eq!(&got, &frontiers[*name], "frontier of `{name}` at {now}");
    }
    assert_eq!(
        ok(store.next_wake(now).await, "next_wake"),
        wake,
        "next wake at {now}"
    );
}

/// The cross-goal queries — goals by standing, an agent's frontier across goals, the earliest
/// wake — answer exactly what the kernel computes from each loaded goal, at times before,
/// between and after the instants where time alone changes a goal, asked in any order.
pub async fn cross_goal_queries_match_the_kernel<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut g1 = Goal::create(&store, spec("g1", &["a", "b"]), at(0)).await;
    g1.run(&ag("a"), at(0), add("t1")).await;
    let mut urgent = todo("t2");
    urgent.priority = Priority::P0;
    g1.run(&ag("a"), at(0), Command::AddTodo { todo: urgent })
        .await;
    g1.run(&ag("a"), at(1), claim("t1", 10)).await;

    let mut g2 = Goal::create(&store, spec("g2", &["b", "c"]), at(0)).await;
    g2.run(&ag("b"), at(0), add("u1")).await;
    g2.run(
        &ag("b"),
        at(0),
        Command::Defer {
            todo: id("u1"),
            until: ResumeCondition::At { at: at(30) },
            grant_reason: None,
        },
    )
    .await;
    let mut soon = todo("u2");
    soon.priority = Priority::P1;
    g2.run(&ag("c"), at(0), Command::AddTodo { todo: soon })
        .await;

    let mut g3 = Goal::create(&store, spec("g3", &["a"]), at(0)).await;
    g3.run(
        &owner(),
        at(2),
        Command::DeclareClosure {
            reason: "nothing to do".into(),
        },
    )
    .await;
    let mut g4 = Goal::create(&store, spec("g4", &["a", "c"]), at(0)).await;
    g4.run(&ag("a"), at(0), add("v1")).await;
    g4.run(
        &owner(),
        at(3),
        Command::AbandonGoal {
            reason: "not needed".into(),
        },
    )
    .await;

    let goals: Vec<GoalId> = ["g1", "g2", "g3", "g4"].iter().map(|g| id(g)).collect();
    let agents = ["a", "b", "c", "d"];
    let statuses: Vec<GoalStatus> = ok(store.goals(at(5)).await, "goals")
        .iter()
        .map(|s| s.status)
        .collect();
    assert_eq!(
        statuses,
        vec![
            GoalStatus::Active,
            GoalStatus::Active,
            GoalStatus::Accepted,
            GoalStatus::Abandoned
        ]
    );
    assert_eq!(
        ok(store.next_wake(at(5)).await, "next_wake"),
        Some(at(11)),
        "the lease on t1 expires first"
    );
    for minutes in [5, 11, 12, 29, 30, 45, 11, -60, 3, 100, 30] {
        check_queries(&store, &goals, &agents, at(minutes)).await;
    }
    // A commit moves the rows; queries before and after it agree with the kernel.
    g2.run(&ag("b"), at(31), claim("u1", 5)).await;
    for minutes in [31, 35, 36, 20, 40] {
        check_queries(&store, &goals, &agents, at(minutes)).await;
    }
}

/// Index rows that a query recomputed through another handle (time passed, a lease expired)
/// are not mistaken for the rows of the commit before: the next commit through the first
/// handle leaves rows that answer what the kernel computes.
pub async fn commits_after_a_refresh_elsewhere_keep_the_rows_exact<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let second = backend.second(&store).await;
    let other: &B::Store = second.as_ref().unwrap_or(&store);
    let goal = Goal::create(&store, spec("g", &["a"]), at(0)).await.id;
    let commit = async |store: &B::Store, actor: Actor, t: i64, command: Command, op: &str| {
        if let Err(error) = submit(store, &goal, &actor, at(t), &command, &id(op)).await {
            panic!("{op} failed: {error}");
        }
    };
    commit(&store, owner(), 1, add("t"), "add-t").await;
    // a holds t until minute 12: t is in no frontier.
    commit(&store, ag("a"), 2, claim("t", 10), "a-claims-t").await;
    check_queries(&store, std::slice::from_ref(&goal), &["a"], at(3)).await;
    // The lease lapsed: the other handle's query recomputes the rows, with t free again.
    let free = ok(other.frontier(&agent("a"), at(20)).await, "frontier");
    assert_eq!(free, vec![(goal.clone(), id("t"))]);
    // a claims t again through the first handle: the rows are as they were at minute 2, but
    // not as stored now.
    commit(&store, ag("a"), 21, claim("t", 30), "a-claims-t-again").await;
    for handle in [&store, other] {
        check_queries(handle, std::slice::from_ref(&goal), &["a"], at(22)).await;
        assert_eq!(
            ok(handle.frontier(&agent("a"), at(22)).await, "frontier"),
            vec![]
        );
    }
}

/// Compaction keeps `load` equal, keeps the events after the compaction point and a base
/// snapshot they fold onto, keeps every receipt (idempotency and the audit trail survive), and
/// the goal keeps working afterwards.
pub async fn compaction_keeps_load_and_audit<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    assert!(matches!(
        store.compact(&id("nowhere"), 5).await,
        Err(StoreError::UnknownGoal { .. })
    ));
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    let first_op: OperationId = id("first-add");
    let first = match submit(&store, &goal.id, &ag("a"), at(0), &add("t0"), &first_op).await {
        Ok(first) => first,
        Err(error) => panic!("submit failed: {error}"),
    };
    for i in 1..12 {
        let name = format!("t{i}");
        goal.run(&ag("a"), at(i), add(&name)).await;
        goal.work("b", &name, at(i), done()).await;
    }
    let loaded = goal.state().await;
    let operations = ok(
        store.operations(&goal.id, 0, usize::MAX).await,
        "operations",
    );
    assert_eq!(operations.len(), 2 + 11 * 4);
    assert_eq!(operations[1].receipt, first.receipt);
    assert_eq!(operations[1].actor, Some(ag("a")));
    assert_eq!(operations[1].events, vec!["todo_added".to_owned()]);
    assert_eq!(ok(store.base(&goal.id).await, "base"), None);

    let compaction = ok(store.compact(&goal.id, 20).await, "compact");
    assert_eq!(
        (compaction.base_revision, compaction.events_removed),
        (20, 20)
    );
    assert_eq!(goal.state().await, loaded);
    let kept = all_events(&store, &goal.id).await;
    assert_eq!(kept.first().map(|e| e.revision), Some(21));
    assert_eq!(kept.last().map(|e| e.revision), Some(loaded.revision));
    let base = ok(store.base(&goal.id).await, "base")
        .map_or_else(|| panic!("no base snapshot"), |b| b.state);
    assert_eq!(base.revision, 20);
    let mut refolded = base;
    for event in &kept {
        if let Err(error) = refolded.apply(event) {
            panic!("the kept events do not fold onto the base: {error}");
        }
    }
    assert_eq!(refolded, loaded);
    assert_eq!(
        ok(
            store.operations(&goal.id, 0, usize::MAX).await,
            "operations"
        ),
        operations
    );
    match submit(&store, &goal.id, &ag("a"), at(30), &add("t0"), &first_op).await {
        Ok(again) => assert!(again.replayed && again.receipt == first.receipt),
        Err(error) => panic!("an operation compacted away must still replay: {error}"),
    }

    let none = ok(store.compact(&goal.id, 10).await, "compact");
    assert_eq!((none.base_revision, none.events_removed), (20, 0));
    let all = ok(store.compact(&goal.id, u64::MAX).await, "compact");
    assert_eq!(all.base_revision, loaded.revision);
    assert_eq!(all.events_removed, loaded.revision - 20);
    assert_eq!(goal.state().await, loaded);
    assert!(all_events(&store, &goal.id).await.is_empty());

    let later = goal.run(&ag("a"), at(40), add("after")).await;
    assert_eq!(later.receipt.revision, loaded.revision + 1);
    assert_eq!(goal.state().await, later.state);
    check_queries(&store, std::slice::from_ref(&goal.id), &["a", "b"], at(41)).await;
    let goal = goal.id.clone();
    let store = backend.reopen(store).await;
    assert_eq!(load(&store, &goal).await, later.state);
    assert_eq!(
        ok(store.operations(&goal, 0, usize::MAX).await, "operations").len(),
        operations.len() + 1
    );
}

/// Compacting up to a revision inside a commit of several events deletes the commit's first
/// events and keeps its last: the commit's receipt, actor and event names stay as they were, its
/// operation still replays, and a later compaction past it changes nothing in the audit trail.
pub async fn compaction_inside_a_commit_keeps_its_receipt<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    goal.run(&ag("a"), at(1), add("t")).await;
    // One commit of three events: three todos added in one batch.
    let before = goal.state().await;
    let mut scratch = before.clone();
    let mut events = Vec::new();
    for name in ["x", "y", "z"] {
        let batch = events_of(&scratch, &owner(), at(2), &add(name));
        for event in stamp(scratch.revision, &owner(), at(2), batch.clone()) {
            if let Err(error) = scratch.apply(&event) {
                panic!("the suite's batch does not fold: {error}");
            }
        }
        events.extend(batch);
    }
    let wide = request(
        &goal.id,
        before.revision,
        "wide",
        &owner(),
        at(2),
        &add("x"),
        events,
    );
    let wide = commit(Some(&before), wide);
    let receipt = committed(store.append(wide.clone()).await, "append");
    assert_eq!(receipt.events, 3);
    goal.run(&ag("a"), at(3), add("after")).await;
    let operations = ok(
        store.operations(&goal.id, 0, usize::MAX).await,
        "operations",
    );
    let loaded = goal.state().await;

    // Up to the commit's second event: its first two go, its last stays.
    let inside = receipt.revision - 1;
    let compaction = ok(store.compact(&goal.id, inside).await, "compact");
    assert_eq!(compaction.base_revision, inside);
    assert_eq!(goal.state().await, loaded);
    let kept = all_events(&store, &goal.id).await;
    assert_eq!(kept.first().map(|e| e.revision), Some(receipt.revision));
    audit_kept(&store, &wide, &receipt, &operations).await;

    let all = ok(store.compact(&goal.id, u64::MAX).await, "compact");
    assert_eq!(all.events_removed, 2);
    audit_kept(&store, &wide, &receipt, &operations).await;
}

/// Every recorded event of `goal`, archived or kept.
async fn recorded<S: Retention + ?Sized>(store: &S, goal: &GoalId) -> Vec<RecordedEvent> {
    ok(history(store, goal, 0, usize::MAX).await, "history")
}

/// Compaction moves the events it takes out of the kept history into the goal's archive: they
/// read back exactly as recorded (whole, by page, and across the base with the kept events),
/// through a reopen and after later commits; every commit still verifies as it did before.
pub async fn compaction_archives_what_it_removes<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    for i in 0..12 {
        let name = format!("t{i}");
        goal.run(&ag("a"), at(i), add(&name)).await;
        goal.work("b", &name, at(i), done()).await;
    }
    let all = all_events(&store, &goal.id).await;
    let loaded = goal.state().await;
    let verified = ok(crate::verify_history(&store, &goal.id).await, "verify");
    assert!(ok(store.archived(&goal.id, 0, usize::MAX).await, "archived").is_empty());
    assert_eq!(recorded(&store, &goal.id).await, all);

    ok(store.compact(&goal.id, 20).await, "compact");
    let archived = ok(store.archived(&goal.id, 0, usize::MAX).await, "archived");
    assert_eq!(archived, all[..20]);
    assert_eq!(recorded(&store, &goal.id).await, all);
    assert_eq!(
        ok(store.archived(&goal.id, 5, 3).await, "a page"),
        all[5..8]
    );
    assert!(ok(store.archived(&goal.id, 20, 10).await, "past the base").is_empty());
    assert_eq!(
        ok(history(&store, &goal.id, 18, 4).await, "across the base"),
        all[18..22]
    );
    assert_eq!(ok(store.archive_origin(&goal.id).await, "origin"), None);
    ok(store.compact(&goal.id, 30).await, "compact again");
    assert_eq!(
        ok(store.archived(&goal.id, 0, usize::MAX).await, "archived"),
        all[..30]
    );
    assert_eq!(
        ok(crate::verify_history(&store, &goal.id).await, "verify"),
        verified
    );
    match GoalState::replay(&recorded(&store, &goal.id).await) {
        Ok(replayed) => assert_eq!(replayed, loaded),
        Err(error) => panic!("the archived and kept events do not replay: {error}"),
    }

    let later = goal.run(&ag("a"), at(40), add("after")).await;
    let id = goal.id.clone();
    let store = backend.reopen(store).await;
    let after = recorded(&store, &id).await;
    assert_eq!(after[..all.len()], all[..]);
    assert_eq!(after.len(), all.len() + 1);
    assert_eq!(load(&store, &id).await, later.state);
    assert!(
        ok(crate::verify_history(&store, &id).await, "verify")
            .findings
            .is_empty()
    );
}

/// A handle compacts a goal on its own by its retention policy (on by default): after the
/// commit that passes a multiple of `every`, only the last `keep_events` events stay kept, the
/// rest read from the archive, and the goal loads and replays as before; a handle with the
/// policy off never compacts.
pub async fn the_retention_policy_compacts_as_a_goal_grows<B: Backend>(backend: &B) {
    let default = backend.fresh().await;
    assert_eq!(default.policy(), RetentionPolicy::default());
    assert!(default.policy().is_on());
    drop(default);
    for policy in [RetentionPolicy::keep(10, 8), RetentionPolicy::off()] {
        let store = backend.fresh_retaining(policy).await;
        assert_eq!(store.policy(), policy);
        let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
        for i in 0..30 {
            goal.run(&ag("a"), at(i), add(&format!("t{i}"))).await;
        }
        let loaded = goal.state().await;
        assert_eq!(loaded.revision, 31);
        let base = ok(store.base(&goal.id).await, "base").map(|b| b.state.revision);
        let kept = all_events(&store, &goal.id).await;
        if policy.is_on() {
            // Revision 16 compacted to 6, revision 24 to 14; 31 passed no multiple of 8.
            assert_eq!(base, Some(14));
            assert_eq!(kept.first().map(|e| e.revision), Some(15));
        } else {
            assert_eq!(base, None);
            assert_eq!(kept.len(), 31);
        }
        let all = recorded(&store, &goal.id).await;
        assert!(all.iter().map(|e| e.revision).eq(1..=31));
        match GoalState::replay(&all) {
            Ok(replayed) => assert_eq!(replayed, loaded),
            Err(error) => panic!("the recorded events do not replay: {error}"),
        }
    }
}

/// The audit trail reads as `operations`, `commit` has `receipt`, and the same append again
/// answers with it.
async fn audit_kept<S: Retention>(
    store: &S,
    commit: &Commit,
    receipt: &Receipt,
    operations: &[OperationRecord],
) {
    let request = commit.request();
    let goal = &request.goal;
    let now = ok(store.operations(goal, 0, usize::MAX).await, "operations");
    assert_eq!(now, operations);
    let found = ok(store.receipt(goal, &request.operation).await, "receipt");
    assert_eq!(found.as_ref(), Some(receipt));
    assert_eq!(
        &replayed(store.append(commit.clone()).await, "append again"),
        receipt
    );
}

/// `latest_operations` reads the audit trail backwards: the reverse of `operations` from any
/// revision, at most `limit` records, each recorded no-op before the commit whose revision it
/// kept (several at one revision newest first); and the same records once compaction dropped
/// their events, and through a reopened store. An unknown goal has none.
pub async fn latest_operations_read_the_audit_backwards<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let latest = async |store: &B::Store, goal: &GoalId, up_to: u64, limit: usize| {
        ok(
            store.latest_operations(goal, up_to, limit).await,
            "latest_operations",
        )
    };
    assert!(
        latest(&store, &id("nowhere"), u64::MAX, 10)
            .await
            .is_empty()
    );
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    let provider = Actor::Provider(id::<SourceId>("github"));
    for i in 1..8 {
        let name = format!("t{i}");
        goal.run(&ag("a"), at(i), add(&name)).await;
        goal.work("b", &name, at(i), done()).await;
        let fingerprint = format!("f{i}");
        goal.run(&provider, at(i), observation("ci:acme", &fingerprint, i))
            .await;
        // Seen again, twice: two recorded no-ops at the observation's revision.
        for _ in 0..2 {
            let unchanged = goal
                .run(&provider, at(i), observation("ci:acme", &fingerprint, i))
                .await;
            assert_eq!(unchanged.receipt.events, 0, "a recorded no-op");
        }
    }
    let head = goal.state().await.revision;
    let forwards = ok(
        store.operations(&goal.id, 0, usize::MAX).await,
        "operations",
    );
    let backwards: Vec<OperationRecord> = forwards.iter().rev().cloned().collect();
    assert_eq!(latest(&store, &goal.id, head, usize::MAX).await, backwards);
    assert_eq!(latest(&store, &goal.id, u64::MAX, 5).await, backwards[..5]);
    assert!(latest(&store, &goal.id, head, 0).await.is_empty());
    assert_eq!(
        (backwards[0].receipt.events, backwards[1].receipt.events),
        (0, 0),
        "the two no-ops first"
    );
    assert_eq!(backwards[2].receipt.revision, backwards[0].receipt.revision);
    assert!(backwards[2].receipt.events > 0, "then the commit they kept");
    assert_eq!(backwards[2].actor, Some(provider.clone()));
    for up_to in [0, 1, 2, head / 2, head - 1, head] {
        let expected: Vec<OperationRecord> = backwards
            .iter()
            .filter(|r| r.receipt.revision <= up_to)
            .take(4)
            .cloned()
            .collect();
        assert_eq!(
            latest(&store, &goal.id, up_to, 4).await,
            expected,
            "up to revision {up_to}"
        );
    }
    let goal = goal.id.clone();
    ok(store.compact(&goal, head / 2).await, "compact");
    assert_eq!(latest(&store, &goal, head, usize::MAX).await, backwards);
    assert_eq!(latest(&store, &goal, head / 2, 3).await, {
        let up_to: Vec<OperationRecord> = backwards
            .iter()
            .filter(|r| r.receipt.revision <= head / 2)
            .take(3)
            .cloned()
            .collect();
        up_to
    });
    ok(store.compact(&goal, u64::MAX).await, "compact");
    assert_eq!(latest(&store, &goal, head, usize::MAX).await, backwards);
    // A wrapper forwards the read.
    let wrapped = Hooked {
        inner: store,
        hook: Unhooked,
    };
    assert_eq!(
        ok(
            wrapped.latest_operations(&goal, head, 7).await,
            "latest_operations through a wrapper"
        ),
        backwards[..7]
    );
    let store = backend.reopen(wrapped.inner).await;
    assert_eq!(latest(&store, &goal, head, usize::MAX).await, backwards);
}

/// A hook that does nothing: a [`Hooked`] store with it is a plain wrapper.
struct Unhooked;

impl<S: Store> AppendHook<S> for Unhooked {}

/// The state a [`PastState`] keeps, or a failure naming the revision.
fn kept(found: Result<Option<PastState>, StoreError>, revision: u64) -> GoalState {
    match ok(found, "state_at") {
        Some(PastState::Kept(state)) => *state,
        other => panic!("revision {revision} is kept, but state_at answered {other:?}"),
    }
}

/// Every state `goal`'s stored history passed through, by revision (index 0 holds none).
async fn states_by_revision<S: Store + ?Sized>(store: &S, goal: &GoalId) -> Vec<Option<GoalState>> {
    let mut states: Vec<Option<GoalState>> = vec![None];
    for event in all_events(store, goal).await {
        let next = match states.last().cloned().flatten() {
            Some(mut state) => {
                if let Err(error) = state.apply(&event) {
                    panic!("the stored events do not fold: {error}");
                }
                state
            }
            None => fold(std::slice::from_ref(&event)),
        };
        states.push(Some(next));
    }
    states
}

/// `state_at` shows the goal as it stood right after each revision, equal to the fold of its
/// events up to there (across the SQL backends' periodic snapshots), and for any other revision
/// names the ones it can show; after a compaction the revisions from its base on read the same,
/// earlier ones are unavailable, and so it stays after more commits and a reopen.
pub async fn past_revisions_read_as_they_stood<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    assert_eq!(
        ok(store.state_at(&id("nowhere"), 1).await, "state_at"),
        None
    );
    let mut goal = Goal::create(&store, spec("g", &["a", "b"]), at(0)).await;
    for i in 1..30 {
        let name = format!("t{i}");
        goal.run(&ag("a"), at(i), add(&name)).await;
        goal.work("b", &name, at(i), done()).await;
    }
    let head = goal.state().await.revision;
    assert!(head > 100, "past the first periodic snapshot: {head}");
    let states = states_by_revision(&store, &goal.id).await;
    let at_revision = |r: u64| states[usize::try_from(r).unwrap_or(usize::MAX)].clone();
    for revision in 1..=head {
        assert_eq!(
            Some(kept(store.state_at(&goal.id, revision).await, revision)),
            at_revision(revision),
            "revision {revision}"
        );
    }
    for outside in [0, head + 1, u64::MAX] {
        assert_eq!(
            ok(store.state_at(&goal.id, outside).await, "state_at"),
            Some(PastState::Unavailable { earliest: 1, head }),
            "revision {outside}"
        );
    }

    // Compaction archives what it removes: every revision still reads as it stood, before
    // the base from the archive.
    let base = head / 2;
    ok(store.compact(&goal.id, base).await, "compact");
    for revision in [0, head + 1] {
        assert_eq!(
            ok(store.state_at(&goal.id, revision).await, "state_at"),
            Some(PastState::Unavailable { earliest: 1, head }),
            "revision {revision} after compacting to {base}"
        );
    }
    for revision in 1..=head {
        assert_eq!(
            Some(kept(store.state_at(&goal.id, revision).await, revision)),
            at_revision(revision),
            "revision {revision} after compacting to {base}"
        );
    }
    ok(store.compact(&goal.id, u64::MAX).await, "compact");
    for revision in [1, head - 1, head] {
        assert_eq!(
            Some(kept(store.state_at(&goal.id, revision).await, revision)),
            at_revision(revision),
            "revision {revision} after compacting everything"
        );
    }
    let later = goal.run(&ag("a"), at(40), add("after")).await;
    assert_eq!(
        kept(store.state_at(&goal.id, head + 1).await, head + 1),
        later.state
    );
    let goal = goal.id.clone();
    // A wrapper forwards the read.
    let wrapped = Hooked {
        inner: store,
        hook: Unhooked,
    };
    assert_eq!(
        Some(kept(wrapped.state_at(&goal, head).await, head)),
        at_revision(head)
    );
    assert_eq!(
        ok(
            wrapped.state_at(&goal, head + 2).await,
            "state_at through a wrapper"
        ),
        Some(PastState::Unavailable {
            earliest: 1,
            head: head + 1
        })
    );
    let store = backend.reopen(wrapped.inner).await;
    assert_eq!(
        Some(kept(store.state_at(&goal, head).await, head)),
        at_revision(head)
    );
    assert_eq!(
        Some(kept(store.state_at(&goal, 1).await, 1)),
        at_revision(1),
        "the archive is read after a reopen"
    );
}

/// The system clock, as the store's own clock reads it (PostgreSQL's server runs beside the
/// tests, on the same clock).
fn wall_clock() -> Timestamp {
    crate::clock::system_now()
}

/// A command's time never moves a goal's time backwards, and cannot run ahead of the store's
/// clock by more than the goal's skew: an agent whose clock is an hour ahead cannot expire
/// another agent's lease and take its todo. The refusal changes nothing, through `submit` and
/// through a direct append alike; an operation that already committed still replays.
pub async fn time_is_bounded_by_the_store_clock<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let now = wall_clock();
    let mut goal = Goal::create(&store, spec("clocked", &["a", "b"]), at(0)).await;
    goal.run(&ag("a"), now, add("t")).await;
    goal.run(&ag("a"), now, claim("t", 30)).await;

    // Behind the goal's last commit: brought up to it, not refused.
    let behind = goal
        .run(&ag("a"), at(1), observation("ci:1", "f1", 1))
        .await;
    assert!(
        behind.events.iter().all(|e| e.at == now),
        "a command behind the goal's time is stamped at the last commit: {:?}",
        behind.events
    );
    assert_eq!(behind.receipt.committed_at, now);
    assert_eq!(behind.state.last_commit(), now);

    // An hour ahead: the lease would have expired by then, but the store's clock says not.
    let ahead = now.plus(Duration::hours(1));
    let before_receipts = all_events(&store, &goal.id).await;
    let refusal = goal.refused(&ag("b"), ahead, claim("t", 30)).await;
    match &refusal {
        Refusal::ClockAhead {
            at,
            store_time,
            skew,
        } => {
            assert_eq!(*at, ahead);
            assert_eq!(*skew, Duration::minutes(2));
            assert!(
                ahead > store_time.plus(*skew) && *store_time >= now,
                "the store's time {store_time} is its clock's, behind {ahead} by more than {skew}"
            );
        }
        other => panic!("an hour ahead is `clock_ahead`, got {other:?}"),
    }
    assert_eq!(refusal.code(), "clock_ahead");
    assert_eq!(all_events(&store, &goal.id).await, before_receipts);
    let state = goal.state().await;
    let lease = state.todos[&id::<TodoId>("t")].lease.as_ref();
    assert_eq!(
        lease.map(|l| l.holder.as_str()),
        Some("a"),
        "a keeps its lease"
    );
    let op = id::<OperationId>(&format!("{}-op-{}", goal.id, goal.ops));
    assert_eq!(
        ok(store.receipt(&goal.id, &op).await, "receipt"),
        None,
        "a refused commit records no receipt"
    );

    // The same through a direct append: nothing is written, whatever the events say.
    let direct = request(
        &goal.id,
        state.revision,
        "direct-ahead",
        &ag("b"),
        ahead,
        &add("u"),
        events_of(&state, &ag("b"), ahead, &add("u")),
    );
    match store.append(commit(Some(&state), direct)).await {
        Err(StoreError::ClockAhead { at, store_time, .. }) => {
            assert!(at == ahead && store_time >= now);
        }
        other => panic!("a direct append an hour ahead is refused, got {other:?}"),
    }
    assert_eq!(goal.state().await, state);

    // Within the skew is accepted: hosts a little out of step keep working.
    let slightly = wall_clock().plus(Duration::seconds(30));
    let within = goal.run(&ag("a"), slightly, add("v")).await;
    assert_eq!(within.receipt.committed_at, slightly);

    // An operation that committed replays its receipt, even asked again an hour ahead.
    let first = goal.run(&ag("a"), wall_clock(), add("w")).await;
    let again = submit(
        &store,
        &goal.id,
        &ag("a"),
        ahead,
        &add("w"),
        &first.receipt.operation,
    )
    .await;
    match again {
        Ok(done) => assert!(done.replayed && done.receipt == first.receipt),
        Err(error) => panic!("a committed operation replays, got {error}"),
    }
}

/// A store created with a test clock follows the times it is given, also after it is reopened:
/// what tests and scripts that move time run on. Time still never runs backwards.
pub async fn a_test_clock_follows_the_given_times<B: Backend>(backend: &B) {
    let store = backend.fresh_on_test_clock().await;
    let far = wall_clock().plus(Duration::hours(24 * 365));
    let mut goal = Goal::create(&store, spec("simulated", &["a", "b"]), at(0)).await;
    goal.run(&ag("a"), far, add("t")).await;
    goal.run(&ag("a"), far, claim("t", 30)).await;
    let goal_id = goal.id.clone();
    drop(goal);
    let store = backend.reopen(store).await;
    let mut goal = Goal {
        store: &store,
        id: goal_id,
        ops: 100,
    };
    // An hour later the lease has expired, and b may take the todo.
    let later = far.plus(Duration::hours(1));
    let taken = goal.run(&ag("b"), later, claim("t", 30)).await;
    let lease = taken.state.todos[&id::<TodoId>("t")].lease.as_ref();
    assert_eq!(lease.map(|l| l.holder.as_str()), Some("b"));
    // Behind the goal's time is still brought up to it.
    let behind = goal.run(&ag("a"), at(5), add("u")).await;
    assert!(behind.events.iter().all(|e| e.at == later));
}

/// Reopening the store shows everything it acknowledged: states, events, receipts and the
/// answers of the cross-goal queries.
pub async fn reopen_keeps_everything<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goals = Vec::new();
    let mut receipts = Vec::new();
    for g in 0..3 {
        let mut goal = Goal::create(&store, spec(&format!("g{g}"), &["a", "b"]), at(0)).await;
        for i in 0..(5 + g * 20) {
            let name = format!("t{i}");
            receipts.push(goal.run(&ag("a"), at(i), add(&name)).await.receipt);
            if i % 2 == 0 {
                goal.work("b", &name, at(i), done()).await;
            }
        }
        goals.push(goal.id.clone());
    }
    let mut before = Vec::new();
    for goal in &goals {
        before.push((load(&store, goal).await, all_events(&store, goal).await));
    }
    let queries = expected_queries(&store, &goals, &["a", "b"], at(50)).await;
    let store = backend.reopen(store).await;
    for (goal, (state, events)) in goals.iter().zip(&before) {
        assert_eq!(&load(&store, goal).await, state);
        assert_eq!(&all_events(&store, goal).await, events);
    }
    for receipt in &receipts {
        assert_eq!(
            ok(
                store.receipt(&receipt.goal, &receipt.operation).await,
                "receipt"
            )
            .as_ref(),
            Some(receipt)
        );
    }
    assert_eq!(
        expected_queries(&store, &goals, &["a", "b"], at(50)).await,
        queries
    );
    check_queries(&store, &goals, &["a", "b"], at(50)).await;
}

/// `changed` returns at once for a goal already past the revision given for it, wakes a waiter
/// when a commit through another handle (or another task) moves a watched goal or creates a
/// watched one, ignores commits to other goals, and returns an empty list when the timeout
/// passes.
pub async fn changed_wakes_waiters<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let second = backend.second(&store).await;
    let writer: &B::Store = second.as_ref().unwrap_or(&store);
    let mut goal = Goal::create(&store, spec("g", &["a"]), at(0)).await;
    let other = Goal::create(&store, spec("other", &["a"]), at(0)).await;
    let h: GoalId = id("h");

    let started = std::time::Instant::now();
    let moved = ok(
        store
            .changed(
                &[(goal.id.clone(), 0), (goal.id.clone(), 0)],
                Duration::seconds(30),
            )
            .await,
        "changed",
    );
    assert_eq!(
        moved,
        vec![goal.id.clone()],
        "a goal past its revision is returned once"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    let started = std::time::Instant::now();
    let none = ok(
        store
            .changed(
                &[(goal.id.clone(), 1), (h.clone(), 0)],
                Duration::from_millis(200),
            )
            .await,
        "changed",
    );
    assert!(
        none.is_empty(),
        "nothing moved, yet `changed` returned {none:?}"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(190),
        "`changed` returned before its timeout"
    );
    let idle = ok(
        store.changed(&[], Duration::from_millis(50)).await,
        "changed",
    );
    assert!(idle.is_empty());

    // A commit through the other handle wakes the waiter well before its timeout; a commit to
    // an unwatched goal does not.
    let unwatched = other.id.clone();
    let watched = goal.id.clone();
    let started = std::time::Instant::now();
    let watch = [(watched.clone(), 1), (h.clone(), 0)];
    let wait = store.changed(&watch, Duration::seconds(20));
    let commit = async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let noise = submit(
            writer,
            &unwatched,
            &ag("a"),
            at(1),
            &add("noise"),
            &id("noise"),
        )
        .await;
        assert!(noise.is_ok(), "a commit to another goal failed: {noise:?}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let op: OperationId = id("wake");
        match submit(writer, &watched, &ag("a"), at(1), &add("t1"), &op).await {
            Ok(done) => done.receipt.revision,
            Err(error) => panic!("the waking commit failed: {error}"),
        }
    };
    let (moved, revision) = tokio::join!(wait, commit);
    assert_eq!(revision, 2);
    assert_eq!(ok(moved, "changed"), vec![watched.clone()]);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(400),
        "the waiter woke on a commit to a goal it does not watch"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "the waiter slept through the commit"
    );
    goal.ops += 1;

    // Creating a watched goal wakes a waiter that watches it at revision 0.
    let watch = [(watched.clone(), 2), (h.clone(), 0)];
    let wait = store.changed(&watch, Duration::seconds(20));
    let create = async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let command = Command::CreateGoal {
            spec: spec("h", &["a"]),
        };
        let created = submit(writer, &h, &owner(), at(2), &command, &id("create-h")).await;
        assert!(created.is_ok(), "creating `h` failed: {created:?}");
    };
    let (moved, ()) = tokio::join!(wait, create);
    assert_eq!(ok(moved, "changed"), vec![h.clone()]);
    assert_eq!(load(&store, &h).await.revision, 1);
}

// ----- damage ---------------------------------------------------------------------------------

/// A store with goal `dmg` (41 events: far past a snapshot on every configuration of the
/// suite, so a load reads none of the early rows) and a sound goal `sound`.
async fn damageable<S: Store + ?Sized>(store: &S) -> GoalId {
    let mut goal = Goal::create(store, spec("dmg", &["a", "b"]), at(0)).await;
    for i in 0..40 {
        goal.run(&ag("a"), at(i), add(&format!("t{i}"))).await;
    }
    let mut sound = Goal::create(store, spec("sound", &["a"]), at(0)).await;
    sound.run(&ag("a"), at(1), add("s0")).await;
    goal.id
}

fn is_damaged<T: std::fmt::Debug>(
    result: &Result<T, StoreError>,
    goal: &GoalId,
    revision: u64,
) -> bool {
    matches!(result, Err(StoreError::HistoryDamaged { goal: g, revision: r, .. }) if g == goal && *r == revision)
}

fn submit_damaged(result: &Result<Submitted, SubmitError>, goal: &GoalId, revision: u64) -> bool {
    matches!(result, Err(SubmitError::Store(StoreError::HistoryDamaged { goal: g, revision: r, .. })) if g == goal && *r == revision)
}

/// The sound goal still reads and takes commits next to a damaged one.
async fn sound_goal_works<S: Store + ?Sized>(store: &S) {
    let id: GoalId = id("sound");
    let before = load(store, &id).await;
    let mut sound = Goal {
        store,
        id,
        ops: 100,
    };
    let done = sound.run(&ag("a"), at(50), add("s1")).await;
    assert_eq!(done.receipt.revision, before.revision + 1);
}

/// An event row deleted, or overwritten with text that is not JSON, below the goal's newest
/// snapshot: a load reads neither row, yet every handle's load, every write (from a handle that
/// holds the goal cached, too), waiting on it and compaction of the goal fail with
/// `StoreError::HistoryDamaged` at that revision, before anything is written; the rows before
/// the damage still read, and other goals work.
pub async fn damage_below_a_snapshot_is_found_at_load<B: Tamper>(backend: &B) {
    let damages = [
        (7, "DELETE FROM events WHERE goal = 'dmg' AND revision = 7"),
        (
            5,
            "UPDATE events SET json = 'not json' WHERE goal = 'dmg' AND revision = 5",
        ),
    ];
    for (revision, sql) in damages {
        let store = backend.fresh().await;
        let goal = damageable(&store).await;
        let state = load(&store, &goal).await;
        backend.tamper(&store, sql, true).await;
        let loaded = store.load(&goal).await;
        assert!(
            is_damaged(&loaded, &goal, revision),
            "`{sql}`: load: {loaded:?}"
        );
        let mut writer = Goal {
            store: &store,
            id: goal.clone(),
            ops: 1000,
        };
        let op = OperationId::new("dmg-op-1001".to_owned()).ok();
        let written = writer.submit(&ag("a"), at(45), add("late")).await;
        assert!(
            submit_damaged(&written, &goal, revision),
            "`{sql}`: a write on the damaged goal: {written:?}"
        );
        if let Some(op) = op {
            assert_eq!(ok(store.receipt(&goal, &op).await, "receipt"), None);
        }
        let compacted = store.compact(&goal, 20).await;
        assert!(
            is_damaged(&compacted, &goal, revision),
            "`{sql}`: compact: {compacted:?}"
        );
        let waited = store
            .changed(&[(goal.clone(), state.revision)], Duration::from_millis(50))
            .await;
        assert!(
            is_damaged(&waited, &goal, revision),
            "`{sql}`: waiting on the goal: {waited:?}"
        );
        let other = match backend.second(&store).await {
            Some(other) => other,
            None => backend.reopen(store).await,
        };
        let loaded = other.load(&goal).await;
        assert!(
            is_damaged(&loaded, &goal, revision),
            "`{sql}`: a fresh load: {loaded:?}"
        );
        let read = other.events(&goal, 0, usize::MAX).await;
        assert!(read.is_err(), "`{sql}`: every event read back: {read:?}");
        let early = ok(
            other.events(&goal, 0, 4).await,
            "the events before the damage",
        );
        assert_eq!(early.len(), 4);
        let last = ok(
            other.events(&goal, state.revision - 1, 1).await,
            "the last event",
        );
        assert_eq!(
            last.iter().map(|e| e.revision).collect::<Vec<_>>(),
            vec![state.revision]
        );
        sound_goal_works(&other).await;
    }
}

/// The goal row deleted while the goal's history stays: every load answers
/// `StoreError::HistoryDamaged` (revision 0: the goal's own row), never "no such goal"; a
/// write, and creating the goal anew, fail the same way; the orphaned rows are reported.
pub async fn a_removed_goal_row_is_damage_not_absence<B: Tamper>(backend: &B) {
    let store = backend.fresh().await;
    let goal = damageable(&store).await;
    backend
        .tamper(&store, "DELETE FROM goals WHERE goal = 'dmg'", true)
        .await;
    let loaded = store.load(&goal).await;
    assert!(is_damaged(&loaded, &goal, 0), "a cached load: {loaded:?}");
    let mut writer = Goal {
        store: &store,
        id: goal.clone(),
        ops: 1000,
    };
    let written = writer.submit(&ag("a"), at(45), add("late")).await;
    assert!(submit_damaged(&written, &goal, 0), "a write: {written:?}");
    let created = writer
        .submit(
            &owner(),
            at(46),
            Command::CreateGoal {
                spec: spec("dmg", &["a"]),
            },
        )
        .await;
    assert!(
        submit_damaged(&created, &goal, 0),
        "creating it again: {created:?}"
    );
    let other = match backend.second(&store).await {
        Some(other) => other,
        None => backend.reopen(store).await,
    };
    let loaded = other.load(&goal).await;
    assert!(is_damaged(&loaded, &goal, 0), "a fresh load: {loaded:?}");
    let read = other.events(&goal, 0, usize::MAX).await;
    assert!(is_damaged(&read, &goal, 0), "events: {read:?}");
    assert_eq!(
        ok(other.stored_goals().await, "stored goals"),
        vec![id::<GoalId>("sound")]
    );
    let orphans = ok(other.orphans().await, "orphans");
    assert!(
        matches!(orphans.as_slice(), [RowDamage::Orphaned { goal: g, tables }]
            if g == &goal && tables.iter().any(|t| t == "events") && tables.iter().any(|t| t == "goal_agents")),
        "{orphans:?}"
    );
    sound_goal_works(&other).await;
}

/// Damage no trigger sees (the triggers off, as for a flipped bit on disk): reading the events
/// never returns a history with a gap. A page that would skip the missing revision, or stop
/// short of the goal's revision, is `StoreError::HistoryDamaged` at the first missing one;
/// compaction, which folds the early events, fails the same way; pages before the gap read.
pub async fn events_never_have_a_gap<B: Tamper>(backend: &B) {
    let store = backend.fresh().await;
    let goal = damageable(&store).await;
    backend
        .tamper(
            &store,
            "DELETE FROM events WHERE goal = 'dmg' AND (revision = 7 OR revision = 41)",
            false,
        )
        .await;
    let other = match backend.second(&store).await {
        Some(other) => other,
        None => backend.reopen(store).await,
    };
    let all = other.events(&goal, 0, usize::MAX).await;
    assert!(is_damaged(&all, &goal, 7), "every event: {all:?}");
    let page = other.events(&goal, 5, 10).await;
    assert!(
        is_damaged(&page, &goal, 7),
        "a page across the gap: {page:?}"
    );
    let tail = other.events(&goal, 30, 100).await;
    assert!(is_damaged(&tail, &goal, 41), "the last page: {tail:?}");
    let early = ok(other.events(&goal, 0, 6).await, "the events before the gap");
    assert_eq!(
        early.iter().map(|e| e.revision).collect::<Vec<_>>(),
        (1..=6).collect::<Vec<_>>()
    );
    let compacted = other.compact(&goal, 20).await;
    assert!(is_damaged(&compacted, &goal, 7), "compact: {compacted:?}");
    sound_goal_works(&other).await;
}

/// An event's payload changed below SQL (the triggers off, as for a byte flipped on disk) so
/// that it still decodes and folds, with another todo: no read that checks the row ever answers
/// the changed history. Reading the events over it (every event, a page from just before it, the
/// last page) is `StoreError::HistoryDamaged` at its revision, the pages before it read;
/// compaction over it fails the same way (it never deletes damage), compaction short of it
/// works; a load that reads the row (one after the newest snapshot) fails the same way, and one
/// that does not read it answers the history as committed.
pub async fn a_payload_changed_below_sql_breaks_the_chain<B: Tamper>(backend: &B) {
    // Revision 41 adds t39 (after every snapshot but one taken at 41); revision 3 adds t1
    // (below any snapshot but one at 1 or 2).
    for (revision, sql) in [
        (
            41,
            "UPDATE events SET json = replace(json, '\"t39\"', '\"u39\"') WHERE goal = 'dmg' AND revision = 41",
        ),
        (
            3,
            "UPDATE events SET json = replace(json, '\"t1\"', '\"u1\"') WHERE goal = 'dmg' AND revision = 3",
        ),
    ] {
        let store = backend.fresh().await;
        let goal = damageable(&store).await;
        let state = load(&store, &goal).await;
        backend.tamper(&store, sql, false).await;
        let other = match backend.second(&store).await {
            Some(other) => other,
            None => backend.reopen(store).await,
        };
        let all = other.events(&goal, 0, usize::MAX).await;
        assert!(
            is_damaged(&all, &goal, revision),
            "`{sql}`: every event: {all:?}"
        );
        let page = other.events(&goal, revision - 1, 3).await;
        assert!(
            is_damaged(&page, &goal, revision),
            "`{sql}`: a page from just before it: {page:?}"
        );
        let tail = other.events(&goal, revision - 2, 100).await;
        assert!(
            is_damaged(&tail, &goal, revision),
            "`{sql}`: the last page: {tail:?}"
        );
        let early = ok(
            other
                .events(&goal, 0, usize::try_from(revision - 1).unwrap_or(0))
                .await,
            "the events before the damage",
        );
        assert_eq!(early.len() as u64, revision - 1);
        let compacted = other.compact(&goal, 20).await;
        if revision <= 20 {
            assert!(
                is_damaged(&compacted, &goal, revision),
                "`{sql}`: compacting the damaged row away: {compacted:?}"
            );
        } else {
            ok(compacted, "compacting the rows before the damage");
        }
        match other.load(&goal).await {
            Ok(loaded) => assert_eq!(
                loaded.as_ref(),
                Some(&state),
                "`{sql}`: a load that skips the row"
            ),
            loaded => assert!(
                is_damaged(&loaded, &goal, revision),
                "`{sql}`: a load that reads the row: {loaded:?}"
            ),
        }
        sound_goal_works(&other).await;
    }
}

/// An archived event row deleted (with or without the damage triggers seeing it) or changed
/// below SQL is found: reading the archive, the whole history and verifying it are
/// `StoreError::HistoryDamaged` at its revision; a deletion the triggers saw marks the goal, so
/// its loads fail the same way; a change they did not see leaves the kept history loading as
/// committed. The sound goal keeps working.
pub async fn a_damaged_archive_is_found<B: Tamper>(backend: &B) {
    // Revision r adds t(r - 2).
    for (revision, sql, marks) in [
        (
            5,
            "DELETE FROM archived_events WHERE goal = 'dmg' AND revision = 5",
            true,
        ),
        (
            9,
            "DELETE FROM archived_events WHERE goal = 'dmg' AND revision = 9",
            false,
        ),
        (
            7,
            "UPDATE archived_events SET json = replace(json, '\"t5\"', '\"u5\"') WHERE goal = 'dmg' AND revision = 7",
            false,
        ),
    ] {
        let store = backend.fresh().await;
        let goal = damageable(&store).await;
        ok(store.compact(&goal, 20).await, "compact");
        let state = load(&store, &goal).await;
        backend.tamper(&store, sql, marks).await;
        let other = match backend.second(&store).await {
            Some(other) => other,
            None => backend.reopen(store).await,
        };
        let archived = other.archived(&goal, 0, usize::MAX).await;
        assert!(
            is_damaged(&archived, &goal, revision),
            "`{sql}`: the archive: {archived:?}"
        );
        let all = history(&other, &goal, 0, usize::MAX).await;
        assert!(
            is_damaged(&all, &goal, revision),
            "`{sql}`: the history: {all:?}"
        );
        let verified = crate::verify_history(&other, &goal).await;
        assert!(
            is_damaged(&verified, &goal, revision),
            "`{sql}`: verify: {verified:?}"
        );
        let loaded = other.load(&goal).await;
        if marks {
            assert!(
                is_damaged(&loaded, &goal, revision),
                "`{sql}`: load: {loaded:?}"
            );
        } else {
            assert_eq!(ok(loaded, "load").as_ref(), Some(&state), "`{sql}`");
        }
        sound_goal_works(&other).await;
    }
}

/// Compaction keeps the receipt of a commit it archives as a digest: the commit's authorship
/// (its command and signature) moves into the archive with its last event, and the audit trail
/// and verification read it from there. With every receipt row's authorship cleared outside
/// the store, the compacted commits still show theirs (so the receipts never held it) and all of
/// them verify; with the archive's cleared instead, exactly the compacted commits show none
/// (so it lived only there) and count as unverifiable, never as damage.
pub async fn a_compacted_receipt_keeps_its_digest_and_the_archive_its_authorship<B: Tamper>(
    backend: &B,
) {
    let store = backend.fresh().await;
    let goal = damageable(&store).await;
    let before = ok(store.operations(&goal, 0, usize::MAX).await, "operations");
    assert!(before.iter().all(|o| o.authorship.is_some()), "{before:?}");
    let verified = ok(crate::verify_history(&store, &goal).await, "verify");
    ok(store.compact(&goal, 20).await, "compact");
    assert_eq!(
        ok(store.operations(&goal, 0, usize::MAX).await, "operations"),
        before
    );

    backend
        .tamper(&store, "UPDATE receipts SET authorship = NULL", false)
        .await;
    let store = backend.reopen(store).await;
    let trail = ok(store.operations(&goal, 0, usize::MAX).await, "operations");
    let compacted = |o: &&OperationRecord| o.receipt.revision <= 20;
    assert!(
        trail
            .iter()
            .filter(compacted)
            .all(|o| o.authorship.is_some()),
        "{trail:?}"
    );
    let latest = ok(store.latest_operations(&goal, 20, 5).await, "latest");
    assert!(latest.iter().all(|o| o.authorship.is_some()), "{latest:?}");
    assert_eq!(
        ok(crate::verify_history(&store, &goal).await, "verify"),
        verified
    );

    backend
        .tamper(
            &store,
            "UPDATE archived_events SET authorship = NULL",
            false,
        )
        .await;
    let store = backend.reopen(store).await;
    let trail = ok(store.operations(&goal, 0, usize::MAX).await, "operations");
    let (old, kept): (Vec<_>, Vec<_>) = trail.iter().partition(compacted);
    assert!(old.iter().all(|o| o.authorship.is_none()), "{old:?}");
    assert!(kept.iter().all(|o| o.authorship.is_some()), "{kept:?}");
    let found = ok(crate::verify_history(&store, &goal).await, "verify");
    assert!(found.findings.is_empty(), "{found:?}");
    assert_eq!(
        found.unverifiable,
        u64::try_from(old.len()).unwrap_or(u64::MAX)
    );
}

/// The base snapshot a compaction left, changed outside the store so that it still decodes (a
/// todo renamed in its JSON, in the same order): `verify_history`, folding the archive up to the base, names the
/// base's revision; the same goal unchanged verifies without findings.
pub async fn a_changed_base_snapshot_is_found_by_verification<B: Tamper>(backend: &B) {
    let store = backend.fresh().await;
    let goal = damageable(&store).await;
    ok(store.compact(&goal, 20).await, "compact");
    let sound = ok(crate::verify_history(&store, &goal).await, "verify");
    assert!(sound.findings.is_empty(), "{sound:?}");
    backend
        .tamper(
            &store,
            "UPDATE snapshots SET json = replace(json, '\"t5\"', '\"t5x\"') WHERE goal = 'dmg' AND revision = 20",
            true,
        )
        .await;
    let changed = ok(store.base(&goal).await, "the changed base still decodes");
    assert!(
        changed.is_some_and(|b| b.state.todos.contains_key(&id("t5x"))),
        "the tamper renamed a todo in the base"
    );
    let other = match backend.second(&store).await {
        Some(other) => other,
        None => backend.reopen(store).await,
    };
    let found = ok(crate::verify_history(&other, &goal).await, "verify");
    assert_eq!(found.verified, sound.verified);
    assert_eq!(found.findings.len(), 1, "{found:?}");
    assert_eq!(found.findings[0].revision, 20, "{found:?}");
}

/// The goal's derived rows changed outside the store (its standing, objective, window,
/// registered agents, a frontier row): `Retention::check_rows` against the fold of its history
/// reports each change, typed, and a sound goal reports none.
pub async fn derived_rows_changed_outside_are_found<B: Tamper>(backend: &B) {
    let store = backend.fresh().await;
    let goal = damageable(&store).await;
    let history = fold(&all_events(&store, &goal).await);
    assert_eq!(
        ok(store.check_rows(&history, at(45)).await, "check"),
        vec![]
    );
    backend
        .tamper(
            &store,
            "UPDATE goals SET status = 'accepted', objective = 'changed' WHERE goal = 'dmg';
             DELETE FROM goal_agents WHERE goal = 'dmg' AND agent = 'b';
             DELETE FROM frontier WHERE goal = 'dmg' AND agent = 'a';
             INSERT INTO goal_subjects (subject, goal) VALUES ('pr:acme/cli#7', 'dmg')",
            true,
        )
        .await;
    let found = ok(store.check_rows(&history, at(45)).await, "check");
    let column = |name: &str| {
        found.iter().any(|d| matches!(d, RowDamage::GoalRow { goal: g, column, .. } if g == &goal && column == name))
    };
    assert!(column("status"), "{found:?}");
    assert!(column("objective"), "{found:?}");
    assert!(
        found.iter().any(
            |d| matches!(d, RowDamage::Agents { stored, .. } if stored == &vec!["a".to_owned()])
        ),
        "{found:?}"
    );
    assert!(
        found.iter().any(|d| matches!(d, RowDamage::Frontier { agent, stored: None, expected: Some(_), .. } if agent == "a")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|d| matches!(d, RowDamage::Subjects { stored, expected, .. }
            if stored == &vec!["pr:acme/cli#7".to_owned()] && expected.is_empty())),
        "{found:?}"
    );
    assert!(found.iter().all(|d| d.goal() == &goal), "{found:?}");
    let sound = fold(&all_events(&store, &id("sound")).await);
    assert_eq!(ok(store.check_rows(&sound, at(45)).await, "check"), vec![]);
    assert_eq!(ok(store.orphans().await, "orphans"), vec![]);
}

/// Every backend's derived rows equal the rows the fold of each goal's history gives, at
/// times inside and past their windows, after leases, settlements, expiries and compaction.
pub async fn derived_rows_match_the_history<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut goal = Goal::create(&store, spec("rows", &["a", "b"]), at(0)).await;
    for i in 0..6 {
        goal.run(&ag("a"), at(i), add(&format!("t{i}"))).await;
    }
    goal.work("b", "t0", at(7), done()).await;
    goal.run(&ag("a"), at(8), claim("t1", 30)).await;
    ok(store.compact(&goal.id, 3).await, "compact");
    let history = {
        let base = ok(store.base(&goal.id).await, "base");
        let mut state = base.map(|b| match b.into_state() {
            Ok(state) => state,
            Err(error) => panic!("the base snapshot does not decode: {error}"),
        });
        for event in all_events(&store, &goal.id).await {
            state = Some(match state {
                None => fold(std::slice::from_ref(&event)),
                Some(mut s) => {
                    if let Err(error) = s.apply(&event) {
                        panic!("the stored events do not fold: {error}");
                    }
                    s
                }
            });
        }
        state.unwrap_or_else(|| panic!("goal `rows` has no history"))
    };
    assert_eq!(history, load(&store, &goal.id).await);
    for minutes in [9, 20, 39, 120] {
        assert_eq!(
            ok(store.check_rows(&history, at(minutes)).await, "check"),
            vec![],
            "at minute {minutes}"
        );
    }
    assert_eq!(
        ok(store.stored_goals().await, "stored goals"),
        vec![goal.id.clone()]
    );
    // A query past the lease's expiry rewrites the rows; they still match.
    ok(store.goals(at(120)).await, "goals");
    assert_eq!(
        ok(store.check_rows(&history, at(120)).await, "check"),
        vec![]
    );
    assert_eq!(ok(store.orphans().await, "orphans"), vec![]);
}

// ----- routing by subject -------------------------------------------------------------------

fn github() -> Actor {
    Actor::Provider(id::<SourceId>("github"))
}

fn subject(text: &str) -> Subject {
    id(text)
}

/// A criterion `name` about `about`.
fn criterion(name: &str, about: &str) -> loopx_kernel::Criterion {
    loopx_kernel::Criterion {
        id: id(name),
        text: format!("{name} holds"),
        check: id("build"),
        subject: subject(about),
    }
}

/// An observation on stream `key` about `about`, at `minutes`.
fn observed(key: &str, about: &str, minutes: i64) -> Command {
    Command::RecordObservation {
        observation: Observation {
            key: id::<ObservationKey>(key),
            subject: subject(about),
            revision: id::<Revision>("git:abc"),
            fingerprint: id::<Fingerprint>(&format!("{key}-{about}-{minutes}")),
            observed_at: at(minutes),
            summary: String::new(),
            facts: BTreeMap::new(),
            order: None,
            etag: None,
        },
    }
}

/// A binding to a capability that asks the goal to follow `follows`.
fn following(follows: &[&str]) -> loopx_kernel::CapabilityBinding {
    match loopx_kernel::CapabilityBinding::named("prfix") {
        Ok(binding) => binding.following(follows.iter().map(|s| subject(s))),
        Err(error) => panic!("`prfix` is a valid capability name: {error}"),
    }
}

async fn amend<S: Store + ?Sized>(
    goal: &mut Goal<'_, S>,
    now: Timestamp,
    amendments: Vec<loopx_kernel::Amendment>,
) {
    let expected_revision = goal.state().await.goal_revision;
    goal.run(
        &owner(),
        now,
        Command::AmendGoal {
            expected_revision,
            amendments,
        },
    )
    .await;
}

async fn watching<S: Store + ?Sized>(store: &S, subjects: &[&str], now: Timestamp) -> Vec<GoalId> {
    let subjects: Vec<Subject> = subjects.iter().map(|s| subject(s)).collect();
    ok(store.watching(&subjects, now).await, "watching")
}

/// What `Store::watching` answers by definition: every goal read, abandoned goals left out.
async fn scanned<S: Store + ?Sized>(
    store: &S,
    subjects: &[Subject],
    now: Timestamp,
) -> Vec<GoalId> {
    let mut found = Vec::new();
    for summary in ok(store.goals(now).await, "goals") {
        if summary.status == GoalStatus::Abandoned {
            continue;
        }
        let state = load(store, &summary.goal).await;
        let watched = state.watched_subjects();
        if subjects.iter().any(|s| watched.contains(s)) {
            found.push(summary.goal);
        }
    }
    found.sort();
    found
}

/// A goal is found by each kind of subject it follows — a criterion's, one it recorded a
/// revision of, its latest observations', those its capability binding asks it to follow —
/// and no longer once it stops following it or is abandoned; an unknown subject finds none.
/// The rows survive a reopen.
pub async fn watching_finds_each_kind_of_subject<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut crit = Goal::create(&store, spec("crit", &["a"]), at(0)).await;
    amend(
        &mut crit,
        at(1),
        vec![loopx_kernel::Amendment::AddCriterion {
            criterion: criterion("green", "pr:acme/cli#1"),
        }],
    )
    .await;
    let mut obs = Goal::create(&store, spec("obs", &["a"]), at(0)).await;
    obs.run(
        &github(),
        at(2),
        observed("check:x", "commit:acme/cli@abc", 2),
    )
    .await;
    let mut rev = Goal::create(&store, spec("rev", &["a"]), at(0)).await;
    rev.run(&github(), at(2), observed("stream", "repo:old", 2))
        .await;
    // The stream now speaks of another subject: the old one is followed by its revision alone.
    rev.run(&github(), at(3), observed("stream", "repo:new", 3))
        .await;
    let mut bound = spec("fol", &["a"]);
    bound.capability = Some(Box::new(following(&["pr:acme/cli#42"])));
    let mut fol = Goal::create(&store, bound, at(0)).await;

    let now = at(5);
    let one = |goal: &str| vec![id::<GoalId>(goal)];
    assert_eq!(watching(&store, &["pr:acme/cli#1"], now).await, one("crit"));
    assert_eq!(
        watching(&store, &["commit:acme/cli@abc"], now).await,
        one("obs")
    );
    assert_eq!(watching(&store, &["repo:old"], now).await, one("rev"));
    assert_eq!(watching(&store, &["repo:new"], now).await, one("rev"));
    assert_eq!(watching(&store, &["pr:acme/cli#42"], now).await, one("fol"));
    assert_eq!(
        watching(&store, &["pr:acme/cli#404"], now).await,
        Vec::<GoalId>::new()
    );
    assert_eq!(watching(&store, &[], now).await, Vec::<GoalId>::new());
    assert_eq!(
        watching(&store, &["pr:acme/cli#42", "pr:acme/cli#1", "nothing"], now).await,
        vec![id::<GoalId>("crit"), id("fol")]
    );

    amend(
        &mut crit,
        at(6),
        vec![loopx_kernel::Amendment::RemoveCriterion { id: id("green") }],
    )
    .await;
    amend(
        &mut fol,
        at(6),
        vec![loopx_kernel::Amendment::SetCapability { capability: None }],
    )
    .await;
    obs.run(
        &owner(),
        at(6),
        Command::AbandonGoal {
            reason: "not needed".into(),
        },
    )
    .await;
    let now = at(7);
    for gone in ["pr:acme/cli#1", "pr:acme/cli#42", "commit:acme/cli@abc"] {
        assert_eq!(
            watching(&store, &[gone], now).await,
            Vec::<GoalId>::new(),
            "{gone}"
        );
    }
    assert_eq!(watching(&store, &["repo:old"], now).await, one("rev"));

    // Bound again: followed again, and still after a reopen.
    amend(
        &mut fol,
        at(8),
        vec![loopx_kernel::Amendment::SetCapability {
            capability: Some(following(&["pr:acme/cli#43"])),
        }],
    )
    .await;
    let store = backend.reopen(store).await;
    assert_eq!(
        watching(&store, &["pr:acme/cli#43"], at(9)).await,
        one("fol")
    );
    assert_eq!(
        watching(&store, &["pr:acme/cli#42"], at(9)).await,
        Vec::<GoalId>::new()
    );
    assert_eq!(
        watching(&store, &["commit:acme/cli@abc"], at(9)).await,
        Vec::<GoalId>::new()
    );
}

/// Many goals following the same subjects come back each once, in id order, whatever order
/// they were created in.
pub async fn watching_lists_many_goals_in_order<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let mut expected = Vec::new();
    for n in [7, 3, 11, 0, 5, 9, 1, 10, 2, 8, 4, 6] {
        let name = format!("many-{n:02}");
        let mut bound = spec(&name, &["a"]);
        let follows: &[&str] = if n % 2 == 0 {
            &["pr:acme/cli#1", "pr:acme/cli#2"]
        } else {
            &["pr:acme/cli#2"]
        };
        bound.capability = Some(Box::new(following(follows)));
        Goal::create(&store, bound, at(0)).await;
        expected.push(id::<GoalId>(&name));
    }
    expected.sort();
    let found = watching(&store, &["pr:acme/cli#1", "pr:acme/cli#2"], at(1)).await;
    assert_eq!(found, expected);
    let evens: Vec<GoalId> = expected.iter().step_by(2).cloned().collect();
    assert_eq!(watching(&store, &["pr:acme/cli#1"], at(1)).await, evens);
}

/// On a random workload (criteria added and removed, observations moving between subjects,
/// bindings rebound, goals abandoned, through two handles when the backend has them), the
/// index answers exactly what reading every goal answers, for every subject and for pairs.
pub async fn watching_agrees_with_a_scan_of_every_goal<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    let second = backend.second(&store).await;
    let subjects = ["s:0", "s:1", "s:2", "s:3", "s:4", "s:5"];
    let names = ["r0", "r1", "r2", "r3", "r4", "r5"];
    let mut seed: u64 = 0x5eed_1dea;
    let mut next = |bound: usize| {
        // A linear congruential generator: the same workload on every run and backend.
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(seed >> 33).unwrap_or(0) % bound
    };
    let mut goals = Vec::new();
    for name in names {
        goals.push(Goal::create(&store, spec(name, &["a"]), at(0)).await);
    }
    let mut abandoned = [false; 6];
    for step in 0..60_i64 {
        let now = at(step + 1);
        let g = next(goals.len());
        let about = subjects[next(subjects.len())];
        let via_second = next(2) == 0;
        let goal = &mut goals[g];
        if abandoned[g] {
            continue;
        }
        match next(5) {
            0 => {
                amend(
                    goal,
                    now,
                    vec![loopx_kernel::Amendment::AddCriterion {
                        criterion: criterion(&format!("c{step}"), about),
                    }],
                )
                .await;
            }
            1 => {
                let state = goal.state().await;
                if let Some(first) = state.spec.criteria.first() {
                    amend(
                        goal,
                        now,
                        vec![loopx_kernel::Amendment::RemoveCriterion {
                            id: first.id.clone(),
                        }],
                    )
                    .await;
                }
            }
            2 => {
                // Through the second handle when there is one, half the time.
                let on = second.as_ref().filter(|_| via_second).unwrap_or(&store);
                let mut there = Goal {
                    store: on,
                    id: goal.id.clone(),
                    ops: 10_000 + u64::try_from(step).unwrap_or(0),
                };
                let key = format!("k{}", next(3));
                there.run(&github(), now, observed(&key, about, step)).await;
            }
            3 => {
                let binding = (next(3) > 0).then(|| following(&[about]));
                amend(
                    goal,
                    now,
                    vec![loopx_kernel::Amendment::SetCapability {
                        capability: binding,
                    }],
                )
                .await;
            }
            _ => {
                if next(4) == 0 {
                    goal.run(
                        &owner(),
                        now,
                        Command::AbandonGoal {
                            reason: "random".into(),
                        },
                    )
                    .await;
                    abandoned[g] = true;
                }
            }
        }
        let handles: Vec<&B::Store> = std::iter::once(&store).chain(second.as_ref()).collect();
        for handle in handles {
            let pair = [subject(subjects[next(6)]), subject(subjects[next(6)])];
            index_agrees(handle, &subjects, &pair, now, &format!("step {step}")).await;
        }
    }
    let store = backend.reopen(store).await;
    index_agrees(&store, &subjects, &[], at(100), "after a reopen").await;
}

/// The index answers what a scan of every goal answers, for each of `subjects` and for
/// `together` (when not empty).
async fn index_agrees<S: Store + ?Sized>(
    handle: &S,
    subjects: &[&str],
    together: &[Subject],
    now: Timestamp,
    when: &str,
) {
    for about in subjects {
        let one = [subject(about)];
        assert_eq!(
            ok(handle.watching(&one, now).await, "watching"),
            scanned(handle, &one, now).await,
            "{when}, subject {about}"
        );
    }
    if !together.is_empty() {
        assert_eq!(
            ok(handle.watching(together, now).await, "watching"),
            scanned(handle, together, now).await,
            "{when}, subjects {together:?}"
        );
    }
}

/// A dead letter refused at `minutes` on `goal` under `operation`, with `reason`.
fn dead_letter(goal: &str, operation: &str, minutes: i64, reason: &str) -> DeadLetter {
    DeadLetter {
        goal: id(goal),
        operation: id(operation),
        actor: github(),
        command: observed("pr", "pr:acme/cli#1", minutes),
        origin: format!("GitHub delivery {operation} (issue_comment)"),
        code: "key_unregistered".to_owned(),
        reason: reason.to_owned(),
        first_refused: at(minutes),
        last_refused: at(minutes),
        refusals: 1,
    }
}

/// Dead letters are kept whole, listed the first refused first with the count of all, one per
/// goal and operation (a letter refused again keeps its first time and counts the refusal),
/// survive a reopen, and are dropped one at a time.
pub async fn dead_letters_are_kept_counted_and_dropped<B: Backend>(backend: &B) {
    let store = backend.fresh().await;
    assert_eq!(store.dead_letters(10).await.unwrap().total, 0);
    store
        .keep_dead_letter(dead_letter("g-b", "delivery-1", 1, "no key"))
        .await
        .unwrap();
    store
        .keep_dead_letter(dead_letter("g-a", "delivery-2", 2, "no key"))
        .await
        .unwrap();
    store
        .keep_dead_letter(dead_letter("g-b", "delivery-1", 3, "still no key"))
        .await
        .unwrap();
    let store = backend.reopen(store).await;

    let kept = store.dead_letters(10).await.unwrap();
    assert_eq!(kept.total, 2, "one letter per goal and operation");
    let again = &kept.letters[0];
    assert_eq!(
        (again.goal.as_str(), again.operation.as_str()),
        ("g-b", "delivery-1")
    );
    assert_eq!(
        again.first_refused,
        at(1),
        "the first refusal's time is kept"
    );
    assert_eq!(again.last_refused, at(3));
    assert_eq!(again.refusals, 2);
    assert_eq!(again.reason, "still no key", "the newest reason is shown");
    assert_eq!(
        again.command,
        observed("pr", "pr:acme/cli#1", 3),
        "the letter is kept whole, as last refused"
    );
    assert_eq!(kept.letters[1].operation.as_str(), "delivery-2");

    let page = store.dead_letters(1).await.unwrap();
    assert_eq!((page.letters.len(), page.total), (1, 2));

    let (goal, operation) = (id::<GoalId>("g-b"), id::<OperationId>("delivery-1"));
    assert!(store.drop_dead_letter(&goal, &operation).await.unwrap());
    assert!(!store.drop_dead_letter(&goal, &operation).await.unwrap());
    let left = store.dead_letters(10).await.unwrap();
    assert_eq!(left.total, 1);
    assert_eq!(left.letters[0].goal.as_str(), "g-a");
}
