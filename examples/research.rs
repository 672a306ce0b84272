//! Multi-agent research as the chapter tells it: one line of work, two agents in separate
//! operating-system processes over one embedded store (SQLite), and a person who promotes.
//!
//! Alice owns "the byte-level tokenizer lifts accuracy" (h1) and develops it: her dev-split
//! lift supports nothing yet. The holdout evaluation is one she may not run, so the research
//! capability hands it to bob, the evaluator, through the kernel's handoff: bob's process starts
//! from an empty context and gets `continue` with the handoff note — the next action, the stop
//! condition, the evidence it rests on — and nothing from alice's. Bob's holdout run is checked
//! by the lab's evaluation harness, which records holdout evidence citing the finding; the lab's
//! leaderboard cites that evidence in turn. Then the lab corrects the holdout finding (it was
//! scored on a split that leaked dev rows): the evidence built on the old finding goes stale,
//! and the leaderboard built on that evidence goes stale too. The corrected finding still
//! supports h1, evaluated independently; olivia promotes it, and alice writes it up.
//!
//! Run it with `cargo run -p loopx-examples --bin research`. It checks its own outcome and
//! exits non-zero when the story does not go as told.
//!
//! The binary plays two parts, chosen by its first argument: no argument is the story (the
//! lab and olivia, the person); `agent DIR NAME` is agent NAME's engine in a process of its
//! own, run until it has nothing to do now, over the store in DIR.

use std::path::Path;
use std::process::Command as Process;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use loopx_capability_research::{
    Research, ResearchConfig, Status, Weight, holdout_evidence, ledger,
};
use loopx_examples::{Judged, Judgement, Result, StoryValidator, describe, ensure, print_report};
use loopx_kernel::engine::{Engine, Until};
use loopx_kernel::facts::research::{Edge, Finding, Hypothesis};
use loopx_kernel::facts::{FactSchema, Finite, Split};
use loopx_kernel::seams::{Clock, Executor, Store, TurnError, TurnReport, TurnRequest};
use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Continuation, Decision, EvidenceId, Freshness,
    GateAnswer, GateId, GoalId, GoalSpec, GoalState, Lineage, NewEvidence, Observation,
    OperationId, Outcome, PersonId, SourceId, Transition, decide, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::fact::FactBuilder;
use loopx_store::SqliteStore;

const GOAL: &str = "tokenizer-study";
/// The lab's evaluation harness: the validator of every turn, independent of both agents.
const EVALUATOR: &str = "eval-harness";
const HOLDOUT: &str = "finding:h1-holdout";

fn main() {
    let mut args = std::env::args().skip(1);
    let outcome = match args.next().as_deref() {
        None => story(),
        Some("agent") => match (args.next(), args.next()) {
            (Some(dir), Some(name)) => agent(Path::new(&dir), &name),
            _ => Err("usage: research agent DIR NAME".into()),
        },
        Some(other) => Err(format!("unknown part `{other}`").into()),
    };
    if let Err(error) = outcome {
        eprintln!("research: {error}");
        std::process::exit(1);
    }
}

// ----- the lab and the person ---------------------------------------------------------------

/// The lab's side of the story: the goal, the hypothesis, the correction, the leaderboard and
/// olivia's answer, with the agents' processes run in between.
struct Lab {
    dir: tempfile::TempDir,
    store: SqliteStore,
    runtime: tokio::runtime::Runtime,
    goal: GoalId,
    operations: AtomicU64,
}

impl Lab {
    fn submit(&self, actor: &Actor, command: &Command) -> Result<GoalState> {
        let n = self.operations.fetch_add(1, Ordering::Relaxed);
        let operation = OperationId::new(format!("lab-{n}"))?;
        let done = self.runtime.block_on(submit(
            &self.store,
            &self.goal,
            actor,
            SystemClock.now(),
            command,
            &operation,
        ))?;
        Ok(done.state)
    }

    fn state(&self) -> Result<GoalState> {
        let state = self.runtime.block_on(self.store.load(&self.goal))?;
        Ok(state.ok_or("the goal is in the store")?)
    }

    fn observe(&self, observation: Observation) -> Result<GoalState> {
        let lab = Actor::Provider(SourceId::new("lab")?);
        self.submit(&lab, &Command::RecordObservation { observation })
    }

