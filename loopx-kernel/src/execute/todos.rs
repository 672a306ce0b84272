//! Todo commands: adding, reassigning, deferring, blocking and superseding work.

use std::collections::BTreeSet;

use crate::event::Event;
use crate::goal::GrantedAction;
use crate::ids::{AgentId, TodoId};
use crate::refusal::Refusal;
use crate::todo::{NewTodo, ResumeCondition, Todo, TodoClass, TodoStatus};

use super::{Ctx, invalid, optional_text, positive, text};

impl Ctx<'_> {
    pub(super) fn todo(&self, id: &TodoId) -> Result<&Todo, Refusal> {
        self.state
            .todos
            .get(id)
            .ok_or_else(|| Refusal::UnknownTodo { todo: id.clone() })
    }

    pub(super) fn add_todo(&self, todo: &NewTodo) -> Result<Vec<Event>, Refusal> {
        self.require_planner("add_todo")?;
        let todo = self.check_new_todo(todo, &BTreeSet::new())?;
        Ok(vec![Event::TodoAdded { todo }])
    }

    /// Validates a new todo; `batch` holds ids added earlier in the same commit. Returns the
    /// todo as it will be recorded (a review excludes the author of what it reviews).
    pub(super) fn check_new_todo(
        &self,
        new: &NewTodo,
        batch: &BTreeSet<TodoId>,
    ) -> Result<NewTodo, Refusal> {
        if self.state.todos.contains_key(&new.id) || batch.contains(&new.id) {
            return Err(Refusal::DuplicateId {
                kind: "todo",
                id: new.id.to_string(),
            });
        }
        text("title", &new.title)?;
        for dep in &new.depends_on {
            if dep == &new.id || !(self.state.todos.contains_key(dep) || batch.contains(dep)) {
                return Err(Refusal::UnknownReference {
                    kind: "dependency",
                    id: dep.to_string(),
                });
            }
        }
        if let Some(agent) = &new.assignee {
            self.registered(agent)?;
            if new.excluded_agents.contains(agent) {
                return Err(Refusal::ExcludedAgent {
                    agent: agent.clone(),
                    todo: new.id.clone(),
                });
            }
        }
        if let Some(writes) = &new.writes {
            text("writes.repository", &writes.repository)?;
            if writes.scopes.is_empty() {
                return Err(invalid(
                    "writes.scopes",
                    "name at least one path prefix (`.` for all)",
                ));
            }
            for scope in &writes.scopes {
                if scope.split('/').any(|c| c == "..") {
                    return Err(invalid("writes.scopes", "`..` is not allowed"));
                }
                optional_text("writes.scopes", scope)?;
            }
        }
        let mut recorded = new.clone();
        match &new.class {
            TodoClass::Advance => {}
            TodoClass::Monitor(spec) => positive("monitor.cadence", spec.cadence)?,
            TodoClass::Review { of } => {
                let reviewed = self.todo(of)?;
                let author = match &reviewed.status {
                    TodoStatus::Done { by, .. } => Some(by.clone()),
                    _ => reviewed.lease.as_ref().map(|l| l.holder.clone()),
                };
                if let Some(author) = author {
                    if new.assignee.as_ref() == Some(&author) {
                        return Err(Refusal::ExcludedAgent {
                            agent: author,
                            todo: new.id.clone(),
                        });
                    }
                    recorded.excluded_agents.insert(author);
                }
            }
        }
        Ok(recorded)
    }

    pub(super) fn open_todo<'s>(
        &'s self,
        id: &TodoId,
        needed: &'static str,
    ) -> Result<&'s Todo, Refusal> {
        let todo = self.todo(id)?;
        if todo.status.is_closed() {
            return Err(Refusal::TodoNotOpen {
                todo: id.clone(),
                status: todo.status.name(),
                needed,
            });
        }
        Ok(todo)
    }

    pub(super) fn no_turn_in_flight(todo: &Todo) -> Result<(), Refusal> {
        match todo.turn_in_flight() {
            Some(turn) => Err(Refusal::TurnInFlight {
                todo: todo.id.clone(),
                turn: turn.id.clone(),
            }),
            None => Ok(()),
        }
    }

    pub(super) fn reassign(
        &self,
        id: &TodoId,
        to: Option<&AgentId>,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.open_todo(id, "open")?;
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Reassign, grant_reason, "reassign")?;
        if let Some(agent) = to {
            self.registered(agent)?;
            if self.state.excludes(todo, agent) {
                return Err(Refusal::ExcludedAgent {
                    agent: agent.clone(),
                    todo: id.clone(),
                });
            }
        }
        if todo.assignee.as_ref() == to {
            return Err(Refusal::NoVisibleChange {
                what: "the todo already has that assignee".into(),
            });
        }
        if let Some(lease) = todo.live_lease(self.now)
            && Some(&lease.holder) != to
        {
            return Err(Refusal::LeaseHeld {
                todo: id.clone(),
                holder: lease.holder.clone(),
                until: lease.expires_at,
            });
        }
        Ok(vec![Event::TodoReassigned {
            todo: id.clone(),
            to: to.cloned(),
            grant_reason,
        }])
    }

    pub(super) fn check_resume_condition(
        &self,
        todo: &Todo,
        until: &ResumeCondition,
    ) -> Result<(), Refusal> {
        match until {
            ResumeCondition::At { .. } | ResumeCondition::ObservationChanged { .. } => Ok(()),
            ResumeCondition::TodoDone { todo: other } => {
                if other == &todo.id || !self.state.todos.contains_key(other) {
                    return Err(Refusal::UnknownReference {
                        kind: "resume todo",
                        id: other.to_string(),
                    });
                }
                Ok(())
            }
            ResumeCondition::GateSettled { gate } => {
                if self.state.gates.contains_key(gate) {
                    Ok(())
                } else {
                    Err(Refusal::UnknownGate { gate: gate.clone() })
                }
            }
        }
    }

    pub(super) fn baseline(&self, until: &ResumeCondition) -> Option<crate::ids::Fingerprint> {
        match until {
            ResumeCondition::ObservationChanged { key } => self
                .state
                .observations
                .get(key)
                .map(|o| o.fingerprint.clone()),
            _ => None,
        }
    }

    pub(super) fn defer(
        &self,
        id: &TodoId,
        until: &ResumeCondition,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.open_todo(id, "open or blocked")?;
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Supersede, grant_reason, "defer")?;
        Self::no_turn_in_flight(todo)?;
        self.check_resume_condition(todo, until)?;
        Ok(vec![Event::TodoDeferred {
            todo: id.clone(),
            until: until.clone(),
            baseline: self.baseline(until),
            grant_reason,
        }])
    }

    pub(super) fn block(
        &self,
        id: &TodoId,
        reason: &str,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.open_todo(id, "open or deferred")?;
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Supersede, grant_reason, "block")?;
        Self::no_turn_in_flight(todo)?;
        text("reason", reason)?;
        if matches!(todo.status, TodoStatus::Blocked { .. }) {
            return Err(Refusal::TodoNotOpen {
                todo: id.clone(),
                status: todo.status.name(),
                needed: "open or deferred",
            });
        }
        Ok(vec![Event::TodoBlocked {
            todo: id.clone(),
            reason: reason.to_owned(),
            grant_reason,
        }])
    }

    pub(super) fn unblock(
        &self,
        id: &TodoId,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        if !matches!(
            todo.status,
            TodoStatus::Blocked { .. } | TodoStatus::Deferred { .. }
        ) {
            return Err(Refusal::TodoNotOpen {
                todo: id.clone(),
                status: todo.status.name(),
                needed: "blocked or deferred",
            });
        }
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Supersede, grant_reason, "unblock")?;
        Ok(vec![Event::TodoUnblocked {
            todo: id.clone(),
            grant_reason,
        }])
    }

    pub(super) fn supersede(
        &self,
        id: &TodoId,
        reason: &str,
        replacement: Option<&NewTodo>,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.open_todo(id, "not done or superseded")?;
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Supersede, grant_reason, "supersede")?;
        Self::no_turn_in_flight(todo)?;
        text("reason", reason)?;
        let mut events = Vec::new();
        if let Some(new) = replacement {
            self.require_planner("supersede")?;
            events.push(Event::TodoAdded {
                todo: self.check_new_todo(new, &BTreeSet::new())?,
            });
        }
        events.push(Event::TodoSuperseded {
            todo: id.clone(),
            reason: reason.to_owned(),
            replacement: replacement.map(|r| r.id.clone()),
            grant_reason,
        });
        Ok(events)
    }
}
