//! The decision: what one agent should do next, as a pure function of the goal's state, the
//! agent and the time. Nothing here reads a clock or changes state; the same inputs always give
//! the same [`Decision`].

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::{Amounts, Dimension, Ledger, Limits};
use crate::gate::{Decided, ExpiryPolicy, GateState};
use crate::goal::{BudgetExhaustion, GrantedAction};
use crate::ids::{
    AgentId, CriterionId, DecisionScope, EffectId, GateId, ObligationId, TodoId, TurnId,
};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::readiness::{GateHold, GuardBlock};
use crate::state::{CriterionStatus, GoalState};
use crate::time::Timestamp;
use crate::todo::{HandoffNote, ResumeCondition, Todo, TodoStatus};

/// How many wait reasons a decision lists; the wake time always accounts for all of them.
pub const MAX_REASONS: usize = 8;

/// The next legal step for one agent. A closed set: every caller handles every case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    /// Work on this todo now.
    Continue(Assignment),
    /// Nothing to do until a time or an event; sleep until `until` or a store notification.
    Wait {
        /// The earliest instant at which the decision can change by time alone, if any.
        until: Option<Timestamp>,
        /// Why (at most [`MAX_REASONS`] are listed); in JSON each with its `fix`.
        #[serde(serialize_with = "crate::fix::seq")]
        reasons: Vec<WaitReason>,
    },
    /// A person must answer before this agent can go on.
    Ask {
        /// The questions, most urgent first; in JSON each with its `fix`.
        #[serde(serialize_with = "crate::fix::seq")]
        questions: Vec<Question>,
        /// The earliest deadline among them, when the decision changes by time alone.
        until: Option<Timestamp>,
    },
    /// The plan no longer leads to acceptance; change it visibly.
    Replan {
        /// Why the plan needs changing; in JSON with its `fix`.
        #[serde(serialize_with = "crate::fix::one")]
        reason: ReplanReason,
    },
    /// The state is inconsistent or unsafe to continue; fix it first.
    Repair {
        /// What to fix; in JSON with its `fix`.
        #[serde(serialize_with = "crate::fix::one")]
        issue: RepairIssue,
    },
    /// The goal is over. Derived, never written.
    Terminal {
        /// Accepted or abandoned.
        outcome: TerminalOutcome,
    },
}

impl Decision {
    /// The decision's kind as a stable string (`continue`, `wait`, `ask`, `replan`, `repair`,
    /// `terminal`).
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::Continue(_) => "continue",
            Decision::Wait { .. } => "wait",
            Decision::Ask { .. } => "ask",
            Decision::Replan { .. } => "replan",
            Decision::Repair { .. } => "repair",
            Decision::Terminal { .. } => "terminal",
        }
    }
}

/// A todo assigned to the agent for its next turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The todo this part of the decision is about.
    pub todo: TodoId,
    /// Its title.
    pub title: String,
    /// Where the lease stands.
    pub lease: LeaseStep,
    /// What a turn will reserve.
    pub reserve: Amounts,
    /// The note from a handoff to this agent, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffNote>,
    /// Gates still waiting on people while this independent work continues (the dual channel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_gates: Vec<GateId>,
    /// What the gates covering this todo came to — answers in full, rejections, withdrawals,
    /// expiries, with who and when — while the todo is open: the decisions this turn acts on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decided: Vec<Decided>,
}

/// Where the agent's lease on the assigned todo stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum LeaseStep {
    /// Claim it first.
    Claim,
    /// The agent holds it; begin a turn.
    Held {
        /// The epoch to present.
        epoch: u64,
        /// When the lease expires unless renewed.
        expires_at: Timestamp,
    },
    /// A turn is already in flight under the agent's lease: finish and settle it. A session
    /// that did not begin it (a restarted or second process of the agent) takes it over first
    /// (`take_over_turn` under this epoch), which fences the session that did.
    Resume {
        /// The epoch to present.
        epoch: u64,
        /// The turn to settle.
        turn: TurnId,
        /// When the lease expires unless renewed.
        expires_at: Timestamp,
    },
}

