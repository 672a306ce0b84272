//! Decisions in words, for people and for agents that read prose (the CLI's `next`, a
//! session's brief): each reason one sentence, followed by what to do about it — its [`Fix`]
//! as a `loopx` command line and who may run it. Pure functions of the decision; the wire
//! shape stays the decision's JSON.

use std::fmt::Write as _;

use crate::budget::{Amounts, Dimension};
use crate::decide::{
    Decision, LeaseStep, Question, RepairIssue, ReplanReason, Stuck, TerminalOutcome, WaitReason,
};
use crate::evidence::Freshness;
use crate::fix::{Fix, Who};
use crate::ids::CriterionId;
use crate::obligation::ObligationCause;
use crate::state::CriterionStatus;
use crate::todo::ResumeCondition;

/// Who may run a fix, in words.
pub fn who(by: &Who) -> String {
    match by {
        Who::Owner => "the goal owner".to_owned(),
        Who::Planner => "the goal owner or a registered agent".to_owned(),
        Who::Asker => "this agent".to_owned(),
        Who::AnyAgent => "a registered agent".to_owned(),
        Who::OtherAgent => "another registered agent".to_owned(),
        Who::Agent { agent } => format!("agent:{agent}"),
        Who::AgentOrOwner { agent } => format!("agent:{agent} or the goal owner"),
        Who::Actor { actor } => actor.to_string(),
        Who::GateOwner { gate } => format!("the owner of gate {gate}"),
        Who::Holder { todo } => format!("the holder of the lease on `{todo}`"),
        Who::Observer => "an agent, provider or validator".to_owned(),
    }
}

/// `action: loopx … (by …)`.
fn then(action: &str, fix: &Fix) -> String {
    format!(" — {action}: {} (by {})", fix.command_line(), who(&fix.by))
}

/// A wait reason as a sentence with its fix.
pub fn wait_reason(reason: &WaitReason) -> String {
    let fix = reason.fix();
    match reason {
        WaitReason::LeaseHeld {
            todo,
            holder,
            until,
        } => {
            format!("`{todo}` is leased by agent:{holder} until {until}")
                + &then("or its holder releases it", &fix)
        }
        WaitReason::AssignedElsewhere { todo, agent } => {
            format!("`{todo}` is meant for agent:{agent}") + &then("to take it, reassign it", &fix)
        }
        WaitReason::MonitorNotDue { todo, due } => {
            format!("monitor `{todo}` is due at {due}") + &then("ask again then", &fix)
        }
        WaitReason::Deferred { todo, until } => match until {
            ResumeCondition::At { at } => {
                format!("`{todo}` is deferred until {at}") + &then("ask again then", &fix)
            }
            ResumeCondition::TodoDone { todo: other } => {
                format!("`{todo}` is deferred until `{other}` is done")
                    + &then("work on it first", &fix)
            }
            ResumeCondition::GateSettled { gate } => {
                format!("`{todo}` is deferred until gate {gate} is settled")
                    + &then("answer it", &fix)
            }
            ResumeCondition::ObservationChanged { key } => {
                format!("`{todo}` is deferred until observation `{key}` changes")
                    + &then("observe it again", &fix)
            }
        },
        WaitReason::Dependencies { todo, on } => {
            let on: Vec<String> = on.iter().map(|t| format!("`{t}`")).collect();
            format!("`{todo}` waits on {}", on.join(", ")) + &then("work on those first", &fix)
        }
        WaitReason::WriteScopeBusy { todo, other, until } => {
            format!("`{todo}` writes where `{other}` does, leased until {until}")
                + &then("or its holder releases it", &fix)
        }
        WaitReason::OutcomeUnknown { todo, holder } => {
            format!(
                "the outcome of a turn on `{todo}` is unknown and agent:{holder} must resolve it"
            ) + &then("read back what it did, then resolve it", &fix)
        }
        WaitReason::EffectUnresolved { effect, holder } => {
            format!(
                "effect {effect} of agent:{holder} was intended and never recorded, and agent:{holder} must resolve it"
            ) + &then("read it back, then record it", &fix)
        }
        WaitReason::OthersOnly { todo } => {
            format!(
                "what remains (`{todo}`) is for other agents: this agent is excluded or wrote the work it reviews"
            ) + &then("another agent takes it", &fix)
        }
        WaitReason::Budget { dimension, scope } => {
            format!("the {dimension} budget ({scope}) is spent") + &then("raise it", &fix)
        }
        WaitReason::Backoff {
            todo,
            failures,
            until,
        } => {
            format!("`{todo}` failed {failures} turn(s) in a row and pauses until {until}")
                + &then("ask again then", &fix)
        }
    }
}

