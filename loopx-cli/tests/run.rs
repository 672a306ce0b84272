//! `loopx run` with real processes and real git: the loop to the end of a goal, and a run
//! killed with SIGKILL in the middle of a turn, resumed by the next run.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{Loopx, git};

const GOAL: &str = "demo";

/// The turn: append a line to `work.txt` and commit. With `hang` present it first leaves its
/// pid in `turn.pid` and stands still (to be killed). With `last` present it reports the todo
/// complete with nothing to follow, so the goal may close.
const TURN: &str = r#"
if [ -e ../hang ]; then echo $$ > ../turn.pid; sleep 60; fi
echo "$LOOPX_TODO $LOOPX_TURN" >> work.txt
git add work.txt && git -c user.name=a -c user.email=a@example.com commit -q -m "$LOOPX_TODO"
if [ -e ../last ]; then
  echo '{"transition":{"kind":"complete","continuation":{"kind":"no_follow_up"}},"summary":"done"}'
fi
"#;

/// The validator: the work file exists at the committed head.
const CHECK: &str = "git diff --quiet HEAD && test -s work.txt\n";

/// A SQLite store, a goal with one criterion on `repo:demo`, the given todos, and a git
/// repository `repo` holding the turn and check scripts.
fn setup(todos: &[&[&str]]) -> Loopx {
    setup_on(Loopx::sqlite(), todos)
}

/// The same on a fresh database of the throwaway PostgreSQL cluster.
fn setup_postgres(todos: &[&[&str]]) -> Loopx {
    setup_on(
        Loopx::with_store(loopx_store::test_cluster::cluster().database()),
        todos,
    )
}

fn setup_on(lx: Loopx, todos: &[&[&str]]) -> Loopx {
    setup_for("agent-a", lx, todos)
}

/// The same with `agent` as the goal's agent.
fn setup_for(agent: &str, lx: Loopx, todos: &[&[&str]]) -> Loopx {
    lx.ok(&["init"]);
    let owner = ["--goal", GOAL, "--as", "person:olivia"];
    lx.ok(&[
        &owner[..],
        &[
            "goal",
            "create",
            "--objective",
            "write the work file",
            "--criterion",
            "work-done,validate,repo:demo,the work file is committed",
            "--agent",
            agent,
        ],
    ]
    .concat());
    for todo in todos {
        lx.ok(&[&owner[..], &["todo", "add"], todo].concat());
    }
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    std::fs::write(repo.join("turn.sh"), TURN).expect("turn script");
    std::fs::write(repo.join("check.sh"), CHECK).expect("check script");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    lx
}

const RUN: [&str; 13] = [
    "--goal",
    GOAL,
    "run",
    "--agent",
    "agent-a",
    "--exec",
    "sh turn.sh",
    "--validate",
    "sh check.sh",
    "--subject",
    "repo:demo",
    "--workspace",
    "repo",
];

const TWO_TODOS: [&[&str]; 2] = [
    &["--id", "first", "--title", "first line"],
    &[
        "--id",
        "second",
        "--title",
        "second line",
        "--depends-on",
        "first",
    ],
];

#[test]
fn run_works_the_goal_to_terminal_with_real_processes() {
    to_terminal(&setup(&TWO_TODOS));
}

#[test]
fn run_works_the_goal_to_terminal_on_postgres() {
    to_terminal(&setup_postgres(&TWO_TODOS));
}

fn to_terminal(lx: &Loopx) {
    std::fs::write(lx.path("last"), "").expect("marker");

    let (code, out) = lx.json(&RUN);

    assert_eq!(code, 0, "run exits 0 at `terminal`: {out:#}");

    let steps = out["steps"].as_array().expect("steps");
    let settled: Vec<&str> = steps
        .iter()
        .filter(|s| s["turn"]["outcome"] == "settled")
        .filter_map(|s| s["turn"]["todo"].as_str())
        .collect();
    assert_eq!(settled, ["first", "second"]);
    assert_eq!(out["decision"]["kind"], "terminal", "{out:#}");
    let work = std::fs::read_to_string(lx.path("repo/work.txt")).expect("the work file");
    assert_eq!(work.lines().count(), 2, "each todo ran exactly once");
}

