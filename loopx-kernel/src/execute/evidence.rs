//! Observations and evidence: the facts a goal records about the world.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::event::Event;
use crate::evidence::{NewEvidence, Observation, SourceOrder};
use crate::refusal::Refusal;

use super::{Ctx, invalid, optional_text, text};

impl Ctx<'_> {
    pub(super) fn check_observation(observation: &Observation) -> Result<(), Refusal> {
        optional_text("observation.summary", &observation.summary)?;
        if let Some(etag) = &observation.etag {
            optional_text("observation.etag", etag)?;
        }
        if observation.facts.len() > 64 {
            return Err(invalid("observation.facts", "at most 64 facts"));
        }
        for (name, value) in &observation.facts {
            text("observation.facts", name)?;
            optional_text("observation.facts", value)?;
        }
        Ok(())
    }

    /// The observations that change something, in order. Dropped: unchanged ones (the same
    /// fingerprint as the stream's current one), and older ones — before the stream's current
    /// observation in the source's own order — so that a late delivery never moves a fact
    /// back and the same delivery twice is one observation.
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
            let unchanged = current.map(|o| &o.fingerprint) == Some(&observation.fingerprint);
            let older = SourceOrder::is_older(
                observation.order.as_ref(),
                current.and_then(|o| o.order.as_ref()),
            );
            if !unchanged && !older {
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
}
