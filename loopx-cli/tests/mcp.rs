//! An agent session end to end over MCP, with the official Python client (`mcp`, pinned):
//! `tests/mcp/story.py` drives the seed story through loopx's tools to `terminal (accepted)`
//! — over `loopx mcp` on stdio, and over the streamable HTTP router with a bearer token — with
//! a refused stale-epoch settle surfacing as a tool error with its code, and the gate answered
//! meanwhile from the CLI. The script prints one JSON line per step; the asserts are here.
//!
//! The client runs in a virtual environment: the one whose python `LOOPX_MCP_PYTHON` names
//! (`.ci/run` makes it), else one this test makes under `target/` and pip-installs the pinned
//! client into (which needs the package index). Without either the test fails, saying why.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use loopx_kernel::seams::Store;
use loopx_kernel::{Actor, AgentId};
use loopx_provider::clock::SystemClock;
use loopx_provider::keys::{self, KeyDir};
use loopx_server::mcp::{Acting, LoopxMcp, Tokens, http};
use loopx_store::SqliteStore;
use serde_json::Value;
use support::{GOAL, Loopx, validator_key};

/// The pinned client, as `.ci/run` installs it.
const CLIENT: &str = "mcp==2.3.0";

/// The python of the virtual environment the client is installed in.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Some(python) = std::env::var_os("LOOPX_MCP_PYTHON").filter(|p| !p.is_empty()) {
            return PathBuf::from(python);
        }
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
        let python = venv.join("bin").join("python");
        let installed = Command::new(&python)
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            let made = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect("python3 runs (the MCP client test needs Python 3 with venv)");
            assert!(made.success(), "python3 -m venv {} failed", venv.display());
            let pip = Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", CLIENT])
                .status()
                .expect("pip runs in the new virtual environment");
            assert!(
                pip.success(),
                "pip install {CLIENT} failed: the MCP client test needs the package index, or LOOPX_MCP_PYTHON naming a python with {CLIENT}"
            );
        }
        python
    })
}

/// The store of the seed story before the agent's session: the goal, created by its owner
/// with the validator's key registered, and the agent's three todos.
fn seed(lx: &Loopx) {
    lx.ok(&["init"]);
    let validator = validator_key(lx);
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
        "--criterion",
        "json-schema-tested,tests.json_schema,repo:acme/cli,the JSON schema has tests",
        "--agent",
        "agent-a",
        "--turns",
        "20",
        "--tokens",
        "500000",
        "--register-key",
        &validator,
    ]);
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
    for (id, title, priority) in [
        (
            "change-output-layer",
            "change the output layer and add tests",
            "p1",
        ),
        ("update-help", "document --format in --help", "p2"),
        ("document-json", "document the JSON fields", "p2"),
    ] {
        lx.ok(&[
            &agent[..],
            &[
                "todo",
                "add",
                "--id",
                id,
                "--title",
                title,
                "--priority",
                priority,
            ],
        ]
        .concat());
    }
}

/// Runs the story script; its JSON lines.
fn story(args: &[&str]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/story.py");
    let output = Command::new(python())
        .arg(&script)
        .args(args)
        .output()
        .expect("run the story script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the story over MCP failed:\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON document per line"))
        .collect()
}

/// The first step reported under `name`.
fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step `{name}` in {steps:#?}"))
}

