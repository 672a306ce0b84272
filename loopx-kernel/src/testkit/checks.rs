//! Invariant checks that need no model: they read a goal's state, its event log and the
//! command that was just handled, and probe the kernel's pure functions ([`crate::execute`],
//! [`crate::decide`], [`crate::frontier`], [`crate::terminal`]) without changing anything.
//!
//! Each check names the invariant of the design it covers (1 to 18); an empty list of
//! [`Finding`]s means every one holds.

use std::collections::BTreeMap;
use std::fmt;

use crate::actor::Actor;
use crate::budget::{Amounts, Ledger, Limits};
use crate::command::{Command, Settlement, Transition, Verdict, VerdictOutcome};
use crate::decide::{
    Decision, LeaseStep, Question, WaitReason, decide, frontier, last_change, next_wake, terminal,
};
use crate::event::{Event, RecordedEvent, SettledTransition};
use crate::evidence::Outcome;
use crate::execute::execute;
use crate::ids::{AgentId, TodoId};
use crate::refusal::Refusal;
use crate::state::{CriterionStatus, GoalState};
use crate::time::{Duration, Timestamp};
use crate::todo::{ContinuationRecord, ResumeCondition, Todo, TodoStatus, Workspace, WriteSet};

/// One broken property: which rule, and what breaks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The invariant, as `"<number> <name>"` after the design's list, or `model` for a
    /// disagreement with the reference model.
    pub rule: &'static str,
    /// What was seen.
    pub detail: String,
}

impl Finding {
    /// A finding against `rule`.
    pub fn new(rule: &'static str, detail: impl Into<String>) -> Self {
        Finding {
            rule,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.rule, self.detail)
    }
}

struct Out(Vec<Finding>);

impl Out {
    fn check(&mut self, ok: bool, rule: &'static str, detail: impl FnOnce() -> String) {
        if !ok {
            self.0.push(Finding::new(rule, detail()));
        }
    }
}

fn live(todo: &Todo, now: Timestamp) -> Option<&crate::todo::Lease> {
    todo.lease.as_deref().filter(|l| now < l.expires_at)
}

/// Path prefixes nest component-wise; `.` and empty components are the repository root.
fn scopes_collide(a: &WriteSet, b: &WriteSet) -> bool {
    let parts = |s: &str| -> Vec<String> {
        s.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_owned)
            .collect()
    };
    a.repository == b.repository
        && a.scopes.iter().any(|x| {
            b.scopes.iter().any(|y| {
                let (x, y) = (parts(x), parts(y));
                x.iter().zip(&y).all(|(p, q)| p == q)
            })
        })
}

fn within(limits: &Limits, committed: Amounts) -> bool {
    [
        (limits.turns, committed.turns),
        (limits.tokens, committed.tokens),
        (limits.cost_micros, committed.cost_micros),
        (limits.wall_ms, committed.wall_ms),
    ]
    .iter()
    .all(|(limit, used)| limit.is_none_or(|l| *used <= l))
}

/// Spent plus reserved within the limits: what admitting a turn must leave.
fn ledger_within(ledger: &Ledger) -> bool {
    within(&ledger.limits, ledger.spent.plus(ledger.reserved))
}

/// Spent plus reserved within the limits but for what overruns charged beyond reservations
/// (`spent + reserved ≤ limit + overrun`): what holds between any two steps.
fn ledger_within_overruns(ledger: &Ledger) -> bool {
    ledger.overrun.turns <= ledger.spent.turns
        && ledger.overrun.tokens <= ledger.spent.tokens
        && ledger.overrun.cost_micros <= ledger.spent.cost_micros
        && ledger.overrun.wall_ms <= ledger.spent.wall_ms
        && within(
            &ledger.limits,
            ledger.spent.plus(ledger.reserved).minus(ledger.overrun),
        )
}

/// A workspace of the agent's own that no other lease uses, for probing claims of writing
/// todos by agents that have not reported one.
fn probe_workspace(agent: &AgentId) -> Workspace {
    Workspace {
        top_level: format!("/probe/{agent}"),
        common_dir: "/probe/.git".into(),
    }
}

/// Checks everything observable about one goal state and the log it was folded from, at
/// `now`, for each of `agents`:
///
/// - 1: replaying the log reproduces the state exactly; `decide` gives the same answer twice
///   and on the replayed state; the state's snapshot decodes (with
///   [`Snapshot::decode`](crate::Snapshot::decode)) to the same state, which re-encodes to the
///   same bytes;
/// - 2: the log's revisions are 1, 2, 3… and the state's revision is the last;
/// - 3: every lease epoch in the log is higher than the todo's previous one;
/// - 4: each turn begins once, settles at most once, only after it began, and the ledger's
///   spent amount is exactly the sum charged by settlements;
/// - 8: every done todo was completed by exactly one settlement, with the continuation it
///   records;
/// - 7: a pending gate keeps every todo it covers out of every frontier, and an agent with a
///   non-empty frontier is never told to wait or ask about a gate;
/// - 9: `decide` answers terminal exactly when [`terminal`] holds, and an accepted goal has no
///   open work, leases, pending gates or open obligations, a closure intent and every
///   criterion met;
/// - 10: a met criterion rests on passing fresh evidence at its subject's current revision,
///   and no evidence bound to another revision is fresh;
/// - 12, 13: every frontier entry is claimable by its agent right now (probed through
///   [`execute`]), never leased live, never for an excluded or unregistered agent; and no
///   claim by an unregistered or excluded agent, or on another agent's live lease, is accepted;
/// - 16: no two live leases write overlapping scopes;
/// - 18: evidence citing stale evidence or a moved observation is stale;
/// - and [`crate::check_invariants`] finds nothing.
pub fn check_state(
    state: &GoalState,
    log: &[RecordedEvent],
    now: Timestamp,
    agents: &[AgentId],
) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    for violation in crate::check_invariants(state, now) {
        out.0.push(Finding::new(
            "structural",
            format!("{}: {}", violation.rule, violation.detail),
        ));
    }
    replay_and_decide(state, log, now, agents, &mut out);
    log_history(state, log, &mut out);
    frontiers(state, now, agents, &mut out);
    time_windows(state, now, agents, &mut out);
    terminal_and_evidence(state, now, agents, &mut out);
    never_claimable(state, now, agents, &mut out);
    let live: Vec<&Todo> = state
        .todos
        .values()
        .filter(|t| live(t, now).is_some())
        .collect();
    for (i, a) in live.iter().enumerate() {
        for b in &live[i + 1..] {
            if let (Some(wa), Some(wb)) = (&a.writes, &b.writes) {
                out.check(!scopes_collide(wa, wb), "16 write scopes", || {
                    format!(
                        "todos {} and {} hold live leases on overlapping scopes",
                        a.id, b.id
                    )
                });
            }
        }
    }
    out.0
}

