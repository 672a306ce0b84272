//! Bounded history: compaction folds a goal's old events into a base snapshot and moves them
//! into the goal's archive, keeping what recovery and audit need; a [`RetentionPolicy`] runs it
//! as a goal grows.

use async_trait::async_trait;
use loopx_kernel::seams::{Authorship, Receipt, Store, StoreError};
use std::collections::BTreeMap;

use loopx_kernel::{Actor, Event, GoalId, GoalState, RecordedEvent, Snapshot, Timestamp};

use crate::rows::RowDamage;
use serde::{Deserialize, Serialize};

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// The goal.
    pub goal: GoalId,
    /// The goal's base revision afterwards: its state at this revision is kept as the base
    /// snapshot, and only events after it are kept.
    pub base_revision: u64,
    /// How many events this call moved out of the kept history into the archive (zero when
    /// the goal was already compacted that far).
    pub events_removed: u64,
}

/// When a store compacts a goal on its own: after a commit that takes the goal's revision past
/// a multiple of [`every`](RetentionPolicy::every), it compacts the goal so that only the last
/// [`keep_events`](RetentionPolicy::keep_events) events stay in the kept history; the events
/// before them move into the goal's archive, where [`Retention::archived`] (and `loopx log`,
/// `loopx status --at-revision`, `loopx doctor --verify`) still read and check them.
///
/// On by default ([`RetentionPolicy::default`]: keep 10,000 events, compact every 1,000), set
/// per store handle (`SqliteOptions::retention`, `PostgresOptions::retention`,
/// [`MemoryStore::with_retention`](crate::MemoryStore::with_retention)), and
/// [`RetentionPolicy::off`] for none. A compaction that fails after its commit leaves the
/// commit as it was (it is durable) and is tried again at the next multiple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionPolicy {
    /// How many of a goal's newest events stay in its kept history.
    pub keep_events: u64,
    /// How often, in revisions, a goal is compacted (0: never).
    pub every: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            keep_events: 10_000,
            every: 1_000,
        }
    }
}

impl RetentionPolicy {
    /// No compaction on a store's own initiative; [`Retention::compact`] still compacts.
    pub const fn off() -> Self {
        RetentionPolicy {
            keep_events: 0,
            every: 0,
        }
    }

    /// Keeps the last `keep_events` events of each goal, compacting every `every` revisions
    /// (`every` 0: never).
    pub const fn keep(keep_events: u64, every: u64) -> Self {
        RetentionPolicy { keep_events, every }
    }

    /// Whether the policy compacts at all.
    pub const fn is_on(&self) -> bool {
        self.every > 0
    }

    /// The revision to compact a goal to after a commit took it from `before` to `after`:
    /// `Some` when the commit passed a multiple of `every` and more than `keep_events` events
    /// were committed.
    pub fn due(&self, before: u64, after: u64) -> Option<u64> {
        if self.every == 0 || after <= before || before / self.every == after / self.every {
            return None;
        }
        after
            .checked_sub(self.keep_events)
            .filter(|target| *target > 0)
    }
}

/// One committed operation as the audit trail keeps it, defined beside the [`Store`] seam
/// (which reads the trail backwards with [`Store::latest_operations`]).
pub use loopx_kernel::seams::OperationRecord;

/// Bounded history for a [`Store`].
///
/// [`compact`](Retention::compact) keeps, for the goal:
///
/// - the current state, unchanged: `load` returns exactly what it returned before;
/// - a **base snapshot**: the state at the compaction point, with everything the state holds
///   (every todo, lease epoch, turn and its charge, gate, piece of evidence and observation);
/// - every event after the compaction point, so base + events = current state can be checked;
/// - **every receipt**, forever: operation ids stay idempotent after compaction, and the
///   [`operations`](Retention::operations) trail still says who committed what, when, at which
///   revision and which kinds of events. The SQL stores keep a compacted commit's receipt as
///   its digest and move its authorship into the archive with its last event, where the trail
///   reads it.
///
/// It moves the events up to the compaction point into the goal's **archive** (each with the
/// chain head it was stored with, so it stays verifiable) and drops any periodic snapshot
/// older than it. `events(goal, after, ..)` then starts at the first kept event;
/// [`archived`](Retention::archived) reads the events before it, and [`history`] reads both.
#[async_trait]
pub trait Retention: Store {
    /// Compacts `goal` so that only events after revision `keep_after` are kept (a value past
    /// the current revision compacts everything). Compacting to a revision at or before the
    /// current base does nothing. The compaction is atomic: it happens entirely or not at all.
    ///
    /// # Errors
    /// [`StoreError::UnknownGoal`] for a goal the store does not hold; the backend's errors
    /// otherwise, with nothing changed.
    async fn compact(&self, goal: &GoalId, keep_after: u64) -> Result<Compaction, StoreError>;

