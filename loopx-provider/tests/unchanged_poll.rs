//! End to end through the kernel: an unchanged poll produces no event and charges nothing.

use loopx_kernel::submit;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use loopx_kernel::seams::{ObserveRequest, Provider, ProviderError};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Duration, Event, GoalId, GoalSpec, GoalState, Limits,
    MonitorSpec, NewTodo, Observation, ObservationKey, PersonId, Policy, Settlement, SourceId,
    Timestamp, TodoClass, TodoId, Transition, TurnId, Verdict, VerdictOutcome,
};
use loopx_provider::github::webhook::parse_event;
use loopx_provider::layers::{FingerprintCache, Record, Replay, Tape};

const KEY: &str =
    "check:Codertocat/Hello-World@ec26c3e57ca3a959ca5aad62de7213c562f8c821/Octocoders-linter";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/github-webhooks/check_run")
            .join(name),
    )
    .expect("fixture")
}

/// A provider that serves the check run of a fixture file, switchable between files.
struct CheckRunFixture {
    source: SourceId,
    file: Arc<Mutex<&'static str>>,
    now: Arc<Mutex<Timestamp>>,
}

#[async_trait]
impl Provider for CheckRunFixture {
    fn source(&self) -> &SourceId {
        &self.source
    }
    async fn observe(&self, _: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let file = *self.file.lock().expect("file");
        let event = parse_event("check_run", &fixture(file))
            .map_err(|e| ProviderError::Failed(e.to_string()))?;
        let now = *self.now.lock().expect("now");
        Ok(vec![
            event
                .observation(now)
                .map_err(|e| ProviderError::Failed(e.to_string()))?,
        ])
    }
}

fn goal(now: Timestamp) -> (GoalState, AgentId) {
    let owner = PersonId::new("maintainer").expect("id");
    let agent = AgentId::new("agent-a").expect("id");
    let spec = GoalSpec {
        id: GoalId::new("hello-world").expect("id"),
        objective: "get the README change merged".into(),
        owner: owner.clone(),
        criteria: vec![],
        agents: [agent.clone()].into(),
        budget: Limits {
            turns: Some(10),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    };
    let mut goal = GoalState::create(&Actor::Person(owner), now, &spec).expect("goal");
    let mut watch = NewTodo::advance(TodoId::new("watch-ci").expect("id"), "watch the linter");
    watch.class = TodoClass::Monitor(MonitorSpec {
        watches: ObservationKey::new(KEY).expect("id"),
        cadence: Duration::minutes(30),
    });
    goal.handle(
        &Actor::Agent(agent.clone()),
        now,
        &Command::AddTodo { todo: watch },
    )
    .expect("add");
    (goal, agent)
}

/// Claims the monitor, runs one turn that reports `observations`, settles it; returns the
/// settled event's charge.
fn poll(
    goal: &mut GoalState,
    agent: &AgentId,
    now: Timestamp,
    turn: &str,
    observations: Vec<Observation>,
) -> Amounts {
    let me = Actor::Agent(agent.clone());
    let todo = TodoId::new("watch-ci").expect("id");
    goal.handle(
        &me,
        now,
        &Command::Claim {
            todo: todo.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        },
    )
    .expect("claim");
    let epoch = goal.todos[&todo].lease.as_ref().expect("lease").epoch;
    let turn = TurnId::new(turn).expect("id");
    goal.handle(
        &me,
        now,
        &Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: None,
        },
    )
    .expect("begin");
    let events = goal
        .handle(
            &me,
            now,
            &Command::SettleTurn(Settlement {
                todo,
                epoch,
                turn,
                verdict: Verdict {
                    validator: Actor::Validator(SourceId::new("ci-reader").expect("id")),
                    outcome: VerdictOutcome::Progress,
                    summary: "polled".into(),
                    signature: None,
                },
                evidence: vec![],
                observations,
                transition: Transition::KeepOpen,
                // The executor claims it used a turn: the kernel still charges nothing when quiet.
                usage: Amounts::ONE_TURN,
                failure: None,
            }),
        )
        .expect("settle");
    events
        .iter()
        .find_map(|e| match &e.event {
            Event::TurnSettled { charged, .. } => Some(*charged),
            _ => None,
        })
        .expect("settled")
}

