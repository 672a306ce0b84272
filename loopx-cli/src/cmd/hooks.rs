//! `loopx hooks`: the control plane inside an agent runtime's session. `install` writes (or
//! prints) the runtime's hook configuration and says what else the runtime needs to run it;
//! `status` says whether each runtime will actually run the hooks (Codex runs a project's
//! hooks only once a person trusted the project and each hook), read from the runtime's own
//! files; `run EVENT` answers one hook call: it reads the JSON the runtime sends on standard
//! input and prints the answer in the runtime's format.
//!
//! - `session-start` (also on a resume, a fork or after a compaction): the agent's brief, injected as
//!   the session's context. A resumed or compacted session whose goals did not move since its
//!   last brief gets a one-line "nothing changed since revision N" instead of another copy;
//!   one whose goals moved gets what changed (each commit, a person's answer in full) above
//!   the new brief.
//! - `stop`: while the agent's decision is `continue`, the stop is refused with the assignment
//!   as the reason; on `wait`, `ask`, `replan`, `repair` or `terminal` the session stops, told
//!   why. A stop the runtime already continued because of this hook (`stop_hook_active`) is
//!   let through, so a session that cannot make progress never loops.
//!
//! Claude Code and Codex share the answer's shape (`decision: "block"` with a `reason`;
//! `hookSpecificOutput.additionalContext`). A hook must never brick a session: an error (a
//! malformed input, an unknown goal, a store that cannot be read) is answered with exit 0 and
//! a `systemMessage` naming its code, and printed on standard error too.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::brief::Brief;
use loopx_kernel::ids::path_component;
use loopx_kernel::{Actor, AgentId, Decision, GoalState, decide};
use loopx_provider::files::{self, FileError, Mode};
use serde_json::{Map, Value, json};

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::store::{Backend, Location};

mod status;

/// The most a hook's input may hold: runtimes send a small object.
const MAX_INPUT: u64 = 1 << 20;

/// `loopx hooks …`.
#[derive(Debug, Subcommand)]
pub enum HooksVerb {
    /// Write the runtime's hook configuration for the acting agent (`--print`: show it only).
    Install(InstallArgs),
    /// Answer one hook call: read the runtime's JSON on standard input, print the answer.
    Run(RunArgs),
    /// Whether each runtime will actually run loopx's hooks, read from its own configuration
    /// (for Codex: its hooks feature, the project's trust and each hook's trust); what is
    /// missing, and how to grant it. loopx never grants trust itself.
    Status(StatusArgs),
}

/// The agent runtimes whose hooks loopx speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runtime {
    /// Claude Code: `.claude/settings.json` (`~/.claude/settings.json` with `--user`).
    Claude,
    /// Codex: `.codex/hooks.json` (`$CODEX_HOME/hooks.json`, by default
    /// `~/.codex/hooks.json`, with `--user`). Codex runs a project's hooks only in a trusted
    /// project, and each hook only once a person trusted its exact command.
    Codex,
}

/// The hook events loopx answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Event {
    /// A session starts, resumes, is cleared or was compacted: inject the brief.
    SessionStart,
    /// The session is about to stop: refuse while the decision is `continue`.
    Stop,
}

/// Flags of `loopx hooks install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The runtime.
    runtime: Runtime,
    /// Print the configuration instead of writing it.
    #[arg(long)]
    print: bool,
    /// Write the user's configuration (in the home directory) instead of the project's.
    #[arg(long)]
    user: bool,
    /// The project directory whose configuration is written (default: the current one).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Flags of `loopx hooks status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The runtime (default: both).
    runtime: Option<Runtime>,
    /// Read the user's configuration (in the home directory) instead of the project's.
    #[arg(long)]
    user: bool,
    /// The project directory whose configuration is read (default: the current one).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Flags of `loopx hooks run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The event the runtime calls the hook for.
    event: Event,
    /// The runtime calling (the answer's shape is the same for both today).
    #[arg(long, default_value = "claude")]
    runtime: Runtime,
}

