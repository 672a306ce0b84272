//! The capability: goal state in, proposals out. Everything is derived from the goal's recorded
//! observations, todos and gates on every judgement, so a restarted engine judges the same.

use loopx_kernel::ids::bounded_id;
use std::collections::{BTreeMap, BTreeSet};

use loopx_kernel::seams::{Capability, Proposal};
use loopx_kernel::{
    Actor, AgentId, Command, DecisionScope, GateId, GateScope, GoalState, MonitorSpec, NewGate,
    NewTodo, Observation, Priority, Proposals, ResumeCondition, SourceId, Timestamp, Todo,
    TodoClass, TodoId, TodoStatus, WriteSet,
};

use loopx_kernel::facts::github::{
    self, CheckRun, CheckSuite, CiRollup, Commit, CommitStatus, Issue, PullRequest, ReviewThreads,
};
use loopx_kernel::facts::{Fact, FactSchema};

use crate::config::{ConfigError, PrFixConfig};
use crate::facts::{
    CiItem, CiSource, CiVerdict, PullStatus, Review, Thread, Threads, Triage, branch_blocked,
    sha_of_revision,
};
use crate::ids::{self, short};
use crate::lifecycle::{Phase, PullFacts, ReviewStanding, ci_at_head, phase, review_standing};
use crate::questions;
use crate::route::{Route, route};

/// Issue and pull-request fixing as a [`Capability`]. Holds only its name and configuration;
/// it proposes, the kernel validates, and a person decides every merge.
#[derive(Debug, Clone)]
pub struct PrFix {
    source: SourceId,
    config: PrFixConfig,
}

impl PrFix {
    /// The capability named `source` (recorded as the proposals' actor) with `config`.
    ///
    /// # Errors
    /// [`ConfigError`] when the configuration is invalid.
    pub fn new(source: SourceId, config: PrFixConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(PrFix { source, config })
    }

    /// The configuration it judges with.
    pub fn config(&self) -> &PrFixConfig {
        &self.config
    }

    /// What the goal's observations say about the pull request observed as `pull`: its status,
    /// exact head, CI at that head and reviews against it.
    pub fn pull_facts(&self, state: &GoalState, pull: &Observation) -> Option<PullFacts> {
        let thread = Thread::parse(pull.key.as_str(), PullRequest::PREFIX)?;
        let head = sha_of_revision(pull.revision.as_str()).filter(|sha| {
            match PullRequest::read(&pull.facts).head_sha {
                Fact::Known(fact) => fact == *sha,
                _ => true,
            }
        });
        let (ci, reviews) = match head {
            Some(head) => {
                let items = ci_items(state, &thread, head);
                let reviews = reviews(state, &thread);
                let threads = state
                    .observation(&ReviewThreads::key(&thread))
                    .map(Threads::read);
                (
                    ci_at_head(&items, &self.config.required_checks),
                    review_standing(&reviews, threads.as_ref(), head),
                )
            }
            None => (CiVerdict::Unknown, ReviewStanding::default()),
        };
        Some(PullFacts {
            status: PullStatus::read(pull),
            head: head.map(str::to_owned),
            branch_blocked: branch_blocked(pull),
            ci,
            reviews,
        })
    }

    fn me(&self) -> Actor {
        Actor::Capability(self.source.clone())
    }

    fn plan_pull(&self, out: &mut Proposals, pull: &Observation, now: Timestamp) {
        let (Some(thread), Some(facts)) = (
            Thread::parse(pull.key.as_str(), PullRequest::PREFIX),
            self.pull_facts(out.state(), pull),
        ) else {
            return;
        };
        let line = Line::new(self, out.state(), &PullRequest::key(&thread), now);
        match (phase(&facts, self.config.required_approvals), facts.head) {
            (Phase::Closed, _) => {
                let verb = if facts.status == PullStatus::Merged {
                    "merged"
                } else {
                    "closed"
                };
                line.close(
                    out,
                    &format!("{} was {verb}: its line of work ends", pull.key),
                );
            }
            (Phase::Unreadable, _) | (_, None) => {}
            (phase, Some(head)) => {
                if let Some(step) = self.pull_step(out.state(), &thread, pull, phase, &head) {
                    line.advance(out, step);
                }
            }
        }
    }

