//! SQLite's [`Dialect`]: the statements behind each store operation and the commit's writes.
//! The store's algorithms are written once in [`crate::dialect::ops`]; here their futures run
//! to completion in place ([`block`]), since every primitive is synchronous. Every statement
//! is parameterised; every write runs in one `BEGIN IMMEDIATE` transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::task::{Context, Poll, Waker};

use loopx_kernel::seams::{Receipt, StoreError};
use loopx_kernel::{AgentId, GoalId, GoalState, OperationId, Subject, Timestamp, TodoId};
use rusqlite::{Connection, Params, params};

use super::Shared;
use super::schema::sql;
use crate::cache::StateCache;
use crate::commit::Prepared;
use crate::dialect::{
    self, AgentGoal, Columns, Dialect, GoalRow, Grouped, Kept, ListedGoal, Mode, OperationRow,
    Outcome, int, stored_id,
};
use crate::fold::{EventRow, decode_snapshot, encode};
use crate::index::{Projection, parse_status, status_name};
use crate::rows::StoredRows;

// ----- the reads ----------------------------------------------------------------------------
//
// Every read a commit, a load or a host's query makes, named so that a test can check that each
// one seeks an index (see `tests::every_read_seeks_an_index`). The one exception is the listing
// of all goals, which reads them all by definition.

/// The write path's columns of one goal row.
const GOAL_ROW: &str = "SELECT revision, base_revision, snapshot_revision, damaged, chain, status, valid_from, valid_until FROM goals WHERE goal = ?1";
/// A goal's event rows in a range of revisions.
const EVENT_ROWS: &str = "SELECT revision, at, json, chain FROM events WHERE goal = ?1 AND revision > ?2 AND revision <= ?3 ORDER BY revision";
/// A goal's latest snapshot.
const LATEST_SNAPSHOT: &str =
    "SELECT revision, json, chain FROM snapshots WHERE goal = ?1 ORDER BY revision DESC LIMIT 1";
/// A goal's latest snapshot at or before a revision.
const SNAPSHOT_AT_OR_BEFORE: &str = "SELECT revision, json, chain FROM snapshots WHERE goal = ?1 AND revision <= ?2 ORDER BY revision DESC LIMIT 1";
/// A goal's snapshot at a revision.
const SNAPSHOT_AT: &str =
    "SELECT revision, json, chain FROM snapshots WHERE goal = ?1 AND revision = ?2";
/// A goal's frontier rows, one per agent.
const GOAL_FRONTIER: &str = "SELECT agent, todos FROM frontier WHERE goal = ?1";
/// A receipt on the last event row of its commit.
const RECEIPT_ON_EVENT: &str = "SELECT digest, revision, commit_events, at FROM events
     WHERE goal = ?1 AND operation = ?2 AND operation IS NOT NULL";
/// A receipt in the receipts table (a no-op, an older or a compacted commit).
const RECEIPT_ROW: &str = "SELECT digest, revision, events, committed_at FROM receipts WHERE goal = ?1 AND operation = ?2";
/// A receipt on the last event row of its commit, with the attempt id of the append that wrote
/// it.
const ATTEMPT_ON_EVENT: &str = "SELECT digest, revision, commit_events, at, attempt FROM events
     WHERE goal = ?1 AND operation = ?2 AND operation IS NOT NULL";
/// A receipt in the receipts table, with the attempt id of the append that wrote it.
const ATTEMPT_ROW: &str = "SELECT digest, revision, events, committed_at, attempt FROM receipts WHERE goal = ?1 AND operation = ?2";
/// A page of a goal's events after a revision.
const EVENTS_AFTER: &str = "SELECT revision, at, json, chain FROM events WHERE goal = ?1 AND revision >= ?2 ORDER BY revision LIMIT ?3";
/// A page of a goal's archived events from a revision on (that row too, for its chain).
const ARCHIVED_AFTER: &str = "SELECT revision, at, json, chain FROM archived_events WHERE goal = ?1 AND revision >= ?2 ORDER BY revision LIMIT ?3";
/// The revision of a goal's first archived event.
const ARCHIVE_START: &str =
    "SELECT revision FROM archived_events WHERE goal = ?1 ORDER BY revision LIMIT 1";
/// Moves a goal's event rows up to a revision into its archive, as they are stored, with the
/// authorship of the commits they end (their receipts keep the digest: schema 10).
const ARCHIVE_EVENTS: &str = "INSERT INTO archived_events (goal, revision, at, json, chain, authorship)
     SELECT goal, revision, at, json, chain, authorship FROM events WHERE goal = ?1 AND revision <= ?2";
/// A page of a goal's receipts after a revision, in commit order.
const OPERATIONS_AFTER: &str =
    "SELECT operation, digest, revision, events, committed_at, actor, kinds, authorship FROM commits
     WHERE goal = ?1 AND revision > ?2 ORDER BY revision, events = 0, seq LIMIT ?3";
/// A goal's receipts up to a revision, newest first: the reverse of `OPERATIONS_AFTER`. The
/// `commits` view's two halves (receipts on event rows, receipt rows) are each read backwards
/// along their key for at most the limit, so the read stays bounded however long the history.
const LATEST_OPERATIONS: &str = "SELECT * FROM (
       SELECT * FROM (SELECT operation, digest, revision, commit_events AS events, at AS committed_at,
                             NULL AS actor, NULL AS kinds, authorship, NULL AS seq FROM events
                      WHERE goal = ?1 AND revision <= ?2 AND operation IS NOT NULL
                      ORDER BY revision DESC LIMIT ?3)
       UNION ALL
       SELECT * FROM (SELECT operation, digest, revision, events, committed_at, actor, kinds,
                             coalesce(authorship, (SELECT a.authorship FROM archived_events a
                                                   WHERE a.goal = r.goal AND a.revision = r.revision)),
                             seq FROM receipts r
                      WHERE goal = ?1 AND revision <= ?2
                      ORDER BY revision DESC, events = 0 DESC, seq DESC LIMIT ?3))
     ORDER BY revision DESC, events = 0 DESC, seq DESC LIMIT ?3";