/// Why an agent waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum WaitReason {
    /// Another agent holds the lease.
    LeaseHeld {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The holder.
        holder: AgentId,
        /// Lease expiry.
        until: Timestamp,
    },
    /// Meant for another agent.
    AssignedElsewhere {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The assignee.
        agent: AgentId,
    },
    /// A monitor is not due yet.
    MonitorNotDue {
        /// The monitor todo.
        todo: TodoId,
        /// When it is due.
        due: Timestamp,
    },
    /// Deferred until a condition holds.
    Deferred {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The condition.
        until: ResumeCondition,
    },
    /// Dependencies are not done.
    Dependencies {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// Unfinished dependencies.
        on: Vec<TodoId>,
    },
    /// Another live lease writes an overlapping scope.
    WriteScopeBusy {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The conflicting todo.
        other: TodoId,
        /// When that lease expires.
        until: Timestamp,
    },
    /// A turn's outcome is unknown and someone else must resolve it.
    OutcomeUnknown {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The former holder.
        holder: AgentId,
    },
    /// An intended effect whose lease is gone was never recorded, and someone else must read
    /// it back and record it.
    EffectUnresolved {
        /// The pending effect.
        effect: EffectId,
        /// The holder it was intended by.
        holder: AgentId,
    },
    /// What remains may only be taken by other agents (this agent is excluded from it, or it
    /// reviews this agent's own work).
    OthersOnly {
        /// The first such todo.
        todo: TodoId,
    },
    /// The budget cannot admit another turn.
    Budget {
        /// The budget dimension that is spent.
        dimension: Dimension,
        /// `goal` or the todo id.
        scope: String,
    },
    /// The todo's last turns failed; the retry policy pauses it until `until`.
    Backoff {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// Failed turns in a row.
        failures: u32,
        /// When it may be claimed again.
        until: Timestamp,
    },
}

/// A question waiting on a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "about", rename_all = "snake_case")]
pub enum Question {
    /// A pending gate.
    Gate {
        /// The gate this part of the decision is about.
        gate: GateId,
        /// The question, in the words it was opened with.
        question: String,
        /// Who must answer.
        owner: Actor,
        /// When the answer is due.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<Timestamp>,
        /// Past the deadline and asked again.
        overdue: bool,
    },
    /// The budget is exhausted; the goal owner may raise it.
    Budget {
        /// The budget dimension that is spent.
        dimension: Dimension,
        /// `goal` or the todo id.
        scope: String,
        /// What remains per dimension.
        remaining: Limits,
    },
    /// A turn used more than it reserved on a bounded dimension (it was charged all of it);
    /// no new turn begins until the owner answers by amending the budget or the policy.
    Overrun {
        /// The todo the turn ran on.
        todo: TodoId,
        /// The turn that overran.
        turn: TurnId,
        /// The first bounded dimension it went beyond its reservation on.
        dimension: Dimension,
        /// What it used beyond its reservation, in every dimension.
        by: Amounts,
        /// What remains per dimension.
        remaining: Limits,
    },
}

/// Why the plan must change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum ReplanReason {
    /// An open replan obligation.
    Obligation {
        /// The open obligation to discharge.
        id: ObligationId,
        /// Its cause.
        cause: ObligationCause,
        /// What to look at.
        detail: String,
    },
    /// A todo cannot proceed as planned.
    Stuck {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// Why the todo cannot move.
        because: Stuck,
    },
    /// No work is left, yet criteria are unmet.
    AcceptanceGap {
        /// The unmet criteria and where each stands.
        criteria: Vec<(CriterionId, CriterionStatus)>,
    },
    /// Everything is met and done, but nobody declared the intent to close.
    ClosureIntentMissing,
}

/// Why a todo is stuck.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stuck", rename_all = "snake_case")]
pub enum Stuck {
    /// A covering gate was rejected or expired.
    GateRefused {
        /// The gate this part of the decision is about.
        gate: GateId,
    },
    /// A blocking fact was recorded.
    Blocked {
        /// The fact.
        reason: String,
    },
    /// A dependency was superseded and will never be done.
    DependencyClosed {
        /// The dependency.
        dependency: TodoId,
    },
}

