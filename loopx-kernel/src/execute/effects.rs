//! The outbox: an effect's intent under a live lease, and the record of what became of it.

use crate::actor::Actor;
use crate::event::Event;
use crate::ids::{EffectId, GateId, TodoId};
use crate::outbox::{EffectIntent, EffectOutcome};
use crate::refusal::Refusal;

use super::{Ctx, invalid, optional_text, text};

/// Longest accepted effect kind, target or digest, in bytes: they name things, they are no
/// payload.
const MAX_NAME: usize = 256;

/// Most parameters an effect carries.
const MAX_PARAMS: usize = 16;

impl Ctx<'_> {
    /// Only the holder of the todo's live lease at its current epoch, with a turn in flight,
    /// commits an intent; an effect id is intended once.
    pub(super) fn intend_effect(
        &self,
        id: &TodoId,
        epoch: u64,
        effect: &EffectIntent,
    ) -> Result<Vec<Event>, Refusal> {
        let lease = self.holder_lease(id, epoch)?;
        self.registered(&lease.holder)?;
        let Some(turn) = &lease.turn else {
            return Err(invalid(
                "todo",
                "no turn is in flight under this lease: an effect belongs to a turn; begin one first",
            ));
        };
        check_intent(effect)?;
        if self.state.used_effects.contains(&effect.id) {
            return Err(Refusal::DuplicateId {
                kind: "effect",
                id: effect.id.to_string(),
            });
        }
        Ok(vec![Event::EffectIntended {
            todo: id.clone(),
            epoch,
            holder: lease.holder.clone(),
            turn: turn.id.clone(),
            effect: effect.clone(),
        }])
    }

    /// While the intent's lease is live only its holder records it (it may be performing it);
    /// once the lease is gone or fenced, its former holder, the goal owner, or an agent with a
    /// `take_over` grant and a reason.
    pub(super) fn record_effect(
        &self,
        id: &EffectId,
        outcome: EffectOutcome,
        note: Option<&str>,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let Some(pending) = self.state.pending_effects.get(id) else {
            if self.state.used_effects.contains(id) {
                return Err(Refusal::NoVisibleChange {
                    what: format!("effect `{id}` was already recorded"),
                });
            }
            return Err(Refusal::UnknownReference {
                kind: "effect",
                id: id.to_string(),
            });
        };
        let todo = self.todo(&pending.todo)?;
        let grant_reason = if pending.is_live(self.state, self.now) {
            if self.actor.agent() != Some(&pending.holder) {
                return Err(Refusal::NotLeaseHolder {
                    todo: pending.todo.clone(),
                    actor: self.actor.clone(),
                });
            }
            None
        } else {
            self.holder_or_take_over(todo, &pending.holder, grant_reason, "record_effect")?
        };
        if let Some(note) = note {
            optional_text("note", note)?;
        }
        Ok(vec![Event::EffectRecorded {
            effect: id.clone(),
            todo: pending.todo.clone(),
            outcome,
            note: note.map(str::to_owned),
            grant_reason,
        }])
    }

    /// A provider commits the intent of a pending gate's one notice to its owner, whose login
    /// at that provider the goal owner mapped; a gate is noticed once.
    pub(super) fn intend_gate_notice(
        &self,
        gate: &GateId,
        effect: &EffectIntent,
    ) -> Result<Vec<Event>, Refusal> {
        let Actor::Provider(provider) = self.actor else {
            return Err(self.not_permitted("intend_gate_notice"));
        };
        let pending = self.pending_gate(gate)?;
        let mapped = match &pending.owner {
            Actor::Person(person) => self.state.login_of(person, provider).is_some(),
            _ => false,
        };
        if !mapped {
            return Err(Refusal::GateNoticeUnmapped {
                gate: gate.clone(),
                provider: provider.clone(),
                owner: pending.owner.clone(),
            });
        }
        if self.state.gate_notices.contains_key(gate) {
            return Err(Refusal::GateNoticeExists { gate: gate.clone() });
        }
        check_intent(effect)?;
        if self.state.used_effects.contains(&effect.id) {
            return Err(Refusal::DuplicateId {
                kind: "effect",
                id: effect.id.to_string(),
            });
        }
        Ok(vec![Event::GateNoticeIntended {
            gate: gate.clone(),
            provider: provider.clone(),
            effect: effect.clone(),
        }])
    }

    /// The provider that intended a gate's notice records what became of it, once.
    pub(super) fn record_gate_notice(
        &self,
        gate: &GateId,
        outcome: EffectOutcome,
        note: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let Actor::Provider(provider) = self.actor else {
            return Err(self.not_permitted("record_gate_notice"));
        };
        match self.state.gate_notices.get(gate) {
            Some(notice) if notice.is_pending() && &notice.provider == provider => {}
            _ => return Err(Refusal::GateNoticeNotPending { gate: gate.clone() }),
        }
        if let Some(note) = note {
            optional_text("note", note)?;
        }
        Ok(vec![Event::GateNoticeRecorded {
            gate: gate.clone(),
            outcome,
            note: note.map(str::to_owned),
        }])
    }
}

/// An intent's fields read as text within their bounds, and its digest is theirs.
fn check_intent(effect: &EffectIntent) -> Result<(), Refusal> {
    for (field, value) in [
        ("effect.kind", &effect.kind),
        ("effect.target", &effect.target),
        ("effect.key", &effect.key),
        ("effect.digest", &effect.digest),
    ] {
        text(field, value)?;
        if value.len() > MAX_NAME {
            return Err(invalid(field, format!("longer than {MAX_NAME} bytes")));
        }
    }
    if effect.params.len() > MAX_PARAMS {
        return Err(invalid(
            "effect.params",
            format!("more than {MAX_PARAMS} parameters"),
        ));
    }
    for (name, value) in &effect.params {
        text("effect.params", name)?;
        if name.len() > MAX_NAME {
            return Err(invalid(
                "effect.params",
                format!("a name longer than {MAX_NAME} bytes"),
            ));
        }
        optional_text("effect.params", value)?;
    }
    let digest = EffectIntent::digest_of(&effect.kind, &effect.target, &effect.key, &effect.params);
    if effect.digest != digest {
        return Err(invalid(
            "effect.digest",
            "does not match the effect's kind, target, key and parameters",
        ));
    }
    Ok(())
}
