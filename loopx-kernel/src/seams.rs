//! The seams: small traits the engine drives and adapters implement. The kernel defines them
//! and implements none that do I/O; stores, providers, executors and validators live in other
//! crates (or in the host).
//!
//! Async traits use `async_trait` so they stay object-safe: a host can hold a
//! `Box<dyn Store>` chosen at run time. [`Capability`] is synchronous on purpose: judgement is
//! pure. [`Clock`] reads synchronously and sleeps asynchronously, so the engine can renew a
//! lease on time without owning a runtime.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{Command, Continuation, Transition, Verdict, VerdictOutcome};
use crate::event::RecordedEvent;
use crate::evidence::{NewEvidence, Observation};
use crate::identity::Signature;
use crate::ids::{
    AgentId, Fingerprint, GoalId, ObservationKey, OperationId, SourceId, Subject, TodoId, TurnId,
};
use crate::retry::{FailureClass, TurnFailure};
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};
use crate::todo::HandoffNote;

// ----- store ----------------------------------------------------------------------------------

/// A batch of events to commit atomically after `expected_revision`, under an operation id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendRequest {
    /// The goal the batch is for; a batch for another goal is refused.
    pub goal: GoalId,
    /// The revision the events were validated against; the commit fails if the goal moved.
    pub expected_revision: u64,
    /// The operation id; a store commits it at most once per goal.
    pub operation: OperationId,
    /// A digest of the request's payload (e.g. of the command), to tell a retry of the same
    /// operation from a different operation reusing its id.
    pub digest: String,
    /// When the command was accepted: the receipt's commit time, also for an empty batch (a
    /// recorded no-op, which commits only its receipt).
    pub at: Timestamp,
    /// The events, already stamped with revisions following `expected_revision`.
    pub events: Vec<RecordedEvent>,
    /// The command the events were validated from and its actor's signature, when the write
    /// path made them (`None` for a batch copied from elsewhere, such as an import). A store
    /// keeps it with the commit, so the log can be verified again: the signature against the
    /// keys registered at that revision, and the events against the command.
    pub authorship: Option<Authorship>,
    /// How far ahead of the store's clock `at` and the events' times may be: the goal's
    /// [`Policy::clock_skew`](crate::Policy) (for a new goal, its spec's). A store refuses a
    /// commit beyond it with [`StoreError::ClockAhead`] and writes nothing, unless it was
    /// created with a test clock.
    #[serde(default = "default_skew")]
    pub clock_skew: Duration,
}

/// What a commit was made from: the command and its actor's signature over it (none for a
/// goal whose identity is declared, or one recorded before signing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Authorship {
    /// The command as submitted.
    pub command: Command,
    /// The signature over the goal, the operation id and the command's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

fn default_skew() -> Duration {
    crate::goal::DEFAULT_CLOCK_SKEW
}

impl AppendRequest {
    /// The latest time the commit carries: its `at` or any of its events' times. This is what
    /// a store bounds by its own clock.
    pub fn latest_time(&self) -> Timestamp {
        self.events
            .iter()
            .map(|event| event.at)
            .fold(self.at, Timestamp::max)
    }

    /// [`StoreError::ClockAhead`] when the commit's [`latest time`](Self::latest_time) is
    /// beyond `store_time` plus the request's skew; what a store with a real clock checks.
    ///
    /// # Errors
    /// As described.
    pub fn check_clock(&self, store_time: Timestamp) -> Result<(), StoreError> {
        let at = self.latest_time();
        if at > store_time.plus(self.clock_skew) {
            return Err(StoreError::ClockAhead {
                at,
                store_time,
                skew: self.clock_skew,
            });
        }
        Ok(())
    }
}

/// What [`Store::append`] commits: an [`AppendRequest`] together with the goal's state after
/// it. Only [`Commit::fold`] builds one, so the state is always the fold of the request's
/// events onto the base state it was given — the goal at `expected_revision` (none for 0), of
/// the request's goal. A store therefore writes the state's index rows and snapshot without
/// folding the batch again; it still refuses the commit when the goal no longer stands at
/// `expected_revision` (compare-and-set), and a goal's state at a revision never changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    request: AppendRequest,
    state: GoalState,
}

