//! Retries through the real binary: of eight processes settling one turn at once, exactly one
//! says it committed.

mod support;

use serde_json::Value;
use support::{Loopx, at, finish, settlement};

/// A store with goal `g` for `agent-a`, created at a pinned time.
fn store() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:owner",
        "--now",
        &at(29, "10:00"),
        "--op",
        "create",
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ]);
    lx
}

/// Eight processes settle one turn with the same `--op` and `--now` at once: every one exits 0
/// with the same receipt, exactly one says it committed, and the store holds one settlement.
#[test]
fn of_eight_concurrent_duplicate_settles_exactly_one_committed() {
    const PROCESSES: usize = 8;
    let lx = store();
    let now = at(29, "11:00");
    let me = ["--goal", "g", "--as", "agent:agent-a", "--now", &now];
    lx.ok(&[&me[..], &["todo", "add", "--id", "a", "--title", "a"]].concat());
    let claim = lx.ok(&[&me[..], &["claim", "--todo", "a", "--ttl", "30m"]].concat());
    let epoch = claim["lease"]["lease"]["epoch"].as_u64().expect("an epoch");
    let epoch_text = epoch.to_string();
    lx.ok(&[
        &me[..],
        &[
            "begin",
            "--todo",
            "a",
            "--epoch",
            &epoch_text,
            "--turn",
            "turn-1",
        ],
    ]
    .concat());
    let file = lx.json_file("settle.json", &settlement("a", epoch, "turn-1", &[], &[]));
    let revision = lx.revision("g");
    let settle = [&me[..], &["--op", "settle-1", "settle", "--file", &file]].concat();
    let children: Vec<_> = (0..PROCESSES).map(|_| lx.spawn(&settle)).collect();
    let runs: Vec<_> = children.into_iter().map(finish).collect();
    for run in &runs {
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }
    let docs: Vec<Value> = runs.iter().map(support::Run::json).collect();
    let committed = docs.iter().filter(|d| d["replayed"] == false).count();
    assert_eq!(committed, 1, "exactly one process committed: {docs:#?}");
    assert!(docs.iter().all(|d| d["receipt"] == docs[0]["receipt"]));
    assert_eq!(docs[0]["receipt"]["revision"], revision + 1);
    assert_eq!(lx.revision("g"), revision + 1, "one settlement");
}
