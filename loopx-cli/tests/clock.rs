//! Time through the command line: `--now` cannot run ahead of the store's clock, so an agent
//! whose clock is set forward cannot expire another agent's lease and take its todo; on a store
//! created with `loopx init --test-clock` it moves time, as tests and scripts need.

mod support;

use support::{Loopx, at};

const GOAL: &str = "clocked";

/// The wall clock plus `minutes`, as `--now` takes it.
fn wall(minutes: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch");
    let millis = i64::try_from(now.as_millis()).expect("in range") + minutes * 60_000;
    loopx_kernel::Timestamp::from_millis(millis).to_string()
}

/// A goal with agents `agent-a` and `agent-b` and one todo `edit`, created at `created`, with
/// `edit` claimed by `agent-a` at `claimed` for 15 minutes.
fn claimed_by_a(lx: &Loopx, created: &str, claimed: &str) {
    let owner = [
        "--goal",
        GOAL,
        "--as",
        "person:maintainer",
        "--now",
        created,
    ];
    lx.ok(&[
        &owner[..],
        &[
            "goal",
            "create",
            "--objective",
            "keep time honest",
            "--agent",
            "agent-a",
            "--agent",
            "agent-b",
        ],
    ]
    .concat());
    lx.ok(&[
        &owner[..],
        &["todo", "add", "--id", "edit", "--title", "change it"],
    ]
    .concat());
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "--now",
        claimed,
        "claim",
        "--todo",
        "edit",
        "--ttl",
        "15m",
    ]);
}

fn holder(lx: &Loopx) -> String {
    let todos = lx.ok(&["--goal", GOAL, "todo", "list"]);
    todos["todos"]
        .as_array()
        .and_then(|list| list.iter().find(|t| t["id"] == "edit"))
        .and_then(|t| t["lease"]["holder"].as_str())
        .unwrap_or("none")
        .to_owned()
}

fn claim_as_b(lx: &Loopx, now: &str) -> (i32, serde_json::Value) {
    lx.json(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-b",
        "--now",
        now,
        "claim",
        "--todo",
        "edit",
    ])
}

#[test]
fn an_agent_an_hour_ahead_cannot_take_another_agents_todo() {
    let lx = Loopx::sqlite();
    let init = lx.ok(&["init"]);
    assert_eq!(init["init"]["clock"], "system", "{init:#}");
    claimed_by_a(&lx, &at(29, "10:00"), &wall(0));

    let (code, out) = claim_as_b(&lx, &wall(60));

    assert_eq!(code, 3, "refused: {out:#}");
    assert_eq!(out["error"]["code"], "clock_ahead", "{out:#}");
    let message = out["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("store's clock"), "{message}");
    assert!(
        out["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--test-clock")),
        "{out:#}"
    );
    assert_eq!(holder(&lx), "agent-a", "agent-a keeps its lease");
}

#[test]
fn on_a_test_clock_store_now_moves_time() {
    let lx = Loopx::sqlite();
    let init = lx.ok(&["init", "--test-clock"]);
    assert_eq!(init["init"]["clock"], "test", "{init:#}");
    // A later `init` sees the clock the store was created with.
    assert_eq!(lx.ok(&["init"])["init"]["clock"], "test");
    let far = "2030-01-01T10:00:00Z";
    claimed_by_a(&lx, far, far);

    let (code, out) = claim_as_b(&lx, "2030-01-01T11:00:00Z");

    assert_eq!(code, 0, "{out:#}");
    assert_eq!(
        holder(&lx),
        "agent-b",
        "the lease expired at the given time"
    );
    let status = lx.ok(&["--goal", GOAL, "status"]);
    assert_eq!(status["status"]["clock"], "test", "{status:#}");
    let doctor = lx.ok(&["doctor"]);
    assert_eq!(doctor["doctor"]["clock"], "test", "{doctor:#}");
    let text = lx.run(&["--goal", GOAL, "status"]);
    assert!(text.stdout.contains("test clock"), "{}", text.stdout);
}

#[test]
fn a_test_clock_is_chosen_only_when_the_store_is_created() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let run = lx.run(&["--json", "init", "--test-clock"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json()["error"]["code"], "clock_fixed", "{run:?}");
}

#[test]
fn a_command_behind_the_goals_time_is_brought_up_to_it() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    claimed_by_a(&lx, &at(29, "10:00"), &at(30, "10:00"));
    // A day behind the claim: brought up to the goal's last commit, not refused.
    let added = lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "agent:agent-b",
        "--now",
        &at(29, "09:00"),
        "todo",
        "add",
        "--id",
        "docs",
        "--title",
        "document it",
    ]);
    assert_eq!(
        added["receipt"]["committed_at"], "2026-11-30T10:00:00.000Z",
        "{added:#}"
    );
    let log = lx.ok(&["--goal", GOAL, "log"]);
    let times: Vec<&str> = log["events"]
        .as_array()
        .map(|events| events.iter().filter_map(|e| e["at"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(times.len(), 4, "{log:#}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

/// A history exported from a test-clock store with times ahead does not enter a normal store:
/// its import is the same refusal, and nothing is written.
#[test]
fn a_history_from_ahead_is_not_imported_into_a_store_on_its_own_clock() {
    let simulated = Loopx::sqlite();
    simulated.ok(&["init", "--test-clock"]);
    let far = "2030-01-01T10:00:00Z";
    claimed_by_a(&simulated, far, far);
    let exported = simulated.run(&["--goal", GOAL, "export"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);

    let real = Loopx::sqlite();
    real.ok(&["init"]);
    let file = real.file("clocked.jsonl", &exported.stdout);
    let (code, out) = real.json(&["import", "--file", &file]);
    assert_eq!(code, 3, "{out:#}");
    assert_eq!(out["error"]["code"], "clock_ahead", "{out:#}");
    let (code, _) = real.json(&["--goal", GOAL, "goal", "show"]);
    assert_eq!(code, 5, "nothing was imported");
}
