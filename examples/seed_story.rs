//! The seed's story, decided step by step on the kernel alone: a goal "add `--format json` to a
//! CLI" with two acceptance criteria, a turn that edits and commits, an independent validator
//! whose pass becomes evidence at that commit, a question for the maintainer while independent
//! work continues, CI evidence going stale when a new commit lands, and the goal ending
//! `terminal (accepted)` once the maintainer answers.
//!
//! Run it with `cargo run -p loopx-examples --bin seed-story` (add `-- --json` for the decisions
//! as JSON lines).

use std::error::Error;

use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Continuation, Criterion, CriterionId, Decision,
    DecisionScope, Duration, EvidenceId, GateAnswer, GateId, GateScope, GoalId, GoalSpec,
    GoalState, Limits, NewEvidence, NewGate, NewTodo, Outcome, PersonId, Policy, Revision,
    Settlement, SourceId, Subject, Timestamp, TodoId, Transition, TurnId, Verdict, VerdictOutcome,
    decide,
};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Story {
    goal: GoalState,
    agent: AgentId,
    now: Timestamp,
    json: bool,
}

impl Story {
    fn at(&mut self, clock: &str) -> Result<()> {
        self.now = Timestamp::parse(&format!("2026-11-29T{clock}:00Z"))?;
        Ok(())
    }

    fn say(&self, what: &str) {
        if !self.json {
            println!("{}  {what}", &self.now.to_string()[11..16]);
        }
    }

    fn decide(&self) -> Decision {
        let decision = decide(&self.goal, &self.agent, self.now);
        if self.json {
            println!(
                "{}",
                serde_json::json!({ "at": self.now, "decision": decision })
            );
        } else {
            println!(
                "{}  -> {}",
                &self.now.to_string()[11..16],
                summary(&decision)
            );
        }
        decision
    }

    fn run(&mut self, actor: &Actor, command: Command) -> Result<()> {
        self.goal.handle(actor, self.now, &command)?;
        Ok(())
    }
}

fn summary(decision: &Decision) -> String {
    match decision {
        Decision::Continue(a) => format!("continue with `{}` ({})", a.todo, a.title),
        Decision::Wait { until, reasons } => format!(
            "wait until {} ({} reason(s))",
            until.map_or_else(|| "an event".to_owned(), |t| t.to_string()),
            reasons.len()
        ),
        Decision::Ask { questions, .. } => format!(
            "ask: {}",
            serde_json::to_string(&questions[0]).unwrap_or_default()
        ),
        Decision::Replan { reason } => format!(
            "replan: {}",
            serde_json::to_string(reason).unwrap_or_default()
        ),
        Decision::Repair { issue } => format!(
            "repair: {}",
            serde_json::to_string(issue).unwrap_or_default()
        ),
        Decision::Terminal { outcome } => format!("terminal ({outcome:?})").to_lowercase(),
    }
}

