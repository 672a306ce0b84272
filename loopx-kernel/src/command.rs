//! Commands: requests to change a goal. Each is validated against the goal's state and the
//! issuing [`Actor`](crate::Actor); an accepted command becomes events, a refused one changes
//! nothing.

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::evidence::{NewEvidence, Observation};
use crate::gate::NewGate;
use crate::goal::{Amendment, GoalSpec};
use crate::identity::Signature;
use crate::ids::{AgentId, EffectId, GateId, ObligationId, TodoId, TurnId};
use crate::login::Relay;
use crate::obligation::ObligationKind;
use crate::outbox::{EffectIntent, EffectOutcome};
use crate::retry::TurnFailure;
use crate::time::Duration;
use crate::todo::{HandoffNote, NewTodo, ResumeCondition, Workspace};

/// A request to change one goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Create the goal; the issuing person becomes its owner.
    CreateGoal {
        /// Everything the goal is created with; its id must be new to the store.
        spec: GoalSpec,
    },
    /// Amend the goal (owner only) against the goal revision the owner read.
    AmendGoal {
        /// The goal revision the amendments were written against.
        expected_revision: u64,
        /// The changes, applied in order, all or nothing.
        amendments: Vec<Amendment>,
    },
    /// Give the goal up (owner only); it ends `terminal (abandoned)` once no turn is in flight.
    AbandonGoal {
        /// Why it is given up, recorded for whoever reads the log (at most `MAX_TEXT` bytes).
        reason: String,
    },
    /// Record the explicit intent to close the goal once every condition holds.
    DeclareClosure {
        /// Why the work is believed complete.
        reason: String,
    },
    /// Add a todo.
    AddTodo {
        /// The todo; its id must be new to the goal.
        todo: NewTodo,
    },
    /// Change which agent a todo is meant for.
    Reassign {
        /// The todo to reassign; a live lease on it is not moved (use `handoff`).
        todo: TodoId,
        /// The new assignee, or `None` for anyone.
        to: Option<AgentId>,
        /// Required when acting on another agent's todo under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Set a todo aside until a typed condition holds.
    Defer {
        /// The todo to set aside; it leaves every frontier until `until` holds.
        todo: TodoId,
        /// The recorded fact that lets it resume; prose never resumes anything.
        until: ResumeCondition,
        /// Required when acting on another agent's todo under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Record a blocking fact on a todo.
    Block {
        /// The todo to block; it leaves every frontier until unblocked.
        todo: TodoId,
        /// The blocking fact, in words, for whoever unblocks it.
        reason: String,
        /// Required when acting on another agent's todo under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Clear a blocking fact.
    Unblock {
        /// The blocked todo; it returns to open.
        todo: TodoId,
        /// Required when acting on another agent's todo under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Replace a todo; it never runs again.
    Supersede {
        /// The todo replaced; it is never offered again.
        todo: TodoId,
        /// Why it is replaced, recorded with the event.
        reason: String,
        /// The todo that replaces it, added in the same commit.
        #[serde(default)]
        replacement: Option<NewTodo>,
        /// Required when acting on another agent's todo under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Acquire the lease on a todo (the issuing agent becomes the holder).
    Claim {
        /// The todo to lease; it must be in the issuing agent's frontier.
        todo: TodoId,
        /// Lease time-to-live; the goal policy's when absent.
        #[serde(default)]
        ttl: Option<Duration>,
        /// The agent's workspace; required for todos that write.
        #[serde(default)]
        workspace: Option<Workspace>,
        /// Required when taking a todo assigned to another agent under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Extend a live lease.
    Renew {
        /// The todo whose live lease the issuing agent holds.
        todo: TodoId,
        /// The holder's epoch.
        epoch: u64,
        /// New time-to-live from now; the goal policy's when absent.
        #[serde(default)]
        ttl: Option<Duration>,
    },
    /// Give a lease up; a begun turn's reservation is returned uncharged.
    Release {
        /// The todo whose lease the issuing agent gives up.
        todo: TodoId,
        /// The holder's epoch.
        epoch: u64,
    },
    /// Move a live lease to another agent under a new epoch.
    Handoff {
        /// The todo whose live lease moves.
        todo: TodoId,
        /// The epoch the sender holds; a stale one is refused, and the receiver gets the next.
        epoch: u64,
        /// The receiving agent, registered and not excluded from the todo.
        to: AgentId,
        /// What the receiver needs to carry on.
        note: HandoffNote,
        /// Required when someone other than the holder hands off under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Record a prepared turn under a live lease and reserve its budget.
    BeginTurn {
        /// The todo whose live lease the issuing agent holds.
        todo: TodoId,
        /// The holder's epoch.
        epoch: u64,
        /// The turn's id; its charge is bound to it.
        turn: TurnId,
        /// What to reserve; the goal policy's default when absent.
        #[serde(default)]
        reserve: Option<Amounts>,
    },
    /// Take a prepared turn over from another session of the same agent: the lease moves to a
    /// new epoch with the turn (and its reservation) still in flight, so the session that began
    /// it is fenced (its renewals and settlement carry a dead epoch). Only the holder agent may
    /// issue it, only for the turn in flight under a live lease; nothing is charged.
    TakeOverTurn {
        /// The todo whose live lease the issuing agent holds.
        todo: TodoId,
        /// The epoch the issuing session found; a stale one is refused, so of two sessions
        /// taking over at once exactly one wins.
        epoch: u64,
        /// The turn in flight; any other is refused.
        turn: TurnId,
        /// New time-to-live from now; the goal policy's when absent.
        #[serde(default)]
        ttl: Option<Duration>,
    },
    /// Settle a turn atomically.
    SettleTurn(Settlement),
    /// Resolve a turn whose lease expired with its outcome unknown, after reading back what
    /// happened.
    ResolveOutcome {
        /// The todo whose expired lease left the outcome unknown.
        todo: TodoId,
        /// The turn in flight when the lease expired; any other is refused.
        turn: TurnId,
        /// What the readback showed.
        resolution: OutcomeResolution,
        /// Required when someone other than the former holder resolves it under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Commit the intent to perform an external effect (the outbox): the holder of the todo's
    /// live lease, at its current epoch and with a turn in flight, says what it is about to do;
    /// only once this commits may the effect be performed.
    IntendEffect {
        /// The todo whose live lease the issuing agent holds.
        todo: TodoId,
        /// The holder's epoch; an epoch fenced by a newer one is refused.
        epoch: u64,
        /// The effect; its id must never have been intended in this goal.
        effect: EffectIntent,
    },
    /// Record what became of an intended effect: performed, or absent for good.
    RecordEffect {
        /// The pending effect.
        id: EffectId,
        /// What happened (or what its readback showed).
        outcome: EffectOutcome,
        /// What the readback showed, in words.
        #[serde(default)]
        note: Option<String>,
        /// Required when someone other than the intent's holder records it under a grant.
        #[serde(default)]
        grant_reason: Option<String>,
    },
    /// Open a gate.
    OpenGate {
        /// The gate; its id must be new and its scope must cover something.
        gate: NewGate,
    },
    /// Answer a gate (its owner only).
    AnswerGate {
        /// The pending gate answered.
        gate: GateId,
        /// What its owner decided: resolved with a text, or rejected.
        answer: GateAnswer,
    },
    /// Answer a gate on its owner's behalf, as a provider relays it from where the owner
    /// wrote it (a `/loopx answer` comment in a pull request): accepted only from a provider
    /// actor, and only when the login that wrote it is mapped to the gate's owner under that
    /// provider ([`Amendment::MapLogin`]); anyone else's words are `relay_not_gate_owner`.
    RelayGateAnswer {
        /// The pending gate answered.
        gate: GateId,
        /// What the owner wrote: resolved with a text, or rejected.
        answer: GateAnswer,
        /// Who wrote it at the provider, and where.
        relay: Relay,
    },
    /// Commit the intent of a pending gate's one notice to its owner where they work (a
    /// pull-request comment naming the gate and how to answer it): accepted only from a provider
    /// actor, only while the gate is pending and its owner is a person whose login at that
    /// provider the goal owner mapped, and only once per gate (`gate_notice_intended`).
    IntendGateNotice {
        /// The pending gate the notice is about.
        gate: GateId,
        /// The effect, its id new to the goal.
        effect: EffectIntent,
    },
    /// Record what became of a gate's pending notice (the provider that intended it only).
    RecordGateNotice {
        /// The gate whose notice it is.
        gate: GateId,
        /// Performed, or absent for good.
        outcome: EffectOutcome,
        /// What the readback showed, in words.
        #[serde(default)]
        note: Option<String>,
    },
    /// Withdraw a pending gate (whoever opened it, or the goal owner).
    WithdrawGate {
        /// The pending gate withdrawn; what it covered runs again.
        gate: GateId,
        /// Why it is withdrawn, recorded with the event.
        reason: String,
    },
    /// Record an observation; an unchanged fingerprint produces no event.
    RecordObservation {
        /// The fact observed; an older one of its subject never moves it back.
        observation: Observation,
    },
    /// Record evidence established outside a turn (validators, providers and people only).
    RecordEvidence {
        /// The evidence, bound to the revision it was shown at.
        evidence: NewEvidence,
    },
    /// Raise a replan or repair obligation.
    RaiseObligation {
        /// Its id, new to the goal; raising it again is a duplicate.
        id: ObligationId,
        /// Replan or repair.
        kind: ObligationKind,
        /// What to look at.
        detail: String,
        /// The agent whose line of work it concerns.
        #[serde(default)]
        owner: Option<AgentId>,
    },
    /// Discharge an obligation with the visible changes that answer it, in one commit.
    Discharge {
        /// The open obligation the changes answer.
        obligation: ObligationId,
        /// The changes; at least one, each must change something.
        changes: Vec<PlanChange>,
    },
    /// Report the issuing agent's workspace identity.
    ReportWorkspace {
        /// The workspace.
        workspace: Workspace,
    },
    /// Drop from the goal's state what is inert at the command's time under the goal's
    /// [`Policy::retire_after`](crate::Policy::retire_after) ([`GoalState::retirable`](crate::GoalState::retirable));
    /// history keeps it. Nothing inert: no event. The owner, registered agents and
    /// capabilities may issue it; the engine does when enough is due.
    Retire {},
}

impl Command {
    /// A stable snake-case name for the command, as used in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Command::CreateGoal { .. } => "create_goal",
            Command::AmendGoal { .. } => "amend_goal",
            Command::AbandonGoal { .. } => "abandon_goal",
            Command::DeclareClosure { .. } => "declare_closure",
            Command::AddTodo { .. } => "add_todo",
            Command::Reassign { .. } => "reassign",
            Command::Defer { .. } => "defer",
            Command::Block { .. } => "block",
            Command::Unblock { .. } => "unblock",
            Command::Supersede { .. } => "supersede",
            Command::Claim { .. } => "claim",
            Command::Renew { .. } => "renew",
            Command::Release { .. } => "release",
            Command::Handoff { .. } => "handoff",
            Command::BeginTurn { .. } => "begin_turn",
            Command::TakeOverTurn { .. } => "take_over_turn",
            Command::SettleTurn(_) => "settle_turn",
            Command::ResolveOutcome { .. } => "resolve_outcome",
            Command::IntendEffect { .. } => "intend_effect",
            Command::RecordEffect { .. } => "record_effect",
            Command::OpenGate { .. } => "open_gate",
            Command::AnswerGate { .. } => "answer_gate",
            Command::RelayGateAnswer { .. } => "relay_gate_answer",
            Command::IntendGateNotice { .. } => "intend_gate_notice",
            Command::RecordGateNotice { .. } => "record_gate_notice",
            Command::WithdrawGate { .. } => "withdraw_gate",
            Command::RecordObservation { .. } => "record_observation",
            Command::RecordEvidence { .. } => "record_evidence",
            Command::RaiseObligation { .. } => "raise_obligation",
            Command::Discharge { .. } => "discharge",
            Command::ReportWorkspace { .. } => "report_workspace",
            Command::Retire {} => "retire",
        }
    }

    /// The id of the thing the command is about (a todo, gate, evidence, observation stream or
    /// obligation), for logs and reports; `None` for goal-wide commands.
    pub fn target(&self) -> Option<&str> {
        match self {
            Command::AddTodo { todo } => Some(todo.id.as_str()),
            Command::Reassign { todo, .. }
            | Command::Defer { todo, .. }
            | Command::Block { todo, .. }
            | Command::Unblock { todo, .. }
            | Command::Supersede { todo, .. }
            | Command::Claim { todo, .. }
            | Command::Renew { todo, .. }
            | Command::Release { todo, .. }
            | Command::Handoff { todo, .. }
            | Command::BeginTurn { todo, .. }
            | Command::TakeOverTurn { todo, .. }
            | Command::ResolveOutcome { todo, .. }
            | Command::IntendEffect { todo, .. } => Some(todo.as_str()),
            Command::RecordEffect { id, .. } => Some(id.as_str()),
            Command::SettleTurn(settlement) => Some(settlement.todo.as_str()),
            Command::OpenGate { gate } => Some(gate.id.as_str()),
            Command::AnswerGate { gate, .. }
            | Command::RelayGateAnswer { gate, .. }
            | Command::IntendGateNotice { gate, .. }
            | Command::RecordGateNotice { gate, .. }
            | Command::WithdrawGate { gate, .. } => Some(gate.as_str()),
            Command::RecordObservation { observation } => Some(observation.key.as_str()),
            Command::RecordEvidence { evidence } => Some(evidence.id.as_str()),
            Command::RaiseObligation { id, .. } => Some(id.as_str()),
            Command::Discharge { obligation, .. } => Some(obligation.as_str()),
            Command::CreateGoal { .. }
            | Command::AmendGoal { .. }
            | Command::AbandonGoal { .. }
            | Command::DeclareClosure { .. }
            | Command::ReportWorkspace { .. }
            | Command::Retire {} => None,
        }
    }
}

/// Everything a turn hands back, settled in one atomic commit: the validator's verdict, the
/// evidence, the todo transition with its continuation, the budget charge and the lease release.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settlement {
    /// The todo.
    pub todo: TodoId,
    /// The lease epoch the turn ran under.
    pub epoch: u64,
    /// The turn.
    pub turn: TurnId,
    /// The independent validator's verdict.
    pub verdict: Verdict,
    /// Evidence established by the turn and its validation.
    #[serde(default)]
    pub evidence: Vec<NewEvidence>,
    /// Observations made during the turn (unchanged ones are dropped).
    #[serde(default)]
    pub observations: Vec<Observation>,
    /// What happens to the todo.
    pub transition: Transition,
    /// What the turn actually used; charged once, bound to the turn id.
    #[serde(default)]
    pub usage: Amounts,
    /// The executor's failure, when it could not do the turn: the turn is settled as failed,
    /// whatever the verdict, and retried under the goal's retry policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<TurnFailure>,
}

/// A validator's verdict on a turn. The validator must not be the executor: an exit code proves
/// that a process exited, not that work is done. On a signed goal the verdict carries the
/// validator's signature over [`verdict_message`](crate::identity::verdict_message), so an
/// agent can carry it but not make it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Who validated.
    pub validator: Actor,
    /// The outcome.
    pub outcome: VerdictOutcome,
    /// A short explanation.
    #[serde(default)]
    pub summary: String,
    /// The validator's signature over the verdict, the turn and its evidence; required by a
    /// signed goal, left out on the wire (and ignored) by a declared or unsigned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// A validator's outcome.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictOutcome {
    /// The todo's postcondition holds: it may complete.
    Passed,
    /// A bounded step is proven; the todo stays open.
    Progress,
    /// Nothing was proven; the todo cannot complete.
    Failed,
}

/// What a settled turn does to its todo.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Transition {
    /// Complete it, with exactly one continuation. Needs a `passed` verdict.
    Complete {
        /// What follows.
        continuation: Continuation,
    },
    /// Keep it open for another turn.
    KeepOpen,
    /// Set it aside until a condition holds.
    Defer {
        /// The recorded fact that lets it resume; prose never resumes anything.
        until: ResumeCondition,
    },
    /// Record a blocking fact.
    Block {
        /// The blocking fact, in words, for whoever unblocks it.
        reason: String,
    },
}

/// What follows a completion.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    content = "todos",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Continuation {
    /// New successor todos (at least one), each optionally for a named agent.
    Successors(Vec<NewTodo>),
    /// Nothing follows; records the intent to close the goal.
    NoFollowUp,
    /// The goal stays active; the next decision finds the next step.
    GoalStillActive,
}

/// What a readback showed about a turn whose outcome was unknown.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OutcomeResolution {
    /// The effect did not happen: the reservation is returned and the todo reopens.
    Absent {
        /// What the readback showed.
        note: String,
    },
    /// The effect happened: settle the turn as it would have been.
    Committed {
        /// The settlement, with the expired lease's epoch and the turn id.
        settlement: Box<Settlement>,
    },
}

