//! What to do about a decision: every reason a `wait`, `ask`, `replan` or `repair` gives carries
//! a [`Fix`], the one step that acts on it — the `loopx` verb, the kernel command that verb
//! submits, its arguments and who may run it.
//!
//! Each fix is derived from its reason by an exhaustive `match`, so a new reason (or a new
//! obligation cause, resume condition or stuck cause) does not compile until it says what to do.
//! The fixes appear in a decision's JSON as a `fix` field beside each reason's own fields; they
//! are derived again on every read and never stored.

use serde::ser::SerializeSeq as _;
use serde::{Deserialize, Serialize, Serializer};

use crate::actor::Actor;
use crate::budget::Dimension;
use crate::decide::{Question, RepairIssue, ReplanReason, Stuck, WaitReason};
use crate::ids::{AgentId, GateId, TodoId};
use crate::obligation::ObligationCause;
use crate::refusal::Refusal;
use crate::state::CriterionStatus;
use crate::todo::ResumeCondition;

/// The step that acts on one reason of a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// The `loopx` verb, as the words after `loopx` (e.g. `goal close`). Every verb named here
    /// exists in the command line.
    pub verb: String,
    /// The kernel command the verb submits (its [`Command::name`](crate::Command::name), e.g.
    /// `declare_closure`), which a library host submits through `store.goal(&id).submit(…)`;
    /// `None` when nothing is to be written, only the decision read again (`next`).
    pub call: Option<String>,
    /// The verb's arguments, in order: each flag without its dashes, with its value where the
    /// reason determines it and `None` where whoever runs it chooses.
    pub args: Vec<FixArg>,
    /// Who may run it.
    pub by: Who,
}

/// One argument of a [`Fix`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixArg {
    /// The flag, without its dashes (`reason` for `--reason`).
    pub flag: String,
    /// Its value when the reason determines it; `None` when whoever runs the fix chooses it.
    pub value: Option<String>,
}

/// Who may run a [`Fix`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "who", rename_all = "snake_case")]
pub enum Who {
    /// The goal's owner.
    Owner,
    /// The goal's owner or any agent registered with the goal.
    Planner,
    /// The agent the decision is for.
    Asker,
    /// Any agent registered with the goal.
    AnyAgent,
    /// A registered agent other than the one the decision is for.
    OtherAgent,
    /// This agent only.
    Agent {
        /// The agent.
        agent: AgentId,
    },
    /// This agent or the goal's owner.
    AgentOrOwner {
        /// The agent.
        agent: AgentId,
    },
    /// This actor only (a gate's owner).
    Actor {
        /// The actor.
        actor: Actor,
    },
    /// The owner of this gate (`loopx gate list` names them).
    GateOwner {
        /// The gate.
        gate: GateId,
    },
    /// Whoever holds the live lease on this todo (`loopx todo list` names them).
    Holder {
        /// The todo.
        todo: TodoId,
    },
    /// An agent, provider or validator that observes the outside world.
    Observer,
    /// A validator registered for the criterion's check (the goal's spec names them).
    Validator,
}

impl Fix {
    fn new(verb: &str, call: Option<&str>, by: Who) -> Fix {
        Fix {
            verb: verb.to_owned(),
            call: call.map(str::to_owned),
            args: Vec::new(),
            by,
        }
    }

    /// Adds an argument whose value the reason determines.
    fn arg(mut self, flag: &str, value: &dyn std::fmt::Display) -> Fix {
        self.args.push(FixArg {
            flag: flag.to_owned(),
            value: Some(value.to_string()),
        });
        self
    }

    /// Adds an argument whose value whoever runs the fix chooses.
    fn choose(mut self, flag: &str) -> Fix {
        self.args.push(FixArg {
            flag: flag.to_owned(),
            value: None,
        });
        self
    }

    /// The command line, e.g. `loopx goal close --reason …`; a value to choose is `…`, a
    /// value with spaces or quotes is single-quoted.
    pub fn command_line(&self) -> String {
        let mut line = format!("loopx {}", self.verb);
        for arg in &self.args {
            line.push_str(" --");
            line.push_str(&arg.flag);
            line.push(' ');
            match &arg.value {
                None => line.push('…'),
                Some(value) if value.is_empty() || value.contains([' ', '\'', '"', '\\']) => {
                    line.push('\'');
                    line.push_str(&value.replace('\'', r"'\''"));
                    line.push('\'');
                }
                Some(value) => line.push_str(value),
            }
        }
        line
    }
}

