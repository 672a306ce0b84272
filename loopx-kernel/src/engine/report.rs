//! What a step did, as plain data a host can log, show or serialise.

use serde::{Deserialize, Serialize};

use crate::budget::Amounts;
use crate::refusal::Refusal;
use crate::seams::{ProviderError, UsageProblem};

use crate::command::VerdictOutcome;
use crate::decide::Decision;
use crate::ids::{GoalId, ObservationKey, SourceId, TodoId, TurnId};
use crate::retry::TurnResult;

/// The account of one [`Engine::step`](super::Engine::step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// The goal stepped.
    pub goal: GoalId,
    /// The goal revision after the step; a wait watches for commits past it.
    pub revision: u64,
    /// Observation streams whose new facts were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<ObservationKey>,
    /// Providers that failed to answer (the step goes on without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_errors: Vec<ProviderFailure>,
    /// Every capability proposal and whether the kernel accepted it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<ProposalOutcome>,
    /// The turn taken, if the decision was `continue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnOutcome>,
    /// What became of each external effect the step performed or read back (the outbox).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<super::EffectReport>,
    /// The decision after the step, for the engine's agent: what the host obeys next.
    pub decision: Decision,
}

impl StepReport {
    /// An empty report whose decision the step fills in.
    pub(super) fn new(goal: GoalId) -> Self {
        StepReport {
            goal,
            revision: 0,
            observed: Vec::new(),
            provider_errors: Vec::new(),
            proposals: Vec::new(),
            turn: None,
            effects: Vec::new(),
            decision: Decision::Wait {
                until: None,
                reasons: Vec::new(),
            },
        }
    }
}

/// A provider that failed to answer a watch's poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderFailure {
    /// The provider that failed.
    pub provider: SourceId,
    /// The stream it was asked for.
    pub key: ObservationKey,
    /// What failed; the next due poll asks again.
    pub error: ProviderError,
}

impl std::fmt::Display for ProviderFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.provider, self.key, self.error)
    }
}

/// A capability proposal as the engine submitted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProposalOutcome {
    /// The capability that proposed it, the command's actor.
    pub capability: SourceId,
    /// The command's name.
    pub command: String,
    /// What it is about (the todo, gate or obligation id), when it is about one thing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// True when it was judged after the step's turn (on what the turn changed), false when
    /// judged before deciding.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_turn: bool,
    /// Why the capability proposed it.
    pub rationale: String,
    /// The kernel's refusal when it refused it (its `code` says why, stably); `None` when it
    /// took effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
}

/// What became of the turn a step tried to take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The turn ran (or was recovered) and settled in one commit.
    Settled {
        /// The todo worked on; its lease is released with the settlement.
        todo: TodoId,
        /// The turn the charge and the evidence are bound to.
        turn: TurnId,
        /// True when a turn prepared before a crash was finished or re-run.
        resumed: bool,
        /// The validator's outcome.
        verdict: VerdictOutcome,
        /// What the kernel classified the turn as (progress, no progress, an executor or a
        /// validation failure); `None` when the settlement was a replay of an earlier commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<TurnResult>,
        /// The executor's account.
        summary: String,
        /// What the settlement charged: one turn, the executor's tokens and cost, the wall
        /// time the engine measured; `None` when it was a replay of an earlier commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        charged: Option<Amounts>,
        /// What of it went beyond the turn's reservation (an overrun: the next decision asks
        /// the owner); zero, and left out of the JSON, when none.
        #[serde(default, skip_serializing_if = "crate::is_default")]
        overrun: Amounts,
        /// Why the executor could not read the turn's own usage report, when it could not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage_problem: Option<UsageProblem>,
    },
    /// No turn began: the claim or the prepared-turn record was refused (another agent was
    /// faster, or the budget ran out in between). Nothing was charged.
    NotStarted {
        /// The todo the decision offered.
        todo: TodoId,
        /// The kernel's refusal of the claim or of the prepared-turn record.
        refusal: Refusal,
    },
    /// The lease was lost while the turn ran (renewal or settlement refused): the turn's
    /// result was not recorded; whoever holds the todo now decides.
    LeaseLost {
        /// The todo whose lease this agent no longer holds.
        todo: TodoId,
        /// The turn whose result was dropped; it is never charged.
        turn: TurnId,
        /// The kernel's refusal of the renewal or the settlement.
        refusal: Refusal,
    },
    /// A prepared turn was found in flight and the executor cannot tell whether its effects
    /// happened; the step's decision is `repair`.
    Unknown {
        /// The todo, still leased to this agent.
        todo: TodoId,
        /// The turn still in flight, to read back before anything else.
        turn: TurnId,
    },
}

/// When [`Engine::run`](super::Engine::run) stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Until {
    /// At the first decision that is not `continue`: the host takes over from there.
    Idle,
    /// Waits through `wait` and `ask` (a person's answer is a commit that wakes the engine);
    /// stops at `replan`, `repair` and `terminal`, which need the host.
    NeedsHost,
}

impl Until {
    /// True when `run` returns at `decision`.
    pub fn stops_at(self, decision: &Decision) -> bool {
        match decision {
            Decision::Continue(_) => false,
            Decision::Wait { .. } | Decision::Ask { .. } => self == Until::Idle,
            Decision::Replan { .. } | Decision::Repair { .. } | Decision::Terminal { .. } => true,
        }
    }
}
