//! Fuzz targets for the provider's decoders of outside input: GitHub webhook payloads (every
//! event this crate reads) and the GitHub REST responses (every shape the client decodes, over
//! real HTTP on loopback).
//!
//! Each target is a bounded proptest over arbitrary bytes and over real payloads
//! (`tests/fixtures/github-webhooks/`, GitHub's own examples) and response fixtures mutated
//! byte by byte (flipped, cut, deleted, repeated, spliced). Whatever the input, the decoder
//! returns a typed error or a value, never panics, and no error quotes the body (the REST
//! fixtures carry the client's token in their text fields, so a quoted body would show it).
//!
//! 256 cases per target by default, so CI runs them briefly; run longer by hand with
//! `PROPTEST_CASES=20000 cargo test -p loopx-provider --release --test fuzz_decoders`.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use loopx_kernel::seams::Effect;
use loopx_kernel::{GoalId, ManualClock, SourceId, Timestamp, TodoId};
use loopx_provider::github::rest::{GitHubClient, GitHubError, Token};
use loopx_provider::github::webhook::{WebhookError, WebhookVerifier, parse_event};
use proptest::prelude::*;

const TOKEN: &str = "ghp_fuzzed_token_0123456789abcdefABCD";
const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

/// `default_cases` cases, or as many as `PROPTEST_CASES` says.
fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").expect("a timestamp")
}

/// One edit of a byte string; positions wrap around its length.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Set(usize, u8),
    Delete(usize, usize),
    Repeat(usize, usize),
    Truncate(usize),
    Splice(usize, usize, usize),
}

const MEANINGFUL: &[u8] = b"{}[]:,\"\\0123456789-.eE+ntfrua_ \n";

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<prop::sample::Index>();
    let i = |x: prop::sample::Index| x.index(usize::MAX);
    prop_oneof![
        (at.clone(), 1..=255_u8).prop_map(move |(x, m)| Edit::Flip(i(x), m)),
        (at.clone(), prop::sample::select(MEANINGFUL)).prop_map(move |(x, c)| Edit::Set(i(x), c)),
        (at.clone(), 1..64_usize).prop_map(move |(x, n)| Edit::Delete(i(x), n)),
        (at.clone(), 1..64_usize).prop_map(move |(x, n)| Edit::Repeat(i(x), n)),
        at.clone().prop_map(move |x| Edit::Truncate(i(x))),
        (at.clone(), at, 1..64_usize).prop_map(move |(a, b, n)| Edit::Splice(i(a), i(b), n)),
    ]
}

fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for edit in edits {
        let len = bytes.len().max(1);
        let range = |start: usize, n: usize, bytes: &Vec<u8>| {
            let start = (start % len).min(bytes.len());
            (start, (start + n).min(bytes.len()))
        };
        match *edit {
            Edit::Flip(at, mask) => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b ^= mask;
                }
            }
            Edit::Set(at, c) => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b = c;
                }
            }
            Edit::Delete(at, n) => {
                let (start, end) = range(at, n, &bytes);
                bytes.drain(start..end);
            }
            Edit::Repeat(at, n) => {
                let (start, end) = range(at, n, &bytes);
                let piece = bytes[start..end].to_vec();
                bytes.splice(end..end, piece);
            }
            Edit::Truncate(at) => bytes.truncate(at % len),
            Edit::Splice(from, to, n) => {
                let (start, end) = range(from, n, &bytes);
                let piece = bytes[start..end].to_vec();
                let (to, over) = range(to, piece.len(), &bytes);
                bytes.splice(to..over, piece);
            }
        }
    }
    bytes
}

fn mutation() -> impl Strategy<Value = (prop::sample::Index, Vec<Edit>)> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec(edit(), 1..=4),
    )
}

/// True when `shown` holds the token or a prefix of it of eight characters or more.
fn shows_the_token(shown: &str) -> bool {
    (8..=TOKEN.len()).any(|n| shown.contains(&TOKEN[..n]))
}

// ---- webhooks ----