/// Retirement changes no decision: the state with everything inert at `now` retired (a horizon
/// of zero, so whatever this run closed or replaced counts) decides, frontiers, waits and
/// judges every criterion exactly as the state itself, still passes every structural check,
/// and folds from the log with the `retired` event appended.
pub fn check_retirement(
    state: &GoalState,
    log: &[RecordedEvent],
    now: Timestamp,
    agents: &[AgentId],
) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    let mut eager = state.clone();
    eager.spec.policy.retire_after = Some(Duration::ZERO);
    let mut retired = eager.clone();
    let owner = retired.owner();
    let events = match retired.handle(&owner, now, &Command::Retire {}) {
        Ok(events) => events,
        Err(refusal) => {
            out.0.push(Finding::new(
                "retirement",
                format!("the owner's retire was refused: {refusal}"),
            ));
            return out.0;
        }
    };
    // Retired evidence may take a wake with it (its expiry), never a decision: both states
    // decide alike now and at the wake the unretired one has.
    let wake = next_wake(&eager, now);
    out.check(
        next_wake(&retired, now).is_none_or(|later| wake.is_some_and(|w| later >= w)),
        "retirement",
        || format!("retiring {events:?} brought a wake forward"),
    );
    for agent in agents {
        for at in std::iter::once(now).chain(wake) {
            out.check(
                decide(&retired, agent, at) == decide(&eager, agent, at),
                "retirement",
                || format!("decide for {agent} at {at} changed by retiring {events:?}"),
            );
        }
        out.check(
            frontier(&retired, agent, now) == frontier(&eager, agent, now),
            "retirement",
            || format!("the frontier of {agent} changed by retiring {events:?}"),
        );
    }
    out.check(
        retired.criteria_status(now) == eager.criteria_status(now)
            && terminal(&retired, now) == terminal(&eager, now),
        "retirement",
        || {
            format!(
                "a criterion or terminal changed by retiring {events:?}: {:?} {:?} became {:?} {:?}",
                eager.criteria_status(now),
                terminal(&eager, now),
                retired.criteria_status(now),
                terminal(&retired, now)
            )
        },
    );
    for violation in crate::check_invariants(&retired, now) {
        out.0.push(Finding::new(
            "retirement",
            format!("after retiring, {}: {}", violation.rule, violation.detail),
        ));
    }
    if !events.is_empty() {
        let mut history = log.to_vec();
        history.extend(events);
        // The log carries the run's own policy; the eager horizon is this check's.
        let folded = GoalState::replay(&history).map(|mut folded| {
            folded.spec.policy.retire_after = Some(Duration::ZERO);
            folded
        });
        out.check(
            folded.is_ok_and(|folded| folded == retired),
            "retirement",
            || "the log with the retirement does not fold to the retired state".into(),
        );
    }
    out.0
}

fn replay_and_decide(
    state: &GoalState,
    log: &[RecordedEvent],
    now: Timestamp,
    agents: &[AgentId],
    out: &mut Out,
) {
    let replayed = match GoalState::replay(log) {
        Ok(replayed) => replayed,
        Err(error) => {
            out.0.push(Finding::new(
                "1 replay",
                format!("the log does not replay: {error}"),
            ));
            return;
        }
    };
    out.check(&replayed == state, "1 replay", || {
        "folding the log gives a different state than the one handled".into()
    });
    snapshot_round_trip(state, out);
    for agent in agents {
        let first = decide(state, agent, now);
        out.check(
            first == decide(state, agent, now),
            "1 decide is pure",
            || format!("decide for {agent} changed between two calls"),
        );
        out.check(
            first == decide(&replayed, agent, now),
            "1 decide is pure",
            || format!("decide for {agent} differs on the replayed state"),
        );
    }
}

/// encode → decode → encode is the identity on every state the kernel folds.
fn snapshot_round_trip(state: &GoalState, out: &mut Out) {
    let text = match serde_json::to_string(&state.snapshot()) {
        Ok(text) => text,
        Err(error) => {
            out.0.push(Finding::new(
                "1 snapshot",
                format!("the snapshot does not encode: {error}"),
            ));
            return;
        }
    };
    match crate::Snapshot::decode(&text) {
        Ok(decoded) => {
            out.check(&decoded.state == state, "1 snapshot", || {
                "the snapshot decodes to another state".into()
            });
            let again = serde_json::to_string(&decoded).unwrap_or_default();
            out.check(again == text, "1 snapshot", || {
                "the decoded snapshot re-encodes to other bytes".into()
            });
        }
        Err(error) => out.0.push(Finding::new(
            "1 snapshot",
            format!("the kernel's own snapshot is refused: {error}"),
        )),
    }
}

