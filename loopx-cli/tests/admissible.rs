//! Every fix a decision names goes through, and `--now` cannot get ahead of time. While `bump`
//! backs off after a failed turn, `next` names no claim of it (a claim would be refused
//! `backing_off`) and suggests no `--now`; on a store that runs on the system clock, a write
//! stamped ahead of this host's clock is refused `clock_ahead`, even within the store's skew,
//! so no caller skips the backoff by passing the time it ends.

mod support;

use serde_json::{Value, json};
use support::{GOAL, Loopx, clock};

/// Every fix named anywhere in `decision`.
fn fixes(decision: &Value, found: &mut Vec<Value>) {
    match decision {
        Value::Object(map) => {
            if let Some(fix) = map.get("fix") {
                found.push(fix.clone());
            }
            for value in map.values() {
                fixes(value, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| fixes(v, found)),
        _ => {}
    }
}

#[test]
fn while_a_todo_backs_off_no_fix_claims_it_and_now_cannot_skip_the_pause() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let spec = json!({
        "id": GOAL, "objective": "release", "owner": "olivia", "criteria": [],
        "agents": ["agent-a"], "identity": "declared",
        "policy": {"retry": {"attempts": 5, "backoff": 30_000, "max_backoff": 30_000, "jitter_percent": 0}},
    });
    let file = lx.json_file("spec.json", &spec);
    let owner = ["--goal", GOAL, "--as", "person:olivia"];
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
    lx.ok(&[&owner[..], &["goal", "create", "--file", &file]].concat());
    lx.ok(&[
        &owner[..],
        &["todo", "add", "--id", "bump", "--title", "bump"],
    ]
    .concat());
    lx.ok(&[
        &owner[..],
        &[
            "todo",
            "add",
            "--id",
            "release-notes",
            "--title",
            "release notes",
            "--depends-on",
            "bump",
        ],
    ]
    .concat());
    lx.ok(&[&agent[..], &["claim", "--todo", "bump"]].concat());
    lx.ok(&[
        &agent[..],
        &["begin", "--todo", "bump", "--epoch", "1", "--turn", "t1"],
    ]
    .concat());
    let failed = json!({
        "todo": "bump", "epoch": 1, "turn": "t1",
        "verdict": {"validator": {"kind": "validator", "id": "ci"}, "outcome": "failed", "summary": "tests failed"},
        "evidence": [], "observations": [],
        "transition": {"kind": "keep_open"},
        "usage": {"turns": 1},
    });
    let file = lx.json_file("failed.json", &failed);
    lx.ok(&[&agent[..], &["settle", "--file", &file]].concat());

    // The decision waits; none of its fixes claims `bump`, none passes --now.
    let decision = lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"])["decision"].clone();
    assert_eq!(decision["kind"], "wait", "{decision:#}");
    let text = decision.to_string();
    assert!(text.contains("backoff"), "`bump` backs off: {decision:#}");
    let mut named = Vec::new();
    fixes(&decision, &mut named);
    assert!(!named.is_empty(), "every reason names a fix: {decision:#}");
    for fix in &named {
        assert_ne!(
            fix["verb"], "claim",
            "a claim would be refused: {decision:#}"
        );
        assert!(
            !fix.to_string().contains("\"now\""),
            "a fix never passes --now: {fix}"
        );
    }
    let words = lx
        .run(&["--goal", GOAL, "next", "--agent", "agent-a"])
        .stdout;
    assert!(!words.contains("--now"), "{words}");
    assert!(!words.contains("loopx claim"), "{words}");

    // The pause (30 s) cannot be skipped: not now, and not by stamping the claim past its end
    // yet within the store's clock skew (2 minutes).
    let (code, refused) = lx.json(&[&agent[..], &["claim", "--todo", "bump"]].concat());
    assert_eq!(refused["error"]["code"], "backing_off", "{refused:#}");
    assert_ne!(code, 0);
    let ahead = clock(60);
    let (code, refused) =
        lx.json(&[&agent[..], &["--now", &ahead, "claim", "--todo", "bump"]].concat());
    assert_eq!(refused["error"]["code"], "clock_ahead", "{refused:#}");
    assert_ne!(code, 0);
    assert!(
        refused["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("without --now")),
        "{refused:#}"
    );
}
