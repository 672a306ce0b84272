//! Goal-level commands: amendments and closure.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::budget::Limits;
use crate::event::Event;
use crate::goal::Amendment;
use crate::refusal::Refusal;

use super::{Ctx, invalid, positive, text};

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
                Amendment::SetBudget { limits } => self.check_limits(*limits)?,
                Amendment::RegisterAgent { .. }
                | Amendment::UnregisterAgent { .. }
                | Amendment::Grant { .. }
                | Amendment::Revoke { .. } => {}
            }
        }
        Ok(vec![Event::GoalAmended {
            goal_revision: self.state.goal_revision + 1,
            amendments: amendments.to_vec(),
        }])
    }

    /// New limits may not lower a limit below what is already spent and reserved: the
    /// budget's guarantee (`spent + reserved ≤ limit`, beyond it only by recorded overruns)
    /// holds across amendments. A limit at exactly what is committed stops new turns.
    fn check_limits(&self, limits: Limits) -> Result<(), Refusal> {
        let ledger = &self.state.ledger;
        let committed = ledger.committed();
        match ledger.limits.lowered_below(limits, committed) {
            None => Ok(()),
            Some(dimension) => Err(invalid(
                "budget",
                format!(
                    "the {dimension} limit may not be lowered below the {} already spent and reserved; set it to that to stop new turns",
                    committed.get(dimension)
                ),
            )),
        }
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
