//! Errors: a stable code, a message that says what is wrong, a hint that says what to do, and
//! the exit code of the error's class.

use loopx_kernel::SubmitError;
use std::fmt;

use loopx_kernel::seams::StoreError;
use loopx_kernel::{InvalidId, Refusal};
use loopx_provider::keys::KeyError;
use serde_json::{Value, json};

/// The exit codes, one per class of error. Documented in the README and in `loopx --help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// Anything not covered below.
    Other = 1,
    /// The command line is wrong (unknown flag, missing or invalid actor, bad id).
    Usage = 2,
    /// The kernel refused the command; nothing changed.
    Refused = 3,
    /// Someone else moved first (stale revision or lease epoch, operation id reused): read again
    /// and retry.
    Conflict = 4,
    /// The goal, todo or gate does not exist.
    NotFound = 5,
    /// The store cannot be opened or read: unavailable, corrupt, or written by a newer version.
    Store = 6,
    /// An input file or payload is not valid (malformed JSON, wrong shape, bad signature).
    Input = 7,
    /// `run` stopped at `wait`: nothing to do until a time or an event.
    Wait = 10,
    /// `run` stopped at `ask`: a person must answer first.
    Ask = 11,
    /// `run` stopped at `replan`: the plan must change.
    Replan = 12,
    /// `run` stopped at `repair`: the state must be repaired first.
    Repair = 13,
    /// `run` stopped at `continue`, after `--max-steps`.
    Continue = 14,
    /// `run` was interrupted by SIGHUP (128 + 1).
    HungUp = 129,
    /// `run` was interrupted by SIGINT, e.g. Ctrl-C (128 + 2).
    Interrupted = 130,
    /// `run` was interrupted by SIGTERM (128 + 15).
    Terminated = 143,
}

