//! The command executor with real processes: the turn's identity reaches the command, its
//! report is read back, and the journal tells a restarted engine what happened to a turn.

use loopx_kernel::seams::{Executor, Recovery, TurnRequest};
use loopx_kernel::{Amounts, Continuation, Timestamp, Transition};
use loopx_provider::executor::CommandExecutor;
use loopx_provider::process::CommandSpec;

fn turn(name: &str) -> TurnRequest {
    TurnRequest {
        goal: "g".try_into().expect("id"),
        objective: "add --format json".into(),
        todo: "edit".try_into().expect("id"),
        title: "change the output layer".into(),
        agent: "alice".try_into().expect("id"),
        epoch: 3,
        turn: name.try_into().expect("id"),
        reserved: Amounts::ZERO,
        handoff: None,
        deadline: Timestamp::parse("2026-11-29T11:00:00Z").expect("instant"),
    }
}

fn shell(script: &str) -> CommandSpec {
    CommandSpec::new("sh").arg("-c").arg(script)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn the_command_sees_the_turn_and_its_json_report_is_taken() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let script = r#"echo "working on $LOOPX_TODO"; printf '{"transition":{"kind":"keep_open"},"observations":[],"usage":{"tokens":7},"summary":"%s %s %s"}\n' "$LOOPX_TURN" "$LOOPX_EPOCH" "$LOOPX_GOAL""#;
    let executor = CommandExecutor::new(shell(script), journal.path());

    let report = runtime()
        .block_on(executor.run(&turn("t1")))
        .expect("the turn runs");

    assert_eq!(report.transition, Transition::KeepOpen);
    assert_eq!(report.summary, "t1 3 g");
    assert_eq!(report.usage.tokens, 7);
}

#[test]
fn without_a_report_the_exit_code_proposes_the_transition() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let rt = runtime();
    let passing = CommandExecutor::new(shell("true"), journal.path());
    let failing = CommandExecutor::new(shell("exit 3"), journal.path());

    let passed = rt.block_on(passing.run(&turn("t1"))).expect("runs");
    let failed = rt.block_on(failing.run(&turn("t2"))).expect("runs");

    assert_eq!(
        passed.transition,
        Transition::Complete {
            continuation: Continuation::GoalStillActive
        }
    );
    assert_eq!(failed.transition, Transition::KeepOpen);
    assert!(failed.summary.contains("exit 3"), "{}", failed.summary);
}

#[test]
fn the_journal_tells_not_started_finished_and_unknown_apart() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let rt = runtime();
    let quick = CommandExecutor::new(shell("true"), journal.path());
    assert_eq!(
        rt.block_on(quick.recover(&turn("t1"))),
        Recovery::NotStarted
    );

    let report = rt.block_on(quick.run(&turn("t1"))).expect("runs");
    assert_eq!(
        rt.block_on(quick.recover(&turn("t1"))),
        Recovery::Finished(report)
    );

    // A turn whose executor died mid-run: started, never reported.
    let slow = CommandExecutor::new(shell("sleep 30"), journal.path());
    let interrupted = rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_millis(300), slow.run(&turn("t2"))).await
    });
    assert!(interrupted.is_err(), "the turn was cut off");
    assert_eq!(rt.block_on(slow.recover(&turn("t2"))), Recovery::Unknown);
    // Other turns are unaffected.
    assert_eq!(rt.block_on(slow.recover(&turn("t3"))), Recovery::NotStarted);
}

#[test]
fn the_journal_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().expect("a temporary directory");
    let journal = parent.path().join("journal");
    let executor = CommandExecutor::new(shell("true"), &journal);

    runtime().block_on(executor.run(&turn("t1"))).expect("runs");

    let mode = std::fs::metadata(&journal)
        .expect("the journal exists")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}
