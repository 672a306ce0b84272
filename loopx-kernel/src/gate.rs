//! Gates: questions for a person or an external authority that block exactly what they cover.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::ids::{DecisionScope, GateId, TodoId};
use crate::time::Timestamp;
use crate::todo::Todo;

/// What a gate blocks while it is pending. A gate blocks only what it covers: independent work
/// stays in the frontier while the question waits (the dual channel).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateScope {
    /// These todos, by id.
    pub todos: BTreeSet<TodoId>,
    /// Todos that require any of these decisions.
    pub decisions: BTreeSet<DecisionScope>,
    /// Every todo of the goal.
    pub whole_goal: bool,
}

impl GateScope {
    /// True when the scope names nothing.
    pub fn is_empty(&self) -> bool {
        !self.whole_goal && self.todos.is_empty() && self.decisions.is_empty()
    }

    /// True when this scope covers the todo.
    pub fn covers(&self, todo: &Todo) -> bool {
        self.whole_goal
            || self.todos.contains(&todo.id)
            || todo
                .requires_decisions
                .iter()
                .any(|d| self.decisions.contains(d))
    }
}

/// What happens when a pending gate passes its deadline.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryPolicy {
    /// The gate expires: covered work stops waiting and needs a replan.
    #[default]
    Expire,
    /// The gate stays pending and is asked again as overdue.
    KeepAsking,
}

/// A gate as a command opens it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGate {
    /// Its id.
    pub id: GateId,
    /// The question, as the owner will read it.
    pub question: String,
    /// Who may answer: a person, or a named authority such as a validator.
    pub owner: Actor,
    /// What it blocks.
    pub scope: GateScope,
    /// When an answer is due.
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// What the deadline does.
    #[serde(default)]
    pub on_expiry: ExpiryPolicy,
}

/// The recorded state of a gate. Expiry is not recorded: it follows from the deadline and the
/// policy at the time of reading (see [`Gate::state_at`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub enum GateStatus {
    /// Waiting for its owner.
    Pending,
    /// Answered yes, with an answer.
    Resolved {
        /// The answer.
        answer: String,
        /// Who answered.
        by: Actor,
        /// When.
        at: Timestamp,
    },
    /// Answered no.
    Rejected {
        /// Why.
        reason: String,
        /// Who rejected.
        by: Actor,
        /// When.
        at: Timestamp,
    },
    /// Taken back by whoever opened it or the goal owner.
    Withdrawn {
        /// Why.
        reason: String,
        /// Who withdrew it.
        by: Actor,
        /// When.
        at: Timestamp,
    },
}

/// The effective state of a gate at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateState {
    /// Waiting, within its deadline.
    Pending,
    /// Waiting past its deadline, asked again ([`ExpiryPolicy::KeepAsking`]).
    Overdue,
    /// Answered yes.
    Resolved,
    /// Answered no.
    Rejected,
    /// Past its deadline unanswered ([`ExpiryPolicy::Expire`]).
    Expired,
    /// Withdrawn.
    Withdrawn,
}

impl GateState {
    /// True while the gate still blocks what it covers.
    pub fn is_pending(self) -> bool {
        matches!(self, GateState::Pending | GateState::Overdue)
    }
}

/// A gate as the goal holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// Its id.
    pub id: GateId,
    /// The question.
    pub question: String,
    /// Who may answer.
    pub owner: Actor,
    /// What it blocks.
    pub scope: GateScope,
    /// When an answer is due.
    pub deadline: Option<Timestamp>,
    /// What the deadline does.
    pub on_expiry: ExpiryPolicy,
    /// Who opened it.
    pub opened_by: Actor,
    /// When.
    pub opened_at: Timestamp,
    /// Recorded state.
    #[serde(flatten)]
    pub status: GateStatus,
}

/// What became of a gate, as the work it covers reads it: the outcome, the person's (or
/// authority's) words in full, who and when. A pending gate has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decided {
    /// The gate.
    pub gate: GateId,
    /// Its question.
    pub question: String,
    /// Answered, rejected, withdrawn or expired.
    pub outcome: GateState,
    /// The answer, or why it was rejected or withdrawn, verbatim and whole (every line); empty
    /// for an expired gate. Outside text: shown to an agent as quoted data, never as loopx's
    /// instruction.
    pub text: String,
    /// Who decided; `None` for an expired gate (its deadline decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Actor>,
    /// When: the answer's time, or the deadline of an expired gate.
    pub at: Timestamp,
}

impl Gate {
    /// What became of the gate at `now`; `None` while it is pending or overdue.
    pub fn decided(&self, now: Timestamp) -> Option<Decided> {
        let (outcome, text, by, at) = match &self.status {
            GateStatus::Resolved { answer, by, at } => {
                (GateState::Resolved, answer.clone(), Some(by.clone()), *at)
            }
            GateStatus::Rejected { reason, by, at } => {
                (GateState::Rejected, reason.clone(), Some(by.clone()), *at)
            }
            GateStatus::Withdrawn { reason, by, at } => {
                (GateState::Withdrawn, reason.clone(), Some(by.clone()), *at)
            }
            GateStatus::Pending => match (self.state_at(now), self.deadline) {
                (GateState::Expired, Some(deadline)) => {
                    (GateState::Expired, String::new(), None, deadline)
                }
                _ => return None,
            },
        };
        Some(Decided {
            gate: self.id.clone(),
            question: self.question.clone(),
            outcome,
            text,
            by,
            at,
        })
    }

    /// The effective state at `now`, applying the deadline and expiry policy.
    pub fn state_at(&self, now: Timestamp) -> GateState {
        match &self.status {
            GateStatus::Resolved { .. } => GateState::Resolved,
            GateStatus::Rejected { .. } => GateState::Rejected,
            GateStatus::Withdrawn { .. } => GateState::Withdrawn,
            GateStatus::Pending => match self.deadline {
                Some(deadline) if now >= deadline => match self.on_expiry {
                    ExpiryPolicy::Expire => GateState::Expired,
                    ExpiryPolicy::KeepAsking => GateState::Overdue,
                },
                _ => GateState::Pending,
            },
        }
    }
}
