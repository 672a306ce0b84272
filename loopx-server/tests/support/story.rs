//! The seed's story (`examples/seed_story.rs`) on a signed goal, for the board's tests: a goal
//! "add `--format json`" with two criteria, turns that commit and are validated there, a gate
//! for the maintainer while independent work goes on, evidence going stale at a newer commit,
//! and the goal accepted once the maintainer answered. The story stops at three moments the
//! board is looked at: the gate open, evidence stale, accepted.

use std::collections::BTreeMap;
use std::sync::Arc;

use loopx_kernel::prelude::*;
use loopx_kernel::{
    Actor, CheckId, Command, Continuation, Criterion, CriterionId, DecisionScope, Duration,
    EvidenceId, ExpiryPolicy, Fingerprint, GateAnswer, GateId, GateScope, Identity, Lineage,
    NewEvidence, NewGate, Observation, ObservationKey, Outcome, RegisteredKey, Revision, SecretKey,
    Settlement, Signer, Subject, Transition, TurnId, Verdict, VerdictOutcome, sign_verdict,
};
use loopx_server::mcp::{Acting, Tokens};
use loopx_store::MemoryStore;

pub const GOAL: &str = "cli-json-output";
pub const GATE: &str = "error-code-name";
/// The maintainer's bearer token, who owns the gate.
pub const MAINTAINER_TOKEN: &str = "maintainer-token-7f3a9c1e5b2d8f4a6c0e";
/// A reviewer's bearer token: a person who owns no gate.
pub const REVIEWER_TOKEN: &str = "reviewer-token-91c2d4e6f8a0b2c4d6e8";
/// The agent's bearer token: not a person's, so it never signs in to the inbox.
pub const AGENT_TOKEN: &str = "agent-token-0e4c8a2f6b1d9e3a7c5f";
const REPO: &str = "repo:acme/cli";
const TEXT_CHECK: &str = "tests.text_output";
const JSON_CHECK: &str = "tests.json_schema";

/// The story's world: the store, its manual clock, and the keys of who is who.
pub struct Story {
    pub store: Arc<dyn Store>,
    pub clock: Arc<ManualClock>,
    goal: GoalId,
    maintainer: (Actor, Arc<SecretKey>),
    agent: (Actor, Arc<SecretKey>),
    tests: (Actor, Arc<SecretKey>),
}

fn at(when: &str) -> Timestamp {
    Timestamp::parse(&format!("{when}:00Z")).expect("a time")
}

fn id<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse().expect("a valid id")
}

fn actor(who: Actor, seed: u8) -> (Actor, Arc<SecretKey>) {
    (who, Arc::new(SecretKey::from_seed([seed; 32])))
}

impl Story {
    /// The goal created and planned: three todos, the last one waiting on a decision.
    pub async fn planned() -> Story {
        Story::planned_on(Arc::new(MemoryStore::with_test_clock())).await
    }

    /// [`Story::planned`] in `store` (empty, on a test clock).
    pub async fn planned_on(empty: Arc<dyn Store>) -> Story {
        let clock = Arc::new(ManualClock::new(at("2026-11-29T10:02")));
        let story = Story {
            store: empty,
            clock,
            goal: id(GOAL),
            maintainer: actor(Actor::Person(id("maintainer")), 1),
            agent: actor(Actor::Agent(id("agent-a")), 2),
            tests: actor(Actor::Validator(id("cargo-test")), 3),
        };
        story.create().await;
        story.plan().await;
        story
    }

    /// Moment one: turn t1 committed abc123 and passed there; the gate is open.
    pub async fn gate_open() -> Story {
        Story::gate_open_on(Arc::new(MemoryStore::with_test_clock())).await
    }

    /// [`Story::gate_open`] in `store` (empty, on a test clock).
    pub async fn gate_open_on(empty: Arc<dyn Store>) -> Story {
        let story = Story::planned_on(empty).await;
        story.set("2026-11-29T10:11");
        story
            .turn(
                "change-output-layer",
                "t1",
                "abc123",
                &[TEXT_CHECK, JSON_CHECK],
                Continuation::GoalStillActive,
            )
            .await;
        story.set("2026-11-29T10:14");
        story.open_gate().await;
        story
    }

