//! A person answers a gate over HTTP on loopback with a bearer token: the gate's owner's answer
//! resolves it (and a retry replays), anyone else's is the kernel's refusal, and a request
//! without a known token, with a body that is no answer, or for an unknown gate changes nothing.

mod support;

use std::sync::Arc;

use loopx_kernel::prelude::*;
use loopx_kernel::{Actor, Command, ExpiryPolicy, GateId, GateScope, NewGate};
use loopx_provider::clock::SystemClock;
use loopx_server::Service;
use loopx_server::mcp::{Acting, Tokens};
use loopx_store::MemoryStore;
use serde_json::Value;

const GOAL: &str = "json-output";

fn person(name: &str) -> Actor {
    Actor::Person(name.parse().expect("a person id"))
}

/// A declared goal with one pending gate owned by `person:maria`; the service answering gates
/// for maria's and mallory's tokens, served on loopback; its base URL.
async fn setup() -> (Arc<dyn Store>, String) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = GoalSpec::builder(GOAL, "--format json ships", "olivia")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("valid ids");
    let goal = store.goal(&spec.id);
    goal.create(&spec, SystemClock.now())
        .await
        .expect("created");
    let gate = NewGate {
        id: GateId::new("naming").expect("an id"),
        question: "snake_case or camelCase for the JSON fields?".into(),
        owner: person("maria"),
        scope: GateScope {
            whole_goal: true,
            ..GateScope::default()
        },
        deadline: None,
        on_expiry: ExpiryPolicy::default(),
    };
    goal.submit(
        &person("olivia"),
        SystemClock.now(),
        &Command::OpenGate { gate },
    )
    .await
    .expect("the gate opens");
    let tokens = Tokens::new()
        .with(
            "maria-token-3e8b1f6a9c2d7e4b0f5a",
            Acting::unsigned(person("maria")),
        )
        .and_then(|t| {
            t.with(
                "mallory-token-6d2a8f0c4e9b1d7a3f5c",
                Acting::unsigned(person("mallory")),
            )
        })
        .expect("strong tokens");
    let router = Service::new(store.clone(), Arc::new(SystemClock))
        .mount(loopx_server::gates::router(
            store.clone(),
            Arc::new(SystemClock),
            tokens,
        ))
        .router();
    (store, support::on_loopback(router).await)
}

async fn post(base: &str, gate: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/goals/{GOAL}/gates/{gate}/answer"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    support::answer(request.send().await.expect("the service answers")).await
}

async fn revision(store: &dyn Store) -> u64 {
    let goal: GoalId = GOAL.parse().expect("an id");
    store
        .load(&goal)
        .await
        .expect("loads")
        .expect("exists")
        .revision
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_owner_answers_over_http_and_nobody_else_can() {
    let (store, base) = setup().await;
    let before = revision(&*store).await;
    let answer = r#"{"kind": "resolve", "answer": "snake_case"}"#;

    for (case, gate, token, body, status, code) in [
        ("no token", "naming", None, answer, 401, "unauthorized"),
        (
            "an unknown token",
            "naming",
            Some("guess"),
            answer,
            401,
            "unauthorized",
        ),
        (
            "someone else",
            "naming",
            Some("mallory-token-6d2a8f0c4e9b1d7a3f5c"),
            answer,
            409,
            "not_gate_owner",
        ),
        (
            "no answer",
            "naming",
            Some("maria-token-3e8b1f6a9c2d7e4b0f5a"),
            r#"{"kind": "maybe"}"#,
            400,
            "invalid_answer",
        ),
        (
            "an unknown gate",
            "other",
            Some("maria-token-3e8b1f6a9c2d7e4b0f5a"),
            answer,
            404,
            "unknown_gate",
        ),
    ] {
        let (got, body) = post(&base, gate, token, body).await;
        assert_eq!(got, status, "{case}: {body}");
        assert_eq!(body["code"], code, "{case}: {body}");
        assert_eq!(revision(&*store).await, before, "{case} changed nothing");
    }

    let (status, body) = post(
        &base,
        "naming",
        Some("maria-token-3e8b1f6a9c2d7e4b0f5a"),
        answer,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replayed"], false, "{body}");
    let state = store
        .load(&GOAL.parse().expect("an id"))
        .await
        .expect("loads")
        .expect("exists");
    let gate = state
        .gates
        .get(&GateId::new("naming").expect("an id"))
        .expect("the gate");
    assert!(
        format!("{:?}", gate.status).contains("snake_case"),
        "resolved with maria's answer: {:?}",
        gate.status
    );
    let (status, again) = post(
        &base,
        "naming",
        Some("maria-token-3e8b1f6a9c2d7e4b0f5a"),
        answer,
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["replayed"], true, "a retry replays: {again}");
}
