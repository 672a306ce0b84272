//! `loopx hooks`: the configuration it installs for Claude Code and Codex, and its answers to
//! the exact JSON each runtime sends (`tests/fixtures/hooks`), over real processes and a
//! SQLite store. The stop hook blocks on `continue` and lets the session stop on `wait`,
//! `ask` and `terminal`; the session-start hook injects the brief, which names the assignment
//! and, after a newer commit, the criterion gone stale.

mod support;

use serde_json::{Value, json};
use support::{GOAL, Loopx, at, head, passing, turn, validator_key};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/hooks/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const RUNTIMES: [&str; 2] = ["claude", "codex"];

/// `loopx hooks run EVENT` for agent-a on `goal` (every goal when `None`) at `now`, fed the
/// runtime's recorded input: its answer, which is always one JSON object and exit 0.
fn hook(lx: &Loopx, goal: Option<&str>, now: &str, runtime: &str, event: &str) -> Value {
    hook_with(
        lx,
        goal,
        now,
        runtime,
        event,
        &fixture(&format!("{runtime}-{event}")),
    )
}

fn hook_with(
    lx: &Loopx,
    goal: Option<&str>,
    now: &str,
    runtime: &str,
    event: &str,
    input: &str,
) -> Value {
    let mut args = vec!["--as", "agent:agent-a", "--now", now];
    if let Some(goal) = goal {
        args.extend(["--goal", goal]);
    }
    args.extend(["hooks", "run", event, "--runtime", runtime]);
    let run = lx.run_input(&args, input);
    assert_eq!(run.code, 0, "a hook never fails its session: {run:?}");
    run.json()
}

fn goal(lx: &Loopx, id: &str, now: &str) {
    lx.ok(&[
        "--goal",
        id,
        "--as",
        "person:maintainer",
        "--now",
        now,
        "goal",
        "create",
        "--objective",
        "add --format json to the CLI",
        "--criterion",
        "text-unchanged,tests.text_output,repo:acme/cli,default text output unchanged",
        "--agent",
        "agent-a",
        "--agent",
        "agent-b",
        "--register-key",
        &validator_key(lx),
    ]);
}

fn todo(lx: &Loopx, goal: &str, id: &str, now: &str) {
    lx.ok(&[
        "--goal",
        goal,
        "--as",
        "agent:agent-a",
        "--now",
        now,
        "todo",
        "add",
        "--id",
        id,
        "--title",
        "change the output layer",
    ]);
}

/// Four goals, one at each kind of decision for agent-a: `continue`, `ask`, `wait`,
/// `terminal`.
fn goals_at_each_decision(lx: &Loopx, now: &str) {
    lx.ok(&["init"]);
    for id in ["working", "asking", "waiting", "ended"] {
        goal(lx, id, now);
        todo(lx, id, "edit", now);
    }
    lx.ok(&[
        "--goal",
        "asking",
        "--as",
        "agent:agent-a",
        "--now",
        now,
        "gate",
        "open",
        "--id",
        "naming",
        "--question",
        "is error_code a stable name?",
        "--owner",
        "person:maintainer",
        "--todo",
        "edit",
    ]);
    lx.ok(&[
        "--goal",
        "waiting",
        "--as",
        "agent:agent-b",
        "--now",
        now,
        "claim",
        "--todo",
        "edit",
    ]);
    lx.ok(&[
        "--goal",
        "ended",
        "--as",
        "person:maintainer",
        "--now",
        now,
        "goal",
        "abandon",
        "--reason",
        "superseded by another plan",
    ]);
}

