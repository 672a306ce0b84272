//! The reference model: one goal's lifecycle as plain maps, written from the design rules rather
//! than from the kernel's code. It interprets commands, predicts accept or refuse and the events
//! recorded, and recomputes the derived facts (frontier, terminal, freshness) on its own.

use std::collections::{BTreeMap, BTreeSet};

use crate::actor::Actor;
use crate::budget::{Amounts, Limits};
use crate::command::{
    Command, Continuation, GateAnswer, OutcomeResolution, PlanChange, Settlement, Transition,
    VerdictOutcome,
};
use crate::decide::TerminalOutcome;
use crate::evidence::{NewEvidence, Observation, Outcome, SourceOrder};
use crate::gate::{ExpiryPolicy, GateState, GateStatus, NewGate};
use crate::goal::{Amendment, GoalSpec, GrantedAction, Policy};
use crate::identity::{Identity, RegisteredKey};
use crate::ids::{
    AgentId, CheckId, CriterionId, DecisionScope, EffectId, EvidenceId, Fingerprint, GateId,
    ObligationId, ObservationKey, PersonId, Revision, SourceId, Subject, TodoId, TurnId,
};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::outbox::EffectIntent;
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};
use crate::todo::{
    ContinuationRecord, HandoffNote, NewTodo, Priority, ResumeCondition, TodoClass, TodoStatus,
    Workspace, WriteSet,
};

use super::checks::Finding;
use super::step::Step;

