//! The `loopx` binary end to end on SQLite: the seed story through its verbs alone (each
//! verb's JSON as an insta snapshot), a budget that runs out, a damaged store, bad input, and
//! the providers.

mod support;

use serde_json::{Value, json};
use support::{GOAL, Loopx, at, budget_goal, redact, seed_story, settlement, unchanged};

#[test]
fn the_seed_story_runs_through_the_cli_alone() {
    let lx = Loopx::sqlite();
    let steps = seed_story(&lx);
    let find = |name: &str| -> &Value { &steps.iter().find(|(n, _)| n == name).expect("a step").1 };
    assert_eq!(find("next_first")["decision"]["kind"], "continue");
    assert_eq!(
        find("next_first")["decision"]["todo"],
        "change-output-layer"
    );
    let pending = find("next_while_gate_pending");
    assert_eq!(pending["decision"]["kind"], "continue");
    assert_eq!(pending["decision"]["todo"], "update-help");
    assert_eq!(
        pending["decision"]["pending_gates"],
        json!(["error-code-name"])
    );
    assert_eq!(
        find("next_after_answer")["decision"]["todo"],
        "document-json"
    );
    assert_eq!(
        find("next_terminal")["decision"],
        json!({ "kind": "terminal", "outcome": "accepted" })
    );
    assert_eq!(find("doctor")["doctor"]["ok"], true);
    for (name, value) in &steps {
        if name.starts_with("brief_") {
            // Its Markdown reads as text: the JSON snapshot keeps the data, a text one the words.
            let mut data = value.clone();
            let markdown = data["markdown"].take();
            insta::assert_json_snapshot!(format!("story_{name}"), data);
            insta::assert_snapshot!(
                format!("story_{name}_markdown"),
                markdown.as_str().unwrap_or_default()
            );
        } else {
            insta::assert_json_snapshot!(format!("story_{name}"), value);
        }
    }
}

/// The brief hands a fresh session what it must know at each moment of the story: the
/// assignment and the question waiting on the maintainer, the criterion gone stale at the newer
/// commit, the answer, the end.
#[test]
fn the_brief_follows_the_seed_story() {
    let lx = Loopx::sqlite();
    let steps = seed_story(&lx);
    let markdown = |name: &str| -> String {
        let step = &steps.iter().find(|(n, _)| n == name).expect("a step").1;
        step["markdown"].as_str().unwrap_or_default().to_owned()
    };
    let first = markdown("brief_first");
    assert!(
        first.contains("continue: work on `change-output-layer`"),
        "{first}"
    );
    assert!(
        first.contains("`json-schema-tested` no_evidence"),
        "{first}"
    );
    let pending = markdown("brief_gate_pending");
    assert!(
        pending.contains("gate `error-code-name` for person:maintainer"),
        "{pending}"
    );
    assert!(pending.contains("holds `document-json`"), "{pending}");
    let stale = markdown("brief_stale");
    assert!(
        stale.contains("stale: the subject is now at git:def456"),
        "{stale}"
    );
    let answered = markdown("brief_after_answer");
    assert!(
        answered.contains("continue: work on `document-json`"),
        "{answered}"
    );
    assert!(
        !answered.contains("### Waiting on someone"),
        "answered gates wait on no one:\n{answered}"
    );
    // The answer reaches the agent whose work it decides, quoted with who gave it.
    assert!(
        answered.contains("### Decided")
            && answered.contains("gate `error-code-name` answered by person:maintainer")
            && answered.contains("  > yes, keep error_code"),
        "the brief carries the answer:\n{answered}"
    );
    let accepted = markdown("brief_accepted");
    assert!(accepted.contains("terminal (accepted)"), "{accepted}");
    for (name, _) in steps.iter().filter(|(n, _)| n.starts_with("brief_")) {
        let text = markdown(name);
        println!(
            "{name}: {} bytes, about {} tokens",
            text.len(),
            text.len().div_ceil(4)
        );
    }
}

