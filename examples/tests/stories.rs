//! Runs the quickstart, embed-host, pr-fix, automl, research and serve stories as their
//! binaries and checks that each ends as told (each also checks itself and exits non-zero when
//! it does not), the serve story on SQLite and on PostgreSQL, and the toy trainer on its own.

use std::process::{Command, Output};

fn run(program: &str, args: &[&str]) -> (Output, String) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() || !args.is_empty(),
        "{program} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    (output, stdout)
}

fn has_line(stdout: &str, parts: &[&str]) -> bool {
    stdout
        .lines()
        .any(|line| parts.iter().all(|part| line.contains(part)))
}

#[test]
fn pr_fix_ends_with_the_merge() {
    let (_, out) = run(env!("CARGO_BIN_EXE_pr-fix"), &[]);
    assert!(
        has_line(&out, &["agent-a's turn on", "/ci-fix@ec26c3e57ca3"]),
        "{out}"
    );
    assert!(has_line(&out, &["criterion linter-green: stale"]), "{out}");
    assert!(
        has_line(&out, &["-> agent-a: terminal (accepted)"]),
        "{out}"
    );
}

#[test]
fn automl_ends_at_the_promotion_gate() {
    let (_, out) = run(env!("CARGO_BIN_EXE_automl"), &[]);
    assert!(has_line(&out, &["exp-b failed: oom"]), "{out}");
    assert!(
        has_line(&out, &["-> agent-a: replan", "regressed:exp-c"]),
        "{out}"
    );
    assert!(
        has_line(&out, &["-> agent-a: ask person:olivia", "Promote exp-a"]),
        "{out}"
    );
}

#[test]
fn research_hands_the_holdout_to_an_independent_evaluator() {
    let (_, out) = run(env!("CARGO_BIN_EXE_research"), &[]);
    assert!(
        has_line(&out, &["dev lift alone supports nothing: h1 is active"]),
        "{out}"
    );
    assert!(
        has_line(&out, &["holdout:h1 handed to bob", "alice is excluded"]),
        "{out}"
    );
    assert!(
        has_line(&out, &["bob: continue with `holdout:h1`", "the note"]),
        "{out}"
    );
    assert!(has_line(&out, &["next action: run the holdout"]), "{out}");
    assert!(
        has_line(&out, &["holdout:h1-holdout: stale", "has changed"]),
        "{out}"
    );
    assert!(
        has_line(&out, &["leaderboard:h1: stale", "input holdout:h1-holdout"]),
        "{out}"
    );
    assert!(has_line(&out, &["olivia promotes h1"]), "{out}");
    assert!(
        has_line(&out, &["h1 promoted and written up", "terminal (accepted)"]),
        "{out}"
    );
}

#[test]
fn the_toy_trainer_writes_metrics_and_runs_out_of_memory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let trainer = env!("CARGO_BIN_EXE_toy-trainer");
    let metrics = dir.path().join("m.jsonl");
    let path = metrics.to_str().expect("a UTF-8 path");
    let (ok, _) = run(trainer, &["--lr", "0.05", "--out", path]);
    assert!(ok.status.success());
    let text = std::fs::read_to_string(&metrics).expect("metrics written");
    let points: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON point per line"))
        .collect();
    assert_eq!(points.len(), 20, "accuracy and loss every 20 of 200 steps");
    let (oom, _) = run(
        trainer,
        &["--batch", "256", "--memory-mb", "512", "--out", path],
    );
    assert_eq!(oom.status.code(), Some(137));
}

#[test]
fn quickstart_survives_a_killed_agent_and_ends_accepted() {
    // Kept (`--keep DIR`), so the store it leaves is checked too; the README's plain run is
    // `.ci/run`'s last step.
    let kept = tempfile::tempdir().expect("a directory");
    let dir = kept.path().join("story");
    let dir_text = dir.display().to_string();
    let (output, out) = run(env!("CARGO_BIN_EXE_quickstart"), &["--keep", &dir_text]);
    assert!(output.status.success(), "{out}");
    assert!(has_line(&out, &["crash", "killed with SIGKILL"]), "{out}");
    assert!(has_line(&out, &["recover", "resume turn docs@"]), "{out}");
    assert!(has_line(&out, &["settled `docs`", "same turn id"]), "{out}");
    assert!(has_line(&out, &["decide", "terminal (accepted)"]), "{out}");
    assert!(has_line(&out, &["after 3 charged turns"]), "{out}");
    assert!(
        has_line(&out, &["kept in", "status --goal cli-json-output"]),
        "{out}"
    );
    let store = loopx_store::SqliteStore::open(dir.join("loopx.db")).expect("the kept store opens");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let goal = loopx_kernel::GoalId::new("cli-json-output").expect("an id");
    let state = runtime
        .block_on(loopx_kernel::seams::Store::load(&store, &goal))
        .expect("loads")
        .expect("the story's goal");
    assert!(
        state.closure.is_some(),
        "the kept goal is the closed one: {state:?}"
    );
}

#[test]
fn the_embedded_host_runs_its_goal_to_the_end() {
    let (_, out) = run(env!("CARGO_BIN_EXE_embed-host"), &[]);
    assert!(has_line(&out, &["replan"]), "{out}");
    assert!(has_line(&out, &["terminal (Accepted)"]), "{out}");
}

/// The lines every run of the serve story prints, whatever its store.
fn the_night_and_the_morning(out: &str) {
    assert!(
        has_line(out, &["gate `json-contract` is posted once"]),
        "{out}"
    );
    assert!(
        has_line(
            out,
            &["the waiting engine woke", "ms after the delivery was sent"]
        ),
        "{out}"
    );
    assert!(
        has_line(out, &["criterion tests-green: met", "provider:github"]),
        "{out}"
    );
    assert!(
        has_line(
            out,
            &["field naming", "todo `question:Codertocat/Hello-World#2/"]
        ),
        "{out}"
    );
    assert!(
        has_line(out, &["agent-a answers in the pull request"]),
        "{out}"
    );
    assert!(
        has_line(out, &["mallory-gh", "relay_not_gate_owner"]),
        "{out}"
    );
    assert!(has_line(out, &["maria comments", "answered"]), "{out}");
    assert!(has_line(out, &["merge gate", "posted once"]), "{out}");
    assert!(
        has_line(
            out,
            &["agent-a declares the goal closed: terminal (accepted)"]
        ),
        "{out}"
    );
}

#[test]
fn the_serve_story_closes_the_night_on_sqlite() {
    let (_, out) = run(env!("CARGO_BIN_EXE_serve-story"), &[]);
    the_night_and_the_morning(&out);
    assert!(has_line(&out, &["loopx's service on SQLite"]), "{out}");
}

#[test]
fn the_serve_story_closes_the_night_on_postgres() {
    let url = loopx_store::test_cluster::cluster()
        .create_database("serve_story")
        .expect("a database for the story");
    let (output, out) = run(env!("CARGO_BIN_EXE_serve-story"), &["--postgres", &url]);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    the_night_and_the_morning(&out);
    assert!(has_line(&out, &["loopx's service on PostgreSQL"]), "{out}");
}
