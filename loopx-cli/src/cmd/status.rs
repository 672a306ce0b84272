//! `loopx status`: the board of one goal, now or as it stood at a past revision.

use std::fmt::Write as _;

use clap::Args;
use loopx_kernel::seams::DeadLetter;
use loopx_kernel::{GoalId, GoalState, Timestamp, Todo};
use serde_json::json;

use crate::cmd::{effect, evidence, revision, view};
use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::{Output, Style, Table, or_dash};
use crate::store::Backend;

use loopx_server::views::{COLUMNS, column};

/// How many of the store's dead letters `status` reads to find a goal's.
const DEAD_LETTERS_READ: usize = 1000;

/// Flags of `loopx status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Show the goal as it stood right after this revision (1 up to the head): its history
    /// replayed up to there, and what derives from time (open gates, freshness, terminal)
    /// judged at that revision's commit time.
    #[arg(long, value_name = "N")]
    at_revision: Option<u64>,
}

pub async fn run(ctx: &Ctx, args: &StatusArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let mut state = ctx.load(&backend, &goal).await?;
    let mut now = ctx.now;
    let head = state.revision;
    if let Some(at) = args.at_revision {
        revision::check_revision("--at-revision", at, &goal, head)?;
        state = revision::state_at(&backend, &goal, at).await?;
        now = state.last_commit();
    }
    let mut value = loopx_server::views::status(&state, now);
    // A past revision says where the head stands, so it is never taken for the current board.
    if let (Some(_), Some(status)) = (args.at_revision, value["status"].as_object_mut()) {
        status.insert("head_revision".into(), json!(head));
    }
    // Said only of a store on a test clock, where `--now` moves time.
    let test_clock = backend.clock() == loopx_store::StoreClock::Test;
    if let (true, Some(status)) = (test_clock, value["status"].as_object_mut()) {
        status.insert("clock".into(), json!("test"));
    }
    // What this goal refused to record from outside, kept as dead letters.
    let refused = dead_letters_of(&backend, &goal).await?;
    if let (false, Some(status)) = (refused.is_empty(), value["status"].as_object_mut()) {
        status.insert("dead_letters".into(), json!(refused));
    }
    let warnings = crate::cmd::key::misplaced_warnings(ctx);
    if let (false, Some(status)) = (warnings.is_empty(), value["status"].as_object_mut()) {
        status.insert("key_warnings".into(), json!(warnings));
    }
    ctx.out.emit(&value, |out| {
        let mut text = human(out, &state, now);
        text.push_str(&dead_letters_text(&goal, &refused));
        text.push_str(&crate::cmd::key::misplaced_text(&warnings));
        if args.at_revision.is_some() {
            let _ = write!(
                text,
                "\nas it stood at revision {} ({now}); the goal is now at revision {head}\n",
                state.revision
            );
        }
        if test_clock {
            text.push_str(
                "\nthe store runs on a test clock: --now moves time (tests and scripts only)\n",
            );
        }
        text
    });
    Ok(Exit::Ok)
}

/// The dead letters of `goal` among the first the store keeps.
async fn dead_letters_of(backend: &Backend, goal: &GoalId) -> Result<Vec<DeadLetter>, CliError> {
    let kept = backend.store().dead_letters(DEAD_LETTERS_READ).await?;
    Ok(kept
        .letters
        .into_iter()
        .filter(|letter| letter.goal == *goal)
        .collect())
}

/// The dead letters as lines after a blank one; nothing without any.
fn dead_letters_text(goal: &GoalId, letters: &[DeadLetter]) -> String {
    if letters.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "
{} fact(s) from outside this goal refused to record (dead letters):
",
        letters.len()
    );
    for letter in letters {
        let _ = writeln!(
            text,
            "  {} `{}`: {}: {}",
            letter.origin, letter.operation, letter.code, letter.reason
        );
    }
    let _ = writeln!(
        text,
        "  fix the cause, then re-apply them: loopx dead-letters retry --goal {goal}"
    );
    text
}

