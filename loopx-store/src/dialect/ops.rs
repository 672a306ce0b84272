//! The store's algorithms, written once over a [`Dialect`].

use std::collections::{BTreeMap, BTreeSet};

use loopx_kernel::seams::{
    Appended, Commit, DeadLetter, DeadLetters, GoalStatus, GoalSummary, PastState, Receipt,
    StoreError,
};
use loopx_kernel::{
    AgentId, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Subject, Timestamp, TodoId,
};

use super::{Dialect, GoalRow, Kept, Mode, OperationRow, Outcome, damaged};
use crate::chain::{from_hex, genesis};
use crate::commit::{Prepared, prepare};
use crate::fold::{
    EventRow, check_loaded, decode_event, encode, fold_stored, missing_base, same_operation,
    tail_usable, verify_head, verify_row,
};
use crate::index::{Projection, merge_frontiers, parse_status, subjects};
use crate::retention::{
    Compaction, OperationRecord, audit, covering, decode_authorship, decode_operation,
    fill_from_events, pending_spans,
};
use crate::rows::{RowDamage, compare, missing_row, orphaned};

// ----- load ---------------------------------------------------------------------------------

/// The goal's current state: from the cache and one short read when the cache holds the goal
/// at its current revision or a little behind it; otherwise its newest snapshot and the events
/// after it, in one read transaction.
pub(crate) async fn load<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<GoalState>, StoreError> {
    if let Some(quick) = load_quick(d, goal).await? {
        return Ok(quick);
    }
    d.begin(Mode::Read).await?;
    let loaded = load_state(d, goal).await?;
    d.rollback().await?;
    Ok(loaded.map(|(state, _)| state))
}

/// [`load`] without a transaction, when the cache helps: the goal's row and the events after
/// the cached state in one read, folded on. `None` when the cache does not help.
async fn load_quick<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<Option<GoalState>>, StoreError> {
    let Some(after) = d.cache().latest_revision(goal) else {
        return Ok(None);
    };
    let up_to = after.saturating_add(d.snapshot_every());
    let Some((row, tail)) = d.goal_row_and_tail(goal, after, up_to).await? else {
        // The long way tells a goal that does not exist from one whose row is gone.
        return Ok(None);
    };
    Ok(from_cache(d, goal, row, Some(tail))?.map(Some))
}

/// The goal's state and row, read inside the caller's transaction.
async fn load_state<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<(GoalState, GoalRow)>, StoreError> {
    let Some(row) = d.goal_row(goal, false).await? else {
        return absent(d, goal).await.map(|()| None);
    };
    if let Some(state) = from_cache(d, goal, row, None)? {
        return Ok(Some((state, row)));
    }
    if let Some(older) = d.cache().behind(goal, row.revision)
        && usable(d, &older.0, row)
    {
        let tail = d.event_rows(goal, older.0.revision, row.revision).await?;
        if let Some(state) = fold_tail(d, goal, older, row, &tail)? {
            return Ok(Some((state, row)));
        }
    }
    let (state, head) = state_at(d, goal, row, None).await?;
    let state = check_loaded(goal, state, row.revision)?;
    verify_head(goal, row.revision, row.chain, &head)?;
    d.cache().put(&state, row.snapshot_revision, Some(head));
    Ok(Some((state, row)))
}

/// For a goal without a row: nothing else of it may be stored. Events or a snapshot without
/// their goal row are a damaged history (the row was deleted outside loopx), never a goal that
/// does not exist. Read only when the row is missing, so a load of a goal that exists pays
/// nothing for it.
async fn absent<D: Dialect>(d: &mut D, goal: &GoalId) -> Result<(), StoreError> {
    let (_, first) = d.events_after(goal, 0, 1).await?;
    let revision = match first.first() {
        Some(row) => Some(row.revision),
        None => d
            .snapshot(goal, None)
            .await?
            .map(|(state, _)| state.revision),
    };
    match revision {
        None => Ok(()),
        Some(revision) => Err(damaged(
            goal,
            0,
            &format!("its row is missing while its history (from revision {revision}) is stored"),
        )),
    }
}

/// The goal's state at `row`'s revision from the cache: as cached, or a cached older state with
/// `tail` (the events after it, when read already) folded on. `None` when the cache does not
/// hold it.
fn from_cache<D: Dialect>(
    d: &D,
    goal: &GoalId,
    row: GoalRow,
    tail: Option<Vec<EventRow>>,
) -> Result<Option<GoalState>, StoreError> {
    if let Some(state) = d.cache().get(goal, row.revision) {
        return Ok(Some(state));
    }
    match (tail, d.cache().behind(goal, row.revision)) {
        (Some(tail), Some(older)) if usable(d, &older.0, row) => {
            fold_tail(d, goal, older, row, &tail)
        }
        _ => Ok(None),
    }
}

/// Whether folding the events after `older` is worth it for a goal at `row`.
fn usable<D: Dialect>(d: &D, older: &GoalState, row: GoalRow) -> bool {
    tail_usable(
        older.revision,
        row.revision,
        row.base_revision,
        row.snapshot_revision,
        d.snapshot_every(),
    )
}

