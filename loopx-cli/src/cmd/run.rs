//! `loopx run`: the engine's loop for one agent, with commands as executor and validator.
//!
//! Each step observes the workspace's git head, lets the kernel decide, and on `continue`
//! claims the todo, journals the prepared turn, runs `--exec` in the workspace (renewing the
//! lease), runs `--validate` as the independent validator whose verdict becomes evidence at the
//! commit it ran on, and settles everything in one commit. A `run` killed at any point is
//! resumed by the next `run`: the store and the turn journal say what happened. A `run`
//! interrupted by a signal (SIGINT, SIGTERM, SIGHUP) first stops the executor's or validator's
//! whole process group, then exits with the signal's code (see [`RUN_EXIT_CODES`]).
//!
//! [`RUN_EXIT_CODES`]: crate::error::RUN_EXIT_CODES

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use loopx_kernel::engine::{Engine, EngineError, EngineOptions, StepReport, TurnOutcome, Until};
use loopx_kernel::ids::path_component;
use loopx_kernel::seams::{Clock, Store, UsageProblem};
use loopx_kernel::{
    Actor, AgentId, CheckId, Decision, Duration, GoalId, GoalSpec, Keyring, ObservationKey,
    Refusal, SourceId, Subject, TodoId, TurnResult, VerdictOutcome,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::executor::CommandExecutor;
use loopx_provider::git::{Git, GitProvider};
use loopx_provider::process::{CommandSpec, Tee};
use loopx_provider::validator::CommandValidator;
use serde_json::json;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::context::{Ctx, parse_duration};
use crate::error::{CliError, Exit};
use crate::output::{Output, Style};
use crate::store::Location;

/// The source id of the git provider `run` observes the workspace's head with: its
/// observations are signed with the key `provider:git` has in the key directory, which
/// `goal create` registers on a signed goal.
pub const GIT_PROVIDER: &str = "git";

/// The validator `run` checks `agent`'s turns with: `validate.AGENT`.
pub fn validator_source(agent: &AgentId) -> Result<SourceId, loopx_kernel::InvalidId> {
    SourceId::new(format!("validate.{agent}"))
}

/// Flags of `loopx run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent to work as; by default the acting agent (`--as agent:NAME` or `LOOPX_ACTOR`).
    #[arg(long)]
    agent: Option<AgentId>,
    /// The executor: run once per turn in the workspace, with the turn in `LOOPX_*` variables.
    /// Split into words like a shell would (quotes, backslashes) but never run by a shell: no
    /// pipes, globs or variables; use `sh -c '…'` explicitly for those. Or give it as an
    /// argument vector after `--` instead.
    #[arg(
        long,
        value_name = "COMMAND",
        required_unless_present = "argv",
        conflicts_with = "argv"
    )]
    exec: Option<String>,
    /// The executor as an argument vector, instead of --exec: every word after `--` reaches
    /// it as it is, spaces and quotes included (`loopx run … -- claude -p "fix the test"`).
    #[arg(last = true, value_name = "EXEC")]
    argv: Vec<OsString>,
    /// Stream the executor's output to this terminal while the turn runs (its standard output
    /// to standard output, its standard error to standard error; both to standard error with
    /// --json). What is kept for the turn's report stays bounded as without it.
    #[arg(long)]
    tee: bool,
    /// The independent validator: exit code zero passes the turn; its result becomes evidence
    /// of --check about --subject at the workspace's git head. Split like --exec.
    #[arg(long, value_name = "COMMAND")]
    validate: String,
    /// The check the validator's evidence establishes.
    #[arg(long, default_value = "validate")]
    check: CheckId,
    /// What the evidence is about, e.g. `repo:acme/cli`; its revision is the git head.
    #[arg(long)]
    subject: Subject,
    /// The git working tree turns run in.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// The turn journal (a directory that must survive restarts); by default `journal/AGENT`
    /// beside a SQLite store, or `loopx/journal/AGENT` in the clone's git directory for
    /// PostgreSQL, AGENT being the agent id as one file name (letters, digits, `_` and `-`
    /// kept, any other byte written `=XX`).
    #[arg(long)]
    journal: Option<PathBuf>,
    /// Environment variables passed through to the executor and validator (PATH and HOME always
    /// are); repeat the flag for more.
    #[arg(long = "pass-env", value_name = "NAME")]
    pass_env: Vec<String>,
    /// Longest time one executor or validator run may take (e.g. 30m).
    #[arg(long, value_parser = parse_duration, default_value = "30m")]
    timeout: Duration,
    /// Lease time-to-live; the goal policy's when absent.
    #[arg(long, value_parser = parse_duration)]
    lease_ttl: Option<Duration>,
    /// Keep waiting through `wait` and `ask` (a person's answer wakes the loop) instead of
    /// stopping at them; `replan`, `repair` and `terminal` always stop. The exit code names
    /// the decision `run` stopped at (see `loopx --help`).
    #[arg(long)]
    wait: bool,
    /// Stop after this many steps.
    #[arg(long)]
    max_steps: Option<usize>,
    /// The goal's capability (`goal create --capability`) judges every step, and what it asks
    /// to be polled is: these flags say how to reach it.
    #[command(flatten)]
    wiring: crate::cmd::capability::WiringArgs,
}

