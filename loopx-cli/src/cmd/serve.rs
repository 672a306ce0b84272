//! `loopx serve`: the service over the store, on one address, until SIGTERM or SIGINT — health
//! and metrics today, and every route the service crate mounts.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use loopx_provider::clock::SystemClock;
use loopx_server::{Service, serve, shutdown_signal};
use serde_json::json;
use tokio::net::TcpListener;

use crate::context::Ctx;
use crate::error::{CliError, Exit};

/// Flags of `loopx serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed on start).
    #[arg(long, default_value = "127.0.0.1:7468", value_name = "ADDR:PORT")]
    listen: SocketAddr,
}

/// The variable that filters the service's log (`tracing`'s directives, e.g. `debug` or
/// `loopx_server=debug,info`); `info` when unset.
const LOG_FILTER: &str = "LOOPX_LOG";

pub async fn run(ctx: &Ctx, args: &ServeArgs) -> Result<Exit, CliError> {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_FILTER)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The log goes to standard error; standard output keeps the one line (or document) that
    // says where the service listens.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let backend = ctx.open().await?;
    let router = Service::new(backend.into_store(), Arc::new(SystemClock)).router();
    let listener = TcpListener::bind(args.listen).await.map_err(|error| {
        CliError::new(
            Exit::Other,
            "listen_failed",
            format!("cannot listen on {}: {error}", args.listen),
            "choose another address with --listen (port 0 picks a free one)",
        )
    })?;
    let shutdown = shutdown_signal().map_err(|error| {
        CliError::new(
            Exit::Other,
            "signals_unavailable",
            format!("cannot listen for SIGTERM and SIGINT, so the service could not stop cleanly: {error}"),
            "",
        )
    })?;
    let address = listener.local_addr().map_or(args.listen, |address| address);
    // The first line says where the service is, so a supervisor (or a test) that asked for
    // port 0 can reach it.
    ctx.out
        .emit(&json!({ "listening": format!("http://{address}") }), |_| {
            format!("listening on http://{address}\n")
        });
    serve(listener, router, shutdown).await.map_err(|error| {
        CliError::new(
            Exit::Other,
            "serve_failed",
            format!("the service stopped: {error}"),
            "",
        )
    })?;
    Ok(Exit::Ok)
}
