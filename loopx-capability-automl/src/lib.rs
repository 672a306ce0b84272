//! # loopx-capability-automl
//!
//! ML experiments as pure judgement over the kernel: a metric contract (primary metric,
//! direction, minimum effect), a matched baseline (same dataset fingerprint, evaluation window
//! and budget), guardrails, the classification of finished runs, holdout evidence and a
//! promotion gate that only a person answers.
//!
//! - [`ExperimentContract`] is the configuration, validated by [`AutoMl::new`].
//! - [`AutoMl`] implements the kernel's [`Capability`](loopx_kernel::seams::Capability): it
//!   reads the goal's observations (see [`facts`] for every key and fact) and proposes
//!   evaluate, holdout and retry todos, replan and repair obligations and the promotion gate.
//! - [`classify()`] and [`assess`] are the pure domain functions behind it.
//! - [`holdout_evidence`] builds the evidence a promotion rests on, for a validator to record
//!   (a capability never records evidence).
//!
//! Guarantees: an infrastructure failure is never classified as a regression, and a promotion
//! gate is only proposed with fresh passing holdout evidence at the experiment's current
//! revision. Experiment revisions (`run:<code>+<config>+<dataset>`) bind all evidence, so a new
//! config or dataset makes earlier evidence stale by the kernel's own rule.
//!
//! ```
//! use loopx_capability_automl::{AutoMl, ExperimentContract};
//! use loopx_kernel::SourceId;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let contract: ExperimentContract = serde_json::from_str(
//!     r#"{"primary": "accuracy", "direction": "higher_is_better", "min_effect": 0.01,
//!         "baseline": "base", "guardrails": {"cost_cap": 100}}"#,
//! )?;
//! let capability = AutoMl::new(SourceId::new("automl")?, contract)?;
//! assert_eq!(capability.contract().max_attempts, 3);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod capability;
pub mod classify;
mod contract;
pub mod facts;
mod holdout;
mod ids;
mod judgement;

pub use capability::AutoMl;
pub use classify::{
    Classification, GuardrailReading, GuardrailStatus, Inconclusive, InfraCause, Mismatch, Verdict,
    classify,
};
pub use contract::{ContractError, Direction, ExperimentContract, Guardrails, SecondaryMetric};
pub use facts::{Fact, Run, RunState, Split};
pub use holdout::{
    HOLDOUT_CHECK, HoldoutError, HoldoutStanding, holdout_evidence, holdout_standing,
};
pub use ids::scoped_id;
pub use judgement::{Judgement, Role, assess, assess_run};
