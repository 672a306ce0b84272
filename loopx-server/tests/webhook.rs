//! `POST /github/webhook` over real HTTP on loopback: every payload of the shared fixtures is
//! taken with a typed status and routed to the goal that follows its subject; a refused
//! delivery (too large, truncated, wrongly signed, unsigned, without its headers) writes
//! nothing; a redelivery replays; a failing check at a pull request's head becomes the bound
//! capability's fix todo in the same pass, and a concluded one the provider's evidence;
//! deliveries out of order end in one state.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopx_kernel::prelude::*;
use loopx_kernel::{
    Actor, Amendment, CapabilityBinding, Command, CriterionStatus, Event, ExpiryPolicy, GateId,
    GateScope, GateStatus, NewGate, PersonId, SourceId, Subject,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::{Delivery, WebhookVerifier};
use loopx_server::Service;
use loopx_server::github::Deliveries;
use loopx_store::{MemoryStore, SqliteStore};
use serde_json::{Value, json};

const SECRET: &str = "it's a secret to everybody";

/// A completed check run without its check run.
const SHAPELESS: &[u8] = br#"{"action": "completed", "repository": {"full_name": "acme/cli"}}"#;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../loopx-provider/tests/fixtures")
}

/// Every payload of the shared and hand-written fixtures, as (event, file name, body).
fn payloads() -> Vec<(String, String, Vec<u8>)> {
    let mut out = Vec::new();
    for set in ["github-webhooks", "github-deliveries"] {
        let root = fixtures().join(set);
        let mut events: Vec<PathBuf> = std::fs::read_dir(&root)
            .expect("the fixtures")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.is_dir())
            .collect();
        events.sort();
        for dir in events {
            let event = name(&dir);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .expect("an event's fixtures")
                .map(|e| e.expect("an entry").path())
                .collect();
            files.sort();
            for file in files {
                out.push((
                    event.clone(),
                    name(&file),
                    std::fs::read(&file).expect("read"),
                ));
            }
        }
    }
    assert!(out.len() >= 40, "the fixtures are there: {}", out.len());
    out
}

fn name(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .expect("a file name")
        .to_owned()
}

/// The service with the webhook route, served on a loopback port; its base URL.
async fn serve(store: Arc<dyn Store>) -> String {
    let deliveries = Deliveries::new(
        store.clone(),
        Arc::new(SystemClock),
        WebhookVerifier::new(SECRET),
    );
    let router = Service::new(store, Arc::new(SystemClock))
        .mount(deliveries.router())
        .router();
    support::on_loopback(router).await
}

/// Posts `body` as GitHub would: event, delivery id and signature headers (each left out when
/// `None`). Answers the status and the JSON document.
async fn post(
    base: &str,
    event: Option<&str>,
    delivery: Option<&str>,
    signature: Option<String>,
    body: Vec<u8>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/github/webhook"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(event) = event {
        request = request.header("X-GitHub-Event", event);
    }
    if let Some(delivery) = delivery {
        request = request.header("X-GitHub-Delivery", delivery);
    }
    if let Some(signature) = signature {
        request = request.header("X-Hub-Signature-256", signature);
    }
    support::answer(request.send().await.expect("the service answers")).await
}

#[allow(clippy::unnecessary_wraps)] // a signature header, which some cases leave out
fn sign(body: &[u8]) -> Option<String> {
    Some(WebhookVerifier::new(SECRET).sign(body))
}

