//! A study with two lines of work, each owned by its own agent and driven by its own engine over
//! one SQLite store, judged by the research capability: alice owns "the byte-level tokenizer
//! lifts accuracy" (h1), bob owns "doubling the context lifts accuracy" (h2).
//!
//! A dev-split lift leaves a hypothesis merely active: each owner is sent to run the holdout.
//! The holdout results are evaluated by an independent evaluator, which records holdout
//! evidence: h1 is supported and olivia is asked whether to promote it; h2 is refuted, which
//! leads to a retirement proposal (a gate for olivia, never a silent retirement) and a replan
//! for bob. Each agent's frontier is its own: alice waits on olivia, bob must replan.
//!
//! Run it with `cargo run -p loopx-examples --bin research`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use loopx_capability_research::{Research, ResearchConfig, Status, holdout_evidence, ledger};
use loopx_examples::{Judged, Judgement, Result, Story, StoryValidator, ensure};
use loopx_kernel::engine::Engine;
use loopx_kernel::facts::research::{Edge, Finding, Hypothesis};
use loopx_kernel::facts::{FactSchema, Finite, Split};
use loopx_kernel::seams::{Clock, Executor, TurnError, TurnReport, TurnRequest};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Decision, GoalId, GoalSpec, Limits,
    Observation, PersonId, Policy, Question, SourceId, Transition,
};
use loopx_provider::fact::FactBuilder;

/// The independent evaluator of holdout runs.
const EVALUATOR: &str = "eval-harness";

/// What the lab measures, by hypothesis: the dev lift and the holdout lift.
fn lifts(hypothesis: &str) -> Option<(f64, f64)> {
    match hypothesis {
        "h1" => Some((0.041, 0.028)),
        "h2" => Some((0.012, -0.009)),
        _ => None,
    }
}

fn observation<S: FactSchema>(
    key: &str,
    subject: &str,
    facts: &S,
    summary: String,
    now: loopx_kernel::Timestamp,
) -> std::result::Result<Observation, loopx_kernel::InvalidId> {
    FactBuilder::new(key, subject, "v1")
        .facts(facts)
        .summary(summary)
        .build(now)
}

/// The lab: runs a line's experiment (`experiment:<h>`, on dev, evaluated by its owner) or its
/// holdout run (`holdout:<h>`, evaluated by the independent evaluator) and reports the finding.
struct Lab {
    clock: Arc<dyn Clock>,
}

#[async_trait]
impl Executor for Lab {
    async fn run(&self, turn: &TurnRequest) -> std::result::Result<TurnReport, TurnError> {
        let failed = |e: &dyn std::fmt::Display| TurnError::Failed(format!("{}: {e}", turn.todo));
        let (kind, hypothesis) = turn
            .todo
            .as_str()
            .split_once(':')
            .ok_or_else(|| failed(&"not a line's todo"))?;
        let (dev, holdout) = lifts(hypothesis).ok_or_else(|| failed(&"no such experiment"))?;
        let (split, lift, evaluator) = match kind {
            "experiment" => (Split::Dev, dev, turn.agent.to_string()),
            "holdout" => (Split::Holdout, holdout, EVALUATOR.to_owned()),
            _ => return Err(failed(&"the lab runs experiments and holdouts only")),
        };
        let edge = if lift >= 0.0 {
            Edge::Supports
        } else {
            Edge::Refutes
        };
        let finding = format!("{hypothesis}-{split}");
        let summary = format!("{split} lift {lift:+} on {hypothesis}, evaluated by {evaluator}");
        let facts = Finding {
            hypothesis: hypothesis.to_owned(),
            split,
            edge,
            evaluator,
            producer: Some(turn.agent.to_string()),
            lift: Finite::new(lift),
        };
        let seen = observation(
            &Finding::key(&finding),
            &format!("run/{finding}"),
            &facts,
            summary.clone(),
            self.clock.now(),
        )
        .map_err(|e| failed(&e))?;
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            observations: vec![seen],
            usage: Amounts {
                tokens: 9_000,
                ..Amounts::ONE_TURN
            },
            summary,
            usage_problem: None,
        })
    }
}

/// The independent evaluator as the turns' validator: a finding must be reported; a holdout
/// finding is checked and its holdout evidence recorded with the settlement.
fn evaluate(turn: &Judged<'_>) -> std::result::Result<Judgement, String> {
    let finding = turn
        .report
        .observations
        .iter()
        .find(|o| o.key.as_str().starts_with("finding:"))
        .ok_or("the turn reported no finding")?;
    let mut judgement = Judgement::passed(format!("{} recorded", finding.key));
    if turn.turn.todo.as_str().starts_with("holdout:") {
        let state = turn.goal_after().map_err(|e| e.to_string())?;
        let evidence = holdout_evidence(&state, &finding.key).map_err(|e| e.to_string())?;
        judgement.evidence.push(evidence);
    }
    Ok(judgement)
}

