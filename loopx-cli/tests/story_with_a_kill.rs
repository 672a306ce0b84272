//! The seed story through the CLI alone, on the system clock, with a turn killed on the way: its
//! first turn runs under `loopx run` and is killed (SIGKILL, the run and its executor both, as
//! a machine that loses power), its lease expires with the outcome unknown, `loopx next`
//! answers `repair (outcome_unknown)`, and the verb it names, `loopx resolve-outcome`, resolves
//! it; the story then goes on to `terminal (accepted)` with nothing but verbs.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{GOAL, Loopx, REPO, clock, git_repo, settle_signed, settlement};

/// Evidence that `check` passed at `revision`, observed just now.
fn passing(check: &str, revision: &str) -> Value {
    support::passing(check, revision, &clock(-1))
}

/// The observed head of the repository at `revision`, just now.
fn head(revision: &str) -> Value {
    support::head(revision, &clock(-1))
}

/// Waits up to `limit` for `done` to hold.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// The turn `loopx run` starts: it leaves its pid and stands still, as a long turn does.
const LONG_TURN: &str = "echo $$ > ../turn.pid.tmp && mv ../turn.pid.tmp ../turn.pid\nsleep 300\n";

/// One turn through the verbs, as the seed story takes it: claim, begin, settle with the
/// verdict the validator signed. The claim's epoch.
fn turn(lx: &Loopx, todo: &str, turn: &str, evidence: &[Value], observations: &[Value]) -> u64 {
    let me = ["--goal", GOAL, "--as", "agent:agent-a"];
    let claim = lx.ok(&[&me[..], &["claim", "--todo", todo, "--ttl", "30m"]].concat());
    let epoch = claim["lease"]["lease"]["epoch"].as_u64().expect("an epoch");
    let epoch_text = epoch.to_string();
    lx.ok(&[
        &me[..],
        &[
            "begin",
            "--todo",
            todo,
            "--epoch",
            &epoch_text,
            "--turn",
            turn,
            "--reserve-tokens",
            "30000",
        ],
    ]
    .concat());
    let done = settle_signed(
        lx,
        GOAL,
        &me,
        &settlement(todo, epoch, turn, evidence, observations),
    );
    assert_eq!(done["todo"]["status"], "done", "{done:#}");
    epoch
}

fn next(lx: &Loopx) -> Value {
    lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"])["decision"].clone()
}

/// Starts `loopx run` on the first todo with a two-second lease, waits until its executor runs,
/// and kills both with SIGKILL: the run first, which cannot stop anything on its way down, then
/// the executor's process group, which it leads. The turn that was in flight and its lease's
/// epoch.
fn kill_a_running_turn(lx: &Loopx) -> (String, u64) {
    git_repo(lx, &[("turn.sh", LONG_TURN)]);
    let mut run = lx.spawn(&RUN);
    let pid_file = lx.path("turn.pid");
    let mut pid = String::new();
    let started = eventually(Duration::from_secs(30), || {
        pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        !pid.trim().is_empty()
    });
    assert!(started, "the turn never started");
    let in_flight = next(lx);
    assert_eq!(in_flight["kind"], "continue", "{in_flight:#}");
    assert_eq!(in_flight["todo"], "change-output-layer");
    assert_eq!(in_flight["lease"]["step"], "resume", "a turn is in flight");
    let turn = in_flight["lease"]["turn"]
        .as_str()
        .expect("the turn in flight")
        .to_owned();
    let epoch = in_flight["lease"]["epoch"]
        .as_u64()
        .expect("the lease's epoch");

    run.kill().expect("SIGKILL the run");
    run.wait().expect("the run is reaped");
    let group = format!("-{}", pid.trim());
    let killed = Command::new("kill")
        .args(["-KILL", "--", &group])
        .stderr(Stdio::null())
        .status()
        .expect("kill runs");
    assert!(killed.success(), "the executor's group was still there");
    (turn, epoch)
}

