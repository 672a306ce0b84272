//! Retries through the real binary: the same `--op` on the wall clock (no `--now`) replays its
//! first receipt, whatever time the retry runs at; another explicit payload under it is a
//! conflict; and of eight processes settling one turn at once, exactly one says it committed.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Loopx, at, finish, settlement};

/// A store with goal `g` for `agent-a`, created at a pinned time.
fn store() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let validator = lx.register_key("validator:ci");
    let provider = lx.register_key("provider:observer");
    let turns = support::validator_key(&lx);
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
        "--register-key",
        &validator,
        "--register-key",
        &provider,
        "--register-key",
        &turns,
    ]);
    lx
}

/// Runs `args` as `actor` on goal `g` under `--op op` on the wall clock, then again a little
/// later: the retry must replay the first receipt. Returns the first document.
fn twice(lx: &Loopx, actor: &str, op: &str, args: &[&str]) -> Value {
    let head = ["--goal", "g", "--as", actor, "--op", op];
    let command = [&head[..], args].concat();
    let first = lx.ok(&command);
    assert_eq!(first["replayed"], false, "{args:?}: {first}");
    let revision = lx.revision("g");
    // The wall clock has moved on (timestamps are in milliseconds).
    std::thread::sleep(Duration::from_millis(20));
    let (code, again) = lx.json(&command);
    assert_eq!(code, 0, "a retry of {args:?} without --now failed: {again}");
    assert_eq!(again["replayed"], true, "{args:?}: {again}");
    assert_eq!(again["receipt"], first["receipt"], "{args:?}");
    assert_eq!(lx.revision("g"), revision, "a retry of {args:?} wrote");
    first
}

#[test]
#[allow(clippy::too_many_lines, reason = "one retry per verb, in order")]
fn every_verb_retried_on_the_wall_clock_replays() {
    let lx = store();
    let agent = "agent:agent-a";
    twice(
        &lx,
        agent,
        "add-a",
        &["todo", "add", "--id", "a", "--title", "a"],
    );
    twice(
        &lx,
        agent,
        "add-b",
        &["todo", "add", "--id", "b", "--title", "b"],
    );
    twice(
        &lx,
        agent,
        "gate",
        &[
            "gate",
            "open",
            "--id",
            "q1",
            "--question",
            "ship it?",
            "--owner",
            "person:owner",
            "--todo",
            "b",
        ],
    );
    let evidence = [
        "evidence",
        "add",
        "--id",
        "e1",
        "--check",
        "tests",
        "--subject",
        "repo:demo",
        "--revision",
        "git:abc",
        "--outcome",
        "pass",
    ];
    twice(&lx, "validator:ci", "evidence", &evidence);

    // The providers: each observation carries the time it was made at.
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
    let provider = "provider:observer";
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
    assert_eq!(twice(&lx, provider, "git", &git)["recorded"], true);
    let process = [
        "observe",
        "process",
        "--key",
        "build",
        "--subject",
        "repo:demo",
        "--",
        "echo",
        "hello",
    ];
    assert_eq!(twice(&lx, provider, "process", &process)["recorded"], true);
    let body = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../loopx-provider/tests/fixtures/github-webhooks/pull_request/opened.payload.json"
    );
    let webhook = [
        "observe",
        "webhook",
        "--event",
        "pull_request",
        "--body",
        body,
    ];
    assert_eq!(twice(&lx, provider, "hook", &webhook)["recorded"], true);

    // A turn: claim, begin, renew and settle, each retried.
    let claim = twice(
        &lx,
        agent,
        "claim",
        &["claim", "--todo", "a", "--ttl", "30m"],
    );
    let epoch = claim["lease"]["lease"]["epoch"]
        .as_u64()
        .expect("an epoch")
        .to_string();
    twice(
        &lx,
        agent,
        "begin",
        &[
            "begin",
            "--todo",
            "a",
            "--epoch",
            &epoch,
            "--turn",
            "turn-1",
            "--reserve-tokens",
            "30000",
        ],
    );
    twice(
        &lx,
        agent,
        "renew",
        &["renew", "--todo", "a", "--epoch", &epoch, "--ttl", "1h"],
    );
    let file = lx.json_file(
        "settle.json",
        &settlement("a", epoch.parse().expect("epoch"), "turn-1", &[], &[]),
    );
    let verdict = support::signed_verdict(
        &lx,
        "g",
        None,
        &settlement("a", epoch.parse().expect("epoch"), "turn-1", &[], &[]),
    );
    twice(
        &lx,
        agent,
        "settle",
        &["settle", "--file", &file, "--verdict", &verdict],
    );
    twice(
        &lx,
        "person:owner",
        "reject",
        &["gate", "reject", "--gate", "q1", "--reason", "not yet"],
    );
    twice(
        &lx,
        agent,
        "defer",
        &[
            "todo",
            "defer",
            "--todo",
            "b",
            "--until-time",
            &at(30, "09:00"),
        ],
    );
}

/// `evidence add` of evidence `id` under `--op op` as a validator, with `extra` flags.
fn evidence(op: &str, id: &str, outcome: &str, extra: &[&str]) -> Vec<String> {
    let args = [
        "--goal",
        "g",
        "--as",
        "validator:ci",
        "--op",
        op,
        "evidence",
        "add",
        "--id",
        id,
        "--check",
        "tests",
        "--subject",
        "repo:demo",
        "--revision",
        "git:abc",
        "--outcome",
        outcome,
    ];
    args.iter().chain(extra).map(|&a| a.to_owned()).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Under a used `--op`, another payload is a conflict and writes nothing; another observation
/// time is not another payload: the first commit stands, with the time it recorded.
#[test]
fn another_payload_under_a_used_op_is_still_a_conflict() {
    let lx = store();
    let first = lx.ok(&strs(&evidence("e1", "e1", "pass", &[])));
    let revision = lx.revision("g");
    for retry in [
        evidence("e1", "e1", "fail", &[]),
        evidence("e1", "e2", "pass", &[]),
    ] {
        let (code, error) = lx.json(&strs(&retry));
        assert_eq!(
            (code, error["error"]["code"].as_str()),
            (4, Some("operation_conflict")),
            "{retry:?}: {error}"
        );
    }
    assert_eq!(lx.revision("g"), revision);
    let earlier = at(29, "09:00");
    let again = lx.ok(&strs(&evidence(
        "e1",
        "e1",
        "pass",
        &["--observed-at", &earlier],
    )));
    assert_eq!(
        (&again["receipt"], &again["replayed"]),
        (&first["receipt"], &json!(true))
    );
    assert_eq!(
        again["evidence"]["observed_at"], first["evidence"]["observed_at"],
        "the first commit's time stands"
    );
    assert_eq!(lx.revision("g"), revision);
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
    let turn = settlement("a", epoch, "turn-1", &[], &[]);
    let file = lx.json_file("settle.json", &turn);
    let verdict = support::signed_verdict(&lx, "g", Some(&now), &turn);
    let revision = lx.revision("g");
    let settle = [
        &me[..],
        &[
            "--op",
            "settle-1",
            "settle",
            "--file",
            &file,
            "--verdict",
            &verdict,
        ],
    ]
    .concat();
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
