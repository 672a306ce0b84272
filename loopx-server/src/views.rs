//! The JSON documents of loopx's verbs, one definition for every surface that prints them: the
//! CLI's `--json` and the MCP tools answer the same shapes for the same verb, so the two
//! cannot drift. Each is built from the kernel's own serde shapes, with the facts derived at
//! `now` (a gate's effective state, evidence freshness, what a budget has left) merged in.

use loopx_kernel::{
    AgentId, Decision, Evidence, Freshness, Gate, GoalId, GoalState, Ledger, ObligationId,
    Observation, PendingEffect, RecordedEvent, Submitted, TerminalOutcome, Timestamp, Todo, TodoId,
    decide, terminal,
};
use serde_json::{Map, Value, json};

/// The board's columns, in order.
pub const COLUMNS: [&str; 6] = [
    "open",
    "leased",
    "blocked",
    "deferred",
    "done",
    "superseded",
];

/// The standings a goal can have on the board, in the order a filter lists them.
pub const STANDINGS: [&str; 5] = ["active", "waiting", "repair", "accepted", "abandoned"];

/// The decision for each agent registered with the goal, at `now`, in agent order.
pub fn decisions(state: &GoalState, now: Timestamp) -> Vec<(AgentId, Decision)> {
    state
        .spec
        .agents
        .iter()
        .map(|agent| (agent.clone(), decide(state, agent, now)))
        .collect()
}

/// How a goal stands at `now`, one of [`STANDINGS`]: `accepted` or `abandoned` once terminal;
/// otherwise `repair` when any registered agent's decision is to repair, `waiting` when a gate
/// waits on a person (or any decision asks one), and `active` for the rest. `decisions` are
/// the goal's [`decisions`] at `now`.
pub fn standing(
    state: &GoalState,
    decisions: &[(AgentId, Decision)],
    now: Timestamp,
) -> &'static str {
    match terminal(state, now) {
        Some(TerminalOutcome::Accepted) => return "accepted",
        Some(TerminalOutcome::Abandoned) => return "abandoned",
        None => {}
    }
    let any = |kind: &str| decisions.iter().any(|(_, d)| d.kind() == kind);
    if any("repair") {
        "repair"
    } else if any("ask") || state.gates.values().any(|g| g.state_at(now).is_pending()) {
        "waiting"
    } else {
        "active"
    }
}

/// Merges the fields of `extra` (an object) into `base` (an object).
pub fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(map), Value::Object(extra)) = (base.as_object_mut(), extra) {
        for (key, value) in extra {
            map.insert(key, value);
        }
    }
    base
}

/// The common part of every write's document: the receipt and whether it was a retry
/// (`replayed`: the operation had already committed, nothing changed).
pub fn written(done: &Submitted) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("receipt".into(), json!(done.receipt));
    map.insert("replayed".into(), json!(done.replayed));
    map
}

/// `written` with one more field: what the write was about, as it stands after it.
fn written_with(done: &Submitted, key: &str, value: Value) -> Value {
    let mut map = written(done);
    map.insert(key.into(), value);
    Value::Object(map)
}

/// A todo's lease as it stands: status, last epoch issued and the lease (with its turn).
pub fn lease(state: &GoalState, todo: &TodoId) -> Value {
    let found = state.todos.get(todo);
    json!({
        "todo": todo,
        "status": found.map(|t| t.status.name()),
        "last_epoch": found.map(|t| t.last_epoch),
        "lease": found.and_then(|t| t.lease.as_deref()),
    })
}

/// The document of a lease verb (claim, begin, renew, take-over, release, handoff, resolve).
pub fn lease_written(done: &Submitted, todo: &TodoId) -> Value {
    written_with(done, "lease", lease(&done.state, todo))
}

/// The document of a settlement: the todo as it ends up and the budget after the charge.
pub fn settled(done: &Submitted, todo: &TodoId) -> Value {
    let mut map = written(done);
    map.insert("todo".into(), json!(done.state.todos.get(todo)));
    map.insert("budget".into(), budget(&done.state.ledger));
    Value::Object(map)
}

/// The document of a todo verb (add, defer, supersede, block, unblock, reassign).
pub fn todo_written(done: &Submitted, todo: &TodoId) -> Value {
    written_with(done, "todo", json!(done.state.todos.get(todo)))
}

/// The document of a gate verb (open, answer, reject, withdraw), the gate's state at `now`.
pub fn gate_written(done: &Submitted, gate_id: &loopx_kernel::GateId, now: Timestamp) -> Value {
    let shown = done
        .state
        .gates
        .get(gate_id)
        .map_or(Value::Null, |g| gate(g, now));
    written_with(done, "gate", shown)
}

/// The document of an obligation verb (raise, discharge).
pub fn obligation_written(done: &Submitted, id: &ObligationId) -> Value {
    written_with(done, "obligation", json!(done.state.obligations.get(id)))
}

