//! The engine: one agent's loop over the seams, with no I/O of its own.
//!
//! One [`Engine::step`] for a goal is (after reporting the agent's workspace when it changed,
//! and retiring the goal's inert work when a batch of it is due: see [`crate::retire`]):
//!
//! 1. **observe** — poll the due [`Watch`]es through their providers; changed observations are
//!    recorded by the provider actor, unchanged ones are dropped by the kernel;
//! 2. **judge** — every capability judges the goal as it stands (a [`JudgeRound`]); its
//!    proposals are submitted with the capability as actor and validated like any other
//!    command;
//! 3. **decide** — the kernel's [`decide`] for the engine's agent;
//! 4. on `continue`, **one turn** — claim the todo, record a *prepared turn* (the `turn_begun`
//!    event: the journal entry with the turn id and the budget reservation of the todo's
//!    expected usage, in every dimension; a turn whose reservation does not fit is not begun)
//!    **before** the executor runs, run the executor while renewing the lease, perform the
//!    effects its report asks for through the outbox (each intent committed under the lease
//!    epoch first, then performed, then recorded; see [`crate::outbox`]), have the independent
//!    validator judge the result, and settle everything in one atomic commit (an executor's
//!    error is settled as a failed turn of its class, never dropped or re-run at once: the
//!    goal's retry policy makes the next decision wait, then replan);
//! 5. **decide again** and report.
//!
//! A turn is charged once, in full: one turn, the tokens and cost the executor reports, and the
//! wall-clock time the engine's own [`Clock`] measured around the executor's run (what the
//! executor says of wall time is not taken). A failed turn reports no usage, so it is charged
//! its reservation of tokens and cost; a turn recovered from the journal after a crash was not
//! timed by this engine, so it is charged its reservation of wall-clock time. Usage beyond the
//! reservation is an overrun: charged all the same, recorded on the settlement, and the next
//! decision asks the owner.
//!
//! Crash recovery needs no local state: the journal is the store. A turn found prepared and
//! still in flight under this agent's lease (the decision's [`LeaseStep::Resume`]) is first
//! taken over (`take_over_turn`): the lease moves to a new epoch with the turn, so the session
//! that began it — crashed, or still running in another process — is fenced: its next renewal
//! is refused, which stops its executor, and its settlement is refused too. Then the turn is
//! settled if the executor kept its report, run again with the same turn id if it never
//! started or its todo is idempotent, and otherwise reported as a `repair` — never silently
//! re-run. Of two sessions that race to begin or take over one turn, the one whose write the
//! store answers as a replay of the other's stands down. A turn already settled is simply no
//! longer in flight, so the loop moves on; a turn that ran to its end after its lease expired
//! is settled by its report as a readback (`resolve_outcome`), the only way an expired lease's
//! turn may be settled.
//!
//! Effects recover the same way: a resumed turn's effects find their intents pending and are
//! read back before anything is performed, and at the start of every step the engine reads back
//! its agent's pending intents whose lease is gone; what no readback can tell stays pending and
//! the decision is `repair`.
//!
//! Every write goes through the store's [`GoalHandle`](crate::GoalHandle), paced on the
//! engine's clock, with a deterministic operation id, so a step retried after a lost reply
//! commits nothing twice. Waiting ([`Engine::wait`]) sleeps until the
//! decision's wake time or a store notification, whichever comes first.

mod effects;
mod judgement;
mod report;

use std::sync::Arc;

use futures::future::{Either, select};
use futures::pin_mut;

pub use effects::{EffectReport, EffectStep};
pub use judgement::{
    EvidenceRule, JudgeRound, Proposed, Submission, dead_letter, record_evidence,
    record_observation,
};
pub use report::{ProposalOutcome, ProviderFailure, StepReport, TurnOutcome, Until};

use crate::actor::Actor;
use crate::budget::Amounts;
use crate::command::{Command, OutcomeResolution, Settlement, Transition, Verdict, VerdictOutcome};
use crate::decide::{Assignment, Decision, LeaseStep, RepairIssue, decide};
use crate::event::{Event, RecordedEvent};
use crate::evidence::NewEvidence;
use crate::identity::Keyring;
use crate::ids::{
    AgentId, GoalId, ObservationKey, OperationId, TodoId, TurnId, bounded_id, sha256_hex,
};
use crate::refusal::Refusal;
use crate::retry::{TurnFailure, TurnResult};
use crate::seams::{
    Capability, Clock, Effector, Executor, ObserveRequest, Provider, Recovery, Store, StoreError,
    TurnError, TurnReport, TurnRequest, Validator,
};
use crate::state::GoalState;
use crate::time::Duration;
use crate::todo::{TodoClass, Workspace};
use crate::write::{StoreExt, SubmitError, Submitted};

/// An observation stream the engine polls through a provider.
#[derive(Clone)]
pub struct Watch {
    /// Who observes it.
    pub provider: Arc<dyn Provider>,
    /// The stream it polls; a monitor todo that watches this key is polled through it too.
    pub key: ObservationKey,
    /// How often it is polled when nothing else asks for it.
    pub every: Duration,
}

