//! Shared helpers for the scenario tables and the property tests: observations in this crate's
//! vocabulary, and the setting steps (people answering gates, agents finishing work).

#![allow(dead_code)] // each test binary uses its own subset

use loopx_capability_research::holdout_evidence;
use loopx_kernel::facts::research::{Finding, Hypothesis};
use loopx_kernel::testkit::roster;
use loopx_kernel::testkit::scenario::{self, ScenarioStep};
use loopx_kernel::{
    Actor, AgentId, Amendment, Amounts, Command, Continuation, GateAnswer, GateId, ObligationId,
    Observation, ObservationKey, PersonId, PlanChange, Settlement, TodoId, Transition, TurnId,
    Verdict, VerdictOutcome,
};

/// One step of a table: the testkit's step.
pub type Step = ScenarioStep;

/// Holdout evidence built for this finding key from the goal as it stands when the step runs
/// (what a validator does) and recorded by the provider; when it cannot be built, the
/// capability judges with no evidence (the transcript shows nothing new).
pub fn holdout_step(key: &'static str) -> Step {
    ScenarioStep::derived(move |state, _| {
        let key = ObservationKey::new(key).expect("test keys are valid");
        Some(match holdout_evidence(state, &key) {
            Ok(evidence) => ScenarioStep::Evidence(evidence),
            Err(_) => ScenarioStep::Judge,
        })
    })
}

/// A `hypothesis:<id>` observation about subject `research/<id>` at `revision`.
pub fn hypothesis(id: &str, owner: &str, depends_on: &str, revision: &str) -> Observation {
    let key = Hypothesis::key(id);
    let subject = format!("research/{id}");
    let mut facts = vec![
        (Hypothesis::owner, owner),
        (Hypothesis::statement, "the change lifts the metric"),
    ];
    if !depends_on.is_empty() {
        facts.push((Hypothesis::depends_on, depends_on));
    }
    scenario::observation(&key, &subject, revision, &facts).expect("test ids are valid")
}

/// A `finding:<id>` observation: `split`, `edge`, evaluated by `evaluator`, produced by the
/// hypothesis owner unless `producer` is given, with `lift`. The facts are texts named by the
/// kernel's schema, so a table may record values no reader accepts.
pub fn finding(
    id: &str,
    hypothesis: &str,
    split: &str,
    edge: &str,
    evaluator: &str,
    producer: Option<&str>,
    lift: &str,
) -> Observation {
    let key = Finding::key(id);
    let subject = format!("run/{id}");
    let mut facts = vec![
        (Finding::hypothesis, hypothesis),
        (Finding::split, split),
        (Finding::edge, edge),
        (Finding::evaluator, evaluator),
        (Finding::lift, lift),
    ];
    if let Some(producer) = producer {
        facts.push((Finding::producer, producer));
    }
    scenario::observation(&key, &subject, "r1", &facts).expect("test ids are valid")
}

/// Observations recorded by the provider in one step.
pub fn observe(observations: Vec<Observation>) -> Step {
    ScenarioStep::Observe(observations)
}

/// The capability judges again with nothing new.
pub fn judge() -> Step {
    ScenarioStep::Judge
}

/// The person `person` answers gate `gate`.
pub fn answer(person: &str, gate: &str, resolve: bool) -> Step {
    let answer = if resolve {
        GateAnswer::Resolve {
            answer: "yes".into(),
        }
    } else {
        GateAnswer::Reject {
            reason: "not convinced".into(),
        }
    };
    ScenarioStep::Command(
        Actor::Person(PersonId::new(person).expect("valid person")),
        Command::AnswerGate {
            gate: GateId::new(gate).expect("valid gate"),
            answer,
        },
    )
}

/// The goal owner answers gate `gate`.
pub fn owner_answers(gate: &str, resolve: bool) -> Step {
    answer(roster::owner().as_str(), gate, resolve)
}

