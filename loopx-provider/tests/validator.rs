//! The command validator binds its verdict to the git revision it ran at.

use std::path::Path;
use std::sync::Arc;

use loopx_kernel::ManualClock;
use loopx_kernel::seams::{TurnReport, TurnRequest, Validator};
use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, GoalId, Outcome, SourceId, Subject, Timestamp, TodoId,
    Transition, TurnId, VerdictOutcome,
};
use loopx_provider::process::CommandSpec;
use loopx_provider::validator::CommandValidator;

mod support;
use support::sh_git;

fn turn() -> (TurnRequest, TurnReport) {
    let now = Timestamp::from_millis(0);
    (
        TurnRequest {
            goal: GoalId::new("g").expect("id"),
            objective: "o".into(),
            todo: TodoId::new("t").expect("id"),
            title: "t".into(),
            agent: AgentId::new("a").expect("id"),
            epoch: 1,
            turn: TurnId::new("turn-1").expect("id"),
            reserved: Amounts::ZERO,
            handoff: None,
            deadline: now,
            decided: Vec::new(),
            failures: Vec::new(),
        },
        TurnReport {
            effects: Vec::new(),
            transition: Transition::KeepOpen,
            observations: vec![],
            usage: Amounts::ZERO,
            summary: "the executor says it is done".into(),
            usage_problem: None,
        },
    )
}

fn validator(root: &Path, argv: &[&str]) -> CommandValidator {
    CommandValidator::new(
        SourceId::new("tests").expect("id"),
        CheckId::new("tests.unit").expect("id"),
        Subject::new("repo:acme/cli").expect("id"),
        root,
        CommandSpec::from_argv(argv)
            .expect("argv")
            .allow_env("PATH"),
        Arc::new(ManualClock::new(Timestamp::from_millis(5_000))),
    )
}

#[tokio::test]
async fn a_passing_command_is_passing_evidence_at_the_head_sha() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    sh_git(root, &["init", "-q"]);
    std::fs::write(root.join("a.txt"), "1").expect("write");
    sh_git(root, &["add", "a.txt"]);
    sh_git(root, &["commit", "-q", "-m", "first"]);
    let sha = sh_git(root, &["rev-parse", "HEAD"]);
    let (request, report) = turn();

    let pass = validator(root, &["true"]);
    assert_eq!(
        pass.actor(),
        Actor::Validator(SourceId::new("tests").expect("id"))
    );
    let validation = pass.validate(&request, &report).await.expect("validates");
    assert_eq!(validation.outcome, VerdictOutcome::Passed);
    let evidence = &validation.evidence[0];
    assert_eq!(evidence.outcome, Outcome::Pass);
    assert_eq!(evidence.revision.as_str(), format!("git:{sha}"));
    assert_eq!(evidence.id.as_str(), "turn-1.tests.unit");
    assert_eq!(evidence.observed_at, Timestamp::from_millis(5_000));

    let fail = validator(root, &["sh", "-c", "exit 1"]);
    let validation = fail.validate(&request, &report).await.expect("validates");
    assert_eq!(validation.outcome, VerdictOutcome::Failed);
    assert_eq!(validation.evidence[0].outcome, Outcome::Fail);
    assert!(
        validation.summary.contains("exit 1"),
        "{}",
        validation.summary
    );

    // Uncommitted changes: the evidence is bound to a revision no clean commit matches.
    std::fs::write(root.join("a.txt"), "2").expect("write");
    let validation = pass.validate(&request, &report).await.expect("validates");
    assert_eq!(
        validation.evidence[0].revision.as_str(),
        format!("git:{sha}+dirty")
    );
}

#[tokio::test]
async fn a_validator_outside_a_repository_fails_to_validate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (request, report) = turn();
    let result = validator(dir.path(), &["true"])
        .validate(&request, &report)
        .await;
    assert!(result.is_err(), "{result:?}");
}
