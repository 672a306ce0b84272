//! Properties over arbitrary observation sequences, nonsense facts included: the capability
//! never panics, the kernel's invariants hold, it proposes nothing the kernel refuses, and the
//! domain promises below are kept.

use std::collections::BTreeMap;

use loopx_capability_prfix::{PrFix, PrFixConfig};
use loopx_kernel::seams::Capability;
use loopx_kernel::testkit::roster;
use loopx_kernel::testkit::scenario::{self, Scenario, ScenarioStep, StepRecord};
use loopx_kernel::{
    Actor, Command, Duration, GateHold, GoalState, Observation, SourceId, Timestamp, TodoClass,
    frontier,
};
use proptest::prelude::*;

const REPO: &str = "acme/cli";
const SHAS: [&str; 3] = [
    "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    "5c7a9b1e0f2d4c6a8e1b3d5f7a9c0e2b4d6f8a1c",
    "d6fde92930d4715a2b49857d24b940956b26d2d3",
];

/// A fact value: usually one the capability knows, sometimes anything printable.
fn value(known: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        4 => proptest::sample::select(known).prop_map(str::to_owned),
        1 => "\\PC{0,12}",
    ]
    .boxed()
}

/// A commit: mostly one head (so CI, reviews and the pull request meet), sometimes another
/// real sha, sometimes a nonsense revision.
fn sha() -> BoxedStrategy<String> {
    prop_oneof![
        6 => Just(SHAS[0].to_owned()),
        2 => proptest::sample::select(&SHAS[1..]).prop_map(str::to_owned),
        1 => "[a-z]{1,8}",
    ]
    .boxed()
}

fn seen(key: &str, subject: &str, revision: &str, facts: &[(&str, String)]) -> Option<Observation> {
    let facts: Vec<(&str, &str)> = facts.iter().map(|(k, v)| (*k, v.as_str())).collect();
    scenario::observation(key, subject, revision, &facts).ok()
}

/// An observation whose key is its subject (pull requests, reviews, threads, issues, triage).
fn own(key: &str, revision: &str, facts: &[(&str, String)]) -> Option<Observation> {
    seen(key, key, revision, facts)
}

type Seen = BoxedStrategy<Option<Observation>>;

fn pull() -> Seen {
    let status = value(&["open", "open", "open", "draft", "merged", "closed"]);
    let draft = value(&["false", "false", "true"]);
    let mergeable = value(&["behind", "dirty", "clean", "clean", "unknown"]);
    (1..3u64, sha(), status, draft, mergeable)
        .prop_map(|(n, sha, status, draft, mergeable)| {
            let facts = [
                ("status", status),
                ("draft", draft),
                ("mergeable_state", mergeable),
                ("head_sha", sha.clone()),
            ];
            own(&format!("pr:{REPO}#{n}"), &format!("git:{sha}"), &facts)
        })
        .boxed()
}

fn check() -> Seen {
    let verdict = value(&["passing", "passing", "failing", "pending"]);
    (
        sha(),
        value(&["lint", "build"]),
        verdict,
        value(&["completed", "queued"]),
        value(&["success", "failure", "none"]),
    )
        .prop_map(|(sha, name, verdict, status, conclusion)| {
            let key = format!("check:{REPO}@{sha}/{name}");
            let facts = [
                ("name", name),
                ("verdict", verdict),
                ("status", status),
                ("conclusion", conclusion),
            ];
            seen(
                &key,
                &format!("commit:{REPO}@{sha}"),
                &format!("git:{sha}"),
                &facts,
            )
        })
        .boxed()
}

fn status() -> Seen {
    (sha(), value(&["passing", "failing", "pending"]))
        .prop_map(|(sha, verdict)| {
            let facts = [("context", "ci".to_owned()), ("verdict", verdict)];
            seen(
                &format!("status:{REPO}@{sha}/ci"),
                &format!("commit:{REPO}@{sha}"),
                &format!("git:{sha}"),
                &facts,
            )
        })
        .boxed()
}

fn rollup() -> Seen {
    (
        1..3u64,
        sha(),
        value(&["passing", "failing", "pending", "none"]),
    )
        .prop_map(|(n, sha, verdict)| {
            let facts = [("verdict", verdict), ("head_sha", sha.clone())];
            seen(
                &format!("ci:{REPO}#{n}"),
                &format!("pr:{REPO}#{n}"),
                &format!("git:{sha}"),
                &facts,
            )
        })
        .boxed()
}