#[tokio::test]
async fn an_unchanged_poll_produces_no_event_and_no_charge() {
    let t0 = Timestamp::parse("2026-11-29T10:00:00Z").expect("ts");
    let file = Arc::new(Mutex::new("completed.payload.json"));
    let clock = Arc::new(Mutex::new(t0));
    let provider = CheckRunFixture {
        source: SourceId::new("github").expect("id"),
        file: Arc::clone(&file),
        now: Arc::clone(&clock),
    };
    let tape = Arc::new(Mutex::new(Tape::default()));
    let recorded = Record::new(provider, Arc::clone(&tape));
    let request = ObserveRequest {
        key: ObservationKey::new(KEY).expect("id"),
        known: None,
        etag: None,
    };
    let (mut goal, agent) = goal(t0);
    let as_provider = Actor::Provider(SourceId::new("github").expect("id"));

    // First poll: a new fact, one event.
    let first = recorded.observe(&request).await.expect("observe");
    let events = goal
        .handle(
            &as_provider,
            t0,
            &Command::RecordObservation {
                observation: first[0].clone(),
            },
        )
        .expect("record");
    assert_eq!(events.len(), 1);
    let revision = goal.revision;

    // Second poll, later, same fact: same fingerprint, no event, the goal does not move.
    let t1 = t0.plus(Duration::minutes(30));
    *clock.lock().expect("now") = t1;
    let again = recorded.observe(&request).await.expect("observe");
    assert_eq!(again[0].fingerprint, first[0].fingerprint);
    assert_ne!(again[0].observed_at, first[0].observed_at);
    let events = goal
        .handle(
            &as_provider,
            t1,
            &Command::RecordObservation {
                observation: again[0].clone(),
            },
        )
        .expect("record");
    assert!(
        events.is_empty(),
        "an unchanged observation is a no-op: {events:?}"
    );
    assert_eq!(goal.revision, revision);

    // A monitor turn that saw only the unchanged fact is charged nothing.
    let spent = goal.ledger.spent;
    let charged = poll(&mut goal, &agent, t1, "poll-1", again.clone());
    assert_eq!(charged, Amounts::ZERO);
    assert_eq!(goal.ledger.spent, spent);

    // The check fails: a changed fingerprint is recorded and the turn is charged.
    let t2 = t1.plus(Duration::minutes(30));
    *file.lock().expect("file") = "completed.1.payload.json";
    *clock.lock().expect("now") = t2;
    let failing = recorded.observe(&request).await.expect("observe");
    assert_ne!(failing[0].fingerprint, first[0].fingerprint);
    assert_eq!(failing[0].facts["verdict"], "failing");
    let charged = poll(&mut goal, &agent, t2, "poll-2", failing.clone());
    assert_eq!(charged.turns, 1);
    assert_eq!(goal.ledger.spent.turns, spent.turns + 1);

    // The same three polls replayed through the fingerprint cache: the unchanged one is gone
    // before it reaches the kernel.
    let tape = tape.lock().expect("tape").clone();
    assert_eq!(tape.entries.len(), 3);
    let cached = FingerprintCache::new(Replay::new(SourceId::new("github").expect("id"), tape));
    let seen: Vec<usize> = [
        cached.observe(&request).await.expect("replay").len(),
        cached.observe(&request).await.expect("replay").len(),
        cached.observe(&request).await.expect("replay").len(),
    ]
    .into();
    assert_eq!(seen, [1, 0, 1]);
    assert!(
        cached.observe(&request).await.is_err(),
        "the tape is exhausted"
    );
}

/// The same through a durable path: the memory store behind `submit`. An unchanged poll commits
/// only a no-op receipt: no event, no new revision, nothing charged.
#[tokio::test]
async fn an_unchanged_poll_through_the_memory_store_records_nothing() {
    use loopx_kernel::OperationId;
    use loopx_kernel::seams::Store;
    use loopx_store::MemoryStore;

    let t0 = Timestamp::parse("2026-11-29T10:00:00Z").expect("ts");
    let provider = CheckRunFixture {
        source: SourceId::new("github").expect("id"),
        file: Arc::new(Mutex::new("completed.payload.json")),
        now: Arc::new(Mutex::new(t0)),
    };
    let request = ObserveRequest {
        key: ObservationKey::new(KEY).expect("id"),
        known: None,
        etag: None,
    };
    let store = MemoryStore::new();
    let (created, _) = goal(t0);
    let id = created.spec.id.clone();
    let owner = Actor::Person(created.spec.owner.clone());
    let create = Command::CreateGoal {
        spec: created.spec.clone(),
    };
    let op = |n: &str| OperationId::new(n).expect("id");
    submit(&store, &id, &owner, t0, &create, &op("create"))
        .await
        .expect("create");
    let as_provider = Actor::Provider(SourceId::new("github").expect("id"));
    let mut revisions = Vec::new();
    let mut event_counts = Vec::new();
    for (n, minutes) in [0, 30, 60].into_iter().enumerate() {
        let now = t0.plus(Duration::minutes(minutes));
        *provider.now.lock().expect("now") = now;
        let observation = provider.observe(&request).await.expect("observe")[0].clone();
        let command = Command::RecordObservation { observation };
        let done = submit(
            &store,
            &id,
            &as_provider,
            now,
            &command,
            &op(&format!("poll-{n}")),
        )
        .await
        .expect("poll");
        event_counts.push(done.events.len());
        revisions.push(done.receipt.revision);
    }
    assert_eq!(event_counts, [1, 0, 0], "only the first poll is new");
    assert_eq!(revisions[1], revisions[0]);
    assert_eq!(revisions[2], revisions[0]);
    let stored = store.load(&id).await.expect("load").expect("goal");
    assert_eq!(stored.revision, revisions[0]);
    assert_eq!(stored.ledger.spent, Amounts::ZERO);
    let history = store.events(&id, 0, 100).await.expect("events");
    assert_eq!(history.len() as u64, stored.revision);
}

#[path = "support/github.rs"]
mod standin;