#[test]
fn run_shows_progress_for_people() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);

    let run = lx.run(&RUN);

    // Without a turn report the goal stays active: `run` stops at the missing closure intent.
    assert_eq!(run.code, REPLAN, "{}", run.stderr);
    assert!(run.stdout.contains("step   1"), "{}", run.stdout);
    assert!(
        run.stdout.contains("turn on `only` settled: Passed"),
        "{}",
        run.stdout
    );
}

/// Starts `loopx run` in the background with `hang` present, waits until its turn is under
/// way, and kills both the run and its turn with SIGKILL.
fn kill_mid_turn(lx: &Loopx) {
    std::fs::write(lx.path("hang"), "").expect("marker");
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopx"))
        .arg("--store")
        .arg(&lx.store)
        .args(RUN)
        .current_dir(lx.dir.path())
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("loopx run starts");
    let pid_file = lx.path("turn.pid");
    let mut turn_pid = String::new();
    for _ in 0..400 {
        turn_pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if !turn_pid.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!turn_pid.trim().is_empty(), "the turn never started");
    child.kill().expect("SIGKILL the run");
    child.wait().expect("reaped");
    let _ = Command::new("kill")
        .args(["-KILL", turn_pid.trim()])
        .status();
    std::fs::remove_file(lx.path("hang")).expect("marker removed");
}

fn next_lease_step(lx: &Loopx) -> Value {
    let next = lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"]);
    next["decision"]["lease"].clone()
}

#[test]
fn a_killed_run_is_resumed_under_the_same_turn_id_when_the_todo_is_idempotent() {
    resumed_under_the_same_turn_id(&setup(&[&[
        "--id",
        "edit",
        "--title",
        "append a line",
        "--idempotent",
    ]]));
}

#[test]
fn a_killed_run_on_postgres_is_resumed_under_the_same_turn_id() {
    resumed_under_the_same_turn_id(&setup_postgres(&[&[
        "--id",
        "edit",
        "--title",
        "append a line",
        "--idempotent",
    ]]));
}

fn resumed_under_the_same_turn_id(lx: &Loopx) {
    kill_mid_turn(lx);
    let lease = next_lease_step(lx);
    assert_eq!(lease["step"], "resume", "{lease:#}");

    let (_, out) = lx.json(&RUN);

    let turn = &out["steps"][0]["turn"];
    assert_eq!(turn["outcome"], "settled", "{out:#}");
    assert_eq!(turn["resumed"], true);
    assert_eq!(turn["turn"], lease["turn"], "the same turn id");
    let log = lx.ok(&["--goal", GOAL, "log"]);
    let settlements = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["event"]["type"] == "turn_settled")
        .count();
    assert_eq!(settlements, 1, "settled once, never twice");
}

#[test]
fn a_killed_run_with_an_uncertain_effect_goes_to_repair() {
    uncertain_effect_goes_to_repair(&setup(&[&["--id", "publish", "--title", "append a line"]]));
}

#[test]
fn a_killed_run_on_postgres_with_an_uncertain_effect_goes_to_repair() {
    uncertain_effect_goes_to_repair(&setup_postgres(&[&[
        "--id",
        "publish",
        "--title",
        "append a line",
    ]]));
}

fn uncertain_effect_goes_to_repair(lx: &Loopx) {
    kill_mid_turn(lx);

    let (code, out) = lx.json(&RUN);

    assert_eq!(code, REPAIR, "run exits with the code of `repair`: {out:#}");

    assert_eq!(out["steps"][0]["turn"]["outcome"], "unknown", "{out:#}");
    assert_eq!(out["decision"]["kind"], "repair");
    let work = std::fs::read_to_string(lx.path("repo/work.txt")).unwrap_or_default();
    assert!(
        work.is_empty(),
        "the uncertain turn was not silently re-run"
    );
}

/// The exit codes of `run`, one per decision it stops at (see `loopx run --help`).
const WAIT: i32 = 10;
const ASK: i32 = 11;
const REPLAN: i32 = 12;
const REPAIR: i32 = 13;

