//! A local HTTP stand-in for GitHub's REST API: real HTTP on loopback, one canned reply per
//! request from a handler, and every request seen kept for the test to inspect. Shared by the
//! REST client's tests and the crash test of effects through the outbox.
#![allow(
    dead_code,
    reason = "each test binary uses the part of the stand-in it needs"
)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// A canned response: status, extra headers, body, delay.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

pub fn ok(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![],
        body: body.into(),
        delay: Duration::ZERO,
    }
}

pub type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

pub struct Server {
    pub base: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

pub async fn serve(handler: Handler) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let handler = Arc::clone(&handler);
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let mut lines = head.split("\r\n");
                let request_line = lines.next().unwrap_or_default().to_owned();
                let mut parts = request_line.split(' ');
                let method = parts.next().unwrap_or_default().to_owned();
                let path = parts.next().unwrap_or_default().to_owned();
                let headers: BTreeMap<String, String> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                let length: usize = headers
                    .get("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = buf[head_end + 4..].to_vec();
                while body.len() < length {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                let seen = Seen {
                    method,
                    path,
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                };
                log.lock().expect("log").push(seen.clone());
                let reply = handler(&seen);
                tokio::time::sleep(reply.delay).await;
                let reason = match reply.status {
                    200 => "OK",
                    201 => "Created",
                    304 => "Not Modified",
                    403 => "Forbidden",
                    429 => "Too Many Requests",
                    _ => "Status",
                };
                let mut out = format!(
                    "HTTP/1.1 {} {reason}\r\nconnection: close\r\ncontent-type: application/json\r\n",
                    reply.status
                );
                for (k, v) in &reply.headers {
                    let _ = write!(out, "{k}: {v}\r\n");
                }
                let _ = write!(
                    out,
                    "content-length: {}\r\n\r\n{}",
                    reply.body.len(),
                    reply.body
                );
                let _ = stream.write_all(out.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Server { base, seen }
}
