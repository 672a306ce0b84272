//! The tools' arguments: one struct per tool, each the verb's arguments as the CLI takes them,
//! in the kernel's own types (their schemas generated from them). Field docs become the
//! schemas' descriptions, which a runtime sends with every request: they stay short.

use loopx_kernel::{
    AgentId, Amounts, Duration, GoalId, HandoffNote, NewEvidence, NewGate, ObligationId,
    Observation, OutcomeResolution, PlanChange, ResumeCondition, Settlement, TodoId, TurnId,
    Workspace,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// `brief`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BriefInput {
    /// Absent: across every goal.
    #[serde(default)]
    pub goal: Option<GoalId>,
    /// Default: the acting agent.
    #[serde(default)]
    pub agent: Option<AgentId>,
}

/// `next`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NextInput {
    /// The goal.
    pub goal: GoalId,
    /// Default: the acting agent.
    #[serde(default)]
    pub agent: Option<AgentId>,
}

/// `ready`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadyInput {
    /// Default: the acting agent.
    #[serde(default)]
    pub agent: Option<AgentId>,
}

/// `status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusInput {
    /// The goal.
    pub goal: GoalId,
}

/// `claim`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// Lease time-to-live; default: the goal policy's.
    #[serde(default)]
    pub ttl: Option<Duration>,
    /// Required for todos that write (`git rev-parse`).
    #[serde(default)]
    pub workspace: Option<Workspace>,
    /// Why you may take another agent's todo (under a grant).
    #[serde(default)]
    pub grant_reason: Option<String>,
}

/// `begin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BeginInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// The lease epoch `claim` answered.
    pub epoch: u64,
    /// A new turn id; its charge is bound to it.
    pub turn: TurnId,
    /// What to reserve; default: the policy's.
    #[serde(default)]
    pub reserve: Option<Amounts>,
}

/// `renew`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// The held epoch.
    pub epoch: u64,
    /// New time-to-live from now; default: the policy's.
    #[serde(default)]
    pub ttl: Option<Duration>,
}

/// `release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// The held epoch.
    pub epoch: u64,
}

/// `settle`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleInput {
    /// The goal.
    pub goal: GoalId,
    /// On a signed goal the verdict and evidence are those the validator signed.
    pub settlement: Settlement,
}

/// `handoff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo whose live lease moves.
    pub todo: TodoId,
    /// The held epoch; the receiver gets the next.
    pub epoch: u64,
    /// The receiving agent.
    pub to: AgentId,
    /// For the receiver.
    pub note: HandoffNote,
    /// Why you may hand off another agent's lease.
    #[serde(default)]
    pub grant_reason: Option<String>,
}

/// `block`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// The blocking fact, for whoever unblocks it.
    pub reason: String,
    /// Why you may block another agent's todo.
    #[serde(default)]
    pub grant_reason: Option<String>,
}

/// `defer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeferInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo.
    pub todo: TodoId,
    /// The recorded fact that lets it resume.
    pub until: ResumeCondition,
    /// Why you may defer another agent's todo.
    #[serde(default)]
    pub grant_reason: Option<String>,
}

/// `resolve_outcome`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveOutcomeInput {
    /// The goal.
    pub goal: GoalId,
    /// The todo whose expired lease left the outcome unknown.
    pub todo: TodoId,
    /// The turn that was in flight.
    pub turn: TurnId,
    /// What reading back showed.
    pub resolution: OutcomeResolution,
    /// Why you may resolve another agent's turn.
    #[serde(default)]
    pub grant_reason: Option<String>,
}

/// `discharge`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DischargeInput {
    /// The goal.
    pub goal: GoalId,
    /// The open obligation.
    pub obligation: ObligationId,
    /// The plan changes that answer it (at least one), in one commit.
    pub changes: Vec<PlanChange>,
}

/// `gate_open`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateOpenInput {
    /// The goal.
    pub goal: GoalId,
    /// The question, its owner and what it blocks.
    pub gate: NewGate,
}

/// `evidence_add`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceAddInput {
    /// The goal.
    pub goal: GoalId,
    /// Evidence established outside a turn.
    pub evidence: NewEvidence,
}

/// `observe`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObserveInput {
    /// The goal.
    pub goal: GoalId,
    /// An unchanged fingerprint is a no-op.
    pub observation: Observation,
}
