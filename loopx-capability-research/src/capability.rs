//! The research capability: the ledger in, proposals out.
//!
//! Every judgement derives the ledger from the goal state and proposes, for each line of work,
//! what its standing calls for. Ids are derived from domain facts and proposals go through
//! [`Proposals`], so judging the same goal again proposes nothing new.

use std::collections::BTreeSet;

use loopx_kernel::seams::{Capability, Proposal};
use loopx_kernel::{
    Actor, AgentId, ExpiryPolicy, GateScope, GoalState, NewGate, NewTodo, ObligationKind, PersonId,
    Priority, Proposals, SourceId, Timestamp, Todo,
};

use crate::config::{ConfigError, ResearchConfig};
use crate::facts::{Edge, Split};
use crate::handoff::{evaluator_for, hand_over_line, propose_holdout};
use crate::ids::{self, LineTodo};
use crate::ledger::{Gap, HypothesisEntry, Promotion, Status, ledger, open_line_todos};

/// How a gap that calls for a line todo is answered, given that todo as the goal holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// The todo does not exist: propose it.
    AddTodo,
    /// The todo is open: the gap is already planned for.
    Planned,
    /// The todo is closed and the gap persists: the owner must replan.
    Replan,
}

impl Route {
    /// The route for a gap whose line todo stands as `todo`.
    pub fn for_todo(todo: Option<&Todo>) -> Route {
        match todo {
            None => Route::AddTodo,
            Some(t) if t.status.is_closed() => Route::Replan,
            Some(_) => Route::Planned,
        }
    }
}

/// The research capability. Holds only its configuration: everything else is derived from the
/// goal state on every judgement, so a restarted engine judges the same.
#[derive(Debug, Clone)]
pub struct Research {
    config: ResearchConfig,
}

impl Research {
    /// A capability with a validated configuration.
    ///
    /// # Errors
    /// The configuration's [`ConfigError`].
    pub fn new(config: ResearchConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Research { config })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &ResearchConfig {
        &self.config
    }

    fn decider(&self, state: &GoalState) -> PersonId {
        self.config
            .decider
            .clone()
            .unwrap_or_else(|| state.spec.owner.clone())
    }

    fn plan_line(&self, entry: &HypothesisEntry, proposals: &mut Proposals<'_>, now: Timestamp) {
        let state = proposals.state();
        // Work for an owner the goal does not know goes to anyone rather than being refused.
        let owner = Some(entry.owner().clone()).filter(|o| state.is_registered(o));
        let me = Actor::Capability(self.config.name.clone());
        let line = Line {
            entry,
            owner: owner.as_ref(),
            evaluator: evaluator_for(state, self.config.evaluator.as_ref(), entry.owner()),
            me: &me,
            now,
        };
        for gap in &entry.gaps {
            answer_gap(&line, gap, proposals);
        }
        hand_over_line(entry, &me, proposals, now);
        if !entry.gaps.contains(&Gap::Unconfirmed) {
            retire_confirmation(entry, proposals);
        }
        match entry.status {
            Status::Supported if entry.promotion == Promotion::NotAsked => {
                self.ask_promotion(entry, owner.as_ref(), proposals, now);
            }
            Status::Refuted => self.ask_retirement(entry, proposals, now),
            _ => {}
        }
        if entry.status != Status::Supported && entry.promotion == Promotion::Pending {
            self.withdraw_promotion(entry, proposals);
        }
    }

    fn ask_promotion(
        &self,
        entry: &HypothesisEntry,
        owner: Option<&AgentId>,
        proposals: &mut Proposals<'_>,
        now: Timestamp,
    ) {
        let h = entry.facts.id.as_str();
        let (Some(gate), Some(decision), Some(writeup)) = (
            ids::promotion_gate(h),
            ids::promotion_decision(h),
            LineTodo::Writeup.id(h),
        ) else {
            return;
        };
        let scope = GateScope {
            decisions: [decision].into(),
            ..GateScope::default()
        };
        let question = format!(
            "promote hypothesis {h}? supported on holdout by {}",
            deciding_findings(entry, Edge::Supports)
        );
        proposals.open_gate(
            self.gate(gate, question, scope, proposals.state(), now),
            format!("hypothesis {h} is supported; promotion is a person's decision"),
        );
        let (todo, why) = new_line_todo(entry, LineTodo::Writeup, writeup, owner);
        proposals.add_todo(todo, why);
    }

