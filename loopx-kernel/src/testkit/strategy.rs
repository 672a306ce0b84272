//! Generators: steps drawn from the model's current state, mostly legal, with a share of
//! deliberately illegal ones (wrong actor, stale epoch, unknown id, empty text, overspend…).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;

use crate::actor::Actor;
use crate::budget::{Amounts, Limits};
use crate::command::{
    Command, Continuation, GateAnswer, OutcomeResolution, PlanChange, Settlement, Transition,
    Verdict, VerdictOutcome,
};
use crate::evidence::{Lineage, NewEvidence, Observation, ObservedInput, Outcome, SourceOrder};
use crate::gate::{ExpiryPolicy, GateScope, NewGate};
use crate::goal::{Amendment, BudgetExhaustion, Criterion, GoalSpec, GrantedAction, Policy};
use crate::ids::{AgentId, EffectId, EvidenceId, ObligationId, ObservationKey, Subject, TodoId};
use crate::obligation::ObligationKind;
use crate::outbox::{EffectIntent, EffectOutcome};
use crate::retry::{FailureClass, RetryPolicy, TurnFailure};
use crate::time::{Duration, Timestamp};
use crate::todo::{
    HandoffNote, MonitorSpec, NewTodo, Priority, ResumeCondition, TodoClass, WriteSet,
};

use super::model::{LifecycleModel, MStatus, MTodo};
use super::step::Step;
use super::{id, roster};

/// A cursor over random draws. Every draw shrinks towards zero, and zero always means the
/// plain, legal choice, so shrunk cases stay readable.
struct Picker {
    draws: Vec<u32>,
    next: usize,
}

impl Picker {
    fn draw(&mut self) -> u32 {
        let value = self.draws[self.next % self.draws.len()];
        self.next += 1;
        value
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.draw() as usize % n }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len())])
        }
    }

    /// True with roughly `percent` % probability; a zero draw is always false.
    fn chance(&mut self, percent: u32) -> bool {
        self.draw() % 100 >= 100 - percent.min(100)
    }
}

const SUBJECT_REPO: &str = "repo:acme/cli";
const SUBJECT_PR: &str = "pr:acme/cli#7";
const KEY_CI: &str = "ci:acme/cli";
const KEY_PR: &str = "review:acme/cli#7";
const DECISION: &str = "api:error-codes";

fn agent(name: &AgentId) -> Actor {
    Actor::Agent(name.clone())
}

fn owner() -> Actor {
    Actor::Person(roster::owner())
}

fn issue(actor: Actor, command: Command) -> Step {
    Step::Issue {
        actor,
        command: Box::new(command),
    }
}

/// A fresh id: the model's step count makes it unique within a run.
fn fresh<T: TryFrom<String>>(m: &LifecycleModel, prefix: &str) -> T {
    id(&format!("{prefix}{}", m.steps))
}

fn text(p: &mut Picker, valid: &str) -> String {
    if p.chance(4) {
        String::new()
    } else {
        valid.to_owned()
    }
}

/// Any actor at all, weighted towards the ones that usually have a say.
fn any_actor(p: &mut Picker) -> Actor {
    match p.below(10) {
        0..=3 => agent(&roster::agents()[p.below(3)]),
        4 => Actor::Agent(roster::outsider()),
        5 | 6 => owner(),
        7 => Actor::Person(roster::stranger()),
        8 => Actor::Validator(roster::validator()),
        _ => capability(p),
    }
}

/// One of the two capabilities, mostly the planner.
fn capability(p: &mut Picker) -> Actor {
    if p.chance(33) {
        Actor::Capability(roster::other_capability())
    } else {
        Actor::Capability(roster::capability())
    }
}

/// Someone who may shape the plan, or (rarely) someone who may not.
fn planner(p: &mut Picker) -> Actor {
    if p.chance(10) {
        return any_actor(p);
    }
    match p.below(5) {
        0 | 1 => owner(),
        2 | 3 => agent(&roster::agents()[p.below(2)]),
        _ => capability(p),
    }
}

fn todo_ids(m: &LifecycleModel, keep: impl Fn(&MTodo) -> bool) -> Vec<TodoId> {
    m.todos
        .iter()
        .filter(|(_, t)| keep(t))
        .map(|(id, _)| id.clone())
        .collect()
}

/// A todo matching `keep` when there is one (mostly), else any todo, else an unknown id.
fn some_todo(m: &LifecycleModel, p: &mut Picker, keep: impl Fn(&MTodo) -> bool) -> TodoId {
    let preferred = todo_ids(m, keep);
    let all = todo_ids(m, |_| true);
    if !p.chance(12)
        && let Some(id) = p.pick(&preferred)
    {
        return id.clone();
    }
    if !p.chance(8)
        && let Some(id) = p.pick(&all)
    {
        return id.clone();
    }
    id("t-unknown")
}

