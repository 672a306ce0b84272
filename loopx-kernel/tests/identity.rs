//! Nothing enters a signed goal on anyone's word: every command is verified against the keys
//! its owner registered, before anything else, through the one write path. Over the memory
//! store; the property at the end generates who signs what.

use loopx_kernel::prelude::*;
use loopx_kernel::{
    Amendment, Identity, IdentityMode, OperationId, PublicKey, SecretKey, Signature, Signer,
    SubmitError,
};
use loopx_store::MemoryStore;
use proptest::prelude::*;

fn start() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a valid instant")
}

fn key(seed: u8) -> SecretKey {
    SecretKey::from_seed([seed; 32])
}

const OWNER: u8 = 1;
const AGENT: u8 = 2;
const STRANGER: u8 = 3;

fn owner() -> Actor {
    Actor::Person("maintainer".parse().expect("a valid id"))
}

fn agent() -> Actor {
    Actor::Agent("agent-a".parse().expect("a valid id"))
}

fn spec(goal: &str) -> GoalSpec {
    GoalSpec::builder(goal, "add --format json to the CLI", "maintainer")
        .agent("agent-a")
        .owner_key(key(OWNER).public_key())
        .build()
        .expect("valid ids")
}

fn add(todo: &str) -> Command {
    Command::AddTodo {
        todo: NewTodo::advance(todo.parse().expect("a valid id"), "change the output layer"),
    }
}

fn register(actor: Actor, key: PublicKey, revision: u64) -> Command {
    Command::AmendGoal {
        expected_revision: revision,
        amendments: vec![Amendment::RegisterKey { actor, key }],
    }
}

fn code(result: &Result<loopx_kernel::Submitted, SubmitError>) -> &'static str {
    match result {
        Err(SubmitError::Refused(refusal)) => refusal.code(),
        Ok(_) => "accepted",
        Err(_) => "store error",
    }
}

/// A signer that signs whatever it is asked with one key, but claims another's public key:
/// what a forger holding only its own key can do.
struct Forger(SecretKey, PublicKey);

impl Signer for Forger {
    fn public_key(&self) -> PublicKey {
        self.1
    }
    fn sign(&self, message: &[u8]) -> Signature {
        self.0.sign(message)
    }
}

/// A signer that hands out one recorded signature, whatever it is asked to sign: a signature
/// replayed from elsewhere.
struct Replay(PublicKey, Signature);

impl Signer for Replay {
    fn public_key(&self) -> PublicKey {
        self.0
    }
    fn sign(&self, _: &[u8]) -> Signature {
        self.1
    }
}

#[tokio::test]
async fn a_signed_goal_takes_only_commands_its_registered_keys_signed() {
    let store = MemoryStore::new();
    let spec = spec("json-output");
    let goal = store.goal(&spec.id);
    let owner_key = key(OWNER);

    // Created only under the owner's key.
    let unsigned = goal.create(&spec, start()).await;
    assert_eq!(code(&unsigned), "signature_missing");
    let stranger = key(STRANGER);
    let forged = goal
        .clone()
        .signed_by(&stranger)
        .create(&spec, start())
        .await;
    assert_eq!(code(&forged), "signature_invalid");
    assert!(store.load(&spec.id).await.expect("readable").is_none());
    let created = goal
        .clone()
        .signed_by(&owner_key)
        .create(&spec, start())
        .await;
    assert_eq!(code(&created), "accepted");

    // The agent has no key yet: whatever it signs with is unregistered.
    let agent_key = key(AGENT);
    let as_agent = goal.clone().signed_by(&agent_key);
    assert_eq!(
        code(&as_agent.submit(&agent(), start(), &add("t1")).await),
        "key_unregistered"
    );
    // Nobody else may register it: only the owner amends, and only with the owner's key.
    let register_agent = register(agent(), key(AGENT).public_key(), 0);
    assert_eq!(
        code(&as_agent.submit(&owner(), start(), &register_agent).await),
        "signature_invalid"
    );
    let signed = goal.clone().signed_by(&owner_key);
    assert_eq!(
        code(&signed.submit(&owner(), start(), &register_agent).await),
        "accepted"
    );
    let revision = goal.state().await.expect("a goal").revision;

    // Registered now; a forger claiming the agent's key still cannot sign as it.
    let impostor = Forger(key(STRANGER), key(AGENT).public_key());
    let forged = goal.clone().signed_by(&impostor);
    assert_eq!(
        code(&forged.submit(&agent(), start(), &add("t1")).await),
        "signature_invalid"
    );
    assert_eq!(
        code(&goal.submit(&agent(), start(), &add("t1")).await),
        "signature_missing"
    );
    assert_eq!(goal.state().await.expect("a goal").revision, revision);
    assert_eq!(
        code(&as_agent.submit(&agent(), start(), &add("t1")).await),
        "accepted"
    );
}