impl Commit {
    /// Folds `request`'s events onto `base`, the goal's state at `request.expected_revision`
    /// (`None` when the goal does not exist yet), taking the state over.
    ///
    /// # Errors
    /// [`StoreError::InvalidBatch`] when `base` is not the request's goal at its expected
    /// revision, or the events do not apply to it (a revision gap, an event that contradicts the
    /// state, a genesis for another goal); [`StoreError::UnknownGoal`] for an empty batch (a
    /// no-op) on a goal that does not exist.
    pub fn fold(base: Option<GoalState>, request: AppendRequest) -> Result<Commit, StoreError> {
        let goal = &request.goal;
        let invalid = |detail: String| StoreError::InvalidBatch { detail };
        let refused = |error: crate::ReplayError| {
            invalid(format!(
                "the batch for goal `{goal}` does not apply to its state ({error})"
            ))
        };
        let state = match base {
            None if request.expected_revision != 0 => {
                return Err(invalid(format!(
                    "the batch for goal `{goal}` expects revision {} but was folded onto no state",
                    request.expected_revision
                )));
            }
            None if request.events.is_empty() => {
                return Err(StoreError::UnknownGoal { goal: goal.clone() });
            }
            None => GoalState::replay(&request.events).map_err(refused)?,
            Some(state)
                if &state.spec.id != goal || state.revision != request.expected_revision =>
            {
                return Err(invalid(format!(
                    "the batch for goal `{goal}` at revision {} was folded onto goal `{}` at revision {}",
                    request.expected_revision, state.spec.id, state.revision
                )));
            }
            Some(mut state) => {
                for event in &request.events {
                    state.apply(event).map_err(refused)?;
                }
                state
            }
        };
        if &state.spec.id != goal {
            return Err(invalid(format!(
                "the batch creates goal `{}` but was sent for goal `{goal}`",
                state.spec.id
            )));
        }
        Ok(Commit { request, state })
    }

    /// The request: goal, expected revision, operation, digest, time and events.
    pub fn request(&self) -> &AppendRequest {
        &self.request
    }

    /// The goal's state after the commit.
    pub fn state(&self) -> &GoalState {
        &self.state
    }

    /// The request and the state after it, taken apart.
    pub fn into_parts(self) -> (AppendRequest, GoalState) {
        (self.request, self.state)
    }
}

/// Proof that an operation committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The goal it committed to.
    pub goal: GoalId,
    /// The operation id it committed under, once per goal.
    pub operation: OperationId,
    /// The payload digest it committed with.
    pub digest: String,
    /// The goal revision right after the commit (unchanged by a recorded no-op).
    pub revision: u64,
    /// How many events it committed (zero for a recorded no-op).
    pub events: u64,
    /// When it committed (the events' time).
    pub committed_at: Timestamp,
}

/// One committed operation as a store's audit trail keeps it: its receipt, who issued it and
/// the names of its events. A store keeps every receipt for as long as it keeps the goal, also
/// after compaction dropped the operation's events, so the record outlives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationRecord {
    /// The receipt: operation id, payload digest, the revision it produced, how many events,
    /// and when.
    pub receipt: Receipt,
    /// Who issued it (`None` for a recorded no-op, which has no events).
    pub actor: Option<Actor>,
    /// The names of its events, in order (e.g. `lease_acquired`, `turn_settled`); empty for a
    /// recorded no-op.
    pub events: Vec<String>,
    /// The command it was validated from and its actor's signature, as the write path
    /// submitted them: what a verification re-checks the commit against. `None` for a commit
    /// the store recorded without them (written by an older store schema, by an import, or
    /// whose receipt compaction moved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorship: Option<Authorship>,
}

impl OperationRecord {
    /// The name of the command the operation was validated from (e.g. `answer_gate`), when the
    /// record keeps its [`authorship`](Self::authorship).
    pub fn command_name(&self) -> Option<&'static str> {
        self.authorship.as_ref().map(|a| a.command.name())
    }
}

/// What [`Store::state_at`] found at a revision of a goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PastState {
    /// The goal as it stood right after the revision asked for.
    Kept(Box<GoalState>),
    /// The store cannot show the revision asked for. It can show the goal's revisions from
    /// `earliest` to `head`: `earliest` is 1, or the revision its history was compacted up to
    /// (the store keeps the state there as its base snapshot, and the events after it).
    Unavailable {
        /// The earliest revision the store can show.
        earliest: u64,
        /// The goal's current revision, the latest it can show.
        head: u64,
    },
}

/// What [`Store::append`] did with a commit. The store decides it inside the commit's own
/// transaction, by which append recorded the operation id first, so of any number of appends
/// of one operation (concurrent or not, from any process) exactly one is ever answered
/// [`Appended::Committed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    /// This append wrote the commit; the receipt is the one it recorded.
    Committed(Receipt),
    /// The operation had already committed with the same digest (by an earlier or a concurrent
    /// append): its first receipt. This append wrote nothing.
    Replayed(Receipt),
}

impl Appended {
    /// The receipt, whichever append wrote it.
    pub fn receipt(&self) -> &Receipt {
        match self {
            Appended::Committed(receipt) | Appended::Replayed(receipt) => receipt,
        }
    }

