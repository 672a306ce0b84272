//! `loopx mcp`: loopx's tools for agent runtimes (Claude Code, Codex, Cursor, a host's own
//! loop) over the Model Context Protocol on standard input and output, acting as `--as` with
//! its key (the one every verb signs with). The store opens as for every verb; each command's
//! time is the system clock's at the moment it is submitted.

use std::sync::Arc;

use clap::Args;
use loopx_provider::clock::SystemClock;
use loopx_server::mcp::{Acting, LoopxMcp};

use crate::context::Ctx;
use crate::error::{CliError, Exit};

/// Flags of `loopx mcp` (the global ones: `--store`, `--as`, `--keys`).
#[derive(Debug, Args)]
pub struct McpArgs {}

pub async fn run(ctx: &Ctx, _args: &McpArgs) -> Result<Exit, CliError> {
    if ctx.now_given {
        return Err(CliError::usage(
            "now_refused",
            "`loopx mcp` times every command by the system clock, and --now was given",
            "run it without --now",
        ));
    }
    let actor = ctx.actor()?;
    // An agent's process: it reads the key directory of people and agents, never the
    // service's, so it cannot sign as a provider, a validator or a capability.
    let acting = if let Some(key) = ctx.agent_side_key_of(&actor)? {
        Acting::signed(actor, Arc::new(key.secret))
    } else {
        // Standard output carries the protocol: the warning goes to standard error.
        eprintln!(
            "loopx mcp: {actor} has no key here, so its commands go unsigned and only goals of declared identity accept them (make one with `loopx key new {actor}`)"
        );
        Acting::unsigned(actor)
    };
    let store = ctx.open().await?.into_store();
    LoopxMcp::new(store, Arc::new(SystemClock))
        .acting_as(acting)
        .serve_stdio()
        .await
        .map_err(|error| {
            CliError::new(
                Exit::Other,
                "mcp_transport",
                format!("the MCP session on standard input and output failed: {error}"),
                "start it from the agent runtime, which speaks MCP on its standard input and output",
            )
        })?;
    Ok(Exit::Ok)
}
