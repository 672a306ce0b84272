//! The process runner: one command from an argument vector, bounded in time and output.
//!
//! Guarantees:
//! - the command is an argument vector handed to the operating system as is; no shell ever
//!   parses it;
//! - the child starts with an **empty environment**: only variables named in the allow-list
//!   (copied from this process) and variables set explicitly reach it;
//! - the child leads a process group of its own; when the timeout fires the whole group is
//!   killed (`SIGKILL`), children and grandchildren included, and whatever the group left running
//!   after its leader exited is killed too, so a bounded call leaves nothing behind;
//! - stdout and stderr are each captured up to a byte bound: the **tail** is kept, the bytes
//!   dropped from the front are counted, and a SHA-256 is taken over every byte produced;
//! - output that is not UTF-8 is kept as bytes; [`Captured::text`] decodes it lossily for display;
//! - with [`Tee`] set, each stream is also copied to this process's standard output or error as
//!   it arrives (for a person watching); what is captured stays bounded the same way.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::task::JoinHandle;

use crate::fact::hex;

/// The default bound on each captured stream: 64 KiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;

/// The default timeout: ten minutes.
pub const DEFAULT_TIMEOUT: loopx_kernel::Duration = loopx_kernel::Duration::minutes(10);

/// How long to wait for the output pipes to close once the process group is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// A command to run: program, arguments, working directory, environment, bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    allow_env: Vec<OsString>,
    set_env: BTreeMap<OsString, OsString>,
    timeout: Duration,
    output_limit: usize,
    tee: Tee,
}

/// Where a run copies its output as it arrives, besides capturing it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tee {
    /// Captured only (the default).
    #[default]
    Off,
    /// The child's standard output to this process's standard output, its standard error to
    /// this process's standard error.
    Streams,
    /// Both of the child's streams to this process's standard error (for a caller whose
    /// standard output is reserved, e.g. for one JSON document).
    Stderr,
}

impl CommandSpec {
    /// A command running `program` (looked up on the allowed `PATH`, or this process's `PATH`
    /// when `PATH` is not passed on) with no arguments, the default bounds and an empty
    /// environment.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        CommandSpec {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            allow_env: Vec::new(),
            set_env: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT.to_std(),
            output_limit: DEFAULT_OUTPUT_LIMIT,
            tee: Tee::Off,
        }
    }

    /// A command from an argument vector: the first element is the program.
    ///
    /// # Errors
    /// [`ProcessError::EmptyCommand`] for an empty vector.
    pub fn from_argv<I, S>(argv: I) -> Result<Self, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut argv = argv.into_iter();
        let program = argv.next().ok_or(ProcessError::EmptyCommand)?;
        Ok(CommandSpec::new(program).args(argv))
    }

    /// Appends one argument, passed to the program verbatim.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments, each passed verbatim.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Runs the command in `dir`.
    #[must_use]
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Lets the variable `name` through from this process's environment, when it is set.
    #[must_use]
    pub fn allow_env(mut self, name: impl AsRef<OsStr>) -> Self {
        self.allow_env.push(name.as_ref().to_owned());
        self
    }

    /// Sets `name` to `value` in the child's environment (after the allowed copies).
    #[must_use]
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.set_env
            .insert(name.as_ref().to_owned(), value.as_ref().to_owned());
        self
    }

    /// Sets the wall-clock timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: loopx_kernel::Duration) -> Self {
        self.timeout = timeout.to_std();
        self
    }

    /// Sets the bound on each captured stream, in bytes.
    #[must_use]
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// Also copies the child's output to this process's streams as it arrives (see [`Tee`]).
    /// A copy that fails (a closed terminal) stops copying; the capture goes on.
    #[must_use]
    pub fn tee(mut self, tee: Tee) -> Self {
        self.tee = tee;
        self
    }

    /// The values of the child's environment variables whose names say they hold a secret
    /// (`TOKEN`, `SECRET`, `KEY`, `PASSWORD`, `PASSWD`, `CREDENTIAL`, `AUTH`, `COOKIE`,
    /// `SESSION`, `PRIVATE` anywhere in the name, in any case), those it lets through from this
    /// process and those it sets: what [`ProcessOutput::told`] masks. Values shorter than 4
    /// characters are left out (masking them would mask ordinary words).
    pub fn secret_values(&self) -> Vec<String> {
        const SECRET: [&str; 10] = [
            "TOKEN",
            "SECRET",
            "KEY",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "AUTH",
            "COOKIE",
            "SESSION",
            "PRIVATE",
        ];
        let secret = |name: &OsStr| {
            let name = name.to_string_lossy().to_uppercase();
            SECRET.iter().any(|word| name.contains(word))
        };
        let allowed = self
            .allow_env
            .iter()
            .filter(|name| secret(name))
            .filter_map(std::env::var_os);
        let set = self
            .set_env
            .iter()
            .filter(|(name, _)| secret(name))
            .map(|(_, value)| value.clone());
        let mut values: Vec<String> = allowed
            .chain(set)
            .map(|v| v.to_string_lossy().into_owned())
            .filter(|v| v.chars().count() >= 4)
            .collect();
        // The longest first, so that a secret holding another is masked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        values
    }

    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn arguments(&self) -> &[OsString] {
        &self.args
    }

    /// The working directory, when set.
    pub fn working_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The program and arguments joined by spaces, lossily decoded: for people, never for a
    /// shell. Values set with [`CommandSpec::env`] never appear in it.
    pub fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs the command to completion or timeout.
    ///
    /// A timeout is not an error: it is the [`Exit::TimedOut`] outcome, with the output captured
    /// until the group was killed.
    ///
    /// # Errors
    /// [`ProcessError::NotFound`] when the program does not exist, [`ProcessError::Spawn`] when
    /// it cannot be started, [`ProcessError::Wait`] when waiting for it fails.
    pub async fn run(&self) -> Result<ProcessOutput, ProcessError> {
        run(self).await
    }
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "exit", rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this code.
    Code {
        /// The exit code.
        code: i32,
    },
    /// A signal ended it (not ours).
    Signal {
        /// The signal number.
        signal: i32,
    },
    /// It ran past its timeout; its process group was killed.
    TimedOut,
}

