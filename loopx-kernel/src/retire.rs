//! Retirement: what a goal's hot state may let go of, so that it stays proportional to its
//! live work however long the goal runs.
//!
//! A goal that runs for months closes todos, records evidence about commits that were
//! replaced, and observes streams keyed by commits that nobody looks at any more. None of it can
//! change a decision again, yet all of it would stay in the state every load decodes and every
//! commit copies. [`GoalState::retirable`] lists what is inert and older than the goal's
//! [`Policy::retire_after`](crate::Policy::retire_after); [`Command::Retire`] records it as one
//! `retired` event, and `apply` drops it. History keeps all of it: the state at any earlier
//! revision still holds what was retired later, and the events that made it are never touched.
//!
//! What counts as inert is decided from the state alone, so validation, replay and every store
//! agree:
//!
//! - a **closed todo** (done before the horizon, or superseded and created before it) with no
//!   lease and no running streak, that no kept todo depends on, waits for, reviews, is replaced
//!   by or names as its successor, and that no pending gate, open obligation, pending effect or
//!   unanswered overrun names;
//! - **evidence** observed before the horizon about a revision its subject has moved past, or
//!   followed by newer evidence of its producer about the same check, subject and revision,
//!   that no criterion's status names and no kept evidence and no kept todo's handoff note
//!   cites;
//! - an **observation stream** last recorded before the horizon whose subject no criterion and
//!   no capability binding follows, that no kept evidence cites or is about, and that no kept
//!   todo monitors or waits on;
//! - a **subject's head** that no criterion or binding follows and that no kept observation or
//!   evidence is about;
//! - an **obligation** discharged before the horizon.
//!
//! A retired todo's id may be used again by a later todo (history tells the two apart by
//! revision); proposals converge on what the goal holds now. The fences stay sound: a retired
//! todo held no lease, every settlement needs its holder's live lease and turn, the engine's
//! turn ids carry the revision they began at, and the goal keeps every effect id it ever
//! intended (`GoalState::used_effects`), so a later todo of the same id can neither settle an
//! earlier one's turn nor repeat its effects' ids.
//!
//! [`Command::Retire`]: crate::Command::Retire

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::evidence::Evidence;
use crate::ids::{EvidenceId, ObligationId, ObservationKey, Subject, TodoId};
use crate::state::GoalState;
use crate::time::Timestamp;
use crate::todo::{ContinuationRecord, ResumeCondition, Todo, TodoClass, TodoStatus};

/// How many inert items make a retirement worth a commit of its own: the engine retires when at
/// least this many are due ([`GoalState::retirement_due`]), so the state carries at most this
/// many inert items beyond its horizon.
pub const RETIRE_BATCH: usize = 64;

/// What one `retired` event drops from the state. Every list is in the state's own order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retirement {
    /// Closed todos.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<TodoId>,
    /// Evidence about revisions its subject has moved past, or replaced by its producer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<EvidenceId>,
    /// Observation streams nothing follows or cites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<ObservationKey>,
    /// Subjects' heads nothing is about any more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<Subject>,
    /// Discharged obligations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligations: Vec<ObligationId>,
}

impl Retirement {
    /// How many items it drops.
    pub fn len(&self) -> usize {
        self.todos.len()
            + self.evidence.len()
            + self.observations.len()
            + self.subjects.len()
            + self.obligations.len()
    }

    /// True when it drops nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl GoalState {
    /// Everything inert at `now` under the goal's
    /// [`retire_after`](crate::Policy::retire_after) (nothing when the policy never retires):
    /// what a `retire` command issued at `now` drops. See the [module](crate::retire) for the
    /// rules.
    pub fn retirable(&self, now: Timestamp) -> Retirement {
        let Some(after) = self.spec.policy.retire_after else {
            return Retirement::default();
        };
        let horizon = now.minus(after);
        let todos = self.retirable_todos(now, horizon);
        let evidence = self.retirable_evidence(now, horizon, &todos);
        let followed = self.followed_subjects();
        let observations = self.retirable_observations(horizon, &followed, &todos, &evidence);
        let subjects = self.retirable_subjects(&followed, &evidence, &observations);
        let obligations = self
            .obligations
            .values()
            .filter(|o| o.discharged.as_ref().is_some_and(|d| d.at < horizon))
            .map(|o| o.id.clone())
            .collect();
        Retirement {
            todos: self
                .todos
                .values()
                .filter(|t| todos.contains(&t.id))
                .map(|t| t.id.clone())
                .collect(),
            evidence: evidence.into_iter().collect(),
            observations: observations.into_iter().collect(),
            subjects: subjects.into_iter().collect(),
            obligations,
        }
    }