#[allow(clippy::too_many_lines)] // one arm per kind of event the log's invariants follow
fn log_history(state: &GoalState, log: &[RecordedEvent], out: &mut Out) {
    let mut epochs: BTreeMap<&TodoId, u64> = BTreeMap::new();
    // A turn is one lease's one run: it is named by its todo, its id and the event that began
    // it (an id may come back under a later lease, as another turn).
    let mut begun: BTreeMap<(&TodoId, &crate::ids::TurnId), usize> = BTreeMap::new();
    let mut settled: BTreeMap<(&TodoId, &crate::ids::TurnId, usize), u32> = BTreeMap::new();
    let mut charged = Amounts::ZERO;
    let mut completions: BTreeMap<&TodoId, &ContinuationRecord> = BTreeMap::new();
    for (i, recorded) in log.iter().enumerate() {
        out.check(recorded.revision == i as u64 + 1, "2 revisions", || {
            format!("event {i} has revision {}", recorded.revision)
        });
        match &recorded.event {
            Event::LeaseAcquired { todo, epoch, .. }
            | Event::LeaseHandedOff { todo, epoch, .. }
            | Event::TurnTakenOver { todo, epoch, .. } => {
                let previous = epochs.insert(todo, *epoch).unwrap_or(0);
                out.check(*epoch > previous, "3 epochs increase", || {
                    format!("todo {todo} got epoch {epoch} after {previous}")
                });
            }
            Event::TurnBegun { todo, turn, .. } => {
                begun.insert((todo, turn), i);
            }
            Event::TurnSettled {
                todo,
                turn,
                charged: c,
                transition,
                ..
            } => {
                match begun.get(&(todo, turn)) {
                    Some(at) => *settled.entry((todo, turn, *at)).or_default() += 1,
                    None => out.check(false, "4 charged once", || {
                        format!("turn {turn} of todo {todo} settled before it began")
                    }),
                }
                charged = charged.plus(*c);
                if let SettledTransition::Complete { continuation, .. } = transition {
                    let previous = completions.insert(todo, continuation);
                    out.check(previous.is_none(), "8 one continuation", || {
                        format!("todo {todo} completed twice")
                    });
                }
            }
            _ => {}
        }
    }
    out.check(state.revision == log.len() as u64, "2 revisions", || {
        format!(
            "state at revision {} after {} events",
            state.revision,
            log.len()
        )
    });
    for (todo, epoch) in &epochs {
        let last = state.todos.get(todo).map(|t| t.last_epoch);
        out.check(last == Some(*epoch), "3 epochs increase", || {
            format!("todo {todo} last epoch {last:?}, log says {epoch}")
        });
    }
    for ((todo, turn, at), n) in &settled {
        out.check(*n == 1, "4 charged once", || {
            format!("turn {turn} of todo {todo} settled {n} times")
        });
        // Unless its id began again later, a settled turn is no longer in flight.
        let latest = begun.get(&(*todo, *turn)) == Some(at);
        let still_in_flight = state
            .todos
            .get(todo)
            .and_then(Todo::turn_in_flight)
            .is_some_and(|x| &&x.id == turn);
        out.check(!(latest && still_in_flight), "4 charged once", || {
            format!("turn {turn} of todo {todo} settled in the log but is still in flight")
        });
    }
    for todo in state.todos.values() {
        if let TodoStatus::Done { continuation, .. } = &todo.status {
            let recorded = completions.get(&todo.id);
            out.check(
                recorded == Some(&continuation),
                "8 one continuation",
                || {
                    format!(
                        "done todo {} records {continuation:?}, its settlement {recorded:?}",
                        todo.id
                    )
                },
            );
        }
    }
    out.check(charged == state.ledger.spent, "4 charged once", || {
        format!(
            "settlements charged {charged:?}, the ledger spent {:?}",
            state.ledger.spent
        )
    });
}

fn pending_gates_cover(
    state: &GoalState,
    todo: &Todo,
    now: Timestamp,
) -> Option<crate::ids::GateId> {
    state
        .gates
        .values()
        .filter(|g| g.state_at(now).is_pending())
        .find(|g| {
            g.scope.whole_goal
                || g.scope.todos.contains(&todo.id)
                || todo
                    .requires_decisions
                    .iter()
                    .any(|d| g.scope.decisions.contains(d))
        })
        .map(|g| g.id.clone())
}

/// Time alone changes nothing between [`last_change`] and [`next_wake`]: at the window's start
/// (a day back when there is none), halfway to `now`, and just before its end (a month on when
/// there is none), every agent's decision and frontier and the goal's terminal standing are
/// the ones at `now`. Stores rely on this window to keep index rows without recomputing them.
fn time_windows(state: &GoalState, now: Timestamp, agents: &[AgentId], out: &mut Out) {
    let shifted = |t: Timestamp, millis: i64| Timestamp::from_millis(t.as_millis() + millis);
    let from = last_change(state, now).unwrap_or(shifted(now, -Duration::hours(24).as_millis()));
    let until =
        next_wake(state, now).map_or(now.plus(Duration::hours(24 * 30)), |wake| shifted(wake, -1));
    let halfway = Timestamp::from_millis(from.as_millis() + now.since(from).as_millis() / 2);
    for at in [from, halfway, until] {
        out.check(
            terminal(state, at) == terminal(state, now),
            "wake windows",
            || format!("the terminal standing at {at} differs from the one at {now}"),
        );
        for agent in agents {
            out.check(
                frontier(state, agent, at) == frontier(state, agent, now),
                "wake windows",
                || format!("the frontier of {agent} at {at} differs from the one at {now}"),
            );
            let (then, current) = (decide(state, agent, at), decide(state, agent, now));
            out.check(then == current, "wake windows", || {
                format!("{agent}'s decision at {at} ({then:?}) differs from the one at {now} ({current:?})")
            });
        }
    }
}

fn frontiers(state: &GoalState, now: Timestamp, agents: &[AgentId], out: &mut Out) {
    for agent in agents {
        let ready = frontier(state, agent, now);
        for id in &ready {
            let Some(todo) = state.todos.get(id) else {
                out.0.push(Finding::new(
                    "13 frontier",
                    format!("frontier names unknown todo {id}"),
                ));
                continue;
            };
            out.check(state.spec.agents.contains(agent), "12 eligibility", || {
                format!("todo {id} is in the frontier of unregistered {agent}")
            });
            out.check(
                !todo.excluded_agents.contains(agent),
                "12 eligibility",
                || format!("todo {id} is in the frontier of excluded {agent}"),
            );
            out.check(live(todo, now).is_none(), "12 eligibility", || {
                format!("live-leased todo {id} is in the frontier of {agent}")
            });
            if let Some(gate) = pending_gates_cover(state, todo, now) {
                out.0.push(Finding::new(
                    "7 gates",
                    format!(
                        "todo {id} is covered by pending gate {gate} yet in the frontier of {agent}"
                    ),
                ));
            }
            let workspace = (todo.writes.is_some() && !state.workspaces.contains_key(agent))
                .then(|| probe_workspace(agent));
            let claim = Command::Claim {
                todo: id.clone(),
                ttl: None,
                workspace,
                grant_reason: None,
            };
            if let Err(refusal) = execute(Some(state), &Actor::Agent(agent.clone()), now, &claim) {
                out.0.push(Finding::new(
                    "13 frontier",
                    format!("todo {id} is in the frontier of {agent} but its claim is refused: {refusal}"),
                ));
            }
        }
        let decision = decide(state, agent, now);
        if let Decision::Continue(assignment) = &decision
            && assignment.lease == LeaseStep::Claim
        {
            out.check(
                ready.first() == Some(&assignment.todo),
                "13 frontier",
                || {
                    format!(
                        "decide offers {} to {agent}, frontier is {ready:?}",
                        assignment.todo
                    )
                },
            );
        }
        if ready.is_empty() {
            continue;
        }
        let budget_only = |reasons: &[WaitReason]| {
            !reasons.is_empty()
                && reasons
                    .iter()
                    .all(|r| matches!(r, WaitReason::Budget { .. }))
        };
        let idle = match &decision {
            Decision::Ask { questions, .. } => {
                questions.iter().any(|q| matches!(q, Question::Gate { .. }))
            }
            Decision::Wait { reasons, .. } => !budget_only(reasons),
            Decision::Terminal { .. } => true,
            _ => false,
        };
        out.check(!idle, "7 dual channel", || {
            format!(
                "{agent} has runnable work {ready:?} but decide says {}",
                decision.kind()
            )
        });
    }
}