/// Tunables, each with a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Lease time-to-live asked for on claim and renewal; the goal policy's when `None`.
    pub lease_ttl: Option<Duration>,
    /// How often a running turn renews its lease (default 1 minute); keep it well under the
    /// lease time-to-live.
    pub renew_every: Duration,
    /// The agent's workspace, reported to the goal and presented when claiming writing todos.
    pub workspace: Option<Workspace>,
    /// The longest single wait (default 5 minutes): a waiting engine re-decides at least this
    /// often even when nothing notifies it.
    pub max_wait: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            lease_ttl: None,
            renew_every: Duration::minutes(1),
            workspace: None,
            max_wait: Duration::minutes(5),
        }
    }
}

/// Why a step could not be taken. Refusals of the engine's own commands are not errors (a
/// lost race for a claim is part of the protocol); they appear in the [`StepReport`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The goal does not exist.
    #[error("goal `{0}` does not exist")]
    UnknownGoal(GoalId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Other writers kept moving the goal.
    #[error("goal `{goal}` is contended: other writers keep committing; step again")]
    Contended {
        /// The goal other writers keep moving.
        goal: GoalId,
    },
    /// A capability proposed to create another goal than the one the engine steps.
    #[error(
        "capability proposed creating goal `{created}` while judging goal `{goal}`; fix the capability"
    )]
    GoalMismatch {
        /// The goal stepped.
        goal: GoalId,
        /// The goal the proposal creates.
        created: GoalId,
    },
    /// The validator could not judge a turn; the turn stays prepared and the next step
    /// recovers it.
    #[error("the validator could not judge turn `{turn}`: {error}")]
    Validator {
        /// The turn left prepared, recovered by the next step.
        turn: TurnId,
        /// What failed.
        error: TurnError,
    },
}

/// What running (or recovering) a turn came to, before settlement.
enum Ran {
    /// The executor's report, to validate and settle.
    Reported(TurnReport),
    /// The executor failed: the turn is settled as failed, charged this usage, with the
    /// validator's verdict on what it left.
    Failed(TurnFailure, Amounts),
    /// The lease was lost while the turn ran; nothing is settled.
    LeaseLost(TurnOutcome),
    /// A prepared turn whose effects may have happened and cannot be read back.
    Unknown,
}

/// One agent's engine over a store, a clock, an executor, a validator, capabilities and
/// watched streams. `Send + Sync`; it holds no goal state between steps.
pub struct Engine {
    agent: AgentId,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    executor: Arc<dyn Executor>,
    validator: Arc<dyn Validator>,
    capabilities: Vec<Arc<dyn Capability>>,
    watches: Vec<Watch>,
    evidence: Vec<EvidenceRule>,
    options: EngineOptions,
    keyring: Keyring,
    effector: Option<Arc<dyn Effector>>,
}

/// Builds an [`Engine`]; the store, clock, executor and validator are required.
pub struct EngineBuilder {
    engine: Engine,
}

impl EngineBuilder {
    /// Adds a capability; capabilities judge in the order added.
    #[must_use]
    pub fn capability(mut self, capability: Arc<dyn Capability>) -> Self {
        self.engine.capabilities.push(capability);
        self
    }

    /// Records, after each fact a watch observed, the evidence `rule` finds in it, as the
    /// provider that observed it (see [`EvidenceRule`]); rules apply in the order added.
    #[must_use]
    pub fn evidence(mut self, rule: EvidenceRule) -> Self {
        self.engine.evidence.push(rule);
        self
    }

    /// Polls `key` through `provider` at least every `every`.
    #[must_use]
    pub fn watch(
        mut self,
        provider: Arc<dyn Provider>,
        key: ObservationKey,
        every: Duration,
    ) -> Self {
        self.engine.watches.push(Watch {
            provider,
            key,
            every,
        });
        self
    }

    /// Signs the engine's commands with `keyring`: each command with the signer of the actor
    /// it is issued as (the agent, a capability, a provider); a command whose actor has no
    /// signer goes unsigned, which only a goal of declared identity accepts. The validator's
    /// signer (the keyring's signer for [`Validator::actor`],
    /// or for the provider whose monitor poll the engine settles), when the keyring has one,
    /// signs its verdicts ([`verdict_message`](crate::identity::verdict_message)); a signed
    /// goal refuses a verdict without it. The engine then holds the validator's key in its own
    /// process, beside the agent's: for independence that an agent cannot undo, run the
    /// validator where the agent cannot read its key and carry its signed verdict instead.
    #[must_use]
    pub fn keyring(mut self, keyring: Keyring) -> Self {
        self.engine.keyring = keyring;
        self
    }

    /// Performs the external effects turns ask for ([`TurnReport::effects`]) through
    /// `effector`, each only after its intent committed under the turn's lease epoch (the
    /// outbox), and resolves pending intents by reading them back. Without one, a turn that
    /// asks for an effect fails.
    #[must_use]
    pub fn effector(mut self, effector: Arc<dyn Effector>) -> Self {
        self.engine.effector = Some(effector);
        self
    }

    /// Replaces the options.
    #[must_use]
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.engine.options = options;
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        self.engine
    }
}

