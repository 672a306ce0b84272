//! `loopx claim|begin|renew|release|handoff|resolve-outcome`: the lease on a todo and the turn
//! under it.

use loopx_kernel::Submitted;
use std::fmt::Write as _;

use clap::Args;
use std::path::PathBuf;

use clap::ValueEnum;
use loopx_kernel::{
    AgentId, Amounts, Command, Duration, EvidenceId, HandoffNote, OutcomeResolution, TodoId,
    TurnId, Workspace,
};
use serde_json::json;

use crate::cmd::settle::read_settlement;
use crate::context::{Ctx, parse_duration, written_line};
use crate::error::{CliError, Exit};

/// Flags of `loopx claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// Lease time-to-live (e.g. 30m); the goal policy's when absent.
    #[arg(long, value_parser = parse_duration)]
    ttl: Option<Duration>,
    /// The workspace's top level (`git rev-parse --show-toplevel`); required for todos that
    /// write, with --workspace-common-dir.
    #[arg(long, requires = "workspace_common_dir")]
    workspace_top_level: Option<String>,
    /// The workspace's common git directory (`git rev-parse --git-common-dir`).
    #[arg(long, requires = "workspace_top_level")]
    workspace_common_dir: Option<String>,
    /// Why you may take another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// Flags of `loopx begin`.
#[derive(Debug, Args)]
pub struct BeginArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The lease epoch (from `claim`).
    #[arg(long)]
    epoch: u64,
    /// The turn's id; its charge is bound to it.
    #[arg(long)]
    turn: TurnId,
    /// Turns to reserve (with the other --reserve-* flags; the goal policy's default when
    /// none is given).
    #[arg(long)]
    reserve_turns: Option<u64>,
    /// Tokens to reserve.
    #[arg(long)]
    reserve_tokens: Option<u64>,
    /// Cost to reserve, in millionths.
    #[arg(long)]
    reserve_cost_micros: Option<u64>,
    /// Wall-clock milliseconds to reserve.
    #[arg(long)]
    reserve_wall_ms: Option<u64>,
}

/// Flags of `loopx renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The holder's epoch.
    #[arg(long)]
    epoch: u64,
    /// New time-to-live from now; the goal policy's when absent.
    #[arg(long, value_parser = parse_duration)]
    ttl: Option<Duration>,
}

/// Flags of `loopx take-over`.
#[derive(Debug, Args)]
pub struct TakeOverArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The epoch the decision shows (the session that began the turn holds it).
    #[arg(long)]
    epoch: u64,
    /// The turn in flight.
    #[arg(long)]
    turn: TurnId,
    /// New time-to-live from now; the goal policy's when absent.
    #[arg(long, value_parser = parse_duration)]
    ttl: Option<Duration>,
}

/// Flags of `loopx release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The holder's epoch.
    #[arg(long)]
    epoch: u64,
}

/// Flags of `loopx handoff`.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// The todo whose live lease moves.
    #[arg(long)]
    todo: TodoId,
    /// The epoch the sender holds; the receiver gets the next one.
    #[arg(long)]
    epoch: u64,
    /// The receiving agent.
    #[arg(long)]
    to: AgentId,
    /// The very next action, for the receiver.
    #[arg(long)]
    next_action: String,
    /// When the receiver should stop.
    #[arg(long)]
    stop_condition: String,
    /// Evidence the work rests on (repeatable).
    #[arg(long = "evidence")]
    evidence: Vec<EvidenceId>,
    /// Why you may hand off another agent's lease (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// What a readback of an unknown turn showed.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Resolution {
    /// The effect did not happen: the reservation is returned and the todo reopens.
    Absent,
    /// The effect happened: the turn is settled from --settlement-file.
    Committed,
}

/// Flags of `loopx resolve-outcome` (also `loopx resolve`).
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The todo whose expired lease left a turn's outcome unknown.
    #[arg(long)]
    todo: TodoId,
    /// The turn that was in flight.
    #[arg(long)]
    turn: TurnId,
    /// What the readback showed.
    #[arg(long, value_enum)]
    resolution: Resolution,
    /// What the readback showed, in words (for `absent`).
    #[arg(long, required_if_eq("resolution", "absent"))]
    note: Option<String>,
    /// The settlement of the turn as it happened (for `committed`), a `Settlement` as JSON
    /// (`-` for standard input); its `todo`, `turn` and `epoch` may be left out: they are the
    /// flags' and the expired lease's.
    #[arg(long, required_if_eq("resolution", "committed"))]
    settlement_file: Option<PathBuf>,
    /// The validator's signed verdict on the turn (for `committed` on a signed goal), as
    /// `loopx verdict` printed it: taken as `loopx settle --verdict` takes it.
    #[arg(long, value_name = "FILE", requires = "settlement_file")]
    verdict: Option<PathBuf>,
    /// Why you may resolve another agent's turn (under a `take_over` grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

