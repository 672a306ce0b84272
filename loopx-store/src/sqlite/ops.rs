//! The SQL behind each store operation. Every statement is parameterised; every write runs in
//! one `BEGIN IMMEDIATE` transaction.

use std::collections::{BTreeMap, BTreeSet};

use loopx_kernel::seams::{AppendRequest, GoalSummary, Receipt, StoreError};
use loopx_kernel::{
    AgentId, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Timestamp, TodoId,
};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::Shared;
use super::schema::sql;
use crate::commit::{Prepared, prepare};
use crate::fold::{
    EventRow, check_loaded, decode_event, decode_snapshot, encode, fold_stored, missing_base,
    tail_usable,
};
use crate::index::{Projection, covers, merge_frontiers, parse_status, status_name};
use crate::retention::{
    Compaction, OperationRecord, audit, covering, decode_operation, fill_from_events, pending_spans,
};

// ----- conversions --------------------------------------------------------------------------

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn count(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        detail: format!("a stored {what} is negative ({value}); restore the store from a backup"),
    })
}

fn stored_id<T: TryFrom<String>>(text: String, what: &str) -> Result<T, StoreError> {
    let shown: String = text.chars().take(64).collect();
    T::try_from(text).map_err(|_| StoreError::Corrupt {
        detail: format!(
            "a stored {what} `{shown}` is not a valid id; restore the store from a backup"
        ),
    })
}

// ----- the reads ----------------------------------------------------------------------------
//
// Every read a commit, a load or a host's query makes, named so that a test can check that each
// one seeks an index (see `tests::every_read_seeks_an_index`). The one exception is the listing
// of all goals, which reads them all by definition.

/// The write path's columns of one goal row.
const GOAL_ROW: &str = "SELECT revision, base_revision, snapshot_revision, status, valid_from, valid_until FROM goals WHERE goal = ?1";
/// A goal's event rows in a range of revisions.
const EVENT_ROWS: &str = "SELECT revision, at, json FROM events WHERE goal = ?1 AND revision > ?2 AND revision <= ?3 ORDER BY revision";
/// A goal's latest snapshot.
const LATEST_SNAPSHOT: &str =
    "SELECT revision, json FROM snapshots WHERE goal = ?1 ORDER BY revision DESC LIMIT 1";
/// A goal's frontier rows, one per agent.
const GOAL_FRONTIER: &str = "SELECT agent, todos FROM frontier WHERE goal = ?1";
/// A receipt on the last event row of its commit.
const RECEIPT_ON_EVENT: &str = "SELECT digest, revision, commit_events, at FROM events
     WHERE goal = ?1 AND operation = ?2 AND operation IS NOT NULL";
/// A receipt in the receipts table (a no-op, an older or a compacted commit).
const RECEIPT_ROW: &str = "SELECT digest, revision, events, committed_at FROM receipts WHERE goal = ?1 AND operation = ?2";
/// A page of a goal's events after a revision.
const EVENTS_AFTER: &str = "SELECT revision, at, json FROM events WHERE goal = ?1 AND revision > ?2 ORDER BY revision LIMIT ?3";
/// A page of a goal's receipts after a revision, in commit order.
const OPERATIONS_AFTER: &str =
    "SELECT operation, digest, revision, events, committed_at, actor, kinds FROM commits
     WHERE goal = ?1 AND revision > ?2 ORDER BY revision, events = 0, seq LIMIT ?3";
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

// ----- the goal row -------------------------------------------------------------------------

/// The columns of a goal row that the write path needs.
#[derive(Debug, Clone, Copy)]
struct GoalRow {
    revision: u64,
    base_revision: u64,
    snapshot_revision: u64,
    /// The stored standing (its stable name; empty when the row holds an unknown one).
    status: &'static str,
    valid_from: i64,
    valid_until: Option<i64>,
}

fn goal_row(conn: &Connection, goal: &GoalId) -> Result<Option<GoalRow>, StoreError> {
    let raw = conn
        .prepare_cached(GOAL_ROW)
        .and_then(|mut stmt| {
            stmt.query_row([goal.as_str()], |row| {
                let status = row.get_ref(3)?.as_str().ok().and_then(parse_status);
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, i64>(2)?,
                    status.map_or("", status_name),
                    row.get::<_, i64>(4)?,
                    row.get::<_, Option<i64>>(5)?,
                ))
            })
            .optional()
        })
        .map_err(sql)?;
    raw.map(
        |(revision, base, snapshot, status, valid_from, valid_until)| {
            Ok(GoalRow {
                revision: count(revision, "revision")?,
                base_revision: count(base, "revision")?,
                snapshot_revision: count(snapshot, "revision")?,
                status,
                valid_from,
                valid_until,
            })
        },
    )
    .transpose()
}

