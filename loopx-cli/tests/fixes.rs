//! Every verb a decision's fix names exists in the command line, with every flag it names: for
//! each reason (the samples of `testkit::reasons`), `loopx <verb> --help` succeeds and lists
//! the fix's flags.

mod support;

use loopx_kernel::testkit::reasons::every_reason;
use loopx_kernel::{Decision, Question, RepairIssue, ReplanReason, WaitReason};
use support::Loopx;

fn fix_of(decision: &Decision) -> Option<loopx_kernel::Fix> {
    match decision {
        Decision::Wait { reasons, .. } => reasons.first().map(WaitReason::fix),
        Decision::Ask { questions, .. } => questions.first().map(Question::fix),
        Decision::Replan { reason } => Some(ReplanReason::fix(reason)),
        Decision::Repair { issue } => Some(RepairIssue::fix(issue)),
        Decision::Continue(_) | Decision::Terminal { .. } => None,
    }
}

#[test]
fn every_verb_a_fix_names_exists_with_its_flags() {
    let lx = Loopx::sqlite();
    for (name, decision) in every_reason() {
        let fix = fix_of(&decision).expect("a reason has a fix");
        let mut args: Vec<&str> = fix.verb.split(' ').collect();
        args.push("--help");
        let run = lx.run(&args);
        assert_eq!(
            run.code, 0,
            "{name}: `loopx {}` exists: {}",
            fix.verb, run.stderr
        );
        for arg in &fix.args {
            assert!(
                run.stdout.contains(&format!("--{}", arg.flag)),
                "{name}: `loopx {}` takes --{}:\n{}",
                fix.verb,
                arg.flag,
                run.stdout
            );
        }
    }
}

/// A refusal from the store (`clock_ahead`) names a verb too; it exists.
#[test]
fn the_verb_a_refusal_fix_names_exists() {
    let lx = Loopx::sqlite();
    let at = loopx_kernel::Timestamp::from_millis(0);
    let refusal = loopx_kernel::Refusal::ClockAhead {
        at,
        store_time: at,
        skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
    };
    let fix = refusal.fix().expect("clock_ahead says what to do");
    let mut args: Vec<&str> = fix.verb.split(' ').collect();
    args.push("--help");
    let run = lx.run(&args);
    assert_eq!(run.code, 0, "`loopx {}` exists: {}", fix.verb, run.stderr);
    assert!(fix.args.is_empty(), "{fix:?}");
}