/// `loopx run` on the first todo, with a two-second lease.
const RUN: [&str; 17] = [
    "--goal",
    GOAL,
    "--as",
    "agent:agent-a",
    "run",
    "--exec",
    "sh turn.sh",
    "--validate",
    "true",
    "--check",
    "tests.text_output",
    "--subject",
    REPO,
    "--workspace",
    "repo",
    "--lease-ttl",
    "2s",
];

/// Waits until the killed turn's lease has expired and `loopx next` answers `repair
/// (outcome_unknown)` naming `loopx resolve-outcome`.
fn repair_named(lx: &Loopx, killed: &str) {
    let mut decision = Value::Null;
    let expired = eventually(Duration::from_secs(30), || {
        decision = next(lx);
        decision["kind"] == "repair"
    });
    assert!(expired, "the lease never expired: {decision:#}");
    let issue = &decision["issue"];
    assert_eq!(issue["issue"], "outcome_unknown", "{decision:#}");
    assert_eq!(issue["todo"], "change-output-layer");
    assert_eq!(issue["turn"], killed);
    assert_eq!(issue["fix"]["verb"], "resolve-outcome");
    let words = lx.run(&["--goal", GOAL, "next", "--agent", "agent-a"]);
    let named = format!(
        "repair: the outcome of turn {killed} on `change-output-layer` (agent:agent-a) is unknown"
    );
    assert!(words.stdout.contains(&named), "{}", words.stdout);
    let fix = format!(
        "loopx resolve-outcome --todo change-output-layer --turn {killed} --resolution … --note …"
    );
    assert!(words.stdout.contains(&fix), "{}", words.stdout);
}

/// The seed story's goal, signed (the default), with its three todos; the agent's first step
/// is the output layer.
fn seed_goal(lx: &Loopx) {
    lx.ok(&["init"]);
    let maintainer = ["--goal", GOAL, "--as", "person:maintainer"];
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
    let validator = lx.register_key("validator:cargo-test");
    lx.ok(&[
        &maintainer[..],
        &[
            "goal",
            "create",
            "--objective",
            "add --format json to the CLI",
            "--criterion",
            "text-unchanged,tests.text_output,repo:acme/cli,default text output unchanged",
            "--criterion",
            "json-schema-tested,tests.json_schema,repo:acme/cli,the JSON schema has tests",
            "--agent",
            "agent-a",
            "--turns",
            "20",
            "--tokens",
            "500000",
            "--register-key",
            &validator,
        ],
    ]
    .concat());
    for todo in [
        &[
            "--id",
            "change-output-layer",
            "--title",
            "change the output layer and add tests",
            "--priority",
            "p1",
        ][..],
        &[
            "--id",
            "update-help",
            "--title",
            "document --format in --help",
        ],
        &[
            "--id",
            "document-json",
            "--title",
            "document the JSON fields",
        ],
    ] {
        lx.ok(&[&agent[..], &["todo", "add"], todo].concat());
    }
    assert_eq!(next(lx)["todo"], "change-output-layer");
}