impl Engine {
    /// Starts building the engine of `agent`.
    pub fn builder(
        agent: AgentId,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        executor: Arc<dyn Executor>,
        validator: Arc<dyn Validator>,
    ) -> EngineBuilder {
        EngineBuilder {
            engine: Engine {
                agent,
                store,
                clock,
                executor,
                validator,
                capabilities: Vec::new(),
                watches: Vec::new(),
                evidence: Vec::new(),
                options: EngineOptions::default(),
                keyring: Keyring::new(),
                effector: None,
            },
        }
    }

    /// The agent this engine works for.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// The kernel's decision for this agent now, without changing anything.
    ///
    /// # Errors
    /// [`EngineError::UnknownGoal`] or a store failure.
    pub async fn decision(&self, goal: &GoalId) -> Result<Decision, EngineError> {
        let state = self.load(goal).await?;
        Ok(decide(&state, &self.agent, self.clock.now()))
    }

    /// Takes one step on `goal` (see the module docs) and reports what happened and the
    /// decision after it.
    ///
    /// # Errors
    /// [`EngineError`]: an unknown goal, a store failure, a contended goal or a validator that
    /// could not run. Whatever committed before the error stays committed and is idempotent.
    pub async fn step(&self, goal: &GoalId) -> Result<StepReport, EngineError> {
        let mut state = self.load(goal).await?;
        let mut report = StepReport::new(goal.clone());
        self.report_workspace(&mut state).await?;
        self.retire(&mut state).await?;
        self.observe(&mut state, &mut report, false).await?;
        self.judge(&mut state, &mut report).await?;
        self.resolve_orphaned_effects(&mut state, &mut report)
            .await?;
        let decision = decide(&state, &self.agent, self.clock.now());
        report.decision = match decision {
            Decision::Continue(assignment) => {
                if let Some(repair) = self.turn(&mut state, &assignment, &mut report).await? {
                    repair
                } else {
                    // A turn changes the world it watches: look again before deciding, so the
                    // decision judges the turn's evidence against the head it produced.
                    self.observe(&mut state, &mut report, true).await?;
                    self.judge(&mut state, &mut report).await?;
                    decide(&state, &self.agent, self.clock.now())
                }
            }
            other => other,
        };
        report.revision = state.revision;
        Ok(report)
    }

    /// Sleeps until the decision in `report` can change: its wake time, a commit to the goal
    /// (by anyone, anywhere), or [`EngineOptions::max_wait`], whichever comes first. Returns
    /// at once after a `continue`.
    ///
    /// # Errors
    /// A store failure while waiting.
    pub async fn wait(&self, report: &StepReport) -> Result<(), EngineError> {
        let until = match &report.decision {
            Decision::Continue(_) => return Ok(()),
            Decision::Wait { until, .. } | Decision::Ask { until, .. } => *until,
            _ => None,
        };
        let now = self.clock.now();
        let timeout = until.map_or(self.options.max_wait, |t| {
            let left = t.since(now);
            if left.as_millis() < self.options.max_wait.as_millis() {
                left
            } else {
                self.options.max_wait
            }
        });
        if timeout.as_millis() <= 0 {
            return Ok(());
        }
        let watch = [(report.goal.clone(), report.revision)];
        self.store.changed(&watch, timeout).await?;
        Ok(())
    }

    /// Steps until the decision is one `until` stops at, waiting in between when it says to;
    /// `progress` sees every step. Returns the last report.
    ///
    /// # Errors
    /// The first [`EngineError`] of a step or a wait.
    pub async fn run(
        &self,
        goal: &GoalId,
        until: Until,
        mut progress: impl FnMut(&StepReport) + Send,
    ) -> Result<StepReport, EngineError> {
        loop {
            let report = self.step(goal).await?;
            progress(&report);
            if until.stops_at(&report.decision) {
                return Ok(report);
            }
            self.wait(&report).await?;
        }
    }

    // ----- the phases -----------------------------------------------------------------------

    async fn load(&self, goal: &GoalId) -> Result<GoalState, EngineError> {
        self.store
            .load(goal)
            .await?
            .ok_or_else(|| EngineError::UnknownGoal(goal.clone()))
    }

    async fn report_workspace(&self, state: &mut GoalState) -> Result<(), EngineError> {
        let Some(workspace) = &self.options.workspace else {
            return Ok(());
        };
        if state.workspaces.get(&self.agent) == Some(workspace) || !state.is_registered(&self.agent)
        {
            return Ok(());
        }
        let command = Command::ReportWorkspace {
            workspace: workspace.clone(),
        };
        let op = operation(&["workspace", self.agent.as_str(), &workspace.top_level]);
        self.write(state, &self.as_agent(), &command, &op).await?;
        Ok(())
    }

    /// Retires the goal's inert work once a batch of it is due ([`GoalState::retirement_due`]),
    /// so that a goal the engine drives for months keeps a state the size of its live work.
    async fn retire(&self, state: &mut GoalState) -> Result<(), EngineError> {
        if !state.is_registered(&self.agent) || !state.retirement_due(self.clock.now()) {
            return Ok(());
        }
        let op = operation(&["retire", self.agent.as_str(), &state.revision.to_string()]);
        self.write(state, &self.as_agent(), &Command::Retire {}, &op)
            .await?;
        Ok(())
    }