// ----- load ---------------------------------------------------------------------------------

/// Event rows of `goal` in `(after, up_to]`, in order.
fn event_rows(
    conn: &Connection,
    goal: &GoalId,
    after: u64,
    up_to: u64,
) -> Result<Vec<EventRow>, StoreError> {
    let mut stmt = conn.prepare_cached(EVENT_ROWS).map_err(sql)?;
    let mut rows = stmt
        .query(params![goal.as_str(), int(after), int(up_to)])
        .map_err(sql)?;
    let mut stored = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        stored.push(EventRow {
            revision: count(r.get(0).map_err(sql)?, "revision")?,
            at: r.get(1).map_err(sql)?,
            json: r.get(2).map_err(sql)?,
        });
    }
    Ok(stored)
}

/// The goal's state (latest snapshot plus the events after it, folded with the kernel; or a
/// cached older state plus the events after it) and its row, read inside the caller's
/// transaction.
fn load_state(
    conn: &Connection,
    goal: &GoalId,
    cx: &Shared,
) -> Result<Option<(GoalState, GoalRow)>, StoreError> {
    let cache = &cx.cache;
    let Some(row) = goal_row(conn, goal)? else {
        return Ok(None);
    };
    if let Some(state) = cache.get(goal, row.revision) {
        return Ok(Some((state, row)));
    }
    if let Some(older) = cache.behind(goal, row.revision)
        && tail_usable(
            older.revision,
            row.revision,
            row.base_revision,
            row.snapshot_revision,
            cx.options.snapshot_every,
        )
    {
        let tail = event_rows(conn, goal, older.revision, row.revision)?;
        if tail.first().map(|e| e.revision) == Some(older.revision + 1)
            && tail.len() as u64 == row.revision - older.revision
        {
            let state = fold_stored(goal, Some(older), &tail)?;
            let state = check_loaded(goal, state, row.revision)?;
            cache.put(&state, row.snapshot_revision);
            return Ok(Some((state, row)));
        }
    }
    let state = {
        // The snapshot is decoded straight from SQLite's buffer, without a copy.
        let mut stmt = conn.prepare_cached(LATEST_SNAPSHOT).map_err(sql)?;
        let mut rows = stmt.query([goal.as_str()]).map_err(sql)?;
        match rows.next().map_err(sql)? {
            Some(r) => {
                let revision = count(r.get(0).map_err(sql)?, "revision")?;
                let json = r
                    .get_ref(1)
                    .map_err(sql)?
                    .as_str()
                    .map_err(|error| StoreError::Corrupt {
                        detail: format!(
                            "the snapshot of goal `{goal}` at revision {revision} is not text ({error}); restore the store from a backup"
                        ),
                    })?;
                Some(decode_snapshot(goal, revision, json)?)
            }
            None if row.base_revision > 0 => return Err(missing_base(goal, row.base_revision)),
            None => None,
        }
    };
    let from = state.as_ref().map_or(0, |s| s.revision);
    let stored = event_rows(conn, goal, from, u64::MAX)?;
    let state = fold_stored(goal, state, &stored)?;
    let state = check_loaded(goal, state, row.revision)?;
    cache.put(&state, row.snapshot_revision);
    Ok(Some((state, row)))
}

/// What [`load_cached`] found.
pub(super) enum Cached {
    /// The goal does not exist.
    Absent,
    /// The goal's state at its current revision, from the cache.
    Hit(Box<GoalState>),
    /// The cache does not hold the goal at its current revision: load the long way.
    Miss,
}

/// The goal's state when the handle's cache holds it at the goal's current revision (or the
/// goal does not exist), read without ever waiting: the busy handler is off for the one indexed
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
    let read = goal_row(conn, goal);
    conn.busy_timeout(cx.options.busy_timeout).map_err(sql)?;
    Ok(match read? {
        None => Cached::Absent,
        Some(row) => cx
            .cache
            .get(goal, row.revision)
            .map_or(Cached::Miss, |state| Cached::Hit(Box::new(state))),
    })
}

pub(super) fn load(
    conn: &mut Connection,
    cx: &Shared,
    goal: &GoalId,
) -> Result<Option<GoalState>, StoreError> {
    let tx = conn.transaction().map_err(sql)?;
    let loaded = load_state(&tx, goal, cx)?;
    tx.finish().map_err(sql)?;
    Ok(loaded.map(|(state, _)| state))
}