    /// Runs agent `name`'s engine in a process of its own until it has nothing to do now,
    /// showing what it printed; returns its last decision.
    fn run_agent(&self, name: &str) -> Result<Decision> {
        let output = Process::new(std::env::current_exe()?)
            .arg("agent")
            .arg(self.dir.path())
            .arg(name)
            .output()?;
        let text = String::from_utf8(output.stdout)?;
        if !output.status.success() {
            let errors = String::from_utf8_lossy(&output.stderr);
            return Err(
                format!("{name}'s process failed: {}\n{text}{errors}", output.status).into(),
            );
        }
        let mut lines: Vec<&str> = text.lines().collect();
        let last = lines.pop().ok_or("the agent's process printed nothing")?;
        for line in lines {
            println!("    | {line}");
        }
        Ok(serde_json::from_str(last)?)
    }
}

fn say(tag: &str, text: &str) {
    println!("{tag:>9}  {text}");
}

fn note(text: &str) {
    println!("           {text}");
}

fn story() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::create(dir.path().join("loopx.db"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let lab = Lab {
        dir,
        store,
        runtime,
        goal: GoalId::new(GOAL)?,
        operations: AtomicU64::new(0),
    };
    let alice = AgentId::new("alice")?;
    let bob = AgentId::new("bob")?;
    let olivia = PersonId::new("olivia")?;
    let spec = GoalSpec::builder(
        GOAL,
        "does the byte-level tokenizer lift accuracy?",
        "olivia",
    )
    .agent("alice")
    .agent("bob")
    .declared_identity()
    .build()?;
    lab.submit(
        &Actor::Person(olivia.clone()),
        &Command::CreateGoal { spec },
    )?;
    let h1 = Hypothesis {
        owner: alice.clone(),
        depends_on: None,
        statement: Some("the byte-level tokenizer lifts accuracy".into()),
    };
    lab.observe(observation(
        &Hypothesis::key("h1"),
        "research/h1",
        "v1",
        &h1,
        "h1 (alice)",
    )?)?;
    say(
        "plan",
        "olivia's study: hypothesis h1 (the byte-level tokenizer lifts accuracy), owned by alice; bob evaluates",
    );

    develop(&lab, &alice, &bob)?;
    let (evidence, leaderboard) = evaluate_holdout(&lab)?;
    correct_the_finding(&lab, &bob, &evidence, &leaderboard)?;
    promote_and_write_up(&lab, &olivia)
}

/// Alice's process develops h1; the holdout is handed to bob, who gets the note.
fn develop(lab: &Lab, alice: &AgentId, bob: &AgentId) -> Result<()> {
    say("develop", "alice's process starts from the store alone");
    let for_alice = lab.run_agent("alice")?;
    let state = lab.state()?;
    let status = ledger(&state).status("h1");
    say(
        "develop",
        &format!("a dev lift alone supports nothing: h1 is {}", name(status)),
    );
    ensure(
        status == Some(Status::Active),
        "a dev lift leaves h1 active",
    )?;
    let holdout = state
        .todos
        .get(&"holdout:h1".try_into()?)
        .ok_or("the holdout evaluation is planned")?;
    let holder = holdout.live_lease(SystemClock.now()).map(|l| &l.holder);
    ensure(holder == Some(bob), "the holdout is handed to bob")?;
    ensure(
        holdout.excluded_agents.contains(alice),
        "alice may never take her own holdout",
    )?;
    say(
        "handoff",
        &format!(
            "holdout:h1 handed to bob under epoch {}; alice is excluded from it",
            holdout.last_epoch
        ),
    );
    ensure(
        !matches!(&for_alice, Decision::Continue(a) if a.todo.as_str() == "holdout:h1"),
        "alice never receives the holdout",
    )?;
    note(&format!("alice: {}", describe(&for_alice)));
    let Decision::Continue(for_bob) = decide(&state, bob, SystemClock.now()) else {
        return Err("bob should continue with the holdout".into());
    };
    let handoff = for_bob
        .handoff
        .as_ref()
        .ok_or("bob's decision carries the handoff note")?;
    say(
        "handoff",
        &format!(
            "bob: continue with `{}`; the note is all he gets:",
            for_bob.todo
        ),
    );
    note(&format!("next action: {}", handoff.next_action));
    note(&format!("stop when:   {}", handoff.stop_condition));
    let rests_on: Vec<&str> = handoff.evidence.iter().map(EvidenceId::as_str).collect();
    note(&format!(
        "rests on:    {}",
        if rests_on.is_empty() {
            "no recorded evidence yet, only the dev findings above".to_owned()
        } else {
            rests_on.join(", ")
        }
    ));

    Ok(())
}

/// Bob's process evaluates the holdout; the harness records its evidence, and the lab's
/// leaderboard cites that evidence. Returns both.
fn evaluate_holdout(lab: &Lab) -> Result<(EvidenceId, EvidenceId)> {
    say(
        "evaluate",
        "bob's process, a fresh one, evaluates the holdout",
    );
    let after_bob = lab.run_agent("bob")?;
    let state = lab.state()?;
    let evidence = EvidenceId::new(format!(
        "holdout:{}",
        HOLDOUT.trim_start_matches("finding:")
    ))?;
    ensure(
        ledger(&state).status("h1") == Some(Status::Supported),
        "the independent holdout supports h1",
    )?;
    ensure(
        state.freshness(&evidence, SystemClock.now()).is_fresh(),
        "the holdout evidence is fresh",
    )?;
    say(
        "evaluate",
        &format!(
            "h1 is supported; {evidence} cites {HOLDOUT}; bob: {}",
            describe(&after_bob)
        ),
    );

    let leaderboard = EvidenceId::new("leaderboard:h1")?;
    lab.submit(
        &Actor::Provider(SourceId::new("lab")?),
        &Command::RecordEvidence {
            evidence: NewEvidence {
                id: leaderboard.clone(),
                check: CheckId::new("leaderboard")?,
                subject: "research/h1".try_into()?,
                revision: "v1".try_into()?,
                outcome: Outcome::Pass,
                summary: "h1 tops the lab's leaderboard on its holdout evidence".into(),
                observed_at: SystemClock.now(),
                ttl: None,
                inputs: Lineage {
                    evidence: vec![evidence.clone()],
                    observations: vec![],
                },
            },
        },
    )?;
    say(
        "lineage",
        &format!("the lab's {leaderboard} is derived from {evidence}"),
    );

    Ok((evidence, leaderboard))
}

/// The lab corrects the holdout finding: what was built on it goes stale, transitively.
fn correct_the_finding(
    lab: &Lab,
    bob: &AgentId,
    evidence: &EvidenceId,
    leaderboard: &EvidenceId,
) -> Result<()> {
    let corrected = finding(bob, Split::Holdout, 0.021, EVALUATOR)?;
    lab.observe(corrected)?;
    let state = lab.state()?;
    let now = SystemClock.now();
    say(
        "stale",
        "the lab corrects the holdout finding: its split leaked dev rows; re-scored, lift +0.021",
    );
    let (direct, derived) = (
        state.freshness(evidence, now),
        state.freshness(leaderboard, now),
    );
    note(&format!("{evidence}: {}", freshness(&direct)));
    note(&format!("{leaderboard}: {}", freshness(&derived)));
    ensure(
        matches!(direct, Freshness::ObservationChanged { .. }),
        "the evidence built on the old finding is stale",
    )?;
    ensure(
        matches!(derived, Freshness::InputStale { .. }),
        "what was derived from that evidence is stale too",
    )?;
    let ledger_now = ledger(&state);
    let weight = ledger_now
        .get("h1")
        .and_then(|h| h.findings.iter().find(|f| f.key.as_str() == HOLDOUT))
        .map(|f| f.weight);
    ensure(
        weight == Some(Weight::Independent) && ledger_now.status("h1") == Some(Status::Supported),
        "the corrected finding still supports h1, independently evaluated",
    )?;
    say(
        "stale",
        "h1 stays supported on the corrected finding alone, independently evaluated",
    );

    Ok(())
}

/// Olivia promotes h1 and alice's next process writes it up, which ends the study.
fn promote_and_write_up(lab: &Lab, olivia: &PersonId) -> Result<()> {
    lab.submit(
        &Actor::Person(olivia.clone()),
        &Command::AnswerGate {
            gate: GateId::new("promote:h1")?,
            answer: GateAnswer::Resolve {
                answer: "promote: the corrected holdout still lifts accuracy".into(),
            },
        },
    )?;
    say("promote", "olivia promotes h1");

    say("write-up", "alice's process writes h1 up");
    let last = lab.run_agent("alice")?;
    let state = lab.state()?;
    let writeup = state
        .todos
        .get(&"writeup:h1".try_into()?)
        .ok_or("the write-up is planned")?;
    ensure(writeup.status.name() == "done", "alice wrote h1 up")?;
    ensure(
        matches!(last, Decision::Terminal { .. }),
        format!("the study ends once h1 is written up, not {}", last.kind()),
    )?;
    say(
        "done",
        &format!("h1 promoted and written up; alice: {}", describe(&last)),
    );
    Ok(())
}

fn name(status: Option<Status>) -> &'static str {
    status.map_or("undeclared", Status::name)
}

