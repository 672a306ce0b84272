//! Work that changes hands through the kernel's handoff: the holdout evaluation, which the
//! hypothesis's owner may not run, and a line's work whose holder is gone.
//!
//! The capability never edits who owns what. It proposes `handoff` commands, which the kernel
//! validates like anyone's: the receiver holds the todo under a new epoch, with a note (the
//! next action, the stop condition, the evidence the work rests on) from which it carries on
//! without the previous holder's context. Each handoff is proposed only when the kernel would
//! accept it, checked against the goal as it stands.

use loopx_kernel::{
    Actor, AgentId, Command, EvidenceId, GoalState, HandoffNote, NewTodo, Proposals, Timestamp,
    Todo, execute,
};

use crate::facts::Split;
use crate::ids::LineTodo;
use crate::ledger::{Gap, HypothesisEntry, Status, open_line_todos};

/// The agent a line's holdout evaluation goes to: `configured` when it is registered and not
/// the line's owner, else the first registered agent (by id) other than the owner; none when
/// the owner is the only agent.
pub fn evaluator_for(
    state: &GoalState,
    configured: Option<&AgentId>,
    owner: &AgentId,
) -> Option<AgentId> {
    let eligible = |agent: &&AgentId| *agent != owner && state.is_registered(agent);
    configured
        .filter(eligible)
        .or_else(|| state.spec.agents.iter().find(eligible))
        .cloned()
}

/// Proposes the holdout todo `todo` (owner excluded) and, when an evaluator is at hand, its
/// handoff to that evaluator with the note the evaluation needs.
pub(crate) fn propose_holdout(
    entry: &HypothesisEntry,
    todo: NewTodo,
    why: String,
    evaluator: Option<AgentId>,
    me: &Actor,
    proposals: &mut Proposals<'_>,
    now: Timestamp,
) {
    let state = proposals.state();
    let handoff = evaluator.map(|to| Command::Handoff {
        todo: todo.id.clone(),
        epoch: 0,
        note: holdout_note(entry, state, now),
        grant_reason: None,
        to,
    });
    let add = Command::AddTodo { todo: todo.clone() };
    let legal = handoff.as_ref().filter(|handoff| {
        let mut probe = state.clone();
        probe.handle(me, now, &add).is_ok() && execute(Some(&probe), me, now, handoff).is_ok()
    });
    let h = entry.facts.id.as_str();
    proposals.add_todo(todo, why);
    if let Some(handoff) = legal {
        proposals.push(
            handoff.clone(),
            format!(
                "the holdout evaluation of {h} is handed to an evaluator: its owner {} may not run it",
                entry.owner()
            ),
        );
    }
}

/// Proposes handing over every open line todo the capability planned whose holder is gone: it
/// is assigned to an agent no longer registered, or its lease expired while a turn was in
/// flight. A turn whose outcome is unknown on work not safe to repeat is the kernel's
/// `repair` (a readback comes first), so the kernel refuses that handoff and none is proposed.
pub(crate) fn hand_over_line(
    entry: &HypothesisEntry,
    me: &Actor,
    proposals: &mut Proposals<'_>,
    now: Timestamp,
) {
    // A retired line's open work ends, and a confirmation no longer needed is superseded, in
    // this same judgement: neither changes hands.
    if entry.status == Status::Retired {
        return;
    }
    let state = proposals.state();
    for id in open_line_todos(state, &entry.facts.id) {
        let Some(todo) = state.todos.get(&id) else {
            continue;
        };
        let Some((gone, why)) = gone_holder(state, todo, me, now) else {
            continue;
        };
        let Some(which) = LineTodo::ALL
            .into_iter()
            .find(|w| w.id(&entry.facts.id).as_ref() == Some(&id))
        else {
            continue;
        };
        if which == LineTodo::Confirm && !entry.gaps.contains(&Gap::Unconfirmed) {
            continue;
        }
        let note = line_note(entry, which, todo, &gone, why, state, now);
        // The owner never evaluates its own line, whoever owned it when the todo was planned.
        let evaluation = matches!(which, LineTodo::Holdout | LineTodo::Confirm);
        let mut receivers = state
            .spec
            .agents
            .iter()
            .filter(|a| *a != &gone && !(evaluation && *a == entry.owner()));
        let handoff = receivers.find_map(|to| {
            let command = Command::Handoff {
                todo: id.clone(),
                epoch: todo.last_epoch,
                to: to.clone(),
                note: note.clone(),
                grant_reason: None,
            };
            execute(Some(state), me, now, &command)
                .is_ok()
                .then_some(command)
        });
        if let Some(handoff) = handoff {
            let reason = format!(
                "hypothesis {}'s line changes hands: {id} was {gone}'s, who {why}",
                entry.facts.id
            );
            proposals.push(handoff, reason);
        }
    }
}