impl Exit {
    /// True for exit code zero.
    pub fn success(self) -> bool {
        self == Exit::Code { code: 0 }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code { code } => write!(f, "exit {code}"),
            Exit::Signal { signal } => write!(f, "signal {signal}"),
            Exit::TimedOut => f.write_str("timed out"),
        }
    }
}

/// One captured stream: its tail within the bound, how much was dropped, and a digest of all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The last bytes produced, at most the output limit.
    pub tail: Vec<u8>,
    /// Every byte produced, kept or not.
    pub total_bytes: u64,
    /// Bytes dropped from the front to respect the bound.
    pub dropped_bytes: u64,
    /// SHA-256 over every byte produced, in hexadecimal.
    pub sha256: String,
    /// False when the stream was still open after the process group was gone (a process that
    /// left the group kept it open); the capture then stops there.
    pub complete: bool,
}

impl Captured {
    /// The kept tail decoded as UTF-8, invalid sequences replaced: for display only.
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.tail)
    }

    /// True when bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.dropped_bytes > 0
    }
}

/// What a finished run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    /// How it ended.
    pub exit: Exit,
    /// Wall-clock time from spawn to exit (or kill).
    pub duration: Duration,
    /// Standard output.
    pub stdout: Captured,
    /// Standard error.
    pub stderr: Captured,
}

impl ProcessOutput {
    /// What the command printed, for the people and the next turn that must know why it
    /// failed: the last bytes of its standard error, then of its standard output, each under a
    /// line that names the stream and how much of it is shown, together at most `budget`
    /// bytes (a stream that printed nothing gives its share to the other). Every value of
    /// `secrets` ([`CommandSpec::secret_values`]) is masked as `[redacted]` — also the end of
    /// one whose beginning fell outside the captured tail —, so is every word that begins
    /// like a well-known credential (`sk-`, `ghp_`, `github_pat_`, `xoxb-`, `AKIA`, … or
    /// after `Bearer `), and control characters are neutralised
    /// ([`crate::fact::outside_text`]). Empty when it printed nothing.
    pub fn told(&self, secrets: &[String], budget: usize) -> String {
        let streams = [("stderr", &self.stderr), ("stdout", &self.stdout)];
        let printed = streams.iter().filter(|(_, c)| c.total_bytes > 0).count();
        let mut told = String::new();
        for (name, captured) in streams {
            if captured.total_bytes == 0 {
                continue;
            }
            let share = budget.saturating_sub(told.len()) / printed.max(1);
            let text = redact(&captured.text(), secrets);
            let text = crate::fact::outside_text(text.trim_end());
            let head_room = share.saturating_sub(64);
            let tail = last_bytes(&text, head_room);
            if captured.truncated() || tail.len() < text.len() {
                let _ = writeln!(
                    told,
                    "{name} (the last {} of {} bytes):\n{tail}",
                    tail.len(),
                    captured.total_bytes
                );
            } else {
                let _ = writeln!(told, "{name}:\n{tail}");
            }
        }
        told.truncate(told.trim_end().len());
        told
    }