/// `older` (a state and the chain head at its revision) with `tail` folded on, when the tail
/// holds exactly the events after it up to `row`'s revision (compaction may have taken some
/// away); the tail is checked against the chain up to the goal row's head, and the result is
/// cached.
fn fold_tail<D: Dialect>(
    d: &D,
    goal: &GoalId,
    (older, head): (GoalState, [u8; 32]),
    row: GoalRow,
    tail: &[EventRow],
) -> Result<Option<GoalState>, StoreError> {
    let contiguous = tail
        .iter()
        .zip(older.revision + 1..)
        .all(|(event, revision)| event.revision == revision)
        && tail.len() as u64 == row.revision - older.revision;
    if !contiguous {
        return Ok(None);
    }
    let (state, head) = fold_stored(goal, Some(older), head, tail)?;
    let state = check_loaded(goal, state, row.revision)?;
    verify_head(goal, row.revision, row.chain, &head)?;
    d.cache().put(&state, row.snapshot_revision, Some(head));
    Ok(Some(state))
}

/// The goal's state at `up_to` (its current revision when `None`): the newest snapshot at or
/// before it plus the events after it, folded with the kernel and checked against the chain
/// from the snapshot's head (or the genesis); the state and the chain head reached. The caller
/// reads inside one transaction.
async fn state_at<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    row: GoalRow,
    up_to: Option<u64>,
) -> Result<(Option<GoalState>, [u8; 32]), StoreError> {
    let (state, head) = match d.snapshot(goal, up_to).await? {
        Some((state, head)) => {
            let head = head.ok_or_else(|| unchained_snapshot(goal, state.revision))?;
            (Some(state), head)
        }
        None if row.base_revision > 0 => return Err(missing_base(goal, row.base_revision)),
        None => (None, genesis(goal)),
    };
    let from = state.as_ref().map_or(0, |s| s.revision);
    let stored = d
        .event_rows(goal, from, up_to.unwrap_or(row.revision))
        .await?;
    fold_stored(goal, state, head, &stored)
}

/// The error for a snapshot of `goal` at `revision` stored without a readable chain head.
fn unchained_snapshot(goal: &GoalId, revision: u64) -> StoreError {
    damaged(
        goal,
        revision,
        "its snapshot's chain head is missing or unreadable (it was changed outside loopx)",
    )
}

/// See `Store::state_at`: the goal as it stood right after `revision`, from the newest snapshot
/// at or before it and the events after that snapshot, checked against the chain (and, at the
/// head, against the goal row's head), in one read transaction. Never through the cache: a
/// past revision is read as stored.
pub(crate) async fn past_state<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    revision: u64,
) -> Result<Option<PastState>, StoreError> {
    d.begin(Mode::Read).await?;
    let Some(row) = d.goal_row(goal, false).await? else {
        absent(d, goal).await?;
        d.rollback().await?;
        return Ok(None);
    };
    let archive_start = d.archive_start(goal).await?;
    // Revisions before the base come from the archive, from where it starts.
    let earliest = archive_start.unwrap_or(row.base_revision.max(1));
    if revision < earliest || revision > row.revision {
        d.rollback().await?;
        return Ok(Some(PastState::Unavailable {
            earliest,
            head: row.revision,
        }));
    }
    if revision < row.base_revision {
        let state = archived_state(d, goal, earliest - 1, revision).await;
        d.rollback().await?;
        let state = check_loaded(goal, state?, revision)?;
        return Ok(Some(PastState::Kept(Box::new(state))));
    }
    let (state, head) = state_at(d, goal, row, Some(revision)).await?;
    d.rollback().await?;
    let state = check_loaded(goal, state, revision)?;
    if revision == row.revision {
        verify_head(goal, row.revision, row.chain, &head)?;
    }
    Ok(Some(PastState::Kept(Box::new(state))))
}

/// Inside a read transaction: the goal right after `revision`, folded from the archive's
/// origin (`origin`: its snapshot, or the genesis at 0) through the archived events up to it,
/// each checked against the chain.
async fn archived_state<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    origin: u64,
    revision: u64,
) -> Result<Option<GoalState>, StoreError> {
    let (state, head) = match archive_origin_in(d, goal).await? {
        Some((state, chain)) if origin > 0 => (Some(state), chain),
        _ => (None, genesis(goal)),
    };
    let wanted = usize::try_from(revision - origin).unwrap_or(usize::MAX);
    let (_, rows) = d.archived_after(goal, origin, wanted).await?;
    Ok(fold_stored(goal, state, head, &rows)?.0)
}

// ----- append -------------------------------------------------------------------------------

/// Commits `commit`: its index rows and encoded events are computed first (from the state the
/// kernel folded), then the dialect writes it under compare-and-set, and the handle's cache
/// keeps the state and the rows it wrote.
pub(crate) async fn append<D: Dialect>(d: &mut D, commit: Commit) -> Result<Appended, StoreError> {
    let mut prepared = prepare(commit, d.cache())?;
    let written = d.write_commit(&mut prepared).await;
    answer(d, prepared, written)
}

