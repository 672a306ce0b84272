//! Every REST listing follows GitHub's `Link` pagination, and review threads come from the
//! GraphQL API a page at a time: against the local stand-in over real HTTP on loopback, which
//! serves the pages and `Link` headers (and the GraphQL shape) as GitHub does.

use std::sync::{Arc, Mutex};

use loopx_kernel::ManualClock;
use loopx_kernel::seams::{Effect, EffectStatus, Effector, ObserveRequest, Provider};
use loopx_kernel::{GoalId, ObservationKey, SourceId, Timestamp, TodoId};
use loopx_provider::github::CiVerdict;
use loopx_provider::github::rest::{GitHubClient, GitHubError, Token};

#[path = "support/github.rs"]
mod standin;
use standin::{Reply, Seen, not_found, ok, paged, review_threads, route, serve};

const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Timestamp::parse("2026-11-29T10:00:00Z").expect("ts"),
    ))
}

fn client(base: &str) -> GitHubClient {
    client_on(base, clock())
}

fn client_on(base: &str, clock: Arc<ManualClock>) -> GitHubClient {
    GitHubClient::new(
        SourceId::new("github").expect("id"),
        base,
        Some(Token::new("ghp_test")),
        loopx_kernel::Duration::seconds(5),
        clock,
    )
    .expect("client")
}

fn pull() -> String {
    format!(
        r#"{{"number": 12, "state": "open", "title": "Add --format json", "draft": false,
        "user": {{"login": "octocat"}}, "head": {{"ref": "json", "sha": "{SHA}"}},
        "base": {{"ref": "main", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"}},
        "updated_at": "2026-11-29T09:00:00Z"}}"#
    )
}

/// `n` check runs at the head, all green but the one at `failing`.
fn check_runs(n: usize, failing: Option<usize>) -> Vec<serde_json::Value> {
    (0..n)
        .map(|i| {
            let conclusion = if Some(i) == failing {
                "failure"
            } else {
                "success"
            };
            serde_json::json!({
                "id": 1000 + i, "name": format!("job {i:03}"), "head_sha": SHA,
                "status": "completed", "conclusion": conclusion,
                "app": {"slug": "github-actions"}, "pull_requests": [{"number": 12}],
            })
        })
        .collect()
}

