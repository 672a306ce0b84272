//! Dead letters over real HTTP on loopback: a delivery a goal cannot record is kept, visible
//! and answered as failed; no `/loopx` command in it is relayed to that goal; once the cause is
//! fixed it is re-applied, and GitHub's redelivery then answers the gate. The comment is typed
//! as a browser submits it (CRLF line endings), and the answer spans several lines.

mod support;

use std::sync::Arc;

use loopx_kernel::prelude::*;
use loopx_kernel::seams::DeadLetter;
use loopx_kernel::{
    Actor, Amendment, Command, ExpiryPolicy, GateId, GateScope, GateStatus, Keyring, NewGate,
    PersonId, SecretKey, Signer, SourceId,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::Service;
use loopx_server::dead_letters::Reapplier;
use loopx_server::github::Deliveries;
use loopx_store::SqliteStore;
use serde_json::{Value, json};

const SECRET: &str = "it's a secret to everybody";

fn github() -> Actor {
    Actor::Provider(SourceId::new("github").expect("an id"))
}

fn olivia() -> Actor {
    Actor::Person(PersonId::new("olivia").expect("an id"))
}

/// The provider's key, which the service signs deliveries with.
fn provider_keyring() -> Keyring {
    Keyring::new().with(github(), Arc::new(SecretKey::from_seed([9; 32])))
}

/// A signed goal following pull request #1 whose owner mapped her GitHub login and asked a
/// question, but never registered the provider's key: every fact GitHub delivers is refused.
async fn signed_goal_without_the_providers_key(store: &dyn Store, owner: &SecretKey) -> GoalId {
    let spec = GoalSpec::builder("g", "the pull request is green", "olivia")
        .agent("agent-a")
        .owner_key(owner.public_key())
        .criterion(
            Criterion::new(
                "green",
                "CI is green",
                "ci.green",
                "pr:Codertocat/Hello-World#1",
            )
            .expect("ids"),
        )
        .build()
        .expect("valid ids");
    let handle = store.goal(&spec.id).signed_by(owner);
    handle
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
    let map = Command::AmendGoal {
        expected_revision: 0,
        amendments: vec![Amendment::MapLogin {
            person: PersonId::new("olivia").expect("an id"),
            provider: SourceId::new("github").expect("an id"),
            login: "Codertocat".into(),
        }],
    };
    handle
        .submit(&olivia(), SystemClock.now(), &map)
        .await
        .expect("mapped");
    let gate = NewGate {
        id: GateId::new("naming").expect("an id"),
        question: "is error_code acceptable as a stable field?".into(),
        owner: olivia(),
        scope: GateScope {
            whole_goal: true,
            ..GateScope::default()
        },
        deadline: None,
        on_expiry: ExpiryPolicy::Expire,
    };
    handle
        .submit(&olivia(), SystemClock.now(), &Command::OpenGate { gate })
        .await
        .expect("opened");
    spec.id
}

/// GitHub's `issue_comment` fixture moved onto pull request #1: the owner's comment `body`.
fn owners_comment(body: &str) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../loopx-provider/tests/fixtures/github-webhooks/issue_comment/created.payload.json"
    );
    let mut payload: Value =
        serde_json::from_slice(&std::fs::read(path).expect("read")).expect("JSON");
    payload["issue"]["number"] = json!(1);
    payload["issue"]["pull_request"] =
        json!({"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"});
    payload["comment"]["id"] = json!(9001);
    payload["comment"]["user"]["login"] = json!("Codertocat");
    payload["comment"]["body"] = json!(body);
    // Written after the gate opened: only then does a command in it answer the gate.
    let written = Timestamp::from_millis(SystemClock.now().as_millis() + 1000);
    payload["comment"]["created_at"] = json!(written.to_string());
    serde_json::to_vec(&payload).expect("JSON")
}

async fn deliver(base: &str, delivery: &str, body: &[u8]) -> (u16, Value) {
    let request = reqwest::Client::new()
        .post(format!("{base}/github/webhook"))
        .header("content-type", "application/json")
        .header("X-GitHub-Event", "issue_comment")
        .header("X-GitHub-Delivery", delivery)
        .header(
            "X-Hub-Signature-256",
            WebhookVerifier::new(SECRET).sign(body),
        )
        .body(body.to_vec());
    support::answer(request.send().await.expect("the service answers")).await
}

