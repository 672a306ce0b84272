//! The command line's edges: `next` for the acting agent, hints that name `loopx` verbs and fit
//! their refusal, near matches for mistyped ids, one outcome vocabulary, file inputs that
//! default what flags default, help that sets the global flags apart, and the thin verbs over
//! the kernel commands a decision's fix may name (block, unblock, reassign, handoff, take-over,
//! resolve, obligations).

mod support;

use serde_json::json;
use support::{Loopx, at};

const GOAL: &str = "cli-json";

/// A goal owned by `person:maintainer` with agents `agent-a` and `agent-b` and one todo `edit`.
fn goal() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let validator = lx.register_key("validator:ci");
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "--now",
        &at(29, "10:00"),
        "goal",
        "create",
        "--register-key",
        &validator,
        "--objective",
        "add --format json",
        "--criterion",
        "json-tested,tests,repo:acme/cli,the JSON output has tests",
        "--agent",
        "agent-a",
        "--agent",
        "agent-b",
    ]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "--now",
        &at(29, "10:00"),
        "todo",
        "add",
        "--id",
        "edit",
        "--title",
        "change the output layer",
    ]);
    lx
}

fn as_(who: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "--goal".to_owned(),
        GOAL.to_owned(),
        "--as".to_owned(),
        who.to_owned(),
        "--now".to_owned(),
        at(29, "10:05"),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn next_takes_the_agent_from_the_acting_actor() {
    let lx = goal();

    let by_flag = lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"]);
    let by_actor = lx.ok(&refs(&as_("agent:agent-a", &["next"])));
    let by_env = lx.run_env(
        &["--json", "--goal", GOAL, "next"],
        &[("LOOPX_ACTOR", "agent:agent-a")],
    );

    assert_eq!(by_actor["decision"], by_flag["decision"]);
    assert_eq!(by_env.code, 0, "{}", by_env.stderr);
    assert_eq!(by_env.json()["decision"], by_flag["decision"]);
    let (code, error) = lx.json(&refs(&as_("person:maintainer", &["next"])));
    assert_eq!(code, 2);
    assert_eq!(error["error"]["code"], "agent_missing");
    let (code, error) = lx.json(&["--goal", GOAL, "next"]);
    assert_eq!(code, 2);
    assert_eq!(error["error"]["code"], "agent_missing");
}

#[test]
fn a_mistyped_agent_or_goal_gets_the_near_match() {
    let lx = goal();

    let next = lx.run(&["--goal", GOAL, "next", "--agent", "agnet-a"]);
    assert_eq!(next.code, 0);
    assert!(
        next.stdout.contains("did you mean agent:agent-a?"),
        "{}",
        next.stdout
    );
    assert!(
        next.stdout
            .contains("register it: loopx goal amend --register-agent agnet-a"),
        "{}",
        next.stdout
    );

    // On a signed goal a mistyped agent has no key: the signature is checked first, and the
    // refusal still names the agent meant.
    let (code, error) = lx.json(&refs(&as_("agent:agent-bb", &["claim", "--todo", "edit"])));
    assert_eq!(code, 3);
    assert_eq!(error["error"]["code"], "signature_missing");
    assert!(
        error["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("did you mean agent:agent-b?")),
        "{error:#}"
    );

    let (code, error) = lx.json(&["--goal", "cli-jsno", "goal", "show"]);
    assert_eq!(code, 5);
    assert_eq!(error["error"]["code"], "unknown_goal");
    assert!(
        error["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("did you mean `cli-json`?")),
        "{error:#}"
    );
}

#[test]
fn errors_name_cli_verbs_never_kernel_commands() {
    let lx = goal();
    // An agent may not record evidence outside a turn.
    let (code, error) = lx.json(&refs(&as_(
        "agent:agent-a",
        &[
            "evidence",
            "add",
            "--id",
            "e1",
            "--check",
            "tests",
            "--subject",
            "repo:acme/cli",
            "--revision",
            "git:abc",
            "--outcome",
            "passed",
        ],
    )));
    assert_eq!(code, 3);
    let text = error.to_string();
    assert!(!text.contains("record_evidence\\u0060"), "{error:#}");
    assert_eq!(
        error["error"]["message"],
        "agent:agent-a may not run `loopx evidence add`"
    );
    assert!(
        error["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--as validator:NAME")),
        "{error:#}"
    );
    // A write to a goal that does not exist.
    let (code, error) = lx.json(&[
        "--goal",
        "nope",
        "--as",
        "person:maintainer",
        "todo",
        "add",
        "--id",
        "x",
        "--title",
        "x",
    ]);
    assert_eq!(code, 5);
    assert!(!error.to_string().contains("create_goal"), "{error:#}");
    assert!(error.to_string().contains("loopx goal create"), "{error:#}");
}

#[test]
fn a_typoed_epoch_is_not_a_lost_lease() {
    let lx = goal();
    lx.ok(&refs(&as_("agent:agent-a", &["claim", "--todo", "edit"])));

    let (code, typo) = lx.json(&refs(&as_(
        "agent:agent-a",
        &["renew", "--todo", "edit", "--epoch", "7"],
    )));

    assert_eq!(code, 4);
    assert_eq!(typo["error"]["code"], "stale_lease_epoch");
    let hint = typo["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("never issued"), "{hint}");
    assert!(!hint.contains("lost the lease"), "{hint}");
}

#[test]
fn one_outcome_vocabulary_with_the_old_spelling_accepted() {
    let lx = goal();
    let add = |id: &str, outcome: &str| {
        lx.json(&refs(&as_(
            "validator:ci",
            &[
                "evidence",
                "add",
                "--id",
                id,
                "--check",
                "tests",
                "--subject",
                "repo:acme/cli",
                "--revision",
                "git:abc",
                "--outcome",
                outcome,
            ],
        )))
    };
    let (code, new) = add("e1", "passed");
    assert_eq!(code, 0, "{new:#}");
    assert_eq!(new["evidence"]["outcome"], "passed");
    let (code, old) = add("e2", "fail");
    assert_eq!(code, 0, "{old:#}");
    assert_eq!(old["evidence"]["outcome"], "failed");
    let list = lx.run(&["--goal", GOAL, "evidence", "list"]);
    assert!(
        list.stdout.contains("passed") && list.stdout.contains("failed"),
        "{}",
        list.stdout
    );
}

#[test]
fn an_evidence_file_without_observed_at_is_observed_now() {
    let lx = goal();
    let file = lx.json_file(
        "evidence.json",
        &json!({ "id": "e1", "check": "tests", "subject": "repo:acme/cli",
                 "revision": "git:abc", "outcome": "pass" }),
    );

    let (code, out) = lx.json(&refs(&as_(
        "validator:ci",
        &["evidence", "add", "--file", &file],
    )));

    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["evidence"]["observed_at"], "2026-11-29T10:05:00.000Z");
}

#[test]
fn help_sets_the_global_flags_apart_and_settle_shows_its_file() {
    let lx = Loopx::sqlite();
    let help = lx.run(&["todo", "add", "--help"]);
    assert_eq!(help.code, 0);
    let (own, global) = help
        .stdout
        .split_once("Global options:")
        .expect("a heading for the global flags");
    assert!(own.contains("--title"), "{}", help.stdout);
    assert!(!own.contains("--store"), "{}", help.stdout);
    assert!(
        global.contains("--store") && global.contains("--as"),
        "{}",
        help.stdout
    );

    let settle = lx.run(&["settle", "--help"]);
    assert!(
        settle.stdout.contains("\"transition\""),
        "{}",
        settle.stdout
    );
    let run = lx.run(&["run", "--help"]);
    assert!(run.stdout.contains("12  replan"), "{}", run.stdout);
}

#[test]
fn block_unblock_and_reassign_a_todo() {
    let lx = goal();
    let owner = |args: &[&str]| lx.ok(&refs(&as_("person:maintainer", args)));

    let blocked = owner(&[
        "todo",
        "block",
        "--todo",
        "edit",
        "--reason",
        "the API key expired",
    ]);
    assert_eq!(blocked["todo"]["status"], "blocked", "{blocked:#}");
    let next = lx.run(&refs(&as_("agent:agent-a", &["next"])));
    assert!(
        next.stdout
            .contains("unblock it: loopx todo unblock --todo edit"),
        "{}",
        next.stdout
    );
    let open = owner(&["todo", "unblock", "--todo", "edit"]);
    assert_eq!(open["todo"]["status"], "open", "{open:#}");

    let moved = owner(&["todo", "reassign", "--todo", "edit", "--to", "agent-b"]);
    assert_eq!(moved["todo"]["assignee"], "agent-b", "{moved:#}");
    let next = lx.ok(&refs(&as_("agent:agent-a", &["next"])));
    assert_eq!(
        next["decision"]["reasons"][0]["reason"],
        "assigned_elsewhere"
    );
    assert_eq!(
        next["decision"]["reasons"][0]["fix"]["verb"],
        "todo reassign"
    );
    let anyone = owner(&["todo", "reassign", "--todo", "edit", "--anyone"]);
    assert_eq!(
        anyone["todo"]["assignee"],
        serde_json::Value::Null,
        "{anyone:#}"
    );
}

#[test]
fn handoff_moves_the_lease_with_a_note() {
    let lx = goal();
    lx.ok(&refs(&as_("agent:agent-a", &["claim", "--todo", "edit"])));

    let handed = lx.ok(&refs(&as_(
        "agent:agent-a",
        &[
            "handoff",
            "--todo",
            "edit",
            "--epoch",
            "1",
            "--to",
            "agent-b",
            "--next-action",
            "write the JSON test",
            "--stop-condition",
            "the test passes",
        ],
    )));

    assert_eq!(handed["lease"]["lease"]["holder"], "agent-b", "{handed:#}");
    assert_eq!(handed["lease"]["lease"]["epoch"], 2);
    let next = lx.run(&refs(&as_("agent:agent-b", &["next"])));
    assert!(
        next.stdout.contains("handoff: write the JSON test"),
        "{}",
        next.stdout
    );
}

#[test]
fn take_over_fences_the_session_that_began_the_turn() {
    let lx = goal();
    let a = |args: &[&str]| as_("agent:agent-a", args);
    lx.ok(&refs(&a(&["claim", "--todo", "edit"])));
    lx.ok(&refs(&a(&[
        "begin", "--todo", "edit", "--epoch", "1", "--turn", "t1",
    ])));

    let taken = lx.ok(&refs(&a(&[
        "take-over",
        "--todo",
        "edit",
        "--epoch",
        "1",
        "--turn",
        "t1",
    ])));

    assert_eq!(taken["lease"]["lease"]["holder"], "agent-a", "{taken:#}");
    assert_eq!(taken["lease"]["lease"]["epoch"], 2, "{taken:#}");
    assert!(
        taken["lease"]["lease"]["turn"].to_string().contains("t1"),
        "{taken:#}"
    );
    // The session that began the turn still presents epoch 1: it lost the lease.
    let (code, old) = lx.json(&refs(&a(&["renew", "--todo", "edit", "--epoch", "1"])));
    assert_eq!(code, 4, "{old:#}");
    assert_eq!(old["error"]["code"], "stale_lease_epoch");
    lx.ok(&refs(&a(&["renew", "--todo", "edit", "--epoch", "2"])));
}

#[test]
fn resolve_an_unknown_outcome_as_absent() {
    let lx = goal();
    let t0 = at(29, "10:05");
    let agent = ["--goal", GOAL, "--as", "agent:agent-a", "--now", &t0];
    lx.ok(&[&agent[..], &["claim", "--todo", "edit", "--ttl", "1m"]].concat());
    lx.ok(&[
        &agent[..],
        &["begin", "--todo", "edit", "--epoch", "1", "--turn", "t1"],
    ]
    .concat());
    let later = at(29, "11:00");
    let next = lx.ok(&[
        "--goal", GOAL, "--now", &later, "next", "--agent", "agent-a",
    ]);
    assert_eq!(
        next["decision"]["issue"]["issue"], "outcome_unknown",
        "{next:#}"
    );
    assert_eq!(next["decision"]["issue"]["fix"]["verb"], "resolve-outcome");

    let resolved = lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "--now",
        &later,
        "resolve",
        "--todo",
        "edit",
        "--turn",
        "t1",
        "--resolution",
        "absent",
        "--note",
        "nothing was published",
    ]);

    assert_eq!(resolved["lease"]["status"], "open", "{resolved:#}");
    let next = lx.ok(&[
        "--goal", GOAL, "--now", &later, "next", "--agent", "agent-a",
    ]);
    assert_eq!(next["decision"]["kind"], "continue", "{next:#}");
}

