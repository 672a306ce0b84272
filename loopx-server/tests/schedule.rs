//! The schedules over real HTTP on loopback, against the stand-in for GitHub's REST API that
//! the provider's tests serve: a goal bound to prfix is polled with no delivery at all and its
//! failing check becomes the fix todo; an unchanged stream costs a `304` to the stored tag and
//! writes nothing, also after a restart on the same SQLite file; a rate-limited source waits
//! for its reset while another source keeps polling; the poller stops with the service's
//! signal; `/metrics` counts the polls.

mod support;

#[path = "../../loopx-provider/tests/support/github.rs"]
mod standin;

use std::sync::{Arc, Mutex};

use loopx_capability_prfix::{PrFix, PrFixConfig};
use loopx_kernel::prelude::*;
use loopx_kernel::seams::Provider;
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::{GitHubClient, Token};
use loopx_server::Service;
use loopx_server::capabilities::{Bound, Registry};
use loopx_server::schedule::{Pass, PollOutcome, Poller};
use loopx_store::SqliteStore;
use serde_json::json;
use standin::{Seen, not_found, pull_request, rate_limited, route};

const REPO: &str = "Codertocat/Hello-World";
const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
const FIX: &str = "pr:Codertocat/Hello-World#2/ci-fix@ec26c3e57ca3";
const START: &str = "2026-11-29T10:00:00Z";

/// How the stand-in answers: the check run's conclusion, and a rate limit until a reset.
struct World {
    conclusion: &'static str,
    limited_until: Option<Timestamp>,
}

/// Pull request #2 of [`REPO`] as GitHub's REST API serves it to a poll, its one check run
/// concluding as `world` says; `403` with `x-ratelimit-remaining: 0` while it is rate limited.
fn github(world: Arc<Mutex<World>>) -> standin::Handler {
    Arc::new(move |seen: &Seen| {
        let world = world.lock().expect("world");
        if let Some(reset) = world.limited_until {
            return rate_limited(reset.as_millis() / 1000);
        }
        pull_request(seen, REPO, 2, SHA, world.conclusion).unwrap_or_else(not_found)
    })
}

fn world(conclusion: &'static str) -> Arc<Mutex<World>> {
    Arc::new(Mutex::new(World {
        conclusion,
        limited_until: None,
    }))
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("a timestamp")
}

fn client(source: &str, base: &str, clock: Arc<dyn Clock>) -> Arc<dyn Provider> {
    Arc::new(
        GitHubClient::new(
            SourceId::new(source).expect("an id"),
            base,
            Some(Token::new("ghp_test")),
            Duration::seconds(5),
            clock,
        )
        .expect("a client"),
    )
}

/// A declared goal bound to `capability` for pull request #2, following it.
async fn bound_goal(store: &dyn Store, id: &str, capability: &str, now: Timestamp) {
    let pull = format!("pr:{REPO}#2");
    let spec = GoalSpec::builder(id, "the pull request is green", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .criterion(Criterion::new("green", "CI is green", "ci.green", pull.as_str()).expect("ids"))
        .capability(capability, json!({ "pulls": [format!("{REPO}#2")] }))
        .build()
        .expect("valid ids");
    store
        .goal(&spec.id)
        .create(&spec, now)
        .await
        .expect("created");
}

async fn state(store: &dyn Store, goal: &str) -> GoalState {
    store
        .load(&goal.parse().expect("an id"))
        .await
        .expect("loads")
        .expect("exists")
}

fn outcomes(pass: &Pass) -> Vec<(String, PollOutcome)> {
    pass.polls
        .iter()
        .map(|poll| (poll.goal.to_string(), poll.outcome))
        .collect()
}

fn seen(server: &standin::Server) -> Vec<Seen> {
    server.seen.lock().expect("log").clone()
}

/// The SQLite store in `dir`: created on the first call, opened again on the next ones.
fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("loopx.db");
    let store = if path.exists() {
        SqliteStore::open(&path)
    } else {
        SqliteStore::create(&path)
    };
    Arc::new(store.expect("a SQLite store"))
}

