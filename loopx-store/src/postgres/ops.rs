//! The SQL behind each store operation. Every statement is parameterised; every write runs in
//! one transaction that first locks the goal's row (`SELECT ... FOR UPDATE`) for its
//! compare-and-set.

use std::collections::{BTreeMap, BTreeSet};

use deadpool_postgres::{GenericClient, Object};
use loopx_kernel::seams::{AppendRequest, GoalSummary, Receipt, StoreError};
use loopx_kernel::{
    AgentId, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Timestamp, TodoId,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::listen::{CHANNEL, payload};
use super::schema::{column, is_unique_violation, pg};
use crate::cache::StateCache;
use crate::commit::{Prepared, prepare};
use crate::fold::{
    EventRow, check_loaded, decode_event, decode_snapshot, encode, fold_stored, missing_base,
    tail_usable,
};
use crate::index::{Projection, covers, merge_frontiers, parse_status, status_name};
use crate::retention::{
    Compaction, OperationRecord, audit, covering, decode_operation, fill_from_events, pending_spans,
};

/// What every operation needs from the store handle.
pub(super) struct Cx<'a> {
    /// The server, for messages (never the password).
    pub target: &'a str,
    pub cache: &'a StateCache,
    pub snapshot_every: u64,
}

impl Cx<'_> {
    fn err(&self) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
        move |error| pg(self.target, &error)
    }
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query(&statement, params).await
}

async fn execute<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.execute(&statement, params).await
}

// ----- conversions --------------------------------------------------------------------------

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn count(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        detail: format!("a stored {what} is negative ({value}); restore the store from a backup"),
    })
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| column(&e))
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
// Every read a commit, a load or a host's query makes, named so that a test can check that an
// index serves each one (see `tests::an_index_serves_every_read`). The one exception is the
// listing of all goals, which reads them all by definition.

/// A goal row's write-path columns, locked for the commit.
const GOAL_ROW_LOCKED: &str =
    "SELECT revision, base_revision, snapshot_revision FROM goals WHERE goal = $1 FOR UPDATE";
/// A goal row's write-path columns.
const GOAL_ROW: &str =
    "SELECT revision, base_revision, snapshot_revision FROM goals WHERE goal = $1";
/// A goal's event rows in a range of revisions.
const EVENT_ROWS: &str = "SELECT revision, at, json FROM events WHERE goal = $1 AND revision > $2 AND revision <= $3 ORDER BY revision";
/// A goal's latest snapshot at or before a revision.
const SNAPSHOT_AT_OR_BEFORE: &str = "SELECT revision, json FROM snapshots WHERE goal = $1 AND revision <= $2 ORDER BY revision DESC LIMIT 1";
/// A goal row and its events in a range of revisions, in one round trip.
const GOAL_AND_TAIL: &str = "SELECT g.revision, g.base_revision, g.snapshot_revision, e.revision, e.at, e.json FROM goals g LEFT JOIN events e ON e.goal = g.goal AND e.revision > $2 AND e.revision <= $3 WHERE g.goal = $1 ORDER BY e.revision";
/// A receipt by operation (on an event row or in the receipts table).
const RECEIPT: &str = "SELECT digest, revision, events, committed_at FROM commits WHERE hashtextextended(operation, 0) = hashtextextended($2, 0) AND goal = $1 AND operation = $2";
/// A page of a goal's events after a revision.
const EVENTS_AFTER: &str = "SELECT revision, at, json FROM events WHERE goal = $1 AND revision > $2 ORDER BY revision LIMIT $3";
/// The revisions of several goals.
const GOAL_REVISIONS: &str = "SELECT goal, revision FROM goals WHERE goal = ANY($1::text[])";
/// The goals an agent is registered with, their rows' windows and its frontier rows.
const AGENT_GOALS_AND_FRONTIER: &str = "SELECT g.goal, g.valid_from, g.valid_until, f.todos FROM goal_agents a JOIN goals g ON g.goal = a.goal LEFT JOIN frontier f ON f.agent = a.agent AND f.goal = a.goal WHERE a.agent = $1";
/// The goals whose rows' window does not cover a time.
const STALE_GOALS: &str = "SELECT goal FROM goals WHERE valid_until <= $1 OR valid_from > $1";
/// The earliest end of a window that covers a time.
const EARLIEST_WAKE: &str =
    "SELECT min(valid_until) FROM goals WHERE valid_until > $1 AND valid_from <= $1";
/// The receipts rows that read their actor and event names from events compaction deletes.
const RECEIPT_ROWS_TO_NAME: &str = "SELECT revision, events, seq FROM receipts WHERE goal = $1 AND kinds IS NULL AND events > 0 AND revision - events < $2";
/// The receipts on event rows that compaction up to a revision deletes or keeps.
const RECEIPTS_TO_KEEP: &str = "SELECT revision, commit_events, operation, digest, at FROM events WHERE goal = $1 AND operation IS NOT NULL AND revision - commit_events < $2";
/// A goal's snapshot at a revision.
const SNAPSHOT_AT: &str = "SELECT json FROM snapshots WHERE goal = $1 AND revision = $2";
/// A page of a goal's receipts after a revision, in commit order.
const OPERATIONS_AFTER: &str = "SELECT operation, digest, revision, events, committed_at, actor, kinds FROM commits WHERE goal = $1 AND revision > $2 ORDER BY revision, events = 0, seq LIMIT $3";