pub async fn run(ctx: &Ctx, args: RunArgs) -> Result<Exit, CliError> {
    // Listening before anything starts: from here on a signal stops what runs, never only us.
    let mut signals = Signals::listen()?;
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    // An unknown goal is reported before anything runs, with the nearest known goal id.
    let spec = ctx.load(&backend, &goal).await?.spec.clone();
    let store: Arc<dyn Store> = backend.into_store();
    let agent = crate::cmd::next::asking_agent(ctx, args.agent.as_ref())?;
    let engine = build(ctx, &args, &agent, &spec, Arc::clone(&store)).await?;
    let until = if args.wait {
        Until::NeedsHost
    } else {
        Until::Idle
    };
    let mut reports = Vec::new();
    loop {
        // On a signal the step is dropped mid-way, and with it the process it runs: the
        // runner kills that process's whole group when its run is dropped. The select ends
        // (dropping the step) before anything else is done.
        let stepped = tokio::select! {
            report = engine.step(&goal) => Ok(report),
            signal = signals.next() => Err(signal),
        };
        let report = match stepped {
            Ok(report) => report.map_err(engine_error)?,
            Err(signal) => return Err(interrupted(store.as_ref(), &goal, &agent, signal).await),
        };
        if !ctx.out.json {
            println!("{}", progress(&ctx.out, reports.len() + 1, &report));
        }
        // A command the goal cannot verify is refused the same way every time: the next step
        // would decide `continue` again and never end. It is the caller's to fix (exit 3).
        if let Some(
            TurnOutcome::NotStarted { refusal, .. } | TurnOutcome::LeaseLost { refusal, .. },
        ) = &report.turn
            && unverifiable(refusal)
        {
            return Err(refusal.clone().into());
        }
        let stop = until.stops_at(&report.decision)
            || args.max_steps.is_some_and(|max| reports.len() + 1 >= max);
        reports.push(report);
        if stop {
            break;
        }
        if let Some(last) = reports.last() {
            let waited = tokio::select! {
                waited = engine.wait(last) => Ok(waited),
                signal = signals.next() => Err(signal),
            };
            match waited {
                Ok(waited) => waited.map_err(engine_error)?,
                Err(signal) => {
                    return Err(interrupted(store.as_ref(), &goal, &agent, signal).await);
                }
            }
        }
    }
    let decision = reports.last().map(|r| r.decision.clone());
    let dirty = dirty_files(&args.workspace).await;
    if ctx.out.json {
        Output::document(&json!({
            "goal": goal,
            "steps": reports,
            "decision": decision,
            "workspace_dirty": dirty,
        }));
    } else {
        if !dirty.is_empty() {
            println!("{}", dirty_warning(&ctx.out, &dirty));
        }
        if let Some(decision) = &decision {
            print!("{}", crate::decision::describe(&ctx.out, decision));
        }
    }
    Ok(decision.as_ref().map_or(Exit::Ok, exit_of))
}

/// The exit code of the decision `run` stopped at: 0 for `terminal`, one code per other kind.
fn exit_of(decision: &Decision) -> Exit {
    match decision {
        Decision::Terminal { .. } => Exit::Ok,
        Decision::Wait { .. } => Exit::Wait,
        Decision::Ask { .. } => Exit::Ask,
        Decision::Replan { .. } => Exit::Replan,
        Decision::Repair { .. } => Exit::Repair,
        Decision::Continue(_) => Exit::Continue,
    }
}

