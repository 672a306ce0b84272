//! Command validation: a command plus the state it is issued against either becomes events or
//! is refused with a [`Refusal`]. Nothing here mutates state; [`GoalState::handle`] applies.

mod effects;
mod evidence;
mod gates;
mod goal;
mod leases;
mod todos;
mod turns;

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::command::Command;
use crate::event::{Event, RecordedEvent, SCHEMA_VERSION};
use crate::goal::{GoalSpec, GrantedAction};
use crate::ids::AgentId;
use crate::refusal::Refusal;
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};
use crate::todo::{Todo, Workspace};

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
    if let Some(c) = crate::text::first_reordering_or_hiding(value) {
        return Err(invalid(
            field,
            format!(
                "holds U+{:04X}, a character that reorders or hides the text around it; write it without",
                u32::from(c)
            ),
        ));
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
                    | Command::TakeOverTurn { .. }
                    | Command::Release { .. }
                    | Command::ResolveOutcome { .. }
                    | Command::RecordEffect { .. }
                    | Command::RecordObservation { .. }
                    | Command::Retire {}
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
            Command::TakeOverTurn {
                todo,
                epoch,
                turn,
                ttl,
            } => self.take_over_turn(todo, *epoch, turn, *ttl),
            Command::SettleTurn(settlement) => self.settle(settlement, false),
            Command::ResolveOutcome {
                todo,
                turn,
                resolution,
                grant_reason,
            } => self.resolve_outcome(todo, turn, resolution, grant_reason.as_deref()),
            Command::IntendEffect {
                todo,
                epoch,
                effect,
            } => self.intend_effect(todo, *epoch, effect),
            Command::RecordEffect {
                id,
                outcome,
                note,
                grant_reason,
            } => self.record_effect(id, *outcome, note.as_deref(), grant_reason.as_deref()),
            Command::OpenGate { gate } => self.open_gate(gate),
            Command::AnswerGate { gate, answer } => self.answer_gate(gate, answer),
            Command::RelayGateAnswer {
                gate,
                answer,
                relay,
            } => self.relay_gate_answer(gate, answer, relay),
            Command::IntendGateNotice { gate, effect } => self.intend_gate_notice(gate, effect),
            Command::RecordGateNotice {
                gate,
                outcome,
                note,
            } => self.record_gate_notice(gate, *outcome, note.as_deref()),
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
                let agent = self.require_registered_agent(command.name())?;
                if self.state.workspaces.get(agent) == Some(workspace) {
                    return Ok(vec![]);
                }
                check_workspace(workspace)?;
                Ok(vec![Event::WorkspaceReported {
                    agent: agent.clone(),
                    workspace: workspace.clone(),
                }])
            }
            Command::Retire {} => {
                self.require_planner(command.name())?;
                let retirement = self.state.retirable(self.now);
                Ok(if retirement.is_empty() {
                    vec![]
                } else {
                    vec![Event::Retired(retirement)]
                })
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

    fn require_registered_agent(&self, command: &'static str) -> Result<&AgentId, Refusal> {
        let agent = self
            .actor
            .agent()
            .ok_or_else(|| self.not_permitted(command))?;
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
            // A capability may act on what it created itself while no live lease holds it:
            // an assignee it (or someone) gave that todo is a plan, not work in progress.
            Actor::Capability(_) if self.capability_made(todo) => Ok(None),
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

    /// The actor is the capability that created `todo`, and no live lease holds it.
    fn capability_made(&self, todo: &Todo) -> bool {
        matches!(self.actor, Actor::Capability(_))
            && &todo.created_by == self.actor
            && todo.live_lease(self.now).is_none()
    }

    /// Acting on a lease someone holds: the holder and the goal owner may; another registered
    /// agent only with a `take_over` grant and a reason, which is returned for the event.
    fn holder_or_take_over(
        &self,
        todo: &Todo,
        holder: &AgentId,
        grant_reason: Option<&str>,
        command: &'static str,
    ) -> Result<Option<String>, Refusal> {
        if self.actor.agent() == Some(holder) || self.is_owner() {
            return Ok(None);
        }
        let agent = self
            .actor
            .agent()
            .ok_or_else(|| self.not_permitted(command))?;
        self.registered(agent)?;
        self.use_grant(
            agent,
            todo,
            holder.clone(),
            GrantedAction::TakeOver,
            grant_reason,
        )
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
}

/// Refuses an epoch that is not the todo's latest: the lease was taken over or handed off.
fn current_epoch(todo: &Todo, epoch: u64) -> Result<(), Refusal> {
    if epoch == todo.last_epoch {
        return Ok(());
    }
    Err(Refusal::StaleLeaseEpoch {
        todo: todo.id.clone(),
        presented: epoch,
        current: todo.last_epoch,
    })
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
