//! What a request may make the service hold: GitHub's route refuses what its headers already
//! condemn before reading a byte of the body, a body declared over the cap is refused unread,
//! and bodies beyond the memory budget wait, then are refused, before they are read.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopx_kernel::seams::Store;
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::{MAX_BODY_BYTES, WebhookVerifier};
use loopx_server::github::Deliveries;
use loopx_server::{Bounds, Service, serve_with};
use loopx_store::MemoryStore;

/// The webhook route in the service under `bounds`, on a loopback port; its address.
async fn serve(bounds: Bounds) -> String {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = Arc::new(SystemClock);
    let deliveries = Deliveries::new(store.clone(), clock.clone(), WebhookVerifier::new("s"));
    let router = Service::new(store, clock)
        .bounds(bounds.clone())
        .mount(deliveries.router())
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("an address").to_string();
    tokio::spawn(
        async move { serve_with(listener, router, &bounds, std::future::pending()).await },
    );
    address
}

/// Sends a delivery's head and `body_sent` bytes of its body (of `declared` declared), keeps
/// the connection open, and reads the answer: its status, body and how long it took.
fn send(
    address: &str,
    headers: &str,
    declared: usize,
    body_sent: usize,
) -> (u16, String, Duration) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let start = Instant::now();
    let head = format!(
        "POST /github/webhook HTTP/1.1\r\nHost: localhost\r\nContent-Length: {declared}\r\n{headers}\r\n"
    );
    stream.write_all(head.as_bytes()).expect("the head");
    stream
        .write_all(&vec![b'{'; body_sent])
        .expect("part of the body");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
        if String::from_utf8_lossy(&answer).contains('}') {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body, start.elapsed())
}

async fn send_async(
    address: &str,
    headers: &str,
    declared: usize,
    sent: usize,
) -> (u16, String, Duration) {
    let (address, headers) = (address.to_owned(), headers.to_owned());
    tokio::task::spawn_blocking(move || send(&address, &headers, declared, sent))
        .await
        .expect("the request")
}

const GOOD: &str =
    "X-GitHub-Event: push\r\nX-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958\r\n";

#[tokio::test]
async fn the_webhook_refuses_what_its_headers_condemn_before_reading_the_body() {
    let address = serve(Bounds::default()).await;
    // Each declares a megabyte and sends none of it: only a refusal that reads nothing answers.
    let cases = [
        ("X-GitHub-Delivery: d-1\r\n", "X-GitHub-Event"),
        ("X-GitHub-Event: push\r\n", "X-GitHub-Delivery"),
        (
            "X-GitHub-Event: push\r\nX-GitHub-Delivery: not/a delivery\r\n",
            "X-GitHub-Delivery",
        ),
        (
            "X-GitHub-Event: <push>\r\nX-GitHub-Delivery: d-1\r\n",
            "X-GitHub-Event",
        ),
    ];
    for (headers, named) in cases {
        let (code, body, _) = send_async(&address, headers, 1 << 20, 0).await;
        assert_eq!(code, 400, "{headers}: {body}");
        assert!(
            body.contains("\"code\":\"bad_header\"") && body.contains(named),
            "{body}"
        );
    }
    let (code, body, _) = send_async(&address, GOOD, MAX_BODY_BYTES + 1, 0).await;
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("\"code\":\"too_large\""), "{body}");
}

#[tokio::test]
async fn a_stalled_body_is_answered_when_its_deadline_passes() {
    let bounds = Bounds {
        body_timeout: Duration::from_millis(500),
        ..Bounds::default()
    };
    let address = serve(bounds).await;
    let (code, body, took) = send_async(&address, GOOD, 1000, 10).await;
    assert_eq!(code, 408, "{body}");
    assert!(body.contains("\"code\":\"body_incomplete\""), "{body}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_body_beyond_the_budget_waits_then_is_refused_before_it_is_read() {
    let bounds = Bounds {
        body_budget: MAX_BODY_BYTES,
        body_timeout: Duration::from_secs(1),
        ..Bounds::default()
    };
    let address = serve(bounds).await;
    // Each delivery declares the whole budget and never sends its body. The first holds the
    // budget until its body's deadline; the second waits for it and then holds it; the third
    // finds no room within its wait and is refused, unread.
    let mut sent = Vec::new();
    for _ in 0..3 {
        let address = address.clone();
        sent.push(tokio::task::spawn_blocking(move || {
            send(&address, GOOD, MAX_BODY_BYTES, 0)
        }));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut answers = Vec::new();
    for request in sent {
        answers.push(request.await.expect("a delivery"));
    }
    let codes: Vec<u16> = answers.iter().map(|(code, _, _)| *code).collect();
    assert_eq!(codes, [408, 408, 503], "{answers:?}");
    let (_, body, took) = &answers[2];
    assert!(body.contains("\"code\":\"busy\""), "{body}");
    assert!(
        *took >= Duration::from_millis(900),
        "it waited for room first: {took:?}"
    );
}

#[test]
fn bounds_that_cannot_be_served_are_named() {
    assert!(Bounds::default().check().is_ok());
    let small = Bounds {
        body_budget: 1024,
        ..Bounds::default()
    };
    assert!(
        small
            .check()
            .expect_err("too small")
            .to_string()
            .contains("body budget")
    );
    let none = Bounds {
        max_connections: 0,
        ..Bounds::default()
    };
    assert!(
        none.check()
            .expect_err("zero")
            .to_string()
            .contains("max_connections")
    );
}