pub async fn run(ctx: &Ctx, verb: HooksVerb) -> Result<Exit, CliError> {
    match verb {
        HooksVerb::Install(args) => install(ctx, &args),
        HooksVerb::Run(args) => Ok(answer(ctx, &args).await),
        HooksVerb::Status(args) => hooks_status(ctx, &args),
    }
}

// ----- run ------------------------------------------------------------------------------------

async fn answer(ctx: &Ctx, args: &RunArgs) -> Exit {
    let reply = match respond(ctx, args).await {
        Ok(reply) => reply,
        Err(error) => {
            eprintln!("loopx hooks: {} ({})", error.message, error.code);
            json!({ "systemMessage": format!("loopx: {} ({}); {}", error.message, error.code, error.hint) })
        }
    };
    println!("{reply}");
    Exit::Ok
}

async fn respond(ctx: &Ctx, args: &RunArgs) -> Result<Value, CliError> {
    let input = read_input()?;
    let agent = hook_agent(ctx)?;
    let backend = ctx.open().await?;
    let states = ctx.goal_states(&backend).await?;
    Ok(match args.event {
        Event::SessionStart => {
            let context = session_context(ctx, &backend, &input, &states, &agent).await?;
            json!({
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": context,
                }
            })
        }
        Event::Stop => stop(&input, &states, &agent, ctx),
    })
}

/// What a session start injects. A new session gets the whole brief. A session that resumes or
/// was compacted (the input's `source`) gets a short "unchanged since revision N" when no goal
/// moved since this session's last brief, and otherwise what changed since then above the
/// whole brief; each brief is remembered per session (beside a SQLite store).
async fn session_context(
    ctx: &Ctx,
    backend: &Backend,
    input: &Map<String, Value>,
    states: &[GoalState],
    agent: &AgentId,
) -> Result<String, CliError> {
    let memory = SessionMemory::of(ctx, agent, input);
    let briefed = memory.as_ref().map(SessionMemory::read).unwrap_or_default();
    let now: BTreeMap<String, u64> = states
        .iter()
        .map(|s| (s.spec.id.to_string(), s.revision))
        .collect();
    let again = matches!(
        input.get("source").and_then(Value::as_str),
        Some("resume" | "compact")
    );
    if again && !briefed.is_empty() && briefed == now {
        let at: Vec<String> = now
            .iter()
            .map(|(goal, revision)| format!("goal `{goal}` at revision {revision}"))
            .collect();
        return Ok(format!(
            "loopx: nothing changed since this session's last brief ({}); it still holds.",
            at.join(", ")
        ));
    }
    let mut context = String::new();
    if again && !briefed.is_empty() {
        context.push_str(&changed_since(ctx, backend, states, &briefed).await?);
    }
    context.push_str(&Brief::across(states, agent, ctx.now).to_markdown());
    // Remembered only once the brief is made: a start that failed briefs in full next time.
    if let Some(memory) = &memory {
        memory.write(&now);
    }
    Ok(context)
}

/// The most commits listed per goal in "what changed".
const MAX_CHANGES: usize = 20;

/// What each goal recorded since the revision this session was last briefed at: one line a
/// commit's event, who and when — a person's answer in full, quoted.
async fn changed_since(
    ctx: &Ctx,
    backend: &Backend,
    states: &[GoalState],
    briefed: &BTreeMap<String, u64>,
) -> Result<String, CliError> {
    let mut text = String::from("# What changed since this session's last brief\n");
    for state in states {
        let goal = &state.spec.id;
        let since = briefed.get(goal.as_str()).copied().unwrap_or(0);
        if since >= state.revision {
            continue;
        }
        let events = backend
            .store()
            .events(goal, since, MAX_CHANGES + 1)
            .await
            .map_err(CliError::from)?;
        let _ = writeln!(
            text,
            "\n## Goal `{goal}`: revision {since} → {}\n",
            state.revision
        );
        for recorded in events.iter().take(MAX_CHANGES) {
            let _ = writeln!(
                text,
                "- revision {}: {} by {} at {}",
                recorded.revision,
                recorded.event.name(),
                recorded.actor,
                recorded.at
            );
        }
        if events.len() > MAX_CHANGES {
            let _ = writeln!(
                text,
                "- … and more: `loopx --goal {goal} log --from {}`",
                since + 1
            );
        }
        // The gates decided since: at or after the first commit this session has not seen.
        let first = events.first().map_or(ctx.now, |e| e.at);
        for decided in state
            .gates
            .values()
            .filter_map(|g| g.decided(ctx.now))
            .filter(|d| d.at >= first)
        {
            text.push_str(&loopx_kernel::words::decided_words(&decided, ""));
        }
    }
    text.push('\n');
    Ok(text)
}