/// The receipts on event rows that compaction up to a revision deletes or keeps.
const RECEIPTS_TO_KEEP: &str = "SELECT revision, commit_events, operation, digest, at FROM events
     WHERE goal = ?1 AND operation IS NOT NULL AND revision - commit_events < ?2";
/// The goals an agent is registered with, with their rows' windows.
const AGENT_GOALS: &str = "SELECT g.goal, g.valid_from, g.valid_until FROM goal_agents a
     JOIN goals g ON g.goal = a.goal WHERE a.agent = ?1";
/// An agent's frontier rows across goals.
const AGENT_FRONTIER: &str = "SELECT goal, todos FROM frontier WHERE agent = ?1";
/// The goals whose rows' window does not cover a time (a goal may come twice). Not `UNION`:
/// to merge the two halves, SQLite may choose to walk the whole table in goal order.
const STALE_GOALS: &str = "SELECT goal FROM goals WHERE valid_until <= ?1
     UNION ALL SELECT goal FROM goals WHERE valid_from > ?1";
/// The earliest end of a window that covers a time.
const EARLIEST_WAKE: &str =
    "SELECT min(valid_until) FROM goals WHERE valid_until > ?1 AND valid_from <= ?1";
/// A goal row's columns as stored, for the check of derived rows.
const STORED_GOAL_ROW: &str = "SELECT revision, objective, status, valid_from, valid_until, base_revision, snapshot_revision FROM goals WHERE goal = ?1";
/// The agents registered with a goal.
const GOAL_AGENTS: &str = "SELECT agent FROM goal_agents WHERE goal = ?1";
/// The revisions of a goal's snapshots.
const SNAPSHOT_REVISIONS: &str = "SELECT revision FROM snapshots WHERE goal = ?1";
/// The rows of the goals that follow a subject.
const SUBJECT_GOALS: &str =
    "SELECT g.goal, g.objective, g.status, g.revision, g.valid_from, g.valid_until
     FROM goal_subjects s JOIN goals g ON g.goal = s.goal WHERE s.subject = ?1";
/// The subjects a goal follows.
const GOAL_SUBJECTS: &str = "SELECT subject FROM goal_subjects WHERE goal = ?1";
/// The mark of goals whose subjects are still to be indexed (schema 8).
const SUBJECTS_PENDING: &str = "SELECT value FROM store_settings WHERE name = 'goal_subjects'";
/// `(goal, table)` for the rows of goals without a goal row (it walks every table by
/// definition; only a doctor asks).
const ORPHAN_ROWS: &str = "SELECT DISTINCT t.goal, 'events' FROM events t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'archived_events' FROM archived_events t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'snapshots' FROM snapshots t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'receipts' FROM receipts t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'goal_agents' FROM goal_agents t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'frontier' FROM frontier t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'goal_subjects' FROM goal_subjects t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)";
/// Every goal row, for the listing (it walks the table by definition).
const LISTING: &str =
    "SELECT goal, objective, status, revision, valid_from, valid_until FROM goals";

// ----- dead letters -------------------------------------------------------------------------

const DEAD_LETTER: &str = "SELECT letter FROM dead_letters WHERE goal = ?1 AND operation = ?2";
const WRITE_DEAD_LETTER: &str =
    "INSERT INTO dead_letters (goal, operation, first_refused, letter) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (goal, operation) DO UPDATE SET first_refused = ?3, letter = ?4";
const DEAD_LETTERS: &str = "SELECT letter FROM dead_letters
     ORDER BY first_refused, goal, operation LIMIT ?1";
const DEAD_LETTER_COUNT: &str = "SELECT count(*) FROM dead_letters";
const DELETE_DEAD_LETTER: &str = "DELETE FROM dead_letters WHERE goal = ?1 AND operation = ?2";

// ----- rows ---------------------------------------------------------------------------------

impl Columns for rusqlite::Row<'_> {
    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.get(i).map_err(sql)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        self.get(i).map_err(sql)
    }

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.get(i).map_err(sql)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        self.get(i).map_err(sql)
    }

    fn digest(&self, i: usize) -> Result<String, StoreError> {
        self.get(i).map_err(sql)
    }
}

/// Every row `statement` returns, decoded.
fn rows<T>(
    conn: &Connection,
    statement: &str,
    params: impl Params,
    decode: impl Fn(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(statement).map_err(sql)?;
    let mut rows = stmt.query(params).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        out.push(decode(r)?);
    }
    Ok(out)
}

