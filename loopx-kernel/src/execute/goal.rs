//! Goal-level commands: amendments and closure.

use std::collections::{BTreeMap, BTreeSet};

use crate::actor::Actor;
use crate::budget::Limits;
use crate::event::Event;
use crate::goal::Amendment;
use crate::identity::{Identity, RegisteredKey};
use crate::ids::{CheckId, PersonId, SourceId};
use crate::login::{check_login, login_key};
use crate::persistent::Map;
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
        let mut keys = self.state.spec.keys.clone();
        let mut validators = self.state.spec.validators.clone();
        let mut logins = self.state.logins.clone();
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
                Amendment::RegisterKey { actor, key } => {
                    if keys.iter().any(|k| &k.actor == actor && &k.key == key) {
                        return Err(Refusal::DuplicateId {
                            kind: "key",
                            id: format!("{actor} {key}"),
                        });
                    }
                    keys.push(RegisteredKey {
                        actor: actor.clone(),
                        key: *key,
                    });
                }
                Amendment::RevokeKey { actor, key } => {
                    let before = keys.len();
                    keys.retain(|k| !(&k.actor == actor && &k.key == key));
                    if keys.len() == before {
                        return Err(Refusal::UnknownReference {
                            kind: "key",
                            id: format!("{actor} {key}"),
                        });
                    }
                }
                Amendment::RegisterValidator { .. } | Amendment::UnregisterValidator { .. } => {
                    change_validators(&mut validators, amendment)?;
                }
                Amendment::SetBudget { limits } => self.check_limits(*limits)?,
                Amendment::MapLogin { .. } | Amendment::UnmapLogin { .. } => {
                    change_logins(&mut logins, amendment)?;
                }
                Amendment::RegisterAgent { .. }
                | Amendment::UnregisterAgent { .. }
                | Amendment::Grant { .. }
                | Amendment::Revoke { .. }
                // A binding is data the kernel carries, never reads: its host validates it.
                | Amendment::SetCapability { .. } => {}
            }
        }
        // A signed goal whose owner holds no key could never be amended again, and one left
        // with no key at all would read as recorded before signing: neither is allowed.
        let owner = self.state.spec.owner_actor();
        let signed = !self.state.spec.keys.is_empty() || !keys.is_empty();
        if self.state.spec.identity == Identity::Signed
            && signed
            && !keys.iter().any(|k| k.actor == owner)
        {
            return Err(Refusal::InvalidInput {
                field: "amendments",
                problem: format!(
                    "the owner `{owner}` would hold no key; register the owner's key first, and keep one"
                ),
            });
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

/// Applies a validator amendment to `validators`, the registry as amended so far in this
/// batch: registering one twice or withdrawing one never registered is refused.
fn change_validators(
    validators: &mut BTreeMap<CheckId, BTreeSet<Actor>>,
    amendment: &Amendment,
) -> Result<(), Refusal> {
    match amendment {
        Amendment::RegisterValidator { check, validator }
            if !validators
                .entry(check.clone())
                .or_default()
                .insert(validator.clone()) =>
        {
            Err(Refusal::DuplicateId {
                kind: "validator",
                id: format!("{check} {validator}"),
            })
        }
        Amendment::UnregisterValidator { check, validator }
            if !validators
                .get_mut(check)
                .is_some_and(|v| v.remove(validator)) =>
        {
            Err(Refusal::UnknownReference {
                kind: "validator",
                id: format!("{check} {validator}"),
            })
        }
        _ => Ok(()),
    }
}

/// Applies a login amendment to `logins`, the mappings as amended so far in this batch: a
/// login that does not read as one, one mapped to someone else, the same mapping twice and
/// withdrawing one never made are refused.
fn change_logins(
    logins: &mut Map<SourceId, Map<String, PersonId>>,
    amendment: &Amendment,
) -> Result<(), Refusal> {
    match amendment {
        Amendment::MapLogin {
            person,
            provider,
            login,
        } => {
            check_login(login).map_err(|problem| Refusal::LoginMalformed {
                provider: provider.clone(),
                problem,
            })?;
            let mapped = logins.get_or_default(provider.clone());
            match mapped.get(&login_key(login)) {
                Some(holder) if holder == person => Err(Refusal::DuplicateId {
                    kind: "login",
                    id: format!("{provider}:{login}"),
                }),
                Some(holder) => Err(Refusal::LoginTaken {
                    provider: provider.clone(),
                    login: login.clone(),
                    person: holder.clone(),
                }),
                None => {
                    mapped.insert(login_key(login), person.clone());
                    Ok(())
                }
            }
        }
        Amendment::UnmapLogin { provider, login } => {
            let removed = logins
                .get_mut(provider)
                .and_then(|mapped| mapped.remove(&login_key(login)));
            match removed {
                Some(_) => Ok(()),
                None => Err(Refusal::UnknownReference {
                    kind: "login",
                    id: format!("{provider}:{login}"),
                }),
            }
        }
        _ => Ok(()),
    }
}