fn review() -> Seen {
    let state = value(&["approved", "approved", "changes_requested", "commented"]);
    (1..3u64, value(&["ana", "ben"]), state, sha())
        .prop_map(|(n, who, state, sha)| {
            let key = format!("review:{REPO}#{n}/{who}");
            own(
                &key,
                &format!("git:{sha}"),
                &[
                    ("reviewer", who),
                    ("state", state),
                    ("commit_id", sha.clone()),
                ],
            )
        })
        .boxed()
}

fn threads() -> Seen {
    (
        1..3u64,
        sha(),
        value(&["0", "2"]),
        value(&["true", "false"]),
    )
        .prop_map(|(n, sha, unresolved, complete)| {
            own(
                &format!("threads:{REPO}#{n}"),
                &format!("git:{sha}"),
                &[("unresolved", unresolved), ("complete", complete)],
            )
        })
        .boxed()
}

fn triage() -> Seen {
    let reproduction = value(&[
        "product_bug",
        "test_bug",
        "environment",
        "under_specified",
        "none",
    ]);
    let scope = value(&["src/a", "src/a,tests", "../x", ""]);
    (
        1..3u64,
        reproduction,
        value(&["true", "false"]),
        scope,
        value(&["cargo test", ""]),
    )
        .prop_map(|(n, reproduction, failing, scope, validation)| {
            let facts = [
                ("reproduction", reproduction),
                ("failing_test", failing),
                ("scope", scope),
                ("validation", validation),
            ];
            own(&format!("triage:{REPO}#{n}"), "content:t", &facts)
        })
        .boxed()
}

fn issue() -> Seen {
    (1..3u64, value(&["open", "closed"]))
        .prop_map(|(n, state)| {
            own(
                &format!("issue:{REPO}#{n}"),
                "content:i",
                &[("state", state)],
            )
        })
        .boxed()
}

fn junk() -> Seen {
    ("[a-z]{1,6}:[a-z/#@]{0,12}", "\\PC{0,8}")
        .prop_map(|(key, fact)| own(&key, "git:junk", &[("status", fact)]))
        .boxed()
}

/// Any observation the capability might see, nonsense included (`None` when the generated
/// ids are not valid ids at all).
fn observation() -> Seen {
    prop_oneof![3 => pull(), 3 => check(), 1 => status(), 1 => rollup(), 2 => review(), 1 => threads(), 2 => triage(), 1 => issue(), 1 => junk()].boxed()
}

/// Pull request #1 open, its linter passing and an approval, all at one head: the facts a
/// merge gate needs, so arbitrary sequences reach it often and then break it.
fn green_and_approved() -> Vec<Option<Observation>> {
    let head = SHAS[0];
    let at = format!("git:{head}");
    vec![
        own(
            "pr:acme/cli#1",
            &at,
            &[("status", "open".into()), ("head_sha", head.into())],
        ),
        seen(
            &format!("check:{REPO}@{head}/lint"),
            &format!("commit:{REPO}@{head}"),
            &at,
            &[("name", "lint".into()), ("verdict", "passing".into())],
        ),
        own(
            "review:acme/cli#1/ana",
            &at,
            &[("state", "approved".into()), ("commit_id", head.into())],
        ),
    ]
}

/// What happens next: observations, time, a re-judgement, or a person or agent acting.
#[derive(Debug, Clone)]
enum Move {
    Observe(Vec<Option<Observation>>),
    Advance(i64),
    Judge,
    /// The owner answers the n-th pending gate (yes or no).
    Answer(usize, bool),
    /// The agent claims the first todo offered to it.
    Claim,
    /// The agent releases every lease it holds.
    Release,
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    let one = prop_oneof![
        8 => proptest::collection::vec(observation(), 1..4).prop_map(Move::Observe),
        1 => Just(Move::Observe(green_and_approved())),
        2 => (1..180i64).prop_map(Move::Advance),
        1 => Just(Move::Judge),
        2 => (0..3usize, any::<bool>()).prop_map(|(n, yes)| Move::Answer(n, yes)),
        1 => Just(Move::Claim),
        1 => Just(Move::Release),
    ];
    proptest::collection::vec(one, 1..24)
}

fn capability() -> PrFix {
    PrFix::new(
        SourceId::new("prfix").expect("valid id"),
        PrFixConfig::default(),
    )
    .expect("valid config")
}

