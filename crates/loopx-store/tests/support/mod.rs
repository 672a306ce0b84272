//! Shared test support: goal fixtures and the throwaway PostgreSQL cluster.

#![allow(
    dead_code,
    reason = "each test binary uses only part of the shared support"
)]

use loopx_kernel::{Actor, AgentId, GoalId, GoalSpec, Limits, PersonId, Policy, Timestamp};

#[cfg(feature = "postgres")]
pub mod postgres;

/// The instant every fixture is built at.
pub fn now() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").unwrap()
}

/// The goal owner of the fixtures.
pub fn owner() -> Actor {
    Actor::Person(PersonId::new("olivia").unwrap())
}

/// The fixtures' goal id.
pub fn goal_id() -> GoalId {
    GoalId::new("g").unwrap()
}

/// Goal `g`, owned by olivia, with one registered agent `a`.
pub fn spec() -> GoalSpec {
    GoalSpec {
        id: goal_id(),
        objective: "keep the data safe".into(),
        owner: PersonId::new("olivia").unwrap(),
        criteria: vec![],
        agents: [AgentId::new("a").unwrap()].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
    }
}