    /// The receipt, taken out.
    pub fn into_receipt(self) -> Receipt {
        match self {
            Appended::Committed(receipt) | Appended::Replayed(receipt) => receipt,
        }
    }

    /// True when this append wrote the commit.
    pub fn is_committed(&self) -> bool {
        matches!(self, Appended::Committed(_))
    }
}

/// A goal's standing, for cross-goal listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Not terminal.
    Active,
    /// Terminal, accepted.
    Accepted,
    /// Terminal, abandoned.
    Abandoned,
}

/// One goal in a cross-goal listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalSummary {
    /// The goal listed.
    pub goal: GoalId,
    /// Its objective, as the spec states it.
    pub objective: String,
    /// Its standing at the listing's `now`: terminal is derived, never stored.
    pub status: GoalStatus,
    /// Its revision when listed; a later commit moves it.
    pub revision: u64,
    /// The earliest time its decisions can change by time alone, if any.
    pub next_wake: Option<Timestamp>,
}

/// A provider's fact a goal refused to record, kept beside the goals so that nothing from
/// outside is lost without a trace: it stays visible (`status`, the board, `/metrics`) until it
/// is re-applied or dismissed ([`Store::keep_dead_letter`]). One per goal and operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    /// The goal that refused it.
    pub goal: GoalId,
    /// The operation it was submitted under. Re-applying submits it under the same one, so a
    /// record that committed meanwhile replays instead of recording twice.
    pub operation: OperationId,
    /// Who submitted it (the provider).
    pub actor: Actor,
    /// What it would have recorded.
    pub command: Command,
    /// Where it came from, in words (e.g. `GitHub delivery 72d3… (issue_comment)`).
    pub origin: String,
    /// The refusal's code.
    pub code: String,
    /// The refusal's words: why the goal could not record it.
    pub reason: String,
    /// When it was first refused.
    pub first_refused: Timestamp,
    /// When it was last refused.
    pub last_refused: Timestamp,
    /// How many times it was refused (a redelivery or a retry refused again counts).
    pub refusals: u32,
}

impl DeadLetter {
    /// `self` refused again as `newer` says: the first time kept, the newer reason and time
    /// taken, the refusal counted.
    #[must_use]
    pub fn refused_again(self, newer: DeadLetter) -> DeadLetter {
        DeadLetter {
            first_refused: self.first_refused.min(newer.first_refused),
            refusals: self.refusals.saturating_add(newer.refusals.max(1)),
            ..newer
        }
    }
}

/// The dead letters a store keeps: the oldest first, up to the limit asked for, and how many
/// there are in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetters {
    /// The letters, the first refused first.
    pub letters: Vec<DeadLetter>,
    /// How many the store keeps.
    pub total: u64,
}

/// A store failure. Refusals are not store errors: a stale revision is [`StoreError::Conflict`]
/// because it is the store that detects it at commit time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The goal moved since the request was validated: reload and retry.
    #[error("stale revision: expected {expected}, the goal is at {current}; reload and retry")]
    Conflict {
        /// What the request expected.
        expected: u64,
        /// The revision the goal stands at now: reload from it.
        current: u64,
    },
    /// The operation id was already committed with a different payload.
    #[error(
        "operation `{operation}` was already committed with a different payload; use a new operation id"
    )]
    OperationConflict {
        /// The operation id already taken by another payload.
        operation: OperationId,
    },
    /// The commit may or may not have happened (the connection was lost mid-commit); read the
    /// outcome back ([`Store::resolve`] with `attempt`) before doing anything else for this
    /// goal.
    #[error(
        "the outcome of operation `{operation}` is unknown; read its receipt back before retrying"
    )]
    Ambiguous {
        /// The operation whose receipt to read back.
        operation: OperationId,
        /// The append's own attempt id, which the store recorded with the receipt if that
        /// append wrote it: what [`Store::resolve`] compares to tell "this append committed"
        /// from "another append of the same operation did". Opaque; empty when the store
        /// records none.
        attempt: String,
    },
    /// The goal does not exist.
    #[error("no goal `{goal}` in this store")]
    UnknownGoal {
        /// The goal asked for.
        goal: GoalId,
    },
    /// The batch does not apply to the goal's state (a gap in revisions, an event that
    /// contradicts the history, a batch for another goal): nothing was written. Build batches
    /// with the kernel's `execute` and `stamp` against the loaded state.
    #[error("the batch was refused, nothing was written: {detail}")]
    InvalidBatch {
        /// What is wrong.
        detail: String,
    },
    /// Stored data (the store's own schema or an event's) was written by a newer version.
    #[error("the store holds schema {found}; this build reads up to {supported}: upgrade loopx")]
    NewerSchema {
        /// The schema found.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// A goal's stored history is damaged: an event row is missing, changed outside loopx or
    /// unreadable, or events are stored for a goal whose row is gone. Every read and write of
    /// that goal fails with this error and changes nothing; other goals work.
    #[error(
        "the history of goal `{goal}` is damaged at revision {revision}: {detail}; the goal is neither read nor written: restore the store from a backup"
    )]
    HistoryDamaged {
        /// The goal whose history is damaged.
        goal: GoalId,
        /// The lowest revision known to be damaged (0: the goal's own row).
        revision: u64,
        /// What is wrong, without any stored payload.
        detail: String,
    },
    /// The commit's time is beyond the store's own clock plus the goal's clock skew
    /// ([`AppendRequest::clock_skew`]): nothing was written. The write path reports it as the
    /// refusal `clock_ahead`.
    #[error(
        "the commit's time {at} is ahead of the store's clock ({store_time}) by more than {skew}; nothing was written"
    )]
    ClockAhead {
        /// The commit's latest time.
        at: Timestamp,
        /// The store's clock when it refused the commit.
        store_time: Timestamp,
        /// The skew allowed.
        skew: Duration,
    },
    /// Stored data is damaged.
    #[error("the store is corrupt: {detail}")]
    Corrupt {
        /// What is wrong.
        detail: String,
    },
    /// The store cannot be reached.
    #[error("the store is unavailable: {detail}")]
    Unavailable {
        /// What failed.
        detail: String,
    },
}

