//! The brief: what a fresh session must know to take up an agent's work, derived from the goal
//! state alone, so the next executor trusts no one's account of what happened before.
//!
//! A [`Brief`] holds, for each goal the agent works on: the goal and why; each criterion met,
//! failing, stale or unshown, with the evidence and the revision it was shown at; what is done
//! and what validated it; the decision (the assignment and why it is legal now, or why to wait,
//! whom to ask, what to repair); what waits on whom (gates, obligations, other agents' work);
//! who holds which lease; the budget left; the handoff note. [`Brief::to_markdown`] renders it
//! in about 1–2k tokens — lists are bounded and say how much they leave out — and its JSON is
//! the same data, with the decision in its wire shape.

use std::fmt::Write as _;

use serde::Serialize;

use crate::actor::Actor;
use crate::budget::{Amounts, Dimension, Limits};
use crate::decide::{Decision, decide, terminal};
use crate::evidence::{Freshness, Outcome};
use crate::gate::{Decided, GateState};
use crate::identity::IdentityMode;
use crate::ids::{
    AgentId, CheckId, CriterionId, EvidenceId, GateId, GoalId, ObligationId, PersonId, Revision,
    Subject, TodoId, TurnId,
};
use crate::obligation::ObligationKind;
use crate::retry::FailureNote;
use crate::state::{CriterionStatus, GoalState};
use crate::time::Timestamp;
use crate::todo::{HandoffNote, TodoStatus};
use crate::words;

/// At most this many done todos are listed per goal (the most recent); the rest are counted.
pub const MAX_DONE: usize = 8;
/// At most this many open todos are listed per goal (the agent's first); the rest are counted.
pub const MAX_OPEN: usize = 12;
/// At most this many goals are briefed in full across goals; the rest are counted.
pub const MAX_GOALS: usize = 8;

/// An agent's brief, over one goal or every goal it works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Brief {
    /// The agent it is for.
    pub agent: AgentId,
    /// The time it was derived at.
    pub at: Timestamp,
    /// The goals, the ones with work for the agent first.
    pub goals: Vec<GoalBrief>,
    /// Goals the agent is registered with that are not briefed: terminal, or beyond
    /// [`MAX_GOALS`].
    pub omitted_goals: Vec<GoalId>,
}

/// One goal as the agent needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GoalBrief {
    /// The goal.
    pub goal: GoalId,
    /// What the work is for.
    pub objective: String,
    /// Who owns it.
    pub owner: PersonId,
    /// The revision the brief was derived at.
    pub revision: u64,
    /// Whether commands must be signed.
    pub identity: IdentityMode,
    /// The kernel's decision for the agent now.
    pub decision: Decision,
    /// Every acceptance criterion and where it stands.
    pub criteria: Vec<CriterionBrief>,
    /// The most recently completed todos, newest first.
    pub done: Vec<DoneBrief>,
    /// Completed todos not listed.
    pub more_done: usize,
    /// Work not yet done: the agent's own first, then the rest by priority and age.
    pub open: Vec<OpenBrief>,
    /// Open todos not listed.
    pub more_open: usize,
    /// Gates waiting on someone.
    pub gates: Vec<GateBrief>,
    /// What the gates covering open work came to — answers in full, rejections, withdrawals,
    /// expiries, with who and when — oldest first: the decisions that work acts on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decided: Vec<Decided>,
    /// Open obligations.
    pub obligations: Vec<ObligationBrief>,
    /// The goal's budget: its limits, what is spent and reserved, what is left.
    pub budget: BudgetBrief,
}

/// A criterion and the evidence it stands on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CriterionBrief {
    /// The criterion.
    pub id: CriterionId,
    /// In words.
    pub text: String,
    /// The check whose passing evidence meets it.
    pub check: CheckId,
    /// The subject that evidence must be about.
    pub subject: Subject,
    /// `met`, `failing`, `stale`, `unregistered_validator` (its evidence comes from no
    /// validator registered for the check) or `no_evidence`.
    pub standing: &'static str,
    /// The evidence it stands on, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidenceBrief>,
    /// Why that evidence no longer counts, for `stale`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_because: Option<Freshness>,
    /// The subject's current revision, when one was observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<Revision>,
}