/// An inconsistency to repair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "issue", rename_all = "snake_case")]
pub enum RepairIssue {
    /// An open repair obligation.
    Obligation {
        /// The open obligation to discharge.
        id: ObligationId,
        /// What to look at.
        detail: String,
    },
    /// A lease expired mid-turn on work that is not idempotent.
    OutcomeUnknown {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The turn in flight, to settle or read back.
        turn: TurnId,
        /// The former holder.
        holder: AgentId,
    },
    /// An effect was intended under a lease that is gone (expired, settled, or fenced by a
    /// newer epoch) and never recorded: read it back and record it before anything else.
    EffectUnresolved {
        /// The pending effect.
        effect: EffectId,
        /// The todo whose lease authorised it.
        todo: TodoId,
        /// The holder it was intended by.
        holder: AgentId,
    },
    /// The agent's checkout is in use by another agent's live lease.
    SharedCheckout {
        /// The writing todo that would be offered.
        todo: TodoId,
        /// The other agent.
        other: AgentId,
        /// The shared checkout.
        top_level: String,
    },
    /// A todo requires a decision that no gate asks for.
    DecisionMissing {
        /// The todo this part of the decision is about.
        todo: TodoId,
        /// The decision scope no resolved gate has settled.
        scope: DecisionScope,
    },
    /// The agent is not registered with the goal.
    UnregisteredAgent {
        /// The agent it concerns.
        agent: AgentId,
    },
}

/// How a goal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalOutcome {
    /// Every criterion met by fresh evidence, nothing left, closure intended.
    Accepted,
    /// The owner gave the goal up and no turn is in flight.
    Abandoned,
}

/// How one pending todo stands for one agent.
enum Standing {
    Runnable,
    /// Handled before the scan (the agent's own lease, an unknown outcome).
    Hidden,
    /// Never this agent's: excluded by name, or a review of its own work.
    Excluded,
    /// Waits for dependencies to be done.
    WaitOnDependencies,
    Wait(WaitReason),
    Ask(GateId),
    Stuck(Stuck),
    Repair(RepairIssue),
}

/// Whether the goal is over at `now`, and how. Terminal holds iff no intended effect is pending
/// and: abandoned with no turn in flight; or every criterion is met by fresh evidence, no todo is
/// open, blocked or deferred, no lease or turn is pending, no gate is pending, no obligation is
/// open, and closure was explicitly intended.
pub fn terminal(state: &GoalState, now: Timestamp) -> Option<TerminalOutcome> {
    if !state.pending_effects.is_empty() {
        return None;
    }
    if state.abandoned.is_some() {
        // An expired turn on idempotent work is safe to drop; any other begun turn must be
        // settled or resolved first.
        let in_flight = state.leased_todos().any(|t| {
            t.lease
                .as_ref()
                .is_some_and(|l| l.turn.is_some() && (l.is_live(now) || t.outcome_unknown(now)))
        });
        return (!in_flight).then_some(TerminalOutcome::Abandoned);
    }
    let accepted = state.pending_todos().next().is_none()
        && state.leased_todos().next().is_none()
        && !state.gates.values().any(|g| g.state_at(now).is_pending())
        && !state.obligations.values().any(|o| o.discharged.is_none())
        && state.closure.is_some()
        && state
            .criteria_status(now)
            .iter()
            .all(|(_, status)| status.is_met());
    accepted.then_some(TerminalOutcome::Accepted)
}

/// The frontier: the todos legal for `agent` to claim at `now`, in the order `decide` offers
/// them (priority, then age). A todo is in it iff it is open (or deferred with its condition
/// met), its dependencies are done, no gate holds it, it is not leased by another agent, not
/// meant for another agent, not excluded, due (for monitors), clear of the workspace guard and
/// within its own budget. It is empty for an unregistered agent and on an abandoned goal, where
/// every claim is refused.
pub fn frontier(state: &GoalState, agent: &AgentId, now: Timestamp) -> Vec<TodoId> {
    if !state.is_registered(agent) || state.abandoned.is_some() {
        return Vec::new();
    }
    let workspace = state.workspaces.get(agent);
    state
        .pending_slots()
        .filter(|&(slot, todo)| {
            matches!(
                standing(state, slot, todo, agent, workspace, now),
                Standing::Runnable
            )
        })
        .map(|(_, todo)| todo.id.clone())
        .collect()
}