/// A question as a sentence: `gate G1 for person:maintainer — "question"`.
pub fn question_line(question: &Question) -> String {
    match question {
        Question::Gate {
            gate,
            question,
            owner,
            overdue,
            deadline,
        } => {
            let late = if *overdue { " (overdue)" } else { "" };
            let due = deadline.map_or_else(String::new, |d| format!(" (due {d})"));
            format!("gate {gate} for {owner}{late}{due} — \"{question}\"")
        }
        Question::Budget {
            dimension, scope, ..
        } => format!("the {dimension} budget ({scope}) is spent; may it be raised?"),
        Question::Overrun {
            todo,
            turn,
            dimension,
            by,
            ..
        } => format!(
            "turn {turn} on `{todo}` used {} more than it reserved (over the {dimension} budget) and was charged all of it; raise the budget or the reservation before the next turn?",
            amounts_words(*by)
        ),
    }
}

/// The non-zero dimensions of `amounts` in words: `2500 tokens, 300000 ms of wall-clock time`.
fn amounts_words(amounts: Amounts) -> String {
    let words: Vec<String> = Dimension::ALL
        .into_iter()
        .filter(|&d| amounts.get(d) > 0)
        .map(|d| {
            let n = amounts.get(d);
            match d {
                Dimension::Turns => format!("{n} turns"),
                Dimension::Tokens => format!("{n} tokens"),
                Dimension::Cost => format!("{n} micro-units of cost"),
                Dimension::WallClock => format!("{n} ms of wall-clock time"),
            }
        })
        .collect();
    if words.is_empty() {
        "nothing".to_owned()
    } else {
        words.join(", ")
    }
}

fn question_fix(question: &Question) -> String {
    let fix = question.fix();
    let action = match question {
        Question::Gate { .. } => "answer",
        Question::Budget { .. } => "raise it",
        Question::Overrun { .. } => "answer it",
    };
    format!("{action}: {} (by {})", fix.command_line(), who(&fix.by))
}

/// A criterion's standing as a sentence: `criterion C is met`.
pub fn criterion_words(id: &CriterionId, status: &CriterionStatus) -> String {
    match status {
        CriterionStatus::Met { .. } => format!("criterion {id} is met"),
        CriterionStatus::NoEvidence => format!("criterion {id} has no evidence"),
        CriterionStatus::Failing { evidence } => {
            format!("criterion {id} is failing (evidence {evidence})")
        }
        CriterionStatus::Stale {
            evidence,
            freshness,
        } => format!(
            "criterion {id} has only stale evidence ({evidence}: {})",
            freshness_words(freshness)
        ),
        CriterionStatus::UnregisteredValidator {
            evidence,
            produced_by,
        } => format!(
            "criterion {id} has evidence only from {produced_by} ({evidence}), who is not registered for its check"
        ),
    }
}

/// Why evidence is stale, in words.
pub fn freshness_words(freshness: &Freshness) -> String {
    match freshness {
        Freshness::Fresh => "fresh".to_owned(),
        Freshness::Superseded { current } => format!("the subject is now at {current}"),
        Freshness::Expired { at } => format!("expired at {at}"),
        Freshness::InputStale { input } => format!("its input {input} is stale"),
        Freshness::ObservationChanged { key } => format!("observation `{key}` changed"),
    }
}

