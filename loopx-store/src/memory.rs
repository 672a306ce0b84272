//! The in-memory backend: the same semantics as the durable ones, nothing survives the process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use loopx_kernel::Duration;
use loopx_kernel::seams::{
    Appended, Commit, DeadLetter, DeadLetters, GoalStatus, GoalSummary, PastState, Receipt, Store,
    StoreError,
};
use loopx_kernel::{
    AgentId, GoalId, GoalState, OperationId, RecordedEvent, Snapshot, Subject, Timestamp, TodoId,
};

use crate::clock::StoreClock;
use crate::fold::{encode, kinds, receipt, same_operation, unfoldable};
use crate::index::{Projection, merge_frontiers, status_name};
use crate::retention::{Compaction, OperationRecord, Retention, RetentionPolicy};
use crate::rows::{RowDamage, StoredRows, compare, missing_row};
use crate::watch::{deadline, past};
use tokio::sync::watch;

/// A [`Store`] in process memory, for tests and embedding experiments.
///
/// It keeps the same promises as the durable backends — atomic compare-and-set commits,
/// idempotent operation ids, only batches the kernel folded (a [`Commit`]), the same
/// cross-goal queries and the same retention — and passes the same conformance suite. It keeps
/// each goal's current state folded, so `load` is a clone. Nothing survives the process.
///
/// [`Store::changed`] wakes through an in-process notification the moment a commit moves a
/// watched goal (it needs a tokio runtime with its timer enabled for the timeout).
///
/// It bounds commit times by the system clock ([`StoreClock::System`]); a store for tests
/// that move time is made with [`MemoryStore::with_test_clock`].
///
/// A `MemoryStore` is `Send + Sync`; share it behind an `Arc`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    clock: StoreClock,
    /// Counts commits that moved a goal, so that [`Store::changed`] wakes on them.
    commits: watch::Sender<u64>,
    /// When this store compacts a goal on its own.
    retention: RetentionPolicy,
}

#[derive(Debug, Default)]
struct Inner {
    goals: BTreeMap<GoalId, Goal>,
    /// Goals by registered agent.
    by_agent: BTreeMap<AgentId, BTreeSet<GoalId>>,
    /// Goals by followed subject.
    by_subject: BTreeMap<Subject, BTreeSet<GoalId>>,
    /// Goals by the start of their index window.
    from: BTreeSet<(Timestamp, GoalId)>,
    /// Goals by the end of their index window (goals without one are absent).
    until: BTreeSet<(Timestamp, GoalId)>,
    /// The dead letters, by goal and operation.
    dead_letters: BTreeMap<(GoalId, OperationId), DeadLetter>,
}

#[derive(Debug)]
struct Goal {
    state: GoalState,
    /// The kept events: revisions `base + 1 ..= state.revision`.
    events: Vec<RecordedEvent>,
    /// The compaction base, if the goal was compacted.
    base: Option<Snapshot>,
    /// The events compaction moved out: revisions `1 ..= base`.
    archive: Vec<RecordedEvent>,
    /// Operations by id, as positions in `operations`.
    receipts: HashMap<OperationId, usize>,
    /// Every operation ever committed, in commit order.
    operations: Vec<OperationRecord>,
    projection: Projection,
    /// The time of the latest event.
    updated_at: Timestamp,
}

impl Goal {
    fn base_revision(&self) -> u64 {
        self.base.as_ref().map_or(0, |b| b.state.revision)
    }
}

impl MemoryStore {
    /// An empty store on the system clock: a commit stamped later than the system clock plus
    /// the goal's `clock_skew` is refused (`clock_ahead`).
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// An empty store on a test clock ([`StoreClock::Test`]): it follows the times it is
    /// given, for tests and simulations that move time on a manual clock.
    pub fn with_test_clock() -> Self {
        MemoryStore {
            clock: StoreClock::Test,
            ..MemoryStore::default()
        }
    }

    /// This store, compacting goals on its own by `policy` (default
    /// [`RetentionPolicy::default`]; [`RetentionPolicy::off`] for never).
    #[must_use]
    pub fn with_retention(mut self, policy: RetentionPolicy) -> Self {
        self.retention = policy;
        self
    }

    /// The clock this store bounds commit times by.
    pub fn clock(&self) -> StoreClock {
        self.clock
    }