/// Probes claims that must be refused whatever else holds: by an unregistered or excluded
/// agent, and on a todo another agent holds a live lease on.
fn never_claimable(state: &GoalState, now: Timestamp, agents: &[AgentId], out: &mut Out) {
    for todo in state.pending_todos() {
        let holder = live(todo, now).map(|l| &l.holder);
        for agent in agents {
            let barred = !state.spec.agents.contains(agent)
                || state.excludes(todo, agent)
                || holder.is_some_and(|h| h != agent);
            if !barred {
                continue;
            }
            let claim = Command::Claim {
                todo: todo.id.clone(),
                ttl: None,
                workspace: Some(probe_workspace(agent)),
                grant_reason: Some("probing".into()),
            };
            let outcome = execute(Some(state), &Actor::Agent(agent.clone()), now, &claim);
            out.check(outcome.is_err(), "12 eligibility", || {
                format!("{agent} may claim todo {} (holder {holder:?})", todo.id)
            });
        }
    }
}

fn terminal_and_evidence(state: &GoalState, now: Timestamp, agents: &[AgentId], out: &mut Out) {
    let end = terminal(state, now);
    for agent in agents {
        let decision = decide(state, agent, now);
        let said = match decision {
            Decision::Terminal { outcome } => Some(outcome),
            _ => None,
        };
        out.check(said == end, "9 terminal", || {
            format!("decide for {agent} says {said:?}, terminal says {end:?}")
        });
    }
    if end == Some(crate::decide::TerminalOutcome::Accepted) {
        let criteria = state.criteria_status(now);
        let ok = state
            .todos
            .values()
            .all(|t| t.status.is_closed() && t.lease.is_none())
            && !state.gates.values().any(|g| g.state_at(now).is_pending())
            && state.obligations.values().all(|o| o.discharged.is_some())
            && state.closure.is_some()
            && state.pending_effects.is_empty()
            && criteria.iter().all(|(_, s)| s.is_met());
        out.check(ok, "9 terminal", || {
            "accepted while its conditions do not hold".into()
        });
    }
    for criterion in &state.spec.criteria {
        let Some(CriterionStatus::Met { evidence }) = state.criterion_status(&criterion.id, now)
        else {
            continue;
        };
        let e = state.evidence.get(&evidence);
        let head = state.subjects.get(&criterion.subject).map(|h| &h.revision);
        let ok = e.is_some_and(|e| {
            e.outcome == Outcome::Pass
                && e.check == criterion.check
                && e.subject == criterion.subject
                && head.is_none_or(|h| h == &e.revision)
        }) && state.freshness(&evidence, now).is_fresh();
        out.check(ok, "10 revisions", || {
            format!(
                "criterion {} met by {evidence}, which is not fresh passing evidence at {head:?}",
                criterion.id
            )
        });
    }
    for (id, e) in &state.evidence {
        let fresh = state.freshness(id, now).is_fresh();
        let head = state.subjects.get(&e.subject).map(|h| &h.revision);
        out.check(
            !fresh || head.is_none_or(|h| h == &e.revision),
            "10 revisions",
            || {
                format!(
                    "evidence {id} at {} is fresh while the subject is at {head:?}",
                    e.revision
                )
            },
        );
        for input in &e.inputs.evidence {
            let input_fresh = state.freshness(input, now).is_fresh();
            out.check(input_fresh || !fresh, "18 lineage", || {
                format!("evidence {id} is fresh though its input {input} is stale")
            });
        }
        for input in &e.inputs.observations {
            let current = state.observations.get(&input.key).map(|o| &o.fingerprint);
            out.check(
                current == Some(&input.fingerprint) || !fresh,
                "18 lineage",
                || {
                    format!(
                        "evidence {id} is fresh though observation {} moved",
                        input.key
                    )
                },
            );
        }
    }
}

/// Invariant 6, on every state: `spent + reserved` stays within every limit of the goal and of
/// each todo, beyond it only by what recorded overruns charged beyond their reservations (an
/// admitted turn never exceeds a limit: [`check_step`] checks each admission strictly); and an
/// unanswered overrun names a turn that was charged.
pub fn check_budget(state: &GoalState) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    out.check(ledger_within_overruns(&state.ledger), "6 budget", || {
        format!(
            "goal ledger {:?} exceeds its limits beyond its overruns",
            state.ledger
        )
    });
    for todo in state.todos.values() {
        if let Some(ledger) = &todo.budget {
            out.check(ledger_within_overruns(ledger), "6 budget", || {
                format!(
                    "todo {} ledger {ledger:?} exceeds its limits beyond its overruns",
                    todo.id
                )
            });
        }
    }
    if let Some(overrun) = state.overrun.as_deref() {
        out.check(!overrun.by.is_zero(), "6 budget", || {
            format!("the unanswered overrun {overrun:?} is of nothing")
        });
    }
    out.0
}

/// True when a deferred todo's condition holds on the recorded facts at `now`, evaluated here
/// from the raw state rather than through the kernel's helper.
fn condition_holds(state: &GoalState, todo: &Todo, now: Timestamp) -> bool {
    let TodoStatus::Deferred { until, baseline } = &todo.status else {
        return true;
    };
    match until {
        ResumeCondition::At { at } => now >= *at,
        ResumeCondition::TodoDone { todo } => state
            .todos
            .get(todo)
            .is_some_and(|t| matches!(t.status, TodoStatus::Done { .. })),
        ResumeCondition::GateSettled { gate } => state
            .gates
            .get(gate)
            .is_some_and(|g| !g.state_at(now).is_pending()),
        ResumeCondition::ObservationChanged { key } => {
            state.observations.get(key).map(|o| &o.fingerprint) != baseline.as_ref()
        }
    }
}