    fn ask_retirement(
        &self,
        entry: &HypothesisEntry,
        proposals: &mut Proposals<'_>,
        now: Timestamp,
    ) {
        let h = entry.facts.id.as_str();
        let (Some(gate), Some(decision)) = (ids::retirement_gate(h), ids::retirement_decision(h))
        else {
            return;
        };
        let state = proposals.state();
        // The line's open work waits while a person decides.
        // The confirmation todo is left out: with no unconfirmed gap it is being superseded.
        let confirm = LineTodo::Confirm.id(h);
        let scope = GateScope {
            todos: open_line_todos(state, h)
                .into_iter()
                .filter(|t| Some(t) != confirm.as_ref())
                .collect(),
            decisions: [decision].into(),
            whole_goal: false,
        };
        let question = format!(
            "retire hypothesis {h}? refuted on holdout by {}",
            deciding_findings(entry, Edge::Refutes)
        );
        proposals.open_gate(
            self.gate(gate, question, scope, state, now),
            format!("hypothesis {h} is refuted; retirement is proposed, never silent"),
        );
    }

    fn withdraw_promotion(&self, entry: &HypothesisEntry, proposals: &mut Proposals<'_>) {
        let Some(id) = ids::promotion_gate(&entry.facts.id) else {
            return;
        };
        let ours = Actor::Capability(self.config.name.clone());
        if proposals
            .state()
            .gates
            .get(&id)
            .is_some_and(|g| g.opened_by == ours)
        {
            let reason = format!(
                "hypothesis {} is no longer supported (now {})",
                entry.facts.id,
                entry.status.name()
            );
            proposals.withdraw_gate(&id, reason);
        }
    }

    fn gate(
        &self,
        id: loopx_kernel::GateId,
        question: String,
        scope: GateScope,
        state: &GoalState,
        now: Timestamp,
    ) -> NewGate {
        NewGate {
            id,
            question,
            owner: Actor::Person(self.decider(state)),
            scope,
            deadline: self.config.decision_window.map(|w| now.plus(w)),
            on_expiry: ExpiryPolicy::KeepAsking,
        }
    }
}

impl Capability for Research {
    fn source(&self) -> &SourceId {
        &self.config.name
    }

    /// Proposes, for every line of work, what its standing calls for. The ledger is derived
    /// from the whole state so that nothing depends on which judgement saw which observation.
    fn judge(&self, state: &GoalState, _agent: &AgentId, now: Timestamp) -> Vec<Proposal> {
        let ledger = ledger(state);
        let mut proposals = Proposals::at(state, now);
        for entry in &ledger.hypotheses {
            self.plan_line(entry, &mut proposals, now);
        }
        proposals.into_vec()
    }
}

/// Supersedes the independent-confirmation todo once its gap is gone, unless an agent holds it.
fn retire_confirmation(entry: &HypothesisEntry, proposals: &mut Proposals<'_>) {
    let Some(id) = LineTodo::Confirm.id(&entry.facts.id) else {
        return;
    };
    let reason = format!(
        "hypothesis {} no longer lacks an independent holdout evaluation",
        entry.facts.id
    );
    proposals.retire(&id, reason);
}

/// One line of work as a judgement plans it.
struct Line<'a> {
    entry: &'a HypothesisEntry,
    /// The line's owner, when the goal knows it.
    owner: Option<&'a AgentId>,
    /// Who the holdout evaluation is handed to, if anyone.
    evaluator: Option<AgentId>,
    me: &'a Actor,
    now: Timestamp,
}

