//! A small per-handle cache of folded goal states, keyed by goal and revision.
//!
//! A goal's history up to a revision never changes once committed (compaction folds it into a
//! snapshot of the same state), so a state folded at revision `r` stays the state at `r`. A
//! load reads the goal's current revision from the database first and uses the cached state
//! only when it is at exactly that revision; otherwise it decodes snapshot and tail as usual.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use loopx_kernel::{GoalId, GoalState};

/// Bounded: the oldest entry goes when it is full.
#[derive(Debug)]
pub(crate) struct StateCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Inner {
    states: HashMap<GoalId, GoalState>,
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
            .filter(|state| state.revision == revision)
            .cloned()
    }

    pub(crate) fn put(&self, state: &GoalState) {
        self.keep(Cow::Borrowed(state));
    }

    /// Like [`put`](Self::put), taking the state over instead of copying it.
    pub(crate) fn put_owned(&self, state: GoalState) {
        self.keep(Cow::Owned(state));
    }

    fn keep(&self, state: Cow<'_, GoalState>) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let goal = state.spec.id.clone();
        let newer = inner
            .states
            .get(&goal)
            .is_none_or(|cached| cached.revision < state.revision);
        if !newer {
            return;
        }
        if inner
            .states
            .insert(goal.clone(), state.into_owned())
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
