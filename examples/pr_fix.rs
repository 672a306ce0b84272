//! A pull request's life, replayed from GitHub's own example webhook payloads (the provider's
//! test fixtures, read in place). Each delivery is signed with a secret made up here, as GitHub
//! signs it, and verified by the webhook endpoint before anything is parsed; the GitHub
//! provider records what it says, and CI about the exact head as evidence. The engine, with
//! the prfix capability, decides over a SQLite store in a temporary directory:
//!
//! a failing check run → a P0 CI fix the agent works on → a successful check at the same head
//! → evidence at that exact head → an approval → the merge gate for the maintainer → a push
//! that moves the head (the evidence goes stale, the gate is withdrawn) → green and approved
//! again → the maintainer answers → the merge closes the line → `terminal (accepted)`.
//!
//! Run it with `cargo run -p loopx-examples --bin pr-fix`.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use loopx_capability_prfix::{PrFix, PrFixConfig, ci_evidence};
use loopx_examples::{Result, Story, ensure};
use loopx_kernel::engine::{Engine, EngineOptions};
use loopx_kernel::facts::Fact;
use loopx_kernel::facts::github::{CheckRun, CiVerdict};
use loopx_kernel::seams::{
    Executor, Store, TurnError, TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Criterion, CriterionId, CriterionStatus, Decision,
    Duration, GateAnswer, GateId, GoalId, GoalSpec, Limits, Observation, ObservationKey, PersonId,
    Policy, ResumeCondition, SourceId, Subject, Transition, VerdictOutcome, Workspace,
};
use loopx_provider::github::webhook::WebhookVerifier;
use serde_json::{Value, json};

const PR: &str = "pr:Codertocat/Hello-World#2";
const CHECK: &str = "ci/Octocoders-linter";
/// The head every fixture of pull request #2 is at.
const HEAD: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
/// The head after the author's next push (no fixture has it: the payloads are edited to it).
const NEW_HEAD: &str = "5c7a9b1e0f2d4c6a8e1b3d5f7a9c0e2b4d6f8a1c";
/// The webhook's shared secret, made up for the story.
const SECRET: &str = "a-made-up-webhook-secret";

/// The webhook endpoint: verifies each delivery, then records it as the GitHub provider.
struct Endpoint {
    verifier: WebhookVerifier,
    github: Actor,
}

impl Endpoint {
    /// One delivery of `event` with `payload`, signed by GitHub's side of the shared secret.
    fn deliver(&self, story: &Story, event: &str, payload: &Value) -> Result<()> {
        let body = serde_json::to_vec(payload)?;
        let signature = WebhookVerifier::new(SECRET).sign(&body);
        let observation =
            self.verifier
                .ingest(event, Some(&signature), &body, story.clock().now())?;
        story.say(&format!(
            "webhook `{event}`, signature verified: {}",
            observation.summary
        ));
        let record = Command::RecordObservation {
            observation: observation.clone(),
        };
        let state = story.submit(&self.github, &record)?;
        // CI about the pull request's exact head becomes evidence, recorded by the provider.
        let is_ci = ["check:", "suite:", "status:"]
            .iter()
            .any(|p| observation.key.as_str().starts_with(p));
        let pull = state.observations.get(&ObservationKey::new(PR)?);
        if let (true, Some(pull)) = (is_ci, pull) {
            match ci_evidence(&observation, pull) {
                Ok(evidence) => {
                    story.note(&format!("evidence recorded: {}", evidence.summary));
                    story.submit(&self.github, &Command::RecordEvidence { evidence })?;
                }
                Err(why) => story.note(&format!("no evidence: {why}")),
            }
        }
        Ok(())
    }
}

/// GitHub's example payload `file` of `event`, from the provider's fixtures.
fn payload(event: &str, file: &str) -> Result<Value> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "loopx-provider",
        "tests",
        "fixtures",
        "github-webhooks",
        event,
        file,
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the fixture {event}/{file}: {e}"))?;
    Ok(serde_json::from_str(&text)?)
}

/// `payload` with the field at each JSON pointer replaced (a state no fixture shows); says so
/// on the timeline.
fn edited(story: &Story, mut payload: Value, edits: &[(&str, Value)]) -> Result<Value> {
    for (pointer, value) in edits {
        let field = payload
            .pointer_mut(pointer)
            .ok_or_else(|| format!("the payload has no field {pointer}"))?;
        *field = value.clone();
        story.say(&format!("(the payload is edited: {pointer} = {value})"));
    }
    Ok(payload)
}