#[test]
fn a_turn_without_a_report_stops_at_replan_and_says_to_close_the_goal() {
    // No `last` marker: the turn exits zero without a report, which proposes completing the
    // todo with the goal still active. Every criterion is met, so the missing closure intent
    // is what is left, and `run` says which verb declares it.
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);

    let run = lx.run(&RUN);

    assert_eq!(run.code, REPLAN, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("replan: every criterion is met and no work is left, but nobody declared the intent to close — close the goal: loopx goal close --reason …"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("{\""),
        "no JSON in human output:\n{}",
        run.stdout
    );
    let (code, out) = lx.json(&RUN);
    assert_eq!(code, REPLAN);
    assert_eq!(out["decision"]["reason"]["why"], "closure_intent_missing");
    assert_eq!(out["decision"]["reason"]["fix"]["verb"], "goal close");
    assert_eq!(out["decision"]["reason"]["fix"]["call"], "declare_closure");

    // The fix acts on it: the goal closes and the next run is terminal.
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "goal",
        "close",
        "--reason",
        "done",
    ]);
    let (code, out) = lx.json(&RUN);
    assert_eq!(code, 0, "{out:#}");
    assert_eq!(out["decision"]["kind"], "terminal");
}

#[test]
fn run_stops_at_ask_naming_the_gate_and_who_answers_it() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:olivia",
        "gate",
        "open",
        "--id",
        "G1",
        "--question",
        "may the work file change?",
        "--owner",
        "person:olivia",
        "--todo",
        "only",
    ]);

    let run = lx.run(&RUN);

    assert_eq!(run.code, ASK, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("next: ask: gate G1 for person:olivia — \"may the work file change?\""),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("answer: loopx gate answer --gate G1 --answer … (by person:olivia)"),
        "{}",
        run.stdout
    );
}

#[test]
fn run_stops_at_wait_with_its_own_exit_code() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:olivia",
        "todo",
        "defer",
        "--todo",
        "only",
        "--until-time",
        "2099-01-01T00:00:00Z",
    ]);

    let (code, out) = lx.json(&RUN);

    assert_eq!(code, WAIT, "{out:#}");
    assert_eq!(out["decision"]["kind"], "wait");
    assert_eq!(out["decision"]["reasons"][0]["fix"]["verb"], "next");
}

#[test]
fn run_takes_the_agent_from_the_acting_actor() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);
    std::fs::write(lx.path("last"), "").expect("marker");
    let without_agent: Vec<&str> = RUN
        .iter()
        .copied()
        .filter(|a| *a != "--agent" && *a != "agent-a")
        .collect();

    let run = lx.run_env(&without_agent, &[("LOOPX_ACTOR", "agent:agent-a")]);

    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("terminal (accepted)"), "{}", run.stdout);
}