/// The files `git status` shows as changed or untracked in the workspace after the loop: what a
/// turn or a validator left behind. Evidence established on such a tree is bound to
/// `git:<sha>+dirty` and never meets a criterion at a commit. A workspace git cannot read shows
/// none (the turns already reported why).
async fn dirty_files(workspace: &std::path::Path) -> Vec<String> {
    Git::new()
        .status(workspace)
        .await
        .map(|status| status.paths)
        .unwrap_or_default()
}

fn dirty_warning(out: &Output, files: &[String]) -> String {
    let shown: Vec<&str> = files.iter().take(10).map(String::as_str).collect();
    let more = files.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "{}: the workspace has uncommitted or untracked files: {}{more}. Evidence checked on this tree is bound to a `+dirty` revision and meets no criterion; commit them, ignore them (.gitignore or .git/info/exclude), or use a validator that leaves none behind (e.g. `cargo test --locked` with Cargo.lock committed)",
        out.paint(Style::Warn, "warning"),
        shown.join(", ")
    )
}

async fn build(
    ctx: &Ctx,
    args: &RunArgs,
    agent: &AgentId,
    spec: &GoalSpec,
    store: Arc<dyn Store>,
) -> Result<Engine, CliError> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let workspace = std::fs::canonicalize(&args.workspace).map_err(|error| {
        CliError::usage(
            "workspace_missing",
            format!(
                "cannot open workspace `{}`: {error}",
                args.workspace.display()
            ),
            "point --workspace at a git working tree",
        )
    })?;
    let git = Git::new();
    let identity = git.workspace(&workspace).await.map_err(|error| {
        CliError::usage(
            "workspace_not_git",
            format!(
                "`{}` is not a git working tree: {error}",
                workspace.display()
            ),
            "run `git init` there or point --workspace at a checkout",
        )
    })?;
    let journal = args
        .journal
        .clone()
        .unwrap_or_else(|| match ctx.location() {
            // The agent id may hold `/` and `..`: it is encoded as one name, never joined raw.
            Location::Sqlite(path) => path
                .with_file_name("journal")
                .join(path_component(agent.as_str())),
            // Inside the clone's git directory: per machine, never committed, never making the
            // working tree dirty (which would bind the validator's evidence to a dirty revision).
            Location::Postgres(_) => workspace
                .join(&identity.common_dir)
                .join("loopx/journal")
                .join(path_component(agent.as_str())),
        });
    let executor = CommandExecutor::new(executor_command(ctx, args, &workspace)?, journal);
    let validator = CommandValidator::new(
        validator_source(agent)?,
        args.check.clone(),
        args.subject.clone(),
        &workspace,
        command(&args.bounds(), "--validate", &args.validate, &workspace)?,
        clock.clone(),
    );
    let head = GitProvider::new(
        SourceId::new(GIT_PROVIDER)?,
        git,
        &workspace,
        args.subject.as_str(),
        clock.clone(),
    );
    let options = EngineOptions {
        lease_ttl: args.lease_ttl,
        workspace: Some(identity),
        ..EngineOptions::default()
    };
    let key = ObservationKey::new(format!("head:{}", args.subject))?;
    let engine = Engine::builder(
        agent.clone(),
        store,
        clock.clone(),
        Arc::new(executor),
        Arc::new(validator),
    );
    let (engine, bound) = crate::cmd::capability::wire(&args.wiring, spec, engine, &clock)?;
    let mut others = vec![
        Actor::Provider(loopx_kernel::seams::Provider::source(&head).clone()),
        Actor::Validator(validator_source(agent)?),
    ];
    others.extend(bound);
    let keyring = keyring(ctx, agent, &others)?;
    Ok(engine
        .watch(Arc::new(head), key, Duration::ZERO)
        .options(options)
        .keyring(keyring)
        .build())
}

/// Whether `refusal` says the goal cannot verify who issued a command or a verdict: the same
/// again on every step, until someone registers or hands over a key.
fn unverifiable(refusal: &Refusal) -> bool {
    matches!(
        refusal,
        Refusal::SignatureMissing { .. }
            | Refusal::KeyUnregistered { .. }
            | Refusal::SignatureInvalid { .. }
            | Refusal::VerdictUnsigned { .. }
            | Refusal::VerdictSelfSigned { .. }
            | Refusal::ValidatorUnregistered { .. }
            | Refusal::ValidatorNotRegisteredForCheck { .. }
            | Refusal::VerdictSignatureInvalid { .. }
    )
}