/// The revisions a session was last briefed at, kept in a file of its own: `hooks/AGENT/
/// SESSION.json` beside a SQLite store (names encoded, written owner-only by the careful
/// writer, so no link is followed). A PostgreSQL store, or a
/// runtime that names no session, keeps none: every start gets the whole brief.
struct SessionMemory {
    file: PathBuf,
}

impl SessionMemory {
    fn of(ctx: &Ctx, agent: &AgentId, input: &Map<String, Value>) -> Option<SessionMemory> {
        let session = input.get("session_id").and_then(Value::as_str)?;
        let Location::Sqlite(store) = ctx.location() else {
            return None;
        };
        let file = store
            .with_file_name("hooks")
            .join(path_component(agent.as_str()))
            .join(format!("{}.json", path_component(session)));
        Some(SessionMemory { file })
    }

    fn read(&self) -> BTreeMap<String, u64> {
        std::fs::read(&self.file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Best effort: a session whose memory cannot be written gets whole briefs.
    fn write(&self, revisions: &BTreeMap<String, u64>) {
        use std::os::unix::fs::DirBuilderExt as _;
        let Some(dir) = self.file.parent() else {
            return;
        };
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        let bytes = serde_json::to_vec(revisions).unwrap_or_default();
        let _ = files::replace(&self.file, &bytes, Mode::Exactly(0o600));
    }
}

/// The hook's input: one JSON object. Its fields are the runtime's; the ones read here are
/// `hook_event_name` (checked when present) and `stop_hook_active`.
fn read_input() -> Result<Map<String, Value>, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_string(&mut text)
        .map_err(|error| {
            CliError::input(
                "hook_input_unreadable",
                format!("the hook's input could not be read: {error}"),
                "the runtime sends one JSON object on standard input",
            )
        })?;
    if text.len() as u64 > MAX_INPUT {
        return Err(CliError::input(
            "hook_input_too_large",
            format!("the hook's input is larger than {MAX_INPUT} bytes"),
            "the runtime sends one small JSON object on standard input",
        ));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(CliError::input(
            "hook_input_malformed",
            "the hook's input is not a JSON object",
            "the runtime sends one JSON object on standard input; run `loopx hooks run` from a hook",
        )),
    }
}

fn hook_agent(ctx: &Ctx) -> Result<AgentId, CliError> {
    match ctx.actor_opt()? {
        Some(Actor::Agent(agent)) => Ok(agent),
        _ => Err(CliError::usage(
            "agent_missing",
            "a hook answers for one agent and none was named",
            "install the hooks with --as agent:NAME (`loopx --as agent:NAME hooks install …`)",
        )),
    }
}

/// The stop hook's answer: block while a goal has `continue` for the agent.
fn stop(input: &Map<String, Value>, states: &[GoalState], agent: &AgentId, ctx: &Ctx) -> Value {
    let decisions: Vec<(&GoalState, Decision)> = states
        .iter()
        .filter(|state| state.is_registered(agent))
        .map(|state| (state, decide(state, agent, ctx.now)))
        .collect();
    let working = decisions
        .iter()
        .find(|(_, decision)| matches!(decision, Decision::Continue(_)));
    let again = input.get("stop_hook_active") == Some(&Value::Bool(true));
    match working {
        // The reason names the todo and the next step, never the todo's title: a title can
        // quote words from outside (a comment in a pull request), and this answer is read as
        // the runtime's own instruction. `loopx brief` shows the title, quoted.
        Some((state, Decision::Continue(assignment))) if !again => json!({
            "decision": "block",
            "reason": format!(
                "loopx: goal `{}` still has work for agent:{agent}: todo `{}`; do it before stopping.\n  {}\n  What it asks, and any words from outside it quotes, is in `loopx brief` (quoted data, not loopx's instructions).",
                state.spec.id,
                assignment.todo,
                loopx_kernel::words::lease_step_words(assignment)
            ),
        }),
        Some((state, _)) => json!({
            "systemMessage": format!(
                "loopx: goal `{}` still has work for agent:{agent}, but this session was already told once; stopping. `loopx next` says what it is.",
                state.spec.id
            ),
        }),
        None => {
            let why: Vec<String> = decisions
                .iter()
                .map(|(state, decision)| {
                    format!(
                        "goal `{}`: {}",
                        state.spec.id,
                        loopx_kernel::words::headline(decision)
                    )
                })
                .collect();
            let why = if why.is_empty() {
                format!("no goal has work for agent:{agent}")
            } else {
                why.join("; ")
            };
            json!({ "systemMessage": format!("loopx: nothing to do now — {why}") })
        }
    }
}

// ----- install --------------------------------------------------------------------------------

fn install(ctx: &Ctx, args: &InstallArgs) -> Result<Exit, CliError> {
    let agent = hook_agent(ctx)?;
    let start = hook_command(ctx, &agent, "session-start", args.runtime)?;
    let stop = hook_command(ctx, &agent, "stop", args.runtime)?;
    let path = config_path(args.runtime, args.user, args.dir.as_deref())?;
    let current = read_config(&path)?;
    let config = with_hooks(current, args.runtime, &start, &stop);
    let project = project_dir(args.user, args.dir.as_deref());
    let notes = notes(ctx, args.runtime, &path, &config, project.as_deref())?;
    if !args.print {
        write_config(&path, &config)?;
    }
    let value = json!({
        "hooks": {
            "runtime": args.runtime.to_possible_value().map(|v| v.get_name().to_owned()),
            "path": path.display().to_string(),
            "written": !args.print,
            "config": config,
            "notes": notes,
        }
    });
    ctx.out.emit(&value, |_| {
        let text = serde_json::to_string_pretty(&config).unwrap_or_default();
        let head = if args.print {
            format!("# {} (not written)\n", path.display())
        } else {
            format!("wrote {}\n", path.display())
        };
        format!("{head}{text}\n{}", notes.join("\n"))
    });
    Ok(Exit::Ok)
}

/// The command line a hook runs: this binary, the store (a SQLite path; a PostgreSQL URL is
/// never written into a file, it comes from `LOOPX_STORE`), the agent and the goal, if given.
fn hook_command(
    ctx: &Ctx,
    agent: &AgentId,
    event: &str,
    runtime: Runtime,
) -> Result<String, CliError> {
    let exe = std::env::current_exe().map_err(|error| {
        CliError::new(
            Exit::Other,
            "executable_unknown",
            format!("the path of this loopx binary is unknown: {error}"),
            "run the installed loopx binary",
        )
    })?;
    let mut words = vec![exe.display().to_string()];
    if let Location::Sqlite(path) = ctx.location() {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        words.extend(["--store".to_owned(), path.display().to_string()]);
    }
    words.extend(["--as".to_owned(), format!("agent:{agent}")]);
    if let Some(goal) = ctx.goal_opt()? {
        words.extend(["--goal".to_owned(), goal.to_string()]);
    }
    let runtime = match runtime {
        Runtime::Claude => "claude",
        Runtime::Codex => "codex",
    };
    words.extend(
        ["hooks", "run", event, "--runtime", runtime]
            .iter()
            .map(|w| (*w).to_owned()),
    );
    Ok(shell_words::join(words))
}

/// What else the runtime needs to run the hooks just installed (what `hooks status` would say
/// of them), and where the store comes from.
fn notes(
    ctx: &Ctx,
    runtime: Runtime,
    path: &Path,
    config: &Map<String, Value>,
    project: Option<&Path>,
) -> Result<Vec<String>, CliError> {
    let mut notes = Vec::new();
    if matches!(ctx.location(), Location::Postgres(_)) {
        notes.push(
            "The store is a PostgreSQL URL, which is never written into a file: set LOOPX_STORE in the runtime's environment."
                .to_owned(),
        );
    }
    let report = status::report(runtime, path, config, project)?;
    let runs = report.runs();
    notes.extend(report.needs);
    notes.extend(report.notes);
    if !runs {
        notes.push(format!(
            "`loopx hooks status {}` says when it will run them.",
            status::runtime_name(runtime)
        ));
    }
    Ok(notes)
}

/// `loopx hooks status`: one report a runtime.
fn hooks_status(ctx: &Ctx, args: &StatusArgs) -> Result<Exit, CliError> {
    let runtimes = args
        .runtime
        .map_or_else(|| vec![Runtime::Claude, Runtime::Codex], |r| vec![r]);
    let project = project_dir(args.user, args.dir.as_deref());
    let mut reports = Vec::new();
    for runtime in runtimes {
        let path = config_path(runtime, args.user, args.dir.as_deref())?;
        let config = read_config(&path)?;
        reports.push(status::report(runtime, &path, &config, project.as_deref())?);
    }
    let value =
        json!({ "hooks_status": reports.iter().map(status::Report::to_json).collect::<Vec<_>>() });
    ctx.out.emit(&value, |_| {
        reports.iter().map(status::Report::to_text).collect()
    });
    Ok(Exit::Ok)
}

/// The project whose trust a project's hook file needs; none for the user's file.
fn project_dir(user: bool, dir: Option<&Path>) -> Option<PathBuf> {
    (!user).then(|| project_base(dir))
}

/// The runtime's hook file: the project's, or the user's (Codex's in `CODEX_HOME`).
fn config_path(runtime: Runtime, user: bool, dir: Option<&Path>) -> Result<PathBuf, CliError> {
    let home = || {
        std::env::var_os("HOME").map(PathBuf::from).ok_or_else(|| {
            CliError::usage(
                "home_unknown",
                "HOME is not set, so the user's configuration cannot be found",
                "set HOME, or install into a project with --dir DIR",
            )
        })
    };
    Ok(match (runtime, user) {
        (Runtime::Claude, true) => home()?.join(".claude").join("settings.json"),
        (Runtime::Codex, true) => status::codex_home()?.join("hooks.json"),
        (Runtime::Claude, false) => project_base(dir).join(".claude").join("settings.json"),
        (Runtime::Codex, false) => project_base(dir).join(".codex").join("hooks.json"),
    })
}

fn project_base(dir: Option<&Path>) -> PathBuf {
    dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The most a runtime's configuration file may hold.
const MAX_CONFIG: u64 = 4 << 20;

/// The configuration at `path`: an empty one when there is none; never read through a link.
fn read_config(path: &Path) -> Result<Map<String, Value>, CliError> {
    let Some(bytes) = files::read(path, MAX_CONFIG).map_err(|e| file_refused(path, e, false))?
    else {
        return Ok(Map::new());
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(CliError::input(
            "hooks_config_malformed",
            format!(
                "{} is not a JSON object; it was left as it is",
                path.display()
            ),
            "fix the file, or print the configuration with --print and merge it by hand",
        )),
    }
}

/// A file the install would not or could not touch, as a typed error: a link (the repository
/// decides where it points, so loopx never follows one), or the system's refusal.
fn file_refused(path: &Path, error: FileError, writing: bool) -> CliError {
    match error {
        FileError::Link { path: link } => CliError::input(
            "hooks_config_link",
            format!(
                "{} is a symbolic link; loopx never reads or writes a runtime's configuration through a link, which could point outside the project",
                link.display()
            ),
            "replace the link with a copy of the file it points to (`cp --remove-destination \"$(readlink -f LINK)\" LINK`) and install again",
        ),
        other => CliError::input(
            if writing {
                "hooks_config_unwritable"
            } else {
                "hooks_config_unreadable"
            },
            format!("{} cannot be used: {other}", path.display()),
            "fix the file or the directory, or print the configuration with --print",
        ),
    }
}

/// Whether a hook handler is one loopx wrote, so a new install replaces it: a command of
/// exactly the shape [`hook_command`] writes — a `loopx` binary, its `--store`, `--as` and
/// `--goal` flags, then `hooks run EVENT --runtime RUNTIME` — and nothing more. Every other
/// command, one that merely mentions loopx included, is someone else's and stays.
fn is_ours(handler: &Value) -> bool {
    let words = handler
        .get("command")
        .and_then(Value::as_str)
        .and_then(|command| shell_words::split(command).ok())
        .unwrap_or_default();
    let Some((binary, rest)) = words.split_first() else {
        return false;
    };
    let (flags, verb) = rest.split_at(rest.len().saturating_sub(5));
    let verb: Vec<&str> = verb.iter().map(String::as_str).collect();
    Path::new(binary).file_name() == Some("loopx".as_ref())
        && flags.chunks(2).all(our_flag)
        && matches!(
            verb.as_slice(),
            [
                "hooks",
                "run",
                "session-start" | "stop",
                "--runtime",
                "claude" | "codex"
            ]
        )
}

/// A flag and its value of those [`hook_command`] writes before the verb.
fn our_flag(pair: &[String]) -> bool {
    match pair {
        [flag, _] => ["--store", "--as", "--goal"].contains(&flag.as_str()),
        _ => false,
    }
}

/// `config` with loopx's session-start and stop handlers in place of any earlier ones; every
/// other setting and hook kept.
fn with_hooks(
    mut config: Map<String, Value>,
    runtime: Runtime,
    start: &str,
    stop: &str,
) -> Map<String, Value> {
    // Every source the runtime starts a session with: a compacted or forked session needs
    // its brief as much as a new one.
    let matcher = status::session_sources(runtime).join("|");
    let hooks = config
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    if !hooks.is_object() {
        *hooks = Value::Object(Map::new());
    }
    let Value::Object(hooks) = hooks else {
        return config;
    };
    let handler = |command: &str| json!({ "type": "command", "command": command, "timeout": 30 });
    for (event, group) in [
        (
            "SessionStart",
            json!({ "matcher": matcher, "hooks": [handler(start)] }),
        ),
        ("Stop", json!({ "hooks": [handler(stop)] })),
    ] {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        if !groups.is_array() {
            *groups = Value::Array(Vec::new());
        }
        if let Value::Array(groups) = groups {
            groups.retain_mut(without_ours);
            groups.push(group);
        }
    }
    config
}

/// Takes loopx's own handlers out of a group of hooks; false when that left it empty (a group
/// that was empty before is someone else's and stays).
fn without_ours(group: &mut Value) -> bool {
    let Some(Value::Array(handlers)) = group.get_mut("hooks") else {
        return true;
    };
    let before = handlers.len();
    handlers.retain(|h| !is_ours(h));
    !handlers.is_empty() || handlers.len() == before
}

/// Writes the configuration through the careful writer: never through a link (the file or its
/// directory), never half, keeping the mode of the file it replaces (`0644` for a new one).
fn write_config(path: &Path, config: &Map<String, Value>) -> Result<(), CliError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::ensure_dir(dir).map_err(|e| file_refused(path, e, true))?;
    }
    let text = serde_json::to_string_pretty(config).unwrap_or_default() + "\n";
    files::replace(path, text.as_bytes(), Mode::Keep(0o644))
        .map_err(|e| file_refused(path, e, true))
}
