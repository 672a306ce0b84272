//! A store wrapper that runs a hook around every append — fault injection in tests (a
//! competing commit, a process that stands still mid-commit), metrics or tracing in hosts —
//! and forwards everything else unchanged.

use async_trait::async_trait;
use loopx_kernel::seams::{
    AppendRequest, Appended, Commit, DeadLetter, DeadLetters, GoalSummary, OperationRecord,
    PastState, Receipt, Store, StoreError,
};
use loopx_kernel::{
    AgentId, Duration, GoalId, GoalState, OperationId, RecordedEvent, Subject, Timestamp, TodoId,
};

/// What runs around an append of the store `S`; both methods do nothing by default.
#[async_trait]
pub trait AppendHook<S: Sync + ?Sized>: Send + Sync {
    /// Runs before the append is forwarded to `store`.
    async fn before(&self, store: &S, request: &AppendRequest) {
        let _ = (store, request);
    }

    /// Runs after the append returned (committed, or replayed the first receipt), before its
    /// answer is returned.
    async fn after(&self, store: &S, request: &AppendRequest, appended: &Appended) {
        let _ = (store, request, appended);
    }
}

/// `inner` with `hook` around each append (the commit's request is cloned for the hook).
#[derive(Debug)]
pub struct Hooked<S, H> {
    /// The store every call is forwarded to.
    pub inner: S,
    /// What runs around appends.
    pub hook: H,
}

#[async_trait]
impl<S: Store, H: AppendHook<S>> Store for Hooked<S, H> {
    async fn load(&self, goal: &GoalId) -> Result<Option<GoalState>, StoreError> {
        self.inner.load(goal).await
    }

    fn cached(&self, goal: &GoalId) -> Option<GoalState> {
        self.inner.cached(goal)
    }

    async fn append(&self, commit: Commit) -> Result<Appended, StoreError> {
        let request = commit.request().clone();
        self.hook.before(&self.inner, &request).await;
        let appended = self.inner.append(commit).await?;
        self.hook.after(&self.inner, &request, &appended).await;
        Ok(appended)
    }

    async fn resolve(
        &self,
        goal: &GoalId,
        operation: &OperationId,
        attempt: &str,
    ) -> Result<Option<Appended>, StoreError> {
        self.inner.resolve(goal, operation, attempt).await
    }

    async fn receipt(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<Option<Receipt>, StoreError> {
        self.inner.receipt(goal, operation).await
    }

    async fn events(
        &self,
        goal: &GoalId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        self.inner.events(goal, after, limit).await
    }

    async fn state_at(
        &self,
        goal: &GoalId,
        revision: u64,
    ) -> Result<Option<PastState>, StoreError> {
        self.inner.state_at(goal, revision).await
    }

    async fn latest_operations(
        &self,
        goal: &GoalId,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, StoreError> {
        self.inner.latest_operations(goal, up_to, limit).await
    }

    async fn goals(&self, now: Timestamp) -> Result<Vec<GoalSummary>, StoreError> {
        self.inner.goals(now).await
    }

    async fn frontier(
        &self,
        agent: &AgentId,
        now: Timestamp,
    ) -> Result<Vec<(GoalId, TodoId)>, StoreError> {
        self.inner.frontier(agent, now).await
    }

    async fn next_wake(&self, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.inner.next_wake(now).await
    }

    async fn keep_dead_letter(&self, letter: DeadLetter) -> Result<(), StoreError> {
        self.inner.keep_dead_letter(letter).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<DeadLetters, StoreError> {
        self.inner.dead_letters(limit).await
    }

    async fn drop_dead_letter(
        &self,
        goal: &GoalId,
        operation: &OperationId,
    ) -> Result<bool, StoreError> {
        self.inner.drop_dead_letter(goal, operation).await
    }

    async fn watching(
        &self,
        subjects: &[Subject],
        now: Timestamp,
    ) -> Result<Vec<GoalId>, StoreError> {
        self.inner.watching(subjects, now).await
    }

    async fn changed(
        &self,
        watch: &[(GoalId, u64)],
        timeout: Duration,
    ) -> Result<Vec<GoalId>, StoreError> {
        self.inner.changed(watch, timeout).await
    }
}
