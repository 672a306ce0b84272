//! Command validation: a command plus the state it is issued against either becomes events or
//! is refused with a [`Refusal`]. Nothing here mutates state; [`GoalState::handle`] applies.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{
    Command, Continuation, GateAnswer, OutcomeResolution, Settlement, Transition, VerdictOutcome,
};
use crate::event::{Event, RecordedEvent, SCHEMA_VERSION, SettledTransition};
use crate::evidence::{NewEvidence, Observation};
use crate::gate::NewGate;
use crate::goal::{Amendment, GoalSpec, GrantedAction};
use crate::ids::{AgentId, ObligationId, TodoId, TurnId};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::refusal::Refusal;
use crate::rules::{GateHold, GuardBlock};
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};
use crate::todo::{
    ContinuationRecord, HandoffNote, NewTodo, ResumeCondition, Todo, TodoClass, TodoStatus,
    Workspace,
};

/// Longest accepted free text (titles, questions, reasons, summaries), in bytes.
pub const MAX_TEXT: usize = 4096;

/// Validates `command`, issued by `actor` at `now`, against `state` (`None` before the goal
/// exists) and returns the events it produces.
///
/// An empty event list means the command was a no-op (an unchanged observation, a repeated
/// workspace report): nothing is recorded and nothing is charged.
///
/// # Errors
/// A [`Refusal`] naming exactly why the command is not legal now; nothing changes.
pub fn execute(
    state: Option<&GoalState>,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
) -> Result<Vec<Event>, Refusal> {
    let state = match (state, command) {
        (None, Command::CreateGoal { spec }) => return create_goal(actor, spec),
        (Some(state), Command::CreateGoal { spec: _ }) => {
            return Err(Refusal::GoalExists {
                goal: state.spec.id.clone(),
            });
        }
        (None, _) => return Err(Refusal::UnknownGoal),
        (Some(state), _) => state,
    };
    Ctx { state, actor, now }.run(command)
}

impl GoalState {
    /// Executes a command and applies its events, returning them as recorded.
    ///
    /// This is the in-memory path (tests, embedding, stores after loading); a store does the
    /// same inside its transaction.
    ///
    /// # Errors
    /// The command's [`Refusal`]; the state is unchanged.
    ///
    /// # Panics
    /// Only on a kernel bug: when events the kernel just validated do not apply.
    pub fn handle(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Vec<RecordedEvent>, Refusal> {
        let events = execute(Some(self), actor, now, command)?;
        let recorded = stamp(self.revision, actor, now, events);
        for event in &recorded {
            if let Err(error) = self.apply(event) {
                panic!("kernel bug: validated event does not apply: {error}");
            }
        }
        Ok(recorded)
    }

    /// Creates a goal from a `create_goal` command.
    ///
    /// # Errors
    /// The command's [`Refusal`].
    ///
    /// # Panics
    /// Only on a kernel bug: when events the kernel just validated do not apply.
    pub fn create(actor: &Actor, now: Timestamp, spec: &GoalSpec) -> Result<GoalState, Refusal> {
        let events = create_goal(actor, spec)?;
        let recorded = stamp(0, actor, now, events);
        let mut state = match GoalState::genesis(&recorded[0]) {
            Ok(state) => state,
            Err(error) => panic!("kernel bug: validated goal does not apply: {error}"),
        };
        for event in &recorded[1..] {
            if let Err(error) = state.apply(event) {
                panic!("kernel bug: validated event does not apply: {error}");
            }
        }
        Ok(state)
    }
}

/// Wraps events with revisions following `after`, the actor and the time.
pub fn stamp(after: u64, actor: &Actor, now: Timestamp, events: Vec<Event>) -> Vec<RecordedEvent> {
    events
        .into_iter()
        .zip(after + 1..)
        .map(|(event, revision)| RecordedEvent {
            schema: SCHEMA_VERSION,
            revision,
            at: now,
            actor: actor.clone(),
            event,
        })
        .collect()
}

fn text(field: &'static str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    optional_text(field, value)
}

fn optional_text(field: &'static str, value: &str) -> Result<(), Refusal> {
    if value.len() > MAX_TEXT {
        return Err(invalid(field, format!("longer than {MAX_TEXT} bytes")));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(invalid(field, "holds control characters"));
    }
    Ok(())
}

fn invalid(field: &'static str, problem: impl Into<String>) -> Refusal {
    Refusal::InvalidInput {
        field,
        problem: problem.into(),
    }
}

fn positive(field: &'static str, span: Duration) -> Result<(), Refusal> {
    if span <= Duration::ZERO {
        return Err(invalid(field, "must be longer than zero"));
    }
    Ok(())
}

fn create_goal(actor: &Actor, spec: &GoalSpec) -> Result<Vec<Event>, Refusal> {
    if actor.person() != Some(&spec.owner) {
        return Err(Refusal::NotGoalOwner {
            owner: Actor::Person(spec.owner.clone()),
        });
    }
    text("objective", &spec.objective)?;
    let mut seen = BTreeSet::new();
    for criterion in &spec.criteria {
        text("criterion text", &criterion.text)?;
        if !seen.insert(&criterion.id) {
            return Err(Refusal::DuplicateId {
                kind: "criterion",
                id: criterion.id.to_string(),
            });
        }
    }
    positive("policy.lease_ttl", spec.policy.lease_ttl)?;
    Ok(vec![Event::GoalCreated { spec: spec.clone() }])
}

/// One command's validation context.
struct Ctx<'a> {
    state: &'a GoalState,
    actor: &'a Actor,
    now: Timestamp,
}