// ----- append -------------------------------------------------------------------------------

pub(super) fn append(
    conn: &mut Connection,
    cx: &Shared,
    request: &AppendRequest,
) -> Result<Receipt, StoreError> {
    // The index rows the expected revision was committed with, when this handle wrote it.
    let known_rows = cx.cache.rows(&request.goal, request.expected_revision);
    // Fold, index and encode outside the write lock when the goal's state at the expected
    // revision is at hand (in the cache, or read in a short read transaction); the write
    // transaction then only checks that the goal did not move. A state at a revision never
    // changes, so one taken from the cache is exact whenever the revision check passes.
    let early = match cx.cache.get(&request.goal, request.expected_revision) {
        Some(state) => Some((request.expected_revision, prepare(Some(state), request))),
        None if request.expected_revision == 0 => Some((0, prepare(None, request))),
        None => {
            let tx = conn.transaction().map_err(sql)?;
            let loaded = load_state(&tx, &request.goal, cx);
            tx.finish().map_err(sql)?;
            match loaded {
                Ok(Some((state, row))) if row.revision == request.expected_revision => {
                    Some((row.revision, prepare(Some(state), request)))
                }
                _ => None,
            }
        }
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    if let Some(first) = receipt_in(&tx, &request.goal, &request.operation)? {
        if first.digest == request.digest {
            return Ok(first);
        }
        return Err(StoreError::OperationConflict {
            operation: request.operation.clone(),
        });
    }
    let row = goal_row(&tx, &request.goal)?;
    let current = row.map_or(0, |r| r.revision);
    if current != request.expected_revision {
        return Err(StoreError::Conflict {
            expected: request.expected_revision,
            current,
        });
    }
    let mut prepared = match early {
        Some((revision, prepared)) if revision == current => prepared?,
        _ => {
            let loaded = load_state(&tx, &request.goal, cx)?;
            prepare(loaded.map(|(state, _)| state), request)?
        }
    };
    prepared.plan_snapshot(
        row.map_or(0, |r| r.snapshot_revision),
        cx.options.snapshot_every,
    )?;
    // The stored rows are the known ones only while the goal row shows their window's start;
    // a refresh since wrote the rows of another window.
    let known_rows = known_rows.filter(|known| {
        row.is_some_and(|row| {
            row.revision == known.summary.revision && row.valid_from == known.valid_from.as_millis()
        })
    });
    write_commit(&tx, request, &prepared, row, known_rows.as_deref())?;
    tx.commit().map_err(|error| match sql(error) {
        // The commit itself failed: it may or may not be on disk.
        StoreError::Unavailable { .. } => StoreError::Ambiguous {
            operation: request.operation.clone(),
        },
        other => other,
    })?;
    let snapshot_revision = if prepared.snapshot.is_some() {
        prepared.folded.state.revision
    } else {
        row.map_or(0, |r| r.snapshot_revision)
    };
    let receipt = prepared.folded.receipt;
    if request.events.is_empty() {
        // A recorded no-op wrote no rows and made no revision.
        cx.cache.put_owned(prepared.folded.state, snapshot_revision);
    } else {
        cx.cache.put_committed(
            prepared.folded.state,
            snapshot_revision,
            prepared.projection,
        );
    }
    Ok(receipt)
}

/// Writes the commit's rows; `known_rows` are the goal's stored index rows when the caller
/// knows them (otherwise the frontier rows are read back to tell which change).
fn write_commit(
    tx: &Transaction<'_>,
    request: &AppendRequest,
    prepared: &Prepared,
    row: Option<GoalRow>,
    known_rows: Option<&Projection>,
) -> Result<(), StoreError> {
    let goal = request.goal.as_str();
    let receipt = &prepared.folded.receipt;
    let state = &prepared.folded.state;
    {
        // The receipt rides on the commit's last event row.
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO events (goal, revision, at, json, operation, digest, commit_events)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql)?;
        for (event, json) in request.events.iter().zip(&prepared.events) {
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
                ])
                .map_err(sql)?;
        }
    }
    if request.events.is_empty() {
        // A recorded no-op changes nothing but its receipt.
        return tx
            .prepare_cached(
                "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, NULL, '[]')",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    goal,
                    receipt.operation.as_str(),
                    receipt.digest,
                    int(receipt.revision),
                    receipt.committed_at.as_millis(),
                ])
            })
            .map(drop)
            .map_err(sql);
    }
    let base = row.map_or(0, |r| r.base_revision);
    let mut snapshot_revision = row.map_or(0, |r| r.snapshot_revision);
    if let Some(json) = &prepared.snapshot {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO snapshots (goal, revision, json) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut stmt| stmt.execute(params![goal, int(state.revision), json]))
        .map_err(sql)?;
        tx.prepare_cached(
            "DELETE FROM snapshots WHERE goal = ?1 AND revision < ?2 AND revision <> ?3",
        )
        .and_then(|mut stmt| stmt.execute(params![goal, int(state.revision), int(base)]))
        .map_err(sql)?;
        snapshot_revision = state.revision;
    }
    let projection = &prepared.projection;
    write_goal_row(tx, goal, row, projection, receipt, int(snapshot_revision))?;
    if prepared.agents_changed {
        tx.prepare_cached("DELETE FROM goal_agents WHERE goal = ?1")
            .and_then(|mut stmt| stmt.execute([goal]))
            .map_err(sql)?;
        let mut insert = tx
            .prepare_cached("INSERT INTO goal_agents (agent, goal) VALUES (?1, ?2)")
            .map_err(sql)?;
        for agent in &projection.agents {
            insert.execute([agent.as_str(), goal]).map_err(sql)?;
        }
    }
    write_frontier(tx, projection, known_rows.map(|known| &known.frontier))
}

