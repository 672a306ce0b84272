//! # loopx-capability-research
//!
//! Research as pure judgement over the loopx kernel: a hypothesis ledger over an append-only
//! evidence graph, dev and holdout kept apart, per-agent frontiers, and retirement and
//! promotion left to people.
//!
//! - [`ledger`] derives where every hypothesis stands (active, supported, weakened, refuted,
//!   retired) from the goal state alone: `hypothesis:<id>` and `finding:<id>` observations
//!   ([`facts`]), holdout evidence, and the promotion and retirement gates.
//! - [`Research`] is the [`Capability`](loopx_kernel::seams::Capability): it turns each line's
//!   gaps into todos for, and replan obligations owned by, the agent that owns the line, and
//!   asks a person (a gate) to promote a supported hypothesis or retire a refuted one.
//! - The holdout evaluation is handed to an evaluator other than the hypothesis's owner
//!   ([`evaluator_for`]) through the kernel's handoff, with a note that carries what it needs;
//!   a line's work whose holder is gone (unregistered, or its lease expired mid-turn) is handed
//!   over the same way, never by editing who owns what.
//! - [`holdout_evidence`] builds the evidence a validator records for a holdout finding; the
//!   capability itself never records evidence.
//!
//! A dev-set finding never supports or refutes anything: only a holdout finding that was
//! evaluated by someone other than its producer, or confirmed by recorded holdout evidence,
//! does. No hypothesis is retired without a gate having been opened and answered by a person.
#![forbid(unsafe_code)]

mod capability;
mod config;
mod evidence;
pub mod facts;
mod handoff;
pub mod ids;
mod ledger;

pub use capability::{Research, Route};
pub use config::{ConfigError, ResearchConfig};
pub use evidence::{EvidenceError, holdout_evidence};
pub use facts::{Edge, FactError, FindingFacts, HypothesisFacts, Split};
pub use handoff::evaluator_for;
pub use ledger::{
    FindingEntry, Gap, HypothesisEntry, Ledger, Problem, Promotion, Status, Weight, classify, gaps,
    ledger,
};

/// The README's worked example, compiled and run as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
