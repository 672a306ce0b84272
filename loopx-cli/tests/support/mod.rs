//! Runs the real `loopx` binary against a store in a temporary directory, and the seed story
//! through its verbs alone.
#![allow(dead_code, reason = "each test binary uses a part of the support")]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A store and a scratch directory for one test.
pub struct Loopx {
    pub dir: tempfile::TempDir,
    pub store: String,
}

/// One run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The single JSON document printed on stdout.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!(
                "stdout is not one JSON document ({error}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// `2026-11-29T<hh:mm>:00Z`, or another day with `d`.
pub fn at(day: u32, hhmm: &str) -> String {
    format!("2026-11-{day:02}T{hhmm}:00Z")
}

impl Loopx {
    /// A SQLite store in a new temporary directory.
    pub fn sqlite() -> Loopx {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = dir.path().join("loopx.db").display().to_string();
        Loopx { dir, store }
    }

    /// Another store (a PostgreSQL URL), with a scratch directory.
    pub fn with_store(store: String) -> Loopx {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Loopx { dir, store }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a scratch file; its path.
    pub fn file(&self, name: &str, content: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, content).expect("write a scratch file");
        path.display().to_string()
    }

    /// Writes a JSON scratch file; its path.
    pub fn json_file(&self, name: &str, value: &Value) -> String {
        self.file(name, &serde_json::to_string_pretty(value).expect("json"))
    }

    /// Runs `loopx --store <store> <args>` with a clean environment.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_loopx"));
        command
            .arg("--store")
            .arg(&self.store)
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("LOOPX_STORE")
            .env_remove("LOOPX_ACTOR")
            .env_remove("LOOPX_GOAL")
            .env_remove("LOOPX_KEY")
            .env_remove("LOOPX_KEYS")
            .env("NO_COLOR", "1");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().expect("run loopx");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[])
    }

    /// Runs `loopx --store <store> <args>` with `input` on its standard input.
    pub fn run_input(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write as _;
        let mut child = Command::new(env!("CARGO_BIN_EXE_loopx"))
            .arg("--store")
            .arg(&self.store)
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("LOOPX_STORE")
            .env_remove("LOOPX_ACTOR")
            .env_remove("LOOPX_GOAL")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start loopx");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).expect("write the input");
        }
        finish(child)
    }

    /// Runs with `--json`; the exit code and the document.
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let run = self.run(&[&["--json"][..], args].concat());
        (run.code, run.json())
    }

    /// Runs with `--json` and expects success.
    pub fn ok(&self, args: &[&str]) -> Value {
        let run = self.run(&[&["--json"][..], args].concat());
        assert_eq!(
            run.code, 0,
            "loopx {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        run.json()
    }

    /// Starts `loopx --store <store> --json <args>` as [`run_env`](Self::run_env) does, without
    /// waiting for it; [`finish`] collects its run.
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.spawn_env(args, &[])
    }

    /// [`Loopx::spawn`] with `env` set in the child's environment.
    pub fn spawn_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_loopx"))
            .arg("--store")
            .arg(&self.store)
            .arg("--json")
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("LOOPX_STORE")
            .env_remove("LOOPX_ACTOR")
            .env_remove("LOOPX_GOAL")
            .env_remove("LOOPX_KEY")
            .env_remove("LOOPX_KEYS")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start loopx")
    }

    /// Makes `actor`'s key in the store's key directory (`loopx key new`); its public key, for
    /// `--register-key ACTOR=KEY`.
    pub fn key(&self, actor: &str) -> String {
        let made = self.ok(&["key", "new", actor]);
        made["key"]["public"]
            .as_str()
            .expect("a public key")
            .to_owned()
    }

    /// `--register-key ACTOR=KEY` for `actor`'s new key.
    pub fn register_key(&self, actor: &str) -> String {
        format!("{actor}={}", self.key(actor))
    }

    /// A SQLite store after `loopx init` holding the signed goal `goal`, owned by
    /// `person:owner`, with agent `agent-a`.
    pub fn signed_goal(goal: &str) -> Loopx {
        let lx = Loopx::sqlite();
        lx.ok(&["init"]);
        lx.ok(&[
            "--goal",
            goal,
            "--as",
            "person:owner",
            "--now",
            &at(29, "10:00"),
            "goal",
            "create",
            "--objective",
            "o",
            "--agent",
            "agent-a",
        ]);
        lx
    }

    /// The goal's current revision.
    pub fn revision(&self, goal: &str) -> u64 {
        self.ok(&["--goal", goal, "goal", "show"])["goal"]["revision"]
            .as_u64()
            .expect("a revision")
    }
}