/// A replan reason as a sentence with its fix.
pub fn replan_reason(reason: &ReplanReason) -> String {
    let fix = reason.fix();
    match reason {
        ReplanReason::Obligation { id, cause, detail } => {
            let what = match cause {
                ObligationCause::MonitorStalled { todo, streak } => format!(
                    "monitor `{todo}` saw no change {streak} polls in a row (obligation {id}: {detail})"
                ),
                ObligationCause::TurnsFailing { todo, failures, .. } => {
                    format!("`{todo}` failed {failures} turns in a row (obligation {id}: {detail})")
                }
                ObligationCause::NoProgress { todo, turns } => format!(
                    "`{todo}` settled {turns} turns in a row without progress (obligation {id}: {detail})"
                ),
                ObligationCause::GoalStalled { turns } => format!(
                    "the goal settled {turns} turns in a row without progress (obligation {id}: {detail})"
                ),
                ObligationCause::Proposed => format!("obligation {id} is open: {detail}"),
            };
            what + &then(
                "discharge it with the plan changes that answer it (a JSON list of changes)",
                &fix,
            )
        }
        ReplanReason::Stuck { todo, because } => match because {
            Stuck::GateRefused { gate } => {
                format!("`{todo}` cannot go on: gate {gate} was rejected or expired")
                    + &then("replace it", &fix)
            }
            Stuck::Blocked { reason } => {
                format!("`{todo}` is blocked: {reason}")
                    + &then("once that is cleared, unblock it", &fix)
            }
            Stuck::DependencyClosed { dependency } => {
                format!("`{todo}` depends on `{dependency}`, which was superseded")
                    + &then("replace it", &fix)
            }
        },
        ReplanReason::AcceptanceGap { criteria } => {
            let words: Vec<String> = criteria
                .iter()
                .map(|(id, status)| criterion_words(id, status))
                .collect();
            format!("no work left but {}", words.join(", ")) + &then("add a todo", &fix)
        }
        ReplanReason::ClosureIntentMissing => {
            "every criterion is met and no work is left, but nobody declared the intent to close"
                .to_owned()
                + &then("close the goal", &fix)
        }
    }
}

/// A repair issue as a sentence with its fix.
pub fn repair_issue(issue: &RepairIssue) -> String {
    let fix = issue.fix();
    match issue {
        RepairIssue::Obligation { id, detail } => {
            format!("obligation {id} is open: {detail}")
                + &then("discharge it with the changes that repair it", &fix)
        }
        RepairIssue::OutcomeUnknown { todo, turn, holder } => {
            format!(
                "the outcome of turn {turn} on `{todo}` (agent:{holder}) is unknown: its effect may have happened"
            ) + &then(
                "read back what it did, then, once its lease has expired, resolve it as absent or committed",
                &fix,
            )
        }
        RepairIssue::EffectUnresolved {
            effect,
            todo,
            holder,
        } => {
            format!(
                "effect {effect} on `{todo}` (agent:{holder}) was intended under a lease that is gone and never recorded: it may have happened"
            ) + &then(
                "read it back where it acts, then record it as performed or absent",
                &fix,
            )
        }
        RepairIssue::SharedCheckout {
            todo,
            other,
            top_level,
        } => {
            format!("`{todo}` would write in checkout `{top_level}`, which agent:{other} is using")
                + &then(
                    "create an independent worktree (git worktree add PATH) and claim from there",
                    &fix,
                )
        }
        RepairIssue::DecisionMissing { todo, scope } => {
            format!("`{todo}` needs decision `{scope}` and no gate asks for it")
                + &then("open a gate for it", &fix)
        }
        RepairIssue::UnregisteredAgent { agent } => {
            format!("agent:{agent} is not registered with this goal") + &then("register it", &fix)
        }
    }
}