/// What the model predicts for the last step it applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No command was issued (the machine just started, or time passed).
    Nothing,
    /// The command is accepted and records events with these names, in this order. An empty
    /// list is an accepted no-op (an unchanged observation, a repeated workspace report).
    Accepted(Vec<&'static str>),
    /// The command is refused; the text names the rule the model applied.
    Refused(&'static str),
}

type Verdict = Result<Vec<&'static str>, &'static str>;

/// The rule refusing a plain settlement (or a take-over) of a turn whose lease expired over
/// work not safe to repeat: its outcome is unknown until a readback resolves it.
pub(crate) const EXPIRED_TURN: &str = "outcome unknown: only a readback settles it";

/// A todo as the model sees it.
#[derive(Debug, Clone)]
pub(crate) struct MTodo {
    pub(crate) seq: u64,
    pub(crate) priority: Priority,
    pub(crate) deps: BTreeSet<TodoId>,
    pub(crate) decisions: BTreeSet<DecisionScope>,
    pub(crate) excluded: BTreeSet<AgentId>,
    pub(crate) assignee: Option<AgentId>,
    pub(crate) writes: Option<WriteSet>,
    pub(crate) idempotent: bool,
    /// Per-todo limits with what was spent and is reserved against them.
    pub(crate) budget: Option<(Limits, Amounts, Amounts)>,
    /// What was charged beyond reservations against the todo's own budget.
    pub(crate) budget_overrun: Amounts,
    /// What one turn of it is expected to use, when it says.
    pub(crate) expected: Option<Amounts>,
    pub(crate) monitor: Option<MMonitor>,
    /// The todo whose result this one reviews.
    pub(crate) reviews: Option<TodoId>,
    pub(crate) status: MStatus,
    pub(crate) lease: Option<MLease>,
    pub(crate) last_epoch: u64,
    /// Who added it (a capability may act on its own todos while no live lease holds them).
    pub(crate) creator: Actor,
    /// Failed turns in a row, and when the last one settled.
    pub(crate) failures: u32,
    pub(crate) failed_at: Option<Timestamp>,
    /// Settled turns in a row that neither failed nor made progress.
    pub(crate) idle: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct MMonitor {
    pub(crate) watches: ObservationKey,
    pub(crate) cadence: Duration,
    pub(crate) due: Timestamp,
    pub(crate) streak: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MStatus {
    Open,
    Blocked,
    Deferred {
        until: ResumeCondition,
        baseline: Option<Fingerprint>,
    },
    Done {
        by: AgentId,
        continuation: ContinuationRecord,
    },
    Superseded,
}

#[derive(Debug, Clone)]
pub(crate) struct MLease {
    pub(crate) holder: AgentId,
    pub(crate) epoch: u64,
    pub(crate) expires: Timestamp,
    pub(crate) workspace: Option<Workspace>,
    pub(crate) turn: Option<(TurnId, Amounts)>,
}

#[derive(Debug, Clone)]
pub(crate) struct MGate {
    pub(crate) owner: Actor,
    pub(crate) opened_by: Actor,
    pub(crate) todos: BTreeSet<TodoId>,
    pub(crate) decisions: BTreeSet<DecisionScope>,
    pub(crate) whole: bool,
    pub(crate) deadline: Option<Timestamp>,
    pub(crate) keep_asking: bool,
    pub(crate) answer: MAnswer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MAnswer {
    Pending,
    Resolved,
    Rejected,
    Withdrawn,
}

#[derive(Debug, Clone)]
pub(crate) struct MEvidence {
    /// Who established it (the verdict's validator for a settled turn's evidence).
    pub(crate) producer: Actor,
    pub(crate) check: CheckId,
    pub(crate) subject: Subject,
    pub(crate) revision: Revision,
    pub(crate) pass: bool,
    pub(crate) observed_at: Timestamp,
    pub(crate) ttl: Option<Duration>,
    pub(crate) inputs: Vec<EvidenceId>,
    pub(crate) observed: Vec<(ObservationKey, Fingerprint)>,
    pub(crate) seq: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct MObligation {
    pub(crate) kind: ObligationKind,
    pub(crate) owner: Option<AgentId>,
    pub(crate) open: bool,
    /// The todo whose streak (quiet polls, idle or failed turns) raised it.
    pub(crate) stalled: Option<TodoId>,
    /// Raised by the goal-wide run of idle turns.
    pub(crate) goal_stall: bool,
}

/// An intended effect not yet recorded: the lease it was intended under.
#[derive(Debug, Clone)]
pub(crate) struct MEffect {
    pub(crate) todo: TodoId,
    pub(crate) epoch: u64,
    pub(crate) holder: AgentId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MTurn {
    InFlight(Amounts),
    Settled(Amounts),
    Cancelled,
}

/// The reference model of one goal.
///
/// It guarantees to be a pure function of the steps applied to it: the same spec and steps
/// always give the same predictions. It models the lifecycle rules of the design (authority,
/// leases and epochs, the workspace guard, gates, budgets, evidence freshness, obligations,
/// terminal) and nothing about storage.
#[derive(Debug, Clone)]
pub struct LifecycleModel {
    pub(crate) spec: GoalSpec,
    pub(crate) created_at: Timestamp,
    pub(crate) now: Timestamp,
    pub(crate) revision: u64,
    pub(crate) goal_revision: u64,
    pub(crate) agents: BTreeSet<AgentId>,
    pub(crate) grants: BTreeMap<AgentId, BTreeSet<GrantedAction>>,
    pub(crate) keys: Vec<RegisteredKey>,
    /// Who may establish evidence of which check (applied on signed goals only).
    pub(crate) validators: BTreeMap<CheckId, BTreeSet<Actor>>,
    /// Whom each (provider, login in lower case) speaks for, as the owner mapped it.
    pub(crate) logins: BTreeMap<(SourceId, String), PersonId>,
    /// Each gate's one notice: the provider that intended it, and whether it is still pending.
    pub(crate) gate_notices: BTreeMap<GateId, (SourceId, bool)>,
    pub(crate) limits: Limits,
    pub(crate) spent: Amounts,
    pub(crate) reserved: Amounts,
    pub(crate) policy: Policy,
    pub(crate) criteria: BTreeMap<CriterionId, (CheckId, Subject)>,
    pub(crate) todos: BTreeMap<TodoId, MTodo>,
    pub(crate) gates: BTreeMap<GateId, MGate>,
    pub(crate) evidence: BTreeMap<EvidenceId, MEvidence>,
    pub(crate) heads: BTreeMap<Subject, (Revision, Timestamp)>,
    pub(crate) fingerprints: BTreeMap<ObservationKey, Fingerprint>,
    /// The source order of each stream's recorded observation, when it had one.
    pub(crate) orders: BTreeMap<ObservationKey, SourceOrder>,
    pub(crate) revisions_seen: BTreeSet<Revision>,
    pub(crate) obligations: BTreeMap<ObligationId, MObligation>,
    /// Each turn by its todo and id, with the agent that began it: an id names one turn per
    /// lease, so the same id may come back under a later lease.
    pub(crate) turns: BTreeMap<(TodoId, TurnId), (AgentId, MTurn)>,
    pub(crate) workspaces: BTreeMap<AgentId, Workspace>,
    /// The outbox: intended effects not yet recorded, and every effect id ever intended.
    pub(crate) effects: BTreeMap<EffectId, MEffect>,
    pub(crate) effect_ids: BTreeSet<EffectId>,
    pub(crate) closure: bool,
    pub(crate) abandoned: bool,
    /// Settled turns in a row on the goal (monitors' polls excepted) that neither failed nor
    /// made progress.
    pub(crate) goal_idle: u32,
    /// What settled turns were charged beyond their reservations (charged all the same): the
    /// only way `spent + reserved` may exceed a limit.
    pub(crate) overrun: Amounts,
    /// The last overrun (todo, turn, by how much) until the owner amends the budget or policy.
    pub(crate) unanswered_overrun: Option<(TodoId, TurnId, Amounts)>,
    /// Steps applied so far; generators derive fresh ids from it.
    pub(crate) steps: u64,
    /// How strongly generators push this run towards progress (claim, turn, settle, accept)
    /// rather than arbitrary commands; it does not change what the model predicts.
    pub(crate) drive: u32,
    pub(crate) expect: Expect,
    seq: u64,
}

fn text_ok(text: &str) -> bool {
    !text.trim().is_empty() && bounded(text)
}

fn bounded(text: &str) -> bool {
    text.len() <= crate::MAX_TEXT
        && !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
}

/// Two write scopes collide when one path is inside the other.
fn paths_nest(a: &str, b: &str) -> bool {
    let parts = |s: &str| -> Vec<String> {
        s.split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (parts(a), parts(b));
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn writes_collide(a: &WriteSet, b: &WriteSet) -> bool {
    a.repository == b.repository
        && a.scopes
            .iter()
            .any(|x| b.scopes.iter().any(|y| paths_nest(x, y)))
}

fn add(a: Amounts, b: Amounts) -> Amounts {
    a.plus(b)
}

/// True when `new` lowers a limit of `old` below `committed`: an unlimited dimension bounded,
/// or a bound made smaller, to less than is spent and reserved.
fn lowered_below(old: &Limits, new: &Limits, committed: Amounts) -> bool {
    [
        (old.turns, new.turns, committed.turns),
        (old.tokens, new.tokens, committed.tokens),
        (old.cost_micros, new.cost_micros, committed.cost_micros),
        (old.wall_ms, new.wall_ms, committed.wall_ms),
    ]
    .iter()
    .any(|&(old, new, used)| match (old, new) {
        (_, None) => false,
        (None, Some(n)) => n < used,
        (Some(o), Some(n)) => n < o && n < used,
    })
}

/// The first limited dimension on which `spent + reserved + request` exceeds `limits`.
fn over(limits: &Limits, spent: Amounts, reserved: Amounts, request: Amounts) -> bool {
    let total = spent.plus(reserved).plus(request);
    [
        (limits.turns, total.turns),
        (limits.tokens, total.tokens),
        (limits.cost_micros, total.cost_micros),
        (limits.wall_ms, total.wall_ms),
    ]
    .iter()
    .any(|(limit, used)| limit.is_some_and(|l| *used > l))
}

impl MLease {
    fn live(&self, now: Timestamp) -> bool {
        now < self.expires
    }
}

impl MTodo {
    pub(crate) fn live_lease(&self, now: Timestamp) -> Option<&MLease> {
        self.lease.as_ref().filter(|l| l.live(now))
    }

    pub(crate) fn closed(&self) -> bool {
        matches!(self.status, MStatus::Done { .. } | MStatus::Superseded)
    }

    /// A lease expired over a begun turn on work that is not safe to repeat.
    pub(crate) fn outcome_unknown(&self, now: Timestamp) -> bool {
        !self.idempotent
            && self
                .lease
                .as_ref()
                .is_some_and(|l| !l.live(now) && l.turn.is_some())
    }
}

impl LifecycleModel {
    /// The model of a goal created from `spec` by its owner at `created_at`.
    pub fn new(spec: GoalSpec, created_at: Timestamp) -> Self {
        LifecycleModel {
            created_at,
            now: created_at,
            revision: 1,
            goal_revision: 0,
            agents: spec.agents.clone(),
            grants: spec.grants.clone(),
            keys: spec.keys.clone(),
            validators: spec.validators.clone(),
            limits: spec.budget,
            spent: Amounts::ZERO,
            reserved: Amounts::ZERO,
            policy: spec.policy.clone(),
            criteria: spec
                .criteria
                .iter()
                .map(|c| (c.id.clone(), (c.check.clone(), c.subject.clone())))
                .collect(),
            todos: BTreeMap::new(),
            gates: BTreeMap::new(),
            evidence: BTreeMap::new(),
            heads: BTreeMap::new(),
            fingerprints: BTreeMap::new(),
            orders: BTreeMap::new(),
            revisions_seen: BTreeSet::new(),
            obligations: BTreeMap::new(),
            turns: BTreeMap::new(),
            workspaces: BTreeMap::new(),
            effects: BTreeMap::new(),
            effect_ids: BTreeSet::new(),
            closure: false,
            abandoned: false,
            goal_idle: 0,
            overrun: Amounts::ZERO,
            unanswered_overrun: None,
            logins: BTreeMap::new(),
            gate_notices: BTreeMap::new(),
            steps: 0,
            drive: 20,
            expect: Expect::Nothing,
            seq: 0,
            spec,
        }
    }

    /// The spec the goal was created with.
    pub fn spec(&self) -> &GoalSpec {
        &self.spec
    }

    /// When the goal was created.
    pub fn created_at(&self) -> Timestamp {
        self.created_at
    }

    /// The model's current time; every command of the next step is issued at it.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The prediction for the last step applied.
    pub fn expect(&self) -> &Expect {
        &self.expect
    }

    /// Applies one step and records its prediction in [`LifecycleModel::expect`].
    pub fn apply(&mut self, step: &Step) {
        self.steps += 1;
        match step {
            Step::Advance(span) => {
                self.now = self.now.plus(*span);
                self.expect = Expect::Nothing;
            }
            Step::Issue { actor, command } => {
                self.expect = self.issue(actor, command);
            }
        }
    }

    /// Interprets `command` from `actor` at the model's time: all or nothing.
    pub fn issue(&mut self, actor: &Actor, command: &Command) -> Expect {
        let mut next = self.clone();
        match next.exec(actor, command) {
            Ok(events) => {
                next.revision += events.len() as u64;
                *self = next;
                Expect::Accepted(events)
            }
            Err(rule) => Expect::Refused(rule),
        }
    }

    // ----- who may do what -------------------------------------------------------------------

    fn is_owner(&self, actor: &Actor) -> bool {
        actor.person() == Some(&self.spec.owner)
    }

    fn registered_agent<'a>(&self, actor: &'a Actor) -> Result<&'a AgentId, &'static str> {
        match actor.agent() {
            Some(agent) if self.agents.contains(agent) => Ok(agent),
            Some(_) => Err("agent is not registered"),
            None => Err("only agents may do this"),
        }
    }

    /// Owner, registered agents and capabilities shape the plan.
    fn planner(&self, actor: &Actor) -> Result<(), &'static str> {
        match actor {
            Actor::Capability(_) => Ok(()),
            Actor::Agent(a) if self.agents.contains(a) => Ok(()),
            _ if self.is_owner(actor) => Ok(()),
            _ => Err("actor may not shape the plan"),
        }
    }

    fn granted(
        &self,
        agent: &AgentId,
        action: GrantedAction,
        reason: Option<&str>,
    ) -> Result<(), &'static str> {
        if !self.grants.get(agent).is_some_and(|g| g.contains(&action)) {
            return Err("grant missing");
        }
        if !reason.is_some_and(text_ok) {
            return Err("grant used without a reason");
        }
        Ok(())
    }

    /// The agent a todo belongs to: its live holder, else its assignee.
    fn belongs_to(&self, todo: &MTodo) -> Option<AgentId> {
        todo.live_lease(self.now)
            .map(|l| l.holder.clone())
            .or_else(|| todo.assignee.clone())
    }

    fn may_act_on(
        &self,
        actor: &Actor,
        todo: &MTodo,
        action: GrantedAction,
        reason: Option<&str>,
    ) -> Result<(), &'static str> {
        if self.is_owner(actor) {
            return Ok(());
        }
        let belongs = self.belongs_to(todo);
        match actor {
            Actor::Agent(agent) => {
                if !self.agents.contains(agent) {
                    return Err("agent is not registered");
                }
                match belongs {
                    Some(other) if &other != agent => self.granted(agent, action, reason),
                    _ => Ok(()),
                }
            }
            Actor::Capability(_) if belongs.is_none() => Ok(()),
            Actor::Capability(_)
                if &todo.creator == actor && todo.live_lease(self.now).is_none() =>
            {
                Ok(())
            }
            Actor::Capability(_) => Err("a capability may not act on an agent's todo"),
            _ => Err("actor may not act on todos"),
        }
    }

    // ----- derived facts ---------------------------------------------------------------------

    pub(crate) fn gate_now(&self, gate: &MGate) -> GateState {
        match gate.answer {
            MAnswer::Resolved => GateState::Resolved,
            MAnswer::Rejected => GateState::Rejected,
            MAnswer::Withdrawn => GateState::Withdrawn,
            MAnswer::Pending => match gate.deadline {
                Some(deadline) if self.now >= deadline && gate.keep_asking => GateState::Overdue,
                Some(deadline) if self.now >= deadline => GateState::Expired,
                _ => GateState::Pending,
            },
        }
    }

    pub(crate) fn gate_waiting(&self, gate: &MGate) -> bool {
        matches!(self.gate_now(gate), GateState::Pending | GateState::Overdue)
    }

    pub(crate) fn covers(gate: &MGate, id: &TodoId, todo: &MTodo) -> bool {
        gate.whole || gate.todos.contains(id) || !gate.decisions.is_disjoint(&todo.decisions)
    }

    /// Gates let a todo run when none covering it waits, each decision it needs was answered
    /// yes, and a refusal of a gate covering it was not overruled by a yes.
    fn gates_allow(&self, id: &TodoId, todo: &MTodo) -> bool {
        let covering: Vec<&MGate> = self
            .gates
            .values()
            .filter(|g| Self::covers(g, id, todo))
            .collect();
        if covering.iter().any(|g| self.gate_waiting(g)) {
            return false;
        }
        let decided = |d: &DecisionScope| {
            self.gates.values().any(|g| {
                (g.whole || g.decisions.contains(d)) && self.gate_now(g) == GateState::Resolved
            })
        };
        if !todo.decisions.iter().all(decided) {
            return false;
        }
        let refused = covering
            .iter()
            .any(|g| matches!(self.gate_now(g), GateState::Rejected | GateState::Expired));
        let approved = covering
            .iter()
            .any(|g| self.gate_now(g) == GateState::Resolved);
        !refused || approved
    }

    fn deps_done(&self, todo: &MTodo) -> bool {
        todo.deps.iter().all(|d| {
            self.todos
                .get(d)
                .is_some_and(|t| matches!(t.status, MStatus::Done { .. }))
        })
    }

    pub(crate) fn resume_due(&self, todo: &MTodo) -> bool {
        let MStatus::Deferred { until, baseline } = &todo.status else {
            return false;
        };
        match until {
            ResumeCondition::At { at } => self.now >= *at,
            ResumeCondition::TodoDone { todo } => self
                .todos
                .get(todo)
                .is_some_and(|t| matches!(t.status, MStatus::Done { .. })),
            ResumeCondition::GateSettled { gate } => {
                self.gates.get(gate).is_some_and(|g| !self.gate_waiting(g))
            }
            ResumeCondition::ObservationChanged { key } => {
                self.fingerprints.get(key) != baseline.as_ref()
            }
        }
    }

    /// The workspace guard. `claiming` demands a workspace for writing todos; the frontier only
    /// asks whether some workspace of the agent's own could take it.
    fn guard(
        &self,
        id: &TodoId,
        todo: &MTodo,
        agent: &AgentId,
        workspace: Option<&Workspace>,
        claiming: bool,
    ) -> Result<(), &'static str> {
        let Some(writes) = &todo.writes else {
            return Ok(());
        };
        for (other_id, other) in &self.todos {
            if other_id == id {
                continue;
            }
            let Some(lease) = other.live_lease(self.now) else {
                continue;
            };
            if other
                .writes
                .as_ref()
                .is_some_and(|w| writes_collide(w, writes))
            {
                return Err("write scope overlaps a live lease");
            }
            if let (Some(mine), Some(theirs)) = (workspace, &lease.workspace)
                && &lease.holder != agent
                && mine.top_level == theirs.top_level
            {
                return Err("checkout used by another agent's live lease");
            }
        }
        if claiming && workspace.is_none() {
            return Err("a writing todo needs a workspace");
        }
        Ok(())
    }

    /// Everything that makes a todo legal for `agent` to take, apart from leases, assignment
    /// and the workspace guard.
    /// An agent may never take a todo it is excluded from, nor a review of work it completed.
    pub(crate) fn excludes(&self, todo: &MTodo, agent: &AgentId) -> bool {
        todo.excluded.contains(agent)
            || todo.reviews.as_ref().is_some_and(|of| {
                self.todos
                    .get(of)
                    .is_some_and(|r| matches!(&r.status, MStatus::Done { by, .. } if by == agent))
            })
    }

    fn takeable(&self, todo: &MTodo, agent: &AgentId, id: &TodoId) -> Result<(), &'static str> {
        if self.excludes(todo, agent) {
            return Err("agent excluded from the todo");
        }
        match &todo.status {
            MStatus::Open => {}
            MStatus::Deferred { .. } if self.resume_due(todo) => {}
            _ => return Err("todo is not open"),
        }
        if !self.deps_done(todo) {
            return Err("dependencies not done");
        }
        if !self.gates_allow(id, todo) {
            return Err("a gate holds the todo");
        }
        if todo.monitor.as_ref().is_some_and(|m| m.due > self.now) {
            return Err("monitor not due");
        }
        if self.retry_at(id).is_some_and(|at| at > self.now) {
            return Err("backing off after failed turns");
        }
        Ok(())
    }

    /// The pause the retry policy asks for after `failures` failed turns in a row on `todo`,
    /// computed the plain way: double from `backoff` once per failure after the first, never
    /// past the cap; add the jitter share the SHA-256 of goal, todo and count gives; cap again.
    pub fn retry_pause(&self, todo: &TodoId, failures: u32) -> Duration {
        let retry = &self.policy.retry;
        if failures == 0 {
            return Duration::ZERO;
        }
        let cap = u128::try_from(retry.max_backoff.as_millis()).unwrap_or(0);
        let mut pause = u128::try_from(retry.backoff.as_millis())
            .unwrap_or(0)
            .min(cap);
        for _ in 1..failures.min(200) {
            pause = (pause * 2).min(cap);
        }
        let digest =
            crate::ids::sha256_hex(format!("{}\n{todo}\n{failures}", self.spec.id).as_bytes());
        let draw = u128::from_str_radix(&digest[..8], 16).unwrap_or(0);
        let percent = u128::from(retry.jitter_percent.min(100));
        let total = (pause + pause * percent * draw / (100 * (1 << 32))).min(cap);
        Duration::from_millis(i64::try_from(total).unwrap_or(i64::MAX))
    }

    /// When `todo` may be claimed again after its failed turns, if it has any in a row.
    pub fn retry_at(&self, todo: &TodoId) -> Option<Timestamp> {
        let t = self.todos.get(todo)?;
        let at = t.failed_at.filter(|_| t.failures > 0)?;
        Some(at.plus(self.retry_pause(todo, t.failures)))
    }

    /// Failed turns in a row on `todo`.
    pub fn failures(&self, todo: &TodoId) -> u32 {
        self.todos.get(todo).map_or(0, |t| t.failures)
    }

    /// The todos legal for `agent` to claim now, most urgent (then oldest) first.
    pub fn frontier(&self, agent: &AgentId) -> Vec<TodoId> {
        if self.abandoned || !self.agents.contains(agent) {
            return Vec::new();
        }
        let mut ready: Vec<(Priority, u64, TodoId)> = self
            .todos
            .iter()
            .filter(|(_, t)| !t.closed())
            .filter(|(_, t)| t.live_lease(self.now).is_none() && !t.outcome_unknown(self.now))
            .filter(|(_, t)| t.assignee.as_ref().is_none_or(|a| a == agent))
            .filter(|(id, t)| self.takeable(t, agent, id).is_ok())
            .filter(|(id, t)| {
                self.guard(id, t, agent, self.workspaces.get(agent), false)
                    .is_ok()
            })
            .filter(|(_, t)| {
                t.budget.as_ref().is_none_or(|(limits, spent, reserved)| {
                    !over(limits, *spent, *reserved, self.expected(t))
                })
            })
            .map(|(id, t)| (t.priority, t.seq, id.clone()))
            .collect();
        ready.sort();
        ready.into_iter().map(|(_, _, id)| id).collect()
    }

    /// Evidence is fresh when bound to its subject's current revision (or its subject was never
    /// observed), within its time to live, citing only fresh evidence and observations that
    /// have not moved since.
    /// `None` for unknown evidence.
    pub fn is_fresh(&self, id: &EvidenceId) -> Option<bool> {
        let e = self.evidence.get(id)?;
        let current = self.heads.get(&e.subject).map(|(r, _)| r);
        let fresh = current.is_none_or(|c| c == &e.revision)
            && e.ttl.is_none_or(|ttl| self.now < e.observed_at.plus(ttl))
            && e.inputs.iter().all(|i| self.is_fresh(i).unwrap_or(true))
            && e.observed
                .iter()
                .all(|(key, fp)| self.fingerprints.get(key) == Some(fp));
        Some(fresh)
    }

    /// A criterion is met when the newest evidence for its check at its subject's current
    /// revision (any revision while the subject is unobserved), among the evidence of those who
    /// may establish it, passes and is fresh. `None` for unknown criteria.
    pub fn criterion_met(&self, id: &CriterionId) -> Option<bool> {
        let (check, subject) = self.criteria.get(id)?;
        let current = self.heads.get(subject).map(|(r, _)| r);
        let newest = self
            .evidence
            .iter()
            .filter(|(_, e)| &e.check == check && &e.subject == subject)
            .filter(|(_, e)| self.may_establish(check, &e.producer))
            .filter(|(_, e)| current.is_none_or(|c| c == &e.revision))
            .max_by_key(|(_, e)| (e.observed_at, e.seq));
        Some(newest.is_some_and(|(id, e)| e.pass && self.is_fresh(id) == Some(true)))
    }

    /// Whether the goal is over, recomputed from the model's own maps.
    pub fn terminal(&self) -> Option<TerminalOutcome> {
        // An intended effect nobody recorded may have happened: nothing ends over it.
        if !self.effects.is_empty() {
            return None;
        }
        if self.abandoned {
            // A turn still running, or one whose effect is unknown, must be settled first; an
            // expired turn on idempotent work is safe to drop.
            let in_flight = self.todos.values().any(|t| {
                t.lease.as_ref().is_some_and(|l| {
                    l.turn.is_some() && (l.live(self.now) || t.outcome_unknown(self.now))
                })
            });
            return (!in_flight).then_some(TerminalOutcome::Abandoned);
        }
        let done = self.todos.values().all(MTodo::closed)
            && self.todos.values().all(|t| t.lease.is_none())
            && !self.gates.values().any(|g| self.gate_waiting(g))
            && self.obligations.values().all(|o| !o.open)
            && self.closure
            && self
                .criteria
                .keys()
                .all(|c| self.criterion_met(c) == Some(true));
        done.then_some(TerminalOutcome::Accepted)
    }

    // ----- interpretation --------------------------------------------------------------------

    #[allow(clippy::too_many_lines)] // one arm per command, each short
    fn exec(&mut self, actor: &Actor, command: &Command) -> Verdict {
        let still_allowed = matches!(
            command,
            Command::SettleTurn(_)
                | Command::TakeOverTurn { .. }
                | Command::Release { .. }
                | Command::ResolveOutcome { .. }
                | Command::RecordEffect { .. }
                | Command::RecordObservation { .. }
                | Command::Retire {}
        );
        if self.abandoned && !still_allowed {
            return Err("the goal was abandoned");
        }
        match command {
            Command::CreateGoal { .. } => Err("the goal exists"),
            Command::AmendGoal {
                expected_revision,
                amendments,
            } => self.amend(actor, *expected_revision, amendments),
            Command::AbandonGoal { reason } => {
                if !self.is_owner(actor) {
                    return Err("only the owner abandons");
                }
                if !text_ok(reason) {
                    return Err("empty reason");
                }
                self.abandoned = true;
                Ok(vec!["goal_abandoned"])
            }
            Command::DeclareClosure { reason } => {
                match actor {
                    Actor::Person(_) if !self.is_owner(actor) => return Err("not the owner"),
                    Actor::Person(_) => {}
                    Actor::Agent(_) => {
                        self.registered_agent(actor)?;
                    }
                    _ => return Err("actor may not declare closure"),
                }
                if !text_ok(reason) {
                    return Err("empty reason");
                }
                self.closure = true;
                Ok(vec!["closure_declared"])
            }
            Command::AddTodo { todo } => {
                self.planner(actor)?;
                let todo = self.vet_new_todo(todo, &BTreeSet::new())?;
                self.insert_todo(&todo, actor);
                Ok(vec!["todo_added"])
            }
            Command::Reassign {
                todo,
                to,
                grant_reason,
            } => self.reassign(actor, todo, to.as_ref(), grant_reason.as_deref()),
            Command::Defer {
                todo,
                until,
                grant_reason,
            } => self.defer(actor, todo, until, grant_reason.as_deref()),
            Command::Block {
                todo,
                reason,
                grant_reason,
            } => self.block(actor, todo, reason, grant_reason.as_deref()),
            Command::Unblock { todo, grant_reason } => {
                self.unblock(actor, todo, grant_reason.as_deref())
            }
            Command::Supersede {
                todo,
                reason,
                replacement,
                grant_reason,
            } => self.supersede(
                actor,
                todo,
                reason,
                replacement.as_ref(),
                grant_reason.as_deref(),
            ),
            Command::Claim {
                todo,
                ttl,
                workspace,
                grant_reason,
            } => self.claim(
                actor,
                todo,
                *ttl,
                workspace.as_ref(),
                grant_reason.as_deref(),
            ),
            Command::Renew { todo, epoch, ttl } => {
                self.holder_lease(actor, todo, *epoch)?;
                self.registered_agent(actor)?;
                let ttl = ttl.unwrap_or(self.policy.lease_ttl);
                if ttl <= Duration::ZERO {
                    return Err("ttl must be positive");
                }
                let now = self.now;
                if let Some(lease) = self.todo_mut(todo).lease.as_mut() {
                    lease.expires = now.plus(ttl);
                }
                Ok(vec!["lease_renewed"])
            }
            Command::Release { todo, epoch } => {
                self.holder_lease(actor, todo, *epoch)?;
                self.drop_lease(todo);
                Ok(vec!["lease_released"])
            }
            Command::Handoff {
                todo,
                epoch,
                to,
                note,
                grant_reason,
            } => self.handoff(actor, todo, *epoch, to, note, grant_reason.as_deref()),
            Command::BeginTurn {
                todo,
                epoch,
                turn,
                reserve,
            } => self.begin(actor, todo, *epoch, turn, *reserve),
            Command::TakeOverTurn {
                todo,
                epoch,
                turn,
                ttl,
            } => self.take_over(actor, todo, *epoch, turn, *ttl),
            Command::SettleTurn(settlement) => self.settle(actor, settlement, false),
            Command::ResolveOutcome {
                todo,
                turn,
                resolution,
                grant_reason,
            } => self.resolve(actor, todo, turn, resolution, grant_reason.as_deref()),
            Command::IntendEffect {
                todo,
                epoch,
                effect,
            } => self.intend_effect(actor, todo, *epoch, effect),
            Command::RecordEffect {
                id,
                note,
                grant_reason,
                ..
            } => self.record_effect(actor, id, note.as_deref(), grant_reason.as_deref()),
            Command::OpenGate { gate } => {
                self.planner(actor)?;
                self.open_gate(actor, gate)
            }
            Command::AnswerGate { gate, answer } => self.answer(actor, gate, answer),
            Command::RelayGateAnswer {
                gate,
                answer,
                relay,
            } => self.relay(actor, gate, answer, &relay.login),
            Command::IntendGateNotice { gate, effect } => self.intend_notice(actor, gate, effect),
            Command::RecordGateNotice { gate, note, .. } => {
                self.record_notice(actor, gate, note.as_deref())
            }
            Command::WithdrawGate { gate, reason } => self.withdraw(actor, gate, reason),
            Command::RecordObservation { observation } => {
                match actor {
                    Actor::Agent(_) => {
                        self.registered_agent(actor)?;
                    }
                    Actor::Person(_) => return Err("people do not record observations"),
                    _ => {}
                }
                Self::vet_observation(observation)?;
                Ok(if self.observe(observation) {
                    vec!["observation_recorded"]
                } else {
                    vec![]
                })
            }
            Command::RecordEvidence { evidence } => {
                let allowed = matches!(actor, Actor::Validator(_) | Actor::Provider(_))
                    || self.is_owner(actor);
                if !allowed {
                    return Err("only validators, providers and the owner record evidence");
                }
                self.vet_evidence(std::slice::from_ref(evidence))?;
                self.record_evidence(evidence, actor);
                Ok(vec!["evidence_recorded"])
            }
            Command::RaiseObligation {
                id,
                kind,
                detail,
                owner,
            } => {
                if !matches!(actor, Actor::Validator(_)) {
                    self.planner(actor)?;
                }
                if self.obligations.contains_key(id) {
                    return Err("obligation id taken");
                }
                if !text_ok(detail) {
                    return Err("empty detail");
                }
                if owner.as_ref().is_some_and(|o| !self.agents.contains(o)) {
                    return Err("obligation owner not registered");
                }
                self.obligations.insert(
                    id.clone(),
                    MObligation {
                        kind: *kind,
                        owner: owner.clone(),
                        open: true,
                        stalled: None,
                        goal_stall: false,
                    },
                );
                Ok(vec!["obligation_raised"])
            }
            Command::Discharge {
                obligation,
                changes,
            } => self.discharge(actor, obligation, changes),
            Command::ReportWorkspace { workspace } => {
                let agent = self.registered_agent(actor)?.clone();
                if self.workspaces.get(&agent) == Some(workspace) {
                    return Ok(vec![]);
                }
                if !text_ok(&workspace.top_level) || !text_ok(&workspace.common_dir) {
                    return Err("empty workspace identity");
                }
                self.workspaces.insert(agent, workspace.clone());
                Ok(vec!["workspace_reported"])
            }
            // Generators retire only while the whole goal is younger than its horizon, where
            // nothing can be inert yet; what retirement drops is the retirement property's
            // (`tests/retirement.rs`), which compares every decision before and after.
            Command::Retire {} => {
                self.planner(actor)?;
                Ok(vec![])
            }
        }
    }

    /// What a turn of `todo` reserves at least: its expected usage or the policy's default, as
    /// exactly one turn.
    fn expected(&self, todo: &MTodo) -> Amounts {
        Amounts {
            turns: 1,
            ..todo.expected.unwrap_or(self.policy.default_reservation)
        }
    }

    fn todo_mut(&mut self, id: &TodoId) -> &mut MTodo {
        match self.todos.get_mut(id) {
            Some(todo) => todo,
            None => unreachable!("the model checked that todo `{id}` exists"),
        }
    }

    fn change_validators(&mut self, amendment: &Amendment) -> Result<(), &'static str> {
        match amendment {
            Amendment::RegisterValidator { check, validator } => {
                let registered = self.validators.entry(check.clone()).or_default();
                if !registered.insert(validator.clone()) {
                    return Err("validator registered twice");
                }
            }
            Amendment::UnregisterValidator { check, validator } => {
                let Some(registered) = self.validators.get_mut(check) else {
                    return Err("unknown validator");
                };
                if !registered.remove(validator) {
                    return Err("unknown validator");
                }
                if registered.is_empty() {
                    self.validators.remove(check);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A login speaks for one person: mapping one that is malformed or taken, or withdrawing
    /// one never mapped, is refused.
    fn change_logins(&mut self, amendment: &Amendment) -> Result<(), &'static str> {
        match amendment {
            Amendment::MapLogin {
                person,
                provider,
                login,
            } => {
                if crate::login::check_login(login).is_err() {
                    return Err("malformed login");
                }
                let key = (provider.clone(), login.to_ascii_lowercase());
                if self.logins.contains_key(&key) {
                    return Err("login mapped already");
                }
                self.logins.insert(key, person.clone());
            }
            Amendment::UnmapLogin { provider, login } => {
                let key = (provider.clone(), login.to_ascii_lowercase());
                if self.logins.remove(&key).is_none() {
                    return Err("login never mapped");
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn amend(&mut self, actor: &Actor, expected: u64, amendments: &[Amendment]) -> Verdict {
        if !self.is_owner(actor) {
            return Err("only the owner amends");
        }
        if expected != self.goal_revision {
            return Err("stale goal revision");
        }
        if amendments.is_empty() {
            return Err("empty amendment");
        }
        let had_keys = !self.keys.is_empty();
        // Limits are judged against those in force before the amendment, whatever it sets first.
        let before = self.limits;
        for amendment in amendments {
            match amendment {
                Amendment::SetObjective { objective } if !text_ok(objective) => {
                    return Err("empty objective");
                }
                // A binding is data only: the kernel never reads it.
                Amendment::SetObjective { .. } | Amendment::SetCapability { .. } => {}
                Amendment::AddCriterion { criterion } => {
                    if !text_ok(&criterion.text) || self.criteria.contains_key(&criterion.id) {
                        return Err("bad or duplicate criterion");
                    }
                    self.criteria.insert(
                        criterion.id.clone(),
                        (criterion.check.clone(), criterion.subject.clone()),
                    );
                }
                Amendment::RemoveCriterion { id } => {
                    if self.criteria.remove(id).is_none() {
                        return Err("unknown criterion");
                    }
                }
                Amendment::RegisterAgent { agent } => {
                    self.agents.insert(agent.clone());
                }
                Amendment::UnregisterAgent { agent } => {
                    self.agents.remove(agent);
                }
                Amendment::SetBudget { limits } => {
                    if lowered_below(&before, limits, self.spent.plus(self.reserved)) {
                        return Err("a limit lowered below what is spent and reserved");
                    }
                    self.limits = *limits;
                    self.unanswered_overrun = None;
                }
                Amendment::SetPolicy { policy } => {
                    if policy.lease_ttl <= Duration::ZERO {
                        return Err("lease ttl must be positive");
                    }
                    self.policy = policy.clone();
                    self.unanswered_overrun = None;
                }
                Amendment::Grant { agent, action } => {
                    self.grants
                        .entry(agent.clone())
                        .or_default()
                        .insert(*action);
                }
                Amendment::Revoke { agent, action } => {
                    if let Some(actions) = self.grants.get_mut(agent) {
                        actions.remove(action);
                        if actions.is_empty() {
                            self.grants.remove(agent);
                        }
                    }
                }
                Amendment::RegisterKey { actor, key } => {
                    if self.keys.iter().any(|k| &k.actor == actor && &k.key == key) {
                        return Err("key registered twice");
                    }
                    self.keys.push(RegisteredKey {
                        actor: actor.clone(),
                        key: *key,
                    });
                }
                Amendment::RevokeKey { actor, key } => {
                    let before = self.keys.len();
                    self.keys.retain(|k| !(&k.actor == actor && &k.key == key));
                    if self.keys.len() == before {
                        return Err("unknown key");
                    }
                }
                Amendment::RegisterValidator { .. } | Amendment::UnregisterValidator { .. } => {
                    self.change_validators(amendment)?;
                }
                Amendment::MapLogin { .. } | Amendment::UnmapLogin { .. } => {
                    self.change_logins(amendment)?;
                }
            }
        }
        let owner = self.spec.owner_actor();
        if self.spec.identity == Identity::Signed
            && (had_keys || !self.keys.is_empty())
            && !self.keys.iter().any(|k| k.actor == owner)
        {
            return Err("the owner would hold no key");
        }
        self.goal_revision += 1;
        Ok(vec!["goal_amended"])
    }

    /// Checks a new todo against the model (and ids added earlier in the same commit) and
    /// returns it as recorded: a review excludes the author of what it reviews.
    fn vet_new_todo(
        &self,
        new: &NewTodo,
        batch: &BTreeSet<TodoId>,
    ) -> Result<NewTodo, &'static str> {
        if self.todos.contains_key(&new.id) || batch.contains(&new.id) {
            return Err("todo id taken");
        }
        if !text_ok(&new.title) {
            return Err("empty title");
        }
        let known = |id: &TodoId| self.todos.contains_key(id) || batch.contains(id);
        if new.depends_on.iter().any(|d| d == &new.id || !known(d)) {
            return Err("unknown dependency");
        }
        if let Some(assignee) = &new.assignee
            && (!self.agents.contains(assignee) || new.excluded_agents.contains(assignee))
        {
            return Err("assignee not registered or excluded");
        }
        if let Some(writes) = &new.writes {
            let scopes_ok = !writes.scopes.is_empty()
                && writes
                    .scopes
                    .iter()
                    .all(|s| bounded(s) && !s.split('/').any(|p| p == ".."));
            if !text_ok(&writes.repository) || !scopes_ok {
                return Err("bad write set");
            }
        }
        let mut recorded = new.clone();
        match &new.class {
            TodoClass::Monitor(spec) if spec.cadence <= Duration::ZERO => {
                return Err("monitor cadence must be positive");
            }
            TodoClass::Advance | TodoClass::Monitor(_) => {}
            TodoClass::Review { of } => {
                let reviewed = self.todos.get(of).ok_or("reviewed todo unknown")?;
                let author = match &reviewed.status {
                    MStatus::Done { by, .. } => Some(by.clone()),
                    _ => reviewed.lease.as_ref().map(|l| l.holder.clone()),
                };
                if let Some(author) = author {
                    if new.assignee.as_ref() == Some(&author) {
                        return Err("a review cannot go to its author");
                    }
                    recorded.excluded_agents.insert(author);
                }
            }
        }
        Ok(recorded)
    }

    fn insert_todo(&mut self, new: &NewTodo, creator: &Actor) {
        let seq = self.seq;
        self.seq += 1;
        let monitor = match &new.class {
            TodoClass::Monitor(spec) => Some(MMonitor {
                watches: spec.watches.clone(),
                cadence: spec.cadence,
                due: self.now,
                streak: 0,
            }),
            _ => None,
        };
        self.todos.insert(
            new.id.clone(),
            MTodo {
                seq,
                priority: new.priority,
                deps: new.depends_on.clone(),
                decisions: new.requires_decisions.clone(),
                excluded: new.excluded_agents.clone(),
                assignee: new.assignee.clone(),
                writes: new.writes.clone(),
                idempotent: new.idempotent,
                budget: new.budget.map(|l| (l, Amounts::ZERO, Amounts::ZERO)),
                budget_overrun: Amounts::ZERO,
                expected: new.expected_usage.as_deref().copied(),
                monitor,
                reviews: match &new.class {
                    TodoClass::Review { of } => Some(of.clone()),
                    _ => None,
                },
                status: MStatus::Open,
                lease: None,
                last_epoch: 0,
                creator: creator.clone(),
                failures: 0,
                failed_at: None,
                idle: 0,
            },
        );
    }

    /// Drops a todo's lease; a begun turn is cancelled and its reservation returned.
    fn drop_lease(&mut self, id: &TodoId) {
        let todo = self.todo_mut(id);
        let Some(lease) = todo.lease.take() else {
            return;
        };
        if let Some((turn, reserved)) = lease.turn {
            if let Some((_, _, r)) = todo.budget.as_mut() {
                *r = r.minus(reserved);
            }
            self.reserved = self.reserved.minus(reserved);
            if let Some(record) = self.turns.get_mut(&(id.clone(), turn)) {
                record.1 = MTurn::Cancelled;
            }
        }
    }

    fn open_todo(&self, id: &TodoId) -> Result<&MTodo, &'static str> {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if todo.closed() {
            return Err("todo is closed");
        }
        Ok(todo)
    }

    fn no_turn(todo: &MTodo) -> Result<(), &'static str> {
        if todo.lease.as_ref().is_some_and(|l| l.turn.is_some()) {
            return Err("a turn is in flight");
        }
        Ok(())
    }

    fn vet_condition(&self, id: &TodoId, until: &ResumeCondition) -> Result<(), &'static str> {
        match until {
            ResumeCondition::TodoDone { todo } if todo == id || !self.todos.contains_key(todo) => {
                Err("resume todo unknown")
            }
            ResumeCondition::GateSettled { gate } if !self.gates.contains_key(gate) => {
                Err("resume gate unknown")
            }
            _ => Ok(()),
        }
    }

    fn baseline(&self, until: &ResumeCondition) -> Option<Fingerprint> {
        match until {
            ResumeCondition::ObservationChanged { key } => self.fingerprints.get(key).cloned(),
            _ => None,
        }
    }

    fn reassign(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        to: Option<&AgentId>,
        reason: Option<&str>,
    ) -> Verdict {
        let todo = self.open_todo(id)?;
        self.may_act_on(actor, todo, GrantedAction::Reassign, reason)?;
        if let Some(agent) = to
            && (!self.agents.contains(agent) || self.excludes(todo, agent))
        {
            return Err("new assignee not registered or excluded");
        }
        if todo.assignee.as_ref() == to {
            return Err("assignee unchanged");
        }
        if todo
            .live_lease(self.now)
            .is_some_and(|l| Some(&l.holder) != to)
        {
            return Err("another agent holds the lease");
        }
        self.todo_mut(id).assignee = to.cloned();
        Ok(vec!["todo_reassigned"])
    }

    fn defer(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        until: &ResumeCondition,
        reason: Option<&str>,
    ) -> Verdict {
        let todo = self.open_todo(id)?;
        self.may_act_on(actor, todo, GrantedAction::Supersede, reason)?;
        Self::no_turn(todo)?;
        self.vet_condition(id, until)?;
        let baseline = self.baseline(until);
        self.drop_lease(id);
        self.todo_mut(id).status = MStatus::Deferred {
            until: until.clone(),
            baseline,
        };
        Ok(vec!["todo_deferred"])
    }

    fn block(&mut self, actor: &Actor, id: &TodoId, reason: &str, grant: Option<&str>) -> Verdict {
        let todo = self.open_todo(id)?;
        self.may_act_on(actor, todo, GrantedAction::Supersede, grant)?;
        Self::no_turn(todo)?;
        if !text_ok(reason) {
            return Err("empty reason");
        }
        if todo.status == MStatus::Blocked {
            return Err("already blocked");
        }
        self.drop_lease(id);
        self.todo_mut(id).status = MStatus::Blocked;
        Ok(vec!["todo_blocked"])
    }

    fn unblock(&mut self, actor: &Actor, id: &TodoId, grant: Option<&str>) -> Verdict {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if !matches!(todo.status, MStatus::Blocked | MStatus::Deferred { .. }) {
            return Err("todo is neither blocked nor deferred");
        }
        self.may_act_on(actor, todo, GrantedAction::Supersede, grant)?;
        self.todo_mut(id).status = MStatus::Open;
        Ok(vec!["todo_unblocked"])
    }

    fn supersede(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        reason: &str,
        replacement: Option<&NewTodo>,
        grant: Option<&str>,
    ) -> Verdict {
        let todo = self.open_todo(id)?;
        self.may_act_on(actor, todo, GrantedAction::Supersede, grant)?;
        Self::no_turn(todo)?;
        if !text_ok(reason) {
            return Err("empty reason");
        }
        let mut events = Vec::new();
        if let Some(new) = replacement {
            self.planner(actor)?;
            let new = self.vet_new_todo(new, &BTreeSet::new())?;
            self.insert_todo(&new, actor);
            events.push("todo_added");
        }
        self.drop_lease(id);
        self.todo_mut(id).status = MStatus::Superseded;
        events.push("todo_superseded");
        Ok(events)
    }

    fn claim(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        ttl: Option<Duration>,
        workspace: Option<&Workspace>,
        grant: Option<&str>,
    ) -> Verdict {
        let agent = self.registered_agent(actor)?.clone();
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if todo.live_lease(self.now).is_some() {
            return Err("a live lease exists");
        }
        if todo.outcome_unknown(self.now) {
            return Err("outcome of the last turn unknown");
        }
        self.takeable(todo, &agent, id)?;
        if let Some(assignee) = &todo.assignee
            && assignee != &agent
        {
            self.granted(&agent, GrantedAction::TakeOver, grant)?;
        }
        if let Some(ws) = workspace
            && (!text_ok(&ws.top_level) || !text_ok(&ws.common_dir))
        {
            return Err("empty workspace identity");
        }
        let workspace = workspace.or_else(|| self.workspaces.get(&agent)).cloned();
        self.guard(id, todo, &agent, workspace.as_ref(), true)?;
        let ttl = ttl.unwrap_or(self.policy.lease_ttl);
        if ttl <= Duration::ZERO {
            return Err("ttl must be positive");
        }
        self.drop_lease(id);
        if let Some(ws) = &workspace {
            self.workspaces.insert(agent.clone(), ws.clone());
        }
        let expires = self.now.plus(ttl);
        let todo = self.todo_mut(id);
        if matches!(todo.status, MStatus::Deferred { .. }) {
            todo.status = MStatus::Open;
        }
        todo.last_epoch += 1;
        todo.lease = Some(MLease {
            holder: agent,
            epoch: todo.last_epoch,
            expires,
            workspace,
            turn: None,
        });
        Ok(vec!["lease_acquired"])
    }

    /// The actor's live lease at the current epoch.
    fn holder_lease(
        &self,
        actor: &Actor,
        id: &TodoId,
        epoch: u64,
    ) -> Result<&MLease, &'static str> {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if epoch != todo.last_epoch {
            return Err("stale epoch");
        }
        let lease = todo.live_lease(self.now).ok_or("no live lease")?;
        if actor.agent() != Some(&lease.holder) {
            return Err("not the holder");
        }
        Ok(lease)
    }

    fn handoff(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        epoch: u64,
        to: &AgentId,
        note: &HandoffNote,
        grant: Option<&str>,
    ) -> Verdict {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if epoch != todo.last_epoch {
            return Err("stale epoch");
        }
        let Some(lease) = todo.live_lease(self.now) else {
            return self.hand_over(actor, id, to, note, grant);
        };
        if actor.agent() != Some(&lease.holder) && !self.is_owner(actor) {
            let agent = self.registered_agent(actor)?;
            self.granted(agent, GrantedAction::TakeOver, grant)?;
        }
        // Only the holder knows whether its turn had an effect; nobody else moves the lease
        // mid-turn unless the work is safe to repeat.
        if lease.turn.is_some() && actor.agent() != Some(&lease.holder) && !todo.idempotent {
            return Err("only the holder hands off mid-turn");
        }
        if to == &lease.holder {
            return Err("receiver already holds the lease");
        }
        if !self.agents.contains(to) || self.excludes(todo, to) {
            return Err("receiver not registered or excluded");
        }
        if !text_ok(&note.next_action) || !text_ok(&note.stop_condition) {
            return Err("empty handoff note");
        }
        if note.evidence.iter().any(|e| !self.evidence.contains_key(e)) {
            return Err("note cites unknown evidence");
        }
        let workspace = self.workspaces.get(to).cloned();
        self.guard(id, todo, to, workspace.as_ref(), true)?;
        self.drop_lease(id);
        let expires = self.now.plus(self.policy.lease_ttl);
        let todo = self.todo_mut(id);
        todo.last_epoch += 1;
        todo.lease = Some(MLease {
            holder: to.clone(),
            epoch: todo.last_epoch,
            expires,
            workspace,
            turn: None,
        });
        Ok(vec!["lease_handed_off"])
    }

    /// A handoff of work no live lease holds: whoever may reassign it gives it to a receiver
    /// that could claim it, who becomes its assignee and holder under a new epoch.
    fn hand_over(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        to: &AgentId,
        note: &HandoffNote,
        grant: Option<&str>,
    ) -> Verdict {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        self.may_act_on(actor, todo, GrantedAction::Reassign, grant)?;
        if todo.outcome_unknown(self.now) {
            return Err("outcome of the last turn unknown");
        }
        if !matches!(todo.status, MStatus::Open) {
            return Err("only open work is handed over");
        }
        if !self.agents.contains(to) {
            return Err("receiver not registered");
        }
        self.takeable(todo, to, id)?;
        if !text_ok(&note.next_action) || !text_ok(&note.stop_condition) {
            return Err("empty handoff note");
        }
        if note.evidence.iter().any(|e| !self.evidence.contains_key(e)) {
            return Err("note cites unknown evidence");
        }
        let workspace = self.workspaces.get(to).cloned();
        self.guard(id, todo, to, workspace.as_ref(), true)?;
        let reassigned = todo.assignee.as_ref() != Some(to);
        self.drop_lease(id);
        let expires = self.now.plus(self.policy.lease_ttl);
        let todo = self.todo_mut(id);
        todo.assignee = Some(to.clone());
        todo.last_epoch += 1;
        todo.lease = Some(MLease {
            holder: to.clone(),
            epoch: todo.last_epoch,
            expires,
            workspace,
            turn: None,
        });
        Ok(if reassigned {
            vec!["todo_reassigned", "lease_handed_off"]
        } else {
            vec!["lease_handed_off"]
        })
    }

    fn begin(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        epoch: u64,
        turn: &TurnId,
        reserve: Option<Amounts>,
    ) -> Verdict {
        let lease = self.holder_lease(actor, id, epoch)?;
        let in_flight = lease.turn.is_some();
        let holder = lease.holder.clone();
        self.registered_agent(actor)?;
        if in_flight {
            return Err("a turn is in flight");
        }
        let todo = &self.todos[id];
        if !self.gates_allow(id, todo) {
            return Err("a gate holds the todo");
        }
        // The todo's expected usage (or the policy's default), or more if the request says.
        let expected = self.expected(todo);
        let reserved = Amounts {
            turns: 1,
            ..reserve.map_or(expected, |r| r.max(expected))
        };
        if over(&self.limits, self.spent, self.reserved, reserved) {
            return Err("goal budget exhausted");
        }
        if let Some((limits, spent, held)) = &todo.budget
            && over(limits, *spent, *held, reserved)
        {
            return Err("todo budget exhausted");
        }
        self.reserved = add(self.reserved, reserved);
        let todo = self.todo_mut(id);
        if let Some((_, _, held)) = todo.budget.as_mut() {
            *held = add(*held, reserved);
        }
        if let Some(lease) = todo.lease.as_mut() {
            lease.turn = Some((turn.clone(), reserved));
        }
        self.turns.insert(
            (id.clone(), turn.clone()),
            (holder, MTurn::InFlight(reserved)),
        );
        Ok(vec!["turn_begun"])
    }

    /// Another session of the holder agent takes the turn in flight over: a new epoch, the
    /// same turn and reservation, nothing charged.
    fn take_over(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        epoch: u64,
        turn: &TurnId,
        ttl: Option<Duration>,
    ) -> Verdict {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        if epoch != todo.last_epoch {
            return Err("stale epoch");
        }
        let lease = todo.lease.as_ref().ok_or("no lease")?;
        if actor.agent() != Some(&lease.holder) {
            return Err("not the holder");
        }
        if lease.turn.as_ref().is_none_or(|(t, _)| t != turn) {
            return Err("turn not in flight");
        }
        if !lease.live(self.now) {
            return Err(if todo.outcome_unknown(self.now) {
                EXPIRED_TURN
            } else {
                "no live lease"
            });
        }
        self.registered_agent(actor)?;
        let ttl = ttl.unwrap_or(self.policy.lease_ttl);
        if ttl <= Duration::ZERO {
            return Err("ttl must be positive");
        }
        let expires = self.now.plus(ttl);
        let todo = self.todo_mut(id);
        todo.last_epoch += 1;
        let epoch = todo.last_epoch;
        if let Some(lease) = todo.lease.as_mut() {
            lease.epoch = epoch;
            lease.expires = expires;
        }
        Ok(vec!["turn_taken_over"])
    }

    fn vet_observation(observation: &Observation) -> Result<(), &'static str> {
        let facts_ok = observation.facts.len() <= 64
            && observation
                .facts
                .iter()
                .all(|(name, value)| text_ok(name) && bounded(value));
        if !bounded(&observation.summary) || !facts_ok {
            return Err("bad observation");
        }
        Ok(())
    }

    /// Records an observation unless its fingerprint is unchanged or it comes before the
    /// recorded one in the source's order; true when recorded.
    fn observe(&mut self, observation: &Observation) -> bool {
        if self.fingerprints.get(&observation.key) == Some(&observation.fingerprint) {
            return false;
        }
        let recorded = self.orders.get(&observation.key);
        if let (Some(seen), Some(recorded)) = (observation.order, recorded)
            && seen < *recorded
        {
            return false;
        }
        self.fingerprints
            .insert(observation.key.clone(), observation.fingerprint.clone());
        match observation.order {
            Some(order) => self.orders.insert(observation.key.clone(), order),
            None => self.orders.remove(&observation.key),
        };
        self.advance_head(
            &observation.subject,
            &observation.revision,
            observation.observed_at,
        );
        true
    }

    /// The newest observation of a subject sets its current revision; a tie goes to the later one.
    fn advance_head(&mut self, subject: &Subject, revision: &Revision, at: Timestamp) {
        self.revisions_seen.insert(revision.clone());
        let older = self.heads.get(subject).is_some_and(|(_, seen)| at < *seen);
        if !older {
            self.heads.insert(subject.clone(), (revision.clone(), at));
        }
    }

    /// Signed commands and verdicts are required: the goal is signed and registers a key.
    pub(crate) fn signed(&self) -> bool {
        self.spec.identity == Identity::Signed && !self.keys.is_empty()
    }

    /// Whether `actor`'s evidence of `check` counts: on a signed goal only a registered
    /// validator's, when the check has any registered.
    fn may_establish(&self, check: &CheckId, actor: &Actor) -> bool {
        !self.signed() || self.validators.get(check).is_none_or(|v| v.contains(actor))
    }

    /// On a signed goal, a settlement's verdict must be signed by a key registered for the
    /// validator it names, over exactly this turn and its evidence, by a validator registered
    /// for every check it vouches for; a verdict the holder or the settling actor signed is the
    /// agent's own.
    fn vet_verdict(
        &self,
        actor: &Actor,
        holder: &AgentId,
        s: &Settlement,
    ) -> Result<(), &'static str> {
        if !self.signed() {
            return Ok(());
        }
        let validator = &s.verdict.validator;
        let Some(signature) = &s.verdict.signature else {
            return Err("verdict_unsigned");
        };
        let message = crate::identity::verdict_message(
            &self.spec.id,
            &s.todo,
            &s.turn,
            s.epoch,
            &s.verdict,
            &s.evidence,
        );
        let signs = |who: &Actor| {
            self.keys
                .iter()
                .any(|k| &k.actor == who && k.key.verifies(&message, signature))
        };
        let agents = [Actor::Agent(holder.clone()), actor.clone()];
        if agents.iter().any(|a| a != validator && signs(a)) {
            return Err("verdict_self_signed");
        }
        if !self.keys.iter().any(|k| &k.actor == validator) {
            return Err("validator_unregistered");
        }
        if s.evidence
            .iter()
            .any(|e| !self.may_establish(&e.check, validator))
        {
            return Err("validator_not_registered_for_check");
        }
        if !signs(validator) {
            return Err("verdict_signature_invalid");
        }
        Ok(())
    }

    fn vet_evidence(&self, batch: &[NewEvidence]) -> Result<(), &'static str> {
        let mut ids = BTreeSet::new();
        for e in batch {
            if self.evidence.contains_key(&e.id) || !ids.insert(&e.id) {
                return Err("evidence id taken");
            }
            if !bounded(&e.summary) {
                return Err("bad evidence summary");
            }
            let known =
                |i: &EvidenceId| self.evidence.contains_key(i) || (ids.contains(i) && i != &e.id);
            if !e.inputs.evidence.iter().all(known) {
                return Err("evidence cites unknown input");
            }
        }
        Ok(())
    }

    fn record_evidence(&mut self, e: &NewEvidence, producer: &Actor) {
        let seq = self.seq;
        self.seq += 1;
        self.evidence.insert(
            e.id.clone(),
            MEvidence {
                producer: producer.clone(),
                check: e.check.clone(),
                subject: e.subject.clone(),
                revision: e.revision.clone(),
                pass: e.outcome == Outcome::Pass,
                observed_at: e.observed_at,
                ttl: e.ttl,
                inputs: e.inputs.evidence.clone(),
                observed: e
                    .inputs
                    .observations
                    .iter()
                    .map(|o| (o.key.clone(), o.fingerprint.clone()))
                    .collect(),
                seq,
            },
        );
    }

    fn vet_transition(&self, id: &TodoId, s: &Settlement) -> Result<Vec<NewTodo>, &'static str> {
        match &s.transition {
            Transition::Block { reason } if !text_ok(reason) => Err("empty reason"),
            Transition::Defer { until } => self.vet_condition(id, until).map(|()| vec![]),
            Transition::Complete { .. } if s.verdict.outcome != VerdictOutcome::Passed => {
                Err("completion needs a passing verdict")
            }
            Transition::Complete {
                continuation: Continuation::Successors(next),
            } => {
                if next.is_empty() {
                    return Err("no successors named");
                }
                let mut batch = BTreeSet::new();
                let mut vetted = Vec::new();
                for successor in next {
                    vetted.push(self.vet_new_todo(successor, &batch)?);
                    batch.insert(successor.id.clone());
                }
                Ok(vetted)
            }
            Transition::KeepOpen | Transition::Block { .. } | Transition::Complete { .. } => {
                Ok(vec![])
            }
        }
    }

    /// A settlement: the holder (or, resolving an expired turn, an entitled other) presents the
    /// current epoch and the turn in flight; a verdict by someone else than the executor.
    #[allow(clippy::too_many_lines)] // the rules of a settlement in the order they apply
    fn settle(&mut self, actor: &Actor, s: &Settlement, resolving: bool) -> Verdict {
        let todo = self.todos.get(&s.todo).ok_or("unknown todo")?;
        if s.epoch != todo.last_epoch {
            return Err("stale epoch");
        }
        let lease = todo.lease.as_ref().ok_or("no lease")?;
        if !resolving && actor.agent() != Some(&lease.holder) {
            return Err("not the holder");
        }
        let Some((turn, reserved)) = lease.turn.clone().filter(|(t, _)| t == &s.turn) else {
            return Err("turn not in flight");
        };
        // The holder's right to settle ends with its lease; only a readback settles then.
        if !resolving && !lease.live(self.now) {
            return Err(if todo.outcome_unknown(self.now) {
                EXPIRED_TURN
            } else {
                "no live lease"
            });
        }
        let holder = lease.holder.clone();
        if s.verdict.validator == Actor::Agent(holder.clone()) {
            return Err("the executor validated itself");
        }
        self.vet_verdict(actor, &holder, s)?;
        if !bounded(&s.verdict.summary) {
            return Err("bad verdict summary");
        }
        self.vet_evidence(&s.evidence)?;
        for o in &s.observations {
            Self::vet_observation(o)?;
        }
        let successors = self.vet_transition(&s.todo, s)?;
        if s.failure.as_ref().is_some_and(|f| !bounded(&f.detail)) {
            return Err("bad failure detail");
        }
        // Evidence is new when the goal holds no evidence of its check's outcome about its
        // subject at its revision (judged before the batch is recorded).
        let new_fact = s.evidence.iter().any(|e| {
            !self.evidence.values().any(|h| {
                h.check == e.check
                    && h.subject == e.subject
                    && h.revision == e.revision
                    && h.pass == (e.outcome == Outcome::Pass)
            })
        });
        let monitor = todo.monitor.clone();
        let mut moved = Vec::new();
        for o in &s.observations {
            if self.observe(o) {
                moved.push(o.key.clone());
            }
        }
        let quiet = monitor
            .as_ref()
            .is_some_and(|m| !moved.contains(&m.watches));
        let charged = if quiet && s.transition == Transition::KeepOpen {
            Amounts::ZERO
        } else {
            Amounts {
                turns: 1,
                ..s.usage
            }
        };
        // An overrun is a modelled event: charged in full, recorded, and unanswered until the
        // owner amends the budget or the policy.
        let beyond = charged.minus(reserved);
        if !beyond.is_zero() {
            self.unanswered_overrun = Some((s.todo.clone(), turn.clone(), beyond));
        }
        self.overrun = add(self.overrun, beyond);
        self.reserved = self.reserved.minus(reserved);
        self.spent = add(self.spent, charged);
        let now = self.now;
        let entry = self.todo_mut(&s.todo);
        entry.lease = None;
        if let Some((_, spent, held)) = entry.budget.as_mut() {
            *held = held.minus(reserved);
            *spent = add(*spent, charged);
            entry.budget_overrun = add(entry.budget_overrun, beyond);
        }
        let mut streak = 0;
        if let Some(m) = entry.monitor.as_mut() {
            m.due = now.plus(m.cadence);
            m.streak = if quiet { m.streak.saturating_add(1) } else { 0 };
            streak = m.streak;
        }
        let failed = s.failure.is_some() || s.verdict.outcome == VerdictOutcome::Failed;
        let progress =
            !failed && (s.transition != Transition::KeepOpen || !moved.is_empty() || new_fact);
        if failed {
            entry.failures += 1;
            entry.failed_at = Some(now);
        } else if progress {
            entry.failures = 0;
            entry.failed_at = None;
            entry.idle = 0;
        } else {
            entry.idle += 1;
        }
        let (failures, idle) = (entry.failures, entry.idle);
        if progress {
            self.goal_idle = 0;
        } else if !failed && monitor.is_none() {
            self.goal_idle += 1;
        }
        let goal_stall_open = self.obligations.values().any(|o| o.open && o.goal_stall);
        if let Some(record) = self.turns.get_mut(&(s.todo.clone(), turn.clone())) {
            record.1 = MTurn::Settled(charged);
        }
        for e in &s.evidence {
            self.record_evidence(e, &s.verdict.validator);
        }
        let mut events = vec!["turn_settled"];
        // At most one streak obligation per settlement, none while one for the todo is open.
        let raised = self
            .obligations
            .values()
            .any(|o| o.open && o.stalled.as_ref() == Some(&s.todo));
        let limit = self.policy.monitor_no_change_limit;
        let owner_and_name = if raised {
            None
        } else if monitor.is_some() && quiet && limit > 0 && streak >= limit {
            Some((Some(holder), "stalled"))
        } else if monitor.is_none()
            && !failed
            && !progress
            && self.policy.stall_turns > 0
            && idle >= self.policy.stall_turns
        {
            Some((None, "stalled"))
        } else if monitor.is_none()
            && !failed
            && !progress
            && self.policy.stall_goal_turns > 0
            && self.goal_idle >= self.policy.stall_goal_turns
            && !goal_stall_open
        {
            Some((None, "goal"))
        } else if failed && self.policy.retry.attempts > 0 && failures >= self.policy.retry.attempts
        {
            Some((None, "failing"))
        } else {
            None
        };
        if let Some((owner, rule)) = owner_and_name {
            let goal_stall = rule == "goal";
            let id = self.stall_id(if rule == "failing" {
                "failing"
            } else {
                "stalled"
            });
            self.obligations.insert(
                id,
                MObligation {
                    kind: ObligationKind::Replan,
                    owner,
                    open: true,
                    stalled: (!goal_stall).then(|| s.todo.clone()),
                    goal_stall,
                },
            );
            events.push("obligation_raised");
        }
        self.finish_transition(actor, s, &turn, &successors);
        Ok(events)
    }

    /// A streak's obligation is named after the revision that raises it; an id a person
    /// already took gets a numbered suffix instead of colliding.
    fn stall_id(&self, prefix: &str) -> ObligationId {
        let base = format!("{prefix}-r{}", self.revision + 1);
        let free = |text: &str| {
            ObligationId::new(text)
                .ok()
                .filter(|id| !self.obligations.contains_key(id))
        };
        free(&base)
            .or_else(|| (2..).find_map(|n| free(&format!("{base}-{n}"))))
            .unwrap_or_else(|| super::id(&base))
    }

    fn finish_transition(
        &mut self,
        actor: &Actor,
        s: &Settlement,
        turn: &TurnId,
        successors: &[NewTodo],
    ) {
        let status = match &s.transition {
            Transition::KeepOpen => return,
            Transition::Block { .. } => MStatus::Blocked,
            Transition::Defer { until } => MStatus::Deferred {
                until: until.clone(),
                baseline: self.baseline(until),
            },
            Transition::Complete { continuation } => {
                // The agent that ran the turn did the work, whoever settles or resolves it.
                let key = (s.todo.clone(), turn.clone());
                let by = self.turns.get(&key).map(|(a, _)| a.clone());
                let Some(by) = by else {
                    unreachable!("a settled turn always has an agent");
                };
                let record = match continuation {
                    Continuation::NoFollowUp => {
                        self.closure = true;
                        ContinuationRecord::NoFollowUp
                    }
                    Continuation::GoalStillActive => ContinuationRecord::GoalStillActive,
                    Continuation::Successors(_) => ContinuationRecord::Successors(
                        successors.iter().map(|t| t.id.clone()).collect(),
                    ),
                };
                for successor in successors {
                    self.insert_todo(successor, actor);
                }
                MStatus::Done {
                    by,
                    continuation: record,
                }
            }
        };
        self.todo_mut(&s.todo).status = status;
    }

    fn resolve(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        turn: &TurnId,
        resolution: &OutcomeResolution,
        grant: Option<&str>,
    ) -> Verdict {
        let todo = self.todos.get(id).ok_or("unknown todo")?;
        let lease = todo
            .lease
            .as_ref()
            .filter(|l| l.turn.as_ref().is_some_and(|(t, _)| t == turn))
            .ok_or("turn not in flight")?;
        if lease.live(self.now) {
            return Err("the lease is still live");
        }
        if actor.agent() != Some(&lease.holder) && !self.is_owner(actor) {
            let agent = self.registered_agent(actor)?;
            self.granted(agent, GrantedAction::TakeOver, grant)?;
        }
        match resolution {
            OutcomeResolution::Absent { note } => {
                if !text_ok(note) {
                    return Err("empty note");
                }
                self.drop_lease(id);
                Ok(vec!["outcome_absent"])
            }
            OutcomeResolution::Committed { settlement } => {
                if &settlement.todo != id || &settlement.turn != turn {
                    return Err("settlement names another todo or turn");
                }
                self.settle(actor, settlement, true)
            }
        }
    }

    /// The outbox: only the live holder at the current epoch, mid-turn, intends an effect, and
    /// an effect id is intended once.
    fn intend_effect(
        &mut self,
        actor: &Actor,
        id: &TodoId,
        epoch: u64,
        effect: &EffectIntent,
    ) -> Verdict {
        let lease = self.holder_lease(actor, id, epoch)?;
        if lease.turn.is_none() {
            return Err("an effect needs a turn in flight");
        }
        let holder = lease.holder.clone();
        self.registered_agent(actor)?;
        let named = |t: &str| text_ok(t) && t.len() <= 256;
        let fields = [&effect.kind, &effect.target, &effect.key, &effect.digest];
        if !fields.iter().all(|t| named(t))
            || effect.params.len() > 16
            || !effect.params.iter().all(|(k, v)| named(k) && bounded(v))
        {
            return Err("bad effect kind, target, key, digest or parameters");
        }
        if effect.digest
            != EffectIntent::digest_of(&effect.kind, &effect.target, &effect.key, &effect.params)
        {
            return Err("the digest does not match the effect");
        }
        if !self.effect_ids.insert(effect.id.clone()) {
            return Err("effect id already intended");
        }
        self.effects.insert(
            effect.id.clone(),
            MEffect {
                todo: id.clone(),
                epoch,
                holder,
            },
        );
        Ok(vec!["effect_intended"])
    }

    /// While its lease is live and current only the holder records an effect; after, the
    /// former holder, the owner or a `take_over` grantee with a reason.
    fn record_effect(
        &mut self,
        actor: &Actor,
        id: &EffectId,
        note: Option<&str>,
        grant: Option<&str>,
    ) -> Verdict {
        let effect = self.effects.get(id).ok_or("effect not pending")?;
        let todo = self.todos.get(&effect.todo).ok_or("unknown todo")?;
        let live = todo.last_epoch == effect.epoch
            && todo
                .live_lease(self.now)
                .is_some_and(|l| l.epoch == effect.epoch && l.holder == effect.holder);
        let holder = actor.agent() == Some(&effect.holder);
        if live && !holder {
            return Err("only the holder records an effect under its live lease");
        }
        if !live && !holder && !self.is_owner(actor) {
            let agent = self.registered_agent(actor)?;
            self.granted(agent, GrantedAction::TakeOver, grant)?;
        }
        if note.is_some_and(|n| !bounded(n)) {
            return Err("bad note");
        }
        self.effects.remove(id);
        Ok(vec!["effect_recorded"])
    }

    fn open_gate(&mut self, actor: &Actor, gate: &NewGate) -> Verdict {
        if self.gates.contains_key(&gate.id) {
            return Err("gate id taken");
        }
        if !text_ok(&gate.question) {
            return Err("empty question");
        }
        let scope = &gate.scope;
        if !scope.whole_goal && scope.todos.is_empty() && scope.decisions.is_empty() {
            return Err("unscoped gate");
        }
        if scope.todos.iter().any(|t| !self.todos.contains_key(t)) {
            return Err("gate scope names an unknown todo");
        }
        if matches!(gate.owner, Actor::Capability(_)) {
            return Err("a capability cannot own a gate");
        }
        if gate.deadline.is_some_and(|d| d <= self.now) {
            return Err("deadline in the past");
        }
        self.gates.insert(
            gate.id.clone(),
            MGate {
                owner: gate.owner.clone(),
                opened_by: actor.clone(),
                todos: scope.todos.clone(),
                decisions: scope.decisions.clone(),
                whole: scope.whole_goal,
                deadline: gate.deadline,
                keep_asking: gate.on_expiry == ExpiryPolicy::KeepAsking,
                answer: MAnswer::Pending,
            },
        );
        Ok(vec!["gate_opened"])
    }

    fn waiting_gate(&self, id: &GateId) -> Result<&MGate, &'static str> {
        let gate = self.gates.get(id).ok_or("unknown gate")?;
        if !self.gate_waiting(gate) {
            return Err("gate not pending");
        }
        Ok(gate)
    }

    fn answer(&mut self, actor: &Actor, id: &GateId, answer: &GateAnswer) -> Verdict {
        let gate = self.waiting_gate(id)?;
        if &gate.owner != actor {
            return Err("only the gate's owner answers");
        }
        let (text, outcome, event) = match answer {
            GateAnswer::Resolve { answer } => (answer, MAnswer::Resolved, "gate_resolved"),
            GateAnswer::Reject { reason } => (reason, MAnswer::Rejected, "gate_rejected"),
        };
        if !text_ok(text) {
            return Err("empty answer");
        }
        if let Some(gate) = self.gates.get_mut(id) {
            gate.answer = outcome;
        }
        Ok(vec![event])
    }

    /// A provider's relay speaks for the gate's owner only through a login the owner mapped
    /// to them under that provider.
    fn relay(&mut self, actor: &Actor, id: &GateId, answer: &GateAnswer, login: &str) -> Verdict {
        let Actor::Provider(provider) = actor else {
            return Err("only a provider relays");
        };
        let gate = self.waiting_gate(id)?;
        let speaks_for = self
            .logins
            .get(&(provider.clone(), login.to_ascii_lowercase()))
            .map(|person| Actor::Person(person.clone()));
        if crate::login::check_login(login).is_err() || speaks_for.as_ref() != Some(&gate.owner) {
            return Err("the login does not speak for the gate's owner");
        }
        let owner = gate.owner.clone();
        self.answer(&owner, id, answer)?;
        Ok(vec!["gate_answer_relayed"])
    }

    fn intend_notice(&mut self, actor: &Actor, id: &GateId, effect: &EffectIntent) -> Verdict {
        let Actor::Provider(provider) = actor else {
            return Err("only a provider notices a gate");
        };
        let gate = self.waiting_gate(id)?;
        let mapped = match &gate.owner {
            Actor::Person(person) => self
                .logins
                .iter()
                .any(|((at, _), mapped)| at == provider && mapped == person),
            _ => false,
        };
        if !mapped {
            return Err("the gate's owner has no login at the provider");
        }
        if self.gate_notices.contains_key(id) {
            return Err("the gate was noticed already");
        }
        let named = |t: &str| text_ok(t) && t.len() <= 256;
        let fields = [&effect.kind, &effect.target, &effect.key, &effect.digest];
        if !fields.iter().all(|t| named(t))
            || effect.params.len() > 16
            || !effect.params.iter().all(|(k, v)| named(k) && bounded(v))
            || effect.digest
                != EffectIntent::digest_of(
                    &effect.kind,
                    &effect.target,
                    &effect.key,
                    &effect.params,
                )
        {
            return Err("bad notice effect");
        }
        if !self.effect_ids.insert(effect.id.clone()) {
            return Err("effect id already intended");
        }
        self.gate_notices
            .insert(id.clone(), (provider.clone(), true));
        Ok(vec!["gate_notice_intended"])
    }

    fn record_notice(&mut self, actor: &Actor, id: &GateId, note: Option<&str>) -> Verdict {
        let Actor::Provider(provider) = actor else {
            return Err("only a provider records a notice");
        };
        match self.gate_notices.get(id) {
            Some((by, true)) if by == provider => {}
            _ => return Err("no pending notice of this provider"),
        }
        if note.is_some_and(|n| !bounded(n)) {
            return Err("bad note");
        }
        self.gate_notices
            .insert(id.clone(), (provider.clone(), false));
        Ok(vec!["gate_notice_recorded"])
    }

    fn withdraw(&mut self, actor: &Actor, id: &GateId, reason: &str) -> Verdict {
        let gate = self.waiting_gate(id)?;
        if &gate.opened_by != actor && !self.is_owner(actor) {
            return Err("only the opener or the owner withdraws");
        }
        if !text_ok(reason) {
            return Err("empty reason");
        }
        if let Some(gate) = self.gates.get_mut(id) {
            gate.answer = MAnswer::Withdrawn;
        }
        Ok(vec!["gate_withdrawn"])
    }

    fn discharge(&mut self, actor: &Actor, id: &ObligationId, changes: &[PlanChange]) -> Verdict {
        let obligation = self.obligations.get(id).ok_or("unknown obligation")?;
        if !obligation.open {
            return Err("obligation already discharged");
        }
        match actor {
            Actor::Person(_) if !self.is_owner(actor) => return Err("not the owner"),
            Actor::Agent(_) => {
                self.registered_agent(actor)?;
            }
            Actor::Person(_) => {}
            _ => return Err("actor may not discharge"),
        }
        if changes.is_empty() {
            return Err("a discharge needs a visible change");
        }
        let mut events = Vec::new();
        for change in changes {
            events.extend(self.exec(actor, &change.clone().into_command())?);
        }
        let mut streak = None;
        if let Some(o) = self.obligations.get_mut(id) {
            o.open = false;
            streak.clone_from(&o.stalled);
            if o.goal_stall {
                self.goal_idle = 0;
            }
        }
        // The plan changed in answer to the streak: it starts over.
        if let Some(todo) = streak.and_then(|id| self.todos.get_mut(&id)) {
            todo.failures = 0;
            todo.failed_at = None;
            todo.idle = 0;
        }
        events.push("obligation_discharged");
        Ok(events)
    }
}

