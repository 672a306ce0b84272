//! Turns: beginning one, settling it atomically, and resolving an unknown outcome.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{Continuation, OutcomeResolution, Settlement, Transition, VerdictOutcome};
use crate::event::{Event, SettledTransition};
use crate::evidence::Observation;
use crate::ids::{AgentId, ObligationId, TodoId, TurnId};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::refusal::Refusal;
use crate::todo::{ContinuationRecord, ResumeCondition, Todo, TodoClass};

use super::{Ctx, current_epoch, invalid, optional_text, text};

impl Ctx<'_> {
    pub(super) fn begin_turn(
        &self,
        id: &TodoId,
        epoch: u64,
        turn: &TurnId,
        reserve: Option<Amounts>,
    ) -> Result<Vec<Event>, Refusal> {
        let lease = self.holder_lease(id, epoch)?;
        self.registered(&lease.holder)?;
        if let Some(current) = &lease.turn {
            return Err(Refusal::TurnInFlight {
                todo: id.clone(),
                turn: current.id.clone(),
            });
        }
        if self.state.used_turns.contains(turn) {
            return Err(Refusal::TurnAlreadyUsed { turn: turn.clone() });
        }
        let todo = self.todo(id)?;
        self.gate_clear(todo)?;
        let mut reserved = reserve.unwrap_or(self.state.spec.policy.default_reservation);
        reserved.turns = 1;
        if let Some(dimension) = self.state.ledger.shortfall(reserved) {
            return Err(Refusal::BudgetExhausted {
                dimension,
                scope: "goal".into(),
            });
        }
        if let Some(dimension) = todo.budget.as_ref().and_then(|l| l.shortfall(reserved)) {
            return Err(Refusal::BudgetExhausted {
                dimension,
                scope: format!("todo {id}"),
            });
        }
        Ok(vec![Event::TurnBegun {
            todo: id.clone(),
            epoch,
            turn: turn.clone(),
            reserved,
        }])
    }

    /// Validates a settlement. `resolving` is set when a readback resolves an expired turn: the
    /// lease may then be expired and the actor need not be its holder.
    pub(super) fn settle(&self, s: &Settlement, resolving: bool) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(&s.todo)?;
        current_epoch(todo, s.epoch)?;
        let Some(lease) = &todo.lease else {
            return Err(self.turn_gone(&s.todo, &s.turn));
        };
        if !resolving && self.actor.agent() != Some(&lease.holder) {
            return Err(Refusal::NotLeaseHolder {
                todo: s.todo.clone(),
                actor: self.actor.clone(),
            });
        }
        if lease.turn.as_ref().map(|t| &t.id) != Some(&s.turn) {
            return Err(self.turn_gone(&s.todo, &s.turn));
        }
        if s.verdict.validator == Actor::Agent(lease.holder.clone()) {
            return Err(Refusal::ValidationNotIndependent {
                validator: s.verdict.validator.clone(),
            });
        }
        optional_text("verdict.summary", &s.verdict.summary)?;
        let evidence = self.check_evidence_batch(&s.evidence)?;
        let observations = self.changed_observations(&s.observations)?;
        let transition = self.settled_transition(todo, s, &observations)?;
        let monitor_quiet = match &todo.class {
            TodoClass::Monitor(spec) => !observations.iter().any(|o| o.key == spec.watches),
            _ => false,
        };
        // An unchanged monitor poll is a no-op for the budget; every other settled turn is
        // charged once, what it actually used, and always as exactly one turn.
        let charged = if monitor_quiet && transition == SettledTransition::KeepOpen {
            Amounts::ZERO
        } else {
            Amounts {
                turns: 1,
                ..s.usage
            }
        };
        let mut events = vec![Event::TurnSettled {
            todo: s.todo.clone(),
            epoch: s.epoch,
            turn: s.turn.clone(),
            verdict: s.verdict.clone(),
            evidence,
            observations,
            transition,
            charged,
        }];
        if monitor_quiet && let Some(monitor) = &todo.monitor {
            let streak = monitor.no_change_streak.saturating_add(1);
            let limit = self.state.spec.policy.monitor_no_change_limit;
            let already_raised = self.state.obligations.values().any(|o| {
                o.discharged.is_none()
                    && matches!(&o.cause, ObligationCause::MonitorStalled { todo: t, .. } if t == &todo.id)
            });
            if limit > 0 && streak >= limit && !already_raised {
                events.push(self.stalled_monitor(todo, streak, &lease.holder)?);
            }
        }
        Ok(events)
    }

    pub(super) fn turn_gone(&self, todo: &TodoId, turn: &TurnId) -> Refusal {
        if self.state.used_turns.contains(turn) {
            Refusal::TurnAlreadyUsed { turn: turn.clone() }
        } else {
            Refusal::TurnNotBegun {
                todo: todo.clone(),
                turn: turn.clone(),
            }
        }
    }

    pub(super) fn stalled_monitor(
        &self,
        todo: &Todo,
        streak: u32,
        holder: &AgentId,
    ) -> Result<Event, Refusal> {
        // Named after the revision that raises it; when someone already gave an obligation that
        // name, a numbered suffix keeps the event applicable (a duplicate id would not fold).
        let revision = self.state.revision + 1;
        let name = |n: u64| {
            let text = if n == 1 {
                format!("stalled-r{revision}")
            } else {
                format!("stalled-r{revision}-{n}")
            };
            ObligationId::new(text).map_err(|e| invalid("obligation id", e.to_string()))
        };
        let mut n = 1;
        let mut id = name(n)?;
        while self.state.obligations.contains_key(&id) {
            n += 1;
            id = name(n)?;
        }
        Ok(Event::ObligationRaised {
            id,
            kind: ObligationKind::Replan,
            cause: ObligationCause::MonitorStalled {
                todo: todo.id.clone(),
                streak,
            },
            detail: format!(
                "monitor `{}` saw no change in {streak} polls; decide whether to keep waiting, change the route or close",
                todo.id
            ),
            owner: Some(holder.clone()),
        })
    }

    pub(super) fn settled_transition(
        &self,
        todo: &Todo,
        s: &Settlement,
        observations: &[Observation],
    ) -> Result<SettledTransition, Refusal> {
        Ok(match &s.transition {
            Transition::KeepOpen => SettledTransition::KeepOpen,
            Transition::Block { reason } => {
                text("reason", reason)?;
                SettledTransition::Block {
                    reason: reason.clone(),
                }
            }
            Transition::Defer { until } => {
                self.check_resume_condition(todo, until)?;
                let baseline = match until {
                    ResumeCondition::ObservationChanged { key } => observations
                        .iter()
                        .rev()
                        .find(|o| &o.key == key)
                        .map(|o| o.fingerprint.clone())
                        .or_else(|| self.baseline(until)),
                    _ => None,
                };
                SettledTransition::Defer {
                    until: until.clone(),
                    baseline,
                }
            }
            Transition::Complete { continuation } => {
                if s.verdict.outcome != VerdictOutcome::Passed {
                    return Err(Refusal::ValidationInsufficient {
                        todo: todo.id.clone(),
                        verdict: match s.verdict.outcome {
                            VerdictOutcome::Progress => "progress",
                            _ => "failed",
                        },
                    });
                }
                let (continuation, successors) = match continuation {
                    Continuation::NoFollowUp => (ContinuationRecord::NoFollowUp, vec![]),
                    Continuation::GoalStillActive => (ContinuationRecord::GoalStillActive, vec![]),
                    Continuation::Successors(new) => {
                        if new.is_empty() {
                            return Err(Refusal::InvalidContinuation {
                                problem: "`successors` needs at least one todo; use `no_follow_up` or `goal_still_active` otherwise".into(),
                            });
                        }
                        let mut batch = BTreeSet::new();
                        let mut checked = Vec::new();
                        for successor in new {
                            checked.push(self.check_new_todo(successor, &batch)?);
                            batch.insert(successor.id.clone());
                        }
                        let ids = checked.iter().map(|t| t.id.clone()).collect();
                        (ContinuationRecord::Successors(ids), checked)
                    }
                };
                SettledTransition::Complete {
                    continuation,
                    successors,
                }
            }
        })
    }

    pub(super) fn resolve_outcome(
        &self,
        id: &TodoId,
        turn: &TurnId,
        resolution: &OutcomeResolution,
        grant_reason: Option<&str>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        let Some(lease) = todo
            .lease
            .as_ref()
            .filter(|l| l.turn.as_ref().map(|t| &t.id) == Some(turn))
        else {
            return Err(self.turn_gone(id, turn));
        };
        if lease.is_live(self.now) {
            return Err(Refusal::TurnInFlight {
                todo: id.clone(),
                turn: turn.clone(),
            });
        }
        let grant_reason =
            self.holder_or_take_over(todo, &lease.holder, grant_reason, "resolve_outcome")?;
        match resolution {
            OutcomeResolution::Absent { note } => {
                text("note", note)?;
                Ok(vec![Event::OutcomeAbsent {
                    todo: id.clone(),
                    turn: turn.clone(),
                    note: note.clone(),
                    grant_reason,
                }])
            }
            OutcomeResolution::Committed { settlement } => {
                if &settlement.todo != id || &settlement.turn != turn {
                    return Err(invalid(
                        "settlement",
                        "must name the same todo and turn as the resolution",
                    ));
                }
                self.settle(settlement, true)
            }
        }
    }
}