#[test]
fn raise_list_and_discharge_an_obligation() {
    let lx = goal();
    lx.ok(&refs(&as_(
        "agent:agent-a",
        &[
            "obligation",
            "raise",
            "--id",
            "rethink",
            "--kind",
            "replan",
            "--detail",
            "the route is closed",
        ],
    )));
    let next = lx.run(&refs(&as_("agent:agent-a", &["next"])));
    assert!(
        next.stdout
            .contains("loopx obligation discharge --obligation rethink --file …"),
        "{}",
        next.stdout
    );
    let changes = lx.json_file(
        "changes.json",
        &json!([{ "change": "supersede", "todo": "edit", "reason": "the route is closed",
                  "replacement": { "id": "edit-2", "title": "another route",
                                   "class": { "kind": "advance" } } }]),
    );

    let done = lx.ok(&refs(&as_(
        "agent:agent-a",
        &[
            "obligation",
            "discharge",
            "--obligation",
            "rethink",
            "--file",
            &changes,
        ],
    )));

    assert!(done["obligation"]["discharged"].is_object(), "{done:#}");
    let list = lx.ok(&["--goal", GOAL, "obligation", "list"]);
    assert_eq!(list["obligations"][0]["id"], "rethink");
    let next = lx.ok(&refs(&as_("agent:agent-a", &["next"])));
    assert_eq!(next["decision"]["todo"], "edit-2", "{next:#}");
}