// ----- comparison with a real goal ------------------------------------------------------------

fn status_matches(model: &MStatus, real: &TodoStatus) -> bool {
    match (model, real) {
        (MStatus::Open, TodoStatus::Open)
        | (MStatus::Blocked, TodoStatus::Blocked { .. })
        | (MStatus::Superseded, TodoStatus::Superseded { .. }) => true,
        (
            MStatus::Deferred { until, baseline },
            TodoStatus::Deferred {
                until: u,
                baseline: b,
            },
        ) => until == u && baseline == b,
        (
            MStatus::Done { by, continuation },
            TodoStatus::Done {
                by: b,
                continuation: c,
                ..
            },
        ) => by == b && continuation == c,
        _ => false,
    }
}

fn answer_matches(model: MAnswer, real: &GateStatus) -> bool {
    matches!(
        (model, real),
        (MAnswer::Pending, GateStatus::Pending)
            | (MAnswer::Resolved, GateStatus::Resolved { .. })
            | (MAnswer::Rejected, GateStatus::Rejected { .. })
            | (MAnswer::Withdrawn, GateStatus::Withdrawn { .. })
    )
}

fn same_keys<'a, K: Ord + Clone + std::fmt::Debug + 'a, A>(
    what: &str,
    model: &BTreeMap<K, A>,
    real: impl IntoIterator<Item = &'a K>,
    out: &mut Vec<Finding>,
) {
    let m: BTreeSet<&K> = model.keys().collect();
    let r: BTreeSet<&K> = real.into_iter().collect();
    if m != r {
        out.push(Finding::new(
            "model",
            format!("{what}: model has {m:?}, goal has {r:?}"),
        ));
    }
}