#[test]
fn export_and_import_round_trip_and_import_never_overwrites() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    let now = at(30, "10:00");
    let exported = lx.run(&["--goal", GOAL, "export"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    // Every event is one line, after its commit's line (what the commit was made from), then
    // the trailer.
    let commits = exported
        .stdout
        .lines()
        .filter(|l| l.starts_with("{\"commit\""))
        .count();
    let lines = exported.stdout.lines().count() - 1 - commits;
    assert!(lines > 10, "every event is one line");
    assert!(commits > 5 && commits <= lines, "{commits} commits");
    assert!(
        exported
            .stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("{\"trailer\"")),
        "{}",
        exported.stdout
    );
    let mut doc = lx.ok(&["--goal", GOAL, "export"]);
    assert_eq!(
        doc["export"]["events"].as_array().map(Vec::len),
        Some(lines)
    );
    doc["export"]["events"] = json!(format!("[{lines} events]"));
    // Each commit's command and signature: the signature is new in every run.
    assert_eq!(
        doc["export"]["commits"].as_array().map(Vec::len),
        Some(commits)
    );
    doc["export"]["commits"] = json!(format!("[{commits} commits]"));
    // The chain covers the goal's public keys, new in every run.
    redact(&mut doc, "/export/trailer/chain", "[chain]");
    insta::assert_json_snapshot!("export_json", doc);
    let file = lx.file("export.jsonl", &exported.stdout);

    // Into another store: the same state, decided the same way.
    let other = Loopx::sqlite();
    other.ok(&["init"]);
    let mut imported = other.ok(&["--now", &now, "import", "--file", &file]);
    // The digest covers the goal's public keys, new in every run.
    redact(&mut imported, "/import/receipt/digest", "[digest]");
    redact(&mut imported, "/import/receipt/operation", "[operation]");
    insta::assert_json_snapshot!("import", imported);
    let show = |l: &Loopx| l.ok(&["--goal", GOAL, "--now", &now, "goal", "show"]);
    assert_eq!(show(&lx), show(&other));
    assert_eq!(
        other.ok(&["--goal", GOAL, "--now", &now, "next", "--agent", "agent-a"])["decision"]["kind"],
        "terminal"
    );
    assert_eq!(other.ok(&["--now", &now, "doctor"])["doctor"]["ok"], true);
    // The same import again is the same operation: its first receipt, nothing written.
    let again = other.ok(&["--now", &now, "import", "--file", &file]);
    assert_eq!(again["import"]["replayed"], true);
    // Under another operation id it would overwrite: refused.
    let (code, error) = other.json(&["--now", &now, "--op", "other", "import", "--file", &file]);
    assert_eq!(code, 4);
    assert_eq!(error["error"]["code"], "goal_exists");

    // A history that does not replay is refused before anything is written.
    let third = Loopx::sqlite();
    third.ok(&["init"]);
    let broken: Vec<&str> = exported
        .stdout
        .lines()
        .filter(|l| !l.contains("\"revision\":3,"))
        .collect();
    let file = third.file("broken.jsonl", &broken.join("\n"));
    let (code, error) = third.json(&["import", "--file", &file]);
    assert_eq!(code, 7, "{error}");
    assert_eq!(error["error"]["code"], "invalid_history");
    assert_eq!(third.ok(&["goal", "list"])["goals"], json!([]));
}

#[test]
fn a_budget_that_runs_out_asks_the_owner_or_waits() {
    let ask = budget_goal(&Loopx::sqlite(), "asks", "ask");
    assert_eq!(ask["decision"]["kind"], "ask");
    insta::assert_json_snapshot!("budget_ask", ask);
    let wait = budget_goal(&Loopx::sqlite(), "waits", "wait");
    assert_eq!(wait["decision"]["kind"], "wait");
    insta::assert_json_snapshot!("budget_wait", wait);
}

