//! What the SQL backends share. The store's algorithms — loading a goal, the write path around
//! a commit, the cross-goal queries and the refresh of stale index rows, compaction, the audit
//! trail — are written once in [`ops`] over a [`Dialect`]: the handful of primitives that really
//! differ per backend (read a goal row, events, a snapshot, receipts and index rows; write a
//! commit; rewrite a goal's index rows; cut history up to a revision). Every SQL statement stays
//! with its backend; so do its transactions' flavours, its row types and how a commit reaches
//! the database (SQLite: statements in one `BEGIN IMMEDIATE` transaction; PostgreSQL: one call of
//! the schema's `loopx_append` function).
//!
//! The primitives are async. PostgreSQL's await the server; SQLite's run synchronously inside
//! (its store calls already run where blocking is allowed), so the SQLite backend drives the
//! shared futures to completion in place, without an executor.

pub(crate) mod ops;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use loopx_kernel::seams::{Receipt, StoreError};
use loopx_kernel::{AgentId, GoalId, GoalState, OperationId, Subject, Timestamp};

use crate::cache::StateCache;
use crate::commit::Prepared;
use crate::fold::EventRow;
use crate::index::{Projection, covers};
use crate::rows::StoredRows;

/// The tables of a store's data, in both schemas (besides `schema_version`).
// Read by the PostgreSQL schema check and the SQLite plan tests only.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) const TABLES: [&str; 9] = [
    "goals",
    "events",
    "archived_events",
    "receipts",
    "snapshots",
    "goal_agents",
    "frontier",
    "goal_subjects",
    "dead_letters",
];

/// What a transaction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Reads over one consistent snapshot of the database; writes nothing.
    Read,
    /// Reads and writes that commit together (SQLite: the write lock from the start; PostgreSQL:
    /// goal rows locked as they are read with `lock`).
    Write,
}

/// A decoded snapshot and the chain head stored with it (`None`: missing or unreadable, which is
/// damage).
pub(crate) type ChainedSnapshot = (GoalState, Option<[u8; 32]>);

/// The columns of a goal row that loading and compaction need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GoalRow {
    /// The goal's revision.
    pub revision: u64,
    /// The revision its history was compacted to (0: never).
    pub base_revision: u64,
    /// The revision of its latest snapshot (0: none).
    pub snapshot_revision: u64,
    /// The chain head at its revision (`None`: missing or unreadable, which is damage).
    pub chain: Option<[u8; 32]>,
}

/// A time window `[from, until)` of a goal's index rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// The instant the rows hold from.
    pub from: Timestamp,
    /// The instant they stop holding, if any.
    pub until: Option<Timestamp>,
}

impl Window {
    /// True when the rows are exact at `now`.
    pub(crate) fn covers(self, now: Timestamp) -> bool {
        covers(self.from, self.until, now)
    }
}

/// One goal row as the listing of every goal reads it.
#[derive(Debug, Clone)]
pub(crate) struct ListedGoal {
    /// The goal.
    pub goal: GoalId,
    /// Its objective.
    pub objective: String,
    /// Its stored standing, by name.
    pub status: String,
    /// Its revision.
    pub revision: u64,
    /// The window its rows hold for.
    pub window: Window,
}

/// One goal an agent is registered with, as the cross-goal frontier reads it.
#[derive(Debug, Clone)]
pub(crate) struct AgentGoal {
    /// The goal.
    pub goal: GoalId,
    /// The window its rows hold for.
    pub window: Window,
    /// The agent's stored frontier row in the goal (JSON), absent when its frontier is empty.
    pub todos: Option<String>,
}

/// One receipt as the audit trail reads it: actor and event names are stored with it, or (both
/// absent) read from its events.
#[derive(Debug, Clone)]
pub(crate) struct OperationRow {
    /// The receipt.
    pub receipt: Receipt,
    /// The actor's JSON, when stored with the receipt.
    pub actor: Option<String>,
    /// The event names' JSON array, when stored with the receipt.
    pub kinds: Option<String>,
    /// The commit's authorship (JSON), when stored with the receipt (schema 7).
    pub authorship: Option<String>,
}

