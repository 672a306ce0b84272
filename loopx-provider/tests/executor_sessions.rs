//! The command executor's journal between two sessions of one agent: a recovery under a newer
//! epoch fences every run under an older one, a turn already started is never started again
//! under its own epoch, and a run cancelled mid-way takes its whole process group down.

use std::path::Path;

use loopx_kernel::seams::{Executor, Recovery, TurnError, TurnRequest};
use loopx_kernel::{Amounts, Timestamp};
use loopx_provider::executor::CommandExecutor;
use loopx_provider::process::CommandSpec;

fn turn(name: &str, epoch: u64) -> TurnRequest {
    TurnRequest {
        goal: "g".try_into().expect("id"),
        objective: "publish the release notes".into(),
        todo: "publish".try_into().expect("id"),
        title: "publish the notes".into(),
        agent: "alice".try_into().expect("id"),
        epoch,
        turn: name.try_into().expect("id"),
        reserved: Amounts::ZERO,
        handoff: None,
        deadline: Timestamp::parse("2026-11-29T11:00:00Z").expect("instant"),
        decided: Vec::new(),
        failures: Vec::new(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// An executor over `journal` whose command appends a line to `runs`, then does `then`.
fn counting(journal: &Path, runs: &Path, then: &str) -> CommandExecutor {
    let script = format!("echo run >> '{}'; {then}", runs.display());
    CommandExecutor::new(CommandSpec::new("sh").arg("-c").arg(script), journal)
}

fn runs(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

#[test]
fn a_recovery_under_a_newer_epoch_fences_an_older_session_before_it_starts() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (journal, count) = (dir.path().join("journal"), dir.path().join("runs"));
    let executor = counting(&journal, &count, "true");
    let rt = runtime();

    // The session that took the turn over (epoch 4) finds it never started.
    assert_eq!(
        rt.block_on(executor.recover(&turn("t1", 4))),
        Recovery::NotStarted
    );
    // The session it fenced (epoch 3) wakes up and tries to start it: refused, nothing runs.
    let fenced = rt.block_on(executor.run(&turn("t1", 3)));
    assert_eq!(fenced, Err(TurnError::Fenced { epoch: 4 }));
    assert_eq!(runs(&count), 0);
    // The new owner runs it, once.
    rt.block_on(executor.run(&turn("t1", 4))).expect("runs");
    assert_eq!(runs(&count), 1);
    // Other turns are not fenced.
    rt.block_on(executor.run(&turn("t2", 3))).expect("runs");
    assert_eq!(runs(&count), 2);
}

#[test]
fn a_started_turn_never_starts_again_under_its_epoch_but_a_newer_owner_may_rerun_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (journal, count) = (dir.path().join("journal"), dir.path().join("runs"));
    let slow = counting(&journal, &count, "sleep 30");
    let rt = runtime();

    // A session starts the turn and is cut off mid-run.
    let cut = rt.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_millis(500),
            slow.run(&turn("t1", 3)),
        )
        .await
    });
    assert!(cut.is_err(), "the turn was cut off");
    assert_eq!(runs(&count), 1);
    // A second session under the same epoch (it began the same turn) does not start it.
    let quick = counting(&journal, &count, "true");
    assert_eq!(
        rt.block_on(quick.run(&turn("t1", 3))),
        Err(TurnError::Fenced { epoch: 3 })
    );
    assert_eq!(runs(&count), 1);
    // A session that took it over sees it started and unreported; on idempotent work its
    // engine may run it again under the new epoch.
    assert_eq!(
        rt.block_on(quick.recover(&turn("t1", 4))),
        Recovery::Unknown
    );
    rt.block_on(quick.run(&turn("t1", 4))).expect("runs");
    assert_eq!(runs(&count), 2);
}

#[test]
fn a_cancelled_run_takes_its_whole_process_group_down() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pid_file = dir.path().join("child.pid");
    // The turn's shell starts a child of its own and waits for it.
    let script = format!("sleep 30 & echo $! > '{}'; wait", pid_file.display());
    let executor = CommandExecutor::new(
        CommandSpec::new("sh").arg("-c").arg(script),
        dir.path().join("journal"),
    );
    let rt = runtime();
    let request = turn("t1", 1);
    rt.block_on(async {
        let run = executor.run(&request);
        let pid = async {
            loop {
                if let Ok(text) = std::fs::read_to_string(&pid_file)
                    && let Ok(pid) = text.trim().parse::<u32>()
                {
                    return pid;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        // Cancel the run (drop its future) once its child is up.
        let pid = tokio::select! {
            _ = run => panic!("the turn's command waits for its child"),
            pid = pid => pid,
        };
        // The child is killed with its group; wait (boundedly) for the kernel to reap it.
        let gone = async {
            while alive(pid) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(20), gone)
            .await
            .expect("the child of a cancelled turn is killed");
    });
}

/// True while `pid` names a process that has not exited (a zombie has exited).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}