    /// `header`, then on the lines below it what the command printed ([`told`](Self::told),
    /// with the secrets `spec` runs with masked), together within the kernel's text bound
    /// ([`loopx_kernel::MAX_TEXT`]): a failure's words for people and the next turn.
    pub fn explained(&self, header: String, spec: &CommandSpec) -> String {
        let budget = loopx_kernel::MAX_TEXT.saturating_sub(header.len() + 1);
        let told = self.told(&spec.secret_values(), budget);
        if told.is_empty() {
            header
        } else {
            format!("{header}\n{told}")
        }
    }

    /// A digest of the outcome: the exit and both streams' digests (not the duration), so two
    /// runs that behaved alike digest alike.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.exit.to_string().as_bytes());
        hasher.update([0]);
        hasher.update(self.stdout.sha256.as_bytes());
        hasher.update([0]);
        hasher.update(self.stderr.sha256.as_bytes());
        hex(&hasher.finalize())
    }
}

/// The beginnings of credentials that announce themselves (API keys, access tokens of the
/// common providers), masked wherever they appear even when no variable named them.
const CREDENTIAL_PREFIXES: [&str; 11] = [
    "sk-",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "AKIA",
];

/// Masks every word that begins like a credential ([`CREDENTIAL_PREFIXES`]) or follows
/// `Bearer `.
fn redact_credentials(text: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut after_bearer = false;
    while let Some(start) = rest.find(word) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail.find(|c: char| !word(c)).unwrap_or(tail.len());
        let token = &tail[..end];
        let credential = after_bearer
            || CREDENTIAL_PREFIXES
                .iter()
                .any(|p| token.len() > p.len() + 2 && token.starts_with(p));
        out.push_str(if credential { "[redacted]" } else { token });
        after_bearer = token.eq_ignore_ascii_case("bearer") && tail[end..].starts_with(' ');
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with every secret value masked, and a secret's end that begins the text (the rest
/// of it cut off by the capture bound) masked too; then every word that announces itself as a
/// credential.
fn redact(text: &str, secrets: &[String]) -> String {
    redact_credentials(&redact_secret_values(text, secrets))
}

fn redact_secret_values(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_owned();
    for secret in secrets {
        text = text.replace(secret.as_str(), "[redacted]");
        let cut_off = (1..secret.len().saturating_sub(3))
            .filter(|&at| secret.is_char_boundary(at))
            .map(|at| &secret[at..])
            .find(|end| text.starts_with(end));
        if let Some(end) = cut_off {
            text.replace_range(..end.len(), "[redacted]");
        }
    }
    text
}

/// The last at most `limit` bytes of `text`, starting at a line when one starts within their
/// first 160 bytes (a cut mid-line reads worse than a few bytes fewer).
fn last_bytes(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    match tail.find('\n') {
        Some(line) if line < 160 => &tail[line + 1..],
        _ => tail,
    }
}

/// Why a command could not be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// An empty argument vector.
    #[error("empty command: an argument vector needs at least a program")]
    EmptyCommand,
    /// The program does not exist (or is not on the allowed `PATH`).
    #[error("program `{program}` not found")]
    NotFound {
        /// The program.
        program: String,
    },
    /// The program exists but could not be started.
    #[error("could not start `{program}`: {detail}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's reason.
        detail: String,
    },
    /// Waiting for the process failed.
    #[error("waiting for `{program}` failed: {detail}")]
    Wait {
        /// The program.
        program: String,
        /// The operating system's reason.
        detail: String,
    },
}

/// A bounded tail buffer with a running digest.
struct Tail {
    limit: usize,
    buf: Vec<u8>,
    total: u64,
    dropped: u64,
    hasher: Sha256,
    complete: bool,
}

