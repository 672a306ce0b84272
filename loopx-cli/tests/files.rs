//! Every file a verb reads is read strictly: an unknown field at any depth — the document's
//! own, a verdict's validator, a todo's class, a transition's continuation — is refused with
//! exit 7 (`invalid_json`, naming the field), and nothing is written. One case per file-taking
//! verb; each injects the field into every object of a document the verb otherwise takes.

mod support;

use serde_json::{Value, json};
use support::{GOAL, Loopx, passing, settlement};

const NOW: &str = "2026-11-29T10:00:00Z";

/// The JSON pointers of every object in `value`, the root first.
fn objects(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            found.push(at.to_owned());
            for (key, item) in map {
                objects(item, &format!("{at}/{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                objects(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// `document` with `"zzz": 1` added to the object at `pointer`.
fn with_unknown(document: &Value, pointer: &str) -> Value {
    let mut changed = document.clone();
    changed
        .pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .expect("an object")
        .insert("zzz".to_owned(), json!(1));
    changed
}

/// A signed goal with todo `edit` whose turn `t1` runs under epoch 1, and an open replan
/// obligation `o1`.
fn goal(lx: &Loopx) {
    lx.ok(&["init", "--test-clock"]);
    let validator = lx.register_key("validator:cargo-test");
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "--now",
        NOW,
        "goal",
        "create",
        "--objective",
        "strict files",
        "--agent",
        "agent-a",
        "--register-key",
        &validator,
    ]);
    let agent = ["--goal", GOAL, "--as", "agent:agent-a", "--now", NOW];
    for args in [
        &["todo", "add", "--id", "edit", "--title", "edit"][..],
        &["claim", "--todo", "edit"],
        &["begin", "--todo", "edit", "--epoch", "1", "--turn", "t1"],
        &[
            "obligation",
            "raise",
            "--id",
            "o1",
            "--kind",
            "replan",
            "--detail",
            "look again",
        ],
    ] {
        lx.ok(&[&agent[..], args].concat());
    }
}

/// Runs `args` with each unknown-field variant of `document` written where `FILE` stands, and
/// checks that every one is refused naming the field while the goal stays where it was.
fn refuses_every_unknown_field(lx: &Loopx, verb: &str, args: &[&str], document: &Value) {
    let before = lx.revision(GOAL);
    let mut pointers = Vec::new();
    objects(document, "", &mut pointers);
    assert!(!pointers.is_empty(), "{verb}: no object to inject into");
    for pointer in pointers {
        let file = lx.json_file("input.json", &with_unknown(document, &pointer));
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "FILE" { file.as_str() } else { a })
            .collect();
        let (code, answer) = lx.json(&args);
        let error = &answer["error"];
        assert_eq!(
            (code, error["code"].as_str()),
            (7, Some("invalid_json")),
            "{verb} took an unknown field at `{pointer}`: {answer:#}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        // serde words it "unknown field `zzz`", or for an adjacently tagged enum "invalid
        // value: string \"zzz\"": either way the refusal names the field.
        assert!(
            message.contains("`zzz`") || message.contains("\"zzz\""),
            "{verb} at `{pointer}` was refused for another reason: {message}"
        );
    }
    assert_eq!(lx.revision(GOAL), before, "{verb} changed the goal");
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table: a case per file-taking verb"
)]
fn every_file_taking_verb_refuses_an_unknown_field_at_any_depth() {
    let lx = Loopx::sqlite();
    goal(&lx);
    let agent = ["--goal", GOAL, "--as", "agent:agent-a", "--now", NOW];
    let owner = ["--goal", GOAL, "--as", "person:maintainer", "--now", NOW];
    let todo = json!({
        "id": "t", "title": "a todo", "class": {"kind": "advance"}, "priority": "P1",
        "depends_on": ["edit"], "requires_decisions": ["api:x"],
    });
    let mut turn = settlement(
        "edit",
        1,
        "t1",
        &[passing("tests.x", "git:abc123", NOW)],
        &[],
    );
    turn["transition"] = json!({
        "kind": "complete",
        "continuation": {"kind": "successors", "todos": [todo.clone()]},
    });
    let signed = json!({
        "verdict": {
            "validator": {"kind": "validator", "id": "cargo-test"},
            "outcome": "passed",
            "summary": "cargo test passed",
        },
        "evidence": [passing("tests.x", "git:abc123", NOW)],
    });
    let spec = json!({
        "id": "other", "objective": "another goal", "owner": "maintainer",
        "criteria": [{"id": "c", "text": "tested", "check": "tests.x", "subject": "repo:acme/cli"}],
        "agents": ["agent-a"], "budget": {"turns": 20},
        "policy": {"lease_ttl": 900_000, "on_budget_exhausted": "ask"},
    });
    let gate = json!({
        "id": "q", "question": "which name?", "owner": {"kind": "person", "id": "maintainer"},
        "scope": {"todos": ["edit"]}, "deadline": "2026-11-30T17:00:00Z", "on_expiry": "keep_asking",
    });
    let evidence = passing("tests.x", "git:abc123", NOW);
    let amendments = json!([
        {"op": "set_budget", "limits": {"turns": 30}},
        {"op": "register_agent", "agent": "agent-b"},
    ]);
    let changes = json!([
        {"change": "add_todo", "todo": todo.clone()},
        {"change": "supersede", "todo": "edit", "reason": "the route is closed"},
    ]);
    let verdict_file = lx.json_file("verdict.json", &signed);
    let turn_file = lx.json_file("turn.json", &turn);

    let cases: Vec<(&str, Vec<&str>, &Value)> = vec![
        (
            "todo add --file",
            [&agent[..], &["todo", "add", "--file", "FILE"]].concat(),
            &todo,
        ),
        (
            "todo supersede --replacement-file",
            [
                &agent[..],
                &[
                    "todo",
                    "supersede",
                    "--todo",
                    "edit",
                    "--reason",
                    "r",
                    "--replacement-file",
                    "FILE",
                ],
            ]
            .concat(),
            &todo,
        ),
        (
            "settle --file",
            [&agent[..], &["settle", "--file", "FILE"]].concat(),
            &turn,
        ),
        (
            "settle --verdict",
            [
                &agent[..],
                &["settle", "--file", &turn_file, "--verdict", "FILE"],
            ]
            .concat(),
            &signed,
        ),
        (
            "resolve-outcome --settlement-file",
            [
                &agent[..],
                &[
                    "resolve-outcome",
                    "--todo",
                    "edit",
                    "--turn",
                    "t1",
                    "--resolution",
                    "committed",
                    "--settlement-file",
                    "FILE",
                    "--verdict",
                    &verdict_file,
                ],
            ]
            .concat(),
            &turn,
        ),
        (
            "resolve-outcome --verdict",
            [
                &agent[..],
                &[
                    "resolve-outcome",
                    "--todo",
                    "edit",
                    "--turn",
                    "t1",
                    "--resolution",
                    "committed",
                    "--settlement-file",
                    &turn_file,
                    "--verdict",
                    "FILE",
                ],
            ]
            .concat(),
            &signed,
        ),
        (
            "goal create --file",
            [
                &["--as", "person:maintainer", "--now", NOW][..],
                &["goal", "create", "--file", "FILE"],
            ]
            .concat(),
            &spec,
        ),
        (
            "goal amend --file",
            [&owner[..], &["goal", "amend", "--file", "FILE"]].concat(),
            &amendments,
        ),
        (
            "gate open --file",
            [&agent[..], &["gate", "open", "--file", "FILE"]].concat(),
            &gate,
        ),
        (
            "evidence add --file",
            [
                &["--goal", GOAL, "--as", "validator:cargo-test", "--now", NOW][..],
                &["evidence", "add", "--file", "FILE"],
            ]
            .concat(),
            &evidence,
        ),
        (
            "obligation discharge --file",
            [
                &agent[..],
                &[
                    "obligation",
                    "discharge",
                    "--obligation",
                    "o1",
                    "--file",
                    "FILE",
                ],
            ]
            .concat(),
            &changes,
        ),
    ];
    for (verb, args, document) in cases {
        refuses_every_unknown_field(&lx, verb, &args, document);
    }
}