/// The exit-code table shown by `loopx --help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  ok
  1  other error
  2  usage: bad flags, missing or invalid actor (--as), invalid id or time
  3  refused by the kernel (the error code is the kernel's refusal code); nothing changed
  4  conflict or stale: the goal moved, a lease epoch is stale, an operation id was reused;
     read again and retry
  5  not found: unknown goal, todo, gate or obligation
  6  store unavailable, corrupt, or written by a newer loopx (also: doctor found damage)
  7  invalid input file or payload (malformed JSON, wrong shape, bad webhook signature)

`loopx run` exits by the decision it stopped at (0 is `terminal`, the goal is over):
 10  wait      nothing to do until a time or an event
 11  ask       a person must answer first (a gate, a budget raise)
 12  replan    the plan must change (`loopx next` says how)
 13  repair    the state must be repaired first (`loopx next` says how)
 14  continue  stopped by --max-steps with work left
130  interrupted by SIGINT (Ctrl-C); 143 by SIGTERM, 129 by SIGHUP (see `loopx run --help`)

Environment: LOOPX_STORE (store path or postgres:// URL), LOOPX_ACTOR (kind:name),
LOOPX_GOAL (goal id), LOOPX_KEYS (key directory), LOOPX_KEY (one key file to sign with),
NO_COLOR (no colour in human output).";

/// The exit codes of `loopx run`, shown by `loopx run --help`.
pub const RUN_EXIT_CODES: &str = "\
Exit codes: the decision `run` stopped at, or an error's class (see `loopx --help`):
  0  terminal   the goal is over (accepted or abandoned)
 10  wait       nothing to do until a time or an event
 11  ask        a person must answer first (a gate, a budget raise)
 12  replan     the plan must change (`loopx next` says how)
 13  repair     the state must be repaired first (`loopx next` says how)
 14  continue   stopped by --max-steps with work left
130  SIGINT     interrupted (Ctrl-C); 143 for SIGTERM, 129 for SIGHUP
 1-7           an error, as for every verb

Interrupted (SIGINT, SIGTERM, SIGHUP): `run` kills the executor's (or validator's) whole
process group, children and grandchildren included (SIGKILL), starts nothing more, and
exits with 128 + the signal's number (error code `interrupted`). A turn in flight stays
begun, its reservation held, under the agent's lease, which is no longer renewed and
expires at its time-to-live (--lease-ttl). The next `loopx run` of the same agent takes that turn over and
settles it from the journal if the executor had finished, runs it again under the same turn
id if it never started or its todo is idempotent, and otherwise stops at `repair
(outcome_unknown)`: read back what the turn did and, once the lease has expired, resolve it
with `loopx resolve-outcome`. Interrupted between turns, nothing is left in flight.
A SIGKILL cannot be caught: the executor's group then runs on until it ends by itself.";

/// A failure of one invocation.
#[derive(Debug, Clone)]
pub struct CliError {
    /// Stable snake-case code (the kernel's refusal code for refusals).
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: String,
    /// The exit class.
    pub exit: Exit,
    /// Structured details (the kernel's refusal as JSON), when there are any.
    pub details: Option<Value>,
}

impl CliError {
    pub fn new(
        exit: Exit,
        code: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        CliError {
            code: code.into(),
            message: message.into(),
            hint: hint.into(),
            exit,
            details: None,
        }
    }

    pub fn usage(code: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::new(Exit::Usage, code, message, hint)
    }

    pub fn input(code: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::new(Exit::Input, code, message, hint)
    }

    pub fn not_found(code: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        CliError::new(Exit::NotFound, code, message, hint)
    }

    pub fn unknown_goal(goal: &impl fmt::Display) -> Self {
        CliError::not_found(
            "unknown_goal",
            format!("no goal `{goal}` in this store"),
            "list the goals with `loopx goal list`, or create it with `loopx goal create`",
        )
    }

    /// The error as its JSON document.
    pub fn to_json(&self) -> Value {
        let mut error = json!({
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        });
        if let (Some(details), Some(map)) = (&self.details, error.as_object_mut()) {
            map.insert("details".into(), details.clone());
        }
        json!({ "error": error })
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

pub use loopx_kernel::words::refusal_words;

impl From<Refusal> for CliError {
    fn from(refusal: Refusal) -> Self {
        let code = refusal.code();
        let exit = match code {
            "stale_revision" | "stale_lease_epoch" => Exit::Conflict,
            "unknown_goal" | "unknown_todo" | "unknown_gate" | "unknown_obligation"
            | "unknown_reference" => Exit::NotFound,
            _ => Exit::Refused,
        };
        let (message, hint) = refusal_words(&refusal);
        CliError {
            code: code.to_owned(),
            message,
            hint,
            exit,
            details: serde_json::to_value(&refusal).ok(),
        }
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        // A commit beyond the store's clock is the refusal it is through `submit`, also when a
        // verb appends directly (`import`).
        if let StoreError::ClockAhead {
            at,
            store_time,
            skew,
        } = error
        {
            return Refusal::ClockAhead {
                at,
                store_time,
                skew,
            }
            .into();
        }
        let message = error.to_string();
        let (code, hint) = loopx_kernel::words::store_error(&error);
        let exit = match &error {
            StoreError::Conflict { .. }
            | StoreError::OperationConflict { .. }
            | StoreError::Ambiguous { .. } => Exit::Conflict,
            StoreError::UnknownGoal { .. } => Exit::NotFound,
            StoreError::InvalidBatch { .. } => Exit::Input,
            StoreError::NewerSchema { .. }
            | StoreError::HistoryDamaged { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Unavailable { .. } => Exit::Store,
            _ => Exit::Other,
        };
        CliError::new(exit, code, message, hint)
    }
}

impl From<SubmitError> for CliError {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::Refused(refusal) => refusal.into(),
            SubmitError::Store(store) => store.into(),
            SubmitError::Contended { .. } => {
                let (code, message, hint) = loopx_kernel::words::submit_error(&error);
                CliError::new(Exit::Conflict, code, message, hint)
            }
            SubmitError::GoalMismatch { .. } => {
                let (code, message, hint) = loopx_kernel::words::submit_error(&error);
                CliError::new(Exit::Input, code, message, hint)
            }
            other => CliError::new(Exit::Other, "submit_failed", other.to_string(), ""),
        }
    }
}

impl From<KeyError> for CliError {
    fn from(error: KeyError) -> Self {
        // The error names the file and the problem, never a key's content.
        let message = error.to_string();
        match &error {
            KeyError::TooOpen { path, .. } => CliError::input(
                "key_unprotected",
                message,
                format!(
                    "make it readable by its owner only (`chmod 600 {}`), or make a new key: a key others could read signs for anyone",
                    path.display()
                ),
            ),
            KeyError::Malformed { .. } => CliError::input(
                "key_invalid",
                message,
                "make a new key with `loopx key new KIND:NAME`",
            ),
            KeyError::OtherActor { wanted, .. } => CliError::usage(
                "key_other_actor",
                message,
                format!("point LOOPX_KEY at `{wanted}`'s key file, or act as the key's actor"),
            ),
            KeyError::Exists { .. } => CliError::new(
                Exit::Other,
                "key_exists",
                message,
                "keep using it (`loopx key show KIND:NAME` prints its public key), or remove the file first",
            ),
            KeyError::NotFound { actor, .. } => CliError::new(
                Exit::Other,
                "key_missing",
                message,
                format!("make it with `loopx key new {actor}`"),
            ),
            _ => CliError::new(
                Exit::Other,
                "key_unreadable",
                message,
                "check --keys (or LOOPX_KEY), the path and its permissions",
            ),
        }
    }
}

impl From<InvalidId> for CliError {
    fn from(error: InvalidId) -> Self {
        CliError::usage(
            "invalid_id",
            error.to_string(),
            loopx_kernel::ids::ID_GRAMMAR,
        )
    }
}