/// The answer to a prepared commit the dialect wrote with `written`: a commit keeps its state
/// and the rows it wrote in the handle's cache.
fn answer<D: Dialect>(
    d: &D,
    prepared: Prepared,
    written: Result<Outcome, StoreError>,
) -> Result<Appended, StoreError> {
    match written? {
        Outcome::Committed => {
            let snapshot_revision = prepared.snapshot_revision();
            let head = prepared.chain;
            if prepared.request.events.is_empty() {
                // A recorded no-op wrote no rows and made no revision.
                d.cache().put_owned(prepared.state, snapshot_revision, head);
            } else {
                d.cache().put_committed(
                    prepared.state,
                    snapshot_revision,
                    head,
                    prepared.projection,
                );
            }
            Ok(Appended::Committed(prepared.receipt))
        }
        Outcome::Recorded(first) => {
            same_operation(first, &prepared.request).map(Appended::Replayed)
        }
        Outcome::Moved { current } => Err(StoreError::Conflict {
            expected: prepared.request.expected_revision,
            current,
        }),
    }
}

/// Commits a group of prepared commits in one write transaction, so that they share one sync,
/// and answers each with its own outcome, in order — exactly what each would have been told
/// alone, had they been written one after the other in that order: each keeps its own
/// compare-and-set, operation-id check and clock check, and each is written inside a savepoint
/// of its own, so that one that fails (an error on the way) takes back only its own rows. A
/// group of one is written as a single commit is, without a savepoint.
///
/// A commit is answered `Committed` only once the transaction committed. When the backend
/// rolls the whole transaction back under a commit (a full disk), that commit gets its error
/// and the others are written again in a new transaction; when the `COMMIT` itself fails, each
/// commit the group wrote is [`StoreError::Ambiguous`], as a single commit's would be.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) async fn append_group<D: super::Grouped>(
    d: &mut D,
    mut group: Vec<Prepared>,
) -> Vec<Result<Appended, StoreError>> {
    if group.len() == 1
        && let Some(mut prepared) = group.pop()
    {
        let written = d.write_commit(&mut prepared).await;
        return vec![answer(d, prepared, written)];
    }
    let mut outcomes: Vec<Option<Result<Outcome, StoreError>>> =
        group.iter().map(|_| None).collect();
    // Each round writes every commit not yet answered; a round the backend rolled back under a
    // commit answers that commit, so there are at most as many rounds as commits.
    while outcomes.iter().any(Option::is_none) {
        write_round(d, &mut group, &mut outcomes).await;
    }
    group
        .into_iter()
        .zip(outcomes)
        .map(|(prepared, written)| {
            let written = written.unwrap_or_else(|| Err(lost_group(&prepared)));
            answer(d, prepared, written)
        })
        .collect()
}

/// One transaction over the commits of `group` not answered yet in `outcomes`: see
/// [`append_group`].
#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn write_round<D: super::Grouped>(
    d: &mut D,
    group: &mut [Prepared],
    outcomes: &mut [Option<Result<Outcome, StoreError>>],
) {
    if let Err(error) = d.begin(Mode::Write).await {
        for outcome in outcomes.iter_mut().filter(|o| o.is_none()) {
            *outcome = Some(Err(error.clone()));
        }
        return;
    }
    let mut round: Vec<(usize, Result<Outcome, StoreError>)> = Vec::with_capacity(group.len());
    for (i, prepared) in group.iter_mut().enumerate() {
        if outcomes[i].is_some() {
            continue;
        }
        match write_one(d, prepared).await {
            Ok(written) => round.push((i, written)),
            Err(error) => {
                // The transaction is gone, and every write of this round with it: this commit
                // is answered, the others are written again.
                drop(d.rollback().await);
                outcomes[i] = Some(Err(error));
                return;
            }
        }
    }
    let committed = d.commit().await;
    for (i, written) in round {
        outcomes[i] = Some(match (&committed, written) {
            (Err(error), Ok(Outcome::Committed)) => Err(match error {
                // The commit itself failed: it may or may not be on disk.
                StoreError::Unavailable { .. } => lost_group(&group[i]),
                other => other.clone(),
            }),
            (_, written) => written,
        });
    }
}

/// Writes one commit of a group inside a savepoint of its own: `Ok` with its outcome (a failure
/// took back its own rows only), `Err` when the transaction itself is gone.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn write_one<D: super::Grouped>(
    d: &mut D,
    prepared: &mut Prepared,
) -> Result<Result<Outcome, StoreError>, StoreError> {
    d.savepoint().await?;
    match d.write_in(prepared).await {
        Ok(outcome) => {
            d.release_savepoint().await?;
            Ok(Ok(outcome))
        }
        Err(error) => {
            d.rollback_to_savepoint().await.map_err(|_| error.clone())?;
            d.release_savepoint().await.map_err(|_| error.clone())?;
            Ok(Err(error))
        }
    }
}