// ----- the goal row -------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
pub(super) struct GoalRow {
    revision: u64,
    base_revision: u64,
    snapshot_revision: u64,
}

async fn goal_row<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    lock: bool,
) -> Result<Option<GoalRow>, StoreError> {
    let sql = if lock { GOAL_ROW_LOCKED } else { GOAL_ROW };
    let rows = query(c, sql, &[&goal.as_str()]).await.map_err(cx.err())?;
    rows.first()
        .map(|row| {
            Ok(GoalRow {
                revision: count(get(row, 0)?, "revision")?,
                base_revision: count(get(row, 1)?, "revision")?,
                snapshot_revision: count(get(row, 2)?, "revision")?,
            })
        })
        .transpose()
}

// ----- load ---------------------------------------------------------------------------------

/// An event row from the columns `revision, at, json` starting at `from`.
fn event_row(row: &Row, from: usize) -> Result<EventRow, StoreError> {
    Ok(EventRow {
        revision: count(get(row, from)?, "revision")?,
        at: get(row, from + 1)?,
        json: get(row, from + 2)?,
    })
}

/// Event rows of `goal` in `(after, up_to]`, in order.
async fn event_rows<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    after: u64,
    up_to: u64,
) -> Result<Vec<EventRow>, StoreError> {
    let rows = query(c, EVENT_ROWS, &[&goal.as_str(), &int(after), &int(up_to)])
        .await
        .map_err(cx.err())?;
    rows.iter().map(|row| event_row(row, 0)).collect()
}

/// The goal's state at `revision`: the newest snapshot at or before it plus the events up to
/// it, folded with the kernel. The caller reads inside one snapshot of the database (or holds
/// the goal's row lock).
async fn state_at<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    row: GoalRow,
    revision: u64,
) -> Result<Option<GoalState>, StoreError> {
    let rows = query(c, SNAPSHOT_AT_OR_BEFORE, &[&goal.as_str(), &int(revision)])
        .await
        .map_err(cx.err())?;
    let state = match rows.first() {
        Some(r) => Some(decode_snapshot(
            goal,
            count(get(r, 0)?, "revision")?,
            get::<&str>(r, 1)?,
        )?),
        None if row.base_revision > 0 => return Err(missing_base(goal, row.base_revision)),
        None => None,
    };
    let from = state.as_ref().map_or(0, |s| s.revision);
    let stored = event_rows(c, cx, goal, from, revision).await?;
    fold_stored(goal, state, &stored)
}

/// The goal's current state and row.
async fn load_state<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    lock: bool,
) -> Result<Option<(GoalState, GoalRow)>, StoreError> {
    let Some(row) = goal_row(c, cx, goal, lock).await? else {
        return Ok(None);
    };
    if let Some(state) = cx.cache.get(goal, row.revision) {
        return Ok(Some((state, row)));
    }
    let state = state_at(c, cx, goal, row, row.revision).await?;
    let state = check_loaded(goal, state, row.revision)?;
    cx.cache.put(&state, row.snapshot_revision);
    Ok(Some((state, row)))
}

/// The goal's current state and row in one statement (one round trip), when the cache holds
/// the goal at its current revision or a little behind it: the statement reads the goal's row
/// and the events after the cached state, which are folded on. `Err(None)`-like outcomes are
/// returned as `Ok(Quick::Unknown)`: nothing cached that helps, read the goal the long way.
async fn load_quick<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
) -> Result<Quick, StoreError> {
    let Some(after) = cx.cache.latest_revision(goal) else {
        return Ok(Quick::Unknown);
    };
    let up_to = after.saturating_add(cx.snapshot_every);
    let rows = query(
        c,
        GOAL_AND_TAIL,
        &[&goal.as_str(), &int(after), &int(up_to)],
    )
    .await
    .map_err(cx.err())?;
    let Some(first) = rows.first() else {
        return Ok(Quick::Absent);
    };
    let row = GoalRow {
        revision: count(get(first, 0)?, "revision")?,
        base_revision: count(get(first, 1)?, "revision")?,
        snapshot_revision: count(get(first, 2)?, "revision")?,
    };
    if let Some(state) = cx.cache.get(goal, row.revision) {
        return Ok(Quick::Loaded(Box::new(state), row));
    }
    let Some(older) = cx.cache.behind(goal, row.revision) else {
        return Ok(Quick::Unknown);
    };
    if !tail_usable(
        older.revision,
        row.revision,
        row.base_revision,
        row.snapshot_revision,
        cx.snapshot_every,
    ) {
        return Ok(Quick::Unknown);
    }
    let mut tail = Vec::with_capacity(rows.len());
    for r in &rows {
        if get::<Option<i64>>(r, 3)?.is_some() {
            tail.push(event_row(r, 3)?);
        }
    }
    let contiguous = tail
        .iter()
        .zip(older.revision + 1..)
        .all(|(event, revision)| event.revision == revision)
        && tail.len() as u64 == row.revision - older.revision;
    if !contiguous {
        return Ok(Quick::Unknown);
    }
    let state = fold_stored(goal, Some(older), &tail)?;
    let state = check_loaded(goal, state, row.revision)?;
    cx.cache.put(&state, row.snapshot_revision);
    Ok(Quick::Loaded(Box::new(state), row))
}