/// Every fixture payload with its event name.
fn payloads() -> &'static Vec<(String, Vec<u8>)> {
    static PAYLOADS: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    PAYLOADS.get_or_init(|| {
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let roots = [
            fixtures.join("github-webhooks"),
            fixtures.join("github-deliveries"),
        ];
        let mut out = Vec::new();
        for event in loopx_provider::github::webhook::SUPPORTED_EVENTS {
            let mut files: Vec<PathBuf> = roots
                .iter()
                .map(|root| root.join(event))
                .filter(|dir| dir.is_dir())
                .flat_map(|dir| std::fs::read_dir(dir).expect("a fixture directory"))
                .map(|entry| entry.expect("an entry").path())
                .filter(|path| path.extension().is_some_and(|e| e == "json"))
                .collect();
            assert!(!files.is_empty(), "a fixture of `{event}`");
            files.sort();
            for file in files {
                out.push((event.to_owned(), std::fs::read(&file).expect("a fixture")));
            }
        }
        assert!(out.len() >= 13, "a payload for every event");
        out
    })
}

/// The webhook target: a typed refusal or an event whose observation can be made, and the
/// same through a verified delivery.
fn webhook_target(event: &str, body: &[u8]) {
    match parse_event(event, body) {
        Ok(typed) => {
            let _ = typed.observation(now());
        }
        Err(WebhookError::Malformed { detail, .. }) => assert!(!detail.is_empty()),
        // A ping, or an action the provider does not need: accepted, nothing to record.
        Err(WebhookError::NoFact { .. }) => {}
        Err(other) => panic!("an unexpected refusal of `{event}`: {other}"),
    }
    let verifier = WebhookVerifier::new("fuzz-secret");
    let signature = verifier.sign(body);
    match verifier.receive(event, Some(&signature), body, now()) {
        Ok(_) | Err(WebhookError::Malformed { .. }) => {}
        Err(other) => panic!("a signed delivery of `{event}` refused as {other}"),
    }
}

// ---- REST ----

/// The bodies the loopback server answers with, by request path.
type Bodies = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// Every response shape the client decodes, with a valid body whose text fields hold the
/// token: the pull request, its reviews, the check runs and combined status of its head, and
/// the comment and status listings effects are read back from.
fn responses() -> Vec<(String, Vec<u8>)> {
    let pull = format!(
        r#"{{"number": 12, "state": "open", "title": "{TOKEN}", "draft": false, "merged": false, "mergeable_state": "clean", "commits": 3, "user": {{"login": "octocat"}}, "head": {{"ref": "json", "sha": "{SHA}"}}, "base": {{"ref": "main", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"}}}}"#
    );
    let reviews = format!(
        r#"[{{"id": 1, "user": {{"login": "alice"}}, "state": "APPROVED", "commit_id": "{SHA}", "submitted_at": "{TOKEN}"}}, {{"id": 2, "state": "PENDING"}}]"#
    );
    let checks = format!(
        r#"{{"total_count": 1, "check_runs": [{{"id": 10, "name": "{TOKEN}", "head_sha": "{SHA}", "status": "completed", "conclusion": "success", "app": {{"slug": "github-actions"}}, "pull_requests": [{{"number": 12}}]}}]}}"#
    );
    let status = format!(
        r#"{{"state": "success", "statuses": [{{"context": "ci/legacy", "state": "success", "description": "{TOKEN}"}}]}}"#
    );
    let comments = format!(r#"[{{"id": 7, "user": {{"login": "octocat"}}, "body": "{TOKEN}"}}]"#);
    let statuses = format!(
        r#"[{{"context": "loopx/acceptance", "state": "success", "description": "{TOKEN}"}}]"#
    );
    vec![
        ("/repos/acme/cli/pulls/12".into(), pull),
        (
            "/repos/acme/cli/pulls/12/reviews?per_page=100".into(),
            reviews,
        ),
        (
            format!("/repos/acme/cli/commits/{SHA}/check-runs?per_page=100"),
            checks,
        ),
        (format!("/repos/acme/cli/commits/{SHA}/status"), status),
        (
            "/repos/acme/cli/issues/12/comments?per_page=100".into(),
            comments,
        ),
        (
            format!("/repos/acme/cli/commits/{SHA}/statuses?per_page=100"),
            statuses,
        ),
    ]
    .into_iter()
    .map(|(path, body)| (path, body.into_bytes()))
    .collect()
}

/// A loopback HTTP server on its own thread that answers every request with the body stored
/// for its path (404 for any other), one connection at a time.
fn serve(bodies: Bodies) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head);
            let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
            let body = bodies.lock().expect("bodies").get(&path).cloned();
            let (status, body) = match body {
                Some(body) => ("200 OK", body),
                None => ("404 Not Found", b"{}".to_vec()),
            };
            let mut out = format!(
                "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(&body);
            let _ = stream.write_all(&out);
        }
    });
    base
}

