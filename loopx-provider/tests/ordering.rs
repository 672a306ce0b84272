//! GitHub does not deliver in order. Short real sequences of deliveries, received in every
//! order, are recorded through the kernel's write rule; whatever the order, the goal ends with
//! the newest state of each stream, and a late delivery of an older state never moves a fact
//! back (the observation carries the object's own time, and the kernel records nothing older
//! than its stream's current observation).

use std::path::PathBuf;

use loopx_kernel::{
    Actor, Command, Duration, GoalSpec, GoalState, Limits, Observation, ObservationKey, SourceId,
    Subject, Timestamp,
};
use loopx_provider::github::webhook::WebhookVerifier;

const SECRET: &str = "It's a Secret to Everybody";
const NEW_HEAD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn read(folder: &str, file: &str) -> serde_json::Value {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures", folder, file]
        .iter()
        .collect();
    serde_json::from_slice(&std::fs::read(&path).expect("fixture")).expect("json")
}

fn example(file: &str) -> serde_json::Value {
    read("github-webhooks", file)
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("ts")
}

fn goal() -> GoalState {
    let spec = GoalSpec::builder("hello-world", "merge the README change", "maintainer")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .build()
        .expect("spec");
    GoalState::create(&spec.owner_actor(), now(), &spec).expect("goal")
}

/// One delivery: the event and its body.
#[derive(Clone)]
struct Delivery {
    name: &'static str,
    event: &'static str,
    body: Vec<u8>,
}

fn delivery(name: &'static str, event: &'static str, body: &serde_json::Value) -> Delivery {
    Delivery {
        name,
        event,
        body: serde_json::to_vec(body).expect("json"),
    }
}

/// Receives the deliveries in `order` (a minute apart, as the service would) and records each
/// observation as the provider; returns the goal and how many were recorded.
fn receive(deliveries: &[&Delivery]) -> (GoalState, usize) {
    let verifier = WebhookVerifier::new(SECRET);
    let provider = Actor::Provider(SourceId::new("github").expect("id"));
    let mut goal = goal();
    let mut recorded = 0;
    for (n, delivery) in deliveries.iter().enumerate() {
        let at = now().plus(Duration::minutes(1 + i64::try_from(n).expect("small")));
        let observation: Observation = verifier
            .ingest(
                delivery.event,
                Some(&verifier.sign(&delivery.body)),
                &delivery.body,
                at,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", delivery.name));
        let events = goal
            .handle(&provider, at, &Command::RecordObservation { observation })
            .expect("recorded or dropped, never refused");
        recorded += events.len();
    }
    (goal, recorded)
}

/// Every order of `items`.
fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first.clone());
            out.push(tail);
        }
    }
    out
}

/// Receives `sequence` in every order: each ends with the facts the in-order run ends with,
/// on stream `key`, and with the same revision of `subject`.
fn every_order_ends_alike(sequence: &[Delivery], key: &str, subject: &str) -> Observation {
    let key = ObservationKey::new(key).expect("key");
    let subject = Subject::new(subject).expect("subject");
    let in_order: Vec<&Delivery> = sequence.iter().collect();
    let (expected, _) = receive(&in_order);
    let last = expected.observations[&key].clone();
    let head = expected.subjects[&subject].revision.clone();
    for order in permutations(&in_order) {
        let names: Vec<&str> = order.iter().map(|d| d.name).collect();
        let (goal, _) = receive(&order);
        let current = &goal.observations[&key];
        assert_eq!(current.facts, last.facts, "received as {names:?}");
        assert_eq!(
            current.fingerprint, last.fingerprint,
            "received as {names:?}"
        );
        assert_eq!(
            goal.subjects[&subject].revision, head,
            "received as {names:?}: the subject's revision"
        );
    }
    last
}

/// opened → synchronize (a new head) → closed, from GitHub's example payloads.
fn pull_request_sequence() -> Vec<Delivery> {
    let opened = example("pull_request/opened.payload.json");
    let mut synchronize = example("pull_request/synchronize.payload.json");
    synchronize["pull_request"]["head"]["sha"] = NEW_HEAD.into();
    synchronize["pull_request"]["updated_at"] = "2019-05-15T15:20:50Z".into();
    let mut closed = example("pull_request/closed.payload.json");
    closed["pull_request"]["head"]["sha"] = NEW_HEAD.into();
    vec![
        delivery("opened", "pull_request", &opened),
        delivery("synchronize", "pull_request", &synchronize),
        delivery("closed", "pull_request", &closed),
    ]
}