/// The error for a commit whose group's outcome is unknown: read it back.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn lost_group(prepared: &Prepared) -> StoreError {
    StoreError::Ambiguous {
        operation: prepared.request.operation.clone(),
        attempt: prepared.attempt.clone(),
    }
}

// ----- reads --------------------------------------------------------------------------------

/// The receipt of `operation` on `goal`, if it committed.
pub(crate) async fn receipt<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<Option<Receipt>, StoreError> {
    d.receipt(goal, operation).await
}

/// The outcome of an ambiguous append of `operation` with `attempt` (see `Store::resolve`):
/// committed only when the receipt carries that attempt id.
pub(crate) async fn resolve<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    operation: &OperationId,
    attempt: &str,
) -> Result<Option<Appended>, StoreError> {
    Ok(d.receipt_attempt(goal, operation)
        .await?
        .map(|(receipt, recorded)| {
            if !attempt.is_empty() && recorded.as_deref() == Some(attempt) {
                Appended::Committed(receipt)
            } else {
                Appended::Replayed(receipt)
            }
        }))
}

/// Up to `limit` events of `goal` after `after`, never with a gap: the page holds the events
/// right after `after` (or after the base, for a compacted goal) up to the goal's revision. A
/// full page that starts right after `after` and has no gap is returned as read; any other page
/// (the last one, or one that starts at the base) is read again with the goal's row in one read
/// transaction and checked against it, so that a missing event anywhere is
/// [`StoreError::HistoryDamaged`] and never a shorter history.
pub(crate) async fn events<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let (prev, rows) = d.events_after(goal, after, limit).await?;
    if rows.len() == limit
        && first_gap(&rows, after).is_none()
        && let Some(head) = start_head(goal, after, prev.as_deref())
    {
        let decoded = decode_rows(goal, &rows)?;
        verify_rows(goal, head, &rows)?;
        return Ok(decoded);
    }
    d.begin(Mode::Read).await?;
    let (prev, rows) = d.events_after(goal, after, limit).await?;
    // Kept as a result: a row that cannot be read is reported after the events that cannot.
    let row = d.goal_row(goal, false).await;
    // The chain head of the base a compacted goal's first page starts from.
    let base = match &row {
        Ok(Some(row)) if row.base_revision > 0 && after <= row.base_revision => {
            Some(d.snapshot_at(goal, row.base_revision).await)
        }
        _ => None,
    };
    d.rollback().await?;
    let decoded = decode_rows(goal, &rows)?;
    let Some(row) = row? else {
        if rows.is_empty() {
            return Ok(decoded);
        }
        return Err(damaged(
            goal,
            0,
            "its row is missing while its history is stored",
        ));
    };
    let start = after.max(row.base_revision);
    let expected = usize::try_from(row.revision.saturating_sub(start))
        .unwrap_or(usize::MAX)
        .min(limit);
    if let Some(revision) = first_gap(&rows, start) {
        return Err(damaged(
            goal,
            revision,
            "an event is missing from its history",
        ));
    }
    if rows.len() < expected {
        let missing = start + rows.len() as u64 + 1;
        return Err(damaged(
            goal,
            missing,
            "an event is missing from its history",
        ));
    }
    let head = match base {
        Some(base) => {
            let (state, head) = base?.ok_or_else(|| missing_base(goal, row.base_revision))?;
            head.ok_or_else(|| unchained_snapshot(goal, state.revision))?
        }
        None => match start_head(goal, after, prev.as_deref()) {
            Some(head) => head,
            None if rows.is_empty() => return Ok(decoded),
            None => {
                return Err(damaged(
                    goal,
                    after,
                    "its event row's chain is missing or unreadable (it was changed outside loopx)",
                ));
            }
        },
    };
    let head = verify_rows(goal, head, &rows)?;
    if rows
        .last()
        .is_some_and(|last| last.revision == row.revision)
    {
        verify_head(goal, row.revision, row.chain, &head)?;
    }
    Ok(decoded)
}

/// The chain head a page of `goal`'s events after `after` starts from: the genesis's, or the
/// one stored with the row at `after` (`prev`); `None` when that row's chain was not read.
fn start_head(goal: &GoalId, after: u64, prev: Option<&str>) -> Option<[u8; 32]> {
    if after == 0 {
        Some(genesis(goal))
    } else {
        prev.and_then(from_hex)
    }
}

/// Checks consecutive `rows` against the chain from `head`; the head reached.
fn verify_rows(
    goal: &GoalId,
    mut head: [u8; 32],
    rows: &[EventRow],
) -> Result<[u8; 32], StoreError> {
    for row in rows {
        head = verify_row(goal, &head, row)?;
    }
    Ok(head)
}

/// Decodes event rows of `goal`.
fn decode_rows(goal: &GoalId, rows: &[EventRow]) -> Result<Vec<RecordedEvent>, StoreError> {
    rows.iter().map(|row| decode_event(goal, row)).collect()
}

/// The first revision missing from `rows`, which should hold the revisions right after
/// `after` in order.
fn first_gap(rows: &[EventRow], after: u64) -> Option<u64> {
    rows.iter()
        .zip(after + 1..)
        .find(|(row, revision)| row.revision != *revision)
        .map(|(_, revision)| revision)
}