#[tokio::test]
async fn a_valid_signature_replayed_on_another_goal_or_operation_verifies_nowhere() {
    let store = MemoryStore::new();
    let owner_key = key(OWNER);
    for goal in ["one", "two"] {
        let spec = spec(goal);
        store
            .goal(&spec.id)
            .signed_by(&owner_key)
            .create(&spec, start())
            .await
            .expect("created");
    }
    let op = |name: &str| name.parse::<OperationId>().expect("a valid id");
    let command = add("t1");
    let digest = loopx_kernel::write::digest(&owner(), &command);
    let one = "one".parse().expect("a valid id");
    let signature = owner_key.sign(&loopx_kernel::identity::command_message(
        &one,
        &op("op-1"),
        &digest,
    ));
    let replay = Replay(owner_key.public_key(), signature);
    let two = "two".parse().expect("a valid id");
    for (goal, operation, expected) in [
        (&two, "op-1", "signature_invalid"),
        (&one, "op-2", "signature_invalid"),
        (&one, "op-1", "accepted"),
    ] {
        let result = store
            .goal(goal)
            .signed_by(&replay)
            .submit_operation(&owner(), start(), &command, &op(operation))
            .await;
        assert_eq!(code(&result), expected, "{goal} {operation}");
    }
}

#[tokio::test]
async fn a_revoked_key_signs_nothing_more_and_the_owner_keeps_one() {
    let store = MemoryStore::new();
    let spec = spec("g");
    let owner_key = key(OWNER);
    let goal = store.goal(&spec.id).signed_by(&owner_key);
    goal.create(&spec, start()).await.expect("created");
    let revoke = |actor: Actor, key: PublicKey, revision| Command::AmendGoal {
        expected_revision: revision,
        amendments: vec![Amendment::RevokeKey { actor, key }],
    };
    // The owner's only key cannot go: the goal could never be amended again.
    let last = goal
        .submit(
            &owner(),
            start(),
            &revoke(owner(), owner_key.public_key(), 0),
        )
        .await;
    assert_eq!(code(&last), "invalid_input");
    let new_owner_key = key(9);
    let rotate = Command::AmendGoal {
        expected_revision: 0,
        amendments: vec![
            Amendment::RegisterKey {
                actor: owner(),
                key: new_owner_key.public_key(),
            },
            Amendment::RevokeKey {
                actor: owner(),
                key: owner_key.public_key(),
            },
        ],
    };
    assert_eq!(
        code(&goal.submit(&owner(), start(), &rotate).await),
        "accepted"
    );
    assert_eq!(
        code(&goal.submit(&owner(), start(), &add("t1")).await),
        "signature_invalid"
    );
    let rotated = store.goal(&spec.id).signed_by(&new_owner_key);
    assert_eq!(
        code(&rotated.submit(&owner(), start(), &add("t1")).await),
        "accepted"
    );
}