/// A title is read by people and agents alike, so it may not hold a character that reorders
/// or hides the text around it: refused, typed, and nothing is written.
#[test]
fn a_title_that_would_read_differently_than_it_is_is_refused() {
    let lx = goal();
    let before = lx.revision(GOAL);
    for title in [
        "invoice \u{202e}fdp.exe",
        "pay\u{200b}ment",
        "\u{2067}isolated\u{2069}",
    ] {
        let (code, refused) = lx.json(&refs(&as_(
            "person:maintainer",
            &["todo", "add", "--id", "spoof", "--title", title],
        )));
        assert_eq!(code, 3, "{refused}");
        assert_eq!(refused["error"]["code"], "invalid_input", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("title") && message.contains("U+"),
            "{message}"
        );
    }
    assert_eq!(lx.revision(GOAL), before, "nothing changed");
}

/// A hint names the flag at fault and what to write there: a bare name given to `--owner` is
/// not answered with advice about `--as`, and a gate without a scope names the scope flags
/// rather than sending the person to ask for the next step.
#[test]
fn hints_name_the_flag_at_fault() {
    let lx = goal();
    let gate = |extra: &[&str]| {
        let mut args = vec![
            "gate",
            "open",
            "--id",
            "naming",
            "--question",
            "is error_code stable?",
        ];
        args.extend_from_slice(extra);
        let run = lx.run(&refs(&as_("person:maintainer", &args)));
        (run.code, run.stderr)
    };
    let (code, stderr) = gate(&["--owner", "maintainer", "--todo", "edit"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--owner person:maintainer"), "{stderr}");
    assert!(!stderr.contains("--as"), "{stderr}");

    let (code, stderr) = gate(&["--owner", "person:maintainer"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("gate_unscoped"), "{stderr}");
    assert!(stderr.contains("--whole-goal"), "{stderr}");
    assert!(!stderr.contains("loopx next"), "{stderr}");
}