    /// Each question a reviewer asked in the pull request becomes a todo for whoever works it
    /// ("answer @reviewer's comment …", one per comment or review, quoting its first line), and
    /// is retired once the author answered it, it was deleted, or the pull request ended
    /// ([`questions`]). A stranger's question (see [`questions::trusted`]) waits behind a gate
    /// of the goal's owner, who accepts it as work by answering or dismisses it by rejecting.
    fn plan_questions(&self, out: &mut Proposals, pull: &Observation, now: Timestamp) {
        let Some(thread) = Thread::parse(pull.key.as_str(), PullRequest::PREFIX) else {
            return;
        };
        let Some(author) = PullRequest::read(&pull.facts).author.into_known() else {
            return;
        };
        let ended = matches!(
            PullStatus::read(pull),
            PullStatus::Merged | PullStatus::Closed
        );
        let worker = Line::new(self, out.state(), &PullRequest::key(&thread), now).owner();
        let pr = thread.key("");
        for question in questions::questions(out.state(), &thread, &author) {
            let gate = acceptance_gate_id(&question.id);
            let dismissed = gate.as_ref().is_some_and(|gate| {
                out.state()
                    .gates
                    .get(gate)
                    .is_some_and(|g| matches!(g.status, loopx_kernel::GateStatus::Rejected { .. }))
            });
            let reason = match (question.settled, ended, dismissed) {
                (Some(why), _, _) => format!("{why} in {pr}"),
                (None, true, _) => format!("{pr} ended"),
                (None, false, true) => format!("the goal's owner dismissed it in {pr}"),
                (None, false, false) => {
                    self.ask(out, &question, &pr, worker.as_ref());
                    continue;
                }
            };
            out.retire(&question.id, reason.clone());
            if let Some(gate) = &gate {
                out.withdraw_gate(gate, reason);
            }
        }
    }

    /// Proposes the todo that answers `question`: at once for a trusted asker (or any asker
    /// under `questions_from: anyone`), otherwise behind the owner's acceptance gate.
    fn ask(
        &self,
        out: &mut Proposals,
        question: &questions::Question,
        pr: &str,
        worker: Option<&AgentId>,
    ) {
        // Quoted, with who and where: the asker's words are data, never loopx's instruction.
        let title = format!(
            "answer @{}'s {} in {pr}: “{}”",
            question.who, question.place, question.quote
        );
        let mut todo = NewTodo::advance(question.id.clone(), title).with_priority(Priority::P1);
        if let Some(agent) = worker {
            todo = todo.for_agent(agent.clone());
        }
        let rationale = format!("@{} asked in {pr} and waits for an answer", question.who);
        let open = self.config.questions_from == crate::config::QuestionsFrom::Anyone
            || questions::trusted(out.state(), question);
        if open {
            out.add_todo(todo, rationale);
            return;
        }
        let (Some(gate), Ok(scope)) = (
            acceptance_gate_id(&question.id),
            DecisionScope::new(bounded_id(&format!("{}/accept", question.id))),
        ) else {
            return;
        };
        todo.requires_decisions.insert(scope.clone());
        let association = question.association.as_deref().unwrap_or("no association");
        let gate = NewGate {
            id: gate,
            question: format!(
                "@{} ({association}: not an owner, member or collaborator of the repository) asked in {pr} ({}): “{}”. Answer this gate to make it the agent's work; reject it to dismiss it.",
                question.who, question.place, question.quote
            ),
            owner: Actor::Person(out.state().spec.owner.clone()),
            scope: GateScope {
                decisions: BTreeSet::from([scope]),
                ..GateScope::default()
            },
            deadline: None,
            on_expiry: loopx_kernel::ExpiryPolicy::KeepAsking,
        };
        out.open_gate(
            gate,
            format!("{rationale}; the goal's owner decides whether it is work"),
        );
        out.add_todo(todo, rationale);
    }

    fn plan_issue(&self, out: &mut Proposals, triage: &Observation, now: Timestamp) {
        let Some(thread) = Thread::parse(triage.key.as_str(), github::Triage::PREFIX) else {
            return;
        };
        let line = Line::new(self, out.state(), &thread.key("route:"), now);
        let closed = out
            .state()
            .observation(&Issue::key(&thread))
            .is_some_and(|issue| {
                Issue::read(&issue.facts).state.known().map(String::as_str) == Some("closed")
            });
        if closed {
            line.close(
                out,
                &format!("issue {} is closed: its route ends", thread.key("")),
            );
            return;
        }
        let wanted = route(&Triage::read(triage), self.config.max_fix_scopes);
        let routes = line.todos();
        if routes.last().is_some_and(|t| route_of(t) == Some(wanted)) {
            return; // the same route: refined facts never re-route
        }
        let id = format!("{}/{}-{}", line.prefix, routes.len() + 1, wanted.slug());
        if let Some(todo) = route_todo(&thread, triage, wanted, &id) {
            line.advance(
                out,
                Step {
                    todo,
                    gate: None,
                    quiet: false,
                    rationale: format!(
                        "triage facts route {} to {}",
                        thread.key(""),
                        wanted.slug()
                    ),
                },
            );
        }
    }