    /// Polls the due watches (every watch when `all`) and records what they observed; the
    /// streams that changed something go to the report.
    async fn observe(
        &self,
        state: &mut GoalState,
        report: &mut StepReport,
        all: bool,
    ) -> Result<(), EngineError> {
        let now = self.clock.now();
        for watch in &self.watches {
            let last = state.observations.get(&watch.key);
            if !all && last.is_some_and(|o| o.observed_at.plus(watch.every) > now) {
                continue;
            }
            let request = ObserveRequest {
                key: watch.key.clone(),
                known: last.map(|o| o.fingerprint.clone()),
                etag: last.and_then(|o| o.etag.clone()),
            };
            let observations = match watch.provider.observe(&request).await {
                Ok(observations) => observations,
                Err(error) => {
                    report.provider_errors.push(ProviderFailure {
                        provider: watch.provider.source().clone(),
                        key: watch.key.clone(),
                        error,
                    });
                    continue;
                }
            };
            for observation in observations {
                let key = observation.key.clone();
                let recorded = record_observation(watch.provider.source(), observation);
                let written = self
                    .write(
                        state,
                        &recorded.actor,
                        &recorded.command,
                        &recorded.operation,
                    )
                    .await?;
                if written.changed() {
                    report.observed.push(key);
                } else if let Written::Refused(refusal) = &written {
                    let origin = format!("poll of {} `{key}`", watch.provider.source());
                    let letter = dead_letter(&state.spec.id, &recorded, refusal, origin, now);
                    self.store
                        .keep_dead_letter(letter)
                        .await
                        .map_err(EngineError::Store)?;
                    continue;
                }
                self.record_evidence(state, &recorded).await?;
            }
        }
        Ok(())
    }