/// The document of `evidence add`: the evidence with its freshness at `now`.
pub fn evidence_written(done: &Submitted, id: &loopx_kernel::EvidenceId, now: Timestamp) -> Value {
    let shown = done
        .state
        .evidence
        .get(id)
        .map_or(Value::Null, |e| evidence(&done.state, e, now));
    written_with(done, "evidence", shown)
}

/// The document of an observation: whether it was recorded (an unchanged fingerprint is a
/// no-op) and the observation itself.
pub fn observed(done: &Submitted, observation: &Observation) -> Value {
    let mut map = written(done);
    map.insert("recorded".into(), json!(!done.events.is_empty()));
    map.insert("observation".into(), json!(observation));
    Value::Object(map)
}

/// The document of `next`: the decision for one agent, with the revision it was made at.
pub fn next(goal: &GoalId, state: &GoalState, decision: &Decision) -> Value {
    json!({
        "goal": goal,
        "revision": state.revision,
        "decision": decision,
    })
}

/// The document of `ready`: the agent's ready work across goals, the store's frontier
/// entries (`{goal, todo}`, most urgent first).
pub fn ready(agent: &AgentId, frontier: &[(GoalId, TodoId)]) -> Value {
    let ready: Vec<Value> = frontier
        .iter()
        .map(|(goal, todo)| json!({ "goal": goal, "todo": todo }))
        .collect();
    json!({ "agent": agent, "ready": ready })
}

/// The budget: limits, spent, reserved and what is left.
pub fn budget(ledger: &Ledger) -> Value {
    merge(json!(ledger), json!({ "remaining": ledger.remaining() }))
}

/// A goal with its criteria's status and its budget at `now`.
pub fn goal(state: &GoalState, now: Timestamp) -> Value {
    let mut value = json!({
        "id": state.spec.id,
        "objective": state.spec.objective,
        "owner": state.spec.owner,
        "revision": state.revision,
        "goal_revision": state.goal_revision,
        "created_at": state.created_at,
        "agents": state.spec.agents,
        "identity": state.spec.identity_mode(),
        "keys": state
            .spec
            .keys
            .iter()
            .map(|k| json!({ "actor": k.actor.to_string(), "key": k.key }))
            .collect::<Vec<_>>(),
        "criteria": criteria(state, now),
        "budget": budget(&state.ledger),
        "policy": state.spec.policy,
        "closure": state.closure,
        "abandoned": state.abandoned,
        "terminal": terminal(state, now),
        "todos": state.todos.len(),
    });
    // The per-check validator registry, shown only when the owner registered one, with
    // whether it applies (a declared or unsigned goal takes evidence from anyone).
    if !state.spec.validators.is_empty()
        && let Some(map) = value.as_object_mut()
    {
        map.insert("validators".into(), json!(state.spec.validators));
        map.insert(
            "validators_apply".into(),
            json!(state.spec.identity_mode() == loopx_kernel::IdentityMode::Signed),
        );
    }
    // Shown only when bound, so a goal without a capability reads as it always did.
    if let (Some(binding), Some(map)) = (&state.spec.capability, value.as_object_mut()) {
        map.insert("capability".into(), json!(binding));
    }
    unverified_into(state, &mut value);
    value
}

/// Adds `unverified_history` to a goal's document when its history holds imported commits
/// taken without verification; a goal whose every commit verified reads as it always did.
fn unverified_into(state: &GoalState, value: &mut Value) {
    if let (Some(held), Some(map)) = (&state.unverified_history, value.as_object_mut()) {
        map.insert("unverified_history".into(), json!(held));
    }
}

/// What `status`, `goal show` and the board say of a goal whose history holds imported commits
/// taken without verification; `None` when it holds none.
pub fn unverified_words(state: &GoalState) -> Option<String> {
    state.unverified_history.as_ref().map(|held| {
        format!(
            "its history holds {} unverified commit(s), from revision {} on: imported without proof of who made them, accepted by {} at {}; their actors are not proven",
            held.commits, held.first_revision, held.accepted_by, held.accepted_at
        )
    })
}

/// The goal's criteria, each with its status at `now`.
pub fn criteria(state: &GoalState, now: Timestamp) -> Value {
    let status = state.criteria_status(now);
    state
        .spec
        .criteria
        .iter()
        .map(|criterion| {
            let found = status.iter().find(|(id, _)| id == &criterion.id);
            merge(
                json!(criterion),
                found.map_or(Value::Null, |(_, s)| json!(s)),
            )
        })
        .collect()
}

/// What a gate blocks, in words: `whole goal`, or its todos and decisions
/// (`todo edit, decision api:error_code`).
pub fn scope_text(scope: &loopx_kernel::GateScope) -> String {
    if scope.whole_goal {
        return "whole goal".to_owned();
    }
    let mut parts: Vec<String> = scope.todos.iter().map(|t| format!("todo {t}")).collect();
    parts.extend(scope.decisions.iter().map(|d| format!("decision {d}")));
    parts.join(", ")
}

