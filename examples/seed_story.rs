//! The seed's story, decided step by step on the embedded default store (SQLite, one file in a
//! temporary directory): a goal "add `--format json` to a CLI" with two acceptance criteria,
//! turns that commit, an independent validator whose passes become evidence at those commits, a
//! question for the maintainer while independent work continues, evidence going stale when a
//! newer commit is observed, a fresh executor that opens the store anew and re-derives the next
//! step from what is stored, and the goal ending `terminal (accepted)` once the maintainer
//! answers.
//!
//! Run it with `cargo run -p loopx-examples --bin seed-story` (add `-- --json` for the decisions
//! as JSON lines).

use loopx_kernel::submit;
use std::collections::BTreeMap;
use std::error::Error;

use loopx_examples::describe;
use loopx_kernel::seams::Store;
use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Continuation, Criterion, CriterionId,
    CriterionStatus, Decision, DecisionScope, Duration, EvidenceId, ExpiryPolicy, Fingerprint,
    GateAnswer, GateId, GateScope, GoalId, GoalSpec, GoalState, Limits, NewEvidence, NewGate,
    NewTodo, Observation, ObservationKey, OperationId, Outcome, PersonId, Policy, Revision,
    Settlement, SourceId, Subject, Timestamp, TodoId, Transition, TurnId, Verdict, VerdictOutcome,
    decide,
};
use loopx_store::{SqliteOptions, SqliteStore, StoreClock};
use tokio::runtime::{Builder, Runtime};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const REPO: &str = "repo:acme/cli";
const TEXT_CHECK: &str = "tests.text_output";
const JSON_CHECK: &str = "tests.json_schema";

/// The story's world: the store, the goal as last committed, the clock and who is who.
struct Story {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    runtime: Runtime,
    commits: u64,
    goal: GoalState,
    now: Timestamp,
    json: bool,
    maintainer: Actor,
    agent: AgentId,
    tests: Actor,
}

/// One bounded turn: what the executor changed and which checks the validator then ran.
struct Turn<'a> {
    todo: &'a str,
    id: &'a str,
    commit: &'a str,
    checks: &'a [&'a str],
    continuation: Continuation,
}

impl Story {
    fn new(json: bool) -> Result<Self> {
        let maintainer = PersonId::new("maintainer")?;
        let agent = AgentId::new("agent-a")?;
        let spec = GoalSpec {
            id: GoalId::new("cli-json-output")?,
            objective: "add --format json to the CLI without changing the default output".into(),
            owner: maintainer.clone(),
            criteria: vec![
                criterion(
                    "text-unchanged",
                    "default text output unchanged",
                    TEXT_CHECK,
                )?,
                criterion(
                    "json-schema-tested",
                    "the JSON schema has tests",
                    JSON_CHECK,
                )?,
            ],
            agents: [agent.clone()].into(),
            budget: Limits {
                turns: Some(20),
                tokens: Some(500_000),
                ..Limits::UNLIMITED
            },
            policy: Policy::default(),
            grants: BTreeMap::new(),
            identity: loopx_kernel::Identity::Declared,
            keys: Vec::new(),
            validators: std::collections::BTreeMap::new(),
            capability: None,
        };
        let now = clock("2026-11-29T10:02")?;
        let maintainer = Actor::Person(maintainer);
        // A store of its own, removed with the story; the story moves time by hand, so the
        // store is created with a test clock, which follows the times it is given.
        let dir = tempfile::tempdir()?;
        let options = SqliteOptions::default().clock(StoreClock::Test);
        let store = SqliteStore::create_with(dir.path().join("loopx.db"), options)?;
        let runtime = Builder::new_current_thread().enable_all().build()?;
        let goal_id = spec.id.clone();
        let created = runtime.block_on(submit(
            &store,
            &goal_id,
            &maintainer,
            now,
            &Command::CreateGoal { spec },
            &OperationId::new("create")?,
        ))?;
        Ok(Story {
            _dir: dir,
            store,
            runtime,
            commits: 1,
            goal: created.state,
            now,
            json,
            maintainer,
            agent,
            tests: Actor::Validator(SourceId::new("cargo-test")?),
        })
    }

    fn at(&mut self, when: &str) -> Result<()> {
        self.now = clock(when)?;
        Ok(())
    }

    fn me(&self) -> Actor {
        Actor::Agent(self.agent.clone())
    }

    fn say(&self, what: &str) {
        if !self.json {
            println!("{}  {what}", self.hhmm());
        }
    }

