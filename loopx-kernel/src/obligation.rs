//! Replan and repair obligations: raised by a rule or a proposal, discharged only by a visible
//! change to the plan made in the same command.

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::ids::{AgentId, ObligationId, TodoId};
use crate::retry::FailureNote;
use crate::time::Timestamp;

/// Replan (the plan no longer leads to acceptance) or repair (the state is inconsistent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObligationKind {
    /// Rethink the work graph.
    Replan,
    /// Fix an inconsistency.
    Repair,
}

/// Why an obligation exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case", deny_unknown_fields)]
pub enum ObligationCause {
    /// A monitor saw no change too many polls in a row.
    MonitorStalled {
        /// The monitor.
        todo: TodoId,
        /// Its streak.
        streak: u32,
    },
    /// A todo's turns failed as many times in a row as the retry policy allows.
    TurnsFailing {
        /// The todo.
        todo: TodoId,
        /// Failed turns in a row.
        failures: u32,
        /// The last failures, newest last.
        last: Vec<FailureNote>,
    },
    /// A todo's settled turns made no progress as many times in a row as the stall rule allows.
    NoProgress {
        /// The todo.
        todo: TodoId,
        /// Settled turns in a row without progress.
        turns: u32,
    },
    /// The goal's settled turns (a monitor's excepted) made no progress as many times in a row
    /// as the goal-wide stall rule allows, on whichever todos.
    GoalStalled {
        /// Settled turns in a row without progress.
        turns: u32,
    },
    /// Proposed by an agent, a capability or a person.
    Proposed,
}

impl ObligationCause {
    /// The todo whose streak raised it (a stalled monitor, failing or idle turns), if any.
    pub fn streak_todo(&self) -> Option<&TodoId> {
        match self {
            ObligationCause::MonitorStalled { todo, .. }
            | ObligationCause::TurnsFailing { todo, .. }
            | ObligationCause::NoProgress { todo, .. } => Some(todo),
            ObligationCause::GoalStalled { .. } | ObligationCause::Proposed => None,
        }
    }
}

/// An obligation as the goal holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Obligation {
    /// Its id.
    pub id: ObligationId,
    /// Replan or repair.
    pub kind: ObligationKind,
    /// Why.
    pub cause: ObligationCause,
    /// What to look at, in words.
    pub detail: String,
    /// The agent whose line of work it concerns; `None` for anyone registered.
    pub owner: Option<AgentId>,
    /// Who raised it.
    pub raised_by: Actor,
    /// When.
    pub raised_at: Timestamp,
    /// Set once a visible change discharged it.
    pub discharged: Option<Discharge>,
}

/// Who discharged an obligation, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Discharge {
    /// Who.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
}
