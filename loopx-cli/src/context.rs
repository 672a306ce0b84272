//! What every verb shares: the global flags resolved (store, actor, goal, operation id, time,
//! key directory), the output mode, and the one write path (`submit`, signed with the acting
//! actor's key when there is one).

use loopx_kernel::{Refusal, StoreExt, SubmitError, Submitted};
use loopx_provider::clock::SystemClock;
use loopx_provider::keys::{self, KeyDir, KeyFile};
use std::path::Path;

use clap::Args;
use loopx_kernel::{
    Actor, AgentId, Command, Duration, GoalId, GoalState, OperationId, PersonId, SourceId,
    Timestamp,
};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::output::Output;
use crate::store::{self, Backend, Location};

/// The help heading of the flags every verb accepts, apart from each verb's own.
const GLOBAL: &str = "Global options";

/// Flags every verb accepts.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The store: a SQLite file path (default: the nearest .loopx/loopx.db here or above) or a
    /// postgres:// URL.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "LOOPX_STORE",
        hide_env_values = true,
        value_name = "PATH|URL"
    )]
    pub store: Option<String>,
    /// Who acts: agent:NAME, person:NAME, validator:NAME (also provider:NAME,
    /// capability:NAME). Required by every verb that writes.
    #[arg(
        long = "as",
        global = true,
        help_heading = GLOBAL,
        env = "LOOPX_ACTOR",
        value_name = "KIND:NAME"
    )]
    pub actor: Option<String>,
    /// The goal the verb works on.
    #[arg(long, global = true, help_heading = GLOBAL, env = "LOOPX_GOAL", value_name = "GOAL")]
    pub goal: Option<String>,
    /// Operation id of the write, for idempotent retries (a retry with the same id and
    /// payload returns the first receipt); generated when absent.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "ID")]
    pub op: Option<String>,
    /// The time to act at (RFC 3339, e.g. 2026-11-29T10:00:00Z); the system clock when absent.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print exactly one JSON document (errors as {"error": {...}}).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,
    /// The key directory: one private key file per actor, which every write signs with (the
    /// key of `--as`). Default: beside the store (`<store>.keys/` for a SQLite file,
    /// `.loopx/keys/` for PostgreSQL). `LOOPX_KEY`, a path to one key file, takes precedence.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "LOOPX_KEYS",
        value_name = "DIR"
    )]
    pub keys: Option<std::path::PathBuf>,
    /// The service's key directory: the keys of providers, validators and capabilities, which
    /// `serve`, `run` (its validator, providers and capability), `observe`, `verdict` and
    /// `dead-letters retry` sign with, kept apart from the key directory agents read. Default:
    /// beside the store (`<store>.service-keys/`, or `.loopx/service-keys/` for PostgreSQL).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "LOOPX_SERVICE_KEYS",
        value_name = "DIR"
    )]
    pub service_keys: Option<std::path::PathBuf>,
    /// Open a SQLite store whose write-ahead log is damaged before committed transactions,
    /// dropping them (a copy of the log is kept as `<store>-wal.damaged`). Without it such a
    /// store is refused with `wal_damaged` and left as it is.
    #[arg(long, global = true)]
    pub accept_wal_loss: bool,
}

/// One invocation's resolved context.
#[derive(Debug)]
pub struct Ctx {
    pub out: Output,
    pub now: Timestamp,
    /// Whether `--now` gave the time (else it is the system clock's).
    pub now_given: bool,
    location: Location,
    actor: Option<String>,
    goal: Option<String>,
    op: Option<String>,
    keys: KeyDir,
    service_keys: KeyDir,
    /// `--accept-wal-loss`.
    pub accept_wal_loss: bool,
}

fn system_now() -> Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Timestamp::from_millis(millis)
}

/// Parses `kind:name` into an actor.
pub fn parse_actor(text: &str) -> Result<Actor, CliError> {
    parse_actor_of(
        text,
        "pass --as agent:NAME, person:NAME or validator:NAME (or set LOOPX_ACTOR)",
    )
}

/// An actor given to `flag` (e.g. `--owner`): the same rules as [`parse_actor`], with a hint that
/// names that flag and, for a bare name, the person it probably meant.
pub fn parse_flag_actor(flag: &str, text: &str) -> Result<Actor, CliError> {
    let hint = if text.contains(':') {
        format!("pass {flag} KIND:NAME, e.g. {flag} person:maintainer")
    } else {
        format!("pass {flag} KIND:NAME, e.g. {flag} person:{}", text.trim())
    };
    parse_actor_of(text, &hint)
}

