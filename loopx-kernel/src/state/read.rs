//! Every read of a [`GoalState`] beyond its fields, in one place: the pending work, who is
//! registered, freshness and criterion status, and the lookups capabilities read the goal with
//! (observations by key or key prefix, what one actor proposed and still waits on). All are
//! plain reads; none changes the state.

use std::collections::{BTreeMap, BTreeSet};

use super::{CriterionStatus, GoalState};
use crate::actor::Actor;
use crate::budget::{Amounts, Dimension, Overrun};
use crate::evidence::{Evidence, Freshness, NewEvidence, Observation, Outcome};
use crate::gate::{Decided, Gate};
use crate::identity::may_establish;
use crate::ids::{
    AgentId, CriterionId, EvidenceId, ObservationKey, PersonId, SourceId, Subject, TodoId,
};
use crate::login::login_key;
use crate::retry::FailureNote;
use crate::time::Timestamp;
use crate::todo::Todo;

impl GoalState {
    /// The person `login` speaks for at `provider`, as the owner mapped it
    /// ([`Amendment::MapLogin`](crate::Amendment::MapLogin)); logins compare case-insensitively.
    pub fn person_of_login(&self, provider: &SourceId, login: &str) -> Option<&PersonId> {
        self.logins.get(provider)?.get(&login_key(login))
    }

    /// `person`'s login at `provider`, the first in order when the owner mapped several; in
    /// lower case, as the kernel keeps it.
    pub fn login_of(&self, person: &PersonId, provider: &SourceId) -> Option<&str> {
        self.logins
            .get(provider)?
            .iter()
            .find(|(_, mapped)| *mapped == person)
            .map(|(login, _)| login.as_str())
    }