/// What [`load_quick`] found.
enum Quick {
    /// The goal does not exist.
    Absent,
    /// The goal's current state and row.
    Loaded(Box<GoalState>, GoalRow),
    /// The cache did not help: read the snapshot and its tail.
    Unknown,
}

/// The goal's current state and row: [`load_quick`] when the cache helps, otherwise the
/// snapshot and its tail inside one read-only snapshot of the database.
async fn load_current(
    client: &mut Object,
    cx: &Cx<'_>,
    goal: &GoalId,
) -> Result<Option<(GoalState, GoalRow)>, StoreError> {
    match load_quick(&*client, cx, goal).await? {
        Quick::Absent => return Ok(None),
        Quick::Loaded(state, row) => return Ok(Some((*state, row))),
        Quick::Unknown => {}
    }
    let tx = read_only(client, cx).await?;
    let loaded = load_state(&tx, cx, goal, false).await?;
    tx.rollback().await.map_err(cx.err())?;
    Ok(loaded)
}

/// A read-only transaction over one snapshot of the database; it ends with a rollback (it
/// wrote nothing).
async fn read_only<'c>(
    client: &'c mut Object,
    cx: &Cx<'_>,
) -> Result<deadpool_postgres::Transaction<'c>, StoreError> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(cx.err())
}

pub(super) async fn load(
    client: &mut Object,
    cx: &Cx<'_>,
    goal: &GoalId,
) -> Result<Option<GoalState>, StoreError> {
    Ok(load_current(client, cx, goal)
        .await?
        .map(|(state, _)| state))
}

// ----- append -------------------------------------------------------------------------------

/// The statement that commits through the `loopx_append` function (schema 4).
const APPEND: &str =
    "SELECT r_outcome, r_digest, r_revision, r_events, r_committed_at FROM loopx_append(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)";

pub(super) async fn append(
    client: &mut Object,
    cx: &Cx<'_>,
    request: &AppendRequest,
) -> Result<Receipt, StoreError> {
    let goal = &request.goal;
    let expected = request.expected_revision;
    // The goal's state at the expected revision, to fold the batch onto before the commit: from
    // the cache, or read in one statement. A state at a revision never changes, so one taken
    // from the cache is exact whenever the commit's revision check passes.
    let start = match cx.cache.get_with_snapshot(goal, expected) {
        Some((state, snapshot)) => Some((Some(state), snapshot)),
        None if expected == 0 => Some((None, 0)),
        None => match load_current(client, cx, goal).await? {
            Some((state, row)) if row.revision == expected => {
                Some((Some(state), row.snapshot_revision))
            }
            Some((_, row)) => {
                // Not at the expected revision: the operation committed already, or the
                // compare-and-set fails (revisions only grow).
                if let Some(first) = receipt_in(&*client, cx, goal, &request.operation).await? {
                    return same_operation(first, request);
                }
                return Err(StoreError::Conflict {
                    expected,
                    current: row.revision,
                });
            }
            None => None,
        },
    };
    let Some((state, snapshot_revision)) = start else {
        // The goal does not exist but the batch expects it to.
        if let Some(first) = receipt_in(&*client, cx, goal, &request.operation).await? {
            return same_operation(first, request);
        }
        return Err(StoreError::Conflict {
            expected,
            current: 0,
        });
    };
    let mut prepared = match prepare(state, request) {
        Ok(prepared) => prepared,
        Err(error) => {
            // An operation that committed already answers with its first receipt (or a
            // conflict), whatever its batch would do now.
            if let Some(first) = receipt_in(&*client, cx, goal, &request.operation).await? {
                return same_operation(first, request);
            }
            return Err(error);
        }
    };
    prepared.plan_snapshot(snapshot_revision, cx.snapshot_every)?;
    let (receipt, committed) = call_append(client, cx, request, &prepared).await?;
    if !committed {
        // The operation had committed before: the batch folded here is not the goal's history.
        return Ok(receipt);
    }
    let snapshot_revision = if prepared.snapshot.is_some() {
        prepared.folded.state.revision
    } else {
        snapshot_revision
    };
    cx.cache.put_owned(prepared.folded.state, snapshot_revision);
    Ok(receipt)
}