/// The setting command for a move that needs the current state, if any applies.
fn setting(state: &GoalState, mv: &Move, now: Timestamp) -> Option<ScenarioStep> {
    let alice = roster::agents()[0].clone();
    match mv {
        Move::Observe(batch) => Some(ScenarioStep::Observe(
            batch.iter().flatten().cloned().collect(),
        )),
        Move::Advance(minutes) => Some(ScenarioStep::Advance(Duration::minutes(*minutes))),
        Move::Judge => Some(ScenarioStep::Judge),
        Move::Answer(n, yes) => Some(ScenarioStep::owner_answers_pending(*n, *yes)),
        Move::Claim => {
            let todo = frontier(state, &alice, now).into_iter().next()?;
            Some(ScenarioStep::Command(
                Actor::Agent(alice.clone()),
                Command::Claim {
                    todo,
                    ttl: None,
                    workspace: Some(roster::worktree(&alice)),
                    grant_reason: None,
                },
            ))
        }
        Move::Release => {
            let (todo, epoch) = state.leased_todos().find_map(|t| {
                let lease = t.live_lease(now)?;
                (lease.holder == alice && lease.turn.is_none()).then(|| (t.id.clone(), lease.epoch))
            })?;
            Some(ScenarioStep::Command(
                Actor::Agent(alice),
                Command::Release { todo, epoch },
            ))
        }
    }
}

/// Commands a capability may propose; it must never settle, answer, record or close.
const ALLOWED: [&str; 9] = [
    "add_todo",
    "supersede",
    "defer",
    "block",
    "unblock",
    "open_gate",
    "withdraw_gate",
    "raise_obligation",
    "reassign",
];

/// The pull request `pr:<repo>#<n>` a line id belongs to, and the head short sha after `@`.
fn line_of(id: &str) -> Option<(&str, &str)> {
    let (line, rest) = id.rsplit_once('/')?;
    Some((line, rest.rsplit_once('@')?.1))
}

/// A naive, independent oracle for "green and approved at the exact head": only necessary
/// conditions, read straight from the raw facts.
fn green_and_approved_at_head(state: &GoalState, pull_key: &str) -> Option<String> {
    let facts = |key: &str| state.observations.values().find(|o| o.key.as_str() == key);
    let pull = facts(pull_key)?;
    let head = pull.revision.as_str().strip_prefix("git:")?.to_owned();
    let open = pull.fact("status") == Some("open") && pull.fact("draft") != Some("true");
    let thread = pull_key.strip_prefix("pr:")?;
    let (repo, _) = thread.rsplit_once('#')?;
    let ci: Vec<&Observation> = state
        .observations
        .values()
        .filter(|o| {
            o.subject.as_str() == format!("commit:{repo}@{head}")
                || (o.key.as_str() == format!("ci:{thread}") && o.revision == pull.revision)
        })
        .collect();
    let ci_green = !ci.is_empty()
        && ci
            .iter()
            .all(|o| !matches!(o.fact("verdict"), Some("failing" | "pending")));
    let reviews: Vec<&Observation> = state
        .observations
        .values()
        .filter(|o| o.key.as_str().starts_with(&format!("review:{thread}/")))
        .collect();
    let approved = reviews
        .iter()
        .any(|o| o.fact("state") == Some("approved") && o.fact("commit_id") == Some(head.as_str()));
    let no_request = reviews
        .iter()
        .all(|o| o.fact("state") != Some("changes_requested"));
    let branch_ok = !matches!(pull.fact("mergeable_state"), Some("behind" | "dirty"));
    (open && ci_green && approved && no_request && branch_ok).then_some(head)
}

type Checked = Result<(), TestCaseError>;

/// Every promise, checked after one step. The settings steps (a person or agent acting) are
/// not judged, so the promises about judgements are checked after judged steps only.
fn check_step(
    capability: &PrFix,
    state: &GoalState,
    record: &StepRecord,
    now: Timestamp,
) -> Checked {
    record.check_legal()?;
    only_plan_shaping_commands(record)?;
    merge_gate_only_when_green_and_approved_at_the_exact_head(state, record)?;
    nothing_proposed_merges(state)?;
    one_open_todo_per_line(state)?;
    if matches!(record.step, "observe" | "advance" | "judge") {
        every_required_decision_is_asked(state, now)?;
        closed_pull_requests_leave_nothing_running(state, now)?;
        judgements_converge(capability, state, now)?;
    }
    Ok(())
}

/// The capability never settles, answers, records evidence, claims or closes the goal.
fn only_plan_shaping_commands(record: &StepRecord) -> Checked {
    for proposal in &record.proposals {
        prop_assert!(
            ALLOWED.contains(&proposal.command),
            "only plan-shaping commands: {}",
            proposal.command
        );
    }
    Ok(())
}