#[test]
fn a_validator_that_dirties_the_tree_is_named_with_the_files_it_left() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);
    std::fs::write(lx.path("last"), "").expect("marker");
    // The validator leaves an untracked lock file behind, as `cargo test` does with Cargo.lock.
    std::fs::write(
        lx.path("repo/check.sh"),
        "test -s work.txt && echo lock > Cargo.lock\n",
    )
    .expect("check script");
    let repo = lx.path("repo");
    git(
        &repo,
        &["commit", "-q", "-am", "a validator that leaves a file"],
    );

    let run = lx.run(&RUN);

    assert_eq!(run.code, REPLAN, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("the workspace has uncommitted or untracked files: Cargo.lock"),
        "{}",
        run.stdout
    );
    let list = lx.run(&["--goal", GOAL, "evidence", "list"]);
    assert!(
        list.stdout.contains("stale: established on a dirty tree"),
        "{}",
        list.stdout
    );
    let status = lx.run(&["--goal", GOAL, "status"]);
    assert!(
        status.stdout.contains("stale: established on a dirty tree"),
        "{}",
        status.stdout
    );
    let (_, out) = lx.json(&RUN);
    assert_eq!(out["workspace_dirty"][0], "Cargo.lock");

    // The fix names the verb that checks again; with the file gone it refreshes the evidence.
    let next = lx.run(&["--goal", GOAL, "--as", "agent:agent-a", "next"]);
    assert!(
        next.stdout
            .contains("loopx validate --criterion work-done --validate …"),
        "{}",
        next.stdout
    );
    assert!(
        next.stdout.contains("established on a dirty tree"),
        "the same words as `status` and `evidence list`: {}",
        next.stdout
    );
    std::fs::remove_file(repo.join("Cargo.lock")).expect("the lock file");
    let validate = [
        "--goal",
        GOAL,
        "--as",
        "validator:validate.agent-a",
        "validate",
        "--criterion",
        "work-done",
        "--validate",
        "test -s work.txt",
        "--workspace",
        "repo",
    ];
    let run = lx.run(&validate);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("criterion work-done is met"),
        "{}",
        run.stdout
    );

    // A failing check is recorded with what it printed, and the exit says it failed.
    std::fs::write(
        repo.join("fail.sh"),
        "echo '3 failures in serde_roundtrip' >&2; exit 1\n",
    )
    .expect("a failing check");
    let mut failing = validate.to_vec();
    failing[8] = "sh fail.sh";
    let run = lx.run(&failing);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("3 failures in serde_roundtrip"),
        "{}",
        run.stdout
    );
}

#[test]
fn run_on_a_mistyped_goal_names_the_near_one_and_runs_nothing() {
    let lx = setup(&[&["--id", "only", "--title", "the only line"]]);
    let mut args = RUN.to_vec();
    args[1] = "dmeo";

    let (code, error) = lx.json(&args);

    assert_eq!(code, 5, "{error:#}");
    assert_eq!(error["error"]["code"], "unknown_goal");
    assert!(
        error["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("did you mean `demo`?")),
        "{error:#}"
    );
    assert!(!lx.path("repo/work.txt").exists(), "no turn ran");
}

#[test]
fn an_agent_id_never_places_its_journal_outside_the_journal_directory() {
    // Found in review: the agent id was joined to the journal directory raw, so
    // `a/../../escaped-journal` (a valid id) wrote its journal beside `journal/`.
    let agent = "a/../../escaped-journal";
    let lx = setup_for(
        agent,
        Loopx::sqlite(),
        &[&["--id", "only", "--title", "the only line"]],
    );
    std::fs::write(lx.path("last"), "").expect("marker");
    let mut run = RUN;
    run[4] = agent;

    let out = lx.ok(&run);

    assert_eq!(out["decision"]["kind"], "terminal", "{out:#}");
    assert!(!lx.path("escaped-journal").exists(), "the journal escaped");
    let names: Vec<String> = std::fs::read_dir(lx.path("journal"))
        .expect("the journal directory")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, ["a=2F=2E=2E=2F=2E=2E=2Fescaped-journal"]);
    let records = std::fs::read_dir(lx.path("journal").join(&names[0]))
        .expect("the agent's journal")
        .count();
    assert!(records >= 2, "a started record and a report");

    // An absolute path or a climb is not an agent id at all: refused before anything runs.
    let outside = lx.path("outside");
    let absolute = outside.display().to_string();
    for bad in [absolute.as_str(), "../escaped-journal"] {
        run[4] = bad;
        let refused = lx.run(&run);
        assert_eq!(refused.code, 2, "{bad}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("starting with a letter or digit"),
            "{}",
            refused.stderr
        );
    }
    assert!(!outside.exists());
    assert!(!lx.path("escaped-journal").exists());
}

/// A turn that writes the same line and commits it, reporting the todo open: the second time
/// there is nothing left to commit, `git commit` fails and so does the turn.
const COMMIT_ONCE: &str = r#"
set -e
echo "the one line" > work.txt
git add work.txt
git -c user.name=a -c user.email=a@example.com commit -q -m "$LOOPX_TODO"
echo '{"transition":{"kind":"keep_open"},"summary":"committed"}'
"#;

