//! One decision for every reason a `wait`, `ask`, `replan` or `repair` can give — and for every
//! cause inside one (each resume condition of a deferral, each stuck cause, each obligation
//! cause) — so that tests can show every reason's [`Fix`](crate::Fix) and its rendering.
//!
//! [`name`] is an exhaustive `match`: a new reason or cause does not compile until it is named
//! here, and [`every_reason`] must then hold a sample of it (its tests count the names).

use crate::actor::Actor;
use crate::budget::{Amounts, Dimension, Limits};
use crate::decide::{Decision, Question, RepairIssue, ReplanReason, Stuck, WaitReason};
use crate::evidence::Freshness;
use crate::ids::CriterionId;
use crate::obligation::ObligationCause;
use crate::retry::{FailureClass, FailureNote, TurnResult};
use crate::state::CriterionStatus;
use crate::time::Timestamp;
use crate::todo::ResumeCondition;

use super::id;

/// How many distinct names [`name`] gives: the number of samples [`every_reason`] holds.
pub const REASONS: usize = 34;

/// The stable name of the reason a decision gives (`wait.lease_held`, `replan.stuck.blocked`,
/// …); `None` for `continue` and `terminal`, which give none.
pub fn name(decision: &Decision) -> Option<&'static str> {
    Some(match decision {
        Decision::Continue(_) | Decision::Terminal { .. } => return None,
        Decision::Wait { reasons, .. } => match reasons.first()? {
            WaitReason::LeaseHeld { .. } => "wait.lease_held",
            WaitReason::AssignedElsewhere { .. } => "wait.assigned_elsewhere",
            WaitReason::MonitorNotDue { .. } => "wait.monitor_not_due",
            WaitReason::Deferred { until, .. } => match until {
                ResumeCondition::At { .. } => "wait.deferred.at",
                ResumeCondition::TodoDone { .. } => "wait.deferred.todo_done",
                ResumeCondition::GateSettled { .. } => "wait.deferred.gate_settled",
                ResumeCondition::ObservationChanged { .. } => "wait.deferred.observation_changed",
            },
            WaitReason::Dependencies { .. } => "wait.dependencies",
            WaitReason::WriteScopeBusy { .. } => "wait.write_scope_busy",
            WaitReason::OutcomeUnknown { .. } => "wait.outcome_unknown",
            WaitReason::EffectUnresolved { .. } => "wait.effect_unresolved",
            WaitReason::OthersOnly { .. } => "wait.others_only",
            WaitReason::Budget { .. } => "wait.budget",
            WaitReason::Backoff { .. } => "wait.backoff",
        },
        Decision::Ask { questions, .. } => match questions.first()? {
            Question::Gate { .. } => "ask.gate",
            Question::Budget { .. } => "ask.budget",
            Question::Overrun { .. } => "ask.overrun",
        },
        Decision::Replan { reason } => match reason {
            ReplanReason::Obligation { cause, .. } => match cause {
                ObligationCause::MonitorStalled { .. } => "replan.obligation.monitor_stalled",
                ObligationCause::TurnsFailing { .. } => "replan.obligation.turns_failing",
                ObligationCause::NoProgress { .. } => "replan.obligation.no_progress",
                ObligationCause::GoalStalled { .. } => "replan.obligation.goal_stalled",
                ObligationCause::Proposed => "replan.obligation.proposed",
            },
            ReplanReason::Stuck { because, .. } => match because {
                Stuck::GateRefused { .. } => "replan.stuck.gate_refused",
                Stuck::Blocked { .. } => "replan.stuck.blocked",
                Stuck::DependencyClosed { .. } => "replan.stuck.dependency_closed",
            },
            ReplanReason::AcceptanceGap { criteria }
                if criteria
                    .iter()
                    .any(|(_, status)| matches!(status, CriterionStatus::Stale { .. })) =>
            {
                "replan.acceptance_gap.stale"
            }
            ReplanReason::AcceptanceGap { .. } => "replan.acceptance_gap",
            ReplanReason::ClosureIntentMissing => "replan.closure_intent_missing",
        },
        Decision::Repair { issue } => match issue {
            RepairIssue::Obligation { .. } => "repair.obligation",
            RepairIssue::OutcomeUnknown { .. } => "repair.outcome_unknown",
            RepairIssue::EffectUnresolved { .. } => "repair.effect_unresolved",
            RepairIssue::SharedCheckout { .. } => "repair.shared_checkout",
            RepairIssue::DecisionMissing { .. } => "repair.decision_missing",
            RepairIssue::UnregisteredAgent { .. } => "repair.unregistered_agent",
        },
    })
}

