//! Property-testing kit for the lifecycle: a naive reference model, operation generators and
//! invariant checks, public so hosts, stores and capabilities can run the kernel's properties
//! against their own code.
//!
//! The pieces:
//!
//! - [`LifecycleModel`]: a deliberately simple model of one goal (maps of todo status, lease
//!   holder, epoch and expiry, turn reservations and charges, gates, evidence revisions). It
//!   interprets the same [`Command`](crate::Command)s as the kernel and predicts, for each one,
//!   whether it is accepted and which events it records ([`Expect`]). It shares no code with the
//!   kernel's validation, so a disagreement is a bug in one of them.
//! - [`step_strategy`] and [`spec_strategy`]: proptest strategies for [`Step`]s (commands from
//!   every kind of actor, and the passing of time), mostly legal for the model's current state
//!   with a share of deliberately illegal ones.
//! - [`LifecycleSut`]: the small trait a system under test implements (a goal that handles
//!   commands and reports its state). [`GoalState`](crate::GoalState) implements it in memory;
//!   a store implements it over its backend.
//! - [`LifecycleMachine`] and [`LifecycleTest`]: the `proptest-state-machine` reference machine
//!   and test, which after every step compare the system with the model and run every check in
//!   [`checks`].
//!
//! A host or store runs the same machine against its own system by implementing
//! [`LifecycleSut`] and naming it in the test (compiled here, run by the kernel's own tests):
//!
//! ```no_run
//! use loopx_kernel::GoalState;
//! use loopx_kernel::testkit::{LifecycleTest, config};
//! use proptest_state_machine::prop_state_machine;
//!
//! prop_state_machine! {
//!     #![proptest_config(config(256))]
//!     #[test]
//!     fn lifecycle_holds(sequential 1..40 => LifecycleTest<GoalState>);
//! }
//! # fn main() {}
//! ```
//!
//! `prop_state_machine!` takes a plain type path: for a generic system such as
//! `LifecycleTest<OverStore<S>>`, name it with a type alias first. [`LifecycleSut::create`] is
//! an associated function, so a system that needs a backend or settings builds them itself (a
//! fresh temporary store per case is the usual shape).

pub mod checks;
mod machine;
mod model;
pub mod reasons;
pub mod scenario;
mod step;
mod strategy;

pub use checks::{FailingRun, Finding, failing_run};
pub use machine::{Harness, LifecycleMachine, LifecycleSut, LifecycleTest, config};
pub use model::{Expect, LifecycleModel};
pub use step::Step;
pub use strategy::{failing_run_strategy, spec_strategy, step_strategy};

use crate::ids::{AgentId, PersonId, SourceId};
use crate::time::Timestamp;
use crate::todo::Workspace;

/// Builds an id from a literal the kit controls; every literal below is a valid id.
fn id<T: TryFrom<String>>(text: &str) -> T {
    match T::try_from(text.to_owned()) {
        Ok(id) => id,
        Err(_) => unreachable!("testkit literal `{text}` is a valid id"),
    }
}

/// The fixed cast of actors the generators draw from. Names are stable so that failing cases
/// read the same on every run.
pub mod roster {
    use super::{AgentId, PersonId, SourceId, Timestamp, Workspace, id};

    /// Agents registered when the goal is created. `carol` may be unregistered and registered
    /// again by amendments; the others stay registered.
    pub const AGENTS: [&str; 3] = ["alice", "bob", "carol"];

    /// An agent that is never registered: every claim it makes must be refused.
    pub const OUTSIDER: &str = "mallory";

    /// The instant every generated goal is created at.
    pub const START_MILLIS: i64 = 1_795_946_400_000; // 2026-11-29T10:00:00Z

    /// The registered agents, in [`AGENTS`] order.
    pub fn agents() -> Vec<AgentId> {
        AGENTS.iter().map(|a| id(a)).collect()
    }

    /// Every agent the generators use, the outsider last.
    pub fn all_agents() -> Vec<AgentId> {
        let mut all = agents();
        all.push(outsider());
        all
    }

    /// The never-registered agent.
    pub fn outsider() -> AgentId {
        id(OUTSIDER)
    }

    /// The goal owner.
    pub fn owner() -> PersonId {
        id("olivia")
    }

    /// A person who owns nothing.
    pub fn stranger() -> PersonId {
        id("sam")
    }

    /// The independent validator.
    pub fn validator() -> SourceId {
        id("ci-bot")
    }

    /// A second validator: its key is registered on signed goals, but not for check `tests`,
    /// so a verdict of it vouching for `tests` evidence is refused.
    pub fn second_validator() -> SourceId {
        id("lint-bot")
    }

    /// A validator no goal registers a key for; it only ever appears named in verdicts.
    pub fn unknown_validator() -> SourceId {
        id("nobody")
    }

    /// The fixed secret key of `actor` on generated signed goals (derived from its name, so
    /// every run and every system under test agrees).
    pub fn key(actor: &crate::Actor) -> crate::SecretKey {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(format!("loopx-testkit-key {actor}").as_bytes());
        crate::SecretKey::from_seed(digest.into())
    }

    /// Every actor that issues commands in generated runs, each with its [`key`] registered:
    /// what a signed generated goal registers. [`unknown_validator`] is left out.
    pub fn registered_keys() -> Vec<crate::RegisteredKey> {
        use crate::{Actor, Signer as _};
        let mut actors: Vec<Actor> = all_agents().into_iter().map(Actor::Agent).collect();
        actors.extend([
            Actor::Person(owner()),
            Actor::Person(stranger()),
            Actor::Validator(validator()),
            Actor::Validator(second_validator()),
            Actor::Provider(provider()),
            Actor::Capability(capability()),
            Actor::Capability(other_capability()),
        ]);
        actors
            .into_iter()
            .map(|actor| crate::RegisteredKey {
                key: key(&actor).public_key(),
                actor,
            })
            .collect()
    }

    /// The provider that records observations.
    pub fn provider() -> SourceId {
        id("git")
    }

    /// A capability proposing plan changes.
    pub fn capability() -> SourceId {
        id("planner")
    }

    /// A second capability: it may act on the todos it created, never on the planner's.
    pub fn other_capability() -> SourceId {
        id("scout")
    }

    /// When generated goals are created.
    pub fn start() -> Timestamp {
        Timestamp::from_millis(START_MILLIS)
    }

    /// The one checkout every agent may share (and must not write from concurrently).
    pub fn shared_checkout() -> Workspace {
        Workspace {
            top_level: "/src/acme".into(),
            common_dir: "/src/acme/.git".into(),
        }
    }

    /// An agent's own worktree of the same clone.
    pub fn worktree(agent: &AgentId) -> Workspace {
        Workspace {
            top_level: format!("/src/wt-{agent}"),
            common_dir: "/src/acme/.git".into(),
        }
    }
}