#[test]
fn the_stop_hook_blocks_on_continue_and_lets_the_session_stop_otherwise() {
    let lx = Loopx::sqlite();
    let now = at(29, "10:00");
    goals_at_each_decision(&lx, &now);
    for runtime in RUNTIMES {
        let working = hook(&lx, Some("working"), &now, runtime, "stop");
        assert_eq!(working["decision"], "block", "{runtime}: {working}");
        let reason = working["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("todo `edit`"), "{runtime}: {reason}");
        // The todo's title, which may quote words from outside, is not the hook's instruction.
        assert!(
            !reason.contains("change the output layer"),
            "{runtime}: {reason}"
        );
        assert!(
            reason.contains("loopx claim --todo edit"),
            "{runtime}: {reason}"
        );
        for (goal, kind) in [
            ("asking", "ask"),
            ("waiting", "wait"),
            ("ended", "terminal"),
        ] {
            let answer = hook(&lx, Some(goal), &now, runtime, "stop");
            assert!(
                answer.get("decision").is_none(),
                "{runtime} {goal}: {answer}"
            );
            let message = answer["systemMessage"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("goal `{goal}`: {kind}")),
                "{runtime}: {message}"
            );
        }
        // Across goals, the one with work decides.
        let any = hook(&lx, None, &now, runtime, "stop");
        assert_eq!(any["decision"], "block", "{runtime}: {any}");
        // A session already kept going once by this hook is let stop: no loop.
        let mut again: Value =
            serde_json::from_str(&fixture(&format!("{runtime}-stop"))).expect("a fixture");
        again["stop_hook_active"] = json!(true);
        let answer = hook_with(
            &lx,
            Some("working"),
            &now,
            runtime,
            "stop",
            &again.to_string(),
        );
        assert!(answer.get("decision").is_none(), "{runtime}: {answer}");
    }
}

#[test]
fn the_session_start_hook_injects_the_brief_with_the_assignment_and_the_stale_criterion() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let t0 = at(29, "10:00");
    goal(&lx, GOAL, &t0);
    todo(&lx, GOAL, "edit", &t0);
    todo(&lx, GOAL, "docs", &t0);
    for runtime in RUNTIMES {
        let answer = hook(&lx, Some(GOAL), &t0, runtime, "session-start");
        let output = &answer["hookSpecificOutput"];
        assert_eq!(
            output["hookEventName"], "SessionStart",
            "{runtime}: {answer}"
        );
        let context = output["additionalContext"].as_str().unwrap_or_default();
        assert!(
            context.contains("continue: work on `edit`"),
            "{runtime}: {context}"
        );
    }
    // The first turn shows the check passing at abc; the second commits def.
    let t1 = at(29, "10:10");
    turn(
        &lx,
        "edit",
        "t1",
        &t1,
        &[passing("tests.text_output", "git:abc", &t1)],
        &[head("git:abc", &t1)],
    );
    let t2 = at(29, "10:20");
    turn(&lx, "docs", "t2", &t2, &[], &[head("git:def", &t2)]);
    for runtime in RUNTIMES {
        let answer = hook(&lx, None, &t2, runtime, "session-start");
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap_or_default();
        assert!(
            context.contains("`text-unchanged` stale")
                && context.contains("the subject is now at git:def"),
            "{runtime}: {context}"
        );
    }
}

#[test]
fn a_hook_given_bad_input_tells_the_session_and_never_fails_it() {
    let lx = Loopx::sqlite();
    let now = at(29, "10:00");
    goals_at_each_decision(&lx, &now);
    let before = std::fs::read(&lx.store).expect("the store");
    for input in ["", "not json", "[1, 2]", "{\"hook_event_name\": \"Stop\""] {
        let answer = hook_with(&lx, Some("working"), &now, "claude", "stop", input);
        let message = answer["systemMessage"].as_str().unwrap_or_default();
        assert!(
            message.contains("hook_input_malformed"),
            "{input:?}: {answer}"
        );
        assert!(answer.get("decision").is_none(), "{answer}");
    }
    let unknown = hook(&lx, Some("no-such-goal"), &now, "claude", "stop");
    assert!(
        unknown["systemMessage"]
            .as_str()
            .is_some_and(|m| m.contains("unknown_goal")),
        "{unknown}"
    );
    assert_eq!(
        std::fs::read(&lx.store).expect("the store"),
        before,
        "nothing changed"
    );
}