/// A SQLite store, a goal whose retry policy pauses 200 ms, then 400 ms, and raises the replan
/// obligation at the third failure in a row, one todo `edit`, and a repository holding
/// `turn.sh` (the turn) and `check.sh` (the validator).
fn setup_failing(turn: &str, check: &str) -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let spec = serde_json::json!({
        "id": GOAL,
        "objective": "write the work file",
        "owner": "olivia",
        "criteria": [],
        "agents": ["agent-a"],
        "policy": {
            "retry": {"attempts": 3, "backoff": 200, "max_backoff": 2000, "jitter_percent": 0}
        }
    });
    let file = lx.json_file("spec.json", &spec);
    let owner = ["--goal", GOAL, "--as", "person:olivia"];
    lx.ok(&[&owner[..], &["goal", "create", "--file", &file]].concat());
    lx.ok(&[
        &owner[..],
        &["todo", "add", "--id", "edit", "--title", "edit"],
    ]
    .concat());
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    std::fs::write(repo.join("turn.sh"), turn).expect("turn script");
    std::fs::write(repo.join("check.sh"), check).expect("check script");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    lx
}

/// `loopx run --wait` (at most 30 steps): it must stop on its own at a replan naming `edit`,
/// after `failures` failed turns and a pause before each retry. Returns the text it printed.
fn runs_to_the_failing_obligation(lx: &Loopx, failures: usize, failed: &str) -> String {
    let run = lx.run(&[&RUN[..], &["--wait", "--max-steps", "30"]].concat());

    assert_eq!(run.code, REPLAN, "{}", run.stderr);
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("step"))
        .collect();
    let attempts = lines.iter().filter(|l| l.contains(failed)).count();
    assert_eq!(attempts, failures, "{}", run.stdout);
    let pauses: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("pauses until"))
        .collect();
    assert_eq!(
        pauses.len(),
        failures - 1,
        "a pause before each retry:\n{}",
        run.stdout
    );
    // The kernel admits no retry before its pause: 200 ms after the first failure, 400 ms
    // after the second (the log's times; each retry may come later, never sooner).
    let log = lx.ok(&["--goal", GOAL, "log"]);
    let events = log["events"].as_array().expect("events");
    let at = |e: &serde_json::Value| {
        loopx_kernel::Timestamp::parse(e["at"].as_str().expect("a time")).expect("RFC 3339")
    };
    let failed_at: Vec<_> = events
        .iter()
        .filter(|e| {
            e["event"]["result"]["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("_failed"))
        })
        .map(at)
        .collect();
    let begun_at: Vec<_> = events
        .iter()
        .filter(|e| e["event"]["type"] == "turn_begun")
        .map(at)
        .collect();
    assert_eq!(failed_at.len(), failures);
    for (n, pause) in [(0, 200), (1, 400)] {
        let retried = begun_at
            .iter()
            .find(|b| **b > failed_at[n])
            .expect("a retry");
        assert!(
            retried.since(failed_at[n]).as_millis() >= pause,
            "retry {n} came {} after the failure",
            retried.since(failed_at[n])
        );
    }
    let last = lines.last().expect("a step");
    assert!(last.contains("next: replan"), "{}", run.stdout);
    assert!(
        last.contains("`edit` failed"),
        "the replan names the todo: {last}"
    );
    assert!(lines.len() < 30, "stopped by the policy, not --max-steps");

    let next = lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"]);
    let reason = &next["decision"]["reason"];
    assert_eq!(reason["cause"]["cause"], "turns_failing", "{next:#}");
    assert_eq!(reason["cause"]["todo"], "edit");
    assert_eq!(reason["cause"]["failures"], 3);
    run.stdout
}

#[test]
fn run_over_a_turn_that_keeps_failing_backs_off_and_ends_at_a_replan() {
    let lx = setup_failing(COMMIT_ONCE, CHECK);

    let out = runs_to_the_failing_obligation(&lx, 3, "executor failed (exited");

    assert!(
        out.contains("settled: Passed · next: continue"),
        "the first turn commits: {out}"
    );
    let log = lx.ok(&["--goal", GOAL, "log"]);
    let results: Vec<&str> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["event"]["result"]["kind"].as_str())
        .collect();
    assert_eq!(
        results,
        [
            "progress",
            "executor_failed",
            "executor_failed",
            "executor_failed"
        ],
        "recorded in the settlements"
    );
}