/// The first line of a decision: its kind and what it is about, as one sentence that starts
/// with the kind (`continue: work on …`).
pub fn headline(decision: &Decision) -> String {
    let kind = decision.kind().to_owned();
    match decision {
        Decision::Continue(a) => format!("{kind}: work on `{}` ({})", a.todo, a.title),
        Decision::Wait { until, reasons } => {
            let when = until.map_or_else(|| " for an event".to_owned(), |t| format!(" until {t}"));
            match reasons.as_slice() {
                [] => format!("{kind}{when}"),
                [only] => format!("{kind}{when}: {}", wait_reason(only)),
                [first, rest @ ..] => format!(
                    "{kind}{when}: {} (and {} more)",
                    wait_reason(first),
                    rest.len()
                ),
            }
        }
        Decision::Ask { questions, .. } => match questions.as_slice() {
            [] => kind,
            [only] => format!("{kind}: {}", question_line(only)),
            [first, rest @ ..] => {
                format!("{kind}: {} (and {} more)", question_line(first), rest.len())
            }
        },
        Decision::Replan { reason } => format!("{kind}: {}", replan_reason(reason)),
        Decision::Repair { issue } => format!("{kind}: {}", repair_issue(issue)),
        Decision::Terminal { outcome } => format!("{kind} ({})", terminal_word(*outcome)),
    }
}

/// `accepted` or `abandoned`.
pub fn terminal_word(outcome: TerminalOutcome) -> &'static str {
    match outcome {
        TerminalOutcome::Accepted => "accepted",
        TerminalOutcome::Abandoned => "abandoned",
    }
}

/// A decision in full: the headline, then one line per reason or question with its fix, and for
/// `continue` the next step on the lease.
pub fn describe(decision: &Decision) -> String {
    let mut text = headline(decision);
    text.push('\n');
    match decision {
        Decision::Continue(a) => {
            let step = match &a.lease {
                LeaseStep::Claim => format!("claim it: loopx claim --todo {}", a.todo),
                LeaseStep::Held { epoch, expires_at } => format!(
                    "lease epoch {epoch} held until {expires_at}; begin a turn: loopx begin --todo {} --epoch {epoch} --turn …",
                    a.todo
                ),
                LeaseStep::Resume {
                    epoch,
                    turn,
                    expires_at,
                } => format!(
                    "turn {turn} is in flight under epoch {epoch} (lease until {expires_at}); finish it and settle it: loopx settle --file … (a session that did not begin it takes it over first: loopx take-over --todo {} --epoch {epoch} --turn {turn})",
                    a.todo
                ),
            };
            let _ = writeln!(text, "  {step}");
            if !a.pending_gates.is_empty() {
                let gates: Vec<String> = a.pending_gates.iter().map(ToString::to_string).collect();
                let _ = writeln!(text, "  still pending elsewhere: {}", gates.join(", "));
            }
            if let Some(note) = &a.handoff {
                let _ = writeln!(text, "  handoff: {}", note.next_action);
            }
        }
        Decision::Wait { reasons, .. } if reasons.len() > 1 => {
            for reason in reasons {
                let _ = writeln!(text, "  - {}", wait_reason(reason));
            }
        }
        Decision::Ask { questions, until } => {
            if questions.len() > 1 {
                for question in questions {
                    let _ = writeln!(text, "  - {}", question_line(question));
                    let _ = writeln!(text, "    {}", question_fix(question));
                }
            } else if let Some(question) = questions.first() {
                let _ = writeln!(text, "  {}", question_fix(question));
            }
            if let Some(t) = until {
                let _ = writeln!(text, "  the decision changes by itself at {t}");
            }
        }
        Decision::Wait { .. }
        | Decision::Replan { .. }
        | Decision::Repair { .. }
        | Decision::Terminal { .. } => {}
    }
    text
}