async fn gate_status(store: &dyn Store, goal: &GoalId) -> GateStatus {
    let state = store.load(goal).await.expect("loads").expect("exists");
    state.gates[&GateId::new("naming").expect("an id")]
        .status
        .clone()
}

async fn kept(store: &dyn Store) -> Vec<DeadLetter> {
    store.dead_letters(10).await.expect("listed").letters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_a_goal_cannot_record_is_a_visible_dead_letter_until_it_is_reapplied() {
    let dir = tempfile::tempdir().expect("a directory");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::create(dir.path().join("loopx.db")).expect("a store"));
    let owner = SecretKey::from_seed([3; 32]);
    let goal = signed_goal_without_the_providers_key(&*store, &owner).await;
    let deliveries = Deliveries::new(
        store.clone(),
        Arc::new(SystemClock),
        WebhookVerifier::new(SECRET),
    )
    .keyring(provider_keyring());
    let board = loopx_server::board::router(
        store.clone(),
        Arc::new(SystemClock),
        loopx_server::mcp::Tokens::new(),
        &loopx_server::Site::default(),
    );
    let router = Service::new(store.clone(), Arc::new(SystemClock))
        .mount(deliveries.router())
        .mount(board)
        .router();
    let base = support::on_loopback(router).await;
    let comment = owners_comment(
        "Looked at it.\r\n/loopx answer naming error_code is fine;\r\nrename `message` to `detail`\r\n",
    );

    // Refused: kept, answered as failed, and the command in it relayed nowhere.
    let (status, answer) = deliver(&base, "d-1", &comment).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["outcome"], "dead_letter", "{answer}");
    assert_eq!(
        answer["goals"][0]["refused"], "key_unregistered",
        "{answer}"
    );
    assert_eq!(gate_status(&*store, &goal).await, GateStatus::Pending);
    let letters = kept(&*store).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].goal, goal);
    assert_eq!(letters[0].code, "key_unregistered");
    assert!(letters[0].origin.contains("d-1"), "{}", letters[0].origin);
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("a body");
    assert!(metrics.contains("loopx_dead_letters 1"), "{metrics}");
    let page = reqwest::Client::new()
        .get(format!("{base}/goals/g"))
        .header("Host", "localhost")
        .send()
        .await
        .expect("the board")
        .text()
        .await
        .expect("a page");
    assert!(page.contains("Dead letters"), "{page}");
    assert!(page.contains("key_unregistered"), "{page}");
    assert!(page.contains("loopx dead-letters retry --goal g"), "{page}");

    // Redelivered before the fix: the same letter, refused twice.
    let (status, _) = deliver(&base, "d-1", &comment).await;
    assert_eq!(status, 422);
    assert_eq!(kept(&*store).await[0].refusals, 2);

    // The owner registers the provider's key; re-applying records the comment, LF only.
    let amended = store.load(&goal).await.expect("loads").expect("exists");
    let register = Command::AmendGoal {
        expected_revision: amended.goal_revision,
        amendments: vec![Amendment::RegisterKey {
            actor: github(),
            key: SecretKey::from_seed([9; 32]).public_key(),
        }],
    };
    store
        .goal(&goal)
        .signed_by(&owner)
        .submit(&olivia(), SystemClock.now(), &register)
        .await
        .expect("registered");
    let reapplier =
        Reapplier::new(store.clone(), Arc::new(SystemClock)).keyring(provider_keyring());
    let outcome = reapplier.reapply(&letters[0]).await.expect("re-applied");
    assert_eq!(outcome.refused, None, "{outcome:?}");
    assert!(
        kept(&*store).await.is_empty(),
        "a recorded letter leaves the list"
    );
    let state = store.load(&goal).await.expect("loads").expect("exists");
    let recorded = serde_json::to_string(&state.observations).expect("JSON");
    assert!(
        recorded.contains("error_code is fine;\\nrename"),
        "{recorded}"
    );
    assert!(!recorded.contains("\\r"), "{recorded}");

    // GitHub's redelivery now replays the fact and answers the gate with every line.
    let (status, answer) = deliver(&base, "d-1", &comment).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answers"][0]["outcome"], "answered", "{answer}");
    let GateStatus::Resolved { answer, .. } = gate_status(&*store, &goal).await else {
        panic!("the gate is answered");
    };
    assert_eq!(answer, "error_code is fine;\nrename `message` to `detail`");
}
