//! The REST client over real HTTP on loopback, against a small local server that serves
//! responses in GitHub's shapes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopx_kernel::ManualClock;
use loopx_kernel::seams::{Clock as _, Effect, EffectStatus, Effector, ObserveRequest, Provider};
use loopx_kernel::{GoalId, ObservationKey, SourceId, Timestamp, TodoId};
use loopx_provider::github::CiVerdict;
use loopx_provider::github::rest::{GitHubClient, GitHubError, Token};

#[path = "support/github.rs"]
mod standin;
use standin::{Handler, Reply, Seen, ok, serve};

const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
const TOKEN: &str = "ghp_never_shown_0123456789abcdef";

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Timestamp::parse("2026-11-29T10:00:00Z").expect("ts"),
    ))
}

fn client(base: &str, clock: Arc<ManualClock>) -> GitHubClient {
    GitHubClient::new(
        SourceId::new("github").expect("id"),
        base,
        Some(Token::new(TOKEN)),
        loopx_kernel::Duration::from_millis(500),
        clock,
    )
    .expect("client")
}

fn pull_json(sha: &str) -> String {
    format!(
        r#"{{"number": 12, "state": "open", "title": "Add --format json", "draft": false, "merged": false,
        "mergeable_state": "clean", "commits": 3, "user": {{"login": "octocat"}},
        "head": {{"ref": "json", "sha": "{sha}"}}, "base": {{"ref": "main", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"}},
        "updated_at": "2026-11-29T09:00:00Z"}}"#
    )
}

const REVIEWS: &str = r#"[
  {"id": 1, "user": {"login": "alice"}, "state": "CHANGES_REQUESTED", "commit_id": "aaaa", "submitted_at": "2026-11-28T10:00:00Z"},
  {"id": 2, "user": {"login": "bob"}, "state": "COMMENTED", "commit_id": "aaaa", "submitted_at": "2026-11-28T11:00:00Z"},
  {"id": 3, "user": {"login": "alice"}, "state": "APPROVED", "commit_id": "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "submitted_at": "2026-11-29T08:00:00Z"},
  {"id": 4, "user": {"login": "carol"}, "state": "PENDING"}
]"#;

fn checks(conclusion: &str) -> String {
    format!(
        r#"{{"total_count": 2, "check_runs": [
      {{"id": 10, "name": "test", "head_sha": "{SHA}", "status": "completed", "conclusion": "{conclusion}", "app": {{"slug": "github-actions"}}, "pull_requests": []}},
      {{"id": 11, "name": "lint", "head_sha": "{SHA}", "status": "completed", "conclusion": "success", "app": {{"slug": "github-actions"}}, "pull_requests": []}}
    ]}}"#
    )
}

const STATUS: &str = r#"{"state": "success", "statuses": [{"context": "ci/legacy", "state": "success", "description": "ok"}]}"#;

fn github(conclusion: &'static str) -> Handler {
    Arc::new(move |seen: &Seen| match seen.path.as_str() {
        "/repos/acme/cli/pulls/12" => ok(&pull_json(SHA)),
        "/repos/acme/cli/pulls/12/reviews?per_page=100" => ok(REVIEWS),
        p if p == format!("/repos/acme/cli/commits/{SHA}/check-runs?per_page=100") => {
            ok(&checks(conclusion))
        }
        p if p == format!("/repos/acme/cli/commits/{SHA}/status") => ok(STATUS),
        _ => Reply {
            status: 404,
            headers: vec![],
            body: r#"{"message": "Not Found"}"#.into(),
            delay: Duration::ZERO,
        },
    })
}

#[tokio::test]
async fn a_poll_reads_the_pull_its_latest_reviews_and_ci_bound_to_the_head_sha() {
    let server = serve(github("success")).await;
    let client = client(&server.base, clock());
    let request = ObserveRequest {
        key: ObservationKey::new("pr:acme/cli#12").expect("id"),
        known: None,
        etag: None,
    };
    let observations = client.observe(&request).await.expect("observe");
    let keys: Vec<&str> = observations.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "pr:acme/cli#12",
            "review:acme/cli#12/alice",
            "review:acme/cli#12/bob",
            "ci:acme/cli#12"
        ]
    );
    let pr = &observations[0];
    assert_eq!(pr.revision.as_str(), format!("git:{SHA}"));
    assert_eq!(pr.facts["status"], "open");
    assert_eq!(pr.facts["mergeable_state"], "clean");
    assert_eq!(pr.facts["commits"], "3");
    assert_eq!(
        observations[1].facts["state"], "approved",
        "alice's latest review wins"
    );
    let ci = &observations[3];
    assert_eq!(ci.subject.as_str(), "pr:acme/cli#12");
    assert_eq!(ci.revision.as_str(), format!("git:{SHA}"));
    assert_eq!(ci.facts["verdict"], "passing");
    assert_eq!(ci.facts["items"], "3");

    let seen = server.seen.lock().expect("log").clone();
    assert!(
        seen.iter()
            .all(|s| s.headers.get("authorization").map(String::as_str)
                == Some(&*format!("Bearer {TOKEN}")))
    );
    assert!(seen.iter().all(|s| s.method == "GET"));
}