fn spec(agents: &[&AgentId]) -> Result<GoalSpec> {
    Ok(GoalSpec {
        id: GoalId::new("tokenizer-study")?,
        objective: "which changes really lift accuracy?".into(),
        owner: PersonId::new("olivia")?,
        criteria: Vec::new(),
        agents: agents.iter().map(|a| (*a).clone()).collect(),
        budget: Limits {
            turns: Some(20),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: BTreeMap::new(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    })
}

/// Prints `agent`'s frontier: where each of its lines stands, and its decision.
fn frontier(story: &Story, agent: &AgentId) -> Result<Decision> {
    let state = story.state()?;
    let ledger = ledger(&state);
    for line in ledger.lines_of(agent) {
        story.note(&format!(
            "{agent}'s line {}: {:?}",
            line.facts.id, line.status
        ));
    }
    story.decide(agent)
}

fn asks_about(decision: &Decision, gate: &str) -> bool {
    let Decision::Ask { questions, .. } = decision else {
        return false;
    };
    questions
        .iter()
        .any(|q| matches!(q, Question::Gate { gate: g, .. } if g.as_str() == gate))
}

fn main() -> Result<()> {
    let alice = AgentId::new("alice")?;
    let bob = AgentId::new("bob")?;
    let story = Story::manual(spec(&[&alice, &bob])?, "2026-11-29T09:00")?;
    let research = Arc::new(Research::new(ResearchConfig::default())?);
    let evaluator = SourceId::new(EVALUATOR)?;
    let engine = |agent: &AgentId| {
        Engine::builder(
            agent.clone(),
            story.store(),
            story.clock(),
            Arc::new(Lab {
                clock: story.clock(),
            }),
            Arc::new(StoryValidator::new(evaluator.clone(), &story, evaluate)),
        )
        .capability(research.clone())
        .build()
    };
    let (alice_engine, bob_engine) = (engine(&alice), engine(&bob));

    story.say("the lab declares two hypotheses, one line of work per agent");
    let lab = Actor::Provider(SourceId::new("lab")?);
    for (id, owner, statement) in [
        ("h1", &alice, "the byte-level tokenizer lifts accuracy"),
        ("h2", &bob, "doubling the context lifts accuracy"),
    ] {
        let facts = Hypothesis {
            owner: owner.clone(),
            depends_on: None,
            statement: Some(statement.to_owned()),
        };
        let key = Hypothesis::key(id);
        let summary = format!("{id} ({owner}): {statement}");
        story.note(&summary);
        let declared = observation(
            &key,
            &format!("research/{id}"),
            &facts,
            summary,
            story.clock().now(),
        )?;
        story.submit(
            &lab,
            &Command::RecordObservation {
                observation: declared,
            },
        )?;
    }

    story.at("09:05")?;
    story.say("alice's engine: one step");
    story.step(&alice_engine)?;
    let h1 = ledger(&story.state()?).status("h1");
    let shown = h1.map_or_else(|| "undeclared".into(), |s| format!("{s:?}").to_lowercase());
    story.say(&format!("a dev lift alone supports nothing: h1 is {shown}"));
    ensure(h1 == Some(Status::Active), "a dev lift leaves h1 active")?;

    story.at("09:10")?;
    story.say("bob's engine: one step");
    story.step(&bob_engine)?;

    story.at("09:30")?;
    story.say("alice's engine runs until she has nothing to do");
    story.run(&alice_engine)?;
    story.at("09:40")?;
    story.say("bob's engine runs until he has nothing to do");
    story.run(&bob_engine)?;

    story.at("09:45")?;
    let state = story.state()?;
    let ledger = ledger(&state);
    ensure(
        ledger.status("h1") == Some(Status::Supported),
        "the independent holdout supports h1",
    )?;
    ensure(
        ledger.status("h2") == Some(Status::Refuted),
        "the independent holdout refutes h2",
    )?;
    story.say("each agent's frontier:");
    let for_alice = frontier(&story, &alice)?;
    let for_bob = frontier(&story, &bob)?;
    ensure(
        asks_about(&for_alice, "promote:h1") || matches!(for_alice, Decision::Wait { .. }),
        format!(
            "alice waits on olivia's promotion of h1, not {}",
            for_alice.kind()
        ),
    )?;
    ensure(
        matches!(for_bob, Decision::Replan { .. }),
        format!("bob must replan his refuted line, not {}", for_bob.kind()),
    )?;
    let retire = state
        .gates
        .values()
        .any(|g| g.id.as_str() == "retire:h2" && g.state_at(story.clock().now()).is_pending());
    ensure(retire, "retiring h2 is proposed to olivia, not done")?;
    story.say("olivia decides on promoting h1 and retiring h2; nothing is retired before she does");
    Ok(())
}
