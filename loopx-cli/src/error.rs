//! Errors: a stable code, a message that says what is wrong, a hint that says what to do, and
//! the exit code of the error's class.

use loopx_kernel::SubmitError;
use std::fmt;

use loopx_kernel::seams::StoreError;
use loopx_kernel::{InvalidId, Refusal};
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

Environment: LOOPX_STORE (store path or postgres:// URL), LOOPX_ACTOR (kind:name),
LOOPX_GOAL (goal id), NO_COLOR (no colour in human output).";

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

impl From<Refusal> for CliError {
    fn from(refusal: Refusal) -> Self {
        let code = refusal.code();
        let (exit, hint) = match code {
            "stale_revision" => (
                Exit::Conflict,
                "the goal moved: read it again (`loopx goal show`) and retry against the new revision",
            ),
            "stale_lease_epoch" => (
                Exit::Conflict,
                "this executor lost the lease: stop, and ask for the next step with `loopx next`",
            ),
            "unknown_goal" | "unknown_todo" | "unknown_gate" | "unknown_obligation"
            | "unknown_reference" => (
                Exit::NotFound,
                "check the id: `loopx todo list`, `loopx gate list` or `loopx goal list`",
            ),
            _ => (
                Exit::Refused,
                "nothing changed; ask for the next legal step with `loopx next`",
            ),
        };
        CliError {
            code: code.to_owned(),
            message: refusal.to_string(),
            hint: hint.to_owned(),
            exit,
            details: serde_json::to_value(&refusal).ok(),
        }
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        let message = error.to_string();
        let (exit, code, hint) = match &error {
            StoreError::Conflict { .. } => (
                Exit::Conflict,
                "conflict",
                "another writer moved the goal first; run the command again",
            ),
            StoreError::OperationConflict { .. } => (
                Exit::Conflict,
                "operation_conflict",
                "this operation id was used for another command; pass a new --op (or none)",
            ),
            StoreError::Ambiguous { .. } => (
                Exit::Conflict,
                "ambiguous",
                "retry with the same --op: a committed operation is not repeated",
            ),
            StoreError::UnknownGoal { .. } => (
                Exit::NotFound,
                "unknown_goal",
                "list the goals with `loopx goal list`",
            ),
            StoreError::InvalidBatch { .. } => (
                Exit::Input,
                "invalid_batch",
                "the events do not apply to the goal; nothing was written",
            ),
            StoreError::NewerSchema { .. } => (
                Exit::Store,
                "newer_schema",
                "this store was written by a newer loopx: upgrade loopx on this machine",
            ),
            StoreError::Corrupt { .. } => (
                Exit::Store,
                "store_corrupt",
                "run `loopx doctor` for details and restore the store from a backup",
            ),
            StoreError::Unavailable { .. } => (
                Exit::Store,
                "store_unavailable",
                "check --store (or LOOPX_STORE): the path or server, its permissions and that it is running",
            ),
            _ => (Exit::Other, "store_error", "see the message"),
        };
        CliError::new(exit, code, message, hint)
    }
}

impl From<SubmitError> for CliError {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::Refused(refusal) => refusal.into(),
            SubmitError::Store(store) => store.into(),
            SubmitError::Contended { .. } => CliError::new(
                Exit::Conflict,
                "contended",
                error.to_string(),
                "other writers are busy on this goal: retry later with the same --op",
            ),
            SubmitError::GoalMismatch { .. } => CliError::input(
                "goal_mismatch",
                error.to_string(),
                "the goal id in the file and on the command line must agree",
            ),
            other => CliError::new(Exit::Other, "submit_failed", other.to_string(), ""),
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