    /// The todo (and gate) a live pull request's phase calls for at `head`.
    fn pull_step(
        &self,
        state: &GoalState,
        thread: &Thread,
        pull: &Observation,
        phase: Phase,
        head: &str,
    ) -> Option<Step> {
        let pr = thread.key("");
        let at = short(head);
        let line = ids::line(&PullRequest::key(thread));
        let id = TodoId::new(bounded_id(&format!("{line}/{}@{at}", phase.slug()))).ok()?;
        let monitor = |title: String| NewTodo {
            class: TodoClass::Monitor(MonitorSpec {
                watches: pull.key.clone(),
                cadence: self.config.monitor_cadence,
            }),
            ..NewTodo::advance(id.clone(), title)
        };
        let repair = |title: String, priority| NewTodo {
            writes: Some(WriteSet {
                repository: format!("github.com/{}", thread.repo),
                scopes: BTreeSet::from([".".to_owned()]),
            }),
            ..NewTodo::advance(id.clone(), title).with_priority(priority)
        };
        let step = |todo, quiet, rationale: &str| Step {
            todo,
            gate: None,
            quiet,
            rationale: format!("{pr} at {at}: {rationale}"),
        };
        Some(match phase {
            Phase::CiFailing => step(
                repair(format!("repair failing CI of {pr} at {at}"), Priority::P0),
                false,
                "CI fails at the head",
            ),
            Phase::ChangesRequested => step(
                repair(
                    format!("address the changes requested on {pr} at {at}"),
                    Priority::P0,
                ),
                false,
                "changes requested and not addressed",
            ),
            Phase::ChangesAddressed => step(
                monitor(format!("await the re-review of {pr} at {at}")),
                true,
                "changes addressed at a newer head with every thread resolved",
            ),
            Phase::BranchBlocked => step(
                repair(
                    format!("update the branch of {pr} (behind its base or conflicting) at {at}"),
                    Priority::P1,
                ),
                false,
                "the branch is behind or conflicting",
            ),
            Phase::ChecksPending => step(
                monitor(format!("await CI of {pr} at {at}")),
                true,
                "checks pending at the head",
            ),
            Phase::AwaitingReview => step(
                monitor(format!("await an approval of {pr} at {at}")),
                true,
                "CI green, no approval at the head yet",
            ),
            Phase::Draft => {
                let question = format!("{pr} is a draft at {at}: mark it ready for review?");
                self.gated(
                    state,
                    &line,
                    "ready",
                    at,
                    question,
                    NewTodo::advance(id, format!("mark {pr} ready for review")),
                    format!("{pr} at {at}: a draft waits for its owner"),
                )?
            }
            Phase::ReadyToMerge => {
                let question = format!(
                    "CI is green and approved at the exact head {head} of {pr}: merge it? Merging is yours; loopx never merges."
                );
                let todo = monitor(format!("await the merge of {pr} at {at} (a person merges)"));
                self.gated(
                    state,
                    &line,
                    "merge",
                    at,
                    question,
                    todo,
                    format!("{pr} at {at}: green and approved at the exact head"),
                )?
            }
            Phase::Closed | Phase::Unreadable => return None,
        })
    }

    /// A todo that waits for a person's decision, and the gate that asks for it.
    #[allow(clippy::too_many_arguments)]
    fn gated(
        &self,
        state: &GoalState,
        line: &str,
        what: &str,
        at: &str,
        question: String,
        mut todo: NewTodo,
        rationale: String,
    ) -> Option<Step> {
        let scope = DecisionScope::new(bounded_id(&format!("{line}/{what}@{at}"))).ok()?;
        let owner = self
            .config
            .merge_owner
            .clone()
            .unwrap_or_else(|| state.spec.owner.clone());
        todo.requires_decisions.insert(scope.clone());
        let gate = NewGate {
            id: GateId::new(bounded_id(&format!("{line}/{what}-gate@{at}"))).ok()?,
            question,
            owner: Actor::Person(owner),
            scope: GateScope {
                decisions: BTreeSet::from([scope]),
                ..GateScope::default()
            },
            deadline: None,
            on_expiry: loopx_kernel::ExpiryPolicy::KeepAsking,
        };
        Some(Step {
            todo,
            gate: Some(gate),
            quiet: false,
            rationale,
        })
    }
}

