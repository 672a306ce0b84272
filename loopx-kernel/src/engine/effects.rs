//! The engine's side of the outbox: a turn's effects are performed only after their intent
//! committed under the turn's lease epoch, and a pending intent is resolved by reading it back,
//! by the rule of [`outbox::resolve`](crate::outbox::resolve).

use serde::Serialize;

use crate::actor::Actor;
use crate::command::Command;
use crate::ids::{EffectId, TodoId};
use crate::outbox::{self, EffectIntent, EffectOutcome, PendingEffect, Resolution};
use crate::refusal::Refusal;
use crate::retry::{FailureClass, TurnFailure};
use crate::seams::{EffectRequest, EffectStatus, TurnRequest};
use crate::state::GoalState;

use super::{Engine, EngineError, StepReport, Written, operation};

/// What became of one effect in a step, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EffectReport {
    /// The effect's id in the outbox.
    pub effect: EffectId,
    /// The todo whose lease authorised it.
    pub todo: TodoId,
    /// Its kind, e.g. `github.comment`.
    pub kind: String,
    /// What it acts on.
    pub target: String,
    /// What the step did about it.
    pub outcome: EffectStep,
}

/// What a step did about one effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStep {
    /// Its intent committed and the effector performed it; recorded `performed`.
    Performed,
    /// A pending intent was read back as done; recorded `performed` without performing again.
    ReadBack,
    /// It did not happen and never will under its intent; recorded `absent`.
    Absent,
    /// Nobody can tell whether it happened; it stays pending and goes to `repair`.
    Unresolved,
    /// Its intent was refused (a lease fenced out by a newer epoch or expired): not performed.
    Fenced,
}

/// How running a turn's effects ended.
pub(super) enum Effects {
    /// Every effect is performed and recorded.
    Done,
    /// An effect could not be performed (recorded absent, or no effector): the turn settles
    /// as failed.
    Failed(TurnFailure),
    /// An effect's outcome is unknown: it stays pending, the step's decision is `repair`.
    Unknown(EffectId),
    /// The lease was fenced or lost: nothing more is performed or settled.
    LeaseLost(Refusal),
}

impl Engine {
    /// Runs a turn's effects in order, each through the outbox: an intent already pending
    /// (from a run before a crash) is read back first; one already recorded is not run again.
    pub(super) async fn run_effects(
        &self,
        state: &mut GoalState,
        request: &TurnRequest,
        effects: &[EffectRequest],
        report: &mut StepReport,
    ) -> Result<Effects, EngineError> {
        if effects.is_empty() {
            return Ok(Effects::Done);
        }
        if self.effector.is_none() {
            return Ok(Effects::Failed(TurnFailure {
                class: FailureClass::Unavailable,
                detail: format!(
                    "the turn asked for {} external effect(s) and this engine has no effector",
                    effects.len()
                ),
            }));
        }
        // The epoch this run of the turn began under: its effects' keys stay the same when it is
        // taken over, and its intents are those of this todo and turn from that epoch on.
        let began_under = state
            .todos
            .get(&request.todo)
            .and_then(crate::Todo::turn_in_flight)
            .filter(|turn| turn.id == request.turn)
            .map_or(request.epoch, |turn| turn.began_under);
        // Intents this run left under an earlier epoch (a session that took the turn over
        // fenced them) are read back first: each is recorded performed or absent, or the turn
        // goes to repair; an effect found done is not performed again (the effector finds it by
        // its idempotency key, the same under every epoch of the run).
        let fenced: Vec<PendingEffect> = state
            .pending_effects
            .values()
            .filter(|p| {
                p.todo == request.todo
                    && p.turn == request.turn
                    && (began_under..request.epoch).contains(&p.epoch)
            })
            .cloned()
            .collect();
        for pending in fenced {
            if let Some(EffectStep::Unresolved) | None =
                self.resolve_pending(state, &pending, report).await?
            {
                return Ok(Effects::Unknown(pending.effect.id.clone()));
            }
        }
        for (n, asked) in effects.iter().enumerate() {
            let id = outbox::effect_id(&request.todo, &request.turn, began_under, request.epoch, n);
            if let Some(pending) = state.pending_effects.get(&id).cloned() {
                match self.resolve_pending(state, &pending, report).await? {
                    Some(EffectStep::Performed | EffectStep::ReadBack) => continue,
                    Some(EffectStep::Absent) => return Ok(Effects::Failed(absent(&id))),
                    Some(EffectStep::Unresolved | EffectStep::Fenced) | None => {
                        return Ok(Effects::Unknown(id));
                    }
                }
            }
            if state.used_effects.contains(&id) {
                continue; // recorded by an earlier session of this run
            }
            let key = outbox::idempotency_key(
                &request.goal,
                &request.todo,
                &request.turn,
                began_under,
                n,
            );
            let intent = EffectIntent::new(
                id.clone(),
                asked.kind.clone(),
                asked.target.clone(),
                key,
                asked.params.clone(),
            );
            let command = Command::IntendEffect {
                todo: request.todo.clone(),
                epoch: request.epoch,
                effect: intent.clone(),
            };
            let op = operation(&["intend", request.goal.as_str(), id.as_str()]);
            if let Written::Refused(refusal) =
                self.write(state, &self.as_agent(), &command, &op).await?
            {
                report
                    .effects
                    .push(entry(&intent, &request.todo, EffectStep::Fenced));
                return Ok(Effects::LeaseLost(refusal));
            }
            let Some(pending) = state.pending_effects.get(&id).cloned() else {
                continue; // a replayed intent another run already recorded
            };
            match self.perform(state, &pending, report).await? {
                EffectStep::Performed | EffectStep::ReadBack => {}
                EffectStep::Absent => return Ok(Effects::Failed(absent(&id))),
                EffectStep::Unresolved | EffectStep::Fenced => return Ok(Effects::Unknown(id)),
            }
        }
        Ok(Effects::Done)
    }

