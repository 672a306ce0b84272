//! Todos, their leases and the workspace guard's vocabulary.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::{Amounts, Ledger, Limits};
use crate::ids::{
    AgentId, DecisionScope, EvidenceId, Fingerprint, GateId, ObservationKey, TodoId, TurnId,
};
use crate::time::{Duration, Timestamp};

/// Priority; `P0` is the most urgent. The frontier orders by priority, then creation order.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Priority {
    /// Drop everything.
    P0,
    /// Next.
    P1,
    /// Normal.
    #[default]
    P2,
    /// Later.
    P3,
    /// Someday.
    P4,
}

/// What kind of work a todo is.
///
/// JSON: `{"kind": "advance"}`, `{"kind": "monitor", "watches": …, "cadence": …}`,
/// `{"kind": "review", "of": …}` (an internally tagged enum, decoded by hand so that the
/// usual tag-first form is read without buffering; it accepts exactly what serde's derived
/// decoder accepts).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TodoClass {
    /// Work that moves the goal forward.
    Advance,
    /// A read-only poll of one observation stream, runnable only when due.
    Monitor(MonitorSpec),
    /// Review of another todo's result; never offered to the agent who completed it.
    Review {
        /// The todo under review.
        of: TodoId,
    },
}

/// How a monitor polls.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    /// The observation stream it watches.
    pub watches: ObservationKey,
    /// Time between polls.
    pub cadence: Duration,
}

/// A monitor's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorState {
    /// When the next poll is due.
    pub next_due: Timestamp,
    /// Unchanged polls in a row.
    pub no_change_streak: u32,
}

/// What a todo writes, for the workspace guard. Scopes are path prefixes inside the repository;
/// an empty string or `.` is the whole repository.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteSet {
    /// The repository, e.g. `github.com/acme/cli`.
    pub repository: String,
    /// Path prefixes written.
    pub scopes: BTreeSet<String>,
}

impl WriteSet {
    /// True when both write the same repository and some scope of one contains a scope of the
    /// other (path-component-wise).
    pub fn overlaps(&self, other: &WriteSet) -> bool {
        self.repository == other.repository
            && self
                .scopes
                .iter()
                .any(|a| other.scopes.iter().any(|b| scopes_overlap(a, b)))
    }
}

fn scopes_overlap(a: &str, b: &str) -> bool {
    // Compared component by component without allocating: the workspace guard runs this for
    // every live lease against every writing candidate.
    fn parts(s: &str) -> impl Iterator<Item = &str> {
        s.split('/').filter(|c| !c.is_empty() && *c != ".")
    }
    parts(a).zip(parts(b)).all(|(x, y)| x == y)
}

/// Where an agent's turn runs, as the git provider reads it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// `git rev-parse --show-toplevel`: one checkout.
    pub top_level: String,
    /// `git rev-parse --git-common-dir`: shared by all worktrees of one clone.
    pub common_dir: String,
}

/// A todo's lifecycle status. "Running" is not a status: it is derived from a live lease with a
/// turn in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum TodoStatus {
    /// Ready to be worked on once its dependencies, gates and budget allow.
    Open,
    /// A known blocking fact; only an explicit unblock (or a replan) moves it.
    Blocked {
        /// What blocks it.
        reason: String,
    },
    /// Set aside until a typed condition holds.
    Deferred {
        /// When it may resume.
        until: ResumeCondition,
        /// For [`ResumeCondition::ObservationChanged`]: the fingerprint at deferral.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        baseline: Option<Fingerprint>,
    },
    /// Completed, with exactly one continuation.
    Done {
        /// What follows.
        continuation: ContinuationRecord,
        /// The agent that completed it.
        by: AgentId,
        /// The turn that completed it.
        turn: TurnId,
        /// When.
        at: Timestamp,
    },
    /// Replaced; never runs again.
    Superseded {
        /// Why.
        reason: String,
        /// The todo that replaces it, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replacement: Option<TodoId>,
    },
}

