//! Turns: beginning one, settling it atomically, and resolving an unknown outcome.

use std::collections::BTreeSet;

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{Continuation, OutcomeResolution, Settlement, Transition, VerdictOutcome};
use crate::event::{Event, SettledTransition};
use crate::evidence::{NewEvidence, Observation};
use crate::ids::{AgentId, ObligationId, TodoId, TurnId};
use crate::obligation::{ObligationCause, ObligationKind};
use crate::refusal::Refusal;
use crate::retry::{Streak, TurnResult};
use crate::time::Duration;
use crate::todo::{ContinuationRecord, ResumeCondition, Todo, TodoClass};

use super::{Ctx, current_epoch, invalid, optional_text, positive, text};

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
        let todo = self.todo(id)?;
        self.gate_clear(todo)?;
        // A turn reserves what its todo expects (or the policy's default) in every dimension; a
        // request may reserve more, never less, and always exactly one turn.
        let reserved = Amounts {
            turns: 1,
            ..reserve.map_or(self.state.expected_usage(todo), |r| {
                r.max(self.state.expected_usage(todo))
            })
        };
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

    /// Moves the turn in flight under the actor's live lease to a new epoch: the session that
    /// began it is fenced, the turn and its reservation carry over, nothing is charged.
    pub(super) fn take_over_turn(
        &self,
        id: &TodoId,
        epoch: u64,
        turn: &TurnId,
        ttl: Option<Duration>,
    ) -> Result<Vec<Event>, Refusal> {
        let todo = self.todo(id)?;
        current_epoch(todo, epoch)?;
        let Some(lease) = &todo.lease else {
            return Err(self.turn_gone(id, turn));
        };
        if self.actor.agent() != Some(&lease.holder) {
            return Err(Refusal::NotLeaseHolder {
                todo: id.clone(),
                actor: self.actor.clone(),
            });
        }
        if lease.turn.as_ref().map(|t| &t.id) != Some(turn) {
            return Err(self.turn_gone(id, turn));
        }
        // An expired lease is no longer the holder's to extend: the turn's outcome is then
        // settled by a readback, or on idempotent work the todo is claimed again.
        if !lease.is_live(self.now) {
            return Err(if todo.outcome_unknown(self.now) {
                Refusal::OutcomeUnknown {
                    todo: id.clone(),
                    turn: turn.clone(),
                }
            } else {
                Refusal::NoLiveLease { todo: id.clone() }
            });
        }
        // Like a renewal, taking over extends the lease: an unregistered holder may not.
        self.registered(&lease.holder)?;
        let ttl = ttl.unwrap_or(self.state.spec.policy.lease_ttl);
        positive("ttl", ttl)?;
        Ok(vec![Event::TurnTakenOver {
            todo: id.clone(),
            turn: turn.clone(),
            from_epoch: epoch,
            epoch: todo.last_epoch + 1,
            expires_at: self.now.plus(ttl),
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
        // An expired lease ends the holder's right to settle: a turn that may have had effects
        // is then of unknown outcome and is settled only by a readback (`resolve_outcome`);
        // idempotent work is simply claimable again.
        if !resolving && !lease.is_live(self.now) {
            return Err(if todo.outcome_unknown(self.now) {
                Refusal::OutcomeUnknown {
                    todo: s.todo.clone(),
                    turn: s.turn.clone(),
                }
            } else {
                Refusal::NoLiveLease {
                    todo: s.todo.clone(),
                }
            });
        }
        if s.verdict.validator == Actor::Agent(lease.holder.clone()) {
            return Err(Refusal::ValidationNotIndependent {
                validator: s.verdict.validator.clone(),
            });
        }
        // On a signed goal the verdict must be its validator's, not something the agent wrote.
        let holder = Actor::Agent(lease.holder.clone());
        crate::identity::verify_verdict(&self.state.spec, s, &[&holder, self.actor])?;
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
        let result = self.classify(s, &evidence, &observations, &transition)?;
        let streak = self
            .state
            .streaks
            .get(&todo.id)
            .cloned()
            .unwrap_or_default()
            .after(&result, &s.turn, self.now);
        let raised =
            self.streak_obligation(todo, &result, &streak, monitor_quiet, &lease.holder)?;
        // Usage beyond the reservation is charged all the same (the truth) and recorded.
        let reserved = lease.turn.as_ref().map_or(Amounts::ZERO, |t| t.reserved);
        let mut events = vec![Event::TurnSettled {
            todo: s.todo.clone(),
            epoch: s.epoch,
            turn: s.turn.clone(),
            verdict: s.verdict.clone(),
            evidence,
            observations,
            transition,
            charged,
            overrun: charged.beyond(reserved),
            result: Some(result),
        }];
        events.extend(raised);
        Ok(events)
    }

    /// The replan obligation a streak raises with this settlement, if any; at most one, and
    /// none while one a streak of the todo raised is open. A monitor's quiet polls count
    /// against `monitor_no_change_limit` (owned by the poller), another todo's idle turns
    /// against `stall_turns`, failed turns against the retry policy's `attempts` (both for
    /// anyone registered).
    fn streak_obligation(
        &self,
        todo: &Todo,
        result: &TurnResult,
        streak: &Streak,
        monitor_quiet: bool,
        holder: &AgentId,
    ) -> Result<Option<Event>, Refusal> {
        if self.streak_raised(&todo.id) {
            return Ok(None);
        }
        let policy = &self.state.spec.policy;
        if let Some(monitor) = &todo.monitor {
            let streak = monitor.no_change_streak.saturating_add(1);
            let limit = policy.monitor_no_change_limit;
            if monitor_quiet && limit > 0 && streak >= limit {
                let cause = ObligationCause::MonitorStalled {
                    todo: todo.id.clone(),
                    streak,
                };
                let detail = format!(
                    "monitor `{}` saw no change in {streak} polls; decide whether to keep waiting, change the route or close",
                    todo.id
                );
                return self.raise("stalled", cause, detail, Some(holder)).map(Some);
            }
        } else if *result == TurnResult::NoProgress
            && policy.stall_turns > 0
            && streak.idle >= policy.stall_turns
        {
            let cause = ObligationCause::NoProgress {
                todo: todo.id.clone(),
                turns: streak.idle,
            };
            let detail = format!(
                "{} settled turns in a row on `{}` changed no criterion, todo or evidence; change the todo, split it or close it",
                streak.idle, todo.id
            );
            return self.raise("stalled", cause, detail, None).map(Some);
        }
        let idle = self.state.idle_turns.saturating_add(1);
        if todo.monitor.is_none()
            && *result == TurnResult::NoProgress
            && policy.stall_goal_turns > 0
            && idle >= policy.stall_goal_turns
            && !self.state.obligations.values().any(|o| {
                o.discharged.is_none() && matches!(o.cause, ObligationCause::GoalStalled { .. })
            })
        {
            let detail = format!(
                "{idle} settled turns in a row on this goal changed no criterion, todo or evidence; change the plan or close the goal"
            );
            let cause = ObligationCause::GoalStalled { turns: idle };
            return self.raise("stalled", cause, detail, None).map(Some);
        }
        let attempts = policy.retry.attempts;
        if result.is_failure() && attempts > 0 && streak.failures >= attempts {
            let classes: Vec<&str> = streak
                .recent
                .iter()
                .map(|n| match &n.result {
                    TurnResult::ExecutorFailed { class, .. } => class.name(),
                    _ => "validation failed",
                })
                .collect();
            let detail = format!(
                "{} turns in a row on `{}` failed (last: {}); fix the cause or change the plan before it runs again",
                streak.failures,
                todo.id,
                classes.join(", ")
            );
            let cause = ObligationCause::TurnsFailing {
                todo: todo.id.clone(),
                failures: streak.failures,
                last: streak.recent.clone(),
            };
            return self.raise("failing", cause, detail, None).map(Some);
        }
        Ok(None)
    }

    /// What a settlement comes to: an executor failure when it reports one, a validation
    /// failure on a `failed` verdict, progress when it changes the todo's status, an
    /// observation or the facts the evidence establishes, and no progress otherwise.
    fn classify(
        &self,
        s: &Settlement,
        evidence: &[NewEvidence],
        observations: &[Observation],
        transition: &SettledTransition,
    ) -> Result<TurnResult, Refusal> {
        if let Some(failure) = &s.failure {
            optional_text("failure.detail", &failure.detail)?;
            return Ok(TurnResult::ExecutorFailed {
                class: failure.class,
                detail: failure.detail.clone(),
            });
        }
        if s.verdict.outcome == VerdictOutcome::Failed {
            return Ok(TurnResult::ValidationFailed {
                detail: s.verdict.summary.clone(),
            });
        }
        let progress = *transition != SettledTransition::KeepOpen
            || !observations.is_empty()
            || evidence.iter().any(|e| !self.state.holds_fact(e));
        Ok(if progress {
            TurnResult::Progress
        } else {
            TurnResult::NoProgress
        })
    }

    /// True while an obligation that a streak of `todo` raised is open.
    fn streak_raised(&self, todo: &TodoId) -> bool {
        self.state
            .obligations
            .values()
            .any(|o| o.discharged.is_none() && o.cause.streak_todo() == Some(todo))
    }

    /// Why `turn` is not the turn in flight under `todo`'s latest lease: that lease ended, and
    /// with it the one turn it could run (settled or cancelled, never to be charged again); or
    /// it runs no turn or another one, or the todo was never leased.
    pub(super) fn turn_gone(&self, todo: &TodoId, turn: &TurnId) -> Refusal {
        let ended = self
            .state
            .todos
            .get(todo)
            .is_some_and(|t| t.lease.is_none() && t.last_epoch > 0);
        if ended {
            Refusal::TurnAlreadyUsed { turn: turn.clone() }
        } else {
            Refusal::TurnNotBegun {
                todo: todo.clone(),
                turn: turn.clone(),
            }
        }
    }

    /// A replan obligation raised by a rule, named `{prefix}-r{revision}` after the revision
    /// that raises it; when someone already gave an obligation that name, a numbered suffix
    /// keeps the event applicable (a duplicate id would not fold).
    pub(super) fn raise(
        &self,
        prefix: &str,
        cause: ObligationCause,
        detail: String,
        owner: Option<&AgentId>,
    ) -> Result<Event, Refusal> {
        let revision = self.state.revision + 1;
        let name = |n: u64| {
            let text = if n == 1 {
                format!("{prefix}-r{revision}")
            } else {
                format!("{prefix}-r{revision}-{n}")
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
            cause,
            detail,
            owner: owner.cloned(),
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