    /// The evidence each of the engine's rules finds in a fact just recorded, recorded as the
    /// provider that observed it.
    async fn record_evidence(
        &self,
        state: &mut GoalState,
        recorded: &Submission,
    ) -> Result<(), EngineError> {
        for rule in &self.evidence {
            if let Some(evidence) = record_evidence(rule, state, recorded) {
                self.write(
                    state,
                    &evidence.actor,
                    &evidence.command,
                    &evidence.operation,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// One [`JudgeRound`] of the engine's capabilities, each proposal submitted as its
    /// capability.
    async fn judge(
        &self,
        state: &mut GoalState,
        report: &mut StepReport,
    ) -> Result<(), EngineError> {
        let capabilities = self.capabilities.iter().map(|c| &**c);
        let mut round = JudgeRound::new(capabilities, &self.agent, self.clock.now());
        while let Some(proposed) = round.next_proposal(state) {
            let Submission {
                actor,
                command,
                operation: op,
            } = &proposed.submission;
            let written = self.write(state, actor, command, op).await?;
            report.proposals.push(ProposalOutcome {
                capability: proposed.capability,
                command: command.name().to_owned(),
                target: command.target().map(str::to_owned),
                after_turn: report.turn.is_some(),
                rationale: proposed.rationale,
                refused: written.refusal(),
            });
        }
        Ok(())
    }

    /// Runs one turn of the assignment. Returns a decision that overrides the kernel's when
    /// the turn's outcome is unknown (`repair`).
    async fn turn(
        &self,
        state: &mut GoalState,
        assignment: &Assignment,
        report: &mut StepReport,
    ) -> Result<Option<Decision>, EngineError> {
        let todo = assignment.todo.clone();
        let (epoch, turn, resumed) = match &assignment.lease {
            // Whoever resumes a prepared turn takes it over first, under a new epoch: the
            // session that began it, if it still runs, is fenced and cannot settle it.
            LeaseStep::Resume { epoch, turn, .. } => {
                let Some(epoch) = self.take_over(state, &todo, *epoch, turn, report).await? else {
                    return Ok(None);
                };
                (epoch, turn.clone(), true)
            }
            LeaseStep::Held { epoch, .. } => {
                let begun = self.begin(state, &todo, *epoch, assignment.reserve, report);
                let Some(turn) = begun.await? else {
                    return Ok(None);
                };
                (*epoch, turn, false)
            }
            LeaseStep::Claim => {
                let Some(epoch) = self.claim(state, &todo, report).await? else {
                    return Ok(None);
                };
                let begun = self.begin(state, &todo, epoch, assignment.reserve, report);
                let Some(turn) = begun.await? else {
                    return Ok(None);
                };
                (epoch, turn, false)
            }
        };
        let Some(request) = self.request(state, &todo, epoch, &turn) else {
            return Ok(None);
        };
        let ran = if resumed {
            self.recover(state, &request).await
        } else {
            self.execute(state, &request).await
        };
        let (executed, failure) = match ran {
            Ran::Reported(executed) => {
                match self.with_effects(state, &request, executed, report).await? {
                    Ok(done) => done,
                    Err(stop) => return Ok(stop),
                }
            }
            Ran::Failed(failure, usage) => {
                let report = TurnReport {
                    effects: Vec::new(),
                    transition: Transition::KeepOpen,
                    observations: Vec::new(),
                    usage,
                    summary: format!(
                        "the executor failed ({}): {}",
                        failure.class, failure.detail
                    ),
                    usage_problem: None,
                };
                (report, Some(failure))
            }
            Ran::LeaseLost(lost) => {
                report.turn = Some(lost);
                return Ok(None);
            }
            Ran::Unknown => {
                report.turn = Some(TurnOutcome::Unknown {
                    todo: todo.clone(),
                    turn: turn.clone(),
                });
                return Ok(Some(Decision::Repair {
                    issue: RepairIssue::OutcomeUnknown {
                        todo,
                        turn,
                        holder: self.agent.clone(),
                    },
                }));
            }
        };
        report.turn = Some(
            self.settle(state, &request, executed, failure, resumed)
                .await?,
        );
        Ok(None)
    }

    /// Performs the effects a reported turn asks for through the outbox: the report to settle
    /// with (its transition kept open when an effect failed, with that failure), or, when the
    /// turn must not settle, the decision to stop at (`None`: the lease was lost).
    async fn with_effects(
        &self,
        state: &mut GoalState,
        request: &TurnRequest,
        mut executed: TurnReport,
        report: &mut StepReport,
    ) -> Result<Result<(TurnReport, Option<TurnFailure>), Option<Decision>>, EngineError> {
        let (todo, turn) = (request.todo.clone(), request.turn.clone());
        let effects = std::mem::take(&mut executed.effects);
        Ok(
            match self.run_effects(state, request, &effects, report).await? {
                effects::Effects::Done => Ok((executed, None)),
                effects::Effects::Failed(failure) => {
                    executed.transition = Transition::KeepOpen;
                    Ok((executed, Some(failure)))
                }
                effects::Effects::LeaseLost(refusal) => {
                    report.turn = Some(TurnOutcome::LeaseLost {
                        todo,
                        turn,
                        refusal,
                    });
                    Err(None)
                }
                effects::Effects::Unknown(effect) => {
                    report.turn = Some(TurnOutcome::Unknown {
                        todo: todo.clone(),
                        turn,
                    });
                    Err(Some(Decision::Repair {
                        issue: RepairIssue::EffectUnresolved {
                            effect,
                            todo,
                            holder: self.agent.clone(),
                        },
                    }))
                }
            },
        )
    }

    async fn claim(
        &self,
        state: &mut GoalState,
        todo: &TodoId,
        report: &mut StepReport,
    ) -> Result<Option<u64>, EngineError> {
        let command = Command::Claim {
            todo: todo.clone(),
            ttl: self.options.lease_ttl,
            workspace: self.options.workspace.clone(),
            grant_reason: None,
        };
        let at = state.revision.to_string();
        let op = operation(&["claim", todo.as_str(), self.agent.as_str(), &at]);
        if let Some(refusal) = self
            .write(state, &self.as_agent(), &command, &op)
            .await?
            .refusal()
        {
            report.turn = Some(TurnOutcome::NotStarted {
                todo: todo.clone(),
                refusal,
            });
            return Ok(None);
        }
        let lease = state
            .todos
            .get(todo)
            .and_then(|t| t.live_lease(self.clock.now()));
        Ok(lease.filter(|l| l.holder == self.agent).map(|l| l.epoch))
    }

    /// Records the prepared turn, reserving `reserve` (the decision's: the todo's expected
    /// usage, or the policy's default); the kernel refuses it when it does not fit the budget.
    async fn begin(
        &self,
        state: &mut GoalState,
        todo: &TodoId,
        epoch: u64,
        reserve: Amounts,
        report: &mut StepReport,
    ) -> Result<Option<TurnId>, EngineError> {
        let turn = turn_id(todo, state.revision);
        let command = Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: Some(reserve),
        };
        let op = operation(&["begin", state.spec.id.as_str(), turn.as_str()]);
        // Another session of this agent that prepared this very turn first runs it, not this one.
        let theirs = Refusal::TurnInFlight {
            todo: todo.clone(),
            turn: turn.clone(),
        };
        match self.write_once(state, &command, &op, theirs).await? {
            Written::Committed(_) => Ok(Some(turn)),
            Written::Refused(refusal) => {
                report.turn = Some(TurnOutcome::NotStarted {
                    todo: todo.clone(),
                    refusal,
                });
                Ok(None)
            }
        }
    }

    /// Takes the prepared turn in flight over from whichever session of this agent began it
    /// (a crashed one, or one still running): the lease moves to a new epoch, so the old
    /// session's renewals and settlement are refused and it stops. Returns the new epoch, or
    /// `None` (reported) when another session took it over first.
    async fn take_over(
        &self,
        state: &mut GoalState,
        todo: &TodoId,
        epoch: u64,
        turn: &TurnId,
        report: &mut StepReport,
    ) -> Result<Option<u64>, EngineError> {
        let command = Command::TakeOverTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            ttl: self.options.lease_ttl,
        };
        let at = epoch.to_string();
        let op = operation(&["take-over", state.spec.id.as_str(), turn.as_str(), &at]);
        // The same take-over committed by another session: that session owns the turn now.
        let theirs = Refusal::StaleLeaseEpoch {
            todo: todo.clone(),
            presented: epoch,
            current: epoch + 1,
        };
        if let Written::Refused(refusal) = self.write_once(state, &command, &op, theirs).await? {
            report.turn = Some(TurnOutcome::NotStarted {
                todo: todo.clone(),
                refusal,
            });
            return Ok(None);
        }
        let lease = state
            .todos
            .get(todo)
            .and_then(|t| t.live_lease(self.clock.now()));
        Ok(lease
            .filter(|l| l.holder == self.agent && l.turn.as_ref().is_some_and(|t| &t.id == turn))
            .map(|l| l.epoch))
    }

    fn request(
        &self,
        state: &GoalState,
        todo: &TodoId,
        epoch: u64,
        turn: &TurnId,
    ) -> Option<TurnRequest> {
        let item = state.todos.get(todo)?;
        let lease = item.lease.as_ref()?;
        Some(TurnRequest {
            goal: state.spec.id.clone(),
            objective: state.spec.objective.clone(),
            todo: todo.clone(),
            title: item.title.clone(),
            agent: self.agent.clone(),
            epoch,
            turn: turn.clone(),
            reserved: lease.turn.as_ref().map_or(Amounts::ZERO, |t| t.reserved),
            handoff: item.handoff.as_deref().cloned(),
            deadline: lease.expires_at,
            decided: state.decided_for(item, self.clock.now()),
            failures: state
                .streaks
                .get(todo)
                .map(|streak| streak.recent.clone())
                .unwrap_or_default(),
        })
    }

    /// Reads back a prepared turn found in flight: its journalled report, or a re-run under the
    /// same turn id when it never started or its todo is idempotent; otherwise unknown.
    async fn recover(&self, state: &mut GoalState, request: &TurnRequest) -> Ran {
        let idempotent = state.todos.get(&request.todo).is_some_and(|t| t.idempotent);
        match self.executor.recover(request).await {
            // This engine did not time a turn run before it started: its reservation stands in.
            Recovery::Finished(mut report) => {
                report.usage.wall_ms = request.reserved.wall_ms;
                Ran::Reported(report)
            }
            Recovery::Failed(failure) => Ran::Failed(failure, request.reserved),
            Recovery::NotStarted => self.execute(state, request).await,
            Recovery::Unknown if idempotent => self.execute(state, request).await,
            Recovery::Unknown => Ran::Unknown,
        }
    }

    /// Runs the executor (or, for a monitor with a watching provider, the poll) while renewing
    /// the lease. A lost lease stops the turn.
    async fn execute(&self, state: &mut GoalState, request: &TurnRequest) -> Ran {
        let started = self.clock.now();
        let work = self.work(state, request);
        let renewals = self.keep_alive(&state.spec.id, request);
        pin_mut!(work, renewals);
        let outcome = select(work, renewals).await;
        // The turn's wall-clock time is what the engine's own clock saw around the run, whatever
        // the executor says of it.
        let wall_ms = u64::try_from(self.clock.now().since(started).as_millis()).unwrap_or(0);
        match outcome {
            Either::Left((Ok(mut report), _)) => {
                report.usage.wall_ms = wall_ms;
                Ran::Reported(report)
            }
            // The executor's journal says another session owns the turn: it did not start
            // here, and this session settles nothing.
            Either::Left((Err(TurnError::Fenced { epoch }), _)) => {
                Ran::LeaseLost(TurnOutcome::LeaseLost {
                    todo: request.todo.clone(),
                    turn: request.turn.clone(),
                    refusal: Refusal::StaleLeaseEpoch {
                        todo: request.todo.clone(),
                        presented: request.epoch,
                        current: epoch,
                    },
                })
            }
            // A failed executor still settles, as a failed turn: the turn was spent, the
            // validator judges what state it left, and the retry policy paces the next one. It
            // reports no usage, so its reservation of tokens and cost is charged.
            Either::Left((Err(error), _)) => Ran::Failed(
                error.failure(),
                Amounts {
                    wall_ms,
                    ..request.reserved
                },
            ),
            Either::Right((refusal, _)) => Ran::LeaseLost(TurnOutcome::LeaseLost {
                todo: request.todo.clone(),
                turn: request.turn.clone(),
                refusal,
            }),
        }
    }

    /// The provider that polls `todo` when it is a monitor of a watched stream.
    fn poller(
        &self,
        state: &GoalState,
        todo: &TodoId,
    ) -> Option<(Arc<dyn Provider>, ObservationKey)> {
        let TodoClass::Monitor(spec) = &state.todos.get(todo)?.class else {
            return None;
        };
        let watch = self.watches.iter().find(|w| w.key == spec.watches)?;
        Some((watch.provider.clone(), watch.key.clone()))
    }

    async fn work(
        &self,
        state: &GoalState,
        request: &TurnRequest,
    ) -> Result<TurnReport, TurnError> {
        let Some((provider, key)) = self.poller(state, &request.todo) else {
            return self.executor.run(request).await;
        };
        let last = state.observations.get(&key);
        let known = last.map(|o| o.fingerprint.clone());
        let etag = last.and_then(|o| o.etag.clone());
        let observations = provider
            .observe(&ObserveRequest { key, known, etag })
            .await
            .map_err(|error| TurnError::Failed(error.to_string()))?;
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::KeepOpen,
            summary: format!(
                "polled {} ({} observations)",
                provider.source(),
                observations.len()
            ),
            observations,
            usage: Amounts::ZERO,
            usage_problem: None,
        })
    }