/// The first row `statement` returns, decoded.
fn first<T>(
    conn: &Connection,
    statement: &str,
    params: impl Params,
    decode: impl FnOnce(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let mut stmt = conn.prepare_cached(statement).map_err(sql)?;
    let mut rows = stmt.query(params).map_err(sql)?;
    rows.next().map_err(sql)?.map(decode).transpose()
}

/// One statement that writes; returns how many rows it changed.
fn run(conn: &Connection, statement: &str, params: impl Params) -> Result<usize, StoreError> {
    conn.prepare_cached(statement)
        .and_then(|mut stmt| stmt.execute(params))
        .map_err(sql)
}

/// A goal row with the indexed columns a commit compares before it rewrites them.
#[derive(Debug, Clone, Copy)]
struct IndexedRow {
    row: GoalRow,
    /// The stored standing (its stable name; empty when the row holds an unknown one).
    status: &'static str,
    valid_from: i64,
    valid_until: Option<i64>,
}

fn indexed_row(conn: &Connection, goal: &GoalId) -> Result<Option<IndexedRow>, StoreError> {
    first(conn, GOAL_ROW, [goal.as_str()], |r| {
        let status = r
            .get_ref(5)
            .ok()
            .and_then(|value| value.as_str().ok())
            .and_then(parse_status);
        Ok(IndexedRow {
            row: dialect::goal_row(r, 0, goal)?,
            status: status.map_or("", status_name),
            valid_from: r.int(6)?,
            valid_until: r.opt_int(7)?,
        })
    })
}

/// A snapshot row (`revision, json, chain`) of `goal`, decoded straight from SQLite's buffer
/// without a copy, with its chain head.
fn snapshot_row(
    goal: &GoalId,
    r: &rusqlite::Row<'_>,
) -> Result<(GoalState, Option<[u8; 32]>), StoreError> {
    let revision = dialect::count(r.int(0)?, "revision")?;
    let json = r
        .get_ref(1)
        .map_err(sql)?
        .as_str()
        .map_err(|error| StoreError::Corrupt {
            detail: format!(
                "the snapshot of goal `{goal}` at revision {revision} is not text ({error}); restore the store from a backup"
            ),
        })?;
    let head = r.opt_text(2)?.as_deref().and_then(crate::chain::from_hex);
    Ok((decode_snapshot(goal, revision, json)?, head))
}

fn receipt_in(
    conn: &Connection,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    let find = |statement: &str| {
        first(conn, statement, [goal.as_str(), operation.as_str()], |r| {
            dialect::receipt(r, 0, goal, operation)
        })
    };
    match find(RECEIPT_ON_EVENT)? {
        Some(found) => Ok(Some(found)),
        None => find(RECEIPT_ROW),
    }
}

fn receipt_attempt_in(
    conn: &Connection,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<(Receipt, Option<String>)>, StoreError> {
    let find = |statement: &str| {
        first(conn, statement, [goal.as_str(), operation.as_str()], |r| {
            Ok((dialect::receipt(r, 0, goal, operation)?, r.opt_text(4)?))
        })
    };
    match find(ATTEMPT_ON_EVENT)? {
        Some(found) => Ok(Some(found)),
        None => find(ATTEMPT_ROW),
    }
}

// ----- running the shared algorithms --------------------------------------------------------

/// Runs `work`, one of the shared algorithms over [`Sqlite`], to completion on this thread.
/// Every SQLite primitive completes without waiting on anything but the database, so the
/// future is ready at its first poll.
pub(super) fn block<T>(work: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    poll_once(work).unwrap_or_else(|| Err(not_in_place()))
}

/// Polls `work` once: its output, or `None` if it did not complete (see [`block`]).
pub(super) fn poll_once<F: Future>(work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    match work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    }
}

/// The error of an operation that did not complete in place.
pub(super) fn not_in_place() -> StoreError {
    StoreError::Unavailable {
        detail: "a SQLite store operation did not complete in place; retry".into(),
    }
}

/// SQLite's dialect: one pooled connection and the handle's shared state. A transaction left
/// open (an error on the way) is rolled back when it is dropped.
pub(super) struct Sqlite<'a> {
    conn: &'a mut Connection,
    cx: &'a Shared,
}

impl<'a> Sqlite<'a> {
    pub(super) fn new(conn: &'a mut Connection, cx: &'a Shared) -> Self {
        Sqlite { conn, cx }
    }
}

impl Drop for Sqlite<'_> {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            // Nothing is left to report the failure to; the connection stays usable either way.
            drop(self.conn.execute_batch("ROLLBACK"));
        }
    }
}

// ----- the inline load ----------------------------------------------------------------------

/// What [`load_cached`] found.
pub(super) enum Cached {
    /// The goal's state at its current revision, from the cache.
    Hit(Box<GoalState>),
    /// The cache does not hold the goal at its current revision, or the goal has no row: load
    /// the long way.
    Miss,
}

/// The goal's state when the handle's cache holds it at the goal's current revision, read
/// without ever waiting: the busy handler is off for the one indexed
/// read of the goal's row, so a lock held elsewhere makes it fail at once instead of sleeping.
/// A failed read is an error, so that the caller closes the connection rather than pooling one
/// whose state it cannot vouch for.
pub(super) fn load_cached(
    conn: &mut Connection,
    cx: &Shared,
    goal: &GoalId,
) -> Result<Cached, StoreError> {
    conn.busy_timeout(std::time::Duration::ZERO).map_err(sql)?;
    // One statement: it reads one consistent snapshot without a transaction around it.
    let read = indexed_row(conn, goal);
    conn.busy_timeout(cx.options.busy_timeout).map_err(sql)?;
    Ok(match read? {
        None => Cached::Miss,
        Some(indexed) => cx
            .cache
            .get(goal, indexed.row.revision)
            .map_or(Cached::Miss, |state| Cached::Hit(Box::new(state))),
    })
}

// ----- the dialect --------------------------------------------------------------------------

