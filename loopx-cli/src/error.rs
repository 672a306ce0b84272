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

/// The `loopx` verb that submits a kernel command (by its `Command::name`).
pub fn verb_of(command: &str) -> &'static str {
    match command {
        "create_goal" => "goal create",
        "amend_goal" => "goal amend",
        "abandon_goal" => "goal abandon",
        "declare_closure" => "goal close",
        "add_todo" => "todo add",
        "reassign" => "todo reassign",
        "defer" => "todo defer",
        "block" => "todo block",
        "unblock" => "todo unblock",
        "supersede" => "todo supersede",
        "claim" | "report_workspace" => "claim",
        "renew" => "renew",
        "take_over_turn" => "take-over",
        "release" => "release",
        "handoff" => "handoff",
        "begin_turn" => "begin",
        "settle_turn" => "settle",
        // The engine intends a turn's effects in the outbox: `loopx run` is the verb that does.
        "intend_effect" => "run",
        "record_effect" => "effect resolve",
        "resolve_outcome" => "resolve-outcome",
        "open_gate" => "gate open",
        "answer_gate" => "gate answer",
        "withdraw_gate" => "gate withdraw",
        // Every `observe` verb records one: the group, with `…` for whichever.
        "record_observation" => "observe …",
        "record_evidence" => "evidence add",
        "raise_obligation" => "obligation raise",
        "discharge" => "obligation discharge",
        _ => "the verb",
    }
}

/// Who may run a verb the acting actor may not, in words.
fn permitted(command: &str) -> &'static str {
    match command {
        "record_evidence" => {
            "evidence comes from a validator, a provider or the goal owner: pass --as validator:NAME"
        }
        "record_observation" => {
            "observations come from an agent, a provider or a validator: pass --as provider:NAME"
        }
        "declare_closure" | "discharge" => {
            "the goal owner or a registered agent may: pass --as person:OWNER or --as agent:NAME"
        }
        "withdraw_gate" => "whoever opened the gate, or the goal owner, may withdraw it",
        _ => "act as an agent registered with the goal (--as agent:NAME) or as the goal owner",
    }
}

