//! Goal-level commands: amendments and closure.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::event::Event;
use crate::goal::Amendment;
use crate::refusal::Refusal;

use super::{Ctx, positive, text};

impl Ctx<'_> {
    pub(super) fn amend(
        &self,
        expected: u64,
        amendments: &[Amendment],
    ) -> Result<Vec<Event>, Refusal> {
        self.require_owner()?;
        if expected != self.state.goal_revision {
            return Err(Refusal::StaleRevision {
                expected,
                current: self.state.goal_revision,
            });
        }
        if amendments.is_empty() {
            return Err(Refusal::NoVisibleChange {
                what: "an amendment needs at least one change".into(),
            });
        }
        let mut criteria: BTreeSet<_> = self.state.spec.criteria.iter().map(|c| &c.id).collect();
        for amendment in amendments {
            match amendment {
                Amendment::SetObjective { objective } => text("objective", objective)?,
                Amendment::AddCriterion { criterion } => {
                    text("criterion text", &criterion.text)?;
                    if !criteria.insert(&criterion.id) {
                        return Err(Refusal::DuplicateId {
                            kind: "criterion",
                            id: criterion.id.to_string(),
                        });
                    }
                }
                Amendment::RemoveCriterion { id } => {
                    if !criteria.remove(id) {
                        return Err(Refusal::UnknownReference {
                            kind: "criterion",
                            id: id.to_string(),
                        });
                    }
                }
                Amendment::SetPolicy { policy } => positive("policy.lease_ttl", policy.lease_ttl)?,
                Amendment::RegisterAgent { .. }
                | Amendment::UnregisterAgent { .. }
                | Amendment::SetBudget { .. }
                | Amendment::Grant { .. }
                | Amendment::Revoke { .. } => {}
            }
        }
        Ok(vec![Event::GoalAmended {
            goal_revision: self.state.goal_revision + 1,
            amendments: amendments.to_vec(),
        }])
    }

    pub(super) fn declare_closure(&self, reason: &str) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Person(_) => self.require_owner()?,
            Actor::Agent(agent) => self.registered(agent)?,
            _ => return Err(self.not_permitted("declare_closure")),
        }
        text("reason", reason)?;
        Ok(vec![Event::ClosureDeclared {
            reason: reason.to_owned(),
        }])
    }
}
