//! `loopx settle`: settle a turn from a Settlement JSON document.

use std::fmt::Write as _;

use std::path::{Path, PathBuf};

use clap::Args;
use loopx_kernel::{Command, Settlement};
use serde_json::{Value, json};

use crate::cmd::verdict::SignedVerdict;
use crate::context::{Ctx, observed_now, read_json, read_json_with, written_line};
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
An evidence without observed_at is observed now. On a signed goal the verdict must carry its
validator's signature: pass the verdict `loopx verdict` printed with --verdict FILE.";

/// Flags of `loopx settle`.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// The settlement as JSON (the kernel's Settlement shape); `-` or absent: standard input.
    #[arg(long)]
    file: Option<PathBuf>,
    /// The validator's signed verdict, as `loopx verdict` printed it: it replaces the
    /// settlement's verdict, and its evidence becomes the settlement's when the settlement
    /// names none (a signed goal needs exactly the evidence the validator signed).
    #[arg(long, value_name = "FILE")]
    verdict: Option<PathBuf>,
}

pub async fn run(ctx: &Ctx, args: &SettleArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let settlement = read_settlement(ctx, &path, args.verdict.as_deref(), |_| {})?;
    let todo = settlement.todo.clone();
    let backend = ctx.open().await?;
    let done = ctx
        .submit(&backend, &goal, &Command::SettleTurn(settlement))
        .await?;
    let value = loopx_server::views::settled(&done, &todo);
    ctx.out.emit(&value, |out| {
        let mut text = written_line(out, &done, &format!("settlement of todo `{todo}`"));
        if let Some(t) = done.state.todos.get(&todo) {
            let _ = writeln!(text, "  todo `{todo}` is {}", t.status.name());
        }
        text
    });
    Ok(Exit::Ok)
}

/// Reads a settlement file (`-`: standard input) as `loopx settle` and `loopx resolve-outcome`
/// take it: an evidence without `observed_at` is observed now, and a validator's signed verdict
/// (`verdict`, as `loopx verdict` printed it) replaces the file's verdict and, when the file
/// names no evidence, brings the evidence it was signed over. `fill` puts in what the caller
/// knows and the file may leave out.
pub fn read_settlement(
    ctx: &Ctx,
    path: &Path,
    verdict: Option<&Path>,
    fill: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> Result<Settlement, CliError> {
    let signed: Option<SignedVerdict> = match verdict {
        Some(path) => Some(read_json(path, "signed verdict")?),
        None => None,
    };
    let mut settlement: Settlement = read_json_with(path, "settlement", |value| {
        if let Some(map) = value.as_object_mut() {
            fill(map);
            // The carried verdict stands in for one the settlement file leaves out.
            if let Some(signed) = &signed {
                map.entry("verdict")
                    .or_insert_with(|| json!(signed.verdict));
            }
        }
        if let Some(items) = value.get_mut("evidence").and_then(Value::as_array_mut) {
            for item in items {
                observed_now(item, ctx.now);
            }
        }
    })?;
    if let Some(signed) = signed {
        settlement.verdict = signed.verdict;
        if settlement.evidence.is_empty() {
            settlement.evidence = signed.evidence;
        }
    }
    Ok(settlement)
}
