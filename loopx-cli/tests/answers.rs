//! A person's answer reaches the agent that must act on it. The maintainer answers the gate on
//! `document-json` in two lines; the coder's `next` (JSON and words), `brief` (JSON and
//! markdown), `status`, `gate list` and the request a turn's executor reads (`LOOPX_REQUEST_FILE`) all
//! carry the whole answer with who gave it — quoted, as what a person said.

mod support;

use serde_json::{Value, json};
use support::{GOAL, Loopx, git_repo};

const ANSWER: &str = "error_code is fine\nrename `message` to `detail`";

/// The goal with todo `document-json` held by gate `error-code-name`, answered in two lines.
fn answered(lx: &Loopx) {
    lx.ok(&["init"]);
    let maintainer = ["--goal", GOAL, "--as", "person:maintainer"];
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
    lx.ok(&[
        &maintainer[..],
        &[
            "goal",
            "create",
            "--objective",
            "add --format json to the CLI",
            "--agent",
            "agent-a",
        ],
    ]
    .concat());
    lx.ok(&[
        &agent[..],
        &[
            "todo",
            "add",
            "--id",
            "document-json",
            "--title",
            "document the JSON fields",
        ],
    ]
    .concat());
    lx.ok(&[
        &agent[..],
        &[
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
        ],
    ]
    .concat());
    lx.ok(&[
        &maintainer[..],
        &[
            "gate",
            "answer",
            "--gate",
            "error-code-name",
            "--answer",
            ANSWER,
        ],
    ]
    .concat());
}

/// The decided gate as every view carries it.
fn decided() -> Value {
    json!({
        "gate": "error-code-name",
        "question": "is error_code acceptable as a stable field?",
        "outcome": "resolved",
        "text": ANSWER,
        "by": {"kind": "person", "id": "maintainer"},
    })
}

/// `value` without its `at`, which the system clock sets.
fn without_time(mut value: Value) -> Value {
    value.as_object_mut().expect("an object").remove("at");
    value
}

const QUOTED: [&str; 2] = ["  > error_code is fine", "  > rename `message` to `detail`"];

#[test]
fn the_answer_reaches_next_brief_gate_list_and_the_turn() {
    let lx = Loopx::sqlite();
    answered(&lx);
    let next = ["--goal", GOAL, "next", "--agent", "agent-a"];

    let decision = lx.ok(&next)["decision"].clone();
    assert_eq!(decision["kind"], "continue", "{decision:#}");
    assert_eq!(decision["todo"], "document-json");
    assert_eq!(without_time(decision["decided"][0].clone()), decided());
    let words = lx.run(&next).stdout;
    assert!(
        words.contains("gate `error-code-name` answered by person:maintainer"),
        "{words}"
    );
    for line in QUOTED {
        assert!(words.contains(line), "`next` quotes `{line}`: {words}");
    }

    let brief = lx.ok(&["--goal", GOAL, "brief", "--agent", "agent-a"]);
    let text = brief.to_string();
    assert!(text.contains(&json!(ANSWER).to_string()), "{brief:#}");
    let markdown = lx
        .run(&["--goal", GOAL, "brief", "--agent", "agent-a"])
        .stdout;
    assert!(markdown.contains("### Decided"), "{markdown}");
    for line in QUOTED {
        assert!(markdown.contains(line.trim_start()), "{markdown}");
    }

    let status = lx.run(&["--goal", GOAL, "status"]).stdout;
    for line in QUOTED {
        assert!(status.contains(line), "`status` quotes `{line}`: {status}");
    }

    let gates = lx.ok(&["--goal", GOAL, "gate", "list"]);
    assert_eq!(gates["gates"][0]["answer"], ANSWER, "{gates:#}");
    let table = lx.run(&["--goal", GOAL, "gate", "list"]).stdout;
    for line in QUOTED {
        assert!(table.contains(line), "`gate list` quotes `{line}`: {table}");
    }

    // A turn's executor reads the request, answer and all.
    git_repo(
        &lx,
        &[("turn.sh", "cp \"$LOOPX_REQUEST_FILE\" ../request.json\n")],
    );
    lx.run(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "run",
        "--exec",
        "sh turn.sh",
        "--validate",
        "true",
        "--subject",
        "repo:acme/cli",
        "--workspace",
        "repo",
        "--max-steps",
        "1",
    ]);
    let request: Value = serde_json::from_slice(
        &std::fs::read(lx.path("request.json")).expect("the executor saw its request"),
    )
    .expect("the request is JSON");
    assert_eq!(request["todo"], "document-json", "{request:#}");
    assert_eq!(without_time(request["decided"][0].clone()), decided());
}