/// Answers one gap: a line todo, or a replan obligation owned by the line's owner.
fn answer_gap(line: &Line<'_>, gap: &Gap, proposals: &mut Proposals<'_>) {
    let (entry, owner, me) = (line.entry, line.owner, line.me);
    let h = entry.facts.id.as_str();
    match gap {
        Gap::NoExperiment => line_todo(line, LineTodo::Experiment, proposals),
        Gap::NoHoldout => line_todo(line, LineTodo::Holdout, proposals),
        Gap::Unconfirmed => line_todo(line, LineTodo::Confirm, proposals),
        Gap::DependencyDown { dependency } => {
            if let Some(id) = ids::dependency_obligation(h, dependency) {
                let detail = format!(
                    "hypothesis {h} depends on {dependency}, which is refuted or retired: revise {h} or its plan"
                );
                proposals.raise(id, ObligationKind::Replan, detail, owner.cloned());
            }
        }
        Gap::Refuted => {
            if let Some(id) = ids::obligation("refuted", h) {
                let detail = format!(
                    "hypothesis {h} is refuted on holdout ({}): replan the line; retirement waits on a person's gate",
                    deciding_findings(entry, Edge::Refutes)
                );
                proposals.raise(id, ObligationKind::Replan, detail, owner.cloned());
            }
        }
        Gap::OpenWorkAfterRetirement => {
            // The capability retires the line's open work it planned itself; what it cannot
            // (work an agent holds, or work someone else planned) is left to the line's owner.
            let state = proposals.state();
            let mut left = false;
            for id in open_line_todos(state, h) {
                match state.todos.get(&id) {
                    Some(t) if &t.created_by == me && !proposals.held(t) => {
                        proposals.retire(
                            &id,
                            format!("hypothesis {h} was retired by a person: its open work ends"),
                        );
                    }
                    _ => left = true,
                }
            }
            if !left {
                return;
            }
            if let Some(id) = ids::obligation("retired", h) {
                let detail = format!(
                    "hypothesis {h} was retired by a person: supersede the line's open work"
                );
                proposals.raise(id, ObligationKind::Replan, detail, owner.cloned());
            }
        }
    }
}

/// Proposes the line todo `which` for a gap, or a replan obligation when that todo is already
/// closed and the gap persists.
fn line_todo(line: &Line<'_>, which: LineTodo, proposals: &mut Proposals<'_>) {
    let (entry, owner) = (line.entry, line.owner);
    let h = entry.facts.id.as_str();
    let Some(id) = which.id(h) else {
        return;
    };
    match Route::for_todo(proposals.state().todos.get(&id)) {
        Route::Planned => {}
        Route::AddTodo if which == LineTodo::Holdout => {
            let evaluator = line.evaluator.clone();
            let (todo, why) = new_line_todo(entry, which, id, evaluator.as_ref());
            propose_holdout(entry, todo, why, evaluator, line.me, proposals, line.now);
        }
        Route::AddTodo => {
            let (todo, why) = new_line_todo(entry, which, id, owner);
            proposals.add_todo(todo, why);
        }
        Route::Replan => {
            if let Some(obligation) = ids::obligation(which_topic(which), h) {
                let detail = format!(
                    "todo {id} is closed but hypothesis {h} still has the gap it was for: plan the next step"
                );
                proposals.raise(obligation, ObligationKind::Replan, detail, owner.cloned());
            }
        }
    }
}

/// The todo for a line step, for `owner` (the holdout: for its evaluator). Experiments and
/// evaluations are idempotent (they measure and report; re-running one after an unknown
/// outcome only yields another finding); the write-up is not. The hypothesis's owner never
/// evaluates its own holdout.
fn new_line_todo(
    entry: &HypothesisEntry,
    which: LineTodo,
    id: loopx_kernel::TodoId,
    owner: Option<&AgentId>,
) -> (NewTodo, String) {
    let h = entry.facts.id.as_str();
    match which {
        LineTodo::Experiment => (
            NewTodo::advance(id, format!("run a first experiment for hypothesis {h}"))
                .idempotent()
                .with_owner(owner),
            format!("hypothesis {h} has no experiment yet"),
        ),
        LineTodo::Holdout => {
            let mut todo =
                NewTodo::advance(id, format!("run the holdout evaluation of hypothesis {h}"))
                    .with_priority(Priority::P1)
                    .idempotent()
                    .with_owner(owner);
            todo.excluded_agents.insert(entry.owner().clone());
            (
                todo,
                format!("hypothesis {h} has dev findings only; a dev lift alone never supports it"),
            )
        }
        LineTodo::Confirm => {
            let mut todo = NewTodo::advance(
                id,
                format!("evaluate the holdout result of hypothesis {h} independently"),
            )
            .with_priority(Priority::P1)
            .idempotent();
            // Independence: neither whoever produced a holdout result nor the hypothesis's
            // owner may confirm it.
            todo.excluded_agents = holdout_producers(entry);
            todo.excluded_agents.insert(entry.owner().clone());
            (
                todo,
                format!("hypothesis {h} has holdout findings evaluated only by their producers"),
            )
        }
        LineTodo::Writeup => {
            let mut todo = NewTodo::advance(id, format!("write up hypothesis {h} for promotion"))
                .with_owner(owner);
            todo.requires_decisions.extend(ids::promotion_decision(h));
            (
                todo,
                format!("the write-up of {h} waits on the person's promotion decision"),
            )
        }
    }
}