/// A declared goal that follows `subject` (a criterion about it), bound to `capability` when
/// given.
async fn follow(store: &dyn Store, id: &str, subject: &str, capability: Option<Value>) {
    let mut spec = GoalSpec::builder(id, "the pull request is green", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .criterion(Criterion::new("green", "CI is green", "ci.green", subject).expect("ids"));
    if let Some(config) = capability {
        spec = spec.capability("prfix", config);
    }
    let spec = spec.build().expect("valid ids");
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
}

async fn revision(store: &dyn Store, goal: &str) -> u64 {
    state_of(store, goal).await.revision
}

/// The state of `goal`, which exists.
async fn state_of(store: &dyn Store, goal: &str) -> GoalState {
    let goal: GoalId = goal.parse().expect("an id");
    store.load(&goal).await.expect("loads").expect("exists")
}

/// The fix todo prfix plans for the failing check at the fixtures' pull request head.
const FIX_TODO: &str = "pr:Codertocat/Hello-World#2/ci-fix@ec26c3e57ca3";

/// The subjects a payload is routed by, as the webhook module reads them.
fn routed(event: &str, body: &[u8]) -> Option<Vec<Subject>> {
    let verifier = WebhookVerifier::new(SECRET);
    match verifier
        .route(event, sign(body).as_deref(), body, SystemClock.now())
        .expect("a fixture is taken")
    {
        Delivery::Fact(routed) => Some(routed.subjects),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_is_taken_and_routed_to_the_goal_that_follows_its_subject() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    for (n, (event, file, body)) in payloads().into_iter().enumerate() {
        let goal = format!("g{n}");
        let subjects = routed(&event, &body);
        let subject = subjects
            .as_ref()
            .and_then(|s| s.first())
            .map_or_else(|| "repo:nothing".to_owned(), |s| s.as_str().to_owned());
        follow(&*store, &goal, &subject, None).await;
        let before = revision(&*store, &goal).await;
        let delivery = format!("d-{n}");
        let (status, answer) = post(&base, Some(&event), Some(&delivery), sign(&body), body).await;
        assert_eq!(status, 200, "{event}/{file}: {answer}");
        let after = revision(&*store, &goal).await;
        if subjects.is_some() {
            assert_eq!(answer["outcome"], "recorded", "{event}/{file}: {answer}");
            let goals = answer["goals"].as_array().expect("goals");
            assert!(
                goals.iter().any(|g| g["goal"] == goal.as_str()),
                "{event}/{file} reached its goal: {answer}"
            );
            assert_eq!(after, before + 1, "{event}/{file} recorded once");
        } else {
            assert!(
                ["ping", "ignored"].contains(&answer["outcome"].as_str().unwrap_or("")),
                "{event}/{file}: {answer}"
            );
            assert_eq!(after, before, "{event}/{file} recorded nothing");
        }
    }
}

/// A delivery GitHub (or a forger) could send, and what the service must answer.
struct Refused {
    case: &'static str,
    event: Option<&'static str>,
    delivery: Option<&'static str>,
    signature: Option<String>,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
}

/// A delivery of `event` with id `delivery`, signed over `body`, that must be refused.
fn refused(
    case: &'static str,
    event: &'static str,
    delivery: &'static str,
    body: &[u8],
) -> Refused {
    Refused {
        case,
        event: Some(event),
        delivery: Some(delivery),
        signature: sign(body),
        body: body.to_vec(),
        status: 400,
        code: "malformed_payload",
    }
}

fn refused_deliveries(body: &[u8]) -> Vec<Refused> {
    let truncated = &body[..body.len() / 2];
    vec![
        refused("truncated", "pull_request", "d1", truncated),
        Refused {
            signature: sign(b"another body"),
            status: 401,
            code: "signature_invalid",
            ..refused("wrong signature", "pull_request", "d2", body)
        },
        Refused {
            signature: Some("sha1=abc".into()),
            status: 401,
            code: "signature_malformed",
            ..refused("malformed signature", "pull_request", "d3", body)
        },
        Refused {
            signature: None,
            status: 401,
            code: "signature_missing",
            ..refused("unsigned", "pull_request", "d4", body)
        },
        Refused {
            event: None,
            code: "bad_header",
            ..refused("no event", "pull_request", "d5", body)
        },
        Refused {
            delivery: None,
            code: "bad_header",
            ..refused("no delivery id", "pull_request", "d6", body)
        },
        Refused {
            code: "bad_header",
            ..refused(
                "a path for a delivery id",
                "pull_request",
                "../../etc",
                body,
            )
        },
        Refused {
            code: "unknown_event",
            ..refused("an event loopx does not read", "deployment", "d7", body)
        },
        refused("another event's shape", "check_run", "d8", SHAPELESS),
        // A body over GitHub's cap is refused (413) before it is read, and the connection
        // closed while a client may still be sending it: `tests/bounded.rs` proves that case
        // over a raw connection, which reads the answer without sending the body.
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delivery_has_a_typed_status_and_writes_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let body = std::fs::read(fixtures().join("github-webhooks/pull_request/opened.payload.json"))
        .expect("read");
    follow(&*store, "g", "pr:Codertocat/Hello-World#2", None).await;
    let before = revision(&*store, "g").await;

    for refused in refused_deliveries(&body) {
        let case = refused.case;
        let (status, answer) = post(
            &base,
            refused.event,
            refused.delivery,
            refused.signature,
            refused.body,
        )
        .await;
        assert_eq!(status, refused.status, "{case}: {answer}");
        if !refused.code.is_empty() {
            assert_eq!(answer["code"], refused.code, "{case}: {answer}");
            assert!(
                !answer.to_string().contains(SECRET),
                "{case} shows no secret"
            );
        }
        assert_eq!(revision(&*store, "g").await, before, "{case} wrote nothing");
    }

    // A 5 MB body GitHub could send (the same payload, padded) is taken.
    let close = body
        .iter()
        .rposition(|&b| b == b'}')
        .expect("a JSON object");
    let mut padded = body[..close].to_vec();
    padded.extend(std::iter::repeat_n(b' ', 5 * 1024 * 1024));
    padded.extend_from_slice(&body[close..]);
    let (status, answer) = post(
        &base,
        Some("pull_request"),
        Some("d10"),
        sign(&padded),
        padded,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(revision(&*store, "g").await, before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_replays_and_never_conflicts() {
    let dir = tempfile::tempdir().expect("a directory");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::create(dir.path().join("loopx.db")).expect("a store"));
    let base = serve(store.clone()).await;
    follow(&*store, "g", "pr:Codertocat/Hello-World#2", None).await;
    let body = std::fs::read(fixtures().join("github-webhooks/pull_request/opened.payload.json"))
        .expect("read");
    let delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

    let (status, first) = post(
        &base,
        Some("pull_request"),
        Some(delivery),
        sign(&body),
        body.clone(),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["goals"][0]["changed"], true, "{first}");
    assert_eq!(first["goals"][0]["replayed"], false, "{first}");
    let after_first = revision(&*store, "g").await;

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (status, again) = post(
        &base,
        Some("pull_request"),
        Some(delivery),
        sign(&body),
        body,
    )
    .await;
    assert_eq!(
        status, 200,
        "a redelivery at a later time is no conflict: {again}"
    );
    assert_eq!(again["goals"][0]["replayed"], true, "{again}");
    assert_eq!(revision(&*store, "g").await, after_first, "nothing twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_at_the_head_becomes_the_fix_todo_in_the_same_pass() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let pull = "pr:Codertocat/Hello-World#2";
    follow(
        &*store,
        "fix",
        pull,
        Some(json!({ "pulls": ["Codertocat/Hello-World#2"] })),
    )
    .await;
    follow(&*store, "other", "pr:Codertocat/Hello-World#3", None).await;
    let other = revision(&*store, "other").await;

    let opened = std::fs::read(fixtures().join("github-webhooks/pull_request/opened.payload.json"))
        .expect("read");
    let (status, answer) = post(
        &base,
        Some("pull_request"),
        Some("d1"),
        sign(&opened),
        opened,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let failing =
        std::fs::read(fixtures().join("github-webhooks/check_run/completed.1.payload.json"))
            .expect("read");
    let (status, answer) = post(
        &base,
        Some("check_run"),
        Some("d2"),
        sign(&failing),
        failing,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let goals = answer["goals"].as_array().expect("goals");
    assert_eq!(
        goals.len(),
        1,
        "routed by the pull request it lists: {answer}"
    );
    assert_eq!(goals[0]["goal"], "fix");
    assert!(
        !goals[0]["proposed"]
            .as_array()
            .expect("proposed")
            .is_empty(),
        "prfix judged the goal in the same pass: {answer}"
    );

    let state = state_of(&*store, "fix").await;
    assert!(
        state.pending_todos().any(|t| t.id.as_str() == FIX_TODO),
        "the fix todo is on the goal"
    );
    assert_eq!(
        revision(&*store, "other").await,
        other,
        "a goal following another pull request heard nothing"
    );
}

/// CI that concluded at the pull request's exact head is recorded as evidence by the provider
/// whose word it is, in the same pass, and meets the criterion that names its check; CI about
/// another commit establishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_concluded_at_the_head_is_the_providers_evidence_and_meets_the_criterion() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let spec = GoalSpec::builder("fix", "the linter passes at the head", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .criterion(
            Criterion::new(
                "linter",
                "the linter passes",
                "ci/Octocoders-linter",
                "pr:Codertocat/Hello-World#2",
            )
            .expect("ids"),
        )
        .capability("prfix", json!({ "pulls": ["Codertocat/Hello-World#2"] }))
        .build()
        .expect("valid ids");
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
    let read = |path: &str| std::fs::read(fixtures().join(path)).expect("read");
    let mut elsewhere: Value =
        serde_json::from_slice(&read("github-webhooks/check_run/completed.payload.json"))
            .expect("JSON");
    elsewhere["check_run"]["head_sha"] = json!("1111111111111111111111111111111111111111");
    let elsewhere = serde_json::to_vec(&elsewhere).expect("JSON");
    let deliveries = [
        (
            "pull_request",
            "d1",
            read("github-webhooks/pull_request/opened.payload.json"),
        ),
        ("check_run", "d2", elsewhere),
        (
            "check_run",
            "d3",
            read("github-webhooks/check_run/completed.payload.json"),
        ),
    ];
    let mut evidence_after = Vec::new();
    for (event, delivery, body) in deliveries {
        let (status, answer) = post(&base, Some(event), Some(delivery), sign(&body), body).await;
        assert_eq!(status, 200, "{answer}");
        evidence_after.push(state_of(&*store, "fix").await.evidence.len());
    }

    assert_eq!(evidence_after, [0, 0, 1], "only CI at the head is evidence");
    let state = state_of(&*store, "fix").await;
    let evidence = state.evidence.values().next().expect("the evidence");
    assert_eq!(evidence.produced_by.to_string(), "provider:github");
    assert_eq!(evidence.check.as_str(), "ci/Octocoders-linter");
    assert_eq!(
        evidence.revision.as_str(),
        "git:ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    );
    let linter = "linter".parse().expect("an id");
    assert!(
        matches!(
            state.criterion_status(&linter, SystemClock.now()),
            Some(CriterionStatus::Met { .. })
        ),
        "{:?}",
        state.criterion_status(&linter, SystemClock.now())
    );
}

/// A goal created bound to prfix for its pull request, with nothing observed yet, follows the
/// pull request from its creation on (the registry fills its binding's `follows`): the first
/// delivery about the pull request reaches it, and the failing check at its head becomes the
/// fix todo. Without `follows` the same goal hears nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_created_bound_hears_the_first_delivery_for_its_pull_request() {
    let dir = tempfile::tempdir().expect("a directory");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::create(dir.path().join("loopx.db")).expect("a store"));
    let base = serve(store.clone()).await;
    let config = json!({ "pulls": ["Codertocat/Hello-World#2"] });
    let registry = loopx_server::capabilities::Registry::shipped();
    for (goal, binding) in [
        (
            "bound",
            registry
                .follow(&CapabilityBinding::new("prfix", config.clone()).expect("a name"))
                .expect("binds"),
        ),
        (
            "unfollowed",
            CapabilityBinding::new("prfix", config.clone()).expect("a name"),
        ),
    ] {
        let spec = GoalSpec::builder(goal, "the pull request is green", "olivia")
            .agent("agent-a")
            .budget(Limits::turns(10))
            .declared_identity()
            .bound(binding)
            .build()
            .expect("valid ids");
        store
            .goal(&spec.id)
            .create(&spec, SystemClock.now())
            .await
            .expect("created");
    }
    let unfollowed = revision(&*store, "unfollowed").await;

    let opened = std::fs::read(fixtures().join("github-webhooks/pull_request/opened.payload.json"))
        .expect("read");
    let (status, answer) = post(
        &base,
        Some("pull_request"),
        Some("b1"),
        sign(&opened),
        opened,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let goals = answer["goals"].as_array().expect("goals");
    assert_eq!(
        goals.len(),
        1,
        "the first delivery reaches the bound goal: {answer}"
    );
    assert_eq!(goals[0]["goal"], "bound");

    let failing =
        std::fs::read(fixtures().join("github-webhooks/check_run/completed.1.payload.json"))
            .expect("read");
    let (status, answer) = post(
        &base,
        Some("check_run"),
        Some("b2"),
        sign(&failing),
        failing,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let state = state_of(&*store, "bound").await;
    assert!(
        state.pending_todos().any(|t| t.id.as_str() == FIX_TODO),
        "the fix todo is on the goal: {answer}"
    );
    assert_eq!(
        revision(&*store, "unfollowed").await,
        unfollowed,
        "a binding that follows nothing heard nothing"
    );
}

/// Every order of a short real sequence (opened, synchronize, closed) ends in the state the
/// sequence in order ends in: an older delivery never moves a fact back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_out_of_order_end_in_the_same_state() {
    let sequence = ["opened", "synchronize", "closed"];
    let bodies: Vec<Vec<u8>> = sequence
        .iter()
        .map(|action| {
            std::fs::read(fixtures().join(format!(
                "github-webhooks/pull_request/{action}.payload.json"
            )))
            .expect("read")
        })
        .collect();
    let mut ends = Vec::new();
    for order in permutations(3) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let base = serve(store.clone()).await;
        follow(&*store, "g", "pr:Codertocat/Hello-World#2", None).await;
        for &i in &order {
            let body = bodies[i].clone();
            let delivery = format!("d-{i}");
            let (status, answer) = post(
                &base,
                Some("pull_request"),
                Some(&delivery),
                sign(&body),
                body,
            )
            .await;
            assert_eq!(status, 200, "{order:?}: {answer}");
        }
        let state = state_of(&*store, "g").await;
        let pull = state
            .observations
            .get(&"pr:Codertocat/Hello-World#2".parse().expect("a key"))
            .expect("the pull request is recorded");
        ends.push((
            order,
            pull.fingerprint.clone(),
            pull.facts.get("status").cloned(),
        ));
    }
    let (_, first, status) = &ends[0];
    assert_eq!(status.as_deref(), Some("closed"), "the newest fact stands");
    for (order, fingerprint, _) in &ends {
        assert_eq!(
            fingerprint, first,
            "order {order:?} ends where the others do"
        );
    }
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out
}

/// GitHub's `issue_comment` fixture, moved onto pull request #1 and rewritten: `login` wrote
/// `body`.
fn comment_on_the_pull(login: &str, id: u64, body: &str) -> Vec<u8> {
    comment_on(1, login, id, body)
}

/// The same on pull request `number`.
fn comment_on(number: u64, login: &str, id: u64, body: &str) -> Vec<u8> {
    let raw = std::fs::read(fixtures().join("github-webhooks/issue_comment/created.payload.json"))
        .expect("read");
    let mut payload: Value = serde_json::from_slice(&raw).expect("JSON");
    payload["issue"]["number"] = json!(number);
    payload["issue"]["pull_request"] = json!({
        "url": format!("https://api.github.com/repos/Codertocat/Hello-World/pulls/{number}")
    });
    payload["comment"]["id"] = json!(id);
    payload["comment"]["user"]["login"] = json!(login);
    payload["comment"]["body"] = json!(body);
    // Written now: after the test's gate opened (a command answers only a gate open by then).
    payload["comment"]["created_at"] = json!(just_now());
    serde_json::to_vec(&payload).expect("JSON")
}

/// GitHub's `pull_request_review` fixture moved onto pull request #1 and submitted just now
/// with `body`.
fn review_on_the_pull(body: &str) -> Value {
    let raw = std::fs::read(
        fixtures().join("github-webhooks/pull_request_review/submitted.payload.json"),
    )
    .expect("read");
    let mut review: Value = serde_json::from_slice(&raw).expect("JSON");
    review["pull_request"]["number"] = json!(1);
    review["review"]["body"] = json!(body);
    review["review"]["submitted_at"] = json!(just_now());
    review
}

/// A second after now, as GitHub writes times: a comment or review written after any gate the
/// test opened before it.
fn just_now() -> String {
    let later = Timestamp::from_millis(SystemClock.now().as_millis() + 1000);
    later.to_string()
}

/// A goal that follows pull request #1 with a pending gate of its owner's, `olivia`, whose
/// GitHub login the owner mapped.
async fn gated(store: &dyn Store) -> GoalId {
    follow(store, "g", "pr:Codertocat/Hello-World#1", None).await;
    let goal: GoalId = "g".parse().expect("an id");
    let olivia = Actor::Person(PersonId::new("olivia").expect("an id"));
    let handle = store.goal(&goal);
    handle
        .submit(
            &olivia,
            SystemClock.now(),
            &Command::AmendGoal {
                expected_revision: 0,
                amendments: vec![Amendment::MapLogin {
                    person: PersonId::new("olivia").expect("an id"),
                    provider: SourceId::new("github").expect("an id"),
                    login: "Codertocat".into(),
                }],
            },
        )
        .await
        .expect("mapped");
    let gate = NewGate {
        id: GateId::new("naming").expect("an id"),
        question: "is error_code acceptable as a stable field?".into(),
        owner: olivia.clone(),
        scope: GateScope {
            whole_goal: true,
            ..GateScope::default()
        },
        deadline: None,
        on_expiry: ExpiryPolicy::Expire,
    };
    handle
        .submit(&olivia, SystemClock.now(), &Command::OpenGate { gate })
        .await
        .expect("opened");
    goal
}

async fn gate_status(store: &dyn Store, goal: &GoalId) -> GateStatus {
    let state = store.load(goal).await.expect("loads").expect("exists");
    state.gates[&GateId::new("naming").expect("an id")]
        .status
        .clone()
}

/// The chapter's unanswered question, answered where it was asked: the owner's `/loopx answer`
/// comment resolves the gate as the owner; someone else's is refused and changes nothing; a
/// redelivery replays; a `/loopx` line that is no command is passed over with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_answer_in_the_pull_request_answers_the_gate_and_nobody_elses_does() {
    let dir = tempfile::tempdir().expect("a directory");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::create(dir.path().join("loopx.db")).expect("a store"));
    let base = serve(store.clone()).await;
    let goal = gated(&*store).await;

    let theirs = comment_on_the_pull(
        "someone-else",
        7001,
        "I think so.\n/loopx answer naming yes, ship it\n/loopx approve naming",
    );
    let (status, answer) = post(
        &base,
        Some("issue_comment"),
        Some("d-theirs"),
        sign(&theirs),
        theirs,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answers"][0]["goal"], "g", "{answer}");
    assert_eq!(answer["answers"][0]["login"], "someone-else", "{answer}");
    assert_eq!(answer["answers"][0]["outcome"], "refused", "{answer}");
    assert_eq!(
        answer["answers"][0]["refused"], "relay_not_gate_owner",
        "{answer}"
    );
    let ignored = answer["ignored"][0].as_str().expect("a reason");
    assert!(
        ignored.contains("`/loopx approve` is not a command"),
        "{answer}"
    );
    assert_eq!(gate_status(&*store, &goal).await, GateStatus::Pending);

    let owners = comment_on_the_pull(
        "Codertocat",
        7002,
        "/loopx answer naming error_code is fine",
    );
    let delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    let (status, answer) = post(
        &base,
        Some("issue_comment"),
        Some(delivery),
        sign(&owners),
        owners.clone(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answers"][0]["outcome"], "answered", "{answer}");
    assert_eq!(answer["answers"][0]["replayed"], false, "{answer}");
    let GateStatus::Resolved {
        answer: text, by, ..
    } = gate_status(&*store, &goal).await
    else {
        panic!("the gate is resolved");
    };
    assert_eq!(text, "error_code is fine");
    assert_eq!(by.to_string(), "person:olivia");
    let after = revision(&*store, "g").await;
    let log = store.events(&goal, 0, 100).await.expect("the log");
    let relayed = log
        .iter()
        .find(|e| e.event.name() == "gate_answer_relayed")
        .expect("the relayed answer is in the log");
    assert_eq!(relayed.actor.to_string(), "provider:github");
    let Event::GateAnswerRelayed { relay, person, .. } = &relayed.event else {
        unreachable!()
    };
    assert_eq!(person.as_str(), "olivia");
    assert_eq!(relay.login, "Codertocat");
    assert_eq!(relay.delivery, delivery);
    assert_eq!(relay.message.as_deref(), Some("comment:7002"));

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (status, again) = post(
        &base,
        Some("issue_comment"),
        Some(delivery),
        sign(&owners),
        owners,
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["answers"][0]["outcome"], "answered", "{again}");
    assert_eq!(again["answers"][0]["replayed"], true, "{again}");
    assert_eq!(revision(&*store, "g").await, after, "nothing twice");
}

/// A review whose body carries the command answers like a comment; one naming a gate no goal
/// following the pull request holds answers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_carrying_the_command_answers_and_an_unknown_gate_answers_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let goal = gated(&*store).await;
    let review = review_on_the_pull("/loopx reject naming call it `code`\n/loopx answer ghost yes");
    let body = serde_json::to_vec(&review).expect("JSON");
    let (status, answer) = post(
        &base,
        Some("pull_request_review"),
        Some("d-review"),
        sign(&body),
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answers"][0]["outcome"], "answered", "{answer}");
    assert_eq!(answer["answers"][1]["gate"], "ghost", "{answer}");
    assert_eq!(answer["answers"][1]["outcome"], "unknown_gate", "{answer}");
    let GateStatus::Rejected { reason, .. } = gate_status(&*store, &goal).await else {
        panic!("the gate is rejected");
    };
    assert_eq!(reason, "call it `code`");
}

/// The maintainer's question in the pull request becomes the agent's todo in the same pass,
/// through the goal's capability: it cannot be dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewers_question_in_the_pull_request_becomes_the_agents_todo() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    follow(
        &*store,
        "q",
        "pr:Codertocat/Hello-World#2",
        Some(json!({ "pulls": ["Codertocat/Hello-World#2"] })),
    )
    .await;
    let opened = std::fs::read(fixtures().join("github-webhooks/pull_request/opened.payload.json"))
        .expect("read");
    let (status, answer) = post(
        &base,
        Some("pull_request"),
        Some("q1"),
        sign(&opened),
        opened,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let question = comment_on(
        2,
        "maintainer",
        7005,
        "Is `error_code` a stable field name?",
    );
    let (status, answer) = post(
        &base,
        Some("issue_comment"),
        Some("q2"),
        sign(&question),
        question,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["goals"][0]["proposed"]
            .as_array()
            .expect("proposed")
            .iter()
            .any(|p| p == "add_todo"),
        "{answer}"
    );
    let state = state_of(&*store, "q").await;
    let todo = state
        .pending_todos()
        .find(|t| t.id.as_str() == "question:Codertocat/Hello-World#2/comment-7005")
        .expect("the question is the agent's todo");
    assert_eq!(
        todo.title,
        "answer @maintainer's comment 7005 in Codertocat/Hello-World#2: “Is `error_code` a stable field name?”"
    );
}

/// The human channel keeps its integrity: an edited review relays nothing, even its author's;
/// a comment relays once, whichever delivery carries it; and words written before a gate
/// opened never answer it, however they are delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_comment_as_written_after_the_question_answers_it_and_only_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let goal = gated(&*store).await;
    let mut review = review_on_the_pull("/loopx answer naming yes");

    // Edited, by its author: relays nothing.
    review["action"] = json!("edited");
    let body = serde_json::to_vec(&review).expect("JSON");
    let (status, answer) = post(
        &base,
        Some("pull_request_review"),
        Some("d-edit"),
        sign(&body),
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer.get("answers").is_none(),
        "an edit relays nothing: {answer}"
    );
    assert_eq!(gate_status(&*store, &goal).await, GateStatus::Pending);

    // Written before the gate opened, replayed under a new delivery id: refused.
    let old = comment_on_the_pull("Codertocat", 4242, "/loopx answer naming yes, from 2019");
    let mut old: Value = serde_json::from_slice(&old).expect("JSON");
    old["comment"]["created_at"] = json!("2019-05-15T15:20:33Z");
    let old = serde_json::to_vec(&old).expect("JSON");
    let (_, answer) = post(
        &base,
        Some("issue_comment"),
        Some("d-replayed"),
        sign(&old),
        old,
    )
    .await;
    assert_eq!(
        answer["answers"][0]["refused"], "comment_predates_gate",
        "{answer}"
    );
    assert_eq!(gate_status(&*store, &goal).await, GateStatus::Pending);

    // Written now: answers; the same comment under another delivery id answers nothing more.
    let now = comment_on_the_pull("Codertocat", 4243, "/loopx answer naming yes");
    let (_, answer) = post(
        &base,
        Some("issue_comment"),
        Some("d-now"),
        sign(&now),
        now.clone(),
    )
    .await;
    assert_eq!(answer["answers"][0]["outcome"], "answered", "{answer}");
    let revision = state_of(&*store, "g").await.revision;
    let (status, answer) = post(
        &base,
        Some("issue_comment"),
        Some("d-again"),
        sign(&now),
        now,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answers"][0]["replayed"], true, "{answer}");
    assert_eq!(
        state_of(&*store, "g").await.revision,
        revision,
        "the same comment relays once"
    );
}

/// A review typed in GitHub's web editor (CRLF line endings) carrying a terminal escape and a
/// right-to-left override is recorded, not refused: its words kept with LF endings and the
/// escape and override neutralised into visible stand-ins; its command answers the gate with
/// every line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_from_the_web_editor_with_escapes_is_recorded_and_its_command_answers() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let base = serve(store.clone()).await;
    let goal = gated(&*store).await;
    let review = review_on_the_pull(
        "Looks \u{1b}[31mred\u{1b}[0m to me \u{202e}txet\r\n/loopx answer naming error_code is fine;\r\nrename `message` to `detail`\r\n",
    );
    let body = serde_json::to_vec(&review).expect("JSON");
    let (status, answer) = post(
        &base,
        Some("pull_request_review"),
        Some("d-web-editor"),
        sign(&body),
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["goals"][0].get("refused").is_none(), "{answer}");
    let state = state_of(&*store, goal.as_str()).await;
    let recorded = serde_json::to_string(&state.observations).expect("JSON");
    assert!(
        recorded.contains("Looks ␛[31mred␛[0m to me �txet\\n"),
        "{recorded}"
    );
    assert!(
        !recorded.contains("\\r")
            && !recorded.contains("\\u001b")
            && !recorded.contains('\u{202e}'),
        "{recorded}"
    );
    let GateStatus::Resolved { answer, .. } = gate_status(&*store, &goal).await else {
        panic!("the gate is answered");
    };
    assert_eq!(answer, "error_code is fine;\nrename `message` to `detail`");
}
