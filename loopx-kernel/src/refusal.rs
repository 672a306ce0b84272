//! Refusals: why a command was not accepted. One enum, a stable code per variant, and a message
//! that says what to do. A refused command changes nothing and charges nothing.

use serde::Serialize;

use crate::actor::Actor;
use crate::budget::Dimension;
use crate::gate::GateState;
use crate::ids::{
    AgentId, CheckId, DecisionScope, GateId, GoalId, ObligationId, PersonId, SourceId, TodoId,
    TurnId,
};
use crate::time::{Duration, Timestamp};

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "code", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    /// The goal already exists.
    #[error("goal `{goal}` already exists; pick another id or amend the existing goal")]
    GoalExists {
        /// The goal the command names.
        goal: GoalId,
    },
    /// The command needs an existing goal.
    #[error("no such goal; create it first with `create_goal`")]
    UnknownGoal,
    /// The goal was abandoned.
    #[error("the goal was abandoned; only settling or releasing turns in flight is still accepted")]
    GoalAbandoned,
    /// The todo does not exist.
    #[error("no todo `{todo}` in this goal; list the todos to find its id")]
    UnknownTodo {
        /// The todo the refused command named.
        todo: TodoId,
    },
    /// The gate does not exist.
    #[error("no gate `{gate}` in this goal; list the gates to find its id")]
    UnknownGate {
        /// The gate the refused command named.
        gate: GateId,
    },
    /// The obligation does not exist.
    #[error("no obligation `{obligation}` in this goal")]
    UnknownObligation {
        /// The obligation the refused command named.
        obligation: ObligationId,
    },
    /// Something referenced by id does not exist.
    #[error("{kind} `{id}` does not exist in this goal")]
    UnknownReference {
        /// What kind of thing.
        kind: &'static str,
        /// Its id.
        id: String,
    },
    /// The id is taken.
    #[error("{kind} `{id}` already exists in this goal; ids are never reused")]
    DuplicateId {
        /// What kind of thing.
        kind: &'static str,
        /// The id already taken.
        id: String,
    },
    /// A field is malformed.
    #[error("invalid {field}: {problem}")]
    InvalidInput {
        /// The command field at fault, by its JSON name.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The revision the command was written against is no longer current.
    #[error(
        "stale revision: the command expected revision {expected} but the goal is at {current}; reload and retry"
    )]
    StaleRevision {
        /// What the command expected.
        expected: u64,
        /// What it is.
        current: u64,
    },
    /// The lease epoch presented is not the current one: the lease was taken over or handed off.
    #[error(
        "stale lease epoch {presented} on todo `{todo}` (current {current}): this executor lost the lease; stop and ask for the next decision"
    )]
    StaleLeaseEpoch {
        /// The todo the refused command named.
        todo: TodoId,
        /// The epoch presented.
        presented: u64,
        /// The current epoch.
        current: u64,
    },
    /// Another agent holds a live lease.
    #[error("todo `{todo}` is leased by `{holder}` until {until}; wait or work on something else")]
    LeaseHeld {
        /// The todo the refused command named.
        todo: TodoId,
        /// The agent holding the live lease.
        holder: AgentId,
        /// Its expiry.
        until: Timestamp,
    },
    /// The lease has expired or was released.
    #[error("no live lease on todo `{todo}`: it expired or was released; claim it again")]
    NoLiveLease {
        /// The todo the refused command named.
        todo: TodoId,
    },
    /// The actor is not the lease holder.
    #[error(
        "`{actor}` does not hold the lease on todo `{todo}`; only the holder renews, settles or releases it: ask for the next decision"
    )]
    NotLeaseHolder {
        /// The todo the refused command named.
        todo: TodoId,
        /// The actor that issued the refused command.
        actor: Actor,
    },
    /// A turn is already in flight under this lease.
    #[error("turn `{turn}` is already in flight on todo `{todo}`; settle or release it first")]
    TurnInFlight {
        /// The todo the refused command named.
        todo: TodoId,
        /// The turn the refused command named.
        turn: TurnId,
    },
    /// No turn was begun under this lease.
    #[error(
        "turn `{turn}` was not begun on todo `{todo}` under this lease; begin a turn before settling"
    )]
    TurnNotBegun {
        /// The todo the refused command named.
        todo: TodoId,
        /// The turn presented.
        turn: TurnId,
    },
    /// The lease the turn ran under has ended, and with it the turn (settled or cancelled): a
    /// turn is charged at most once.
    #[error(
        "turn `{turn}` is over: the lease it ran under has ended, and a turn settles and is charged once"
    )]
    TurnAlreadyUsed {
        /// The turn the refused command named.
        turn: TurnId,
    },
    /// The budget cannot admit the request.
    #[error("budget exhausted on {dimension} ({scope}); raise the limit or wait")]
    BudgetExhausted {
        /// The budget dimension that cannot admit it.
        dimension: Dimension,
        /// `goal` or the todo id.
        scope: String,
    },
    /// A pending gate covers the todo.
    #[error(
        "gate `{gate}` blocks todo `{todo}`; wait for its answer or work on something independent"
    )]
    GateBlocks {
        /// The todo the refused command named.
        todo: TodoId,
        /// The gate the refused command named.
        gate: GateId,
    },
    /// The todo needs a decision no resolved gate has settled.
    #[error(
        "todo `{todo}` needs decision `{scope}` and no gate has resolved it; open a gate for it"
    )]
    DecisionMissing {
        /// The todo the refused command named.
        todo: TodoId,
        /// The decision scope.
        scope: DecisionScope,
    },
    /// The gate is not pending.
    #[error("gate `{gate}` is {}, no longer pending; read its outcome and ask for the next decision", gate_state(*.state))]
    GateNotPending {
        /// The gate the refused command named.
        gate: GateId,
        /// Its state.
        state: GateState,
    },
    /// Only the gate's owner may answer it.
    #[error("only `{owner}` may answer gate `{gate}`")]
    NotGateOwner {
        /// The gate the refused command named.
        gate: GateId,
        /// Its owner.
        owner: Actor,
    },
    /// The relaying provider's login is not mapped to the gate's owner: someone else wrote
    /// the answer, or the owner's login was never mapped.
    #[error(
        "`{provider}` login `{login}` does not speak for `{owner}`, who owns gate `{gate}`; only the gate's owner answers it, and the goal owner maps their login with `amend_goal` (`map_login`)"
    )]
    RelayNotGateOwner {
        /// The gate the refused answer named.
        gate: GateId,
        /// The provider that relayed it.
        provider: SourceId,
        /// The login that wrote it.
        login: String,
        /// The gate's owner.
        owner: Actor,
    },
    /// A gate's notice goes to its owner's login at the provider, and the goal owner mapped
    /// none (or the owner is not a person).
    #[error(
        "gate `{gate}`'s owner `{owner}` has no `{provider}` login mapped; the goal owner maps it with `amend_goal` (`map_login`)"
    )]
    GateNoticeUnmapped {
        /// The gate the refused notice named.
        gate: GateId,
        /// The provider that would deliver it.
        provider: SourceId,
        /// The gate's owner.
        owner: Actor,
    },
    /// A gate has one notice, ever, and this one was intended already.
    #[error("gate `{gate}`'s notice was intended already; a gate is noticed once")]
    GateNoticeExists {
        /// The gate.
        gate: GateId,
    },
    /// There is no pending notice of this gate for this provider to record.
    #[error("gate `{gate}` has no pending notice intended by this provider")]
    GateNoticeNotPending {
        /// The gate.
        gate: GateId,
    },
    /// A login mapped in an amendment does not read as one.
    #[error("not a `{provider}` login: {problem}")]
    LoginMalformed {
        /// The provider the login was given for.
        provider: SourceId,
        /// What is wrong with it.
        problem: String,
    },
    /// The login is mapped to another person already.
    #[error(
        "`{provider}` login `{login}` already speaks for `person:{person}`; withdraw that mapping first (`unmap_login`)"
    )]
    LoginTaken {
        /// The provider.
        provider: SourceId,
        /// The login.
        login: String,
        /// Whom it is mapped to.
        person: PersonId,
    },
    /// Only the goal owner may do this.
    #[error("only the goal owner `{owner}` may do this")]
    NotGoalOwner {
        /// Who may issue it instead.
        owner: Actor,
    },
    /// The agent is not registered with the goal.
    #[error(
        "agent `{agent}` is not registered with this goal; the owner can register it with an amendment"
    )]
    UnregisteredAgent {
        /// The agent the command names or acts as.
        agent: AgentId,
    },
    /// The agent is excluded from the todo.
    #[error(
        "agent `{agent}` may never take todo `{todo}` (excluded by name, or the author of the work it reviews); ask for the next decision"
    )]
    ExcludedAgent {
        /// The agent the command names or acts as.
        agent: AgentId,
        /// The todo the refused command named.
        todo: TodoId,
    },
    /// This kind of actor may not issue this command.
    #[error("{actor} may not issue `{command}`")]
    ActorNotPermitted {
        /// The actor that issued the refused command.
        actor: Actor,
        /// The command.
        command: &'static str,
    },
    /// Acting on another agent's todo needs a grant.
    #[error(
        "todo `{todo}` belongs to `{owner}`; acting on it needs a `{action}` grant from the goal owner"
    )]
    GrantRequired {
        /// The todo the refused command named.
        todo: TodoId,
        /// Its agent.
        owner: AgentId,
        /// The grant needed.
        action: &'static str,
    },
    /// A grant was used without a reason.
    #[error("acting on another agent's todo under a grant needs a reason; pass grant_reason")]
    GrantReasonRequired,
    /// The todo is not in a state this command applies to.
    #[error("todo `{todo}` is {status}; this command needs it {needed}")]
    TodoNotOpen {
        /// The todo the refused command named.
        todo: TodoId,
        /// Its status.
        status: &'static str,
        /// What the command needs.
        needed: &'static str,
    },
    /// Dependencies are not done.
    #[error("todo `{todo}` waits on unfinished dependencies: {}; finish those first", todo_list(.pending))]
    DependenciesUnmet {
        /// The todo the refused command named.
        todo: TodoId,
        /// The unfinished dependencies.
        pending: Vec<TodoId>,
    },
    /// A deferred todo's resume condition does not hold yet.
    #[error("todo `{todo}` is deferred and its resume condition does not hold yet")]
    ResumeConditionUnmet {
        /// The todo the refused command named.
        todo: TodoId,
    },
    /// A monitor is not due.
    #[error("monitor `{todo}` is not due until {due}; polling early spends for nothing")]
    MonitorNotDue {
        /// The monitor.
        todo: TodoId,
        /// When it is due.
        due: Timestamp,
    },
    /// The todo's last turns failed and its retry pause has not passed.
    #[error(
        "todo `{todo}` backs off after {failures} failed turn(s) in a row and may be claimed from {until}; retrying sooner would fail the same way"
    )]
    BackingOff {
        /// The todo the refused command named.
        todo: TodoId,
        /// Failed turns in a row.
        failures: u32,
        /// When it may be claimed again.
        until: Timestamp,
    },
    /// The validator is the executor.
    #[error("the validator `{validator}` is the executor; a turn needs an independent verdict")]
    ValidationNotIndependent {
        /// The validator named in the verdict: the executing agent itself.
        validator: Actor,
    },
    /// Completion needs a passing verdict.
    #[error(
        "todo `{todo}` cannot complete on a `{verdict}` verdict; keep it open, defer or block it"
    )]
    ValidationInsufficient {
        /// The todo the refused command named.
        todo: TodoId,
        /// The verdict.
        verdict: &'static str,
    },
    /// The continuation is malformed.
    #[error("invalid continuation: {problem}")]
    InvalidContinuation {
        /// What is wrong.
        problem: String,
    },
    /// The write scope overlaps a live lease.
    #[error(
        "todo `{todo}` writes where todo `{other}` (leased by `{holder}`) writes; wait for it or narrow the scope"
    )]
    WriteScopeConflict {
        /// The todo the refused command named.
        todo: TodoId,
        /// The conflicting todo.
        other: TodoId,
        /// Its holder.
        holder: AgentId,
    },
    /// Another agent's live lease uses this checkout.
    #[error(
        "checkout `{top_level}` is in use by `{other}`; create an independent worktree (git worktree add) and claim from there"
    )]
    WorkspaceShared {
        /// The checkout.
        top_level: String,
        /// The other agent.
        other: AgentId,
    },
    /// A writing todo needs a workspace.
    #[error(
        "todo `{todo}` writes a repository; claim it with the workspace identity (top level and common dir)"
    )]
    WorkspaceRequired {
        /// The todo the refused command named.
        todo: TodoId,
    },
    /// Nothing visible would change.
    #[error("nothing visible would change; {what}")]
    NoVisibleChange {
        /// What was expected.
        what: String,
    },
    /// The outcome of an expired turn is unknown.
    #[error(
        "the outcome of turn `{turn}` on todo `{todo}` is unknown (its lease expired mid-turn); read back the effect and resolve it before anyone re-runs it"
    )]
    OutcomeUnknown {
        /// The todo the refused command named.
        todo: TodoId,
        /// The turn the refused command named.
        turn: TurnId,
    },
    /// The obligation was already discharged.
    #[error("obligation `{obligation}` was already discharged")]
    ObligationClosed {
        /// The obligation the refused command named.
        obligation: ObligationId,
    },
    /// The goal is signed and the command came without a signature.
    #[error(
        "the goal requires signed commands and `{actor}` sent none; sign with the actor's key (`loopx key new {actor}`, registered by the owner with `loopx goal amend --register-key`)"
    )]
    SignatureMissing {
        /// The actor the command claims.
        actor: Actor,
    },
    /// No key is registered for the actor.
    #[error(
        "no key is registered for `{actor}` on this goal; its owner registers one with `loopx goal amend --register-key {actor}=KEY`"
    )]
    KeyUnregistered {
        /// The actor the command claims.
        actor: Actor,
    },
    /// The signature verifies under none of the actor's registered keys.
    #[error(
        "the signature is not `{actor}`'s over this goal, operation and command; sign the command as sent, with a key registered for `{actor}`"
    )]
    SignatureInvalid {
        /// The actor the command claims.
        actor: Actor,
    },
    /// The command's time is ahead of the store's clock by more than the goal's clock skew:
    /// the store wrote nothing.
    #[error(
        "the command's time {at} is ahead of the store's clock ({store_time}) by more than the goal's clock skew ({skew}); nothing changed: issue it at the current time (fix this host's clock), or move time only on a store created with a test clock"
    )]
    ClockAhead {
        /// The time the command was to be committed at.
        at: Timestamp,
        /// The store's clock when it refused the commit.
        store_time: Timestamp,
        /// The goal's `clock_skew`.
        skew: Duration,
    },
    /// The goal is signed and the settlement's verdict carries no signature.
    #[error(
        "the goal requires signed verdicts and the verdict of `{validator}` carries none; the validator signs it (`loopx verdict --as {validator}`) and the settlement carries it (`--verdict FILE` on `loopx settle` or `loopx resolve-outcome`)"
    )]
    VerdictUnsigned {
        /// The validator the verdict names.
        validator: Actor,
    },
    /// The verdict is signed by an agent's key, not by its validator's.
    #[error(
        "the verdict naming `{validator}` is signed by `{agent}` itself; an agent carries the verdict its validator signed, it cannot make one"
    )]
    VerdictSelfSigned {
        /// The validator the verdict names.
        validator: Actor,
        /// The agent whose key signed it.
        agent: Actor,
    },
    /// The goal registers no key for the verdict's validator.
    #[error(
        "`{validator}` is not a validator of this goal (no key is registered for it); its owner registers one with `loopx goal amend --register-key {validator}=KEY`"
    )]
    ValidatorUnregistered {
        /// The validator the verdict names.
        validator: Actor,
    },
    /// The verdict vouches for evidence of a check its validator is not registered for.
    #[error(
        "`{validator}` is not registered to establish evidence of check `{check}`; its owner registers it with `loopx goal amend --register-validator {check}={validator}`, or the evidence comes from a validator that is"
    )]
    ValidatorNotRegisteredForCheck {
        /// The validator the verdict names.
        validator: Actor,
        /// The check of the evidence it vouches for.
        check: CheckId,
    },
    /// The verdict's signature verifies under none of its validator's registered keys.
    #[error(
        "the verdict's signature is not `{validator}`'s over this goal, todo, turn, epoch, outcome and evidence; carry the verdict exactly as the validator signed it"
    )]
    VerdictSignatureInvalid {
        /// The validator the verdict names.
        validator: Actor,
    },
}