impl LifecycleModel {
    /// Compares a goal's state with the model at the model's time: recorded facts (revisions,
    /// todos, leases, turns, ledgers, gates, evidence, observations, obligations, intents) and
    /// derived ones (frontier of every agent, terminal, criteria, freshness). An empty list
    /// means they agree.
    pub fn diff(&self, state: &GoalState) -> Vec<Finding> {
        let mut out = Vec::new();
        self.diff_goal(state, &mut out);
        self.diff_todos(state, &mut out);
        self.diff_facts(state, &mut out);
        self.diff_derived(state, &mut out);
        out
    }

    fn diff_goal(&self, state: &GoalState, out: &mut Vec<Finding>) {
        let mut check = |ok: bool, rule: &'static str, what: String| {
            if !ok {
                out.push(Finding::new(rule, what));
            }
        };
        check(
            state.revision == self.revision,
            "2 revisions",
            format!("revision {} but model {}", state.revision, self.revision),
        );
        check(
            state.goal_revision == self.goal_revision,
            "2 revisions",
            format!(
                "goal revision {} but model {}",
                state.goal_revision, self.goal_revision
            ),
        );
        check(
            state.spec.agents == self.agents && state.spec.grants == self.grants,
            "model",
            format!(
                "agents/grants {:?} {:?} but model {:?} {:?}",
                state.spec.agents, state.spec.grants, self.agents, self.grants
            ),
        );
        check(
            state.ledger.limits == self.limits
                && state.ledger.spent == self.spent
                && state.ledger.reserved == self.reserved
                && state.ledger.overrun == self.overrun,
            "4 charged once",
            format!(
                "ledger {:?} but model limits {:?} spent {:?} reserved {:?} overrun {:?}",
                state.ledger, self.limits, self.spent, self.reserved, self.overrun
            ),
        );
        let unanswered = state
            .overrun
            .as_deref()
            .map(|o| (o.todo.clone(), o.turn.clone(), o.by));
        check(
            unanswered == self.unanswered_overrun,
            "6 overrun",
            format!(
                "unanswered overrun {unanswered:?} but model {:?}",
                self.unanswered_overrun
            ),
        );
        let criteria: BTreeSet<&CriterionId> = state.spec.criteria.iter().map(|c| &c.id).collect();
        check(
            criteria == self.criteria.keys().collect(),
            "model",
            format!("criteria {criteria:?} but model {:?}", self.criteria.keys()),
        );
        check(
            state.idle_turns == self.goal_idle,
            "model",
            format!(
                "{} idle turns on the goal but model {}",
                state.idle_turns, self.goal_idle
            ),
        );
        check(
            state.closure.is_some() == self.closure && state.abandoned.is_some() == self.abandoned,
            "model",
            format!(
                "closure {} abandoned {} but model {} {}",
                state.closure.is_some(),
                state.abandoned.is_some(),
                self.closure,
                self.abandoned
            ),
        );
        check(
            state.workspaces == self.workspaces,
            "16 workspace guard",
            format!(
                "workspaces {:?} but model {:?}",
                state.workspaces, self.workspaces
            ),
        );
    }

    fn diff_todos(&self, state: &GoalState, out: &mut Vec<Finding>) {
        same_keys(
            "todos",
            &self.todos,
            state.todos.iter().map(|(id, _)| id),
            out,
        );
        for (id, m) in &self.todos {
            let Some(t) = state.todos.get(id) else {
                continue;
            };
            if !status_matches(&m.status, &t.status) {
                out.push(Finding::new(
                    "model",
                    format!("todo {id} is {:?} but model {:?}", t.status, m.status),
                ));
            }
            let lease = t.lease.as_ref().map(|l| {
                (
                    &l.holder,
                    l.epoch,
                    l.expires_at,
                    &l.workspace,
                    l.turn.as_ref().map(|x| (&x.id, x.reserved)),
                )
            });
            let model_lease = m.lease.as_ref().map(|l| {
                (
                    &l.holder,
                    l.epoch,
                    l.expires,
                    &l.workspace,
                    l.turn.as_ref().map(|(id, r)| (id, *r)),
                )
            });
            if lease != model_lease || t.last_epoch != m.last_epoch {
                out.push(Finding::new(
                    "3 leases",
                    format!(
                        "todo {id} lease {lease:?} (last epoch {}) but model {model_lease:?} (last epoch {})",
                        t.last_epoch, m.last_epoch
                    ),
                ));
            }
            if t.assignee != m.assignee || !t.excluded_agents.iter().eq(m.excluded.iter()) {
                out.push(Finding::new(
                    "model",
                    format!(
                        "todo {id} assignee {:?} excluded {:?} but model {:?} {:?}",
                        t.assignee, t.excluded_agents, m.assignee, m.excluded
                    ),
                ));
            }
            if t.created_by != m.creator {
                out.push(Finding::new(
                    "model",
                    format!(
                        "todo {id} created by {:?} but model {:?}",
                        t.created_by, m.creator
                    ),
                ));
            }
            let monitor = t.monitor.as_ref().map(|s| (s.next_due, s.no_change_streak));
            let model_monitor = m.monitor.as_ref().map(|s| (s.due, s.streak));
            if monitor != model_monitor {
                out.push(Finding::new(
                    "model",
                    format!("monitor {id} at {monitor:?} but model {model_monitor:?}"),
                ));
            }
            let streak = state
                .streaks
                .get(id)
                .map_or((0, 0, None), |s| (s.failures, s.idle, s.failed_at()));
            let model_streak = (m.failures, m.idle, m.failed_at.filter(|_| m.failures > 0));
            if streak != model_streak {
                out.push(Finding::new(
                    "model",
                    format!("todo {id} streak {streak:?} but model {model_streak:?}"),
                ));
            }
            let ledger = t.budget.as_ref().map(|l| (l.limits, l.spent, l.reserved));
            let overrun = t.budget.as_ref().map_or(Amounts::ZERO, |l| l.overrun);
            if ledger != m.budget || overrun != m.budget_overrun {
                out.push(Finding::new(
                    "4 charged once",
                    format!("todo {id} ledger {ledger:?} but model {:?}", m.budget),
                ));
            }
        }
        // Turns in flight are compared with the leases above; charges with the ledgers.
    }

    /// Who people are at providers, and the notices their gates got.
    fn diff_people(&self, state: &GoalState, out: &mut Vec<Finding>) {
        let logins: BTreeMap<(SourceId, String), PersonId> = state
            .logins
            .iter()
            .flat_map(|(provider, mapped)| {
                mapped
                    .iter()
                    .map(|(login, person)| ((provider.clone(), login.clone()), person.clone()))
            })
            .collect();
        if logins != self.logins {
            out.push(Finding::new(
                "model",
                format!("logins: model has {:?}, goal has {logins:?}", self.logins),
            ));
        }
        let notices: BTreeMap<GateId, (SourceId, bool)> = state
            .gate_notices
            .iter()
            .map(|(gate, n)| (gate.clone(), (n.provider.clone(), n.is_pending())))
            .collect();
        if notices != self.gate_notices {
            out.push(Finding::new(
                "model",
                format!(
                    "gate notices: model has {:?}, goal has {notices:?}",
                    self.gate_notices
                ),
            ));
        }
    }

    fn diff_facts(&self, state: &GoalState, out: &mut Vec<Finding>) {
        self.diff_people(state, out);
        same_keys("gates", &self.gates, state.gates.keys(), out);
        for (id, m) in &self.gates {
            let Some(g) = state.gates.get(id) else {
                continue;
            };
            if !answer_matches(m.answer, &g.status) || g.state_at(self.now) != self.gate_now(m) {
                out.push(Finding::new(
                    "7 gates",
                    format!(
                        "gate {id} is {:?} ({:?} now) but model {:?} ({:?})",
                        g.status,
                        g.state_at(self.now),
                        m.answer,
                        self.gate_now(m)
                    ),
                ));
            }
        }
        same_keys("evidence", &self.evidence, state.evidence.keys(), out);
        let heads: BTreeMap<&Subject, (&Revision, Timestamp)> = state
            .subjects
            .iter()
            .map(|(s, h)| (s, (&h.revision, h.observed_at)))
            .collect();
        let model_heads: BTreeMap<&Subject, (&Revision, Timestamp)> =
            self.heads.iter().map(|(s, (r, t))| (s, (r, *t))).collect();
        if heads != model_heads {
            out.push(Finding::new(
                "10 revisions",
                format!("subject heads {heads:?} but model {model_heads:?}"),
            ));
        }
        let prints: BTreeMap<&ObservationKey, &Fingerprint> = state
            .observations
            .iter()
            .map(|(k, o)| (k, &o.fingerprint))
            .collect();
        let model_prints: BTreeMap<&ObservationKey, &Fingerprint> =
            self.fingerprints.iter().collect();
        if prints != model_prints {
            out.push(Finding::new(
                "5 no-op observations",
                format!("observations {prints:?} but model {model_prints:?}"),
            ));
        }
        same_keys(
            "obligations",
            &self.obligations,
            state.obligations.keys(),
            out,
        );
        for (id, m) in &self.obligations {
            let Some(o) = state.obligations.get(id) else {
                continue;
            };
            let stalled = match &o.cause {
                ObligationCause::MonitorStalled { todo, .. }
                | ObligationCause::TurnsFailing { todo, .. }
                | ObligationCause::NoProgress { todo, .. } => Some(todo),
                ObligationCause::GoalStalled { .. } | ObligationCause::Proposed => None,
            };
            let goal_stall = matches!(o.cause, ObligationCause::GoalStalled { .. });
            if o.discharged.is_none() != m.open
                || o.kind != m.kind
                || o.owner != m.owner
                || stalled != m.stalled.as_ref()
                || goal_stall != m.goal_stall
            {
                out.push(Finding::new(
                    "model",
                    format!("obligation {id} is {o:?} but model {m:?}"),
                ));
            }
        }
    }

    fn diff_derived(&self, state: &GoalState, out: &mut Vec<Finding>) {
        for agent in super::roster::all_agents() {
            let real = crate::frontier(state, &agent, self.now);
            let model = self.frontier(&agent);
            if real != model {
                out.push(Finding::new(
                    "13 frontier",
                    format!("frontier of {agent} is {real:?} but model {model:?}"),
                ));
            }
        }
        let real = crate::terminal(state, self.now);
        if real != self.terminal() {
            out.push(Finding::new(
                "9 terminal",
                format!("terminal is {real:?} but model {:?}", self.terminal()),
            ));
        }
        for (id, status) in state.criteria_status(self.now) {
            if Some(status.is_met()) != self.criterion_met(&id) {
                out.push(Finding::new(
                    "10 criteria",
                    format!(
                        "criterion {id} is {status:?} but model says met={:?}",
                        self.criterion_met(&id)
                    ),
                ));
            }
        }
        for id in state.evidence.keys() {
            let real = state.freshness(id, self.now);
            if Some(real.is_fresh()) != self.is_fresh(id) {
                out.push(Finding::new(
                    "18 lineage",
                    format!(
                        "evidence {id} is {real:?} but model says fresh={:?}",
                        self.is_fresh(id)
                    ),
                ));
            }
        }
    }
}