/// Writes the goal's row after a commit. An existing row is updated column by column: the
/// indexed columns (standing and window) only when they changed, so that a commit that leaves
/// them as they were does not rewrite their index entries.
fn write_goal_row(
    tx: &Transaction<'_>,
    goal: &str,
    row: Option<GoalRow>,
    projection: &Projection,
    receipt: &Receipt,
    snapshot_revision: i64,
) -> Result<(), StoreError> {
    let status = status_name(projection.summary.status);
    let valid_from = projection.valid_from.as_millis();
    let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
    let revision = int(projection.summary.revision);
    let committed_at = receipt.committed_at.as_millis();
    let Some(row) = row else {
        return tx
            .prepare_cached(
                "INSERT INTO goals (goal, revision, objective, status, valid_from, valid_until, updated_at, base_revision, snapshot_revision)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    goal,
                    revision,
                    projection.summary.objective,
                    status,
                    valid_from,
                    valid_until,
                    committed_at,
                    snapshot_revision,
                ])
            })
            .map(drop)
            .map_err(sql);
    };
    tx.prepare_cached(
        "UPDATE goals SET revision = ?2, objective = ?3, updated_at = ?4, snapshot_revision = ?5 WHERE goal = ?1",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            goal,
            revision,
            projection.summary.objective,
            committed_at,
            snapshot_revision,
        ])
    })
    .map_err(sql)?;
    if row.status != status {
        tx.prepare_cached("UPDATE goals SET status = ?2 WHERE goal = ?1")
            .and_then(|mut stmt| stmt.execute(params![goal, status]))
            .map_err(sql)?;
    }
    if row.valid_from != valid_from {
        tx.prepare_cached("UPDATE goals SET valid_from = ?2 WHERE goal = ?1")
            .and_then(|mut stmt| stmt.execute(params![goal, valid_from]))
            .map_err(sql)?;
    }
    if row.valid_until != valid_until {
        tx.prepare_cached("UPDATE goals SET valid_until = ?2 WHERE goal = ?1")
            .and_then(|mut stmt| stmt.execute(params![goal, valid_until]))
            .map_err(sql)?;
    }
    Ok(())
}

/// An agent's frontier as a row stores it.
type FrontierRow = Vec<(u8, TodoId)>;

/// Brings the goal's frontier rows to `projection`'s, writing only the rows that changed: a
/// commit that leaves an agent's frontier as it was does not touch its row. The stored rows are
/// `known` when the caller knows them; otherwise they are read and compared as stored.
fn write_frontier(
    tx: &Transaction<'_>,
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
        let mut stored: BTreeMap<String, String> = BTreeMap::new();
        let mut stmt = tx.prepare_cached(GOAL_FRONTIER).map_err(sql)?;
        let mut rows = stmt.query([goal]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            stored.insert(r.get(0).map_err(sql)?, r.get(1).map_err(sql)?);
        }
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
        tx.prepare_cached(statement)
            .and_then(|mut stmt| stmt.execute(params![agent.as_str(), goal, json]))
            .map_err(sql)?;
    }
    for agent in gone {
        tx.prepare_cached("DELETE FROM frontier WHERE agent = ?1 AND goal = ?2")
            .and_then(|mut stmt| stmt.execute([agent.as_str(), goal]))
            .map_err(sql)?;
    }
    Ok(())
}

// ----- receipts and events ------------------------------------------------------------------

