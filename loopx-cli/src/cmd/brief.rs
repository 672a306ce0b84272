//! `loopx brief`: what a fresh session must know to take up an agent's work — on one goal, or
//! across every goal the agent works on — as Markdown for a session's context (`--json`: the
//! same data).

use clap::Args;
use loopx_kernel::AgentId;
use loopx_kernel::brief::Brief;

use crate::cmd::next::asking_agent;
use crate::context::Ctx;
use crate::error::{CliError, Exit};

/// Flags of `loopx brief`.
#[derive(Debug, Args)]
pub struct BriefArgs {
    /// The agent it is for; by default the acting agent (`--as agent:NAME` or `LOOPX_ACTOR`).
    #[arg(long)]
    agent: Option<AgentId>,
}

pub async fn run(ctx: &Ctx, args: &BriefArgs) -> Result<Exit, CliError> {
    let agent = asking_agent(ctx, args.agent.as_ref())?;
    let backend = ctx.open().await?;
    let states = ctx.goal_states(&backend).await?;
    let brief = match (ctx.goal_opt()?, states.as_slice()) {
        // The goal asked for is briefed whatever it stands at.
        (Some(_), [state]) => Brief::of_goal(state, &agent, ctx.now),
        _ => Brief::across(&states, &agent, ctx.now),
    };
    // The brief's types serialize to JSON without fail (no maps with non-text keys).
    let value = serde_json::to_value(&brief)
        .unwrap_or_else(|error| serde_json::json!({ "unencodable": error.to_string() }));
    ctx.out.emit(&value, |_| brief.to_markdown());
    Ok(Exit::Ok)
}