/// The story after its first turn, as the seed tells it: the maintainer's question blocks one
/// todo, independent work moves the head to def456, the answer unblocks the todo, the validator
/// re-runs both checks, and the goal ends `terminal (accepted)`.
fn the_rest_of_the_story(lx: &Loopx) {
    let maintainer = ["--goal", GOAL, "--as", "person:maintainer"];
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
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
            "--deadline",
            &clock(86_400),
            "--keep-asking",
        ],
    ]
    .concat());
    let pending = next(lx);
    assert_eq!(pending["todo"], "update-help", "{pending:#}");
    assert_eq!(pending["pending_gates"], json!(["error-code-name"]));

    // Independent work goes on at def456, which makes the abc123 evidence stale.
    turn(lx, "update-help", "t2", &[], &[head("git:def456")]);
    let evidence = lx.ok(&["--goal", GOAL, "evidence", "list"]);
    assert!(
        evidence.to_string().contains("stale"),
        "the abc123 evidence is stale at def456: {evidence:#}"
    );

    // The maintainer answers; the blocked todo proceeds.
    lx.ok(&[
        &maintainer[..],
        &[
            "gate",
            "answer",
            "--gate",
            "error-code-name",
            "--answer",
            "yes, keep error_code",
        ],
    ]
    .concat());
    assert_eq!(next(lx)["todo"], "document-json");
    turn(lx, "document-json", "t3", &[], &[]);

    // The validator re-runs both checks at the head: evidence for both criteria.
    let tests = ["--goal", GOAL, "--as", "validator:cargo-test"];
    for (check, id) in [
        ("tests.text_output", "text@def456"),
        ("tests.json_schema", "json@def456"),
    ] {
        let mut found = passing(check, "git:def456");
        found["id"] = json!(id);
        let file = lx.json_file(&format!("{id}.json"), &found);
        lx.ok(&[&tests[..], &["evidence", "add", "--file", &file]].concat());
    }
    lx.ok(&[
        &agent[..],
        &["goal", "close", "--reason", "both criteria met at def456"],
    ]
    .concat());

    assert_eq!(
        next(lx),
        json!({ "kind": "terminal", "outcome": "accepted" })
    );
    let words = lx.run(&["--goal", GOAL, "next", "--agent", "agent-a"]);
    assert!(
        words.stdout.contains("terminal (accepted)"),
        "{}",
        words.stdout
    );
}

#[test]
#[allow(clippy::too_many_lines, reason = "one story, told in order")]
fn the_seed_story_with_a_killed_turn_runs_through_the_cli_alone() {
    let lx = Loopx::sqlite();
    seed_goal(&lx);
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];

    // The first turn runs under `loopx run`, and the machine dies under it.
    let (killed, _) = kill_a_running_turn(&lx);

    // Nobody renews the lease now: once it expires the turn's outcome is unknown, and the
    // decision is to repair it, naming the verb that does.
    repair_named(&lx, &killed);

    // The agent reads back what the turn did (the tree is at the commit it started from, the
    // turn wrote nothing) and resolves it with the verb the decision names.
    let resolved = lx.ok(&[
        &agent[..],
        &[
            "resolve-outcome",
            "--todo",
            "change-output-layer",
            "--turn",
            &killed,
            "--resolution",
            "absent",
            "--note",
            "killed before it wrote anything: the tree is at the commit it started from",
        ],
    ]
    .concat());
    assert_eq!(resolved["lease"]["status"], "open", "{resolved:#}");
    assert_eq!(resolved["lease"]["lease"], Value::Null, "{resolved:#}");
    let reopened = next(&lx);
    assert_eq!(reopened["kind"], "continue", "{reopened:#}");
    assert_eq!(reopened["todo"], "change-output-layer");
    assert_eq!(reopened["lease"]["step"], "claim");

    // The story goes on as the seed tells it: the turn again, committing abc123.
    turn(
        &lx,
        "change-output-layer",
        "t1",
        &[
            passing("tests.text_output", "git:abc123"),
            passing("tests.json_schema", "git:abc123"),
        ],
        &[head("git:abc123")],
    );

    // The question for the maintainer blocks one todo only, and the story goes on.
    the_rest_of_the_story(&lx);
    // The history holds the killed turn and its resolution, and nothing was charged for it.
    let log = lx.ok(&["--goal", GOAL, "log"]);
    let events = log["events"].as_array().expect("events");
    let absent: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"]["type"] == "outcome_absent")
        .collect();
    assert_eq!(absent.len(), 1, "{log:#}");
    assert_eq!(absent[0]["event"]["turn"], killed.as_str());
    let settled = events
        .iter()
        .filter(|e| e["event"]["type"] == "turn_settled")
        .count();
    assert_eq!(
        settled, 3,
        "the three turns of the story, the killed one not among them"
    );
    assert_eq!(lx.ok(&["doctor"])["doctor"]["ok"], true);
}