fn receipt_in(
    conn: &Connection,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    let find = |statement: &str| {
        conn.prepare_cached(statement)
            .and_then(|mut stmt| {
                stmt.query_row([goal.as_str(), operation.as_str()], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                    ))
                })
                .optional()
            })
            .map_err(sql)
    };
    let raw = match find(RECEIPT_ON_EVENT)? {
        Some(found) => Some(found),
        None => find(RECEIPT_ROW)?,
    };
    raw.map(|(digest, revision, events, at)| {
        Ok(Receipt {
            goal: goal.clone(),
            operation: operation.clone(),
            digest,
            revision: count(revision, "revision")?,
            events: count(events, "event count")?,
            committed_at: Timestamp::from_millis(at),
        })
    })
    .transpose()
}

pub(super) fn receipt(
    conn: &mut Connection,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    receipt_in(conn, goal, operation)
}

pub(super) fn events(
    conn: &mut Connection,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let mut stmt = conn.prepare_cached(EVENTS_AFTER).map_err(sql)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = stmt
        .query(params![goal.as_str(), int(after), limit])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let row = EventRow {
            revision: count(r.get(0).map_err(sql)?, "revision")?,
            at: r.get(1).map_err(sql)?,
            json: r.get(2).map_err(sql)?,
        };
        out.push(decode_event(goal, &row)?);
    }
    Ok(out)
}

/// The watched goals that stand past the revision given for them (see `Store::changed`).
pub(super) fn moved(
    conn: &mut Connection,
    watch: &[(GoalId, u64)],
) -> Result<Vec<GoalId>, StoreError> {
    let tx = conn.transaction().map_err(sql)?;
    let mut revisions = BTreeMap::new();
    for (goal, _) in watch {
        if !revisions.contains_key(goal) {
            let revision = goal_row(&tx, goal)?.map_or(0, |row| row.revision);
            revisions.insert(goal.clone(), revision);
        }
    }
    tx.finish().map_err(sql)?;
    Ok(crate::watch::past(watch, |goal| {
        revisions.get(goal).copied().unwrap_or(0)
    }))
}

// ----- cross-goal queries -------------------------------------------------------------------

/// Recomputes the index rows of `stale` goals at `now` and returns them. The states are read
/// and the rows computed outside the write lock; a goal that moved meanwhile keeps the rows its
/// newer commit wrote. Goals that vanished are skipped.
fn refresh(
    conn: &mut Connection,
    cx: &Shared,
    now: Timestamp,
    stale: &[GoalId],
) -> Result<Vec<Projection>, StoreError> {
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(stale.len());
    {
        let tx = conn.transaction().map_err(sql)?;
        for goal in stale {
            if let Some((state, _)) = load_state(&tx, goal, cx)? {
                out.push(Projection::compute(&state, now));
            }
        }
        tx.finish().map_err(sql)?;
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    for projection in &out {
        let updated = tx
            .prepare_cached(
                "UPDATE goals SET status = ?3, valid_from = ?4, valid_until = ?5 WHERE goal = ?1 AND revision = ?2",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    projection.summary.goal.as_str(),
                    int(projection.summary.revision),
                    status_name(projection.summary.status),
                    projection.valid_from.as_millis(),
                    projection.summary.next_wake.map(Timestamp::as_millis),
                ])
            })
            .map_err(sql)?;
        if updated == 1 {
            write_frontier(&tx, projection, None)?;
        }
    }
    tx.commit().map_err(sql)?;
    Ok(out)
}

pub(super) fn goals(
    conn: &mut Connection,
    cx: &Shared,
    now: Timestamp,
) -> Result<Vec<GoalSummary>, StoreError> {
    let mut summaries = BTreeMap::new();
    let mut stale = Vec::new();
    {
        let tx = conn.transaction().map_err(sql)?;
        let mut stmt = tx
            .prepare_cached(
                "SELECT goal, objective, status, revision, valid_from, valid_until FROM goals",
            )
            .map_err(sql)?;
        let mut rows = stmt.query([]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let goal: GoalId = stored_id(r.get(0).map_err(sql)?, "goal id")?;
            let status: String = r.get(2).map_err(sql)?;
            let valid_from = Timestamp::from_millis(r.get(4).map_err(sql)?);
            let valid_until = r
                .get::<_, Option<i64>>(5)
                .map_err(sql)?
                .map(Timestamp::from_millis);
            if !covers(valid_from, valid_until, now) {
                stale.push(goal);
                continue;
            }
            let summary = GoalSummary {
                goal: goal.clone(),
                objective: r.get(1).map_err(sql)?,
                status: parse_status(&status).ok_or_else(|| StoreError::Corrupt {
                    detail: format!("goal `{goal}` has an unknown status `{status}`; restore the store from a backup"),
                })?,
                revision: count(r.get(3).map_err(sql)?, "revision")?,
                next_wake: valid_until,
            };
            summaries.insert(goal, summary);
        }
        drop(rows);
        drop(stmt);
        tx.finish().map_err(sql)?;
    }
    for projection in refresh(conn, cx, now, &stale)? {
        summaries.insert(projection.summary.goal.clone(), projection.summary);
    }
    Ok(summaries.into_values().collect())
}

