//! `loopx init`: create the store, or check that an existing one opens; and make the local
//! operator's signing key, so that the goals this operator creates are signed from the start.

use clap::Args;
use loopx_kernel::{Actor, PersonId};
use loopx_store::StoreClock;
use serde_json::json;

use crate::cmd::key;
use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::store;

/// Flags of `loopx init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Create the store on a test clock, recorded in the store: commit times follow `--now`
    /// instead of being bounded by the store's own clock, so tests and scripts can move time.
    /// Only when the store is created; never for a store agents share.
    #[arg(long)]
    test_clock: bool,
}

/// The local operator: the acting actor (`--as`), else `person:$USER` (`person:operator` when
/// the user name is no valid id).
fn operator(ctx: &Ctx) -> Result<Actor, CliError> {
    if let Some(actor) = ctx.actor_opt()? {
        return Ok(actor);
    }
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default();
    let person = PersonId::new(user.as_str())
        .or_else(|_| PersonId::new("operator"))
        .map_err(CliError::from)?;
    Ok(Actor::Person(person))
}

pub async fn run(ctx: &Ctx, args: &InitArgs) -> Result<Exit, CliError> {
    let operator = operator(ctx)?;
    let existed = store::exists(ctx.location());
    let clock = if args.test_clock {
        StoreClock::Test
    } else {
        StoreClock::System
    };
    let backend = store::open_with(ctx.location(), true, ctx.accept_wal_loss, clock).await?;
    // SQLite knows which of several racing `init`s created the file.
    let created = match &backend {
        store::Backend::Sqlite(sqlite) => sqlite.created(),
        #[cfg(feature = "postgres")]
        store::Backend::Postgres(_) => !existed,
    };
    // A store's clock is chosen when it is created: an existing one is never moved onto a test
    // clock, which would let anyone lift the bound on commit times.
    if args.test_clock && backend.clock() != StoreClock::Test {
        return Err(CliError::usage(
            "clock_fixed",
            format!(
                "the store at {} already exists on the {} clock; a test clock is chosen only when a store is created",
                backend.describe(),
                backend.clock().name()
            ),
            "create a new store for the test: `loopx --store PATH init --test-clock`",
        ));
    }
    // The operator's key is kept when it exists: a key is never replaced.
    let (made, key) = match ctx.key_of(&operator)? {
        Some(key) => (false, key),
        None => match ctx.key_dir(&operator).create(&operator) {
            Ok(key) => (true, key),
            // Another `init` made it first.
            Err(loopx_provider::keys::KeyError::Exists { .. }) => (
                false,
                ctx.key_of(&operator)?.ok_or_else(|| {
                    CliError::new(
                        Exit::Other,
                        "key_missing",
                        format!("the key of `{operator}` vanished while it was being made"),
                        "run `loopx init` again",
                    )
                })?,
            ),
            Err(error) => return Err(error.into()),
        },
    };
    let file = ctx
        .key_dir(&operator)
        .file_of(&operator)
        .display()
        .to_string();
    let value = json!({
        "init": {
            "backend": backend.kind(),
            "store": backend.describe(),
            "created": created,
            "clock": backend.clock().name(),
            "key": key::view(&key, &file, made),
        }
    });
    ctx.out.emit(&value, |_| {
        let verb = if created { "created" } else { "opened" };
        let keyed = if made { "made" } else { "kept" };
        let clock = match backend.clock() {
            StoreClock::Test => " on a test clock (--now moves time; for tests and scripts only)",
            StoreClock::System => "",
        };
        format!(
            "{verb} {} store at {}{clock}\n{keyed} the key of {operator} ({}) in {file}",
            backend.kind(),
            backend.describe(),
            key.public_key()
        )
    });
    Ok(Exit::Ok)
}
