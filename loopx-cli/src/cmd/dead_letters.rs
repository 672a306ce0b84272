//! `loopx dead-letters list|retry|drop`: the provider facts a goal refused to record (from a
//! GitHub delivery or a poll), kept by the store so that nothing from outside is lost without
//! a trace. `retry` re-applies them as they first came, once the cause is fixed (e.g. the
//! provider's key registered); `drop` dismisses one a person decided to let go.

use std::fmt::Write as _;
use std::sync::Arc;

use clap::{Args, Subcommand};
use loopx_kernel::seams::DeadLetter;
use loopx_kernel::{GoalId, ManualClock, OperationId};
use loopx_server::dead_letters::Reapplier;
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::Table;

/// How many of the kept letters `retry` reads to pick from.
const MAX_RETRIED: usize = 1000;

/// `loopx dead-letters …`
#[derive(Debug, Subcommand)]
pub enum DeadLettersVerb {
    /// List the kept dead letters, the first refused first: which goal, from where, why.
    List(ListArgs),
    /// Re-apply dead letters as they first came (signed with the provider's key from the
    /// service's key directory); recorded ones leave the list, refused ones stay with the new
    /// reason.
    Retry(PickArgs),
    /// Dismiss one dead letter: it is removed without being recorded.
    Drop(OneArgs),
}

/// Flags of `loopx dead-letters list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show at most this many.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
    limit: u16,
}

/// Which letters `retry` takes: one (`--goal` and `--letter`), every letter of a goal
/// (`--goal`), or every letter (`--all`).
#[derive(Debug, Args)]
pub struct PickArgs {
    /// Only the letter of this operation, as `list` shows it (with --goal).
    #[arg(long, value_name = "OPERATION")]
    letter: Option<OperationId>,
    /// Every letter kept, of every goal.
    #[arg(long, conflicts_with = "letter")]
    all: bool,
}

/// Flags of `loopx dead-letters drop` (with --goal).
#[derive(Debug, Args)]
pub struct OneArgs {
    /// The letter's operation, as `list` shows it.
    #[arg(long, value_name = "OPERATION")]
    letter: OperationId,
}

pub async fn run(ctx: &Ctx, verb: DeadLettersVerb) -> Result<Exit, CliError> {
    match verb {
        DeadLettersVerb::List(args) => list(ctx, usize::from(args.limit)).await,
        DeadLettersVerb::Retry(args) => retry(ctx, &args).await,
        DeadLettersVerb::Drop(args) => drop_one(ctx, &args).await,
    }
}

async fn list(ctx: &Ctx, limit: usize) -> Result<Exit, CliError> {
    let backend = ctx.open().await?;
    let kept = backend.store().dead_letters(limit).await?;
    let value = json!({ "total": kept.total, "dead_letters": kept.letters });
    ctx.out.emit(&value, |out| {
        if kept.letters.is_empty() {
            return "no dead letters\n".to_owned();
        }
        let mut table = Table::new(&["GOAL", "OPERATION", "FROM", "REFUSED", "WHY"]);
        for letter in &kept.letters {
            table.row(vec![
                letter.goal.to_string(),
                letter.operation.to_string(),
                letter.origin.clone(),
                format!("{}x, last {}", letter.refusals, letter.last_refused),
                format!("{}: {}", letter.code, letter.reason),
            ]);
        }
        let mut text = table.render(out);
        if kept.total > kept.letters.len() as u64 {
            let more = kept.total - kept.letters.len() as u64;
            let _ = writeln!(text, "… {more} more; `--limit` shows more");
        }
        text.push_str(
            "re-apply once the cause is fixed: loopx dead-letters retry --all (or --goal GOAL --letter OPERATION)\n",
        );
        text
    });
    Ok(Exit::Ok)
}

async fn retry(ctx: &Ctx, pick: &PickArgs) -> Result<Exit, CliError> {
    let goal = if pick.all { None } else { ctx.goal_opt()? };
    if goal.is_none() && !pick.all {
        return Err(CliError::usage(
            "letters_unpicked",
            "say which dead letters to re-apply",
            "give --all, --goal GOAL, or --goal GOAL --letter OPERATION (from `loopx dead-letters list`)",
        ));
    }
    let backend = ctx.open().await?;
    let letters: Vec<DeadLetter> = backend
        .store()
        .dead_letters(MAX_RETRIED)
        .await?
        .letters
        .into_iter()
        .filter(|letter| picked(goal.as_ref(), pick.letter.as_ref(), letter))
        .collect();
    let reapplier = Reapplier::new(backend.into_store(), Arc::new(ManualClock::new(ctx.now)))
        .keyring(super::serve::delivery_keyring(ctx)?);
    let mut outcomes = Vec::with_capacity(letters.len());
    for letter in &letters {
        let outcome = reapplier.reapply(letter).await?;
        outcomes.push((letter, outcome));
    }
    let still = outcomes.iter().filter(|(_, o)| o.refused.is_some()).count();
    let value = Value::Array(
        outcomes
            .iter()
            .map(|(letter, outcome)| {
                json!({ "goal": letter.goal, "letter": letter.operation, "outcome": outcome })
            })
            .collect(),
    );
    ctx.out.emit(&value, |_| {
        if outcomes.is_empty() {
            return "no dead letter matched\n".to_owned();
        }
        let mut text = String::new();
        for (letter, outcome) in &outcomes {
            let line = match (&outcome.refused, &outcome.reason) {
                (Some(code), reason) => format!(
                    "refused again ({code}): {}; kept",
                    reason.as_deref().unwrap_or("")
                ),
                (None, _) if outcome.replayed => "had been recorded; removed".to_owned(),
                (None, _) => "recorded; removed".to_owned(),
            };
            let _ = writeln!(
                text,
                "{} `{}` ({}): {line}",
                letter.goal, letter.operation, letter.origin
            );
        }
        text
    });
    Ok(if still > 0 { Exit::Refused } else { Exit::Ok })
}

fn picked(goal: Option<&GoalId>, operation: Option<&OperationId>, letter: &DeadLetter) -> bool {
    goal.is_none_or(|goal| *goal == letter.goal)
        && operation.is_none_or(|operation| *operation == letter.operation)
}

async fn drop_one(ctx: &Ctx, one: &OneArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    if !backend.store().drop_dead_letter(&goal, &one.letter).await? {
        return Err(CliError::not_found(
            "dead_letter_unknown",
            format!("no dead letter `{}` on goal `{goal}`", one.letter),
            "list them with `loopx dead-letters list`",
        ));
    }
    let value = json!({ "goal": goal, "letter": one.letter, "dropped": true });
    ctx.out.emit(&value, |_| {
        format!(
            "dropped the dead letter `{}` of goal `{goal}`; it was not recorded\n",
            one.letter
        )
    });
    Ok(Exit::Ok)
}