/// A store holding one goal with a few events.
fn small_store() -> Loopx {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    let owner = ["--goal", "g", "--as", "person:owner", "--now", &t0];
    // The providers the tests observe as, and a person who is not the owner, each with a key
    // the owner registers at creation.
    let keys: Vec<String> = [
        "provider:observer",
        "provider:build",
        "person:stranger",
        support::VALIDATOR,
    ]
    .into_iter()
    .map(|actor| lx.register_key(actor))
    .collect();
    let mut create = vec![
        "--op",
        "create",
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ];
    for key in &keys {
        create.extend(["--register-key", key.as_str()]);
    }
    lx.ok(&[&owner[..], &create[..]].concat());
    let agent = ["--goal", "g", "--as", "agent:agent-a", "--now", &t0];
    for id in ["a", "b"] {
        let op = format!("add-{id}");
        lx.ok(&[
            &agent[..],
            &["--op", &op, "todo", "add", "--id", id, "--title", id],
        ]
        .concat());
    }
    lx
}

#[test]
fn doctor_refuses_a_garbage_or_truncated_file_and_leaves_it_as_it_was() {
    for damage in ["garbage", "truncated"] {
        let lx = small_store();
        let path = lx.path("loopx.db");
        let mut bytes = std::fs::read(&path).expect("the store file");
        if damage == "garbage" {
            for (i, byte) in bytes.iter_mut().enumerate().take(4096) {
                *byte = u8::try_from(i % 251).unwrap_or(0) ^ 0x5a;
            }
        } else {
            bytes.truncate(bytes.len() / 2);
        }
        std::fs::write(&path, &bytes).expect("damage the store");
        let (code, doc) = lx.json(&["doctor"]);
        assert_eq!(code, 6, "{damage}: {doc}");
        assert_eq!(doc["error"]["code"], "store_corrupt", "{damage}: {doc}");
        assert!(!doc["error"]["hint"].as_str().unwrap_or("").is_empty());
        let human = lx.run(&["doctor"]);
        assert_eq!(human.code, 6);
        assert!(
            human.stderr.contains("error[store_corrupt]"),
            "{}",
            human.stderr
        );
        assert!(unchanged(&path, &bytes), "{damage}: the file was modified");
        // Every other verb refuses the same way.
        let (code, _) = lx.json(&["--goal", "g", "status"]);
        assert_eq!(code, 6);
        assert!(unchanged(&path, &bytes));
    }
}

fn event_rows(path: &std::path::Path) -> Vec<(String, i64, String)> {
    let conn = rusqlite::Connection::open(path).expect("open the store");
    let mut statement = conn
        .prepare("SELECT goal, revision, json FROM events ORDER BY goal, revision")
        .expect("query events");
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows")
}

#[test]
fn doctor_finds_a_malformed_event_row_and_changes_nothing() {
    let lx = small_store();
    let path = lx.path("loopx.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("open the store");
        let changed = conn
            .execute(
                "UPDATE events SET json = '{\"not an event' WHERE goal = 'g' AND revision = 2",
                [],
            )
            .expect("damage one row");
        assert_eq!(changed, 1);
    }
    let before = event_rows(&path);
    let run = lx.run(&["--json", "--now", &at(29, "10:01"), "doctor"]);
    assert_eq!(run.code, 6, "{}\n{}", run.stdout, run.stderr);
    let mut doc = run.json();
    redact(&mut doc, "/doctor/store", "[store]");
    insta::assert_json_snapshot!("doctor_damaged", doc);
    let text = doc.to_string();
    assert!(text.contains("corrupt"), "{text}");
    assert!(text.contains("event 2 of goal `g`"), "{text}");
    if let Some(report) = doc.get("doctor") {
        assert_eq!(report["ok"], false);
    } else {
        assert_eq!(doc["error"]["code"], "store_corrupt");
    }
    let human = lx.run(&["--now", &at(29, "10:01"), "doctor"]);
    assert_eq!(human.code, 6);
    assert_eq!(event_rows(&path), before, "doctor changed the events");
}