/// The watched goals that stand past the revision given for them (see `Store::changed`).
pub(crate) async fn moved<D: Dialect>(
    d: &mut D,
    watch: &[(GoalId, u64)],
) -> Result<Vec<GoalId>, StoreError> {
    let goals: Vec<&GoalId> = watch.iter().map(|(goal, _)| goal).collect();
    let revisions = d.revisions(&goals).await?;
    Ok(crate::watch::past(watch, |goal| {
        revisions.get(goal.as_str()).copied().unwrap_or(0)
    }))
}

// ----- cross-goal queries -------------------------------------------------------------------

/// Recomputes the index rows of `stale` goals at `now` and returns them. The states are read
/// and the rows computed before the write transaction; a goal that moved meanwhile keeps the
/// rows its newer commit wrote. Goals that vanished are skipped.
async fn refresh<D: Dialect>(
    d: &mut D,
    now: Timestamp,
    stale: &[GoalId],
) -> Result<Vec<Projection>, StoreError> {
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(stale.len());
    d.begin(Mode::Read).await?;
    for goal in stale {
        if let Some((state, _)) = load_state(d, goal).await? {
            out.push(Projection::compute(&state, now));
        }
    }
    d.rollback().await?;
    d.begin(Mode::Write).await?;
    for projection in &out {
        d.write_rows(projection).await?;
    }
    d.commit().await?;
    Ok(out)
}

/// Every goal with its standing at `now`.
pub(crate) async fn goals<D: Dialect>(
    d: &mut D,
    now: Timestamp,
) -> Result<Vec<GoalSummary>, StoreError> {
    let mut summaries = BTreeMap::new();
    let mut stale = Vec::new();
    for row in d.listing().await? {
        if !row.window.covers(now) {
            stale.push(row.goal);
            continue;
        }
        let goal = row.goal;
        let status = stored_status(&goal, &row.status)?;
        let summary = GoalSummary {
            goal: goal.clone(),
            objective: row.objective,
            status,
            revision: row.revision,
            next_wake: row.window.until,
        };
        summaries.insert(goal, summary);
    }
    for projection in refresh(d, now, &stale).await? {
        summaries.insert(projection.summary.goal.clone(), projection.summary);
    }
    Ok(summaries.into_values().collect())
}

/// A goal row's stored standing.
fn stored_status(goal: &GoalId, name: &str) -> Result<GoalStatus, StoreError> {
    parse_status(name).ok_or_else(|| StoreError::Corrupt {
        detail: format!(
            "goal `{goal}` has an unknown status `{name}`; restore the store from a backup"
        ),
    })
}

/// The goals that follow any of `subjects`, abandoned goals left out, each once, in id order:
/// an index lookup by subject, and a recomputation of the standing of only those found whose
/// rows' window does not cover `now`.
pub(crate) async fn watching<D: Dialect>(
    d: &mut D,
    subjects: &[Subject],
    now: Timestamp,
) -> Result<Vec<GoalId>, StoreError> {
    if subjects.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = subjects.iter().map(Subject::as_str).collect();
    let mut standing = BTreeMap::new();
    let mut stale = BTreeSet::new();
    for row in d.subject_goals(&keys).await? {
        if standing.contains_key(&row.goal) || stale.contains(&row.goal) {
            continue;
        }
        if row.window.covers(now) {
            let status = stored_status(&row.goal, &row.status)?;
            standing.insert(row.goal, status);
        } else {
            stale.insert(row.goal);
        }
    }
    let stale: Vec<GoalId> = stale.into_iter().collect();
    for projection in refresh(d, now, &stale).await? {
        standing.insert(projection.summary.goal, projection.summary.status);
    }
    Ok(standing
        .into_iter()
        .filter(|(_, status)| *status != GoalStatus::Abandoned)
        .map(|(goal, _)| goal)
        .collect())
}

