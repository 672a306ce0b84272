//! `loopx serve` as a real process: it says where it listens, answers `/healthz` and
//! `/metrics` over loopback, and stops cleanly on SIGTERM and SIGINT.

mod support;

use std::io::Write as _;
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

use support::{Loopx, http_answer, listening, signal};

/// One request over a fresh connection, written as given: the status line's code and the body.
fn request(address: &str, text: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect to the service");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    stream.write_all(text.as_bytes()).expect("send the request");
    http_answer(stream)
}

/// One `GET`: the status line's code and the body.
fn get(address: &str, path: &str) -> (u16, String) {
    request(
        address,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

/// `loopx serve` on any free port, and the address it printed.
fn serve(lx: &Loopx) -> (Child, String) {
    let mut child = lx.spawn(&["serve", "--listen", "127.0.0.1:0"]);
    let stdout = child.stdout.take().expect("piped stdout");
    let url = listening(stdout);
    let address = url.strip_prefix("http://").expect("an http URL").to_owned();
    (child, address)
}

/// The exit code of `child`, waited for at most a minute.
fn exit_code(mut child: Child) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

#[test]
fn serve_answers_health_and_metrics_and_stops_on_sigterm() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let (child, address) = serve(&lx);
    let (code, body) = get(&address, "/healthz");
    assert_eq!(code, 200, "{body}");
    let (code, metrics) = get(&address, "/metrics");
    assert_eq!(code, 200, "{metrics}");
    assert!(
        metrics
            .contains(r#"loopx_http_requests_total{route="/healthz",method="GET",status="200"} 1"#),
        "{metrics}"
    );
    signal(child.id(), "TERM");
    assert_eq!(exit_code(child), Some(0), "a clean stop on SIGTERM");
    assert!(
        TcpStream::connect(&address).is_err(),
        "nothing listens after the stop"
    );
}

#[test]
fn serve_stops_on_sigint_too() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let (child, address) = serve(&lx);
    assert_eq!(get(&address, "/healthz").0, 200);
    signal(child.id(), "INT");
    assert_eq!(exit_code(child), Some(0), "a clean stop on SIGINT");
}

#[test]
fn an_address_in_use_is_a_typed_error() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("its address").to_string();
    let (code, error) = lx.json(&["serve", "--listen", &address]);
    assert_ne!(code, 0);
    assert_eq!(error["error"]["code"], "listen_failed", "{error}");
}

/// One `POST` of JSON with a bearer token: the status code and body.
fn post(address: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    request(
        address,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn serve_answers_a_gate_as_the_person_whose_token_it_is_signed_with_their_key() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let maria = lx.register_key("person:maria");
    let mallory = lx.register_key("person:mallory");
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:olivia",
        "goal",
        "create",
        "--objective",
        "ship it",
        "--agent",
        "agent-a",
        "--register-key",
        &maria,
        "--register-key",
        &mallory,
    ]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:olivia",
        "gate",
        "open",
        "--id",
        "naming",
        "--question",
        "snake_case?",
        "--owner",
        "person:maria",
        "--whole-goal",
    ]);
    let mut child = lx.spawn_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--mcp-token",
            "person:maria=LOOPX_TEST_MARIA_TOKEN",
            "--mcp-token",
            "person:mallory=LOOPX_TEST_MALLORY_TOKEN",
        ],
        &[
            (
                "LOOPX_TEST_MARIA_TOKEN",
                "maria-secret-token-2b7e9f4a1c6d8e3f",
            ),
            (
                "LOOPX_TEST_MALLORY_TOKEN",
                "mallory-secret-token-5c0a7e2f9b4d1c8e",
            ),
        ],
    );
    let url = listening(child.stdout.take().expect("piped stdout"));
    let address = url.strip_prefix("http://").expect("an http URL").to_owned();
    let answer = r#"{"kind": "resolve", "answer": "snake_case"}"#;
    let path = "/goals/g/gates/naming/answer";

    let (code, body) = post(
        &address,
        path,
        "mallory-secret-token-5c0a7e2f9b4d1c8e",
        answer,
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("not_gate_owner"), "{body}");
    let (code, body) = post(
        &address,
        path,
        "maria-secret-token-2b7e9f4a1c6d8e3f",
        answer,
    );
    assert_eq!(code, 200, "maria's answer, signed with her key: {body}");
    let gates = lx.ok(&["--goal", "g", "gate", "list"]).to_string();
    assert!(gates.contains("snake_case"), "{gates}");
    signal(child.id(), "TERM");
    assert_eq!(exit_code(child), Some(0));
}

/// A token anyone could guess, or one token for two actors (which would act for the first
/// only), stops the service before it listens: a usage error naming the actors, never the
/// token.
#[test]
fn serve_refuses_a_short_token_and_one_token_for_two_actors() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let strong = "7d1f3b5a9c2e4f6a8b0c1d3e5f7a9b2c4d6e8f0a";
    let cases = [
        (
            "mcp_token_weak",
            [("LOOPX_TEST_A", "hunter2-2024"), ("LOOPX_TEST_B", strong)],
        ),
        (
            "mcp_token_shared",
            [("LOOPX_TEST_A", strong), ("LOOPX_TEST_B", strong)],
        ),
    ];
    for (code, env) in cases {
        let run = lx.run_env(
            &[
                "--json",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--mcp-token",
                "person:maria=LOOPX_TEST_A",
                "--mcp-token",
                "agent:agent-a=LOOPX_TEST_B",
            ],
            &env,
        );
        assert_eq!(run.code, 2, "{run:?}");
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(said.contains(code), "{said}");
        assert!(!said.contains("listening"), "{said}");
        for (_, token) in env {
            assert!(!said.contains(token), "the token is never shown: {said}");
        }
        if code == "mcp_token_shared" {
            assert!(
                said.contains("person:maria") && said.contains("agent:agent-a"),
                "{said}"
            );
        }
    }
}
