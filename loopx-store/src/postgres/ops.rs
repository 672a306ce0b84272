//! PostgreSQL's [`Dialect`]: the statements behind each store operation and the commit's one
//! call of `loopx_append`. The store's algorithms are written once in [`crate::dialect::ops`].
//! Every statement is parameterised; a write transaction locks the goal's row
//! (`SELECT ... FOR UPDATE`) for its compare-and-set.

use std::collections::{BTreeMap, BTreeSet};

use deadpool_postgres::Object;
use loopx_kernel::seams::{AppendRequest, Receipt, StoreError};
use loopx_kernel::{AgentId, GoalId, GoalState, OperationId, Subject, Timestamp};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::listen::{CHANNEL, payload};
use super::schema::{column, is_unique_violation, pg};
use crate::cache::StateCache;
use crate::commit::Prepared;
use crate::dialect::{
    self, AgentGoal, Columns, Dialect, GoalRow, Grouped, Kept, ListedGoal, Mode, OperationRow,
    Outcome, count, int, stored_id,
};
use crate::fold::{EventRow, decode_snapshot, encode};
use crate::index::{Projection, status_name};
use crate::rows::StoredRows;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

// ----- the reads ----------------------------------------------------------------------------
//
// Every read a commit, a load or a host's query makes, named so that a test can check that an
// index serves each one (see `tests::an_index_serves_every_read`). The one exception is the
// listing of all goals, which reads them all by definition.

/// A goal row's write-path columns, locked for the commit.
const GOAL_ROW_LOCKED: &str = "SELECT revision, base_revision, snapshot_revision, damaged, chain FROM goals WHERE goal = $1 FOR UPDATE";
/// A goal row's write-path columns.
const GOAL_ROW: &str =
    "SELECT revision, base_revision, snapshot_revision, damaged, chain FROM goals WHERE goal = $1";
/// A goal's event rows in a range of revisions.
const EVENT_ROWS: &str = "SELECT revision, at, json, chain FROM events WHERE goal = $1 AND revision > $2 AND revision <= $3 ORDER BY revision";
/// A goal's latest snapshot at or before a revision.
const SNAPSHOT_AT_OR_BEFORE: &str = "SELECT revision, json, chain FROM snapshots WHERE goal = $1 AND revision <= $2 ORDER BY revision DESC LIMIT 1";
/// A goal row and its events in a range of revisions, in one round trip.
const GOAL_AND_TAIL: &str = "SELECT g.revision, g.base_revision, g.snapshot_revision, g.damaged, g.chain, e.revision, e.at, e.json, e.chain FROM goals g LEFT JOIN events e ON e.goal = g.goal AND e.revision > $2 AND e.revision <= $3 WHERE g.goal = $1 ORDER BY e.revision";
/// A receipt by operation (on an event row or in the receipts table).
const RECEIPT: &str = "SELECT digest, revision, events, committed_at FROM commits WHERE hashtextextended(operation, 0) = hashtextextended($2, 0) AND goal = $1 AND operation = $2";
/// A page of a goal's events after a revision.
const EVENTS_AFTER: &str = "SELECT revision, at, json, chain FROM events WHERE goal = $1 AND revision >= $2 ORDER BY revision LIMIT $3";
/// The revisions of several goals.
const GOAL_REVISIONS: &str =
    "SELECT goal, revision, damaged FROM goals WHERE goal = ANY($1::text[])";
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
const SNAPSHOT_AT: &str = "SELECT json, chain FROM snapshots WHERE goal = $1 AND revision = $2";
/// A page of a goal's receipts after a revision, in commit order.
const OPERATIONS_AFTER: &str = "SELECT operation, digest, revision, events, committed_at, actor, kinds, authorship FROM commits WHERE goal = $1 AND revision > $2 ORDER BY revision, events = 0, seq LIMIT $3";
/// A goal's receipts up to a revision, newest first: the reverse of `OPERATIONS_AFTER`. The
/// `commits` view's two halves (receipts on event rows, receipt rows) are each read backwards
/// along their key for at most the limit, so the read stays bounded however long the history.
const LATEST_OPERATIONS: &str = "SELECT operation, digest, revision, events, committed_at, actor, kinds, authorship FROM (
       (SELECT operation, digest, revision, commit_events AS events, at AS committed_at, NULL::TEXT AS actor, NULL::TEXT AS kinds, authorship, NULL::BIGINT AS seq FROM events
        WHERE goal = $1 AND revision <= $2 AND operation IS NOT NULL ORDER BY revision DESC LIMIT $3)
       UNION ALL
       (SELECT operation, digest, revision, events, committed_at, actor, kinds,
               COALESCE(authorship, (SELECT a.authorship FROM archived_events a WHERE a.goal = r.goal AND a.revision = r.revision)), seq
        FROM receipts r
        WHERE goal = $1 AND revision <= $2 ORDER BY revision DESC, events = 0 DESC, seq DESC LIMIT $3)) latest
     ORDER BY revision DESC, events = 0 DESC, seq DESC LIMIT $3";