    /// True when at least [`RETIRE_BATCH`] items are retirable at `now`.
    pub fn retirement_due(&self, now: Timestamp) -> bool {
        if self.spec.policy.retire_after.is_none() {
            return false;
        }
        // What could be inert at most, counted without looking: most steps stop here.
        let at_most = (self.todos.len() - self.pending_todos().count())
            + self.evidence.len()
            + self.observations.len()
            + self.subjects.len()
            + self.obligations.len();
        at_most >= RETIRE_BATCH && self.retirable(now).len() >= RETIRE_BATCH
    }

    /// Closed todos past the horizon that nothing kept names.
    fn retirable_todos(&self, now: Timestamp, horizon: Timestamp) -> BTreeSet<TodoId> {
        let mut pinned: BTreeSet<&TodoId> = BTreeSet::new();
        for gate in self.gates.values().filter(|g| g.state_at(now).is_pending()) {
            pinned.extend(&gate.scope.todos);
        }
        pinned.extend(
            self.obligations
                .values()
                .filter(|o| o.discharged.is_none())
                .filter_map(|o| o.cause.streak_todo()),
        );
        pinned.extend(self.pending_effects.values().map(|e| &e.todo));
        pinned.extend(self.overrun.iter().map(|o| &o.todo));
        let candidates: BTreeSet<TodoId> = self
            .todos
            .values()
            .filter(|t| closed_before(t, horizon) && t.lease.is_none())
            .filter(|t| !pinned.contains(&t.id) && !self.streaks.contains_key(&t.id))
            .map(|t| t.id.clone())
            .collect();
        unnamed_by_kept(candidates, || self.todos.values(), |t| &t.id, todos_named)
    }

    /// Evidence past the horizon that its subject's head or its producer's newer evidence
    /// replaced, and that nothing kept cites.
    fn retirable_evidence(
        &self,
        now: Timestamp,
        horizon: Timestamp,
        todos: &BTreeSet<TodoId>,
    ) -> BTreeSet<EvidenceId> {
        // The newest piece of each producer about each check, subject and revision: an older
        // one of the same producer can never be what a criterion reads (it reads the newest).
        let mut newest: BTreeMap<_, &Evidence> = BTreeMap::new();
        for e in self.evidence.values() {
            let key = (&e.check, &e.subject, &e.revision, &e.produced_by);
            let entry = newest.entry(key).or_insert(e);
            if (e.observed_at, e.seq) > (entry.observed_at, entry.seq) {
                *entry = e;
            }
        }
        let dominated = |e: &Evidence| {
            newest
                .get(&(&e.check, &e.subject, &e.revision, &e.produced_by))
                .is_some_and(|n| n.id != e.id)
        };
        let replaced = |e: &Evidence| {
            self.subjects
                .get(&e.subject)
                .is_some_and(|head| head.revision != e.revision)
        };
        let mut candidates: BTreeSet<EvidenceId> = self
            .evidence
            .values()
            .filter(|e| e.observed_at < horizon && (replaced(e) || dominated(e)))
            .map(|e| e.id.clone())
            .collect();
        let cited_by_todos: BTreeSet<&EvidenceId> = self
            .todos
            .values()
            .filter(|t| !todos.contains(&t.id))
            .filter_map(|t| t.handoff.as_ref())
            .flat_map(|note| &note.evidence)
            .collect();
        candidates.retain(|id| !cited_by_todos.contains(id));
        // What a criterion's status names (the newest evidence says why it is not met, even
        // about an older revision) stays, so retiring never changes where a criterion stands.
        for (_, status) in self.criteria_status(now) {
            if let Some(id) = status.evidence() {
                candidates.remove(id);
            }
        }
        unnamed_by_kept(
            candidates,
            || self.evidence.values(),
            |e| &e.id,
            |e| &e.inputs.evidence,
        )
    }

    /// Streams past the horizon whose subject nothing follows and that nothing kept cites,
    /// monitors, waits on or is about.
    fn retirable_observations(
        &self,
        horizon: Timestamp,
        followed: &BTreeSet<&Subject>,
        todos: &BTreeSet<TodoId>,
        evidence: &BTreeSet<EvidenceId>,
    ) -> BTreeSet<ObservationKey> {
        let kept_evidence = || self.evidence.values().filter(|e| !evidence.contains(&e.id));
        let cited: BTreeSet<&ObservationKey> = kept_evidence()
            .flat_map(|e| &e.inputs.observations)
            .map(|input| &input.key)
            .chain(
                self.todos
                    .values()
                    .filter(|t| !todos.contains(&t.id))
                    .flat_map(observations_named),
            )
            .collect();
        let evidenced: BTreeSet<&Subject> = kept_evidence().map(|e| &e.subject).collect();
        self.observations
            .values()
            .filter(|o| o.observed_at < horizon)
            .filter(|o| !followed.contains(&o.subject) && !evidenced.contains(&o.subject))
            .filter(|o| !cited.contains(&o.key))
            .map(|o| o.key.clone())
            .collect()
    }