/// Asking for the next step again: what acts on a wait that time, or another todo's own
/// standing, ends. Never with `--now`: a hint does not invite a caller to claim a time ahead of
/// the store's clock (the words name the time to ask at).
fn ask_again() -> Fix {
    Fix::new("next", None, Who::Asker)
}

fn budget(dimension: Dimension) -> Fix {
    let flag = match dimension {
        Dimension::Turns => "turns",
        Dimension::Tokens => "tokens",
        Dimension::Cost => "cost-micros",
        Dimension::WallClock => "wall-ms",
    };
    Fix::new("goal amend", Some("amend_goal"), Who::Owner).choose(flag)
}

fn discharge(obligation: &crate::ids::ObligationId) -> Fix {
    Fix::new("obligation discharge", Some("discharge"), Who::Planner)
        .arg("obligation", obligation)
        .choose("file")
}

fn resolve(todo: &TodoId, turn: Option<&crate::ids::TurnId>, holder: &AgentId) -> Fix {
    let fix = Fix::new(
        "resolve-outcome",
        Some("resolve_outcome"),
        Who::AgentOrOwner {
            agent: holder.clone(),
        },
    )
    .arg("todo", todo);
    let fix = match turn {
        Some(turn) => fix.arg("turn", turn),
        None => fix.choose("turn"),
    };
    fix.choose("resolution").choose("note")
}

/// Records what a readback of a pending effect showed.
fn resolve_effect(effect: &crate::ids::EffectId, holder: &AgentId) -> Fix {
    Fix::new(
        "effect resolve",
        Some("record_effect"),
        Who::AgentOrOwner {
            agent: holder.clone(),
        },
    )
    .arg("effect", effect)
    .choose("outcome")
    .choose("note")
}

impl WaitReason {
    /// What acts on this wait.
    pub fn fix(&self) -> Fix {
        match self {
            WaitReason::LeaseHeld { todo, holder, .. } => Fix::new(
                "release",
                Some("release"),
                Who::Agent {
                    agent: holder.clone(),
                },
            )
            .arg("todo", todo)
            .choose("epoch"),
            WaitReason::AssignedElsewhere { todo, agent } => Fix::new(
                "todo reassign",
                Some("reassign"),
                Who::AgentOrOwner {
                    agent: agent.clone(),
                },
            )
            .arg("todo", todo)
            .choose("to"),
            // Time ends these, or another todo's own standing, which may itself wait (a lease,
            // a backoff, a gate): asking names what moves it, where a claim could be refused.
            WaitReason::MonitorNotDue { .. }
            | WaitReason::Backoff { .. }
            | WaitReason::Dependencies { .. } => ask_again(),
            WaitReason::Deferred { until, .. } => match until {
                ResumeCondition::At { .. } | ResumeCondition::TodoDone { .. } => ask_again(),
                ResumeCondition::GateSettled { gate } => Fix::new(
                    "gate answer",
                    Some("answer_gate"),
                    Who::GateOwner { gate: gate.clone() },
                )
                .arg("gate", gate)
                .choose("answer"),
                ResumeCondition::ObservationChanged { key } => {
                    Fix::new("observe git", Some("record_observation"), Who::Observer)
                        .arg("key", key)
                        .choose("dir")
                        .choose("subject")
                }
            },
            WaitReason::WriteScopeBusy { other, .. } => Fix::new(
                "release",
                Some("release"),
                Who::Holder {
                    todo: other.clone(),
                },
            )
            .arg("todo", other)
            .choose("epoch"),
            WaitReason::OutcomeUnknown { todo, holder } => resolve(todo, None, holder),
            WaitReason::EffectUnresolved { effect, holder } => resolve_effect(effect, holder),
            WaitReason::OthersOnly { todo } => {
                Fix::new("claim", Some("claim"), Who::OtherAgent).arg("todo", todo)
            }
            WaitReason::Budget { dimension, .. } => budget(*dimension),
        }
    }
}

impl Question {
    /// What answers this question.
    pub fn fix(&self) -> Fix {
        match self {
            Question::Gate { gate, owner, .. } => Fix::new(
                "gate answer",
                Some("answer_gate"),
                Who::Actor {
                    actor: owner.clone(),
                },
            )
            .arg("gate", gate)
            .choose("answer"),
            // An overrun is answered like a spent budget: by raising the limit it ran over (or,
            // through the same verb, the policy's reservation).
            Question::Budget { dimension, .. } | Question::Overrun { dimension, .. } => {
                budget(*dimension)
            }
        }
    }
}