fn gate_state(state: GateState) -> &'static str {
    match state {
        GateState::Pending => "pending",
        GateState::Overdue => "overdue",
        GateState::Resolved => "resolved",
        GateState::Rejected => "rejected",
        GateState::Expired => "expired",
        GateState::Withdrawn => "withdrawn",
    }
}

fn todo_list(todos: &[TodoId]) -> String {
    todos
        .iter()
        .map(|t| format!("`{t}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Refusal {
    /// The stable machine-readable code (`stale_revision`, `stale_lease_epoch`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::GoalExists { .. } => "goal_exists",
            Refusal::UnknownGoal => "unknown_goal",
            Refusal::GoalAbandoned => "goal_abandoned",
            Refusal::UnknownTodo { .. } => "unknown_todo",
            Refusal::UnknownGate { .. } => "unknown_gate",
            Refusal::UnknownObligation { .. } => "unknown_obligation",
            Refusal::UnknownReference { .. } => "unknown_reference",
            Refusal::DuplicateId { .. } => "duplicate_id",
            Refusal::InvalidInput { .. } => "invalid_input",
            Refusal::StaleRevision { .. } => "stale_revision",
            Refusal::StaleLeaseEpoch { .. } => "stale_lease_epoch",
            Refusal::LeaseHeld { .. } => "lease_held",
            Refusal::NoLiveLease { .. } => "no_live_lease",
            Refusal::NotLeaseHolder { .. } => "not_lease_holder",
            Refusal::TurnInFlight { .. } => "turn_in_flight",
            Refusal::TurnNotBegun { .. } => "turn_not_begun",
            Refusal::TurnAlreadyUsed { .. } => "turn_already_used",
            Refusal::BudgetExhausted { .. } => "budget_exhausted",
            Refusal::GateBlocks { .. } => "gate_blocks",
            Refusal::DecisionMissing { .. } => "decision_missing",
            Refusal::GateNotPending { .. } => "gate_not_pending",
            Refusal::NotGateOwner { .. } => "not_gate_owner",
            Refusal::NotGoalOwner { .. } => "not_goal_owner",
            Refusal::RelayNotGateOwner { .. } => "relay_not_gate_owner",
            Refusal::GateNoticeUnmapped { .. } => "gate_notice_unmapped",
            Refusal::GateNoticeExists { .. } => "gate_notice_exists",
            Refusal::GateNoticeNotPending { .. } => "gate_notice_not_pending",
            Refusal::LoginMalformed { .. } => "login_malformed",
            Refusal::LoginTaken { .. } => "login_taken",
            Refusal::UnregisteredAgent { .. } => "unregistered_agent",
            Refusal::ExcludedAgent { .. } => "excluded_agent",
            Refusal::ActorNotPermitted { .. } => "actor_not_permitted",
            Refusal::GrantRequired { .. } => "grant_required",
            Refusal::GrantReasonRequired => "grant_reason_required",
            Refusal::TodoNotOpen { .. } => "todo_not_open",
            Refusal::DependenciesUnmet { .. } => "dependencies_unmet",
            Refusal::ResumeConditionUnmet { .. } => "resume_condition_unmet",
            Refusal::MonitorNotDue { .. } => "monitor_not_due",
            Refusal::BackingOff { .. } => "backing_off",
            Refusal::ValidationNotIndependent { .. } => "validation_not_independent",
            Refusal::ValidationInsufficient { .. } => "validation_insufficient",
            Refusal::InvalidContinuation { .. } => "invalid_continuation",
            Refusal::WriteScopeConflict { .. } => "write_scope_conflict",
            Refusal::WorkspaceShared { .. } => "workspace_shared",
            Refusal::WorkspaceRequired { .. } => "workspace_required",
            Refusal::NoVisibleChange { .. } => "no_visible_change",
            Refusal::OutcomeUnknown { .. } => "outcome_unknown",
            Refusal::ObligationClosed { .. } => "obligation_closed",
            Refusal::SignatureMissing { .. } => "signature_missing",
            Refusal::KeyUnregistered { .. } => "key_unregistered",
            Refusal::SignatureInvalid { .. } => "signature_invalid",
            Refusal::ClockAhead { .. } => "clock_ahead",
            Refusal::VerdictUnsigned { .. } => "verdict_unsigned",
            Refusal::VerdictSelfSigned { .. } => "verdict_self_signed",
            Refusal::ValidatorUnregistered { .. } => "validator_unregistered",
            Refusal::ValidatorNotRegisteredForCheck { .. } => "validator_not_registered_for_check",
            Refusal::VerdictSignatureInvalid { .. } => "verdict_signature_invalid",
        }
    }

    /// Every code, for documentation and for tests that each one is exercised.
    pub const CODES: &'static [&'static str] = &[
        "goal_exists",
        "unknown_goal",
        "goal_abandoned",
        "unknown_todo",
        "unknown_gate",
        "unknown_obligation",
        "unknown_reference",
        "duplicate_id",
        "invalid_input",
        "stale_revision",
        "stale_lease_epoch",
        "lease_held",
        "no_live_lease",
        "not_lease_holder",
        "turn_in_flight",
        "turn_not_begun",
        "turn_already_used",
        "budget_exhausted",
        "gate_blocks",
        "decision_missing",
        "gate_not_pending",
        "not_gate_owner",
        "not_goal_owner",
        "relay_not_gate_owner",
        "gate_notice_unmapped",
        "gate_notice_exists",
        "gate_notice_not_pending",
        "login_malformed",
        "login_taken",
        "unregistered_agent",
        "excluded_agent",
        "actor_not_permitted",
        "grant_required",
        "grant_reason_required",
        "todo_not_open",
        "dependencies_unmet",
        "resume_condition_unmet",
        "monitor_not_due",
        "backing_off",
        "validation_not_independent",
        "validation_insufficient",
        "invalid_continuation",
        "write_scope_conflict",
        "workspace_shared",
        "workspace_required",
        "no_visible_change",
        "outcome_unknown",
        "obligation_closed",
        "signature_missing",
        "key_unregistered",
        "signature_invalid",
        "clock_ahead",
        "verdict_unsigned",
        "verdict_self_signed",
        "validator_unregistered",
        "validator_not_registered_for_check",
        "verdict_signature_invalid",
    ];
}
