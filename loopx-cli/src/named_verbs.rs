//! Every `loopx …` the command line tells someone to run exists in its own definition: the verb
//! each decision's fix names and every command line its words show (every reason of
//! `testkit::reasons`, each lease step of `continue`), and every verb a refusal's message or hint
//! names (one refusal of every code). Checked against the clap command tree: the verb path, and
//! each `--flag` given after it.

use clap::Command;
use loopx_kernel::testkit::reasons::every_reason;
use loopx_kernel::{
    Actor, Amounts, Assignment, Decision, Dimension, Duration, GateState, LeaseStep, Question,
    Refusal, RepairIssue, ReplanReason, TerminalOutcome, Timestamp, WaitReason,
};

use crate::context::parse_actor;
use crate::error::refusal_words;

/// The words after each `loopx ` that `text` shows as a command line: to the closing backtick
/// when it opens one, otherwise to the end of the line or a `(`.
fn named(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (start, _) in text.match_indices("loopx ") {
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "-_/:.".contains(c)) {
            continue;
        }
        let rest = &text[start + "loopx ".len()..];
        let span = if before == Some('`') {
            rest.split('`').next().unwrap_or_default()
        } else {
            let line = rest.lines().next().unwrap_or_default();
            line.split(" (").next().unwrap_or_default()
        };
        let words = span
            .split_whitespace()
            .map(|w| w.trim_end_matches([',', ';', '.', ':', ')']).to_owned())
            .filter(|w| !w.is_empty())
            .collect();
        found.push(words);
    }
    found
}

/// Whether `words` (after `loopx`) start with a verb of `root` that takes every `--flag` named
/// after it; what is wrong otherwise.
fn check(root: &Command, words: &[String]) -> Result<(), String> {
    let line = words.join(" ");
    // Global flags may come first (`loopx --goal G next`): each with its value, when it takes one.
    let mut rest = words;
    while let [first, tail @ ..] = rest {
        let Some(flag) = first.strip_prefix("--") else {
            break;
        };
        let arg =
            flag_of(root, flag).ok_or_else(|| format!("`loopx {line}`: no global --{flag}"))?;
        let takes_value = arg.get_action().takes_values() && !flag.contains('=');
        rest = if takes_value {
            tail.get(1..).unwrap_or_default()
        } else {
            tail
        };
    }
    let mut command = root;
    let mut depth = 0;
    for word in rest {
        match command.find_subcommand(word) {
            Some(sub) if !word.starts_with('-') => {
                command = sub;
                depth += 1;
            }
            _ => break,
        }
    }
    if depth == 0 {
        return Err(format!("`loopx {line}` names no verb"));
    }
    // A group followed by `…` stands for any of its verbs (`loopx observe …`).
    if command.has_subcommands() {
        return if rest.get(depth).is_some_and(|w| w == "…") {
            Ok(())
        } else {
            Err(format!("`loopx {line}` stops short of a verb"))
        };
    }
    for word in &rest[depth..] {
        let Some(flag) = word.strip_prefix("--") else {
            continue;
        };
        if flag_of(command, flag).is_none() {
            let flag = flag.split('=').next().unwrap_or_default();
            return Err(format!("`loopx {line}`: the verb takes no --{flag}"));
        }
    }
    Ok(())
}

/// The argument of `command` whose long name (or an alias of it) is `flag` (`name=value`
/// allowed).
fn flag_of<'a>(command: &'a Command, flag: &str) -> Option<&'a clap::Arg> {
    let flag = flag.split('=').next().unwrap_or_default();
    command.get_arguments().find(|arg| {
        arg.get_long() == Some(flag)
            || arg
                .get_all_aliases()
                .is_some_and(|aliases| aliases.contains(&flag))
    })
}

/// The command line's definition with its global flags spread onto every verb.
fn root() -> Command {
    let mut root = crate::definition();
    root.build();
    root
}