#[test]
fn bad_input_is_typed_and_writes_nothing() {
    let lx = small_store();
    let t0 = at(29, "10:00");
    let agent = ["--goal", "g", "--as", "agent:agent-a", "--now", &t0];
    let revision = lx.revision("g");

    // A malformed JSON file.
    let file = lx.file("broken.json", "{ \"todo\": \"a\", ");
    let (code, error) = lx.json(&[&agent[..], &["settle", "--file", &file]].concat());
    assert_eq!(code, 7);
    assert_eq!(error["error"]["code"], "invalid_json");
    insta::assert_json_snapshot!("error_invalid_json", redacted_path(error));
    let (code, error) = lx.json(&[&agent[..], &["todo", "add", "--file", &file]].concat());
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (7, Some("invalid_json"))
    );
    // The right JSON but the wrong shape.
    let file = lx.file(
        "shape.json",
        "{ \"id\": \"c\", \"title\": \"c\", \"class\": { \"kind\": \"advance\" }, \"colour\": 1 }",
    );
    let (code, _) = lx.json(&[&agent[..], &["todo", "add", "--file", &file]].concat());
    assert_eq!(code, 7);

    // An unknown goal, read and written.
    let (code, error) = lx.json(&["--goal", "nope", "todo", "list"]);
    assert_eq!(code, 5);
    insta::assert_json_snapshot!("error_unknown_goal", error);
    let (code, error) = lx.json(&[
        "--goal",
        "nope",
        "--as",
        "agent:agent-a",
        "todo",
        "add",
        "--id",
        "x",
        "--title",
        "x",
    ]);
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (5, Some("unknown_goal"))
    );
    // An unknown todo.
    let (code, error) = lx.json(&[&agent[..], &["claim", "--todo", "zzz"]].concat());
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (5, Some("unknown_todo"))
    );

    // A stale lease epoch on settle.
    lx.ok(&[&agent[..], &["claim", "--todo", "a"]].concat());
    lx.ok(&[
        &agent[..],
        &["begin", "--todo", "a", "--epoch", "1", "--turn", "t1"],
    ]
    .concat());
    lx.ok(&[&agent[..], &["release", "--todo", "a", "--epoch", "1"]].concat());
    lx.ok(&[&agent[..], &["claim", "--todo", "a"]].concat());
    let moved = lx.revision("g");
    let file = lx.json_file("stale.json", &settlement("a", 1, "t1", &[], &[]));
    let (code, error) = lx.json(&[&agent[..], &["settle", "--file", &file]].concat());
    assert_eq!(code, 4, "{error}");
    assert_eq!(error["error"]["code"], "stale_lease_epoch");
    insta::assert_json_snapshot!("error_stale_lease_epoch", error);
    assert_eq!(
        lx.revision("g"),
        moved,
        "a refused settlement wrote something"
    );

    // Actors: missing, malformed, not allowed.
    let (code, error) = lx.json(&["--goal", "g", "todo", "add", "--id", "x", "--title", "x"]);
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (2, Some("actor_missing"))
    );
    let (code, error) = lx.json(&[
        "--goal", "g", "--as", "robot:x", "todo", "add", "--id", "x", "--title", "x",
    ]);
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (2, Some("actor_invalid"))
    );
    let (code, error) = lx.json(&[
        "--goal",
        "g",
        "--as",
        "person:stranger",
        "goal",
        "abandon",
        "--reason",
        "no",
    ]);
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (3, Some("not_goal_owner"))
    );
    // A usage error with --json is still one JSON document.
    let (code, error) = lx.json(&["todo", "frobnicate"]);
    assert_eq!((code, error["error"]["code"].as_str()), (2, Some("usage")));
    // A store that does not exist is not created by a read.
    let missing = Loopx::with_store(lx.path("nowhere/loopx.db").display().to_string());
    let (code, error) = missing.json(&["goal", "list"]);
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (6, Some("store_missing"))
    );
    assert!(!lx.path("nowhere").exists());

    assert_eq!(lx.revision("g"), moved);
    assert!(moved > revision);
}

fn redacted_path(mut error: Value) -> Value {
    if let Some(message) = error.pointer("/error/message").and_then(Value::as_str) {
        let shown = message
            .split('`')
            .enumerate()
            .map(|(i, part)| if i == 1 { "[file]" } else { part })
            .collect::<Vec<_>>()
            .join("`");
        redact(&mut error, "/error/message", &shown);
    }
    error
}

