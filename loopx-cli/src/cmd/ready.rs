//! `loopx ready`: an agent's ready work across every goal of the store — the store's cross-goal
//! frontier (`Store::frontier`), most urgent first.

use clap::Args;
use loopx_kernel::AgentId;

use crate::cmd::next::asking_agent;
use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::Table;

/// Flags of `loopx ready`.
#[derive(Debug, Args)]
pub struct ReadyArgs {
    /// The agent; by default the acting agent (`--as agent:NAME` or `LOOPX_ACTOR`).
    #[arg(long)]
    agent: Option<AgentId>,
}

pub async fn run(ctx: &Ctx, args: &ReadyArgs) -> Result<Exit, CliError> {
    let agent = asking_agent(ctx, args.agent.as_ref())?;
    let backend = ctx.open().await?;
    let ready = backend.store().frontier(&agent, ctx.now).await?;
    // The titles are for people: read from each goal's state, they never change the order.
    let mut titles = Vec::with_capacity(ready.len());
    for (goal, todo) in &ready {
        let state = ctx.load(&backend, goal).await?;
        let title = state
            .todos
            .get(todo)
            .map(|t| t.title.clone())
            .unwrap_or_default();
        titles.push(title);
    }
    // The same document as the MCP tool's.
    let value = loopx_server::views::ready(&agent, &ready);
    ctx.out.emit(&value, |out| {
        if ready.is_empty() {
            return format!(
                "nothing is ready for agent:{agent} on any goal; `loopx next --goal GOAL` says why\n"
            );
        }
        let mut table = Table::new(&["GOAL", "TODO", "TITLE"]);
        for ((goal, todo), title) in ready.iter().zip(titles) {
            table.row(vec![goal.to_string(), todo.to_string(), title]);
        }
        table.render(out)
    });
    Ok(Exit::Ok)
}