/// Durable goal state. Each goal is an event-sourced aggregate; a commit appends a batch of
/// events atomically, guarded by the expected revision and idempotent by operation id.
#[async_trait]
pub trait Store: Send + Sync {
    /// The goal's current state, or `None` when it does not exist.
    async fn load(&self, goal: &GoalId) -> Result<Option<GoalState>, StoreError>;

    /// The goal's state as this handle last saw it, taken without I/O and with no promise that
    /// it is current: another writer may have moved the goal since. [`submit`](crate::submit)
    /// starts from it and lets the append's compare-and-set refuse a stale one, which saves a
    /// read per commit for a goal one writer keeps moving. `None` (the default) when the handle
    /// keeps no such state; a wrapper around another store should forward it.
    fn cached(&self, goal: &GoalId) -> Option<GoalState> {
        let _ = goal;
        None
    }

    /// Commits the folded batch atomically: [`Appended::Committed`] with its receipt when this
    /// call wrote it. The same operation id with the same digest is [`Appended::Replayed`] with
    /// the first receipt and changes nothing; with another digest it is
    /// [`StoreError::OperationConflict`]; a goal that no longer stands at the commit's expected
    /// revision is [`StoreError::Conflict`]. Which append of an operation committed is decided
    /// inside the transaction that records it: of any number of appends of one operation,
    /// exactly one is ever answered `Committed`. An append whose outcome the store cannot tell
    /// is [`StoreError::Ambiguous`], carrying its attempt id for [`Store::resolve`].
    async fn append(&self, commit: Commit) -> Result<Appended, StoreError>;

    /// Reads back the outcome of an append that was [`StoreError::Ambiguous`]: `None` when
    /// `operation` never committed; [`Appended::Committed`] only when the store can prove that
    /// the append with `attempt` wrote its receipt (the attempt id recorded with it matches);
    /// otherwise [`Appended::Replayed`] with the receipt another append wrote (or one whose
    /// attempt is no longer kept, e.g. after compaction). The default never claims a commit: it
    /// answers every receipt found as `Replayed`, which is always safe; a store that records
    /// attempt ids (and a wrapper, which forwards it) overrides it.
    async fn resolve(
        &self,
        goal: &GoalId,
        operation: &OperationId,
        attempt: &str,
    ) -> Result<Option<Appended>, StoreError> {
        let _ = attempt;
        Ok(self.receipt(goal, operation).await?.map(Appended::Replayed))
    }