impl Dialect for Sqlite<'_> {
    type Digest = String;

    fn cache(&self) -> &StateCache {
        &self.cx.cache
    }

    fn snapshot_every(&self) -> u64 {
        self.cx.options.snapshot_every
    }

    async fn begin(&mut self, mode: Mode) -> Result<(), StoreError> {
        let statement = match mode {
            Mode::Read => "BEGIN DEFERRED",
            Mode::Write => "BEGIN IMMEDIATE",
        };
        self.conn.execute_batch(statement).map_err(sql)
    }

    async fn commit(&mut self) -> Result<(), StoreError> {
        self.conn.execute_batch("COMMIT").map_err(sql)
    }

    async fn rollback(&mut self) -> Result<(), StoreError> {
        self.conn.execute_batch("ROLLBACK").map_err(sql)
    }

    /// `lock` needs nothing more: a write transaction holds the database's write lock from its
    /// start.
    async fn goal_row(&mut self, goal: &GoalId, _: bool) -> Result<Option<GoalRow>, StoreError> {
        Ok(indexed_row(self.conn, goal)?.map(|indexed| indexed.row))
    }

    /// Two statements; the events are read only when the row shows the goal past `after`.
    async fn goal_row_and_tail(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> Result<Option<(GoalRow, Vec<EventRow>)>, StoreError> {
        let Some(indexed) = indexed_row(self.conn, goal)? else {
            return Ok(None);
        };
        let row = indexed.row;
        let tail = if row.revision > after {
            event_rows(self.conn, goal, after, up_to.min(row.revision))?
        } else {
            Vec::new()
        };
        Ok(Some((row, tail)))
    }

    async fn event_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> Result<Vec<EventRow>, StoreError> {
        event_rows(self.conn, goal, after, up_to)
    }

    async fn events_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
        page_after(self.conn, EVENTS_AFTER, goal, after, limit)
    }

    async fn snapshot(
        &mut self,
        goal: &GoalId,
        up_to: Option<u64>,
    ) -> Result<Option<dialect::ChainedSnapshot>, StoreError> {
        let decode = |r: &rusqlite::Row<'_>| snapshot_row(goal, r);
        match up_to {
            None => first(self.conn, LATEST_SNAPSHOT, [goal.as_str()], decode),
            Some(revision) => first(
                self.conn,
                SNAPSHOT_AT_OR_BEFORE,
                params![goal.as_str(), int(revision)],
                decode,
            ),
        }
    }

    async fn snapshot_at(
        &mut self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<dialect::ChainedSnapshot>, StoreError> {
        first(
            self.conn,
            SNAPSHOT_AT,
            params![goal.as_str(), int(revision)],
            |r| snapshot_row(goal, r),
        )
    }

    async fn receipt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        receipt_in(self.conn, goal, operation)
    }

    async fn receipt_attempt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<(Receipt, Option<String>)>, StoreError> {
        receipt_attempt_in(self.conn, goal, operation)
    }

    /// One indexed read per goal; each goal's revision only grows, so they need no common
    /// snapshot.
    async fn revisions(&mut self, goals: &[&GoalId]) -> Result<BTreeMap<String, u64>, StoreError> {
        let mut revisions = BTreeMap::new();
        for goal in goals {
            if !revisions.contains_key(goal.as_str()) {
                let revision = indexed_row(self.conn, goal)?.map_or(0, |r| r.row.revision);
                revisions.insert(goal.as_str().to_owned(), revision);
            }
        }
        Ok(revisions)
    }

    async fn listing(&mut self) -> Result<Vec<ListedGoal>, StoreError> {
        rows(self.conn, LISTING, [], |r| dialect::listed_goal(r))
    }

    /// Two statements in one read transaction: the agent's goals with their windows, then its
    /// frontier rows.
    async fn agent_goals(&mut self, agent: &AgentId) -> Result<Vec<AgentGoal>, StoreError> {
        let tx = self.conn.transaction().map_err(sql)?;
        let goals = rows(&tx, AGENT_GOALS, [agent.as_str()], |r| {
            Ok((
                stored_id::<GoalId>(r.text(0)?, "goal id")?,
                dialect::window(r, 1)?,
            ))
        })?;
        let mut todos: BTreeMap<String, String> =
            rows(&tx, AGENT_FRONTIER, [agent.as_str()], |r| {
                Ok((r.text(0)?, r.text(1)?))
            })?
            .into_iter()
            .collect();
        tx.finish().map_err(sql)?;
        Ok(goals
            .into_iter()
            .map(|(goal, window)| AgentGoal {
                todos: todos.remove(goal.as_str()),
                goal,
                window,
            })
            .collect())
    }

    /// One statement per subject, in one read transaction.
    async fn subject_goals(&mut self, subjects: &[&str]) -> Result<Vec<ListedGoal>, StoreError> {
        let tx = self.conn.transaction().map_err(sql)?;
        let mut found = Vec::new();
        for subject in subjects {
            found.extend(rows(&tx, SUBJECT_GOALS, [subject], |r| {
                dialect::listed_goal(r)
            })?);
        }
        tx.finish().map_err(sql)?;
        Ok(found)
    }

    async fn write_subjects(
        &mut self,
        goal: &GoalId,
        subjects: &BTreeSet<Subject>,
    ) -> Result<(), StoreError> {
        replace_subjects(self.conn, goal.as_str(), subjects)
    }

    async fn subjects_pending(&mut self) -> Result<bool, StoreError> {
        Ok(first(self.conn, SUBJECTS_PENDING, [], |r| r.text(0))?.is_some())
    }

    async fn subjects_indexed(&mut self) -> Result<(), StoreError> {
        run(
            self.conn,
            "DELETE FROM store_settings WHERE name = 'goal_subjects'",
            [],
        )
        .map(drop)
    }

    async fn stale_goals(&mut self, now: Timestamp) -> Result<Vec<GoalId>, StoreError> {
        rows(self.conn, STALE_GOALS, [now.as_millis()], |r| {
            stored_id(r.text(0)?, "goal id")
        })
    }

    async fn earliest_wake(&mut self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let earliest = first(self.conn, EARLIEST_WAKE, [now.as_millis()], |r| {
            r.opt_int(0)
        })?;
        Ok(earliest.flatten().map(Timestamp::from_millis))
    }

    async fn operation_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        rows(
            self.conn,
            OPERATIONS_AFTER,
            params![goal.as_str(), int(after), limit],
            |r| dialect::operation_row(r, goal),
        )
    }

    async fn latest_operation_rows(
        &mut self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        rows(
            self.conn,
            LATEST_OPERATIONS,
            params![goal.as_str(), int(up_to), limit],
            |r| dialect::operation_row(r, goal),
        )
    }

    async fn receipts_to_keep(
        &mut self,
        goal: &GoalId,
        target: u64,
    ) -> Result<Vec<Kept<String>>, StoreError> {
        rows(
            self.conn,
            RECEIPTS_TO_KEEP,
            params![goal.as_str(), int(target)],
            |r| dialect::kept_on_event(r, r.text(3)?),
        )
    }

    /// One `BEGIN IMMEDIATE` transaction: the operation id and the revision are checked under
    /// the write lock, then the rows written. A failed `COMMIT` may or may not be on disk.
    async fn write_commit(&mut self, prepared: &mut Prepared) -> Result<Outcome, StoreError> {
        self.begin(Mode::Write).await?;
        match self.write_in(prepared).await {
            Ok(Outcome::Committed) => {}
            other => {
                // Nothing was written (or what was is taken back): the answer stands either way.
                drop(self.rollback().await);
                return other;
            }
        }
        self.conn
            .execute_batch("COMMIT")
            .map_err(|error| match sql(error) {
                // The commit itself failed: it may or may not be on disk.
                StoreError::Unavailable { .. } => StoreError::Ambiguous {
                    operation: prepared.request.operation.clone(),
                    attempt: prepared.attempt.clone(),
                },
                other => other,
            })?;
        Ok(Outcome::Committed)
    }

    async fn write_rows(&mut self, projection: &Projection) -> Result<(), StoreError> {
        let updated = run(
            self.conn,
            "UPDATE goals SET status = ?3, valid_from = ?4, valid_until = ?5 WHERE goal = ?1 AND revision = ?2",
            params![
                projection.summary.goal.as_str(),
                int(projection.summary.revision),
                status_name(projection.summary.status),
                projection.valid_from.as_millis(),
                projection.summary.next_wake.map(Timestamp::as_millis),
            ],
        )?;
        if updated == 1 {
            write_frontier(self.conn, projection, None)?;
        }
        Ok(())
    }

    async fn keep_receipt(
        &mut self,
        goal: &GoalId,
        kept: &Kept<String>,
        (actor, kinds): (&str, &str),
        target: u64,
    ) -> Result<(), StoreError> {
        let g = goal.as_str();
        match kept {
            Kept::OnEvent {
                revision,
                events,
                operation,
                digest,
                at,
            } => {
                // A commit archived whole keeps its digest here and its authorship in the
                // archive; one whose last event row stays keeps both here.
                let insert = if *revision > target {
                    "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds, authorship)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
                             (SELECT authorship FROM events WHERE goal = ?1 AND revision = ?4))"
                } else {
                    "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                };
                run(
                    self.conn,
                    insert,
                    params![
                        g,
                        operation,
                        digest,
                        int(*revision),
                        int(*events),
                        at,
                        actor,
                        kinds
                    ],
                )?;
                // An event row that compaction keeps holds the receipt no more (the others go).
                if *revision > target {
                    run(
                        self.conn,
                        "UPDATE events SET operation = NULL, digest = NULL, commit_events = NULL, authorship = NULL
                         WHERE goal = ?1 AND revision = ?2",
                        params![g, int(*revision)],
                    )?;
                }
            }
            Kept::Unnamed { seq, .. } => {
                run(
                    self.conn,
                    "UPDATE receipts SET actor = ?3, kinds = ?4 WHERE goal = ?1 AND seq = ?2",
                    params![g, seq, actor, kinds],
                )?;
            }
        }
        Ok(())
    }

    async fn stored_rows(&mut self, goal: &GoalId) -> Result<Option<StoredRows>, StoreError> {
        let g = goal.as_str();
        let Some(mut stored) = first(self.conn, STORED_GOAL_ROW, [g], |r| {
            dialect::stored_goal_row(r)
        })?
        else {
            return Ok(None);
        };
        stored.agents = rows(self.conn, GOAL_AGENTS, [g], |r| r.text(0))?
            .into_iter()
            .collect();
        stored.subjects = rows(self.conn, GOAL_SUBJECTS, [g], |r| r.text(0))?
            .into_iter()
            .collect();
        stored.frontier = rows(self.conn, GOAL_FRONTIER, [g], |r| {
            Ok((r.text(0)?, r.text(1)?))
        })?
        .into_iter()
        .collect();
        stored.snapshots = rows(self.conn, SNAPSHOT_REVISIONS, [g], |r| {
            dialect::count(r.int(0)?, "revision")
        })?
        .into_iter()
        .collect();
        Ok(Some(stored))
    }

    async fn orphan_rows(&mut self) -> Result<Vec<(String, String)>, StoreError> {
        rows(self.conn, ORPHAN_ROWS, [], |r| Ok((r.text(0)?, r.text(1)?)))
    }

    async fn cut_history(
        &mut self,
        goal: &GoalId,
        target: u64,
        base: &str,
        chain: &[u8; 32],
        origin: u64,
    ) -> Result<u64, StoreError> {
        let g = goal.as_str();
        run(
            self.conn,
            "INSERT OR REPLACE INTO snapshots (goal, revision, json, chain) VALUES (?1, ?2, ?3, ?4)",
            params![g, int(target), base, crate::chain::to_hex(chain)],
        )?;
        run(self.conn, ARCHIVE_EVENTS, params![g, int(target)])?;
        // The new base first: the damage triggers take deletions at or below it for compaction.
        run(
            self.conn,
            "UPDATE goals SET base_revision = ?2, snapshot_revision = max(snapshot_revision, ?2) WHERE goal = ?1",
            params![g, int(target)],
        )?;
        let removed = run(
            self.conn,
            "DELETE FROM events WHERE goal = ?1 AND revision <= ?2",
            params![g, int(target)],
        )?;
        run(
            self.conn,
            "DELETE FROM snapshots WHERE goal = ?1 AND revision < ?2 AND revision <> ?3",
            params![g, int(target), int(origin)],
        )?;
        Ok(removed as u64)
    }

    async fn dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<String>, StoreError> {
        first(
            self.conn,
            DEAD_LETTER,
            [goal.as_str(), operation.as_str()],
            |r| r.text(0),
        )
    }

    async fn write_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
        first_refused: Timestamp,
        letter: &str,
    ) -> Result<(), StoreError> {
        run(
            self.conn,
            WRITE_DEAD_LETTER,
            params![
                goal.as_str(),
                operation.as_str(),
                first_refused.as_millis(),
                letter
            ],
        )
        .map(drop)
    }

    async fn dead_letter_rows(&mut self, limit: usize) -> Result<(Vec<String>, u64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let letters = rows(self.conn, DEAD_LETTERS, [limit], |r| r.text(0))?;
        let total = first(self.conn, DEAD_LETTER_COUNT, [], |r| r.int(0))?.unwrap_or(0);
        Ok((letters, dialect::count(total, "dead letter count")?))
    }

    async fn delete_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        let removed = run(
            self.conn,
            DELETE_DEAD_LETTER,
            [goal.as_str(), operation.as_str()],
        )?;
        Ok(removed > 0)
    }

    async fn archive_start(&mut self, goal: &GoalId) -> Result<Option<u64>, StoreError> {
        first(self.conn, ARCHIVE_START, [goal.as_str()], |r| {
            dialect::count(r.int(0)?, "revision")
        })
    }

    async fn archived_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
        page_after(self.conn, ARCHIVED_AFTER, goal, after, limit)
    }
}