/// A goal row's columns as stored, for the check of derived rows.
const STORED_GOAL_ROW: &str = "SELECT revision, objective, status, valid_from, valid_until, base_revision, snapshot_revision FROM goals WHERE goal = $1";
/// The agents registered with a goal.
const GOAL_AGENTS: &str = "SELECT agent FROM goal_agents WHERE goal = $1";
/// A goal's frontier rows, one per agent.
const GOAL_FRONTIER: &str = "SELECT agent, todos FROM frontier WHERE goal = $1";
/// The revisions of a goal's snapshots.
const SNAPSHOT_REVISIONS: &str = "SELECT revision FROM snapshots WHERE goal = $1";
/// The rows of the goals that follow any of several subjects.
const SUBJECT_GOALS: &str = "SELECT g.goal, g.objective, g.status, g.revision, g.valid_from, g.valid_until FROM goal_subjects s JOIN goals g ON g.goal = s.goal WHERE s.subject = ANY($1::text[])";
/// The subjects a goal follows.
const GOAL_SUBJECTS: &str = "SELECT subject FROM goal_subjects WHERE goal = $1";
/// The mark of goals whose subjects are still to be indexed (schema 8), locked: of the hosts
/// that connect together, one indexes them while the others wait, then find no mark.
const SUBJECTS_PENDING: &str =
    "SELECT value FROM store_settings WHERE name = 'goal_subjects' FOR UPDATE";
/// `(goal, table)` for the rows of goals without a goal row (it walks every table by
/// definition; only a doctor asks).
const ORPHAN_ROWS: &str = "SELECT DISTINCT t.goal, 'events' FROM events t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'archived_events' FROM archived_events t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'snapshots' FROM snapshots t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'receipts' FROM receipts t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'goal_agents' FROM goal_agents t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'frontier' FROM frontier t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)
     UNION ALL SELECT DISTINCT t.goal, 'goal_subjects' FROM goal_subjects t WHERE NOT EXISTS (SELECT 1 FROM goals g WHERE g.goal = t.goal)";
/// A page of a goal's archived events from a revision on (that row too, for its chain).
const ARCHIVED_AFTER: &str = "SELECT revision, at, json, chain FROM archived_events WHERE goal = $1 AND revision >= $2 ORDER BY revision LIMIT $3";
/// The revision of a goal's first archived event.
const ARCHIVE_START: &str =
    "SELECT revision FROM archived_events WHERE goal = $1 ORDER BY revision LIMIT 1";
/// Moves a goal's event rows up to a revision into its archive, as they are stored, with the
/// authorship of the commits they end (their receipts keep the digest: schema 10).
const ARCHIVE_EVENTS: &str = "INSERT INTO archived_events (goal, revision, at, json, chain, authorship)
     SELECT goal, revision, at, json, chain, authorship FROM events WHERE goal = $1 AND revision <= $2";
/// Every goal row, for the listing (it walks the table by definition).
const LISTING: &str =
    "SELECT goal, objective, status, revision, valid_from, valid_until FROM goals";

/// The statement that commits through the `loopx_append` function behind the server's clock
/// (`loopx_append_clocked`, schema 6, keeping the commit's authorship from schema 7 and
/// rewriting the goal's followed subjects from schema 8).
const APPEND: &str = "SELECT r_outcome, r_digest, r_revision, r_events, r_committed_at, r_chain FROM loopx_append_clocked(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
    $21, $22, $23, $24)";
/// A receipt by operation with the attempt id of the append that wrote it.
const RECEIPT_ATTEMPT: &str = "SELECT digest, revision, commit_events, at, attempt FROM events WHERE hashtextextended(operation, 0) = hashtextextended($2, 0) AND operation IS NOT NULL AND goal = $1 AND operation = $2
     UNION ALL SELECT digest, revision, events, committed_at, attempt FROM receipts WHERE hashtextextended(operation, 0) = hashtextextended($2, 0) AND goal = $1 AND operation = $2";

// ----- dead letters -------------------------------------------------------------------------

const DEAD_LETTER: &str = "SELECT letter FROM dead_letters WHERE goal = $1 AND operation = $2";
const WRITE_DEAD_LETTER: &str =
    "INSERT INTO dead_letters (goal, operation, first_refused, letter) VALUES ($1, $2, $3, $4)
     ON CONFLICT (goal, operation) DO UPDATE SET first_refused = $3, letter = $4";
