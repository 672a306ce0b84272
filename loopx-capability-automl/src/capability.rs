//! The capability: judgements in, proposed commands out.
//!
//! Every judgement recomputes, from the goal state alone, what the experiment facts call for:
//! the todos, gates and obligations below, each under an id derived from the experiment and
//! its revision. What already exists is skipped (through the kernel's [`Proposals`]); open
//! todos and pending gates this capability created that the facts no longer call for (a new
//! revision, a new classification) are superseded or withdrawn. Nothing is launched, stopped
//! or promoted here, and no lifecycle rule is repeated: claims, retries of turns, budgets and
//! completion stay with the kernel.

use std::collections::BTreeSet;

use loopx_kernel::seams::{Capability, Proposal};
use loopx_kernel::{
    Actor, AgentId, DecisionScope, ExpiryPolicy, GateId, GateScope, GoalState, NewGate, NewTodo,
    ObligationId, ObligationKind, Priority, Proposals, Revision, SourceId, Timestamp, TodoId,
};

use crate::classify::{Inconclusive, InfraCause, Verdict};
use crate::contract::{ContractError, ExperimentContract};
use crate::holdout::{HoldoutStanding, holdout_standing};
use crate::ids::scoped_id;
use crate::judgement::{Judgement, Role, assess};

/// The ML-experiment capability: a validated [`ExperimentContract`] and the name its
/// proposals are recorded under. It holds no other state.
#[derive(Debug, Clone)]
pub struct AutoMl {
    source: SourceId,
    contract: ExperimentContract,
}

impl AutoMl {
    /// A capability named `source` judging by `contract`.
    ///
    /// # Errors
    /// [`ContractError`] when the contract does not validate.
    pub fn new(source: SourceId, contract: ExperimentContract) -> Result<Self, ContractError> {
        contract.validate()?;
        Ok(AutoMl { source, contract })
    }

    /// The contract it judges by.
    pub fn contract(&self) -> &ExperimentContract {
        &self.contract
    }
}

impl Capability for AutoMl {
    fn source(&self) -> &SourceId {
        &self.source
    }

    /// Judges the experiments the goal has observed; `agent` becomes the owner of the work
    /// it proposes when it is registered with the goal.
    fn judge(&self, state: &GoalState, agent: &AgentId, now: Timestamp) -> Vec<Proposal> {
        let mut plan = Plan::new(self, state, agent, now);
        for judgement in assess(&self.contract, state) {
            plan.follow(&judgement);
        }
        plan.retract_the_rest();
        plan.out.into_vec()
    }
}

/// One judgement's proposals, and the ids the facts call for.
struct Plan<'a> {
    capability: &'a AutoMl,
    state: &'a GoalState,
    owner: Option<AgentId>,
    now: Timestamp,
    out: Proposals<'a>,
    wanted_todos: BTreeSet<TodoId>,
    wanted_gates: BTreeSet<GateId>,
}

impl<'a> Plan<'a> {
    fn new(capability: &'a AutoMl, state: &'a GoalState, agent: &AgentId, now: Timestamp) -> Self {
        Plan {
            capability,
            state,
            owner: state.is_registered(agent).then(|| agent.clone()),
            now,
            out: Proposals::at(state, now),
            wanted_todos: BTreeSet::new(),
            wanted_gates: BTreeSet::new(),
        }
    }

    fn follow(&mut self, judgement: &Judgement) {
        let run = &judgement.run;
        let rev = run.revision.as_str();
        match (&judgement.classification.verdict, judgement.role) {
            (Verdict::InfrastructureFailure { cause }, _) => self.retry_or_repair(judgement, cause),
            (Verdict::InvalidComparison { mismatch }, Role::Experiment | Role::Holdout) => {
                let theirs = judgement
                    .baseline
                    .as_ref()
                    .map_or("", |b| b.revision.as_str());
                self.replan(
                    "invalid",
                    &run.experiment,
                    &[rev, theirs],
                    format!(
                        "invalid comparison for {} at {rev}: {mismatch}; rerun against a matched baseline or change the plan",
                        run.experiment
                    ),
                );
            }
            (
                Verdict::Inconclusive(Inconclusive::MissingFacts { facts }),
                Role::Experiment | Role::Holdout,
            ) => {
                let title = format!(
                    "complete the evaluation of {} at {rev}: report {}",
                    run.experiment,
                    facts.join(", ")
                );
                let why = "the run finished but facts the comparison needs are missing";
                self.todo(
                    "evaluate",
                    &run.experiment,
                    &[rev],
                    title,
                    Priority::P2,
                    why,
                );
            }
            (Verdict::BlockedByGuardrail { failed }, Role::Experiment) => self.replan(
                "guardrail",
                &run.experiment,
                &[rev],
                format!(
                    "{} at {rev} is blocked by guardrails {}: revise or drop it",
                    run.experiment,
                    failed.join(", ")
                ),
            ),
            (Verdict::Regressed { gain }, Role::Experiment) => self.replan(
                "regressed",
                &run.experiment,
                &[rev],
                format!(
                    "{} at {rev} regressed {} by {gain:+.4} against {}: change the plan",
                    run.experiment,
                    self.capability.contract.primary,
                    self.capability.contract.baseline
                ),
            ),
            (Verdict::Candidate { gain }, Role::Experiment) => {
                self.candidate(&run.experiment, &run.revision, *gain);
            }
            _ => {}
        }
    }