/// How one pending todo stands for `agent` at `now`. The checks run in the order their reasons
/// take precedence, and each returns as soon as it decides.
fn standing(
    state: &GoalState,
    slot: u32,
    todo: &Todo,
    agent: &AgentId,
    workspace: Option<&crate::todo::Workspace>,
    now: Timestamp,
) -> Standing {
    if state.excludes(todo, agent) {
        return Standing::Excluded;
    }
    if let Some(lease) = &todo.lease {
        if lease.is_live(now) {
            if &lease.holder != agent {
                return Standing::Wait(WaitReason::LeaseHeld {
                    todo: todo.id.clone(),
                    holder: lease.holder.clone(),
                    until: lease.expires_at,
                });
            }
            if lease.turn.is_some() || turn_admissible(state, todo, now) {
                return Standing::Hidden; // handled first, as the agent's own work
            }
            // The agent's own lease, held up by a gate or its budget: the checks below say why.
        } else if todo.outcome_unknown(now) {
            return Standing::Hidden; // handled first, as a repair
        }
    }
    if let Some(assignee) = &todo.assignee
        && assignee != agent
    {
        return Standing::Wait(WaitReason::AssignedElsewhere {
            todo: todo.id.clone(),
            agent: assignee.clone(),
        });
    }
    match &todo.status {
        TodoStatus::Blocked { reason } => {
            return Standing::Stuck(Stuck::Blocked {
                reason: reason.clone(),
            });
        }
        TodoStatus::Deferred { until, .. } if !state.resume_condition_met(todo, now) => {
            return Standing::Wait(WaitReason::Deferred {
                todo: todo.id.clone(),
                until: until.clone(),
            });
        }
        _ => {}
    }
    if state.waits_on_dependencies(slot) {
        if state.has_dead_dependency(slot) {
            let closed = todo.depends_on.iter().find(|dep| {
                state
                    .todos
                    .get(dep)
                    .is_some_and(|d| matches!(d.status, TodoStatus::Superseded { .. }))
            });
            if let Some(dependency) = closed {
                return Standing::Stuck(Stuck::DependencyClosed {
                    dependency: dependency.clone(),
                });
            }
        }
        // The reason (which dependencies) is spelled out only if the decision lists it.
        return Standing::WaitOnDependencies;
    }
    match state.gate_hold(todo, now) {
        GateHold::Clear => {}
        GateHold::Pending { gate } => return Standing::Ask(gate),
        GateHold::Refused { gate } => return Standing::Stuck(Stuck::GateRefused { gate }),
        GateHold::Missing { scope } => {
            return Standing::Repair(RepairIssue::DecisionMissing {
                todo: todo.id.clone(),
                scope,
            });
        }
    }
    if let Some(reason) = not_yet(state, todo, now) {
        return Standing::Wait(reason);
    }
    if let Some(standing) = guard_standing(state, todo, agent, workspace, now) {
        return standing;
    }
    if let Some(dimension) = todo
        .budget
        .as_ref()
        .and_then(|l| l.shortfall(reservation(state, todo)))
    {
        return Standing::Wait(WaitReason::Budget {
            dimension,
            scope: format!("todo {}", todo.id),
        });
    }
    Standing::Runnable
}

/// Why time alone holds `todo` back now: a monitor not due yet, or a failed todo's retry pause.
fn not_yet(state: &GoalState, todo: &Todo, now: Timestamp) -> Option<WaitReason> {
    if let Some(due) = state.monitor_due(todo)
        && due > now
    {
        return Some(WaitReason::MonitorNotDue {
            todo: todo.id.clone(),
            due,
        });
    }
    let (failures, until) = state.retry_at(&todo.id)?;
    (until > now).then(|| WaitReason::Backoff {
        todo: todo.id.clone(),
        failures,
        until,
    })
}

/// The workspace guard's verdict on a writing todo, if it stops the agent.
fn guard_standing(
    state: &GoalState,
    todo: &Todo,
    agent: &AgentId,
    workspace: Option<&crate::todo::Workspace>,
    now: Timestamp,
) -> Option<Standing> {
    match state.guard_block(todo, agent, workspace, now)? {
        GuardBlock::WorkspaceUnknown => None,
        GuardBlock::SharedCheckout { other, top_level } => {
            Some(Standing::Repair(RepairIssue::SharedCheckout {
                todo: todo.id.clone(),
                other,
                top_level,
            }))
        }
        GuardBlock::ScopeConflict { other, until, .. } => {
            Some(Standing::Wait(WaitReason::WriteScopeBusy {
                todo: todo.id.clone(),
                other,
                until,
            }))
        }
    }
}