/// Assigns a todo to the line's owner, when the goal knows the owner.
trait WithOwner {
    fn with_owner(self, owner: Option<&AgentId>) -> Self;
}

impl WithOwner for NewTodo {
    fn with_owner(self, owner: Option<&AgentId>) -> Self {
        match owner {
            Some(agent) => self.for_agent(agent.clone()),
            None => self,
        }
    }
}

fn which_topic(which: LineTodo) -> &'static str {
    match which {
        LineTodo::Experiment => "no-experiment",
        LineTodo::Holdout => "no-holdout",
        LineTodo::Confirm => "unconfirmed",
        LineTodo::Writeup => "writeup",
    }
}

fn holdout_producers(entry: &HypothesisEntry) -> BTreeSet<AgentId> {
    entry
        .findings
        .iter()
        .filter(|f| f.facts.split == Split::Holdout)
        .filter_map(|f| {
            let producer = f
                .facts
                .producer
                .as_deref()
                .unwrap_or(entry.owner().as_str());
            AgentId::new(producer).ok()
        })
        .collect()
}

/// The ids of the qualifying findings with `edge`, for questions and details.
fn deciding_findings(entry: &HypothesisEntry, edge: Edge) -> String {
    let ids: Vec<&str> = entry
        .findings
        .iter()
        .filter(|f| f.facts.edge == edge && f.weight.qualifies())
        .map(|f| f.facts.id.as_str())
        .collect();
    format!("finding {}", ids.join(", "))
}

#[cfg(test)]
mod tests {
    use loopx_kernel::testkit::{roster, scenario};
    use loopx_kernel::{Command, Duration, TodoId};

    use super::*;

    #[test]
    fn a_gap_adds_its_todo_waits_on_it_and_replans_once_it_closed() {
        let spec = scenario::spec("route").expect("valid spec");
        let owner = Actor::Person(roster::owner());
        let mut goal = GoalState::create(&owner, roster::start(), &spec).expect("created");
        let id = TodoId::new("holdout:h1").expect("valid id");
        assert_eq!(Route::for_todo(goal.todos.get(&id)), Route::AddTodo);
        let add = Command::AddTodo {
            todo: NewTodo::advance(id.clone(), "holdout"),
        };
        goal.handle(&owner, roster::start(), &add).expect("added");
        assert_eq!(Route::for_todo(goal.todos.get(&id)), Route::Planned);
        let supersede = Command::Supersede {
            todo: id.clone(),
            reason: "done otherwise".into(),
            replacement: None,
            grant_reason: None,
        };
        goal.handle(&owner, roster::start(), &supersede)
            .expect("superseded");
        assert_eq!(Route::for_todo(goal.todos.get(&id)), Route::Replan);
    }

    #[test]
    fn a_capability_is_built_only_from_a_valid_config() {
        let bad = ResearchConfig {
            decision_window: Some(Duration::ZERO),
            ..ResearchConfig::default()
        };
        assert_eq!(
            Research::new(bad).err(),
            Some(ConfigError::EmptyDecisionWindow)
        );
        let research = Research::new(ResearchConfig::default()).expect("valid config");
        assert_eq!(research.source().as_str(), "research");
    }
}