/// A receipt whose actor and event names compaction must keep before it deletes its events.
#[derive(Debug, Clone)]
pub(crate) enum Kept<D> {
    /// A receipt on its commit's last event row: it moves to the receipts table.
    OnEvent {
        /// The revision it produced.
        revision: u64,
        /// How many events it committed.
        events: u64,
        /// The operation id, as stored.
        operation: String,
        /// The payload digest, as stored (copied, never re-encoded).
        digest: D,
        /// The commit time, milliseconds.
        at: i64,
    },
    /// A receipts row that reads its names from its events (PostgreSQL schema 3): the names are
    /// written into it.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Unnamed {
        /// The revision it produced.
        revision: u64,
        /// How many events it committed.
        events: u64,
        /// The row's sequence number among the goal's receipts.
        seq: i64,
    },
}

impl<D> Kept<D> {
    /// The receipt's revision and event count.
    pub(crate) fn span(&self) -> (u64, u64) {
        match self {
            Kept::OnEvent {
                revision, events, ..
            }
            | Kept::Unnamed {
                revision, events, ..
            } => (*revision, *events),
        }
    }
}

/// What writing a commit found.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The commit is written (its snapshot, if one was due, too), by this write: the check of
    /// the operation id and the write ran in one transaction.
    Committed,
    /// The operation had committed before (or a concurrent write committed it first): its first
    /// receipt, nothing written.
    Recorded(Receipt),
    /// The goal stands at another revision than the commit expects: nothing written.
    Moved {
        /// The goal's revision.
        current: u64,
    },
}

/// The primitives that differ per backend. Every method reads or writes inside the transaction
/// the caller opened with [`begin`](Dialect::begin), or on its own (one statement, or a
/// transaction of its own where noted) when none is open. A dialect dropped with a transaction
/// open rolls it back.
pub(crate) trait Dialect: Send {
    /// A payload digest as the backend stores it (text on SQLite, bytes on PostgreSQL).
    type Digest: Send + Sync;

    /// The handle's cache of folded states.
    fn cache(&self) -> &StateCache;

    /// After how many events a commit writes a snapshot.
    fn snapshot_every(&self) -> u64;

