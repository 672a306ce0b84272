//! Building a capability's proposals against the goal as it stands.
//!
//! A capability is judged again and again over the same goal (every poll, every restart), so
//! its proposals must be *convergent*: proposing what already exists is noise the kernel would
//! refuse. [`Proposals`] skips a todo, gate or obligation whose id the goal already knows, so a
//! capability can derive stable ids from domain facts (`ci-fix@<sha>`) and simply propose what
//! the facts call for on every judgement. It decides nothing about lifecycle: every proposal
//! still goes through the kernel's validation as any other command.

use crate::budget::Amounts;
use crate::command::Command;
use crate::evidence::Observation;
use crate::gate::{GateStatus, NewGate};
use crate::ids::{AgentId, GateId, ObligationId, TodoId};
use crate::obligation::ObligationKind;
use crate::seams::Proposal;
use crate::state::GoalState;
use crate::time::Timestamp;
use crate::todo::{NewTodo, Priority, ResumeCondition, Todo};

impl Proposal {
    /// A proposal of `command` for the reason `rationale`.
    pub fn new(command: Command, rationale: impl Into<String>) -> Self {
        Proposal {
            command,
            rationale: rationale.into(),
        }
    }
}

impl Observation {
    /// The named domain fact, if the provider recorded it.
    pub fn fact(&self, name: &str) -> Option<&str> {
        self.facts.get(name).map(String::as_str)
    }
}

impl NewTodo {
    /// The same todo at `priority`.
    #[must_use]
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The same todo meant for `agent` (a successor for the agent who owns a line of work).
    #[must_use]
    pub fn for_agent(mut self, agent: AgentId) -> Self {
        self.assignee = Some(agent);
        self
    }

    /// The same todo, expecting each of its turns to use `usage` (reserved when a turn begins,
    /// in place of the goal policy's default reservation).
    #[must_use]
    pub fn expecting(mut self, usage: Amounts) -> Self {
        self.expected_usage = Some(Box::new(usage));
        self
    }

    /// The same todo, marked safe to re-run after an unknown outcome.
    #[must_use]
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }
}

/// Proposals for one judgement, skipping what the goal already holds.
#[derive(Debug)]
pub struct Proposals<'s> {
    state: &'s GoalState,
    now: Option<Timestamp>,
    out: Vec<Proposal>,
}

impl<'s> Proposals<'s> {
    /// An empty list of proposals against `state`, with no time: [`Proposals::retire`] then
    /// treats every lease as held and [`Proposals::withdraw_gate`] every gate with a passed
    /// deadline as asking. Prefer [`Proposals::at`].
    pub fn new(state: &'s GoalState) -> Self {
        Proposals {
            state,
            now: None,
            out: vec![],
        }
    }

    /// An empty list of proposals against `state` as it stands at `now`, the time of the
    /// judgement (leases and gate deadlines are read at it).
    pub fn at(state: &'s GoalState, now: Timestamp) -> Self {
        Proposals {
            state,
            now: Some(now),
            out: vec![],
        }
    }

