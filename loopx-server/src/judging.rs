//! The one path a fact from outside takes into a goal, shared by GitHub's deliveries and the
//! schedules that poll watches: the observations recorded as their provider (signed with its
//! key when the keyring holds one), then the goal judged in rounds by the capability it is
//! bound to, for each registered agent, each proposal submitted as the capability.

use std::sync::Arc;

use loopx_kernel::engine::{JudgeRound, Submission, dead_letter, record_evidence};
use loopx_kernel::prelude::*;
use loopx_kernel::seams::StoreError;
use loopx_kernel::write::{SubmitError, Submitted};
use loopx_kernel::{Actor, Command, Keyring, OperationId, Refusal};

use crate::capabilities::{Bound, Registry};
use crate::github::GoalOutcome;

/// How many judgement rounds one recorded fact may run on a goal.
const MAX_ROUNDS: usize = 8;

/// What recording and judging needs: where, when, which capabilities, signed by whom.
#[derive(Clone)]
pub(crate) struct Judging {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) keyring: Arc<Keyring>,
    /// What posts gate notices to their owners' pull requests ([`crate::notices`]); none
    /// without a GitHub client.
    pub(crate) notifier: Option<crate::notices::Notifier>,
}

impl Judging {
    /// Recording and judging on `store` at `clock`'s time, with the shipped capabilities
    /// ([`Registry::shipped`]), every command unsigned and no gate noticed until the host says
    /// otherwise.
    pub(crate) fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Judging {
        Judging {
            store,
            clock,
            registry: Arc::new(Registry::shipped()),
            keyring: Arc::new(Keyring::new()),
            notifier: None,
        }
    }

    /// Submits each of `records` on `goal` (a provider's `RecordObservation`, as
    /// [`record_observation`](loopx_kernel::engine::record_observation) or a delivery builds
    /// it), then the evidence each recorded fact establishes by the goal's capability's rule
    /// ([`Bound::evidence`], recorded as the same provider), then judges the goal. The first
    /// refusal of a record ends the pass (nothing after it is recorded or judged), is named in
    /// the outcome and keeps the refused record as a dead letter from `origin` (where the
    /// facts came from, in words), so that it is not lost.
    ///
    /// # Errors
    /// The store's failure; what committed before it stays committed and replays.
    pub(crate) async fn record_and_judge(
        &self,
        goal: &GoalId,
        records: Vec<Submission>,
        origin: &str,
    ) -> Result<GoalOutcome, StoreError> {
        let mut outcome = GoalOutcome {
            goal: goal.clone(),
            changed: false,
            replayed: false,
            refused: None,
            reason: None,
            proposed: Vec::new(),
        };
        let mut state = None;
        let mut facts = Vec::new();
        for record in records {
            match self
                .submit(goal, &record.actor, &record.command, &record.operation)
                .await?
            {
                Ok(submitted) => {
                    // A fact refused before and recorded now (GitHub redelivered it after the
                    // cause was fixed) is no longer a dead letter.
                    if !submitted.replayed && !submitted.events.is_empty() {
                        self.store.drop_dead_letter(goal, &record.operation).await?;
                    }
                    outcome.changed |= !submitted.events.is_empty();
                    outcome.replayed |= submitted.replayed;
                    state = Some(submitted.state);
                    facts.push(record);
                }
                Err(refusal) => {
                    let now = self.clock.now();
                    let letter = dead_letter(goal, &record, &refusal, origin.to_owned(), now);
                    self.store.keep_dead_letter(letter).await?;
                    outcome.refused = Some(refusal.code());
                    outcome.reason = Some(refusal.to_string());
                    return Ok(outcome);
                }
            }
        }
        let Some(mut state) = state else {
            return Ok(outcome);
        };
        let Some(bound) = self.bound(&state) else {
            return Ok(outcome);
        };
        // Boxed: each holds a write path's future, and the pass that awaits them stays small.
        for fact in &facts {
            let recording = Box::pin(self.record_evidence(goal, &bound, state, fact));
            let (recorded, changed) = recording.await?;
            state = recorded;
            outcome.changed |= changed;
        }
        outcome.proposed = Box::pin(self.judge(goal, &bound, state)).await?;
        Ok(outcome)
    }

