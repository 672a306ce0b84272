//! Properties over arbitrary observation sequences, nonsense included: the capability never
//! panics, the kernel's invariants hold after every step, and the domain's promises hold:
//!
//! - `proposals_are_legal`: the kernel refuses none of the capability's proposals;
//! - `no_support_from_dev_alone`: a supported hypothesis always has a holdout finding that
//!   supports it, evaluated independently or confirmed by evidence;
//! - `no_silent_retirement`: a retired hypothesis always has a retirement gate that the
//!   capability opened and a person resolved, and the capability only opens one for a
//!   hypothesis that is refuted;
//! - `gaps_route_to_the_line_owner`: every replan obligation the capability raises is owned by
//!   the agent that owns the hypothesis it names (or by anyone, when that agent is unknown);
//! - `holdout_support_never_by_the_owner`: a supported hypothesis rests on a holdout finding
//!   evaluated by neither its producer nor the hypothesis's owner, or confirmed by evidence
//!   neither of them recorded; the capability never hands a holdout to the hypothesis's owner;
//! - `handoff_leaves_one_holder`: after every handoff the capability proposed, the todo (while
//!   open) has exactly one live holder, the receiver, under a newer epoch, and the old epoch is
//!   refused;
//! - `judgement_converges`: judging twice in a row, the second judgement proposes nothing.
//!
//! Agents claim, begin and settle turns (validated by a validator or by another agent) and are
//! unregistered, so that lines change hands and evidence by the owner turns up.

mod common;

use common::agent_id;
use loopx_capability_research::{
    Research, ResearchConfig, Status, Weight, holdout_evidence, ledger,
};
use loopx_kernel::testkit::roster;
use loopx_kernel::testkit::scenario::{self, Scenario, ScenarioStep, StepRecord};
use loopx_kernel::{
    Actor, AgentId, Amendment, Command, Duration, EvidenceId, GateStatus, GoalState, Observation,
    ObservationKey, Timestamp, TurnId,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Observe(Vec<Observation>),
    /// Holdout evidence for `finding:f<n>`, when it can be built.
    Evidence(u8),
    /// The goal owner answers the n-th pending gate.
    Answer(u8, bool),
    Advance(u16),
    Judge,
    /// Agent n claims the m-th open todo.
    Claim(u8, u8),
    /// Agent n begins a turn on a todo it holds.
    Begin(u8),
    /// The first turn in flight is settled, validated by agent n (or `ci-bot` for n = 3), with
    /// the holdout evidence of `finding:f<m>` when it can be built.
    Settle(u8, u8),
    /// The owner unregisters agent n.
    Unregister(u8),
}

const AGENTS: [&str; 3] = ["alice", "bob", "carol"];

fn agent_n(n: u8) -> AgentId {
    agent_id(AGENTS[usize::from(n) % AGENTS.len()])
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u8..=3).prop_map(|n| format!("hypothesis:h{n}")),
        (1u8..=5).prop_map(|n| format!("finding:f{n}")),
        Just("hypothesis:".to_owned()),
        Just("finding:a:b".to_owned()),
        Just("hypothesis:h1/x".to_owned()),
        Just("notes:h1".to_owned()),
    ]
}

fn value(samples: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(samples).prop_map(str::to_owned),
        1 => ".{0,12}",
    ]
}

fn fact() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        value(&["alice", "bob", "carol", "mallory", "", "not an id"])
            .prop_map(|v| ("owner".to_owned(), v)),
        value(&["h1", "h2", "h3", "h1,h2", "h9", ",", "h1,,h3", "bad id"])
            .prop_map(|v| ("depends_on".to_owned(), v)),
        value(&["h1", "h2", "h3", "h9", ""]).prop_map(|v| ("hypothesis".to_owned(), v)),
        value(&["dev", "holdout", "DEV", ""]).prop_map(|v| ("split".to_owned(), v)),
        value(&["supports", "refutes", "maybe"]).prop_map(|v| ("edge".to_owned(), v)),
        value(&["alice", "bob", "carol", "ci-bot"]).prop_map(|v| ("evaluator".to_owned(), v)),
        value(&["alice", "bob", ""]).prop_map(|v| ("producer".to_owned(), v)),
        value(&["0.05", "-0.03", "0", "nan", "inf", "1e400", "x"])
            .prop_map(|v| ("lift".to_owned(), v)),
        ("[a-z]{1,6}", ".{0,8}"),
    ]
}