/// A piece of evidence as the brief cites it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvidenceBrief {
    /// Its id.
    pub id: EvidenceId,
    /// Passed or failed.
    pub outcome: Outcome,
    /// The revision it was shown at.
    pub revision: Revision,
    /// Who established it.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
}

/// A completed todo and what validated it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoneBrief {
    /// The todo.
    pub todo: TodoId,
    /// What it was.
    pub title: String,
    /// Who completed it.
    pub by: AgentId,
    /// In which turn.
    pub turn: TurnId,
    /// When.
    pub at: Timestamp,
    /// The evidence settled with that turn: what validated it.
    pub evidence: Vec<EvidenceBrief>,
}

/// A todo not yet done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenBrief {
    /// The todo.
    pub todo: TodoId,
    /// What to do.
    pub title: String,
    /// `open`, `blocked` or `deferred`.
    pub status: &'static str,
    /// The agent it is meant for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee: Option<AgentId>,
    /// Who holds its live lease, and until when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<(AgentId, Timestamp)>,
    /// Its turns that failed in a row, when its last settled turn failed.
    #[serde(skip_serializing_if = "crate::is_default")]
    pub failures: u32,
    /// The last of them: what failed and why, in the failure's own words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<FailureNote>,
}

/// A gate waiting on its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateBrief {
    /// The gate.
    pub gate: GateId,
    /// The question.
    pub question: String,
    /// Who must answer.
    pub owner: Actor,
    /// When an answer is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// Past its deadline.
    pub overdue: bool,
    /// The todos it holds.
    pub holds: Vec<TodoId>,
}

/// An open obligation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObligationBrief {
    /// The obligation.
    pub id: ObligationId,
    /// Replan or repair.
    pub kind: ObligationKind,
    /// What to look at.
    pub detail: String,
    /// The agent whose line of work it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<AgentId>,
}

/// The goal's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetBrief {
    /// The limits.
    pub limits: Limits,
    /// Charged so far.
    pub spent: Amounts,
    /// Reserved by turns in flight.
    pub reserved: Amounts,
    /// What is left on each limited dimension.
    pub remaining: Limits,
}

impl Brief {
    /// The brief of `agent` on one goal at `now`.
    pub fn of_goal(state: &GoalState, agent: &AgentId, now: Timestamp) -> Brief {
        Brief {
            agent: agent.clone(),
            at: now,
            goals: vec![GoalBrief::new(state, agent, now)],
            omitted_goals: Vec::new(),
        }
    }

    /// The brief of `agent` across `states`: every goal it is registered with that is not
    /// terminal, those whose decision is `continue` first, at most [`MAX_GOALS`] of them.
    pub fn across<'a>(
        states: impl IntoIterator<Item = &'a GoalState>,
        agent: &AgentId,
        now: Timestamp,
    ) -> Brief {
        let mut briefed = Vec::new();
        let mut omitted_goals = Vec::new();
        for state in states {
            if !state.is_registered(agent) {
                continue;
            }
            if terminal(state, now).is_some() {
                omitted_goals.push(state.spec.id.clone());
            } else {
                briefed.push(GoalBrief::new(state, agent, now));
            }
        }
        briefed.sort_by_key(|g| (!matches!(g.decision, Decision::Continue(_)), g.goal.clone()));
        omitted_goals.extend(briefed.iter().skip(MAX_GOALS).map(|g| g.goal.clone()));
        briefed.truncate(MAX_GOALS);
        Brief {
            agent: agent.clone(),
            at: now,
            goals: briefed,
            omitted_goals,
        }
    }

    /// The brief as Markdown for a session's context.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Brief for agent:{} at {}", self.agent, self.at);
        if self.goals.is_empty() {
            out.push_str("\nNo goal has work for this agent.\n");
        }
        for goal in &self.goals {
            goal.write_markdown(&mut out);
        }
        if !self.omitted_goals.is_empty() {
            let names: Vec<String> = self
                .omitted_goals
                .iter()
                .map(|g| format!("`{g}`"))
                .collect();
            let _ = writeln!(
                out,
                "\nNot briefed (terminal, or beyond the first {MAX_GOALS}): {}.",
                names.join(", ")
            );
        }
        out
    }
}

