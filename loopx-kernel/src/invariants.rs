//! Structural invariants of a goal's state, checked after every step by the property tests and
//! by a store's `doctor`. Each violation names the broken rule; an empty list means sound.

use serde::Serialize;

use crate::budget::Amounts;
use crate::state::GoalState;
use crate::time::Timestamp;
use crate::todo::{ContinuationRecord, TodoStatus};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The rule, as a short stable name.
    pub rule: &'static str,
    /// What breaks it.
    pub detail: String,
}

/// Checks the structural invariants at `now`: lease and epoch bookkeeping, balanced
/// reservations, one continuation per completion, write-scope exclusion and lineage order.
/// (Exactly-once charging is a property of the event history: see the testkit's checks.)
pub fn check_invariants(state: &GoalState, now: Timestamp) -> Vec<Violation> {
    let mut out = Vec::new();
    check_todos(state, &mut out);
    check_turns(state, &mut out);
    check_write_scopes(state, now, &mut out);
    check_lineage(state, &mut out);
    out
}

fn fail(out: &mut Vec<Violation>, rule: &'static str, detail: String) {
    out.push(Violation { rule, detail });
}

/// Lease bookkeeping and continuations.
fn check_todos(state: &GoalState, out: &mut Vec<Violation>) {
    for todo in state.todos.values() {
        if let Some(lease) = &todo.lease {
            if lease.epoch != todo.last_epoch {
                let detail = format!(
                    "todo {} lease epoch {} ≠ last issued {}",
                    todo.id, lease.epoch, todo.last_epoch
                );
                fail(out, "lease_epoch_current", detail);
            }
            if todo.status.is_closed() {
                let detail = format!("todo {} is {} but leased", todo.id, todo.status.name());
                fail(out, "closed_todo_unleased", detail);
            }
        }
        if let TodoStatus::Done {
            continuation: ContinuationRecord::Successors(next),
            ..
        } = &todo.status
            && (next.is_empty() || next.iter().any(|id| !state.todos.contains_key(id)))
        {
            let detail = format!("todo {} names missing or no successors", todo.id);
            fail(out, "one_continuation", detail);
        }
    }
}

/// Reservations balance: the ledgers hold exactly what the turns in flight reserved.
fn check_turns(state: &GoalState, out: &mut Vec<Violation>) {
    let mut reserved = Amounts::ZERO;
    for todo in state.leased_todos() {
        let Some(turn) = todo.turn_in_flight() else {
            continue;
        };
        reserved = reserved.plus(turn.reserved);
        if let Some(ledger) = &todo.budget
            && ledger.reserved != turn.reserved
        {
            let detail = format!(
                "todo {} ledger reserves {:?}, its turn {} holds {:?}",
                todo.id, ledger.reserved, turn.id, turn.reserved
            );
            fail(out, "reservations_balance", detail);
        }
    }
    if reserved != state.ledger.reserved {
        let detail = format!(
            "ledger reserves {:?}, turns in flight hold {reserved:?}",
            state.ledger.reserved
        );
        fail(out, "reservations_balance", detail);
    }
}

fn check_write_scopes(state: &GoalState, now: Timestamp, out: &mut Vec<Violation>) {
    let live: Vec<_> = state
        .leased_todos()
        .filter(|t| t.live_lease(now).is_some())
        .filter_map(|t| Some((&t.id, t.writes.as_ref()?)))
        .collect();
    for (i, (a, wa)) in live.iter().enumerate() {
        for (b, wb) in &live[i + 1..] {
            if wa.overlaps(wb) {
                let detail = format!("todos {a} and {b} hold live leases on overlapping scopes");
                fail(out, "write_scopes_exclusive", detail);
            }
        }
    }
}

/// Inputs are recorded before what cites them, so lineage is acyclic.
fn check_lineage(state: &GoalState, out: &mut Vec<Violation>) {
    for evidence in state.evidence.values() {
        for input in &evidence.inputs.evidence {
            if state
                .evidence
                .get(input)
                .is_none_or(|i| i.seq >= evidence.seq)
            {
                let detail = format!(
                    "evidence {} cites {input}, which is missing or newer",
                    evidence.id
                );
                fail(out, "lineage_ordered", detail);
            }
        }
    }
}
