//! # loopx-kernel
//!
//! The sans-IO lifecycle core of loopx: the model of long-running agent work (goals, todos,
//! leases, gates, budgets, evidence, obligations), the commands that change it, the events it is
//! folded from, and [`decide`], the pure function that tells one agent its next legal step.
//!
//! The kernel reads no clock and does no I/O: `now` is an argument, outputs are data. Durable
//! storage, providers, executors and validators plug in through the traits in [`seams`].
//!
//! ```
//! use loopx_kernel::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = Timestamp::parse("2026-11-29T10:00:00Z")?;
//! let agent = AgentId::new("agent-a")?;
//! let spec = GoalSpec::builder("json-output", "add --format json to the CLI", "maintainer")
//!     .agent(&agent)
//!     .build()?;
//! let mut goal = GoalState::create(&spec.owner_actor(), now, &spec)?;
//! goal.handle(
//!     &Actor::Agent(agent.clone()),
//!     now,
//!     &Command::AddTodo { todo: NewTodo::advance(TodoId::new("edit")?, "change the output layer") },
//! )?;
//! assert_eq!(decide(&goal, &agent, now).kind(), "continue");
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod actor;
pub mod brief;
mod budget;
mod clock;
mod command;
mod decide;
mod decode;
pub mod engine;
mod event;
mod evidence;
mod execute;
pub mod facts;
mod fix;
mod from_fn;
mod gate;
mod goal;
pub mod identity;
pub mod ids;
mod invariants;
pub mod login;
mod obligation;
pub mod outbox;
pub mod persistent;
mod proposals;
mod readiness;
mod refusal;
pub mod retire;
mod retry;
#[cfg(feature = "schema")]
pub mod schema;
pub mod seams;
mod state;
pub mod text;
mod time;
mod todo;
mod todos;
pub mod words;
pub mod write;

#[cfg(feature = "testkit")]
pub mod testkit;

/// What a host program needs, in one import: `use loopx_kernel::prelude::*;`. The store
/// handle ([`StoreExt`]), the engine, the seams a host implements ([`Executor`](seams::Executor),
/// [`Validator`](seams::Validator)) with their request and report types, the ids, the goal
/// spec and todo builders, time, and `async_trait` for implementing the seams.
pub mod prelude {
    pub use async_trait::async_trait;

    pub use crate::engine::{Engine, EngineOptions, StepReport, TurnOutcome, Until};
    pub use crate::seams::{
        Capability, Clock, Executor, Proposal, Store, TurnError, TurnReport, TurnRequest,
        Validation, Validator,
    };
    pub use crate::{
        Actor, AgentId, Amounts, Command, Criterion, Decision, Duration, GoalId, GoalSpec,
        GoalState, Limits, ManualClock, NewTodo, PersonId, SourceId, StoreExt, Timestamp, TodoId,
        VerdictOutcome, executor_fn, validator_fn,
    };
}

pub use actor::Actor;
pub use budget::{Amounts, Dimension, Ledger, Limits, Overrun};
pub use clock::ManualClock;
pub use command::{
    Command, Continuation, GateAnswer, OutcomeResolution, PlanChange, Settlement, Transition,
    Verdict, VerdictOutcome,
};
pub use decide::{
    Assignment, Decision, LeaseStep, MAX_REASONS, Question, RepairIssue, ReplanReason, Stuck,
    TerminalOutcome, WaitReason, decide, frontier, last_change, next_wake, terminal,
};
pub use event::{Event, RecordedEvent, SCHEMA_VERSION, SettledTransition};
pub use evidence::{
    Evidence, Freshness, Lineage, NewEvidence, Observation, ObservedInput, Outcome, SourceOrder,
    SubjectHead,
};
pub use execute::{MAX_TEXT, execute};
pub use fix::{Fix, FixArg, Who};
pub use from_fn::{executor_fn, validator_fn};
pub use gate::{Decided, ExpiryPolicy, Gate, GateScope, GateState, GateStatus, NewGate};
pub use goal::{
    Amendment, BudgetExhaustion, CapabilityBinding, Criterion, DEFAULT_CLOCK_SKEW,
    DEFAULT_RETIRE_AFTER, GoalSpec, GoalSpecBuilder, GrantedAction, Policy,
};
pub use identity::{
    Identity, IdentityMode, Keyring, PublicKey, RegisteredKey, SecretKey, Signature, Signer,
    sign_verdict, verdict_message,
};
pub use ids::{
    AgentId, CheckId, CriterionId, DecisionScope, EffectId, EvidenceId, Fingerprint, GateId,
    GoalId, IntoId, InvalidId, MAX_ID_LEN, ObligationId, ObservationKey, OperationId, PersonId,
    Revision, SourceId, Subject, TodoId, TurnId,
};
pub use invariants::{Violation, check_invariants};
pub use login::{Relay, check_login};
pub use obligation::{Discharge, Obligation, ObligationCause, ObligationKind};
pub use outbox::{EffectIntent, EffectOutcome, GateNotice, PendingEffect};
pub use proposals::Proposals;
pub use readiness::{GateHold, GuardBlock};
pub use refusal::Refusal;
pub use retry::{
    DEFAULT_STALL_GOAL_TURNS, DEFAULT_STALL_TURNS, FailureClass, FailureNote, RECENT_FAILURES,
    RetryPolicy, Streak, TurnFailure, TurnResult,
};
pub use state::{
    CriterionStatus, GoalState, Intent, ReplayError, Snapshot, SnapshotError, UnverifiedHistory,
};
pub use time::{Duration, Timestamp, TimestampError};
pub use todo::{
    ContinuationRecord, HandoffNote, Lease, MonitorSpec, MonitorState, NewTodo, Priority,
    ResumeCondition, Todo, TodoClass, TodoStatus, TurnInFlight, Workspace, WriteSet,
};
pub use todos::Todos;
pub use write::{GoalHandle, HandleError, StoreExt, SubmitError, Submitted, submit};

/// Whether `value` is its type's default (zero, `false`, nothing): for serde's
/// `skip_serializing_if`, which passes a reference, so that such fields stay out of the JSON.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The workspace README's Rust examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The capability guide's worked example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../docs/writing-a-capability.md")]
struct CapabilityGuideDoctests;