/// What both transports must show of the story.
fn assert_story(steps: &[Value]) {
    let tools = step(steps, "tools");
    let names: Vec<&str> = tools["names"]
        .as_array()
        .expect("tool names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        names,
        [
            "begin",
            "block",
            "brief",
            "claim",
            "defer",
            "discharge",
            "evidence_add",
            "gate_open",
            "handoff",
            "next",
            "observe",
            "ready",
            "release",
            "renew",
            "resolve_outcome",
            "settle",
            "status",
        ]
    );
    assert_eq!(tools["schemas"], true, "every tool has an object schema");
    let brief = step(steps, "brief")["markdown"].as_str().expect("markdown");
    assert!(
        brief.contains("change-output-layer"),
        "the brief names the assignment:\n{brief}"
    );

    let first = step(steps, "next_first");
    assert_eq!(first["kind"], "continue");
    assert_eq!(first["todo"], "change-output-layer");
    assert_eq!(first["lease"], "claim");

    let pending = step(steps, "next_while_gate_pending");
    assert_eq!(pending["kind"], "continue", "independent work goes on");
    assert_eq!(pending["todo"], "update-help");

    let stale = step(steps, "stale_settle");
    assert_eq!(stale["code"], "stale_lease_epoch");
    assert_eq!(stale["presented"], stale["first"]);
    assert!(
        stale["hint"]
            .as_str()
            .is_some_and(|h| h.contains("loopx next")),
        "the hint is the CLI's: {stale}"
    );

    let settles: Vec<&Value> = steps.iter().filter(|s| s["step"] == "settle").collect();
    assert_eq!(settles.len(), 3, "three turns settled: {settles:#?}");
    assert!(
        settles
            .iter()
            .all(|s| s["status"] == "done" && s["replayed"] == false)
    );
    assert_eq!(settles[2]["turns_left"], 17);

    let stale_evidence = &step(steps, "status_stale")["stale"];
    assert_eq!(
        stale_evidence,
        &serde_json::json!([
            "tests.json_schema@git:abc123",
            "tests.text_output@git:abc123"
        ]),
        "def456 makes the abc123 evidence stale"
    );

    let answered = step(steps, "next_after_answer");
    assert_eq!(answered["kind"], "continue", "{answered}");
    assert_eq!(answered["todo"], "document-json");
    let ready = step(steps, "ready");
    assert_eq!(ready["agent"], "agent-a");
    assert_eq!(
        ready["ready"],
        serde_json::json!([{"goal": GOAL, "todo": "document-json"}])
    );

    let terminal = step(steps, "next_terminal");
    assert_eq!(terminal["kind"], "terminal");
    assert_eq!(terminal["outcome"], "accepted");
    let resources = step(steps, "resources");
    assert_eq!(
        resources["uris"],
        serde_json::json!([
            format!("loopx://goal/{GOAL}"),
            format!("loopx://goal/{GOAL}/log")
        ])
    );
    assert!(resources["terminal"].is_string(), "{resources}");
    assert!(resources["events"].as_u64().is_some_and(|n| n > 10));
    assert_eq!(steps.last().map(|s| &s["step"]), Some(&Value::from("done")));
}

#[test]
fn an_agent_session_over_stdio_drives_the_seed_story_to_accepted() {
    let lx = Loopx::sqlite();
    seed(&lx);
    let steps = story(&["stdio", env!("CARGO_BIN_EXE_loopx"), &lx.store, GOAL]);
    assert_story(&steps);
}

#[test]
fn an_agent_session_over_http_with_a_bearer_token_drives_the_seed_story_to_accepted() {
    let lx = Loopx::sqlite();
    seed(&lx);
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&lx.store).expect("open the seeded store"));
    let agent = Actor::Agent(AgentId::new("agent-a").expect("an agent id"));
    let keys = KeyDir::new(PathBuf::from(format!("{}.keys", lx.store)));
    let key = keys::find_with(&keys, &agent, None)
        .expect("read the key directory")
        .expect("the agent's key, made by goal create");
    let tokens = Tokens::new()
        .with(
            "token-of-agent-a-8c3f1a9e6b2d7f4c",
            Acting::signed(agent, Arc::new(key.secret)),
        )
        .expect("a strong token");
    let tools = LoopxMcp::new(store, Arc::new(SystemClock));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    runtime.spawn(async move {
        let _ = axum::serve(listener, http::router(tools, tokens)).await;
    });
    let url = format!("http://{address}{}", http::PATH);
    let steps = story(&[
        "http",
        env!("CARGO_BIN_EXE_loopx"),
        &lx.store,
        GOAL,
        &url,
        "token-of-agent-a-8c3f1a9e6b2d7f4c",
        "not-a-token",
    ]);
    let wrong = step(&steps, "wrong_token");
    assert_eq!(wrong["status"], 401);
    assert_eq!(wrong["body"]["code"], "unauthorized");
    assert_eq!(wrong["challenge"], "Bearer realm=\"loopx\"");
    assert!(
        !wrong.to_string().contains("not-a-token"),
        "the token is never echoed"
    );
    assert_story(&steps);
}

/// The same session against `loopx serve` as a process, its `/mcp` route given to the agent by
/// `--mcp-token` with the token in an environment variable: the tools inside the service.
#[test]
fn an_agent_session_over_loopx_serve_drives_the_seed_story_to_accepted() {
    let lx = Loopx::sqlite();
    seed(&lx);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_loopx"))
        .args([
            "--store",
            &lx.store,
            "--json",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--mcp-token", "agent:agent-a=LOOPX_TEST_MCP_TOKEN"])
        .env("LOOPX_TEST_MCP_TOKEN", "token-of-agent-a-8c3f1a9e6b2d7f4c")
        .env_remove("LOOPX_KEY")
        .env_remove("LOOPX_KEYS")
        .current_dir(lx.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start loopx serve");
    let base = support::listening(serve.stdout.take().expect("piped stdout"));
    let url = format!("{base}{}", http::PATH);
    let steps = story(&[
        "http",
        env!("CARGO_BIN_EXE_loopx"),
        &lx.store,
        GOAL,
        &url,
        "token-of-agent-a-8c3f1a9e6b2d7f4c",
        "not-a-token",
    ]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(step(&steps, "wrong_token")["status"], 401);
    assert_story(&steps);
}