fn write_set(p: &mut Picker) -> WriteSet {
    let (repository, scopes): (&str, &[&str]) = match p.below(7) {
        0 => ("acme/cli", &["src"]),
        1 => ("acme/cli", &["src/core"]),
        2 => ("acme/cli", &["docs"]),
        3 => ("acme/cli", &["."]),
        4 => ("acme/web", &["src"]),
        5 => ("acme/cli", &["src/ui", "docs/api"]),
        _ if p.chance(50) => ("acme/cli", &[]),
        _ => ("acme/cli", &["../etc"]),
    };
    WriteSet {
        repository: repository.into(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn new_todo(m: &LifecycleModel, p: &mut Picker, id: TodoId) -> NewTodo {
    let existing = todo_ids(m, |_| true);
    let mut todo = NewTodo::advance(id, text(p, "do a bounded piece of work"));
    match p.below(10) {
        0 | 1 => {
            todo.class = TodoClass::Monitor(MonitorSpec {
                watches: super::id(KEY_CI),
                cadence: if p.chance(3) {
                    Duration::ZERO
                } else {
                    Duration::minutes(5)
                },
            });
        }
        2 => {
            if let Some(of) = p.pick(&existing) {
                todo.class = TodoClass::Review { of: of.clone() };
            }
        }
        _ => {
            if p.chance(55) {
                todo.writes = Some(write_set(p));
            }
        }
    }
    todo.priority = [Priority::P2, Priority::P1, Priority::P3][p.below(3)];
    if p.chance(30)
        && let Some(dep) = p.pick(&existing)
    {
        todo.depends_on.insert(dep.clone());
    }
    if p.chance(3) {
        todo.depends_on.insert(super::id("t-unknown"));
    }
    if p.chance(20) {
        todo.requires_decisions.insert(super::id(DECISION));
    }
    let agents = roster::all_agents();
    if p.chance(20) {
        todo.excluded_agents
            .insert(roster::agents()[1 + p.below(2)].clone());
    }
    if p.chance(15) {
        todo.assignee = p.pick(&agents).cloned();
    }
    todo.idempotent = p.chance(30);
    if p.chance(12) {
        todo.budget = Some(Limits {
            turns: Some(1),
            tokens: [None, Some(400)][p.below(2)],
            ..Limits::UNLIMITED
        });
    }
    // Some todos expect more than the policy's default reservation (or say one explicitly).
    if p.chance(20) {
        todo.expected_usage = Some(Box::new(Amounts {
            turns: [0, 1, 3][p.below(3)],
            tokens: [0, 200, 800][p.below(3)],
            wall_ms: [0, 60_000][p.below(2)],
            ..Amounts::ZERO
        }));
    }
    todo
}

/// A fact observed an hour ago, possibly older than what is already known.
fn an_hour_before(now: Timestamp) -> Timestamp {
    Timestamp::from_millis(now.as_millis() - Duration::hours(1).as_millis())
}

fn current_revision(m: &LifecycleModel, subject: &Subject) -> crate::ids::Revision {
    m.heads
        .get(subject)
        .map_or_else(|| id("r0"), |(r, _)| r.clone())
}

fn new_evidence(
    m: &LifecycleModel,
    p: &mut Picker,
    id: EvidenceId,
    earlier: &[EvidenceId],
) -> NewEvidence {
    let subject: Subject = super::id(if p.chance(12) {
        SUBJECT_PR
    } else {
        SUBJECT_REPO
    });
    let seen: Vec<_> = m.revisions_seen.iter().cloned().collect();
    let revision = match p.below(10) {
        0..=6 => current_revision(m, &subject),
        7 => p.pick(&seen).cloned().unwrap_or_else(|| super::id("r0")),
        _ => fresh(m, "rev-e"),
    };
    let mut inputs = Lineage::default();
    let known: Vec<EvidenceId> = m.evidence.keys().chain(earlier).cloned().collect();
    if p.chance(30)
        && let Some(input) = p.pick(&known)
    {
        inputs.evidence.push(input.clone());
        if p.chance(30)
            && let Some(other) = p.pick(&known)
            && other != input
        {
            inputs.evidence.push(other.clone());
        }
    }
    if p.chance(3) {
        inputs.evidence.push(super::id("e-unknown"));
    }
    if p.chance(20) {
        let key: ObservationKey = super::id(KEY_CI);
        let fingerprint = match m.fingerprints.get(&key) {
            Some(current) if !p.chance(30) => current.clone(),
            _ => super::id("f-stale"),
        };
        inputs.observations.push(ObservedInput { key, fingerprint });
    }
    NewEvidence {
        id,
        check: super::id(if p.chance(25) { "lint" } else { "tests" }),
        subject,
        revision,
        outcome: if p.chance(20) {
            Outcome::Fail
        } else {
            Outcome::Pass
        },
        summary: String::new(),
        observed_at: if p.chance(12) {
            an_hour_before(m.now)
        } else {
            m.now
        },
        ttl: if p.chance(20) {
            Some(Duration::minutes(30))
        } else {
            None
        },
        inputs,
    }
}

fn observation(m: &LifecycleModel, p: &mut Picker, key: &str, changed: bool) -> Observation {
    let key: ObservationKey = id(key);
    let subject: Subject = id(if key.as_str() == KEY_CI {
        SUBJECT_REPO
    } else {
        SUBJECT_PR
    });
    let fingerprint = match m.fingerprints.get(&key) {
        Some(current) if !changed => current.clone(),
        _ => fresh(m, "fp"),
    };
    let revision = if p.chance(50) {
        fresh(m, "rev")
    } else {
        current_revision(m, &subject)
    };
    Observation {
        key,
        subject,
        revision,
        fingerprint,
        observed_at: if p.chance(10) {
            an_hour_before(m.now)
        } else {
            m.now
        },
        summary: String::new(),
        facts: BTreeMap::new(),
        // Some sources order their objects: now and then a late delivery of an older state.
        order: p.chance(30).then(|| SourceOrder {
            at: if p.chance(30) {
                an_hour_before(m.now)
            } else {
                m.now
            },
            step: u32::from(p.chance(50)),
        }),
        etag: None,
    }
}

fn resume_condition(m: &LifecycleModel, p: &mut Picker, todo: &TodoId) -> ResumeCondition {
    let others = todo_ids(m, |_| true);
    let gates: Vec<_> = m.gates.keys().cloned().collect();
    match p.below(5) {
        0 => ResumeCondition::At {
            at: m.now.plus(Duration::minutes(5)),
        },
        1 => ResumeCondition::At {
            at: m.now.plus(Duration::hours(1)),
        },
        2 => ResumeCondition::TodoDone {
            todo: p
                .pick(&others)
                .filter(|o| *o != todo || p.chance(50))
                .cloned()
                .unwrap_or_else(|| id("t-unknown")),
        },
        3 => ResumeCondition::GateSettled {
            gate: p.pick(&gates).cloned().unwrap_or_else(|| id("g-unknown")),
        },
        _ => ResumeCondition::ObservationChanged {
            key: id(if p.chance(50) { KEY_PR } else { KEY_CI }),
        },
    }
}

fn grant_reason(p: &mut Picker) -> Option<String> {
    match p.below(10) {
        0..=6 => Some("covering while the holder is away".into()),
        7 => Some("  ".into()),
        _ => None,
    }
}

/// The actor for an action on a todo: usually whoever it belongs to or the owner.
fn todo_actor(m: &LifecycleModel, p: &mut Picker, todo: &TodoId) -> Actor {
    let belongs = m.todos.get(todo).and_then(|t| {
        t.live_lease(m.now)
            .map(|l| l.holder.clone())
            .or_else(|| t.assignee.clone())
    });
    match (p.below(10), belongs) {
        (0..=5, Some(a)) => agent(&a),
        (0..=3, None) => agent(&roster::agents()[p.below(3)]),
        (6 | 7, _) | (4 | 5, None) => owner(),
        _ => any_actor(p),
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Progress,
    Advance,
    AddTodo,
    Claim,
    Begin,
    Settle,
    Renew,
    Release,
    Handoff,
    Resolve,
    Race,
    Intend,
    RecordEffect,
    Defer,
    Block,
    Unblock,
    Supersede,
    Reassign,
    OpenGate,
    AnswerGate,
    RelayAnswer,
    GateNotice,
    WithdrawGate,
    Observe,
    Evidence,
    Raise,
    Discharge,
    Amend,
    Closure,
    Abandon,
    Report,
    Retire,
}

fn weights(m: &LifecycleModel) -> Vec<(u32, Kind)> {
    let now = m.now;
    let leases = || m.todos.values().filter_map(|t| t.lease.as_ref());
    let live_idle = leases().any(|l| l.expires > now && l.turn.is_none());
    let live_turn = leases().any(|l| l.expires > now && l.turn.is_some());
    let live = live_idle || live_turn;
    let expired_turn = leases().any(|l| l.expires <= now && l.turn.is_some());
    let waiting_gate = m.gates.values().any(|g| m.gate_waiting(g));
    let open_obligation = m.obligations.values().any(|o| o.open);
    let claimable = roster::agents().iter().any(|a| !m.frontier(a).is_empty());
    let has_todos = !m.todos.is_empty();
    let when = |cond: bool, yes: u32, no: u32| if cond { yes } else { no };
    vec![
        (m.drive, Kind::Progress),
        (8, Kind::Advance),
        (
            match m.todos.len() {
                0..=2 => 14,
                3..=6 => 6,
                _ => 1,
            },
            Kind::AddTodo,
        ),
        (when(claimable, 12, 3), Kind::Claim),
        (when(live_idle, 10, 1), Kind::Begin),
        (when(live_turn, 12, 1), Kind::Settle),
        (when(live, 3, 1), Kind::Renew),
        (when(live, 3, 1), Kind::Release),
        (when(live, 4, 1), Kind::Handoff),
        (when(expired_turn, 6, 1), Kind::Resolve),
        (when(live_turn, 6, 1), Kind::Race),
        (when(live_turn, 4, 1), Kind::Intend),
        (when(m.effects.is_empty(), 1, 8), Kind::RecordEffect),
        (when(has_todos, 4, 1), Kind::Defer),
        (when(has_todos, 2, 1), Kind::Block),
        (
            when(
                m.todos
                    .values()
                    .any(|t| matches!(t.status, MStatus::Blocked | MStatus::Deferred { .. })),
                5,
                1,
            ),
            Kind::Unblock,
        ),
        (when(has_todos, 3, 1), Kind::Supersede),
        (when(has_todos, 2, 1), Kind::Reassign),
        (4, Kind::OpenGate),
        (when(waiting_gate, 5, 1), Kind::AnswerGate),
        (when(waiting_gate, 4, 1), Kind::RelayAnswer),
        (when(waiting_gate, 3, 1), Kind::GateNotice),
        (when(waiting_gate, 2, 1), Kind::WithdrawGate),
        (4, Kind::Observe),
        (5, Kind::Evidence),
        (when(stalling_poll(m).is_some(), 25, 2), Kind::Raise),
        (when(open_obligation, 6, 1), Kind::Discharge),
        (4, Kind::Amend),
        (2, Kind::Closure),
        (when(m.steps > 20, 1, 0), Kind::Abandon),
        (3, Kind::Report),
        (when(nothing_inert_yet(m), 1, 0), Kind::Retire),
    ]
    .into_iter()
    .filter(|(w, _)| *w > 0)
    .collect()
}

/// The next useful step towards acceptance, picked among those that apply now: settle a turn,
/// begin one, resolve an expired one, claim ready work, answer a question, discharge an
/// obligation, add work, prove a criterion, declare closure; legal by construction.
#[allow(clippy::too_many_lines)] // one option per kind of progress, each a literal command
fn progress(m: &LifecycleModel, p: &mut Picker) -> Step {
    let now = m.now;
    let mut options: Vec<Step> = Vec::new();
    // An intended effect is recorded by its holder, whose readback found it.
    if let Some((id, effect)) = m.effects.iter().next() {
        options.push(issue(
            agent(&effect.holder),
            Command::RecordEffect {
                id: id.clone(),
                outcome: EffectOutcome::Performed,
                note: None,
                grant_reason: None,
            },
        ));
    }
    for (id, todo) in &m.todos {
        let Some(lease) = &todo.lease else { continue };
        let holder = agent(&lease.holder);
        match &lease.turn {
            Some((turn, reserved)) => {
                // Now and then the turn fails, so runs meet the retry policy too.
                let failing = p.chance(12);
                let mut settlement = Settlement {
                    todo: id.clone(),
                    epoch: lease.epoch,
                    turn: turn.clone(),
                    verdict: Verdict {
                        validator: Actor::Validator(roster::validator()),
                        outcome: VerdictOutcome::Passed,
                        summary: "checks pass".into(),
                        signature: None,
                    },
                    evidence: if p.chance(40) {
                        let mut e = new_evidence(m, p, fresh(m, "e-done"), &[]);
                        e.outcome = Outcome::Pass;
                        e.subject = super::id(SUBJECT_REPO);
                        e.revision = current_revision(m, &e.subject);
                        vec![e]
                    } else {
                        vec![]
                    },
                    observations: vec![],
                    transition: if todo.monitor.is_some() && !p.chance(25) {
                        Transition::KeepOpen
                    } else {
                        Transition::Complete {
                            continuation: if p.chance(25) {
                                Continuation::NoFollowUp
                            } else {
                                Continuation::GoalStillActive
                            },
                        }
                    },
                    usage: Amounts {
                        turns: 1,
                        tokens: reserved.tokens / 2,
                        ..Amounts::ZERO
                    },
                    failure: None,
                };
                if failing {
                    settlement.transition = Transition::KeepOpen;
                    if p.chance(50) {
                        settlement.verdict.outcome = VerdictOutcome::Failed;
                    } else {
                        settlement.failure = Some(TurnFailure {
                            class: FailureClass::Exited,
                            detail: "`sh turn.sh` exit 1".into(),
                        });
                    }
                }
                // On a signed goal the validator signs; now and then the agent signs the verdict
                // itself, or carries one of a validator not registered for check `tests`.
                let signer = match p.below(20) {
                    0 => holder.clone(),
                    1 => {
                        settlement.verdict.validator = Actor::Validator(roster::second_validator());
                        settlement.verdict.validator.clone()
                    }
                    _ => Actor::Validator(roster::validator()),
                };
                let settlement = sign_as(m, settlement, &signer);
                if lease.expires > now {
                    // Now and then a fresh session of the holder resumes the turn: it takes
                    // the turn over first, fencing the session that began it.
                    if p.chance(15) {
                        options.push(issue(
                            holder.clone(),
                            Command::TakeOverTurn {
                                todo: id.clone(),
                                epoch: lease.epoch,
                                turn: turn.clone(),
                                ttl: None,
                            },
                        ));
                    }
                    options.push(issue(holder, Command::SettleTurn(settlement)));
                } else {
                    options.push(issue(
                        holder,
                        Command::ResolveOutcome {
                            todo: id.clone(),
                            turn: turn.clone(),
                            resolution: if p.chance(50) {
                                OutcomeResolution::Committed {
                                    settlement: Box::new(settlement),
                                }
                            } else {
                                OutcomeResolution::Absent {
                                    note: "nothing was pushed".into(),
                                }
                            },
                            grant_reason: None,
                        },
                    ));
                }
            }
            None if lease.expires > now && p.chance(25) => {
                let to = roster::agents()
                    .into_iter()
                    .find(|a| a != &lease.holder && !m.excludes(todo, a) && m.agents.contains(a));
                if let Some(to) = to {
                    options.push(issue(
                        holder,
                        Command::Handoff {
                            todo: id.clone(),
                            epoch: lease.epoch,
                            note: HandoffNote {
                                next_action: "finish the change and run the tests".into(),
                                stop_condition: "tests pass".into(),
                                evidence: vec![],
                            },
                            grant_reason: None,
                            to,
                        },
                    ));
                }
            }
            None if lease.expires > now => options.push(issue(
                holder,
                Command::BeginTurn {
                    todo: id.clone(),
                    epoch: lease.epoch,
                    turn: fresh(m, "u"),
                    reserve: None,
                },
            )),
            None => {}
        }
    }
    for who in roster::agents() {
        if let Some(todo) = m.frontier(&who).first() {
            options.push(issue(
                agent(&who),
                Command::Claim {
                    todo: todo.clone(),
                    ttl: None,
                    workspace: Some(roster::worktree(&who)),
                    grant_reason: None,
                },
            ));
        }
    }
    if let Some((id, gate)) = m.gates.iter().find(|(_, g)| m.gate_waiting(g)) {
        options.push(issue(
            gate.owner.clone(),
            Command::AnswerGate {
                gate: id.clone(),
                answer: GateAnswer::Resolve {
                    answer: "yes".into(),
                },
            },
        ));
    }
    if let Some((id, _)) = m.obligations.iter().find(|(_, o)| o.open) {
        options.push(issue(
            owner(),
            Command::Discharge {
                obligation: id.clone(),
                changes: vec![PlanChange::DeclareClosure {
                    reason: "the plan is complete".into(),
                }],
            },
        ));
    }
    if options.is_empty() {
        let unmet = m
            .criteria
            .iter()
            .find(|(c, _)| m.criterion_met(c) != Some(true));
        if let Some((_, (check, subject))) = unmet {
            options.push(issue(
                Actor::Validator(roster::validator()),
                Command::RecordEvidence {
                    evidence: NewEvidence {
                        id: fresh(m, "e-proof"),
                        check: check.clone(),
                        subject: subject.clone(),
                        revision: current_revision(m, subject),
                        outcome: Outcome::Pass,
                        summary: String::new(),
                        observed_at: now,
                        ttl: None,
                        inputs: Lineage::default(),
                    },
                },
            ));
        } else if !m.closure {
            options.push(issue(
                owner(),
                Command::DeclareClosure {
                    reason: "every criterion is met".into(),
                },
            ));
        }
        if m.todos.values().filter(|t| !t.closed()).count() < 2 {
            options.push(issue(
                planner(p),
                Command::AddTodo {
                    todo: new_todo(m, p, fresh(m, "t")),
                },
            ));
        }
    }
    // Let a monitor come due, or a failed todo's pause pass, when nothing else is ready.
    let next_due = m
        .todos
        .values()
        .filter(|t| !t.closed())
        .filter_map(|t| t.monitor.as_ref().map(|mon| mon.due))
        .chain(
            m.todos
                .iter()
                .filter(|(_, t)| !t.closed())
                .filter_map(|(id, _)| m.retry_at(id)),
        )
        .filter(|due| *due > now)
        .min();
    if let Some(due) = next_due
        && (options.is_empty() || p.chance(15))
    {
        options.push(Step::Advance(due.since(now)));
    }
    // When someone just took the name the stall would get, settle that poll quietly now.
    let taken: ObligationId = id(&format!("stalled-r{}", m.revision + 1));
    if let Some(poll) = stalling_poll(m)
        && m.obligations.contains_key(&taken)
    {
        let quiet = options.iter().position(|o| {
            matches!(o, Step::Issue { command, .. } if matches!(command.as_ref(), Command::SettleTurn(s) if s.todo == poll && s.transition == Transition::KeepOpen))
        });
        if let Some(i) = quiet {
            return options.swap_remove(i);
        }
    }
    let chosen = p.below(options.len());
    options
        .into_iter()
        .nth(chosen)
        .unwrap_or(Step::Advance(Duration::minutes(16)))
}

/// Steps from the model's current state: every kind of command, from every kind of actor,
/// and the passing of time. Most steps are legal for the model's state; a share is
/// deliberately illegal so refusals are exercised too.
pub fn step_strategy(model: &LifecycleModel) -> BoxedStrategy<Step> {
    let model = Arc::new(model.clone());
    let kinds = Union::new_weighted(
        weights(&model)
            .into_iter()
            .map(|(w, k)| (w, Just(k)))
            .collect(),
    );
    (kinds, vec(any::<u32>(), 32))
        .prop_map(move |(kind, draws)| {
            let mut p = Picker { draws, next: 0 };
            build(&model, kind, &mut p)
        })
        .boxed()
}

#[allow(clippy::too_many_lines)] // one arm per kind of step
fn build(m: &LifecycleModel, kind: Kind, p: &mut Picker) -> Step {
    match kind {
        Kind::Progress => progress(m, p),
        Kind::Advance => Step::Advance(
            [
                Duration::seconds(30),
                Duration::minutes(2),
                Duration::minutes(6),
                Duration::minutes(16),
                Duration::minutes(70),
            ][p.below(5)],
        ),
        Kind::AddTodo => {
            let id = if p.chance(4) {
                some_todo(m, p, |_| true)
            } else {
                fresh(m, "t")
            };
            issue(
                planner(p),
                Command::AddTodo {
                    todo: new_todo(m, p, id),
                },
            )
        }
        Kind::Claim => claim(m, p),
        Kind::Begin => begin(m, p),
        Kind::Settle => {
            // Now and then a plain settlement of a turn whose lease expired: only a readback
            // may settle that one.
            let current = !p.chance(15);
            let (actor, settlement) = settlement(m, p, current);
            issue(actor, Command::SettleTurn(settlement))
        }
        Kind::Renew | Kind::Release => {
            let todo = some_todo(m, p, |t| t.live_lease(m.now).is_some());
            let (actor, epoch) = holder_and_epoch(m, p, &todo);
            issue(
                actor,
                if matches!(kind, Kind::Renew) {
                    Command::Renew {
                        todo,
                        epoch,
                        ttl: match p.below(10) {
                            0..=6 => None,
                            7 | 8 => Some(Duration::minutes(20)),
                            _ => Some(Duration::ZERO),
                        },
                    }
                } else {
                    Command::Release { todo, epoch }
                },
            )
        }
        Kind::Handoff => handoff(m, p),
        Kind::Resolve => resolve(m, p),
        Kind::Race => race(m, p),
        Kind::Intend => intend(m, p),
        Kind::RecordEffect => record_effect(m, p),
        Kind::Defer | Kind::Block | Kind::Unblock | Kind::Supersede | Kind::Reassign => {
            todo_change(m, p, kind)
        }
        Kind::OpenGate => issue(
            planner(p),
            Command::OpenGate {
                gate: new_gate(m, p),
            },
        ),
        Kind::AnswerGate | Kind::WithdrawGate => gate_answer(m, p, kind),
        Kind::RelayAnswer => relay_answer(m, p),
        Kind::GateNotice => gate_notice(m, p),
        Kind::Observe => {
            let key = if p.chance(35) { KEY_PR } else { KEY_CI };
            let changed = !p.chance(25);
            let actor = match p.below(10) {
                0..=6 => Actor::Provider(roster::provider()),
                7 => agent(&roster::agents()[0]),
                8 => Actor::Agent(roster::outsider()),
                _ => owner(),
            };
            issue(
                actor,
                Command::RecordObservation {
                    observation: observation(m, p, key, changed),
                },
            )
        }
        Kind::Evidence => {
            let actor = match p.below(10) {
                0..=5 => Actor::Validator(roster::validator()),
                6 => Actor::Provider(roster::provider()),
                7 => owner(),
                _ => any_actor(p),
            };
            let id = if p.chance(4) {
                m.evidence
                    .keys()
                    .next()
                    .cloned()
                    .unwrap_or_else(|| fresh(m, "e"))
            } else {
                fresh(m, "e")
            };
            issue(
                actor,
                Command::RecordEvidence {
                    evidence: new_evidence(m, p, id, &[]),
                },
            )
        }
        Kind::Raise => raise(m, p),
        Kind::Discharge => discharge(m, p),
        Kind::Amend => amend(m, p),
        Kind::Closure => {
            let actor = if p.chance(70) { owner() } else { any_actor(p) };
            issue(
                actor,
                Command::DeclareClosure {
                    reason: text(p, "all criteria are met"),
                },
            )
        }
        Kind::Abandon => {
            let actor = if p.chance(60) { owner() } else { any_actor(p) };
            issue(
                actor,
                Command::AbandonGoal {
                    reason: text(p, "no longer needed"),
                },
            )
        }
        Kind::Report => {
            let who = roster::all_agents()[if p.chance(10) { 3 } else { p.below(3) }].clone();
            let workspace = match p.below(8) {
                0..=4 => roster::worktree(&who),
                5 | 6 => roster::shared_checkout(),
                _ => crate::todo::Workspace {
                    top_level: String::new(),
                    common_dir: "/src/acme/.git".into(),
                },
            };
            issue(agent(&who), Command::ReportWorkspace { workspace })
        }
        Kind::Retire => {
            let who = match p.below(4) {
                0 => owner(),
                1 => Actor::Person(roster::stranger()),
                _ => agent(&roster::all_agents()[p.below(4)]),
            };
            issue(who, Command::Retire {})
        }
    }
}

/// True while the goal is younger than its retirement horizon (or never retires): nothing it
/// holds can be inert, so a retirement is an accepted no-op the model predicts.
fn nothing_inert_yet(m: &LifecycleModel) -> bool {
    m.policy
        .retire_after
        .is_none_or(|after| m.now < m.created_at.plus(after))
}

fn claim(m: &LifecycleModel, p: &mut Picker) -> Step {
    let agents = roster::all_agents();
    let legal: Vec<(AgentId, TodoId)> = agents
        .iter()
        .flat_map(|a| m.frontier(a).into_iter().map(move |t| (a.clone(), t)))
        .collect();
    let (who, todo) = match p.pick(&legal) {
        Some((a, t)) if !p.chance(30) => (a.clone(), t.clone()),
        _ => (
            agents[p.below(agents.len())].clone(),
            some_todo(m, p, |t| !t.closed()),
        ),
    };
    let others: Vec<AgentId> = roster::agents().into_iter().filter(|a| a != &who).collect();
    let workspace = match p.below(10) {
        0..=2 => None,
        3 | 4 => Some(roster::shared_checkout()),
        5..=7 => Some(roster::worktree(&who)),
        8 => p.pick(&others).map(roster::worktree),
        _ => Some(crate::todo::Workspace {
            top_level: String::new(),
            common_dir: String::new(),
        }),
    };
    let assigned_elsewhere = m
        .todos
        .get(&todo)
        .and_then(|t| t.assignee.as_ref())
        .is_some_and(|a| a != &who);
    let grant_reason = if assigned_elsewhere {
        grant_reason(p)
    } else {
        None
    };
    let ttl = match p.below(12) {
        0..=6 => None,
        7 | 8 => Some(Duration::minutes(2)),
        9 | 10 => Some(Duration::minutes(45)),
        _ => Some(Duration::ZERO),
    };
    let actor = if p.chance(4) { owner() } else { agent(&who) };
    issue(
        actor,
        Command::Claim {
            todo,
            ttl,
            workspace,
            grant_reason,
        },
    )
}

/// The holder of a todo's lease (usually) and its epoch (usually current, sometimes stale).
fn holder_and_epoch(m: &LifecycleModel, p: &mut Picker, todo: &TodoId) -> (Actor, u64) {
    let entry = m.todos.get(todo);
    let holder = entry.and_then(|t| t.lease.as_ref().map(|l| l.holder.clone()));
    let last = entry.map_or(1, |t| t.last_epoch);
    let actor = match holder {
        Some(h) if !p.chance(12) => agent(&h),
        _ => any_actor(p),
    };
    let epoch = match p.below(20) {
        0 => last + 1,
        1 | 2 => last.saturating_sub(1),
        _ => last,
    };
    (actor, epoch)
}

fn begin(m: &LifecycleModel, p: &mut Picker) -> Step {
    let todo = some_todo(m, p, |t| {
        t.live_lease(m.now).is_some_and(|l| l.turn.is_none())
    });
    let (actor, epoch) = holder_and_epoch(m, p, &todo);
    let turn = if p.chance(4) {
        m.turns
            .keys()
            .next()
            .map_or_else(|| fresh(m, "u"), |(_, turn)| turn.clone())
    } else {
        fresh(m, "u")
    };
    let reserve = match p.below(4) {
        0 => None,
        n => Some(Amounts {
            turns: 1,
            tokens: [100, 300, 1000][n - 1],
            ..Amounts::ZERO
        }),
    };
    issue(
        actor,
        Command::BeginTurn {
            todo,
            epoch,
            turn,
            reserve,
        },
    )
}

/// A settlement of a turn in flight (usually legal), with its actor. `current` prefers leases
/// that are still live; resolutions pass `false` to prefer expired ones.
fn settlement(m: &LifecycleModel, p: &mut Picker, current: bool) -> (Actor, Settlement) {
    let todo = some_todo(m, p, |t| {
        t.lease
            .as_ref()
            .is_some_and(|l| l.turn.is_some() && (l.expires > m.now) == current)
    });
    let (actor, epoch) = holder_and_epoch(m, p, &todo);
    let entry = m.todos.get(&todo);
    let lease = entry.and_then(|t| t.lease.as_ref());
    let (turn, reserved) = match lease.and_then(|l| l.turn.clone()) {
        Some(turn) if !p.chance(6) => turn,
        _ => (fresh(m, "u-other"), Amounts::ONE_TURN),
    };
    let holder = lease.map(|l| l.holder.clone());
    let validator = match p.below(20) {
        0 => holder.as_ref().map_or_else(owner, agent),
        1 | 2 => owner(),
        _ => Actor::Validator(roster::validator()),
    };
    let outcome = match p.below(10) {
        0..=6 => VerdictOutcome::Passed,
        7 | 8 => VerdictOutcome::Progress,
        _ => VerdictOutcome::Failed,
    };
    let mut evidence = Vec::new();
    if p.chance(40) {
        let first: EvidenceId = fresh(m, "e-turn-a");
        evidence.push(new_evidence(m, p, first.clone(), &[]));
        if p.chance(25) {
            let second = new_evidence(m, p, fresh(m, "e-turn-b"), &[first]);
            evidence.push(second);
        }
    }
    let monitor = entry.and_then(|t| t.monitor.as_ref());
    let mut observations = Vec::new();
    match (monitor, p.below(10)) {
        (Some(_), 0..=3) => observations.push(observation(m, p, KEY_CI, true)),
        (Some(_), 4..=6) => observations.push(observation(m, p, KEY_CI, false)),
        (None, 0) => observations.push(observation(m, p, KEY_PR, true)),
        _ => {}
    }
    let transition = match p.below(20) {
        0..=8 => Transition::Complete {
            continuation: match p.below(10) {
                0 | 1 => Continuation::NoFollowUp,
                2..=6 => Continuation::GoalStillActive,
                7 if p.chance(20) => Continuation::Successors(vec![]),
                _ => {
                    let mut next = new_todo(m, p, fresh(m, "t-next"));
                    next.class = TodoClass::Advance;
                    Continuation::Successors(vec![next])
                }
            },
        },
        9..=14 => Transition::KeepOpen,
        15..=17 => Transition::Defer {
            until: resume_condition(m, p, &todo),
        },
        _ => Transition::Block {
            reason: text(p, "waiting on an upstream fix"),
        },
    };
    // Now and then a turn uses more than it reserved: an overrun, charged in full.
    let tokens = if p.chance(10) {
        reserved.tokens + [50, 700][p.below(2)]
    } else {
        reserved.tokens / 2
    };
    let wall_ms = if p.chance(8) {
        reserved.wall_ms + [30_000, 700_000][p.below(2)]
    } else {
        reserved.wall_ms / 2
    };
    let settlement = Settlement {
        todo,
        epoch,
        turn,
        verdict: Verdict {
            validator,
            outcome,
            summary: String::new(),
            signature: None,
        },
        evidence,
        observations,
        transition,
        usage: Amounts {
            turns: 1,
            tokens,
            wall_ms,
            ..Amounts::ZERO
        },
        failure: failure(p),
    };
    (actor, signed(m, p, settlement, holder.as_ref()))
}

/// On a signed goal, the settlement with its verdict signed: mostly by the validator it names;
/// now and then not at all, by the executing agent itself, or naming a validator not
/// registered for check `tests` or with no key at all (each refused with its own code).
fn signed(
    m: &LifecycleModel,
    p: &mut Picker,
    mut settlement: Settlement,
    holder: Option<&AgentId>,
) -> Settlement {
    if !m.signed() {
        return settlement;
    }
    let signer = match p.below(20) {
        0 => return settlement,
        1 => holder.map_or_else(owner, agent),
        2 => {
            settlement.verdict.validator = Actor::Validator(roster::second_validator());
            settlement.verdict.validator.clone()
        }
        3 => {
            settlement.verdict.validator = Actor::Validator(roster::unknown_validator());
            settlement.verdict.validator.clone()
        }
        _ => settlement.verdict.validator.clone(),
    };
    sign_as(m, settlement, &signer)
}

/// On a signed goal, the settlement with its verdict signed by `signer`'s roster key.
fn sign_as(m: &LifecycleModel, mut settlement: Settlement, signer: &Actor) -> Settlement {
    if m.signed() {
        settlement.verdict = crate::identity::sign_verdict(
            &roster::key(signer),
            &m.spec.id,
            &settlement.todo,
            &settlement.turn,
            settlement.epoch,
            settlement.verdict,
            &settlement.evidence,
        );
    }
    settlement
}

/// Mostly no executor failure; sometimes one of each class, rarely with a detail no
/// settlement may carry.
fn failure(p: &mut Picker) -> Option<TurnFailure> {
    if !p.chance(20) {
        return None;
    }
    let class = [
        FailureClass::Exited,
        FailureClass::TimedOut,
        FailureClass::Killed,
        FailureClass::Unauthorized,
        FailureClass::RateLimited,
        FailureClass::Unavailable,
        FailureClass::Other,
    ][p.below(7)];
    let detail = if p.chance(5) {
        "exit 1\u{7}".to_owned()
    } else {
        "`sh turn.sh` exit 1".to_owned()
    };
    Some(TurnFailure { class, detail })
}

fn handoff(m: &LifecycleModel, p: &mut Picker) -> Step {
    let todo = some_todo(m, p, |t| t.live_lease(m.now).is_some());
    let (mut actor, epoch) = holder_and_epoch(m, p, &todo);
    let holder = m
        .todos
        .get(&todo)
        .and_then(|t| t.lease.as_ref().map(|l| l.holder.clone()));
    if p.chance(15) {
        actor = if p.chance(50) {
            owner()
        } else {
            agent(&roster::agents()[1])
        };
    }
    let receivers: Vec<AgentId> = roster::all_agents()
        .into_iter()
        .filter(|a| Some(a) != holder.as_ref() || p.chance(5))
        .collect();
    let to = p.pick(&receivers).cloned().unwrap_or_else(roster::outsider);
    let evidence: Vec<EvidenceId> = m
        .evidence
        .keys()
        .take(usize::from(p.chance(30)))
        .cloned()
        .collect();
    let grant = if actor.agent() == holder.as_ref() {
        None
    } else {
        grant_reason(p)
    };
    issue(
        actor,
        Command::Handoff {
            todo,
            epoch,
            to,
            note: HandoffNote {
                next_action: text(p, "run the integration tests"),
                stop_condition: "tests pass on the current revision".into(),
                evidence,
            },
            grant_reason: grant,
        },
    )
}

/// An effect's intent on a todo with a turn in flight, now and then by someone fenced out (a
/// stale epoch, another actor, an expired lease) or with an id already intended.
fn intend(m: &LifecycleModel, p: &mut Picker) -> Step {
    let todo = some_todo(m, p, |t| t.lease.as_ref().is_some_and(|l| l.turn.is_some()));
    let (actor, epoch) = holder_and_epoch(m, p, &todo);
    let id: EffectId = match m.effect_ids.iter().next() {
        Some(used) if p.chance(10) => used.clone(),
        _ => fresh(m, "fx"),
    };
    let params = [
        ("repo", "acme/cli"),
        ("number", "12"),
        ("body", "CI is green."),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut effect = EffectIntent::new(
        id,
        text(p, "github.comment"),
        "acme/cli#12",
        format!("g/{todo}/{}", m.steps),
        params,
    );
    if p.chance(8) {
        effect.digest = "sha256:0000".into();
    }
    issue(
        actor,
        Command::IntendEffect {
            todo,
            epoch,
            effect,
        },
    )
}

/// A record of a pending effect (or of one already recorded), usually by its holder.
fn record_effect(m: &LifecycleModel, p: &mut Picker) -> Step {
    let pending: Vec<(&EffectId, &super::model::MEffect)> = m.effects.iter().collect();
    let (id, holder) = match pending.get(p.below(pending.len().max(1))) {
        Some((id, effect)) if !p.chance(8) => ((*id).clone(), Some(effect.holder.clone())),
        _ => (
            m.effect_ids
                .iter()
                .next()
                .cloned()
                .unwrap_or_else(|| fresh(m, "fx")),
            None,
        ),
    };
    let actor = match holder {
        Some(h) if !p.chance(15) => agent(&h),
        _ => any_actor(p),
    };
    let grant = if p.chance(30) { grant_reason(p) } else { None };
    issue(
        actor,
        Command::RecordEffect {
            id,
            outcome: if p.chance(50) {
                EffectOutcome::Performed
            } else {
                EffectOutcome::Absent
            },
            note: p
                .chance(30)
                .then(|| "read back from the pull request".into()),
            grant_reason: grant,
        },
    )
}

fn resolve(m: &LifecycleModel, p: &mut Picker) -> Step {
    let (mut actor, settlement) = settlement(m, p, false);
    if p.chance(20) {
        actor = if p.chance(50) {
            owner()
        } else {
            agent(&roster::agents()[1])
        };
    }
    let holder = m
        .todos
        .get(&settlement.todo)
        .and_then(|t| t.lease.as_ref().map(|l| l.holder.clone()));
    let grant = if actor.agent() == holder.as_ref() {
        None
    } else {
        grant_reason(p)
    };
    let todo = settlement.todo.clone();
    let turn = settlement.turn.clone();
    let resolution = if p.chance(50) {
        OutcomeResolution::Committed {
            settlement: Box::new(settlement),
        }
    } else {
        OutcomeResolution::Absent {
            note: text(p, "the push never reached the remote"),
        }
    };
    issue(
        actor,
        Command::ResolveOutcome {
            todo,
            turn,
            resolution,
            grant_reason: grant,
        },
    )
}

/// Two sessions of one agent racing on one turn. The session that resumes it takes it over
/// under the epoch it found; the other still presents an older one (one behind, the epoch it
/// began or resumed under) and renews, settles, releases or takes over too: the model refuses
/// it `stale epoch`, which the machine pins to `stale_lease_epoch`.
fn race(m: &LifecycleModel, p: &mut Picker) -> Step {
    let todo = some_todo(m, p, |t| t.lease.as_ref().is_some_and(|l| l.turn.is_some()));
    let entry = m.todos.get(&todo);
    let lease = entry.and_then(|t| t.lease.as_ref());
    let holder = lease.map_or_else(|| roster::agents()[0].clone(), |l| l.holder.clone());
    let last = entry.map_or(1, |t| t.last_epoch);
    let turn = match lease.and_then(|l| l.turn.as_ref()) {
        Some((turn, _)) if !p.chance(8) => turn.clone(),
        _ => fresh(m, "u-other"),
    };
    let epoch = if p.chance(50) {
        last
    } else {
        last.saturating_sub(1)
    };
    let actor = if p.chance(8) {
        any_actor(p)
    } else {
        agent(&holder)
    };
    let command = match p.below(8) {
        0..=3 => Command::TakeOverTurn {
            todo,
            epoch,
            turn,
            ttl: match p.below(10) {
                0..=7 => None,
                8 => Some(Duration::minutes(20)),
                _ => Some(Duration::ZERO),
            },
        },
        4 => Command::Renew {
            todo,
            epoch,
            ttl: None,
        },
        5 => Command::Release { todo, epoch },
        _ => {
            let (_, mut settlement) = settlement(m, p, true);
            settlement.todo = todo;
            settlement.epoch = epoch;
            settlement.turn = turn;
            Command::SettleTurn(settlement)
        }
    };
    issue(actor, command)
}

fn todo_change(m: &LifecycleModel, p: &mut Picker, kind: Kind) -> Step {
    let todo = match kind {
        Kind::Unblock => some_todo(m, p, |t| {
            matches!(t.status, MStatus::Blocked | MStatus::Deferred { .. })
        }),
        _ => some_todo(m, p, |t| !t.closed()),
    };
    let actor = todo_actor(m, p, &todo);
    let grant = if p.chance(40) { grant_reason(p) } else { None };
    let command = match kind {
        Kind::Defer => Command::Defer {
            until: resume_condition(m, p, &todo),
            todo,
            grant_reason: grant,
        },
        Kind::Block => Command::Block {
            todo,
            reason: text(p, "upstream API is broken"),
            grant_reason: grant,
        },
        Kind::Unblock => Command::Unblock {
            todo,
            grant_reason: grant,
        },
        Kind::Supersede => Command::Supersede {
            todo,
            reason: text(p, "a narrower approach replaces it"),
            replacement: p.chance(35).then(|| new_todo(m, p, fresh(m, "t-alt"))),
            grant_reason: grant,
        },
        _ => Command::Reassign {
            todo,
            to: if p.chance(25) {
                None
            } else {
                roster::all_agents().get(p.below(4)).cloned()
            },
            grant_reason: grant,
        },
    };
    issue(actor, command)
}

fn new_gate(m: &LifecycleModel, p: &mut Picker) -> NewGate {
    let id = if p.chance(4) {
        m.gates
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| fresh(m, "g"))
    } else {
        fresh(m, "g")
    };
    let todos = todo_ids(m, |t| !t.closed());
    let mut scope = GateScope::default();
    match p.below(20) {
        0..=8 => {
            if let Some(t) = p.pick(&todos) {
                scope.todos.insert(t.clone());
            } else {
                scope.decisions.insert(super::id(DECISION));
            }
        }
        9..=15 => {
            scope.decisions.insert(super::id(DECISION));
        }
        16 | 17 => scope.whole_goal = true,
        18 => {
            scope.todos.insert(super::id("t-unknown"));
        }
        _ => {}
    }
    let owner = match p.below(10) {
        0..=5 => owner(),
        6 | 7 => Actor::Validator(roster::validator()),
        8 => Actor::Person(roster::stranger()),
        _ => Actor::Capability(roster::capability()),
    };
    let deadline = match p.below(10) {
        0..=5 => None,
        6 | 7 => Some(m.now.plus(Duration::minutes(10))),
        8 => Some(m.now.plus(Duration::hours(2))),
        _ => Some(m.now),
    };
    NewGate {
        id,
        question: text(p, "may the error codes change?"),
        owner,
        scope,
        deadline,
        on_expiry: if p.chance(40) {
            ExpiryPolicy::KeepAsking
        } else {
            ExpiryPolicy::Expire
        },
    }
}

fn gate_answer(m: &LifecycleModel, p: &mut Picker, kind: Kind) -> Step {
    let waiting: Vec<_> = m
        .gates
        .iter()
        .filter(|(_, g)| m.gate_waiting(g))
        .map(|(id, _)| id.clone())
        .collect();
    let all: Vec<_> = m.gates.keys().cloned().collect();
    let gate = match (p.pick(&waiting), p.pick(&all)) {
        (Some(g), _) if !p.chance(12) => g.clone(),
        (_, Some(g)) if !p.chance(20) => g.clone(),
        _ => id("g-unknown"),
    };
    let entry = m.gates.get(&gate);
    let actor = match (kind, entry) {
        (Kind::AnswerGate, Some(g)) if !p.chance(15) => g.owner.clone(),
        (Kind::WithdrawGate, Some(g)) if !p.chance(25) => g.opened_by.clone(),
        (Kind::WithdrawGate, _) if p.chance(50) => owner(),
        _ => any_actor(p),
    };
    let command = if matches!(kind, Kind::AnswerGate) {
        Command::AnswerGate {
            gate,
            answer: if p.chance(30) {
                GateAnswer::Reject {
                    reason: text(p, "keep the codes stable"),
                }
            } else {
                GateAnswer::Resolve {
                    answer: text(p, "yes, renumber them"),
                }
            },
        }
    } else {
        Command::WithdrawGate {
            gate,
            reason: text(p, "no longer relevant"),
        }
    };
    issue(actor, command)
}

/// The logins the machine maps: the owner's, a stranger's, and one that does not read as a
/// login at all.
const LOGINS: [&str; 3] = ["Olivia-GH", "sam-gh", "not a login"];

/// A provider relays an answer from one of the logins (in any case), usually to a waiting gate
/// and usually as the provider; whether it speaks for the gate's owner is the mapping's to say.
fn relay_answer(m: &LifecycleModel, p: &mut Picker) -> Step {
    let waiting: Vec<_> = m
        .gates
        .iter()
        .filter(|(_, g)| m.gate_waiting(g))
        .map(|(id, _)| id.clone())
        .collect();
    let gate = match p.pick(&waiting) {
        Some(g) if !p.chance(10) => g.clone(),
        _ => id("g-unknown"),
    };
    let login = LOGINS[p.below(3)];
    let login = if p.chance(30) {
        login.to_ascii_lowercase()
    } else {
        login.to_owned()
    };
    let actor = if p.chance(85) {
        Actor::Provider(roster::provider())
    } else {
        any_actor(p)
    };
    let answer = if p.chance(30) {
        GateAnswer::Reject {
            reason: text(p, "rename error_code"),
        }
    } else {
        GateAnswer::Resolve {
            answer: text(p, "error_code is fine"),
        }
    };
    issue(
        actor,
        Command::RelayGateAnswer {
            gate,
            answer,
            relay: crate::login::Relay {
                login,
                delivery: format!("delivery-{}", m.steps),
                message: None,
            },
        },
    )
}

/// A provider intends a gate's notice (usually of a waiting gate, usually as the provider) or
/// records a notice it intended; whether the owner's login is mapped is the mapping's to say.
fn gate_notice(m: &LifecycleModel, p: &mut Picker) -> Step {
    let actor = if p.chance(85) {
        Actor::Provider(roster::provider())
    } else {
        any_actor(p)
    };
    let noticed: Vec<_> = m.gate_notices.keys().cloned().collect();
    if p.chance(35)
        && let Some(gate) = p.pick(&noticed)
    {
        let outcome = if p.chance(50) {
            EffectOutcome::Performed
        } else {
            EffectOutcome::Absent
        };
        return issue(
            actor,
            Command::RecordGateNotice {
                gate: gate.clone(),
                outcome,
                note: Some(text(p, "read back")),
            },
        );
    }
    let waiting: Vec<_> = m
        .gates
        .iter()
        .filter(|(_, g)| m.gate_waiting(g))
        .map(|(id, _)| id.clone())
        .collect();
    let gate = match p.pick(&waiting) {
        Some(g) if !p.chance(10) => g.clone(),
        _ => id("g-unknown"),
    };
    let mut params = BTreeMap::new();
    params.insert("body".to_owned(), text(p, "gate waiting"));
    let mut effect = EffectIntent::new(
        id(&format!("notice-{gate}-{}", m.steps % 3)),
        "github.comment",
        "acme/cli#12",
        format!("g/gate-notice/{gate}"),
        params,
    );
    if p.chance(8) {
        effect.digest = "sha256:0000".into();
    }
    issue(actor, Command::IntendGateNotice { gate, effect })
}

/// A live monitor poll in flight whose quiet settlement would raise a stalled-monitor
/// obligation, if there is one.
fn stalling_poll(m: &LifecycleModel) -> Option<TodoId> {
    let limit = m.policy.monitor_no_change_limit;
    let raised = |id: &TodoId| {
        m.obligations
            .values()
            .any(|o| o.open && o.stalled.as_ref() == Some(id))
    };
    m.todos
        .iter()
        .filter(|(id, t)| {
            t.live_lease(m.now).is_some_and(|l| l.turn.is_some())
                && t.monitor
                    .as_ref()
                    .is_some_and(|mon| limit > 0 && mon.streak + 1 >= limit)
                && !raised(id)
        })
        .map(|(id, _)| id.clone())
        .next()
}

fn raise(m: &LifecycleModel, p: &mut Picker) -> Step {
    let stall_next = stalling_poll(m).is_some();
    let id = match p.below(20) {
        0 => m
            .obligations
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| fresh(m, "o")),
        // A person may pick the very name the kernel would give that obligation next.
        1..=9 if stall_next => super::id(&format!("stalled-r{}", m.revision + 2)),
        1..=3 => super::id(&format!("stalled-r{}", m.revision + 1 + p.below(4) as u64)),
        _ => fresh(m, "o"),
    };
    let actor = match p.below(10) {
        0..=5 => planner(p),
        6 => Actor::Validator(roster::validator()),
        _ => any_actor(p),
    };
    let owner = match p.below(10) {
        0..=4 => None,
        5..=8 => Some(roster::agents()[p.below(3)].clone()),
        _ => Some(roster::outsider()),
    };
    issue(
        actor,
        Command::RaiseObligation {
            id,
            kind: if p.chance(35) {
                ObligationKind::Repair
            } else {
                ObligationKind::Replan
            },
            detail: text(p, "the route through the old API is dead"),
            owner,
        },
    )
}

fn discharge(m: &LifecycleModel, p: &mut Picker) -> Step {
    let open: Vec<_> = m
        .obligations
        .iter()
        .filter(|(_, o)| o.open)
        .map(|(id, o)| (id.clone(), o.owner.clone()))
        .collect();
    let (obligation, owner_agent) = match p.pick(&open) {
        Some(o) if !p.chance(10) => o.clone(),
        _ => (
            m.obligations
                .keys()
                .next()
                .cloned()
                .unwrap_or_else(|| id("o-unknown")),
            None,
        ),
    };
    let actor = match (p.below(10), owner_agent) {
        (0..=5, Some(a)) => agent(&a),
        (0..=3, None) => agent(&roster::agents()[p.below(3)]),
        (4..=7, _) => owner(),
        _ => any_actor(p),
    };
    let target = some_todo(m, p, |t| !t.closed());
    let change = match p.below(8) {
        0 | 1 => PlanChange::AddTodo {
            todo: new_todo(m, p, fresh(m, "t-plan")),
        },
        2 => PlanChange::Block {
            todo: target,
            reason: "replanned".into(),
        },
        3 => PlanChange::Unblock { todo: target },
        4 => PlanChange::Supersede {
            todo: target,
            reason: "replanned".into(),
            replacement: None,
        },
        5 => PlanChange::Defer {
            until: resume_condition(m, p, &target),
            todo: target,
        },
        6 => PlanChange::OpenGate {
            gate: new_gate(m, p),
        },
        _ => PlanChange::DeclareClosure {
            reason: "nothing left to do".into(),
        },
    };
    let changes = if p.chance(5) { vec![] } else { vec![change] };
    issue(
        actor,
        Command::Discharge {
            obligation,
            changes,
        },
    )
}

fn limits(p: &mut Picker) -> Limits {
    Limits {
        turns: [None, Some(2), Some(5), Some(20)][p.below(4)],
        tokens: [None, Some(500), Some(3000)][p.below(3)],
        wall_ms: [None, None, Some(600_000)][p.below(3)],
        ..Limits::UNLIMITED
    }
}

fn policy(p: &mut Picker) -> Policy {
    Policy {
        lease_ttl: [
            Duration::minutes(15),
            Duration::minutes(5),
            Duration::hours(1),
        ][p.below(3)],
        default_reservation: [
            Amounts::ONE_TURN,
            Policy::DEFAULT_RESERVATION,
            Amounts {
                tokens: 100,
                ..Amounts::ONE_TURN
            },
        ][p.below(3)],
        on_budget_exhausted: if p.chance(50) {
            BudgetExhaustion::Wait
        } else {
            BudgetExhaustion::Ask
        },
        monitor_no_change_limit: [3, 2, 0][p.below(3)],
        retry: retry_policy(p),
        stall_turns: [5, 2, 0][p.below(3)],
        stall_goal_turns: [20, 3, 0][p.below(3)],
        clock_skew: crate::goal::DEFAULT_CLOCK_SKEW,
        retire_after: [None, Some(crate::goal::DEFAULT_RETIRE_AFTER)][p.below(2)],
    }
}

/// The default retry policy, or a quick one, or one that never raises an obligation.
fn retry_policy(p: &mut Picker) -> RetryPolicy {
    match p.below(4) {
        0 | 1 => RetryPolicy::default(),
        2 => RetryPolicy {
            attempts: 2,
            backoff: Duration::minutes(1),
            max_backoff: Duration::minutes(3),
            jitter_percent: 50,
        },
        _ => RetryPolicy {
            attempts: 0,
            backoff: Duration::seconds(10),
            max_backoff: Duration::minutes(1),
            jitter_percent: 0,
        },
    }
}

fn criterion(name: &str, check: &str, subject: &str) -> Criterion {
    Criterion {
        id: id(name),
        text: format!("{check} pass on the current revision"),
        check: id(check),
        subject: id(subject),
    }
}

fn amend(m: &LifecycleModel, p: &mut Picker) -> Step {
    let expected = match p.below(12) {
        0 => m.goal_revision + 1,
        1 => m.goal_revision.saturating_sub(1),
        _ => m.goal_revision,
    };
    let actor = if p.chance(10) { any_actor(p) } else { owner() };
    let carol = roster::agents()[2].clone();
    let someone = roster::agents()[p.below(3)].clone();
    let action = [
        GrantedAction::TakeOver,
        GrantedAction::Supersede,
        GrantedAction::Reassign,
    ][p.below(3)];
    let criteria: Vec<_> = m.criteria.keys().cloned().collect();
    let login = LOGINS[p.below(3)].to_owned();
    let amendment = match p.below(13) {
        0 => Amendment::RegisterAgent { agent: carol },
        1 => Amendment::UnregisterAgent { agent: carol },
        2 | 3 => Amendment::SetBudget { limits: limits(p) },
        4 => Amendment::Grant {
            agent: someone,
            action,
        },
        5 => Amendment::Revoke {
            agent: someone,
            action,
        },
        6 => Amendment::AddCriterion {
            criterion: if p.chance(50) {
                criterion("c-lint", "lint", SUBJECT_REPO)
            } else {
                criterion("c-tests", "tests", SUBJECT_REPO)
            },
        },
        7 => Amendment::RemoveCriterion {
            id: p
                .pick(&criteria)
                .cloned()
                .unwrap_or_else(|| id("c-unknown")),
        },
        8 => Amendment::SetPolicy {
            policy: if p.chance(5) {
                Policy {
                    lease_ttl: Duration::ZERO,
                    ..Policy::default()
                }
            } else {
                policy(p)
            },
        },
        9 => Amendment::SetObjective {
            objective: text(p, "ship json output"),
        },
        10 => Amendment::MapLogin {
            person: if p.chance(75) {
                roster::owner()
            } else {
                roster::stranger()
            },
            provider: roster::provider(),
            login,
        },
        11 => Amendment::UnmapLogin {
            provider: roster::provider(),
            login,
        },
        _ => Amendment::Grant {
            agent: roster::outsider(),
            action: GrantedAction::TakeOver,
        },
    };
    let mut amendments = vec![amendment];
    if p.chance(10) {
        amendments.clear();
    }
    issue(
        actor,
        Command::AmendGoal {
            expected_revision: expected,
            amendments,
        },
    )
}

/// Goal specs for generated runs: the roster's agents, zero or one acceptance criterion, a
/// budget (sometimes tight), a policy and a few grants, owned by [`roster::owner`].
pub fn spec_strategy() -> BoxedStrategy<GoalSpec> {
    vec(any::<u32>(), 14)
        .prop_map(|draws| {
            let mut p = Picker { draws, next: 0 };
            let mut grants: BTreeMap<AgentId, BTreeSet<GrantedAction>> = BTreeMap::new();
            if p.chance(50) {
                grants
                    .entry(roster::agents()[1].clone())
                    .or_default()
                    .insert(GrantedAction::TakeOver);
            }
            if p.chance(30) {
                grants
                    .entry(roster::agents()[2].clone())
                    .or_default()
                    .extend([GrantedAction::Supersede, GrantedAction::Reassign]);
            }
            // Now and then the goal is signed: every roster actor's key registered, check
            // `tests` registered for the validator only, and every verdict must be signed.
            let signed = p.chance(35);
            GoalSpec {
                id: id("json-output"),
                objective: "add --format json to the CLI".into(),
                owner: roster::owner(),
                criteria: if p.chance(60) {
                    vec![criterion("c-tests", "tests", SUBJECT_REPO)]
                } else {
                    vec![]
                },
                agents: roster::agents().into_iter().collect(),
                budget: if p.chance(60) {
                    limits(&mut p)
                } else {
                    Limits::UNLIMITED
                },
                policy: if p.chance(50) {
                    policy(&mut p)
                } else {
                    Policy::default()
                },
                grants,
                identity: if signed {
                    crate::Identity::Signed
                } else {
                    crate::Identity::Declared
                },
                keys: if signed {
                    roster::registered_keys()
                } else {
                    Vec::new()
                },
                validators: if signed {
                    [(id("tests"), [Actor::Validator(roster::validator())].into())].into()
                } else {
                    BTreeMap::new()
                },
                capability: None,
            }
        })
        .boxed()
}

/// Runs of failing turns for [`failing_run`](super::checks::failing_run): a retry policy (one to
/// four attempts, pauses from a second to ten minutes, some jitter) and up to eight attempts,
/// each some time after the previous one (often too soon) failing its executor or its validator.
pub fn failing_run_strategy() -> BoxedStrategy<super::checks::FailingRun> {
    let retry = (1u32..=4, 1i64..=600, 1i64..=8, 0u32..=50).prop_map(
        |(attempts, backoff, cap, jitter_percent)| RetryPolicy {
            attempts,
            backoff: Duration::seconds(backoff),
            max_backoff: Duration::seconds(backoff * cap),
            jitter_percent,
        },
    );
    let attempts = vec((0i64..=1_200_000, any::<bool>()), 0..8).prop_map(|steps| {
        steps
            .into_iter()
            .map(|(gap, validation)| (Duration::from_millis(gap), validation))
            .collect::<Vec<_>>()
    });
    (retry, attempts)
        .prop_map(|(retry, attempts)| super::checks::FailingRun { retry, attempts })
        .boxed()
}
