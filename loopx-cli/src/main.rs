//! `loopx`: the command line of loopx, for operators and for agent runtimes that speak shell.
//!
//! Every verb works on a store (`--store`, a SQLite file or a `postgres://` URL), writes go
//! through the kernel's validation as one atomic commit under an operation id, and `--json`
//! prints exactly one JSON document. See the crate README for each verb's flags and JSON shape.
#![forbid(unsafe_code)]

mod cmd;
mod context;
mod decision;
mod error;
#[cfg(test)]
mod named_verbs;
mod output;
mod store;
mod suggest;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser as _;
use clap::error::ErrorKind;

use crate::context::{Ctx, Global};
use crate::error::{CliError, EXIT_CODES, Exit};
use crate::output::Output;

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "loopx",
    version,
    about = "The control plane for long-running agent work: goals, todos, leases, gates, evidence and the next legal step.",
    after_help = EXIT_CODES,
    max_term_width = 100
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    verb: cmd::Verb,
}

/// The command line's definition, for the verbs that describe it (completions, the man page).
pub fn definition() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

fn code(exit: Exit) -> ExitCode {
    ExitCode::from(exit as u8)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let json = args.iter().any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = error.print();
                    code(Exit::Ok)
                }
                _ if json => {
                    // The first paragraph, joined: clap lists what is missing on the lines
                    // after its first (`the following required arguments were not provided:`).
                    let message = error.render().to_string();
                    let first = message
                        .lines()
                        .take_while(|line| !line.trim().is_empty())
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join(" ");
                    let first = if first.is_empty() {
                        "invalid command line".to_owned()
                    } else {
                        first.strip_prefix("error: ").unwrap_or(&first).to_owned()
                    };
                    Output::new(true).error(&CliError::usage(
                        "usage",
                        first,
                        "see `loopx --help` and `loopx <verb> --help`",
                    ));
                    code(Exit::Usage)
                }
                _ => {
                    let _ = error.print();
                    code(Exit::Usage)
                }
            };
        }
    };
    let out = Output::new(cli.global.json);
    let ctx = match Ctx::new(&cli.global) {
        Ok(ctx) => ctx,
        Err(error) => {
            out.error(&error);
            return code(error.exit);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let error = CliError::new(
                Exit::Other,
                "runtime",
                format!("cannot start the async runtime: {error}"),
                "",
            );
            out.error(&error);
            return code(error.exit);
        }
    };
    match runtime.block_on(cmd::run(&ctx, cli.verb)) {
        Ok(exit) => code(exit),
        Err(error) => {
            ctx.out.error(&error);
            code(error.exit)
        }
    }
}