/// Checks one handled command: `before` and `after` are the states around it, `result` what
/// handling it returned.
///
/// - 2, 5, 15: a refused command and an accepted no-op leave the state exactly as it was;
///   accepted events carry the next revisions, the actor and `now`; an amendment commits only
///   against the current goal revision;
/// - 3, 12, 16: a lease is acquired only by a registered, non-excluded agent, on a todo with no
///   live lease, under a higher epoch, clear of overlapping write scopes and of checkouts other
///   agents' live leases use;
/// - 4: a settlement names the turn in flight under the current epoch and charges it once;
///   spending changes only with a settlement; an admitted turn stays within the limits;
/// - 11: a deferred todo reopens only by an explicit unblock or a claim whose condition holds;
/// - 17: after a handoff the receiver is the one holder, and the old epoch is refused for
///   renewing, releasing and settling while the new holder may renew.
pub fn check_step(
    before: &GoalState,
    after: &GoalState,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    result: &Result<Vec<RecordedEvent>, Refusal>,
) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    let events = match result {
        Err(refusal) => {
            out.check(before == after, "5 refusals change nothing", || {
                format!(
                    "`{}` was refused ({refusal}) yet the state changed",
                    command.name()
                )
            });
            return out.0;
        }
        Ok(events) => events,
    };
    if events.is_empty() {
        out.check(before == after, "5 no-ops change nothing", || {
            format!(
                "`{}` recorded nothing yet the state changed",
                command.name()
            )
        });
        return out.0;
    }
    for (i, e) in events.iter().enumerate() {
        out.check(
            e.revision == before.revision + 1 + i as u64 && &e.actor == actor && e.at == now,
            "2 revisions",
            || {
                format!(
                    "event {i} stamped {} by {:?} at {}",
                    e.revision, e.actor, e.at
                )
            },
        );
    }
    if let Command::AmendGoal {
        expected_revision, ..
    } = command
    {
        out.check(
            *expected_revision == before.goal_revision,
            "2 stale revision",
            || {
                format!(
                    "amendment against {expected_revision} committed at {}",
                    before.goal_revision
                )
            },
        );
    }
    let settles = events
        .iter()
        .any(|e| matches!(e.event, Event::TurnSettled { .. }));
    out.check(
        settles || before.ledger.spent == after.ledger.spent,
        "4 charged once",
        || {
            format!(
                "`{}` changed the spent budget without a settlement",
                command.name()
            )
        },
    );
    for e in events {
        step_event(before, after, actor, now, command, &e.event, &mut out);
    }
    for (id, was) in &before.todos {
        let Some(now_todo) = after.todos.get(id) else {
            continue;
        };
        let reopened = matches!(was.status, TodoStatus::Deferred { .. })
            && matches!(now_todo.status, TodoStatus::Open);
        if !reopened {
            continue;
        }
        let unblocked = events
            .iter()
            .any(|e| matches!(&e.event, Event::TodoUnblocked { todo, .. } if todo == id));
        out.check(
            unblocked || condition_holds(before, was, now),
            "11 deferred",
            || format!("deferred todo {id} reopened while its condition does not hold"),
        );
    }
    out.0
}

/// The checks one recorded event of a handled command owes to its invariants: one arm per
/// event kind, read as a table.
#[allow(clippy::too_many_lines, reason = "one arm per event kind")]
fn step_event(
    before: &GoalState,
    after: &GoalState,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    event: &Event,
    out: &mut Out,
) {
    match event {
        Event::LeaseAcquired {
            todo,
            holder,
            workspace,
            ..
        } => acquired(before, now, todo, holder, workspace.as_ref(), false, out),
        Event::LeaseHandedOff {
            todo,
            from,
            to,
            epoch,
            workspace,
            ..
        } => {
            handed_off(before, after, now, todo, from.as_ref(), *epoch, out);
            acquired(before, now, todo, to, workspace.as_ref(), true, out);
        }
        Event::TurnTakenOver {
            todo,
            turn,
            from_epoch,
            epoch,
            ..
        } => taken_over(
            before,
            after,
            actor,
            now,
            todo,
            turn,
            *from_epoch,
            *epoch,
            out,
        ),
        Event::TurnBegun { todo, .. } => {
            let todo_ok = after
                .todos
                .get(todo)
                .and_then(|t| t.budget.as_deref())
                .is_none_or(ledger_within);
            out.check(ledger_within(&after.ledger) && todo_ok, "6 budget", || {
                format!(
                    "turn admitted on {todo} beyond the limits: {:?}",
                    after.ledger
                )
            });
        }
        Event::TurnSettled {
            todo,
            epoch,
            turn,
            charged,
            overrun,
            ..
        } => {
            let lease = before.todos.get(todo).and_then(|t| t.lease.as_ref());
            let reserved = lease
                .and_then(|l| l.turn.as_ref())
                .map_or(Amounts::ZERO, |t| t.reserved);
            out.check(*overrun == charged.minus(reserved), "6 budget", || {
                format!(
                    "turn {turn} charged {charged:?} against {reserved:?} records an overrun of {overrun:?}"
                )
            });
            let ok = lease.is_some_and(|l| {
                l.epoch == *epoch && l.turn.as_ref().is_some_and(|t| &t.id == turn)
            });
            out.check(ok, "3 stale epochs never settle", || {
                format!("turn {turn} on {todo} settled under epoch {epoch}, lease was {lease:?}")
            });
            let resolving = matches!(command, Command::ResolveOutcome { .. });
            out.check(
                resolving || lease.is_some_and(|l| actor.agent() == Some(&l.holder)),
                "15 authority",
                || format!("{actor:?} settled a turn it does not hold"),
            );
        }
        // The outbox: an effect is intended only by the holder of the live lease at the
        // todo's current epoch, and an effect id only once.
        Event::EffectIntended {
            todo,
            epoch,
            effect,
            ..
        } => {
            let item = before.todos.get(todo);
            let lease = item.and_then(|t| live(t, now));
            let fenced = lease.is_some_and(|l| {
                l.epoch == *epoch
                    && item.is_some_and(|t| t.last_epoch == *epoch)
                    && actor.agent() == Some(&l.holder)
            });
            out.check(fenced, "3 stale epochs never act", || {
                format!(
                    "effect {} on {todo} intended under epoch {epoch} by {actor:?}, lease was {lease:?}",
                    effect.id
                )
            });
            out.check(
                !before.used_effects.contains(&effect.id),
                "outbox: an effect id is intended once",
                || format!("effect {} was intended again", effect.id),
            );
        }
        _ => {}
    }
}