#[test]
fn install_writes_each_runtimes_configuration_and_keeps_everything_else() {
    let lx = Loopx::sqlite();
    let project = lx.dir.path().join("project");
    let dir = project.display().to_string();
    let install = |runtime: &str, print: bool| {
        let mut args = vec![
            "--as",
            "agent:agent-a",
            "--goal",
            GOAL,
            "hooks",
            "install",
            runtime,
            "--dir",
            &dir,
        ];
        if print {
            args.push("--print");
        }
        codex_env(&lx, &args)
    };
    // Printed only: nothing written.
    let printed = install("claude", true);
    assert_eq!(printed["hooks"]["written"], false);
    assert!(!project.join(".claude").exists());
    let config = &printed["hooks"]["config"]["hooks"];
    assert_eq!(
        config["SessionStart"][0]["matcher"],
        "startup|resume|clear|compact"
    );
    let stop = config["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap_or_default();
    assert!(
        stop.contains("--as agent:agent-a") && stop.contains("hooks run stop"),
        "{stop}"
    );
    assert!(stop.contains(&format!("--goal {GOAL}")), "{stop}");
    assert!(
        stop.contains("--store"),
        "the SQLite store's path is in the command: {stop}"
    );

    // Written into an existing settings file: its other settings and hooks stay; installing
    // again replaces loopx's handlers instead of adding more.
    let settings = project.join(".claude").join("settings.json");
    std::fs::create_dir_all(settings.parent().expect("a parent")).expect("a directory");
    let existing = json!({
        "model": "opus",
        "hooks": { "Stop": [{ "hooks": [{ "type": "command", "command": "notify-send done" }] }] },
    });
    std::fs::write(&settings, existing.to_string()).expect("written");
    install("claude", false);
    install("claude", false);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    assert_eq!(written["model"], "opus");
    let stops: Vec<&str> = written["hooks"]["Stop"]
        .as_array()
        .expect("stop groups")
        .iter()
        .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
        .filter_map(|h| h["command"].as_str())
        .collect();
    assert_eq!(stops.len(), 2, "{stops:?}");
    assert!(stops.contains(&"notify-send done"), "{stops:?}");

    // Codex: its own file, a matcher of every source Codex starts a session with, and the
    // trust it still needs said; no deprecated feature flag.
    let codex = install("codex", false);
    assert!(
        codex["hooks"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(".codex/hooks.json"))
    );
    let notes = codex["hooks"]["notes"].to_string();
    assert!(notes.contains("codex exec --trust"), "{notes}");
    assert!(notes.contains("/hooks"), "{notes}");
    assert!(!notes.contains("codex_hooks"), "{notes}");
    let hooks: Value = serde_json::from_str(
        &std::fs::read_to_string(project.join(".codex").join("hooks.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(
        hooks["hooks"]["SessionStart"][0]["matcher"],
        "startup|resume|clear|compact|fork"
    );

    // A settings file that is not JSON is left as it is.
    std::fs::write(&settings, "{ not json").expect("written");
    let (code, refused) = lx.json(&[
        "--as",
        "agent:agent-a",
        "hooks",
        "install",
        "claude",
        "--dir",
        &dir,
    ]);
    assert_eq!(code, 7, "{refused}");
    assert_eq!(refused["error"]["code"], "hooks_config_malformed");
    assert_eq!(
        std::fs::read_to_string(&settings).expect("read"),
        "{ not json"
    );
}

/// Runs `loopx --json ARGS` with a Codex home of the test's own (nothing trusted in it unless
/// the test writes it); the document.
fn codex_env(lx: &Loopx, args: &[&str]) -> Value {
    let home = lx.path("codex-home");
    std::fs::create_dir_all(&home).expect("the Codex home");
    let home = home.display().to_string();
    let run = lx.run_env(&[&["--json"][..], args].concat(), &[("CODEX_HOME", &home)]);
    assert_eq!(run.code, 0, "loopx {args:?}: {run:?}");
    run.json()
}

/// `hooks status` reads Codex's own configuration: an untrusted project and untrusted hooks
/// say so, with how to trust them; once trusted as Codex records it (the project's entry and
/// each hook's hash under `[hooks.state]`), Codex runs them; installed again with another
/// command, they are `modified` and run no more. Hooks turned off, the deprecated feature flag
/// and a matcher missing sources are named too.
#[test]
fn status_says_whether_each_runtime_will_run_the_hooks() {
    let lx = Loopx::sqlite();
    let project = lx.path("project");
    std::fs::create_dir_all(&project).expect("the project");
    let dir = project.display().to_string();
    let status = |runtime: &str| {
        codex_env(&lx, &["hooks", "status", runtime, "--dir", &dir])["hooks_status"][0].clone()
    };
    let install = |goal: Option<&str>| {
        let mut args = vec!["--as", "agent:agent-a"];
        args.extend(goal.map(|g| ["--goal", g]).into_iter().flatten());
        args.extend(["hooks", "install", "codex", "--dir", &dir]);
        codex_env(&lx, &args)
    };
    let absent = status("codex");
    assert_eq!(absent["runs"], false);
    assert!(
        absent["needs"][0]
            .as_str()
            .is_some_and(|n| n.contains("not in")),
        "{absent}"
    );

    install(None);
    let untrusted = status("codex");
    assert_eq!(untrusted["runs"], false, "{untrusted}");
    let needs = untrusted["needs"].to_string();
    assert!(
        needs.contains("codex exec --trust") && needs.contains("/hooks"),
        "{needs}"
    );
    let hooks = untrusted["hooks"]
        .as_array()
        .expect("loopx's hooks")
        .clone();
    assert_eq!(hooks.len(), 2, "{untrusted}");
    assert!(
        hooks.iter().all(|h| h["trust"] == "untrusted"),
        "{untrusted}"
    );
    assert!(
        hooks[0]["key"]
            .as_str()
            .is_some_and(|k| k.ends_with(".codex/hooks.json:session_start:0:0")),
        "{untrusted}"
    );

    // The person trusts the project and each hook; Codex keeps both in its config.toml.
    let home = lx.path("codex-home");
    let config = trust_as_codex_records(&dir, &hooks);
    std::fs::write(home.join("config.toml"), &config).expect("written");
    let trusted = status("codex");
    assert_eq!(trusted["runs"], true, "{trusted}");
    assert_eq!(trusted["needs"], json!([]), "{trusted}");

    // Installed again for one goal: another command, which nobody trusted yet.
    install(Some(GOAL));
    let modified = status("codex");
    assert_eq!(modified["runs"], false, "{modified}");
    assert!(
        modified["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|h| h["trust"] == "modified"),
        "{modified}"
    );

    // Hooks turned off under the deprecated name: both said.
    std::fs::write(
        home.join("config.toml"),
        format!("{config}[features]\ncodex_hooks = false\n"),
    )
    .expect("written");
    let off = status("codex");
    assert!(off["needs"].to_string().contains("turned off"), "{off}");
    assert!(off["notes"].to_string().contains("deprecated"), "{off}");

    // A SessionStart matcher from before `compact` and `fork` were covered.
    let file = project.join(".codex").join("hooks.json");
    let old = std::fs::read_to_string(&file)
        .expect("read")
        .replace("startup|resume|clear|compact|fork", "startup|resume|clear");
    std::fs::write(&file, old).expect("written");
    let stale = status("codex");
    assert!(
        stale["needs"].to_string().contains("misses compact, fork"),
        "{stale}"
    );
}

/// Claude Code runs the hooks of its settings once installed, unless `disableAllHooks` says no.
#[test]
fn status_says_whether_claude_code_will_run_the_hooks() {
    let lx = Loopx::sqlite();
    let dir = lx.path("project").display().to_string();
    let status =
        || codex_env(&lx, &["hooks", "status", "claude", "--dir", &dir])["hooks_status"][0].clone();
    assert_eq!(status()["runs"], false);
    codex_env(
        &lx,
        &[
            "--as",
            "agent:agent-a",
            "hooks",
            "install",
            "claude",
            "--dir",
            &dir,
        ],
    );
    assert_eq!(status()["runs"], true);
    let settings = lx.path("project").join(".claude").join("settings.json");
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    value["disableAllHooks"] = json!(true);
    std::fs::write(&settings, value.to_string()).expect("written");
    let disabled = status();
    assert_eq!(disabled["runs"], false);
    assert!(
        disabled["needs"].to_string().contains("disableAllHooks"),
        "{disabled}"
    );
}

/// The entries Codex writes into its `config.toml` when a person trusts the project `dir` and
/// each of `hooks` (their keys and hashes as `hooks status` reports them).
fn trust_as_codex_records(dir: &str, hooks: &[Value]) -> String {
    use std::fmt::Write as _;
    let mut config = format!("[projects.{dir:?}]\ntrust_level = \"trusted\"\n");
    for hook in hooks {
        let _ = writeln!(
            config,
            "[hooks.state.{:?}]\ntrusted_hash = {:?}",
            hook["key"].as_str().unwrap_or_default(),
            hook["hash"].as_str().unwrap_or_default()
        );
    }
    config
}

/// The installed command is a real command line: run through `sh -c` with the runtime's input,
/// it answers the hook.
#[test]
fn the_installed_command_runs_as_written() {
    let lx = Loopx::sqlite();
    let now = at(29, "10:00");
    goals_at_each_decision(&lx, &now);
    let printed = lx.ok(&[
        "--as",
        "agent:agent-a",
        "--goal",
        "working",
        "hooks",
        "install",
        "claude",
        "--print",
    ]);
    let command = printed["hooks"]["config"]["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .expect("a command")
        .to_owned();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --now {now}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(fixture("claude-stop").as_bytes())
            .expect("input");
    }
    let output = child.wait_with_output().expect("finished");
    let answer: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(answer["decision"], "block", "{answer}");
}

/// A session-start input of `runtime`'s shape for session `session`, started by `source`.
fn session_start(session: &str, source: &str) -> String {
    json!({
        "session_id": session,
        "transcript_path": format!("/home/dev/.claude/projects/acme-cli/{session}.jsonl"),
        "cwd": "/home/dev/acme-cli",
        "hook_event_name": "SessionStart",
        "source": source,
    })
    .to_string()
}

/// A session's briefs do not pile up: a resume with nothing changed gets one line naming the
/// revision its brief still describes; a compaction after the maintainer answered gets what
/// changed — the answer whole, quoted — above the new brief, which carries it too.
#[test]
fn a_resumed_session_gets_what_changed_or_one_line_not_another_brief() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let t0 = at(29, "10:00");
    goal(&lx, GOAL, &t0);
    todo(&lx, GOAL, "edit", &t0);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "--now",
        &t0,
        "gate",
        "open",
        "--id",
        "error-code-name",
        "--question",
        "is error_code acceptable?",
        "--owner",
        "person:maintainer",
        "--todo",
        "edit",
    ]);
    let revision = lx.revision(GOAL);
    let context = |source: &str, now: &str| {
        let answer = hook_with(
            &lx,
            Some(GOAL),
            now,
            "claude",
            "session-start",
            &session_start("s-1", source),
        );
        answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let started = context("startup", &t0);
    assert!(started.contains("### Next"), "{started}");
    let resumed = context("resume", &t0);
    assert_eq!(
        resumed,
        format!(
            "loopx: nothing changed since this session's last brief (goal `{GOAL}` at revision {revision}); it still holds."
        )
    );
    // Another session is briefed in full.
    let other = hook_with(
        &lx,
        Some(GOAL),
        &t0,
        "claude",
        "session-start",
        &session_start("s-2", "resume"),
    );
    assert!(
        other.to_string().contains("### Next"),
        "a session never briefed gets the brief: {other}"
    );

    let t1 = at(29, "10:30");
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "--now",
        &t1,
        "gate",
        "answer",
        "--gate",
        "error-code-name",
        "--answer",
        "error_code is fine\nrename `message` to `detail`",
    ]);
    let compacted = context("compact", &t1);
    let changed = compacted
        .split("# Brief")
        .next()
        .expect("what changed comes first");
    assert!(
        changed.contains("What changed since this session's last brief")
            && changed.contains(&format!("revision {revision} → {}", revision + 1))
            && changed.contains("gate_resolved by person:maintainer")
            && changed.contains("  > rename `message` to `detail`"),
        "{compacted}"
    );
    assert!(
        compacted.contains("### Decided") && compacted.contains("### Next"),
        "the new brief follows: {compacted}"
    );
}