/// With no delivery at all, the service's poller polls the bound goal's pull request, records
/// the failing check and proposes the fix in the same pass; `/metrics` counts the poll; the
/// poller stops when the service's signal comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_is_polled_and_becomes_the_fix_todo_without_a_delivery() {
    let server = standin::serve(github(world("failure"))).await;
    let dir = tempfile::tempdir().expect("a directory");
    let store = sqlite(&dir);
    bound_goal(&*store, "fix", "prfix", SystemClock.now()).await;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let poller = Poller::new(Arc::clone(&store), Arc::clone(&clock))
        .provider(client("github", &server.base, Arc::clone(&clock)))
        .max_wait(Duration::from_millis(200));
    let base = support::on_loopback(
        Service::new(Arc::clone(&store), Arc::clone(&clock))
            .poller(&poller)
            .router(),
    )
    .await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(poller.run(async move {
        let _ = stopped.await;
    }));

    let mut fixed = false;
    for _ in 0..100 {
        if state(&*store, "fix")
            .await
            .pending_todos()
            .any(|todo| todo.id.as_str() == FIX)
        {
            fixed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(fixed, "the poll of the pull request became the fix todo");
    assert!(
        seen(&server)
            .iter()
            .any(|s| route(s) == format!("/repos/{REPO}/commits/{SHA}/check-runs")),
        "the check runs of the head were read"
    );

    let (status, metrics) = support::answer(
        reqwest::get(format!("{base}/metrics"))
            .await
            .expect("metrics"),
    )
    .await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().expect("Prometheus text").to_owned();
    assert!(
        metrics.contains(r#"loopx_polls_total{source="github",outcome="changed"} 1"#),
        "{metrics}"
    );

    stop.send(()).expect("the poller listens");
    tokio::time::timeout(std::time::Duration::from_secs(5), running)
        .await
        .expect("the poller stops with the signal")
        .expect("it did not panic");
}

/// The second poll of an unchanged stream sends the stored `ETag` as `If-None-Match`, is
/// answered `304` and writes nothing; a new store handle and poller on the same SQLite file
/// (a restart) sends it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_poll_costs_a_304_and_no_commit_also_after_a_restart() {
    let server = standin::serve(github(world("success"))).await;
    let dir = tempfile::tempdir().expect("a directory");
    let clock = Arc::new(ManualClock::new(at(START)));
    let poller = |store: Arc<dyn Store>| {
        Poller::new(store, clock.clone())
            .provider(client("github", &server.base, clock.clone()))
            .every(Duration::seconds(30))
    };
    let store = sqlite(&dir);
    bound_goal(&*store, "green", "prfix", clock.now()).await;
    let first = poller(Arc::clone(&store));

    let pass = first.pass().await.expect("a pass");
    assert_eq!(outcomes(&pass), [("green".into(), PollOutcome::Changed)]);
    let recorded = state(&*store, "green").await;
    let tag = recorded.observations[&"pr:Codertocat/Hello-World#2".parse().expect("a key")]
        .etag
        .clone()
        .expect("the poll's tag is kept with the observation");
    assert_eq!(pass.next_due, Some(clock.now().plus(Duration::seconds(30))));

    // Not due yet: nothing is asked.
    let asked = seen(&server).len();
    clock.advance(Duration::seconds(10));
    assert!(first.pass().await.expect("a pass").polls.is_empty());
    assert_eq!(seen(&server).len(), asked, "a stream not due is not polled");

    // Due: every request of the poll is conditional, each answered 304, nothing written.
    clock.advance(Duration::seconds(25));
    let pass = first.pass().await.expect("a pass");
    assert_eq!(outcomes(&pass), [("green".into(), PollOutcome::Unchanged)]);
    let stored: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&tag).expect("the tag holds each request's ETag");
    let conditional_polls = |from: usize| {
        let log = seen(&server);
        assert!(log.len() > from, "the stream was polled");
        for request in &log[from..] {
            let sent = request.headers.get("if-none-match");
            assert_eq!(
                sent,
                stored.get(&request.path),
                "{} sent the stored ETag",
                request.path
            );
        }
        log.len()
    };
    let asked = conditional_polls(asked);
    assert_eq!(
        state(&*store, "green").await.revision,
        recorded.revision,
        "a 304 writes no commit"
    );

    // A restart: a new handle on the same file, a new poller that remembers nothing.
    drop(first);
    drop(store);
    let store = sqlite(&dir);
    clock.advance(Duration::seconds(31));
    let pass = poller(Arc::clone(&store)).pass().await.expect("a pass");
    assert_eq!(outcomes(&pass), [("green".into(), PollOutcome::Unchanged)]);
    conditional_polls(asked);
    assert_eq!(state(&*store, "green").await.revision, recorded.revision);
}

