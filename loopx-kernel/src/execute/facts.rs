//! Gates, observations, evidence and obligations.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::command::GateAnswer;
use crate::event::Event;
use crate::evidence::{NewEvidence, Observation};
use crate::gate::NewGate;
use crate::ids::{AgentId, ObligationId};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::refusal::Refusal;

use super::{Ctx, invalid, optional_text, text};

impl Ctx<'_> {
    pub(super) fn open_gate(&self, gate: &NewGate) -> Result<Vec<Event>, Refusal> {
        self.require_planner("open_gate")?;
        self.check_new_gate(gate)?;
        Ok(vec![Event::GateOpened { gate: gate.clone() }])
    }

    pub(super) fn check_new_gate(&self, gate: &NewGate) -> Result<(), Refusal> {
        if self.state.gates.contains_key(&gate.id) {
            return Err(Refusal::DuplicateId {
                kind: "gate",
                id: gate.id.to_string(),
            });
        }
        text("question", &gate.question)?;
        if gate.scope.is_empty() {
            return Err(invalid(
                "scope",
                "a gate must say what it blocks (todos, decisions or the whole goal); an unscoped gate would block everything silently",
            ));
        }
        for todo in &gate.scope.todos {
            self.todo(todo)?;
        }
        if matches!(gate.owner, Actor::Capability(_)) {
            return Err(invalid("owner", "a capability cannot answer gates"));
        }
        if let Some(deadline) = gate.deadline
            && deadline <= self.now
        {
            return Err(invalid("deadline", "must be in the future"));
        }
        Ok(())
    }

    pub(super) fn pending_gate(
        &self,
        id: &crate::ids::GateId,
    ) -> Result<&crate::gate::Gate, Refusal> {
        let gate = self
            .state
            .gates
            .get(id)
            .ok_or_else(|| Refusal::UnknownGate { gate: id.clone() })?;
        let state = gate.state_at(self.now);
        if !state.is_pending() {
            return Err(Refusal::GateNotPending {
                gate: id.clone(),
                state,
            });
        }
        Ok(gate)
    }

    pub(super) fn answer_gate(
        &self,
        id: &crate::ids::GateId,
        answer: &GateAnswer,
    ) -> Result<Vec<Event>, Refusal> {
        let gate = self.pending_gate(id)?;
        if self.actor != &gate.owner {
            return Err(Refusal::NotGateOwner {
                gate: id.clone(),
                owner: gate.owner.clone(),
            });
        }
        Ok(vec![match answer {
            GateAnswer::Resolve { answer } => {
                text("answer", answer)?;
                Event::GateResolved {
                    gate: id.clone(),
                    answer: answer.clone(),
                }
            }
            GateAnswer::Reject { reason } => {
                text("reason", reason)?;
                Event::GateRejected {
                    gate: id.clone(),
                    reason: reason.clone(),
                }
            }
        }])
    }

    pub(super) fn withdraw_gate(
        &self,
        id: &crate::ids::GateId,
        reason: &str,
    ) -> Result<Vec<Event>, Refusal> {
        let gate = self.pending_gate(id)?;
        if self.actor != &gate.opened_by && !self.is_owner() {
            return Err(self.not_permitted("withdraw_gate"));
        }
        text("reason", reason)?;
        Ok(vec![Event::GateWithdrawn {
            gate: id.clone(),
            reason: reason.to_owned(),
        }])
    }

    pub(super) fn check_observation(observation: &Observation) -> Result<(), Refusal> {
        optional_text("observation.summary", &observation.summary)?;
        if observation.facts.len() > 64 {
            return Err(invalid("observation.facts", "at most 64 facts"));
        }
        for (name, value) in &observation.facts {
            text("observation.facts", name)?;
            optional_text("observation.facts", value)?;
        }
        Ok(())
    }

    /// The observations that change something, in order; unchanged ones are dropped.
    pub(super) fn changed_observations(
        &self,
        observations: &[Observation],
    ) -> Result<Vec<Observation>, Refusal> {
        let mut changed: Vec<Observation> = Vec::new();
        for observation in observations {
            Self::check_observation(observation)?;
            let current = changed
                .iter()
                .rev()
                .find(|o| o.key == observation.key)
                .or_else(|| self.state.observations.get(&observation.key));
            if current.map(|o| &o.fingerprint) != Some(&observation.fingerprint) {
                changed.push(observation.clone());
            }
        }
        Ok(changed)
    }

    pub(super) fn record_observation(
        &self,
        observation: &Observation,
    ) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Agent(agent) => self.registered(agent)?,
            Actor::Provider(_) | Actor::Capability(_) | Actor::Validator(_) => {}
            Actor::Person(_) => return Err(self.not_permitted("record_observation")),
        }
        Ok(self
            .changed_observations(std::slice::from_ref(observation))?
            .into_iter()
            .map(|observation| Event::ObservationRecorded { observation })
            .collect())
    }

    pub(super) fn check_evidence_batch(
        &self,
        batch: &[NewEvidence],
    ) -> Result<Vec<NewEvidence>, Refusal> {
        let mut ids = BTreeSet::new();
        for evidence in batch {
            if self.state.evidence.contains_key(&evidence.id) || ids.contains(&evidence.id) {
                return Err(Refusal::DuplicateId {
                    kind: "evidence",
                    id: evidence.id.to_string(),
                });
            }
            optional_text("evidence.summary", &evidence.summary)?;
            for input in &evidence.inputs.evidence {
                if !self.state.evidence.contains_key(input) && !ids.contains(input) {
                    return Err(Refusal::UnknownReference {
                        kind: "input evidence",
                        id: input.to_string(),
                    });
                }
            }
            ids.insert(evidence.id.clone());
        }
        Ok(batch.to_vec())
    }

    pub(super) fn record_evidence(&self, evidence: &NewEvidence) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Validator(_) | Actor::Provider(_) => {}
            Actor::Person(_) if self.is_owner() => {}
            // Agents report evidence only through a settled turn with an independent verdict.
            _ => return Err(self.not_permitted("record_evidence")),
        }
        let batch = self.check_evidence_batch(std::slice::from_ref(evidence))?;
        Ok(batch
            .into_iter()
            .map(|evidence| Event::EvidenceRecorded { evidence })
            .collect())
    }

    pub(super) fn raise_obligation(
        &self,
        id: &ObligationId,
        kind: ObligationKind,
        detail: &str,
        owner: Option<&AgentId>,
    ) -> Result<Vec<Event>, Refusal> {
        match self.actor {
            Actor::Validator(_) => {}
            _ => self.require_planner("raise_obligation")?,
        }
        if self.state.obligations.contains_key(id) {
            return Err(Refusal::DuplicateId {
                kind: "obligation",
                id: id.to_string(),
            });
        }
        text("detail", detail)?;
        if let Some(agent) = owner {
            self.registered(agent)?;
        }
        Ok(vec![Event::ObligationRaised {
            id: id.clone(),
            kind,
            cause: ObligationCause::Proposed,
            detail: detail.to_owned(),
            owner: owner.cloned(),
        }])
    }

    pub(super) fn discharge(
        &self,
        id: &ObligationId,
        changes: &[crate::command::PlanChange],
    ) -> Result<Vec<Event>, Refusal> {
        let obligation =
            self.state
                .obligations
                .get(id)
                .ok_or_else(|| Refusal::UnknownObligation {
                    obligation: id.clone(),
                })?;
        if obligation.discharged.is_some() {
            return Err(Refusal::ObligationClosed {
                obligation: id.clone(),
            });
        }
        match self.actor {
            Actor::Person(_) => self.require_owner()?,
            Actor::Agent(agent) => self.registered(agent)?,
            _ => return Err(self.not_permitted("discharge")),
        }
        if changes.is_empty() {
            return Err(Refusal::NoVisibleChange {
                what: "an obligation is discharged only together with a change to the plan (a new todo, a supersede, a defer, a block, a gate or a closure)".into(),
            });
        }
        // Each change is validated against the state the earlier ones produce, on a scratch
        // copy: discharges are rare, and this keeps one validation path for every change.
        let mut scratch = self.state.clone();
        let mut events = Vec::new();
        for change in changes {
            let recorded = scratch.handle(self.actor, self.now, &change.clone().into_command())?;
            events.extend(recorded.into_iter().map(|r| r.event));
        }
        events.push(Event::ObligationDischarged {
            obligation: id.clone(),
        });
        Ok(events)
    }
}