/// The agent's turn on a CI fix: it reads the failing check from the goal, reproduces it
/// locally (clean: the runner flaked), re-requests the check run and sets the fix aside until
/// that check reports again.
struct Agent {
    store: Arc<dyn Store>,
}

#[async_trait]
impl Executor for Agent {
    async fn run(&self, turn: &TurnRequest) -> std::result::Result<TurnReport, TurnError> {
        let state = self
            .store
            .load(&turn.goal)
            .await
            .map_err(|e| TurnError::Failed(e.to_string()))?
            .ok_or_else(|| TurnError::Failed("the goal is gone".into()))?;
        let failing = state.observations.values().find(|o: &&Observation| {
            o.read_facts::<CheckRun>()
                .is_some_and(|check| check.verdict == Fact::Known(CiVerdict::Failing))
        });
        let Some(check) = failing else {
            return Err(TurnError::Failed(format!(
                "`{}`: nothing failing",
                turn.todo
            )));
        };
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::Defer {
                until: ResumeCondition::ObservationChanged {
                    key: check.key.clone(),
                },
            },
            observations: Vec::new(),
            usage: Amounts {
                tokens: 14_000,
                ..Amounts::ONE_TURN
            },
            summary: format!(
                "{}; the linter is clean locally, the runner flaked: re-requested the check",
                check.summary
            ),
            usage_problem: None,
        })
    }
}

/// The judge of a fix is CI at the pull request's head, not the turn: the validator grants
/// progress and leaves completion to the evidence.
struct CiJudges(SourceId);

#[async_trait]
impl Validator for CiJudges {
    fn actor(&self) -> Actor {
        Actor::Validator(self.0.clone())
    }

    async fn validate(
        &self,
        _turn: &TurnRequest,
        _report: &TurnReport,
    ) -> std::result::Result<Validation, TurnError> {
        Ok(Validation {
            outcome: VerdictOutcome::Progress,
            summary: "CI at the head decides whether the fix holds".into(),
            evidence: Vec::new(),
        })
    }
}

