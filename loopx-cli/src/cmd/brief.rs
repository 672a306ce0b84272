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
    let brief = if let Some(goal) = ctx.goal_opt()? {
        Brief::of_goal(&ctx.load(&backend, &goal).await?, &agent, ctx.now)
    } else {
        let mut states = Vec::new();
        for summary in backend.store().goals(ctx.now).await? {
            states.push(ctx.load(&backend, &summary.goal).await?);
        }
        Brief::across(&states, &agent, ctx.now)
    };
    // The brief's types serialize to JSON without fail (no maps with non-text keys).
    let value = serde_json::to_value(&brief)
        .unwrap_or_else(|error| serde_json::json!({ "unencodable": error.to_string() }));
    ctx.out.emit(&value, |_| brief.to_markdown());
    Ok(Exit::Ok)
}