/// What `agent` should do next at `now`. Pure: the same state, agent and time always give the
/// same decision.
///
/// Precedence: terminal; an unregistered agent is told to register; the agent's own live lease
/// (resume or begin its turn); intended effects whose lease is gone (read back and recorded by
/// their holder, or an agent that may take over); outcome-unknown repairs; open repair, then
/// replan obligations; the first legal todo (or the workspace-guard repair it would need, the
/// budget's ask or wait when its reservation does not fit, or the owner's question about an
/// unanswered overrun); questions that block the agent's work; waits; stuck todos; other
/// pending questions;
/// the acceptance gap; the missing closure intent; terminal.
pub fn decide(state: &GoalState, agent: &AgentId, now: Timestamp) -> Decision {
    if let Some(outcome) = terminal(state, now) {
        return Decision::Terminal { outcome };
    }
    if !state.is_registered(agent) {
        return Decision::Repair {
            issue: RepairIssue::UnregisteredAgent {
                agent: agent.clone(),
            },
        };
    }
    if let Some(decision) = own_lease(state, agent, now) {
        return decision;
    }
    let mut waits = Waits::default();
    if let Some(decision) = unresolved_effects(state, agent, now, &mut waits) {
        return decision;
    }
    if let Some(decision) = unknown_outcomes(state, agent, now, &mut waits) {
        return decision;
    }
    if state.abandoned.is_some() {
        return waits.into_decision();
    }
    if let Some(decision) = obligations(state, agent) {
        return decision;
    }
    match scan(state, agent, now, waits) {
        Pass::Decided(decision) => decision,
        Pass::Found(found) => conclude(state, found, now),
    }
}

/// What a pass over the pending todos found when none is runnable for the agent.
struct Scan {
    waits: Waits,
    asks: Vec<GateId>,
    stuck: Option<ReplanReason>,
    repair: Option<RepairIssue>,
    excluded: Option<TodoId>,
}

/// The outcome of a pass: decided early, or everything found along the way.
enum Pass {
    Decided(Decision),
    Found(Scan),
}

/// Walks the pending todos in frontier order. Decides early with the first todo the agent may
/// take, or the workspace-guard repair it would need; otherwise returns what it found.
fn scan(state: &GoalState, agent: &AgentId, now: Timestamp, waits: Waits) -> Pass {
    let workspace = state.workspaces.get(agent);
    let mut found = Scan {
        waits,
        asks: Vec::new(),
        stuck: None,
        repair: None,
        excluded: None,
    };
    for (slot, todo) in state.pending_slots() {
        match standing(state, slot, todo, agent, workspace, now) {
            Standing::Runnable => return Pass::Decided(offer(state, todo, now)),
            Standing::Hidden => {}
            Standing::WaitOnDependencies => {
                found
                    .waits
                    .push_unless_full(state, || WaitReason::Dependencies {
                        todo: todo.id.clone(),
                        on: state.unmet_dependencies(todo),
                    });
            }
            Standing::Excluded => {
                found.excluded.get_or_insert_with(|| todo.id.clone());
            }
            Standing::Wait(reason) => found.waits.push(state, reason),
            Standing::Ask(gate) => {
                if !found.asks.contains(&gate) {
                    found.asks.push(gate);
                }
            }
            Standing::Stuck(because) => {
                found.stuck.get_or_insert_with(|| ReplanReason::Stuck {
                    todo: todo.id.clone(),
                    because,
                });
            }
            Standing::Repair(issue) => {
                // The workspace guard stops the first candidate the agent would be offered.
                if matches!(issue, RepairIssue::SharedCheckout { .. }) && found.repair.is_none() {
                    return Pass::Decided(Decision::Repair { issue });
                }
                found.repair.get_or_insert(issue);
            }
        }
    }
    Pass::Found(found)
}

/// The decision when nothing is runnable for the agent, in precedence order.
fn conclude(state: &GoalState, scan: Scan, now: Timestamp) -> Decision {
    let Scan {
        mut waits,
        asks,
        stuck,
        repair,
        excluded,
    } = scan;
    if let Some(issue) = repair {
        return Decision::Repair { issue };
    }
    if !asks.is_empty() {
        return ask(state, &asks, now, waits.until);
    }
    if !waits.is_empty() {
        return waits.into_decision();
    }
    if let Some(reason) = stuck {
        return Decision::Replan { reason };
    }
    let pending = pending_gates(state, now);
    if !pending.is_empty() {
        return ask(state, &pending, now, None);
    }
    // Work remains that only other agents may take (a review of this agent's own work, a todo
    // it is excluded from): the plan is not short of anything, so wait for them.
    if let Some(todo) = excluded {
        waits.push(state, WaitReason::OthersOnly { todo });
        return waits.into_decision();
    }
    let unmet: Vec<_> = state
        .criteria_status(now)
        .into_iter()
        .filter(|(_, status)| !status.is_met())
        .collect();
    if !unmet.is_empty() {
        return Decision::Replan {
            reason: ReplanReason::AcceptanceGap { criteria: unmet },
        };
    }
    if state.closure.is_none() {
        return Decision::Replan {
            reason: ReplanReason::ClosureIntentMissing,
        };
    }
    // Everything terminal requires holds except what only other agents can change (their
    // obligations); wait for them.
    waits.into_decision()
}