/// A capability that polls pull requests as prfix does, through the provider of source
/// `mirror`: a goal on another source than `github`.
fn with_mirror() -> Registry {
    Registry::shipped().with_config("mirror", |name: &SourceId, config: PrFixConfig| {
        let keys = config.pull_keys();
        let capability = PrFix::new(name.clone(), config)
            .map_err(|e| loopx_server::capabilities::ConfigProblem::refused(&e))?;
        let mirror = SourceId::new("mirror").expect("an id");
        Ok(keys.into_iter().fold(Bound::new(capability), |bound, key| {
            bound.watch(mirror.clone(), key)
        }))
    })
}

/// GitHub answers `403` with `x-ratelimit-remaining: 0`: that source is not asked again
/// before the reset (a second goal on it is skipped as backed off, with no request), while a
/// goal on another source keeps polling; after the reset both goals on it are polled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_source_waits_for_its_reset_and_others_keep_polling() {
    let limited = world("failure");
    let reset = at(START).plus(Duration::seconds(60));
    limited.lock().expect("world").limited_until = Some(reset);
    let github_server = standin::serve(github(Arc::clone(&limited))).await;
    let mirror_server = standin::serve(github(world("failure"))).await;
    let dir = tempfile::tempdir().expect("a directory");
    let store = sqlite(&dir);
    let clock = Arc::new(ManualClock::new(at(START)));
    bound_goal(&*store, "a-limited", "prfix", clock.now()).await;
    bound_goal(&*store, "b-mirror", "mirror", clock.now()).await;
    bound_goal(&*store, "c-limited", "prfix", clock.now()).await;
    let poller = Poller::new(Arc::clone(&store), clock.clone())
        .registry(with_mirror())
        .provider(client("github", &github_server.base, clock.clone()))
        .provider(client("mirror", &mirror_server.base, clock.clone()))
        .every(Duration::seconds(10));

    let pass = poller.pass().await.expect("a pass");
    assert_eq!(
        outcomes(&pass),
        [
            ("a-limited".into(), PollOutcome::Error),
            ("b-mirror".into(), PollOutcome::Changed),
            ("c-limited".into(), PollOutcome::BackedOff),
        ]
    );
    assert_eq!(seen(&github_server).len(), 1, "one request met the limit");
    assert!(
        state(&*store, "b-mirror")
            .await
            .pending_todos()
            .any(|todo| todo.id.as_str() == FIX),
        "the goal on the other source was polled and judged"
    );

    // Past the poll interval, before the reset: the limited source is not asked.
    clock.advance(Duration::seconds(30));
    let pass = poller.pass().await.expect("a pass");
    assert_eq!(
        outcomes(&pass),
        [
            ("a-limited".into(), PollOutcome::BackedOff),
            ("b-mirror".into(), PollOutcome::Unchanged),
            ("c-limited".into(), PollOutcome::BackedOff),
        ]
    );
    assert_eq!(
        seen(&github_server).len(),
        1,
        "no request to the limited source before its reset"
    );

    // After the reset the limit is lifted: both goals on it are polled.
    limited.lock().expect("world").limited_until = None;
    clock.advance(Duration::seconds(31));
    let pass = poller.pass().await.expect("a pass");
    assert_eq!(
        outcomes(&pass),
        [
            ("a-limited".into(), PollOutcome::Changed),
            ("b-mirror".into(), PollOutcome::Unchanged),
            ("c-limited".into(), PollOutcome::Changed),
        ]
    );
    for goal in ["a-limited", "c-limited"] {
        assert!(
            state(&*store, goal)
                .await
                .pending_todos()
                .any(|todo| todo.id.as_str() == FIX),
            "{goal} got its fix todo after the reset"
        );
    }
}

/// A pass looks at most `max_goals` goals, and the next goes on where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_is_bounded_and_the_next_goes_on_where_it_stopped() {
    let server = standin::serve(github(world("success"))).await;
    let dir = tempfile::tempdir().expect("a directory");
    let store = sqlite(&dir);
    let clock = Arc::new(ManualClock::new(at(START)));
    for goal in ["g1", "g2", "g3"] {
        bound_goal(&*store, goal, "prfix", clock.now()).await;
    }
    let poller = Poller::new(Arc::clone(&store), clock.clone())
        .provider(client("github", &server.base, clock.clone()))
        .max_goals(2);
    let goals_polled = |pass: Pass| {
        pass.polls
            .into_iter()
            .map(|poll| poll.goal.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        goals_polled(poller.pass().await.expect("a pass")),
        ["g1", "g2"]
    );
    assert_eq!(goals_polled(poller.pass().await.expect("a pass")), ["g3"]);
}