#[test]
fn a_late_opened_after_closed_does_not_reopen_the_pull_request() {
    let sequence = pull_request_sequence();
    let (goal, recorded) = receive(&[&sequence[2], &sequence[0]]);
    let pr = &goal.observations[&ObservationKey::new("pr:Codertocat/Hello-World#2").expect("key")];
    assert_eq!(
        pr.facts["status"], "closed",
        "the late `opened` changed nothing"
    );
    assert_eq!(recorded, 1, "only `closed` was recorded");
}

#[test]
fn a_pull_request_received_in_every_order_ends_closed_at_its_last_head() {
    let last = every_order_ends_alike(
        &pull_request_sequence(),
        "pr:Codertocat/Hello-World#2",
        "pr:Codertocat/Hello-World#2",
    );
    assert_eq!(last.facts["status"], "closed");
    assert_eq!(last.facts["head_sha"], NEW_HEAD);
    assert_eq!(last.revision.as_str(), format!("git:{NEW_HEAD}"));
}

#[test]
fn a_check_run_received_in_every_order_ends_completed() {
    // queued → in progress → completed: one run, stamped with the same `started_at`.
    let created = example("check_run/created.payload.json");
    let mut in_progress = created.clone();
    in_progress["action"] = "created".into();
    in_progress["check_run"]["status"] = "in_progress".into();
    let completed = example("check_run/completed.payload.json");
    let last = every_order_ends_alike(
        &[
            delivery("queued", "check_run", &created),
            delivery("in_progress", "check_run", &in_progress),
            delivery("completed", "check_run", &completed),
        ],
        "check:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821/Octocoders-linter",
        "commit:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    );
    assert_eq!(last.facts["status"], "completed");
    assert_eq!(last.facts["verdict"], "passing");
}

#[test]
fn a_rerun_after_a_failure_orders_after_it() {
    // The failed run, then its re-run queued later: the re-run stands, in either order.
    let failed = example("check_run/completed.1.payload.json");
    let mut rerun = example("check_run/created.payload.json");
    rerun["check_run"]["id"] = 128_620_229.into();
    rerun["check_run"]["started_at"] = "2019-05-15T15:25:00Z".into();
    let last = every_order_ends_alike(
        &[
            delivery("failed", "check_run", &failed),
            delivery("rerun", "check_run", &rerun),
        ],
        "check:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821/Octocoders-linter",
        "commit:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    );
    assert_eq!(last.facts["verdict"], "pending", "the re-run is queued");
}

#[test]
fn a_workflow_job_and_its_run_received_in_every_order_end_completed() {
    let job = |file: &str| read("github-deliveries", &format!("workflow_job/{file}"));
    let last = every_order_ends_alike(
        &[
            delivery("queued", "workflow_job", &job("queued.payload.json")),
            delivery(
                "in_progress",
                "workflow_job",
                &job("in_progress.payload.json"),
            ),
            delivery("completed", "workflow_job", &job("completed.payload.json")),
        ],
        "job:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821/CI/test",
        "commit:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    );
    assert_eq!(last.facts["verdict"], "failing");
    let run = |file: &str| read("github-deliveries", &format!("workflow_run/{file}"));
    let last = every_order_ends_alike(
        &[
            delivery("requested", "workflow_run", &run("requested.payload.json")),
            delivery(
                "in_progress",
                "workflow_run",
                &run("in_progress.payload.json"),
            ),
            delivery("completed", "workflow_run", &run("completed.payload.json")),
        ],
        "workflow:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821/CI",
        "commit:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821",
    );
    assert_eq!(last.facts["verdict"], "passing");
}

#[test]
fn the_same_delivery_twice_is_one_observation() {
    let sequence = pull_request_sequence();
    let (_, recorded) = receive(&[&sequence[0], &sequence[0], &sequence[0]]);
    assert_eq!(recorded, 1);
}