#[tokio::test]
async fn declared_identity_is_explicit_and_said() {
    let store = MemoryStore::new();
    let declared = GoalSpec::builder("experiment", "try it", "maintainer")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("valid ids");
    assert_eq!(declared.identity_mode(), IdentityMode::Declared);
    let goal = store.goal(&declared.id);
    goal.create(&declared, start())
        .await
        .expect("created unsigned");
    assert_eq!(
        code(&goal.submit(&agent(), start(), &add("t1")).await),
        "accepted"
    );
    // A spec that says nothing about identity is signed, and refused without the owner's key.
    let json = serde_json::json!({
        "id": "signed-by-default", "objective": "o", "owner": "maintainer",
        "criteria": [], "agents": ["agent-a"],
    });
    let implicit: GoalSpec = serde_json::from_value(json).expect("a spec");
    assert_eq!(implicit.identity, Identity::Signed);
    let refused = store.goal(&implicit.id).create(&implicit, start()).await;
    assert_eq!(code(&refused), "key_unregistered");
    // The handle's signer becomes the owner's key of a spec that registers none.
    let owner_key = key(OWNER);
    let created = store
        .goal(&implicit.id)
        .signed_by(&owner_key)
        .create(&implicit, start())
        .await
        .expect("created");
    assert_eq!(created.state.spec.identity_mode(), IdentityMode::Signed);
    assert_eq!(
        created.state.spec.keys_of(&owner()).collect::<Vec<_>>(),
        [&key(OWNER).public_key()]
    );
}

/// Who signs a command in the property below.
#[derive(Debug, Clone, Copy)]
enum Signing {
    Registered,
    Unsigned,
    OtherKey,
    ReplayedFromAnotherOperation,
}