/// The signers of the engine's commands: the agent's key (from `LOOPX_KEY` or the key
/// directory), and the key of each of `others` (its providers, its validator) that the key
/// directory holds. An actor without a key goes unsigned, which a signed goal refuses
/// (`signature_missing`, a verdict `verdict_unsigned`): its commands do not count. A validator
/// whose key sits in the agent's key directory proves only that this host checked the turn.
fn keyring(ctx: &Ctx, agent: &AgentId, others: &[Actor]) -> Result<Keyring, CliError> {
    let mut keyring = Keyring::new();
    let agent = Actor::Agent(agent.clone());
    if let Some(key) = ctx.key_of(&agent)? {
        keyring = keyring.with(agent, Arc::new(key.secret));
    }
    for actor in others {
        // `LOOPX_KEY` is the agent's: the others' keys come from their directory only (the
        // service's, for providers, validators and capabilities).
        if let Some(key) = ctx.key_dir(actor).get(actor)? {
            keyring = keyring.with(actor.clone(), Arc::new(key.secret));
        }
    }
    Ok(keyring)
}

/// The executor's command: --exec split into words, or the argument vector after `--` as it
/// is; its output streamed with --tee.
fn executor_command(
    ctx: &Ctx,
    args: &RunArgs,
    workspace: &PathBuf,
) -> Result<CommandSpec, CliError> {
    let spec = match &args.exec {
        Some(text) => command(&args.bounds(), "--exec", text, workspace)?,
        None => spec_of(&args.bounds(), "--", &args.argv, workspace)?,
    };
    // With --json, standard output holds the one document: the copy goes to standard error.
    let tee = match (args.tee, ctx.out.json) {
        (false, _) => Tee::Off,
        (true, false) => Tee::Streams,
        (true, true) => Tee::Stderr,
    };
    Ok(spec.tee(tee))
}

pub(crate) fn command(
    bounds: &Bounds<'_>,
    flag: &str,
    text: &str,
    workspace: &PathBuf,
) -> Result<CommandSpec, CliError> {
    let words = split_words(text).map_err(|problem| {
        CliError::usage(
            "command_invalid",
            format!("{flag}: {problem}"),
            "quote arguments with ' or \"",
        )
    })?;
    spec_of(bounds, flag, &words, workspace)
}

/// What bounds a command `run` or `validate` starts: its time limit, and the environment
/// variables passed through to it besides `PATH` and `HOME`.
pub(crate) struct Bounds<'a> {
    pub timeout: Duration,
    pub pass_env: &'a [String],
}

impl RunArgs {
    fn bounds(&self) -> Bounds<'_> {
        Bounds {
            timeout: self.timeout,
            pass_env: &self.pass_env,
        }
    }
}

/// The command of an argument vector, run in the workspace with the run's bounds and
/// environment.
fn spec_of<S: AsRef<std::ffi::OsStr>>(
    bounds: &Bounds<'_>,
    flag: &str,
    words: &[S],
    workspace: &PathBuf,
) -> Result<CommandSpec, CliError> {
    let mut spec = CommandSpec::from_argv(words).map_err(|error| {
        CliError::usage(
            "command_invalid",
            format!("{flag}: {error}"),
            "give a program to run",
        )
    })?;
    spec = spec
        .current_dir(workspace)
        .allow_env("PATH")
        .allow_env("HOME")
        .timeout(bounds.timeout);
    for name in bounds.pass_env {
        spec = spec.allow_env(name);
    }
    Ok(spec)
}

/// Splits a command line into words as a POSIX shell would, without running one (quotes and
/// backslash escapes; no expansion), with the `shell-words` crate.
fn split_words(text: &str) -> Result<Vec<String>, String> {
    let words = shell_words::split(text).map_err(|error| error.to_string())?;
    if words.is_empty() {
        return Err("the command is empty".into());
    }
    Ok(words)
}

/// What a failed command printed, on the lines after the step's, each marked as its output.
fn quoted(told: &str) -> String {
    told.lines().fold(String::new(), |mut text, line| {
        let _ = write!(text, "\n    │ {line}");
        text
    })
}