const DEAD_LETTERS: &str = "SELECT letter FROM dead_letters
     ORDER BY first_refused, goal, operation LIMIT $1";
const DEAD_LETTER_COUNT: &str = "SELECT count(*) FROM dead_letters";
const DELETE_DEAD_LETTER: &str = "DELETE FROM dead_letters WHERE goal = $1 AND operation = $2";

// ----- rows ---------------------------------------------------------------------------------

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| column(&e))
}

impl Columns for Row {
    fn text(&self, i: usize) -> Result<String, StoreError> {
        get(self, i)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        get(self, i)
    }

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        get(self, i)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        get(self, i)
    }

    fn digest(&self, i: usize) -> Result<String, StoreError> {
        read_digest(&get::<Vec<u8>>(self, i)?)
    }
}

// ----- the dialect --------------------------------------------------------------------------

/// PostgreSQL's dialect: one pooled connection and the handle's shared state. Dropped with a
/// transaction open (an error on the way, or a caller that stopped waiting), it rolls the
/// transaction back before the connection returns to the pool.
pub(super) struct Pg<'a> {
    client: Option<Object>,
    /// The server, for messages (never the password).
    target: &'a str,
    cache: &'a StateCache,
    snapshot_every: u64,
    /// Whether a transaction may be open on the connection.
    open: bool,
}

impl<'a> Pg<'a> {
    pub(super) fn new(
        client: Object,
        target: &'a str,
        cache: &'a StateCache,
        snapshot_every: u64,
    ) -> Self {
        Pg {
            client: Some(client),
            target,
            cache,
            snapshot_every,
            open: false,
        }
    }

    fn client(&self) -> Result<&Object, StoreError> {
        self.client.as_ref().ok_or_else(|| StoreError::Unavailable {
            detail: format!("no connection to PostgreSQL ({})", self.target),
        })
    }