/// Commits `prepared` through one call of `loopx_append` (one round trip). Returns the new receipt with `true`, the first receipt of an operation
/// that had committed already with `false`, or the error that says why nothing (or possibly
/// something) committed.
async fn call_append(
    client: &mut Object,
    cx: &Cx<'_>,
    request: &AppendRequest,
    prepared: &Prepared,
) -> Result<(Receipt, bool), StoreError> {
    let goal = &request.goal;
    let expected = request.expected_revision;
    let frontier = frontier_rows(&prepared.projection)?;
    let receipt = &prepared.folded.receipt;
    let state = &prepared.folded.state;
    let projection = &prepared.projection;
    let revisions: Vec<i64> = request.events.iter().map(|e| int(e.revision)).collect();
    let times: Vec<i64> = request.events.iter().map(|e| e.at.as_millis()).collect();
    let agents: Option<Vec<&str>> = prepared
        .agents_changed
        .then(|| projection.agents.iter().map(AgentId::as_str).collect());
    let status = status_name(projection.summary.status);
    let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
    let note = payload(goal, state.revision);
    let params: Params<'_> = &[
        &goal.as_str(),
        &int(expected),
        &receipt.operation.as_str(),
        &stored_digest(&receipt.digest),
        &int(receipt.revision),
        &int(receipt.events),
        &receipt.committed_at.as_millis(),
        &revisions,
        &times,
        &prepared.events,
        &projection.summary.objective,
        &status,
        &projection.valid_from.as_millis(),
        &valid_until,
        &prepared.snapshot,
        &agents,
        &frontier.0,
        &frontier.1,
        &CHANNEL,
        &note,
    ];
    let statement = client.prepare_cached(APPEND).await.map_err(cx.err())?;
    // The call is one statement in its own (implicit) transaction: everything the function
    // wrote commits when it returns, or nothing does. One round trip per commit.
    let rows = match client.query(&statement, params).await {
        Ok(rows) => rows,
        // Another writer created the goal (or committed this operation) first.
        Err(error) if is_unique_violation(&error) => {
            return after_race(client, cx, request)
                .await
                .map(|first| (first, false));
        }
        // The server answered with an error: the statement, and so its transaction, failed.
        Err(error) if error.as_db_error().is_some() => return Err(pg(cx.target, &error)),
        // No answer: the commit may or may not have happened.
        Err(_) => {
            return Err(StoreError::Ambiguous {
                operation: request.operation.clone(),
            });
        }
    };
    if let Some(answer) = not_committed(&rows, request)? {
        // The function wrote nothing.
        return answer.map(|first| (first, false));
    }
    Ok((prepared.folded.receipt.clone(), true))
}

/// Reads the answer of `loopx_append`: `None` when it committed, otherwise what the append returns: the operation's first receipt, or a conflict.
fn not_committed(
    rows: &[Row],
    request: &AppendRequest,
) -> Result<Option<Result<Receipt, StoreError>>, StoreError> {
    let outcome = rows.first().and_then(|row| row.try_get::<_, i32>(0).ok());
    match (outcome, rows.first()) {
        (Some(0), _) => Ok(None),
        (Some(1), Some(row)) => {
            let first = Receipt {
                goal: request.goal.clone(),
                operation: request.operation.clone(),
                digest: digest_at(row, 1)?,
                revision: count(get(row, 2)?, "revision")?,
                events: count(get(row, 3)?, "event count")?,
                committed_at: Timestamp::from_millis(get(row, 4)?),
            };
            Ok(Some(same_operation(first, request)))
        }
        (Some(2), Some(row)) => Ok(Some(Err(StoreError::Conflict {
            expected: request.expected_revision,
            current: count(get(row, 2)?, "revision")?,
        }))),
        // An answer this build cannot read: whether it committed is unknown.
        _ => Ok(Some(Err(StoreError::Ambiguous {
            operation: request.operation.clone(),
        }))),
    }
}

fn same_operation(first: Receipt, request: &AppendRequest) -> Result<Receipt, StoreError> {
    if first.digest == request.digest {
        Ok(first)
    } else {
        Err(StoreError::OperationConflict {
            operation: request.operation.clone(),
        })
    }
}

/// After a unique-key violation: the competing commit is visible now.
async fn after_race(
    client: &Object,
    cx: &Cx<'_>,
    request: &AppendRequest,
) -> Result<Receipt, StoreError> {
    if let Some(first) = receipt_in(client, cx, &request.goal, &request.operation).await? {
        return same_operation(first, request);
    }
    let current = goal_row(client, cx, &request.goal, false)
        .await?
        .map_or(0, |r| r.revision);
    Err(StoreError::Conflict {
        expected: request.expected_revision,
        current,
    })
}

/// A projection's frontier rows as (agents, JSON arrays).
fn frontier_rows(projection: &Projection) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let mut agents = Vec::with_capacity(projection.frontier.len());
    let mut todos = Vec::with_capacity(projection.frontier.len());
    for (agent, list) in &projection.frontier {
        agents.push(agent.as_str().to_owned());
        todos.push(encode(list)?);
    }
    Ok((agents, todos))
}

async fn write_frontier<C: GenericClient>(
    tx: &C,
    goal: &str,
    (agents, todos): &(Vec<String>, Vec<String>),
) -> Result<(), tokio_postgres::Error> {
    execute(tx, "DELETE FROM frontier WHERE goal = $1", &[&goal]).await?;
    if !agents.is_empty() {
        execute(
            tx,
            "INSERT INTO frontier (agent, goal, todos)
             SELECT a, $1, t FROM unnest($2::text[], $3::text[]) AS f(a, t)",
            &[&goal, agents, todos],
        )
        .await?;
    }
    Ok(())
}

// ----- receipts and events ------------------------------------------------------------------