/// A settled turn in words, and what a failed command printed (empty when nothing failed).
fn settled_words(
    out: &Output,
    todo: &TodoId,
    again: &str,
    verdict: VerdictOutcome,
    result: Option<&TurnResult>,
) -> (String, String) {
    match result {
        Some(TurnResult::ExecutorFailed { class, detail }) => {
            let (how, told) = detail.split_once('\n').unwrap_or((detail, ""));
            let words = format!(
                "turn on `{todo}`{again} settled as failed: {} ({class}: {how})",
                out.paint(Style::Bad, "executor failed"),
            );
            (words, quoted(told))
        }
        Some(TurnResult::ValidationFailed { detail }) => {
            let (_, told) = detail.split_once('\n').unwrap_or((detail, ""));
            let words = format!(
                "turn on `{todo}`{again} settled as failed: {}",
                out.paint(Style::Bad, "validation failed"),
            );
            (words, quoted(told))
        }
        Some(TurnResult::NoProgress) => (
            format!("turn on `{todo}` settled: {verdict:?}{again}, no progress"),
            String::new(),
        ),
        Some(TurnResult::Progress) | None => (
            format!("turn on `{todo}` settled: {verdict:?}{again}"),
            String::new(),
        ),
    }
}

fn progress(out: &Output, n: usize, report: &StepReport) -> String {
    let mut line = format!("step {n:>3}  ");
    // What a failed command printed, shown under the step's line.
    let mut output = String::new();
    if !report.observed.is_empty() {
        let _ = write!(line, "observed {} · ", report.observed.len());
    }
    let accepted = report
        .proposals
        .iter()
        .filter(|p| p.refused.is_none())
        .count();
    if !report.proposals.is_empty() {
        let _ = write!(line, "proposals {accepted}/{} · ", report.proposals.len());
    }
    match &report.turn {
        Some(TurnOutcome::Settled {
            todo,
            verdict,
            resumed,
            result,
            overrun,
            usage_problem,
            charged,
            ..
        }) => {
            let again = if *resumed { " (resumed)" } else { "" };
            // A failed turn is reported as failed, whatever the validator said of the tree.
            let (words, told) = settled_words(out, todo, again, *verdict, result.as_ref());
            line.push_str(&words);
            output = told;
            if !overrun.is_zero() {
                let _ = write!(
                    line,
                    " · {} its reservation",
                    out.paint(Style::Warn, "overran")
                );
            }
            // A turn that writes no usage file and reserved no tokens or cost was charged
            // nothing in their stead: only say so when something was.
            let stood_in = charged.is_some_and(|c| c.tokens > 0 || c.cost_micros > 0);
            if let Some(problem) = usage_problem
                && (stood_in || !matches!(problem, UsageProblem::Missing))
            {
                let _ = write!(line, " · {}: {problem}", out.paint(Style::Warn, "usage"));
            }
            line.push_str(" · ");
        }
        Some(TurnOutcome::NotStarted { todo, refusal }) => {
            let _ = write!(
                line,
                "`{todo}` not started: {}: {} · ",
                refusal.code(),
                crate::error::refusal_words(refusal).0
            );
        }
        Some(TurnOutcome::LeaseLost { todo, refusal, .. }) => {
            let _ = write!(
                line,
                "{} on `{todo}`: {}: {} · ",
                out.paint(Style::Warn, "lease lost"),
                refusal.code(),
                crate::error::refusal_words(refusal).0
            );
        }
        Some(TurnOutcome::Unknown { todo, turn }) => {
            let _ = write!(
                line,
                "{} of turn {turn} on `{todo}` · ",
                out.paint(Style::Bad, "unknown outcome")
            );
        }
        None => {}
    }
    let _ = write!(
        line,
        "next: {}",
        crate::decision::headline(out, &report.decision)
    );
    line + &output
}

/// A signal that interrupts `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP (the terminal went away).
    HangUp,
}

impl Interruption {
    fn name(self) -> &'static str {
        match self {
            Interruption::Interrupt => "SIGINT",
            Interruption::Terminate => "SIGTERM",
            Interruption::HangUp => "SIGHUP",
        }
    }

    /// The shell's convention: 128 plus the signal's number.
    fn exit(self) -> Exit {
        match self {
            Interruption::Interrupt => Exit::Interrupted,
            Interruption::Terminate => Exit::Terminated,
            Interruption::HangUp => Exit::HungUp,
        }
    }
}

/// The signals that interrupt `run`, listened to from its start: their default (ending this
/// process at once) would leave the executor's process group running, since it is not ours.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hang_up: Signal,
}