    /// Moment two: turn t2 committed def456, where only the text check ran: the JSON-schema
    /// evidence, shown at abc123, is stale.
    pub async fn stale() -> Story {
        Story::stale_on(Arc::new(MemoryStore::with_test_clock())).await
    }

    /// [`Story::stale`] in `store` (empty, on a test clock).
    pub async fn stale_on(empty: Arc<dyn Store>) -> Story {
        let story = Story::gate_open_on(empty).await;
        story.to_stale().await;
        story
    }

    /// From moment one to moment two.
    pub async fn to_stale(&self) {
        self.set("2026-11-29T10:16");
        self.turn(
            "update-help",
            "t2",
            "def456",
            &[TEXT_CHECK],
            Continuation::GoalStillActive,
        )
        .await;
        self.set("2026-11-30T09:30");
    }

    /// The maintainer answers the gate (as the inbox would, signed with their key).
    pub async fn answer(&self) {
        let command = Command::AnswerGate {
            gate: id(GATE),
            answer: GateAnswer::Resolve {
                answer: "yes, keep error_code".into(),
            },
        };
        self.run(&self.maintainer, &command).await;
    }

    /// After the answer, moment three: turn t3 documents the fields at 0a1b2c, both checks pass
    /// there, and nothing follows: the goal is accepted.
    pub async fn finish(&self) {
        self.set("2026-11-30T09:48");
        self.turn(
            "document-json",
            "t3",
            "0a1b2c",
            &[TEXT_CHECK, JSON_CHECK],
            Continuation::NoFollowUp,
        )
        .await;
    }

    /// The tokens of the maintainer (who owns the gate), of a reviewer (who owns none) and of
    /// the agent (who works at `/mcp`), each signing with their own key.
    pub fn tokens(&self) -> Tokens {
        let reviewer = actor(Actor::Person(id("reviewer")), 4);
        Tokens::new()
            .with(
                MAINTAINER_TOKEN,
                Acting::signed(self.maintainer.0.clone(), self.maintainer.1.clone()),
            )
            .and_then(|t| t.with(REVIEWER_TOKEN, Acting::signed(reviewer.0, reviewer.1)))
            .and_then(|t| {
                t.with(
                    AGENT_TOKEN,
                    Acting::signed(self.agent.0.clone(), self.agent.1.clone()),
                )
            })
            .expect("strong tokens, one per actor")
    }

    /// The goal as the store holds it.
    pub async fn state(&self) -> GoalState {
        self.store
            .load(&self.goal)
            .await
            .expect("the store answers")
            .expect("the goal")
    }

    fn set(&self, when: &str) {
        self.clock.set(at(when));
    }

    async fn run(&self, (who, key): &(Actor, Arc<SecretKey>), command: &Command) {
        self.store
            .goal(&self.goal)
            .signed_by(&**key)
            .submit(who, self.clock.now(), command)
            .await
            .unwrap_or_else(|e| panic!("{} is accepted: {e}", command.name()));
    }

    async fn create(&self) {
        let criterion = |cid: &str, text: &str, check: &str| Criterion {
            id: id::<CriterionId>(cid),
            text: text.into(),
            check: id::<CheckId>(check),
            subject: id::<Subject>(REPO),
        };
        let mut spec = GoalSpec::builder(
            GOAL,
            "add --format json to the CLI without changing the default output",
            "maintainer",
        )
        .agent("agent-a")
        .build()
        .expect("a valid spec");
        spec.criteria = vec![
            criterion(
                "text-unchanged",
                "default text output unchanged",
                TEXT_CHECK,
            ),
            criterion(
                "json-schema-tested",
                "the JSON schema has tests",
                JSON_CHECK,
            ),
        ];
        spec.budget = Limits {
            turns: Some(20),
            tokens: Some(500_000),
            ..Limits::UNLIMITED
        };
        spec.identity = Identity::Signed;
        spec.keys = [&self.maintainer, &self.agent, &self.tests]
            .iter()
            .map(|(who, key)| RegisteredKey {
                actor: who.clone(),
                key: key.public_key(),
            })
            .collect();
        spec.validators = [TEXT_CHECK, JSON_CHECK]
            .iter()
            .map(|check| (id::<CheckId>(check), [self.tests.0.clone()].into()))
            .collect();
        self.run(&self.maintainer, &Command::CreateGoal { spec })
            .await;
    }

