//! `loopx log`: the goal's recorded events with their revisions, all of them or a range.

use clap::Args;
use serde_json::json;

use crate::cmd::revision;
use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::{Table, compact};

/// Flags of `loopx log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only events after this revision.
    #[arg(long, default_value_t = 0, conflicts_with_all = ["from", "to"])]
    after: u64,
    /// The first revision of a range (with --to, or up to the head), from 1.
    #[arg(long, value_name = "N")]
    from: Option<u64>,
    /// The last revision of a range, at most the head; the range is printed in full unless
    /// --limit is given.
    #[arg(long, value_name = "M")]
    to: Option<u64>,
    /// At most this many events (default 1000 without --to).
    #[arg(long)]
    limit: Option<usize>,
}

/// Without a range, at most this many events.
const DEFAULT_LIMIT: usize = 1000;

pub async fn run(ctx: &Ctx, args: &LogArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let events = if args.from.is_some() || args.to.is_some() {
        let from = args.from.unwrap_or(1);
        let to = args.to.unwrap_or(state.revision);
        revision::check_range(from, to, &goal, state.revision)?;
        let mut events = revision::events_in(&backend, &goal, from, to).await?;
        events.truncate(args.limit.unwrap_or(usize::MAX));
        events
    } else {
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        loopx_store::history(backend.retention(), &goal, args.after, limit).await?
    };
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
