//! Derived facts that both command validation and `decide` rely on, so the two can never
//! disagree about what is legal: gate holds, dependencies, resume conditions, monitor due times,
//! retry pauses and the workspace guard.

use serde::{Deserialize, Serialize};

use crate::gate::GateState;
use crate::ids::{AgentId, DecisionScope, GateId, TodoId};
use crate::state::GoalState;
use crate::time::Timestamp;
use crate::todo::{ResumeCondition, Todo, TodoClass, TodoStatus, Workspace};

/// How the goal's gates bear on one todo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "hold", rename_all = "snake_case")]
pub enum GateHold {
    /// No gate holds it.
    Clear,
    /// A pending gate covers it: wait for the answer (ask its owner).
    Pending {
        /// The gate.
        gate: GateId,
    },
    /// A gate covering it was rejected or expired: the route needs a replan.
    Refused {
        /// The gate.
        gate: GateId,
    },
    /// It needs a decision no gate has been opened for.
    Missing {
        /// The decision scope.
        scope: DecisionScope,
    },
}

/// Why the workspace guard stops an agent from taking a writing todo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "guard", rename_all = "snake_case")]
pub enum GuardBlock {
    /// The agent has not reported a workspace.
    WorkspaceUnknown,
    /// Another agent's live lease runs in the same checkout.
    SharedCheckout {
        /// The other agent.
        other: AgentId,
        /// The checkout.
        top_level: String,
    },
    /// Another live lease writes an overlapping scope.
    ScopeConflict {
        /// The conflicting todo.
        other: TodoId,
        /// Its holder.
        holder: AgentId,
        /// When that lease expires.
        until: Timestamp,
    },
}

impl GoalState {
    /// How the gates bear on `todo` at `now`.
    ///
    /// A pending gate that covers the todo holds it. Every decision the todo requires must be
    /// settled by a resolved gate; a rejected or expired one refuses the route. A gate that names
    /// the todo and was rejected or expired refuses it too, unless a resolved gate also covers it.
    pub fn gate_hold(&self, todo: &Todo, now: Timestamp) -> GateHold {
        let mut refused = None;
        let mut resolved_cover = false;
        for gate in self.gates.values() {
            if !gate.scope.covers(todo) {
                continue;
            }
            match gate.state_at(now) {
                GateState::Pending | GateState::Overdue => {
                    return GateHold::Pending {
                        gate: gate.id.clone(),
                    };
                }
                GateState::Resolved => resolved_cover = true,
                GateState::Rejected | GateState::Expired => {
                    refused.get_or_insert_with(|| gate.id.clone());
                }
                GateState::Withdrawn => {}
            }
        }
        for scope in &todo.requires_decisions {
            let settled = self.gates.values().any(|g| {
                (g.scope.whole_goal || g.scope.decisions.contains(scope))
                    && g.state_at(now) == GateState::Resolved
            });
            if !settled {
                let asked = self.gates.values().find(|g| {
                    g.scope.decisions.contains(scope)
                        && matches!(g.state_at(now), GateState::Rejected | GateState::Expired)
                });
                return match asked {
                    Some(gate) => GateHold::Refused {
                        gate: gate.id.clone(),
                    },
                    None => GateHold::Missing {
                        scope: scope.clone(),
                    },
                };
            }
        }
        match refused {
            Some(gate) if !resolved_cover => GateHold::Refused { gate },
            _ => GateHold::Clear,
        }
    }

    /// True when `agent` may never take `todo`: it is excluded by name, or the todo reviews work
    /// the agent completed. The author of reviewed work is known only once that work is done, so
    /// a review planned up front is checked here, not only when it is added.
    pub fn excludes(&self, todo: &Todo, agent: &AgentId) -> bool {
        todo.excluded_agents.contains(agent)
            || matches!(&todo.class, TodoClass::Review { of } if self
                .todos
                .get(of)
                .is_some_and(|r| matches!(&r.status, TodoStatus::Done { by, .. } if by == agent)))
    }