    /// The receipt of an operation, if it committed.
    async fn receipt(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError>;

    /// Up to `limit` events of a goal with a revision greater than `after`, in order. Empty for
    /// an unknown goal; after a compaction, the first event returned is the first one kept.
    async fn events(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError>;

    /// The goal as it stood right after `revision`: [`PastState::Kept`] for a revision from
    /// the earliest the store keeps to the goal's head, folded from the newest snapshot at or
    /// before it and the events after that snapshot, or, before a compaction's base, from the
    /// archive the compaction moved its events into (checked as [`load`](Store::load) checks
    /// them); [`PastState::Unavailable`], naming the revisions it can show, for revision 0, a
    /// revision beyond the head, or one before what a store without an archive of it keeps. `None` for a goal the store
    /// does not hold. A goal's state at a revision never changes, so two reads of one revision
    /// answer alike while the store keeps it. Reads only.
    ///
    /// Required, as [`latest_operations`](Store::latest_operations) is, so that a wrapper
    /// around another store cannot forget to forward it.
    async fn state_at(&self, goal: &GoalId, revision: u64)
    -> Result<Option<PastState>, StoreError>;

    /// Up to `limit` of the goal's latest committed operations whose receipt revision is at
    /// most `up_to`, newest first: the audit trail read backwards from `up_to` (a recorded
    /// no-op comes before the commit whose revision it kept, as it was recorded after it).
    /// Operations whose events compaction dropped are listed with the receipt, actor and event
    /// names the store kept for them. Empty for a goal the store does not hold. Reads only,
    /// and at most `limit` records, whatever the length of the history.
    async fn latest_operations(
        &self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError>;

    /// Every goal with its standing at `now`.
    async fn goals(&self, now: Timestamp) -> Result<Vec<GoalSummary>, StoreError>;

    /// The cross-goal frontier: for each goal `agent` is registered with, the todos legal for
    /// it at `now`, most urgent first.
    async fn frontier(
        &self,
        agent: &AgentId,
        now: Timestamp,
    ) -> Result<Vec<(GoalId, TodoId)>, StoreError>;

    /// The goals that follow any of `subjects` ([`GoalState::watched_subjects`]), abandoned
    /// goals left out, each once, in id order: where a fact about those subjects is routed.
    /// The default reads every goal; a backend with an index answers from it, and a wrapper
    /// forwards it.
    async fn watching(
        &self,
        subjects: &[Subject],
        now: Timestamp,
    ) -> Result<Vec<GoalId>, StoreError> {
        let mut found = Vec::new();
        for summary in self.goals(now).await? {
            if summary.status == GoalStatus::Abandoned {
                continue;
            }
            let Some(state) = self.load(&summary.goal).await? else {
                continue;
            };
            let watched = state.watched_subjects();
            if subjects.iter().any(|s| watched.contains(s)) {
                found.push(summary.goal);
            }
        }
        found.sort();
        Ok(found)
    }

    /// Keeps `letter` ([`DeadLetter`]): a letter of the same goal and operation already kept
    /// is [refused again](DeadLetter::refused_again). Required, so that a wrapper cannot
    /// forget to forward it.
    async fn keep_dead_letter(&self, letter: DeadLetter) -> Result<(), StoreError>;

    /// Up to `limit` of the dead letters kept, the first refused first, with how many are kept.
    async fn dead_letters(&self, limit: usize) -> Result<DeadLetters, StoreError>;

    /// Removes the dead letter of `operation` on `goal` (it was re-applied, or a person
    /// dismissed it); true when one was kept.
    async fn drop_dead_letter(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError>;

    /// The earliest wake time across all goals after `now`.
    async fn next_wake(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError>;

    /// Waits until one of the watched goals has moved, or until `timeout` has passed.
    ///
    /// `watch` pairs each goal with the revision the caller last saw (0 for a goal it expects
    /// to be created). The call resolves as soon as at least one watched goal stands past the
    /// revision given for it, returning every watched goal that does (in the order of `watch`,
    /// each once), and with an empty list when `timeout` passes first. A goal that is already
    /// past its revision when the call starts is returned at once, so a caller never misses a
    /// commit that landed between its last read and the call. A commit by any handle counts,
    /// including handles in other processes or on other machines. A recorded no-op (an empty
    /// batch) does not move a goal and wakes nobody. An empty `watch` simply sleeps for
    /// `timeout`.
    ///
    /// This lets a waiting engine sleep until its earliest wake time ([`Store::next_wake`]) or
    /// a change, whichever comes first: call it with the goals it waits on and the time left
    /// until that wake time, then decide again. A spurious early return is never reported as
    /// a change: every goal returned really stands past its given revision.
    ///
    /// How promptly a change is seen depends on the backend (an in-process notification, a
    /// bounded polling interval, or a database notification); each backend documents its own.
    /// Dropping the returned future stops the wait.
    async fn changed(
        &self,
        watch: &[(GoalId, u64)],
        timeout: Duration,
    ) -> Result<Vec<GoalId>, StoreError>;
}

// ----- provider -------------------------------------------------------------------------------

/// What to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObserveRequest {
    /// The observation stream to look at.
    pub key: ObservationKey,
    /// The fingerprint already recorded, so a provider can answer "unchanged" cheaply.
    pub known: Option<Fingerprint>,
    /// The tag the recorded observation was read with ([`Observation::etag`]), so a source
    /// that can tell (an HTTP `ETag`) answers "not modified": the provider then returns no
    /// observation, which is "unchanged".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

/// An external side effect, fenced by the lease epoch and deduplicated by its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// Stable across retries of the same effect.
    pub idempotency_key: String,
    /// The goal whose todo's lease authorises the effect.
    pub goal: GoalId,
    /// The todo whose lease authorises it.
    pub todo: TodoId,
    /// The lease epoch; a provider that can check fencing rejects stale epochs.
    pub epoch: u64,
    /// What to do, e.g. `github.comment`.
    pub kind: String,
    /// Its parameters, as the provider documents them for `kind`.
    pub params: BTreeMap<String, String>,
}

/// An external effect a turn asks its engine to perform through the outbox: the engine commits
/// its intent under the turn's lease epoch first and performs it only then, with an idempotency
/// key derived from the goal, the turn and its place in the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectRequest {
    /// What to do, e.g. `github.comment`.
    pub kind: String,
    /// What it acts on, for people (e.g. `acme/cli#12`).
    pub target: String,
    /// Its parameters, as the effector documents them for `kind`.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// What a readback found about an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// It happened: record it without re-running.
    Committed,
    /// It did not happen: it may run again with the same key.
    Absent,
    /// Cannot tell: fail closed and repair.
    Unknown,
}

/// A provider failure. Its JSON form is `{"kind": "timeout", "detail": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderError {
    /// The call did not finish in time.
    #[error("timed out after {0}")]
    Timeout(Duration),
    /// Rate limited; retry after the given instant.
    #[error("rate limited until {0}")]
    RateLimited(Timestamp),
    /// The external system refused or failed.
    #[error("{0}")]
    Failed(String),
    /// The request was malformed or unsupported.
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// One bounded external call that returns typed observations; never a state machine of its own.
///
/// Observing is all the engine asks of a provider. A provider that also performs external
/// side effects implements [`Effector`] too; one that performs none simply does not, so no
/// caller can ask it for an effect and no wrapper can forget to forward one.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name, recorded as the observations' actor.
    fn source(&self) -> &SourceId;

    /// Observes one stream.
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError>;
}

/// Performs fenced external side effects and reads them back. Implemented next to
/// [`Provider`] by the providers that write to the world (a GitHub comment, a status); a
/// wrapper implements it exactly when the provider it wraps does.
#[async_trait]
pub trait Effector: Send + Sync {
    /// Performs an effect at most once per idempotency key, refusing an epoch older than one
    /// already seen for the same todo where the provider can tell.
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError>;

    /// Reads back whether an effect happened: [`EffectStatus::Unknown`] when it cannot tell.
    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError>;
}

// ----- capability -----------------------------------------------------------------------------

/// A capability's proposal: a command plus why. The engine executes it with the capability as
/// actor, through the same validation as any other command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The proposed command, executed with the capability as actor.
    pub command: Command,
    /// Why, for the log.
    pub rationale: String,
}

/// Domain judgement: goal state in, proposed commands out. Pure and synchronous; it holds no
/// lifecycle logic and cannot write state except through proposals the kernel validates.
///
/// A capability is not told which observations just changed: they are already recorded in
/// `state`, and judging the state alone is what makes a restarted engine, or another host,
/// judge the same.
pub trait Capability: Send + Sync {
    /// The capability's name, recorded as the proposals' actor.
    fn source(&self) -> &SourceId;