fn acquired(
    before: &GoalState,
    now: Timestamp,
    id: &TodoId,
    holder: &AgentId,
    workspace: Option<&Workspace>,
    handoff: bool,
    out: &mut Out,
) {
    let Some(todo) = before.todos.get(id) else {
        out.0.push(Finding::new(
            "12 eligibility",
            format!("lease on unknown todo {id}"),
        ));
        return;
    };
    out.check(
        before.spec.agents.contains(holder) && !todo.excluded_agents.contains(holder),
        "12 eligibility",
        || format!("{holder} got todo {id} though unregistered or excluded"),
    );
    // A handoff moves a live lease on purpose; any other acquisition needs none to be live.
    let previous = live(todo, now).map(|l| &l.holder);
    out.check(handoff || previous.is_none(), "12 one live lease", || {
        format!("{holder} took todo {id} while {previous:?} held it live")
    });
    let Some(writes) = &todo.writes else { return };
    for other in before.todos.values() {
        if other.id == *id {
            continue;
        }
        let Some(lease) = live(other, now) else {
            continue;
        };
        if let Some(theirs) = &other.writes {
            out.check(!scopes_collide(writes, theirs), "16 write scopes", || {
                format!(
                    "{holder} took {id} while {} writes an overlapping scope",
                    other.id
                )
            });
        }
        if let (Some(mine), Some(theirs)) = (workspace, &lease.workspace) {
            out.check(
                &lease.holder == holder || mine.top_level != theirs.top_level,
                "16 shared checkout",
                || {
                    format!(
                        "{holder} took writing todo {id} in {} used by {}",
                        mine.top_level, lease.holder
                    )
                },
            );
        }
    }
}