/// A gate's effective state as a word, as its JSON says it (`pending`, `overdue`, `resolved`,
/// `rejected`, `expired`, `withdrawn`).
pub fn gate_state_word(state: loopx_kernel::GateState) -> &'static str {
    use loopx_kernel::GateState;
    match state {
        GateState::Pending => "pending",
        GateState::Overdue => "overdue",
        GateState::Resolved => "resolved",
        GateState::Rejected => "rejected",
        GateState::Expired => "expired",
        GateState::Withdrawn => "withdrawn",
    }
}

/// A gate with its effective state at `now`.
pub fn gate(gate: &Gate, now: Timestamp) -> Value {
    merge(json!(gate), json!({ "effective": gate.state_at(now) }))
}

/// Evidence with its freshness at `now`; stale evidence says why in words (`stale_because`).
pub fn evidence(state: &GoalState, evidence: &Evidence, now: Timestamp) -> Value {
    let freshness = state.freshness(&evidence.id, now);
    let mut value = merge(json!(evidence), json!(freshness));
    if !freshness.is_fresh() {
        value = merge(value, json!({ "stale_because": stale_words(&freshness) }));
    }
    value
}

/// Why evidence is stale, in words: the kernel's, so `evidence list`, `status`, `next`, the
/// brief and the board say it alike (a dirty tree is named as such, with what to do).
pub fn stale_words(freshness: &Freshness) -> String {
    loopx_kernel::words::freshness_words(freshness)
}

/// A pending effect of the outbox, with whether its lease is still live at `now`.
pub fn pending_effect(state: &GoalState, pending: &PendingEffect, now: Timestamp) -> Value {
    json!({
        "effect": pending.effect.id,
        "kind": pending.effect.kind,
        "target": pending.effect.target,
        "key": pending.effect.key,
        "digest": pending.effect.digest,
        "todo": pending.todo,
        "epoch": pending.epoch,
        "holder": pending.holder,
        "turn": pending.turn,
        "intended_at": pending.intended_at,
        "live": pending.is_live(state, now),
    })
}

/// The board column a todo stands in: its status, with a leased open todo apart.
pub fn column(todo: &Todo) -> &'static str {
    match todo.status.name() {
        "open" if todo.lease.is_some() => "leased",
        other => other,
    }
}

/// The todos by board column.
pub fn board(state: &GoalState) -> Value {
    let mut board = Map::new();
    for name in COLUMNS {
        let todos: Vec<Value> = state
            .todos
            .values()
            .filter(|t| column(t) == name)
            .map(|t| {
                json!({
                    "id": t.id,
                    "title": t.title,
                    "priority": t.priority,
                    "assignee": t.assignee,
                    "lease": t.lease.as_deref(),
                })
            })
            .collect();
        board.insert(name.to_owned(), Value::Array(todos));
    }
    Value::Object(board)
}

/// The logins the owner mapped to people (`goal amend --map-login`), by provider and login:
/// `{"provider": "github", "login": "maria-gh", "person": "maria"}` each.
pub fn logins(state: &GoalState) -> Vec<Value> {
    state
        .logins
        .iter()
        .flat_map(|(provider, mapped)| {
            mapped.iter().map(move |(login, person)| {
                json!({ "provider": provider, "login": login, "person": person })
            })
        })
        .collect()
}

/// The document of `status`: the board, open gates, budget, criteria and evidence freshness
/// at `now`, and the outbox when it holds something (so a board without effects reads as it
/// always did), and the mapped logins when there are any.
pub fn status(state: &GoalState, now: Timestamp) -> Value {
    let gates: Vec<Value> = state
        .gates
        .values()
        .filter(|g| g.state_at(now).is_pending())
        .map(|g| gate(g, now))
        .collect();
    let evidence: Vec<Value> = state
        .evidence
        .values()
        .map(|e| evidence(state, e, now))
        .collect();
    let mut status = json!({
        "goal": state.spec.id,
        "objective": state.spec.objective,
        "revision": state.revision,
        "identity": state.spec.identity_mode(),
        "at": now,
        "terminal": terminal(state, now),
        "board": board(state),
        "gates": gates,
        "budget": budget(&state.ledger),
        "criteria": criteria(state, now),
        "evidence": evidence,
    });
    // The capability is said only when the goal is bound to one.
    if let (Some(binding), Some(map)) = (&state.spec.capability, status.as_object_mut()) {
        map.insert("capability".into(), json!(binding));
    }
    unverified_into(state, &mut status);
    // The people the owner mapped to provider logins, when there are any.
    if !state.logins.is_empty()
        && let Some(map) = status.as_object_mut()
    {
        map.insert("logins".into(), Value::Array(logins(state)));
    }
    if !state.pending_effects.is_empty()
        && let Some(map) = status.as_object_mut()
    {
        let pending: Vec<Value> = state
            .pending_effects
            .values()
            .map(|p| pending_effect(state, p, now))
            .collect();
        map.insert("pending_effects".into(), Value::Array(pending));
    }
    json!({ "status": status })
}

/// The document of `log`: a goal's recorded events, with the revision it stands at.
pub fn log(goal: &GoalId, state: &GoalState, events: &[RecordedEvent]) -> Value {
    json!({ "goal": goal, "revision": state.revision, "events": events })
}