/// A refusal in the command line's words: the message and a hint specific to its code, naming
/// `loopx` verbs (the kernel's own messages name kernel commands, for library callers).
#[allow(clippy::too_many_lines, reason = "one arm per refusal code")]
pub fn refusal_words(refusal: &Refusal) -> (String, String) {
    let kernel = refusal.to_string();
    let same = |hint: &str| (kernel.clone(), hint.to_owned());
    match refusal {
        Refusal::UnknownGoal => (
            "no such goal in this store".to_owned(),
            "create it with `loopx goal create`, or list the goals with `loopx goal list`"
                .to_owned(),
        ),
        Refusal::ActorNotPermitted { actor, command } => (
            format!("{actor} may not run `loopx {}`", verb_of(command)),
            permitted(command).to_owned(),
        ),
        Refusal::GrantReasonRequired => (
            "acting on another agent's todo under a grant needs a reason".to_owned(),
            "pass --grant-reason TEXT".to_owned(),
        ),
        Refusal::UnregisteredAgent { agent } => (
            format!("agent `{agent}` is not registered with this goal"),
            format!("the goal owner can register it: `loopx goal amend --register-agent {agent}`"),
        ),
        Refusal::StaleRevision { .. } => same(
            "the goal moved: read it again (`loopx goal show`) and retry against the new revision",
        ),
        Refusal::StaleLeaseEpoch {
            todo,
            presented,
            current,
        } if presented > current => (
            kernel.clone(),
            format!(
                "epoch {presented} was never issued on `{todo}`: pass the epoch `loopx claim` printed ({current})"
            ),
        ),
        Refusal::StaleLeaseEpoch { .. } => {
            same("this executor lost the lease: stop, and ask for the next step with `loopx next`")
        }
        Refusal::UnknownTodo { .. } | Refusal::UnknownReference { .. } => {
            same("check the id: `loopx todo list` lists the todos")
        }
        Refusal::UnknownGate { .. } => same("check the id: `loopx gate list` lists the gates"),
        Refusal::UnknownObligation { .. } => {
            same("check the id: `loopx obligation list` lists the obligations")
        }
        Refusal::LeaseHeld { .. } | Refusal::WriteScopeConflict { .. } => {
            same("ask for other work with `loopx next`, or wait for the lease to end")
        }
        Refusal::NoLiveLease { todo } => (
            kernel.clone(),
            format!("claim it again: `loopx claim --todo {todo}`"),
        ),
        Refusal::NotLeaseHolder { .. } => {
            same("only the lease holder may: act as it (--as agent:NAME), or ask `loopx next`")
        }
        Refusal::TurnInFlight { todo, .. } => (
            kernel.clone(),
            format!(
                "settle it (`loopx settle`), release it (`loopx release --todo {todo} --epoch N`), or resolve it once its lease has expired (`loopx resolve-outcome`)"
            ),
        ),
        Refusal::TurnNotBegun { todo, .. } => (
            kernel.clone(),
            format!("begin the turn first: `loopx begin --todo {todo} --epoch N --turn ID`"),
        ),
        Refusal::TurnAlreadyUsed { .. } => same("begin a new turn with a new --turn id"),
        Refusal::BudgetExhausted { .. } => same(
            "the goal owner can raise the limit: `loopx goal amend --turns N` (or --tokens, --cost-micros, --wall-ms)",
        ),
        Refusal::GateBlocks { gate, .. } => (
            kernel.clone(),
            format!(
                "its owner answers it with `loopx gate answer --gate {gate} --answer TEXT`; meanwhile ask `loopx next`"
            ),
        ),
        Refusal::DecisionMissing { scope, .. } => (
            kernel.clone(),
            format!(
                "open a gate for it: `loopx gate open --id ID --question TEXT --owner person:NAME --decision {scope}`"
            ),
        ),
        Refusal::NotGateOwner { owner, .. } => (
            kernel.clone(),
            format!("act as the gate's owner: --as {owner}"),
        ),
        Refusal::NotGoalOwner { owner } => (
            kernel.clone(),
            format!("act as the goal owner: --as {owner}"),
        ),
        Refusal::ValidationInsufficient { .. } => same(
            "settle with a `keep_open`, `defer` or `block` transition, or with a `passed` verdict",
        ),
        Refusal::OutcomeUnknown { todo, turn } => (
            kernel.clone(),
            format!(
                "read back what the turn did, then `loopx resolve-outcome --todo {todo} --turn {turn} --resolution absent|committed --note TEXT`"
            ),
        ),
        Refusal::WorkspaceShared { .. } => same(
            "create an independent worktree (git worktree add PATH) and claim from there with --workspace-top-level and --workspace-common-dir",
        ),
        Refusal::WorkspaceRequired { .. } => same(
            "claim with --workspace-top-level and --workspace-common-dir (from `git rev-parse`)",
        ),
        Refusal::ObligationClosed { .. } => same("ask for the next step with `loopx next`"),
        Refusal::ClockAhead { store_time, .. } => (
            kernel.clone(),
            format!(
                "run it without --now (the store's clock reads {store_time}), and check this host's clock; only a store created with `loopx init --test-clock` lets --now move time"
            ),
        ),
        Refusal::SignatureMissing { actor } | Refusal::KeyUnregistered { actor } => (
            kernel.clone(),
            format!(
                "make the key with `loopx key new {actor}` (or point LOOPX_KEY at its file); the goal's owner registers its public key with `loopx goal amend --register-key {actor}=KEY`"
            ),
        ),
        Refusal::SignatureInvalid { actor } => (
            kernel.clone(),
            format!(
                "sign with the key registered for `{actor}` (`loopx key show {actor}` prints the one in the key directory; the owner registers it with `loopx goal amend --register-key {actor}=KEY`)"
            ),
        ),
        _ => same("nothing changed; ask for the next legal step with `loopx next`"),
    }
}

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
            StoreError::HistoryDamaged { .. } => (
                Exit::Store,
                "history_damaged",
                "run `loopx doctor` for details and restore the store from a backup; other goals are unaffected",
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
