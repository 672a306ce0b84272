//! An [`Executor`] over a command, with a journal that lets a restarted engine tell a turn that
//! never started from one that finished or one whose effects are unknown.
//!
//! Each turn runs the command once, with the turn's identity in its environment:
//!
//! | variable | value |
//! |---|---|
//! | `LOOPX_GOAL` | the goal id |
//! | `LOOPX_TODO` | the todo id |
//! | `LOOPX_TODO_TITLE` | the todo's title |
//! | `LOOPX_TURN` | the turn id (stable across a re-run of the same turn: key effects by it) |
//! | `LOOPX_EPOCH` | the lease epoch (present it to systems that check fencing) |
//! | `LOOPX_AGENT` | the agent |
//! | `LOOPX_DEADLINE` | the lease expiry, RFC 3339 (the engine renews it while the turn runs) |
//! | `LOOPX_USAGE_FILE` | where the turn writes what it used (see below) |
//! | `LOOPX_REQUEST_FILE` | the whole [`TurnRequest`] as JSON (read-only): with the objective, the handoff note and `decided` — what the gates covering the todo came to, each person's answer in full with who and when |
//!
//! **Usage.** The turn reports the tokens and the cost it used by writing one JSON object to
//! the file `LOOPX_USAGE_FILE` names (inside the journal, owner-only; any earlier file of the
//! same turn is removed before the command starts):
//!
//! ```json
//! {"tokens": 1234, "cost_micros": 5600}
//! ```
//!
//! `tokens` (model tokens, input plus output) and `cost_micros` (millionths of the goal's
//! currency unit) are non-negative integers; either may be left out (zero); no other key is
//! allowed, and the file is read only up to 64 KiB. These are the only source of tokens and
//! cost: a printed report's `usage` is not read. Wall-clock time is not the turn's to report:
//! the engine measures it around the run. When the file is missing, unreadable or not of this
//! shape, the turn still settles, charged its *reservation* of tokens and cost (so leaving the
//! file out never makes a turn cheaper), and the report carries the typed
//! [`UsageProblem`], which never quotes the file.
//!
//! The command reports its turn either by printing a JSON [`TurnReport`] as the last line of
//! its standard output, or by its exit code alone: zero proposes completing the todo (the
//! validator still decides). Either way the report is only a proposal: the engine's validator
//! judges the work.
//!
//! A report may ask for external effects (`"effects": [{"kind": "github.comment", "target":
//! "acme/cli#12", "params": {…}}]`, [`TurnReport::effects`]): the command does not perform
//! them itself; the engine performs them through the store's outbox (each intent committed
//! under the lease epoch first), with the effector its host gave it, and fails the turn when
//! it has none. Journalled with the report, they are read back, never repeated, when a
//! restarted engine finishes the turn.
//!
//! A command that does not exit zero has failed the turn, whatever it printed: the engine
//! settles the turn as failed and the goal's retry policy paces the next attempt. The failure's
//! class ([`FailureClass`](loopx_kernel::FailureClass)) is read from how the process ended:
//!
//! | how it ended | class |
//! |---|---|
//! | past `--timeout`, its process group killed | `timed_out` |
//! | a signal | `killed` |
//! | exit 77 (`EX_NOPERM`), or standard error naming missing or refused credentials (`unauthorized`, `authentication failed`, `invalid api key`, `not logged in`, `permission denied (publickey`) | `unauthorized` |
//! | exit 75 (`EX_TEMPFAIL`), or standard error naming a rate limit (`rate limit`, `rate-limited`, `too many requests`) | `rate_limited` |
//! | exit 126 or 127 (the shell could not run the program), or the program could not start | `unavailable` |
//! | any other exit code | `exited` |
//!
//! The failure's detail names the command and how it ended, then what it printed: the tails of
//! its standard error and output, together within the kernel's text bound, with the values of
//! the secret environment variables it ran with masked ([`ProcessOutput::told`]), so that the
//! next turn on the todo (its request's `failures`) and the people reading `status` see why.
//!
//! The journal is one directory (created owner-only). Before the process starts, a `started`
//! record is written and synced; after it ends, its report (or its failure) is written
//! atomically (temporary file, sync, rename). [`Executor::recover`] reads them back: a report →
//! [`Recovery::Finished`]; a failure → [`Recovery::Failed`]; a start without either (the
//! executor died mid-turn) → [`Recovery::Unknown`]; nothing → [`Recovery::NotStarted`].
//!
//! The journal also keeps two sessions of one agent from both running a turn. An engine
//! recovers a turn only after taking it over under a new epoch, and a recovery that finds the
//! turn not started records that epoch as the turn's owner; a run under an older epoch, or
//! under the epoch the turn already started with, is refused ([`TurnError::Fenced`]) without
//! starting anything. The check and the `started` record (or the owner record) are written
//! under an exclusive lock on the turn's lock file, so every process that shares the journal
//! sees one order: either the old session started first (the recovery then says
//! [`Recovery::Unknown`]) or the recovery fenced it first (the old session never starts).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use loopx_kernel::seams::{Executor, Recovery, TurnError, TurnReport, TurnRequest, UsageProblem};
use loopx_kernel::{Amounts, Continuation, Duration, Transition};