impl TodoStatus {
    /// True for done and superseded: the todo will never run again.
    pub fn is_closed(&self) -> bool {
        matches!(
            self,
            TodoStatus::Done { .. } | TodoStatus::Superseded { .. }
        )
    }

    /// A stable short name (`open`, `blocked`, `deferred`, `done`, `superseded`).
    pub fn name(&self) -> &'static str {
        match self {
            TodoStatus::Open => "open",
            TodoStatus::Blocked { .. } => "blocked",
            TodoStatus::Deferred { .. } => "deferred",
            TodoStatus::Done { .. } => "done",
            TodoStatus::Superseded { .. } => "superseded",
        }
    }
}

/// A typed condition under which a deferred todo may resume. Each is decided from recorded
/// facts only; prose never resumes anything.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResumeCondition {
    /// At or after an instant.
    At {
        /// The instant.
        at: Timestamp,
    },
    /// Once another todo is done.
    TodoDone {
        /// That todo.
        todo: TodoId,
    },
    /// Once a gate is no longer pending (answered, rejected, expired or withdrawn).
    GateSettled {
        /// That gate.
        gate: GateId,
    },
    /// Once an observation stream's fingerprint differs from the one at deferral.
    ObservationChanged {
        /// The stream.
        key: ObservationKey,
    },
}

/// The one continuation recorded with every completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    content = "todos",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum ContinuationRecord {
    /// These successors carry the work on.
    Successors(Vec<TodoId>),
    /// Nothing follows; this is also an explicit intent to close the goal.
    NoFollowUp,
    /// The goal stays active; the next decision finds the next step.
    GoalStillActive,
}

/// A fenced claim on a todo. At most one per todo; the epoch strictly increases on every
/// acquire, takeover and handoff, and every settlement must present the current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// Who holds it.
    pub holder: AgentId,
    /// The fencing token.
    pub epoch: u64,
    /// When it was acquired (or handed over).
    pub acquired_at: Timestamp,
    /// It is live strictly before this instant.
    pub expires_at: Timestamp,
    /// The holder's workspace, for writing todos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// The turn prepared under this lease, if one has begun. A lease runs at most one turn and
    /// ends with it (settled, released, or resolved by readback; a takeover keeps both under a
    /// new epoch), and a settlement must present the lease's epoch: so a turn is charged at
    /// most once without the goal remembering every turn id it ever ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnInFlight>,
}

impl Lease {
    /// Live strictly before its expiry.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// A turn that has begun (its budget reserved) and not settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnInFlight {
    /// The turn.
    pub id: TurnId,
    /// The lease epoch it began under, kept when a session takes it over under a newer one:
    /// with the todo, what tells this run of the turn id from any other (the outbox makes its
    /// effects' idempotency keys from it). 0 for a turn begun under event schema 1, before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub began_under: u64,
    /// When it began.
    pub begun_at: Timestamp,
    /// What it reserved.
    pub reserved: Amounts,
}

/// What a handoff carries, so the receiver needs nothing from the sender's context.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffNote {
    /// The very next action.
    pub next_action: String,
    /// When to stop.
    pub stop_condition: String,
    /// The evidence the work rests on.
    #[serde(default)]
    pub evidence: Vec<EvidenceId>,
}

/// A todo as a command creates it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTodo {
    /// Its id, unique in the goal.
    pub id: TodoId,
    /// What to do.
    pub title: String,
    /// What kind of work.
    pub class: TodoClass,
    /// Urgency.
    #[serde(default)]
    pub priority: Priority,
    /// Todos that must be done first.
    #[serde(default)]
    pub depends_on: BTreeSet<TodoId>,
    /// Decisions that must be settled (by a resolved gate) before it runs.
    #[serde(default)]
    pub requires_decisions: BTreeSet<DecisionScope>,
    /// Agents that may never take it.
    #[serde(default)]
    pub excluded_agents: BTreeSet<AgentId>,
    /// The agent that should take it (a successor for a specific agent).
    #[serde(default)]
    pub assignee: Option<AgentId>,
    /// What it writes; `None` for read-only work, which the workspace guard never blocks.
    #[serde(default)]
    pub writes: Option<WriteSet>,
    /// Re-running it after an unknown outcome is safe.
    #[serde(default)]
    pub idempotent: bool,
    /// An optional per-todo budget, on top of the goal's.
    #[serde(default)]
    pub budget: Option<Limits>,
    /// What one turn of it is expected to use, reserved when each turn begins in place of the
    /// goal policy's `default_reservation` (always as exactly one turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_usage: Option<Box<Amounts>>,
}