/// A payload digest as schema 3 stores it: a SHA-256 digest in lowercase hex (what `submit`
/// computes) as its 32 bytes; any other text as its UTF-8 bytes, after one `0xff` byte (which
/// UTF-8 never holds) when the text is itself 32 bytes long, so it is never read as hex.
fn stored_digest(digest: &str) -> Vec<u8> {
    let hex = digest.len() == 64
        && digest
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if hex {
        let nibble = |b: u8| {
            if b.is_ascii_digit() {
                b - b'0'
            } else {
                b - b'a' + 10
            }
        };
        return digest
            .as_bytes()
            .chunks_exact(2)
            .map(|pair| (nibble(pair[0]) << 4) | nibble(pair[1]))
            .collect();
    }
    let mut bytes = Vec::with_capacity(digest.len() + 1);
    if digest.len() == 32 {
        bytes.push(0xff);
    }
    bytes.extend_from_slice(digest.as_bytes());
    bytes
}

/// The digest text of [`stored_digest`]'s bytes.
fn read_digest(bytes: &[u8]) -> Result<String, StoreError> {
    if bytes.len() == 32 {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        return Ok(bytes
            .iter()
            .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
            .map(char::from)
            .collect());
    }
    let text = match bytes {
        [0xff, rest @ ..] if rest.len() == 32 => rest,
        _ => bytes,
    };
    String::from_utf8(text.to_vec()).map_err(|_| StoreError::Corrupt {
        detail: "a stored operation digest is neither SHA-256 nor text; the receipts were changed outside loopx: restore the database from a backup".to_owned(),
    })
}

/// The digest in column `i` of a receipt row.
fn digest_at(row: &Row, i: usize) -> Result<String, StoreError> {
    read_digest(&get::<Vec<u8>>(row, i)?)
}

async fn receipt_in<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    let rows = query(c, RECEIPT, &[&goal.as_str(), &operation.as_str()])
        .await
        .map_err(cx.err())?;
    rows.first()
        .map(|r| {
            Ok(Receipt {
                goal: goal.clone(),
                operation: operation.clone(),
                digest: digest_at(r, 0)?,
                revision: count(get(r, 1)?, "revision")?,
                events: count(get(r, 2)?, "event count")?,
                committed_at: Timestamp::from_millis(get(r, 3)?),
            })
        })
        .transpose()
}

pub(super) async fn receipt(
    client: &Object,
    cx: &Cx<'_>,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    receipt_in(client, cx, goal, operation).await
}

pub(super) async fn events(
    client: &Object,
    cx: &Cx<'_>,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = query(client, EVENTS_AFTER, &[&goal.as_str(), &int(after), &limit])
        .await
        .map_err(cx.err())?;
    rows.iter()
        .map(|r| decode_event(goal, &event_row(r, 0)?))
        .collect()
}

/// The watched goals that stand past the revision given for them (see `Store::changed`).
pub(super) async fn moved(
    client: &Object,
    cx: &Cx<'_>,
    watch: &[(GoalId, u64)],
) -> Result<Vec<GoalId>, StoreError> {
    let ids: Vec<&str> = watch.iter().map(|(g, _)| g.as_str()).collect();
    let rows = query(client, GOAL_REVISIONS, &[&ids])
        .await
        .map_err(cx.err())?;
    let mut revisions: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows {
        revisions.insert(get(row, 0)?, count(get(row, 1)?, "revision")?);
    }
    Ok(crate::watch::past(watch, |goal| {
        revisions.get(goal.as_str()).copied().unwrap_or(0)
    }))
}

// ----- cross-goal queries -------------------------------------------------------------------

/// Recomputes the index rows of `stale` goals at `now` and returns them; a goal that moved
/// meanwhile keeps the rows its newer commit wrote.
async fn refresh(
    client: &mut Object,
    cx: &Cx<'_>,
    now: Timestamp,
    stale: &[GoalId],
) -> Result<Vec<Projection>, StoreError> {
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(stale.len());
    {
        let tx = read_only(client, cx).await?;
        for goal in stale {
            if let Some((state, _)) = load_state(&tx, cx, goal, false).await? {
                out.push(Projection::compute(&state, now));
            }
        }
        tx.rollback().await.map_err(cx.err())?;
    }
    let mut rows = Vec::with_capacity(out.len());
    for projection in &out {
        rows.push(frontier_rows(projection)?);
    }
    let tx = client.transaction().await.map_err(cx.err())?;
    for (projection, frontier) in out.iter().zip(&rows) {
        let goal = projection.summary.goal.as_str();
        let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
        let updated = execute(
            &tx,
            "UPDATE goals SET status = $3, valid_from = $4, valid_until = $5 WHERE goal = $1 AND revision = $2",
            &[
                &goal,
                &int(projection.summary.revision),
                &status_name(projection.summary.status),
                &projection.valid_from.as_millis(),
                &valid_until,
            ],
        )
        .await
        .map_err(cx.err())?;
        if updated == 1 {
            write_frontier(&tx, goal, frontier)
                .await
                .map_err(cx.err())?;
        }
    }
    tx.commit().await.map_err(cx.err())?;
    Ok(out)
}

fn window(row: &Row, from: usize) -> Result<(Timestamp, Option<Timestamp>), StoreError> {
    Ok((
        Timestamp::from_millis(get(row, from)?),
        get::<Option<i64>>(row, from + 1)?.map(Timestamp::from_millis),
    ))
}