/// A pull request whose head has `runs` check runs and two reviews a page apart.
fn github(runs: Vec<serde_json::Value>) -> standin::Handler {
    let reviews: Vec<serde_json::Value> = (0..101)
        .map(|i| {
            let (login, state) = match i {
                0 => ("alice", "CHANGES_REQUESTED"),
                100 => ("alice", "APPROVED"),
                _ => ("bob", "COMMENTED"),
            };
            serde_json::json!({"id": i, "user": {"login": login}, "state": state, "commit_id": SHA})
        })
        .collect();
    Arc::new(move |seen: &Seen| {
        let checks = format!("/repos/acme/cli/commits/{SHA}/check-runs");
        let status = format!("/repos/acme/cli/commits/{SHA}/status");
        match route(seen) {
            "/repos/acme/cli/pulls/12" => ok(&pull()),
            "/repos/acme/cli/pulls/12/reviews" => paged(seen, &reviews, None),
            path if path == checks => paged(seen, &runs, Some("check_runs")),
            path if path == status => ok(r#"{"state": "success", "statuses": []}"#),
            _ => not_found(),
        }
    })
}

#[tokio::test]
async fn a_head_with_250_check_runs_and_one_failing_on_page_3_reads_red() {
    let server = serve(github(check_runs(250, Some(230)))).await;
    let client = client(&server.base);
    let request = ObserveRequest {
        key: ObservationKey::new("ci:acme/cli#12").expect("key"),
        known: None,
        etag: None,
    };
    let observations = client.observe(&request).await.expect("observe");
    let ci = observations
        .iter()
        .find(|o| o.key.as_str() == "ci:acme/cli#12")
        .expect("a roll-up");
    assert_eq!(ci.facts["verdict"], "failing");
    assert_eq!(ci.facts["items"], "250");
    assert_eq!(ci.facts["item.check:job 230"], "failing");
    let pages: Vec<String> = server
        .seen
        .lock()
        .expect("log")
        .iter()
        .filter(|s| s.path.contains("check-runs"))
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(pages.len(), 3, "every page was read: {pages:?}");

    // The same head all green reads green: the failure above was page 3's.
    let green = serve(github(check_runs(250, None))).await;
    let rollup = self::client(&green.base)
        .ci("acme/cli", 12, SHA)
        .await
        .expect("ci");
    assert_eq!(rollup.verdict, CiVerdict::Passing);
    assert_eq!(rollup.items.len(), 250);
}

#[tokio::test]
async fn the_latest_review_is_found_on_the_second_page() {
    let server = serve(github(check_runs(1, None))).await;
    let reviews = client(&server.base)
        .latest_reviews("acme/cli", 12)
        .await
        .expect("reviews");
    let alice = reviews
        .iter()
        .find(|r| r.user.as_ref().is_some_and(|u| u.login == "alice"))
        .expect("alice reviewed");
    assert_eq!(
        alice.state, "APPROVED",
        "her review on page 2 is her latest"
    );
}

/// A comment effect's listing of 150 comments, the effect's own (by its marker) 120th.
#[tokio::test]
async fn a_comment_whose_marker_is_on_page_2_is_found_and_not_posted_again() {
    let effect = Effect {
        idempotency_key: "goal-1/fix/turn-3/comment".into(),
        goal: GoalId::new("goal-1").expect("id"),
        todo: TodoId::new("fix").expect("id"),
        epoch: 4,
        kind: "github.comment".into(),
        params: [
            ("repo", "acme/cli"),
            ("number", "12"),
            ("body", "CI is green."),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    // Post it once to learn the body the client writes (its marker included).
    let posted: Arc<Mutex<Vec<String>>> = Arc::default();
    let keep = Arc::clone(&posted);
    let first = serve(Arc::new(move |seen: &Seen| {
        if seen.method == "POST" {
            let body: serde_json::Value = serde_json::from_str(&seen.body).expect("json");
            keep.lock()
                .expect("posted")
                .push(body["body"].as_str().expect("text").to_owned());
            return Reply {
                status: 201,
                ..ok("{}")
            };
        }
        ok("[]")
    }))
    .await;
    assert_eq!(
        client(&first.base).perform(&effect).await,
        Ok(EffectStatus::Committed)
    );
    let ours = posted.lock().expect("posted")[0].clone();

    let comments: Vec<serde_json::Value> = (0..150)
        .map(|i| {
            let body = if i == 120 {
                ours.clone()
            } else {
                format!("comment {i}")
            };
            serde_json::json!({"id": i, "user": {"login": "someone"}, "body": body})
        })
        .collect();
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.method == "POST" {
            return Reply {
                status: 201,
                ..ok("{}")
            };
        }
        match route(seen) {
            "/repos/acme/cli/issues/12/comments" => paged(seen, &comments, None),
            _ => not_found(),
        }
    }))
    .await;
    let client = client(&server.base);
    assert_eq!(client.readback(&effect).await, Ok(EffectStatus::Committed));
    assert_eq!(client.perform(&effect).await, Ok(EffectStatus::Committed));
    let seen = server.seen.lock().expect("log").clone();
    assert!(
        seen.iter().all(|s| s.method == "GET"),
        "nothing was posted again"
    );
    assert!(seen.iter().any(|s| s.path.contains("page=2")));
}