impl NewTodo {
    /// An open advancement todo at normal priority with nothing else set.
    pub fn advance(id: TodoId, title: impl Into<String>) -> Self {
        NewTodo {
            id,
            title: title.into(),
            class: TodoClass::Advance,
            priority: Priority::default(),
            depends_on: BTreeSet::new(),
            requires_decisions: BTreeSet::new(),
            excluded_agents: BTreeSet::new(),
            assignee: None,
            writes: None,
            idempotent: false,
            budget: None,
            expected_usage: None,
        }
    }
}

/// A todo as the goal holds it. Sets are sorted vectors and rarely present parts are boxed,
/// and left out of the JSON when empty: a goal may hold hundreds of thousands of todos, most of
/// them long done, and its snapshot is decoded on every cold load.
///
/// Its JSON holds the status's fields alongside its own (`"status": "done", "by": …`); it is
/// decoded by hand, in one pass without buffering, accepting what serde's derived decoder with
/// `#[serde(flatten)]` on `status` accepts, less unknown keys (refused under every status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Todo {
    /// Its id.
    pub id: TodoId,
    /// What to do.
    pub title: String,
    /// What kind of work.
    pub class: TodoClass,
    /// Urgency.
    pub priority: Priority,
    /// Todos that must be done first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<TodoId>,
    /// Decisions a resolved gate must settle first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_decisions: Vec<DecisionScope>,
    /// Agents that may never take it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_agents: Vec<AgentId>,
    /// The agent it is meant for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AgentId>,
    /// What it writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<Box<WriteSet>>,
    /// Safe to re-run after an unknown outcome.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub idempotent: bool,
    /// Its own budget, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<Ledger>>,
    /// What one turn of it is expected to use, if it says; each turn reserves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_usage: Option<Box<Amounts>>,
    /// Who created it.
    pub created_by: Actor,
    /// When.
    pub created_at: Timestamp,
    /// Creation order within the goal; ties in priority go to the older todo.
    pub seq: u64,
    /// Lifecycle status.
    #[serde(flatten)]
    pub status: TodoStatus,
    /// The current or last lease (an expired one is kept until released or taken over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Box<Lease>>,
    /// The highest epoch ever issued for this todo.
    pub last_epoch: u64,
    /// Monitor progress, for monitor todos.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorState>,
    /// The note from the last handoff, for the current holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Box<HandoffNote>>,
}

impl Todo {
    /// The turn in flight under its lease (live or expired), if one has begun.
    pub fn turn_in_flight(&self) -> Option<&TurnInFlight> {
        self.lease.as_ref().and_then(|lease| lease.turn.as_ref())
    }

    /// The live lease, if any.
    pub fn live_lease(&self, now: Timestamp) -> Option<&Lease> {
        self.lease.as_deref().filter(|l| l.is_live(now))
    }

    /// True when a live lease has a turn in flight: the derived "running" state.
    pub fn is_running(&self, now: Timestamp) -> bool {
        self.live_lease(now).is_some_and(|l| l.turn.is_some())
    }

    /// True when a lease expired while a turn had begun on work that is not idempotent: the
    /// effect may or may not have happened, so the todo needs a repair before anyone re-runs it.
    pub fn outcome_unknown(&self, now: Timestamp) -> bool {
        !self.idempotent
            && self
                .lease
                .as_ref()
                .is_some_and(|l| !l.is_live(now) && l.turn.is_some())
    }
}