    /// Renews the lease every [`EngineOptions::renew_every`]; resolves only when renewal is
    /// refused (the lease was lost: expired, or taken over by another session under a newer
    /// epoch), with the refusal. The turn is then cancelled: its executor's future is dropped
    /// and nothing is settled.
    async fn keep_alive(&self, goal: &GoalId, request: &TurnRequest) -> Refusal {
        let actor = Actor::Agent(self.agent.clone());
        let command = Command::Renew {
            todo: request.todo.clone(),
            epoch: request.epoch,
            ttl: self.options.lease_ttl,
        };
        let mut n = 0u64;
        loop {
            n = n.wrapping_add(1);
            self.clock.sleep(self.options.renew_every).await;
            let op = operation(&[
                "renew",
                goal.as_str(),
                request.turn.as_str(),
                &n.to_string(),
            ]);
            // A store hiccup is not a lost lease: the next renewal tries again, and the
            // settlement's epoch check is the real fence.
            let renewed = self.submit(goal, &actor, &command, &op).await;
            if let Err(SubmitError::Refused(refusal)) = renewed {
                return refusal;
            }
        }
    }

    async fn settle(
        &self,
        state: &mut GoalState,
        request: &TurnRequest,
        executed: TurnReport,
        failure: Option<TurnFailure>,
        resumed: bool,
    ) -> Result<TurnOutcome, EngineError> {
        let (verdict, evidence) = self.verdict(state, request, &executed).await?;
        // Completion needs a pass: an executor that claims more than its validator grants keeps
        // the todo open, so the settlement is never refused for it.
        let transition = match executed.transition {
            Transition::Complete { .. } if verdict.outcome != VerdictOutcome::Passed => {
                Transition::KeepOpen
            }
            other => other,
        };
        let outcome = verdict.outcome;
        let usage_problem = executed.usage_problem;
        // The host hands the validator's key to the validator it runs: the verdict is signed
        // with the keyring's signer for the validator (a signed goal refuses it unsigned). Held
        // in this process, the key proves only that this host signed; for independence the
        // validator runs where the agent cannot read its key.
        let verdict = match self.keyring.signer(&verdict.validator) {
            Some(signer) => crate::identity::sign_verdict(
                signer,
                &request.goal,
                &request.todo,
                &request.turn,
                request.epoch,
                verdict,
                &evidence,
            ),
            None => verdict,
        };
        let settlement = Settlement {
            todo: request.todo.clone(),
            epoch: request.epoch,
            turn: request.turn.clone(),
            verdict,
            evidence,
            observations: executed.observations,
            transition,
            usage: executed.usage,
            failure,
        };
        let op = operation(&["settle", request.goal.as_str(), request.turn.as_str()]);
        let command = Command::SettleTurn(settlement);
        let written = self.write(state, &self.as_agent(), &command, &op).await?;
        let written = self
            .resolve_expired(state, request, command, written)
            .await?;
        Ok(match written {
            Written::Committed(events) => {
                let (charged, overrun) = settled_charge(&events);
                TurnOutcome::Settled {
                    todo: request.todo.clone(),
                    turn: request.turn.clone(),
                    resumed,
                    verdict: outcome,
                    result: settled_result(&events),
                    summary: executed.summary,
                    charged,
                    overrun,
                    usage_problem,
                }
            }
            Written::Refused(refusal) => TurnOutcome::LeaseLost {
                todo: request.todo.clone(),
                turn: request.turn.clone(),
                refusal,
            },
        })
    }