fn freshness(freshness: &Freshness) -> String {
    match freshness {
        Freshness::Fresh => "fresh".into(),
        Freshness::Superseded { current } => format!("stale: the subject is now at {current}"),
        dirty @ Freshness::DirtyTree { .. } => {
            format!("stale: {}", loopx_kernel::words::freshness_words(dirty))
        }
        Freshness::Expired { at } => format!("stale: expired at {at}"),
        Freshness::InputStale { input } => format!("stale: its input {input} is stale"),
        Freshness::ObservationChanged { key } => {
            format!("stale: the finding it cites ({key}) has changed")
        }
    }
}

// ----- an agent's process -------------------------------------------------------------------

/// One agent's engine in a process of its own, over the store in `dir`, run until the agent
/// has nothing to do now; its last line is the decision, for the story to read.
fn agent(dir: &Path, name: &str) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("loopx.db"))?);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let agent = AgentId::new(name)?;
    let research = Research::new(ResearchConfig {
        evaluator: Some(AgentId::new("bob")?),
        ..ResearchConfig::default()
    })?;
    let validator = StoryValidator::over(
        SourceId::new(EVALUATOR)?,
        store.clone(),
        clock.clone(),
        evaluate,
    );
    let engine = Engine::builder(
        agent.clone(),
        store,
        clock.clone(),
        Arc::new(Bench),
        Arc::new(validator),
    )
    .capability(Arc::new(research))
    .build();
    let goal = GoalId::new(GOAL)?;
    let last = runtime.block_on(engine.run(&goal, Until::Idle, |report| {
        print_report(&agent, clock.now(), report);
    }))?;
    println!("{}", serde_json::to_string(&last.decision)?);
    Ok(())
}