    fn err(&self) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
        move |error| pg(self.target, &error)
    }

    async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        let client = self.client()?;
        let statement = client.prepare_cached(sql).await.map_err(self.err())?;
        client.query(&statement, params).await.map_err(self.err())
    }

    /// A page of up to `limit` event rows of `goal` after `after` read by `sql` (the event log
    /// or the archive), with the chain of the row at `after`, read in the same statement, for
    /// the chain the page starts from.
    async fn page_after(
        &self,
        sql: &str,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
        let read = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = self
            .query(sql, &[&goal.as_str(), &int(after), &read])
            .await?;
        let found = rows
            .iter()
            .map(|r| dialect::event_row(r, 0))
            .collect::<Result<_, _>>()?;
        Ok(dialect::split_prev(after, found, limit))
    }

    async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let client = self.client()?;
        let statement = client.prepare_cached(sql).await.map_err(self.err())?;
        client.execute(&statement, params).await.map_err(self.err())
    }

    async fn batch(&self, sql: &str) -> Result<(), StoreError> {
        self.client()?.batch_execute(sql).await.map_err(self.err())
    }

    /// Commits `prepared` through one call of `loopx_append` (one round trip): the call is one
    /// statement in its own (implicit) transaction, so everything the function wrote commits
    /// when it returns, or nothing does.
    async fn call_append(
        &self,
        prepared: &Prepared,
        in_group: bool,
    ) -> Result<(Outcome, Option<[u8; 32]>), StoreError> {
        let request = &prepared.request;
        let frontier = frontier_rows(&prepared.projection)?;
        let receipt = &prepared.receipt;
        let projection = &prepared.projection;
        let revisions: Vec<i64> = request.events.iter().map(|e| int(e.revision)).collect();
        let times: Vec<i64> = request.events.iter().map(|e| e.at.as_millis()).collect();
        let agents: Option<Vec<&str>> = prepared
            .agents_changed()
            .then(|| projection.agents.iter().map(AgentId::as_str).collect());
        let subjects: Option<Vec<&str>> = prepared
            .subjects_changed()
            .then(|| projection.subjects.iter().map(Subject::as_str).collect());
        let status = status_name(projection.summary.status);
        let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
        let note = payload(&request.goal, prepared.state.revision);
        let params: Params<'_> = &[
            &request.goal.as_str(),
            &int(request.expected_revision),
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
            &prepared.attempt,
            &request.clock_skew.as_millis(),
            &prepared.authorship,
            &subjects,
        ];
        let client = self.client()?;
        let statement = client.prepare_cached(APPEND).await.map_err(self.err())?;
        let rows = match client.query(&statement, params).await {
            Ok(rows) => rows,
            // Another writer created the goal (or committed this operation) first.
            Err(error) if is_unique_violation(&error) => {
                if in_group {
                    // The group's transaction stands once the commit's own savepoint is undone.
                    self.batch(ROLLBACK_TO_SAVEPOINT).await?;
                }
                return Ok((self.after_race(request).await?, None));
            }
            // The server answered with an error: the statement, and so its transaction, failed.
            Err(error) if error.as_db_error().is_some() => return Err(pg(self.target, &error)),
            // No answer: the commit may or may not have happened.
            Err(_) => {
                return Err(StoreError::Ambiguous {
                    operation: request.operation.clone(),
                    attempt: prepared.attempt.clone(),
                });
            }
        };
        // The new chain head, computed by the function from the goal row's.
        let chain = rows
            .first()
            .and_then(|row| row.try_get::<_, Option<&str>>(5).ok().flatten())
            .and_then(crate::chain::from_hex);
        Ok((answer(&rows, prepared)?, chain))
    }

    /// Writes a prepared commit with one call of `loopx_append`, after reading the goal's row
    /// when this handle's cache does not know the snapshot bookkeeping: on its own (the call
    /// commits when it returns), or `in_group`, inside the group's transaction and the commit's
    /// savepoint (see [`Grouped`]).
    async fn write(
        &mut self,
        prepared: &mut Prepared,
        in_group: bool,
    ) -> Result<Outcome, StoreError> {
        let (goal, expected) = (&prepared.request.goal, prepared.request.expected_revision);
        let last_snapshot = match prepared.known.as_ref() {
            Some(known) => known.snapshot_revision,
            None if expected == 0 => 0,
            None => match self.goal_row(goal, false).await? {
                Some(row) if row.revision == expected => row.snapshot_revision,
                row => {
                    // The operation committed already, or the compare-and-set fails (revisions
                    // only grow).
                    let operation = &prepared.request.operation;
                    if let Some(first) = self.receipt(goal, operation).await? {
                        return Ok(Outcome::Recorded(first));
                    }
                    return Ok(Outcome::Moved {
                        current: row.map_or(0, |r| r.revision),
                    });
                }
            },
        };
        prepared.plan_snapshot(last_snapshot, self.snapshot_every)?;
        let (outcome, chain) = self.call_append(prepared, in_group).await?;
        prepared.chain = chain;
        Ok(outcome)
    }

    /// After a unique-key violation: the competing commit is visible now.
    async fn after_race(&self, request: &AppendRequest) -> Result<Outcome, StoreError> {
        let found = self
            .query(
                RECEIPT,
                &[&request.goal.as_str(), &request.operation.as_str()],
            )
            .await?;
        if let Some(r) = found.first() {
            return Ok(Outcome::Recorded(dialect::receipt(
                r,
                0,
                &request.goal,
                &request.operation,
            )?));
        }
        let rows = self.query(GOAL_ROW, &[&request.goal.as_str()]).await?;
        let current = rows
            .first()
            .map(|r| dialect::goal_row(r, 0, &request.goal))
            .transpose()?;
        Ok(Outcome::Moved {
            current: current.map_or(0, |row| row.revision),
        })
    }
}

/// A commit's savepoint inside a group's transaction.
const SAVEPOINT: &str = "SAVEPOINT one_commit";
const RELEASE_SAVEPOINT: &str = "RELEASE SAVEPOINT one_commit";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT one_commit";

/// Group commit on PostgreSQL: the group's commits share one transaction on one connection, so
/// they wait for one flush of the log and take the server's commit-time lock on notifications
/// (which every commit that sends `NOTIFY` holds through its flush) once.
impl Grouped for Pg<'_> {
    async fn savepoint(&mut self) -> Result<(), StoreError> {
        self.batch(SAVEPOINT).await
    }

    async fn release_savepoint(&mut self) -> Result<(), StoreError> {
        self.batch(RELEASE_SAVEPOINT).await
    }

    async fn rollback_to_savepoint(&mut self) -> Result<(), StoreError> {
        self.batch(ROLLBACK_TO_SAVEPOINT).await
    }

    /// A unique-key violation (another transaction created the goal or committed the
    /// operation first) undoes the commit's savepoint itself, to read the competing commit.
    async fn write_in(&mut self, prepared: &mut Prepared) -> Result<Outcome, StoreError> {
        self.write(prepared, true).await
    }
}

impl Drop for Pg<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let Some(client) = self.client.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            // The rollback runs before the connection goes back to the pool; a connection that
            // cannot roll back is closed instead.
            Ok(handle) => drop(handle.spawn(async move {
                if client.batch_execute("ROLLBACK").await.is_err() {
                    drop(Object::take(client));
                }
            })),
            Err(_) => drop(Object::take(client)),
        }
    }
}