/// `hooks install claude` into `project`: the run.
fn install_into(lx: &Loopx, project: &std::path::Path) -> support::Run {
    let dir = project.display().to_string();
    lx.run(&[
        "--json",
        "--as",
        "agent:agent-a",
        "hooks",
        "install",
        "claude",
        "--dir",
        &dir,
    ])
}

/// A repository controls what its `.claude/` holds, so the install writes nothing through a
/// link it ships: a planted temporary name pointing outside is never opened, and a settings
/// file (or directory) that is a link is refused, typed, with both left as they were.
#[test]
fn install_never_writes_through_a_link_a_repository_ships() {
    let lx = Loopx::sqlite();
    let outside = lx.path("outside.txt");
    std::fs::write(&outside, "not loopx's to write").expect("written");
    let project = lx.dir.path().join("project");
    let claude = project.join(".claude");
    std::fs::create_dir_all(&claude).expect("a directory");
    std::os::unix::fs::symlink(&outside, claude.join("settings.json.loopx-partial"))
        .expect("a planted link");
    let run = install_into(&lx, &project);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "not loopx's to write"
    );
    let settings = claude.join("settings.json");
    assert!(
        std::fs::symlink_metadata(&settings)
            .expect("written")
            .is_file()
    );

    // The settings file itself a link: refused, the link and its target unchanged.
    std::fs::remove_file(&settings).expect("removed");
    std::os::unix::fs::symlink(&outside, &settings).expect("a link");
    let run = install_into(&lx, &project);
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(run.json()["error"]["code"], "hooks_config_link");
    assert!(
        std::fs::symlink_metadata(&settings)
            .expect("there")
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "not loopx's to write"
    );

    // `.claude` itself a link to a directory outside: refused, nothing written there.
    let elsewhere = lx.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("a directory");
    let other = lx.dir.path().join("other");
    std::fs::create_dir_all(&other).expect("a directory");
    std::os::unix::fs::symlink(&elsewhere, other.join(".claude")).expect("a link");
    let run = install_into(&lx, &other);
    assert_eq!(run.code, 7, "{run:?}");
    assert_eq!(run.json()["error"]["code"], "hooks_config_link");
    assert_eq!(std::fs::read_dir(&elsewhere).expect("list").count(), 0);
}