fn spec(agent: &AgentId) -> Result<GoalSpec> {
    Ok(GoalSpec {
        id: GoalId::new("hello-world-pr-2")?,
        objective: "get Codertocat/Hello-World#2 merged with the linter green at its head".into(),
        owner: PersonId::new("maintainer")?,
        criteria: vec![Criterion {
            id: CriterionId::new("linter-green")?,
            text: "the linter passes at the pull request's head".into(),
            check: CheckId::new(CHECK)?,
            subject: Subject::new(PR)?,
        }],
        agents: [agent.clone()].into(),
        budget: Limits {
            turns: Some(10),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: std::collections::BTreeMap::new(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    })
}

fn criterion(story: &Story) -> Result<CriterionStatus> {
    story
        .criteria()?
        .pop()
        .ok_or_else(|| "the goal has its criterion".into())
}

#[allow(clippy::too_many_lines)] // the story, in order
fn main() -> Result<()> {
    let agent = AgentId::new("agent-a")?;
    let story = Story::manual(spec(&agent)?, "2026-11-29T10:00")?;
    let endpoint = Endpoint {
        verifier: WebhookVerifier::new(SECRET),
        github: Actor::Provider(SourceId::new("github")?),
    };
    let config = PrFixConfig {
        required_checks: ["Octocoders-linter".to_owned()].into(),
        // Monitors poll rarely: the webhooks arrive first.
        monitor_cadence: Duration::minutes(6 * 60),
        ..PrFixConfig::default()
    };
    let engine = Engine::builder(
        agent.clone(),
        story.store(),
        story.clock(),
        Arc::new(Agent {
            store: story.store(),
        }),
        Arc::new(CiJudges(SourceId::new("github-checks")?)),
    )
    .capability(Arc::new(PrFix::new(SourceId::new("prfix")?, config)?))
    .options(EngineOptions {
        workspace: Some(Workspace {
            top_level: "checkouts/hello-world".into(),
            common_dir: "checkouts/hello-world/.git".into(),
        }),
        ..EngineOptions::default()
    })
    .build();

    story.say("goal: merge Codertocat/Hello-World#2 with the linter green at its head");
    let forged = serde_json::to_vec(&payload("pull_request", "opened.payload.json")?)?;
    let refused = endpoint.verifier.verify(
        Some(&WebhookVerifier::new("another-secret").sign(&forged)),
        &forged,
    );
    ensure(
        refused.is_err(),
        "a delivery signed with another secret is refused",
    )?;
    story.say("a delivery signed with another secret is refused before it is parsed");

    endpoint.deliver(
        &story,
        "pull_request",
        &payload("pull_request", "opened.payload.json")?,
    )?;
    story.run(&engine)?;

    story.at("10:04")?;
    let failed = payload("check_run", "completed.1.payload.json")?;
    endpoint.deliver(&story, "check_run", &failed)?;
    ensure(
        matches!(criterion(&story)?, CriterionStatus::Failing { .. }),
        "the failing check fails the criterion",
    )?;
    story.run(&engine)?;
    let fixed =
        story.state()?.todos.values().any(|t| {
            t.id.as_str().contains("/ci-fix@") && t.last_epoch > 0 && !t.status.is_closed()
        });
    ensure(fixed, "the agent worked on the P0 CI fix")?;

    story.at("10:12")?;
    let passed = payload("check_run", "completed.payload.json")?;
    endpoint.deliver(&story, "check_run", &passed)?;
    ensure(
        matches!(criterion(&story)?, CriterionStatus::Met { .. }),
        "a successful check at the head meets the criterion",
    )?;
    story.run(&engine)?;

    story.at("10:20")?;
    let approved = |sha: &str| -> Result<Value> {
        edited(
            &story,
            payload("pull_request_review", "submitted.payload.json")?,
            &[
                ("/review/state", json!("approved")),
                ("/review/commit_id", json!(sha)),
            ],
        )
    };
    endpoint.deliver(&story, "pull_request_review", &approved(HEAD)?)?;
    let asked = story.run(&engine)?;
    ensure(
        matches!(asked, Decision::Ask { .. }),
        "green and approved at the head asks the maintainer",
    )?;

    story.at("10:31")?;
    story.say("the author pushes another commit");
    let pushed = edited(
        &story,
        payload("pull_request", "synchronize.payload.json")?,
        &[("/pull_request/head/sha", json!(NEW_HEAD))],
    )?;
    endpoint.deliver(&story, "pull_request", &pushed)?;
    ensure(
        matches!(criterion(&story)?, CriterionStatus::Stale { .. }),
        "the push makes the evidence about the old head stale",
    )?;
    story.run(&engine)?;

    story.at("10:40")?;
    let green = edited(
        &story,
        payload("check_run", "completed.payload.json")?,
        &[("/check_run/head_sha", json!(NEW_HEAD))],
    )?;
    endpoint.deliver(&story, "check_run", &green)?;
    story.run(&engine)?;
    story.at("10:45")?;
    endpoint.deliver(&story, "pull_request_review", &approved(NEW_HEAD)?)?;
    let asked = story.run(&engine)?;
    let gate = match &asked {
        Decision::Ask { questions, .. } => questions.first().and_then(|q| match q {
            loopx_kernel::Question::Gate { gate, .. } => Some(gate.clone()),
            loopx_kernel::Question::Budget { .. } | loopx_kernel::Question::Overrun { .. } => None,
        }),
        _ => None,
    };
    let gate: GateId = gate.ok_or("the merge gate at the new head is asked")?;
    ensure(
        gate.as_str().contains(&NEW_HEAD[..12]),
        "the merge gate is about the new head",
    )?;

    story.at("11:02")?;
    story.say("the maintainer answers the merge gate, then merges on GitHub");
    let maintainer = Actor::Person(PersonId::new("maintainer")?);
    let answer = Command::AnswerGate {
        gate,
        answer: GateAnswer::Resolve {
            answer: "yes, merge it".into(),
        },
    };
    story.submit(&maintainer, &answer)?;
    story.decide(&agent)?;

    story.at("11:05")?;
    let merged = edited(
        &story,
        payload("pull_request", "closed.payload.json")?,
        &[
            ("/pull_request/merged", json!(true)),
            ("/pull_request/head/sha", json!(NEW_HEAD)),
        ],
    )?;
    endpoint.deliver(&story, "pull_request", &merged)?;
    story.run(&engine)?;
    story.say("the agent declares the goal closed: the fix is merged");
    let me = Actor::Agent(agent.clone());
    let closure = Command::DeclareClosure {
        reason: "the pull request is merged with the linter green at its head".into(),
    };
    story.submit(&me, &closure)?;
    story.criteria()?;
    match story.decide(&agent)? {
        Decision::Terminal { .. } => Ok(()),
        other => Err(format!("the story should end terminal, not {}", other.kind()).into()),
    }
}
