//! loopx's hooks and MCP tools in the real agent runtimes: Claude Code and Codex (pinned in
//! `tests/runtimes/package.json`), run non-interactively against a scripted model on loopback
//! (`tests/runtimes/model.py`, speaking the Anthropic Messages and `OpenAI` Responses streaming
//! APIs) that logs every request the runtime sends. The asserts read that log and the store:
//! the brief from the session-start hook reached the model, loopx's MCP tools were offered and
//! a call changed the store, the stop hook's reason came back to the model while the decision
//! was `continue`, and a session stopped without it once the goal was terminal.
//!
//! The runtimes' paths come from `CLAUDE_BIN` and `CODEX_BIN` (`.ci/run` sets them), else
//! `tests/runtimes/node_modules/.bin`; without them the test fails, saying how to install them.

mod support;

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Loopx, validator_key};

const GOAL: &str = "runtime-goal";
/// What the scripted model passes to loopx's `claim` tool.
const CLAIM: &str = r#"{"goal":"runtime-goal","todo":"edit"}"#;
/// The most a runtime's run may take, and the most of its output kept.
const RUN_LIMIT: Duration = Duration::from_secs(60);
const MAX_OUTPUT: u64 = 1 << 20;

fn runtimes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("runtimes")
}

/// The runtime's binary: `$VAR`, else the pinned package's.
fn binary(var: &str, name: &str) -> PathBuf {
    let path = std::env::var_os(var).filter(|p| !p.is_empty()).map_or_else(
        || runtimes_dir().join("node_modules").join(".bin").join(name),
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "no {name} at {}: install the pinned runtimes with `npm ci` in loopx-cli/tests/runtimes (node and npm needed), or set {var}",
        path.display()
    );
    path
}

/// The scripted model on loopback; killed when dropped.
struct Model {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Model {
    fn start(dir: &Path) -> Model {
        let log = dir.join("requests.jsonl");
        let mut child = Command::new("python3")
            .arg(runtimes_dir().join("model.py"))
            .env("LOG", &log)
            .env("TOOL", "claim")
            .env("TOOL_INPUT", CLAIM)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs (the scripted model needs Python 3)");
        let mut port = String::new();
        let stdout = child.stdout.take().expect("the model's output");
        BufReader::new(stdout.take(64))
            .read_line(&mut port)
            .expect("the model's port");
        let url = format!("http://127.0.0.1:{}", port.trim());
        Model { child, url, log }
    }

