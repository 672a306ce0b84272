//! `loopx effect list|resolve`: the outbox, external effects intended under a lease. An effect
//! whose lease is gone and whose outcome nobody recorded is read back where it acts (the pull
//! request, the commit's statuses) and resolved here by its holder or the goal owner.

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::{Command, EffectId, EffectOutcome, GoalState, Timestamp};
use serde_json::{Value, json};

use crate::context::{Ctx, written, written_line};
use crate::error::{CliError, Exit};
use crate::output::Table;

/// `loopx effect …`
#[derive(Debug, Subcommand)]
pub enum EffectVerb {
    /// List the effects intended and not yet recorded (pending), with their lease's standing.
    List,
    /// Record what a readback of a pending effect showed: performed, or absent for good (it is
    /// then never performed under its intent; work that still needs it intends a new one).
    Resolve(ResolveArgs),
}

/// What the readback showed.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Outcome {
    /// It happened.
    Performed,
    /// It did not happen.
    Absent,
}

/// Flags of `loopx effect resolve`.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The pending effect (`loopx effect list`).
    #[arg(long)]
    effect: EffectId,
    /// What the readback showed.
    #[arg(long, value_enum)]
    outcome: Outcome,
    /// What the readback showed, in words.
    #[arg(long)]
    note: Option<String>,
    /// Why you may resolve another agent's effect (under a `take_over` grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// A pending effect as JSON, with whether its lease is live.
pub use loopx_server::views::pending_effect as pending_json;

/// The pending effects as a table; empty when there are none.
pub fn table(out: &crate::output::Output, state: &GoalState, now: Timestamp) -> String {
    if state.pending_effects.is_empty() {
        return String::new();
    }
    let mut table = Table::new(&["PENDING EFFECT", "KIND", "TARGET", "HOLDER", "LEASE"]);
    for pending in state.pending_effects.values() {
        table.row(vec![
            pending.effect.id.to_string(),
            pending.effect.kind.clone(),
            pending.effect.target.clone(),
            pending.holder.to_string(),
            if pending.is_live(state, now) {
                format!("live, epoch {}", pending.epoch)
            } else {
                format!("gone (epoch {}): read back and resolve", pending.epoch)
            },
        ]);
    }
    table.render(out)
}

pub async fn run(ctx: &Ctx, verb: EffectVerb) -> Result<Exit, CliError> {
    match verb {
        EffectVerb::List => {
            let goal = ctx.goal()?;
            let backend = ctx.open().await?;
            let state = ctx.load(&backend, &goal).await?;
            let now = ctx.now;
            let pending: Vec<Value> = state
                .pending_effects
                .values()
                .map(|p| pending_json(&state, p, now))
                .collect();
            let value = json!({ "goal": goal, "revision": state.revision, "pending": pending });
            ctx.out.emit(&value, |out| {
                let text = table(out, &state, now);
                if text.is_empty() {
                    "no pending effects\n".to_owned()
                } else {
                    text
                }
            });
            Ok(Exit::Ok)
        }
        EffectVerb::Resolve(args) => {
            let goal = ctx.goal()?;
            ctx.actor()?;
            let backend = ctx.open().await?;
            let id = args.effect.clone();
            let command = Command::RecordEffect {
                id: args.effect,
                outcome: match args.outcome {
                    Outcome::Performed => EffectOutcome::Performed,
                    Outcome::Absent => EffectOutcome::Absent,
                },
                note: args.note,
                grant_reason: args.grant_reason,
            };
            let done = ctx.submit(&backend, &goal, &command).await?;
            let mut value = written(&done);
            value.insert(
                "pending".into(),
                json!(done.state.pending_effects.contains_key(&id)),
            );
            ctx.out.emit(&Value::Object(value), |out| {
                written_line(out, &done, &format!("record of effect `{id}`"))
            });
            Ok(Exit::Ok)
        }
    }
}