/// A merge gate is opened only when CI is green and an approval is at the exact current head,
/// and a person owns it.
fn merge_gate_only_when_green_and_approved_at_the_exact_head(
    state: &GoalState,
    record: &StepRecord,
) -> Checked {
    for proposal in record.accepted() {
        let Command::OpenGate { gate } = &proposal.detail else {
            continue;
        };
        if !gate.id.as_str().contains("/merge-gate@") {
            continue;
        }
        let (line, at) = line_of(gate.id.as_str()).expect("a merge gate names its line and head");
        let head = green_and_approved_at_head(state, line);
        prop_assert!(
            head.as_deref().is_some_and(|h| h.starts_with(at)),
            "merge gate {} without green CI and approval at the head",
            gate.id
        );
        prop_assert!(
            matches!(gate.owner, Actor::Person(_)),
            "a person owns every merge gate"
        );
    }
    Ok(())
}

/// Nothing the capability proposes merges: the only work a merge decision unlocks is a
/// read-only monitor that watches for a person's merge.
fn nothing_proposed_merges(state: &GoalState) -> Checked {
    for todo in state.todos.values() {
        if todo
            .requires_decisions
            .iter()
            .any(|d| d.as_str().contains("/merge@"))
        {
            prop_assert!(
                matches!(todo.class, TodoClass::Monitor(_)) && todo.writes.is_none(),
                "{} may not write",
                todo.id
            );
        }
    }
    Ok(())
}

/// One route per issue and one open line of work per pull request.
fn one_open_todo_per_line(state: &GoalState) -> Checked {
    let mut open: BTreeMap<&str, u32> = BTreeMap::new();
    for todo in state
        .pending_todos()
        .filter(|t| matches!(t.created_by, Actor::Capability(_)))
    {
        if let Some((line, _)) = todo.id.as_str().rsplit_once('/') {
            *open.entry(line).or_default() += 1;
        }
    }
    prop_assert!(
        open.values().all(|n| *n <= 1),
        "one open todo per line: {open:?}"
    );
    Ok(())
}

/// No todo waits on a decision that no gate asks for.
fn every_required_decision_is_asked(state: &GoalState, now: Timestamp) -> Checked {
    for todo in state
        .pending_todos()
        .filter(|t| matches!(t.created_by, Actor::Capability(_)))
    {
        prop_assert!(
            !matches!(state.gate_hold(todo, now), GateHold::Missing { .. }),
            "{} waits on a decision no gate asks for",
            todo.id
        );
    }
    Ok(())
}

/// A merged or closed pull request leaves no open todo (unless an agent still holds it) and
/// no pending gate: no monitor keeps running.
fn closed_pull_requests_leave_nothing_running(state: &GoalState, now: Timestamp) -> Checked {
    let pulls = state
        .observations
        .values()
        .filter(|o| o.key.as_str().starts_with("pr:"));
    for pull in pulls.filter(|o| matches!(o.fact("status"), Some("merged" | "closed"))) {
        let prefix = format!("{}/", pull.key);
        let running = state
            .pending_todos()
            .any(|t| t.id.as_str().starts_with(&prefix) && t.lease.is_none());
        let asking = state
            .gates
            .values()
            .any(|g| g.id.as_str().starts_with(&prefix) && g.state_at(now).is_pending());
        prop_assert!(
            !running && !asking,
            "{} is closed but its line is still open",
            pull.key
        );
    }
    Ok(())
}

/// Judging the same state again proposes nothing: repeated judgements converge.
fn judgements_converge(capability: &PrFix, state: &GoalState, now: Timestamp) -> Checked {
    let again = capability.judge(state, &roster::agents()[0], now);
    prop_assert!(
        again.is_empty(),
        "a second judgement proposed {:?}",
        again.iter().map(|p| p.command.name()).collect::<Vec<_>>()
    );
    Ok(())
}

proptest! {
    #![proptest_config(loopx_kernel::testkit::config(512))]

    #[test]
    fn arbitrary_observations_keep_every_promise(moves in moves()) {
        let capability = capability();
        let spec = scenario::spec("props").expect("valid id");
        let mut scenario = Scenario::new(&capability, &spec).expect("valid spec");
        for mv in &moves {
            let Some(step) = setting(scenario.state(), mv, scenario.now()) else { continue };
            let record = scenario.step(step);
            check_step(&capability, scenario.state(), &record, scenario.now())?;
        }
    }
}
