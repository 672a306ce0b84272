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
    check_loaded, decode_event, decode_snapshot, encode, fold_stored, kinds, missing_base,
};
use crate::index::{Projection, covers, merge_frontiers, parse_status, status_name};
use crate::retention::{Compaction, OperationRecord, decode_operation};

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
    let sql = if lock {
        "SELECT revision, base_revision, snapshot_revision FROM goals WHERE goal = $1 FOR UPDATE"
    } else {
        "SELECT revision, base_revision, snapshot_revision FROM goals WHERE goal = $1"
    };
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

/// Event rows `(revision, json)` of `goal` in `(after, up_to]`, in order.
async fn event_rows<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    after: u64,
    up_to: u64,
) -> Result<Vec<(u64, String)>, StoreError> {
    let rows = query(
        c,
        "SELECT revision, json FROM events WHERE goal = $1 AND revision > $2 AND revision <= $3 ORDER BY revision",
        &[&goal.as_str(), &int(after), &int(up_to)],
    )
    .await
    .map_err(cx.err())?;
    rows.iter()
        .map(|row| Ok((count(get(row, 0)?, "revision")?, get(row, 1)?)))
        .collect()
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
    let rows = query(
        c,
        "SELECT revision, json FROM snapshots WHERE goal = $1 AND revision <= $2 ORDER BY revision DESC LIMIT 1",
        &[&goal.as_str(), &int(revision)],
    )
    .await
    .map_err(cx.err())?;
    let state = match rows.first() {
        Some(r) => Some(decode_snapshot(
            goal,
            count(get(r, 0)?, "revision")?,
            &get::<String>(r, 1)?,
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
    cx.cache.put(&state);
    Ok(Some((state, row)))
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
    let tx = read_only(client, cx).await?;
    let loaded = load_state(&tx, cx, goal, false).await?;
    tx.rollback().await.map_err(cx.err())?;
    Ok(loaded.map(|(state, _)| state))
}

// ----- append -------------------------------------------------------------------------------

pub(super) async fn append(
    client: &mut Object,
    cx: &Cx<'_>,
    request: &AppendRequest,
) -> Result<Receipt, StoreError> {
    let goal = &request.goal;
    let tx = client.transaction().await.map_err(cx.err())?;
    // The row lock is the compare-and-set: a concurrent writer of this goal waits here until
    // this transaction ends, then sees its result.
    let row = goal_row(&tx, cx, goal, true).await?;
    if let Some(first) = receipt_in(&tx, cx, goal, &request.operation).await? {
        return same_operation(first, request);
    }
    let current = row.map_or(0, |r| r.revision);
    if current != request.expected_revision {
        return Err(StoreError::Conflict {
            expected: request.expected_revision,
            current,
        });
    }
    let state = match row {
        Some(_) => load_state(&tx, cx, goal, false)
            .await?
            .map(|(state, _)| state),
        None => None,
    };
    let mut prepared = prepare(state, request)?;
    prepared.plan_snapshot(row.map_or(0, |r| r.snapshot_revision), cx.snapshot_every)?;
    let encoded = Encoded {
        frontier: frontier_rows(&prepared.projection)?,
        actor: request
            .events
            .first()
            .map(|e| encode(&e.actor))
            .transpose()?,
        kinds: encode(&kinds(&request.events))?,
    };
    if let Err(error) = write_commit(&tx, request, &prepared, row, &encoded).await {
        if is_unique_violation(&error) {
            // Another writer created the goal (or committed this operation) first.
            drop(tx);
            return after_race(client, cx, request).await;
        }
        return Err(pg(cx.target, &error));
    }
    match tx.commit().await {
        Ok(()) => {}
        // The server answered: the transaction did not commit.
        Err(error) if error.as_db_error().is_some() => return Err(pg(cx.target, &error)),
        // No answer to COMMIT: it may or may not have happened.
        Err(_) => {
            return Err(StoreError::Ambiguous {
                operation: request.operation.clone(),
            });
        }
    }
    cx.cache.put_owned(prepared.folded.state);
    Ok(prepared.folded.receipt)
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

/// The rows of a commit beyond [`Prepared`], encoded before the transaction writes.
struct Encoded {
    frontier: (Vec<String>, Vec<String>),
    actor: Option<String>,
    kinds: String,
}

async fn write_commit<C: GenericClient>(
    tx: &C,
    request: &AppendRequest,
    prepared: &Prepared,
    row: Option<GoalRow>,
    encoded: &Encoded,
) -> Result<(), tokio_postgres::Error> {
    let goal = request.goal.as_str();
    let receipt = &prepared.folded.receipt;
    let state = &prepared.folded.state;
    let projection = &prepared.projection;
    let changed = !request.events.is_empty();
    let mut snapshot_revision = row.map_or(0, |r| r.snapshot_revision);
    if prepared.snapshot.is_some() {
        snapshot_revision = state.revision;
    }
    if changed {
        // The goal row first: a concurrent creator of the same goal fails here.
        let status = status_name(projection.summary.status);
        let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
        let params: Params<'_> = &[
            &goal,
            &int(state.revision),
            &projection.summary.objective,
            &status,
            &projection.valid_from.as_millis(),
            &valid_until,
            &receipt.committed_at.as_millis(),
            &int(snapshot_revision),
        ];
        if row.is_some() {
            execute(
                tx,
                "UPDATE goals SET revision = $2, objective = $3, status = $4, valid_from = $5,
                     valid_until = $6, updated_at = $7, snapshot_revision = $8 WHERE goal = $1",
                params,
            )
            .await?;
        } else {
            execute(
                tx,
                "INSERT INTO goals (goal, revision, objective, status, valid_from, valid_until, updated_at, base_revision, snapshot_revision)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8)",
                params,
            )
            .await?;
        }
        let revisions: Vec<i64> = request.events.iter().map(|e| int(e.revision)).collect();
        let times: Vec<i64> = request.events.iter().map(|e| e.at.as_millis()).collect();
        execute(
            tx,
            "INSERT INTO events (goal, revision, at, json)
             SELECT $1, r, a, j FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS e(r, a, j)",
            &[&goal, &revisions, &times, &prepared.events],
        )
        .await?;
    }
    execute(
        tx,
        "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &goal,
            &receipt.operation.as_str(),
            &receipt.digest,
            &int(receipt.revision),
            &int(receipt.events),
            &receipt.committed_at.as_millis(),
            &encoded.actor,
            &encoded.kinds,
        ],
    )
    .await?;
    if !changed {
        // A recorded no-op changes nothing but its receipt, and wakes nobody.
        return Ok(());
    }
    if let Some(json) = &prepared.snapshot {
        let base = row.map_or(0, |r| r.base_revision);
        execute(
            tx,
            "INSERT INTO snapshots (goal, revision, json) VALUES ($1, $2, $3)
             ON CONFLICT (goal, revision) DO UPDATE SET json = excluded.json",
            &[&goal, &int(state.revision), json],
        )
        .await?;
        execute(
            tx,
            "DELETE FROM snapshots WHERE goal = $1 AND revision < $2 AND revision <> $3",
            &[&goal, &int(state.revision), &int(base)],
        )
        .await?;
    }
    if prepared.agents_changed {
        let agents: Vec<&str> = projection.agents.iter().map(AgentId::as_str).collect();
        execute(tx, "DELETE FROM goal_agents WHERE goal = $1", &[&goal]).await?;
        execute(
            tx,
            "INSERT INTO goal_agents (agent, goal) SELECT a, $1 FROM unnest($2::text[]) AS g(a)",
            &[&goal, &agents],
        )
        .await?;
    }
    write_frontier(tx, goal, &encoded.frontier).await?;
    // Delivered to listeners only if, and when, this transaction commits.
    let note = payload(&request.goal, state.revision);
    execute(tx, "SELECT pg_notify($1, $2)", &[&CHANNEL, &note]).await?;
    Ok(())
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

async fn receipt_in<C: GenericClient>(
    c: &C,
    cx: &Cx<'_>,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    let rows = query(
        c,
        "SELECT digest, revision, events, committed_at FROM receipts WHERE goal = $1 AND operation = $2",
        &[&goal.as_str(), &operation.as_str()],
    )
    .await
    .map_err(cx.err())?;
    rows.first()
        .map(|r| {
            Ok(Receipt {
                goal: goal.clone(),
                operation: operation.clone(),
                digest: get(r, 0)?,
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
    let rows = query(
        client,
        "SELECT revision, json FROM events WHERE goal = $1 AND revision > $2 ORDER BY revision LIMIT $3",
        &[&goal.as_str(), &int(after), &limit],
    )
    .await
    .map_err(cx.err())?;
    rows.iter()
        .map(|r| decode_event(goal, count(get(r, 0)?, "revision")?, &get::<String>(r, 1)?))
        .collect()
}

/// The watched goals that stand past the revision given for them (see `Store::changed`).
pub(super) async fn moved(
    client: &Object,
    cx: &Cx<'_>,
    watch: &[(GoalId, u64)],
) -> Result<Vec<GoalId>, StoreError> {
    let ids: Vec<&str> = watch.iter().map(|(g, _)| g.as_str()).collect();
    let rows = query(
        client,
        "SELECT goal, revision FROM goals WHERE goal = ANY($1::text[])",
        &[&ids],
    )
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
    let rows = query(
        client,
        "SELECT g.goal, g.valid_from, g.valid_until, f.todos FROM goal_agents a
         JOIN goals g ON g.goal = a.goal
         LEFT JOIN frontier f ON f.agent = a.agent AND f.goal = a.goal
         WHERE a.agent = $1",
        &[&agent.as_str()],
    )
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
    let rows = query(
        client,
        "SELECT goal FROM goals WHERE valid_until <= $1 OR valid_from > $1",
        &[&now.as_millis()],
    )
    .await
    .map_err(cx.err())?;
    let stale: Vec<GoalId> = rows
        .iter()
        .map(|r| stored_id(get(r, 0)?, "goal id"))
        .collect::<Result<_, _>>()?;
    let refreshed = refresh(client, cx, now, &stale).await?;
    let row = query(
        client,
        "SELECT min(valid_until) FROM goals WHERE valid_until > $1 AND valid_from <= $1",
        &[&now.as_millis()],
    )
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
    let rows = query(
        &tx,
        "SELECT json FROM snapshots WHERE goal = $1 AND revision = $2",
        &[&goal.as_str(), &int(row.base_revision)],
    )
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
    client: &Object,
    cx: &Cx<'_>,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<OperationRecord>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = query(
        client,
        "SELECT operation, digest, revision, events, committed_at, actor, kinds FROM receipts
         WHERE goal = $1 AND revision > $2 ORDER BY seq LIMIT $3",
        &[&goal.as_str(), &int(after), &limit],
    )
    .await
    .map_err(cx.err())?;
    rows.iter()
        .map(|r| {
            let operation: OperationId = stored_id(get(r, 0)?, "operation id")?;
            let receipt = Receipt {
                goal: goal.clone(),
                operation,
                digest: get(r, 1)?,
                revision: count(get(r, 2)?, "revision")?,
                events: count(get(r, 3)?, "event count")?,
                committed_at: Timestamp::from_millis(get(r, 4)?),
            };
            decode_operation(receipt, get(r, 5)?, &get::<String>(r, 6)?)
        })
        .collect()
}
