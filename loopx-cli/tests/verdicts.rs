//! Verdicts signed by the validator, through real processes: on a signed goal an agent that
//! writes `validator:ci` into its settlement without the validator's key is refused, and the
//! verdict `loopx verdict` printed under the validator's key carries the settlement through.

mod support;

use loopx_kernel::{SecretKey, Signer as _};
use serde_json::{Value, json};
use support::{Loopx, at};

const GOAL: &str = "cli-json";

/// A key file (the provider's format, mode 0600) holding seed `n` for `actor`, as `loopx key
/// new` writes one; and the public key. A file may name any actor: what signs is the seed.
fn key(lx: &Loopx, actor: &str, n: u8) -> (String, String) {
    use std::os::unix::fs::PermissionsExt as _;
    let seed = [n; 32];
    let public = SecretKey::from_seed(seed).public_key().to_string();
    let text = format!(
        "loopx-key v1\nactor: {actor}\npublic: {public}\nsecret: {}\n",
        loopx_kernel::ids::hex(&seed)
    );
    let file = lx.file(&format!("{}-{n}.key", actor.replace(':', "-")), &text);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("0600");
    (file, public)
}

/// A run as `who`, signing with the key file `key` (through `LOOPX_KEY`), with `--json`.
struct As<'a> {
    lx: &'a Loopx,
}

impl As<'_> {
    fn run(&self, who: &str, key: &str, now: &str, rest: &[&str]) -> support::Run {
        let mut all = vec!["--json", "--goal", GOAL, "--as", who, "--now", now];
        all.extend_from_slice(rest);
        self.lx.run_env(&all, &[("LOOPX_KEY", key)])
    }

    fn ok(&self, who: &str, key: &str, now: &str, rest: &[&str]) -> Value {
        let run = self.run(who, key, now, rest);
        assert_eq!(run.code, 0, "{rest:?}: {}\n{}", run.stdout, run.stderr);
        run.json()
    }
}

#[test]
#[allow(clippy::too_many_lines, reason = "one story, told in order")]
fn an_agent_carries_the_verdict_its_validator_signed_but_cannot_make_one() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let by = As { lx: &lx };
    let (owner_key, owner_public) = key(&lx, "person:maintainer", 1);
    let (agent_key, agent_public) = key(&lx, "agent:agent-a", 2);
    let (ci_key, ci_public) = key(&lx, "validator:ci", 3);
    // What an agent can make: its own seed in a file that names the validator.
    let (forged_key, _) = key(&lx, "validator:ci", 2);
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
    let owner = |rest: &[&str]| by.ok("person:maintainer", &owner_key, &t0, rest);
    owner(&["goal", "create", "--file", &spec]);
    owner(&[
        "todo",
        "add",
        "--id",
        "edit",
        "--title",
        "change the output layer",
    ]);
    let agent = |rest: &[&str]| by.run("agent:agent-a", &agent_key, &t0, rest);
    by.ok(
        "agent:agent-a",
        &agent_key,
        &t0,
        &["claim", "--todo", "edit", "--ttl", "30m"],
    );
    by.ok(
        "agent:agent-a",
        &agent_key,
        &t0,
        &["begin", "--todo", "edit", "--epoch", "1", "--turn", "t1"],
    );
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
    let run = agent(&["settle", "--file", &settlement]);
    let (code, refused) = (run.code, run.json());
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
    let forged = by.run("validator:ci", &forged_key, &t0, &verdict_args);
    assert_eq!(forged.code, 0, "{}", forged.stderr);
    let forged = lx.file("forged.json", &forged.stdout);
    let run = agent(&["settle", "--file", &settlement, "--verdict", &forged]);
    let (code, refused) = (run.code, run.json());
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
    let signed = by.run("validator:ci", &ci_key, &t0, &verdict_args);
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    let document = signed.json();
    assert_eq!(document["verdict"]["validator"], ci);
    assert!(document["verdict"]["signature"].is_string(), "{document:#}");
    assert!(
        !signed.stdout.contains(&"03".repeat(32)) && !signed.stdout.contains(&ci_key),
        "the key is never printed"
    );
    let carried = lx.file("verdict.json", &signed.stdout);
    let done = by.ok(
        "agent:agent-a",
        &agent_key,
        &t0,
        &["settle", "--file", &settlement, "--verdict", &carried],
    );
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
    let run = by.run(
        "person:maintainer",
        &owner_key,
        &t0,
        &[
            "goal",
            "amend",
            "--unregister-validator",
            "tests=validator:lint",
        ],
    );
    let (code, refused) = (run.code, run.json());
    assert_eq!(code, 5, "{refused:#}");
    assert_eq!(refused["error"]["code"], "unknown_reference");
}