/// Why an open todo's last turn failed, when its streak is of failures.
fn last_failure(state: &GoalState, todo: &Todo) -> String {
    state
        .last_failure(&todo.id)
        .map(|(failures, note)| loopx_kernel::words::failure_words(failures, note, "    "))
        .unwrap_or_default()
}

fn human(out: &Output, state: &GoalState, now: Timestamp) -> String {
    let mut text = view::goal_text(out, state, now);
    text.push('\n');
    for name in COLUMNS {
        let todos: Vec<&Todo> = state.todos.values().filter(|t| column(t) == name).collect();
        if todos.is_empty() {
            continue;
        }
        let _ = writeln!(text, "{} ({})", out.paint(Style::Bold, name), todos.len());
        for todo in todos {
            let lease = view::lease_cell(todo, now);
            let lease = if lease == "-" {
                String::new()
            } else {
                format!("  [{lease}]")
            };
            let _ = writeln!(text, "  {}  {}{lease}", todo.id, todo.title);
            text.push_str(&last_failure(state, todo));
        }
    }
    let pending: Vec<_> = state
        .gates
        .values()
        .filter(|g| g.state_at(now).is_pending())
        .collect();
    text.push('\n');
    if pending.is_empty() {
        text.push_str("no open gates\n");
    } else {
        let mut table = Table::new(&["OPEN GATE", "OWNER", "DEADLINE", "BLOCKS", "QUESTION"]);
        for gate in pending {
            table.row(vec![
                gate.id.to_string(),
                gate.owner.to_string(),
                or_dash(gate.deadline),
                crate::cmd::gate::scope_text(&gate.scope),
                gate.question.clone(),
            ]);
        }
        text.push_str(&table.render(out));
    }
    let decided = state.decided_on_open_work(now);
    if !decided.is_empty() {
        text.push_str("\ndecided on open work (their words, quoted):\n");
        for decided in &decided {
            text.push_str(&loopx_kernel::words::decided_words(decided, "  "));
        }
    }
    text.push_str(&logins(out, state));
    text.push('\n');
    let ledger = &state.ledger;
    let remaining = ledger.remaining();
    let mut table = Table::new(&["BUDGET", "LIMIT", "SPENT", "RESERVED", "LEFT"]);
    let rows = [
        (
            "turns",
            ledger.limits.turns,
            ledger.spent.turns,
            ledger.reserved.turns,
            remaining.turns,
        ),
        (
            "tokens",
            ledger.limits.tokens,
            ledger.spent.tokens,
            ledger.reserved.tokens,
            remaining.tokens,
        ),
        (
            "cost_micros",
            ledger.limits.cost_micros,
            ledger.spent.cost_micros,
            ledger.reserved.cost_micros,
            remaining.cost_micros,
        ),
        (
            "wall_ms",
            ledger.limits.wall_ms,
            ledger.spent.wall_ms,
            ledger.reserved.wall_ms,
            remaining.wall_ms,
        ),
    ];
    for (name, limit, spent, reserved, left) in rows {
        table.row(vec![
            name.to_owned(),
            limit.map_or_else(|| "unlimited".to_owned(), |l| l.to_string()),
            spent.to_string(),
            reserved.to_string(),
            left.map_or_else(|| "-".to_owned(), |l| l.to_string()),
        ]);
    }
    text.push_str(&table.render(out));
    text.push('\n');
    text.push_str(&evidence::table(out, state, now));
    let pending = effect::table(out, state, now);
    if !pending.is_empty() {
        text.push('\n');
        text.push_str(&pending);
    }
    text
}

/// The logins the owner mapped to people, as a table after a blank line; nothing without any.
fn logins(out: &Output, state: &GoalState) -> String {
    if state.logins.is_empty() {
        return String::new();
    }
    let mut table = Table::new(&["LOGIN", "PERSON"]);
    for (provider, mapped) in &state.logins {
        for (login, person) in mapped {
            table.row(vec![
                format!("{provider}:{login}"),
                format!("person:{person}"),
            ]);
        }
    }
    format!("\n{}", table.render(out))
}