/// Reads the answer of `loopx_append`: committed, the operation's first receipt, the goal's
/// revision when it is not the expected one, or the revision its history is damaged at.
fn answer(rows: &[Row], prepared: &Prepared) -> Result<Outcome, StoreError> {
    let request = &prepared.request;
    let outcome = rows.first().and_then(|row| row.try_get::<_, i32>(0).ok());
    match (outcome, rows.first()) {
        (Some(0), _) => Ok(Outcome::Committed),
        (Some(1), Some(row)) => Ok(Outcome::Recorded(dialect::receipt(
            row,
            1,
            &request.goal,
            &request.operation,
        )?)),
        (Some(2), Some(row)) => Ok(Outcome::Moved {
            current: count(row.int(2)?, "revision")?,
        }),
        (Some(3), Some(row)) => Err(dialect::marked(&request.goal, row.int(2)?)?),
        // Beyond the server's clock: nothing written; the server's time.
        (Some(4), Some(row)) => Err(StoreError::ClockAhead {
            at: request.latest_time(),
            store_time: Timestamp::from_millis(row.int(4)?),
            skew: request.clock_skew,
        }),
        // An answer this build cannot read: whether it committed is unknown.
        _ => Err(StoreError::Ambiguous {
            operation: request.operation.clone(),
            attempt: prepared.attempt.clone(),
        }),
    }
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

/// A snapshot row's JSON in column `i`, decoded as `goal`'s state at `revision` without a copy,
/// and its chain head in column `i + 1`.
fn snapshot_in(
    goal: &GoalId,
    revision: u64,
    r: &Row,
    i: usize,
) -> Result<(GoalState, Option<[u8; 32]>), StoreError> {
    let head = r
        .opt_text(i + 1)?
        .as_deref()
        .and_then(crate::chain::from_hex);
    Ok((decode_snapshot(goal, revision, get::<&str>(r, i)?)?, head))
}

impl Dialect for Pg<'_> {
    type Digest = Vec<u8>;

    fn cache(&self) -> &StateCache {
        self.cache
    }

    fn snapshot_every(&self) -> u64 {
        self.snapshot_every
    }

    /// A read runs over one snapshot of the database (repeatable read), read only.
    async fn begin(&mut self, mode: Mode) -> Result<(), StoreError> {
        // Set first: a caller that stops waiting after `BEGIN` went out still rolls it back.
        self.open = true;
        self.batch(match mode {
            Mode::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
            Mode::Write => "BEGIN",
        })
        .await
    }

    async fn commit(&mut self) -> Result<(), StoreError> {
        self.batch("COMMIT").await?;
        self.open = false;
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), StoreError> {
        self.batch("ROLLBACK").await?;
        self.open = false;
        Ok(())
    }

    async fn goal_row(&mut self, goal: &GoalId, lock: bool) -> Result<Option<GoalRow>, StoreError> {
        let sql = if lock { GOAL_ROW_LOCKED } else { GOAL_ROW };
        let rows = self.query(sql, &[&goal.as_str()]).await?;
        rows.first()
            .map(|r| dialect::goal_row(r, 0, goal))
            .transpose()
    }

    /// One statement (one round trip).
    async fn goal_row_and_tail(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> Result<Option<(GoalRow, Vec<EventRow>)>, StoreError> {
        let rows = self
            .query(GOAL_AND_TAIL, &[&goal.as_str(), &int(after), &int(up_to)])
            .await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let row = dialect::goal_row(first, 0, goal)?;
        let mut tail = Vec::with_capacity(rows.len());
        for r in &rows {
            if r.opt_int(5)?.is_some() {
                tail.push(dialect::event_row(r, 5)?);
            }
        }
        Ok(Some((row, tail)))
    }

    async fn event_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        up_to: u64,
    ) -> Result<Vec<EventRow>, StoreError> {
        let rows = self
            .query(EVENT_ROWS, &[&goal.as_str(), &int(after), &int(up_to)])
            .await?;
        rows.iter().map(|r| dialect::event_row(r, 0)).collect()
    }

    async fn events_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
        self.page_after(EVENTS_AFTER, goal, after, limit).await
    }

    async fn snapshot(
        &mut self,
        goal: &GoalId,
        up_to: Option<u64>,
    ) -> Result<Option<dialect::ChainedSnapshot>, StoreError> {
        let up_to = int(up_to.unwrap_or(u64::MAX));
        let rows = self
            .query(SNAPSHOT_AT_OR_BEFORE, &[&goal.as_str(), &up_to])
            .await?;
        rows.first()
            .map(|r| snapshot_in(goal, count(r.int(0)?, "revision")?, r, 1))
            .transpose()
    }

    async fn snapshot_at(
        &mut self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<dialect::ChainedSnapshot>, StoreError> {
        let rows = self
            .query(SNAPSHOT_AT, &[&goal.as_str(), &int(revision)])
            .await?;
        rows.first()
            .map(|r| snapshot_in(goal, revision, r, 0))
            .transpose()
    }

    async fn receipt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        let rows = self
            .query(RECEIPT, &[&goal.as_str(), &operation.as_str()])
            .await?;
        rows.first()
            .map(|r| dialect::receipt(r, 0, goal, operation))
            .transpose()
    }

    async fn receipt_attempt(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<(Receipt, Option<String>)>, StoreError> {
        let rows = self
            .query(RECEIPT_ATTEMPT, &[&goal.as_str(), &operation.as_str()])
            .await?;
        rows.first()
            .map(|r| Ok((dialect::receipt(r, 0, goal, operation)?, r.opt_text(4)?)))
            .transpose()
    }

    /// One statement for all of them.
    async fn revisions(&mut self, goals: &[&GoalId]) -> Result<BTreeMap<String, u64>, StoreError> {
        let ids: Vec<&str> = goals.iter().map(|goal| goal.as_str()).collect();
        let rows = self.query(GOAL_REVISIONS, &[&ids]).await?;
        let mut revisions = BTreeMap::new();
        for r in &rows {
            let goal: GoalId = stored_id(r.text(0)?, "goal id")?;
            // As every read of a goal row: a damaged goal is not waited on either.
            if let Some(revision) = r.opt_int(2)? {
                return Err(dialect::marked(&goal, revision)?);
            }
            revisions.insert(goal.as_str().to_owned(), count(r.int(1)?, "revision")?);
        }
        Ok(revisions)
    }

    async fn listing(&mut self) -> Result<Vec<ListedGoal>, StoreError> {
        let rows = self.query(LISTING, &[]).await?;
        rows.iter().map(dialect::listed_goal).collect()
    }

    /// One statement: the agent's goals joined with its frontier rows.
    async fn agent_goals(&mut self, agent: &AgentId) -> Result<Vec<AgentGoal>, StoreError> {
        let rows = self
            .query(AGENT_GOALS_AND_FRONTIER, &[&agent.as_str()])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(AgentGoal {
                    goal: stored_id(r.text(0)?, "goal id")?,
                    window: dialect::window(r, 1)?,
                    todos: r.opt_text(3)?,
                })
            })
            .collect()
    }

    /// One statement for all the subjects.
    async fn subject_goals(&mut self, subjects: &[&str]) -> Result<Vec<ListedGoal>, StoreError> {
        let rows = self.query(SUBJECT_GOALS, &[&subjects]).await?;
        rows.iter().map(dialect::listed_goal).collect()
    }

    async fn write_subjects(
        &mut self,
        goal: &GoalId,
        subjects: &BTreeSet<Subject>,
    ) -> Result<(), StoreError> {
        let subjects: Vec<&str> = subjects.iter().map(Subject::as_str).collect();
        self.execute(
            "DELETE FROM goal_subjects WHERE goal = $1",
            &[&goal.as_str()],
        )
        .await?;
        self.execute(
            "INSERT INTO goal_subjects (subject, goal) SELECT s, $1 FROM unnest($2::text[]) AS x(s)",
            &[&goal.as_str(), &subjects],
        )
        .await
        .map(drop)
    }

    async fn subjects_pending(&mut self) -> Result<bool, StoreError> {
        Ok(!self.query(SUBJECTS_PENDING, &[]).await?.is_empty())
    }

    async fn subjects_indexed(&mut self) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM store_settings WHERE name = 'goal_subjects'",
            &[],
        )
        .await
        .map(drop)
    }

    async fn stale_goals(&mut self, now: Timestamp) -> Result<Vec<GoalId>, StoreError> {
        let rows = self.query(STALE_GOALS, &[&now.as_millis()]).await?;
        rows.iter()
            .map(|r| stored_id(r.text(0)?, "goal id"))
            .collect()
    }

    async fn earliest_wake(&mut self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let rows = self.query(EARLIEST_WAKE, &[&now.as_millis()]).await?;
        let earliest = match rows.first() {
            Some(r) => r.opt_int(0)?,
            None => None,
        };
        Ok(earliest.map(Timestamp::from_millis))
    }

    async fn operation_rows(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(OPERATIONS_AFTER, &[&goal.as_str(), &int(after), &limit])
            .await?;
        rows.iter()
            .map(|r| dialect::operation_row(r, goal))
            .collect()
    }

    /// The receipts rows of schema 3 that read their names from the events, then the receipts
    /// on event rows (schema 4).
    async fn latest_operation_rows(
        &mut self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(LATEST_OPERATIONS, &[&goal.as_str(), &int(up_to), &limit])
            .await?;
        rows.iter()
            .map(|r| dialect::operation_row(r, goal))
            .collect()
    }

    async fn receipts_to_keep(
        &mut self,
        goal: &GoalId,
        target: u64,
    ) -> Result<Vec<Kept<Vec<u8>>>, StoreError> {
        let g = goal.as_str();
        let unnamed = self
            .query(RECEIPT_ROWS_TO_NAME, &[&g, &int(target)])
            .await?;
        let on_events = self.query(RECEIPTS_TO_KEEP, &[&g, &int(target)]).await?;
        let mut kept = Vec::with_capacity(unnamed.len() + on_events.len());
        for r in &unnamed {
            kept.push(Kept::Unnamed {
                revision: count(r.int(0)?, "revision")?,
                events: count(r.int(1)?, "event count")?,
                seq: r.int(2)?,
            });
        }
        for r in &on_events {
            kept.push(dialect::kept_on_event(r, get::<Vec<u8>>(r, 3)?)?);
        }
        Ok(kept)
    }

    /// One call of `loopx_append`, which checks the operation id and the expected revision
    /// under the goal's row lock. The host plans the snapshot from the revision of the goal's
    /// latest snapshot as cached with the expected revision; without one, the goal's row is
    /// read first, which also settles a goal that moved before anything is sent.
    async fn write_commit(&mut self, prepared: &mut Prepared) -> Result<Outcome, StoreError> {
        self.write(prepared, false).await
    }

    /// The frontier rows are replaced as a whole.
    async fn write_rows(&mut self, projection: &Projection) -> Result<(), StoreError> {
        let goal = projection.summary.goal.as_str();
        let (agents, todos) = frontier_rows(projection)?;
        let valid_until = projection.summary.next_wake.map(Timestamp::as_millis);
        let updated = self
            .execute(
                "UPDATE goals SET status = $3, valid_from = $4, valid_until = $5 WHERE goal = $1 AND revision = $2",
                &[
                    &goal,
                    &int(projection.summary.revision),
                    &status_name(projection.summary.status),
                    &projection.valid_from.as_millis(),
                    &valid_until,
                ],
            )
            .await?;
        if updated != 1 {
            return Ok(());
        }
        self.execute("DELETE FROM frontier WHERE goal = $1", &[&goal])
            .await?;
        if !agents.is_empty() {
            self.execute(
                "INSERT INTO frontier (agent, goal, todos)
                 SELECT a, $1, t FROM unnest($2::text[], $3::text[]) AS f(a, t)",
                &[&goal, &agents, &todos],
            )
            .await?;
        }
        Ok(())
    }

    async fn keep_receipt(
        &mut self,
        goal: &GoalId,
        kept: &Kept<Vec<u8>>,
        (actor, kinds): (&str, &str),
        target: u64,
    ) -> Result<(), StoreError> {
        let g = goal.as_str();
        match kept {
            Kept::Unnamed { revision, seq, .. } => {
                self.execute(
                    "UPDATE receipts SET actor = $4, kinds = $5 WHERE goal = $1 AND revision = $2 AND seq = $3",
                    &[&g, &int(*revision), seq, &actor, &kinds],
                )
                .await?;
            }
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
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                             (SELECT authorship FROM events WHERE goal = $1 AND revision = $4))"
                } else {
                    "INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                };
                self.execute(
                    insert,
                    &[
                        &g,
                        operation,
                        digest,
                        &int(*revision),
                        &int(*events),
                        at,
                        &actor,
                        &kinds,
                    ],
                )
                .await?;
                // An event row that compaction keeps holds the receipt no more (the others go).
                if *revision > target {
                    self.execute(
                        "UPDATE events SET operation = NULL, digest = NULL, commit_events = NULL, authorship = NULL
                         WHERE goal = $1 AND revision = $2",
                        &[&g, &int(*revision)],
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }

    async fn stored_rows(&mut self, goal: &GoalId) -> Result<Option<StoredRows>, StoreError> {
        let g = goal.as_str();
        let found = self.query(STORED_GOAL_ROW, &[&g]).await?;
        let Some(mut stored) = found.first().map(dialect::stored_goal_row).transpose()? else {
            return Ok(None);
        };
        for r in &self.query(GOAL_AGENTS, &[&g]).await? {
            stored.agents.insert(r.text(0)?);
        }
        for r in &self.query(GOAL_SUBJECTS, &[&g]).await? {
            stored.subjects.insert(r.text(0)?);
        }
        for r in &self.query(GOAL_FRONTIER, &[&g]).await? {
            stored.frontier.insert(r.text(0)?, r.text(1)?);
        }
        for r in &self.query(SNAPSHOT_REVISIONS, &[&g]).await? {
            stored.snapshots.insert(count(r.int(0)?, "revision")?);
        }
        Ok(Some(stored))
    }

    async fn orphan_rows(&mut self) -> Result<Vec<(String, String)>, StoreError> {
        let found = self.query(ORPHAN_ROWS, &[]).await?;
        found.iter().map(|r| Ok((r.text(0)?, r.text(1)?))).collect()
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
        let chain = crate::chain::to_hex(chain);
        self.execute(
            "INSERT INTO snapshots (goal, revision, json, chain) VALUES ($1, $2, $3, $4)
             ON CONFLICT (goal, revision) DO UPDATE SET json = excluded.json, chain = excluded.chain",
            &[&g, &int(target), &base, &chain],
        )
        .await?;
        self.execute(ARCHIVE_EVENTS, &[&g, &int(target)]).await?;
        // The new base first: the damage triggers take deletions at or below it for compaction.
        self.execute(
            "UPDATE goals SET base_revision = $2, snapshot_revision = GREATEST(snapshot_revision, $2) WHERE goal = $1",
            &[&g, &int(target)],
        )
        .await?;
        let removed = self
            .execute(
                "DELETE FROM events WHERE goal = $1 AND revision <= $2",
                &[&g, &int(target)],
            )
            .await?;
        self.execute(
            "DELETE FROM snapshots WHERE goal = $1 AND revision < $2 AND revision <> $3",
            &[&g, &int(target), &int(origin)],
        )
        .await?;
        Ok(removed)
    }

    async fn dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<String>, StoreError> {
        let rows = self
            .query(DEAD_LETTER, &[&goal.as_str(), &operation.as_str()])
            .await?;
        rows.first().map(|r| r.text(0)).transpose()
    }

    async fn write_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
        first_refused: Timestamp,
        letter: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            WRITE_DEAD_LETTER,
            &[
                &goal.as_str(),
                &operation.as_str(),
                &first_refused.as_millis(),
                &letter,
            ],
        )
        .await
        .map(drop)
    }

    async fn dead_letter_rows(&mut self, limit: usize) -> Result<(Vec<String>, u64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let letters = self
            .query(DEAD_LETTERS, &[&limit])
            .await?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<_, _>>()?;
        let total = match self.query(DEAD_LETTER_COUNT, &[]).await?.first() {
            Some(r) => r.int(0)?,
            None => 0,
        };
        Ok((letters, dialect::count(total, "dead letter count")?))
    }

    async fn delete_dead_letter(
        &mut self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        let removed = self
            .execute(DELETE_DEAD_LETTER, &[&goal.as_str(), &operation.as_str()])
            .await?;
        Ok(removed > 0)
    }

    async fn archive_start(&mut self, goal: &GoalId) -> Result<Option<u64>, StoreError> {
        let rows = self.query(ARCHIVE_START, &[&goal.as_str()]).await?;
        rows.first()
            .map(|r| dialect::count(r.int(0)?, "revision"))
            .transpose()
    }

    async fn archived_after(
        &mut self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<(Option<String>, Vec<EventRow>), StoreError> {
        self.page_after(ARCHIVED_AFTER, goal, after, limit).await
    }
}