/// Mostly well-formed hypotheses and findings, so that lines get supported, refuted and
/// retired, mixed with nonsense and with well-formed facts that one fact spoils.
fn observation() -> impl Strategy<Value = Observation> {
    prop_oneof![
        3 => well_formed_hypothesis(),
        5 => well_formed_finding(),
        2 => nonsense(),
        2 => (well_formed_finding(), fact()).prop_map(|(mut o, (k, v))| {
            o.facts.insert(k, v);
            o
        }),
    ]
}

fn well_formed_hypothesis() -> impl Strategy<Value = Observation> {
    (
        1u8..=3,
        proptest::sample::select(&["alice", "bob", "carol", "mallory"][..]),
        proptest::sample::select(&["", "h1", "h2", "h3", "h1,h2"][..]),
        proptest::sample::select(&["v1", "v2"][..]),
    )
        .prop_map(|(n, owner, depends_on, revision)| {
            let id = format!("h{n}");
            let depends_on = if depends_on.contains(&id) {
                ""
            } else {
                depends_on
            };
            common::hypothesis(&id, owner, depends_on, revision)
        })
}

fn well_formed_finding() -> impl Strategy<Value = Observation> {
    (
        1u8..=5,
        1u8..=3,
        proptest::sample::select(&["dev", "holdout"][..]),
        any::<bool>(),
        proptest::sample::select(&["alice", "bob", "carol", "ci-bot"][..]),
        proptest::option::of(proptest::sample::select(&["alice", "bob"][..])),
    )
        .prop_map(|(n, h, split, supports, evaluator, producer)| {
            let (edge, lift) = if supports {
                ("supports", "0.04")
            } else {
                ("refutes", "-0.02")
            };
            common::finding(
                &format!("f{n}"),
                &format!("h{h}"),
                split,
                edge,
                evaluator,
                producer,
                lift,
            )
        })
}

