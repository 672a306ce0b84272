//! A small per-handle cache of folded goal states, keyed by goal and revision.
//!
//! A goal's history up to a revision never changes once committed (compaction folds it into a
//! snapshot of the same state), so a state folded at revision `r` stays the state at `r`. A
//! load reads the goal's current revision from the database first and uses the cached state
//! only when it is at exactly that revision. A cached state at an older revision is still a
//! valid starting point: a load then reads only the events after it and folds them on (see
//! [`StateCache::behind`]), instead of decoding the snapshot and the whole tail again.
//!
//! A state this handle committed also keeps the index rows the commit wrote, so that the next
//! commit can tell which rows change without reading them back (see [`StateCache::known`]).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use loopx_kernel::{GoalId, GoalState};

use crate::index::Projection;

/// How many goals' folded states a store handle keeps by default: enough for a host or a
/// service watching a thousand goals to list them all from memory (each entry is one goal's
/// folded state).
pub const DEFAULT_CACHED_GOALS: usize = 1024;

/// Bounded: the oldest entry goes when it is full.
#[derive(Debug)]
pub(crate) struct StateCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

/// What a cache holds about a goal at one revision, besides its state: see
/// [`StateCache::known`].
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// The revision of the goal's latest snapshot when the state was cached.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub snapshot_revision: u64,
    /// Whether the goal's registered agents are the ones asked about.
    pub same_agents: bool,
    /// Whether the subjects the goal follows are the ones asked about.
    pub same_subjects: bool,
    /// The index rows this handle wrote with the commit that made the state, if it did.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub rows: Option<Arc<Projection>>,
}

#[derive(Debug)]
struct Entry {
    state: GoalState,
    /// The chain head at the state's revision, when known: a load folds later rows onto the
    /// state only when it can check them against it.
    head: Option<[u8; 32]>,
    /// The revision of the goal's latest snapshot when the state was cached.
    snapshot_revision: u64,
    /// The index rows this handle wrote with the commit that made the state, if it did.
    rows: Option<Arc<Projection>>,
}

#[derive(Debug, Default)]
struct Inner {
    states: HashMap<GoalId, Entry>,
    order: VecDeque<GoalId>,
}

impl StateCache {
    pub(crate) fn new(capacity: usize) -> Self {
        StateCache {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    /// The cached state of `goal` if it is at `revision`.
    pub(crate) fn get(&self, goal: &GoalId, revision: u64) -> Option<GoalState> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .states
            .get(goal)
            .filter(|entry| entry.state.revision == revision)
            .map(|entry| entry.state.clone())
    }

    /// The cached state of `goal`, whatever its revision.
    pub(crate) fn newest(&self, goal: &GoalId) -> Option<GoalState> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.states.get(goal).map(|entry| entry.state.clone())
    }

    /// The revision of the cached state of `goal`, if one is cached.
    pub(crate) fn latest_revision(&self, goal: &GoalId) -> Option<u64> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.states.get(goal).map(|entry| entry.state.revision)
    }

    /// The cached state of `goal` when it is older than `revision`, with the chain head at its
    /// revision: the caller folds the events after it on, checking them against the chain.
    /// `None` when nothing, or nothing older with a known head, is cached.
    pub(crate) fn behind(&self, goal: &GoalId, revision: u64) -> Option<(GoalState, [u8; 32])> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .states
            .get(goal)
            .filter(|entry| entry.state.revision < revision)
            .and_then(|entry| Some((entry.state.clone(), entry.head?)))
    }

    /// What the cache knows of `goal` at `revision`: the revision of its latest snapshot when
    /// the state was cached, whether its registered agents and followed subjects are `next`'s
    /// (the state after the commit), and the index rows
    /// this handle's commit wrote when it made that revision. Rows for a revision are the same
    /// at every instant of their window, and the window's start (`valid_from`) names it, so
    /// they are the stored rows whenever the goal row still shows that revision and that start;
    /// a refresh recomputes rows only outside their window, and so writes another start.
    pub(crate) fn known(&self, goal: &GoalId, revision: u64, next: &GoalState) -> Option<Known> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .states
            .get(goal)
            .filter(|entry| entry.state.revision == revision)
            .map(|entry| Known {
                snapshot_revision: entry.snapshot_revision,
                same_agents: entry.state.spec.agents == next.spec.agents,
                same_subjects: entry.state.watched_subjects() == next.watched_subjects(),
                rows: entry.rows.clone(),
            })
    }

    /// Keeps `state`, whose goal's latest snapshot is at `snapshot_revision` and whose chain
    /// head is `head` (when known), unless a newer state of the goal is cached.
    pub(crate) fn put(&self, state: &GoalState, snapshot_revision: u64, head: Option<[u8; 32]>) {
        self.keep(Cow::Borrowed(state), snapshot_revision, head, None);
    }

    /// Like [`put`](Self::put), taking the state over instead of copying it.
    pub(crate) fn put_owned(
        &self,
        state: GoalState,
        snapshot_revision: u64,
        head: Option<[u8; 32]>,
    ) {
        self.keep(Cow::Owned(state), snapshot_revision, head, None);
    }

    /// Like [`put_owned`](Self::put_owned), for a state this handle just committed together
    /// with `rows`, the index rows it wrote.
    pub(crate) fn put_committed(
        &self,
        state: GoalState,
        snapshot_revision: u64,
        head: Option<[u8; 32]>,
        rows: Projection,
    ) {
        self.keep(
            Cow::Owned(state),
            snapshot_revision,
            head,
            Some(Arc::new(rows)),
        );
    }

    fn keep(
        &self,
        state: Cow<'_, GoalState>,
        snapshot_revision: u64,
        head: Option<[u8; 32]>,
        rows: Option<Arc<Projection>>,
    ) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let goal = state.spec.id.clone();
        let newer = inner
            .states
            .get(&goal)
            .is_none_or(|cached| cached.state.revision < state.revision);
        if !newer {
            return;
        }
        if inner
            .states
            .insert(
                goal.clone(),
                Entry {
                    state: state.into_owned(),
                    head,
                    snapshot_revision,
                    rows,
                },
            )
            .is_none()
        {
            inner.order.push_back(goal);
            while inner.order.len() > self.capacity {
                if let Some(oldest) = inner.order.pop_front() {
                    inner.states.remove(&oldest);
                }
            }
        }
    }
}