struct Rest {
    runtime: tokio::runtime::Runtime,
    client: GitHubClient,
    bodies: Bodies,
    valid: Vec<(String, Vec<u8>)>,
}

fn rest() -> &'static Mutex<Rest> {
    static REST: OnceLock<Mutex<Rest>> = OnceLock::new();
    REST.get_or_init(|| {
        let valid = responses();
        let bodies: Bodies = Arc::new(Mutex::new(valid.iter().cloned().collect()));
        let base = serve(Arc::clone(&bodies));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = GitHubClient::new(
            SourceId::new("github").expect("an id"),
            base,
            Some(Token::new(TOKEN)),
            loopx_kernel::Duration::from_millis(2000),
            Arc::new(ManualClock::new(now())),
        )
        .expect("a client");
        Mutex::new(Rest {
            runtime,
            client,
            bodies,
            valid,
        })
    })
}

fn effect(kind: &str, params: &[(&str, &str)]) -> Effect {
    Effect {
        idempotency_key: "goal-1/fix/turn-3/effect".into(),
        goal: GoalId::new("goal-1").expect("an id"),
        todo: TodoId::new("fix").expect("an id"),
        epoch: 1,
        kind: kind.into(),
        params: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// The REST target: the response at `which` is replaced by `body`, and every call that reads
/// it returns a value or a typed error that does not quote the body.
fn rest_target(which: usize, body: &[u8]) {
    let rest = rest()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (path, _) = &rest.valid[which % rest.valid.len()];
    let path = path.clone();
    let all: BTreeMap<String, Vec<u8>> = rest.valid.iter().cloned().collect();
    {
        let mut bodies = rest.bodies.lock().expect("bodies");
        *bodies = all;
        bodies.insert(path, body.to_vec());
    }
    let comment = effect("github.comment", &[("repo", "acme/cli"), ("number", "12")]);
    let status = effect(
        "github.status",
        &[
            ("repo", "acme/cli"),
            ("sha", SHA),
            ("context", "loopx/acceptance"),
        ],
    );
    let errors: Vec<GitHubError> = rest.runtime.block_on(async {
        let mut errors = Vec::new();
        errors.extend(rest.client.observe_pull("acme/cli", 12).await.err());
        errors.extend(rest.client.readback_effect(&comment).await.err());
        errors.extend(rest.client.readback_effect(&status).await.err());
        errors
    });
    for error in errors {
        // A head sha changed into another valid sha names a commit the server does not know.
        assert!(
            matches!(
                error,
                GitHubError::Decode { .. } | GitHubError::Invalid(_) | GitHubError::NotFound { .. }
            ),
            "an answer of the wrong shape is refused as malformed, not as {error}"
        );
        let shown = format!("{error} {error:?}");
        assert!(!shows_the_token(&shown), "{shown}");
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn webhooks_from_arbitrary_bytes(
        event in prop::sample::select(loopx_provider::github::webhook::SUPPORTED_EVENTS.to_vec()),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        webhook_target(event, &bytes);
    }

    #[test]
    fn mutated_webhook_payloads((seed, edits) in mutation()) {
        let (event, payload) = &payloads()[seed.index(payloads().len())];
        webhook_target(event, &mutate(payload, &edits));
    }

    #[test]
    fn rest_responses_from_arbitrary_bytes(
        which in 0..6_usize,
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        rest_target(which, &bytes);
    }

    #[test]
    fn mutated_rest_responses((seed, edits) in mutation()) {
        let which = seed.index(6);
        let valid = responses();
        rest_target(which, &mutate(&valid[which].1, &edits));
    }
}

#[test]
fn the_seeds_are_valid_and_hold_the_token() {
    for (event, payload) in payloads() {
        // Every seed reads: a fact, or a ping or an ignored action (`issues`/`pinned`).
        assert!(
            loopx_provider::github::webhook::parse_delivery(event, payload).is_ok(),
            "{event}"
        );
    }
    let rest = rest()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *rest.bodies.lock().expect("bodies") = rest.valid.iter().cloned().collect();
    let pull = rest
        .runtime
        .block_on(rest.client.observe_pull("acme/cli", 12))
        .expect("the valid responses read");
    assert_eq!(pull.len(), 3, "pull request, one review, CI");
    assert!(
        rest.valid
            .iter()
            .all(|(_, body)| shows_the_token(&String::from_utf8_lossy(body)))
    );
}
