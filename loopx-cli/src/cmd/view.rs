//! JSON views shared by several verbs: a goal, its budget, a gate, a piece of evidence. Each is
//! built from the kernel's own serde shapes, with derived facts (status at `now`) merged in.

use std::fmt::Write as _;

use loopx_kernel::{Evidence, Freshness, Gate, GoalState, Ledger, Timestamp, Todo, terminal};
use serde_json::{Value, json};

use crate::output::Output;
use crate::output::{Style, Table, or_dash};

/// Merges the fields of `extra` (an object) into `base` (an object).
pub fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(map), Value::Object(extra)) = (base.as_object_mut(), extra) {
        for (key, value) in extra {
            map.insert(key, value);
        }
    }
    base
}

/// The budget: limits, spent, reserved and what is left.
pub fn budget(ledger: &Ledger) -> Value {
    merge(json!(ledger), json!({ "remaining": ledger.remaining() }))
}

/// A goal with its criteria's status and its budget at `now`.
pub fn goal(state: &GoalState, now: Timestamp) -> Value {
    let status = state.criteria_status(now);
    let criteria: Vec<Value> = state
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
        .collect();
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
        "criteria": criteria,
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
    value
}

/// The goal's identity mode in words, as `status` and `goal show` state it.
pub fn identity_words(state: &GoalState) -> String {
    match state.spec.identity_mode() {
        loopx_kernel::IdentityMode::Signed => {
            format!("signed ({} registered keys)", state.spec.keys.len())
        }
        loopx_kernel::IdentityMode::Declared => {
            "declared (actors are taken at their word: for experiments only)".to_owned()
        }
        loopx_kernel::IdentityMode::Unsigned => {
            "unsigned (recorded before signing: actors are taken at their word)".to_owned()
        }
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
        value = merge(
            value,
            json!({ "stale_because": stale_words(evidence, &freshness) }),
        );
    }
    value
}

/// Why evidence is stale, in words. Evidence a validator established on a tree with
/// uncommitted files is bound to `git:<sha>+dirty`, which no clean observation matches: that
/// is said outright, since the files are usually something the validator itself left behind.
pub fn stale_words(evidence: &Evidence, freshness: &Freshness) -> String {
    if let Freshness::Superseded { current } = freshness
        && evidence.revision.as_str().ends_with("+dirty")
    {
        return format!(
            "established on a dirty tree ({}): the checkout had uncommitted or untracked files when it was checked, and the subject is at {current}; commit or ignore those files (`git status` shows them) and check again",
            evidence.revision
        );
    }
    crate::decision::freshness_words(freshness)
}

/// The lease column of a todo: `holder#epoch`, with the turn in flight.
pub fn lease_cell(todo: &Todo, now: Timestamp) -> String {
    match todo.lease.as_deref() {
        Some(lease) => {
            let live = if lease.is_live(now) { "" } else { " (expired)" };
            let turn = lease
                .turn
                .as_ref()
                .map_or_else(String::new, |t| format!(" turn {}", t.id));
            format!("{}#{}{turn}{live}", lease.holder, lease.epoch)
        }
        None => "-".to_owned(),
    }
}

/// The todos as a table.
pub fn todo_table(out: &Output, todos: &[&Todo], now: Timestamp) -> String {
    let mut table = Table::new(&["TODO", "STATUS", "PRI", "ASSIGNEE", "LEASE", "TITLE"]);
    for todo in todos {
        let status = todo.status.name();
        let status = match status {
            "done" => out.paint(Style::Good, status),
            "blocked" => out.paint(Style::Bad, status),
            "deferred" | "superseded" => out.paint(Style::Dim, status),
            other => other.to_owned(),
        };
        table.row(vec![
            todo.id.to_string(),
            status,
            format!("{:?}", todo.priority),
            or_dash(todo.assignee.as_ref()),
            lease_cell(todo, now),
            todo.title.clone(),
        ]);
    }
    table.render(out)
}

/// A goal in a few human lines.
pub fn goal_text(out: &Output, state: &GoalState, now: Timestamp) -> String {
    let mut text = format!(
        "{} {}\n  objective: {}\n  owner: person:{}   revision {} (goal revision {})\n",
        out.paint(Style::Bold, "goal"),
        state.spec.id,
        state.spec.objective,
        state.spec.owner,
        state.revision,
        state.goal_revision
    );
    let agents: Vec<String> = state.spec.agents.iter().map(ToString::to_string).collect();
    let _ = writeln!(text, "  agents: {}", agents.join(", "));
    let _ = writeln!(text, "  identity: {}", identity_words(state));
    if let Some(binding) = &state.spec.capability {
        let _ = writeln!(
            text,
            "  capability: {}",
            crate::cmd::capability::words(binding)
        );
    }
    if let Some(outcome) = terminal(state, now) {
        let _ = writeln!(
            text,
            "  terminal ({})",
            crate::decision::terminal_word(outcome)
        );
    }
    let status = state.criteria_status(now);
    if !status.is_empty() {
        let mut table = Table::new(&["CRITERION", "STATUS", "CHECK", "SUBJECT", "TEXT"]);
        for criterion in &state.spec.criteria {
            let shown = status
                .iter()
                .find(|(id, _)| id == &criterion.id)
                .map_or_else(|| "-".to_owned(), |(_, s)| criterion_status(out, s));
            table.row(vec![
                criterion.id.to_string(),
                shown,
                criterion.check.to_string(),
                criterion.subject.to_string(),
                criterion.text.clone(),
            ]);
        }
        text.push('\n');
        text.push_str(&table.render(out));
    }
    text
}

/// A criterion's status in words.
pub fn criterion_status(out: &Output, status: &loopx_kernel::CriterionStatus) -> String {
    use loopx_kernel::CriterionStatus as S;
    match status {
        S::Met { evidence } => out.paint(Style::Good, &format!("met ({evidence})")),
        S::NoEvidence => out.paint(Style::Warn, "no evidence"),
        S::Failing { evidence } => out.paint(Style::Bad, &format!("failing ({evidence})")),
        S::Stale {
            evidence,
            freshness,
        } => out.paint(
            Style::Warn,
            &format!(
                "stale ({evidence}: {})",
                crate::decision::freshness_words(freshness)
            ),
        ),
        S::UnregisteredValidator {
            evidence,
            produced_by,
        } => out.paint(
            Style::Warn,
            &format!("ignored ({evidence} by {produced_by}, not registered for the check)"),
        ),
    }
}