    /// A settlement refused because the lease expired while the turn ran to its end: the
    /// executor's report is the readback that resolves the turn (`resolve_outcome`), the only
    /// way a turn on an expired lease may still be settled. Any other outcome stands.
    async fn resolve_expired(
        &self,
        state: &mut GoalState,
        request: &TurnRequest,
        command: Command,
        written: Written,
    ) -> Result<Written, EngineError> {
        let expired = matches!(
            written,
            Written::Refused(Refusal::OutcomeUnknown { .. } | Refusal::NoLiveLease { .. })
        );
        let Command::SettleTurn(settlement) = command else {
            return Ok(written);
        };
        if !expired {
            return Ok(written);
        }
        let resolve = Command::ResolveOutcome {
            todo: request.todo.clone(),
            turn: request.turn.clone(),
            resolution: OutcomeResolution::Committed {
                settlement: Box::new(settlement),
            },
            grant_reason: None,
        };
        let op = operation(&["resolve", request.goal.as_str(), request.turn.as_str()]);
        self.write(state, &self.as_agent(), &resolve, &op).await
    }

    /// The independent verdict: the validator's, or for a provider's monitor poll the
    /// provider's own (its observation is the fact; there is nothing else to judge).
    async fn verdict(
        &self,
        state: &GoalState,
        request: &TurnRequest,
        executed: &TurnReport,
    ) -> Result<(Verdict, Vec<NewEvidence>), EngineError> {
        if let Some((provider, _)) = self.poller(state, &request.todo) {
            let verdict = Verdict {
                validator: Actor::Provider(provider.source().clone()),
                outcome: VerdictOutcome::Progress,
                summary: executed.summary.clone(),
                signature: None,
            };
            return Ok((verdict, Vec::new()));
        }
        let validation = self
            .validator
            .validate(request, executed)
            .await
            .map_err(|error| EngineError::Validator {
                turn: request.turn.clone(),
                error,
            })?;
        Ok((
            validation.verdict(self.validator.actor()),
            validation.evidence,
        ))
    }