fn parse_actor_of(text: &str, hint: &str) -> Result<Actor, CliError> {
    let bad = |problem: String| CliError::usage("actor_invalid", problem, hint);
    let Some((kind, name)) = text.split_once(':') else {
        return Err(bad(format!(
            "`{text}` is not an actor: expected KIND:NAME, e.g. agent:agent-a"
        )));
    };
    let invalid = |e: loopx_kernel::InvalidId| bad(format!("invalid actor `{text}`: {e}"));
    Ok(match kind {
        "agent" => Actor::Agent(AgentId::new(name).map_err(invalid)?),
        "person" => Actor::Person(PersonId::new(name).map_err(invalid)?),
        "validator" => Actor::Validator(SourceId::new(name).map_err(invalid)?),
        "provider" => Actor::Provider(SourceId::new(name).map_err(invalid)?),
        "capability" => Actor::Capability(SourceId::new(name).map_err(invalid)?),
        other => {
            return Err(bad(format!(
                "unknown actor kind `{other}` in `{text}`: use agent, person, validator, provider or capability"
            )));
        }
    })
}

/// Parses a span: `90s`, `30m`, `2h`, `1d` or plain milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |i| text.split_at(i));
    let value: i64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 90s, 30m, 2h, 1d)"))?;
    match unit {
        "" | "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::seconds(value)),
        "m" => Ok(Duration::minutes(value)),
        "h" => Ok(Duration::hours(value)),
        "d" => Ok(Duration::hours(value.saturating_mul(24))),
        _ => Err(format!(
            "`{text}` has an unknown unit: use ms, s, m, h or d"
        )),
    }
}

/// Parses an RFC 3339 timestamp (clap value parser).
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    Timestamp::parse(text).map_err(|e| e.to_string())
}

/// Reads a JSON file (`-` for standard input) into a kernel shape; errors are exit 7.
pub fn read_json<T: DeserializeOwned>(path: &Path, what: &str) -> Result<T, CliError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|error| {
        CliError::input(
            "invalid_json",
            format!("{} is not a valid {what}: {error}", shown(path)),
            format!("fix the file; the shape of a {what} is documented in the README"),
        )
    })
}

/// Reads a JSON file into a kernel shape after `fill` has put in what a file may leave out
/// (the defaults the equivalent flags have); errors are exit 7.
pub fn read_json_with<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    fill: impl FnOnce(&mut Value),
) -> Result<T, CliError> {
    let mut value: Value = read_json(path, what)?;
    fill(&mut value);
    serde_json::from_value(value).map_err(|error| {
        CliError::input(
            "invalid_json",
            format!("{} is not a valid {what}: {error}", shown(path)),
            format!("fix the file; the shape of a {what} is documented in the README"),
        )
    })
}

/// Sets a `NewEvidence` object's missing `observed_at` to `now`, as `--observed-at` defaults.
pub fn observed_now(evidence: &mut Value, now: Timestamp) {
    if let Some(map) = evidence.as_object_mut()
        && !map.contains_key("observed_at")
    {
        map.insert("observed_at".into(), json!(now));
    }
}

fn shown(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        format!("`{}`", path.display())
    }
}

/// Reads a text file (`-` for standard input).
pub fn read_text(path: &Path) -> Result<String, CliError> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|_| {
        CliError::input(
            "invalid_input",
            format!("{} is not UTF-8 text", shown(path)),
            "pass a UTF-8 JSON file",
        )
    })
}

/// Reads a file's bytes (`-` for standard input).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, CliError> {
    let result = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    result.map_err(|error| {
        CliError::input(
            "unreadable_input",
            format!("cannot read {}: {error}", shown(path)),
            "check the path and its permissions",
        )
    })
}