impl GoalBrief {
    /// The brief of `agent` on the goal `state` holds, at `now`.
    pub fn new(state: &GoalState, agent: &AgentId, now: Timestamp) -> GoalBrief {
        let (done, more_done) = done(state);
        let (open, more_open) = open(state, agent, now);
        GoalBrief {
            goal: state.spec.id.clone(),
            objective: state.spec.objective.clone(),
            owner: state.spec.owner.clone(),
            revision: state.revision,
            identity: state.spec.identity_mode(),
            decision: decide(state, agent, now),
            criteria: criteria(state, now),
            done,
            more_done,
            open,
            more_open,
            gates: gates(state, now),
            decided: state.decided_on_open_work(now),
            obligations: state
                .obligations
                .values()
                .filter(|o| o.discharged.is_none())
                .map(|o| ObligationBrief {
                    id: o.id.clone(),
                    kind: o.kind,
                    detail: o.detail.clone(),
                    owner: o.owner.clone(),
                })
                .collect(),
            budget: BudgetBrief {
                limits: state.ledger.limits,
                spent: state.ledger.spent,
                reserved: state.ledger.reserved,
                remaining: state.ledger.remaining(),
            },
        }
    }

    /// The handoff note the decision carries, if the agent was handed this work.
    pub fn handoff(&self) -> Option<&HandoffNote> {
        match &self.decision {
            Decision::Continue(assignment) => assignment.handoff.as_ref(),
            _ => None,
        }
    }