impl Grouped for Sqlite<'_> {
    async fn savepoint(&mut self) -> Result<(), StoreError> {
        run(self.conn, "SAVEPOINT one_commit", []).map(drop)
    }

    async fn release_savepoint(&mut self) -> Result<(), StoreError> {
        run(self.conn, "RELEASE one_commit", []).map(drop)
    }

    async fn rollback_to_savepoint(&mut self) -> Result<(), StoreError> {
        run(self.conn, "ROLLBACK TO one_commit", []).map(drop)
    }

    /// Under the write lock the transaction took: the goal row first (a goal whose history is
    /// damaged is neither read nor written), then the operation id, the clock and the revision,
    /// then the rows.
    async fn write_in(&mut self, prepared: &mut Prepared) -> Result<Outcome, StoreError> {
        let (goal, operation) = (&prepared.request.goal, &prepared.request.operation);
        let row = indexed_row(self.conn, goal)?;
        if let Some(first) = receipt_in(self.conn, goal, operation)? {
            return Ok(Outcome::Recorded(first));
        }
        // No commit is written later than the system clock allows.
        self.cx.clock.check(&prepared.request)?;
        let current = row.map_or(0, |r| r.row.revision);
        if current != prepared.request.expected_revision {
            return Ok(Outcome::Moved { current });
        }
        prepared.plan_snapshot(
            row.map_or(0, |r| r.row.snapshot_revision),
            self.cx.options.snapshot_every,
        )?;
        let chains = dialect::chain_commit(prepared, row.map(|r| r.row))?;
        write_commit(self.conn, prepared, &chains, row)?;
        Ok(Outcome::Committed)
    }
}

