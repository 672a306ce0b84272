//! `loopx key new|show`: an actor's signing key in the key directory.

use clap::{Args, Subcommand};
use loopx_provider::keys::{KeyError, KeyFile};
use serde_json::{Value, json};

use crate::context::{Ctx, parse_actor};
use crate::error::{CliError, Exit};

/// `loopx key …`
#[derive(Debug, Subcommand)]
pub enum KeyVerb {
    /// Make a new key for an actor: its private key file (mode 0600) in the key directory; the
    /// public key is printed, for the goal's owner to register (`goal amend --register-key`).
    New(KeyArgs),
    /// Print the public key of an actor's key (from `LOOPX_KEY` or the key directory).
    Show(KeyArgs),
}

/// The actor whose key it is.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The actor: agent:NAME, person:NAME, validator:NAME, provider:NAME or capability:NAME.
    #[arg(value_name = "KIND:NAME")]
    actor: String,
}

pub fn run(ctx: &Ctx, verb: &KeyVerb) -> Result<Exit, CliError> {
    match verb {
        KeyVerb::New(args) => {
            let actor = parse_actor(&args.actor)?;
            // A provider's, validator's or capability's key goes to the service's directory.
            let key = ctx.key_dir(&actor).create(&actor)?;
            emit(
                ctx,
                &key,
                &ctx.key_dir(&actor).file_of(&actor).display().to_string(),
                true,
            );
            Ok(Exit::Ok)
        }
        KeyVerb::Show(args) => {
            let actor = parse_actor(&args.actor)?;
            let key = ctx.key_of(&actor)?.ok_or_else(|| {
                CliError::from(KeyError::NotFound {
                    actor: actor.clone(),
                    dir: ctx.key_dir(&actor).path().to_owned(),
                })
            })?;
            emit(
                ctx,
                &key,
                &ctx.key_dir(&actor).file_of(&actor).display().to_string(),
                false,
            );
            Ok(Exit::Ok)
        }
    }
}

/// The key's JSON view: its actor, public key and file (never the secret).
pub fn view(key: &KeyFile, file: &str, created: bool) -> Value {
    json!({
        "actor": key.actor.to_string(),
        "public": key.public_key(),
        "file": file,
        "created": created,
    })
}

fn emit(ctx: &Ctx, key: &KeyFile, file: &str, created: bool) {
    let value = json!({ "key": view(key, file, created) });
    ctx.out.emit(&value, |_| {
        let public = key.public_key();
        if created {
            format!(
                "{public}\nnew key of {} in {file}; the goal's owner registers it with `loopx goal amend --register-key {}={public}`",
                key.actor, key.actor
            )
        } else {
            public.to_string()
        }
    });
}

/// The warnings `doctor` and `status` give for each provider's, validator's or capability's key
/// in the key directory people and agents sign from: an agent reading that directory can sign
/// as that actor. Each is `{"actor", "file", "detail"}`; empty when there is none.
pub fn misplaced_warnings(ctx: &Ctx) -> Vec<serde_json::Value> {
    ctx.misplaced_keys()
        .into_iter()
        .map(|actor| {
            let file = ctx.keys().file_of(&actor);
            let detail = format!(
                "the agents' key directory holds the key of {actor}: an agent that reads it can sign as {actor}; move `{}` into the service's key directory `{}`, kept where agents cannot read it",
                file.display(),
                ctx.service_keys().path().display()
            );
            serde_json::json!({ "actor": actor.to_string(), "file": file, "detail": detail })
        })
        .collect()
}

/// [`misplaced_warnings`] as lines, each starting with `warn`; nothing when there is none.
pub fn misplaced_text(warnings: &[serde_json::Value]) -> String {
    use std::fmt::Write as _;
    warnings
        .iter()
        .filter_map(|w| w["detail"].as_str())
        .fold(String::new(), |mut text, detail| {
            let _ = writeln!(text, "warn  {detail}");
            text
        })
}