    /// The base snapshot of a compacted goal (`None` when it was never compacted, or does not
    /// exist). Folding the kept events onto it gives the goal's current state.
    ///
    /// # Errors
    /// The backend's errors; a damaged snapshot is [`StoreError::Corrupt`].
    async fn base(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError>;

    /// Up to `limit` archived events of `goal` after revision `after`, in order: the events
    /// compaction moved out of the kept history, each checked against the chain it was stored
    /// with, and the last one against the base snapshot's chain. Empty for a goal never
    /// compacted (or compacted only before its store kept an archive: see
    /// [`archive_origin`](Retention::archive_origin)).
    ///
    /// # Errors
    /// [`StoreError::HistoryDamaged`] when an archived event is missing or was changed
    /// outside loopx; the backend's errors otherwise.
    async fn archived(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError>;

    /// The state the goal's archive starts from, when it does not start at the goal's creation:
    /// a goal compacted before its store kept an archive lost the events up to that first base,
    /// whose snapshot is kept as the origin the archive folds onto. `None` when the archive
    /// starts at revision 1, is empty, or the goal does not exist.
    ///
    /// # Errors
    /// The backend's errors; a damaged snapshot is [`StoreError::Corrupt`].
    async fn archive_origin(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError>;

    /// The policy this handle compacts goals by on its own.
    fn policy(&self) -> RetentionPolicy;

    /// Up to `limit` committed operations of `goal` whose receipt revision is greater than
    /// `after`, in commit order. Kept across compaction.
    ///
    /// # Errors
    /// The backend's errors; a damaged row is [`StoreError::Corrupt`].
    async fn operations(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError>;

    /// Compares the derived rows the store keeps for `state`'s goal (its goal row: revision,
    /// objective, standing and window, snapshot and base bookkeeping; its registered agents;
    /// each agent's frontier row) with the rows `state` gives at `now`, and returns every
    /// difference. `state` is the fold of the goal's whole history, as a doctor replays it
    /// (not what `load` returns, which trusts the rows). Reads only; changes nothing. A goal
    /// whose row is missing is one [`RowDamage::GoalRow`] for the column `goal`.
    ///
    /// # Errors
    /// The backend's errors.
    async fn check_rows(
        &self,
        state: &GoalState,
        now: Timestamp,
    ) -> Result<Vec<RowDamage>, StoreError>;

    /// Every goal that has a goal row, in id order, as stored: unlike `Store::goals`, nothing
    /// is recomputed or rewritten, so a doctor checks the rows as they are.
    ///
    /// # Errors
    /// The backend's errors; a stored goal id that is not valid is [`StoreError::Corrupt`].
    async fn stored_goals(&self) -> Result<Vec<GoalId>, StoreError>;

    /// The goals that have rows (events, snapshots, receipts, agents, frontier rows) but no
    /// goal row, as [`RowDamage::Orphaned`]: a goal row deleted outside loopx. Reads every
    /// table; changes nothing.
    ///
    /// # Errors
    /// The backend's errors.
    async fn orphans(&self) -> Result<Vec<RowDamage>, StoreError>;
}

/// Up to `limit` recorded events of `goal` after `after`, from its archive and then its kept
/// history: every event the goal recorded since its archive's origin (see
/// [`Retention::archive_origin`]), whether or not compaction moved it.
///
/// # Errors
/// The store's errors (a damaged archive is [`StoreError::HistoryDamaged`]).
pub async fn history<S: Retention + ?Sized>(
    store: &S,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let mut events = store.archived(goal, after, limit).await?;
    if events.len() < limit {
        let from = events.last().map_or(after, |e| e.revision);
        let more = store.events(goal, from, limit - events.len()).await?;
        events.extend(more);
    }
    Ok(events)
}

/// After a commit that took `receipt.goal` to `receipt.revision`: compacts the goal when the
/// store's [`RetentionPolicy`] says it is due. A compaction that fails is reported (a `warn`
/// event) and leaves the commit as it was; the next multiple of the policy tries again.
pub(crate) async fn retain<S: Retention + ?Sized>(store: &S, receipt: &Receipt) {
    let before = receipt.revision.saturating_sub(receipt.events);
    if let Some(target) = store.policy().due(before, receipt.revision)
        && let Err(error) = store.compact(&receipt.goal, target).await
    {
        tracing::warn!(
            goal = %receipt.goal,
            revision = receipt.revision,
            %error,
            "compacting the goal after its commit failed; the commit stands"
        );
    }
}

/// An operation record from its stored columns: the receipt, the issuing actor as JSON (absent
/// for a recorded no-op) and the event names as a JSON array.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_operation(
    receipt: Receipt,
    actor: Option<String>,
    kinds: &str,
    authorship: Option<&str>,
) -> Result<OperationRecord, StoreError> {
    let damaged = |what: &str, error: serde_json::Error| StoreError::Corrupt {
        detail: format!(
            "the {what} of operation `{}` on goal `{}` cannot be read ({error}); restore the store from a backup",
            receipt.operation, receipt.goal
        ),
    };
    let actor: Option<Actor> = actor
        .map(|json| serde_json::from_str(&json))
        .transpose()
        .map_err(|e| damaged("actor", e))?;
    let events: Vec<String> = serde_json::from_str(kinds).map_err(|e| damaged("event list", e))?;
    let authorship = decode_authorship(&receipt, authorship)?;
    Ok(OperationRecord {
        receipt,
        actor,
        events,
        authorship,
    })
}

/// A receipt's stored authorship (JSON), decoded.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_authorship(
    receipt: &Receipt,
    json: Option<&str>,
) -> Result<Option<Authorship>, StoreError> {
    json.map(serde_json::from_str)
        .transpose()
        .map_err(|error| StoreError::Corrupt {
            detail: format!(
                "the authorship of operation `{}` on goal `{}` cannot be read ({error}); restore the store from a backup",
                receipt.operation, receipt.goal
            ),
        })
}

/// The actor and event names of the receipt of the `count` events up to `revision`, read from
/// those events (a receipt keeps no copy of them while its events are stored).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn audit(
    goal: &GoalId,
    events: &BTreeMap<u64, RecordedEvent>,
    revision: u64,
    count: u64,
) -> Result<(Actor, Vec<String>), StoreError> {
    let first = revision.saturating_sub(count) + 1;
    let batch: Vec<&RecordedEvent> = (first..=revision)
        .filter_map(|revision| events.get(&revision))
        .collect();
    match batch.first() {
        Some(event) if batch.len() as u64 == count => Ok((
            event.actor.clone(),
            batch
                .iter()
                .map(|e| Event::name(&e.event).to_owned())
                .collect(),
        )),
        _ => Err(StoreError::Corrupt {
            detail: format!(
                "the events of goal `{goal}` from revision {first} to {revision}, which its audit trail reads, are missing; restore the store from a backup"
            ),
        }),
    }
}

/// The revisions `(after, up_to]` that hold the events of the receipts `spans` (each its
/// revision and event count); `None` for no receipts.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn covering(spans: &[(u64, u64)]) -> Option<(u64, u64)> {
    let after = spans
        .iter()
        .map(|(revision, n)| revision.saturating_sub(*n))
        .min()?;
    let up_to = spans.iter().map(|(revision, _)| *revision).max()?;
    Some((after, up_to))
}