    // ----- plumbing -------------------------------------------------------------------------

    /// The write path, pausing on the engine's clock between attempts on a contended goal.
    async fn submit(
        &self,
        goal: &GoalId,
        actor: &Actor,
        command: &Command,
        op: &OperationId,
    ) -> Result<Submitted, SubmitError> {
        let mut handle = self.store.goal(goal).paced(&*self.clock);
        if let Some(signer) = self.keyring.signer(actor) {
            handle = handle.signed_by(signer);
        }
        handle
            .submit_operation(actor, self.clock.now(), command, op)
            .await
    }

    fn as_agent(&self) -> Actor {
        Actor::Agent(self.agent.clone())
    }

    /// Submits `command` as `actor` and moves `state` to the committed state. A refusal is
    /// not an error: for the engine's own commands it is part of the protocol (a lost race, a
    /// lost lease).
    async fn write(
        &self,
        state: &mut GoalState,
        actor: &Actor,
        command: &Command,
        op: &OperationId,
    ) -> Result<Written, EngineError> {
        let goal = state.spec.id.clone();
        match self.submit(&goal, actor, command, op).await {
            Ok(Submitted {
                state: committed,
                events,
                ..
            }) => {
                *state = committed;
                Ok(Written::Committed(events))
            }
            Err(SubmitError::Refused(refusal)) => Ok(Written::Refused(refusal)),
            Err(SubmitError::Store(error)) => Err(EngineError::Store(error)),
            Err(SubmitError::Contended { .. }) => Err(EngineError::Contended { goal }),
            Err(SubmitError::GoalMismatch { goal, created }) => {
                Err(EngineError::GoalMismatch { goal, created })
            }
        }
    }
}

impl Engine {
    /// [`Engine::write`] as this agent, for a command only one session of the agent may
    /// commit: when the store answers that the operation had already committed (a replay), a
    /// concurrent session committed it, so it is that session's, and `theirs` comes back.
    async fn write_once(
        &self,
        state: &mut GoalState,
        command: &Command,
        op: &OperationId,
        theirs: Refusal,
    ) -> Result<Written, EngineError> {
        let goal = state.spec.id.clone();
        match self.submit(&goal, &self.as_agent(), command, op).await {
            Ok(Submitted {
                state: committed,
                events,
                replayed,
                ..
            }) => {
                *state = committed;
                Ok(if replayed {
                    Written::Refused(theirs)
                } else {
                    Written::Committed(events)
                })
            }
            Err(SubmitError::Refused(refusal)) => Ok(Written::Refused(refusal)),
            Err(SubmitError::Store(error)) => Err(EngineError::Store(error)),
            Err(SubmitError::Contended { .. }) => Err(EngineError::Contended { goal }),
            Err(SubmitError::GoalMismatch { goal, created }) => {
                Err(EngineError::GoalMismatch { goal, created })
            }
        }
    }
}

/// What one of the engine's writes came to.
enum Written {
    /// It committed these events (none for a no-op or a replay).
    Committed(Vec<RecordedEvent>),
    /// The kernel refused it; nothing changed.
    Refused(Refusal),
}

impl Written {
    /// True when it committed at least one event.
    fn changed(&self) -> bool {
        matches!(self, Written::Committed(events) if !events.is_empty())
    }

    fn refusal(self) -> Option<Refusal> {
        match self {
            Written::Committed(_) => None,
            Written::Refused(refusal) => Some(refusal),
        }
    }
}

/// The kernel's classification of the turn a settlement's events record; `None` for a
/// replayed commit, which hands back no events.
fn settled_result(events: &[RecordedEvent]) -> Option<TurnResult> {
    events.iter().find_map(|e| match &e.event {
        Event::TurnSettled { result, .. } => result.clone(),
        _ => None,
    })
}

/// What a settlement's events charged and what of it was an overrun; `None` and zero for a
/// replayed commit, which hands back no events.
fn settled_charge(events: &[RecordedEvent]) -> (Option<Amounts>, Amounts) {
    events
        .iter()
        .find_map(|e| match &e.event {
            Event::TurnSettled {
                charged, overrun, ..
            } => Some((Some(*charged), *overrun)),
            _ => None,
        })
        .unwrap_or((None, Amounts::ZERO))
}

/// A turn id unique within the goal: the todo and the revision the turn was prepared at (each
/// revision is one commit, so no two turns share it), cut with a digest when too long.
fn turn_id(todo: &TodoId, revision: u64) -> TurnId {
    let text = format!("{todo}@r{revision}");
    TurnId::new(bounded_id(&text)).unwrap_or_else(|_| hashed(&text))
}

/// A deterministic operation id from its parts, so a retried step commits nothing twice.
fn operation(parts: &[&str]) -> OperationId {
    let text = parts.join(":");
    OperationId::new(bounded_id(&text)).unwrap_or_else(|_| hashed(&text))
}

fn hashed<T: TryFrom<String>>(text: &str) -> T {
    match T::try_from(format!("h-{}", &sha256_hex(text.as_bytes())[..32])) {
        Ok(id) => id,
        Err(_) => unreachable!("`h-` and 32 hexadecimal digits form a valid id"),
    }
}