pub(super) async fn goals(
    client: &mut Object,
    cx: &Cx<'_>,
    now: Timestamp,
) -> Result<Vec<GoalSummary>, StoreError> {
    let rows = query(
        client,
        "SELECT goal, objective, status, revision, valid_from, valid_until FROM goals",
        &[],
    )
    .await
    .map_err(cx.err())?;
    let mut summaries = BTreeMap::new();
    let mut stale = Vec::new();
    for r in &rows {
        let goal: GoalId = stored_id(get(r, 0)?, "goal id")?;
        let (valid_from, valid_until) = window(r, 4)?;
        if !covers(valid_from, valid_until, now) {
            stale.push(goal);
            continue;
        }
        let status: String = get(r, 2)?;
        let summary = GoalSummary {
            goal: goal.clone(),
            objective: get(r, 1)?,
            status: parse_status(&status).ok_or_else(|| StoreError::Corrupt {
                detail: format!(
                    "goal `{goal}` has an unknown status `{status}`; restore the store from a backup"
                ),
            })?,
            revision: count(get(r, 3)?, "revision")?,
            next_wake: valid_until,
        };
        summaries.insert(goal, summary);
    }
    for projection in refresh(client, cx, now, &stale).await? {
        summaries.insert(projection.summary.goal.clone(), projection.summary);
    }
    Ok(summaries.into_values().collect())
}