/// Waits for a process [`Loopx::spawn`] started; its run.
pub fn finish(child: std::process::Child) -> Run {
    let output = child.wait_with_output().expect("wait for loopx");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Replaces every public key (`ed25519:…`, new in every run) with a placeholder, for snapshots.
pub fn redact_keys(value: &mut Value) {
    match value {
        Value::String(text) if text.starts_with("ed25519:") => "[key]".clone_into(text),
        Value::Array(items) => items.iter_mut().for_each(redact_keys),
        Value::Object(map) => map.values_mut().for_each(redact_keys),
        _ => {}
    }
}

/// Replaces the value at `pointer` (when present) with a placeholder.
pub fn redact(value: &mut Value, pointer: &str, with: &str) {
    if let Some(slot) = value.pointer_mut(pointer) {
        *slot = Value::String(with.to_owned());
    }
}

pub const GOAL: &str = "cli-json-output";

/// The validator the story's turns are checked by.
pub const VALIDATOR: &str = "validator:cargo-test";

/// `VALIDATOR=<its public key>`, for a goal's `--register-key`: its key, made in the store's
/// key directory the first time (the validator runs on this machine in these tests).
pub fn validator_key(lx: &Loopx) -> String {
    let made = lx.run(&["--json", "key", "new", VALIDATOR]);
    let key = if made.code == 0 {
        made.json()
    } else {
        lx.ok(&["key", "show", VALIDATOR])
    };
    let public = key["key"]["public"].as_str().expect("a public key");
    format!("{VALIDATOR}={public}")
}

/// The verdict the validator signs for `settlement` on `goal` with `loopx verdict` (at `now`
/// when given), in a file: what an agent carries into its settlement (`settle --verdict`).
pub fn signed_verdict(lx: &Loopx, goal: &str, now: Option<&str>, settlement: &Value) -> String {
    let name = |what: &str| format!("{}-{what}", settlement["turn"].as_str().unwrap_or("turn"));
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let (todo, turn) = (text(&settlement["todo"]), text(&settlement["turn"]));
    let (epoch, summary) = (
        settlement["epoch"].to_string(),
        text(&settlement["verdict"]["summary"]),
    );
    let outcome = settlement["verdict"]["outcome"]
        .as_str()
        .unwrap_or("passed")
        .to_owned();
    let mut args = vec!["--goal", goal, "--as", VALIDATOR];
    if let Some(now) = now {
        args.extend(["--now", now]);
    }
    args.extend([
        "verdict",
        "--todo",
        &todo,
        "--turn",
        &turn,
        "--epoch",
        &epoch,
        "--outcome",
        &outcome,
        "--summary",
        &summary,
    ]);
    let files: Vec<String> = settlement["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| lx.json_file(&name(&format!("evidence-{i}.json")), e))
        .collect();
    for file in &files {
        args.extend(["--evidence", file.as_str()]);
    }
    let signed = lx.run(&args);
    assert_eq!(signed.code, 0, "the validator signs: {}", signed.stderr);
    lx.file(&name("verdict.json"), &signed.stdout)
}

/// Settles `settlement` on `goal` as `me` (global flags: who and when), carrying the verdict
/// the validator signs for it, as an agent carries its validator's verdict. The settle's JSON
/// document.
pub fn settle_signed(lx: &Loopx, goal: &str, me: &[&str], settlement: &Value) -> Value {
    let now = me
        .iter()
        .position(|a| *a == "--now")
        .and_then(|i| me.get(i + 1))
        .copied();
    let verdict = signed_verdict(lx, goal, now, settlement);
    let turn = settlement["turn"].as_str().unwrap_or("turn");
    let file = lx.json_file(&format!("{turn}-settlement.json"), settlement);
    lx.ok(&[me, &["settle", "--file", &file, "--verdict", &verdict]].concat())
}
pub const REPO: &str = "repo:acme/cli";

pub fn passing(check: &str, revision: &str, now: &str) -> Value {
    json!({
        "id": format!("{check}@{revision}"),
        "check": check,
        "subject": REPO,
        "revision": revision,
        "outcome": "pass",
        "summary": "cargo test passed",
        "observed_at": now,
    })
}

pub fn head(revision: &str, now: &str) -> Value {
    json!({
        "key": "git-head:acme/cli",
        "subject": REPO,
        "revision": revision,
        "fingerprint": revision.replace(':', "-"),
        "observed_at": now,
        "summary": format!("head at {revision}"),
    })
}

/// A settlement of a passing turn that completes its todo.
pub fn settlement(
    todo: &str,
    epoch: u64,
    turn: &str,
    evidence: &[Value],
    observations: &[Value],
) -> Value {
    json!({
        "todo": todo,
        "epoch": epoch,
        "turn": turn,
        "verdict": {
            "validator": { "kind": "validator", "id": "cargo-test" },
            "outcome": "passed",
            "summary": "cargo test passed",
        },
        "evidence": evidence,
        "observations": observations,
        "transition": { "kind": "complete", "continuation": { "kind": "goal_still_active" } },
        "usage": { "turns": 1, "tokens": 18000, "wall_ms": 420_000 },
    })
}

/// One turn through the verbs: claim, begin, settle from a file. The claim's epoch.
pub fn turn(
    lx: &Loopx,
    todo: &str,
    turn: &str,
    now: &str,
    evidence: &[Value],
    obs: &[Value],
) -> u64 {
    let me = ["--goal", GOAL, "--as", "agent:agent-a", "--now", now];
    let op = format!("claim-{todo}");
    let claim = lx.ok(&[
        &me[..],
        &["--op", &op, "claim", "--todo", todo, "--ttl", "30m"],
    ]
    .concat());
    let epoch = claim["lease"]["lease"]["epoch"].as_u64().expect("an epoch");
    let epoch_text = epoch.to_string();
    let op = format!("begin-{turn}");
    lx.ok(&[
        &me[..],
        &[
            "--op",
            &op,
            "begin",
            "--todo",
            todo,
            "--epoch",
            &epoch_text,
            "--turn",
            turn,
            "--reserve-tokens",
            "30000",
        ],
    ]
    .concat());
    let op = format!("settle-{turn}");
    settle_signed(
        lx,
        GOAL,
        &[&me[..], &["--op", &op]].concat(),
        &settlement(todo, epoch, turn, evidence, obs),
    );
    epoch
}

/// The agent's brief on the seed goal at `now`, as a session would be handed it: the JSON
/// document, with its Markdown under `markdown`.
pub fn brief(lx: &Loopx, now: &str) -> Value {
    let args = ["--goal", GOAL, "--now", now, "brief", "--agent", "agent-a"];
    let markdown = lx.run(&args);
    assert_eq!(markdown.code, 0, "brief failed: {}", markdown.stderr);
    let mut value = lx.ok(&args);
    value["markdown"] = Value::String(markdown.stdout);
    value
}

/// The seed story through the CLI alone. Returns each step's JSON document, by name.
#[allow(clippy::too_many_lines, reason = "one story, told in order")]
pub fn seed_story(lx: &Loopx) -> Vec<(String, Value)> {
    let mut steps: Vec<(String, Value)> = Vec::new();
    let mut record = |name: &str, mut value: Value| {
        redact_keys(&mut value);
        steps.push((name.to_owned(), value));
    };
    // A command by `actor` at `now`.
    let by = |actor: &str, now: &str, args: &[&str]| {
        lx.ok(&[&["--goal", GOAL, "--as", actor, "--now", now][..], args].concat())
    };
    // A query of the goal at `now`, by no one in particular.
    let read =
        |now: &str, args: &[&str]| lx.ok(&[&["--goal", GOAL, "--now", now][..], args].concat());

    let mut init = lx.ok(&["init"]);
    redact(&mut init, "/init/store", "[store]");
    redact(&mut init, "/init/key/actor", "[operator]");
    redact(&mut init, "/init/key/file", "[key file]");
    record("init", init);

    let t0 = at(29, "10:02");
    let maintainer = ["--goal", GOAL, "--as", "person:maintainer"];
    // The validator's key is made where it runs and registered by the owner at creation.
    let validator = lx.register_key("validator:cargo-test");
    let mut created = lx.ok(&[
        &maintainer[..],
        &[
            "--now",
            &t0,
            "--op",
            "create",
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
        ],
    ]
    .concat());
    // The digest covers the spec, and so its public keys, new in every run.
    redact(&mut created, "/receipt/digest", "[digest]");
    record("goal_create", created);

    let agent = ["--goal", GOAL, "--as", "agent:agent-a", "--now", &t0];
    record(
        "todo_add",
        lx.ok(&[
            &agent[..],
            &[
                "--op",
                "add-1",
                "todo",
                "add",
                "--id",
                "change-output-layer",
                "--title",
                "change the output layer and add tests",
                "--priority",
                "p1",
            ],
        ]
        .concat()),
    );
    lx.ok(&[
        &agent[..],
        &[
            "--op",
            "add-2",
            "todo",
            "add",
            "--id",
            "update-help",
            "--title",
            "document --format in --help",
        ],
    ]
    .concat());
    let todo = lx.json_file(
        "document-json.json",
        &json!({ "id": "document-json", "title": "document the JSON fields", "class": { "kind": "advance" } }),
    );
    lx.ok(&[
        &agent[..],
        &["--op", "add-3", "todo", "add", "--file", &todo],
    ]
    .concat());
    record("todo_list", read(&t0, &["todo", "list"]));
    record("next_first", read(&t0, &["next", "--agent", "agent-a"]));
    record("brief_first", brief(lx, &t0));

    // Turn t1 edits and commits abc123; the validator's passes become evidence there.
    let t1 = at(29, "10:11");
    turn(
        lx,
        "change-output-layer",
        "t1",
        &t1,
        &[
            passing("tests.text_output", "git:abc123", &t1),
            passing("tests.json_schema", "git:abc123", &t1),
        ],
        &[head("git:abc123", &t1)],
    );

    // The question for the maintainer blocks one todo only.
    let t2 = at(29, "10:14");
    record(
        "gate_open",
        by(
            "agent:agent-a",
            &t2,
            &[
                "--op",
                "gate-1",
                "gate",
                "open",
                "--id",
                "error-code-name",
                "--question",
                "is error_code acceptable as a stable field?",
                "--owner",
                "person:maintainer",
                "--todo",
                "document-json",
                "--deadline",
                &at(30, "17:00"),
                "--keep-asking",
            ],
        ),
    );
    record("gate_list", read(&t2, &["gate", "list"]));
    record(
        "next_while_gate_pending",
        read(&t2, &["next", "--agent", "agent-a"]),
    );
    record("brief_gate_pending", brief(lx, &t2));

    // Independent work goes on: t2 commits def456, which makes the abc123 evidence stale.
    let t3 = at(29, "10:16");
    turn(
        lx,
        "update-help",
        "t2",
        &t3,
        &[],
        &[head("git:def456", &t3)],
    );
    record("evidence_list_stale", read(&t3, &["evidence", "list"]));
    record("brief_stale", brief(lx, &t3));

    // The next day the maintainer answers; the blocked todo proceeds.
    let t4 = at(30, "09:30");
    record(
        "gate_answer",
        lx.ok(&[
            &maintainer[..],
            &[
                "--now",
                &t4,
                "--op",
                "answer-1",
                "gate",
                "answer",
                "--gate",
                "error-code-name",
                "--answer",
                "yes, keep error_code",
            ],
        ]
        .concat()),
    );
    record(
        "next_after_answer",
        read(&t4, &["next", "--agent", "agent-a"]),
    );
    record("brief_after_answer", brief(lx, &t4));
    let t5 = at(30, "09:48");
    turn(lx, "document-json", "t3", &t5, &[], &[]);

    // The validator re-runs both checks at the head: evidence for both criteria.
    let t6 = at(30, "09:50");
    let tests = ["--goal", GOAL, "--as", "validator:cargo-test", "--now", &t6];
    record(
        "evidence_add",
        lx.ok(&[
            &tests[..],
            &[
                "--op",
                "ev-1",
                "evidence",
                "add",
                "--id",
                "text@def456",
                "--check",
                "tests.text_output",
                "--subject",
                REPO,
                "--revision",
                "git:def456",
                "--outcome",
                "pass",
                "--summary",
                "text output unchanged",
            ],
        ]
        .concat()),
    );
    let evidence = lx.json_file(
        "json-evidence.json",
        &passing("tests.json_schema", "git:def456", &t6),
    );
    lx.ok(&[
        &tests[..],
        &["--op", "ev-2", "evidence", "add", "--file", &evidence],
    ]
    .concat());
    record("status", read(&t6, &["status"]));
    record(
        "goal_close",
        by(
            "agent:agent-a",
            &t6,
            &[
                "--op",
                "close",
                "goal",
                "close",
                "--reason",
                "both criteria met at def456",
            ],
        ),
    );
    record("next_terminal", read(&t6, &["next", "--agent", "agent-a"]));
    record("brief_accepted", brief(lx, &t6));
    record("goal_show", read(&t6, &["goal", "show"]));
    record("goal_list", lx.ok(&["--now", &t6, "goal", "list"]));
    record("log", read(&t6, &["log", "--after", "20"]));
    let mut doctor = lx.ok(&["--now", &t6, "doctor"]);
    redact(&mut doctor, "/doctor/store", "[store]");
    record("doctor", doctor);
    steps
}

/// Whether `path` holds exactly `bytes`.
pub fn unchanged(path: &Path, bytes: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|now| now == bytes)
}

/// A goal with one turn of budget, spent by a turn that keeps its todo open; the decision
/// `next` gives afterwards (`on_exhausted` is the goal policy: `ask` or `wait`).
pub fn budget_goal(lx: &Loopx, goal: &str, on_exhausted: &str) -> Value {
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        goal,
        "--as",
        "person:owner",
        "--now",
        &t0,
        "--op",
        "create",
        "goal",
        "create",
        "--objective",
        "a goal with one turn of budget",
        "--agent",
        "agent-a",
        "--turns",
        "1",
        "--on-budget-exhausted",
        on_exhausted,
        "--register-key",
        &validator_key(lx),
    ]);
    let agent = ["--goal", goal, "--as", "agent:agent-a", "--now", &t0];
    lx.ok(&[
        &agent[..],
        &["todo", "add", "--id", "work", "--title", "the work"],
    ]
    .concat());
    let claim = lx.ok(&[&agent[..], &["claim", "--todo", "work"]].concat());
    assert_eq!(claim["lease"]["lease"]["epoch"], 1);
    lx.ok(&[
        &agent[..],
        &["begin", "--todo", "work", "--epoch", "1", "--turn", "t1"],
    ]
    .concat());
    let mut keep_open = settlement("work", 1, "t1", &[], &[]);
    keep_open["verdict"]["outcome"] = json!("progress");
    keep_open["transition"] = json!({ "kind": "keep_open" });
    let settled = settle_signed(lx, goal, &agent, &keep_open);
    assert_eq!(settled["budget"]["remaining"]["turns"], 0);
    lx.ok(&[
        "--goal",
        goal,
        "--now",
        &at(29, "10:05"),
        "next",
        "--agent",
        "agent-a",
    ])
}