    /// Judges the goal as it stands at `now`, for `agent` (the agent whose engine asks, which
    /// a capability may make the owner of the work it proposes).
    fn judge(&self, state: &GoalState, agent: &AgentId, now: Timestamp) -> Vec<Proposal>;
}

// ----- executor and validator -----------------------------------------------------------------

/// One bounded turn handed to an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRequest {
    /// The goal the turn serves.
    pub goal: GoalId,
    /// The goal's objective, so an executor starting from nothing knows why.
    pub objective: String,
    /// The todo the turn works on, leased to `agent`.
    pub todo: TodoId,
    /// The todo's title: what to do, in words.
    pub title: String,
    /// The agent running it.
    pub agent: AgentId,
    /// The lease epoch to present with every effect.
    pub epoch: u64,
    /// The turn id the charge, the evidence and every effect are bound to.
    pub turn: TurnId,
    /// What was reserved.
    pub reserved: Amounts,
    /// The handoff note, when the todo was handed to this agent.
    pub handoff: Option<HandoffNote>,
    /// The lease expiry; the turn must finish (or renew) before it.
    pub deadline: Timestamp,
    /// What the gates covering the todo came to (see [`crate::Decided`]): the people's
    /// answers this turn acts on, in full.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decided: Vec<crate::gate::Decided>,
    /// The todo's recent failed turns, newest last (see [`crate::retry::Streak`]): what failed
    /// last time and why — a failing check's or command's own words, bounded and redacted —
    /// so this turn starts from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<crate::retry::FailureNote>,
}