    /// The capability the goal is bound to, built by the registry; `None` for a goal bound to
    /// none, or to one the registry cannot build (logged: `loopx run` reports it to the agent).
    fn bound(&self, state: &GoalState) -> Option<Bound> {
        match self.registry.bind_goal(&state.spec) {
            Ok(bound) => bound,
            Err(error) => {
                tracing::warn!(error = %error, "the goal's capability cannot be built");
                None
            }
        }
    }

    /// Records the evidence a provider's recorded fact establishes by the capability's rule
    /// ([`record_evidence`], as the engine does). The goal's state after it, and whether
    /// anything was written. A refusal is logged and changes nothing.
    async fn record_evidence(
        &self,
        goal: &GoalId,
        bound: &Bound,
        state: GoalState,
        fact: &Submission,
    ) -> Result<(GoalState, bool), StoreError> {
        let Some(evidence) = bound
            .evidence()
            .and_then(|rule| record_evidence(rule, &state, fact))
        else {
            return Ok((state, false));
        };
        match self
            .submit(
                goal,
                &evidence.actor,
                &evidence.command,
                &evidence.operation,
            )
            .await?
        {
            Ok(submitted) => Ok((submitted.state, !submitted.events.is_empty())),
            Err(refusal) => {
                tracing::debug!(code = refusal.code(), "the evidence was refused");
                Ok((state, false))
            }
        }
    }

    /// One judgement round of the goal's capability for each registered agent, repeated while
    /// a round changes something (at most [`MAX_ROUNDS`]); the commands the goal accepted, by
    /// name.
    #[tracing::instrument(name = "judge", skip_all, fields(goal = %goal))]
    async fn judge(
        &self,
        goal: &GoalId,
        bound: &Bound,
        mut state: GoalState,
    ) -> Result<Vec<String>, StoreError> {
        let mut accepted = Vec::new();
        let agents: Vec<AgentId> = state.spec.agents.iter().cloned().collect();
        // A capability moves a line of work one transition per judgement (the fix todo comes
        // after the todo it replaces is superseded), so rounds repeat until one changes
        // nothing, a bounded number of times.
        for _ in 0..MAX_ROUNDS {
            let before = accepted.len();
            for agent in &agents {
                let mut round = JudgeRound::new([bound.capability()], agent, self.clock.now());
                while let Some(proposed) = round.next_proposal(&state) {
                    let Submission {
                        actor,
                        command,
                        operation,
                    } = proposed.submission;
                    match self.submit(goal, &actor, &command, &operation).await? {
                        Ok(submitted) if !submitted.events.is_empty() => {
                            state = submitted.state;
                            accepted.push(command.name().to_owned());
                        }
                        Ok(submitted) => state = submitted.state,
                        Err(refusal) => {
                            tracing::debug!(code = refusal.code(), "a proposal was refused");
                        }
                    }
                }
            }
            if accepted.len() == before {
                break;
            }
        }
        Ok(accepted)
    }

    /// Submits through the kernel's write path, signed when the keyring holds `actor`'s key.
    /// A refusal is the inner error; a store failure the outer one.
    pub(crate) async fn submit(
        &self,
        goal: &GoalId,
        actor: &Actor,
        command: &Command,
        operation: &OperationId,
    ) -> Result<Result<Submitted, Refusal>, StoreError> {
        let mut handle = self.store.goal(goal).paced(&*self.clock);
        if let Some(signer) = self.keyring.signer(actor) {
            handle = handle.signed_by(signer);
        }
        match handle
            .submit_operation(actor, self.clock.now(), command, operation)
            .await
        {
            Ok(submitted) => Ok(Ok(submitted)),
            Err(SubmitError::Refused(refusal)) => Ok(Err(refusal)),
            Err(SubmitError::Store(error)) => Err(error),
            Err(other) => Err(StoreError::Unavailable {
                detail: other.to_string(),
            }),
        }
    }
}
