//! The process runner against real processes.

use std::time::Duration;

use loopx_provider::process::{CommandSpec, Exit, ProcessError, Tee};
use sha2::{Digest as _, Sha256};

fn sha(bytes: &[u8]) -> String {
    loopx_provider::fact::hex(&Sha256::digest(bytes))
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("grandchild-was-here");
    // The child starts a grandchild that writes the marker after one second, then sleeps long.
    let script = format!("(sleep 1; echo late > '{}') & sleep 30", marker.display());
    let spec = CommandSpec::from_argv(["sh", "-c", &script])
        .expect("argv")
        .allow_env("PATH")
        .timeout(loopx_kernel::Duration::from_millis(300));
    let output = spec.run().await.expect("runs");
    assert_eq!(output.exit, Exit::TimedOut);
    assert!(
        output.duration < Duration::from_secs(5),
        "{:?}",
        output.duration
    );
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(
        !marker.exists(),
        "the grandchild survived the timeout and wrote its file"
    );
}

#[tokio::test]
async fn leftovers_of_a_finished_leader_are_killed_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("orphan-was-here");
    let script = format!("(sleep 1; echo late > '{}') & exit 0", marker.display());
    let output = CommandSpec::from_argv(["sh", "-c", &script])
        .expect("argv")
        .allow_env("PATH")
        .timeout(loopx_kernel::Duration::seconds(10))
        .run()
        .await
        .expect("runs");
    assert!(output.exit.success());
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(!marker.exists(), "a process left in the group kept running");
}

#[tokio::test]
async fn output_over_the_bound_keeps_the_tail_and_counts_the_rest() {
    // 100 000 bytes: "0123456789" repeated; the tail must end with the last digits.
    let output = CommandSpec::from_argv([
        "sh",
        "-c",
        "i=0; while [ $i -lt 10000 ]; do printf 0123456789; i=$((i+1)); done; printf END",
    ])
    .expect("argv")
    .allow_env("PATH")
    .output_limit(1000)
    .run()
    .await
    .expect("runs");
    assert!(output.exit.success());
    let stdout = &output.stdout;
    assert_eq!(stdout.total_bytes, 100_003);
    assert_eq!(stdout.tail.len(), 1000);
    assert_eq!(stdout.dropped_bytes, 99_003);
    assert!(stdout.truncated());
    assert!(stdout.text().ends_with("789END"));
    let mut all = b"0123456789".repeat(10_000);
    all.extend_from_slice(b"END");
    assert_eq!(
        stdout.sha256,
        sha(&all),
        "the digest covers every byte, not the tail"
    );
    assert!(!output.stderr.truncated());
}

/// A teed run copies its output to this process's stream (the `loopx run --tee` tests watch
/// it arrive); what it captures is what an untee'd run captures, bounded the same way.
#[tokio::test]
async fn a_teed_run_captures_the_same_bounded_tail() {
    let script = "i=0; while [ $i -lt 30 ]; do printf 0123456789; i=$((i+1)); done; printf END";
    let run = |tee| async move {
        CommandSpec::from_argv(["sh", "-c", script])
            .expect("argv")
            .allow_env("PATH")
            .output_limit(100)
            .tee(tee)
            .run()
            .await
            .expect("runs")
    };
    let plain = run(Tee::Off).await;
    let teed = run(Tee::Stderr).await;
    assert_eq!(teed.stdout, plain.stdout);
    assert_eq!(teed.stdout.tail.len(), 100);
    assert_eq!(teed.stdout.total_bytes, 303);
    assert!(teed.stdout.text().ends_with("789END"));
}

#[tokio::test]
async fn non_utf8_output_is_kept_as_bytes_and_shown_lossily() {
    let output = CommandSpec::from_argv(["printf", "\\377\\376ok"])
        .expect("argv")
        .allow_env("PATH")
        .run()
        .await
        .expect("runs");
    assert_eq!(output.stdout.tail, vec![0xff, 0xfe, b'o', b'k']);
    assert_eq!(output.stdout.text(), "\u{fffd}\u{fffd}ok");
    assert_eq!(output.stdout.sha256, sha(&[0xff, 0xfe, b'o', b'k']));
}

#[tokio::test]
async fn the_environment_is_cleared_except_the_allow_list() {
    let home = std::env::var_os("HOME").is_some();
    assert!(std::env::var_os("PATH").is_some(), "tests need PATH");
    let output = CommandSpec::new("/usr/bin/env")
        .allow_env("PATH")
        .allow_env("LOOPX_SURELY_UNSET_VARIABLE")
        .env("EXPLICIT", "yes")
        .run()
        .await
        .expect("runs");
    let text = output.stdout.text().into_owned();
    let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
    assert_eq!(
        names.len(),
        2,
        "only PATH and EXPLICIT reach the child: {names:?}"
    );
    assert!(names.contains(&"PATH"));
    assert!(text.contains("EXPLICIT=yes"));
    if home {
        assert!(!names.contains(&"HOME"), "HOME leaked");
    }

    let bare = CommandSpec::new("/usr/bin/env").run().await.expect("runs");
    assert_eq!(bare.stdout.total_bytes, 0, "{}", bare.stdout.text());
}

#[tokio::test]
async fn arguments_reach_the_program_verbatim() {
    let output = CommandSpec::from_argv(["printf", "%s|", "a b", "$HOME", "; rm -rf /", "*"])
        .expect("argv")
        .allow_env("PATH")
        .run()
        .await
        .expect("runs");
    assert_eq!(output.stdout.text(), "a b|$HOME|; rm -rf /|*|");
}

#[tokio::test]
async fn exit_codes_stderr_and_working_directory_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = CommandSpec::from_argv(["sh", "-c", "pwd; echo oops >&2; exit 3"])
        .expect("argv")
        .allow_env("PATH")
        .current_dir(dir.path())
        .run()
        .await
        .expect("runs");
    assert_eq!(output.exit, Exit::Code { code: 3 });
    assert!(!output.exit.success());
    assert_eq!(output.stderr.text(), "oops\n");
    let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
    assert_eq!(output.stdout.text().trim(), cwd.to_string_lossy());
    assert!(output.stdout.complete && output.stderr.complete);
}

#[tokio::test]
async fn equal_runs_digest_alike_and_different_runs_do_not() {
    let run = |word: &'static str| async move {
        CommandSpec::from_argv(["echo", word])
            .expect("argv")
            .allow_env("PATH")
            .run()
            .await
            .expect("runs")
    };
    let (a, b, c) = (run("same").await, run("same").await, run("other").await);
    assert_eq!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
}

#[tokio::test]
async fn missing_programs_and_empty_commands_are_typed_errors() {
    let missing = CommandSpec::new("/nonexistent/program").run().await;
    assert!(
        matches!(missing, Err(ProcessError::NotFound { ref program }) if program == "/nonexistent/program"),
        "{missing:?}"
    );
    let empty = CommandSpec::from_argv(Vec::<String>::new());
    assert_eq!(empty, Err(ProcessError::EmptyCommand));
}