async fn write(ctx: &Ctx, todo: &TodoId, command: &Command, what: &str) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let backend = ctx.open().await?;
    let done: Submitted = ctx.submit(&backend, &goal, command).await?;
    let value = loopx_server::views::lease_written(&done, todo);
    ctx.out.emit(&value, |out| {
        let mut text = written_line(out, &done, &format!("{what} of todo `{todo}`"));
        if let Some(lease) = done.state.todos.get(todo).and_then(|t| t.lease.as_deref()) {
            let _ = writeln!(
                text,
                "  lease: {} epoch {} until {}",
                lease.holder, lease.epoch, lease.expires_at
            );
            if let Some(turn) = &lease.turn {
                let _ = writeln!(text, "  turn in flight: {}", turn.id);
            }
        }
        text
    });
    Ok(Exit::Ok)
}

pub async fn claim(ctx: &Ctx, args: ClaimArgs) -> Result<Exit, CliError> {
    let workspace = match (args.workspace_top_level, args.workspace_common_dir) {
        (Some(top_level), Some(common_dir)) => Some(Workspace {
            top_level,
            common_dir,
        }),
        _ => None,
    };
    let todo = args.todo.clone();
    let command = Command::Claim {
        todo: args.todo,
        ttl: args.ttl,
        workspace,
        grant_reason: args.grant_reason,
    };
    write(ctx, &todo, &command, "claim").await
}

pub async fn begin(ctx: &Ctx, args: &BeginArgs) -> Result<Exit, CliError> {
    let any = args.reserve_turns.is_some()
        || args.reserve_tokens.is_some()
        || args.reserve_cost_micros.is_some()
        || args.reserve_wall_ms.is_some();
    let reserve = any.then(|| Amounts {
        turns: args.reserve_turns.unwrap_or(1),
        tokens: args.reserve_tokens.unwrap_or(0),
        cost_micros: args.reserve_cost_micros.unwrap_or(0),
        wall_ms: args.reserve_wall_ms.unwrap_or(0),
    });
    let command = Command::BeginTurn {
        todo: args.todo.clone(),
        epoch: args.epoch,
        turn: args.turn.clone(),
        reserve,
    };
    write(ctx, &args.todo, &command, "turn start").await
}

pub async fn renew(ctx: &Ctx, args: &RenewArgs) -> Result<Exit, CliError> {
    let command = Command::Renew {
        todo: args.todo.clone(),
        epoch: args.epoch,
        ttl: args.ttl,
    };
    write(ctx, &args.todo, &command, "renewal").await
}

pub async fn take_over(ctx: &Ctx, args: &TakeOverArgs) -> Result<Exit, CliError> {
    let command = Command::TakeOverTurn {
        todo: args.todo.clone(),
        epoch: args.epoch,
        turn: args.turn.clone(),
        ttl: args.ttl,
    };
    write(ctx, &args.todo, &command, "take-over").await
}

pub async fn release(ctx: &Ctx, args: &ReleaseArgs) -> Result<Exit, CliError> {
    let command = Command::Release {
        todo: args.todo.clone(),
        epoch: args.epoch,
    };
    write(ctx, &args.todo, &command, "release").await
}

pub async fn handoff(ctx: &Ctx, args: HandoffArgs) -> Result<Exit, CliError> {
    let todo = args.todo.clone();
    let command = Command::Handoff {
        todo: args.todo,
        epoch: args.epoch,
        to: args.to,
        note: HandoffNote {
            next_action: args.next_action,
            stop_condition: args.stop_condition,
            evidence: args.evidence,
        },
        grant_reason: args.grant_reason,
    };
    write(ctx, &todo, &command, "handoff").await
}

pub async fn resolve(ctx: &Ctx, args: ResolveArgs) -> Result<Exit, CliError> {
    let resolution = match args.resolution {
        Resolution::Absent => OutcomeResolution::Absent {
            note: args.note.unwrap_or_default(),
        },
        Resolution::Committed => {
            // The file may leave out what the flags and the expired lease already say.
            let goal = ctx.goal()?;
            let backend = ctx.open().await?;
            let state = ctx.load(&backend, &goal).await?;
            let epoch = state
                .todos
                .get(&args.todo)
                .and_then(|t| t.lease.as_deref())
                .map(|lease| lease.epoch);
            let path = args.settlement_file.unwrap_or_else(|| PathBuf::from("-"));
            let settlement = read_settlement(ctx, &path, args.verdict.as_deref(), |map| {
                map.entry("todo").or_insert_with(|| json!(args.todo));
                map.entry("turn").or_insert_with(|| json!(args.turn));
                if let Some(epoch) = epoch {
                    map.entry("epoch").or_insert_with(|| json!(epoch));
                }
            })?;
            OutcomeResolution::Committed {
                settlement: Box::new(settlement),
            }
        }
    };
    let todo = args.todo.clone();
    let command = Command::ResolveOutcome {
        todo: args.todo,
        turn: args.turn,
        resolution,
        grant_reason: args.grant_reason,
    };
    write(ctx, &todo, &command, "resolution").await
}