/// Indexes the subjects of the goals written before the `goal_subjects` index existed, when
/// the migration marked them pending: in one write transaction, each goal's row locked while
/// its state is read and its rows written, the mark removed at the end. A goal whose history
/// cannot be read (damaged) is left unindexed: it can be neither read nor written, and
/// `loopx doctor` reports it.
pub(crate) async fn index_subjects<D: Dialect>(d: &mut D) -> Result<(), StoreError> {
    // Every open asks, and nearly every one finds nothing pending: asking with one statement
    // of its own keeps opens out of the writers' queue for the write lock.
    if !d.subjects_pending().await? {
        return Ok(());
    }
    d.begin(Mode::Write).await?;
    if !d.subjects_pending().await? {
        return d.rollback().await;
    }
    for row in d.listing().await? {
        let loaded = match d.goal_row(&row.goal, true).await {
            Ok(_) => load_state(d, &row.goal).await,
            Err(error) => Err(error),
        };
        match loaded {
            Ok(Some((state, _))) => d.write_subjects(&row.goal, &subjects(&state)).await?,
            Ok(None) | Err(StoreError::HistoryDamaged { .. } | StoreError::Corrupt { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    d.subjects_indexed().await?;
    d.commit().await
}

// ----- dead letters ------------------------------------------------------------------------

/// Keeps `letter`, or counts it against the letter of its goal and operation already kept, in
/// one write transaction.
pub(crate) async fn keep_dead_letter<D: Dialect>(
    d: &mut D,
    letter: DeadLetter,
) -> Result<(), StoreError> {
    d.begin(Mode::Write).await?;
    let kept = match d.dead_letter(&letter.goal, &letter.operation).await? {
        Some(stored) => crate::dead_letter::decode(&stored)?.refused_again(letter),
        None => letter,
    };
    let encoded = encode(&kept)?;
    d.write_dead_letter(&kept.goal, &kept.operation, kept.first_refused, &encoded)
        .await?;
    d.commit().await
}

/// Up to `limit` dead letters, the first refused first, and how many are kept.
pub(crate) async fn dead_letters<D: Dialect>(
    d: &mut D,
    limit: usize,
) -> Result<DeadLetters, StoreError> {
    let (rows, total) = d.dead_letter_rows(limit).await?;
    let letters = rows
        .iter()
        .map(|row| crate::dead_letter::decode(row))
        .collect::<Result<_, _>>()?;
    Ok(DeadLetters { letters, total })
}

/// Removes the dead letter of `operation` on `goal`; true when one was kept.
pub(crate) async fn drop_dead_letter<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    operation: &OperationId,
) -> Result<bool, StoreError> {
    d.delete_dead_letter(goal, operation).await
}

/// The cross-goal frontier of `agent` at `now`.
pub(crate) async fn frontier<D: Dialect>(
    d: &mut D,
    agent: &AgentId,
    now: Timestamp,
) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
    let mut per_goal: BTreeMap<GoalId, Vec<(u8, TodoId)>> = BTreeMap::new();
    let mut stale = Vec::new();
    let mut seen = BTreeSet::new();
    for row in d.agent_goals(agent).await? {
        if !seen.insert(row.goal.clone()) {
            continue;
        }
        if !row.window.covers(now) {
            stale.push(row.goal);
            continue;
        }
        if let Some(json) = row.todos {
            let goal = row.goal;
            let todos: Vec<(u8, TodoId)> =
                serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
                    detail: format!(
                        "the frontier row of `{agent}` in goal `{goal}` cannot be read ({error}); restore the store from a backup"
                    ),
                })?;
            per_goal.insert(goal, todos);
        }
    }
    for mut projection in refresh(d, now, &stale).await? {
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

/// The earliest wake time across all goals after `now`.
pub(crate) async fn next_wake<D: Dialect>(
    d: &mut D,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let mut stale = d.stale_goals(now).await?;
    // A goal may be stale at both ends of its window.
    stale.sort();
    stale.dedup();
    let refreshed = refresh(d, now, &stale).await?;
    let indexed = d.earliest_wake(now).await?;
    Ok(indexed
        .into_iter()
        .chain(refreshed.iter().filter_map(|p| p.summary.next_wake))
        .min())
}

// ----- retention ----------------------------------------------------------------------------

/// Compacts `goal` to `keep_after` (see `Retention::compact`), in one write transaction.
pub(crate) async fn compact<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    keep_after: u64,
) -> Result<Compaction, StoreError> {
    d.begin(Mode::Write).await?;
    let row = d
        .goal_row(goal, true)
        .await?
        .ok_or_else(|| StoreError::UnknownGoal { goal: goal.clone() })?;
    let target = keep_after.min(row.revision);
    if target <= row.base_revision {
        d.rollback().await?;
        return Ok(Compaction {
            goal: goal.clone(),
            base_revision: row.base_revision,
            events_removed: 0,
        });
    }
    let (state, head) = match state_at(d, goal, row, Some(target)).await? {
        (Some(state), head) if state.revision == target => (state, head),
        _ => {
            return Err(StoreError::Corrupt {
                detail: format!(
                    "the history of goal `{goal}` does not reach revision {target}; restore the store from a backup"
                ),
            });
        }
    };
    check_deleted(d, goal, row, target, &head).await?;
    let base = encode(&state.snapshot())?;
    keep_receipts(d, goal, target).await?;
    let origin = origin(d, goal, row).await?;
    let removed = d.cut_history(goal, target, &base, &head, origin).await?;
    d.commit().await?;
    Ok(Compaction {
        goal: goal.clone(),
        base_revision: target,
        events_removed: removed,
    })
}

/// Before compaction deletes the events in `(base, target]`: they are all there and link from
/// the base's (or the genesis's) head to `head`, the chain the fold up to `target` reached, so
/// that damage is never compacted away. Rows below the snapshot the fold started from are read
/// for this only (their chains are checked, not decoded).
async fn check_deleted<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    row: GoalRow,
    target: u64,
    head: &[u8; 32],
) -> Result<(), StoreError> {
    let base = row.base_revision;
    let start = if base == 0 {
        genesis(goal)
    } else {
        let (state, chain) = d
            .snapshot_at(goal, base)
            .await?
            .ok_or_else(|| missing_base(goal, base))?;
        chain.ok_or_else(|| unchained_snapshot(goal, state.revision))?
    };
    let rows = d.event_rows(goal, base, target).await?;
    let missing = first_gap(&rows, base)
        .or_else(|| (rows.len() as u64 != target - base).then(|| base + rows.len() as u64 + 1));
    if let Some(revision) = missing {
        return Err(damaged(
            goal,
            revision,
            "an event is missing from its history",
        ));
    }
    let reached = verify_rows(goal, start, &rows)?;
    if &reached == head {
        Ok(())
    } else {
        Err(damaged(
            goal,
            target,
            "its snapshot's chain head does not match its history (a row was changed outside loopx)",
        ))
    }
}