#[test]
fn run_over_a_validator_that_keeps_failing_backs_off_and_ends_at_a_replan() {
    let lx = setup_failing(TURN, "exit 1\n");

    runs_to_the_failing_obligation(&lx, 3, "validation failed");
}

/// The token the validator runs with: it must appear nowhere loopx writes.
const TOKEN: &str = "ghp_s3cr3tT0kenValue";

/// A check that fails saying why, and prints the token it was given.
const FAILING_CHECK: &str = r#"
echo "authenticating with $GITHUB_TOKEN" >&2
echo "running 12 tests"
echo "tests failed: 3 failures in serde_roundtrip" >&2
exit 1
"#;

/// The turn, keeping the request it was given beside the repository.
const TURN_KEEPING_ITS_REQUEST: &str = r#"
cp "$LOOPX_REQUEST_FILE" "../request-$LOOPX_TURN.json"
echo "$LOOPX_TURN" >> work.txt
git add work.txt && git -c user.name=a -c user.email=a@example.com commit -q -m "$LOOPX_TURN"
"#;

#[test]
fn a_failing_checks_words_reach_the_run_the_evidence_and_the_next_turn_but_its_token_does_not() {
    let lx = setup_failing(TURN_KEEPING_ITS_REQUEST, FAILING_CHECK);
    let run = lx.run_env(
        &[
            &RUN[..],
            &["--pass-env", "GITHUB_TOKEN", "--wait", "--max-steps", "30"],
        ]
        .concat(),
        &[("GITHUB_TOKEN", TOKEN)],
    );
    assert_eq!(run.code, REPLAN, "{}", run.stderr);
    // `run` shows why each turn failed, in the check's own words.
    assert!(
        run.stdout
            .contains("    │ tests failed: 3 failures in serde_roundtrip"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("    │ running 12 tests"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("authenticating with [redacted]"),
        "{}",
        run.stdout
    );
    // So do `status` and the brief, under the todo whose turns failed.
    let status = lx.run(&["--goal", GOAL, "status"]).stdout;
    assert!(
        status.contains("failed 3 turn(s) in a row")
            && status.contains("      │ tests failed: 3 failures in serde_roundtrip"),
        "{status}"
    );
    let brief = lx
        .run(&["--goal", GOAL, "brief", "--agent", "agent-a"])
        .stdout;
    assert!(
        brief.contains("    │ tests failed: 3 failures in serde_roundtrip"),
        "{brief}"
    );
    // The failing evidence says it too.
    let evidence = lx.ok(&["--goal", GOAL, "evidence", "list"]).to_string();
    assert!(
        evidence.contains("3 failures in serde_roundtrip"),
        "{evidence}"
    );
    // Each turn after the first starts from what failed before it.
    let requests: Vec<Value> = std::fs::read_dir(lx.path("."))
        .expect("the test directory")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("request-"))
        .map(|e| {
            serde_json::from_slice(&std::fs::read(e.path()).expect("a request")).expect("JSON")
        })
        .collect();
    assert_eq!(requests.len(), 3, "three turns ran");
    let told: Vec<usize> = requests
        .iter()
        .map(|r| r["failures"].as_array().map_or(0, Vec::len))
        .collect();
    let mut sorted = told.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 1, 2], "each turn knows the failures before it");
    assert!(
        requests
            .iter()
            .flat_map(|r| r["failures"].as_array().cloned().unwrap_or_default())
            .all(|f| f["result"]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("3 failures in serde_roundtrip"))),
        "{requests:#?}"
    );
    // The token is nowhere: not in what run printed, the store, an export or a request.
    let export = lx.run(&["--goal", GOAL, "export"]);
    let mut written = vec![run.stdout, run.stderr, export.stdout];
    for entry in std::fs::read_dir(lx.path(".")).expect("the test directory") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            written
                .push(String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned());
        }
    }
    assert!(
        written.iter().all(|text| !text.contains(TOKEN)),
        "the token leaked"
    );
}