// ----- digests ------------------------------------------------------------------------------

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
                ("RECEIPT_ATTEMPT", RECEIPT_ATTEMPT),
                ("EVENTS_AFTER", EVENTS_AFTER),
                ("GOAL_REVISIONS", GOAL_REVISIONS),
                ("AGENT_GOALS_AND_FRONTIER", AGENT_GOALS_AND_FRONTIER),
                ("STALE_GOALS", STALE_GOALS),
                ("EARLIEST_WAKE", EARLIEST_WAKE),
                ("STORED_GOAL_ROW", STORED_GOAL_ROW),
                ("GOAL_AGENTS", GOAL_AGENTS),
                ("GOAL_FRONTIER", GOAL_FRONTIER),
                ("SNAPSHOT_REVISIONS", SNAPSHOT_REVISIONS),
                ("SUBJECT_GOALS", SUBJECT_GOALS),
                ("GOAL_SUBJECTS", GOAL_SUBJECTS),
                ("SUBJECTS_PENDING", SUBJECTS_PENDING),
                ("RECEIPT_ROWS_TO_NAME", RECEIPT_ROWS_TO_NAME),
                ("RECEIPTS_TO_KEEP", RECEIPTS_TO_KEEP),
                ("SNAPSHOT_AT", SNAPSHOT_AT),
                ("OPERATIONS_AFTER", OPERATIONS_AFTER),
                ("LATEST_OPERATIONS", LATEST_OPERATIONS),
                ("the listing of every goal", LISTING),
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
