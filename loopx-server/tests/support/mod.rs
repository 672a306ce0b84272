//! What the server's HTTP tests share: a router served on a loopback port, and an answer read
//! as its status and JSON document.

use serde_json::Value;

/// Serves `router` on a free loopback port for the rest of the test; its base URL.
pub async fn on_loopback(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

/// The answer's status and its body as JSON (as a JSON string when it is not JSON).
pub async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}