fn signing() -> impl Strategy<Value = Signing> {
    prop_oneof![
        Just(Signing::Registered),
        Just(Signing::Unsigned),
        Just(Signing::OtherKey),
        Just(Signing::ReplayedFromAnotherOperation),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// However commands are signed, exactly the ones signed by the actor's registered key over
    /// their own goal, operation and command take effect; every other one is refused with its
    /// code and leaves the goal as it was.
    #[test]
    fn only_commands_signed_by_a_registered_key_take_effect(
        steps in proptest::collection::vec((signing(), any::<bool>()), 1..12),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        runtime.block_on(async {
            let store = MemoryStore::new();
            let spec = spec("g");
            let goal = store.goal(&spec.id);
            let owner_key = key(OWNER);
            goal.clone().signed_by(&owner_key).create(&spec, start()).await.expect("created");
            goal.clone()
                .signed_by(&owner_key)
                .submit(&owner(), start(), &register(agent(), key(AGENT).public_key(), 0))
                .await
                .expect("registered");
            for (n, (signing, as_owner)) in steps.into_iter().enumerate() {
                let (actor, actor_key) =
                    if as_owner { (owner(), key(OWNER)) } else { (agent(), key(AGENT)) };
                let command = add(&format!("t{n}"));
                let operation: OperationId = format!("op-{n}").parse().expect("a valid id");
                let before = goal.state().await.expect("a goal");
                let digest = loopx_kernel::write::digest(&actor, &command);
                let elsewhere: OperationId = format!("op-other-{n}").parse().expect("a valid id");
                let replayed = actor_key.sign(&loopx_kernel::identity::command_message(
                    &spec.id, &elsewhere, &digest,
                ));
                let replay = Replay(actor_key.public_key(), replayed);
                let other = key(STRANGER);
                let handle = match signing {
                    Signing::Registered => goal.clone().signed_by(&actor_key),
                    Signing::Unsigned => goal.clone(),
                    Signing::OtherKey => goal.clone().signed_by(&other),
                    Signing::ReplayedFromAnotherOperation => goal.clone().signed_by(&replay),
                };
                let result = handle.submit_operation(&actor, start(), &command, &operation).await;
                let expected = match signing {
                    Signing::Registered => "accepted",
                    Signing::Unsigned => "signature_missing",
                    Signing::OtherKey | Signing::ReplayedFromAnotherOperation => "signature_invalid",
                };
                prop_assert_eq!(code(&result), expected);
                let after = goal.state().await.expect("a goal");
                if expected == "accepted" {
                    prop_assert_eq!(after.revision, before.revision + 1);
                } else {
                    prop_assert_eq!(after, before);
                    prop_assert!(store.receipt(&spec.id, &operation).await.expect("readable").is_none());
                }
            }
            Ok(())
        })?;
    }
}

/// The engine signs its validator's verdict with the keyring's signer for the validator: with
/// it the turn settles and its evidence meets the criterion; without it the signed goal refuses
/// the settlement (`verdict_unsigned`), nothing is charged, and the criterion stays unmet.
#[tokio::test]
async fn the_engine_signs_its_validators_verdict_with_the_validators_key() {
    use loopx_kernel::engine::{Engine, TurnOutcome};
    use loopx_kernel::seams::Validation;
    use loopx_kernel::{CriterionStatus, Keyring, ManualClock, NewEvidence, Outcome};
    use std::sync::Arc;

    const VALIDATOR: u8 = 4;
    let ci = Actor::Validator("ci".parse().expect("a valid id"));
    let mut spec = GoalSpec::builder("g", "add --format json to the CLI", "maintainer")
        .agent("agent-a")
        .owner_key(key(OWNER).public_key())
        .key(agent(), key(AGENT).public_key())
        .key(ci.clone(), key(VALIDATOR).public_key())
        .validator("tests", ci.clone())
        .build()
        .expect("valid ids");
    spec.criteria.push(
        loopx_kernel::Criterion::new("tested", "the JSON output has tests", "tests", "repo")
            .expect("valid ids"),
    );
    let run = |with_validator_key: bool| {
        let spec = spec.clone();
        async move {
            let store = Arc::new(MemoryStore::new());
            let owner_key = key(OWNER);
            let goal = store.goal(&spec.id).signed_by(&owner_key);
            goal.create(&spec, start()).await.expect("created");
            let todo = NewTodo::advance("edit".parse().expect("a valid id"), "write the tests");
            goal.submit(&owner(), start(), &Command::AddTodo { todo })
                .await
                .expect("added");
            let executor = loopx_kernel::executor_fn(|_| async {
                Ok(loopx_kernel::seams::TurnReport::complete("tests written"))
            });
            let validator = loopx_kernel::validator_fn("ci", |turn, _| async move {
                let evidence = NewEvidence {
                    id: format!("{}.tests", turn.turn).parse().expect("a valid id"),
                    check: "tests".parse().expect("a valid id"),
                    subject: "repo".parse().expect("a valid id"),
                    revision: "r1".parse().expect("a valid id"),
                    outcome: Outcome::Pass,
                    summary: "tests pass".into(),
                    observed_at: start(),
                    ttl: None,
                    inputs: loopx_kernel::Lineage::default(),
                };
                Ok(Validation::passed("tests pass").with_evidence([evidence]))
            })
            .expect("a valid id");
            let mut keyring = Keyring::new().with(agent(), Arc::new(key(AGENT)));
            if with_validator_key {
                keyring = keyring.with(
                    Actor::Validator("ci".parse().expect("a valid id")),
                    Arc::new(key(VALIDATOR)),
                );
            }
            let engine = Engine::builder(
                "agent-a".parse().expect("a valid id"),
                store.clone(),
                Arc::new(ManualClock::new(start())),
                executor,
                validator,
            )
            .keyring(keyring)
            .build();
            let report = engine.step(&spec.id).await.expect("a step");
            let state = store.goal(&spec.id).state().await.expect("a goal");
            (report.turn, state)
        }
    };
    let (turn, state) = run(true).await;
    assert!(
        matches!(turn, Some(TurnOutcome::Settled { .. })),
        "{turn:?}"
    );
    let status = state.criterion_status(&"tested".parse().expect("a valid id"), start());
    assert!(
        status.as_ref().is_some_and(CriterionStatus::is_met),
        "{status:?}"
    );

    let (turn, state) = run(false).await;
    let Some(TurnOutcome::LeaseLost { refusal, .. }) = turn else {
        panic!("settled without the validator's signature: {turn:?}");
    };
    assert_eq!(refusal.code(), "verdict_unsigned");
    assert_eq!(state.ledger.spent.turns, 0);
    let status = state.criterion_status(&"tested".parse().expect("a valid id"), start());
    assert_eq!(status, Some(CriterionStatus::NoEvidence));
}
