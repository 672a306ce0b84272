//! `loopx init`: create the store, or check that an existing one opens.

use clap::Args;
use loopx_store::StoreClock;
use serde_json::json;

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

pub async fn run(ctx: &Ctx, args: &InitArgs) -> Result<Exit, CliError> {
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
    let value = json!({
        "init": {
            "backend": backend.kind(),
            "store": backend.describe(),
            "created": created,
            "clock": backend.clock().name(),
        }
    });
    ctx.out.emit(&value, |_| {
        let verb = if created { "created" } else { "opened" };
        let clock = match backend.clock() {
            StoreClock::Test => " on a test clock (--now moves time; for tests and scripts only)",
            StoreClock::System => "",
        };
        format!(
            "{verb} {} store at {}{clock}",
            backend.kind(),
            backend.describe()
        )
    });
    Ok(Exit::Ok)
}