#[test]
fn operation_ids_make_retries_idempotent() {
    let lx = small_store();
    let args = [
        "--goal",
        "g",
        "--as",
        "agent:agent-a",
        "--now",
        &at(29, "10:00"),
        "--op",
        "add-c",
    ];
    let first = lx.ok(&[&args[..], &["todo", "add", "--id", "c", "--title", "c"]].concat());
    let again = lx.ok(&[&args[..], &["todo", "add", "--id", "c", "--title", "c"]].concat());
    assert_eq!(first["receipt"], again["receipt"]);
    assert_eq!(again["replayed"], true);
    let (code, error) =
        lx.json(&[&args[..], &["todo", "add", "--id", "d", "--title", "d"]].concat());
    assert_eq!(
        (code, error["error"]["code"].as_str()),
        (4, Some("operation_conflict"))
    );
}

#[test]
fn every_verb_group_has_human_output() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    let now = at(30, "10:00");
    for args in [
        vec!["goal", "list"],
        vec!["--goal", GOAL, "goal", "show"],
        vec!["--goal", GOAL, "todo", "list"],
        vec!["--goal", GOAL, "gate", "list"],
        vec!["--goal", GOAL, "evidence", "list"],
        vec!["--goal", GOAL, "status"],
        vec!["--goal", GOAL, "log"],
        vec!["--goal", GOAL, "next", "--agent", "agent-a"],
        vec!["doctor"],
    ] {
        let run = lx.run(&[&["--now", now.as_str()][..], &args[..]].concat());
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(!run.stdout.trim().is_empty());
        assert!(
            !run.stdout.contains('\u{1b}'),
            "no colour when not a terminal"
        );
        assert!(
            serde_json::from_str::<Value>(&run.stdout).is_err(),
            "{args:?} printed JSON"
        );
    }
    let status = lx.run(&["--now", &now, "--goal", GOAL, "status"]).stdout;
    assert!(status.contains("done (3)"), "{status}");
    assert!(status.contains("no open gates"), "{status}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "three providers, one store")]
fn observe_records_git_processes_and_verified_webhooks() {
    let lx = small_store();
    let t0 = at(29, "10:00");
    let provider = ["--goal", "g", "--as", "provider:observer", "--now", &t0];

    // A real git repository.
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    for args in [
        vec!["init", "-q"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(&args)
            .current_dir(&repo)
            .status()
            .expect("git");
        assert!(status.success());
    }
    let repo = repo.display().to_string();
    let git = [
        "observe",
        "git",
        "--dir",
        &repo,
        "--key",
        "git-head:demo",
        "--subject",
        "repo:demo",
    ];
    let first = lx.ok(&[&provider[..], &git[..]].concat());
    assert_eq!(first["recorded"], true);
    assert!(
        first["observation"]["revision"]
            .as_str()
            .unwrap_or("")
            .starts_with("git:")
    );
    let again = lx.ok(&[&provider[..], &git[..]].concat());
    assert_eq!(again["recorded"], false, "an unchanged head is a no-op");

    // A process, from an argument vector.
    let process = lx.ok(&[
        &provider[..],
        &[
            "observe",
            "process",
            "--key",
            "build",
            "--subject",
            "repo:demo",
            "--",
            "echo",
            "hello",
        ],
    ]
    .concat());
    assert_eq!(process["process"]["success"], true);
    assert_eq!(process["observation"]["facts"]["exit"], "exit 0");

    // A saved webhook delivery, verified with a secret from the environment.
    let body_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../loopx-provider/tests/fixtures/github-webhooks/pull_request/opened.payload.json"
    );
    let body = std::fs::read(body_path).expect("a webhook fixture");
    let secret = "s3cret-value-never-printed";
    let signature = loopx_provider::github::webhook::WebhookVerifier::new(secret).sign(&body);
    let env = [("LOOPX_TEST_WEBHOOK_SECRET", secret)];
    let hook = |signature: &str, secret_env: &str| {
        let webhook = [
            "--json",
            "observe",
            "webhook",
            "--event",
            "pull_request",
            "--body",
            body_path,
            "--signature",
            signature,
            "--secret-env",
            secret_env,
        ];
        lx.run_env(&[&provider[..], &webhook[..]].concat(), &env)
    };
    let good = hook(&signature, "LOOPX_TEST_WEBHOOK_SECRET");
    assert_eq!(good.code, 0, "{}{}", good.stdout, good.stderr);
    assert_eq!(good.json()["recorded"], true);
    let revision = lx.revision("g");
    let zeros = format!("sha256={}", "0".repeat(64));
    let bad = hook(&zeros, "LOOPX_TEST_WEBHOOK_SECRET");
    assert_eq!(bad.code, 7);
    assert_eq!(bad.json()["error"]["code"], "signature_mismatch");
    assert_eq!(lx.revision("g"), revision);
    for run in [&good, &bad] {
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    }
    // Without the variable set, a clear usage error.
    let run = hook(&signature, "LOOPX_TEST_UNSET_SECRET");
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["error"]["code"], "secret_missing");
}

