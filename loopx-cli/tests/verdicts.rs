//! Verdicts signed by the validator, through real processes: on a signed goal an agent that
//! writes `validator:ci` into its settlement without the validator's key is refused, and the
//! verdict `loopx verdict` printed under the validator's key carries the settlement through.

mod support;

use loopx_kernel::{SecretKey, Signer as _};
use serde_json::{Value, json};
use support::{Loopx, at};

const GOAL: &str = "cli-json";

/// The key of seed `n`: its key file (64 hex digits) and its public key.
fn key(lx: &Loopx, name: &str, n: u8) -> (String, String) {
    let seed = [n; 32];
    let hex = loopx_kernel::ids::hex(&seed);
    let file = lx.file(&format!("{name}.key"), &format!("{hex}\n"));
    let public = SecretKey::from_seed(seed).public_key().to_string();
    (file, public)
}

fn args(who: &str, key: &str, now: &str, rest: &[&str]) -> Vec<String> {
    let mut all = vec!["--goal", GOAL, "--as", who, "--key-file", key, "--now", now];
    all.extend_from_slice(rest);
    all.into_iter().map(str::to_owned).collect()
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one story, told in order")]
fn an_agent_carries_the_verdict_its_validator_signed_but_cannot_make_one() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let (owner_key, owner_public) = key(&lx, "owner", 1);
    let (agent_key, agent_public) = key(&lx, "agent", 2);
    let (ci_key, ci_public) = key(&lx, "ci", 3);
    let ci = json!({ "kind": "validator", "id": "ci" });
    let spec = lx.json_file(
        "spec.json",
        &json!({
            "id": GOAL,
            "objective": "add --format json",
            "owner": "maintainer",
            "criteria": [{
                "id": "json-tested", "text": "the JSON output has tests",
                "check": "tests", "subject": "repo:acme/cli",
            }],
            "agents": ["agent-a"],
            "budget": "unlimited",
            "keys": [
                { "actor": { "kind": "person", "id": "maintainer" }, "key": owner_public },
                { "actor": { "kind": "agent", "id": "agent-a" }, "key": agent_public },
                { "actor": ci, "key": ci_public },
            ],
            "validators": { "tests": [ci] },
        }),
    );
    let t0 = at(29, "10:00");
    let owner = |rest: &[&str]| lx.ok(&refs(&args("person:maintainer", &owner_key, &t0, rest)));
    owner(&["goal", "create", "--file", &spec]);
    owner(&[
        "todo",
        "add",
        "--id",
        "edit",
        "--title",
        "change the output layer",
    ]);
    let agent = |rest: &[&str]| args("agent:agent-a", &agent_key, &t0, rest);
    lx.ok(&refs(&agent(&["claim", "--todo", "edit", "--ttl", "30m"])));
    lx.ok(&refs(&agent(&[
        "begin", "--todo", "edit", "--epoch", "1", "--turn", "t1",
    ])));
    let evidence = lx.json_file(
        "evidence.json",
        &json!({
            "id": "tests@abc123", "check": "tests", "subject": "repo:acme/cli",
            "revision": "git:abc123", "outcome": "passed", "observed_at": t0,
        }),
    );
    let written = json!({
        "todo": "edit", "epoch": 1, "turn": "t1",
        "verdict": { "validator": ci, "outcome": "passed", "summary": "tests pass" },
        "evidence": [serde_json::from_str::<Value>(
            &std::fs::read_to_string(&evidence).expect("the evidence file")
        ).expect("json")],
        "transition": { "kind": "complete", "continuation": { "kind": "goal_still_active" } },
        "usage": { "turns": 1 },
    });
    let settlement = lx.json_file("settlement.json", &written);

    // The agent names `validator:ci` without its signature: refused, nothing written.
    let before = lx.revision(GOAL);
    let (code, refused) = lx.json(&refs(&agent(&["settle", "--file", &settlement])));
    assert_eq!(code, 3, "{refused:#}");
    assert_eq!(refused["error"]["code"], "verdict_unsigned", "{refused:#}");

    // The agent signs the verdict with its own key: it cannot make the validator's verdict.
    let verdict_args = [
        "verdict",
        "--todo",
        "edit",
        "--turn",
        "t1",
        "--epoch",
        "1",
        "--outcome",
        "passed",
        "--summary",
        "tests pass",
        "--evidence",
        &evidence,
    ];
    let forged = lx.run(&refs(&args("validator:ci", &agent_key, &t0, &verdict_args)));
    assert_eq!(forged.code, 0, "{}", forged.stderr);
    let forged = lx.file("forged.json", &forged.stdout);
    let (code, refused) = lx.json(&refs(&agent(&[
        "settle",
        "--file",
        &settlement,
        "--verdict",
        &forged,
    ])));
    assert_eq!(code, 3, "{refused:#}");
    assert_eq!(
        refused["error"]["code"], "verdict_self_signed",
        "{refused:#}"
    );
    assert_eq!(
        lx.revision(GOAL),
        before,
        "a refused settlement wrote nothing"
    );

    // No key, no verdict.
    let (code, missing) = lx.json(
        &[
            &["--goal", GOAL, "--as", "validator:ci", "--now", &t0][..],
            &verdict_args[..],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{missing:#}");
    assert_eq!(missing["error"]["code"], "key_missing");

    // The validator, holding its key, prints the verdict; the agent carries it through.
    let signed = lx.run(&refs(&args("validator:ci", &ci_key, &t0, &verdict_args)));
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    let document = signed.json();
    assert_eq!(document["verdict"]["validator"], ci);
    assert!(document["verdict"]["signature"].is_string(), "{document:#}");
    assert!(
        !signed.stdout.contains(&"03".repeat(32)),
        "the key is never printed"
    );
    let carried = lx.file("verdict.json", &signed.stdout);
    let done = lx.ok(&refs(&agent(&[
        "settle",
        "--file",
        &settlement,
        "--verdict",
        &carried,
    ])));
    assert_eq!(done["todo"]["status"], "done", "{done:#}");
    let shown = lx.ok(&["--goal", GOAL, "--now", &t0, "goal", "show"]);
    assert_eq!(shown["goal"]["criteria"][0]["status"], "met", "{shown:#}");
    assert_eq!(shown["goal"]["validators"], json!({ "tests": [ci] }));
    assert_eq!(shown["goal"]["validators_apply"], true);

    // The owner amends the registry from the command line.
    owner(&[
        "goal",
        "amend",
        "--register-validator",
        "tests=validator:lint",
    ]);
    let shown = lx.ok(&["--goal", GOAL, "goal", "show"]);
    assert_eq!(
        shown["goal"]["validators"]["tests"],
        json!([ci, { "kind": "validator", "id": "lint" }])
    );
    owner(&[
        "goal",
        "amend",
        "--unregister-validator",
        "tests=validator:lint",
    ]);
    let (code, refused) = lx.json(&refs(&args(
        "person:maintainer",
        &owner_key,
        &t0,
        &[
            "goal",
            "amend",
            "--unregister-validator",
            "tests=validator:lint",
        ],
    )));
    assert_eq!(code, 5, "{refused:#}");
    assert_eq!(refused["error"]["code"], "unknown_reference");
}