impl Ctx {
    pub fn new(global: &Global) -> Result<Ctx, CliError> {
        let out = Output::new(global.json);
        let now = match &global.now {
            Some(text) => Timestamp::parse(text).map_err(|e| {
                CliError::usage(
                    "invalid_time",
                    format!("--now: {e}"),
                    "pass an RFC 3339 time",
                )
            })?,
            None => system_now(),
        };
        let location = Location::parse(global.store.as_deref());
        let keys = KeyDir::new(match &global.keys {
            Some(dir) => dir.clone(),
            None => store::default_keys(&location),
        });
        let service_keys = KeyDir::new(match &global.service_keys {
            Some(dir) => dir.clone(),
            None => store::default_service_keys(&location),
        });
        Ok(Ctx {
            out,
            now,
            now_given: global.now.is_some(),
            location,
            keys,
            service_keys,
            actor: global.actor.clone(),
            goal: global.goal.clone(),
            op: global.op.clone(),
            accept_wal_loss: global.accept_wal_loss,
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The key directory of people and agents (`--keys`, or beside the store).
    pub fn keys(&self) -> &KeyDir {
        &self.keys
    }

    /// The service's key directory (`--service-keys`, or beside the store).
    pub fn service_keys(&self) -> &KeyDir {
        &self.service_keys
    }

    /// Where `actor`'s key lives: the service's key directory for a provider, a validator or a
    /// capability, the key directory for a person or an agent.
    pub fn key_dir(&self, actor: &Actor) -> &KeyDir {
        if keys::is_service_actor(actor) {
            &self.service_keys
        } else {
            &self.keys
        }
    }

    /// `actor`'s signing key: the file `LOOPX_KEY` names, else its file in its key directory
    /// ([`key_dir`](Self::key_dir)); `None` when there is none (the command then goes unsigned,
    /// which only a goal of declared identity accepts).
    pub fn key_of(&self, actor: &Actor) -> Result<Option<KeyFile>, CliError> {
        keys::find(self.key_dir(actor), actor).map_err(CliError::from)
    }

    /// `actor`'s signing key for a process an agent runs (`mcp`): `LOOPX_KEY`, else the key
    /// directory of people and agents only, never the service's.
    pub fn agent_side_key_of(&self, actor: &Actor) -> Result<Option<KeyFile>, CliError> {
        keys::find(&self.keys, actor).map_err(CliError::from)
    }

    /// The service's actors whose keys the key directory of people and agents holds: each one
    /// an agent reading that directory could sign as.
    pub fn misplaced_keys(&self) -> Vec<Actor> {
        self.keys
            .actors()
            .unwrap_or_default()
            .into_iter()
            .filter(keys::is_service_actor)
            .collect()
    }

    /// Opens the store; it must exist.
    pub async fn open(&self) -> Result<Backend, CliError> {
        store::open_with(
            &self.location,
            false,
            self.accept_wal_loss,
            loopx_store::StoreClock::System,
        )
        .await
    }

    /// The acting actor when one is given; an error when malformed.
    pub fn actor_opt(&self) -> Result<Option<Actor>, CliError> {
        self.actor
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(parse_actor)
            .transpose()
    }

    /// The acting actor; an error when missing or malformed.
    pub fn actor(&self) -> Result<Actor, CliError> {
        match self
            .actor
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            Some(text) => parse_actor(text),
            None => Err(CliError::usage(
                "actor_missing",
                "this command writes and needs to know who acts",
                "pass --as agent:NAME, person:NAME or validator:NAME (or set LOOPX_ACTOR)",
            )),
        }
    }

    /// The goal from `--goal` (or `LOOPX_GOAL`), when given.
    pub fn goal_opt(&self) -> Result<Option<GoalId>, CliError> {
        self.goal
            .as_deref()
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(|g| GoalId::new(g).map_err(CliError::from))
            .transpose()
    }

    /// The goal; an error when missing.
    pub fn goal(&self) -> Result<GoalId, CliError> {
        self.goal_opt()?.ok_or_else(|| {
            CliError::usage(
                "goal_missing",
                "this command works on one goal and none was named",
                "pass --goal GOAL (or set LOOPX_GOAL); `loopx goal list` shows the goals",
            )
        })
    }

    /// The operation id: `--op`, or a new unique one.
    pub fn operation(&self) -> Result<OperationId, CliError> {
        match &self.op {
            Some(op) => OperationId::new(op.as_str()).map_err(CliError::from),
            None => Ok(OperationId::new(format!("cli-{}", uuid::Uuid::now_v7()))?),
        }
    }

    /// The operation id given with `--op`, if any.
    pub fn operation_given(&self) -> Result<Option<OperationId>, CliError> {
        self.op
            .as_deref()
            .map(|op| OperationId::new(op).map_err(CliError::from))
            .transpose()
    }

    /// Loads a goal; an unknown goal is exit 5, naming the nearest known goal id.
    pub async fn load(&self, backend: &Backend, goal: &GoalId) -> Result<GoalState, CliError> {
        match backend.store().load(goal).await? {
            Some(state) => Ok(state),
            None => Err(unknown_goal(backend, goal, self.now).await),
        }
    }

    /// The goal given with `--goal`, or else every goal of the store, as loaded now.
    pub async fn goal_states(&self, backend: &Backend) -> Result<Vec<GoalState>, CliError> {
        if let Some(goal) = self.goal_opt()? {
            return Ok(vec![self.load(backend, &goal).await?]);
        }
        let mut states = Vec::new();
        for summary in backend.store().goals(self.now).await? {
            states.push(self.load(backend, &summary.goal).await?);
        }
        Ok(states)
    }

    /// Submits `command` as `actor` under `operation`, signed with `actor`'s key when there is
    /// one, without the acting actor's conveniences (`submit`'s near-match hints).
    pub async fn submit_as(
        &self,
        backend: &Backend,
        goal: &GoalId,
        actor: &Actor,
        command: &Command,
        operation: &OperationId,
    ) -> Result<Submitted, CliError> {
        self.not_ahead(backend)?;
        let key = self.key_of(actor)?;
        let mut handle = backend.store().goal(goal);
        if let Some(key) = &key {
            handle = handle.signed_by(&key.secret);
        }
        Ok(handle
            .submit_operation(actor, self.now, command, operation)
            .await?)
    }

    /// On a store that runs on the system clock, a write may not be stamped later than this
    /// host's clock: the store's clock skew is for hosts whose clocks differ, not for a caller
    /// to get ahead of a backoff, a lease's expiry or a gate's deadline with `--now`.
    fn not_ahead(&self, backend: &Backend) -> Result<(), CliError> {
        let wall = system_now();
        if self.now_given && self.now > wall && backend.clock() == loopx_store::StoreClock::System {
            return Err(Refusal::ClockAhead {
                at: self.now,
                store_time: wall,
                skew: loopx_kernel::Duration::ZERO,
            }
            .into());
        }
        Ok(())
    }

    /// Submits one command as the acting actor at `now` under the operation id: one atomic
    /// commit, or nothing.
    pub async fn submit(
        &self,
        backend: &Backend,
        goal: &GoalId,
        command: &Command,
    ) -> Result<Submitted, CliError> {
        let actor = self.actor()?;
        let operation = self.operation()?;
        self.not_ahead(backend)?;
        // Paced on the wall clock, so several agents' CLIs writing one goal spread out.
        let clock = SystemClock;
        let key = self.key_of(&actor)?;
        let mut handle = backend.store().goal(goal).paced(&clock);
        if let Some(key) = &key {
            handle = handle.signed_by(&key.secret);
        }
        match handle
            .submit_operation(&actor, self.now, command, &operation)
            .await
        {
            Ok(done) => Ok(done),
            // A mistyped agent is unregistered, or on a signed goal has no key: name the
            // registered agent it is nearest to.
            Err(SubmitError::Refused(
                refusal @ (Refusal::UnregisteredAgent { .. }
                | Refusal::SignatureMissing {
                    actor: Actor::Agent(_),
                }
                | Refusal::KeyUnregistered {
                    actor: Actor::Agent(_),
                }),
            )) => {
                let agent = match &refusal {
                    Refusal::UnregisteredAgent { agent }
                    | Refusal::SignatureMissing {
                        actor: Actor::Agent(agent),
                    }
                    | Refusal::KeyUnregistered {
                        actor: Actor::Agent(agent),
                    } => agent.clone(),
                    _ => return Err(refusal.into()),
                };
                let near = match backend.store().load(goal).await {
                    Ok(Some(state)) => crate::suggest::near(
                        agent.as_str(),
                        state
                            .spec
                            .agents
                            .iter()
                            .map(AgentId::as_str)
                            .filter(|a| *a != agent.as_str()),
                    ),
                    _ => None,
                };
                let mut error = CliError::from(refusal);
                if let Some(near) = near {
                    error.hint = format!("did you mean agent:{near}? Otherwise {}", error.hint);
                }
                Err(error)
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// The error for an unknown goal, suggesting the nearest goal id the store holds.
pub async fn unknown_goal(backend: &Backend, goal: &GoalId, now: Timestamp) -> CliError {
    let known = backend.store().goals(now).await.unwrap_or_default();
    let near = crate::suggest::near(goal.as_str(), known.iter().map(|g| g.goal.as_str()));
    let mut error = CliError::unknown_goal(goal);
    if let Some(near) = near {
        error.hint = format!("did you mean `{near}`? (`loopx goal list` lists the goals)");
    }
    error
}

/// The common part of every write's JSON document: the receipt and whether it was a retry.
pub use loopx_server::views::written;

/// The human line for a write.
pub fn written_line(out: &Output, done: &Submitted, what: &str) -> String {
    let tag = if done.replayed {
        out.paint(crate::output::Style::Warn, "already committed")
    } else {
        out.paint(crate::output::Style::Good, "committed")
    };
    format!(
        "{tag} {what} (goal {} at revision {}, operation {})\n",
        done.receipt.goal, done.receipt.revision, done.receipt.operation
    )
}