/// Before compaction deletes the events up to `target`: the receipts of those events keep
/// their actor and event names in the receipts table, so the audit trail outlives the events.
async fn keep_receipts<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    target: u64,
) -> Result<(), StoreError> {
    let kept = d.receipts_to_keep(goal, target).await?;
    let spans: Vec<(u64, u64)> = kept.iter().map(Kept::span).collect();
    let events = spans_events(d, goal, &spans).await?;
    for receipt in &kept {
        let (revision, n) = receipt.span();
        let (actor, names) = audit(goal, &events, revision, n)?;
        let names = (encode(&actor)?, encode(&names)?);
        d.keep_receipt(goal, receipt, (&names.0, &names.1), target)
            .await?;
    }
    Ok(())
}

/// The base snapshot of a compacted goal.
pub(crate) async fn base<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<Snapshot>, StoreError> {
    d.begin(Mode::Read).await?;
    let base = match d.goal_row(goal, false).await? {
        Some(row) if row.base_revision > 0 => Some(
            d.snapshot_at(goal, row.base_revision)
                .await?
                .ok_or_else(|| missing_base(goal, row.base_revision))?
                .0,
        ),
        _ => None,
    };
    d.rollback().await?;
    Ok(base.map(|state| state.snapshot()))
}

/// The revision the goal's archive starts after: 0 when it starts at the goal's creation (or
/// no compaction ran yet); the base of a compaction that deleted its events (before the
/// store kept an archive), whose snapshot the archive folds onto.
async fn origin<D: Dialect>(d: &mut D, goal: &GoalId, row: GoalRow) -> Result<u64, StoreError> {
    Ok(match d.archive_start(goal).await? {
        Some(first) => first.saturating_sub(1),
        None => row.base_revision,
    })
}

/// The snapshot `goal`'s archive starts from, when it does not start at its creation (see
/// `Retention::archive_origin`).
pub(crate) async fn archive_origin<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<Snapshot>, StoreError> {
    d.begin(Mode::Read).await?;
    let found = archive_origin_in(d, goal).await;
    d.rollback().await?;
    Ok(found?.map(|(state, _)| state.snapshot()))
}

/// Inside a read transaction: the archive's origin snapshot and its chain head.
async fn archive_origin_in<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
) -> Result<Option<(GoalState, [u8; 32])>, StoreError> {
    let Some(row) = d.goal_row(goal, false).await? else {
        return Ok(None);
    };
    let origin = origin(d, goal, row).await?;
    if origin == 0 {
        return Ok(None);
    }
    let (state, chain) = d
        .snapshot_at(goal, origin)
        .await?
        .ok_or_else(|| missing_base(goal, origin))?;
    let chain = chain.ok_or_else(|| unchained_snapshot(goal, origin))?;
    Ok(Some((state, chain)))
}

/// Up to `limit` archived events of `goal` after `after` (see `Retention::archived`), read in
/// one read transaction with the goal's row, checked for gaps and against the chain from the
/// archive's origin (or the row at `after`) and, at the base, the base snapshot's chain.
pub(crate) async fn archived<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<RecordedEvent>, StoreError> {
    d.begin(Mode::Read).await?;
    let read = archived_in(d, goal, after, limit).await;
    d.rollback().await?;
    let Some((rows, start, expected, base)) = read? else {
        return Ok(Vec::new());
    };
    let missing = first_gap(&rows, start.0)
        .or_else(|| (rows.len() < expected).then(|| start.0 + rows.len() as u64 + 1));
    if let Some(revision) = missing {
        return Err(damaged(
            goal,
            revision,
            "an event is missing from its archive",
        ));
    }
    let head = verify_rows(goal, start.1, &rows)?;
    if let Some((revision, chain)) = base
        && rows.last().is_some_and(|last| last.revision == revision)
        && head != chain
    {
        return Err(damaged(
            goal,
            revision,
            "its archive does not lead to its base snapshot's chain head (a row was changed outside loopx)",
        ));
    }
    decode_rows(goal, &rows)
}

/// What [`archived`] reads in its transaction: the rows, the revision and chain head they
/// start after, how many rows there must be, and the base's revision and chain head.
type ArchivedRead = (
    Vec<EventRow>,
    (u64, [u8; 32]),
    usize,
    Option<(u64, [u8; 32])>,
);