    async fn plan(&self) {
        let edit = NewTodo::advance(
            id::<TodoId>("change-output-layer"),
            "change the output layer and add tests",
        );
        let mut help = NewTodo::advance(id::<TodoId>("update-help"), "document --format in --help");
        help.depends_on = [edit.id.clone()].into();
        let mut readme =
            NewTodo::advance(id::<TodoId>("document-json"), "document the JSON fields");
        readme.requires_decisions = [id::<DecisionScope>("api:error_code")].into();
        for todo in [edit, help, readme] {
            self.run(&self.agent, &Command::AddTodo { todo }).await;
        }
    }

    async fn open_gate(&self) {
        let gate = NewGate {
            id: id::<GateId>(GATE),
            question: "Is `error_code` acceptable as a stable field of the JSON output?".into(),
            owner: self.maintainer.0.clone(),
            scope: GateScope {
                decisions: [id::<DecisionScope>("api:error_code")].into(),
                ..GateScope::default()
            },
            deadline: Some(at("2026-11-30T17:00")),
            on_expiry: ExpiryPolicy::KeepAsking,
        };
        self.run(&self.agent, &Command::OpenGate { gate }).await;
    }

    /// Claim, begin, (the executor commits), validate at the commit, settle.
    async fn turn(
        &self,
        todo: &str,
        turn: &str,
        commit: &str,
        checks: &[&str],
        continuation: Continuation,
    ) {
        let todo = id::<TodoId>(todo);
        let claim = Command::Claim {
            todo: todo.clone(),
            ttl: Some(Duration::minutes(30)),
            workspace: None,
            grant_reason: None,
        };
        self.run(&self.agent, &claim).await;
        let epoch = self.state().await.todos[&todo].last_epoch;
        let turn = id::<TurnId>(turn);
        let begin = Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: Some(Amounts {
                tokens: 30_000,
                ..Amounts::ONE_TURN
            }),
        };
        self.run(&self.agent, &begin).await;
        let revision = id::<Revision>(&format!("git:{commit}"));
        let now = self.clock.now();
        let evidence: Vec<NewEvidence> = checks
            .iter()
            .map(|check| NewEvidence {
                id: id::<EvidenceId>(&format!("{check}@{revision}")),
                check: id::<CheckId>(check),
                subject: id::<Subject>(REPO),
                revision: revision.clone(),
                outcome: Outcome::Pass,
                summary: "cargo test passed".into(),
                observed_at: now,
                ttl: None,
                inputs: Lineage::default(),
            })
            .collect();
        let verdict = Verdict {
            validator: self.tests.0.clone(),
            outcome: VerdictOutcome::Passed,
            summary: format!("cargo test passed at {commit}"),
            signature: None,
        };
        let verdict = sign_verdict(
            &*self.tests.1,
            &self.goal,
            &todo,
            &turn,
            epoch,
            verdict,
            &evidence,
        );
        let observation = Observation {
            key: id::<ObservationKey>("git-head:acme/cli"),
            subject: id::<Subject>(REPO),
            revision: revision.clone(),
            fingerprint: id::<Fingerprint>(&format!("git-{commit}")),
            observed_at: now,
            summary: format!("head at {revision}"),
            facts: BTreeMap::new(),
            order: None,
            etag: None,
        };
        let settlement = Settlement {
            todo,
            epoch,
            turn,
            verdict,
            evidence,
            observations: vec![observation],
            transition: Transition::Complete { continuation },
            usage: Amounts {
                tokens: 18_000,
                wall_ms: 420_000,
                ..Amounts::ONE_TURN
            },
            failure: None,
        };
        self.run(&self.agent, &Command::SettleTurn(settlement))
            .await;
    }
}