    fn write_markdown(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\n## Goal `{}` (revision {})\n\n{}\n\nOwner: person:{}. Identity: {}.",
            self.goal,
            self.revision,
            self.objective,
            self.owner,
            identity_word(self.identity)
        );
        self.write_next(out);
        self.write_criteria(out);
        self.write_work(out);
        self.write_decided(out);
        self.write_waiting(out);
        let _ = writeln!(out, "\n### Budget\n\n{}", budget_words(&self.budget));
    }

    fn write_next(&self, out: &mut String) {
        out.push_str("\n### Next\n\n");
        out.push_str(&words::describe(&self.decision));
        if let Decision::Continue(assignment) = &self.decision {
            let _ = writeln!(
                out,
                "  It is yours now: `{}` is in this agent's frontier (open, its dependencies done, no gate holds it, the budget admits a turn).",
                assignment.todo
            );
        }
        if let Some(note) = self.handoff() {
            let _ = writeln!(
                out,
                "\nHandoff note — next action: {}\nStop when: {}",
                note.next_action, note.stop_condition
            );
            if !note.evidence.is_empty() {
                let cited: Vec<String> = note.evidence.iter().map(|e| format!("`{e}`")).collect();
                let _ = writeln!(out, "It rests on: {}", cited.join(", "));
            }
        }
    }

    fn write_criteria(&self, out: &mut String) {
        if self.criteria.is_empty() {
            return;
        }
        out.push_str("\n### Acceptance\n\n");
        for c in &self.criteria {
            let mark = if c.standing == "met" { "x" } else { " " };
            let _ = write!(out, "- [{mark}] `{}` {}: {}", c.id, c.standing, c.text);
            match (&c.evidence, &c.stale_because) {
                (Some(e), Some(why)) => {
                    let _ = write!(
                        out,
                        " — evidence `{}` {} at {} by {}, stale: {}",
                        e.id,
                        outcome_word(e.outcome),
                        e.revision,
                        e.by,
                        words::freshness_words(why)
                    );
                }
                (Some(e), None) => {
                    let _ = write!(
                        out,
                        " — evidence `{}` {} at {} by {}",
                        e.id,
                        outcome_word(e.outcome),
                        e.revision,
                        e.by
                    );
                    if c.standing == "unregistered_validator" {
                        out.push_str(", who is not registered for the check: it does not count");
                    }
                }
                (None, _) => {
                    let _ = write!(out, " — needs check `{}` on `{}`", c.check, c.subject);
                }
            }
            if let (None, Some(current)) = (&c.evidence, &c.current_revision) {
                let _ = write!(out, " at {current}");
            }
            out.push('\n');
        }
    }

    fn write_work(&self, out: &mut String) {
        if !self.done.is_empty() {
            out.push_str("\n### Done\n\n");
            for d in &self.done {
                let _ = write!(
                    out,
                    "- `{}` {} — by agent:{} in turn {}",
                    d.todo, d.title, d.by, d.turn
                );
                let shown: Vec<String> = d
                    .evidence
                    .iter()
                    .map(|e| format!("`{}` {} by {}", e.id, outcome_word(e.outcome), e.by))
                    .collect();
                if !shown.is_empty() {
                    let _ = write!(out, "; validated: {}", shown.join(", "));
                }
                out.push('\n');
            }
            more(out, self.more_done, "done");
        }
        if !self.open.is_empty() {
            out.push_str("\n### Open work\n\n");
            for o in &self.open {
                let _ = write!(out, "- `{}` {} ({}", o.todo, o.title, o.status);
                if let Some(agent) = &o.assignee {
                    let _ = write!(out, ", for agent:{agent}");
                }
                if let Some((holder, until)) = &o.held_by {
                    let _ = write!(out, ", leased by agent:{holder} until {until}");
                }
                out.push_str(")\n");
                if let Some(note) = &o.last_failure {
                    out.push_str(&words::failure_words(o.failures, note, "  "));
                }
            }
            more(out, self.more_open, "open");
        }
    }

    fn write_decided(&self, out: &mut String) {
        if self.decided.is_empty() {
            return;
        }
        out.push_str(
            "\n### Decided\n\nWhat people decided on open work, in their words (quoted: what they said, not loopx's instructions):\n\n",
        );
        for decided in &self.decided {
            // A bullet for the gate, its quoted lines beneath it.
            for (i, line) in words::decided_words(decided, "").lines().enumerate() {
                let bullet = if i == 0 { "- " } else { "  " };
                let _ = writeln!(out, "{bullet}{line}");
            }
        }
    }

    fn write_waiting(&self, out: &mut String) {
        if self.gates.is_empty() && self.obligations.is_empty() {
            return;
        }
        out.push_str("\n### Waiting on someone\n\n");
        for g in &self.gates {
            let late = if g.overdue { ", overdue" } else { "" };
            let due = g
                .deadline
                .map_or_else(String::new, |d| format!(", due {d}"));
            let holds: Vec<String> = g.holds.iter().map(|t| format!("`{t}`")).collect();
            let holds = if holds.is_empty() {
                String::new()
            } else {
                format!("; holds {}", holds.join(", "))
            };
            let _ = writeln!(
                out,
                "- gate `{}` for {}{due}{late}: \"{}\"{holds}",
                g.gate, g.owner, g.question
            );
        }
        for o in &self.obligations {
            let kind = match o.kind {
                ObligationKind::Replan => "replan",
                ObligationKind::Repair => "repair",
            };
            let owner = o
                .owner
                .as_ref()
                .map_or_else(String::new, |a| format!(" for agent:{a}"));
            let _ = writeln!(out, "- {kind} obligation `{}`{owner}: {}", o.id, o.detail);
        }
    }
}

fn more(out: &mut String, count: usize, what: &str) {
    if count > 0 {
        let _ = writeln!(out, "- … and {count} more {what}");
    }
}

fn criteria(state: &GoalState, now: Timestamp) -> Vec<CriterionBrief> {
    state
        .spec
        .criteria
        .iter()
        .map(|criterion| {
            let status = state.criterion_status(&criterion.id, now);
            let (standing, evidence, stale_because) = match status {
                Some(CriterionStatus::Met { evidence }) => ("met", Some(evidence), None),
                Some(CriterionStatus::Failing { evidence }) => ("failing", Some(evidence), None),
                Some(CriterionStatus::Stale {
                    evidence,
                    freshness,
                }) => ("stale", Some(evidence), Some(freshness)),
                Some(CriterionStatus::UnregisteredValidator { evidence, .. }) => {
                    ("unregistered_validator", Some(evidence), None)
                }
                Some(CriterionStatus::NoEvidence) | None => ("no_evidence", None, None),
            };
            CriterionBrief {
                id: criterion.id.clone(),
                text: criterion.text.clone(),
                check: criterion.check.clone(),
                subject: criterion.subject.clone(),
                standing,
                evidence: evidence.and_then(|id| evidence_brief(state, &id)),
                stale_because,
                current_revision: state
                    .subjects
                    .get(&criterion.subject)
                    .map(|head| head.revision.clone()),
            }
        })
        .collect()
}