/// The same story when the killed turn had in fact done its work: after the restart `loopx run`
/// stops at `repair`, and the agent resolves the turn as committed. On the signed goal that
/// needs the validator's signed verdict, and each refusal on the way names the command that
/// goes through: `verdict_unsigned` names `loopx verdict` and `--verdict` on the very verb that
/// was refused.
#[test]
fn a_killed_turn_that_committed_is_resolved_with_the_validators_signed_verdict() {
    let lx = Loopx::sqlite();
    seed_goal(&lx);
    let agent = ["--goal", GOAL, "--as", "agent:agent-a"];
    let (killed, killed_epoch) = kill_a_running_turn(&lx);

    // The restarted run cannot settle a turn whose executor left no result: it stops at
    // `repair`, naming the verb.
    let restarted = lx.run(&RUN);
    let said = format!("{}{}", restarted.stdout, restarted.stderr);
    assert!(
        said.contains("resolve-outcome"),
        "the restarted run names the repair ({}): {said}",
        restarted.code
    );
    repair_named(&lx, &killed);

    // Reading back shows the turn's commit, abc123, with the tests passing there. The restart
    // took the turn over before it stopped, so the lease's epoch moved on: the validator signs
    // under the current one, and the settlement file may leave it out.
    let epoch = lx.ok(&["--goal", GOAL, "todo", "list"])["todos"]
        .as_array()
        .expect("todos")
        .iter()
        .find(|t| t["id"] == "change-output-layer")
        .and_then(|t| t["lease"]["epoch"].as_u64())
        .expect("the expired lease's epoch");
    assert!(epoch > killed_epoch, "the restart took the turn over");
    let mut settled = settlement(
        "change-output-layer",
        epoch,
        &killed,
        &[
            passing("tests.text_output", "git:abc123"),
            passing("tests.json_schema", "git:abc123"),
        ],
        &[head("git:abc123")],
    );
    // `loopx run` reserved one turn and no tokens: a script's turn reports no model usage.
    settled["usage"] = json!({ "turns": 1, "wall_ms": 2_000 });
    let mut file_settlement = settled.clone();
    for known in ["todo", "turn", "epoch"] {
        file_settlement
            .as_object_mut()
            .expect("an object")
            .remove(known);
    }
    let file = lx.json_file("killed-settlement.json", &file_settlement);
    let resolve = |extra: &[&str]| {
        lx.json(
            &[
                &agent[..],
                &[
                    "resolve-outcome",
                    "--todo",
                    "change-output-layer",
                    "--turn",
                    &killed,
                    "--resolution",
                    "committed",
                    "--settlement-file",
                    &file,
                ],
                extra,
            ]
            .concat(),
        )
    };
    let (code, refusal) = resolve(&[]);
    assert_eq!(code, 3, "{refusal:#}");
    assert_eq!(refusal["error"]["code"], "verdict_unsigned", "{refusal:#}");
    let hint = refusal["error"]["hint"].as_str().expect("a hint");
    assert!(
        hint.contains("loopx verdict --as validator:cargo-test")
            && hint.contains("--verdict")
            && hint.contains("loopx resolve-outcome"),
        "the hint names the signing verb and the flag on this verb: {hint}"
    );

    // The validator signs its verdict on the killed turn; the agent passes it to the verb.
    let verdict = support::signed_verdict(&lx, GOAL, None, &settled);
    let (code, resolved) = resolve(&["--verdict", &verdict]);
    assert_eq!(code, 0, "{resolved:#}");
    let todo = lx.ok(&["--goal", GOAL, "todo", "list"]);
    let first = todo["todos"]
        .as_array()
        .expect("todos")
        .iter()
        .find(|t| t["id"] == "change-output-layer")
        .expect("the first todo");
    assert_eq!(first["status"], "done", "{first:#}");

    the_rest_of_the_story(&lx);
    let verified = lx.ok(&["doctor", "--verify"]);
    assert_eq!(verified["doctor"]["ok"], true, "{verified:#}");
}
