//! `loopx obligation raise|list|discharge`: replan and repair obligations.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::{AgentId, Command, ObligationId, ObligationKind, PlanChange};
use serde_json::json;

use crate::context::{Ctx, read_json, written_line};
use crate::error::{CliError, Exit};
use crate::output::{Table, or_dash};

/// `loopx obligation …`
#[derive(Debug, Subcommand)]
pub enum ObligationVerb {
    /// Raise a replan or repair obligation (owner, registered agents, capabilities).
    Raise(RaiseArgs),
    /// List the goal's obligations, open and discharged.
    List,
    /// Discharge an obligation with the plan changes that answer it, in one commit.
    #[command(after_help = DISCHARGE_SHAPE)]
    Discharge(DischargeArgs),
}

/// The shape of `--file`, shown by `loopx obligation discharge --help`.
const DISCHARGE_SHAPE: &str = "\
--file holds a JSON list of plan changes (the kernel's PlanChange), at least one, e.g.
  [{\"change\": \"add_todo\", \"todo\": {\"id\": \"retry\", \"title\": \"try another route\", \"class\": {\"kind\": \"advance\"}}},
   {\"change\": \"supersede\", \"todo\": \"old\", \"reason\": \"the route is closed\"}]
Each change is one of add_todo, supersede, defer, block, unblock, open_gate, declare_closure.";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    /// The plan no longer leads to acceptance.
    Replan,
    /// The state is inconsistent.
    Repair,
}

/// Flags of `loopx obligation raise`.
#[derive(Debug, Args)]
pub struct RaiseArgs {
    /// Its id, new to the goal.
    #[arg(long)]
    id: ObligationId,
    /// Replan or repair.
    #[arg(long, value_enum)]
    kind: Kind,
    /// What to look at.
    #[arg(long)]
    detail: String,
    /// The agent whose line of work it concerns (default: anyone registered).
    #[arg(long)]
    owner: Option<AgentId>,
}

/// Flags of `loopx obligation discharge`.
#[derive(Debug, Args)]
pub struct DischargeArgs {
    /// The open obligation.
    #[arg(long)]
    obligation: ObligationId,
    /// The plan changes that answer it: a JSON list of `PlanChange` (`-` for standard input).
    #[arg(long)]
    file: PathBuf,
}

pub async fn run(ctx: &Ctx, verb: ObligationVerb) -> Result<Exit, CliError> {
    match verb {
        ObligationVerb::Raise(args) => {
            let id = args.id.clone();
            let command = Command::RaiseObligation {
                id: args.id,
                kind: match args.kind {
                    Kind::Replan => ObligationKind::Replan,
                    Kind::Repair => ObligationKind::Repair,
                },
                detail: args.detail,
                owner: args.owner,
            };
            write(ctx, &id, &command, "obligation").await
        }
        ObligationVerb::List => list(ctx).await,
        ObligationVerb::Discharge(args) => {
            let changes: Vec<PlanChange> = read_json(&args.file, "list of plan changes")?;
            let id = args.obligation.clone();
            let command = Command::Discharge {
                obligation: args.obligation,
                changes,
            };
            write(ctx, &id, &command, "discharge of obligation").await
        }
    }
}

async fn list(ctx: &Ctx) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let obligations: Vec<_> = state.obligations.values().collect();
    let value = json!({ "goal": goal, "revision": state.revision, "obligations": obligations });
    ctx.out.emit(&value, |out| {
        if obligations.is_empty() {
            return "no obligations\n".to_owned();
        }
        let mut table = Table::new(&["OBLIGATION", "KIND", "OWNER", "STATE", "DETAIL"]);
        for o in &obligations {
            table.row(vec![
                o.id.to_string(),
                crate::output::compact(&o.kind).trim_matches('"').to_owned(),
                or_dash(o.owner.as_ref()),
                if o.discharged.is_some() {
                    "discharged"
                } else {
                    "open"
                }
                .to_owned(),
                o.detail.clone(),
            ]);
        }
        table.render(out)
    });
    Ok(Exit::Ok)
}

async fn write(
    ctx: &Ctx,
    id: &ObligationId,
    command: &Command,
    what: &str,
) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let backend = ctx.open().await?;
    let done = ctx.submit(&backend, &goal, command).await?;
    let value = loopx_server::views::obligation_written(&done, id);
    ctx.out.emit(&value, |out| {
        written_line(out, &done, &format!("{what} `{id}`"))
    });
    Ok(Exit::Ok)
}