/// A page of up to `limit` event rows of `goal` after `after` read by `sql` (the event log or
/// the archive), with the chain of the row at `after`, read in the same statement, for the
/// chain the page starts from.
fn page_after(
    conn: &Connection,
    sql: &str,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
    let read = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
    let found = rows(conn, sql, params![goal.as_str(), int(after), read], |r| {
        dialect::event_row(r, 0)
    })?;
    Ok(dialect::split_prev(after, found, limit))
}

/// Event rows of `goal` in `(after, up_to]`, in order.
fn event_rows(
    conn: &Connection,
    goal: &GoalId,
    after: u64,
    up_to: u64,
) -> Result<Vec<EventRow>, StoreError> {
    rows(
        conn,
        EVENT_ROWS,
        params![goal.as_str(), int(after), int(up_to)],
        |r| dialect::event_row(r, 0),
    )
}

// ----- the commit's writes ------------------------------------------------------------------

/// Writes the commit's rows. The goal's stored frontier rows are the ones this handle wrote
/// with the expected revision while the goal row still shows their window's start (a refresh
/// since wrote the rows of another window); otherwise they are read back to tell which change.
fn write_commit(
    tx: &Connection,
    prepared: &Prepared,
    chains: &[String],
    row: Option<IndexedRow>,
) -> Result<(), StoreError> {
    let goal = prepared.request.goal.as_str();
    let receipt = &prepared.receipt;
    let state = &prepared.state;
    {
        // The receipt rides on the commit's last event row.
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO events (goal, revision, at, json, operation, digest, commit_events, attempt, chain, authorship)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(sql)?;
        for ((event, json), chain) in prepared
            .request
            .events
            .iter()
            .zip(&prepared.events)
            .zip(chains)
        {
            let last = event.revision == receipt.revision;
            insert
                .execute(params![
                    goal,
                    int(event.revision),
                    event.at.as_millis(),
                    json,
                    last.then_some(receipt.operation.as_str()),
                    last.then_some(receipt.digest.as_str()),
                    last.then_some(int(receipt.events)),
                    last.then_some(prepared.attempt.as_str()),
                    chain,
                    prepared.authorship.as_deref().filter(|_| last),
                ])
                .map_err(sql)?;
        }
    }
    if prepared.request.events.is_empty() {
        // A recorded no-op changes nothing but its receipt.
        return run(
            tx,
            "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds, attempt, authorship)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, NULL, '[]', ?6, ?7)",
            params![
                goal,
                receipt.operation.as_str(),
                receipt.digest,
                int(receipt.revision),
                receipt.committed_at.as_millis(),
                prepared.attempt,
                prepared.authorship,
            ],
        )
        .map(drop);
    }
    let base = row.map_or(0, |r| r.row.base_revision);
    let head = prepared.chain.as_ref().map(crate::chain::to_hex);
    if let Some(json) = &prepared.snapshot {
        run(
            tx,
            "INSERT OR REPLACE INTO snapshots (goal, revision, json, chain) VALUES (?1, ?2, ?3, ?4)",
            params![goal, int(state.revision), json, head],
        )?;
        run(
            tx,
            "DELETE FROM snapshots WHERE goal = ?1 AND revision < ?2 AND revision <> ?3",
            params![goal, int(state.revision), int(base)],
        )?;
    }
    let projection = &prepared.projection;
    write_goal_row(
        tx,
        goal,
        row,
        projection,
        receipt,
        int(prepared.snapshot_revision()),
        head.as_deref(),
    )?;
    if prepared.agents_changed() {
        run(tx, "DELETE FROM goal_agents WHERE goal = ?1", [goal])?;
        let mut insert = tx
            .prepare_cached("INSERT INTO goal_agents (agent, goal) VALUES (?1, ?2)")
            .map_err(sql)?;
        for agent in &projection.agents {
            insert.execute([agent.as_str(), goal]).map_err(sql)?;
        }
    }
    if prepared.subjects_changed() {
        replace_subjects(tx, goal, &projection.subjects)?;
    }
    let known = prepared.known_rows().filter(|known| {
        row.is_some_and(|row| {
            row.row.revision == known.summary.revision
                && row.valid_from == known.valid_from.as_millis()
        })
    });
    write_frontier(tx, projection, known.map(|known| &known.frontier))
}

