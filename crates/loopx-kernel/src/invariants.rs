//! Structural invariants of a goal's state, checked after every step by the property tests and
//! by a store's `doctor`. Each violation names the broken rule; an empty list means sound.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::budget::Amounts;
use crate::state::{GoalState, TurnStatus};
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

/// Checks the structural invariants at `now`: lease and epoch bookkeeping, exactly-once
/// charging, budget admission, continuations, write-scope exclusion, lineage order.
pub fn check_invariants(state: &GoalState, now: Timestamp) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut fail = |rule: &'static str, detail: String| out.push(Violation { rule, detail });

    let mut in_flight: BTreeMap<_, _> = BTreeMap::new();
    for todo in state.todos.values() {
        if let Some(lease) = &todo.lease {
            if lease.epoch != todo.last_epoch {
                fail("lease_epoch_current", format!("todo {} lease epoch {} ≠ last {}", todo.id, lease.epoch, todo.last_epoch));
            }
            if todo.status.is_closed() {
                fail("closed_todo_unleased", format!("todo {} is {} but leased", todo.id, todo.status.name()));
            }
            if let Some(turn) = &lease.turn {
                in_flight.insert(turn.id.clone(), (todo.id.clone(), turn.reserved));
            }
        }
        if let TodoStatus::Done { continuation: ContinuationRecord::Successors(next), .. } = &todo.status {
            if next.is_empty() || next.iter().any(|id| !state.todos.contains_key(id)) {
                fail("one_continuation", format!("todo {} names missing or no successors", todo.id));
            }
        }
    }

    let mut reserved = Amounts::ZERO;
    let mut spent = Amounts::ZERO;
    for (id, record) in &state.turns {
        match record.status {
            TurnStatus::InFlight { reserved: r } => {
                reserved = reserved.plus(r);
                if !in_flight.contains_key(id) {
                    fail("turn_in_flight_has_lease", format!("turn {id} is in flight without a lease"));
                }
            }
            TurnStatus::Settled { charged } => spent = spent.plus(charged),
            TurnStatus::Cancelled => {}
        }
    }
    for (turn, (todo, _)) in &in_flight {
        if !matches!(state.turns.get(turn).map(|r| r.status), Some(TurnStatus::InFlight { .. })) {
            fail("lease_turn_recorded", format!("todo {todo} holds turn {turn} not recorded in flight"));
        }
    }
    if reserved != state.ledger.reserved {
        fail("reservations_balance", format!("ledger reserves {:?}, turns hold {reserved:?}", state.ledger.reserved));
    }
    if spent != state.ledger.spent {
        fail("charged_once", format!("ledger spent {:?}, settled turns charged {spent:?}", state.ledger.spent));
    }

    let live: Vec<_> = state
        .leased_todos()
        .filter_map(|t| Some((t, t.live_lease(now)?)))
        .collect();
    for (i, (a, _)) in live.iter().enumerate() {
        for (b, _) in &live[i + 1..] {
            if let (Some(wa), Some(wb)) = (&a.writes, &b.writes)
                && wa.overlaps(wb)
            {
                fail("write_scopes_exclusive", format!("todos {} and {} hold live leases on overlapping scopes", a.id, b.id));
            }
        }
    }

    for evidence in state.evidence.values() {
        for input in &evidence.inputs.evidence {
            if state.evidence.get(input).is_none_or(|i| i.seq >= evidence.seq) {
                fail("lineage_ordered", format!("evidence {} cites {input}, which is missing or newer", evidence.id));
            }
        }
    }
    out
}

