//! `loopx init`: create the store, or check that an existing one opens; and make the local
//! operator's signing key, so that the goals this operator creates are signed from the start.

use loopx_kernel::{Actor, PersonId};
use serde_json::json;

use crate::cmd::key;
use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::store;

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

pub async fn run(ctx: &Ctx) -> Result<Exit, CliError> {
    let operator = operator(ctx)?;
    let existed = store::exists(ctx.location());
    let backend = store::open_with(ctx.location(), true, ctx.accept_wal_loss).await?;
    // SQLite knows which of several racing `init`s created the file.
    let created = match &backend {
        store::Backend::Sqlite(sqlite) => sqlite.created(),
        #[cfg(feature = "postgres")]
        store::Backend::Postgres(_) => !existed,
    };
    // The operator's key is kept when it exists: a key is never replaced.
    let (made, key) = match ctx.key_of(&operator)? {
        Some(key) => (false, key),
        None => match ctx.keys().create(&operator) {
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
    let file = ctx.keys().file_of(&operator).display().to_string();
    let value = json!({
        "init": {
            "backend": backend.kind(),
            "store": backend.describe(),
            "created": created,
            "key": key::view(&key, &file, made),
        }
    });
    ctx.out.emit(&value, |_| {
        let verb = if created { "created" } else { "opened" };
        let keyed = if made { "made" } else { "kept" };
        format!(
            "{verb} {} store at {}\n{keyed} the key of {operator} ({}) in {file}",
            backend.kind(),
            backend.describe(),
            key.public_key()
        )
    });
    Ok(Exit::Ok)
}