fn own_lease(state: &GoalState, agent: &AgentId, now: Timestamp) -> Option<Decision> {
    // On an abandoned goal only a turn in flight may still be settled; nothing new begins.
    let abandoned = state.abandoned.is_some();
    let mut held: Vec<&Todo> = state
        .leased_todos()
        .filter(|t| {
            t.live_lease(now).is_some_and(|l| {
                &l.holder == agent
                    && (l.turn.is_some() || (!abandoned && turn_admissible(state, t, now)))
            })
        })
        .collect();
    // A turn in flight comes first: it must be settled before anything else.
    held.sort_by_key(|t| {
        (
            t.lease.as_ref().is_none_or(|l| l.turn.is_none()),
            t.priority,
            t.seq,
        )
    });
    let todo = held.first()?;
    let lease = todo.lease.as_ref()?;
    let step = if let Some(turn) = &lease.turn {
        LeaseStep::Resume {
            epoch: lease.epoch,
            turn: turn.id.clone(),
            expires_at: lease.expires_at,
        }
    } else {
        // A new turn needs the goal's budget too; without it, ask or wait as for new work.
        if let Some(dimension) = state.ledger.shortfall(reservation(state, todo)) {
            return Some(budget_exhausted(state, dimension, &state.ledger));
        }
        if let Some(ask) = overrun_asked(state) {
            return Some(ask);
        }
        LeaseStep::Held {
            epoch: lease.epoch,
            expires_at: lease.expires_at,
        }
    };
    Some(Decision::Continue(Assignment {
        todo: todo.id.clone(),
        title: todo.title.clone(),
        lease: step,
        reserve: reservation(state, todo),
        handoff: todo.handoff.as_deref().cloned(),
        pending_gates: pending_gates(state, now),
        decided: state.decided_for(todo, now),
    }))
}

/// Whether the holder of a live lease on `todo` may begin a turn now, by the rules `begin_turn`
/// checks per todo: no gate holds it and its own budget admits the reservation.
fn turn_admissible(state: &GoalState, todo: &Todo, now: Timestamp) -> bool {
    state.gate_hold(todo, now) == GateHold::Clear
        && todo
            .budget
            .as_ref()
            .is_none_or(|l| l.shortfall(reservation(state, todo)).is_none())
}

fn unknown_outcomes(
    state: &GoalState,
    agent: &AgentId,
    now: Timestamp,
    waits: &mut Waits,
) -> Option<Decision> {
    let may_take_over = state
        .spec
        .grants
        .get(agent)
        .is_some_and(|g| g.contains(&GrantedAction::TakeOver));
    for todo in state.leased_todos() {
        let Some(lease) = todo.lease.as_ref() else {
            continue;
        };
        let Some(turn) = lease.turn.as_ref() else {
            continue;
        };
        if lease.is_live(now) {
            if &lease.holder != agent {
                waits.push(
                    state,
                    WaitReason::LeaseHeld {
                        todo: todo.id.clone(),
                        holder: lease.holder.clone(),
                        until: lease.expires_at,
                    },
                );
            }
            continue;
        }
        if !todo.outcome_unknown(now) {
            continue;
        }
        if &lease.holder == agent || may_take_over {
            return Some(Decision::Repair {
                issue: RepairIssue::OutcomeUnknown {
                    todo: todo.id.clone(),
                    turn: turn.id.clone(),
                    holder: lease.holder.clone(),
                },
            });
        }
        waits.push(
            state,
            WaitReason::OutcomeUnknown {
                todo: todo.id.clone(),
                holder: lease.holder.clone(),
            },
        );
    }
    None
}