    /// The goal the proposals are judged against.
    pub fn state(&self) -> &'s GoalState {
        self.state
    }

    /// Proposes adding `todo` unless a todo with its id exists (in any status) or is already
    /// proposed.
    pub fn add_todo(&mut self, todo: NewTodo, rationale: impl Into<String>) -> &mut Self {
        if !self.state.todos.contains_key(&todo.id) && !self.proposes_todo(&todo.id) {
            self.push(Command::AddTodo { todo }, rationale);
        }
        self
    }

    /// Proposes replacing the open todo `todo` with `successor`, unless `todo` is already
    /// closed, unknown, or the successor exists.
    pub fn supersede(
        &mut self,
        todo: &TodoId,
        successor: NewTodo,
        rationale: impl Into<String>,
    ) -> &mut Self {
        let open = self
            .state
            .todos
            .get(todo)
            .is_some_and(|t| !t.status.is_closed());
        if open && !self.state.todos.contains_key(&successor.id) {
            let reason = rationale.into();
            self.push(
                Command::Supersede {
                    todo: todo.clone(),
                    reason: reason.clone(),
                    replacement: Some(successor),
                    grant_reason: None,
                },
                reason,
            );
        }
        self
    }

    /// Proposes setting the open todo `todo` aside until `until`, unless it is closed, unknown
    /// or already deferred.
    pub fn defer(
        &mut self,
        todo: &TodoId,
        until: ResumeCondition,
        rationale: impl Into<String>,
    ) -> &mut Self {
        let deferrable = self.state.todos.get(todo).is_some_and(|t| {
            !t.status.is_closed() && !matches!(t.status, crate::todo::TodoStatus::Deferred { .. })
        });
        if deferrable {
            self.push(
                Command::Defer {
                    todo: todo.clone(),
                    until,
                    grant_reason: None,
                },
                rationale,
            );
        }
        self
    }

    /// Proposes superseding the open todo `todo` without a replacement, unless it is closed,
    /// unknown, held (a live lease, or any lease when no time is known, or a turn in flight) or
    /// already proposed for supersession.
    pub fn retire(&mut self, todo: &TodoId, reason: impl Into<String>) -> &mut Self {
        let retirable = self
            .state
            .todos
            .get(todo)
            .is_some_and(|t| !t.status.is_closed() && !self.held(t));
        let proposed = self
            .out
            .iter()
            .any(|p| matches!(&p.command, Command::Supersede { todo: t, .. } if t == todo));
        if retirable && !proposed {
            let reason = reason.into();
            self.push(
                Command::Supersede {
                    todo: todo.clone(),
                    reason: reason.clone(),
                    replacement: None,
                    grant_reason: None,
                },
                reason,
            );
        }
        self
    }

    /// Proposes withdrawing `gate` while it still asks for an answer (pending or overdue at
    /// the judgement's time; without a time, while no answer or withdrawal is recorded), unless
    /// it is unknown or its withdrawal is already proposed.
    pub fn withdraw_gate(&mut self, gate: &GateId, reason: impl Into<String>) -> &mut Self {
        let asking = self.state.gates.get(gate).is_some_and(|g| match self.now {
            Some(now) => g.state_at(now).is_pending(),
            None => g.status == GateStatus::Pending,
        });
        let proposed = self
            .out
            .iter()
            .any(|p| matches!(&p.command, Command::WithdrawGate { gate: g, .. } if g == gate));
        if asking && !proposed {
            let reason = reason.into();
            self.push(
                Command::WithdrawGate {
                    gate: gate.clone(),
                    reason: reason.clone(),
                },
                reason,
            );
        }
        self
    }

    /// True when an agent holds `todo`: a turn is in flight, or a lease is live at the
    /// judgement's time (any lease when no time is known).
    pub fn held(&self, todo: &Todo) -> bool {
        todo.lease.as_ref().is_some_and(|lease| {
            lease.turn.is_some() || self.now.is_none_or(|now| lease.is_live(now))
        })
    }

    /// Proposes opening `gate` unless a gate with its id exists or is already proposed.
    pub fn open_gate(&mut self, gate: NewGate, rationale: impl Into<String>) -> &mut Self {
        let proposed = self
            .out
            .iter()
            .any(|p| matches!(&p.command, Command::OpenGate { gate: g } if g.id == gate.id));
        if !self.state.gates.contains_key(&gate.id) && !proposed {
            self.push(Command::OpenGate { gate }, rationale);
        }
        self
    }

    /// Proposes raising an obligation unless one with `id` exists or is already proposed.
    pub fn raise(
        &mut self,
        id: ObligationId,
        kind: ObligationKind,
        detail: impl Into<String>,
        owner: Option<AgentId>,
    ) -> &mut Self {
        let proposed = self
            .out
            .iter()
            .any(|p| matches!(&p.command, Command::RaiseObligation { id: o, .. } if *o == id));
        if !self.state.obligations.contains_key(&id) && !proposed {
            let detail = detail.into();
            self.push(
                Command::RaiseObligation {
                    id,
                    kind,
                    detail: detail.clone(),
                    owner,
                },
                detail,
            );
        }
        self
    }

    /// Proposes `command` as it is (for commands with no natural identity check).
    pub fn push(&mut self, command: Command, rationale: impl Into<String>) -> &mut Self {
        self.out.push(Proposal::new(command, rationale));
        self
    }

    /// The proposals, in the order they were made.
    pub fn into_vec(self) -> Vec<Proposal> {
        self.out
    }

    fn proposes_todo(&self, id: &TodoId) -> bool {
        self.out.iter().any(|p| match &p.command {
            Command::AddTodo { todo } => &todo.id == id,
            Command::Supersede {
                replacement: Some(s),
                ..
            } => &s.id == id,
            _ => false,
        })
    }
}