fn evidence_brief(state: &GoalState, id: &EvidenceId) -> Option<EvidenceBrief> {
    state.evidence.get(id).map(|e| EvidenceBrief {
        id: e.id.clone(),
        outcome: e.outcome,
        revision: e.revision.clone(),
        by: e.produced_by.clone(),
        at: e.observed_at,
    })
}

fn done(state: &GoalState) -> (Vec<DoneBrief>, usize) {
    let mut done: Vec<DoneBrief> = state
        .todos
        .values()
        .filter_map(|todo| match &todo.status {
            TodoStatus::Done { by, turn, at, .. } => Some(DoneBrief {
                todo: todo.id.clone(),
                title: todo.title.clone(),
                by: by.clone(),
                turn: turn.clone(),
                at: *at,
                evidence: state
                    .evidence
                    .values()
                    .filter(|e| e.turn.as_ref() == Some(turn))
                    .filter_map(|e| evidence_brief(state, &e.id))
                    .collect(),
            }),
            _ => None,
        })
        .collect();
    done.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.todo.cmp(&b.todo)));
    let more = done.len().saturating_sub(MAX_DONE);
    done.truncate(MAX_DONE);
    (done, more)
}

fn open(state: &GoalState, agent: &AgentId, now: Timestamp) -> (Vec<OpenBrief>, usize) {
    let mut open: Vec<_> = state
        .todos
        .values()
        .filter(|todo| !todo.status.is_closed())
        .collect();
    // The agent's own work first (meant for it or leased by it), then by priority and age.
    open.sort_by_key(|todo| {
        let mine = todo.assignee.as_ref() == Some(agent)
            || todo
                .lease
                .as_ref()
                .is_some_and(|l| &l.holder == agent && l.is_live(now));
        (!mine, todo.priority, todo.seq)
    });
    let more = open.len().saturating_sub(MAX_OPEN);
    let listed = open
        .into_iter()
        .take(MAX_OPEN)
        .map(|todo| OpenBrief {
            todo: todo.id.clone(),
            title: todo.title.clone(),
            status: todo.status.name(),
            assignee: todo.assignee.clone(),
            held_by: todo
                .lease
                .as_ref()
                .filter(|l| l.is_live(now))
                .map(|l| (l.holder.clone(), l.expires_at)),
            failures: state
                .last_failure(&todo.id)
                .map_or(0, |(failures, _)| failures),
            last_failure: state.last_failure(&todo.id).map(|(_, note)| note.clone()),
        })
        .collect();
    (listed, more)
}

fn gates(state: &GoalState, now: Timestamp) -> Vec<GateBrief> {
    state
        .gates
        .values()
        .filter_map(|gate| {
            let overdue = match gate.state_at(now) {
                GateState::Pending => false,
                GateState::Overdue => true,
                _ => return None,
            };
            Some(GateBrief {
                gate: gate.id.clone(),
                question: gate.question.clone(),
                owner: gate.owner.clone(),
                deadline: gate.deadline,
                overdue,
                holds: state
                    .todos
                    .values()
                    .filter(|t| !t.status.is_closed() && gate.scope.covers(t))
                    .map(|t| t.id.clone())
                    .collect(),
            })
        })
        .collect()
}

fn identity_word(mode: IdentityMode) -> &'static str {
    match mode {
        IdentityMode::Signed => "signed",
        IdentityMode::Declared => "declared (actors are taken at their word)",
        IdentityMode::Unsigned => "unsigned (recorded before signing)",
    }
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "passed",
        Outcome::Fail => "failed",
    }
}

