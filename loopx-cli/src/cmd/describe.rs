//! `loopx completions SHELL` and `loopx man`: the command line described for shells and for
//! `man`, generated from its clap definition, so they never drift from the verbs.

use clap::Args;
use clap_complete::Shell;

use crate::error::{CliError, Exit};

/// Flags of `loopx completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    shell: Shell,
}

pub fn completions(args: &CompletionsArgs) -> Exit {
    let mut command = crate::definition();
    clap_complete::generate(args.shell, &mut command, "loopx", &mut std::io::stdout());
    Exit::Ok
}

pub fn man() -> Result<Exit, CliError> {
    clap_mangen::Man::new(crate::definition())
        .render(&mut std::io::stdout())
        .map_err(|error| {
            CliError::new(
                Exit::Other,
                "output_failed",
                format!("the man page could not be written: {error}"),
                "",
            )
        })?;
    Ok(Exit::Ok)
}
