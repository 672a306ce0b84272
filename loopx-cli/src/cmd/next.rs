//! `loopx next`: the kernel's decision for one agent, now.

use std::fmt::Write as _;

use clap::Args;
use loopx_kernel::{Actor, AgentId, Decision, RepairIssue, decide};

use crate::context::Ctx;
use crate::decision::describe;
use crate::error::{CliError, Exit};
use crate::suggest;

/// Flags of `loopx next`.
#[derive(Debug, Args)]
pub struct NextArgs {
    /// The agent asking; by default the acting agent (`--as agent:NAME` or `LOOPX_ACTOR`).
    #[arg(long)]
    agent: Option<AgentId>,
}

/// The agent a read is for: `--agent`, else the acting agent.
pub fn asking_agent(ctx: &Ctx, agent: Option<&AgentId>) -> Result<AgentId, CliError> {
    if let Some(agent) = agent {
        return Ok(agent.clone());
    }
    match ctx.actor_opt()? {
        Some(Actor::Agent(agent)) => Ok(agent),
        Some(other) => Err(CliError::usage(
            "agent_missing",
            format!("`{other}` is not an agent, and the decision is always for one agent"),
            "pass --agent NAME, or act as the agent (--as agent:NAME or LOOPX_ACTOR)",
        )),
        None => Err(CliError::usage(
            "agent_missing",
            "the decision is for one agent and none was named",
            "pass --agent NAME, or act as the agent (--as agent:NAME or LOOPX_ACTOR)",
        )),
    }
}

pub async fn run(ctx: &Ctx, args: &NextArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let agent = asking_agent(ctx, args.agent.as_ref())?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let decision = decide(&state, &agent, ctx.now);
    let value = loopx_server::views::next(&goal, &state, &decision);
    ctx.out.emit(&value, |out| {
        let mut text = describe(out, &decision);
        if let Decision::Repair {
            issue: RepairIssue::UnregisteredAgent { agent },
        } = &decision
            && let Some(near) = suggest::near(
                agent.as_str(),
                state.spec.agents.iter().map(AgentId::as_str),
            )
        {
            let _ = writeln!(text, "  did you mean agent:{near}?");
        }
        text
    });
    Ok(Exit::Ok)
}