/// The spans (revision, event count) of the records at `pending`: receipts whose actor and
/// event names are read from their events.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn pending_spans(records: &[OperationRecord], pending: &[usize]) -> Vec<(u64, u64)> {
    pending
        .iter()
        .map(|&i| (records[i].receipt.revision, records[i].receipt.events))
        .collect()
}

/// Fills in the actor and event names of the records at `pending` from `events` (which cover
/// their [`pending_spans`]).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn fill_from_events(
    goal: &GoalId,
    records: &mut [OperationRecord],
    pending: &[usize],
    events: &BTreeMap<u64, RecordedEvent>,
) -> Result<(), StoreError> {
    for &i in pending {
        let receipt = &records[i].receipt;
        let (actor, names) = audit(goal, events, receipt.revision, receipt.events)?;
        records[i].actor = Some(actor);
        records[i].events = names;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::RetentionPolicy;
    use proptest::prelude::*;

    proptest! {
        /// Compacting whenever the policy says so keeps a goal's kept history between
        /// `keep_events` (or all of it, while shorter) and `keep_events + every` plus the commit
        /// that passed the multiple, however commits are sized; the policy off never compacts.
        #[test]
        fn the_policy_bounds_the_kept_history(
            keep in 0_u64..200,
            every in 1_u64..100,
            commits in proptest::collection::vec(1_u64..40, 1..300),
        ) {
            let policy = RetentionPolicy::keep(keep, every);
            let mut base = 0;
            let mut revision = 0;
            for n in commits {
                let before = revision;
                revision += n;
                prop_assert_eq!(RetentionPolicy::off().due(before, revision), None);
                if let Some(target) = policy.due(before, revision) {
                    prop_assert_eq!(revision - target, keep);
                    base = base.max(target);
                }
                let kept = revision - base;
                prop_assert!(kept >= revision.min(keep), "kept {kept} of {revision}");
                prop_assert!(kept < keep + every + n, "kept {kept} of {revision}");
            }
        }
    }
}