#[tokio::test]
async fn a_link_to_another_host_is_not_followed() {
    let server = serve(Arc::new(|seen: &Seen| match route(seen) {
        "/repos/acme/cli/pulls/12/reviews" => {
            let mut reply = ok("[]");
            reply.headers.push((
                "link".into(),
                r#"<https://elsewhere.example/repos/acme/cli/pulls/12/reviews?page=2>; rel="next""#
                    .into(),
            ));
            reply
        }
        _ => not_found(),
    }))
    .await;
    let refused = client(&server.base).latest_reviews("acme/cli", 12).await;
    assert!(
        matches!(refused, Err(GitHubError::Decode { .. })),
        "{refused:?}"
    );
    assert_eq!(server.seen.lock().expect("log").len(), 1);
}

#[tokio::test]
async fn review_threads_are_read_from_graphql_page_by_page() {
    // 150 threads, three unresolved, one of them on the second page.
    let resolved: Vec<bool> = (0..150).map(|i| !matches!(i, 3 | 40 | 140)).collect();
    let server = serve(Arc::new(move |seen: &Seen| match route(seen) {
        "/graphql" if seen.method == "POST" => review_threads(seen, SHA, &resolved),
        _ => not_found(),
    }))
    .await;
    let client = client(&server.base);
    let request = ObserveRequest {
        key: ObservationKey::new("threads:acme/cli#12").expect("key"),
        known: None,
        etag: None,
    };
    let observations = client.observe(&request).await.expect("observe");
    assert_eq!(observations.len(), 1);
    let threads = &observations[0];
    assert_eq!(threads.key.as_str(), "threads:acme/cli#12");
    assert_eq!(threads.facts["unresolved"], "3");
    assert_eq!(threads.facts["complete"], "true");
    assert_eq!(threads.revision.as_str(), format!("git:{SHA}"));
    let seen = server.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 2, "two pages");
    let second: serde_json::Value = serde_json::from_str(&seen[1].body).expect("json");
    assert_eq!(second["variables"]["after"], "99");
    assert_eq!(second["variables"]["owner"], "acme");
    assert!(
        second["query"]
            .as_str()
            .is_some_and(|q| q.contains("isResolved"))
    );
}

#[tokio::test]
async fn graphql_errors_are_typed_without_their_text() {
    let server = serve(Arc::new(|_: &Seen| {
        ok(r#"{"data": {"repository": {"pullRequest": null}}, "errors": [{"message": "Could not resolve to a PullRequest ghp_secret"}]}"#)
    }))
    .await;
    let refused = client(&server.base).review_threads("acme/cli", 99).await;
    let Err(error) = refused else {
        panic!("an answer with errors is refused");
    };
    assert!(matches!(error, GitHubError::Decode { .. }), "{error:?}");
    assert!(!error.to_string().contains("ghp_secret"));
}

/// GitHub's `Retry-After` becomes the instant the source is held off until: the poll due
/// meanwhile does not reach GitHub.
#[tokio::test]
async fn a_retry_after_holds_the_source_off_without_calling_github() {
    use loopx_kernel::seams::{Clock as _, ProviderError};
    use loopx_provider::layers::Backoff;

    let server = serve(Arc::new(|_: &Seen| Reply {
        status: 429,
        headers: vec![("retry-after".into(), "120".into())],
        ..ok("{}")
    }))
    .await;
    let clock = clock();
    let until = clock.now().plus(loopx_kernel::Duration::seconds(120));
    let held = Backoff::new(
        client_on(&server.base, clock.clone()),
        loopx_kernel::Duration::seconds(1),
        loopx_kernel::Duration::minutes(1),
        clock.clone(),
    );
    let request = ObserveRequest {
        key: ObservationKey::new("pr:acme/cli#12").expect("key"),
        known: None,
        etag: None,
    };
    for _ in 0..3 {
        assert_eq!(
            held.observe(&request).await,
            Err(ProviderError::RateLimited(until))
        );
    }
    assert_eq!(
        server.seen.lock().expect("log").len(),
        1,
        "GitHub was asked once"
    );
    clock.advance(loopx_kernel::Duration::seconds(120));
    let _ = held.observe(&request).await;
    assert_eq!(
        server.seen.lock().expect("log").len(),
        2,
        "asked again once it passed"
    );
}