/// Pending effects whose lease is gone: a repair for their holder (or an agent that may take
/// over), a wait for everyone else. One still under its live lease is its holder's to finish.
fn unresolved_effects(
    state: &GoalState,
    agent: &AgentId,
    now: Timestamp,
    waits: &mut Waits,
) -> Option<Decision> {
    if state.pending_effects.is_empty() {
        return None;
    }
    let may_take_over = state
        .spec
        .grants
        .get(agent)
        .is_some_and(|g| g.contains(&GrantedAction::TakeOver));
    for pending in state.pending_effects.values() {
        if pending.is_live(state, now) {
            continue;
        }
        if &pending.holder == agent || may_take_over {
            return Some(Decision::Repair {
                issue: RepairIssue::EffectUnresolved {
                    effect: pending.effect.id.clone(),
                    todo: pending.todo.clone(),
                    holder: pending.holder.clone(),
                },
            });
        }
        waits.push(
            state,
            WaitReason::EffectUnresolved {
                effect: pending.effect.id.clone(),
                holder: pending.holder.clone(),
            },
        );
    }
    None
}

fn obligations(state: &GoalState, agent: &AgentId) -> Option<Decision> {
    let mine = |kind: ObligationKind| {
        state.obligations.values().find(|o| {
            o.discharged.is_none()
                && o.kind == kind
                && o.owner.as_ref().is_none_or(|owner| owner == agent)
        })
    };
    if let Some(o) = mine(ObligationKind::Repair) {
        return Some(Decision::Repair {
            issue: RepairIssue::Obligation {
                id: o.id.clone(),
                detail: o.detail.clone(),
            },
        });
    }
    mine(ObligationKind::Replan).map(|o| Decision::Replan {
        reason: ReplanReason::Obligation {
            id: o.id.clone(),
            cause: o.cause.clone(),
            detail: o.detail.clone(),
        },
    })
}

/// What a turn of `todo` reserves: its expected usage, or the policy's default.
fn reservation(state: &GoalState, todo: &Todo) -> Amounts {
    state.expected_usage(todo)
}

/// The owner's question about an unanswered overrun, asked before any new turn begins.
fn overrun_asked(state: &GoalState) -> Option<Decision> {
    let (overrun, dimension) = state.overrun_to_ask()?;
    Some(Decision::Ask {
        questions: vec![Question::Overrun {
            todo: overrun.todo.clone(),
            turn: overrun.turn.clone(),
            dimension,
            by: overrun.by,
            remaining: state.ledger.remaining(),
        }],
        until: None,
    })
}

fn pending_gates(state: &GoalState, now: Timestamp) -> Vec<GateId> {
    state
        .gates
        .values()
        .filter(|g| g.state_at(now).is_pending())
        .map(|g| g.id.clone())
        .collect()
}

fn offer(state: &GoalState, todo: &Todo, now: Timestamp) -> Decision {
    let reserve = reservation(state, todo);
    if let Some(dimension) = state.ledger.shortfall(reserve) {
        return budget_exhausted(state, dimension, &state.ledger);
    }
    if let Some(ask) = overrun_asked(state) {
        return ask;
    }
    Decision::Continue(Assignment {
        todo: todo.id.clone(),
        title: todo.title.clone(),
        lease: LeaseStep::Claim,
        reserve,
        handoff: None,
        pending_gates: pending_gates(state, now),
        decided: state.decided_for(todo, now),
    })
}

fn budget_exhausted(state: &GoalState, dimension: Dimension, ledger: &Ledger) -> Decision {
    match state.spec.policy.on_budget_exhausted {
        BudgetExhaustion::Ask => Decision::Ask {
            questions: vec![Question::Budget {
                dimension,
                scope: "goal".into(),
                remaining: ledger.remaining(),
            }],
            until: None,
        },
        BudgetExhaustion::Wait => Decision::Wait {
            until: None,
            reasons: vec![WaitReason::Budget {
                dimension,
                scope: "goal".into(),
            }],
        },
    }
}

/// `wake` is the earliest time another of the agent's todos may change on its own (a lease
/// expiring, a monitor coming due): the decision changes then too.
fn ask(state: &GoalState, gates: &[GateId], now: Timestamp, wake: Option<Timestamp>) -> Decision {
    let mut questions: Vec<(Option<Timestamp>, Question)> = gates
        .iter()
        .filter_map(|id| state.gates.get(id))
        .map(|gate| {
            (
                gate.deadline,
                Question::Gate {
                    gate: gate.id.clone(),
                    question: gate.question.clone(),
                    owner: gate.owner.clone(),
                    deadline: gate.deadline,
                    overdue: gate.state_at(now) == GateState::Overdue,
                },
            )
        })
        .collect();
    // Most urgent first: earliest deadline, undated last.
    questions.sort_by_key(|(deadline, _)| (deadline.is_none(), *deadline));
    let until = questions
        .iter()
        .filter_map(|(d, _)| *d)
        .filter(|d| *d > now)
        .chain(wake)
        .min();
    Decision::Ask {
        questions: questions.into_iter().map(|(_, q)| q).collect(),
        until,
    }
}