    /// Resolves the pending intents of this engine's agent whose lease is gone (expired,
    /// settled, or fenced by a newer epoch), by reading each back: done → `performed`, absent →
    /// `absent` (never performed under a dead epoch), unknown → left for `repair`.
    pub(super) async fn resolve_orphaned_effects(
        &self,
        state: &mut GoalState,
        report: &mut StepReport,
    ) -> Result<(), EngineError> {
        if self.effector.is_none() {
            return Ok(());
        }
        let now = self.clock.now();
        let orphans: Vec<PendingEffect> = state
            .pending_effects
            .values()
            .filter(|p| p.holder == self.agent && !p.is_live(state, now))
            .cloned()
            .collect();
        for pending in orphans {
            self.resolve_pending(state, &pending, report).await?;
        }
        Ok(())
    }

    /// Reads one pending intent back and acts by the outbox's rule; `None` without an effector.
    async fn resolve_pending(
        &self,
        state: &mut GoalState,
        pending: &PendingEffect,
        report: &mut StepReport,
    ) -> Result<Option<EffectStep>, EngineError> {
        let Some(effector) = &self.effector else {
            return Ok(None);
        };
        let effect = pending.effect(&state.spec.id);
        let status = effector
            .readback(&effect)
            .await
            .unwrap_or(EffectStatus::Unknown);
        let live = pending.is_live(state, self.clock.now());
        let step = match outbox::resolve(status, live) {
            Resolution::RecordPerformed => {
                self.record(
                    state,
                    pending,
                    EffectOutcome::Performed,
                    "read back: it happened",
                )
                .await?;
                EffectStep::ReadBack
            }
            Resolution::Perform => return self.perform(state, pending, report).await.map(Some),
            Resolution::RecordAbsent => {
                self.record(
                    state,
                    pending,
                    EffectOutcome::Absent,
                    "read back: it did not happen, and its lease epoch is fenced",
                )
                .await?;
                EffectStep::Absent
            }
            Resolution::Repair => EffectStep::Unresolved,
        };
        report
            .effects
            .push(entry(&pending.effect, &pending.todo, step));
        Ok(Some(step))
    }

    /// Performs a live pending intent once and records what happened; a failed call is read
    /// back before anything is recorded.
    async fn perform(
        &self,
        state: &mut GoalState,
        pending: &PendingEffect,
        report: &mut StepReport,
    ) -> Result<EffectStep, EngineError> {
        let Some(effector) = &self.effector else {
            return Ok(EffectStep::Unresolved);
        };
        let effect = pending.effect(&state.spec.id);
        let step = match effector.perform(&effect).await {
            Ok(EffectStatus::Committed) => {
                self.record(state, pending, EffectOutcome::Performed, "performed")
                    .await?;
                EffectStep::Performed
            }
            failed => match effector
                .readback(&effect)
                .await
                .unwrap_or(EffectStatus::Unknown)
            {
                EffectStatus::Committed => {
                    self.record(
                        state,
                        pending,
                        EffectOutcome::Performed,
                        "read back: it happened",
                    )
                    .await?;
                    EffectStep::ReadBack
                }
                // The call failed and nothing was written: the id is spent, the turn fails and
                // a later turn asks again under a new id.
                EffectStatus::Absent => {
                    let why = match failed {
                        Err(error) => format!("the effector failed: {error}"),
                        Ok(status) => format!("the effector answered {status:?}"),
                    };
                    self.record(state, pending, EffectOutcome::Absent, &why)
                        .await?;
                    EffectStep::Absent
                }
                EffectStatus::Unknown => EffectStep::Unresolved,
            },
        };
        report
            .effects
            .push(entry(&pending.effect, &pending.todo, step));
        Ok(step)
    }

    async fn record(
        &self,
        state: &mut GoalState,
        pending: &PendingEffect,
        outcome: EffectOutcome,
        note: &str,
    ) -> Result<(), EngineError> {
        let id = &pending.effect.id;
        let command = Command::RecordEffect {
            id: id.clone(),
            outcome,
            // Control characters would make the record invalid; an effector's message may hold them.
            note: Some(
                note.chars()
                    .take(crate::MAX_TEXT / 4)
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect(),
            ),
            grant_reason: None,
        };
        let op = operation(&[
            "effect",
            state.spec.id.as_str(),
            id.as_str(),
            outcome.name(),
        ]);
        // A refusal means another writer recorded it first: it is pending no more either way.
        self.write(state, &Actor::Agent(self.agent.clone()), &command, &op)
            .await?;
        Ok(())
    }
}

fn entry(intent: &EffectIntent, todo: &TodoId, outcome: EffectStep) -> EffectReport {
    EffectReport {
        effect: intent.id.clone(),
        todo: todo.clone(),
        kind: intent.kind.clone(),
        target: intent.target.clone(),
        outcome,
    }
}

fn absent(id: &EffectId) -> TurnFailure {
    TurnFailure {
        class: FailureClass::Unavailable,
        detail: format!("effect `{id}` could not be performed; it is recorded absent"),
    }
}