    /// Opens a transaction.
    fn begin(&mut self, mode: Mode) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Commits the open transaction.
    fn commit(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ends the open transaction, writing nothing.
    fn rollback(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The goal's row; `lock` holds it for the write transaction until it ends.
    fn goal_row(
        &mut self,
        goal: &GoalId,
        lock: bool,
    ) -> impl Future<Output = Result<Option<GoalRow>, StoreError>> + Send;

    /// The goal's row and its events in `(after, up_to]` (up to its revision), as one consistent
    /// read where the backend can, without a transaction around it: events at or below a
    /// revision the row shows never change (compaction only deletes them, which the caller
    /// detects).
    fn goal_row_and_tail(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> impl Future<Output = Result<Option<(GoalRow, Vec<EventRow>)>, StoreError>> + Send;

    /// The goal's event rows in `(after, up_to]`, in order.
    fn event_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> impl Future<Output = Result<Vec<EventRow>, StoreError>> + Send;

    /// Up to `limit` event rows of the goal after `after`, in order, with the chain stored with
    /// the row at `after` when it is stored (read in the same statement).
    fn events_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<(Option<String>, Vec<EventRow>), StoreError>> + Send;

    /// The goal's newest snapshot (at or before `up_to`, when given), decoded, with the chain
    /// head stored with it.
    fn snapshot(
        &mut self,
        goal: &GoalId,
        up_to: Option<u64>,
    ) -> impl Future<Output = Result<Option<ChainedSnapshot>, StoreError>> + Send;

    /// The goal's snapshot at exactly `revision`, decoded, with the chain head stored with it.
    fn snapshot_at(
        &mut self,
        goal: &GoalId,
        revision: u64,
    ) -> impl Future<Output = Result<Option<ChainedSnapshot>, StoreError>> + Send;

    /// The receipt of `operation` on `goal`, wherever it is stored.
    fn receipt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> impl Future<Output = Result<Option<Receipt>, StoreError>> + Send;

    /// The receipt of `operation` on `goal` with the attempt id recorded with it (`None` for a
    /// receipt recorded without one: before store schema 5, or moved by compaction).
    fn receipt_attempt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> impl Future<Output = Result<Option<(Receipt, Option<String>)>, StoreError>> + Send;

    /// The revisions of `goals` that exist, by goal id.
    fn revisions(
        &mut self,
        goals: &[&GoalId],
    ) -> impl Future<Output = Result<BTreeMap<String, u64>, StoreError>> + Send;

    /// Every goal row (the one read that walks a whole table).
    fn listing(&mut self) -> impl Future<Output = Result<Vec<ListedGoal>, StoreError>> + Send;

    /// The goals `agent` is registered with, with its frontier rows; one consistent read.
    fn agent_goals(
        &mut self,
        agent: &AgentId,
    ) -> impl Future<Output = Result<Vec<AgentGoal>, StoreError>> + Send;

    /// The goal rows of the goals that follow any of `subjects` (from the `goal_subjects`
    /// index; a goal may come more than once), one consistent read.
    fn subject_goals(
        &mut self,
        subjects: &[&str],
    ) -> impl Future<Output = Result<Vec<ListedGoal>, StoreError>> + Send;

    /// Inside a write transaction: replaces the subjects `goal` follows by `subjects`.
    fn write_subjects(
        &mut self,
        goal: &GoalId,
        subjects: &BTreeSet<Subject>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether the subjects of goals written before the `goal_subjects` index existed are
    /// still to be indexed (the migration's mark). Asked once alone, then again inside the
    /// write transaction that indexes them: there, on PostgreSQL, the mark stays locked until
    /// the transaction ends, so one host does the work.
    fn subjects_pending(&mut self) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Inside a write transaction: removes that mark.
    fn subjects_indexed(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The goals whose rows' window does not cover `now` (a goal may come twice).
    fn stale_goals(
        &mut self,
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<GoalId>, StoreError>> + Send;

    /// The earliest end of a window that covers `now`.
    fn earliest_wake(
        &mut self,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Up to `limit` receipts of the goal after revision `after`, in commit order.
    fn operation_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<OperationRow>, StoreError>> + Send;

    /// Up to `limit` receipts of the goal at or before revision `up_to`, newest first (the
    /// reverse of [`operation_rows`](Dialect::operation_rows)' order).
    fn latest_operation_rows(
        &mut self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<OperationRow>, StoreError>> + Send;

    /// The receipts whose names compaction up to `target` must keep.
    fn receipts_to_keep(
        &mut self,
        goal: &GoalId,
        target: u64,
    ) -> impl Future<Output = Result<Vec<Kept<Self::Digest>>, StoreError>> + Send;

    /// Writes a prepared commit, atomically, in a transaction (or statement) of its own: checks
    /// the operation id and the expected revision, plans the snapshot
    /// ([`Prepared::plan_snapshot`]) and writes the events, the receipt with the append's
    /// attempt id, the index rows that changed and the snapshot when due. A commit whose outcome
    /// the backend cannot tell is [`StoreError::Ambiguous`] with the prepared attempt id.
    fn write_commit(
        &mut self,
        prepared: &mut Prepared,
    ) -> impl Future<Output = Result<Outcome, StoreError>> + Send;

    /// Inside a write transaction: rewrites the goal's standing, window and frontier rows to
    /// `projection`'s, unless the goal moved past its revision (a newer commit wrote its own).
    fn write_rows(
        &mut self,
        projection: &Projection,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Inside compaction's transaction: stores `kept`'s actor and event names (JSON) with it,
    /// in the receipts table, and takes a receipt off an event row that compaction to
    /// `target` keeps.
    fn keep_receipt(
        &mut self,
        goal: &GoalId,
        kept: &Kept<Self::Digest>,
        names: (&str, &str),
        target: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The goal's derived rows as stored (its row read whatever it holds, even a damage
    /// mark), inside the caller's read transaction; `None` without a goal row.
    fn stored_rows(
        &mut self,
        goal: &GoalId,
    ) -> impl Future<Output = Result<Option<StoredRows>, StoreError>> + Send;

    /// `(goal, table)` for every goal that has rows in a table but no goal row (reads every
    /// table).
    fn orphan_rows(
        &mut self,
    ) -> impl Future<Output = Result<Vec<(String, String)>, StoreError>> + Send;

    /// Inside compaction's transaction: writes `base` (snapshot JSON) at `target` with `chain`,
    /// the chain head there, moves the events up to it into the archive (each row with its
    /// time, JSON and chain as stored), deletes the older snapshots except the one at `origin`
    /// (when not 0: the snapshot the archive starts from) and records the new base on the goal
    /// row. Returns how many events it moved.
    fn cut_history(
        &mut self,
        goal: &GoalId,
        target: u64,
        base: &str,
        chain: &[u8; 32],
        origin: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The dead letter of `operation` on `goal`, as stored (JSON).
    fn dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Inside a write transaction: stores `letter` (JSON) as the dead letter of `operation` on
    /// `goal`, first refused at `first_refused`, in place of the one kept.
    fn write_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
        first_refused: Timestamp,
        letter: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Up to `limit` dead letters as stored (JSON), the first refused first, and how many are
    /// kept; one consistent read.
    fn dead_letter_rows(
        &mut self,
        limit: usize,
    ) -> impl Future<Output = Result<(Vec<String>, u64), StoreError>> + Send;

    /// Removes the dead letter of `operation` on `goal` (one statement); true when one was kept.
    fn delete_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The revision of the goal's first archived event (`None`: its archive is empty).
    fn archive_start(
        &mut self,
        goal: &GoalId,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Up to `limit` archived event rows of the goal after `after`, in order, with the chain
    /// stored with the archived row at `after` when it is stored (read in the same statement).
    fn archived_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<(Option<String>, Vec<EventRow>), StoreError>> + Send;
}

/// What group commit needs of a backend besides its [`Dialect`]: savepoints inside a write
/// transaction, and a commit's checks and writes inside a transaction the caller opened (see
/// [`ops::append_group`]). A backend whose commits already share its server's syncs (PostgreSQL
/// over a pool) needs none of it.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) trait Grouped: Dialect {
    /// Inside a write transaction: marks the point [`rollback_to_savepoint`] returns to.
    ///
    /// [`rollback_to_savepoint`]: Grouped::rollback_to_savepoint
    fn savepoint(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Keeps what was written since the savepoint, in the transaction, and forgets the point.
    fn release_savepoint(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Undoes what was written since the savepoint and forgets the point; the transaction
    /// stays open. Fails when the transaction itself is gone (the backend rolled it back).
    fn rollback_to_savepoint(&mut self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Inside a write transaction: what [`Dialect::write_commit`] does to a commit — checks
    /// its operation id, its time and its expected revision, plans its snapshot and writes its
    /// rows — without a transaction of its own. Nothing is written unless the outcome is
    /// [`Outcome::Committed`].
    fn write_in(
        &mut self,
        prepared: &mut Prepared,
    ) -> impl Future<Output = Result<Outcome, StoreError>> + Send;
}

// ----- columns ------------------------------------------------------------------------------

/// One result row's columns, read the same way on every backend.
pub(crate) trait Columns {
    /// A text column.
    fn text(&self, i: usize) -> Result<String, StoreError>;
    /// A nullable text column.
    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError>;
    /// A 64-bit integer column.
    fn int(&self, i: usize) -> Result<i64, StoreError>;
    /// A nullable 64-bit integer column.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    /// A payload digest column, as text.
    fn digest(&self, i: usize) -> Result<String, StoreError>;
}

/// A revision or count as a stored integer (saturating: no store holds 2^63 of anything).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored revision or count, which is never negative.
pub(crate) fn count(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        detail: format!("a stored {what} is negative ({value}); restore the store from a backup"),
    })
}

/// A stored id, validated as the kernel's ids are.
pub(crate) fn stored_id<T: TryFrom<String>>(text: String, what: &str) -> Result<T, StoreError> {
    let shown: String = text.chars().take(64).collect();
    T::try_from(text).map_err(|_| StoreError::Corrupt {
        detail: format!(
            "a stored {what} `{shown}` is not a valid id; restore the store from a backup"
        ),
    })
}

/// The columns `revision, base_revision, snapshot_revision, damaged, chain` of `goal`'s row
/// from `from` on. A row marked damaged (see the schema's damage triggers) is
/// [`StoreError::HistoryDamaged`]: nothing that reads the row reads or writes the goal.
pub(crate) fn goal_row(
    r: &impl Columns,
    from: usize,
    goal: &GoalId,
) -> Result<GoalRow, StoreError> {
    if let Some(revision) = r.opt_int(from + 3)? {
        return Err(marked(goal, revision)?);
    }
    Ok(GoalRow {
        revision: count(r.int(from)?, "revision")?,
        base_revision: count(r.int(from + 1)?, "revision")?,
        snapshot_revision: count(r.int(from + 2)?, "revision")?,
        chain: r
            .opt_text(from + 4)?
            .as_deref()
            .and_then(crate::chain::from_hex),
    })
}

/// The error for `goal`, whose row's damage mark (set by the schema's triggers) holds
/// `revision`.
pub(crate) fn marked(goal: &GoalId, revision: i64) -> Result<StoreError, StoreError> {
    Ok(damaged(
        goal,
        count(revision, "revision")?,
        "an event row was deleted or changed outside loopx",
    ))
}

/// The error for `goal`'s history, damaged at `revision`.
pub(crate) fn damaged(goal: &GoalId, revision: u64, detail: &str) -> StoreError {
    StoreError::HistoryDamaged {
        goal: goal.clone(),
        revision,
        detail: detail.to_owned(),
    }
}

/// The columns `revision, at, json, chain` from `from` on.
pub(crate) fn event_row(r: &impl Columns, from: usize) -> Result<EventRow, StoreError> {
    Ok(EventRow {
        revision: count(r.int(from)?, "revision")?,
        at: r.int(from + 1)?,
        json: r.text(from + 2)?,
        chain: r.opt_text(from + 3)?,
    })
}

/// The chains of a commit's event rows, in order, computed from the head the goal row holds
/// (`row`, `None` for a goal without a row: the genesis); the commit's new head goes into
/// `prepared.chain`. A goal row without a readable head is [`StoreError::HistoryDamaged`].
pub(crate) fn chain_commit(
    prepared: &mut Prepared,
    row: Option<GoalRow>,
) -> Result<Vec<String>, StoreError> {
    let goal = &prepared.request.goal;
    let mut head = match row {
        None => crate::chain::genesis(goal),
        Some(row) => row.chain.ok_or_else(|| {
            damaged(
                goal,
                row.revision,
                "its goal row's chain head is missing or unreadable (it was changed outside loopx)",
            )
        })?,
    };
    let mut chains = Vec::with_capacity(prepared.events.len());
    for (event, json) in prepared.request.events.iter().zip(&prepared.events) {
        head = crate::chain::link_row(&head, event.revision, event.at.as_millis(), json);
        chains.push(crate::chain::to_hex(&head));
    }
    prepared.chain = Some(head);
    Ok(chains)
}

/// Splits rows read from `after` on (inclusive) into the chain stored with the row at `after`,
/// if it was read, and the rows after it.
/// At most `limit` rows are kept.
pub(crate) fn split_prev(
    after: u64,
    mut rows: Vec<EventRow>,
    limit: usize,
) -> (Option<String>, Vec<EventRow>) {
    let prev = if after > 0 && rows.first().is_some_and(|row| row.revision == after) {
        rows.remove(0).chain
    } else {
        None
    };
    rows.truncate(limit);
    (prev, rows)
}

/// The columns `revision, objective, status, valid_from, valid_until, base_revision,
/// snapshot_revision` of a goal row, as stored.
pub(crate) fn stored_goal_row(r: &impl Columns) -> Result<StoredRows, StoreError> {
    let window = window(r, 3)?;
    Ok(StoredRows {
        revision: count(r.int(0)?, "revision")?,
        objective: r.text(1)?,
        status: r.text(2)?,
        valid_from: window.from,
        valid_until: window.until,
        base_revision: count(r.int(5)?, "revision")?,
        snapshot_revision: count(r.int(6)?, "revision")?,
        snapshots: BTreeSet::new(),
        agents: BTreeSet::new(),
        frontier: BTreeMap::new(),
        subjects: BTreeSet::new(),
    })
}

/// The columns `valid_from, valid_until` from `from` on.
pub(crate) fn window(r: &impl Columns, from: usize) -> Result<Window, StoreError> {
    Ok(Window {
        from: Timestamp::from_millis(r.int(from)?),
        until: r.opt_int(from + 1)?.map(Timestamp::from_millis),
    })
}

/// The columns `digest, revision, events, committed_at` from `from` on, as `operation`'s
/// receipt on `goal`.
pub(crate) fn receipt(
    r: &impl Columns,
    from: usize,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Receipt, StoreError> {
    Ok(Receipt {
        goal: goal.clone(),
        operation: operation.clone(),
        digest: r.digest(from)?,
        revision: count(r.int(from + 1)?, "revision")?,
        events: count(r.int(from + 2)?, "event count")?,
        committed_at: Timestamp::from_millis(r.int(from + 3)?),
    })
}

/// The columns `operation, digest, revision, events, committed_at, actor, kinds` of one of
/// `goal`'s receipts.
pub(crate) fn operation_row(r: &impl Columns, goal: &GoalId) -> Result<OperationRow, StoreError> {
    let operation: OperationId = stored_id(r.text(0)?, "operation id")?;
    Ok(OperationRow {
        receipt: receipt(r, 1, goal, &operation)?,
        actor: r.opt_text(5)?,
        kinds: r.opt_text(6)?,
        authorship: r.opt_text(7)?,
    })
}

/// The columns `goal, objective, status, revision, valid_from, valid_until`.
pub(crate) fn listed_goal(r: &impl Columns) -> Result<ListedGoal, StoreError> {
    Ok(ListedGoal {
        goal: stored_id(r.text(0)?, "goal id")?,
        objective: r.text(1)?,
        status: r.text(2)?,
        revision: count(r.int(3)?, "revision")?,
        window: window(r, 4)?,
    })
}

/// The columns `revision, commit_events, operation, (digest), at` of a receipt on an event row;
/// the digest is read by the caller, as stored.
pub(crate) fn kept_on_event<D>(r: &impl Columns, digest: D) -> Result<Kept<D>, StoreError> {
    Ok(Kept::OnEvent {
        revision: count(r.int(0)?, "revision")?,
        events: count(r.int(1)?, "event count")?,
        operation: r.text(2)?,
        digest,
        at: r.int(4)?,
    })
}
