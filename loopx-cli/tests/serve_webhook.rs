//! `loopx serve --webhook-secret-env` as a real process: GitHub's signed deliveries reach a
//! signed goal bound to prfix, a failing check at the head becomes the fix todo, and a service
//! killed with SIGKILL while a delivery is in flight loses nothing and records nothing twice
//! when the delivery comes again. `loopx serve --github-token-env` polls the same goal's pull
//! request on a loopback stand-in of GitHub's REST API with no delivery at all.

mod support;

#[path = "../../loopx-provider/tests/support/github.rs"]
mod standin;

use std::io::Write as _;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use loopx_provider::github::webhook::WebhookVerifier;
use serde_json::Value;
use support::{Loopx, http_answer, listening, signal};

const GOAL: &str = "fix-2";
const SECRET_VAR: &str = "LOOPX_TEST_WEBHOOK_SECRET";
const SECRET: &str = "a webhook secret";

fn fixture(path: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../loopx-provider/tests/fixtures/github-webhooks");
    std::fs::read(root.join(path)).expect("a fixture")
}

/// Starts the request: headers and body written, nothing read.
fn send(address: &str, event: &str, delivery: &str, body: &[u8]) -> TcpStream {
    let signature = WebhookVerifier::new(SECRET).sign(body);
    let mut stream = TcpStream::connect(address).expect("connect to the service");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout");
    write!(
        stream,
        "POST /github/webhook HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nX-GitHub-Event: {event}\r\n\
         X-GitHub-Delivery: {delivery}\r\nX-Hub-Signature-256: {signature}\r\n\r\n",
        body.len()
    )
    .expect("send the headers");
    stream.write_all(body).expect("send the body");
    stream
}

/// One delivery, answered: the status code and the JSON document.
fn deliver(address: &str, event: &str, delivery: &str, body: &[u8]) -> (u16, Value) {
    let (code, body) = http_answer(send(address, event, delivery, body));
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn serve(lx: &Loopx) -> (Child, String) {
    let mut child = lx.spawn_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--webhook-secret-env",
            SECRET_VAR,
        ],
        &[(SECRET_VAR, SECRET)],
    );
    let stdout = child.stdout.take().expect("piped stdout");
    let url = listening(stdout);
    let address = url.strip_prefix("http://").expect("an http URL").to_owned();
    (child, address)
}

/// A signed goal bound to prfix for `Codertocat/Hello-World#2`, following the pull request.
fn setup() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:olivia",
        "goal",
        "create",
        "--objective",
        "CI of Codertocat/Hello-World#2 is green",
        "--agent",
        "agent-a",
        "--capability",
        "prfix",
        "--repo",
        "Codertocat/Hello-World",
        "--pr",
        "2",
        "--criterion",
        "green,ci.green,pr:Codertocat/Hello-World#2,CI is green at the head",
    ]);
    lx
}

fn todo_ids(lx: &Loopx) -> Vec<String> {
    let status = lx.ok(&["--goal", GOAL, "status"]);
    let mut ids = Vec::new();
    collect_ids(&status["status"]["board"], &mut ids);
    ids
}

fn collect_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_ids(v, out)),
        Value::Object(map) => {
            if let Some(Value::String(id)) = map.get("id") {
                out.push(id.clone());
            }
            map.values().for_each(|v| collect_ids(v, out));
        }
        _ => {}
    }
}

#[test]
fn a_failing_check_delivered_to_the_service_becomes_the_signed_goals_fix_todo() {
    let lx = setup();
    let (child, address) = serve(&lx);
    let (code, answer) = deliver(
        &address,
        "pull_request",
        "d-opened",
        &fixture("pull_request/opened.payload.json"),
    );
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["goals"][0]["goal"], GOAL, "{answer}");
    assert!(
        answer["goals"][0].get("refused").is_none(),
        "signed as provider:github: {answer}"
    );
    let (code, answer) = deliver(
        &address,
        "check_run",
        "d-failing",
        &fixture("check_run/completed.1.payload.json"),
    );
    assert_eq!(code, 200, "{answer}");
    assert!(
        todo_ids(&lx).contains(&"pr:Codertocat/Hello-World#2/ci-fix@ec26c3e57ca3".to_owned()),
        "the fix todo, proposed as capability:prfix: {answer}"
    );

    let (code, answer) = deliver(&address, "pull_request", "d-bad", b"{\"action\":");
    assert_eq!(code, 400, "{answer}");
    signal(child.id(), "TERM");
}