/// Replaces the subjects `goal` follows.
fn replace_subjects(
    tx: &Connection,
    goal: &str,
    subjects: &BTreeSet<Subject>,
) -> Result<(), StoreError> {
    run(tx, "DELETE FROM goal_subjects WHERE goal = ?1", [goal])?;
    let mut insert = tx
        .prepare_cached("INSERT INTO goal_subjects (subject, goal) VALUES (?1, ?2)")
        .map_err(sql)?;
    for subject in subjects {
        insert.execute([subject.as_str(), goal]).map_err(sql)?;
    }
    Ok(())
}

/// Writes the goal's row after a commit. An existing row is updated column by column: the
/// indexed columns (standing and window) only when they changed, so that a commit that leaves
/// them as they were does not rewrite their index entries.
fn write_goal_row(
    tx: &Connection,
    goal: &str,
    row: Option<IndexedRow>,
    projection: &Projection,
    receipt: &Receipt,
    snapshot_revision: i64,
    chain: Option<&str>,
) -> Result<(), StoreError> {
    let status = status_name(projection.summary.status);
    let valid_from = projection.valid_from.as_millis();
    let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
    let revision = int(projection.summary.revision);
    let committed_at = receipt.committed_at.as_millis();
    let Some(row) = row else {
        return run(
            tx,
            "INSERT INTO goals (goal, revision, objective, status, valid_from, valid_until, updated_at, base_revision, snapshot_revision, chain)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8, ?9)",
            params![
                goal,
                revision,
                projection.summary.objective,
                status,
                valid_from,
                valid_until,
                committed_at,
                snapshot_revision,
                chain,
            ],
        )
        .map(drop);
    };
    run(
        tx,
        "UPDATE goals SET revision = ?2, objective = ?3, updated_at = ?4, snapshot_revision = ?5, chain = ?6 WHERE goal = ?1",
        params![
            goal,
            revision,
            projection.summary.objective,
            committed_at,
            snapshot_revision,
            chain,
        ],
    )?;
    if row.status != status {
        run(
            tx,
            "UPDATE goals SET status = ?2 WHERE goal = ?1",
            params![goal, status],
        )?;
    }
    if row.valid_from != valid_from {
        run(
            tx,
            "UPDATE goals SET valid_from = ?2 WHERE goal = ?1",
            params![goal, valid_from],
        )?;
    }
    if row.valid_until != valid_until {
        run(
            tx,
            "UPDATE goals SET valid_until = ?2 WHERE goal = ?1",
            params![goal, valid_until],
        )?;
    }
    Ok(())
}

/// An agent's frontier as a row stores it.
type FrontierRow = Vec<(u8, TodoId)>;

