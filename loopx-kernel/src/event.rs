//! Events: the facts a goal's state is folded from. Events are the durable wire format; their
//! JSON shape is stable and versioned by [`SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{GateAnswer, Verdict};
use crate::evidence::{NewEvidence, Observation};
use crate::gate::NewGate;
use crate::goal::{Amendment, GoalSpec};
use crate::ids::Fingerprint;
use crate::ids::{AgentId, EffectId, GateId, ObligationId, PersonId, SourceId, TodoId, TurnId};
use crate::login::Relay;
use crate::obligation::{ObligationCause, ObligationKind};
use crate::outbox::{EffectIntent, EffectOutcome};
use crate::retire::Retirement;
use crate::retry::TurnResult;
use crate::time::Timestamp;
use crate::todo::{ContinuationRecord, HandoffNote, NewTodo, ResumeCondition, Workspace};

/// The schema version of events and snapshots this kernel writes. Readers refuse newer ones
/// and fold older ones as they were meant:
///
/// - 1: the first.
/// - 2: a `turn_begun` starts a run the outbox keys by its todo and epoch (the turn in flight
///   records the epoch it began under; see [`crate::outbox::idempotency_key`]). A turn begun
///   under schema 1 keeps the keys its effects were intended with, whether its state is folded
///   from its events or read from a snapshot.
/// - 3: a `retired` event drops inert work from the state (see [`crate::retire`]); builds
///   before it report such a history as newer, not as damage.
pub const SCHEMA_VERSION: u32 = 3;

/// The first schema whose `turn_begun` records the epoch its run began under.
pub(crate) const RUNS_KEYED_BY_EPOCH: u32 = 2;

/// An event as stored: its position in the goal's history, who caused it and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedEvent {
    /// The schema version it was written with.
    pub schema: u32,
    /// The goal revision this event produced (1 for `goal_created`), strictly increasing.
    pub revision: u64,
    /// When the command was accepted.
    pub at: Timestamp,
    /// Who issued the command.
    pub actor: Actor,
    /// What happened.
    pub event: Event,
}

