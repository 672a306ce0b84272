//! `loopx settle`: settle a turn from a Settlement JSON document.

use std::fmt::Write as _;

use std::path::PathBuf;

use clap::Args;
use loopx_kernel::{Command, Settlement};
use serde_json::{Value, json};

use crate::cmd::view;
use crate::context::{Ctx, observed_now, read_json_with, written, written_line};
use crate::error::{CliError, Exit};

/// The shape of the settlement file, shown by `loopx settle --help`.
pub const SHAPE: &str = "\
The settlement (the kernel's Settlement, as JSON):
  {\"todo\": \"edit\", \"epoch\": 1, \"turn\": \"t1\",
   \"verdict\": {\"validator\": {\"kind\": \"validator\", \"id\": \"cargo-test\"},
               \"outcome\": \"passed\", \"summary\": \"cargo test passed\"},
   \"evidence\": [{\"id\": \"tests@abc123\", \"check\": \"tests\", \"subject\": \"repo:acme/cli\",
                 \"revision\": \"git:abc123\", \"outcome\": \"passed\"}],
   \"observations\": [],
   \"transition\": {\"kind\": \"complete\", \"continuation\": {\"kind\": \"no_follow_up\"}},
   \"usage\": {\"turns\": 1, \"tokens\": 18000}}
verdict.outcome: passed | progress | failed. transition.kind: complete (with continuation:
successors + todos, no_follow_up, goal_still_active), keep_open, defer (until), block (reason).
An evidence without observed_at is observed now.";

/// Flags of `loopx settle`.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// The settlement as JSON (the kernel's Settlement shape); `-` or absent: standard input.
    #[arg(long)]
    file: Option<PathBuf>,
}

pub async fn run(ctx: &Ctx, args: &SettleArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let settlement: Settlement = read_json_with(&path, "settlement", |value| {
        if let Some(items) = value.get_mut("evidence").and_then(Value::as_array_mut) {
            for item in items {
                observed_now(item, ctx.now);
            }
        }
    })?;
    let todo = settlement.todo.clone();
    let backend = ctx.open().await?;
    let done = ctx
        .submit(&backend, &goal, &Command::SettleTurn(settlement))
        .await?;
    let mut value = written(&done);
    value.insert("todo".into(), json!(done.state.todos.get(&todo)));
    value.insert("budget".into(), view::budget(&done.state.ledger));
    ctx.out.emit(&Value::Object(value), |out| {
        let mut text = written_line(out, &done, &format!("settlement of todo `{todo}`"));
        if let Some(t) = done.state.todos.get(&todo) {
            let _ = writeln!(text, "  todo `{todo}` is {}", t.status.name());
        }
        text
    });
    Ok(Exit::Ok)
}