    /// A candidate needs passing holdout evidence at its revision before a person is asked.
    fn candidate(&mut self, experiment: &str, revision: &Revision, gain: f64) {
        let rev = revision.as_str();
        match holdout_standing(self.state, experiment, revision, self.now) {
            HoldoutStanding::Missing => {
                let title = format!(
                    "evaluate {experiment} and the baseline on the holdout split at {rev} (dev gain {gain:+.4})"
                );
                let why = "a dev-split candidate needs holdout evidence before promotion";
                self.todo("holdout", experiment, &[rev], title, Priority::P1, why);
            }
            HoldoutStanding::Passed(evidence) => {
                self.promotion(experiment, rev, gain, evidence.as_str());
            }
            HoldoutStanding::Failed(evidence) => self.replan(
                "holdout-failed",
                experiment,
                &[rev],
                format!(
                    "the holdout evaluation of {experiment} at {rev} did not confirm the dev gain (evidence {evidence}): do not promote; change the plan"
                ),
            ),
        }
    }

    /// The promotion gate, owned by a person, and the todo it unblocks once answered yes.
    fn promotion(&mut self, experiment: &str, rev: &str, gain: f64, evidence: &str) {
        let id = scoped_id("promote", experiment, &[rev]);
        let (Ok(gate), Ok(scope), Ok(todo)) = (
            GateId::new(id.clone()),
            DecisionScope::new(id.clone()),
            TodoId::new(id),
        ) else {
            return;
        };
        let approver = self
            .capability
            .contract
            .approver
            .clone()
            .unwrap_or_else(|| self.state.spec.owner.clone());
        let question = format!(
            "Promote {experiment} at {rev}? Dev gain {gain:+.4} over {}; holdout evidence {evidence} passed.",
            self.capability.contract.baseline
        );
        self.wanted_gates.insert(gate.clone());
        self.out.open_gate(
            NewGate {
                id: gate,
                question,
                owner: Actor::Person(approver),
                scope: GateScope {
                    decisions: [scope.clone()].into(),
                    ..GateScope::default()
                },
                deadline: None,
                on_expiry: ExpiryPolicy::default(),
            },
            "holdout evidence passed at the current revision: promotion is a person's decision",
        );
        let mut promote = NewTodo::advance(
            todo,
            format!("promote {experiment} at {rev} as the approver decided"),
        )
        .with_priority(Priority::P1);
        promote.requires_decisions.insert(scope);
        self.wanted_todos.insert(promote.id.clone());
        self.out
            .add_todo(promote, "carry out the promotion once a person approves it");
    }

    /// An infrastructure failure says nothing about the model: run it again, or once the
    /// attempts are used up, repair the infrastructure first.
    fn retry_or_repair(&mut self, judgement: &Judgement, cause: &InfraCause) {
        let run = &judgement.run;
        let rev = run.revision.as_str();
        if run.attempt >= self.capability.contract.max_attempts {
            let detail = format!(
                "{} at {rev} failed {} times for infrastructure reasons (last: {cause}): repair the infrastructure before running it again",
                run.experiment, run.attempt
            );
            self.raise(
                ObligationKind::Repair,
                "infra",
                &run.experiment,
                &[rev],
                detail,
            );
            return;
        }
        let attempt = run.attempt.to_string();
        let title = format!(
            "re-run {} at {rev} (attempt {attempt} ended: {cause})",
            run.experiment
        );
        let why = "an infrastructure failure is no evidence about the model: retry it";
        self.todo(
            "retry",
            &run.experiment,
            &[rev, &attempt],
            title,
            Priority::P1,
            why,
        );
    }

    fn todo(
        &mut self,
        kind: &str,
        experiment: &str,
        parts: &[&str],
        title: String,
        priority: Priority,
        why: &str,
    ) {
        let Ok(id) = TodoId::new(scoped_id(kind, experiment, parts)) else {
            return;
        };
        self.wanted_todos.insert(id.clone());
        let todo = NewTodo::advance(id, title)
            .with_priority(priority)
            .idempotent();
        self.out.add_todo(todo, why);
    }

    fn replan(&mut self, kind: &str, experiment: &str, parts: &[&str], detail: String) {
        self.raise(ObligationKind::Replan, kind, experiment, parts, detail);
    }

    fn raise(
        &mut self,
        kind: ObligationKind,
        prefix: &str,
        experiment: &str,
        parts: &[&str],
        detail: String,
    ) {
        if let Ok(id) = ObligationId::new(scoped_id(prefix, experiment, parts)) {
            self.out.raise(id, kind, detail, self.owner.clone());
        }
    }

    /// Supersedes this capability's open todos and withdraws its pending gates that the facts
    /// no longer call for. Todos under a lease are left alone: their holder settles them.
    fn retract_the_rest(&mut self) {
        let me = Actor::Capability(self.capability.source.clone());
        for todo in self
            .state
            .pending_todos_by(&me)
            .filter(|t| !self.wanted_todos.contains(&t.id))
        {
            self.out.retire(
                &todo.id,
                "the experiment facts no longer call for it (a new revision, a new classification, or the facts it was for are in)",
            );
        }
        for gate in self
            .state
            .pending_gates_by(&me, self.now)
            .filter(|g| !self.wanted_gates.contains(&g.id))
        {
            self.out.withdraw_gate(
                &gate.id,
                "the experiment is no longer a candidate with passing holdout evidence at its current revision",
            );
        }
    }
}
