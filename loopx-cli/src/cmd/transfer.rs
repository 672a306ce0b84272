//! `loopx export|import`: a goal's recorded events as JSON lines, one event per line.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;
use loopx_kernel::seams::{AppendRequest, Commit, StoreError};
use loopx_kernel::{GoalState, OperationId, RecordedEvent, check_invariants};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::context::{Ctx, read_text};
use crate::error::{CliError, Exit};

/// Flags of `loopx export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write the JSON lines to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Flags of `loopx import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The JSON lines to import (`-` or absent: standard input).
    #[arg(long)]
    file: Option<PathBuf>,
}

fn lines(events: &[RecordedEvent]) -> Result<String, CliError> {
    let mut text = String::new();
    for event in events {
        let line = serde_json::to_string(event)
            .map_err(|e| CliError::new(Exit::Other, "encode_failed", e.to_string(), ""))?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

pub async fn export(ctx: &Ctx, args: &ExportArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let mut events: Vec<RecordedEvent> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.revision);
        let page = backend.store().events(&goal, after, 1000).await?;
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    if let Some(first) = events.first().filter(|e| e.revision != 1) {
        return Err(CliError::new(
            Exit::Other,
            "history_compacted",
            format!(
                "the history of goal `{goal}` before revision {} was compacted; an export needs every event",
                first.revision
            ),
            "export before compacting, or keep the store itself as the backup",
        ));
    }
    if events.last().map(|e| e.revision) != Some(state.revision) {
        return Err(CliError::new(
            Exit::Conflict,
            "conflict",
            format!("goal `{goal}` moved while it was being exported"),
            "run the export again",
        ));
    }
    let text = lines(&events)?;
    match &args.out {
        Some(path) => {
            let tmp = path.with_extension("loopx-partial");
            let written =
                std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(error) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(CliError::new(
                    Exit::Other,
                    "write_failed",
                    format!("cannot write `{}`: {error}", path.display()),
                    "check the path and its permissions",
                ));
            }
            let value = json!({
                "export": { "goal": goal, "revision": state.revision, "events": events.len(), "file": path }
            });
            ctx.out.emit(&value, |_| {
                format!(
                    "exported {} events of goal `{goal}` to {}",
                    events.len(),
                    path.display()
                )
            });
        }
        None if ctx.out.json => {
            let value = json!({
                "export": { "goal": goal, "revision": state.revision, "events": events }
            });
            crate::output::Output::document(&value);
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
        }
    }
    Ok(Exit::Ok)
}

fn digest(events: &[RecordedEvent]) -> Result<String, CliError> {
    let mut hasher = Sha256::new();
    hasher.update(b"loopx.import.v1\n");
    hasher.update(lines(events)?.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(out, "{byte:02x}");
    }
    Ok(out)
}

fn invalid(message: String) -> CliError {
    CliError::input(
        "invalid_history",
        message,
        "import the unmodified output of `loopx export`; nothing was written",
    )
}

/// Parses and validates JSON lines completely, before the store is touched: every line a
/// recorded event, the history replaying, its state satisfying the kernel's invariants.
fn parse_history(
    text: &str,
    now: loopx_kernel::Timestamp,
) -> Result<(Vec<RecordedEvent>, GoalState), CliError> {
    let mut events = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let event: RecordedEvent = serde_json::from_str(line).map_err(|error| {
            CliError::input(
                "invalid_json",
                format!("line {} is not a recorded event: {error}", n + 1),
                "import the unmodified output of `loopx export`; nothing was written",
            )
        })?;
        events.push(event);
    }
    let state = GoalState::replay(&events)
        .map_err(|error| invalid(format!("the history does not replay: {error}")))?;
    if let Some(v) = check_invariants(&state, now).first() {
        return Err(invalid(format!(
            "the history replays to a state that breaks `{}`: {}",
            v.rule, v.detail
        )));
    }
    Ok((events, state))
}

pub async fn import(ctx: &Ctx, args: &ImportArgs) -> Result<Exit, CliError> {
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let text = read_text(&path)?;
    let (events, state) = parse_history(&text, ctx.now)?;
    let goal = state.spec.id.clone();
    if let Some(named) = ctx.goal_opt()?
        && named != goal
    {
        return Err(CliError::input(
            "goal_mismatch",
            format!("the history is of goal `{goal}`, not `{named}`"),
            "drop --goal, or import the right file",
        ));
    }
    let digest = digest(&events)?;
    let operation = match ctx.operation_given()? {
        Some(op) => op,
        None => OperationId::new(format!("import-{}", digest.get(..24).unwrap_or(&digest)))?,
    };
    let backend = ctx.open().await?;
    let store = backend.store();
    let replayed = match store.receipt(&goal, &operation).await? {
        Some(receipt) if receipt.digest == digest => Some(receipt),
        Some(_) => {
            return Err(StoreError::OperationConflict { operation }.into());
        }
        None => None,
    };
    let (receipt, was_replayed) = if let Some(receipt) = replayed {
        (receipt, true)
    } else {
        if store.load(&goal).await?.is_some() {
            return Err(CliError::new(
                Exit::Conflict,
                "goal_exists",
                format!("goal `{goal}` already exists in this store; import never overwrites"),
                "import into another store, or remove the goal's store first",
            ));
        }
        let request = AppendRequest {
            goal: goal.clone(),
            expected_revision: 0,
            operation,
            digest,
            at: events.last().map_or(ctx.now, |e| e.at),
            events: events.clone(),
        };
        // Folded by the kernel: a history that does not fold is refused before it is written.
        let commit = Commit::fold(None, request)?;
        match store.append(commit).await {
            Ok(appended) => {
                let committed = appended.is_committed();
                (appended.into_receipt(), !committed)
            }
            Err(StoreError::Conflict { .. }) => {
                return Err(CliError::new(
                    Exit::Conflict,
                    "goal_exists",
                    format!(
                        "goal `{goal}` was created in this store meanwhile; import never overwrites"
                    ),
                    "import into another store",
                ));
            }
            Err(error) => return Err(error.into()),
        }
    };
    let value = json!({
        "import": {
            "goal": goal,
            "events": events.len(),
            "revision": state.revision,
            "receipt": receipt,
            "replayed": was_replayed,
        }
    });
    ctx.out.emit(&value, |_| {
        format!(
            "imported goal `{goal}`: {} events, revision {}",
            events.len(),
            state.revision
        )
    });
    Ok(Exit::Ok)
}
