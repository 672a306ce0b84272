//! Gates and obligations: the questions waiting on people and the duties the plan owes.

use crate::actor::Actor;
use crate::command::GateAnswer;
use crate::event::Event;
use crate::gate::NewGate;
use crate::ids::{AgentId, ObligationId};
use crate::login::{Relay, check_login};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::refusal::Refusal;

use super::{Ctx, invalid, text};

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
        check_answer(answer)?;
        Ok(vec![match answer {
            GateAnswer::Resolve { answer } => Event::GateResolved {
                gate: id.clone(),
                answer: answer.clone(),
            },
            GateAnswer::Reject { reason } => Event::GateRejected {
                gate: id.clone(),
                reason: reason.clone(),
            },
        }])
    }

    /// A provider relays an answer its login wrote: the provider authenticated the login (a
    /// delivery's signature), and the owner's mapping says whom it speaks for. Nobody but the
    /// gate's owner answers, through a relay or not.
    pub(super) fn relay_gate_answer(
        &self,
        id: &crate::ids::GateId,
        answer: &GateAnswer,
        relay: &Relay,
    ) -> Result<Vec<Event>, Refusal> {
        let Actor::Provider(provider) = self.actor else {
            return Err(self.not_permitted("relay_gate_answer"));
        };
        let gate = self.pending_gate(id)?;
        check_login(&relay.login).map_err(|problem| invalid("relay.login", problem))?;
        text("relay.delivery", &relay.delivery)?;
        if let Some(message) = &relay.message {
            text("relay.message", message)?;
        }
        let person = match &gate.owner {
            Actor::Person(owner)
                if self.state.person_of_login(provider, &relay.login) == Some(owner) =>
            {
                owner
            }
            _ => {
                return Err(Refusal::RelayNotGateOwner {
                    gate: id.clone(),
                    provider: provider.clone(),
                    login: relay.login.clone(),
                    owner: gate.owner.clone(),
                });
            }
        };
        check_answer(answer)?;
        Ok(vec![Event::GateAnswerRelayed {
            gate: id.clone(),
            answer: answer.clone(),
            person: person.clone(),
            relay: relay.clone(),
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

/// An answer's text, or a rejection's reason, is checked like every free text.
fn check_answer(answer: &GateAnswer) -> Result<(), Refusal> {
    match answer {
        GateAnswer::Resolve { answer } => text("answer", answer),
        GateAnswer::Reject { reason } => text("reason", reason),
    }
}