impl Ctx<'_> {
    #[allow(clippy::too_many_lines, reason = "one dispatch arm per command")]
    fn run(&self, command: &Command) -> Result<Vec<Event>, Refusal> {
        if self.state.abandoned.is_some()
            && !matches!(
                command,
                Command::SettleTurn(_)
                    | Command::Release { .. }
                    | Command::ResolveOutcome { .. }
                    | Command::RecordObservation { .. }
            )
        {
            return Err(Refusal::GoalAbandoned);
        }
        match command {
            Command::CreateGoal { .. } => Err(Refusal::GoalExists {
                goal: self.state.spec.id.clone(),
            }),
            Command::AmendGoal {
                expected_revision,
                amendments,
            } => self.amend(*expected_revision, amendments),
            Command::AbandonGoal { reason } => {
                self.require_owner()?;
                text("reason", reason)?;
                Ok(vec![Event::GoalAbandoned {
                    reason: reason.clone(),
                }])
            }
            Command::DeclareClosure { reason } => self.declare_closure(reason),
            Command::AddTodo { todo } => self.add_todo(todo),
            Command::Reassign {
                todo,
                to,
                grant_reason,
            } => self.reassign(todo, to.as_ref(), grant_reason.as_deref()),
            Command::Defer {
                todo,
                until,
                grant_reason,
            } => self.defer(todo, until, grant_reason.as_deref()),
            Command::Block {
                todo,
                reason,
                grant_reason,
            } => self.block(todo, reason, grant_reason.as_deref()),
            Command::Unblock { todo, grant_reason } => self.unblock(todo, grant_reason.as_deref()),
            Command::Supersede {
                todo,
                reason,
                replacement,
                grant_reason,
            } => self.supersede(todo, reason, replacement.as_ref(), grant_reason.as_deref()),
            Command::Claim {
                todo,
                ttl,
                workspace,
                grant_reason,
            } => self.claim(todo, *ttl, workspace.as_ref(), grant_reason.as_deref()),
            Command::Renew { todo, epoch, ttl } => self.renew(todo, *epoch, *ttl),
            Command::Release { todo, epoch } => {
                self.holder_lease(todo, *epoch)?;
                Ok(vec![Event::LeaseReleased {
                    todo: todo.clone(),
                    epoch: *epoch,
                }])
            }
            Command::Handoff {
                todo,
                epoch,
                to,
                note,
                grant_reason,
            } => self.handoff(todo, *epoch, to, note, grant_reason.as_deref()),
            Command::BeginTurn {
                todo,
                epoch,
                turn,
                reserve,
            } => self.begin_turn(todo, *epoch, turn, *reserve),
            Command::SettleTurn(settlement) => self.settle(settlement, false),
            Command::ResolveOutcome {
                todo,
                turn,
                resolution,
                grant_reason,
            } => self.resolve_outcome(todo, turn, resolution, grant_reason.as_deref()),
            Command::OpenGate { gate } => self.open_gate(gate),
            Command::AnswerGate { gate, answer } => self.answer_gate(gate, answer),
            Command::WithdrawGate { gate, reason } => self.withdraw_gate(gate, reason),
            Command::RecordObservation { observation } => self.record_observation(observation),
            Command::RecordEvidence { evidence } => self.record_evidence(evidence),
            Command::RaiseObligation {
                id,
                kind,
                detail,
                owner,
            } => self.raise_obligation(id, *kind, detail, owner.as_ref()),
            Command::Discharge {
                obligation,
                changes,
            } => self.discharge(obligation, changes),
            Command::ReportWorkspace { workspace } => {
                let agent = self.require_registered_agent(command)?;
                if self.state.workspaces.get(agent) == Some(workspace) {
                    return Ok(vec![]);
                }
                check_workspace(workspace)?;
                Ok(vec![Event::WorkspaceReported {
                    agent: agent.clone(),
                    workspace: workspace.clone(),
                }])
            }
        }
    }

    // ----- authority -----------------------------------------------------------------------

    fn is_owner(&self) -> bool {
        self.actor.person() == Some(&self.state.spec.owner)
    }

    fn require_owner(&self) -> Result<(), Refusal> {
        if self.is_owner() {
            Ok(())
        } else {
            Err(Refusal::NotGoalOwner {
                owner: self.state.owner(),
            })
        }
    }

    fn not_permitted(&self, command: &'static str) -> Refusal {
        Refusal::ActorNotPermitted {
            actor: self.actor.clone(),
            command,
        }
    }

    fn require_registered_agent(&self, command: &Command) -> Result<&AgentId, Refusal> {
        let agent = self
            .actor
            .agent()
            .ok_or_else(|| self.not_permitted(command.name()))?;
        self.registered(agent)?;
        Ok(agent)
    }

    fn registered(&self, agent: &AgentId) -> Result<(), Refusal> {
        if self.state.is_registered(agent) {
            Ok(())
        } else {
            Err(Refusal::UnregisteredAgent {
                agent: agent.clone(),
            })
        }
    }

    /// Owner, registered agents and capabilities may shape the plan.
    fn require_planner(&self, command: &'static str) -> Result<(), Refusal> {
        match self.actor {
            Actor::Person(_) if self.is_owner() => Ok(()),
            Actor::Agent(agent) => self.registered(agent),
            Actor::Capability(_) => Ok(()),
            _ => Err(self.not_permitted(command)),
        }
    }

    /// Checks that the actor may act on `todo` with `action`; returns the grant reason to
    /// record when a grant was used.
    fn todo_authority(
        &self,
        todo: &Todo,
        action: GrantedAction,
        grant_reason: Option<&str>,
        command: &'static str,
    ) -> Result<Option<String>, Refusal> {
        if self.is_owner() {
            return Ok(None);
        }
        let owner = self.state.todo_owner(todo, self.now);
        match self.actor {
            Actor::Agent(agent) => {
                self.registered(agent)?;
                match owner {
                    None => Ok(None),
                    Some(owner) if &owner == agent => Ok(None),
                    Some(owner) => self.use_grant(agent, todo, owner, action, grant_reason),
                }
            }
            Actor::Capability(_) => match owner {
                None => Ok(None),
                Some(owner) => Err(Refusal::GrantRequired {
                    todo: todo.id.clone(),
                    owner,
                    action: action_name(action),
                }),
            },
            _ => Err(self.not_permitted(command)),
        }
    }

    fn use_grant(
        &self,
        agent: &AgentId,
        todo: &Todo,
        owner: AgentId,
        action: GrantedAction,
        grant_reason: Option<&str>,
    ) -> Result<Option<String>, Refusal> {
        let granted = self
            .state
            .spec
            .grants
            .get(agent)
            .is_some_and(|actions| actions.contains(&action));
        if !granted {
            return Err(Refusal::GrantRequired {
                todo: todo.id.clone(),
                owner,
                action: action_name(action),
            });
        }
        match grant_reason {
            Some(reason) if !reason.trim().is_empty() => {
                optional_text("grant_reason", reason)?;
                Ok(Some(reason.to_owned()))
            }
            _ => Err(Refusal::GrantReasonRequired),
        }
    }

    // ----- goal ----------------------------------------------------------------------------

    fn amend(&self, expected: u64, amendments: &[Amendment]) -> Result<Vec<Event>, Refusal> {
        self.require_owner()?;
        if expected != self.state.goal_revision {
            return Err(Refusal::StaleRevision {
                expected,
                current: self.state.goal_revision,
            });
        }
        if amendments.is_empty() {
            return Err(Refusal::NoVisibleChange {
                what: "an amendment needs at least one change".into(),
            });
        }
        let mut criteria: BTreeSet<_> = self.state.spec.criteria.iter().map(|c| &c.id).collect();
        for amendment in amendments {
            match amendment {
                Amendment::SetObjective { objective } => text("objective", objective)?,
                Amendment::AddCriterion { criterion } => {
                    text("criterion text", &criterion.text)?;
                    if !criteria.insert(&criterion.id) {
                        return Err(Refusal::DuplicateId {
                            kind: "criterion",
                            id: criterion.id.to_string(),
                        });
                    }
                }
                Amendment::RemoveCriterion { id } => {
                    if !criteria.remove(id) {
                        return Err(Refusal::UnknownReference {
                            kind: "criterion",
                            id: id.to_string(),
                        });
                    }
                }
                Amendment::SetPolicy { policy } => positive("policy.lease_ttl", policy.lease_ttl)?,
                Amendment::RegisterAgent { .. }
                | Amendment::UnregisterAgent { .. }
                | Amendment::SetBudget { .. }
                | Amendment::Grant { .. }
                | Amendment::Revoke { .. } => {}
            }
        }
        Ok(vec![Event::GoalAmended {
            goal_revision: self.state.goal_revision + 1,
            amendments: amendments.to_vec(),
        }])
    }

    fn declare_closure(&self, reason: &str) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Person(_) => self.require_owner()?,
            Actor::Agent(agent) => self.registered(agent)?,
            _ => return Err(self.not_permitted("declare_closure")),
        }
        text("reason", reason)?;
        Ok(vec![Event::ClosureDeclared {
            reason: reason.to_owned(),
        }])
    }

    // ----- todos ---------------------------------------------------------------------------

    fn todo(&self, id: &TodoId) -> Result<&Todo, Refusal> {
        self.state
            .todos
            .get(id)
            .ok_or_else(|| Refusal::UnknownTodo { todo: id.clone() })
    }

    fn add_todo(&self, todo: &NewTodo) -> Result<Vec<Event>, Refusal> {
        self.require_planner("add_todo")?;
        let todo = self.check_new_todo(todo, &BTreeSet::new())?;
        Ok(vec![Event::TodoAdded { todo }])
    }

    /// Validates a new todo; `batch` holds ids added earlier in the same commit. Returns the
    /// todo as it will be recorded (a review excludes the author of what it reviews).
    fn check_new_todo(&self, new: &NewTodo, batch: &BTreeSet<TodoId>) -> Result<NewTodo, Refusal> {
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

    fn open_todo<'s>(&'s self, id: &TodoId, needed: &'static str) -> Result<&'s Todo, Refusal> {
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

    fn no_turn_in_flight(todo: &Todo) -> Result<(), Refusal> {
        match todo.lease.as_ref().and_then(|l| l.turn.as_ref()) {
            Some(turn) => Err(Refusal::TurnInFlight {
                todo: todo.id.clone(),
                turn: turn.id.clone(),
            }),
            None => Ok(()),
        }
    }

    fn reassign(
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

    fn check_resume_condition(&self, todo: &Todo, until: &ResumeCondition) -> Result<(), Refusal> {
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

    fn baseline(&self, until: &ResumeCondition) -> Option<crate::ids::Fingerprint> {
        match until {
            ResumeCondition::ObservationChanged { key } => self
                .state
                .observations
                .get(key)
                .map(|o| o.fingerprint.clone()),
            _ => None,
        }
    }

    fn defer(
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

    fn block(
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

    fn unblock(&self, id: &TodoId, grant_reason: Option<&str>) -> Result<Vec<Event>, Refusal> {
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

    fn supersede(
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

    // ----- leases --------------------------------------------------------------------------

    /// Everything that makes `todo` legal for `agent` to take now, except leases and authority.
    fn runnable_for(&self, todo: &Todo, agent: &AgentId) -> Result<(), Refusal> {
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
        Ok(())
    }

    fn gate_clear(&self, todo: &Todo) -> Result<(), Refusal> {
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

    fn guard(
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

    fn claim(
        &self,
        id: &TodoId,
        ttl: Option<Duration>,
        workspace: Option<&Workspace>,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let agent = self.require_registered_agent(&Command::Claim {
            todo: id.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        })?;
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
            && let Some(turn) = todo.lease.as_ref().and_then(|l| l.turn.as_ref())
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
    fn holder_lease(&self, id: &TodoId, epoch: u64) -> Result<&crate::todo::Lease, Refusal> {
        let todo = self.todo(id)?;
        if epoch != todo.last_epoch {
            return Err(Refusal::StaleLeaseEpoch {
                todo: id.clone(),
                presented: epoch,
                current: todo.last_epoch,
            });
        }
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

    fn renew(&self, id: &TodoId, epoch: u64, ttl: Option<Duration>) -> Result<Vec<Event>, Refusal> {
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

    fn handoff(
        &self,
        id: &TodoId,
        epoch: u64,
        to: &AgentId,
        note: &HandoffNote,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        if epoch != todo.last_epoch {
            return Err(Refusal::StaleLeaseEpoch {
                todo: id.clone(),
                presented: epoch,
                current: todo.last_epoch,
            });
        }
        let lease = todo
            .live_lease(self.now)
            .ok_or_else(|| Refusal::NoLiveLease { todo: id.clone() })?;
        let grant_reason = if self.actor.agent() == Some(&lease.holder) || self.is_owner() {
            None
        } else {
            let agent = self
                .actor
                .agent()
                .ok_or_else(|| self.not_permitted("handoff"))?;
            self.registered(agent)?;
            self.use_grant(
                agent,
                todo,
                lease.holder.clone(),
                GrantedAction::TakeOver,
                grant_reason,
            )?
        };
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
        let workspace = self.state.workspaces.get(to);
        self.guard(todo, to, workspace)?;
        Ok(vec![Event::LeaseHandedOff {
            todo: id.clone(),
            from: lease.holder.clone(),
            to: to.clone(),
            epoch: todo.last_epoch + 1,
            expires_at: self.now.plus(self.state.spec.policy.lease_ttl),
            workspace: workspace.cloned(),
            note: note.clone(),
            grant_reason,
        }])
    }

    // ----- turns ---------------------------------------------------------------------------

    fn begin_turn(
        &self,
        id: &TodoId,
        epoch: u64,
        turn: &TurnId,
        reserve: Option<Amounts>,
    ) -> Result<Vec<Event>, Refusal> {
        let lease = self.holder_lease(id, epoch)?;
        self.registered(&lease.holder)?;
        if let Some(current) = &lease.turn {
            return Err(Refusal::TurnInFlight {
                todo: id.clone(),
                turn: current.id.clone(),
            });
        }
        if self.state.used_turns.contains(turn) {
            return Err(Refusal::TurnAlreadyUsed { turn: turn.clone() });
        }
        let todo = self.todo(id)?;
        self.gate_clear(todo)?;
        let mut reserved = reserve.unwrap_or(self.state.spec.policy.default_reservation);
        reserved.turns = 1;
        if let Some(dimension) = self.state.ledger.shortfall(reserved) {
            return Err(Refusal::BudgetExhausted {
                dimension,
                scope: "goal".into(),
            });
        }
        if let Some(dimension) = todo.budget.as_ref().and_then(|l| l.shortfall(reserved)) {
            return Err(Refusal::BudgetExhausted {
                dimension,
                scope: format!("todo {id}"),
            });
        }
        Ok(vec![Event::TurnBegun {
            todo: id.clone(),
            epoch,
            turn: turn.clone(),
            reserved,
        }])
    }

    /// Validates a settlement. `resolving` is set when a readback resolves an expired turn: the
    /// lease may then be expired and the actor need not be its holder.
    fn settle(&self, s: &Settlement, resolving: bool) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(&s.todo)?;
        if s.epoch != todo.last_epoch {
            return Err(Refusal::StaleLeaseEpoch {
                todo: s.todo.clone(),
                presented: s.epoch,
                current: todo.last_epoch,
            });
        }
        let Some(lease) = &todo.lease else {
            return Err(self.turn_gone(&s.todo, &s.turn));
        };
        if !resolving && self.actor.agent() != Some(&lease.holder) {
            return Err(Refusal::NotLeaseHolder {
                todo: s.todo.clone(),
                actor: self.actor.clone(),
            });
        }
        if lease.turn.as_ref().map(|t| &t.id) != Some(&s.turn) {
            return Err(self.turn_gone(&s.todo, &s.turn));
        }
        if s.verdict.validator == Actor::Agent(lease.holder.clone()) {
            return Err(Refusal::ValidationNotIndependent {
                validator: s.verdict.validator.clone(),
            });
        }
        optional_text("verdict.summary", &s.verdict.summary)?;
        let evidence = self.check_evidence_batch(&s.evidence)?;
        let observations = self.changed_observations(&s.observations)?;
        let transition = self.settled_transition(todo, s, &observations)?;
        let monitor_quiet = match &todo.class {
            TodoClass::Monitor(spec) => !observations.iter().any(|o| o.key == spec.watches),
            _ => false,
        };
        // An unchanged monitor poll is a no-op for the budget; every other settled turn is
        // charged once, what it actually used, and always as exactly one turn.
        let charged = if monitor_quiet && transition == SettledTransition::KeepOpen {
            Amounts::ZERO
        } else {
            Amounts {
                turns: 1,
                ..s.usage
            }
        };
        let mut events = vec![Event::TurnSettled {
            todo: s.todo.clone(),
            epoch: s.epoch,
            turn: s.turn.clone(),
            verdict: s.verdict.clone(),
            evidence,
            observations,
            transition,
            charged,
        }];
        if monitor_quiet && let Some(monitor) = &todo.monitor {
            let streak = monitor.no_change_streak.saturating_add(1);
            let limit = self.state.spec.policy.monitor_no_change_limit;
            let already_raised = self.state.obligations.values().any(|o| {
                o.discharged.is_none()
                    && matches!(&o.cause, ObligationCause::MonitorStalled { todo: t, .. } if t == &todo.id)
            });
            if limit > 0 && streak >= limit && !already_raised {
                events.push(self.stalled_monitor(todo, streak, &lease.holder)?);
            }
        }
        Ok(events)
    }

    fn turn_gone(&self, todo: &TodoId, turn: &TurnId) -> Refusal {
        if self.state.used_turns.contains(turn) {
            Refusal::TurnAlreadyUsed { turn: turn.clone() }
        } else {
            Refusal::TurnNotBegun {
                todo: todo.clone(),
                turn: turn.clone(),
            }
        }
    }

    fn stalled_monitor(
        &self,
        todo: &Todo,
        streak: u32,
        holder: &AgentId,
    ) -> Result<Event, Refusal> {
        // Named after the revision that raises it; when someone already gave an obligation that
        // name, a numbered suffix keeps the event applicable (a duplicate id would not fold).
        let revision = self.state.revision + 1;
        let name = |n: u64| {
            let text = if n == 1 {
                format!("stalled-r{revision}")
            } else {
                format!("stalled-r{revision}-{n}")
            };
            ObligationId::new(text).map_err(|e| invalid("obligation id", e.to_string()))
        };
        let mut n = 1;
        let mut id = name(n)?;
        while self.state.obligations.contains_key(&id) {
            n += 1;
            id = name(n)?;
        }
        Ok(Event::ObligationRaised {
            id,
            kind: ObligationKind::Replan,
            cause: ObligationCause::MonitorStalled {
                todo: todo.id.clone(),
                streak,
            },
            detail: format!(
                "monitor `{}` saw no change in {streak} polls; decide whether to keep waiting, change the route or close",
                todo.id
            ),
            owner: Some(holder.clone()),
        })
    }

    fn settled_transition(
        &self,
        todo: &Todo,
        s: &Settlement,
        observations: &[Observation],
    ) -> Result<SettledTransition, Refusal> {
        Ok(match &s.transition {
            Transition::KeepOpen => SettledTransition::KeepOpen,
            Transition::Block { reason } => {
                text("reason", reason)?;
                SettledTransition::Block {
                    reason: reason.clone(),
                }
            }
            Transition::Defer { until } => {
                self.check_resume_condition(todo, until)?;
                let baseline = match until {
                    ResumeCondition::ObservationChanged { key } => observations
                        .iter()
                        .rev()
                        .find(|o| &o.key == key)
                        .map(|o| o.fingerprint.clone())
                        .or_else(|| self.baseline(until)),
                    _ => None,
                };
                SettledTransition::Defer {
                    until: until.clone(),
                    baseline,
                }
            }
            Transition::Complete { continuation } => {
                if s.verdict.outcome != VerdictOutcome::Passed {
                    return Err(Refusal::ValidationInsufficient {
                        todo: todo.id.clone(),
                        verdict: match s.verdict.outcome {
                            VerdictOutcome::Progress => "progress",
                            _ => "failed",
                        },
                    });
                }
                let (continuation, successors) = match continuation {
                    Continuation::NoFollowUp => (ContinuationRecord::NoFollowUp, vec![]),
                    Continuation::GoalStillActive => (ContinuationRecord::GoalStillActive, vec![]),
                    Continuation::Successors(new) => {
                        if new.is_empty() {
                            return Err(Refusal::InvalidContinuation {
                                problem: "`successors` needs at least one todo; use `no_follow_up` or `goal_still_active` otherwise".into(),
                            });
                        }
                        let mut batch = BTreeSet::new();
                        let mut checked = Vec::new();
                        for successor in new {
                            checked.push(self.check_new_todo(successor, &batch)?);
                            batch.insert(successor.id.clone());
                        }
                        let ids = checked.iter().map(|t| t.id.clone()).collect();
                        (ContinuationRecord::Successors(ids), checked)
                    }
                };
                SettledTransition::Complete {
                    continuation,
                    successors,
                }
            }
        })
    }

    fn resolve_outcome(
        &self,
        id: &TodoId,
        turn: &TurnId,
        resolution: &OutcomeResolution,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        let Some(lease) = todo
            .lease
            .as_ref()
            .filter(|l| l.turn.as_ref().map(|t| &t.id) == Some(turn))
        else {
            return Err(self.turn_gone(id, turn));
        };
        if lease.is_live(self.now) {
            return Err(Refusal::TurnInFlight {
                todo: id.clone(),
                turn: turn.clone(),
            });
        }
        let grant_reason = if self.actor.agent() == Some(&lease.holder) || self.is_owner() {
            None
        } else {
            let agent = self
                .actor
                .agent()
                .ok_or_else(|| self.not_permitted("resolve_outcome"))?;
            self.registered(agent)?;
            self.use_grant(
                agent,
                todo,
                lease.holder.clone(),
                GrantedAction::TakeOver,
                grant_reason,
            )?
        };
        match resolution {
            OutcomeResolution::Absent { note } => {
                text("note", note)?;
                Ok(vec![Event::OutcomeAbsent {
                    todo: id.clone(),
                    turn: turn.clone(),
                    note: note.clone(),
                    grant_reason,
                }])
            }
            OutcomeResolution::Committed { settlement } => {
                if &settlement.todo != id || &settlement.turn != turn {
                    return Err(invalid(
                        "settlement",
                        "must name the same todo and turn as the resolution",
                    ));
                }
                self.settle(settlement, true)
            }
        }
    }

    // ----- gates, facts, obligations -------------------------------------------------------

    fn open_gate(&self, gate: &NewGate) -> Result<Vec<Event>, Refusal> {
        self.require_planner("open_gate")?;
        self.check_new_gate(gate)?;
        Ok(vec![Event::GateOpened { gate: gate.clone() }])
    }

    fn check_new_gate(&self, gate: &NewGate) -> Result<(), Refusal> {
        if self.state.gates.contains_key(&gate.id) {
            return Err(Refusal::DuplicateId {
                kind: "gate",
                id: gate.id.to_string(),
            });
        }
        text("question", &gate.question)?;
        if gate.scope.is_empty() {
            return Err(invalid(
                "scope",
                "a gate must say what it blocks (todos, decisions or the whole goal); an unscoped gate would block everything silently",
            ));
        }
        for todo in &gate.scope.todos {
            self.todo(todo)?;
        }
        if matches!(gate.owner, Actor::Capability(_)) {
            return Err(invalid("owner", "a capability cannot answer gates"));
        }
        if let Some(deadline) = gate.deadline
            && deadline <= self.now
        {
            return Err(invalid("deadline", "must be in the future"));
        }
        Ok(())
    }

    fn pending_gate(&self, id: &crate::ids::GateId) -> Result<&crate::gate::Gate, Refusal> {
        let gate = self
            .state
            .gates
            .get(id)
            .ok_or_else(|| Refusal::UnknownGate { gate: id.clone() })?;
        let state = gate.state_at(self.now);
        if !state.is_pending() {
            return Err(Refusal::GateNotPending {
                gate: id.clone(),
                state,
            });
        }
        Ok(gate)
    }

    fn answer_gate(
        &self,
        id: &crate::ids::GateId,
        answer: &GateAnswer,
    ) -> Result<Vec<Event>, Refusal> {
        let gate = self.pending_gate(id)?;
        if self.actor != &gate.owner {
            return Err(Refusal::NotGateOwner {
                gate: id.clone(),
                owner: gate.owner.clone(),
            });
        }
        Ok(vec![match answer {
            GateAnswer::Resolve { answer } => {
                text("answer", answer)?;
                Event::GateResolved {
                    gate: id.clone(),
                    answer: answer.clone(),
                }
            }
            GateAnswer::Reject { reason } => {
                text("reason", reason)?;
                Event::GateRejected {
                    gate: id.clone(),
                    reason: reason.clone(),
                }
            }
        }])
    }

    fn withdraw_gate(&self, id: &crate::ids::GateId, reason: &str) -> Result<Vec<Event>, Refusal> {
        let gate = self.pending_gate(id)?;
        if self.actor != &gate.opened_by && !self.is_owner() {
            return Err(self.not_permitted("withdraw_gate"));
        }
        text("reason", reason)?;
        Ok(vec![Event::GateWithdrawn {
            gate: id.clone(),
            reason: reason.to_owned(),
        }])
    }

    fn check_observation(observation: &Observation) -> Result<(), Refusal> {
        optional_text("observation.summary", &observation.summary)?;
        if observation.facts.len() > 64 {
            return Err(invalid("observation.facts", "at most 64 facts"));
        }
        for (name, value) in &observation.facts {
            text("observation.facts", name)?;
            optional_text("observation.facts", value)?;
        }
        Ok(())
    }

    /// The observations that change something, in order; unchanged ones are dropped.
    fn changed_observations(
        &self,
        observations: &[Observation],
    ) -> Result<Vec<Observation>, Refusal> {
        let mut changed: Vec<Observation> = Vec::new();
        for observation in observations {
            Self::check_observation(observation)?;
            let current = changed
                .iter()
                .rev()
                .find(|o| o.key == observation.key)
                .or_else(|| self.state.observations.get(&observation.key));
            if current.map(|o| &o.fingerprint) != Some(&observation.fingerprint) {
                changed.push(observation.clone());
            }
        }
        Ok(changed)
    }

    fn record_observation(&self, observation: &Observation) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Agent(agent) => self.registered(agent)?,
            Actor::Provider(_) | Actor::Capability(_) | Actor::Validator(_) => {}
            Actor::Person(_) => return Err(self.not_permitted("record_observation")),
        }
        Ok(self
            .changed_observations(std::slice::from_ref(observation))?
            .into_iter()
            .map(|observation| Event::ObservationRecorded { observation })
            .collect())
    }

    fn check_evidence_batch(&self, batch: &[NewEvidence]) -> Result<Vec<NewEvidence>, Refusal> {
        let mut ids = BTreeSet::new();
        for evidence in batch {
            if self.state.evidence.contains_key(&evidence.id) || ids.contains(&evidence.id) {
                return Err(Refusal::DuplicateId {
                    kind: "evidence",
                    id: evidence.id.to_string(),
                });
            }
            optional_text("evidence.summary", &evidence.summary)?;
            for input in &evidence.inputs.evidence {
                if !self.state.evidence.contains_key(input) && !ids.contains(input) {
                    return Err(Refusal::UnknownReference {
                        kind: "input evidence",
                        id: input.to_string(),
                    });
                }
            }
            ids.insert(evidence.id.clone());
        }
        Ok(batch.to_vec())
    }

    fn record_evidence(&self, evidence: &NewEvidence) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Validator(_) | Actor::Provider(_) => {}
            Actor::Person(_) if self.is_owner() => {}
            // Agents report evidence only through a settled turn with an independent verdict.
            _ => return Err(self.not_permitted("record_evidence")),
        }
        let batch = self.check_evidence_batch(std::slice::from_ref(evidence))?;
        Ok(batch
            .into_iter()
            .map(|evidence| Event::EvidenceRecorded { evidence })
            .collect())
    }

    fn raise_obligation(
        &self,
        id: &ObligationId,
        kind: ObligationKind,
        detail: &str,
        owner: Option<&AgentId>,
    ) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Validator(_) => {}
            _ => self.require_planner("raise_obligation")?,
        }
        if self.state.obligations.contains_key(id) {
            return Err(Refusal::DuplicateId {
                kind: "obligation",
                id: id.to_string(),
            });
        }
        text("detail", detail)?;
        if let Some(agent) = owner {
            self.registered(agent)?;
        }
        Ok(vec![Event::ObligationRaised {
            id: id.clone(),
            kind,
            cause: ObligationCause::Proposed,
            detail: detail.to_owned(),
            owner: owner.cloned(),
        }])
    }

    fn discharge(
        &self,
        id: &ObligationId,
        changes: &[crate::command::PlanChange],
    ) -> Result<Vec<Event>, Refusal> {
        let obligation =
            self.state
                .obligations
                .get(id)
                .ok_or_else(|| Refusal::UnknownObligation {
                    obligation: id.clone(),
                })?;
        if obligation.discharged.is_some() {
            return Err(Refusal::ObligationClosed {
                obligation: id.clone(),
            });
        }
        match self.actor {
            Actor::Person(_) => self.require_owner()?,
            Actor::Agent(agent) => self.registered(agent)?,
            _ => return Err(self.not_permitted("discharge")),
        }
        if changes.is_empty() {
            return Err(Refusal::NoVisibleChange {
                what: "an obligation is discharged only together with a change to the plan (a new todo, a supersede, a defer, a block, a gate or a closure)".into(),
            });
        }
        // Each change is validated against the state the earlier ones produce, on a scratch
        // copy: discharges are rare, and this keeps one validation path for every change.
        let mut scratch = self.state.clone();
        let mut events = Vec::new();
        for change in changes {
            let recorded = scratch.handle(self.actor, self.now, &change.clone().into_command())?;
            events.extend(recorded.into_iter().map(|r| r.event));
        }
        events.push(Event::ObligationDischarged {
            obligation: id.clone(),
        });
        Ok(events)
    }
}

fn check_workspace(workspace: &Workspace) -> Result<(), Refusal> {
    text("workspace.top_level", &workspace.top_level)?;
    text("workspace.common_dir", &workspace.common_dir)
}

fn action_name(action: GrantedAction) -> &'static str {
    match action {
        GrantedAction::TakeOver => "take_over",
        GrantedAction::Reassign => "reassign",
        GrantedAction::Supersede => "supersede",
    }
}
