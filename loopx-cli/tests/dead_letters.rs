//! `loopx dead-letters`: a fact a goal refused to record is listed with its goal, origin and
//! reason, shown by `status`, refused again (and counted) while the cause stands, re-applied
//! once the owner fixed it, and dismissed only when named.

mod support;

use std::collections::BTreeMap;

use loopx_kernel::prelude::*;
use loopx_kernel::seams::DeadLetter;
use loopx_kernel::{Actor, Command, Observation};
use loopx_store::SqliteStore;
use support::{Loopx, at};

const GOAL: &str = "g";

fn signed_goal() -> Loopx {
    Loopx::signed_goal(GOAL)
}

/// The dead letter of a comment GitHub delivered as `delivery`, refused as a service would
/// have kept it.
fn letter(delivery: &str, minutes: u32) -> DeadLetter {
    let observation: Observation = serde_json::from_value(serde_json::json!({
        "key": format!("comment:acme/cli/{minutes}"),
        "subject": "pr:acme/cli#1",
        "revision": "content:1",
        "fingerprint": format!("f-{delivery}"),
        "observed_at": at(29, &format!("10:{minutes:02}")),
        "summary": "a comment",
        "facts": BTreeMap::<String, String>::new(),
    }))
    .expect("an observation");
    let refused = Timestamp::parse(&at(29, &format!("10:{minutes:02}"))).expect("a time");
    DeadLetter {
        goal: GOAL.parse().expect("an id"),
        operation: format!("github-delivery-{delivery}")
            .parse()
            .expect("an id"),
        actor: Actor::Provider("github".parse().expect("an id")),
        command: Command::RecordObservation { observation },
        origin: format!("GitHub delivery {delivery} (issue_comment)"),
        code: "key_unregistered".into(),
        reason: "provider:github has no key registered with the goal".into(),
        first_refused: refused,
        last_refused: refused,
        refusals: 1,
    }
}

fn keep(lx: &Loopx, letters: Vec<DeadLetter>) {
    let store = SqliteStore::open(&lx.store).expect("the store opens");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for letter in letters {
            store.keep_dead_letter(letter).await.expect("kept");
        }
    });
}

#[test]
fn a_refused_fact_is_listed_shown_reapplied_once_fixed_and_dropped_only_when_named() {
    let lx = signed_goal();
    keep(&lx, vec![letter("d-1", 5), letter("d-2", 6)]);

    let listed = lx.ok(&["dead-letters", "list"]);
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!(
        listed["dead_letters"][0]["origin"],
        "GitHub delivery d-1 (issue_comment)"
    );
    let text = lx.run(&["dead-letters", "list"]).stdout;
    assert!(text.contains("key_unregistered"), "{text}");
    assert!(text.contains("loopx dead-letters retry"), "{text}");

    let status = lx.run(&["--goal", GOAL, "status"]).stdout;
    assert!(
        status.contains("2 fact(s) from outside this goal refused to record"),
        "{status}"
    );
    assert!(
        status.contains("loopx dead-letters retry --goal g"),
        "{status}"
    );
    let (_, status) = lx.json(&["--goal", GOAL, "status"]);
    assert_eq!(
        status["status"]["dead_letters"][1]["operation"],
        "github-delivery-d-2"
    );

    // The cause stands: refused again, counted, kept; the exit says so.
    let run = lx.run(&[
        "--json",
        "--goal",
        GOAL,
        "dead-letters",
        "retry",
        "--letter",
        "github-delivery-d-1",
    ]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    let listed = lx.ok(&["dead-letters", "list"]);
    assert_eq!(listed["dead_letters"][0]["refusals"], 2, "{listed}");

    // Nothing to pick is a usage error, not a silent no-op.
    let run = lx.run(&["--json", "dead-letters", "retry"]);
    assert_eq!(run.code, 2, "{}", run.stdout);

    // The owner registers the provider's key; both letters are recorded and leave the list.
    let key = lx.register_key("provider:github");
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "goal",
        "amend",
        "--register-key",
        &key,
    ]);
    let revision = lx.revision(GOAL);
    let run = lx.run(&["dead-letters", "retry", "--all"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("recorded; removed"), "{}", run.stdout);
    assert_eq!(lx.revision(GOAL), revision + 2, "both facts recorded");
    assert_eq!(lx.ok(&["dead-letters", "list"])["total"], 0);

    // Dismissing names the letter; an unknown one is not found.
    keep(&lx, vec![letter("d-3", 7)]);
    let run = lx.run(&[
        "--json",
        "--goal",
        GOAL,
        "dead-letters",
        "drop",
        "--letter",
        "github-delivery-d-9",
    ]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    lx.ok(&[
        "--goal",
        GOAL,
        "dead-letters",
        "drop",
        "--letter",
        "github-delivery-d-3",
    ]);
    assert_eq!(lx.ok(&["dead-letters", "list"])["total"], 0);
    assert_eq!(
        lx.revision(GOAL),
        revision + 2,
        "a dropped letter is not recorded"
    );
}