/// A gate's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GateAnswer {
    /// Yes, with the answer.
    Resolve {
        /// The answer.
        answer: String,
    },
    /// No.
    Reject {
        /// Why.
        reason: String,
    },
}

/// One visible change to the plan, used to discharge an obligation.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case", deny_unknown_fields)]
pub enum PlanChange {
    /// Add a todo.
    AddTodo {
        /// The todo; its id must be new to the goal.
        todo: NewTodo,
    },
    /// Supersede a todo.
    Supersede {
        /// The todo replaced; it is never offered again.
        todo: TodoId,
        /// Why it is replaced, recorded with the event.
        reason: String,
        /// Its replacement.
        #[serde(default)]
        replacement: Option<NewTodo>,
    },
    /// Defer a todo.
    Defer {
        /// The todo to set aside; it leaves every frontier until `until` holds.
        todo: TodoId,
        /// Until when.
        until: ResumeCondition,
    },
    /// Block a todo.
    Block {
        /// The todo to block; it leaves every frontier until unblocked.
        todo: TodoId,
        /// The blocking fact, in words, for whoever unblocks it.
        reason: String,
    },
    /// Unblock a todo.
    Unblock {
        /// The blocked todo; it returns to open.
        todo: TodoId,
    },
    /// Open a gate.
    OpenGate {
        /// The gate; its id must be new and its scope must cover something.
        gate: NewGate,
    },
    /// Declare the intent to close the goal.
    DeclareClosure {
        /// Why.
        reason: String,
    },
}

impl PlanChange {
    /// The equivalent stand-alone command.
    pub fn into_command(self) -> Command {
        match self {
            PlanChange::AddTodo { todo } => Command::AddTodo { todo },
            PlanChange::Supersede {
                todo,
                reason,
                replacement,
            } => Command::Supersede {
                todo,
                reason,
                replacement,
                grant_reason: None,
            },
            PlanChange::Defer { todo, until } => Command::Defer {
                todo,
                until,
                grant_reason: None,
            },
            PlanChange::Block { todo, reason } => Command::Block {
                todo,
                reason,
                grant_reason: None,
            },
            PlanChange::Unblock { todo } => Command::Unblock {
                todo,
                grant_reason: None,
            },
            PlanChange::OpenGate { gate } => Command::OpenGate { gate },
            PlanChange::DeclareClosure { reason } => Command::DeclareClosure { reason },
        }
    }
}