fn budget_words(budget: &BudgetBrief) -> String {
    let parts: Vec<String> = Dimension::ALL
        .into_iter()
        .filter_map(|d| {
            let (limit, spent) = (budget.limits.get(d), budget.spent.get(d));
            let (reserved, left) = (budget.reserved.get(d), budget.remaining.get(d));
            if limit.is_none() && spent == 0 && reserved == 0 {
                return None;
            }
            let reserved = if reserved > 0 {
                format!(" ({} reserved)", amount(d, reserved))
            } else {
                String::new()
            };
            let name = d.to_string();
            Some(match (limit, left) {
                (Some(limit), Some(left)) => format!(
                    "{name} {} of {}{reserved}, {} left",
                    amount(d, spent),
                    amount(d, limit),
                    amount(d, left)
                ),
                _ => format!("{name} {} (no limit){reserved}", amount(d, spent)),
            })
        })
        .collect();
    if parts.is_empty() {
        "No limits, nothing spent.".to_owned()
    } else {
        parts.join("; ") + "."
    }
}

/// An amount of one dimension in words: a count, money in units, time in hours and minutes.
fn amount(dimension: Dimension, n: u64) -> String {
    match dimension {
        Dimension::Turns | Dimension::Tokens => n.to_string(),
        Dimension::Cost => format!("{}.{:06}", n / 1_000_000, n % 1_000_000),
        Dimension::WallClock => match (n / 3_600_000, n / 60_000 % 60) {
            (0, m) => format!("{m}m"),
            (h, 0) => format!("{h}h"),
            (h, m) => format!("{h}h{m:02}m"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::goal::{Criterion, GoalSpec};
    use crate::todo::NewTodo;

    fn now() -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000)
    }

    fn goal_with(todos: usize) -> GoalState {
        let mut builder = GoalSpec::builder("big", "ship the JSON output", "owner")
            .agent("agent-a")
            .agent("agent-b")
            .declared_identity();
        for n in 0..3 {
            let criterion = Criterion::new(format!("c{n}"), "a check passes", "ci", "repo:x");
            builder = builder.criterion(criterion.expect("valid ids"));
        }
        let spec = builder.build().expect("valid ids");
        let mut goal = GoalState::create(&spec.owner_actor(), now(), &spec).expect("created");
        let agent = Actor::Agent("agent-a".parse().expect("a valid id"));
        for n in 0..todos {
            let todo = NewTodo::advance(
                format!("todo-{n}").parse().expect("a valid id"),
                format!("step {n} of the plan, described in a sentence of ordinary length"),
            );
            goal.handle(&agent, now(), &Command::AddTodo { todo })
                .expect("added");
        }
        goal
    }

    /// The brief's size in tokens, estimated as a byte count over four (what a tokenizer gives
    /// English prose and identifiers, roughly): printed, and kept within 2k for 50 todos.
    #[test]
    fn a_brief_of_fifty_todos_stays_within_two_thousand_tokens() {
        let goal = goal_with(50);
        let agent: AgentId = "agent-a".parse().expect("a valid id");
        let brief = Brief::of_goal(&goal, &agent, now());
        let markdown = brief.to_markdown();
        let tokens = markdown.len().div_ceil(4);
        println!(
            "brief of 50 todos: {} bytes, about {tokens} tokens",
            markdown.len()
        );
        assert!(tokens <= 2_000, "{tokens} tokens:\n{markdown}");
        assert_eq!(brief.goals[0].open.len(), MAX_OPEN);
        assert_eq!(brief.goals[0].more_open, 50 - MAX_OPEN);
        assert!(markdown.contains("… and 38 more open"), "{markdown}");
    }

    #[test]
    fn across_goals_only_the_agents_live_goals_are_briefed_its_work_first() {
        let agent: AgentId = "agent-a".parse().expect("a valid id");
        let stranger: AgentId = "agent-z".parse().expect("a valid id");
        let busy = goal_with(2);
        let idle = goal_with(0);
        let brief = Brief::across([&idle, &busy], &agent, now());
        assert_eq!(brief.goals.len(), 2);
        assert_eq!(brief.goals[0].decision.kind(), "continue");
        assert_eq!(brief.goals[1].decision.kind(), "replan");
        let none = Brief::across([&idle, &busy], &stranger, now());
        assert!(none.goals.is_empty());
        assert!(
            none.to_markdown()
                .contains("No goal has work for this agent")
        );
    }
}