/// The agents' workbench: a line's experiment (on dev, evaluated by the agent that ran it),
/// its holdout run (scored by the lab's evaluation harness) or its write-up.
struct Bench;

#[async_trait]
impl Executor for Bench {
    async fn run(&self, turn: &TurnRequest) -> std::result::Result<TurnReport, TurnError> {
        let failed = |e: &dyn std::fmt::Display| TurnError::Failed(format!("{}: {e}", turn.todo));
        let mut continuation = Continuation::GoalStillActive;
        let (seen, summary) = match turn.todo.as_str() {
            "experiment:h1" => {
                let evaluator = turn.agent.to_string();
                let seen = finding(&turn.agent, Split::Dev, 0.041, &evaluator);
                (
                    vec![seen.map_err(|e| failed(&e))?],
                    "dev lift +0.041".to_owned(),
                )
            }
            "holdout:h1" => {
                let seen = finding(&turn.agent, Split::Holdout, 0.028, EVALUATOR);
                let summary = format!("holdout lift +0.028, scored by {EVALUATOR}");
                (vec![seen.map_err(|e| failed(&e))?], summary)
            }
            "writeup:h1" => {
                // The write-up ends the study: nothing follows it.
                continuation = Continuation::NoFollowUp;
                (vec![], "the write-up of h1".to_owned())
            }
            _ => return Err(failed(&"not a step of h1's line")),
        };
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::Complete { continuation },
            observations: seen,
            usage: Amounts {
                tokens: 9_000,
                ..Amounts::ONE_TURN
            },
            summary,
            usage_problem: None,
        })
    }
}

/// The lab's evaluation harness as the turns' validator: an experiment or holdout run must
/// report its finding, and a holdout finding's evidence is recorded with the settlement.
fn evaluate(turn: &Judged<'_>) -> std::result::Result<Judgement, String> {
    if turn.turn.todo.as_str().starts_with("writeup:") {
        return Ok(Judgement::passed("write-up delivered"));
    }
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

/// Hypothesis h1's finding on `split`, produced by `producer` and evaluated by `evaluator`.
fn finding(
    producer: &AgentId,
    split: Split,
    lift: f64,
    evaluator: &str,
) -> std::result::Result<Observation, loopx_kernel::InvalidId> {
    let edge = if lift >= 0.0 {
        Edge::Supports
    } else {
        Edge::Refutes
    };
    let facts = Finding {
        hypothesis: "h1".into(),
        split,
        edge,
        evaluator: evaluator.to_owned(),
        producer: Some(producer.to_string()),
        lift: Finite::new(lift),
    };
    let id = format!("h1-{split}");
    let summary = format!("{split} lift {lift:+} on h1, evaluated by {evaluator}");
    observation(
        &Finding::key(&id),
        &format!("run/{id}"),
        "v1",
        &facts,
        &summary,
    )
}

fn observation<S: FactSchema>(
    key: &str,
    subject: &str,
    revision: &str,
    facts: &S,
    summary: &str,
) -> std::result::Result<Observation, loopx_kernel::InvalidId> {
    FactBuilder::new(key, subject, revision)
        .facts(facts)
        .summary(summary)
        .build(SystemClock.now())
}
