//! Decisions in words, for people and for agents that read prose (the CLI's `next`, a
//! session's brief): each reason one sentence, followed by what to do about it — its [`Fix`]
//! as a `loopx` command line and who may run it. Pure functions of the decision; the wire
//! shape stays the decision's JSON.
//!
//! Refusals and failed submissions in words too ([`refusal_words`], [`store_error`],
//! [`submit_error`]): the message and a hint specific to each code, naming `loopx` verbs, one
//! definition that the CLI's errors and the MCP tools' errors share, so their hints agree.

use std::fmt::Write as _;

use crate::actor::Actor;
use crate::budget::{Amounts, Dimension};
use crate::decide::{
    Decision, LeaseStep, Question, RepairIssue, ReplanReason, Stuck, TerminalOutcome, WaitReason,
};
use crate::evidence::Freshness;
use crate::fix::{Fix, Who};
use crate::gate::{Decided, GateState};
use crate::ids::CriterionId;
use crate::obligation::ObligationCause;
use crate::refusal::Refusal;
use crate::retry::{FailureNote, TurnResult};
use crate::seams::StoreError;
use crate::state::CriterionStatus;
use crate::todo::ResumeCondition;
use crate::write::SubmitError;

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
        Who::Validator => "a validator registered for the criterion's check".to_owned(),
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
            format!("monitor `{todo}` is due at {due}")
                + &then(&format!("ask again at {due}"), &fix)
        }
        WaitReason::Deferred { todo, until } => match until {
            ResumeCondition::At { at } => {
                format!("`{todo}` is deferred until {at}")
                    + &then(&format!("ask again at {at}"), &fix)
            }
            ResumeCondition::TodoDone { todo: other } => {
                format!("`{todo}` is deferred until `{other}` is done")
                    + &then("it resumes once that is done; see what moves it", &fix)
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
            format!("`{todo}` waits on {}", on.join(", "))
                + &then("it is ready once those are done; see what moves them", &fix)
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
                + &then(&format!("ask again at {until}"), &fix)
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
        Freshness::DirtyTree {
            established,
            current,
        } => format!(
            "established on a dirty tree ({established}): the checkout had uncommitted or untracked files when it was checked, and the subject is at {current}; commit or ignore those files (`git status` shows them) and check again"
        ),
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
            let action = if fix.verb == "validate" {
                "check it again at the current revision"
            } else {
                "add a todo"
            };
            format!("no work left but {}", words.join(", ")) + &then(action, &fix)
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

/// The next step on the lease of a `continue`, with its command line: claim, begin a turn,
/// or finish (or take over) the turn in flight. Names the todo by id only, never its title.
pub fn lease_step_words(a: &crate::decide::Assignment) -> String {
    match &a.lease {
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
    }
}

/// A decision in full: the headline, then one line per reason or question with its fix, and for
/// `continue` the next step on the lease.
pub fn describe(decision: &Decision) -> String {
    let mut text = headline(decision);
    text.push('\n');
    match decision {
        Decision::Continue(a) => {
            let _ = writeln!(text, "  {}", lease_step_words(a));
            if !a.pending_gates.is_empty() {
                let gates: Vec<String> = a.pending_gates.iter().map(ToString::to_string).collect();
                let _ = writeln!(text, "  still pending elsewhere: {}", gates.join(", "));
            }
            if let Some(note) = &a.handoff {
                let _ = writeln!(text, "  handoff: {}", note.next_action);
            }
            for decided in &a.decided {
                text.push_str(&decided_words(decided, "  "));
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

// ----- refusals ------------------------------------------------------------------------------

/// The `loopx` verb that submits a kernel command (by its `Command::name`).
pub fn verb_of(command: &str) -> &'static str {
    match command {
        "create_goal" => "goal create",
        "amend_goal" => "goal amend",
        "abandon_goal" => "goal abandon",
        "declare_closure" => "goal close",
        "add_todo" => "todo add",
        "reassign" => "todo reassign",
        "defer" => "todo defer",
        "block" => "todo block",
        "unblock" => "todo unblock",
        "supersede" => "todo supersede",
        "claim" | "report_workspace" => "claim",
        "renew" => "renew",
        "take_over_turn" => "take-over",
        "release" => "release",
        "handoff" => "handoff",
        "begin_turn" => "begin",
        "settle_turn" => "settle",
        // The engine intends a turn's effects in the outbox: `loopx run` is the verb that does.
        "intend_effect" => "run",
        "record_effect" => "effect resolve",
        "resolve_outcome" => "resolve-outcome",
        "open_gate" => "gate open",
        "answer_gate" => "gate answer",
        "withdraw_gate" => "gate withdraw",
        // The service relays answers and notices gates from GitHub: `loopx serve` does.
        "relay_gate_answer" | "intend_gate_notice" | "record_gate_notice" => "serve",
        // Every `observe` verb records one: the group, with `…` for whichever.
        "record_observation" => "observe …",
        "record_evidence" => "evidence add",
        "raise_obligation" => "obligation raise",
        "discharge" => "obligation discharge",
        _ => "the verb",
    }
}

/// Who may run a verb the acting actor may not, in words.
fn permitted(command: &str) -> &'static str {
    match command {
        "record_evidence" => {
            "evidence comes from a validator, a provider or the goal owner: pass --as validator:NAME"
        }
        "record_observation" => {
            "observations come from an agent, a provider or a validator: pass --as provider:NAME"
        }
        "declare_closure" | "discharge" => {
            "the goal owner or a registered agent may: pass --as person:OWNER or --as agent:NAME"
        }
        "withdraw_gate" => "whoever opened the gate, or the goal owner, may withdraw it",
        _ => "act as an agent registered with the goal (--as agent:NAME) or as the goal owner",
    }
}

/// A refusal in the command line's words: the message and a hint specific to its code, naming
/// `loopx` verbs (the kernel's own messages name kernel commands, for library callers).
#[allow(clippy::too_many_lines, reason = "one arm per refusal code")]
pub fn refusal_words(refusal: &Refusal) -> (String, String) {
    let kernel = refusal.to_string();
    let same = |hint: &str| (kernel.clone(), hint.to_owned());
    match refusal {
        Refusal::UnknownGoal => (
            "no such goal in this store".to_owned(),
            "create it with `loopx goal create`, or list the goals with `loopx goal list`"
                .to_owned(),
        ),
        Refusal::ActorNotPermitted { actor, command } => (
            format!("{actor} may not run `loopx {}`", verb_of(command)),
            permitted(command).to_owned(),
        ),
        Refusal::GrantReasonRequired => (
            "acting on another agent's todo under a grant needs a reason".to_owned(),
            "pass --grant-reason TEXT".to_owned(),
        ),
        Refusal::UnregisteredAgent { agent } => (
            format!("agent `{agent}` is not registered with this goal"),
            format!("the goal owner can register it: `loopx goal amend --register-agent {agent}`"),
        ),
        Refusal::StaleRevision { .. } => same(
            "the goal moved: read it again (`loopx goal show`) and retry against the new revision",
        ),
        Refusal::StaleLeaseEpoch {
            todo,
            presented,
            current,
        } if presented > current => (
            kernel.clone(),
            format!(
                "epoch {presented} was never issued on `{todo}`: pass the epoch `loopx claim` printed ({current})"
            ),
        ),
        Refusal::StaleLeaseEpoch { .. } => {
            same("this executor lost the lease: stop, and ask for the next step with `loopx next`")
        }
        Refusal::UnknownTodo { .. } | Refusal::UnknownReference { .. } => {
            same("check the id: `loopx todo list` lists the todos")
        }
        Refusal::UnknownGate { .. } => same("check the id: `loopx gate list` lists the gates"),
        Refusal::UnknownObligation { .. } => {
            same("check the id: `loopx obligation list` lists the obligations")
        }
        Refusal::LeaseHeld { .. } | Refusal::WriteScopeConflict { .. } => {
            same("ask for other work with `loopx next`, or wait for the lease to end")
        }
        Refusal::NoLiveLease { todo } => (
            kernel.clone(),
            format!("claim it again: `loopx claim --todo {todo}`"),
        ),
        Refusal::NotLeaseHolder { .. } => {
            same("only the lease holder may: act as it (--as agent:NAME), or ask `loopx next`")
        }
        Refusal::TurnInFlight { todo, .. } => (
            kernel.clone(),
            format!(
                "settle it (`loopx settle`), release it (`loopx release --todo {todo} --epoch N`), or resolve it once its lease has expired (`loopx resolve-outcome`)"
            ),
        ),
        Refusal::TurnNotBegun { todo, .. } => (
            kernel.clone(),
            format!("begin the turn first: `loopx begin --todo {todo} --epoch N --turn ID`"),
        ),
        Refusal::TurnAlreadyUsed { .. } => {
            same("that turn is over: ask for the next step with `loopx next`")
        }
        Refusal::BudgetExhausted { .. } => same(
            "the goal owner can raise the limit: `loopx goal amend --turns N` (or --tokens, --cost-micros, --wall-ms)",
        ),
        Refusal::GateBlocks { gate, .. } => (
            kernel.clone(),
            format!(
                "its owner answers it with `loopx gate answer --gate {gate} --answer TEXT`; meanwhile ask `loopx next`"
            ),
        ),
        Refusal::DecisionMissing { scope, .. } => (
            kernel.clone(),
            format!(
                "open a gate for it: `loopx gate open --id ID --question TEXT --owner person:NAME --decision {scope}`"
            ),
        ),
        Refusal::NotGateOwner { owner, .. } => (
            kernel.clone(),
            format!("act as the gate's owner: --as {owner}"),
        ),
        Refusal::RelayNotGateOwner {
            gate,
            provider,
            login,
            owner,
        } => (
            kernel.clone(),
            match owner {
                Actor::Person(person) => format!(
                    "only {owner} answers gate `{gate}`; if `{login}` is theirs, the goal owner maps it: `loopx goal amend --map-login {person}={provider}:{login}`"
                ),
                _ => {
                    format!("only {owner} answers gate `{gate}`: `loopx gate answer --as {owner}`")
                }
            },
        ),
        Refusal::GateNoticeUnmapped {
            owner, provider, ..
        } => (
            kernel.clone(),
            match owner {
                Actor::Person(person) => format!(
                    "the goal owner maps the gate owner's login: `loopx goal amend --map-login {person}={provider}:LOGIN`"
                ),
                _ => format!("only a gate owned by a person is noticed at `{provider}`"),
            },
        ),
        Refusal::GateNoticeExists { gate } => (
            kernel.clone(),
            format!(
                "nothing to do: the notice of gate `{gate}` is on its way or delivered; `loopx status` shows it"
            ),
        ),
        Refusal::GateNoticeNotPending { gate } => (
            kernel.clone(),
            format!(
                "nothing to record: gate `{gate}` has no pending notice; `loopx status` shows it"
            ),
        ),
        Refusal::LoginMalformed { provider, .. } => (
            kernel.clone(),
            format!(
                "map a login as it reads at `{provider}`: `loopx goal amend --map-login PERSON={provider}:LOGIN`"
            ),
        ),
        Refusal::LoginTaken {
            provider, login, ..
        } => (
            kernel.clone(),
            format!(
                "the goal owner withdraws that mapping first: `loopx goal amend --unmap-login {provider}:{login}`"
            ),
        ),
        Refusal::NotGoalOwner { owner } => (
            kernel.clone(),
            format!("act as the goal owner: --as {owner}"),
        ),
        Refusal::ValidationInsufficient { .. } => same(
            "settle with a `keep_open`, `defer` or `block` transition, or with a `passed` verdict",
        ),
        Refusal::OutcomeUnknown { todo, turn } => (
            kernel.clone(),
            format!(
                "read back what the turn did, then `loopx resolve-outcome --todo {todo} --turn {turn} --resolution absent --note TEXT` if it left nothing, or `--resolution committed --settlement-file FILE` (on a signed goal with `--verdict FILE` from `loopx verdict`) if it happened"
            ),
        ),
        Refusal::WorkspaceShared { .. } => same(
            "create an independent worktree (git worktree add PATH) and claim from there with --workspace-top-level and --workspace-common-dir",
        ),
        Refusal::WorkspaceRequired { .. } => same(
            "claim with --workspace-top-level and --workspace-common-dir (from `git rev-parse`)",
        ),
        Refusal::ObligationClosed { .. } => same("ask for the next step with `loopx next`"),
        Refusal::ClockAhead { store_time, .. } => (
            kernel.clone(),
            format!(
                "run it without --now (the store's clock reads {store_time}), and check this host's clock; only a store created with `loopx init --test-clock` lets --now move time"
            ),
        ),
        Refusal::VerdictUnsigned { validator } => (
            kernel.clone(),
            format!(
                "the validator signs the verdict with `loopx verdict --as {validator} --todo TODO --turn TURN --epoch N --outcome OUTCOME > verdict.json`; pass that file with `--verdict verdict.json` to the command you ran (`loopx settle` or `loopx resolve-outcome --resolution committed`)"
            ),
        ),
        Refusal::SignatureMissing { actor } | Refusal::KeyUnregistered { actor } => (
            kernel.clone(),
            format!(
                "make the key with `loopx key new {actor}` (or point LOOPX_KEY at its file); the goal's owner registers its public key with `loopx goal amend --register-key {actor}=KEY`"
            ),
        ),
        Refusal::SignatureInvalid { actor } => (
            kernel.clone(),
            format!(
                "sign with the key registered for `{actor}` (`loopx key show {actor}` prints the one in the key directory; the owner registers it with `loopx goal amend --register-key {actor}=KEY`)"
            ),
        ),
        _ => same("nothing changed; ask for the next legal step with `loopx next`"),
    }
}

/// A store failure's stable code and what to do about it, naming `loopx` verbs. The refusal a
/// commit beyond the store's clock amounts to is [`refusal_words`]' (`clock_ahead`).
pub fn store_error(error: &StoreError) -> (&'static str, &'static str) {
    match error {
        StoreError::Conflict { .. } => (
            "conflict",
            "another writer moved the goal first; run the command again",
        ),
        StoreError::OperationConflict { .. } => (
            "operation_conflict",
            "this operation id was used for another command; pass a new --op (or none)",
        ),
        StoreError::Ambiguous { .. } => (
            "ambiguous",
            "retry with the same --op: a committed operation is not repeated",
        ),
        StoreError::UnknownGoal { .. } => ("unknown_goal", "list the goals with `loopx goal list`"),
        StoreError::InvalidBatch { .. } => (
            "invalid_batch",
            "the events do not apply to the goal; nothing was written",
        ),
        StoreError::NewerSchema { .. } => (
            "newer_schema",
            "this store was written by a newer loopx: upgrade loopx on this machine",
        ),
        StoreError::HistoryDamaged { .. } => (
            "history_damaged",
            "run `loopx doctor` for details and restore the store from a backup; other goals are unaffected",
        ),
        StoreError::Corrupt { .. } => (
            "store_corrupt",
            "run `loopx doctor` for details and restore the store from a backup",
        ),
        StoreError::Unavailable { .. } => (
            "store_unavailable",
            "check --store (or LOOPX_STORE): the path or server, its permissions and that it is running",
        ),
        _ => ("store_error", "see the message"),
    }
}

/// A failed submission in words: its stable code (a refusal's own code, a store failure's
/// code, `contended`, `goal_mismatch`), the message and a hint naming `loopx` verbs — what the
/// CLI prints and the MCP tools answer, one definition for both.
pub fn submit_error(error: &SubmitError) -> (&'static str, String, String) {
    match error {
        SubmitError::Refused(refusal) => {
            let (message, hint) = refusal_words(refusal);
            (refusal.code(), message, hint)
        }
        SubmitError::Store(StoreError::ClockAhead {
            at,
            store_time,
            skew,
        }) => submit_error(&SubmitError::Refused(Refusal::ClockAhead {
            at: *at,
            store_time: *store_time,
            skew: *skew,
        })),
        SubmitError::Store(store) => {
            let (code, hint) = store_error(store);
            (code, store.to_string(), hint.to_owned())
        }
        SubmitError::Contended { .. } => (
            "contended",
            error.to_string(),
            "other writers are busy on this goal: retry later with the same --op".to_owned(),
        ),
        SubmitError::GoalMismatch { .. } => (
            "goal_mismatch",
            error.to_string(),
            "the goal id in the file and on the command line must agree".to_owned(),
        ),
    }
}

/// A gate's outcome in words, each line indented by `indent`: the outcome with who and when,
/// the question, then the person's words whole, every line quoted (`> `) so that a reader —
/// person or agent — sees them as what someone said, never as loopx's own instruction.
pub fn decided_words(decided: &Decided, indent: &str) -> String {
    let outcome = decided_word(decided.outcome);
    let by = decided
        .by
        .as_ref()
        .map_or_else(String::new, |by| format!(" by {by}"));
    let mut text = format!(
        "{indent}gate `{}` {outcome}{by} at {}: \"{}\"\n",
        decided.gate,
        decided.at,
        one_line(&decided.question)
    );
    for line in decided.text.lines() {
        let _ = writeln!(text, "{indent}  > {line}");
    }
    text
}

/// What became of a gate, in one word or two: `answered`, `rejected`, `withdrawn`, `expired
/// unanswered` (`pending` while it still asks).
pub fn decided_word(state: GateState) -> &'static str {
    match state {
        GateState::Resolved => "answered",
        GateState::Rejected => "rejected",
        GateState::Withdrawn => "withdrawn",
        GateState::Expired => "expired unanswered",
        GateState::Pending | GateState::Overdue => "pending",
    }
}

/// `text` on one line: line breaks as spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a todo's last turn failed, each line indented by `indent`: how many failed in a row,
/// the last one's turn, time and kind, then the failure's own words (a failing command's
/// output among them), every line marked `│` as quoted output. Empty for a note that is no
/// failure.
pub fn failure_words(failures: u32, note: &FailureNote, indent: &str) -> String {
    let (what, detail) = match &note.result {
        TurnResult::ExecutorFailed { class, detail } => {
            (format!("executor failed ({class})"), detail)
        }
        TurnResult::ValidationFailed { detail } => ("validation failed".to_owned(), detail),
        TurnResult::Progress | TurnResult::NoProgress => return String::new(),
    };
    let mut text = format!(
        "{indent}failed {failures} turn(s) in a row; the last, {} at {}: {what}\n",
        note.turn, note.at
    );
    for line in detail.lines() {
        let _ = writeln!(text, "{indent}  │ {line}");
    }
    text
}
