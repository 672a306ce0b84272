//! `loopx init`: create the store, or check that an existing one opens.

use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::store;

pub async fn run(ctx: &Ctx) -> Result<Exit, CliError> {
    let existed = store::exists(ctx.location());
    let backend = store::open(ctx.location(), true).await?;
    let created = !existed;
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