impl Capability for PrFix {
    fn source(&self) -> &SourceId {
        &self.source
    }

    /// Judges every pull request and triaged issue the goal has observed: the goal's recorded
    /// observations are the facts.
    fn judge(&self, state: &GoalState, _agent: &AgentId, now: Timestamp) -> Vec<Proposal> {
        let mut out = Proposals::at(state, now);
        if state.abandoned.is_some() {
            return out.into_vec();
        }
        for pull in state.observations_with_prefix(PullRequest::PREFIX) {
            self.plan_pull(&mut out, pull, now);
            self.plan_questions(&mut out, pull, now);
        }
        for triage in state.observations_with_prefix(github::Triage::PREFIX) {
            self.plan_issue(&mut out, triage, now);
        }
        out.into_vec()
    }
}

/// What one line of work should move to.
struct Step {
    todo: NewTodo,
    gate: Option<NewGate>,
    /// A monitor whose first poll is one cadence away.
    quiet: bool,
    rationale: String,
}

/// One line of work (a pull request or an issue route): the todos and gates this capability
/// made for it, found by their id prefix.
struct Line<'s> {
    prefix: String,
    state: &'s GoalState,
    me: Actor,
    cadence: loopx_kernel::Duration,
    now: Timestamp,
}

impl<'s> Line<'s> {
    fn new(capability: &PrFix, state: &'s GoalState, key: &str, now: Timestamp) -> Self {
        Line {
            prefix: ids::line(key),
            state,
            me: capability.me(),
            cadence: capability.config.monitor_cadence,
            now,
        }
    }

    fn owns(&self, id: &str) -> bool {
        id.strip_prefix(&self.prefix)
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Every todo of the line, in creation order.
    fn todos(&self) -> Vec<&'s Todo> {
        self.state
            .todos
            .values()
            .filter(|t| t.created_by == self.me && self.owns(t.id.as_str()))
            .collect()
    }

    fn open_todos(&self) -> Vec<&'s Todo> {
        self.state
            .pending_todos_by(&self.me)
            .filter(|t| self.owns(t.id.as_str()))
            .collect()
    }

    /// The agent who works the line: the holder or assignee of its latest todo that has one,
    /// or whoever finished it; `None` when nobody has yet (or the goal no longer knows them).
    fn owner(&self) -> Option<AgentId> {
        self.todos()
            .into_iter()
            .rev()
            .find_map(|t| match &t.status {
                TodoStatus::Done { by, .. } => Some(by.clone()),
                _ => t
                    .lease
                    .as_ref()
                    .map(|l| l.holder.clone())
                    .or_else(|| t.assignee.clone()),
            })
            .filter(|agent| self.state.is_registered(agent))
    }

    fn pending_gates(&self) -> impl Iterator<Item = &'s GateId> + '_ {
        self.state
            .pending_gates_by(&self.me, self.now)
            .filter(|g| self.owns(g.id.as_str()))
            .map(|g| &g.id)
    }

    /// Moves the line to `step`: withdraws gates asking about anything else, opens its gate,
    /// and replaces the open todo with its todo (one open todo per line).
    fn advance(&self, out: &mut Proposals, mut step: Step) {
        // Work that writes goes to whoever works the line, so the same agent keeps its context;
        // the capability may still retire it later, since it created it.
        if step.todo.writes.is_some()
            && step.todo.assignee.is_none()
            && let Some(owner) = self.owner()
        {
            step.todo = step.todo.for_agent(owner);
        }
        let open: Vec<&Todo> = self
            .open_todos()
            .into_iter()
            .filter(|t| t.id != step.todo.id)
            .collect();
        // The agent working on the line finishes first; the next judgement moves it on, gates
        // included, so a gate is never asked (or withdrawn) for work that cannot follow yet.
        if open.iter().any(|t| out.held(t)) {
            return;
        }
        let wanted_gate = step.gate.as_ref().map(|g| g.id.clone());
        for gate in self
            .pending_gates()
            .filter(|g| Some(*g) != wanted_gate.as_ref())
        {
            out.withdraw_gate(gate, format!("no longer asked: {}", step.rationale));
        }
        if let Some(gate) = step.gate {
            out.open_gate(gate, step.rationale.clone());
        }
        if self.state.todos.contains_key(&step.todo.id) {
            // Already planned (and maybe done): repeated judgements converge, and whatever
            // else is open on the line is stale.
            for todo in open {
                out.retire(&todo.id, step.rationale.clone());
            }
            return;
        }
        let id = step.todo.id.clone();
        match open.split_first() {
            None => {
                out.add_todo(step.todo, step.rationale);
            }
            Some((current, rest)) => {
                out.supersede(&current.id, step.todo, step.rationale.clone());
                for todo in rest {
                    out.retire(&todo.id, step.rationale.clone());
                }
            }
        }
        if step.quiet {
            out.push(
                Command::Defer {
                    todo: id,
                    until: ResumeCondition::At {
                        at: self.now.plus(self.cadence),
                    },
                    grant_reason: None,
                },
                "a quiet monitor: its first poll is one cadence away",
            );
        }
    }

    /// Ends the line: supersedes every open todo no agent holds, withdraws every pending gate.
    fn close(&self, out: &mut Proposals, reason: &str) {
        for todo in self.open_todos() {
            out.retire(&todo.id, reason);
        }
        for gate in self.pending_gates() {
            out.withdraw_gate(gate, reason);
        }
    }
}