use crate::fact::sha256_hex;
use crate::process::{CommandSpec, Exit, ProcessOutput};

/// Runs a command as one turn and journals it.
#[derive(Debug, Clone)]
pub struct CommandExecutor {
    command: CommandSpec,
    journal: PathBuf,
}

impl CommandExecutor {
    /// Runs `command` for every turn, journalling in the directory `journal` (created on first
    /// use, owner-only). Use one journal per agent host; it must survive the host's restarts.
    pub fn new(command: CommandSpec, journal: impl Into<PathBuf>) -> Self {
        CommandExecutor {
            command,
            journal: journal.into(),
        }
    }

    fn record(&self, turn: &TurnRequest, suffix: &str) -> PathBuf {
        let name = sha256_hex(format!("{}\n{}", turn.goal, turn.turn).as_bytes());
        self.journal.join(format!("{}.{suffix}", &name[..32]))
    }

    /// Runs `f` holding the exclusive lock on the turn's lock file (released when the file is
    /// closed, also when the process dies).
    fn locked<T>(
        &self,
        turn: &TurnRequest,
        f: impl FnOnce() -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        create_private_dir(&self.journal)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.record(turn, "lock"))?;
        lock.lock()?;
        f()
    }

    /// The epoch that owns the turn against a run under `turn.epoch`, if it is not this run's:
    /// the epoch it started under (that start is this turn's, whoever made it, unless this run
    /// is newer), or the newer epoch a recovery fenced it at. Read under the lock.
    fn owner(&self, turn: &TurnRequest) -> Option<u64> {
        let started = self.record(turn, "started");
        let started = if started.exists() {
            // A start record whose epoch cannot be read may be anyone's: fail closed.
            Some(epoch_in(&started).unwrap_or(u64::MAX))
        } else {
            None
        };
        let fenced = epoch_in(&self.record(turn, "owner"));
        started
            .filter(|e| *e >= turn.epoch)
            .or(fenced.filter(|e| *e > turn.epoch))
    }

    fn command_for(&self, turn: &TurnRequest) -> CommandSpec {
        self.command
            .clone()
            .env("LOOPX_GOAL", turn.goal.as_str())
            .env("LOOPX_TODO", turn.todo.as_str())
            .env("LOOPX_TODO_TITLE", &turn.title)
            .env("LOOPX_TURN", turn.turn.as_str())
            .env("LOOPX_EPOCH", turn.epoch.to_string())
            .env("LOOPX_AGENT", turn.agent.as_str())
            .env("LOOPX_DEADLINE", turn.deadline.to_string())
            .env(
                "LOOPX_USAGE_FILE",
                self.record(turn, "usage").to_string_lossy().into_owned(),
            )
            // The `started` record is the request itself, written before the command starts.
            .env(
                "LOOPX_REQUEST_FILE",
                self.record(turn, "started").to_string_lossy().into_owned(),
            )
    }
}