impl ReplanReason {
    /// What changes the plan for this reason.
    pub fn fix(&self) -> Fix {
        match self {
            ReplanReason::Obligation { id, cause, .. } => match cause {
                ObligationCause::MonitorStalled { .. }
                | ObligationCause::TurnsFailing { .. }
                | ObligationCause::NoProgress { .. }
                | ObligationCause::GoalStalled { .. }
                | ObligationCause::Proposed => discharge(id),
            },
            ReplanReason::Stuck { todo, because } => match because {
                Stuck::GateRefused { .. } => {
                    Fix::new("todo supersede", Some("supersede"), Who::Planner)
                        .arg("todo", todo)
                        .choose("reason")
                }
                Stuck::Blocked { .. } => {
                    Fix::new("todo unblock", Some("unblock"), Who::Planner).arg("todo", todo)
                }
                Stuck::DependencyClosed { .. } => {
                    Fix::new("todo supersede", Some("supersede"), Who::Planner)
                        .arg("todo", todo)
                        .choose("reason")
                        .choose("replacement-file")
                }
            },
            // Evidence that only went stale needs checking again, not new work.
            ReplanReason::AcceptanceGap { criteria } => match criteria
                .iter()
                .find(|(_, status)| matches!(status, CriterionStatus::Stale { .. }))
            {
                Some((criterion, _)) => {
                    Fix::new("validate", Some("record_evidence"), Who::Validator)
                        .arg("criterion", criterion)
                        .choose("validate")
                }
                None => Fix::new("todo add", Some("add_todo"), Who::Planner)
                    .choose("id")
                    .choose("title"),
            },
            ReplanReason::ClosureIntentMissing => {
                Fix::new("goal close", Some("declare_closure"), Who::Planner).choose("reason")
            }
        }
    }
}

impl RepairIssue {
    /// What repairs this issue.
    pub fn fix(&self) -> Fix {
        match self {
            RepairIssue::Obligation { id, .. } => discharge(id),
            RepairIssue::OutcomeUnknown { todo, turn, holder } => resolve(todo, Some(turn), holder),
            RepairIssue::EffectUnresolved { effect, holder, .. } => resolve_effect(effect, holder),
            RepairIssue::SharedCheckout { todo, .. } => {
                Fix::new("claim", Some("claim"), Who::Asker)
                    .arg("todo", todo)
                    .choose("workspace-top-level")
                    .choose("workspace-common-dir")
            }
            RepairIssue::DecisionMissing { scope, .. } => {
                Fix::new("gate open", Some("open_gate"), Who::Planner)
                    .choose("id")
                    .choose("question")
                    .choose("owner")
                    .arg("decision", scope)
            }
            RepairIssue::UnregisteredAgent { agent } => {
                Fix::new("goal amend", Some("amend_goal"), Who::Owner).arg("register-agent", agent)
            }
        }
    }
}

impl Refusal {
    /// The step that acts on a refusal that comes from the store rather than from a rule of the
    /// goal: `clock_ahead` (the command's time was beyond the store's clock) is acted on by
    /// asking for the next step again at the current time, `loopx next` without `--now`.
    /// `None` for the kernel's own refusals, whose messages say what to do.
    pub fn fix(&self) -> Option<Fix> {
        matches!(self, Refusal::ClockAhead { .. }).then(ask_again)
    }
}

/// A reason that says what to do about it.
pub(crate) trait HasFix: Serialize {
    fn fix(&self) -> Fix;
}

impl HasFix for WaitReason {
    fn fix(&self) -> Fix {
        WaitReason::fix(self)
    }
}

impl HasFix for Question {
    fn fix(&self) -> Fix {
        Question::fix(self)
    }
}

impl HasFix for ReplanReason {
    fn fix(&self) -> Fix {
        ReplanReason::fix(self)
    }
}

impl HasFix for RepairIssue {
    fn fix(&self) -> Fix {
        RepairIssue::fix(self)
    }
}

/// A reason's own fields with its `fix` beside them.
#[derive(Serialize)]
struct WithFix<'a, T: Serialize> {
    #[serde(flatten)]
    reason: &'a T,
    fix: Fix,
}

/// Serializes one reason with its fix (`serialize_with` on a decision's field).
pub(crate) fn one<S: Serializer, T: HasFix>(reason: &T, serializer: S) -> Result<S::Ok, S::Error> {
    WithFix {
        reason,
        fix: reason.fix(),
    }
    .serialize(serializer)
}

/// Serializes a list of reasons, each with its fix.
pub(crate) fn seq<S: Serializer, T: HasFix>(
    reasons: &[T],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(reasons.len()))?;
    for reason in reasons {
        seq.serialize_element(&WithFix {
            reason,
            fix: reason.fix(),
        })?;
    }
    seq.end()
}