    /// The append under the store's one lock (it is not held across an await).
    fn commit(&self, commit: Commit) -> Result<Appended, StoreError> {
        let (request, state) = commit.into_parts();
        let mut inner = self.lock();
        let existing = inner.goals.get(&request.goal);
        if let Some(position) = existing.and_then(|g| g.receipts.get(&request.operation))
            && let Some(first) = existing.and_then(|g| g.operations.get(*position))
        {
            return same_operation(first.receipt.clone(), &request).map(Appended::Replayed);
        }
        self.clock.check(&request)?;
        let current = existing.map_or(0, |g| g.state.revision);
        if current != request.expected_revision {
            return Err(StoreError::Conflict {
                expected: request.expected_revision,
                current,
            });
        }
        let receipt = receipt(&request, &state);
        let changed = !request.events.is_empty();
        let projection = Projection::compute(&state, receipt.committed_at);
        let record = OperationRecord {
            receipt: receipt.clone(),
            actor: request.events.first().map(|e| e.actor.clone()),
            events: kinds(&request.events),
            authorship: request.authorship.clone(),
        };
        let id = request.goal.clone();
        let updated_at = receipt.committed_at;
        if let Some(goal) = inner.goals.get_mut(&id) {
            goal.state = state;
            goal.events.extend(request.events);
            goal.receipts
                .insert(request.operation, goal.operations.len());
            goal.operations.push(record);
            goal.updated_at = updated_at;
        } else {
            let goal = Goal {
                state,
                events: request.events,
                base: None,
                archive: Vec::new(),
                receipts: HashMap::from([(request.operation, 0)]),
                operations: vec![record],
                projection: projection.clone(),
                updated_at,
            };
            inner.goals.insert(id.clone(), goal);
        }
        if changed {
            inner.install(&id, &projection);
        }
        Ok(Appended::Committed(receipt))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update below is computed first and installed without a fallible step, so a
        // poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn install(&mut self, id: &GoalId, projection: &Projection) {
        let old = self
            .goals
            .get_mut(id)
            .map(|goal| std::mem::replace(&mut goal.projection, projection.clone()));
        if let Some(old) = &old {
            self.from.remove(&(old.valid_from, id.clone()));
            if let Some(until) = old.summary.next_wake {
                self.until.remove(&(until, id.clone()));
            }
            for agent in old.agents.difference(&projection.agents) {
                if let Some(goals) = self.by_agent.get_mut(agent) {
                    goals.remove(id);
                }
            }
            for subject in old.subjects.difference(&projection.subjects) {
                if let Some(goals) = self.by_subject.get_mut(subject) {
                    goals.remove(id);
                    if goals.is_empty() {
                        self.by_subject.remove(subject);
                    }
                }
            }
        }
        self.from.insert((projection.valid_from, id.clone()));
        if let Some(until) = projection.summary.next_wake {
            self.until.insert((until, id.clone()));
        }
        for agent in &projection.agents {
            self.by_agent
                .entry(agent.clone())
                .or_default()
                .insert(id.clone());
        }
        for subject in &projection.subjects {
            self.by_subject
                .entry(subject.clone())
                .or_default()
                .insert(id.clone());
        }
    }