/// What an executor hands back. Its own account is not evidence: the validator decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnReport {
    /// The transition the executor proposes; completing needs the validator's pass.
    pub transition: Transition,
    /// Observations it made.
    #[serde(default)]
    pub observations: Vec<Observation>,
    /// What it used: the engine charges its tokens and cost as reported, sets the turn count
    /// to one and the wall-clock time to what its own clock measured around the run.
    #[serde(default)]
    pub usage: Amounts,
    /// A short account, for people.
    #[serde(default)]
    pub summary: String,
    /// External effects the engine performs for the turn through the outbox, in order, before
    /// it settles; an engine without an effector fails a turn that asks for any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<EffectRequest>,
    /// Why the executor could not take the turn's tokens and cost from the turn itself, if it
    /// could not (then `usage` says what it charged instead); left out of the JSON when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_problem: Option<UsageProblem>,
}

/// Why an executor could not read what a turn used. Never a failure of the turn: the turn
/// settles, charged what the executor could establish, and the problem is reported with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UsageProblem {
    /// The turn wrote no usage report.
    #[error("the turn wrote no usage report")]
    Missing,
    /// The usage report exists but could not be read.
    #[error("the turn's usage report could not be read: {detail}")]
    Unreadable {
        /// What failed, without the report's contents.
        detail: String,
    },
    /// The usage report is not of the documented shape.
    #[error("the turn's usage report is malformed: {detail}")]
    Malformed {
        /// Where and how it departs from the shape, never quoting its contents.
        detail: String,
    },
}

impl TurnReport {
    /// A report proposing `transition`, with no observations and no usage.
    pub fn new(transition: Transition, summary: impl Into<String>) -> Self {
        TurnReport {
            transition,
            observations: Vec::new(),
            usage: Amounts::ZERO,
            summary: summary.into(),
            effects: Vec::new(),
            usage_problem: None,
        }
    }

    /// The todo is done and nothing follows it (completes only if the validator passes it).
    pub fn complete(summary: impl Into<String>) -> Self {
        let done = Transition::Complete {
            continuation: Continuation::NoFollowUp,
        };
        TurnReport::new(done, summary)
    }

    /// The todo needs another turn.
    pub fn keep_open(summary: impl Into<String>) -> Self {
        TurnReport::new(Transition::KeepOpen, summary)
    }

    /// The same report with what the turn used.
    #[must_use]
    pub fn with_usage(mut self, usage: Amounts) -> Self {
        self.usage = usage;
        self
    }

    /// The same report asking for an external effect, performed through the outbox.
    #[must_use]
    pub fn with_effect(mut self, effect: EffectRequest) -> Self {
        self.effects.push(effect);
        self
    }

    /// The same report with observations the turn made.
    #[must_use]
    pub fn with_observations(
        mut self,
        observations: impl IntoIterator<Item = Observation>,
    ) -> Self {
        self.observations.extend(observations);
        self
    }
}

/// An executor or validator failure. An executor's failure is settled as a failed turn of
/// its [`class`](TurnError::class), retried under the goal's retry policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The turn exceeded its time.
    #[error("the turn timed out after {0}")]
    Timeout(Duration),
    /// The executor or validator could not run.
    #[error("{0}")]
    Failed(String),
    /// The turn's process exited unsuccessfully without reporting the turn.
    #[error("{detail}")]
    Exited {
        /// The exit code.
        code: i32,
        /// What ran and how it ended, for people (never a secret).
        detail: String,
    },
    /// A signal ended the turn's process.
    #[error("{detail}")]
    Killed {
        /// The signal number.
        signal: i32,
        /// What ran and how it ended, for people (never a secret).
        detail: String,
    },
    /// The turn lacked credentials or was refused authorization.
    #[error("{0}")]
    Unauthorized(String),
    /// A service the turn depends on rate-limited it.
    #[error("{0}")]
    RateLimited(String),
    /// The turn was not started: another session of the agent took it over under a newer
    /// epoch (`epoch`), or began it under the same one. The engine settles nothing for it.
    #[error("the turn belongs to another session (epoch {epoch}); this session did not start it")]
    Fenced {
        /// The epoch the journal says owns the turn.
        epoch: u64,
    },
}

