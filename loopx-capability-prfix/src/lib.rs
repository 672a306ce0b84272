//! # loopx-capability-prfix
//!
//! Issue and pull-request fixing as pure judgement over the loopx kernel.
//!
//! - **Routes**: each triaged issue gets exactly one route — fix with a pull request, comment
//!   only, or triage only — from feasibility facts ([`route`]); the route changes only when the
//!   facts call for another one, and the old route's open todo is superseded.
//! - **Pull-request lifecycle**: the facts at the exact head are classified in a fixed
//!   precedence ([`phase`]) and turned into one open todo per pull request (a P0 repair, a P1
//!   branch update, a quiet monitor) or a gate owned by a person (ready for review, merge).
//!   The capability never merges and never proposes work that merges.
//! - **Questions answered**: a reviewer's comment or `commented`/`changes_requested` review
//!   becomes a todo for the agent ("answer @reviewer: …"), retired once the pull request's
//!   author answered it; the unanswered question of the chapter cannot be dropped.
//! - **Exact-head CI evidence**: [`ci_evidence`] builds the evidence the GitHub provider records,
//!   bound to `pr:<repo>#<n>` at `git:<sha>`; a new push makes it stale by the kernel's
//!   revision rule.
//!
//! ```
//! use loopx_capability_prfix::{PrFix, PrFixConfig};
//! use loopx_kernel::SourceId;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let capability = PrFix::new(SourceId::new("prfix")?, PrFixConfig::default())?;
//! assert_eq!(capability.config().required_approvals, 1);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod capability;
mod config;
mod evidence;
pub mod facts;
mod ids;
mod lifecycle;
mod questions;
mod route;

pub use capability::PrFix;
pub use config::{ConfigError, PrFixConfig};
pub use evidence::{CiEvidenceError, check_name, ci_evidence, head_ci_evidence};
pub use lifecycle::{Phase, PullFacts, ReviewStanding, ci_at_head, phase, review_standing};
pub use route::{Route, route};

/// The crate README's Rust example, compiled and run as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