    /// Heads of subjects nothing follows that no kept observation or evidence is about.
    fn retirable_subjects(
        &self,
        followed: &BTreeSet<&Subject>,
        evidence: &BTreeSet<EvidenceId>,
        observations: &BTreeSet<ObservationKey>,
    ) -> BTreeSet<Subject> {
        let about: BTreeSet<&Subject> = self
            .evidence
            .values()
            .filter(|e| !evidence.contains(&e.id))
            .map(|e| &e.subject)
            .chain(
                self.observations
                    .values()
                    .filter(|o| !observations.contains(&o.key))
                    .map(|o| &o.subject),
            )
            .collect();
        self.subjects
            .keys()
            .filter(|s| !followed.contains(*s) && !about.contains(*s))
            .cloned()
            .collect()
    }

    /// The subjects the goal's criteria and capability binding name.
    fn followed_subjects(&self) -> BTreeSet<&Subject> {
        self.spec
            .criteria
            .iter()
            .map(|c| &c.subject)
            .chain(self.spec.capability.iter().flat_map(|b| &b.follows))
            .collect()
    }
}

/// `candidates` less whatever a kept item (one not among them) names, until none does: what a
/// kept item names must stay too, so each round can pin more.
fn unnamed_by_kept<'s, T, K, I, N>(
    mut candidates: BTreeSet<K>,
    items: impl Fn() -> I,
    id: impl Fn(&T) -> &K,
    named_by: impl Fn(&'s T) -> N,
) -> BTreeSet<K>
where
    T: 's,
    K: Ord + Clone + 's,
    I: Iterator<Item = &'s T>,
    N: IntoIterator<Item = &'s K>,
{
    loop {
        let named: BTreeSet<K> = items()
            .filter(|item| !candidates.contains(id(item)))
            .flat_map(&named_by)
            .filter(|k| candidates.contains(*k))
            .cloned()
            .collect();
        if named.is_empty() {
            return candidates;
        }
        candidates.retain(|k| !named.contains(k));
    }
}

/// Done before `horizon`; superseded todos record no time of their own, so by their creation.
fn closed_before(todo: &Todo, horizon: Timestamp) -> bool {
    match &todo.status {
        TodoStatus::Done { at, .. } => *at < horizon,
        TodoStatus::Superseded { .. } => todo.created_at < horizon,
        TodoStatus::Open | TodoStatus::Blocked { .. } | TodoStatus::Deferred { .. } => false,
    }
}

/// The todos a todo names: its dependencies, what it reviews, what it waits on, what replaces
/// it, what succeeds it.
fn todos_named(todo: &Todo) -> impl Iterator<Item = &TodoId> {
    let reviewed = match &todo.class {
        TodoClass::Review { of } => Some(of),
        TodoClass::Advance | TodoClass::Monitor(_) => None,
    };
    let (awaited, successors): (Option<&TodoId>, &[TodoId]) = match &todo.status {
        TodoStatus::Deferred {
            until: ResumeCondition::TodoDone { todo },
            ..
        }
        | TodoStatus::Superseded {
            replacement: Some(todo),
            ..
        } => (Some(todo), &[]),
        TodoStatus::Done {
            continuation: ContinuationRecord::Successors(successors),
            ..
        } => (None, successors),
        _ => (None, &[]),
    };
    todo.depends_on
        .iter()
        .chain(reviewed)
        .chain(awaited)
        .chain(successors)
}

/// The streams a todo monitors and waits on.
fn observations_named(todo: &Todo) -> impl Iterator<Item = &ObservationKey> {
    let watched = match &todo.class {
        TodoClass::Monitor(spec) => Some(&spec.watches),
        TodoClass::Advance | TodoClass::Review { .. } => None,
    };
    let awaited = match &todo.status {
        TodoStatus::Deferred {
            until: ResumeCondition::ObservationChanged { key },
            ..
        } => Some(key),
        _ => None,
    };
    watched.into_iter().chain(awaited)
}