fn handed_off(
    before: &GoalState,
    after: &GoalState,
    now: Timestamp,
    id: &TodoId,
    from: Option<&AgentId>,
    epoch: u64,
    out: &mut Out,
) {
    let new = after.todos.get(id).and_then(|t| t.lease.as_ref());
    let old = before.todos.get(id).and_then(|t| live(t, now));
    let Some(old) = old else {
        // Work no live lease held is handed over: the receiver is its one holder and assignee.
        let last = before.todos.get(id).map_or(0, |t| t.last_epoch);
        let assignee = after.todos.get(id).and_then(|t| t.assignee.as_ref());
        out.check(
            new.is_some_and(|l| l.epoch == epoch && epoch > last && assignee == Some(&l.holder)),
            "17 handoff",
            || format!("after the handover of {id} the lease is {new:?}, assignee {assignee:?}"),
        );
        return;
    };
    out.check(Some(&old.holder) == from, "17 handoff", || {
        format!("handoff of {id} from {from:?}, but the live lease was {old:?}")
    });
    let Some(from) = from else { return };
    out.check(
        new.is_some_and(|l| l.epoch == epoch && l.epoch > old.epoch),
        "17 handoff",
        || format!("after the handoff of {id} the lease is {new:?}"),
    );
    let Some(new) = new else { return };
    let stale = old.epoch;
    let from_actor = Actor::Agent(from.clone());
    let mut probes = vec![
        Command::Renew {
            todo: id.clone(),
            epoch: stale,
            ttl: None,
        },
        Command::Release {
            todo: id.clone(),
            epoch: stale,
        },
    ];
    if let Some(turn) = &old.turn {
        probes.push(Command::SettleTurn(Settlement {
            todo: id.clone(),
            epoch: stale,
            turn: turn.id.clone(),
            verdict: Verdict {
                validator: Actor::Validator(crate::testkit::roster::validator()),
                outcome: VerdictOutcome::Passed,
                summary: String::new(),
                signature: None,
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::KeepOpen,
            usage: Amounts::ONE_TURN,
            failure: None,
        }));
    }
    for probe in probes {
        out.check(
            execute(Some(after), &from_actor, now, &probe).is_err(),
            "17 handoff",
            || {
                format!(
                    "old holder {from} may still `{}` {id} under epoch {stale}",
                    probe.name()
                )
            },
        );
    }
    let renew = Command::Renew {
        todo: id.clone(),
        epoch: new.epoch,
        ttl: None,
    };
    let to_actor = Actor::Agent(new.holder.clone());
    out.check(
        execute(Some(after), &to_actor, now, &renew).is_ok(),
        "17 handoff",
        || {
            format!(
                "new holder {} may not renew {id} under epoch {}",
                new.holder, new.epoch
            )
        },
    );
}

/// A take-over by another session of the holder agent: the same holder, turn and
/// reservation under a newer epoch, nothing charged, and the old session fenced — every lease
/// command it can still send under the old epoch is refused `stale_lease_epoch`.
#[allow(clippy::too_many_arguments)] // the event's fields and the states around it
fn taken_over(
    before: &GoalState,
    after: &GoalState,
    actor: &Actor,
    now: Timestamp,
    id: &TodoId,
    turn: &crate::ids::TurnId,
    from_epoch: u64,
    epoch: u64,
    out: &mut Out,
) {
    let old = before.todos.get(id).and_then(|t| live(t, now));
    let ok = old.is_some_and(|l| {
        actor.agent() == Some(&l.holder)
            && l.epoch == from_epoch
            && l.turn.as_ref().is_some_and(|t| &t.id == turn)
    });
    out.check(ok, "17 take-over", || {
        format!(
            "{actor:?} took turn {turn} on {id} over from epoch {from_epoch}; the lease was {old:?}"
        )
    });
    let Some(old) = old else { return };
    let new = after.todos.get(id).and_then(|t| t.lease.as_ref());
    out.check(
        new.is_some_and(|l| {
            l.holder == old.holder
                && l.epoch == epoch
                && epoch > from_epoch
                && l.turn.as_ref().map(|t| (&t.id, t.reserved))
                    == old.turn.as_ref().map(|t| (&t.id, t.reserved))
        }),
        "17 take-over",
        || format!("after the take-over of {turn} on {id} the lease is {new:?}, was {old:?}"),
    );
    out.check(
        before.ledger == after.ledger
            && before.todos.get(id).map(|t| &t.budget) == after.todos.get(id).map(|t| &t.budget),
        "4 charged once",
        || format!("the take-over of {turn} on {id} moved the budget"),
    );
    let stale = from_epoch;
    // On an abandoned goal nothing renews; what settles or gives up a turn is still fenced.
    let abandoned = after.abandoned.is_some();
    let probes = [
        (!abandoned).then(|| Command::Renew {
            todo: id.clone(),
            epoch: stale,
            ttl: None,
        }),
        Some(Command::Release {
            todo: id.clone(),
            epoch: stale,
        }),
        Some(Command::TakeOverTurn {
            todo: id.clone(),
            epoch: stale,
            turn: turn.clone(),
            ttl: None,
        }),
        Some(Command::SettleTurn(Settlement {
            todo: id.clone(),
            epoch: stale,
            turn: turn.clone(),
            verdict: Verdict {
                validator: Actor::Validator(crate::testkit::roster::validator()),
                outcome: VerdictOutcome::Passed,
                summary: String::new(),
                signature: None,
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::KeepOpen,
            usage: Amounts::ONE_TURN,
            failure: None,
        })),
    ];
    for probe in probes.into_iter().flatten() {
        let refused = execute(Some(after), actor, now, &probe);
        out.check(
            matches!(&refused, Err(r) if r.code() == "stale_lease_epoch"),
            "17 take-over",
            || {
                format!(
                    "the fenced session may still `{}` {id} under epoch {stale}: {refused:?}",
                    probe.name()
                )
            },
        );
    }
    let renew = Command::Renew {
        todo: id.clone(),
        epoch,
        ttl: None,
    };
    out.check(
        abandoned || execute(Some(after), actor, now, &renew).is_ok(),
        "17 take-over",
        || format!("the new session may not renew {id} under epoch {epoch}"),
    );
}

/// Folds the log one event at a time (every prefix, including those that cut a multi-event
/// commit) and checks the structural invariants of each state at the time of its last event:
/// a crash anywhere leaves a state the kernel can load and reason about (invariant 14).
pub fn check_prefixes(log: &[RecordedEvent]) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    let Some(first) = log.first() else {
        out.0.push(Finding::new("14 crash", "empty log"));
        return out.0;
    };
    let mut state = match GoalState::genesis(first) {
        Ok(state) => state,
        Err(error) => {
            out.0.push(Finding::new(
                "14 crash",
                format!("genesis does not fold: {error}"),
            ));
            return out.0;
        }
    };
    for event in &log[1..] {
        if let Err(error) = state.apply(event) {
            out.0.push(Finding::new(
                "14 crash",
                format!("prefix does not fold: {error}"),
            ));
            return out.0;
        }
        for violation in crate::check_invariants(&state, event.at) {
            out.0.push(Finding::new(
                "14 crash",
                format!(
                    "after revision {}: {}: {}",
                    event.revision, violation.rule, violation.detail
                ),
            ));
        }
    }
    out.0
}

/// One run of failing turns on one todo: the retry policy, and for each attempt how long after
/// the previous one the agent tries to claim again and whether the turn fails its validation
/// (`true`) or its executor (`false`).
#[derive(Debug, Clone)]
pub struct FailingRun {
    /// The goal's retry policy.
    pub retry: crate::retry::RetryPolicy,
    /// Each attempt: the time since the previous one, and whether the validator fails it.
    pub attempts: Vec<(Duration, bool)>,
}

/// Drives one todo of a fresh goal through a [`FailingRun`] on the real kernel and checks the
/// retry policy against the reference model's plain account of it
/// ([`LifecycleModel::retry_pause`](super::LifecycleModel::retry_pause)):
///
/// - **never faster than the policy**: a claim earlier than the last failure plus the pause for
///   the failures so far is refused (`backing_off`), a claim at or after it is admitted, and
///   `decide` waits until exactly then;
/// - **always reaches the obligation**: once the run's attempts are spent the agent keeps
///   retrying as soon as it may; with `attempts > 0` the replan obligation naming the todo is
///   raised at exactly `attempts` failures in a row, and `decide` then says replan.
#[allow(clippy::too_many_lines)] // one run, read top to bottom: claim, turn, then the checks
pub fn failing_run(run: &FailingRun) -> Vec<Finding> {
    use crate::goal::{GoalSpec, Policy};
    use crate::obligation::ObligationCause;
    use crate::retry::{FailureClass, TurnFailure};
    use crate::todo::NewTodo;

    let mut out = Out(Vec::new());
    let agent = super::roster::agents()[0].clone();
    let actor = Actor::Agent(agent.clone());
    let todo: TodoId = super::id("t-fail");
    let mut spec: GoalSpec = match GoalSpec::builder("g-fail", "fail", super::roster::owner())
        .agent(&agent)
        .budget(Limits::UNLIMITED)
        .declared_identity()
        .build()
    {
        Ok(spec) => spec,
        Err(error) => return vec![Finding::new("model", error.to_string())],
    };
    spec.policy = Policy {
        retry: run.retry,
        ..Policy::default()
    };
    let model = super::LifecycleModel::new(spec.clone(), super::roster::start());
    let mut now = super::roster::start();
    let mut state = match GoalState::create(&spec.owner_actor(), now, &spec) {
        Ok(state) => state,
        Err(refusal) => return vec![Finding::new("model", refusal.to_string())],
    };
    let add = Command::AddTodo {
        todo: NewTodo::advance(todo.clone(), "fail every time"),
    };
    if let Err(refusal) = state.handle(&spec.owner_actor(), now, &add) {
        return vec![Finding::new("model", refusal.to_string())];
    }
    let attempts = run.retry.attempts;
    let mut failures = 0u32;
    let mut last_failure: Option<Timestamp> = None;
    // The run's own gaps, then as many prompt retries as the obligation may still need.
    let prompt = (0..=attempts).map(|n| (None, n % 2 == 0));
    let planned = run.attempts.iter().map(|(gap, v)| (Some(*gap), *v));
    for (n, (gap, validation)) in planned.chain(prompt).enumerate() {
        let earliest = last_failure.map(|at| at.plus(model.retry_pause(&todo, failures)));
        now = match (gap, earliest) {
            (Some(gap), _) => now.plus(gap),
            (None, Some(at)) => at.max(now),
            (None, None) => now,
        };
        if gap.is_none() && attempts > 0 && failures >= attempts {
            break;
        }
        let claim = Command::Claim {
            todo: todo.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        };
        let early = earliest.is_some_and(|at| now < at);
        match state.handle(&actor, now, &claim) {
            Ok(_) if early => out.0.push(Finding::new(
                "retry policy",
                format!(
                    "attempt {n}: a claim at {now} was admitted before {earliest:?} after {failures} failures"
                ),
            )),
            Ok(_) => {}
            Err(Refusal::BackingOff { until, .. }) if early => {
                out.check(Some(until) == earliest, "retry policy", || {
                    format!("attempt {n}: refused until {until}, the model says {earliest:?}")
                });
                continue;
            }
            Err(refusal) => {
                out.0.push(Finding::new(
                    "retry policy",
                    format!("attempt {n}: a claim at {now} after {failures} failures (earliest {earliest:?}) was refused: {refusal}"),
                ));
                return out.0;
            }
        }
        let Some(epoch) = state.todos.get(&todo).map(|t| t.last_epoch) else {
            return vec![Finding::new("model", "the todo vanished")];
        };
        let turn: crate::ids::TurnId = super::id(&format!("u-fail-{n}"));
        let begin = Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: None,
        };
        let settle = Command::SettleTurn(Settlement {
            todo: todo.clone(),
            epoch,
            turn,
            verdict: Verdict {
                validator: Actor::Validator(super::roster::validator()),
                outcome: if validation {
                    VerdictOutcome::Failed
                } else {
                    VerdictOutcome::Passed
                },
                summary: String::new(),
                signature: None,
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::KeepOpen,
            usage: Amounts::ONE_TURN,
            failure: (!validation).then(|| TurnFailure {
                class: FailureClass::Exited,
                detail: "exit 1".into(),
            }),
        });
        for command in [begin, settle] {
            if let Err(refusal) = state.handle(&actor, now, &command) {
                out.0.push(Finding::new(
                    "retry policy",
                    format!("attempt {n}: `{}` refused: {refusal}", command.name()),
                ));
                return out.0;
            }
        }
        failures += 1;
        last_failure = Some(now);
        let raised = state.obligations.values().any(
            |o| matches!(&o.cause, ObligationCause::TurnsFailing { todo: t, .. } if t == &todo),
        );
        let due = attempts > 0 && failures >= attempts;
        out.check(raised == due, "retry policy", || {
            format!(
                "after {failures} failures (attempts {attempts}) the obligation is raised: {raised}"
            )
        });
        let next = now.plus(model.retry_pause(&todo, failures));
        let decision = decide(&state, &agent, now);
        let expected_kind = if due { "replan" } else { "wait" };
        out.check(decision.kind() == expected_kind, "retry policy", || {
            format!("after {failures} failures decide says {decision:?}")
        });
        if let Decision::Wait { until, .. } = &decision {
            out.check(*until == Some(next), "retry policy", || {
                format!(
                    "after {failures} failures decide waits until {until:?}, the model says {next}"
                )
            });
        }
    }
    out.check(
        attempts == 0 || failures >= attempts,
        "retry policy",
        || format!("the run ended after {failures} failures without reaching {attempts}"),
    );
    out.0
}

/// Every decision leads somewhere the kernel admits (the design's "every decision leads
/// somewhere"), for each registered agent of `agents` at `now`:
///
/// - a `continue` whose lease step is a claim is a claim the kernel accepts from that agent at
///   that time (in the workspace it reported, else its own worktree);
/// - a `continue` on a lease it holds is a turn the kernel lets it begin, with the reservation
///   the decision names;
/// - a fix that names a claim of a todo by the asking agent is a claim the kernel accepts;
/// - no fix of any reason asks for `--now`: a caller is never invited ahead of the store's
///   clock (a backoff, a lease's expiry or a gate's deadline ends when it ends).
pub fn check_admissible(state: &GoalState, now: Timestamp, agents: &[AgentId]) -> Vec<Finding> {
    let mut out = Out(Vec::new());
    let Ok(turn) = crate::ids::TurnId::new("admissible-turn") else {
        return out.0;
    };
    for agent in agents.iter().filter(|a| state.is_registered(a)) {
        let decision = decide(state, agent, now);
        let actor = Actor::Agent(agent.clone());
        // Claim where the agent said it works; an agent that said nothing claims a todo that
        // writes nowhere without one, and one that writes is left out (its workspace is the
        // agent's to choose, which the decision cannot know).
        let claim = |todo: &TodoId| {
            let workspace = state.workspaces.get(agent).cloned();
            let writes = state.todos.get(todo).is_some_and(|t| t.writes.is_some());
            (workspace.is_some() || !writes).then(|| Command::Claim {
                todo: todo.clone(),
                ttl: None,
                workspace,
                grant_reason: None,
            })
        };
        let step = match &decision {
            Decision::Continue(a) => match &a.lease {
                LeaseStep::Claim => claim(&a.todo),
                LeaseStep::Held { epoch, .. } => Some(Command::BeginTurn {
                    todo: a.todo.clone(),
                    epoch: *epoch,
                    turn: turn.clone(),
                    reserve: Some(a.reserve),
                }),
                LeaseStep::Resume { .. } => None,
            },
            _ => None,
        };
        if let Some(step) = step {
            let admitted = execute(Some(state), &actor, now, &step);
            out.check(admitted.is_ok(), "every decision leads somewhere", || {
                format!(
                    "agent:{agent} was told `{}` at {now}, which the kernel refuses: {:?}",
                    step.name(),
                    admitted.err()
                )
            });
        }
        for fix in fixes(&decision) {
            let line = fix.command_line();
            out.check(
                !line.contains("--now"),
                "a fix never asks for --now",
                || format!("agent:{agent} was told `{line}`"),
            );
            let claimed = fix
                .args
                .iter()
                .find(|arg| arg.flag == "todo")
                .and_then(|arg| arg.value.as_deref())
                .and_then(|todo| TodoId::new(todo).ok());
            let by_asker = fix.by == crate::fix::Who::Asker;
            if let (true, Some(todo)) = (fix.verb == "claim" && by_asker, claimed) {
                // A fix that leaves the workspace to choose is run in one nobody else uses.
                let choose_workspace = fix
                    .args
                    .iter()
                    .any(|arg| arg.flag == "workspace-top-level" && arg.value.is_none());
                let claim = if choose_workspace {
                    Some(Command::Claim {
                        todo: todo.clone(),
                        ttl: None,
                        workspace: Some(Workspace {
                            top_level: format!("/src/fresh-{agent}"),
                            common_dir: "/src/acme/.git".into(),
                        }),
                        grant_reason: None,
                    })
                } else {
                    claim(&todo)
                };
                let Some(claim) = claim else {
                    continue;
                };
                let admitted = execute(Some(state), &actor, now, &claim);
                out.check(admitted.is_ok(), "every fix leads somewhere", || {
                    format!(
                        "agent:{agent} was told `{line}` at {now} ({}), which the kernel refuses: {:?}",
                        crate::words::headline(&decision),
                        admitted.err()
                    )
                });
            }
        }
    }
    out.0
}

/// The fix of every reason and question of `decision`.
fn fixes(decision: &Decision) -> Vec<crate::fix::Fix> {
    match decision {
        Decision::Wait { reasons, .. } => reasons.iter().map(WaitReason::fix).collect(),
        Decision::Ask { questions, .. } => questions.iter().map(Question::fix).collect(),
        Decision::Replan { reason } => vec![reason.fix()],
        Decision::Repair { issue } => vec![issue.fix()],
        Decision::Continue(_) | Decision::Terminal { .. } => Vec::new(),
    }
}