/// Checks every command line `text` shows; the problems, each with `context`.
fn problems_in(root: &Command, context: &str, text: &str) -> Vec<String> {
    named(text)
        .iter()
        .filter_map(|words| check(root, words).err())
        .map(|problem| format!("{context}: {problem}\n  in: {text}"))
        .collect()
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("a literal time")
}

fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse().expect("a literal id")
}

/// A `continue` for each lease step, and `terminal`: the decisions without a reason.
fn decisions_without_reason() -> Vec<(&'static str, Decision)> {
    let until = at("2026-11-29T11:00:00Z");
    let assignment = |lease| {
        Decision::Continue(Assignment {
            todo: id("edit"),
            title: "change the output layer".to_owned(),
            lease,
            reserve: Amounts::ZERO,
            handoff: None,
            pending_gates: Vec::new(),
            decided: Vec::new(),
        })
    };
    vec![
        ("continue.claim", assignment(LeaseStep::Claim)),
        (
            "continue.held",
            assignment(LeaseStep::Held {
                epoch: 2,
                expires_at: until,
            }),
        ),
        (
            "continue.resume",
            assignment(LeaseStep::Resume {
                epoch: 2,
                turn: id("t1"),
                expires_at: until,
            }),
        ),
        (
            "terminal",
            Decision::Terminal {
                outcome: TerminalOutcome::Accepted,
            },
        ),
    ]
}

/// The fixes a decision carries, one per reason or question.
fn fixes(decision: &Decision) -> Vec<loopx_kernel::Fix> {
    match decision {
        Decision::Wait { reasons, .. } => reasons.iter().map(WaitReason::fix).collect(),
        Decision::Ask { questions, .. } => questions.iter().map(Question::fix).collect(),
        Decision::Replan { reason } => vec![ReplanReason::fix(reason)],
        Decision::Repair { issue } => vec![RepairIssue::fix(issue)],
        Decision::Continue(_) | Decision::Terminal { .. } => Vec::new(),
    }
}