/// The shape of the usage file (see the module docs).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageFile {
    #[serde(default)]
    tokens: u64,
    #[serde(default)]
    cost_micros: u64,
}

/// The most of a usage file that is read.
const MAX_USAGE_FILE: u64 = 64 * 1024;

/// The tokens and cost a turn wrote to its usage file at `path` (the shape the module docs
/// give), as amounts with no turns and no wall-clock time.
///
/// # Errors
/// [`UsageProblem::Missing`] when there is no file, [`UsageProblem::Unreadable`] when it cannot
/// be read, [`UsageProblem::Malformed`] when it is over 64 KiB or not of the shape; none quotes
/// the file.
pub fn read_usage(path: &Path) -> Result<Amounts, UsageProblem> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(UsageProblem::Missing);
        }
        Err(error) => {
            return Err(UsageProblem::Unreadable {
                detail: error.kind().to_string(),
            });
        }
    };
    let mut bytes = Vec::new();
    file.take(MAX_USAGE_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| UsageProblem::Unreadable {
            detail: error.kind().to_string(),
        })?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_USAGE_FILE {
        return Err(UsageProblem::Malformed {
            detail: format!("larger than {MAX_USAGE_FILE} bytes"),
        });
    }
    // serde's message may quote what it found: describe the place and the kind only.
    let usage: UsageFile =
        serde_json::from_slice(&bytes).map_err(|error| UsageProblem::Malformed {
            detail: format!(
                "not a JSON object of `tokens` and `cost_micros` as non-negative integers ({} error at line {}, column {})",
                match error.classify() {
                    serde_json::error::Category::Io => "read",
                    serde_json::error::Category::Syntax => "syntax",
                    serde_json::error::Category::Data => "data",
                    serde_json::error::Category::Eof => "truncation",
                },
                error.line(),
                error.column()
            ),
        })?;
    Ok(Amounts {
        tokens: usage.tokens,
        cost_micros: usage.cost_micros,
        ..Amounts::ZERO
    })
}

#[async_trait]
impl Executor for CommandExecutor {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        let started = serde_json::to_vec(turn).map_err(|e| failed("encode the turn", &e))?;
        let owner = self
            .locked(turn, || {
                if let Some(owner) = self.owner(turn) {
                    return Ok(Some(owner));
                }
                write_synced(&self.journal, &self.record(turn, "started"), &started)?;
                Ok(None)
            })
            .map_err(|e| failed("journal the turn start", &e))?;
        if let Some(epoch) = owner {
            return Err(TurnError::Fenced { epoch });
        }
        // A usage file left by an earlier run of the same turn is not this run's.
        let usage_file = self.record(turn, "usage");
        match std::fs::remove_file(&usage_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(failed("clear the turn's usage file", &e));
            }
            _ => {}
        }
        let output = self
            .command_for(turn)
            .run()
            .await
            .map_err(|e| TurnError::Failed(e.to_string()))?;
        if let Some(error) = failure(&self.command, &output) {
            let encoded = serde_json::to_vec(&error.failure())
                .map_err(|e| failed("encode the failure", &e))?;
            write_synced(&self.journal, &self.record(turn, "failed"), &encoded)
                .map_err(|e| failed("journal the turn failure", &e))?;
            return Err(error);
        }
        let mut report = reported(&output.stdout.text()).unwrap_or_else(|| TurnReport {
            effects: Vec::new(),
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            observations: Vec::new(),
            usage: Amounts::ZERO,
            summary: format!("`{}` {}", self.command.display(), output.exit),
            usage_problem: None,
        });
        // Tokens and cost come from the usage file only; without it, the reservation stands.
        let (usage, problem) = match read_usage(&usage_file) {
            Ok(usage) => (usage, None),
            Err(problem) => (
                Amounts {
                    tokens: turn.reserved.tokens,
                    cost_micros: turn.reserved.cost_micros,
                    ..Amounts::ZERO
                },
                Some(problem),
            ),
        };
        report.usage = usage;
        report.usage_problem = problem;
        let encoded = serde_json::to_vec(&report).map_err(|e| failed("encode the report", &e))?;
        write_synced(&self.journal, &self.record(turn, "report"), &encoded)
            .map_err(|e| failed("journal the turn report", &e))?;
        Ok(report)
    }

    async fn recover(&self, turn: &TurnRequest) -> Recovery {
        let read = || {
            if let Ok(bytes) = std::fs::read(self.record(turn, "report"))
                && let Ok(report) = serde_json::from_slice(&bytes)
            {
                return Ok(Recovery::Finished(report));
            }
            if let Ok(bytes) = std::fs::read(self.record(turn, "failed"))
                && let Ok(failure) = serde_json::from_slice(&bytes)
            {
                return Ok(Recovery::Failed(failure));
            }
            if self.record(turn, "started").exists() {
                return Ok(Recovery::Unknown);
            }
            // Not started: from now on this epoch owns the turn, and a session under an older
            // one can no longer start it.
            if epoch_in(&self.record(turn, "owner")).is_none_or(|e| e < turn.epoch) {
                write_synced(
                    &self.journal,
                    &self.record(turn, "owner"),
                    turn.epoch.to_string().as_bytes(),
                )?;
            }
            Ok(Recovery::NotStarted)
        };
        // A journal that cannot be locked or written cannot fence: fail closed.
        self.locked(turn, read).unwrap_or(Recovery::Unknown)
    }
}