/// The ETags of a poll travel in the observation the goal stores, so the first poll after a
/// restart (a new store handle, a new client that remembers nothing) asks GitHub "changed since
/// these?" and an unchanged pull request costs one `304` per request and records nothing.
#[tokio::test]
async fn an_unchanged_poll_after_a_restart_costs_only_304s() {
    use loopx_kernel::prelude::*;
    use loopx_provider::clock::SystemClock;
    use loopx_provider::github::rest::{GitHubClient, Token};
    use loopx_store::SqliteStore;
    use standin::serve;

    let conclusion = Arc::new(Mutex::new("success"));
    let answered: Arc<Mutex<Vec<u16>>> = Arc::default();
    let server = serve(conditional_github(
        Arc::clone(&conclusion),
        Arc::clone(&answered),
    ))
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("loopx.db");
    let key = ObservationKey::new("pr:acme/cli#12").expect("key");
    let spec = GoalSpec::builder("json-output", "add --format json", "maintainer")
        .agent("agent-a")
        .budget(Limits::turns(5))
        .declared_identity()
        .build()
        .expect("spec");
    let engine = |store: Arc<SqliteStore>| {
        let client = GitHubClient::new(
            SourceId::new("github").expect("id"),
            &server.base,
            Some(Token::new("ghp_test")),
            Duration::seconds(5),
            Arc::new(SystemClock),
        )
        .expect("client");
        let agent = executor_fn(|turn| async move { Ok(TurnReport::complete(turn.title)) });
        let check =
            validator_fn("tests", |_, _| async { Ok(Validation::passed("ok")) }).expect("check");
        Engine::builder(
            "agent-a".parse().expect("agent"),
            store,
            Arc::new(SystemClock),
            agent,
            check,
        )
        .watch(Arc::new(client), key.clone(), Duration::ZERO)
        .build()
    };
    let statuses = || answered.lock().expect("answers").clone();

    let store = Arc::new(SqliteStore::create(&path).expect("store"));
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("create");
    let first = engine(Arc::clone(&store))
        .step(&spec.id)
        .await
        .expect("step");
    assert!(first.observed.contains(&key), "{:?}", first.observed);
    let recorded = store.load(&spec.id).await.expect("load").expect("goal");
    assert!(
        recorded.observations[&key].etag.is_some(),
        "the tag is kept"
    );
    assert_eq!(statuses(), [200; 4], "pull, reviews, check runs, status");
    let polled = 4;
    drop(store);

    // A restart: the store opened again, a client with an empty memory.
    let store = Arc::new(SqliteStore::open(&path).expect("reopen"));
    let second = engine(Arc::clone(&store))
        .step(&spec.id)
        .await
        .expect("step");
    assert!(second.observed.is_empty(), "{:?}", second.observed);
    assert_eq!(
        store
            .load(&spec.id)
            .await
            .expect("load")
            .expect("goal")
            .revision,
        recorded.revision,
        "an unchanged poll records nothing"
    );
    assert_eq!(
        statuses()[polled..],
        [304; 4],
        "one 304 per request, nothing more"
    );
    assert!(
        server.seen.lock().expect("log")[polled..]
            .iter()
            .all(|s| s.headers.contains_key("if-none-match"))
    );

    // The check fails: the tag no longer holds, the poll reads again and records it.
    *conclusion.lock().expect("conclusion") = "failure";
    let third = engine(Arc::clone(&store))
        .step(&spec.id)
        .await
        .expect("step");
    let ci = ObservationKey::new("ci:acme/cli#12").expect("key");
    assert!(third.observed.contains(&ci), "{:?}", third.observed);
}

/// A pull request answered as conditional `GET`s with `ETag`s, its one check concluding as
/// `conclusion` says; each answer's status is kept in `answered`.
fn conditional_github(
    conclusion: Arc<Mutex<&'static str>>,
    answered: Arc<Mutex<Vec<u16>>>,
) -> standin::Handler {
    use standin::{Seen, conditional, ok, route};

    const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
    let now_failing = conclusion;
    let answers = answered;
    Arc::new(move |seen: &Seen| {
        let checks = format!(
            r#"{{"total_count": 1, "check_runs": [{{"id": 1, "name": "test", "head_sha": "{SHA}",
            "status": "completed", "conclusion": "{}"}}]}}"#,
            now_failing.lock().expect("conclusion")
        );
        let body = match route(seen) {
            "/repos/acme/cli/pulls/12" => format!(
                r#"{{"number": 12, "state": "open", "title": "t", "head": {{"ref": "h", "sha": "{SHA}"}},
                "base": {{"ref": "main", "sha": "{SHA}"}}, "updated_at": "2026-11-29T09:00:00Z"}}"#
            ),
            "/repos/acme/cli/pulls/12/reviews" => "[]".to_owned(),
            p if p.ends_with("/check-runs") => checks,
            p if p.ends_with("/status") => r#"{"state": "success", "statuses": []}"#.to_owned(),
            _ => "{}".to_owned(),
        };
        let reply = conditional(seen, ok(&body));
        answers.lock().expect("answers").push(reply.status);
        reply
    })
}