/// The install keeps what is not its own: the settings file's mode, and every hook loopx did
/// not write — one whose command merely contains ` hooks run ` included.
#[test]
fn install_keeps_the_files_mode_and_every_foreign_hook() {
    use std::os::unix::fs::PermissionsExt as _;
    let lx = Loopx::sqlite();
    let project = lx.dir.path().join("project");
    let settings = project.join(".claude").join("settings.json");
    std::fs::create_dir_all(settings.parent().expect("a parent")).expect("a directory");
    let foreign = "make -C tools hooks run stop";
    let existing = json!({
        "hooks": {
            "Stop": [
                { "hooks": [{ "type": "command", "command": foreign }] },
                { "matcher": "kept-empty", "hooks": [] },
            ],
        },
    });
    std::fs::write(&settings, existing.to_string()).expect("written");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    for _ in 0..2 {
        let run = install_into(&lx, &project);
        assert_eq!(run.code, 0, "{run:?}");
    }
    let mode = std::fs::metadata(&settings)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o640, "the mode is kept");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    let stops = written["hooks"]["Stop"].as_array().expect("stop groups");
    assert_eq!(
        stops[0], existing["hooks"]["Stop"][0],
        "the foreign hook stays"
    );
    assert_eq!(
        stops[1], existing["hooks"]["Stop"][1],
        "so does an empty group"
    );
    assert_eq!(stops.len(), 3, "and loopx's own once: {stops:?}");
}