    /// Dependencies of `todo` that are not done.
    pub fn unmet_dependencies(&self, todo: &Todo) -> Vec<TodoId> {
        todo.depends_on
            .iter()
            .filter(|dep| {
                !self
                    .todos
                    .get(dep)
                    .is_some_and(|d| matches!(d.status, TodoStatus::Done { .. }))
            })
            .cloned()
            .collect()
    }

    /// True when a deferred todo's typed condition holds on recorded facts at `now`.
    pub fn resume_condition_met(&self, todo: &Todo, now: Timestamp) -> bool {
        let TodoStatus::Deferred { until, baseline } = &todo.status else {
            return false;
        };
        match until {
            ResumeCondition::At { at } => now >= *at,
            ResumeCondition::TodoDone { todo } => self
                .todos
                .get(todo)
                .is_some_and(|t| matches!(t.status, TodoStatus::Done { .. })),
            ResumeCondition::GateSettled { gate } => self
                .gates
                .get(gate)
                .is_some_and(|g| !g.state_at(now).is_pending()),
            ResumeCondition::ObservationChanged { key } => {
                self.observations.get(key).map(|o| &o.fingerprint) != baseline.as_ref()
            }
        }
    }

    /// When a monitor is next due, or `None` for other todos.
    pub fn monitor_due(&self, todo: &Todo) -> Option<Timestamp> {
        todo.monitor.as_ref().map(|m| m.next_due)
    }

    /// When `todo` may be claimed again after its last failed turns: the last failure's time
    /// plus the retry policy's pause for the failures in a row; `None` while it has none.
    pub fn retry_at(&self, todo: &TodoId) -> Option<(u32, Timestamp)> {
        let streak = self.streaks.get(todo)?;
        let failed_at = streak.failed_at()?;
        let pause = self
            .spec
            .policy
            .retry
            .delay(&self.spec.id, todo, streak.failures);
        Some((streak.failures, failed_at.plus(pause)))
    }

    /// Whether the workspace guard lets `agent` take the writing todo `todo` from `workspace`.
    /// Read-only todos are never blocked. Leases on `todo` itself are ignored.
    pub fn guard_block(
        &self,
        todo: &Todo,
        agent: &AgentId,
        workspace: Option<&Workspace>,
        now: Timestamp,
    ) -> Option<GuardBlock> {
        let writes = todo.writes.as_ref()?;
        let mut shared = None;
        for other in self.leased_todos() {
            if other.id == todo.id {
                continue;
            }
            let Some(lease) = other.live_lease(now) else {
                continue;
            };
            // A scope conflict blocks whatever workspace the agent reports, so it comes before
            // a shared checkout, which another workspace would cure: the agent is never sent
            // to make a worktree for a claim that would still be refused.
            if other.writes.as_ref().is_some_and(|w| w.overlaps(writes)) {
                return Some(GuardBlock::ScopeConflict {
                    other: other.id.clone(),
                    holder: lease.holder.clone(),
                    until: lease.expires_at,
                });
            }
            if let Some(workspace) = workspace
                && shared.is_none()
                && &lease.holder != agent
                && lease
                    .workspace
                    .as_ref()
                    .is_some_and(|w| w.top_level == workspace.top_level)
            {
                shared = Some(GuardBlock::SharedCheckout {
                    other: lease.holder.clone(),
                    top_level: workspace.top_level.clone(),
                });
            }
        }
        // Found even before the agent has reported a workspace; otherwise the todo would be
        // offered and refused.
        shared.or_else(|| workspace.is_none().then_some(GuardBlock::WorkspaceUnknown))
    }

    /// The todo's owning agent for authority purposes: the live lease holder, else the assignee.
    pub fn todo_owner(&self, todo: &Todo, now: Timestamp) -> Option<AgentId> {
        todo.live_lease(now)
            .map(|l| l.holder.clone())
            .or_else(|| todo.assignee.clone())
    }
}