/// `agent` discharges `obligation` by superseding `todo`.
pub fn discharge_by_superseding(agent: &str, obligation: &str, todo: &str) -> Step {
    ScenarioStep::Command(
        Actor::Agent(agent_id(agent)),
        Command::Discharge {
            obligation: ObligationId::new(obligation).expect("valid obligation"),
            changes: vec![PlanChange::Supersede {
                todo: TodoId::new(todo).expect("valid todo"),
                reason: "the line changed".into(),
                replacement: None,
            }],
        },
    )
}

/// `agent` claims `todo` (its first lease), runs turn `turn` and settles it as completed, with
/// an independent validator's passing verdict.
pub fn complete(agent: &str, todo: &str, turn: &str) -> Vec<Step> {
    let claim = Command::Claim {
        todo: TodoId::new(todo).expect("valid todo"),
        ttl: None,
        workspace: None,
        grant_reason: None,
    };
    let mut steps = vec![ScenarioStep::Command(Actor::Agent(agent_id(agent)), claim)];
    steps.extend(complete_held(agent, todo, turn, 1));
    steps
}

/// `agent`, holding `todo` under `epoch` (it was handed the todo), runs turn `turn` and
/// settles it as completed, with an independent validator's passing verdict.
pub fn complete_held(agent: &str, todo: &str, turn: &str, epoch: u64) -> Vec<Step> {
    let actor = Actor::Agent(agent_id(agent));
    let settlement = settlement(todo, turn, epoch, Actor::Validator(roster::validator()));
    vec![
        begin(agent, todo, turn, epoch),
        ScenarioStep::Command(actor, Command::SettleTurn(settlement)),
    ]
}

/// `agent` begins turn `turn` on `todo` under `epoch`.
pub fn begin(agent: &str, todo: &str, turn: &str, epoch: u64) -> Step {
    ScenarioStep::Command(
        Actor::Agent(agent_id(agent)),
        Command::BeginTurn {
            todo: TodoId::new(todo).expect("valid todo"),
            epoch,
            turn: TurnId::new(turn).expect("valid turn"),
            reserve: None,
        },
    )
}

/// A completing settlement of `turn` on `todo` under `epoch`, passed by `validator`, with no
/// evidence or observations.
pub fn settlement(todo: &str, turn: &str, epoch: u64, validator: Actor) -> Settlement {
    Settlement {
        todo: TodoId::new(todo).expect("valid todo"),
        epoch,
        turn: TurnId::new(turn).expect("valid turn"),
        verdict: Verdict {
            validator,
            outcome: VerdictOutcome::Passed,
            summary: "ran".into(),
            signature: None,
        },
        evidence: vec![],
        observations: vec![],
        transition: Transition::Complete {
            continuation: Continuation::GoalStillActive,
        },
        usage: Amounts::default(),
        failure: None,
    }
}

/// `agent` settles its turn `turn` on `todo` under `epoch`, validated by `validator`, with
/// the holdout evidence built for finding `finding` from the goal as it stands.
pub fn settle_with_holdout_evidence(
    agent: &'static str,
    todo: &'static str,
    turn: &'static str,
    epoch: u64,
    validator: Actor,
    finding: &'static str,
) -> Step {
    ScenarioStep::derived(move |state, _| {
        let key = ObservationKey::new(finding).expect("test keys are valid");
        let mut settled = settlement(todo, turn, epoch, validator.clone());
        settled.evidence = vec![holdout_evidence(state, &key).ok()?];
        Some(ScenarioStep::Command(
            Actor::Agent(agent_id(agent)),
            Command::SettleTurn(settled),
        ))
    })
}

/// The goal owner unregisters `agent`.
pub fn unregister(agent: &'static str) -> Step {
    ScenarioStep::derived(move |state, _| {
        Some(ScenarioStep::Command(
            Actor::Person(roster::owner()),
            Command::AmendGoal {
                expected_revision: state.goal_revision,
                amendments: vec![Amendment::UnregisterAgent {
                    agent: agent_id(agent),
                }],
            },
        ))
    })
}

/// An agent id from a test literal.
pub fn agent_id(agent: &str) -> AgentId {
    AgentId::new(agent).expect("valid agent")
}