/// The agent whose line work `todo` is, when that agent is gone, and how: no live lease holds
/// the todo the capability planned, and it is assigned to an agent no longer registered, or
/// its last holder's lease expired with a turn in flight.
fn gone_holder(
    state: &GoalState,
    todo: &Todo,
    me: &Actor,
    now: Timestamp,
) -> Option<(AgentId, &'static str)> {
    if &todo.created_by != me || todo.live_lease(now).is_some() {
        return None;
    }
    if let Some(lease) = &todo.lease
        && lease.turn.is_some()
    {
        return Some((lease.holder.clone(), "let its lease expire mid-turn"));
    }
    let assignee = todo.assignee.as_ref()?;
    (!state.is_registered(assignee)).then(|| (assignee.clone(), "is no longer registered"))
}

/// The note for the holdout evaluation: what the dev findings showed, what to run and report,
/// and where to stop.
fn holdout_note(entry: &HypothesisEntry, state: &GoalState, now: Timestamp) -> HandoffNote {
    let h = entry.facts.id.as_str();
    let dev: Vec<String> = entry
        .findings
        .iter()
        .filter(|f| f.facts.split == Split::Dev)
        .map(|f| {
            let lift = f
                .facts
                .lift
                .map_or_else(String::new, |l| format!(", lift {l}"));
            format!("{} {}{lift}", f.key, f.facts.edge)
        })
        .collect();
    HandoffNote {
        next_action: format!(
            "run the holdout evaluation of hypothesis {h} ({}) and report it as a finding on the holdout split; its dev findings: {}; its owner {} may not run it",
            entry.facts.statement,
            dev.join("; "),
            entry.owner()
        ),
        stop_condition: format!(
            "a holdout finding on {h} is reported, supporting or refuting it; promoting or retiring {h} is a person's decision"
        ),
        evidence: line_evidence(entry, state, now),
    }
}

/// The note for a line todo taken over from a holder that is gone.
fn line_note(
    entry: &HypothesisEntry,
    which: LineTodo,
    todo: &Todo,
    gone: &AgentId,
    why: &str,
    state: &GoalState,
    now: Timestamp,
) -> HandoffNote {
    let h = entry.facts.id.as_str();
    let stop = match which {
        LineTodo::Experiment => format!("a finding on {h} is reported"),
        LineTodo::Holdout => format!("a holdout finding on {h} is reported"),
        LineTodo::Confirm => {
            format!("holdout evidence on {h} is recorded by an independent validator")
        }
        LineTodo::Writeup => format!("the write-up of {h} is done"),
    };
    HandoffNote {
        next_action: format!(
            "{} — taken over from {gone}, who {why}; the line's findings and evidence are in the goal",
            todo.title
        ),
        stop_condition: stop,
        evidence: line_evidence(entry, state, now),
    }
}

/// The fresh holdout evidence of the line: what its work rests on.
fn line_evidence(entry: &HypothesisEntry, state: &GoalState, now: Timestamp) -> Vec<EvidenceId> {
    entry
        .findings
        .iter()
        .filter_map(|f| crate::ids::holdout_evidence(&f.facts.id))
        .filter(|id| state.evidence.contains_key(id) && state.freshness(id, now).is_fresh())
        .collect()
}
