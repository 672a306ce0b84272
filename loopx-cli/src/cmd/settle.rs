//! `loopx settle`: settle a turn from a Settlement JSON document.

use std::fmt::Write as _;

use std::path::PathBuf;

use clap::Args;
use loopx_kernel::{Command, Settlement};
use serde_json::{Value, json};

use crate::cmd::view;
use crate::context::{Ctx, read_json, written, written_line};
use crate::error::{CliError, Exit};

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
    let settlement: Settlement = read_json(&path, "settlement")?;
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
