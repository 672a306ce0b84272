//! A pending gate's one notice, over real HTTP on loopback against the stand-in for GitHub's
//! REST API, on the SQLite store: a gate whose owner's login is mapped, on a goal bound to a
//! pull request, gets exactly one comment after a delivery, and still one after another
//! delivery and a poll; a crash between the intent and the post, or between the post and its
//! record, ends with exactly one comment; an unmapped owner gets none; the comment holds the
//! `/loopx answer` and `/loopx reject` lines.

mod support;

#[path = "../../loopx-provider/tests/support/github.rs"]
mod standin;

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use loopx_kernel::outbox::gate_notice_key;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{Effector, Provider};
use loopx_kernel::{
    Actor, Amendment, Command, EffectId, EffectIntent, EffectOutcome, ExpiryPolicy, GateId,
    GateScope, NewGate, PersonId, SourceId,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::{GitHubClient, Token};
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::Service;
use loopx_server::github::Deliveries;
use loopx_server::notices::notice_body;
use loopx_server::schedule::Poller;
use loopx_store::SqliteStore;
use serde_json::{Value, json};
use standin::{Reply, Seen, ok, route};

const SECRET: &str = "it's a secret to everybody";
const REPO: &str = "Codertocat/Hello-World";
const COMMENTS: &str = "/repos/Codertocat/Hello-World/issues/1/comments";

/// GitHub's comments on pull request #1: `POST` appends one (answering after `slow`), `GET`
/// lists them; anything else is not found.
fn github(comments: Arc<Mutex<Vec<String>>>, slow: StdDuration) -> standin::Handler {
    Arc::new(move |seen: &Seen| {
        let mut comments = comments.lock().expect("comments");
        if seen.method == "POST" && route(seen) == COMMENTS {
            let body: Value = serde_json::from_str(&seen.body).expect("JSON");
            comments.push(body["body"].as_str().unwrap_or_default().to_owned());
            return Reply {
                status: 201,
                headers: vec![],
                body: "{}".into(),
                delay: slow,
            };
        }
        if seen.method == "GET" && route(seen) == COMMENTS {
            let list: Vec<Value> = comments.iter().map(|b| json!({ "body": b })).collect();
            return ok(&serde_json::to_string(&list).expect("JSON"));
        }
        standin::not_found()
    })
}

fn client(base: &str) -> Arc<GitHubClient> {
    Arc::new(
        GitHubClient::new(
            SourceId::new("github").expect("an id"),
            base,
            Some(Token::new("ghp_test")),
            Duration::seconds(5),
            Arc::new(SystemClock),
        )
        .expect("a client"),
    )
}

struct World {
    store: Arc<dyn Store>,
    github: Arc<GitHubClient>,
    comments: Arc<Mutex<Vec<String>>>,
    base: String,
    _dir: tempfile::TempDir,
    _server: standin::Server,
}

impl World {
    /// The service with the webhook route noticing gates through the GitHub client, and a
    /// goal bound to prfix for pull request #1 with a pending gate of its owner's, `olivia`,
    /// whose login is mapped when `mapped`.
    async fn new(mapped: bool) -> World {
        World::answering(mapped, StdDuration::ZERO).await
    }

    /// The same, GitHub answering each posted comment after `slow`.
    async fn answering(mapped: bool, slow: StdDuration) -> World {
        let comments = Arc::new(Mutex::new(Vec::new()));
        let server = standin::serve(github(Arc::clone(&comments), slow)).await;
        let dir = tempfile::tempdir().expect("a directory");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::create(dir.path().join("loopx.db")).expect("a store"));
        let github = client(&server.base);
        let effector: Arc<dyn Effector> = github.clone();
        let deliveries = Deliveries::new(
            store.clone(),
            Arc::new(SystemClock),
            WebhookVerifier::new(SECRET),
        )
        .notifier(effector);
        let base = support::on_loopback(
            Service::new(store.clone(), Arc::new(SystemClock))
                .mount(deliveries.router())
                .router(),
        )
        .await;
        gated(&*store, mapped).await;
        World {
            store,
            github,
            comments,
            base,
            _dir: dir,
            _server: server,
        }
    }

    fn comments(&self) -> Vec<String> {
        self.comments.lock().expect("comments").clone()
    }

    /// A comment on the pull request that answers nothing, delivered as `delivery`.
    async fn deliver(&self, delivery: &str) {
        let body = comment("someone-else", 7000, "looks good to me");
        let response = reqwest::Client::new()
            .post(format!("{}/github/webhook", self.base))
            .header("content-type", "application/json")
            .header("X-GitHub-Event", "issue_comment")
            .header("X-GitHub-Delivery", delivery)
            .header(
                "X-Hub-Signature-256",
                WebhookVerifier::new(SECRET).sign(&body),
            )
            .body(body)
            .send()
            .await
            .expect("the service answers");
        let (status, answer) = support::answer(response).await;
        assert_eq!(status, 200, "{answer}");
    }

    /// One poll pass with the GitHub client as provider and notifier.
    async fn poll(&self) {
        let provider: Arc<dyn Provider> = self.github.clone();
        let effector: Arc<dyn Effector> = self.github.clone();
        Poller::new(self.store.clone(), Arc::new(SystemClock))
            .provider(provider)
            .notifier(effector)
            .pass()
            .await
            .expect("a pass");
    }

    async fn state(&self) -> GoalState {
        self.store
            .load(&goal())
            .await
            .expect("loads")
            .expect("exists")
    }
}

fn goal() -> GoalId {
    "g".parse().expect("an id")
}

fn gate_id() -> GateId {
    GateId::new("naming").expect("an id")
}

fn provider() -> Actor {
    Actor::Provider(SourceId::new("github").expect("an id"))
}

