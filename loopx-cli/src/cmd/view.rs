//! JSON views shared by several verbs: a goal, its budget, a gate, a piece of evidence. Each is
//! built from the kernel's own serde shapes, with derived facts (status at `now`) merged in.

use std::fmt::Write as _;

use loopx_kernel::{GoalState, Timestamp, Todo, terminal};

use crate::output::Output;
use crate::output::{Style, Table, or_dash};

pub use loopx_server::views::{evidence, gate, goal, stale_words};

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

/// The todos as a table. A title is shown as outside text: one recorded before the kernel
/// refused hiding characters (or imported) cannot reorder or hide what a terminal shows.
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
            loopx_provider::fact::outside_text(&todo.title),
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
    if let Some(words) = loopx_server::views::unverified_words(state) {
        let _ = writeln!(
            text,
            "  {}",
            out.paint(Style::Bad, &format!("unverified: {words}"))
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_kernel::{Command, GoalSpec, NewTodo, TodoId};

    #[test]
    fn a_title_that_would_reorder_the_terminal_is_listed_neutralised() {
        let now = Timestamp::parse("2026-11-29T10:00:00Z").expect("a time");
        let spec = GoalSpec::builder("g", "ship it", "maintainer")
            .agent("agent-a")
            .declared_identity()
            .build()
            .expect("a spec");
        let mut state = GoalState::create(&spec.owner_actor(), now, &spec).expect("a goal");
        let todo = NewTodo::advance(TodoId::new("edit").expect("an id"), "fix the output");
        state
            .handle(&spec.owner_actor(), now, &Command::AddTodo { todo })
            .expect("added");
        // As an older store may hold it: written before the kernel refused it.
        let mut todo = state.todos.values().next().expect("the todo").clone();
        todo.title = "invoice \u{202e}fdp.exe\u{200b}".to_owned();
        let table = todo_table(&Output::new(false), &[&todo], now);
        assert!(table.contains("invoice \u{fffd}fdp.exe\u{fffd}"), "{table}");
        assert!(
            !table.contains('\u{202e}') && !table.contains('\u{200b}'),
            "{table}"
        );
    }
}
