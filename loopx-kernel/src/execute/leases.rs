//! Leases: what makes a todo claimable, the workspace guard, claim, renew and handoff.

use crate::event::Event;
use crate::goal::GrantedAction;
use crate::ids::{AgentId, TodoId};
use crate::readiness::{GateHold, GuardBlock};
use crate::refusal::Refusal;
use crate::time::Duration;
use crate::todo::{HandoffNote, Todo, TodoStatus, Workspace};

use super::{Ctx, check_workspace, current_epoch, positive, text};

impl Ctx<'_> {
    /// Everything that makes `todo` legal for `agent` to take now, except leases and authority.
    pub(super) fn runnable_for(&self, todo: &Todo, agent: &AgentId) -> Result<(), Refusal> {
        if self.state.excludes(todo, agent) {
            return Err(Refusal::ExcludedAgent {
                agent: agent.clone(),
                todo: todo.id.clone(),
            });
        }
        match &todo.status {
            TodoStatus::Open => {}
            TodoStatus::Deferred { .. } if self.state.resume_condition_met(todo, self.now) => {}
            TodoStatus::Deferred { .. } => {
                return Err(Refusal::ResumeConditionUnmet {
                    todo: todo.id.clone(),
                });
            }
            status => {
                return Err(Refusal::TodoNotOpen {
                    todo: todo.id.clone(),
                    status: status.name(),
                    needed: "open",
                });
            }
        }
        let pending = self.state.unmet_dependencies(todo);
        if !pending.is_empty() {
            return Err(Refusal::DependenciesUnmet {
                todo: todo.id.clone(),
                pending,
            });
        }
        self.gate_clear(todo)?;
        if let Some(due) = self.state.monitor_due(todo)
            && due > self.now
        {
            return Err(Refusal::MonitorNotDue {
                todo: todo.id.clone(),
                due,
            });
        }
        if let Some((failures, until)) = self.state.retry_at(&todo.id)
            && until > self.now
        {
            return Err(Refusal::BackingOff {
                todo: todo.id.clone(),
                failures,
                until,
            });
        }
        Ok(())
    }

    pub(super) fn gate_clear(&self, todo: &Todo) -> Result<(), Refusal> {
        match self.state.gate_hold(todo, self.now) {
            GateHold::Clear => Ok(()),
            GateHold::Pending { gate } | GateHold::Refused { gate } => Err(Refusal::GateBlocks {
                todo: todo.id.clone(),
                gate,
            }),
            GateHold::Missing { scope } => Err(Refusal::DecisionMissing {
                todo: todo.id.clone(),
                scope,
            }),
        }
    }

    pub(super) fn guard(
        &self,
        todo: &Todo,
        agent: &AgentId,
        workspace: Option<&Workspace>,
    ) -> Result<(), Refusal> {
        match self.state.guard_block(todo, agent, workspace, self.now) {
            None => Ok(()),
            Some(GuardBlock::WorkspaceUnknown) => Err(Refusal::WorkspaceRequired {
                todo: todo.id.clone(),
            }),
            Some(GuardBlock::SharedCheckout { other, top_level }) => {
                Err(Refusal::WorkspaceShared { top_level, other })
            }
            Some(GuardBlock::ScopeConflict { other, holder, .. }) => {
                Err(Refusal::WriteScopeConflict {
                    todo: todo.id.clone(),
                    other,
                    holder,
                })
            }
        }
    }

    pub(super) fn claim(
        &self,
        id: &TodoId,
        ttl: Option<Duration>,
        workspace: Option<&Workspace>,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let agent = self.require_registered_agent("claim")?;
        let todo = self.todo(id)?;
        if let Some(lease) = todo.live_lease(self.now) {
            if &lease.holder == agent {
                return Err(Refusal::NoVisibleChange {
                    what: format!(
                        "you already hold the lease (epoch {}); renew it",
                        lease.epoch
                    ),
                });
            }
            return Err(Refusal::LeaseHeld {
                todo: id.clone(),
                holder: lease.holder.clone(),
                until: lease.expires_at,
            });
        }
        if todo.outcome_unknown(self.now)
            && let Some(turn) = todo.turn_in_flight()
        {
            return Err(Refusal::OutcomeUnknown {
                todo: id.clone(),
                turn: turn.id.clone(),
            });
        }
        self.runnable_for(todo, agent)?;
        let grant_reason = match &todo.assignee {
            Some(assignee) if assignee != agent && !self.is_owner() => self.use_grant(
                agent,
                todo,
                assignee.clone(),
                GrantedAction::TakeOver,
                grant_reason,
            )?,
            _ => None,
        };
        if let Some(ws) = workspace {
            check_workspace(ws)?;
        }
        let workspace = workspace.or_else(|| self.state.workspaces.get(agent));
        self.guard(todo, agent, workspace)?;
        let ttl = ttl.unwrap_or(self.state.spec.policy.lease_ttl);
        positive("ttl", ttl)?;
        Ok(vec![Event::LeaseAcquired {
            todo: id.clone(),
            holder: agent.clone(),
            epoch: todo.last_epoch + 1,
            expires_at: self.now.plus(ttl),
            workspace: workspace.cloned(),
            grant_reason,
        }])
    }

    /// The actor's lease on `todo` at `epoch`, which must be current and live.
    pub(super) fn holder_lease(
        &self,
        id: &TodoId,
        epoch: u64,
    ) -> Result<&crate::todo::Lease, Refusal> {
        let todo = self.todo(id)?;
        current_epoch(todo, epoch)?;
        let lease = todo
            .lease
            .as_ref()
            .filter(|l| l.is_live(self.now))
            .ok_or_else(|| Refusal::NoLiveLease { todo: id.clone() })?;
        if self.actor.agent() != Some(&lease.holder) {
            return Err(Refusal::NotLeaseHolder {
                todo: id.clone(),
                actor: self.actor.clone(),
            });
        }
        Ok(lease)
    }

    pub(super) fn renew(
        &self,
        id: &TodoId,
        epoch: u64,
        ttl: Option<Duration>,
    ) -> Result<Vec<Event>, Refusal> {
        let lease = self.holder_lease(id, epoch)?;
        // An unregistered holder is fenced: it may settle or release what it began, nothing more.
        self.registered(&lease.holder)?;
        let ttl = ttl.unwrap_or(self.state.spec.policy.lease_ttl);
        positive("ttl", ttl)?;
        Ok(vec![Event::LeaseRenewed {
            todo: id.clone(),
            epoch,
            expires_at: self.now.plus(ttl),
        }])
    }

    pub(super) fn handoff(
        &self,
        id: &TodoId,
        epoch: u64,
        to: &AgentId,
        note: &HandoffNote,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        current_epoch(todo, epoch)?;
        let Some(lease) = todo.live_lease(self.now) else {
            return self.hand_over(todo, to, note, grant_reason);
        };
        let grant_reason =
            self.holder_or_take_over(todo, &lease.holder, grant_reason, "handoff")?;
        // Only the holder knows whether its turn's effect happened; anyone else moving the
        // lease mid-turn would turn a possible side effect into a silent loss.
        if let Some(turn) = &lease.turn
            && self.actor.agent() != Some(&lease.holder)
            && !todo.idempotent
        {
            return Err(Refusal::TurnInFlight {
                todo: id.clone(),
                turn: turn.id.clone(),
            });
        }
        if to == &lease.holder {
            return Err(Refusal::NoVisibleChange {
                what: format!("`{to}` already holds the lease"),
            });
        }
        self.registered(to)?;
        if self.state.excludes(todo, to) {
            return Err(Refusal::ExcludedAgent {
                agent: to.clone(),
                todo: id.clone(),
            });
        }
        self.check_note(note)?;
        let workspace = self.state.workspaces.get(to);
        self.guard(todo, to, workspace)?;
        Ok(vec![Event::LeaseHandedOff {
            todo: id.clone(),
            from: Some(lease.holder.clone()),
            to: to.clone(),
            epoch: todo.last_epoch + 1,
            expires_at: self.now.plus(self.state.spec.policy.lease_ttl),
            workspace: workspace.cloned(),
            note: note.clone(),
            grant_reason,
        }])
    }

    /// A handoff of work no live lease holds — planned for an agent that is gone, or whose
    /// lease expired: whoever may reassign the todo moves it to `to`, who becomes its
    /// assignee and holds it under a new epoch with the note. The todo must be open and
    /// runnable for the receiver, and a turn whose outcome is unknown is read back first
    /// (`resolve_outcome`), never handed over.
    fn hand_over(
        &self,
        todo: &Todo,
        to: &AgentId,
        note: &HandoffNote,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let id = &todo.id;
        let grant_reason =
            self.todo_authority(todo, GrantedAction::Reassign, grant_reason, "handoff")?;
        if todo.outcome_unknown(self.now)
            && let Some(turn) = todo.turn_in_flight()
        {
            return Err(Refusal::OutcomeUnknown {
                todo: id.clone(),
                turn: turn.id.clone(),
            });
        }
        if !matches!(todo.status, TodoStatus::Open) {
            return Err(Refusal::TodoNotOpen {
                todo: id.clone(),
                status: todo.status.name(),
                needed: "open",
            });
        }
        self.registered(to)?;
        self.runnable_for(todo, to)?;
        self.check_note(note)?;
        let workspace = self.state.workspaces.get(to);
        self.guard(todo, to, workspace)?;
        let from = todo
            .lease
            .as_ref()
            .map(|l| l.holder.clone())
            .or_else(|| todo.assignee.clone());
        let mut events = Vec::new();
        if todo.assignee.as_ref() != Some(to) {
            events.push(Event::TodoReassigned {
                todo: id.clone(),
                to: Some(to.clone()),
                grant_reason: grant_reason.clone(),
            });
        }
        events.push(Event::LeaseHandedOff {
            todo: id.clone(),
            from,
            to: to.clone(),
            epoch: todo.last_epoch + 1,
            expires_at: self.now.plus(self.state.spec.policy.lease_ttl),
            workspace: workspace.cloned(),
            note: note.clone(),
            grant_reason,
        });
        Ok(events)
    }

    /// A handoff note says what to do next and when to stop, and cites only recorded evidence.
    fn check_note(&self, note: &HandoffNote) -> Result<(), Refusal> {
        text("note.next_action", &note.next_action)?;
        text("note.stop_condition", &note.stop_condition)?;
        for evidence in &note.evidence {
            if !self.state.evidence.contains_key(evidence) {
                return Err(Refusal::UnknownReference {
                    kind: "evidence",
                    id: evidence.to_string(),
                });
            }
        }
        Ok(())
    }
}