impl Tail {
    fn new(limit: usize) -> Self {
        Tail {
            limit,
            buf: Vec::new(),
            total: 0,
            dropped: 0,
            hasher: Sha256::new(),
            complete: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        self.total += chunk.len() as u64;
        self.buf.extend_from_slice(chunk);
        // Trim lazily (amortised): keep at most twice the limit between trims.
        if self.buf.len() > self.limit.saturating_mul(2).max(8192) {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.buf.len() > self.limit {
            let excess = self.buf.len() - self.limit;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    fn finish(&mut self) -> Captured {
        self.trim();
        Captured {
            tail: std::mem::take(&mut self.buf),
            total_bytes: self.total,
            dropped_bytes: self.dropped,
            sha256: hex(&self.hasher.clone().finalize()),
            complete: self.complete,
        }
    }
}

fn lock(tail: &Mutex<Tail>) -> std::sync::MutexGuard<'_, Tail> {
    tail.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One of this process's own output streams, which a [`Tee`] copies a child's stream to.
#[derive(Debug, Clone, Copy)]
enum Own {
    Stdout,
    Stderr,
}

impl Own {
    fn writer(self) -> Box<dyn AsyncWrite + Unpin + Send> {
        match self {
            Own::Stdout => Box::new(tokio::io::stdout()),
            Own::Stderr => Box::new(tokio::io::stderr()),
        }
    }
}

/// Where each of the child's streams (stdout, stderr) is copied to.
fn copies(tee: Tee) -> (Option<Own>, Option<Own>) {
    match tee {
        Tee::Off => (None, None),
        Tee::Streams => (Some(Own::Stdout), Some(Own::Stderr)),
        Tee::Stderr => (Some(Own::Stderr), Some(Own::Stderr)),
    }
}

fn drain<R: AsyncRead + Unpin + Send + 'static>(
    mut reader: R,
    tail: Arc<Mutex<Tail>>,
    copy: Option<Own>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut copy = copy.map(Own::writer);
        let mut chunk = vec![0u8; 8192];
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // Captured first: what is kept never depends on the copy.
                    lock(&tail).push(&chunk[..n]);
                    if let Some(writer) = &mut copy {
                        let copied = writer.write_all(&chunk[..n]).await.is_ok()
                            && writer.flush().await.is_ok();
                        if !copied {
                            copy = None;
                        }
                    }
                }
            }
        }
        lock(&tail).complete = true;
    })
}

/// Kills the process group when dropped; killing a group already gone is harmless.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        // The group may already be gone (ESRCH): nothing left to kill is the goal.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

async fn run(spec: &CommandSpec) -> Result<ProcessOutput, ProcessError> {
    let program = spec.program.to_string_lossy().into_owned();
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in &spec.allow_env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&spec.set_env);
    if let Some(dir) = &spec.cwd {
        command.current_dir(dir);
    }
    let started = Instant::now();
    let mut child = command.spawn().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            ProcessError::NotFound {
                program: program.clone(),
            }
        } else {
            ProcessError::Spawn {
                program: program.clone(),
                detail: error.to_string(),
            }
        }
    })?;
    let pid = child.id();
    // A run cancelled mid-way (its future dropped, e.g. a turn whose lease was lost) takes its
    // whole process group down, not only the leader `kill_on_drop` reaches.
    let mut group = GroupGuard(pid);
    let out = Arc::new(Mutex::new(Tail::new(spec.output_limit)));
    let err = Arc::new(Mutex::new(Tail::new(spec.output_limit)));
    let mut readers = Vec::new();
    let (copy_out, copy_err) = copies(spec.tee);
    if let Some(stdout) = child.stdout.take() {
        readers.push(drain(stdout, Arc::clone(&out), copy_out));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.push(drain(stderr, Arc::clone(&err), copy_err));
    }
    let exit = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt as _;
            match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code { code },
                (None, Some(signal)) => Exit::Signal { signal },
                (None, None) => Exit::Code { code: -1 },
            }
        }
        Ok(Err(error)) => {
            kill_group(pid);
            return Err(ProcessError::Wait {
                program,
                detail: error.to_string(),
            });
        }
        Err(_) => {
            kill_group(pid);
            let _ = child.wait().await;
            Exit::TimedOut
        }
    };
    let duration = started.elapsed();
    // The leader is gone; whatever it left in its group goes too.
    kill_group(pid);
    group.0 = None;
    let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
    for reader in readers {
        if tokio::time::timeout_at(deadline, reader).await.is_err() {
            // A process outside the group holds the pipe open: stop capturing here.
        }
    }
    let stdout = lock(&out).finish();
    let stderr = lock(&err).finish();
    Ok(ProcessOutput {
        exit,
        duration,
        stdout,
        stderr,
    })
}