    fn hhmm(&self) -> String {
        self.now.to_string()[11..16].to_owned()
    }

    /// Commits a command as `actor` through the store; the goal is what the commit produced.
    fn run(&mut self, actor: &Actor, command: &Command) -> Result<()> {
        self.commits += 1;
        let operation = OperationId::new(format!("op-{}", self.commits))?;
        let goal = self.goal.spec.id.clone();
        let done = self.runtime.block_on(submit(
            &self.store,
            &goal,
            actor,
            self.now,
            command,
            &operation,
        ))?;
        self.goal = done.state;
        Ok(())
    }

    fn decide(&self) -> Decision {
        let decision = decide(&self.goal, &self.agent, self.now);
        if self.json {
            println!(
                "{}",
                serde_json::json!({ "at": self.now, "decision": decision })
            );
        } else {
            println!("{}  -> {}", self.hhmm(), describe(&decision));
        }
        decision
    }

    fn criteria(&self) {
        if self.json {
            return;
        }
        for (id, status) in self.goal.criteria_status(self.now) {
            let shown = match status {
                CriterionStatus::Met { evidence } => format!("met by {evidence}"),
                CriterionStatus::Stale { evidence, .. } => format!("stale ({evidence})"),
                CriterionStatus::Failing { evidence } => format!("failing ({evidence})"),
                CriterionStatus::NoEvidence => "no evidence".into(),
                CriterionStatus::UnregisteredValidator {
                    evidence,
                    produced_by,
                } => format!("ignored ({evidence} by {produced_by}, not registered)"),
            };
            println!("       criterion {id}: {shown}");
        }
    }

    /// Claim, begin, (the executor commits), observe the commit, validate, settle.
    fn turn(&mut self, turn: Turn<'_>) -> Result<()> {
        let todo = TodoId::new(turn.todo)?;
        let me = self.me();
        let claim = Command::Claim {
            todo: todo.clone(),
            ttl: Some(Duration::minutes(30)),
            workspace: None,
            grant_reason: None,
        };
        self.run(&me, &claim)?;
        let epoch = self.goal.todos[&todo].last_epoch;
        let id = TurnId::new(turn.id)?;
        let begin = Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: id.clone(),
            reserve: Some(Amounts {
                tokens: 30_000,
                ..Amounts::ONE_TURN
            }),
        };
        self.run(&me, &begin)?;
        let revision = Revision::new(format!("git:{}", turn.commit))?;
        let evidence = turn
            .checks
            .iter()
            .map(|check| self.passing(check, &revision))
            .collect::<Result<Vec<_>>>()?;
        let settlement = Settlement {
            todo,
            epoch,
            turn: id,
            verdict: Verdict {
                validator: self.tests.clone(),
                outcome: VerdictOutcome::Passed,
                summary: format!("cargo test passed at {}", turn.commit),
                signature: None,
            },
            evidence,
            observations: vec![head_observation(&revision, self.now)?],
            transition: Transition::Complete {
                continuation: turn.continuation,
            },
            usage: Amounts {
                tokens: 18_000,
                wall_ms: 420_000,
                ..Amounts::ONE_TURN
            },
            failure: None,
        };
        self.run(&me, &Command::SettleTurn(settlement))
    }

    fn passing(&self, check: &str, revision: &Revision) -> Result<NewEvidence> {
        Ok(NewEvidence {
            id: EvidenceId::new(format!("{check}@{revision}"))?,
            check: CheckId::new(check)?,
            subject: Subject::new(REPO)?,
            revision: revision.clone(),
            outcome: Outcome::Pass,
            summary: "cargo test passed".into(),
            observed_at: self.now,
            ttl: None,
            inputs: loopx_kernel::Lineage::default(),
        })
    }
}

fn clock(when: &str) -> Result<Timestamp> {
    Ok(Timestamp::parse(&format!("{when}:00Z"))?)
}

fn criterion(id: &str, text: &str, check: &str) -> Result<Criterion> {
    Ok(Criterion {
        id: CriterionId::new(id)?,
        text: text.into(),
        check: CheckId::new(check)?,
        subject: Subject::new(REPO)?,
    })
}

/// What the git provider would report: the repository's head moved to `revision`.
fn head_observation(revision: &Revision, now: Timestamp) -> Result<Observation> {
    Ok(Observation {
        key: ObservationKey::new("git-head:acme/cli")?,
        subject: Subject::new(REPO)?,
        revision: revision.clone(),
        fingerprint: Fingerprint::new(revision.as_str().replace(':', "-"))?,
        observed_at: now,
        summary: format!("head at {revision}"),
        facts: BTreeMap::new(),
        order: None,
        etag: None,
    })
}