pub(super) async fn frontier(
    client: &mut Object,
    cx: &Cx<'_>,
    agent: &AgentId,
    now: Timestamp,
) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
    let rows = query(client, AGENT_GOALS_AND_FRONTIER, &[&agent.as_str()])
        .await
        .map_err(cx.err())?;
    let mut per_goal: BTreeMap<GoalId, Vec<(u8, TodoId)>> = BTreeMap::new();
    let mut stale = Vec::new();
    let mut seen = BTreeSet::new();
    for r in &rows {
        let goal: GoalId = stored_id(get(r, 0)?, "goal id")?;
        let (valid_from, valid_until) = window(r, 1)?;
        if !seen.insert(goal.clone()) {
            continue;
        }
        if !covers(valid_from, valid_until, now) {
            stale.push(goal);
            continue;
        }
        if let Some(json) = get::<Option<String>>(r, 3)? {
            let todos: Vec<(u8, TodoId)> =
                serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
                    detail: format!(
                        "the frontier row of `{agent}` in goal `{goal}` cannot be read ({error}); restore the store from a backup"
                    ),
                })?;
            per_goal.insert(goal, todos);
        }
    }
    for mut projection in refresh(client, cx, now, &stale).await? {
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

pub(super) async fn next_wake(
    client: &mut Object,
    cx: &Cx<'_>,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let rows = query(client, STALE_GOALS, &[&now.as_millis()])
        .await
        .map_err(cx.err())?;
    let stale: Vec<GoalId> = rows
        .iter()
        .map(|r| stored_id(get(r, 0)?, "goal id"))
        .collect::<Result<_, _>>()?;
    let refreshed = refresh(client, cx, now, &stale).await?;
    let row = query(client, EARLIEST_WAKE, &[&now.as_millis()])
        .await
        .map_err(cx.err())?;
    let indexed: Option<i64> = match row.first() {
        Some(r) => get(r, 0)?,
        None => None,
    };
    Ok(indexed
        .map(Timestamp::from_millis)
        .into_iter()
        .chain(refreshed.iter().filter_map(|p| p.summary.next_wake))
        .min())
}

// ----- retention ----------------------------------------------------------------------------

pub(super) async fn compact(
    client: &mut Object,
    cx: &Cx<'_>,
    goal: &GoalId,
    keep_after: u64,
) -> Result<Compaction, StoreError> {
    let tx = client.transaction().await.map_err(cx.err())?;
    let row = goal_row(&tx, cx, goal, true)
        .await?
        .ok_or_else(|| StoreError::UnknownGoal { goal: goal.clone() })?;
    let target = keep_after.min(row.revision);
    if target <= row.base_revision {
        return Ok(Compaction {
            goal: goal.clone(),
            base_revision: row.base_revision,
            events_removed: 0,
        });
    }
    let state = match state_at(&tx, cx, goal, row, target).await? {
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
    let err = cx.err();
    execute(
        &tx,
        "INSERT INTO snapshots (goal, revision, json) VALUES ($1, $2, $3)
         ON CONFLICT (goal, revision) DO UPDATE SET json = excluded.json",
        &[&g, &int(target), &json],
    )
    .await
    .map_err(&err)?;
    keep_receipts(&tx, cx, goal, target).await?;
    let removed = execute(
        &tx,
        "DELETE FROM events WHERE goal = $1 AND revision <= $2",
        &[&g, &int(target)],
    )
    .await
    .map_err(&err)?;
    execute(
        &tx,
        "DELETE FROM snapshots WHERE goal = $1 AND revision < $2",
        &[&g, &int(target)],
    )
    .await
    .map_err(&err)?;
    execute(
        &tx,
        "UPDATE goals SET base_revision = $2, snapshot_revision = GREATEST(snapshot_revision, $2) WHERE goal = $1",
        &[&g, &int(target)],
    )
    .await
    .map_err(&err)?;
    tx.commit().await.map_err(&err)?;
    Ok(Compaction {
        goal: goal.clone(),
        base_revision: target,
        events_removed: removed,
    })
}

/// Before compaction deletes the events up to `target`: the receipts of those events get their
/// actor and event names in a receipts row of their own (a receipt on an event row moves there),
/// so the audit trail outlives the events.
async fn keep_receipts(
    tx: &deadpool_postgres::Transaction<'_>,
    cx: &Cx<'_>,
    goal: &GoalId,
    target: u64,
) -> Result<(), StoreError> {
    let g = goal.as_str();
    let err = cx.err();
    // Receipts rows that read their names from the events (written by schema 3).
    let in_receipts = query(tx, RECEIPT_ROWS_TO_NAME, &[&g, &int(target)])
        .await
        .map_err(&err)?;
    // Receipts on event rows (schema 4).
    let on_events = query(tx, RECEIPTS_TO_KEEP, &[&g, &int(target)])
        .await
        .map_err(&err)?;
    if in_receipts.is_empty() && on_events.is_empty() {
        return Ok(());
    }
    let span = |r: &Row| -> Result<(u64, u64), StoreError> {
        Ok((
            count(get(r, 0)?, "revision")?,
            count(get(r, 1)?, "event count")?,
        ))
    };
    let spans: Vec<(u64, u64)> = in_receipts
        .iter()
        .chain(&on_events)
        .map(span)
        .collect::<Result<_, _>>()?;
    let events = batch_events(tx, cx, goal, &spans).await?;
    for r in &in_receipts {
        let (revision, n) = span(r)?;
        let (actor, names) = audit(goal, &events, revision, n)?;
        execute(
            tx,
            "UPDATE receipts SET actor = $4, kinds = $5 WHERE goal = $1 AND revision = $2 AND seq = $3",
            &[&g, &int(revision), &get::<i64>(r, 2)?, &encode(&actor)?, &encode(&names)?],
        )
        .await
        .map_err(&err)?;
    }
    for r in &on_events {
        let (revision, n) = span(r)?;
        let (actor, names) = audit(goal, &events, revision, n)?;
        let (operation, digest, at) = (
            get::<String>(r, 2)?,
            get::<Vec<u8>>(r, 3)?,
            get::<i64>(r, 4)?,
        );
        execute(
            tx,
            "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[&g, &operation, &digest, &int(revision), &int(n), &at, &encode(&actor)?, &encode(&names)?],
        )
        .await
        .map_err(&err)?;
        // An event row that compaction keeps holds the receipt no more (the others go).
        if revision > target {
            execute(
                tx,
                "UPDATE events SET operation = NULL, digest = NULL, commit_events = NULL
                 WHERE goal = $1 AND revision = $2",
                &[&g, &int(revision)],
            )
            .await
            .map_err(&err)?;
        }
    }
    Ok(())
}

pub(super) async fn base(
    client: &mut Object,
    cx: &Cx<'_>,
    goal: &GoalId,
) -> Result<Option<Snapshot>, StoreError> {
    let tx = read_only(client, cx).await?;
    let Some(row) = goal_row(&tx, cx, goal, false).await? else {
        return Ok(None);
    };
    if row.base_revision == 0 {
        return Ok(None);
    }
    let rows = query(&tx, SNAPSHOT_AT, &[&goal.as_str(), &int(row.base_revision)])
        .await
        .map_err(cx.err())?;
    let json: String = match rows.first() {
        Some(r) => get(r, 0)?,
        None => return Err(missing_base(goal, row.base_revision)),
    };
    let state = decode_snapshot(goal, row.base_revision, &json)?;
    tx.rollback().await.map_err(cx.err())?;
    Ok(Some(state.snapshot()))
}

pub(super) async fn operations(
    client: &mut Object,
    cx: &Cx<'_>,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<OperationRecord>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // One snapshot of the database: a compaction cannot delete the events a receipt's actor
    // and event names are read from between the two reads.
    let tx = read_only(client, cx).await?;
    let rows = query(
        &tx,
        OPERATIONS_AFTER,
        &[&goal.as_str(), &int(after), &limit],
    )
    .await
    .map_err(cx.err())?;
    let mut records = Vec::with_capacity(rows.len());
    let mut from_events = Vec::new();
    for r in &rows {
        let operation: OperationId = stored_id(get(r, 0)?, "operation id")?;
        let receipt = Receipt {
            goal: goal.clone(),
            operation,
            digest: digest_at(r, 1)?,
            revision: count(get(r, 2)?, "revision")?,
            events: count(get(r, 3)?, "event count")?,
            committed_at: Timestamp::from_millis(get(r, 4)?),
        };
        match get::<Option<String>>(r, 6)? {
            Some(kinds) => records.push(decode_operation(receipt, get(r, 5)?, &kinds)?),
            None if receipt.events == 0 => records.push(OperationRecord {
                receipt,
                actor: None,
                events: Vec::new(),
            }),
            None => {
                from_events.push(records.len());
                records.push(OperationRecord {
                    receipt,
                    actor: None,
                    events: Vec::new(),
                });
            }
        }
    }
    if !from_events.is_empty() {
        let spans = pending_spans(&records, &from_events);
        let events = batch_events(&tx, cx, goal, &spans).await?;
        fill_from_events(goal, &mut records, &from_events, &events)?;
    }
    tx.rollback().await.map_err(cx.err())?;
    Ok(records)
}

/// The events of the receipts `spans` (each its revision and event count), by revision.
async fn batch_events<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    spans: &[(u64, u64)],
) -> Result<BTreeMap<u64, RecordedEvent>, StoreError> {
    let Some((from, to)) = covering(spans) else {
        return Ok(BTreeMap::new());
    };
    event_rows(c, cx, goal, from, to)
        .await?
        .iter()
        .map(|row| Ok((row.revision, decode_event(goal, row)?)))
        .collect()
}

#[cfg(all(test, feature = "test-cluster"))]
mod tests {
    use super::*;
    use crate::PostgresStore;
    use tokio_postgres::types::Type;

    /// A literal of `ty` for `EXPLAIN EXECUTE`; the generic plan does not depend on it.
    fn literal(ty: &Type) -> &'static str {
        match *ty {
            Type::INT8 | Type::INT4 => "0",
            Type::TEXT_ARRAY => "'{x}'",
            _ => "'x'",
        }
    }

    /// The plan nodes under `node` that read a whole table or index: a sequential scan, or an
    /// index scan without a condition on the index.
    fn whole_scans(node: &serde_json::Value, out: &mut Vec<String>) {
        match node {
            serde_json::Value::Array(items) => items.iter().for_each(|n| whole_scans(n, out)),
            serde_json::Value::Object(fields) => {
                let kind = fields
                    .get("Node Type")
                    .and_then(|t| t.as_str())
                    .unwrap_or("");
                let by_index = kind.contains("Index Scan") || kind == "Index Only Scan";
                if kind == "Seq Scan" || (by_index && !fields.contains_key("Index Cond")) {
                    out.push(kind.to_owned());
                }
                fields.values().for_each(|v| whole_scans(v, out));
            }
            _ => {}
        }
    }

    /// "Indexed, not scans": on the current schema an index serves every read. With sequential
    /// scans discouraged, the planner still picks one only where no index can do the work
    /// (on a small table it would rightly prefer one either way).
    #[test]
    fn an_index_serves_every_read() {
        let url = crate::test_cluster::cluster().database();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            drop(PostgresStore::connect(&url).await.unwrap());
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            client
                .batch_execute("SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan")
                .await
                .unwrap();
            let reads = [
                ("GOAL_ROW_LOCKED", GOAL_ROW_LOCKED),
                ("GOAL_ROW", GOAL_ROW),
                ("EVENT_ROWS", EVENT_ROWS),
                ("SNAPSHOT_AT_OR_BEFORE", SNAPSHOT_AT_OR_BEFORE),
                ("GOAL_AND_TAIL", GOAL_AND_TAIL),
                ("RECEIPT", RECEIPT),
                ("EVENTS_AFTER", EVENTS_AFTER),
                ("GOAL_REVISIONS", GOAL_REVISIONS),
                ("AGENT_GOALS_AND_FRONTIER", AGENT_GOALS_AND_FRONTIER),
                ("STALE_GOALS", STALE_GOALS),
                ("EARLIEST_WAKE", EARLIEST_WAKE),
                ("RECEIPT_ROWS_TO_NAME", RECEIPT_ROWS_TO_NAME),
                ("RECEIPTS_TO_KEEP", RECEIPTS_TO_KEEP),
                ("SNAPSHOT_AT", SNAPSHOT_AT),
                ("OPERATIONS_AFTER", OPERATIONS_AFTER),
                ("the listing of every goal", "SELECT goal FROM goals"),
            ];
            for (name, statement) in reads {
                let types = client.prepare(statement).await.unwrap().params().to_vec();
                // `name(a, b)`, or just `name` without parameters.
                let call = |plan: &str, items: Vec<&str>| {
                    if items.is_empty() {
                        plan.to_owned()
                    } else {
                        format!("{plan}({})", items.join(", "))
                    }
                };
                let plan = format!("plan_{}", name.replace(' ', "_").to_lowercase());
                let declared = call(&plan, types.iter().map(Type::name).collect());
                let values = call(&plan, types.iter().map(literal).collect());
                client
                    .batch_execute(&format!("PREPARE {declared} AS {statement}"))
                    .await
                    .unwrap();
                let plan = client
                    .simple_query(&format!("EXPLAIN (FORMAT JSON) EXECUTE {values}"))
                    .await
                    .unwrap()
                    .into_iter()
                    .find_map(|message| match message {
                        tokio_postgres::SimpleQueryMessage::Row(row) => {
                            row.get(0).map(str::to_owned)
                        }
                        _ => None,
                    })
                    .unwrap();
                let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
                let mut walks = Vec::new();
                whole_scans(&plan, &mut walks);
                // The check can fail: the listing of every goal walks the table, as it must.
                let listing = name.starts_with("the listing");
                assert_eq!(
                    !walks.is_empty(),
                    listing,
                    "{name} walks {walks:?}: {plan:#}"
                );
            }
        });
    }
}