/// GitHub's `issue_comment` fixture, moved onto pull request #1: `login` wrote `body`.
fn comment(login: &str, id: u64, body: &str) -> Vec<u8> {
    let raw = std::fs::read(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../loopx-provider/tests/fixtures/github-webhooks/issue_comment/created.payload.json",
    ))
    .expect("read");
    let mut payload: Value = serde_json::from_slice(&raw).expect("JSON");
    payload["issue"]["number"] = json!(1);
    payload["issue"]["pull_request"] = json!({
        "url": format!("https://api.github.com/repos/{REPO}/pulls/1")
    });
    payload["comment"]["id"] = json!(id);
    payload["comment"]["user"]["login"] = json!(login);
    payload["comment"]["body"] = json!(body);
    serde_json::to_vec(&payload).expect("JSON")
}

/// The goal `g`, bound to prfix for pull request #1 (so it follows it), with `olivia`'s
/// pending gate `naming`; her GitHub login mapped when `mapped`.
async fn gated(store: &dyn Store, mapped: bool) {
    let spec = GoalSpec::builder("g", "the pull request is green", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .criterion(
            Criterion::new(
                "green",
                "CI is green",
                "ci.green",
                format!("pr:{REPO}#1").as_str(),
            )
            .expect("ids"),
        )
        .capability("prfix", json!({ "pulls": [format!("{REPO}#1")] }))
        .build()
        .expect("valid ids");
    let handle = store.goal(&spec.id);
    handle
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
    let olivia = Actor::Person(PersonId::new("olivia").expect("an id"));
    if mapped {
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
    }
    let gate = NewGate {
        id: gate_id(),
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
}

/// The intent the service commits for the gate, committed by hand, as a crash after the
/// intent leaves it.
async fn intend_by_hand(w: &World) -> EffectIntent {
    let params = [
        ("repo".to_owned(), REPO.to_owned()),
        ("number".to_owned(), "1".to_owned()),
        (
            "body".to_owned(),
            notice_body(&gate_id(), "is error_code acceptable as a stable field?"),
        ),
    ]
    .into_iter()
    .collect();
    let effect = EffectIntent::new(
        EffectId::new("gate-notice-naming").expect("an id"),
        "github.comment",
        format!("{REPO}#1"),
        gate_notice_key(&goal(), &gate_id()),
        params,
    );
    w.store
        .goal(&goal())
        .submit(
            &provider(),
            SystemClock.now(),
            &Command::IntendGateNotice {
                gate: gate_id(),
                effect: effect.clone(),
            },
        )
        .await
        .expect("intended");
    effect
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_owners_gate_gets_one_comment_after_deliveries_and_polls() {
    let w = World::new(true).await;
    w.deliver("d-1").await;
    let comments = w.comments();
    assert_eq!(comments.len(), 1, "{comments:?}");
    let body = &comments[0];
    assert!(body.contains("`naming`"), "{body}");
    assert!(
        body.contains("is error_code acceptable as a stable field?"),
        "{body}"
    );
    assert!(body.contains("/loopx answer naming "), "{body}");
    assert!(body.contains("/loopx reject naming "), "{body}");
    let notice = w.state().await.gate_notices[&gate_id()].clone();
    assert_eq!(notice.outcome, Some(EffectOutcome::Performed));
    assert_eq!(notice.provider.as_str(), "github");

    w.deliver("d-2").await;
    w.deliver("d-1").await; // a redelivery
    w.poll().await;
    assert_eq!(w.comments().len(), 1, "{:?}", w.comments());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_intent_and_the_post_ends_with_one_comment() {
    let w = World::new(true).await;
    intend_by_hand(&w).await;
    assert!(w.comments().is_empty());
    assert!(w.state().await.gate_notices[&gate_id()].is_pending());

    w.poll().await;
    assert_eq!(w.comments().len(), 1, "{:?}", w.comments());
    assert_eq!(
        w.state().await.gate_notices[&gate_id()].outcome,
        Some(EffectOutcome::Performed)
    );
    w.deliver("d-1").await;
    w.poll().await;
    assert_eq!(w.comments().len(), 1, "{:?}", w.comments());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_post_and_its_record_is_read_back_not_posted_again() {
    let w = World::new(true).await;
    let effect = intend_by_hand(&w).await;
    let notice = w.state().await.gate_notices[&gate_id()].clone();
    assert_eq!(notice.effect, effect);
    w.github
        .perform(&notice.effect(&goal(), &gate_id()))
        .await
        .expect("posted");
    assert_eq!(w.comments().len(), 1);

    w.deliver("d-1").await;
    assert_eq!(w.comments().len(), 1, "{:?}", w.comments());
    assert_eq!(
        w.state().await.gate_notices[&gate_id()].outcome,
        Some(EffectOutcome::Performed)
    );
}

/// Deliveries and a poll at once, while GitHub is slow to answer the post: one pass posts the
/// notice, the others wait for it and find it performed; every delivery is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_at_once_post_one_notice_and_every_delivery_is_taken() {
    let w = World::answering(true, StdDuration::from_millis(300)).await;
    let deliveries: Vec<String> = (0..6).map(|i| format!("d-at-once-{i}")).collect();
    let posting = deliveries.iter().map(|d| w.deliver(d));
    futures::future::join(futures::future::join_all(posting), w.poll()).await;

    assert_eq!(w.comments().len(), 1, "{:?}", w.comments());
    assert_eq!(
        w.state().await.gate_notices[&gate_id()].outcome,
        Some(EffectOutcome::Performed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmapped_owners_gate_gets_no_comment() {
    let w = World::new(false).await;
    w.deliver("d-1").await;
    w.poll().await;
    assert!(w.comments().is_empty(), "{:?}", w.comments());
    assert!(w.state().await.gate_notices.is_empty());
}