pub(super) fn frontier(
    conn: &mut Connection,
    cx: &Shared,
    agent: &AgentId,
    now: Timestamp,
) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
    let mut fresh = BTreeSet::new();
    let mut stale = Vec::new();
    let mut per_goal: BTreeMap<GoalId, Vec<(u8, TodoId)>> = BTreeMap::new();
    {
        let tx = conn.transaction().map_err(sql)?;
        {
            let mut stmt = tx.prepare_cached(AGENT_GOALS).map_err(sql)?;
            let mut rows = stmt.query([agent.as_str()]).map_err(sql)?;
            while let Some(r) = rows.next().map_err(sql)? {
                let goal: GoalId = stored_id(r.get(0).map_err(sql)?, "goal id")?;
                let valid_from = Timestamp::from_millis(r.get(1).map_err(sql)?);
                let valid_until = r
                    .get::<_, Option<i64>>(2)
                    .map_err(sql)?
                    .map(Timestamp::from_millis);
                if covers(valid_from, valid_until, now) {
                    fresh.insert(goal);
                } else {
                    stale.push(goal);
                }
            }
        }
        {
            let mut stmt = tx.prepare_cached(AGENT_FRONTIER).map_err(sql)?;
            let mut rows = stmt.query([agent.as_str()]).map_err(sql)?;
            while let Some(r) = rows.next().map_err(sql)? {
                let goal: GoalId = stored_id(r.get(0).map_err(sql)?, "goal id")?;
                if !fresh.contains(&goal) {
                    continue;
                }
                let json: String = r.get(1).map_err(sql)?;
                let todos: Vec<(u8, TodoId)> = serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
                    detail: format!(
                        "the frontier row of `{agent}` in goal `{goal}` cannot be read ({error}); restore the store from a backup"
                    ),
                })?;
                per_goal.insert(goal, todos);
            }
        }
        tx.finish().map_err(sql)?;
    }
    for mut projection in refresh(conn, cx, now, &stale)? {
        if let Some(todos) = projection.frontier.remove(agent) {
            per_goal.insert(projection.summary.goal, todos);
        }
    }
    Ok(merge_frontiers(
        per_goal
            .iter()
            .map(|(goal, todos)| (goal, todos.as_slice())),
    ))
}

pub(super) fn next_wake(
    conn: &mut Connection,
    cx: &Shared,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let mut stale: Vec<GoalId> = {
        let mut stmt = conn.prepare_cached(STALE_GOALS).map_err(sql)?;
        let ids = stmt
            .query_map([now.as_millis()], |r| r.get::<_, String>(0))
            .and_then(Iterator::collect::<Result<Vec<String>, _>>)
            .map_err(sql)?;
        ids.into_iter()
            .map(|id| stored_id(id, "goal id"))
            .collect::<Result<_, _>>()?
    };
    // A goal may be stale at both ends of its window.
    stale.sort();
    stale.dedup();
    let refreshed = refresh(conn, cx, now, &stale)?;
    let indexed: Option<i64> = conn
        .prepare_cached(EARLIEST_WAKE)
        .and_then(|mut stmt| stmt.query_row([now.as_millis()], |r| r.get(0)))
        .map_err(sql)?;
    Ok(indexed
        .map(Timestamp::from_millis)
        .into_iter()
        .chain(refreshed.iter().filter_map(|p| p.summary.next_wake))
        .min())
}

// ----- retention ----------------------------------------------------------------------------