/// Brings the goal's frontier rows to `projection`'s, writing only the rows that changed: a
/// commit that leaves an agent's frontier as it was does not touch its row. The stored rows are
/// `known` when the caller knows them; otherwise they are read and compared as stored.
fn write_frontier(
    tx: &Connection,
    projection: &Projection,
    known: Option<&BTreeMap<AgentId, FrontierRow>>,
) -> Result<(), StoreError> {
    let goal = projection.summary.goal.as_str();
    // Each agent whose row changes, with its new JSON and whether it has a row now; then the
    // rows to delete.
    let mut changed: Vec<(&AgentId, String, bool)> = Vec::new();
    let gone: Vec<String> = if let Some(known) = known {
        for (agent, todos) in &projection.frontier {
            match known.get(agent) {
                Some(old) if old == todos => {}
                old => changed.push((agent, encode(todos)?, old.is_some())),
            }
        }
        known
            .keys()
            .filter(|agent| !projection.frontier.contains_key(*agent))
            .map(|agent| agent.as_str().to_owned())
            .collect()
    } else {
        let mut stored: BTreeMap<String, String> =
            rows(tx, GOAL_FRONTIER, [goal], |r| Ok((r.text(0)?, r.text(1)?)))?
                .into_iter()
                .collect();
        for (agent, todos) in &projection.frontier {
            let json = encode(todos)?;
            match stored.remove(agent.as_str()) {
                Some(old) if old == json => {}
                old => changed.push((agent, json, old.is_some())),
            }
        }
        stored.into_keys().collect()
    };
    for (agent, json, exists) in changed {
        let statement = if exists {
            "UPDATE frontier SET todos = ?3 WHERE agent = ?1 AND goal = ?2"
        } else {
            "INSERT INTO frontier (agent, goal, todos) VALUES (?1, ?2, ?3)"
        };
        run(tx, statement, params![agent.as_str(), goal, json])?;
    }
    for agent in gone {
        run(
            tx,
            "DELETE FROM frontier WHERE agent = ?1 AND goal = ?2",
            [agent.as_str(), goal],
        )?;
    }
    Ok(())
}

pub(super) fn integrity_check(conn: &mut Connection, _: &Shared) -> Result<(), StoreError> {
    let mut stmt = conn.prepare("PRAGMA integrity_check(20)").map_err(sql)?;
    let lines = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(Iterator::collect::<Result<Vec<String>, _>>)
        .map_err(sql)?;
    if lines.len() == 1 && lines[0] == "ok" {
        return Ok(());
    }
    Err(StoreError::Corrupt {
        detail: format!(
            "SQLite's integrity check failed: {}; restore the store from a backup",
            lines.join("; ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::SqliteOptions;
    use crate::sqlite::schema::connect;

    /// The steps of SQLite's plan for `statement`, one line each.
    fn plan(conn: &Connection, statement: &str) -> Vec<String> {
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {statement}"))
            .unwrap();
        // The plan does not depend on the values: every parameter is bound to NULL.
        let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
        stmt.query_map(rusqlite::params_from_iter(nulls), |row| {
            row.get::<_, String>(3)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    use crate::dialect::TABLES;

    /// Whether a plan step walks a whole stored table or one of its indexes (a `SCAN` of
    /// anything else walks a subquery's rows, not the store).
    fn scans_a_table(step: &str) -> bool {
        step.strip_prefix("SCAN ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|object| TABLES.contains(&object) || object == "schema_version")
    }

    /// "Indexed, not scans": on the current schema every read seeks a key or an index range;
    /// none walks a whole table or index (a `SCAN` step over a stored table).
    #[test]
    fn every_read_seeks_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plans.db");
        crate::sqlite::schema::create(&path, &SqliteOptions::default()).unwrap();
        let conn = connect(&path, &SqliteOptions::default()).unwrap();
        let reads = [
            ("GOAL_ROW", GOAL_ROW),
            ("EVENT_ROWS", EVENT_ROWS),
            ("ARCHIVED_AFTER", ARCHIVED_AFTER),
            ("ARCHIVE_START", ARCHIVE_START),
            ("LATEST_SNAPSHOT", LATEST_SNAPSHOT),
            ("SNAPSHOT_AT_OR_BEFORE", SNAPSHOT_AT_OR_BEFORE),
            ("SNAPSHOT_AT", SNAPSHOT_AT),
            ("GOAL_FRONTIER", GOAL_FRONTIER),
            ("RECEIPT_ON_EVENT", RECEIPT_ON_EVENT),
            ("RECEIPT_ROW", RECEIPT_ROW),
            ("ATTEMPT_ON_EVENT", ATTEMPT_ON_EVENT),
            ("ATTEMPT_ROW", ATTEMPT_ROW),
            ("EVENTS_AFTER", EVENTS_AFTER),
            ("OPERATIONS_AFTER", OPERATIONS_AFTER),
            ("LATEST_OPERATIONS", LATEST_OPERATIONS),
            ("RECEIPTS_TO_KEEP", RECEIPTS_TO_KEEP),
            ("AGENT_GOALS", AGENT_GOALS),
            ("AGENT_FRONTIER", AGENT_FRONTIER),
            ("STALE_GOALS", STALE_GOALS),
            ("EARLIEST_WAKE", EARLIEST_WAKE),
            ("STORED_GOAL_ROW", STORED_GOAL_ROW),
            ("GOAL_AGENTS", GOAL_AGENTS),
            ("SNAPSHOT_REVISIONS", SNAPSHOT_REVISIONS),
            ("SUBJECT_GOALS", SUBJECT_GOALS),
            ("GOAL_SUBJECTS", GOAL_SUBJECTS),
            ("SUBJECTS_PENDING", SUBJECTS_PENDING),
        ];
        for (name, statement) in reads {
            let steps = plan(&conn, statement);
            assert!(
                steps.iter().any(|step| step.starts_with("SEARCH")),
                "{name} seeks nothing: {steps:?}"
            );
            assert!(
                !steps.iter().any(|step| scans_a_table(step)),
                "{name} scans: {steps:?}"
            );
        }
        // The check can fail: the listing of every goal scans, as it must.
        let listing = plan(&conn, LISTING);
        assert!(
            listing.iter().any(|step| scans_a_table(step)),
            "{listing:?}"
        );
    }
}