async fn archived_in<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Option<ArchivedRead>, StoreError> {
    let Some(row) = d.goal_row(goal, false).await? else {
        return Ok(None);
    };
    let Some(first) = d.archive_start(goal).await? else {
        return Ok(None);
    };
    let origin = first.saturating_sub(1);
    let after = after.max(origin);
    if after >= row.base_revision {
        return Ok(None);
    }
    let (prev, rows) = d.archived_after(goal, after, limit).await?;
    let head = if after == origin {
        match archive_origin_in(d, goal).await? {
            Some((_, chain)) => chain,
            None => genesis(goal),
        }
    } else {
        prev.as_deref().and_then(from_hex).ok_or_else(|| {
            damaged(
                goal,
                after,
                "its archived event row's chain is missing or unreadable (it was changed outside loopx)",
            )
        })?
    };
    let (base, chain) = d
        .snapshot_at(goal, row.base_revision)
        .await?
        .ok_or_else(|| missing_base(goal, row.base_revision))?;
    let chain = chain.ok_or_else(|| unchained_snapshot(goal, base.revision))?;
    let expected = usize::try_from(row.base_revision - after)
        .unwrap_or(usize::MAX)
        .min(limit);
    Ok(Some((
        rows,
        (after, head),
        expected,
        Some((row.base_revision, chain)),
    )))
}

/// Up to `limit` committed operations of `goal` after `after`, in one read transaction: a
/// compaction cannot delete the events a receipt's actor and event names are read from between
/// the two reads.
pub(crate) async fn operations<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    after: u64,
    limit: usize,
) -> Result<Vec<OperationRecord>, StoreError> {
    d.begin(Mode::Read).await?;
    let rows = d.operation_rows(goal, after, limit).await?;
    let records = operation_records(d, goal, rows).await?;
    d.rollback().await?;
    Ok(records)
}

/// See `Store::latest_operations`: up to `limit` committed operations of `goal` up to `up_to`,
/// newest first, in one read transaction (as [`operations`]).
pub(crate) async fn latest_operations<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    up_to: u64,
    limit: usize,
) -> Result<Vec<OperationRecord>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    d.begin(Mode::Read).await?;
    let rows = d.latest_operation_rows(goal, up_to, limit).await?;
    let records = operation_records(d, goal, rows).await?;
    d.rollback().await?;
    Ok(records)
}

/// The audit records of receipt `rows`, in their order: actor and event names as stored with
/// a receipt, or read from its events. Reads inside the caller's transaction.
async fn operation_records<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    rows: Vec<OperationRow>,
) -> Result<Vec<OperationRecord>, StoreError> {
    let mut records = Vec::with_capacity(rows.len());
    // The records whose actor and event names live in their events.
    let mut from_events = Vec::new();
    for row in rows {
        if let Some(kinds) = row.kinds {
            records.push(decode_operation(
                row.receipt,
                row.actor,
                &kinds,
                row.authorship.as_deref(),
            )?);
            continue;
        }
        if row.receipt.events > 0 {
            from_events.push(records.len());
        }
        let authorship = decode_authorship(&row.receipt, row.authorship.as_deref())?;
        records.push(OperationRecord {
            receipt: row.receipt,
            actor: None,
            events: Vec::new(),
            authorship,
        });
    }
    let events = spans_events(d, goal, &pending_spans(&records, &from_events)).await?;
    fill_from_events(goal, &mut records, &from_events, &events)?;
    Ok(records)
}

/// See `Retention::check_rows`: the goal's stored rows against those `state` gives at `now`,
/// read in one read transaction.
pub(crate) async fn check_rows<D: Dialect>(
    d: &mut D,
    state: &GoalState,
    now: Timestamp,
) -> Result<Vec<RowDamage>, StoreError> {
    d.begin(Mode::Read).await?;
    let stored = d.stored_rows(&state.spec.id).await?;
    d.rollback().await?;
    match stored {
        Some(stored) => compare(&stored, state, now),
        None => Ok(vec![missing_row(&state.spec.id)]),
    }
}

/// See `Retention::stored_goals`.
pub(crate) async fn stored_goals<D: Dialect>(d: &mut D) -> Result<Vec<GoalId>, StoreError> {
    let mut goals: Vec<GoalId> = d.listing().await?.into_iter().map(|row| row.goal).collect();
    goals.sort();
    Ok(goals)
}

/// See `Retention::orphans`.
pub(crate) async fn orphans<D: Dialect>(d: &mut D) -> Result<Vec<RowDamage>, StoreError> {
    orphaned(d.orphan_rows().await?)
}

/// The events the receipts `spans` (each its revision and event count) were committed with, by
/// revision.
async fn spans_events<D: Dialect>(
    d: &mut D,
    goal: &GoalId,
    spans: &[(u64, u64)],
) -> Result<BTreeMap<u64, RecordedEvent>, StoreError> {
    let Some((from, to)) = covering(spans) else {
        return Ok(BTreeMap::new());
    };
    d.event_rows(goal, from, to)
        .await?
        .iter()
        .map(|row| Ok((row.revision, decode_event(goal, row)?)))
        .collect()
}