/// Wait reasons, capped for display, with the earliest wake time over all of them.
#[derive(Default)]
struct Waits {
    reasons: Vec<WaitReason>,
    until: Option<Timestamp>,
    any: bool,
}

impl Waits {
    fn push(&mut self, state: &GoalState, reason: WaitReason) {
        let wake = match &reason {
            WaitReason::LeaseHeld { until, .. } | WaitReason::WriteScopeBusy { until, .. } => {
                Some(*until)
            }
            WaitReason::MonitorNotDue { due, .. } | WaitReason::Backoff { until: due, .. } => {
                Some(*due)
            }
            WaitReason::Deferred {
                until: ResumeCondition::At { at },
                ..
            } => Some(*at),
            // A gate that expires settles by time alone, at its deadline.
            WaitReason::Deferred {
                until: ResumeCondition::GateSettled { gate },
                ..
            } => state
                .gates
                .get(gate)
                .filter(|g| g.on_expiry == ExpiryPolicy::Expire)
                .and_then(|g| g.deadline),
            _ => None,
        };
        if let Some(wake) = wake {
            self.until = Some(self.until.map_or(wake, |u| u.min(wake)));
        }
        self.any = true;
        if self.reasons.len() < MAX_REASONS {
            self.reasons.push(reason);
        }
    }

    /// Records a wait whose reason is built only if the list has room; for reasons that carry
    /// no wake time, so skipping them changes nothing but the listing.
    fn push_unless_full(&mut self, state: &GoalState, reason: impl FnOnce() -> WaitReason) {
        if self.reasons.len() < MAX_REASONS {
            self.push(state, reason());
        } else {
            self.any = true;
        }
    }

    fn is_empty(&self) -> bool {
        !self.any
    }

    fn into_decision(self) -> Decision {
        Decision::Wait {
            until: self.until,
            reasons: self.reasons,
        }
    }
}

/// The earliest instant after `now` at which time alone can change a decision on this goal: a
/// lease expiring, a monitor coming due, a deferral's time arriving, a failed todo's retry pause
/// ending, a gate's deadline passing or evidence reaching its time-to-live. `None` when only new events can change anything.
///
/// Stores index this per goal so a host can sleep until the earliest wake across all goals.
pub fn next_wake(state: &GoalState, now: Timestamp) -> Option<Timestamp> {
    time_changes(state).filter(|t| *t > now).min()
}

/// The latest instant at or before `now` at which time alone changed a decision on this goal
/// (the instants [`next_wake`] looks ahead for). Every decision is the same at each instant of
/// `[last_change, next_wake)` as at `now`; `None` when no such instant is at or before `now`,
/// and the decisions at `now` are then those at any earlier instant too.
///
/// Stores use it as the start of the window in which a goal's index rows are exact, so that a
/// commit that leaves the window where it was does not rewrite its index entries.
pub fn last_change(state: &GoalState, now: Timestamp) -> Option<Timestamp> {
    time_changes(state).filter(|t| *t <= now).max()
}

/// Every instant at which time alone changes a decision on this goal, in no order.
fn time_changes(state: &GoalState) -> impl Iterator<Item = Timestamp> + '_ {
    let leases = state
        .leased_todos()
        .filter_map(|t| t.lease.as_ref().map(|l| l.expires_at));
    let todos = state.pending_todos().filter_map(|t| match &t.status {
        TodoStatus::Deferred {
            until: ResumeCondition::At { at },
            ..
        } => Some(*at),
        _ => t.monitor.as_ref().map(|m| m.next_due),
    });
    // A failed todo's retry pause ends by time alone (kept only while the todo is pending).
    let retries = state
        .streaks
        .keys()
        .filter(|id| state.todos.get(id).is_some_and(|t| !t.status.is_closed()))
        .filter_map(|id| state.retry_at(id).map(|(_, at)| at));
    let gates = state
        .gates
        .values()
        .filter(|g| matches!(g.status, crate::gate::GateStatus::Pending))
        .filter_map(|g| g.deadline);
    let evidence = state
        .evidence
        .values()
        .filter_map(|e| e.ttl.map(|ttl| e.observed_at.plus(ttl)));
    leases
        .chain(todos)
        .chain(retries)
        .chain(gates)
        .chain(evidence)
}