/// The route a route todo stands for, from its id (`…/<generation>-<route>`).
fn route_of(todo: &Todo) -> Option<Route> {
    let (_, last) = todo.id.as_str().rsplit_once('/')?;
    Route::from_slug(last.split_once('-')?.1)
}

/// The todo that works an issue along `route`.
fn route_todo(thread: &Thread, triage: &Observation, route: Route, id: &str) -> Option<NewTodo> {
    let id = TodoId::new(bounded_id(id)).ok()?;
    let facts = Triage::read(triage);
    let issue = thread.key("");
    Some(match route {
        Route::FixPr => {
            let validation = clip(facts.validation.as_deref().unwrap_or_default(), 200);
            let mut todo = NewTodo::advance(
                id,
                format!("fix {issue} in a pull request; validate with: {validation}"),
            )
            .with_priority(Priority::P1);
            todo.writes = Some(WriteSet {
                repository: format!("github.com/{}", thread.repo),
                scopes: facts.scope.unwrap_or_default().into_iter().collect(),
            });
            todo
        }
        Route::CommentOnly => NewTodo::advance(
            id,
            format!(
                "answer {issue} with a comment only: a code fix is not feasible from the facts"
            ),
        ),
        Route::TriageOnly => NewTodo::advance(
            id,
            format!("triage {issue}: reproduce it, bound the scope, name a focused validation"),
        )
        .idempotent(),
    })
}

/// CI items about the exact `head` of the pull request: check runs, suites and statuses of
/// that commit, and those the REST roll-up lists when it was read at that head (the roll-up as
/// a whole when it lists none). Of a check run
/// or status both heard of on its own (a delivery) and listed by the roll-up (a poll), the one
/// observed last counts: a poll read before a check completed never hides its completion, and a
/// poll after a re-run shows the re-run.
fn ci_items(state: &GoalState, thread: &Thread, head: &str) -> Vec<CiItem> {
    let commit = Commit::of(thread, head);
    let mut items: BTreeMap<(CiSource, String), (Timestamp, CiItem)> = BTreeMap::new();
    for observation in [CheckRun::PREFIX, CheckSuite::PREFIX, CommitStatus::PREFIX]
        .iter()
        .flat_map(|kind| state.observations_with_prefix(&commit.streams(kind)))
    {
        if let Some(item) = CiItem::read(observation).filter(|item| item.sha == head) {
            let key = (item.source, item.name.clone());
            items.insert(key, (observation.observed_at, item));
        }
    }
    if let Some(rollup) = state.observation(&CiRollup::key(thread)) {
        let listed = CiItem::rolled_up(rollup);
        // A roll-up that names none of its items counts as a whole.
        if listed.is_empty()
            && let Some(whole) = CiItem::read(rollup).filter(|item| item.sha == head)
        {
            items.insert(
                (whole.source, whole.name.clone()),
                (rollup.observed_at, whole),
            );
        }
        for item in listed {
            let key = (item.source, item.name.clone());
            let newer = items
                .get(&key)
                .is_none_or(|(heard, _)| rollup.observed_at > *heard);
            if item.sha == head && newer {
                items.insert(key, (rollup.observed_at, item));
            }
        }
    }
    items.into_values().map(|(_, item)| item).collect()
}

/// Each reviewer's latest review of the pull request.
fn reviews(state: &GoalState, thread: &Thread) -> Vec<Review> {
    state
        .observations_with_prefix(&github::Review::streams(thread))
        .map(Review::read)
        .collect()
}

/// At most `max` characters of `text`.
fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The gate through which the goal's owner accepts or dismisses a stranger's question.
fn acceptance_gate_id(question: &TodoId) -> Option<GateId> {
    GateId::new(bounded_id(&format!("{question}/accept-gate"))).ok()
}