    /// The requests logged since `from` of them.
    fn requests(&self, from: usize) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .skip(from)
            .map(|line| serde_json::from_str(line).expect("a logged request"))
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command` to its end within [`RUN_LIMIT`] (killed past it); its standard output,
/// bounded. Fails on a non-zero exit, showing the output's tail.
fn run(mut command: Command, dir: &Path) -> String {
    let out = dir.join("run.out");
    let err = dir.join("run.err");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("the output file"))
        .stderr(std::fs::File::create(&err).expect("the error file"))
        .spawn()
        .expect("the runtime starts");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("the runtime's status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} ran past {RUN_LIMIT:?}: {}", bounded(&err));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = bounded(&out);
    assert!(
        status.success(),
        "{command:?} failed ({status}):\n{stdout}\n{}",
        bounded(&err)
    );
    stdout
}

fn bounded(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(MAX_OUTPUT).read_to_string(&mut text);
    }
    text
}

/// The goal, with agent-a registered and its one todo, `edit`: the decision is `continue`.
fn seed(lx: &Loopx) {
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "goal",
        "create",
        "--objective",
        "add --format json to the CLI",
        "--criterion",
        "text-unchanged,tests.text_output,repo:acme/cli,default text output unchanged",
        "--agent",
        "agent-a",
        "--register-key",
        &validator_key(lx),
    ]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "todo",
        "add",
        "--id",
        "edit",
        "--title",
        "change the output layer",
    ]);
}

fn abandon(lx: &Loopx) {
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "goal",
        "abandon",
        "--reason",
        "superseded by another plan",
    ]);
}

/// Whether any of `requests` holds `text` anywhere in its body.
fn any_holds(requests: &[Value], text: &str) -> bool {
    requests
        .iter()
        .any(|r| r["body"].to_string().contains(text))
}

/// Whether the stop hook refused a stop within `requests` (one run's): a later request holds
/// its reason more often than the first (which holds the history before the run).
fn kept_going(requests: &[Value]) -> bool {
    let count = |r: &Value| r["body"].to_string().matches(KEEP_GOING).count();
    match (requests.first(), requests.last()) {
        (Some(first), Some(last)) => count(last) > count(first),
        _ => false,
    }
}

/// The agent's lease on `edit`, taken through the MCP tool, is in the store's history.
fn claimed(lx: &Loopx) -> bool {
    lx.ok(&["--goal", GOAL, "log"])
        .to_string()
        .contains("lease_acquired")
}

/// The words the stop hook blocks with while the decision is `continue`.
const KEEP_GOING: &str = "still has work for agent:agent-a";
/// The heading of the brief.
const BRIEF: &str = "# Brief for agent:agent-a";
/// The heading of what a resumed session is told changed.
const CHANGED: &str = "What changed since this session's last brief";

fn loopx_exe() -> &'static str {
    env!("CARGO_BIN_EXE_loopx")
}

#[test]
fn claude_code_gets_the_brief_calls_the_tools_and_is_kept_going_until_terminal() {
    let claude = binary("CLAUDE_BIN", "claude");
    let lx = Loopx::sqlite();
    seed(&lx);
    let project = lx.path("project");
    let home = lx.path("home");
    std::fs::create_dir_all(&home).expect("a home");
    std::fs::create_dir_all(&project).expect("a project");
    let dir = project.display().to_string();
    lx.ok(&[
        "--as",
        "agent:agent-a",
        "hooks",
        "install",
        "claude",
        "--dir",
        &dir,
    ]);
    let mcp = serde_json::json!({ "mcpServers": { "loopx": {
        "command": loopx_exe(), "args": ["--store", &lx.store, "mcp", "--as", "agent:agent-a"] } } });
    std::fs::write(project.join(".mcp.json"), mcp.to_string()).expect("the MCP config");
    let model = Model::start(lx.dir.path());
    let session = |args: &[&str]| {
        let mut command = Command::new(&claude);
        command
            .args(["-p", "--output-format", "json", "--strict-mcp-config"])
            .args([
                "--mcp-config",
                ".mcp.json",
                "--allowedTools=mcp__loopx__claim",
            ])
            .args(args)
            .current_dir(&project)
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", &model.url)
            .env("ANTHROPIC_API_KEY", "dummy-key-for-a-scripted-model")
            // Every MCP tool in the request's tool list, not deferred behind a search tool.
            .env("ENABLE_TOOL_SEARCH", "false");
        let out = run(command, lx.dir.path());
        serde_json::from_str::<Value>(out.trim()).expect("claude's JSON result")
    };

    // A new session: the brief in the first request, loopx's tools offered, the claim made
    // through the tool, the stop refused with the assignment, which reached the model.
    let first = session(&["CALL_TOOL: claim the todo"]);
    let id = first["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let requests = model.requests(0);
    assert!(any_holds(&requests[..1], BRIEF), "{:?}", requests.first());
    let tools = requests[0]["body"]["tools"].to_string();
    assert!(tools.contains("mcp__loopx__claim") && tools.contains("mcp__loopx__next"));
    assert!(claimed(&lx), "the MCP claim is in the store");
    assert!(
        kept_going(&requests),
        "the stop hook's reason reached the model"
    );
    let seen = requests.len();

    // Compacted (`/compact` in print mode): the runtime summarises the conversation.
    session(&["--resume", &id, "/compact"]);
    let compacted = model.requests(seen);
    assert!(
        !compacted.is_empty(),
        "the compaction asked the model for a summary"
    );
    let seen = seen + compacted.len();

    // The goal ended meanwhile; resumed, the session is told what changed and stops at once.
    abandon(&lx);
    session(&["--resume", &id, "go on"]);
    let resumed = model.requests(seen);
    assert!(any_holds(&resumed, CHANGED), "{resumed:?}");
    assert!(
        !kept_going(&resumed),
        "a terminal goal lets the session stop"
    );
}

/// Codex's configuration in its home: the scripted model as its provider (Responses API, no
/// websocket), loopx's MCP server, and — when `trust` holds `hooks status`'s report — the
/// project's and each hook's trust, as a person grants them.
fn codex_config(lx: &Loopx, model: &Model, project: &str, trust: Option<&Value>) -> String {
    use std::fmt::Write as _;
    let mut config = format!(
        "model = \"scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\nenv_key = \"SCRIPTED_API_KEY\"\nwire_api = \"responses\"\nsupports_websockets = false\n\n[mcp_servers.loopx]\ncommand = {:?}\nargs = [\"--store\", {:?}, \"mcp\", \"--as\", \"agent:agent-a\"]\n",
        model.url,
        loopx_exe(),
        lx.store
    );
    if let Some(report) = trust {
        let _ = writeln!(
            config,
            "\n[projects.{project:?}]\ntrust_level = \"trusted\""
        );
        for hook in report["hooks"].as_array().into_iter().flatten() {
            let _ = writeln!(
                config,
                "[hooks.state.{:?}]\ntrusted_hash = {:?}",
                hook["key"].as_str().unwrap_or_default(),
                hook["hash"].as_str().unwrap_or_default()
            );
        }
    }
    config
}

#[test]
fn codex_runs_the_hooks_only_once_trusted_then_briefs_calls_the_tools_and_keeps_going() {
    let codex = binary("CODEX_BIN", "codex");
    let lx = Loopx::sqlite();
    seed(&lx);
    let project = lx.path("project");
    let home = lx.path("codex-home");
    std::fs::create_dir_all(&project).expect("a project");
    std::fs::create_dir_all(&home).expect("a Codex home");
    let dir = project.display().to_string();
    let codex_home = home.display().to_string();
    let env = [("CODEX_HOME", codex_home.as_str())];
    let installed = lx.run_env(
        &[
            "--as",
            "agent:agent-a",
            "hooks",
            "install",
            "codex",
            "--dir",
            &dir,
        ],
        &env,
    );
    assert_eq!(installed.code, 0, "{installed:?}");
    let model = Model::start(lx.dir.path());
    let status = || {
        let run = lx.run_env(&["--json", "hooks", "status", "codex", "--dir", &dir], &env);
        run.json()["hooks_status"][0].clone()
    };
    let session = |args: &[&str]| {
        let mut command = Command::new(&codex);
        command
            .args(["exec"])
            .args(args)
            .args(["--json", "--skip-git-repo-check"])
            // The scripted model's tool call runs without a person to approve it.
            .arg("--dangerously-bypass-approvals-and-sandbox")
            .current_dir(&project)
            .env("CODEX_HOME", &home)
            .env("SCRIPTED_API_KEY", "dummy-key-for-a-scripted-model");
        run(command, lx.dir.path())
    };
    let config = home.join("config.toml");

    // Untrusted, as the install leaves it: status says so, and Codex indeed runs no hook.
    std::fs::write(&config, codex_config(&lx, &model, &dir, None)).expect("config");
    let untrusted = status();
    assert_eq!(untrusted["runs"], false, "{untrusted}");
    session(&["say hello"]);
    let requests = model.requests(0);
    assert!(!requests.is_empty(), "codex asked the scripted model");
    assert!(!any_holds(&requests, BRIEF), "no brief without trust");
    let seen = requests.len();

    // Trusted as a person would (the project, and each hook by the hash status reports).
    std::fs::write(&config, codex_config(&lx, &model, &dir, Some(&untrusted))).expect("config");
    assert_eq!(status()["runs"], true);
    let out = session(&["CALL_TOOL: claim the todo"]);
    let thread = thread_id(&out);
    let requests = model.requests(seen);
    assert!(any_holds(&requests[..1], BRIEF), "{:?}", requests.first());
    assert!(
        requests[0]["body"]["tools"]
            .to_string()
            .contains("mcp__loopx"),
        "loopx's MCP tools are offered"
    );
    assert!(claimed(&lx), "the MCP claim is in the store");
    assert!(
        kept_going(&requests),
        "the stop hook's reason reached the model"
    );
    let seen = seen + requests.len();

    // Forked: a new session, briefed in full.
    session(&["fork", &thread, "go on"]);
    let forked = model.requests(seen);
    assert!(any_holds(&forked, BRIEF), "{forked:?}");
    let seen = seen + forked.len();

    // The goal ended; resumed, the session is told what changed and stops at once.
    abandon(&lx);
    session(&["resume", &thread, "go on"]);
    let resumed = model.requests(seen);
    assert!(any_holds(&resumed, CHANGED), "{resumed:?}");
    assert!(
        !kept_going(&resumed),
        "a terminal goal lets the session stop"
    );
}

/// The thread id of `codex exec --json`'s first event.
fn thread_id(out: &str) -> String {
    out.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|event| event["thread_id"].as_str().map(str::to_owned))
        .expect("codex names its thread")
}
