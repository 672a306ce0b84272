//! The command executor with real processes: the turn's identity reaches the command, its
//! report is read back, and the journal tells a restarted engine what happened to a turn.

use loopx_kernel::seams::{Executor, Recovery, TurnRequest, UsageProblem};
use loopx_kernel::{Amounts, Continuation, Duration, FailureClass, Timestamp, Transition};
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
        decided: Vec::new(),
        failures: Vec::new(),
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
    let script = r#"echo "working on $LOOPX_TODO"; echo '{"tokens":7,"cost_micros":30}' > "$LOOPX_USAGE_FILE"; printf '{"transition":{"kind":"keep_open"},"observations":[],"summary":"%s %s %s"}\n' "$LOOPX_TURN" "$LOOPX_EPOCH" "$LOOPX_GOAL""#;
    let executor = CommandExecutor::new(shell(script), journal.path());

    let report = runtime()
        .block_on(executor.run(&turn("t1")))
        .expect("the turn runs");

    assert_eq!(report.transition, Transition::KeepOpen);
    assert_eq!(report.summary, "t1 3 g");
    assert_eq!(report.usage.tokens, 7);
    assert_eq!(report.usage.cost_micros, 30);
    assert_eq!(report.usage_problem, None);
}

/// A turn that writes no usage file, or a broken one, still reports: charged its reservation
/// of tokens and cost, with the typed problem, which never quotes the file.
#[test]
fn a_missing_or_malformed_usage_file_is_reported_and_the_reservation_stands() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let rt = runtime();
    let reserved = TurnRequest {
        reserved: Amounts {
            turns: 1,
            tokens: 500,
            cost_micros: 2_000,
            wall_ms: 60_000,
        },
        ..turn("t0")
    };
    // Each script, and whether it writes no file at all (else a malformed one).
    let cases = [
        ("true", true),
        (
            r#"echo '{"tokens":"sk-secret"}' > "$LOOPX_USAGE_FILE""#,
            false,
        ),
        (r#"echo '{"tokens":-3}' > "$LOOPX_USAGE_FILE""#, false),
        (
            r#"echo '{"tokens":1,"wall_ms":5}' > "$LOOPX_USAGE_FILE""#,
            false,
        ),
        (
            r#"head -c 70000 /dev/zero | tr '\0' ' ' > "$LOOPX_USAGE_FILE""#,
            false,
        ),
    ];
    for (n, (script, missing)) in cases.into_iter().enumerate() {
        let executor = CommandExecutor::new(shell(script), journal.path());
        let request = TurnRequest {
            turn: format!("u{n}").as_str().try_into().expect("id"),
            ..reserved.clone()
        };

        let report = rt.block_on(executor.run(&request)).expect("the turn runs");

        let problem = report.usage_problem.as_ref().expect("a usage problem");
        if missing {
            assert_eq!(*problem, UsageProblem::Missing, "{script}");
        } else {
            assert!(
                matches!(problem, UsageProblem::Malformed { .. }),
                "{script}: {problem:?}"
            );
        }
        assert!(
            !format!("{problem} {problem:?}").contains("sk-"),
            "{problem}"
        );
        assert_eq!(report.usage.tokens, 500, "{script}");
        assert_eq!(report.usage.cost_micros, 2_000, "{script}");
        // Wall-clock time is the engine's to measure, never the executor's.
        assert_eq!(report.usage.wall_ms, 0, "{script}");
        // The journalled report is the one a restarted engine settles.
        assert_eq!(
            rt.block_on(executor.recover(&request)),
            Recovery::Finished(report),
            "{script}"
        );
    }
}

/// A usage file an earlier run of the same turn left is not this run's.
#[test]
fn a_usage_file_from_an_earlier_run_of_the_turn_is_not_taken() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let rt = runtime();
    let writing = CommandExecutor::new(
        shell(r#"echo '{"tokens":40}' > "$LOOPX_USAGE_FILE""#),
        journal.path(),
    );
    let first = rt.block_on(writing.run(&turn("t1"))).expect("runs");
    assert_eq!(first.usage.tokens, 40);

    // Run again by a session that took the turn over (a newer epoch: the journal refuses the
    // same one twice).
    let silent = CommandExecutor::new(shell("true"), journal.path());
    let mut taken_over = turn("t1");
    taken_over.epoch += 1;
    let again = rt.block_on(silent.run(&taken_over)).expect("runs");

    assert_eq!(again.usage_problem, Some(UsageProblem::Missing));
    assert_eq!(again.usage.tokens, 0);
}

#[test]
fn without_a_report_exit_zero_proposes_completion() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let passing = CommandExecutor::new(shell("true"), journal.path());

    let passed = runtime().block_on(passing.run(&turn("t1"))).expect("runs");

    assert_eq!(
        passed.transition,
        Transition::Complete {
            continuation: Continuation::GoalStillActive
        }
    );
}

#[test]
fn a_command_that_does_not_exit_zero_fails_the_turn_by_class() {
    let journal = tempfile::tempdir().expect("a temporary directory");
    let rt = runtime();
    let cases = [
        ("exit 3", FailureClass::Exited),
        // A printed report does not make a failed exit a success.
        (
            r#"echo '{"transition":{"kind":"keep_open"}}'; exit 1"#,
            FailureClass::Exited,
        ),
        ("kill -9 $$", FailureClass::Killed),
        ("exit 77", FailureClass::Unauthorized),
        (
            "printf 'error: invalid API key sk-%s\\n' xyz >&2; exit 1",
            FailureClass::Unauthorized,
        ),
        ("exit 75", FailureClass::RateLimited),
        (
            "echo 'HTTP 429 Too Many Requests' >&2; exit 2",
            FailureClass::RateLimited,
        ),
        ("exit 127", FailureClass::Unavailable),
    ];
    for (n, (script, class)) in cases.into_iter().enumerate() {
        let executor = CommandExecutor::new(shell(script), journal.path());
        let name = format!("t{n}");

        let error = rt
            .block_on(executor.run(&turn(&name)))
            .expect_err("the turn fails");

        assert_eq!(error.class(), class, "{script}: {error}");
        let failure = error.failure();
        // What the process printed is recorded redacted: a key it printed is masked.
        assert!(!failure.detail.contains("sk-xyz"), "{}", failure.detail);
        if script.contains("sk-") {
            assert!(
                failure.detail.contains("invalid API key [redacted]"),
                "{}",
                failure.detail
            );
        }
        // The failure is journalled: a restarted engine settles it instead of re-running.
        assert_eq!(
            rt.block_on(executor.recover(&turn(&name))),
            Recovery::Failed(failure),
            "{script}"
        );
    }
    let slow = CommandExecutor::new(
        shell("sleep 5").timeout(Duration::from_millis(200)),
        journal.path(),
    );
    let error = rt.block_on(slow.run(&turn("slow"))).expect_err("times out");
    assert_eq!(error.class(), FailureClass::TimedOut, "{error}");
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
