//! Shared test support: goal fixtures and the throwaway PostgreSQL cluster.

#![allow(
    dead_code,
    reason = "each test binary uses only part of the shared support"
)]

use loopx_kernel::seams::Store;
use loopx_kernel::{
    Actor, AgentId, Command, GoalId, GoalSpec, Limits, OperationId, PersonId, Policy, Timestamp,
};
use loopx_kernel::{Submitted, submit};

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
    spec_of(goal_id())
}

/// Goal `goal`, owned by olivia, with one registered agent `a`.
pub fn spec_of(goal: GoalId) -> GoalSpec {
    GoalSpec {
        id: goal,
        objective: "keep the data safe".into(),
        owner: PersonId::new("olivia").unwrap(),
        criteria: vec![],
        agents: [AgentId::new("a").unwrap()].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}

/// Creates goal `g` in `store` through `submit`, as its owner, under operation `create`.
pub async fn create_goal<S: Store>(store: &S) -> Submitted {
    let create = Command::CreateGoal { spec: spec() };
    submit(
        store,
        &goal_id(),
        &owner(),
        now(),
        &create,
        &OperationId::new("create").unwrap(),
    )
    .await
    .unwrap()
}

/// Runs a future to completion on a fresh single-threaded runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}