fn nonsense() -> impl Strategy<Value = Observation> {
    (
        key(),
        proptest::sample::select(&["research/h1", "research/h2", "run/x"][..]),
        proptest::sample::select(&["v1", "v2", "r1"][..]),
        proptest::collection::vec(fact(), 0..8),
    )
        .prop_map(|(key, subject, revision, facts)| {
            let facts: Vec<(&str, &str)> = facts
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            scenario::observation(&key, subject, revision, &facts).expect("generated ids are valid")
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(observation(), 1..4).prop_map(Op::Observe),
        2 => (1u8..=5).prop_map(Op::Evidence),
        2 => (0u8..4, any::<bool>()).prop_map(|(n, resolve)| Op::Answer(n, resolve)),
        1 => (1u16..600).prop_map(Op::Advance),
        1 => Just(Op::Judge),
        2 => (0u8..3, 0u8..6).prop_map(|(a, t)| Op::Claim(a, t)),
        2 => (0u8..3).prop_map(Op::Begin),
        2 => (0u8..4, 1u8..=5).prop_map(|(v, f)| Op::Settle(v, f)),
        1 => (0u8..3).prop_map(Op::Unregister),
    ]
}

/// The step an op stands for against the goal as it stands, if any.
fn step_for(state: &GoalState, op: Op) -> Option<ScenarioStep> {
    match op {
        Op::Observe(observations) => Some(ScenarioStep::Observe(observations)),
        Op::Evidence(n) => {
            let key = ObservationKey::new(format!("finding:f{n}")).expect("valid key");
            holdout_evidence(state, &key)
                .ok()
                .map(ScenarioStep::Evidence)
        }
        Op::Answer(n, resolve) => {
            Some(ScenarioStep::owner_answers_pending(usize::from(n), resolve))
        }
        Op::Advance(minutes) => Some(ScenarioStep::Advance(Duration::minutes(i64::from(minutes)))),
        Op::Judge => Some(ScenarioStep::Judge),
        Op::Claim(agent, n) => {
            let todo = state
                .todos
                .values()
                .filter(|t| !t.status.is_closed())
                .nth(usize::from(n))?;
            let claim = Command::Claim {
                todo: todo.id.clone(),
                ttl: None,
                workspace: None,
                grant_reason: None,
            };
            Some(ScenarioStep::Command(Actor::Agent(agent_n(agent)), claim))
        }
        Op::Begin(agent) => {
            let agent = agent_n(agent);
            let todo = state.todos.values().find(|t| {
                t.lease
                    .as_ref()
                    .is_some_and(|l| l.holder == agent && l.turn.is_none())
            })?;
            let begin = Command::BeginTurn {
                todo: todo.id.clone(),
                epoch: todo.last_epoch,
                turn: TurnId::new(format!("t{}", state.revision)).expect("valid turn"),
                reserve: None,
            };
            Some(ScenarioStep::Command(Actor::Agent(agent), begin))
        }
        Op::Settle(validator, finding) => {
            let (todo, lease, turn) = state.todos.values().find_map(|t| {
                let lease = t.lease.as_ref()?;
                Some((t, lease, lease.turn.as_ref()?))
            })?;
            let validator = if validator == 3 {
                Actor::Validator(roster::validator())
            } else {
                Actor::Agent(agent_n(validator))
            };
            let mut settled =
                common::settlement(todo.id.as_str(), turn.id.as_str(), lease.epoch, validator);
            let key = ObservationKey::new(format!("finding:f{finding}")).expect("valid key");
            settled.evidence.extend(holdout_evidence(state, &key).ok());
            Some(ScenarioStep::Command(
                Actor::Agent(lease.holder.clone()),
                Command::SettleTurn(settled),
            ))
        }
        Op::Unregister(agent) => Some(ScenarioStep::Command(
            Actor::Person(roster::owner()),
            Command::AmendGoal {
                expected_revision: state.goal_revision,
                amendments: vec![Amendment::UnregisterAgent {
                    agent: agent_n(agent),
                }],
            },
        )),
    }
}

fn holdout_support_never_by_the_owner(
    state: &GoalState,
    record: &StepRecord,
    now: Timestamp,
) -> Result<(), TestCaseError> {
    let ledger = ledger(state);
    for entry in &ledger.hypotheses {
        if entry.status != Status::Supported {
            continue;
        }
        let owner = entry.owner().as_str();
        // Read the raw facts and evidence, not the ledger's reading of them.
        let established_by_someone_else = entry.findings.iter().any(|f| {
            let raw = &state.observations[&f.key];
            let producer = raw.fact("producer").filter(|p| !p.is_empty()).unwrap_or(owner);
            let evaluator = raw.fact("evaluator").unwrap_or_default();
            let evidence = EvidenceId::new(format!("holdout:{}", f.facts.id))
                .ok()
                .and_then(|id| state.evidence.get(&id).map(|e| (id, e)));
            let confirmed_by_someone_else = evidence.is_some_and(|(id, e)| {
                !matches!(&e.produced_by, Actor::Agent(a) if a.as_str() == owner || a.as_str() == producer)
                    && state.freshness(&id, now).is_fresh()
            });
            raw.fact("split") == Some("holdout")
                && raw.fact("edge") == Some("supports")
                && ((evaluator != owner && evaluator != producer) || confirmed_by_someone_else)
        });
        prop_assert!(
            established_by_someone_else,
            "holdout_support_never_by_the_owner: {} is supported only by its owner's or producer's say",
            entry.facts.id
        );
    }
    for proposal in record.accepted() {
        if let Command::Handoff { todo, to, .. } = &proposal.detail
            && let Some(h) = todo.as_str().strip_prefix("holdout:")
        {
            prop_assert!(
                ledger.get(h).is_none_or(|entry| entry.owner() != to),
                "holdout_support_never_by_the_owner: the holdout of {} handed to its owner {}",
                h,
                to
            );
        }
    }
    Ok(())
}

fn handoff_leaves_one_holder(
    state: &GoalState,
    record: &StepRecord,
    now: Timestamp,
) -> Result<(), TestCaseError> {
    for proposal in record.accepted() {
        let Command::Handoff {
            todo, to, epoch, ..
        } = &proposal.detail
        else {
            continue;
        };
        let Some(after) = state.todos.get(todo) else {
            continue;
        };
        if after.status.is_closed() {
            continue;
        }
        let holder = after.live_lease(now).map(|l| (&l.holder, l.epoch));
        prop_assert!(
            holder.is_some_and(|(h, e)| h == to && e > *epoch),
            "handoff_leaves_one_holder: after handing {} to {} (from epoch {}) the lease is {:?}",
            todo,
            to,
            epoch,
            holder
        );
        let old_epoch_renewal = Command::Renew {
            todo: todo.clone(),
            epoch: *epoch,
            ttl: None,
        };
        for agent in AGENTS.map(agent_id) {
            prop_assert!(
                loopx_kernel::execute(
                    Some(state),
                    &Actor::Agent(agent.clone()),
                    now,
                    &old_epoch_renewal
                )
                .is_err(),
                "handoff_leaves_one_holder: {} may still renew {} under the old epoch {}",
                agent,
                todo,
                epoch
            );
        }
    }
    Ok(())
}

fn no_support_from_dev_alone(state: &GoalState) -> Result<(), TestCaseError> {
    for entry in ledger(state).hypotheses {
        if entry.status != Status::Supported {
            continue;
        }
        // Read the raw facts, not the ledger's reading of them.
        let holdout_support = entry.findings.iter().any(|f| {
            let raw = &state.observations[&f.key];
            raw.fact("split") == Some("holdout")
                && raw.fact("edge") == Some("supports")
                && matches!(f.weight, Weight::Independent | Weight::Confirmed)
        });
        prop_assert!(
            holdout_support,
            "no_support_from_dev_alone: {} is supported without a qualifying holdout finding",
            entry.facts.id
        );
    }
    Ok(())
}

fn no_silent_retirement(
    state: &GoalState,
    record: &StepRecord,
    capability: &Actor,
) -> Result<(), TestCaseError> {
    let ledger = ledger(state);
    for entry in &ledger.hypotheses {
        if entry.status != Status::Retired {
            continue;
        }
        let gate = state.gates.get(
            &format!("retire:{}", entry.facts.id)
                .as_str()
                .try_into()
                .expect("valid id"),
        );
        let proposed_and_decided = gate.is_some_and(|g| {
            &g.opened_by == capability
                && matches!(
                    &g.status,
                    GateStatus::Resolved {
                        by: Actor::Person(_),
                        ..
                    }
                )
        });
        prop_assert!(
            proposed_and_decided,
            "no_silent_retirement: {} retired without a proposed, person-resolved gate",
            entry.facts.id
        );
    }
    for proposal in record.accepted() {
        if let Command::OpenGate { gate } = &proposal.detail
            && let Some(h) = gate.id.as_str().strip_prefix("retire:")
        {
            prop_assert_eq!(
                ledger.status(h),
                Some(Status::Refuted),
                "no_silent_retirement: retirement proposed for {} while not refuted",
                h
            );
        }
    }
    Ok(())
}

fn gaps_route_to_the_line_owner(
    state: &GoalState,
    record: &StepRecord,
) -> Result<(), TestCaseError> {
    let ledger = ledger(state);
    for proposal in record.accepted() {
        if let Command::RaiseObligation { id, owner, .. } = &proposal.detail {
            let hypothesis = id.as_str().split(':').nth(2).unwrap_or_default();
            let line_owner = ledger
                .get(hypothesis)
                .map(|h| h.owner().clone())
                .filter(|o| state.is_registered(o));
            prop_assert_eq!(
                owner,
                &line_owner,
                "gaps_route_to_the_line_owner: obligation {} for {}",
                id,
                hypothesis
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn research_holds_its_promises(ops in proptest::collection::vec(op(), 1..24)) {
        let capability = Research::new(ResearchConfig::default()).expect("valid config");
        let actor = Actor::Capability(ResearchConfig::default().name);
        let spec = scenario::spec("research").expect("valid spec");
        let mut scenario = Scenario::new(&capability, &spec)
            .expect("the spec is accepted")
            .for_agent(agent_id("alice"));
        for op in ops {
            let Some(step) = step_for(scenario.state(), op) else { continue };
            let record = scenario.step(step);
            record.check_legal()?;
            no_support_from_dev_alone(scenario.state())?;
            no_silent_retirement(scenario.state(), &record, &actor)?;
            gaps_route_to_the_line_owner(scenario.state(), &record)?;
            holdout_support_never_by_the_owner(scenario.state(), &record, scenario.now())?;
            handoff_leaves_one_holder(scenario.state(), &record, scenario.now())?;
        }
        let first = scenario.step(ScenarioStep::Judge);
        first.check_legal()?;
        let second = scenario.step(ScenarioStep::Judge);
        prop_assert!(
            second.proposals.is_empty(),
            "judgement_converges: a second judgement proposed {:?}",
            second.proposals.iter().map(|p| p.command).collect::<Vec<_>>()
        );
    }
}