/// Sends `signal` (e.g. `INT`, `TERM`) to `pid`.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Where a `loopx --json serve` process listens (`http://ADDR:PORT`): its first document, read
/// line by line from `stdout` until it is whole.
pub fn listening(stdout: impl std::io::Read) -> String {
    use std::io::BufRead as _;
    let mut reader = std::io::BufReader::new(stdout);
    let mut text = String::new();
    let said: Value = loop {
        let read = reader.read_line(&mut text).expect("a line");
        assert!(
            read > 0,
            "serve ended before saying where it listens: {text}"
        );
        if let Ok(said) = serde_json::from_str(&text) {
            break said;
        }
    };
    said["listening"]
        .as_str()
        .expect("where it listens")
        .to_owned()
}

/// Reads an HTTP/1.1 answer to its end (the request said `Connection: close`): the status
/// line's code and the body.
pub fn http_answer(mut stream: impl std::io::Read) -> (u16, String) {
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// Runs `git` in `dir` as a throwaway author, and fails the test when it fails.
pub fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=a", "-c", "user.email=a@example.com"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A git repository `repo` in the test's directory holding `files`, committed once.
pub fn git_repo(lx: &Loopx, files: &[(&str, &str)]) -> PathBuf {
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    for (name, text) in files {
        std::fs::write(repo.join(name), text).expect("a file of the repository");
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    repo
}

/// The system clock's time, `seconds` from now, as the CLI writes times.
pub fn clock(seconds: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let now = i64::try_from(now).expect("a time in range");
    loopx_kernel::Timestamp::from_millis(now + seconds * 1000).to_string()
}