#[test]
#[allow(clippy::too_many_lines, reason = "one snapshot per verb, in order")]
fn the_other_verbs_json_shapes() {
    let lx = small_store();
    let t0 = at(29, "10:00");
    let by = |actor: &str, op: &str, rest: &[&str]| -> Value {
        let head = ["--goal", "g", "--as", actor, "--now", &t0, "--op", op];
        lx.ok(&[&head[..], rest].concat())
    };
    let agent = |op: &str, rest: &[&str]| by("agent:agent-a", op, rest);
    let owner = |op: &str, rest: &[&str]| by("person:owner", op, rest);
    let mut shapes: Vec<(&str, Value)> = Vec::new();
    shapes.push((
        "claim",
        agent("c1", &["claim", "--todo", "a", "--ttl", "30m"]),
    ));
    shapes.push((
        "begin",
        agent(
            "b1",
            &[
                "begin",
                "--todo",
                "a",
                "--epoch",
                "1",
                "--turn",
                "t1",
                "--reserve-turns",
                "1",
                "--reserve-tokens",
                "1000",
            ],
        ),
    ));
    shapes.push((
        "renew",
        agent(
            "r1",
            &["renew", "--todo", "a", "--epoch", "1", "--ttl", "1h"],
        ),
    ));
    let mut keep_open = settlement("a", 1, "t1", &[], &[]);
    keep_open["verdict"]["outcome"] = json!("progress");
    keep_open["transition"] = json!({ "kind": "keep_open" });
    let head = [
        "--goal",
        "g",
        "--as",
        "agent:agent-a",
        "--now",
        &t0,
        "--op",
        "s1",
    ];
    let mut settled = support::settle_signed(&lx, "g", &head, &keep_open);
    // The digest covers the verdict's signature by a key new in every run.
    redact(&mut settled, "/receipt/digest", "[digest]");
    shapes.push(("settle", settled));
    agent("c2", &["claim", "--todo", "b"]);
    shapes.push((
        "release",
        agent("rel", &["release", "--todo", "b", "--epoch", "1"]),
    ));
    shapes.push((
        "todo_defer",
        agent(
            "d1",
            &[
                "todo",
                "defer",
                "--todo",
                "a",
                "--until-time",
                &at(30, "09:00"),
            ],
        ),
    ));
    let replacement = lx.json_file(
        "c.json",
        &json!({ "id": "c", "title": "c, smaller", "class": { "kind": "advance" } }),
    );
    shapes.push((
        "todo_supersede",
        agent(
            "sup",
            &[
                "todo",
                "supersede",
                "--todo",
                "b",
                "--reason",
                "too big",
                "--replacement-file",
                &replacement,
            ],
        ),
    ));
    shapes.push((
        "goal_amend",
        owner(
            "am",
            &[
                "goal",
                "amend",
                "--expected-revision",
                "0",
                "--turns",
                "5",
                "--register-agent",
                "agent-b",
                "--add-criterion",
                "c1,tests.x,repo:demo,x works",
            ],
        ),
    ));
    agent(
        "g1",
        &[
            "gate",
            "open",
            "--id",
            "q1",
            "--question",
            "ship it?",
            "--owner",
            "person:owner",
            "--whole-goal",
        ],
    );
    shapes.push((
        "gate_reject",
        owner(
            "gr",
            &["gate", "reject", "--gate", "q1", "--reason", "not yet"],
        ),
    ));
    agent(
        "g2",
        &[
            "gate",
            "open",
            "--id",
            "q2",
            "--question",
            "rename?",
            "--owner",
            "person:owner",
            "--todo",
            "c",
        ],
    );
    shapes.push((
        "gate_withdraw",
        agent(
            "gw",
            &["gate", "withdraw", "--gate", "q2", "--reason", "moot"],
        ),
    ));
    let mut process = lx.ok(&[
        "--goal",
        "g",
        "--as",
        "provider:build",
        "--now",
        &t0,
        "--op",
        "obs",
        "observe",
        "process",
        "--key",
        "build",
        "--subject",
        "repo:demo",
        "--revision",
        "git:abc123",
        "--",
        "echo",
        "hello",
    ]);
    redact(&mut process, "/process/duration_ms", "[ms]");
    shapes.push(("observe_process", process));
    let out = lx.path("g.jsonl").display().to_string();
    let mut export = lx.ok(&["--goal", "g", "--now", &t0, "export", "--out", &out]);
    redact(&mut export, "/export/file", "[file]");
    // The chain covers the goal's public keys, new in every run.
    redact(&mut export, "/export/chain", "[chain]");
    shapes.push(("export_file", export));
    shapes.push((
        "goal_abandon",
        owner("ab", &["goal", "abandon", "--reason", "dropped"]),
    ));
    for (name, mut value) in shapes {
        support::redact_keys(&mut value);
        if name == "goal_amend" {
            // The amendment registers agent-b's new key: its digest is new in every run.
            redact(&mut value, "/receipt/digest", "[digest]");
        }
        insta::assert_json_snapshot!(format!("verb_{name}"), value);
    }
    assert_eq!(
        std::fs::read_to_string(&out)
            .map(|t| t.lines().filter(|l| !l.starts_with("{\"commit\"")).count())
            .ok(),
        // 18 events and the trailer, beside each commit's line.
        Some(19)
    );
}