#[tokio::test]
async fn a_failing_check_fails_the_roll_up() {
    let server = serve(github("failure")).await;
    let client = client(&server.base, clock());
    let rollup = client.ci("acme/cli", 12, SHA).await.expect("ci");
    assert_eq!(rollup.verdict, CiVerdict::Failing);
    let empty = serve(Arc::new(|seen: &Seen| {
        if seen.path.contains("check-runs") {
            ok(r#"{"total_count": 0, "check_runs": []}"#)
        } else {
            ok(r#"{"state": "pending", "statuses": []}"#)
        }
    }))
    .await;
    let none = self::client(&empty.base, clock())
        .ci("acme/cli", 12, SHA)
        .await
        .expect("ci");
    assert_eq!(none.verdict, CiVerdict::None);
}

#[tokio::test]
async fn etags_make_requests_conditional_and_304_reuses_the_body() {
    let handler: Handler = Arc::new(|seen: &Seen| {
        if seen.headers.get("if-none-match").map(String::as_str) == Some("\"v1\"") {
            Reply {
                status: 304,
                headers: vec![],
                body: String::new(),
                delay: Duration::ZERO,
            }
        } else {
            Reply {
                status: 200,
                headers: vec![("etag".into(), "\"v1\"".into())],
                body: pull_json(SHA),
                delay: Duration::ZERO,
            }
        }
    });
    let server = serve(handler).await;
    let client = client(&server.base, clock());
    let first = client.pull_request("acme/cli", 12).await.expect("first");
    let second = client.pull_request("acme/cli", 12).await.expect("second");
    assert_eq!(first, second);
    let seen = server.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].headers.contains_key("if-none-match"));
    assert_eq!(
        seen[1].headers.get("if-none-match").map(String::as_str),
        Some("\"v1\"")
    );
}

#[tokio::test]
async fn rate_limits_are_typed_with_their_retry_instant() {
    let clock = clock();
    let reset = Timestamp::parse("2026-11-29T10:15:00Z").expect("ts");
    let reset_secs = reset.as_millis() / 1000;
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.path.contains("/pulls/1") && !seen.path.contains("/pulls/12") {
            Reply {
                status: 403,
                headers: vec![
                    ("x-ratelimit-remaining".into(), "0".into()),
                    ("x-ratelimit-reset".into(), reset_secs.to_string()),
                ],
                body: r#"{"message": "API rate limit exceeded"}"#.into(),
                delay: Duration::ZERO,
            }
        } else if seen.path.contains("/pulls/2") {
            Reply {
                status: 429,
                headers: vec![("retry-after".into(), "30".into())],
                body: "{}".into(),
                delay: Duration::ZERO,
            }
        } else {
            Reply {
                status: 403,
                headers: vec![("x-ratelimit-remaining".into(), "4999".into())],
                body: r#"{"message": "Resource not accessible"}"#.into(),
                delay: Duration::ZERO,
            }
        }
    }))
    .await;
    let client = client(&server.base, clock.clone());
    assert_eq!(
        client.pull_request("acme/cli", 1).await,
        Err(GitHubError::RateLimited {
            path: "/repos/acme/cli/pulls/1".into(),
            until: reset
        })
    );
    let retry = client.pull_request("acme/cli", 2).await;
    assert_eq!(
        retry,
        Err(GitHubError::RateLimited {
            path: "/repos/acme/cli/pulls/2".into(),
            until: clock.now().plus(loopx_kernel::Duration::seconds(30))
        })
    );
    let forbidden = client.pull_request("acme/cli", 3).await;
    assert!(
        matches!(
            forbidden,
            Err(GitHubError::Unauthorized { status: 403, .. })
        ),
        "{forbidden:?}"
    );
    let as_provider: loopx_kernel::seams::ProviderError = client
        .pull_request("acme/cli", 1)
        .await
        .expect_err("limited")
        .into();
    assert_eq!(
        as_provider,
        loopx_kernel::seams::ProviderError::RateLimited(reset)
    );
}