#[test]
fn a_delivery_in_flight_when_the_service_is_killed_is_recorded_once_when_it_comes_again() {
    let lx = setup();
    let body = fixture("pull_request/opened.payload.json");
    let before = lx.revision(GOAL);

    let (mut child, address) = serve(&lx);
    let _in_flight = send(&address, "pull_request", "d-killed", &body);
    child.kill().expect("SIGKILL the service");
    let _ = child.wait();

    let (child, address) = serve(&lx);
    let (code, again) = deliver(&address, "pull_request", "d-killed", &body);
    assert_eq!(code, 200, "{again}");
    let recorded = lx.revision(GOAL);
    assert!(recorded > before, "the fact is recorded: {again}");
    let (code, third) = deliver(&address, "pull_request", "d-killed", &body);
    assert_eq!(code, 200, "{third}");
    assert_eq!(third["goals"][0]["replayed"], true, "{third}");
    assert_eq!(lx.revision(GOAL), recorded, "nothing twice");
    signal(child.id(), "TERM");
}

#[test]
fn serve_names_the_webhook_secret_variable_it_cannot_read() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let run = lx.run(&[
        "--json",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--webhook-secret-env",
        "LOOPX_TEST_NO_SUCH_SECRET",
    ]);
    assert_ne!(run.code, 0);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("webhook_secret_missing"), "{said}");
    assert!(said.contains("LOOPX_TEST_NO_SUCH_SECRET"), "{said}");
}

const TOKEN_VAR: &str = "LOOPX_TEST_POLL_TOKEN";
const TOKEN: &str = "ghp_poll_test_token_never_shown";
const FIX: &str = "pr:Codertocat/Hello-World#2/ci-fix@ec26c3e57ca3";

/// GitHub's REST API for `Codertocat/Hello-World#2` on loopback, its head's check failing, on
/// a runtime of its own (kept alive with the server).
fn failing_github() -> (standin::Server, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let handler: standin::Handler = std::sync::Arc::new(|seen: &standin::Seen| {
        standin::pull_request(
            seen,
            "Codertocat/Hello-World",
            2,
            "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
            "failure",
        )
        .unwrap_or_else(standin::not_found)
    });
    let server = runtime.block_on(standin::serve(handler));
    (server, runtime)
}

/// The first document `serve` prints.
fn first_document(stdout: impl std::io::Read) -> Value {
    use std::io::BufRead as _;
    let mut reader = std::io::BufReader::new(stdout);
    let mut text = String::new();
    loop {
        let read = reader.read_line(&mut text).expect("a line");
        assert!(read > 0, "serve ended before its first document: {text}");
        if let Ok(said) = serde_json::from_str(&text) {
            return said;
        }
    }
}

#[test]
fn serve_with_a_github_token_polls_the_pull_request_and_proposes_the_fix_without_a_delivery() {
    let lx = setup();
    let (github, _runtime) = failing_github();
    let mut child = lx.spawn_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--github-token-env",
            TOKEN_VAR,
            "--github-api-url",
            &github.base,
            "--poll-every",
            "1s",
        ],
        &[(TOKEN_VAR, TOKEN)],
    );
    let said = first_document(child.stdout.take().expect("piped stdout"));
    assert_eq!(said["polling"]["api"], github.base.as_str(), "{said}");
    assert_eq!(said["polling"]["every_ms"], 1000, "{said}");

    let mut proposed = false;
    for _ in 0..100 {
        if todo_ids(&lx).iter().any(|id| id == FIX) {
            proposed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        proposed,
        "the poll made the fix todo, signed as capability:prfix"
    );
    let seen = github.seen.lock().expect("the log").clone();
    assert!(!seen.is_empty(), "the stand-in was polled");
    assert!(
        seen.iter()
            .all(|s| s.headers.get("authorization") == Some(&format!("Bearer {TOKEN}"))),
        "every request carries the token from the variable"
    );

    signal(child.id(), "TERM");
    let run = support::finish(child);
    assert_eq!(
        run.code, 0,
        "the service and its poller stop on SIGTERM: {}",
        run.stderr
    );
    assert!(!run.stderr.contains(TOKEN), "the token is never logged");
}

#[test]
fn serve_without_a_github_token_says_it_does_not_poll() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let mut child = lx.spawn(&["serve", "--listen", "127.0.0.1:0"]);
    let said = first_document(child.stdout.take().expect("piped stdout"));
    assert!(said["listening"].is_string(), "{said}");
    assert_eq!(said["polling"], Value::Null, "{said}");
    signal(child.id(), "TERM");
    let run = support::finish(child);
    assert!(run.stderr.contains("not polling"), "{}", run.stderr);
}

#[test]
fn serve_names_the_github_token_variable_it_cannot_read() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let run = lx.run(&[
        "--json",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--github-token-env",
        "LOOPX_TEST_NO_SUCH_TOKEN",
    ]);
    assert_ne!(run.code, 0);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("github_token_missing"), "{said}");
    assert!(said.contains("LOOPX_TEST_NO_SUCH_TOKEN"), "{said}");
}