impl TurnError {
    /// The failure's class, as the settlement records it.
    pub fn class(&self) -> FailureClass {
        match self {
            TurnError::Timeout(_) => FailureClass::TimedOut,
            TurnError::Failed(_) => FailureClass::Unavailable,
            TurnError::Exited { .. } => FailureClass::Exited,
            TurnError::Killed { .. } => FailureClass::Killed,
            TurnError::Unauthorized(_) => FailureClass::Unauthorized,
            TurnError::RateLimited(_) => FailureClass::RateLimited,
            // Never settled by the engine (the session lost the turn); `other` if a host does.
            TurnError::Fenced { .. } => FailureClass::Other,
        }
    }

    /// The failure as a settlement reports it: its class and its message, with control
    /// characters replaced by spaces and cut to [`MAX_TEXT`](crate::MAX_TEXT) bytes, so the
    /// settlement always passes validation.
    pub fn failure(&self) -> TurnFailure {
        let mut detail: String = self
            .to_string()
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        if detail.len() > crate::MAX_TEXT {
            let mut end = crate::MAX_TEXT;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
        }
        TurnFailure {
            class: self.class(),
            detail,
        }
    }
}

/// What an executor knows about a prepared turn found in flight after a crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Recovery {
    /// The turn never started: nothing happened, so running the same turn id again is safe.
    NotStarted,
    /// The turn ran to the end and this is its report: validate and settle it, do not re-run.
    Finished(TurnReport),
    /// The turn ran and failed: settle it as failed, do not re-run.
    Failed(TurnFailure),
    /// The executor cannot tell whether an effect happened: fail closed, repair.
    Unknown,
}

/// Runs one bounded turn.
#[async_trait]
pub trait Executor: Send + Sync {
    /// Runs the turn. Effects carry the turn id (and the lease epoch), so an external system
    /// can deduplicate a re-run of the same turn. An error is settled as a failed turn of its
    /// [`class`](TurnError::class) and paced by the goal's retry policy.
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError>;

    /// Reads back a turn that was prepared (journalled in the store) before a crash and is
    /// still in flight. Executors that keep no record of their own answer
    /// [`Recovery::Unknown`]; the engine then re-runs only idempotent todos and sends every
    /// other one to repair. The engine asks only after taking the turn over under
    /// `turn.epoch`, so an executor whose record is shared by several sessions may treat the
    /// call as fencing older epochs: answering [`Recovery::NotStarted`], it should refuse to
    /// start the turn under an older epoch afterwards ([`TurnError::Fenced`]), as the
    /// provider's command executor does.
    async fn recover(&self, turn: &TurnRequest) -> Recovery {
        let _ = turn;
        Recovery::Unknown
    }
}

/// An independent judgement of a turn, with the evidence it established. The engine records
/// it as the settlement's [`Verdict`], naming the validator it ran ([`Validator::actor`]), so
/// a validator cannot speak for another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// Whether the turn's work holds; only `passed` lets a todo complete.
    pub outcome: VerdictOutcome,
    /// A short explanation, for people.
    #[serde(default)]
    pub summary: String,
    /// Evidence, each bound to the revision it was established at.
    #[serde(default)]
    pub evidence: Vec<NewEvidence>,
}

impl Validation {
    /// A judgement with `outcome` and no evidence.
    pub fn new(outcome: VerdictOutcome, summary: impl Into<String>) -> Self {
        Validation {
            outcome,
            summary: summary.into(),
            evidence: Vec::new(),
        }
    }

    /// The turn's work holds.
    pub fn passed(summary: impl Into<String>) -> Self {
        Validation::new(VerdictOutcome::Passed, summary)
    }

    /// The turn's work does not hold.
    pub fn failed(summary: impl Into<String>) -> Self {
        Validation::new(VerdictOutcome::Failed, summary)
    }

    /// The same judgement with `evidence` added.
    #[must_use]
    pub fn with_evidence(mut self, evidence: impl IntoIterator<Item = NewEvidence>) -> Self {
        self.evidence.extend(evidence);
        self
    }

    /// The settlement's verdict: this judgement by `validator`.
    pub fn verdict(&self, validator: Actor) -> Verdict {
        Verdict {
            validator,
            outcome: self.outcome,
            summary: self.summary.clone(),
            signature: None,
        }
    }
}

/// Judges a turn independently of its executor.
#[async_trait]
pub trait Validator: Send + Sync {
    /// Who validates; must differ from the executing agent.
    fn actor(&self) -> Actor;

    /// Validates the turn.
    async fn validate(
        &self,
        turn: &TurnRequest,
        report: &TurnReport,
    ) -> Result<Validation, TurnError>;
}

// ----- clock ----------------------------------------------------------------------------------

/// The only source of `now`, and of waiting. The kernel never reads a clock; adapters implement
/// this over the system clock, tests over [`ManualClock`](crate::ManualClock).
#[async_trait]
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;

    /// Resolves once the clock shows at least `now() + span`.
    async fn sleep(&self, span: Duration);
}