fn at(text: &str) -> Timestamp {
    match Timestamp::parse(text) {
        Ok(at) => at,
        Err(_) => unreachable!("testkit literal `{text}` is a valid time"),
    }
}

fn wait(reason: WaitReason, until: Option<Timestamp>) -> Decision {
    Decision::Wait {
        until,
        reasons: vec![reason],
    }
}

fn deferred(until: ResumeCondition) -> Decision {
    wait(
        WaitReason::Deferred {
            todo: id("publish"),
            until,
        },
        None,
    )
}

/// One decision per reason, named by [`name`], in a fixed order.
#[allow(
    clippy::too_many_lines,
    reason = "one sample per reason, listed in order"
)]
pub fn every_reason() -> Vec<(&'static str, Decision)> {
    let later = at("2026-11-29T11:00:00Z");
    let decisions = vec![
        wait(
            WaitReason::LeaseHeld {
                todo: id("edit"),
                holder: id("agent-b"),
                until: later,
            },
            Some(later),
        ),
        wait(
            WaitReason::AssignedElsewhere {
                todo: id("edit"),
                agent: id("agent-b"),
            },
            None,
        ),
        wait(
            WaitReason::MonitorNotDue {
                todo: id("watch-ci"),
                due: later,
            },
            Some(later),
        ),
        deferred(ResumeCondition::At { at: later }),
        deferred(ResumeCondition::TodoDone { todo: id("edit") }),
        deferred(ResumeCondition::GateSettled {
            gate: id("release-ok"),
        }),
        deferred(ResumeCondition::ObservationChanged {
            key: id("head:repo:acme/cli"),
        }),
        wait(
            WaitReason::Dependencies {
                todo: id("publish"),
                on: vec![id("edit"), id("docs")],
            },
            None,
        ),
        wait(
            WaitReason::WriteScopeBusy {
                todo: id("edit"),
                other: id("refactor"),
                until: later,
            },
            Some(later),
        ),
        wait(
            WaitReason::OutcomeUnknown {
                todo: id("publish"),
                holder: id("agent-b"),
            },
            None,
        ),
        wait(
            WaitReason::EffectUnresolved {
                effect: id("publish-r9-e2-x0"),
                holder: id("agent-b"),
            },
            None,
        ),
        wait(WaitReason::OthersOnly { todo: id("review") }, None),
        wait(
            WaitReason::Budget {
                dimension: Dimension::Turns,
                scope: "goal".into(),
            },
            None,
        ),
        wait(
            WaitReason::Backoff {
                todo: id("edit"),
                failures: 2,
                until: later,
            },
            Some(later),
        ),
        Decision::Ask {
            questions: vec![Question::Gate {
                gate: id("G1"),
                question: "is error_code acceptable as a stable field?".into(),
                owner: Actor::Person(id("maintainer")),
                deadline: Some(at("2026-11-30T17:00:00Z")),
                overdue: false,
            }],
            until: Some(at("2026-11-30T17:00:00Z")),
        },
        Decision::Ask {
            questions: vec![Question::Budget {
                dimension: Dimension::Tokens,
                scope: "goal".into(),
                remaining: Limits {
                    tokens: Some(0),
                    ..Limits::UNLIMITED
                },
            }],
            until: None,
        },
        Decision::Ask {
            questions: vec![Question::Overrun {
                todo: id("edit"),
                turn: id("edit@r7"),
                dimension: Dimension::Tokens,
                by: Amounts {
                    tokens: 2_500,
                    ..Amounts::ZERO
                },
                remaining: Limits {
                    tokens: Some(0),
                    ..Limits::UNLIMITED
                },
            }],
            until: None,
        },
        Decision::Replan {
            reason: ReplanReason::Obligation {
                id: id("stalled:watch-ci"),
                cause: ObligationCause::MonitorStalled {
                    todo: id("watch-ci"),
                    streak: 5,
                },
                detail: "CI has not moved in five polls".into(),
            },
        },
        Decision::Replan {
            reason: ReplanReason::Obligation {
                id: id("failing-r12"),
                cause: ObligationCause::TurnsFailing {
                    todo: id("edit"),
                    failures: 3,
                    last: vec![FailureNote {
                        turn: id("t11"),
                        at: later,
                        result: TurnResult::ExecutorFailed {
                            class: FailureClass::Exited,
                            detail: "exit status 1".into(),
                        },
                    }],
                },
                detail: "`edit` failed 3 turns in a row".into(),
            },
        },
        Decision::Replan {
            reason: ReplanReason::Obligation {
                id: id("idle-r20"),
                cause: ObligationCause::NoProgress {
                    todo: id("edit"),
                    turns: 5,
                },
                detail: "`edit` settled 5 turns in a row without progress".into(),
            },
        },
        Decision::Replan {
            reason: ReplanReason::Obligation {
                id: id("stalled-r40"),
                cause: ObligationCause::GoalStalled { turns: 20 },
                detail: "the goal settled 20 turns in a row without progress".into(),
            },
        },
        Decision::Replan {
            reason: ReplanReason::Obligation {
                id: id("rethink"),
                cause: ObligationCause::Proposed,
                detail: "the benchmark regressed".into(),
            },
        },
        Decision::Replan {
            reason: ReplanReason::Stuck {
                todo: id("document-json"),
                because: Stuck::GateRefused { gate: id("G1") },
            },
        },
        Decision::Replan {
            reason: ReplanReason::Stuck {
                todo: id("edit"),
                because: Stuck::Blocked {
                    reason: "the API key expired".into(),
                },
            },
        },
        Decision::Replan {
            reason: ReplanReason::Stuck {
                todo: id("publish"),
                because: Stuck::DependencyClosed {
                    dependency: id("edit"),
                },
            },
        },
        Decision::Replan {
            reason: ReplanReason::AcceptanceGap {
                criteria: vec![
                    (
                        id::<CriterionId>("tests"),
                        CriterionStatus::Failing {
                            evidence: id("t1.tests"),
                        },
                    ),
                    (
                        id::<CriterionId>("lint"),
                        CriterionStatus::UnregisteredValidator {
                            evidence: id("t2.lint"),
                            produced_by: Actor::Validator(id("lint-bot")),
                        },
                    ),
                ],
            },
        },
        Decision::Replan {
            reason: ReplanReason::AcceptanceGap {
                criteria: vec![(
                    id::<CriterionId>("tests"),
                    CriterionStatus::Stale {
                        evidence: id("t1.tests"),
                        freshness: Freshness::DirtyTree {
                            established: id("git:046a4fc+dirty"),
                            current: id("git:046a4fc"),
                        },
                    },
                )],
            },
        },
        Decision::Replan {
            reason: ReplanReason::ClosureIntentMissing,
        },
        Decision::Repair {
            issue: RepairIssue::Obligation {
                id: id("fix-index"),
                detail: "the index lists a todo twice".into(),
            },
        },
        Decision::Repair {
            issue: RepairIssue::OutcomeUnknown {
                todo: id("publish"),
                turn: id("t7"),
                holder: id("agent-a"),
            },
        },
        Decision::Repair {
            issue: RepairIssue::EffectUnresolved {
                effect: id("publish-r9-e2-x0"),
                todo: id("publish"),
                holder: id("agent-a"),
            },
        },
        Decision::Repair {
            issue: RepairIssue::SharedCheckout {
                todo: id("edit"),
                other: id("agent-b"),
                top_level: "/work/cli".into(),
            },
        },
        Decision::Repair {
            issue: RepairIssue::DecisionMissing {
                todo: id("rename"),
                scope: id("api:error_code"),
            },
        },
        Decision::Repair {
            issue: RepairIssue::UnregisteredAgent {
                agent: id("agnet-a"),
            },
        },
    ];
    decisions
        .into_iter()
        .filter_map(|d| name(&d).map(|n| (n, d)))
        .collect()
}