    /// Todos that are not done or superseded, in frontier order (priority, then age).
    pub fn pending_todos(&self) -> impl Iterator<Item = &Todo> + '_ {
        self.index
            .pending
            .iter()
            .map(|&(_, slot)| self.todos.at(slot))
    }

    /// Todos with a lease record (live or expired).
    pub fn leased_todos(&self) -> impl Iterator<Item = &Todo> + '_ {
        self.index.leased.iter().map(|&slot| self.todos.at(slot))
    }

    /// Every subject the goal follows: those its criteria are about, those it has recorded a
    /// revision of, those its latest observations are about, and those its capability binding
    /// asks it to follow ([`CapabilityBinding::follows`](crate::CapabilityBinding::follows)). A fact about any of them may
    /// change what the goal needs, so a host routes a fact from outside (a webhook delivery) to
    /// every goal whose watched subjects hold the fact's subject
    /// ([`Store::watching`](crate::seams::Store::watching)).
    pub fn watched_subjects(&self) -> BTreeSet<&Subject> {
        let criteria = self.spec.criteria.iter().map(|c| &c.subject);
        let observed = self.observations.values().map(|o| &o.subject);
        let followed = self.spec.capability.iter().flat_map(|c| &c.follows);
        criteria
            .chain(self.subjects.keys())
            .chain(observed)
            .chain(followed)
            .collect()
    }

    /// True when the agent is registered with the goal.
    pub fn is_registered(&self, agent: &AgentId) -> bool {
        self.spec.agents.contains(agent)
    }

    /// The owner as an actor.
    pub fn owner(&self) -> Actor {
        Actor::Person(self.spec.owner.clone())
    }

    /// What a turn of `todo` reserves when it begins: the todo's expected usage, or the goal
    /// policy's default reservation, as exactly one turn.
    pub fn expected_usage(&self, todo: &Todo) -> Amounts {
        Amounts {
            turns: 1,
            ..todo
                .expected_usage
                .as_deref()
                .copied()
                .unwrap_or(self.spec.policy.default_reservation)
        }
    }

    /// The unanswered overrun the owner must be asked about, with the first dimension it went
    /// beyond that the goal's budget, or its todo's, still bounds. An overrun only on unlimited
    /// dimensions is recorded but asks nobody.
    pub fn overrun_to_ask(&self) -> Option<(&Overrun, Dimension)> {
        let overrun = self.overrun.as_deref()?;
        let todo_limits = self
            .todos
            .get(&overrun.todo)
            .and_then(|t| t.budget.as_deref())
            .map(|l| l.limits);
        let dimension = self
            .ledger
            .limits
            .bounds_any(overrun.by)
            .or_else(|| todo_limits.and_then(|l| l.bounds_any(overrun.by)))?;
        Some((overrun, dimension))
    }

    /// Whether a piece of evidence may still be relied on at `now`: bound to the subject's
    /// current revision, within its time-to-live, and (transitively) derived from fresh inputs.
    pub fn freshness(&self, id: &EvidenceId, now: Timestamp) -> Freshness {
        let mut memo = BTreeMap::new();
        self.freshness_memo(id, now, &mut memo)
    }

    fn freshness_memo(
        &self,
        id: &EvidenceId,
        now: Timestamp,
        memo: &mut BTreeMap<EvidenceId, Freshness>,
    ) -> Freshness {
        // Inputs are always recorded before what cites them, so following them in order of
        // decreasing `seq` terminates; the explicit stack keeps deep lineage off the call stack.
        let mut stack = vec![id.clone()];
        while let Some(top) = stack.last().cloned() {
            if memo.contains_key(&top) {
                stack.pop();
                continue;
            }
            let Some(evidence) = self.evidence.get(&top) else {
                memo.insert(top.clone(), Freshness::Fresh);
                stack.pop();
                continue;
            };
            let unresolved: Vec<EvidenceId> = evidence
                .inputs
                .evidence
                .iter()
                .filter(|input| !memo.contains_key(*input) && self.evidence.contains_key(*input))
                .filter(|input| self.evidence[*input].seq < evidence.seq)
                .cloned()
                .collect();
            if unresolved.is_empty() {
                let verdict = self.own_freshness(evidence, now, memo);
                memo.insert(top, verdict);
                stack.pop();
            } else {
                stack.extend(unresolved);
            }
        }
        memo.get(id).cloned().unwrap_or(Freshness::Fresh)
    }

    fn own_freshness(
        &self,
        evidence: &Evidence,
        now: Timestamp,
        memo: &BTreeMap<EvidenceId, Freshness>,
    ) -> Freshness {
        if let Some(head) = self.subjects.get(&evidence.subject)
            && head.revision != evidence.revision
        {
            let current = head.revision.clone();
            let on_dirty_tree = evidence
                .revision
                .as_str()
                .strip_suffix("+dirty")
                .is_some_and(|clean| clean == current.as_str());
            return if on_dirty_tree {
                Freshness::DirtyTree {
                    established: evidence.revision.clone(),
                    current,
                }
            } else {
                Freshness::Superseded { current }
            };
        }
        if let Some(ttl) = evidence.ttl {
            let expiry = evidence.observed_at.plus(ttl);
            if now >= expiry {
                return Freshness::Expired { at: expiry };
            }
        }
        for input in &evidence.inputs.evidence {
            if memo.get(input).is_some_and(|f| !f.is_fresh()) {
                return Freshness::InputStale {
                    input: input.clone(),
                };
            }
        }
        for input in &evidence.inputs.observations {
            let current = self.observations.get(&input.key).map(|o| &o.fingerprint);
            if current != Some(&input.fingerprint) {
                return Freshness::ObservationChanged {
                    key: input.key.clone(),
                };
            }
        }
        Freshness::Fresh
    }

    /// Where one criterion stands at `now`. The newest evidence for its check and subject at the
    /// subject's current revision decides; older revisions never count, and neither does
    /// evidence from anyone the goal does not register for the check
    /// ([`may_establish`](crate::identity::may_establish)).
    pub fn criterion_status(&self, id: &CriterionId, now: Timestamp) -> Option<CriterionStatus> {
        let criterion = self.spec.criteria.iter().find(|c| &c.id == id)?;
        let key = (criterion.check.clone(), criterion.subject.clone());
        let Some(ids) = self.index.by_check.get(&key) else {
            return Some(CriterionStatus::NoEvidence);
        };
        let registered =
            |e: &&Evidence| may_establish(&self.spec, &criterion.check, &e.produced_by);
        let all = || {
            ids.iter()
                .filter_map(|id| self.evidence.get(id))
                .filter(registered)
        };
        if all().next().is_none() {
            let ignored = ids
                .iter()
                .filter_map(|id| self.evidence.get(id))
                .max_by_key(|e| (e.observed_at, e.seq));
            return Some(ignored.map_or(CriterionStatus::NoEvidence, |e| {
                CriterionStatus::UnregisteredValidator {
                    evidence: e.id.clone(),
                    produced_by: e.produced_by.clone(),
                }
            }));
        }
        // Evidence at the current revision decides even when evidence about an older revision
        // was observed later; without any, the newest evidence still says why it is not met.
        let current = self.subjects.get(&criterion.subject).map(|h| &h.revision);
        let newest = all()
            .filter(|e| Some(&e.revision) == current)
            .max_by_key(|e| (e.observed_at, e.seq))
            .or_else(|| all().max_by_key(|e| (e.observed_at, e.seq)));
        let Some(evidence) = newest else {
            return Some(CriterionStatus::NoEvidence);
        };
        let freshness = self.freshness(&evidence.id, now);
        let id = evidence.id.clone();
        Some(if !freshness.is_fresh() {
            CriterionStatus::Stale {
                evidence: id,
                freshness,
            }
        } else if evidence.outcome == Outcome::Fail {
            CriterionStatus::Failing { evidence: id }
        } else {
            CriterionStatus::Met { evidence: id }
        })
    }

    /// True when the goal already holds evidence of the same check's same outcome about the
    /// same subject at the same revision: recording `evidence` again establishes nothing new.
    pub fn holds_fact(&self, evidence: &NewEvidence) -> bool {
        let key = (evidence.check.clone(), evidence.subject.clone());
        self.index.by_check.get(&key).is_some_and(|ids| {
            ids.iter()
                .rev()
                .filter_map(|id| self.evidence.get(id))
                .any(|e| e.revision == evidence.revision && e.outcome == evidence.outcome)
        })
    }

    /// Every criterion's status, in the goal's order.
    pub fn criteria_status(&self, now: Timestamp) -> Vec<(CriterionId, CriterionStatus)> {
        self.spec
            .criteria
            .iter()
            .filter_map(|c| Some((c.id.clone(), self.criterion_status(&c.id, now)?)))
            .collect()
    }

    /// The latest observation of stream `key`; `None` when there is none (or `key` is not a
    /// valid observation key, so no stream can have it).
    pub fn observation(&self, key: &str) -> Option<&Observation> {
        self.observations.get(&ObservationKey::new(key).ok()?)
    }

    /// The latest observation of every stream whose key starts with `prefix`, in key order.
    /// An empty prefix yields every stream.
    pub fn observations_with_prefix<'a>(
        &'a self,
        prefix: &str,
    ) -> impl Iterator<Item = &'a Observation> + use<'a> {
        let prefix = prefix.to_owned();
        let streams = if prefix.is_empty() {
            Some(self.observations.range::<ObservationKey, _>(..))
        } else {
            // A prefix that is no valid key holds characters no key has, or is too long for
            // one: no stream starts with it.
            ObservationKey::new(prefix.as_str())
                .ok()
                .map(|from| self.observations.range(from..))
        };
        streams
            .into_iter()
            .flatten()
            .take_while(move |(key, _)| key.as_str().starts_with(prefix.as_str()))
            .map(|(_, observation)| observation)
    }

    /// The todos `actor` created that are not done or superseded, in frontier order.
    pub fn pending_todos_by<'a>(
        &'a self,
        actor: &Actor,
    ) -> impl Iterator<Item = &'a Todo> + use<'a> {
        let actor = actor.clone();
        self.pending_todos().filter(move |t| t.created_by == actor)
    }

    /// The gates `actor` opened that still ask for an answer at `now` (pending or overdue).
    pub fn pending_gates_by<'a>(
        &'a self,
        actor: &Actor,
        now: Timestamp,
    ) -> impl Iterator<Item = &'a Gate> + use<'a> {
        let actor = actor.clone();
        self.gates
            .values()
            .filter(move |g| g.opened_by == actor && g.state_at(now).is_pending())
    }

    /// What the gates covering any open todo came to by `now`, oldest first: the decisions the
    /// goal's remaining work acts on.
    pub fn decided_on_open_work(&self, now: Timestamp) -> Vec<Decided> {
        self.decided_where(now, |gate| {
            self.todos
                .values()
                .any(|t| !t.status.is_closed() && gate.scope.covers(t))
        })
    }

    /// What the gates covering `todo` came to by `now` (answered, rejected, withdrawn or
    /// expired), oldest first: the decisions the work on it must act on.
    pub fn decided_for(&self, todo: &Todo, now: Timestamp) -> Vec<Decided> {
        self.decided_where(now, |gate| gate.scope.covers(todo))
    }

    /// What the gates `covers` picks came to by `now`, oldest first.
    fn decided_where(&self, now: Timestamp, covers: impl Fn(&Gate) -> bool) -> Vec<Decided> {
        let mut decided: Vec<Decided> = self
            .gates
            .values()
            .filter(|gate| covers(gate))
            .filter_map(|gate| gate.decided(now))
            .collect();
        decided.sort_by(|a, b| (a.at, &a.gate).cmp(&(b.at, &b.gate)));
        decided
    }

    /// How many turns of `todo` failed in a row and the last of them, while its last settled
    /// turn failed.
    pub fn last_failure(&self, todo: &TodoId) -> Option<(u32, &FailureNote)> {
        let streak = self.streaks.get(todo).filter(|s| s.failures > 0)?;
        Some((streak.failures, streak.recent.last()?))
    }
}
