//! `loopx ready`: an agent's ready work across every goal of the store — the store's cross-goal
//! frontier (`Store::frontier`), most urgent first.

use clap::Args;
use loopx_kernel::{AgentId, GoalId, TodoId};
use serde::Serialize;
use serde_json::json;

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

/// One entry of the store's frontier, as `--json` prints it: the goal and the todo legal for the
/// agent on it.
#[derive(Debug, Serialize)]
pub struct ReadyEntry {
    /// The goal.
    pub goal: GoalId,
    /// The todo the agent may take on it now.
    pub todo: TodoId,
}

pub async fn run(ctx: &Ctx, args: &ReadyArgs) -> Result<Exit, CliError> {
    let agent = asking_agent(ctx, args.agent.as_ref())?;
    let backend = ctx.open().await?;
    let ready: Vec<ReadyEntry> = backend
        .store()
        .frontier(&agent, ctx.now)
        .await?
        .into_iter()
        .map(|(goal, todo)| ReadyEntry { goal, todo })
        .collect();
    // The titles are for people: read from each goal's state, they never change the order.
    let mut titles = Vec::with_capacity(ready.len());
    for entry in &ready {
        let state = ctx.load(&backend, &entry.goal).await?;
        let title = state
            .todos
            .get(&entry.todo)
            .map(|t| t.title.clone())
            .unwrap_or_default();
        titles.push(title);
    }
    let value = json!({ "agent": agent, "ready": ready });
    ctx.out.emit(&value, |out| {
        if ready.is_empty() {
            return format!(
                "nothing is ready for agent:{agent} on any goal; `loopx next --goal GOAL` says why\n"
            );
        }
        let mut table = Table::new(&["GOAL", "TODO", "TITLE"]);
        for (entry, title) in ready.iter().zip(titles) {
            table.row(vec![entry.goal.to_string(), entry.todo.to_string(), title]);
        }
        table.render(out)
    });
    Ok(Exit::Ok)
}