fn main() -> Result<()> {
    let json = std::env::args().any(|a| a == "--json");
    let maintainer = PersonId::new("maintainer")?;
    let owner = Actor::Person(maintainer.clone());
    let agent = AgentId::new("agent-a")?;
    let me = Actor::Agent(agent.clone());
    let tests = Actor::Validator(SourceId::new("cargo-test")?);
    let repo = Subject::new("repo:acme/cli")?;
    let spec = GoalSpec {
        id: GoalId::new("cli-json-output")?,
        objective: "add --format json to the CLI without changing the default output".into(),
        owner: maintainer.clone(),
        criteria: vec![
            Criterion {
                id: CriterionId::new("text-unchanged")?,
                text: "default text output unchanged".into(),
                check: CheckId::new("tests.text_output")?,
                subject: repo.clone(),
            },
            Criterion {
                id: CriterionId::new("json-schema-tested")?,
                text: "the JSON schema has tests".into(),
                check: CheckId::new("tests.json_schema")?,
                subject: repo.clone(),
            },
        ],
        agents: [agent.clone()].into(),
        budget: Limits {
            turns: Some(20),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: Default::default(),
    };
    let start = Timestamp::parse("2026-11-29T10:02:00Z")?;
    let mut story = Story {
        goal: GoalState::create(&owner, start, &spec)?,
        agent: agent.clone(),
        now: start,
        json,
    };

    story.say("goal created: add --format json; two acceptance criteria");
    let edit = TodoId::new("change-output-layer")?;
    let docs = TodoId::new("document-json")?;
    let mut document = NewTodo::advance(docs.clone(), "document the JSON output in the README");
    document.requires_decisions = [DecisionScope::new("api:error_code")?].into();
    story.run(
        &me,
        Command::AddTodo {
            todo: NewTodo::advance(edit.clone(), "change the output layer and add tests"),
        },
    )?;
    story.run(&me, Command::AddTodo { todo: document })?;
    story.decide();

    story.at("10:03")?;
    story.say("claim, begin turn t1 (budget reserved)");
    story.run(
        &me,
        Command::Claim {
            todo: edit.clone(),
            ttl: Some(Duration::minutes(30)),
            workspace: None,
            grant_reason: None,
        },
    )?;
    story.run(
        &me,
        Command::BeginTurn {
            todo: edit.clone(),
            epoch: 1,
            turn: TurnId::new("t1")?,
            reserve: None,
        },
    )?;
    story.decide();

    story.at("10:11")?;
    story.say("turn t1 committed abc123; the validator ran the tests there");
    let at_abc = |id: &str, check: &str| -> Result<NewEvidence> {
        Ok(NewEvidence {
            id: EvidenceId::new(id)?,
            check: CheckId::new(check)?,
            subject: repo.clone(),
            revision: Revision::new("git:abc123")?,
            outcome: Outcome::Pass,
            summary: "cargo test passed".into(),
            observed_at: Timestamp::parse("2026-11-29T10:11:00Z")?,
            ttl: None,
            inputs: Default::default(),
        })
    };
    story.run(
        &me,
        Command::SettleTurn(Settlement {
            todo: edit.clone(),
            epoch: 1,
            turn: TurnId::new("t1")?,
            verdict: Verdict {
                validator: tests.clone(),
                outcome: VerdictOutcome::Passed,
                summary: "42 tests passed".into(),
            },
            evidence: vec![
                at_abc("ev-text", "tests.text_output")?,
                at_abc("ev-json", "tests.json_schema")?,
            ],
            observations: vec![],
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            usage: Amounts {
                turns: 1,
                tokens: 18_000,
                ..Amounts::ZERO
            },
        }),
    )?;
    story.say("ask the maintainer: is `error_code` a stable field?");
    story.run(
        &me,
        Command::OpenGate {
            gate: NewGate {
                id: GateId::new("error-code-name")?,
                question: "Is `error_code` acceptable as a stable field of the JSON output?".into(),
                owner: owner.clone(),
                scope: GateScope {
                    decisions: [DecisionScope::new("api:error_code")?].into(),
                    ..GateScope::default()
                },
                deadline: Some(Timestamp::parse("2026-11-30T17:00:00Z")?),
                on_expiry: loopx_kernel::ExpiryPolicy::KeepAsking,
            },
        },
    )?;
    story.decide();

    story.at("10:17")?;
    story.say("the window closes; the next executor starts from nothing but the store");
    story.decide();

    story.now = Timestamp::parse("2026-11-30T09:30:00Z")?;
    story.say("next day: the maintainer answers");
    story.run(
        &owner,
        Command::AnswerGate {
            gate: GateId::new("error-code-name")?,
            answer: GateAnswer::Resolve {
                answer: "yes, keep error_code".into(),
            },
        },
    )?;
    story.decide();
    story.run(
        &me,
        Command::Claim {
            todo: docs.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        },
    )?;
    story.run(
        &me,
        Command::BeginTurn {
            todo: docs.clone(),
            epoch: 1,
            turn: TurnId::new("t2")?,
            reserve: None,
        },
    )?;
    story.run(
        &me,
        Command::SettleTurn(Settlement {
            todo: docs,
            epoch: 1,
            turn: TurnId::new("t2")?,
            verdict: Verdict {
                validator: tests,
                outcome: VerdictOutcome::Passed,
                summary: "docs build".into(),
            },
            evidence: vec![],
            observations: vec![],
            transition: Transition::Complete {
                continuation: Continuation::NoFollowUp,
            },
            usage: Amounts {
                turns: 1,
                tokens: 4_000,
                ..Amounts::ZERO
            },
        }),
    )?;
    story.say("docs done with no follow-up");
    let last = story.decide();
    if !matches!(last, Decision::Terminal { .. }) {
        return Err("the story should end terminal".into());
    }
    Ok(())
}