#[tokio::test]
async fn server_errors_timeouts_and_bad_bodies_are_typed() {
    let server = serve(Arc::new(|seen: &Seen| match seen.path.as_str() {
        "/repos/acme/cli/pulls/1" => Reply {
            status: 502,
            headers: vec![],
            body: "bad gateway".into(),
            delay: Duration::ZERO,
        },
        "/repos/acme/cli/pulls/2" => Reply {
            status: 200,
            headers: vec![],
            body: pull_json(SHA),
            delay: Duration::from_secs(3),
        },
        "/repos/acme/cli/pulls/3" => ok(r#"{"number": "twelve"}"#),
        _ => Reply {
            status: 404,
            headers: vec![],
            body: "{}".into(),
            delay: Duration::ZERO,
        },
    }))
    .await;
    let client = client(&server.base, clock());
    assert!(matches!(
        client.pull_request("acme/cli", 1).await,
        Err(GitHubError::Server { status: 502, .. })
    ));
    let started = std::time::Instant::now();
    assert!(matches!(
        client.pull_request("acme/cli", 2).await,
        Err(GitHubError::Timeout { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(
        client.pull_request("acme/cli", 3).await,
        Err(GitHubError::Decode { .. })
    ));
    assert!(matches!(
        client.pull_request("acme/cli", 4).await,
        Err(GitHubError::NotFound { .. })
    ));
    assert!(matches!(
        client.pull_request("../etc", 4).await,
        Err(GitHubError::Invalid(_))
    ));
    let closed = GitHubClient::new(
        SourceId::new("g").expect("id"),
        "http://127.0.0.1:1",
        Some(Token::new(TOKEN)),
        loopx_kernel::Duration::from_millis(500),
        clock(),
    )
    .expect("client");
    assert!(matches!(
        closed.pull_request("acme/cli", 1).await,
        Err(GitHubError::Transport { .. })
    ));
}

#[tokio::test]
async fn the_token_never_appears_in_errors_or_debug_output() {
    let server = serve(Arc::new(|seen: &Seen| match seen.path.as_str() {
        "/repos/acme/cli/pulls/1" => Reply {
            status: 500,
            headers: vec![],
            body: TOKEN.into(),
            delay: Duration::ZERO,
        },
        "/repos/acme/cli/pulls/2" => Reply {
            status: 401,
            headers: vec![],
            body: TOKEN.into(),
            delay: Duration::ZERO,
        },
        "/repos/acme/cli/pulls/3" => ok(&format!("{{\"oops\": \"{TOKEN}\"")),
        "/repos/acme/cli/pulls/4" => Reply {
            status: 200,
            headers: vec![],
            body: "{}".into(),
            delay: Duration::from_secs(3),
        },
        _ => Reply {
            status: 429,
            headers: vec![],
            body: TOKEN.into(),
            delay: Duration::ZERO,
        },
    }))
    .await;
    let client = client(&server.base, clock());
    assert!(!format!("{client:?}").contains(TOKEN));
    assert!(!format!("{:?}", Token::new(TOKEN)).contains(TOKEN));
    let closed = GitHubClient::new(
        SourceId::new("g").expect("id"),
        "http://127.0.0.1:1",
        Some(Token::new(TOKEN)),
        loopx_kernel::Duration::from_millis(300),
        clock(),
    )
    .expect("client");
    let mut errors = Vec::new();
    for n in 1..=5 {
        errors.push(client.pull_request("acme/cli", n).await.expect_err("fails"));
    }
    errors.push(closed.pull_request("acme/cli", 1).await.expect_err("fails"));
    assert_eq!(errors.len(), 6);
    for error in errors {
        assert!(!error.to_string().contains(TOKEN), "{error}");
        assert!(!format!("{error:?}").contains(TOKEN), "{error:?}");
        let provider: loopx_kernel::seams::ProviderError = error.into();
        assert!(!format!("{provider} {provider:?}").contains(TOKEN));
    }
}

fn comment_effect(epoch: u64) -> Effect {
    Effect {
        idempotency_key: "goal-1/fix/turn-3/comment".into(),
        goal: GoalId::new("goal-1").expect("id"),
        todo: TodoId::new("fix").expect("id"),
        epoch,
        kind: "github.comment".into(),
        params: [
            ("repo", "acme/cli"),
            ("number", "12"),
            ("body", "CI is green at ec26c3e."),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    }
}

#[tokio::test]
async fn effects_are_idempotent_across_epochs_and_read_back() {
    let comments: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let store = Arc::clone(&comments);
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.path == "/repos/acme/cli/issues/12/comments" && seen.method == "POST" {
            let body: serde_json::Value = serde_json::from_str(&seen.body).expect("json");
            store
                .lock()
                .expect("store")
                .push(body["body"].as_str().expect("body").to_owned());
            return Reply {
                status: 201,
                headers: vec![],
                body: "{}".into(),
                delay: Duration::ZERO,
            };
        }
        if seen.path.starts_with("/repos/acme/cli/issues/12/comments") {
            let list: Vec<serde_json::Value> = store
                .lock()
                .expect("store")
                .iter()
                .map(|b| serde_json::json!({"body": b}))
                .collect();
            return ok(&serde_json::to_string(&list).expect("json"));
        }
        Reply {
            status: 503,
            headers: vec![],
            body: "{}".into(),
            delay: Duration::ZERO,
        }
    }))
    .await;
    let client = client(&server.base, clock());
    let effect = comment_effect(4);
    assert_eq!(client.readback(&effect).await, Ok(EffectStatus::Absent));
    assert_eq!(client.perform(&effect).await, Ok(EffectStatus::Committed));
    assert_eq!(client.readback(&effect).await, Ok(EffectStatus::Committed));
    // A retry of the same effect does not write again.
    assert_eq!(client.perform(&effect).await, Ok(EffectStatus::Committed));
    assert_eq!(comments.lock().expect("store").len(), 1);
    let posted = comments.lock().expect("store")[0].clone();
    assert!(posted.starts_with("CI is green at ec26c3e."));
    assert!(posted.contains("epoch:4"));
    // The client fences no epoch (the store does, before `perform` is called): the same key
    // under a later epoch, a new holder after a takeover, finds the earlier write and writes
    // nothing.
    assert_eq!(
        client.perform(&comment_effect(5)).await,
        Ok(EffectStatus::Committed)
    );
    assert_eq!(comments.lock().expect("store").len(), 1);
    // When the listing cannot be read, the outcome is unknown.
    let mut elsewhere = comment_effect(5);
    elsewhere.params.insert("number".into(), "99".into());
    assert_eq!(client.readback(&elsewhere).await, Ok(EffectStatus::Unknown));
    let mut unknown_kind = comment_effect(5);
    unknown_kind.kind = "github.merge".into();
    assert!(client.perform(&unknown_kind).await.is_err());
}

#[tokio::test]
async fn a_commit_status_effect_carries_its_key_and_reads_back() {
    let statuses: Arc<Mutex<Vec<serde_json::Value>>> = Arc::new(Mutex::new(Vec::new()));
    let store = Arc::clone(&statuses);
    let server = serve(Arc::new(move |seen: &Seen| {
        if seen.method == "POST" && seen.path == format!("/repos/acme/cli/statuses/{SHA}") {
            store
                .lock()
                .expect("store")
                .push(serde_json::from_str(&seen.body).expect("json"));
            return Reply {
                status: 201,
                headers: vec![],
                body: "{}".into(),
                delay: Duration::ZERO,
            };
        }
        ok(&serde_json::to_string(&*store.lock().expect("store")).expect("json"))
    }))
    .await;
    let client = client(&server.base, clock());
    let effect = Effect {
        idempotency_key: "goal-1/fix/turn-3/status".into(),
        goal: GoalId::new("goal-1").expect("id"),
        todo: TodoId::new("fix").expect("id"),
        epoch: 2,
        kind: "github.status".into(),
        params: [
            ("repo", "acme/cli"),
            ("sha", SHA),
            ("state", "success"),
            ("context", "loopx/acceptance"),
            ("description", "all criteria met"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    assert_eq!(client.perform(&effect).await, Ok(EffectStatus::Committed));
    assert_eq!(client.perform(&effect).await, Ok(EffectStatus::Committed));
    let written = statuses.lock().expect("store").clone();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0]["context"], "loopx/acceptance");
    assert!(
        written[0]["description"]
            .as_str()
            .expect("text")
            .starts_with("all criteria met [loopx ")
    );
}

/// `value` with each of its leaves (strings, numbers, booleans, nulls) replaced in turn by
/// `with`: one copy per leaf.
fn each_leaf_replaced(
    value: &serde_json::Value,
    with: &serde_json::Value,
) -> Vec<serde_json::Value> {
    use serde_json::Value;
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(key, inner)| {
                each_leaf_replaced(inner, with)
                    .into_iter()
                    .map(move |changed| {
                        let mut copy = map.clone();
                        copy.insert(key.clone(), changed);
                        Value::Object(copy)
                    })
            })
            .collect(),
        Value::Array(items) => (0..items.len())
            .flat_map(|i| {
                each_leaf_replaced(&items[i], with)
                    .into_iter()
                    .map(move |changed| {
                        let mut copy = items.clone();
                        copy[i] = changed;
                        Value::Array(copy)
                    })
            })
            .collect(),
        _ => vec![with.clone()],
    }
}

/// True when `shown` holds the token or any prefix of it of eight characters or more.
fn shows_the_token(shown: &str) -> bool {
    (8..=TOKEN.len()).any(|n| shown.contains(&TOKEN[..n]))
}

#[tokio::test]
async fn a_token_planted_in_any_field_of_any_response_never_reaches_an_error() {
    // Found in review: a 200 whose body held the token in a field of the wrong type yielded
    // `unexpected body …: invalid type: string "Bearer ghp_…", expected u64`.
    let comments = r#"[{"id": 7, "user": {"login": "octocat"}, "body": "looks good"}]"#;
    let statuses = r#"[{"context": "loopx/acceptance", "state": "success", "description": "ok"}]"#;
    let shapes: Vec<(String, String)> = vec![
        ("/repos/acme/cli/pulls/12".into(), pull_json(SHA)),
        (
            "/repos/acme/cli/pulls/12/reviews?per_page=100".into(),
            REVIEWS.into(),
        ),
        (
            format!("/repos/acme/cli/commits/{SHA}/check-runs?per_page=100"),
            checks("success"),
        ),
        (
            format!("/repos/acme/cli/commits/{SHA}/status"),
            STATUS.into(),
        ),
        (
            "/repos/acme/cli/issues/12/comments?per_page=100".into(),
            comments.into(),
        ),
        (
            format!("/repos/acme/cli/commits/{SHA}/statuses?per_page=100"),
            statuses.into(),
        ),
    ];
    let bodies: Arc<Mutex<BTreeMap<String, String>>> =
        Arc::new(Mutex::new(shapes.iter().cloned().collect()));
    let answers = Arc::clone(&bodies);
    let server = serve(Arc::new(move |seen: &Seen| {
        match answers.lock().expect("bodies").get(&seen.path) {
            Some(body) => ok(body),
            None => Reply {
                status: 404,
                headers: vec![],
                body: "{}".into(),
                delay: Duration::ZERO,
            },
        }
    }))
    .await;
    let client = client(&server.base, clock());
    let status_effect = Effect {
        kind: "github.status".into(),
        params: [
            ("repo", "acme/cli"),
            ("sha", SHA),
            ("context", "loopx/acceptance"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
        ..comment_effect(1)
    };
    let planted = serde_json::Value::from(format!("Bearer {TOKEN}"));
    let (mut calls, mut refused) = (0, 0);
    for (path, fixture) in &shapes {
        let fixture: serde_json::Value = serde_json::from_str(fixture).expect("a fixture");
        for changed in each_leaf_replaced(&fixture, &planted) {
            bodies
                .lock()
                .expect("bodies")
                .insert(path.clone(), changed.to_string());
            let mut errors = Vec::new();
            errors.extend(client.observe_pull("acme/cli", 12).await.err());
            errors.extend(client.readback_effect(&comment_effect(1)).await.err());
            errors.extend(client.readback_effect(&status_effect).await.err());
            calls += 3;
            for error in errors {
                refused += 1;
                let provider: loopx_kernel::seams::ProviderError = error.clone().into();
                let shown = format!("{error} {error:?} {provider} {provider:?}");
                assert!(!shows_the_token(&shown), "{changed}: {shown}");
            }
        }
        let original = shapes.iter().find(|(p, _)| p == path).expect("a shape");
        bodies
            .lock()
            .expect("bodies")
            .insert(path.clone(), original.1.clone());
    }
    // Planted in a number, a boolean or a sha, the token makes the answer invalid: those
    // errors were all checked.
    assert!(refused >= 10 && calls > refused, "{refused} of {calls}");
    assert!(client.observe_pull("acme/cli", 12).await.is_ok());
}