fn plan(story: &mut Story) -> Result<()> {
    story.say("goal: add --format json; acceptance: text output unchanged, JSON schema tested");
    let me = story.me();
    let edit = NewTodo::advance(
        TodoId::new("change-output-layer")?,
        "change the output layer and add tests",
    );
    let mut help = NewTodo::advance(TodoId::new("update-help")?, "document --format in --help");
    help.depends_on = [edit.id.clone()].into();
    let mut readme = NewTodo::advance(TodoId::new("document-json")?, "document the JSON fields");
    readme.requires_decisions = [DecisionScope::new("api:error_code")?].into();
    for todo in [edit, help, readme] {
        story.run(&me, &Command::AddTodo { todo })?;
    }
    story.decide();
    Ok(())
}

fn first_day(story: &mut Story) -> Result<()> {
    story.at("2026-11-29T10:11")?;
    story.say("turn t1 edits, commits abc123; the validator runs the tests there");
    story.turn(Turn {
        todo: "change-output-layer",
        id: "t1",
        commit: "abc123",
        checks: &[TEXT_CHECK, JSON_CHECK],
        continuation: Continuation::GoalStillActive,
    })?;
    story.criteria();
    story.at("2026-11-29T10:14")?;
    story.say("ask the maintainer: is `error_code` acceptable as a stable field?");
    let gate = NewGate {
        id: GateId::new("error-code-name")?,
        question: "Is `error_code` acceptable as a stable field of the JSON output?".into(),
        owner: story.maintainer.clone(),
        scope: GateScope {
            decisions: [DecisionScope::new("api:error_code")?].into(),
            ..GateScope::default()
        },
        deadline: Some(clock("2026-11-30T17:00")?),
        on_expiry: ExpiryPolicy::KeepAsking,
    };
    let me = story.me();
    story.run(&me, &Command::OpenGate { gate })?;
    story.decide();
    story.at("2026-11-29T10:16")?;
    story.say("independent work goes on: turn t2 commits def456, tests re-run there");
    story.turn(Turn {
        todo: "update-help",
        id: "t2",
        commit: "def456",
        checks: &[TEXT_CHECK],
        continuation: Continuation::GoalStillActive,
    })?;
    story.criteria();
    story.say("the JSON-schema evidence was bound to abc123: stale now that def456 is the head");
    story.decide();
    Ok(())
}

fn next_day(story: &mut Story) -> Result<()> {
    story.at("2026-11-30T09:30")?;
    story.say("the window closed yesterday; a fresh executor opens the store and loads the goal");
    let fresh = SqliteStore::open(story.store.path())?;
    let goal_id = story.goal.spec.id.clone();
    let loaded = story
        .runtime
        .block_on(fresh.load(&goal_id))?
        .ok_or("the goal is in the store")?;
    if decide(&loaded, &story.agent, story.now) != decide(&story.goal, &story.agent, story.now) {
        return Err("the stored goal must decide exactly like the live one".into());
    }
    story.goal = loaded;
    story.store = fresh;
    story.decide();
    story.say("the maintainer answers: keep error_code");
    let answer = Command::AnswerGate {
        gate: GateId::new("error-code-name")?,
        answer: GateAnswer::Resolve {
            answer: "yes, keep error_code".into(),
        },
    };
    let maintainer = story.maintainer.clone();
    story.run(&maintainer, &answer)?;
    story.decide();
    story.at("2026-11-30T09:48")?;
    story.say("turn t3 documents the fields at 0a1b2c, both checks pass there; nothing follows");
    story.turn(Turn {
        todo: "document-json",
        id: "t3",
        commit: "0a1b2c",
        checks: &[TEXT_CHECK, JSON_CHECK],
        continuation: Continuation::NoFollowUp,
    })?;
    story.criteria();
    match story.decide() {
        Decision::Terminal { .. } => Ok(()),
        other => Err(format!("the story should end terminal, not {}", other.kind()).into()),
    }
}

fn main() -> Result<()> {
    let json = std::env::args().any(|a| a == "--json");
    let mut story = Story::new(json)?;
    plan(&mut story)?;
    first_day(&mut story)?;
    next_day(&mut story)?;
    let spent = story.goal.ledger.spent;
    story.say(&format!(
        "spent {} turns and {} tokens of the budget; {} events stored",
        spent.turns, spent.tokens, story.goal.revision,
    ));
    Ok(())
}
