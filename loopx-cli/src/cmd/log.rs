//! `loopx log`: the goal's recorded events with their revisions.

use clap::Args;
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::{Table, compact};

/// Flags of `loopx log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only events after this revision.
    #[arg(long, default_value_t = 0)]
    after: u64,
    /// At most this many events.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
}

pub async fn run(ctx: &Ctx, args: &LogArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let events = backend
        .store()
        .events(&goal, args.after, args.limit)
        .await?;
    let value = json!({ "goal": goal, "revision": state.revision, "events": events });
    ctx.out.emit(&value, |out| {
        let mut table = Table::new(&["REV", "AT", "ACTOR", "EVENT", "DETAIL"]);
        for event in &events {
            let mut detail = compact(&event.event);
            if detail.chars().count() > 80 {
                detail = detail.chars().take(77).collect::<String>() + "...";
            }
            table.row(vec![
                event.revision.to_string(),
                event.at.to_string(),
                event.actor.to_string(),
                event.event.name().to_owned(),
                detail,
            ]);
        }
        table.render(out)
    });
    Ok(Exit::Ok)
}
