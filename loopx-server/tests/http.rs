//! The tools' HTTP router on its own, over real HTTP on loopback: no token and an unknown
//! token are refused with 401 before anything is read, the token the server knows is let
//! through to the MCP endpoint, and no token is ever shown.

use std::sync::Arc;

use loopx_kernel::seams::Store;
use loopx_kernel::{Actor, AgentId, ManualClock, SecretKey, Timestamp};
use loopx_server::mcp::{Acting, LoopxMcp, Tokens, http};
use loopx_store::MemoryStore;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

fn agent() -> Actor {
    Actor::Agent(AgentId::new("agent-a").expect("an agent id"))
}

fn tokens() -> Tokens {
    Tokens::new()
        .with(
            "secret-token-a-4f9c2e7b1d8a3f6c0e5b",
            Acting::signed(agent(), Arc::new(SecretKey::from_seed([1; 32]))),
        )
        .expect("a strong token")
}

/// Serves the router on a loopback port; its address.
async fn serve() -> std::net::SocketAddr {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(Timestamp::parse("2026-11-29T10:00:00Z").expect("a time"));
    let router = http::router(LoopxMcp::new(store, Arc::new(clock)), tokens());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    address
}

/// POSTs an initialize request with `authorization`; the raw response.
async fn initialize(address: std::net::SocketAddr, authorization: Option<&str>) -> String {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let auth = authorization.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{INITIALIZE}",
        http::PATH,
        INITIALIZE.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = Vec::new();
    // An event stream stays open: what arrived within the timeout is enough.
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut response),
    )
    .await;
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn a_request_without_a_known_token_is_refused_with_401() {
    let address = serve().await;
    for authorization in [
        None,
        Some("Bearer not-a-token"),
        Some("Basic c2VjcmV0LXRva2VuLWE="),
        Some("Bearer"),
    ] {
        let response = initialize(address, authorization).await;
        assert!(
            response.starts_with("HTTP/1.1 401"),
            "{authorization:?}: {response}"
        );
        assert!(response.contains("www-authenticate: Bearer realm=\"loopx\""));
        assert!(response.contains("\"code\":\"unauthorized\""), "{response}");
        assert!(!response.contains("not-a-token"), "never echoed");
    }
}

#[tokio::test]
async fn the_known_token_reaches_the_mcp_endpoint() {
    let address = serve().await;
    let response = initialize(address, Some("Bearer secret-token-a-4f9c2e7b1d8a3f6c0e5b")).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"name\":\"loopx\""), "{response}");
    let lower = initialize(address, Some("bearer secret-token-a-4f9c2e7b1d8a3f6c0e5b")).await;
    assert!(
        lower.starts_with("HTTP/1.1 200"),
        "the scheme is case-insensitive"
    );
}

#[test]
fn tokens_map_to_their_actor_and_are_never_shown() {
    let tokens = tokens()
        .with(
            "secret-token-b-9a1d7c3e5f0b8d2a6c4e",
            Acting::unsigned(Actor::Agent(AgentId::new("agent-b").expect("an id"))),
        )
        .expect("a strong token");
    assert_eq!(
        tokens
            .find("secret-token-a-4f9c2e7b1d8a3f6c0e5b")
            .map(Acting::actor),
        Some(&agent())
    );
    assert_eq!(
        tokens
            .find("secret-token-b-9a1d7c3e5f0b8d2a6c4e")
            .map(|a| a.actor().to_string()),
        Some("agent:agent-b".to_owned())
    );
    assert!(tokens.find("secret-token-").is_none());
    assert!(tokens.find("").is_none());
    assert!(
        tokens
            .find("secret-token-a-4f9c2e7b1d8a3f6c0e5b ")
            .is_none()
    );
    let shown = format!(
        "{tokens:?} {:?}",
        tokens.find("secret-token-a-4f9c2e7b1d8a3f6c0e5b")
    );
    assert!(!shown.contains("secret-token"), "{shown}");
    assert_eq!(tokens.len(), 2);
}