impl Signals {
    fn listen() -> Result<Signals, CliError> {
        let listen = |kind: SignalKind| {
            signal(kind).map_err(|error| {
                CliError::new(
                    Exit::Other,
                    "signals_unavailable",
                    format!("cannot listen for signals, so an interrupted run could not stop its executor: {error}"),
                    "",
                )
            })
        };
        Ok(Signals {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
            hang_up: listen(SignalKind::hangup())?,
        })
    }

    /// The next signal that arrives.
    async fn next(&mut self) -> Interruption {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Interruption::Interrupt,
            Some(()) = self.terminate.recv() => Interruption::Terminate,
            Some(()) = self.hang_up.recv() => Interruption::HangUp,
            else => std::future::pending().await,
        }
    }
}

/// How long an interrupted run may spend reading what it leaves in flight.
const INTERRUPTED_READ: std::time::Duration = std::time::Duration::from_secs(5);

/// The error an interrupted run ends with, once what it ran is stopped: what it leaves in
/// flight (read from the store), and what resumes it.
async fn interrupted(
    store: &dyn Store,
    goal: &GoalId,
    agent: &AgentId,
    signal: Interruption,
) -> CliError {
    let name = signal.name();
    let state = tokio::time::timeout(INTERRUPTED_READ, store.load(goal))
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
    let in_flight = state.as_ref().and_then(|state| {
        state.todos.values().find_map(|todo| {
            let lease = todo.lease.as_deref()?;
            let turn = lease.turn.as_ref()?;
            (&lease.holder == agent).then(|| (todo.id.clone(), turn.id.clone(), lease))
        })
    });
    let (message, hint, details) = match (&state, in_flight) {
        (_, Some((todo, turn, lease))) => (
            format!(
                "interrupted by {name}: the executor's process group was stopped; turn {turn} on `{todo}` stays begun under agent:{agent}'s lease (epoch {}), no longer renewed, until {}",
                lease.epoch, lease.expires_at
            ),
            format!(
                "run `loopx run` again to resume it: it takes the turn over, settles it from the journal if the executor finished, runs it again if it never started or `{todo}` is idempotent, and otherwise stops at `repair` — then read back what the turn did and, once the lease has expired, `loopx resolve-outcome --todo {todo} --turn {turn} --resolution absent|committed`"
            ),
            json!({
                "signal": name,
                "in_flight": { "todo": todo, "turn": turn, "epoch": lease.epoch, "expires_at": lease.expires_at },
            }),
        ),
        (Some(_), None) => (
            format!(
                "interrupted by {name} between turns: nothing of agent:{agent} is left in flight"
            ),
            "run `loopx run` again to go on".to_owned(),
            json!({ "signal": name, "in_flight": null }),
        ),
        (None, None) => (
            format!(
                "interrupted by {name}: the executor's process group was stopped; the store could not be read to say what is left in flight"
            ),
            "ask `loopx next` what is left once the store answers, and run `loopx run` again to resume".to_owned(),
            json!({ "signal": name }),
        ),
    };
    let mut error = CliError::new(signal.exit(), "interrupted", message, hint);
    error.details = Some(details);
    error
}

fn engine_error(error: EngineError) -> CliError {
    match error {
        EngineError::UnknownGoal(goal) => CliError::unknown_goal(&goal),
        EngineError::Store(error) => error.into(),
        EngineError::Contended { goal } => CliError::new(
            Exit::Conflict,
            "contended",
            format!("goal `{goal}` is contended: other writers keep committing"),
            "run again; nothing was half-written",
        ),
        other => CliError::new(
            Exit::Other,
            "validator_failed",
            other.to_string(),
            "check the --validate command; the prepared turn is recovered by the next run",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::split_words;

    #[test]
    fn words_split_like_a_shell_without_one() {
        assert_eq!(
            split_words("cargo test -q").unwrap(),
            ["cargo", "test", "-q"]
        );
        assert_eq!(
            split_words(r#"sh -c 'echo "$X" | wc'"#).unwrap(),
            ["sh", "-c", r#"echo "$X" | wc"#]
        );
        assert_eq!(
            split_words(r#"a "b \"c\"" d\ e"#).unwrap(),
            ["a", r#"b "c""#, "d e"]
        );
        assert_eq!(split_words("''").unwrap(), [""]);
        assert!(split_words("'open").is_err());
        assert!(split_words("   ").is_err());
    }
}