/// One fact about a goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// The goal was created.
    GoalCreated {
        /// Everything the goal was created with.
        spec: GoalSpec,
    },
    /// The owner amended the goal.
    GoalAmended {
        /// The new goal revision (the count of amendments so far).
        goal_revision: u64,
        /// The amendments, applied in order.
        amendments: Vec<Amendment>,
    },
    /// The owner abandoned the goal.
    GoalAbandoned {
        /// Why, in the words given with the command.
        reason: String,
    },
    /// Someone declared the intent to close the goal.
    ClosureDeclared {
        /// Why, in the words given with the command.
        reason: String,
    },
    /// A todo was added.
    TodoAdded {
        /// The todo, with any exclusions the kernel added.
        todo: NewTodo,
    },
    /// A todo's assignee changed.
    TodoReassigned {
        /// The todo it happened to.
        todo: TodoId,
        /// The new assignee.
        to: Option<AgentId>,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A todo was deferred.
    TodoDeferred {
        /// The todo it happened to.
        todo: TodoId,
        /// Until when.
        until: ResumeCondition,
        /// The observation fingerprint at deferral, for change conditions.
        baseline: Option<Fingerprint>,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A todo was blocked.
    TodoBlocked {
        /// The todo it happened to.
        todo: TodoId,
        /// Why, in the words given with the command.
        reason: String,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A todo was unblocked (or a deferred one resumed early).
    TodoUnblocked {
        /// The todo it happened to.
        todo: TodoId,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A todo was superseded.
    TodoSuperseded {
        /// The todo it happened to.
        todo: TodoId,
        /// Why, in the words given with the command.
        reason: String,
        /// Its replacement.
        replacement: Option<TodoId>,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A lease was acquired (or an expired one taken over).
    LeaseAcquired {
        /// The todo it happened to.
        todo: TodoId,
        /// The agent that holds the lease from now on.
        holder: AgentId,
        /// The new epoch, one more than any the todo was given before.
        epoch: u64,
        /// Expiry.
        expires_at: Timestamp,
        /// The holder's workspace.
        workspace: Option<Workspace>,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A lease was extended.
    LeaseRenewed {
        /// The todo it happened to.
        todo: TodoId,
        /// The lease epoch it happened under: the current one when recorded.
        epoch: u64,
        /// New expiry.
        expires_at: Timestamp,
    },
    /// A lease was given up; a begun turn's reservation was returned.
    LeaseReleased {
        /// The todo it happened to.
        todo: TodoId,
        /// The lease epoch it happened under: the current one when recorded.
        epoch: u64,
    },
    /// A lease moved to another agent under a new epoch.
    LeaseHandedOff {
        /// The todo it happened to.
        todo: TodoId,
        /// The agent whose lease ends here (its epoch dies): the live holder, or, for work no
        /// live lease held, the last holder or the assignee; none for work nobody had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<AgentId>,
        /// The agent the lease moves to.
        to: AgentId,
        /// The new epoch, one more than any the todo was given before.
        epoch: u64,
        /// New expiry.
        expires_at: Timestamp,
        /// The receiver's last reported workspace.
        workspace: Option<Workspace>,
        /// What the receiver needs: the next action, the stop condition, the evidence.
        note: HandoffNote,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// A turn was prepared and its budget reserved.
    TurnBegun {
        /// The todo it happened to.
        todo: TodoId,
        /// The lease epoch it happened under: the current one when recorded.
        epoch: u64,
        /// The turn id: it names the one turn its lease runs.
        turn: TurnId,
        /// What the turn reserved, returned or charged at settlement.
        reserved: Amounts,
    },
    /// Another session of the holder agent took its turn in flight over: the lease and the turn
    /// (with its reservation) stay, under a new epoch, and the old epoch dies.
    TurnTakenOver {
        /// The todo it happened to.
        todo: TodoId,
        /// The turn in flight, unchanged.
        turn: TurnId,
        /// The epoch that dies here.
        from_epoch: u64,
        /// The new epoch, one more than any the todo was given before.
        epoch: u64,
        /// New expiry.
        expires_at: Timestamp,
    },
    /// A turn was settled: verdict, evidence, transition, charge and lease release, as one fact.
    TurnSettled {
        /// The todo it happened to.
        todo: TodoId,
        /// The lease epoch it happened under: the current one when recorded.
        epoch: u64,
        /// The turn id: it names the one turn its lease runs.
        turn: TurnId,
        /// The independent verdict the settlement rests on.
        verdict: Verdict,
        /// Evidence recorded.
        evidence: Vec<NewEvidence>,
        /// Observations that changed something.
        observations: Vec<Observation>,
        /// The todo's transition.
        transition: SettledTransition,
        /// What was charged (zero for an unchanged monitor poll): all the turn used, even
        /// beyond its reservation.
        charged: Amounts,
        /// What it used beyond its reservation, per dimension (`charged` minus the reservation,
        /// at zero where it stayed within); left out of the JSON when zero.
        #[serde(default, skip_serializing_if = "crate::is_default")]
        overrun: Amounts,
        /// What the turn came to, as the kernel classified it; absent on events written before
        /// turns were classified, which count towards no streak.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<TurnResult>,
    },
    /// A readback showed that a turn with an unknown outcome had no effect.
    OutcomeAbsent {
        /// The todo it happened to.
        todo: TodoId,
        /// The turn id: it names the one turn its lease runs.
        turn: TurnId,
        /// What the readback showed.
        note: String,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// The intent of an external effect committed under a live lease (the outbox).
    EffectIntended {
        /// The todo whose lease authorised it.
        todo: TodoId,
        /// The lease epoch it happened under: the current one when recorded.
        epoch: u64,
        /// The lease's holder, who intended it.
        holder: AgentId,
        /// The turn in flight.
        turn: TurnId,
        /// What is to be performed.
        effect: EffectIntent,
    },
    /// What became of an intended effect was recorded; it is pending no more.
    EffectRecorded {
        /// The effect.
        effect: EffectId,
        /// The todo whose lease authorised it.
        todo: TodoId,
        /// Performed, or absent for good.
        outcome: EffectOutcome,
        /// What the readback showed, in words.
        note: Option<String>,
        /// The recorded reason when a grant was used.
        grant_reason: Option<String>,
    },
    /// The intent of a pending gate's one notice to its owner committed (the outbox, fenced by
    /// the gate rather than a lease).
    GateNoticeIntended {
        /// The gate the notice is about.
        gate: GateId,
        /// The provider that intended it.
        provider: SourceId,
        /// What is to be performed.
        effect: EffectIntent,
    },
    /// What became of a gate's notice was recorded; it is pending no more.
    GateNoticeRecorded {
        /// The gate whose notice it is.
        gate: GateId,
        /// Performed, or absent for good.
        outcome: EffectOutcome,
        /// What the readback showed, in words.
        note: Option<String>,
    },
    /// A gate was opened.
    GateOpened {
        /// The gate it happened to.
        gate: NewGate,
    },
    /// A gate was resolved.
    GateResolved {
        /// The gate it happened to.
        gate: GateId,
        /// The owner's answer, in their words.
        answer: String,
    },
    /// A gate was rejected.
    GateRejected {
        /// The gate it happened to.
        gate: GateId,
        /// Why, in the words given with the command.
        reason: String,
    },
    /// A gate was answered on its owner's behalf, relayed by the event's actor (a provider)
    /// from the owner's mapped login there.
    GateAnswerRelayed {
        /// The gate it happened to.
        gate: GateId,
        /// The answer, in the owner's words.
        answer: GateAnswer,
        /// The gate's owner, for whom the login speaks.
        person: PersonId,
        /// The login that wrote it and the provider's references to the message.
        relay: Relay,
    },
    /// A gate was withdrawn.
    GateWithdrawn {
        /// The gate it happened to.
        gate: GateId,
        /// Why, in the words given with the command.
        reason: String,
    },
    /// An observation with a new fingerprint was recorded.
    ObservationRecorded {
        /// The fact, with a fingerprint new to its stream.
        observation: Observation,
    },
    /// Evidence was recorded outside a turn.
    EvidenceRecorded {
        /// The evidence, bound to the revision it was shown at.
        evidence: NewEvidence,
    },
    /// An obligation was raised.
    ObligationRaised {
        /// Its id, new to the goal.
        id: ObligationId,
        /// Replan or repair.
        kind: ObligationKind,
        /// Why.
        cause: ObligationCause,
        /// What to look at.
        detail: String,
        /// Whose line of work.
        owner: Option<AgentId>,
    },
    /// An obligation was discharged by the changes recorded just before it in the same commit.
    ObligationDischarged {
        /// The obligation discharged.
        obligation: ObligationId,
    },
    /// An agent reported its workspace.
    WorkspaceReported {
        /// The agent that reported it.
        agent: AgentId,
        /// Where its turns run, as the git provider reads it.
        workspace: Workspace,
    },
    /// Inert work left the state (see [`crate::retire`]); the events that made it stay in
    /// history.
    Retired(Retirement),
    /// A history was imported although some of its commits could not be verified against the
    /// goal's registered keys, and its importer (the event's actor) accepted them as they are.
    /// Only an import writes it, at the end of the history it took; no command makes it, so a
    /// history cannot clear what it says.
    HistoryImported {
        /// The imported commits that verified.
        verified: u64,
        /// The imported commits that did not: without what they were made from, or not what
        /// their signed command makes.
        unverified: u64,
        /// The revision of the first commit that did not verify.
        first_unverified: u64,
    },
}

/// A settled turn's effect on its todo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SettledTransition {
    /// Completed.
    Complete {
        /// The one continuation the completion records.
        continuation: ContinuationRecord,
        /// Successor todos added with it.
        successors: Vec<NewTodo>,
    },
    /// Still open.
    KeepOpen,
    /// Deferred.
    Defer {
        /// Until when.
        until: ResumeCondition,
        /// Fingerprint at deferral.
        baseline: Option<Fingerprint>,
    },
    /// Blocked.
    Block {
        /// Why, in the words given with the command.
        reason: String,
    },
}

impl Event {
    /// A stable snake-case name for the event, as used in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Event::GoalCreated { .. } => "goal_created",
            Event::GoalAmended { .. } => "goal_amended",
            Event::GoalAbandoned { .. } => "goal_abandoned",
            Event::ClosureDeclared { .. } => "closure_declared",
            Event::TodoAdded { .. } => "todo_added",
            Event::TodoReassigned { .. } => "todo_reassigned",
            Event::TodoDeferred { .. } => "todo_deferred",
            Event::TodoBlocked { .. } => "todo_blocked",
            Event::TodoUnblocked { .. } => "todo_unblocked",
            Event::TodoSuperseded { .. } => "todo_superseded",
            Event::LeaseAcquired { .. } => "lease_acquired",
            Event::LeaseRenewed { .. } => "lease_renewed",
            Event::LeaseReleased { .. } => "lease_released",
            Event::LeaseHandedOff { .. } => "lease_handed_off",
            Event::TurnBegun { .. } => "turn_begun",
            Event::TurnTakenOver { .. } => "turn_taken_over",
            Event::TurnSettled { .. } => "turn_settled",
            Event::OutcomeAbsent { .. } => "outcome_absent",
            Event::EffectIntended { .. } => "effect_intended",
            Event::EffectRecorded { .. } => "effect_recorded",
            Event::GateNoticeIntended { .. } => "gate_notice_intended",
            Event::GateNoticeRecorded { .. } => "gate_notice_recorded",
            Event::GateOpened { .. } => "gate_opened",
            Event::GateResolved { .. } => "gate_resolved",
            Event::GateRejected { .. } => "gate_rejected",
            Event::GateAnswerRelayed { .. } => "gate_answer_relayed",
            Event::GateWithdrawn { .. } => "gate_withdrawn",
            Event::ObservationRecorded { .. } => "observation_recorded",
            Event::EvidenceRecorded { .. } => "evidence_recorded",
            Event::ObligationRaised { .. } => "obligation_raised",
            Event::ObligationDischarged { .. } => "obligation_discharged",
            Event::WorkspaceReported { .. } => "workspace_reported",
            Event::Retired(_) => "retired",
            Event::HistoryImported { .. } => "history_imported",
        }
    }
}
