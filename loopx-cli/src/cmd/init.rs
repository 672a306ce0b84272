//! `loopx init`: create the store, or check that an existing one opens.

use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::store;

pub async fn run(ctx: &Ctx) -> Result<Exit, CliError> {
    let existed = store::exists(ctx.location());
    let backend = store::open_with(ctx.location(), true, ctx.accept_wal_loss).await?;
    // SQLite knows which of several racing `init`s created the file.
    let created = match &backend {
        store::Backend::Sqlite(sqlite) => sqlite.created(),
        #[cfg(feature = "postgres")]
        store::Backend::Postgres(_) => !existed,
    };
    let value = json!({
        "init": {
            "backend": backend.kind(),
            "store": backend.describe(),
            "created": created,
        }
    });
    ctx.out.emit(&value, |_| {
        let verb = if created { "created" } else { "opened" };
        format!("{verb} {} store at {}", backend.kind(), backend.describe())
    });
    Ok(Exit::Ok)
}