pub(super) fn compact(
    conn: &mut Connection,
    goal: &GoalId,
    keep_after: u64,
) -> Result<Compaction, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let row = goal_row(&tx, goal)?.ok_or_else(|| StoreError::UnknownGoal { goal: goal.clone() })?;
    let target = keep_after.min(row.revision);
    if target <= row.base_revision {
        return Ok(Compaction {
            goal: goal.clone(),
            base_revision: row.base_revision,
            events_removed: 0,
        });
    }
    // The state at `target`: the newest snapshot at or before it, plus the events up to it.
    let snapshot: Option<(i64, String)> = tx
        .prepare_cached(
            "SELECT revision, json FROM snapshots WHERE goal = ?1 AND revision <= ?2 ORDER BY revision DESC LIMIT 1",
        )
        .and_then(|mut stmt| {
            stmt.query_row(params![goal.as_str(), int(target)], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(sql)?;
    let state = match snapshot {
        Some((revision, json)) => Some(decode_snapshot(goal, count(revision, "revision")?, &json)?),
        None => None,
    };
    let from = state.as_ref().map_or(0, |s| s.revision);
    let stored = event_rows(&tx, goal, from, target)?;
    let state = fold_stored(goal, state, &stored)?;
    let state = match state {
        Some(state) if state.revision == target => state,
        _ => {
            return Err(StoreError::Corrupt {
                detail: format!(
                    "the history of goal `{goal}` does not reach revision {target}; restore the store from a backup"
                ),
            });
        }
    };
    let g = goal.as_str();
    let json = encode(&state.snapshot())?;
    tx.prepare_cached(
        "INSERT OR REPLACE INTO snapshots (goal, revision, json) VALUES (?1, ?2, ?3)",
    )
    .and_then(|mut stmt| stmt.execute(params![g, int(target), json]))
    .map_err(sql)?;
    keep_receipts(&tx, goal, target)?;
    let removed = tx
        .prepare_cached("DELETE FROM events WHERE goal = ?1 AND revision <= ?2")
        .and_then(|mut stmt| stmt.execute(params![g, int(target)]))
        .map_err(sql)?;
    tx.prepare_cached("DELETE FROM snapshots WHERE goal = ?1 AND revision < ?2")
        .and_then(|mut stmt| stmt.execute(params![g, int(target)]))
        .map_err(sql)?;
    tx.prepare_cached(
        "UPDATE goals SET base_revision = ?2, snapshot_revision = max(snapshot_revision, ?2) WHERE goal = ?1",
    )
    .and_then(|mut stmt| stmt.execute(params![g, int(target)]))
    .map_err(sql)?;
    tx.commit().map_err(sql)?;
    Ok(Compaction {
        goal: goal.clone(),
        base_revision: target,
        events_removed: removed as u64,
    })
}

pub(super) fn base(conn: &mut Connection, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
    let tx = conn.transaction().map_err(sql)?;
    let Some(row) = goal_row(&tx, goal)? else {
        return Ok(None);
    };
    if row.base_revision == 0 {
        return Ok(None);
    }
    let json: Option<String> = tx
        .prepare_cached("SELECT json FROM snapshots WHERE goal = ?1 AND revision = ?2")
        .and_then(|mut stmt| {
            stmt.query_row(params![goal.as_str(), int(row.base_revision)], |r| r.get(0))
                .optional()
        })
        .map_err(sql)?;
    let json = json.ok_or_else(|| missing_base(goal, row.base_revision))?;
    let state = decode_snapshot(goal, row.base_revision, &json)?;
    tx.finish().map_err(sql)?;
    Ok(Some(state.snapshot()))
}

pub(super) fn operations(
    conn: &mut Connection,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<OperationRecord>, StoreError> {
    // One read transaction: a compaction cannot delete the events a receipt's actor and event
    // names are read from between the two reads.
    let tx = conn.transaction().map_err(sql)?;
    let mut records = Vec::new();
    // The records whose actor and event names live in their events.
    let mut from_events = Vec::new();
    {
        let mut stmt = tx.prepare_cached(OPERATIONS_AFTER).map_err(sql)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = stmt
            .query(params![goal.as_str(), int(after), limit])
            .map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let operation: OperationId = stored_id(r.get(0).map_err(sql)?, "operation id")?;
            let receipt = Receipt {
                goal: goal.clone(),
                operation,
                digest: r.get(1).map_err(sql)?,
                revision: count(r.get(2).map_err(sql)?, "revision")?,
                events: count(r.get(3).map_err(sql)?, "event count")?,
                committed_at: Timestamp::from_millis(r.get(4).map_err(sql)?),
            };
            let actor: Option<String> = r.get(5).map_err(sql)?;
            if let Some(kinds) = r.get::<_, Option<String>>(6).map_err(sql)? {
                records.push(decode_operation(receipt, actor, &kinds)?);
            } else {
                from_events.push(records.len());
                records.push(OperationRecord {
                    receipt,
                    actor: None,
                    events: Vec::new(),
                });
            }
        }
    }
    let events = spans_events(&tx, goal, &pending_spans(&records, &from_events))?;
    fill_from_events(goal, &mut records, &from_events, &events)?;
    tx.finish().map_err(sql)?;
    Ok(records)
}

/// The events the receipts `spans` (each its revision and event count) were committed with, by
/// revision.
fn spans_events(
    conn: &Connection,
    goal: &GoalId,
    spans: &[(u64, u64)],
) -> Result<BTreeMap<u64, RecordedEvent>, StoreError> {
    let Some((from, to)) = covering(spans) else {
        return Ok(BTreeMap::new());
    };
    event_rows(conn, goal, from, to)?
        .iter()
        .map(|row| Ok((row.revision, decode_event(goal, row)?)))
        .collect()
}

/// Before compaction deletes the events up to `target`: the receipts on those events' rows
/// move to the receipts table with their actor and event names, so the audit trail outlives
/// the events.
fn keep_receipts(tx: &Transaction<'_>, goal: &GoalId, target: u64) -> Result<(), StoreError> {
    let g = goal.as_str();
    let mut moving = Vec::new();
    {
        let mut stmt = tx.prepare_cached(RECEIPTS_TO_KEEP).map_err(sql)?;
        let mut rows = stmt.query(params![g, int(target)]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let revision = count(r.get(0).map_err(sql)?, "revision")?;
            let events = count(r.get(1).map_err(sql)?, "event count")?;
            let operation: String = r.get(2).map_err(sql)?;
            let digest: String = r.get(3).map_err(sql)?;
            let at: i64 = r.get(4).map_err(sql)?;
            moving.push((revision, events, operation, digest, at));
        }
    }
    let spans: Vec<(u64, u64)> = moving.iter().map(|m| (m.0, m.1)).collect();
    let events = spans_events(tx, goal, &spans)?;
    for (revision, n, operation, digest, at) in moving {
        let (actor, names) = audit(goal, &events, revision, n)?;
        let (actor, names) = (encode(&actor)?, encode(&names)?);
        tx.prepare_cached(
            "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                g,
                operation,
                digest,
                int(revision),
                int(n),
                at,
                actor,
                names,
            ])
        })
        .map_err(sql)?;
        // An event row that compaction keeps holds the receipt no more (the others go).
        if revision > target {
            tx.prepare_cached(
                "UPDATE events SET operation = NULL, digest = NULL, commit_events = NULL
                 WHERE goal = ?1 AND revision = ?2",
            )
            .and_then(|mut stmt| stmt.execute(params![g, int(revision)]))
            .map_err(sql)?;
        }
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
    use crate::sqlite::schema::{connect, migrate};

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

    /// The stored tables; a `SCAN` of anything else walks a subquery's rows, not the store.
    const TABLES: [&str; 7] = [
        "goals",
        "events",
        "receipts",
        "snapshots",
        "goal_agents",
        "frontier",
        "schema_version",
    ];

    /// Whether a plan step walks a whole stored table or one of its indexes.
    fn scans_a_table(step: &str) -> bool {
        step.strip_prefix("SCAN ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|object| TABLES.contains(&object))
    }

    /// "Indexed, not scans": on the current schema every read seeks a key or an index range;
    /// none walks a whole table or index (a `SCAN` step over a stored table).
    #[test]
    fn every_read_seeks_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plans.db");
        crate::sqlite::schema::prepare_file(&path).unwrap();
        let mut conn = connect(&path, &SqliteOptions::default()).unwrap();
        migrate(&mut conn).unwrap();
        let reads = [
            ("GOAL_ROW", GOAL_ROW),
            ("EVENT_ROWS", EVENT_ROWS),
            ("LATEST_SNAPSHOT", LATEST_SNAPSHOT),
            ("GOAL_FRONTIER", GOAL_FRONTIER),
            ("RECEIPT_ON_EVENT", RECEIPT_ON_EVENT),
            ("RECEIPT_ROW", RECEIPT_ROW),
            ("EVENTS_AFTER", EVENTS_AFTER),
            ("OPERATIONS_AFTER", OPERATIONS_AFTER),
            ("RECEIPTS_TO_KEEP", RECEIPTS_TO_KEEP),
            ("AGENT_GOALS", AGENT_GOALS),
            ("AGENT_FRONTIER", AGENT_FRONTIER),
            ("STALE_GOALS", STALE_GOALS),
            ("EARLIEST_WAKE", EARLIEST_WAKE),
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
        let listing = plan(&conn, "SELECT goal FROM goals");
        assert!(
            listing.iter().any(|step| scans_a_table(step)),
            "{listing:?}"
        );
    }
}
