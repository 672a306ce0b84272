//! Who issues a command. Authority is checked against the actor, never against a claim in the
//! payload: a command names its actor and the kernel decides whether that actor may issue it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, PersonId, SourceId};

/// The issuer of a command.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    content = "id",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Actor {
    /// A registered executor identity (a model session, a shell runtime…).
    Agent(AgentId),
    /// A person: a goal owner, a maintainer who answers gates.
    Person(PersonId),
    /// An independent validator; only validators and people produce evidence outside a turn.
    Validator(SourceId),
    /// A provider recording an observation of the outside world.
    Provider(SourceId),
    /// A capability proposing domain transitions; it may add work and raise questions, never
    /// settle turns or answer gates.
    Capability(SourceId),
}

impl Actor {
    /// The agent id when this actor is an agent.
    pub fn agent(&self) -> Option<&AgentId> {
        match self {
            Actor::Agent(id) => Some(id),
            _ => None,
        }
    }

    /// The person id when this actor is a person.
    pub fn person(&self) -> Option<&PersonId> {
        match self {
            Actor::Person(id) => Some(id),
            _ => None,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Agent(id) => write!(f, "agent:{id}"),
            Actor::Person(id) => write!(f, "person:{id}"),
            Actor::Validator(id) => write!(f, "validator:{id}"),
            Actor::Provider(id) => write!(f, "provider:{id}"),
            Actor::Capability(id) => write!(f, "capability:{id}"),
        }
    }
}

impl fmt::Debug for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