#[test]
fn every_decision_names_verbs_that_exist() {
    let root = root();
    let mut problems = Vec::new();
    let mut decisions = every_reason();
    decisions.extend(decisions_without_reason());
    for (name, decision) in &decisions {
        let text = loopx_kernel::words::describe(decision);
        problems.extend(problems_in(&root, name, &text));
        for fix in fixes(decision) {
            problems.extend(problems_in(&root, name, &fix.command_line()));
        }
        // A decision that is not over says what acts on it, in words a shell can run.
        if !matches!(decision, Decision::Terminal { .. }) {
            assert!(!named(&text).is_empty(), "{name} names no verb:\n{text}");
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every kernel command's name, as `Refusal::ActorNotPermitted` carries it.
const COMMANDS: [&str; 28] = [
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
];

/// One refusal of every code (`ActorNotPermitted` once per command, since its words name the
/// command's verb).
#[allow(clippy::too_many_lines, reason = "one sample per refusal code")]
fn every_refusal() -> Vec<Refusal> {
    let actor = |text| parse_actor(text).expect("a literal actor");
    let agent: Actor = actor("agent:agent-a");
    let owner: Actor = actor("person:maintainer");
    let validator: Actor = actor("validator:cargo-test");
    let when = at("2026-11-29T10:00:00Z");
    let mut refusals = vec![
        Refusal::GoalExists { goal: id("g") },
        Refusal::UnknownGoal,
        Refusal::GoalAbandoned,
        Refusal::UnknownTodo { todo: id("edit") },
        Refusal::UnknownGate { gate: id("g1") },
        Refusal::UnknownObligation {
            obligation: id("o1"),
        },
        Refusal::UnknownReference {
            kind: "todo",
            id: "edit".to_owned(),
        },
        Refusal::DuplicateId {
            kind: "todo",
            id: "edit".to_owned(),
        },
        Refusal::InvalidInput {
            field: "title",
            problem: "empty".to_owned(),
        },
        Refusal::StaleRevision {
            expected: 3,
            current: 4,
        },
        Refusal::StaleLeaseEpoch {
            todo: id("edit"),
            presented: 1,
            current: 2,
        },
        Refusal::StaleLeaseEpoch {
            todo: id("edit"),
            presented: 3,
            current: 2,
        },
        Refusal::LeaseHeld {
            todo: id("edit"),
            holder: id("agent-b"),
            until: when,
        },
        Refusal::NoLiveLease { todo: id("edit") },
        Refusal::NotLeaseHolder {
            todo: id("edit"),
            actor: agent.clone(),
        },
        Refusal::TurnInFlight {
            todo: id("edit"),
            turn: id("t1"),
        },
        Refusal::TurnNotBegun {
            todo: id("edit"),
            turn: id("t1"),
        },
        Refusal::TurnAlreadyUsed { turn: id("t1") },
        Refusal::BudgetExhausted {
            dimension: Dimension::Turns,
            scope: "goal".to_owned(),
        },
        Refusal::GateBlocks {
            todo: id("edit"),
            gate: id("g1"),
        },
        Refusal::DecisionMissing {
            todo: id("edit"),
            scope: id("api-shape"),
        },
        Refusal::GateNotPending {
            gate: id("g1"),
            state: GateState::Resolved,
        },
        Refusal::NotGateOwner {
            gate: id("g1"),
            owner: owner.clone(),
        },
        Refusal::RelayNotGateOwner {
            gate: id("g1"),
            provider: id("github"),
            login: "mallory".into(),
            owner: owner.clone(),
        },
        Refusal::GateNoticeUnmapped {
            gate: id("g1"),
            provider: id("github"),
            owner: owner.clone(),
        },
        Refusal::GateNoticeExists { gate: id("g1") },
        Refusal::GateNoticeNotPending { gate: id("g1") },
        Refusal::LoginMalformed {
            provider: id("github"),
            problem: "empty".into(),
        },
        Refusal::LoginTaken {
            provider: id("github"),
            login: "maria-gh".into(),
            person: id("maria"),
        },
        Refusal::NotGoalOwner {
            owner: owner.clone(),
        },
        Refusal::UnregisteredAgent {
            agent: id("agent-b"),
        },
        Refusal::ExcludedAgent {
            agent: id("agent-a"),
            todo: id("edit"),
        },
        Refusal::GrantRequired {
            todo: id("edit"),
            owner: id("agent-b"),
            action: "take_over",
        },
        Refusal::GrantReasonRequired,
        Refusal::TodoNotOpen {
            todo: id("edit"),
            status: "done",
            needed: "open",
        },
        Refusal::DependenciesUnmet {
            todo: id("edit"),
            pending: vec![id("first")],
        },
        Refusal::ResumeConditionUnmet { todo: id("edit") },
        Refusal::MonitorNotDue {
            todo: id("watch"),
            due: when,
        },
        Refusal::BackingOff {
            todo: id("edit"),
            failures: 2,
            until: when,
        },
        Refusal::ValidationNotIndependent {
            validator: agent.clone(),
        },
        Refusal::ValidationInsufficient {
            todo: id("edit"),
            verdict: "progress",
        },
        Refusal::InvalidContinuation {
            problem: "no successors".to_owned(),
        },
        Refusal::WriteScopeConflict {
            todo: id("edit"),
            other: id("other"),
            holder: id("agent-b"),
        },
        Refusal::WorkspaceShared {
            top_level: "/src/cli".to_owned(),
            other: id("agent-b"),
        },
        Refusal::WorkspaceRequired { todo: id("edit") },
        Refusal::NoVisibleChange {
            what: "the todo is already deferred".to_owned(),
        },
        Refusal::OutcomeUnknown {
            todo: id("edit"),
            turn: id("t1"),
        },
        Refusal::ObligationClosed {
            obligation: id("o1"),
        },
        Refusal::SignatureMissing {
            actor: agent.clone(),
        },
        Refusal::KeyUnregistered {
            actor: agent.clone(),
        },
        Refusal::SignatureInvalid {
            actor: agent.clone(),
        },
        Refusal::ClockAhead {
            at: when,
            store_time: when,
            skew: Duration::seconds(30),
        },
        Refusal::VerdictUnsigned {
            validator: validator.clone(),
        },
        Refusal::VerdictSelfSigned {
            validator: validator.clone(),
            agent: agent.clone(),
        },
        Refusal::ValidatorUnregistered {
            validator: validator.clone(),
        },
        Refusal::ValidatorNotRegisteredForCheck {
            validator: validator.clone(),
            check: id("tests"),
        },
        Refusal::VerdictSignatureInvalid { validator },
    ];
    refusals.extend(
        COMMANDS
            .iter()
            .copied()
            .map(|command| Refusal::ActorNotPermitted {
                actor: agent.clone(),
                command,
            }),
    );
    refusals
}

#[test]
fn every_refusal_names_verbs_that_exist() {
    let refusals = every_refusal();
    let sampled: std::collections::BTreeSet<&str> = refusals.iter().map(Refusal::code).collect();
    let declared: std::collections::BTreeSet<&str> = Refusal::CODES.iter().copied().collect();
    assert_eq!(sampled, declared, "one sample of every refusal code");
    let root = root();
    let mut problems = Vec::new();
    for refusal in &refusals {
        let (message, hint) = refusal_words(refusal);
        let code = refusal.code();
        problems.extend(problems_in(&root, code, &message));
        problems.extend(problems_in(&root, code, &hint));
        if let Some(fix) = refusal.fix() {
            problems.extend(problems_in(&root, code, &fix.command_line()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The ones the issue names by verb are among them, under the names the definition has.
    for words in [
        "resolve-outcome --todo edit --turn t1",
        "resolve --todo edit --turn t1",
        "obligation discharge --obligation o1 --file plan.json",
        "obligation list",
        "handoff --todo edit --epoch 1 --to agent-b",
        "todo block --todo edit --reason waiting",
        "todo reassign --todo edit --to agent-b",
        "ready --agent agent-a",
        "status --at-revision 3",
        "log --from 1 --to 3",
    ] {
        let words: Vec<String> = words.split(' ').map(str::to_owned).collect();
        assert_eq!(check(&root, &words), Ok(()));
    }
}

#[test]
fn a_verb_that_does_not_exist_is_found() {
    let root = root();
    for (text, problem) in [
        (
            "then `loopx resolve-outcomes --todo t`",
            "`loopx resolve-outcomes --todo t` names no verb",
        ),
        (
            "`loopx obligation discharges`",
            "`loopx obligation discharges` stops short of a verb",
        ),
        ("`loopx observe`", "`loopx observe` stops short of a verb"),
        (
            "close it: loopx goal close --why … (by the owner)",
            "`loopx goal close --why …`: the verb takes no --why",
        ),
    ] {
        let found = problems_in(&root, "sample", text);
        assert_eq!(found.len(), 1, "{text}: {found:?}");
        assert!(found[0].contains(problem), "{found:?}");
    }
    // Global flags count for every verb, and words that are not command lines are left alone.
    assert!(problems_in(&root, "sample", "`loopx --goal g next --json`").is_empty());
    assert!(problems_in(&root, "sample", "`loopx observe …`").is_empty());
    assert!(problems_in(&root, "sample", "`loopx next --goal g --json`").is_empty());
    assert_eq!(
        problems_in(&root, "sample", "`loopx --goal g nxet`").len(),
        1
    );
    assert!(
        problems_in(
            &root,
            "sample",
            "the `loopx` verbs, loopx/journal, loopx://goal"
        )
        .is_empty()
    );
}