/// Completions and the man page come from the command line's own definition: every verb is in
/// them, and no store is needed to print them.
#[test]
fn completions_and_the_man_page_name_every_verb() {
    let lx = Loopx::sqlite();
    for shell in ["bash", "zsh", "fish"] {
        let run = lx.run(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        for verb in ["brief", "hooks", "settle", "resolve-outcome", "ready"] {
            assert!(run.stdout.contains(verb), "{shell} completes `{verb}`");
        }
    }
    let man = lx.run(&["man"]);
    assert_eq!(man.code, 0, "{}", man.stderr);
    assert!(
        man.stdout.starts_with(".ie") || man.stdout.contains(".TH loopx"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
    assert!(man.stdout.contains("brief"), "the man page lists the verbs");
    assert!(
        !std::path::Path::new(&lx.store).exists(),
        "no store was created"
    );
    let bad = lx.run(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "an unknown shell is a usage error");
}

/// Run from a subdirectory of a project, loopx works on the project's store, found as git finds
/// a repository (the nearest `.loopx/loopx.db` in the directory or above it), instead of
/// answering `store_missing` and inviting a second store.
#[test]
fn the_store_is_found_from_a_subdirectory() {
    let project = tempfile::tempdir().expect("a directory");
    let loopx = |dir: &std::path::Path, args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_loopx"))
            .arg("--json")
            .args(args)
            .current_dir(dir)
            .env_remove("LOOPX_STORE")
            .env_remove("LOOPX_KEYS")
            .env_remove("LOOPX_SERVICE_KEYS")
            .env_remove("LOOPX_GOAL")
            .env_remove("LOOPX_ACTOR")
            .output()
            .expect("loopx runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (code, out) = loopx(project.path(), &["init"]);
    assert_eq!(code, Some(0), "{out}");
    let deeper = project.path().join("src/parser");
    std::fs::create_dir_all(&deeper).expect("a subdirectory");
    let (code, out) = loopx(&deeper, &["goal", "list"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        !deeper.join(".loopx").exists(),
        "no second store was made below the project's"
    );
}