/// The epoch a journal record names: the `epoch` of a `started` record (the turn request) or
/// the text of an `owner` record; `None` when absent or unreadable.
fn epoch_in(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    if let Ok(text) = std::str::from_utf8(&bytes)
        && let Ok(epoch) = text.trim().parse()
    {
        return Some(epoch);
    }
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()?
        .get("epoch")?
        .as_u64()
}

/// The turn error of a process that did not exit zero, classed as the module docs say.
fn failure(spec: &CommandSpec, output: &ProcessOutput) -> Option<TurnError> {
    let command: String = spec.display().chars().take(200).collect();
    // Why, in the command's own words: the tails of what it printed, bounded and redacted.
    let detail = output.explained(format!("`{command}` {}", output.exit), spec);
    let code = match output.exit {
        Exit::Code { code: 0 } => return None,
        Exit::TimedOut => {
            let span = i64::try_from(output.duration.as_millis()).unwrap_or(i64::MAX);
            return Some(TurnError::Timeout(Duration::from_millis(span)));
        }
        Exit::Signal { signal } => return Some(TurnError::Killed { signal, detail }),
        Exit::Code { code } => code,
    };
    let stderr = output.stderr.text().to_lowercase();
    let names = |patterns: &[&str]| patterns.iter().any(|p| stderr.contains(p));
    Some(
        if code == 77
            || names(&[
                "unauthorized",
                "unauthorised",
                "authentication failed",
                "invalid api key",
                "not logged in",
                "permission denied (publickey",
            ])
        {
            TurnError::Unauthorized(detail)
        } else if code == 75 || names(&["rate limit", "rate-limited", "too many requests"]) {
            TurnError::RateLimited(detail)
        } else if code == 126 || code == 127 {
            TurnError::Failed(detail)
        } else {
            TurnError::Exited { code, detail }
        },
    )
}

/// The report a command printed as its last non-empty output line, if it printed one.
fn reported(stdout: &str) -> Option<TurnReport> {
    let last = stdout.lines().rev().find(|line| !line.trim().is_empty())?;
    serde_json::from_str(last.trim()).ok()
}

fn failed(what: &str, error: &dyn std::fmt::Display) -> TurnError {
    TurnError::Failed(format!("could not {what}: {error}"))
}

/// Writes `bytes` to `path` atomically and durably, owner-only (the careful writer).
fn write_synced(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_private_dir(dir)?;
    crate::files::replace(path, bytes, crate::files::Mode::Exactly(0o600))
        .map_err(std::io::Error::other)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}