    /// Recomputes the rows of every goal whose window does not cover `now`.
    fn refresh(&mut self, now: Timestamp) {
        let stale: BTreeSet<GoalId> = self
            .until
            .iter()
            .take_while(|(until, _)| *until <= now)
            .chain(self.from.iter().rev().take_while(|(from, _)| *from > now))
            .map(|(_, id)| id.clone())
            .collect();
        for id in stale {
            if let Some(goal) = self.goals.get(&id) {
                let projection = Projection::compute(&goal.state, now);
                self.install(&id, &projection);
            }
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn load(&self, goal: &GoalId) -> Result<Option<GoalState>, StoreError> {
        Ok(self.lock().goals.get(goal).map(|g| g.state.clone()))
    }

    /// Under the store's one lock: the first append of an operation commits, every later one
    /// replays. Never ambiguous, so [`Store::resolve`] keeps its default.
    #[tracing::instrument(name = "commit", skip_all, fields(goal = %commit.request().goal, revision = commit.state().revision))]
    async fn append(&self, commit: Commit) -> Result<Appended, StoreError> {
        let appended = self.commit(commit)?;
        if let Appended::Committed(receipt) = &appended
            && receipt.events > 0
        {
            self.commits.send_modify(|n| *n = n.wrapping_add(1));
            crate::retention::retain(self, receipt).await;
        }
        Ok(appended)
    }

    async fn receipt(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        let inner = self.lock();
        Ok(inner.goals.get(goal).and_then(|g| {
            g.receipts
                .get(operation)
                .and_then(|p| g.operations.get(*p))
                .map(|r| r.receipt.clone())
        }))
    }

    async fn events(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let inner = self.lock();
        let Some(goal) = inner.goals.get(goal) else {
            return Ok(Vec::new());
        };
        let skip =
            usize::try_from(after.saturating_sub(goal.base_revision())).unwrap_or(usize::MAX);
        Ok(goal.events.iter().skip(skip).take(limit).cloned().collect())
    }

    /// The base snapshot (or the genesis) with the kept events up to `revision` folded on,
    /// outside the store's lock.
    async fn state_at(
        &self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<PastState>, StoreError> {
        let (base, events) = {
            let inner = self.lock();
            let Some(entry) = inner.goals.get(goal) else {
                return Ok(None);
            };
            let (base, head) = (entry.base_revision(), entry.state.revision);
            // A memory store's archive starts at the goal's creation.
            let earliest = if entry.archive.is_empty() {
                base.max(1)
            } else {
                1
            };
            if revision < earliest || revision > head {
                return Ok(Some(PastState::Unavailable { earliest, head }));
            }
            if revision == head {
                return Ok(Some(PastState::Kept(Box::new(entry.state.clone()))));
            }
            let wanted = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            if revision < base {
                let archived = entry.archive.iter().take(wanted(revision)).cloned();
                (None, archived.collect::<Vec<RecordedEvent>>())
            } else {
                let events = entry.events.iter().take(wanted(revision - base)).cloned();
                (
                    entry.base.as_ref().map(|b| b.state.clone()),
                    events.collect(),
                )
            }
        };
        let state = match base {
            Some(mut state) => {
                for event in &events {
                    state.apply(event).map_err(|e| unfoldable(goal, &e))?;
                }
                state
            }
            None => GoalState::replay(events.iter()).map_err(|e| unfoldable(goal, &e))?,
        };
        Ok(Some(PastState::Kept(Box::new(state))))
    }

    async fn latest_operations(
        &self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .goals
            .get(goal)
            .map(|g| {
                g.operations
                    .iter()
                    .rev()
                    .filter(|r| r.receipt.revision <= up_to)
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn goals(&self, now: Timestamp) -> Result<Vec<GoalSummary>, StoreError> {
        let mut inner = self.lock();
        inner.refresh(now);
        Ok(inner
            .goals
            .values()
            .map(|g| g.projection.summary.clone())
            .collect())
    }

    async fn frontier(
        &self,
        agent: &AgentId,
        now: Timestamp,
    ) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
        let mut inner = self.lock();
        inner.refresh(now);
        let per_goal = inner
            .by_agent
            .get(agent)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                let todos = inner.goals.get(id)?.projection.frontier.get(agent)?;
                Some((id, todos.as_slice()))
            });
        Ok(merge_frontiers(per_goal))
    }

    async fn keep_dead_letter(&self, letter: DeadLetter) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (letter.goal.clone(), letter.operation.clone());
        let kept = match inner.dead_letters.remove(&key) {
            Some(old) => old.refused_again(letter),
            None => letter,
        };
        inner.dead_letters.insert(key, kept);
        Ok(())
    }

    async fn dead_letters(&self, limit: usize) -> Result<DeadLetters, StoreError> {
        let inner = self.lock();
        let mut letters: Vec<DeadLetter> = inner.dead_letters.values().cloned().collect();
        letters.sort_by(crate::dead_letter::order);
        let total = u64::try_from(letters.len()).unwrap_or(u64::MAX);
        letters.truncate(limit);
        Ok(DeadLetters { letters, total })
    }

    async fn drop_dead_letter(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        let key = (goal.clone(), operation.clone());
        Ok(self.lock().dead_letters.remove(&key).is_some())
    }

    async fn next_wake(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let mut inner = self.lock();
        inner.refresh(now);
        Ok(inner.until.first().map(|(until, _)| *until))
    }

    /// From the store's index of goals by followed subject.
    async fn watching(
        &self,
        subjects: &[Subject],
        now: Timestamp,
    ) -> Result<Vec<GoalId>, StoreError> {
        let mut inner = self.lock();
        inner.refresh(now);
        let found: BTreeSet<&GoalId> = subjects
            .iter()
            .filter_map(|subject| inner.by_subject.get(subject))
            .flatten()
            .filter(|id| {
                inner
                    .goals
                    .get(*id)
                    .is_some_and(|g| g.projection.summary.status != GoalStatus::Abandoned)
            })
            .collect();
        Ok(found.into_iter().cloned().collect())
    }

    async fn changed(
        &self,
        watch: &[(GoalId, u64)],
        timeout: Duration,
    ) -> Result<Vec<GoalId>, StoreError> {
        let deadline = deadline(timeout)?;
        // Subscribe before looking, so a commit between the look and the wait still wakes us.
        let mut commits = self.commits.subscribe();
        loop {
            let moved = {
                let inner = self.lock();
                past(watch, |goal| {
                    inner.goals.get(goal).map_or(0, |g| g.state.revision)
                })
            };
            if !moved.is_empty() {
                return Ok(moved);
            }
            match tokio::time::timeout_at(deadline, commits.changed()).await {
                // The sender lives as long as the store, which outlives this call.
                Ok(_) => {}
                Err(_) => return Ok(Vec::new()),
            }
        }
    }
}

#[async_trait]
impl Retention for MemoryStore {
    async fn compact(&self, goal: &GoalId, keep_after: u64) -> Result<Compaction, StoreError> {
        let mut inner = self.lock();
        let entry = inner
            .goals
            .get_mut(goal)
            .ok_or_else(|| StoreError::UnknownGoal { goal: goal.clone() })?;
        let base = entry.base_revision();
        let target = keep_after.min(entry.state.revision);
        if target <= base {
            return Ok(Compaction {
                goal: goal.clone(),
                base_revision: base,
                events_removed: 0,
            });
        }
        let cut = usize::try_from(target - base).unwrap_or(usize::MAX);
        let folded = match &entry.base {
            Some(snapshot) => {
                let mut state = snapshot.state.clone();
                for event in entry.events.iter().take(cut) {
                    state.apply(event).map_err(|e| unfoldable(goal, &e))?;
                }
                state
            }
            None => GoalState::replay(entry.events.iter().take(cut))
                .map_err(|e| unfoldable(goal, &e))?,
        };
        entry.base = Some(folded.snapshot());
        let moved: Vec<RecordedEvent> = entry.events.drain(..cut).collect();
        let removed = moved.len() as u64;
        entry.archive.extend(moved);
        Ok(Compaction {
            goal: goal.clone(),
            base_revision: target,
            events_removed: removed,
        })
    }

    async fn base(&self, goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        Ok(self.lock().goals.get(goal).and_then(|g| g.base.clone()))
    }

    async fn archived(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .goals
            .get(goal)
            .map(|g| {
                let skip = usize::try_from(after).unwrap_or(usize::MAX);
                g.archive.iter().skip(skip).take(limit).cloned().collect()
            })
            .unwrap_or_default())
    }

    /// A memory store's archive starts at each goal's creation.
    async fn archive_origin(&self, _goal: &GoalId) -> Result<Option<Snapshot>, StoreError> {
        Ok(None)
    }

    fn policy(&self) -> RetentionPolicy {
        self.retention
    }

    async fn operations(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .goals
            .get(goal)
            .map(|g| {
                g.operations
                    .iter()
                    .filter(|r| r.receipt.revision > after)
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The memory backend's derived rows are its kept projection of each goal; it keeps no
    /// periodic snapshots (its base is its one snapshot).
    async fn check_rows(
        &self,
        state: &GoalState,
        now: Timestamp,
    ) -> Result<Vec<RowDamage>, StoreError> {
        let inner = self.lock();
        let Some(entry) = inner.goals.get(&state.spec.id) else {
            return Ok(vec![missing_row(&state.spec.id)]);
        };
        let projection = &entry.projection;
        let base = entry.base_revision();
        let mut frontier = BTreeMap::new();
        for (agent, todos) in &projection.frontier {
            frontier.insert(agent.as_str().to_owned(), encode(todos)?);
        }
        let stored = StoredRows {
            revision: entry.state.revision,
            objective: projection.summary.objective.clone(),
            status: status_name(projection.summary.status).to_owned(),
            valid_from: projection.valid_from,
            valid_until: projection.summary.next_wake,
            base_revision: base,
            snapshot_revision: base,
            snapshots: (base > 0).then_some(base).into_iter().collect(),
            agents: projection
                .agents
                .iter()
                .map(|a| a.as_str().to_owned())
                .collect(),
            frontier,
            subjects: projection
                .subjects
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
        };
        compare(&stored, state, now)
    }

    async fn stored_goals(&self) -> Result<Vec<GoalId>, StoreError> {
        Ok(self.lock().goals.keys().cloned().collect())
    }

    /// Every row of the memory backend lives inside its goal: none can lose its goal.
    async fn orphans(&self) -> Result<Vec<RowDamage>, StoreError> {
        Ok(Vec::new())
    }
}
