//! Every decision reason says what to do: its `fix` — the `loopx` verb, the kernel command the
//! verb submits, its arguments and who may run it — derived from the reason by an exhaustive
//! match, and present in the decision's JSON beside the reason's own fields. One snapshot per
//! reason (the samples of `testkit::reasons`).

use std::collections::BTreeSet;

use loopx_kernel::testkit::reasons::{REASONS, every_reason, name};
use loopx_kernel::{Command, Decision, Question, RepairIssue, ReplanReason, WaitReason};

/// The kernel commands a fix may name: every command's own name.
fn command_names() -> BTreeSet<&'static str> {
    [
        "create_goal",
        "amend_goal",
        "abandon_goal",
        "declare_closure",
        "add_todo",
        "reassign",
        "defer",
        "block",
        "unblock",
        "supersede",
        "claim",
        "renew",
        "release",
        "handoff",
        "begin_turn",
        "take_over_turn",
        "settle_turn",
        "resolve_outcome",
        "intend_effect",
        "record_effect",
        "open_gate",
        "answer_gate",
        "withdraw_gate",
        "record_observation",
        "record_evidence",
        "raise_obligation",
        "discharge",
        "report_workspace",
    ]
    .into_iter()
    .collect()
}

/// The fix of the (first) reason a decision gives.
fn fix_of(decision: &Decision) -> loopx_kernel::Fix {
    match decision {
        Decision::Wait { reasons, .. } => reasons.first().map(WaitReason::fix),
        Decision::Ask { questions, .. } => questions.first().map(Question::fix),
        Decision::Replan { reason } => Some(ReplanReason::fix(reason)),
        Decision::Repair { issue } => Some(RepairIssue::fix(issue)),
        Decision::Continue(_) | Decision::Terminal { .. } => None,
    }
    .expect("every sample gives a reason")
}

#[test]
fn every_reason_has_a_sample() {
    let samples = every_reason();
    let names: BTreeSet<&str> = samples.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), samples.len(), "one sample per reason");
    assert_eq!(names.len(), REASONS, "a sample for every name `name` gives");
}

#[test]
fn every_reason_has_a_fix_in_its_json() {
    for (name, decision) in every_reason() {
        let fix = fix_of(&decision);
        let value = serde_json::to_value(&decision).expect("a decision serializes");
        let reason = value
            .get("reasons")
            .or_else(|| value.get("questions"))
            .and_then(|list| list.get(0))
            .or_else(|| value.get("reason"))
            .or_else(|| value.get("issue"))
            .expect("the reason in the JSON");
        assert_eq!(
            reason["fix"],
            serde_json::to_value(&fix).expect("a fix serializes"),
            "{name}: the JSON carries the fix"
        );
        insta::assert_json_snapshot!(name, json_of(&decision, &fix));
    }
}

fn json_of(decision: &Decision, fix: &loopx_kernel::Fix) -> serde_json::Value {
    serde_json::json!({
        "decision": decision,
        "command_line": fix.command_line(),
    })
}

#[test]
fn a_fix_names_a_real_kernel_command() {
    let commands = command_names();
    for (name, decision) in every_reason() {
        let fix = fix_of(&decision);
        if let Some(call) = &fix.call {
            assert!(
                commands.contains(call.as_str()),
                "{name}: `{call}` is a kernel command"
            );
        }
        assert!(
            fix.command_line()
                .starts_with(&format!("loopx {}", fix.verb)),
            "{name}"
        );
    }
    // The list above is every command's name: a command the kernel renames fails here.
    let close = Command::DeclareClosure { reason: "r".into() };
    assert!(commands.contains(close.name()));
}

#[test]
fn a_decision_read_back_from_its_json_is_the_same_decision() {
    for (name, decision) in every_reason() {
        let text = serde_json::to_string(&decision).expect("serializes");
        let back: Decision = serde_json::from_str(&text).expect("the fix is ignored on reading");
        assert_eq!(back, decision, "{name}");
    }
}

#[test]
fn names_are_given_for_reasons_only() {
    assert_eq!(
        name(&Decision::Terminal {
            outcome: loopx_kernel::TerminalOutcome::Accepted
        }),
        None
    );
}
