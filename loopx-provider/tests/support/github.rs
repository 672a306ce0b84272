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

/// The request's path without its query.
pub fn route(seen: &Seen) -> &str {
    seen.path.split('?').next().unwrap_or_default()
}

/// The value of query parameter `name`, if the request has it.
pub fn query<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    let (_, query) = seen.path.split_once('?')?;
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// The request's path with query parameter `name` set to `value`.
fn with_query(seen: &Seen, name: &str, value: &str) -> String {
    let mut pairs: Vec<String> = seen
        .path
        .split_once('?')
        .map(|(_, q)| q.split('&').filter(|p| !p.starts_with(&format!("{name}="))))
        .into_iter()
        .flatten()
        .map(str::to_owned)
        .collect();
    pairs.push(format!("{name}={value}"));
    format!("{}?{}", route(seen), pairs.join("&"))
}

/// One page of `items` as GitHub serves a listing: `per_page` (30 unless asked, at most 100)
/// and `page` (from 1) read from the query; the page's items as a bare array, or wrapped as
/// `{"total_count": n, "<key>": [...]}` when `wrap` names the key (check runs, combined
/// statuses); and a `Link` header naming the `next` and `last` pages by absolute URLs on the
/// server's own host, as GitHub does.
pub fn paged(seen: &Seen, items: &[serde_json::Value], wrap: Option<&str>) -> Reply {
    let per_page = query(seen, "per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = query(seen, "page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let pages = items.len().div_ceil(per_page).max(1);
    let slice: Vec<serde_json::Value> = items
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    let body = match wrap {
        Some(key) => serde_json::json!({ "total_count": items.len(), key: slice }),
        None => serde_json::Value::Array(slice),
    };
    let host = seen.headers.get("host").cloned().unwrap_or_default();
    let link = |n: usize, rel: &str| {
        let per = with_query(seen, "per_page", &per_page.to_string());
        let target = Seen {
            path: per,
            ..seen.clone()
        };
        format!(
            "<http://{host}{}>; rel=\"{rel}\"",
            with_query(&target, "page", &n.to_string())
        )
    };
    let mut links = Vec::new();
    if page < pages {
        links.push(link(page + 1, "next"));
        links.push(link(pages, "last"));
    }
    if page > 1 {
        links.push(link(1, "first"));
        links.push(link(page - 1, "prev"));
    }
    let mut reply = ok(&body.to_string());
    if !links.is_empty() {
        reply.headers.push(("link".to_owned(), links.join(", ")));
    }
    reply
}

/// One page of a pull request's review threads as GitHub's GraphQL API answers the query the
/// client sends (`repository.pullRequest.reviewThreads`), `first` threads after the cursor the
/// request's variables carry (`after`; cursors are thread indexes here), at head `head_sha`.
/// `resolved` holds each thread's `isResolved`.
pub fn review_threads(seen: &Seen, head_sha: &str, resolved: &[bool]) -> Reply {
    let request: serde_json::Value = serde_json::from_str(&seen.body).unwrap_or_default();
    let variables = &request["variables"];
    let first = variables["first"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let start = variables["after"]
        .as_str()
        .and_then(|c| c.parse::<usize>().ok())
        .map_or(0, |c| c + 1);
    let nodes: Vec<serde_json::Value> = resolved
        .iter()
        .enumerate()
        .skip(start)
        .take(first)
        .map(|(i, r)| serde_json::json!({ "id": format!("PRRT_{i}"), "isResolved": r }))
        .collect();
    let end = start + nodes.len();
    let body = serde_json::json!({ "data": { "repository": { "pullRequest": {
        "headRefOid": head_sha,
        "reviewThreads": {
        "totalCount": resolved.len(),
        "pageInfo": {
            "hasNextPage": end < resolved.len(),
            "endCursor": if end > 0 { serde_json::Value::from((end - 1).to_string()) } else { serde_json::Value::Null },
        },
        "nodes": nodes,
    } } } } });
    ok(&body.to_string())
}

/// `reply` as a conditional `GET` answers it: with an `ETag` derived from its body, and as
/// `304 Not Modified` (no body) when the request's `If-None-Match` carries that tag.
pub fn conditional(seen: &Seen, reply: Reply) -> Reply {
    use std::hash::{DefaultHasher, Hash as _, Hasher as _};
    let mut hasher = DefaultHasher::new();
    reply.body.hash(&mut hasher);
    let etag = format!("W/\"{:016x}\"", hasher.finish());
    if seen.headers.get("if-none-match") == Some(&etag) {
        return Reply {
            status: 304,
            headers: vec![("etag".to_owned(), etag)],
            body: String::new(),
            delay: reply.delay,
        };
    }
    let mut reply = reply;
    reply.headers.push(("etag".to_owned(), etag));
    reply
}

/// Pull request `number` of `repo` as GitHub's REST API serves it to a poll, each answer a
/// conditional `GET`'s ([`conditional`]): open, its head at `sha` with one check run `test`
/// concluding `conclusion`, no review, a green combined status. `None` for any other path.
pub fn pull_request(
    seen: &Seen,
    repo: &str,
    number: u64,
    sha: &str,
    conclusion: &str,
) -> Option<Reply> {
    let pull = format!("/repos/{repo}/pulls/{number}");
    let path = route(seen);
    let body = if path == pull {
        format!(
            r#"{{"number": {number}, "state": "open", "title": "Update the README", "draft": false,
            "user": {{"login": "Codertocat"}}, "head": {{"ref": "changes", "sha": "{sha}"}},
            "base": {{"ref": "master", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"}},
            "updated_at": "2026-11-29T09:00:00Z"}}"#
        )
    } else if path == format!("{pull}/reviews") {
        "[]".to_owned()
    } else if path == format!("/repos/{repo}/commits/{sha}/check-runs") {
        format!(
            r#"{{"total_count": 1, "check_runs": [{{"id": 1, "name": "test", "head_sha": "{sha}",
            "status": "completed", "conclusion": "{conclusion}", "app": {{"slug": "github-actions"}},
            "pull_requests": [{{"number": {number}}}]}}]}}"#
        )
    } else if path == format!("/repos/{repo}/commits/{sha}/status") {
        r#"{"state": "success", "statuses": []}"#.to_owned()
    } else {
        return None;
    };
    Some(conditional(seen, ok(&body)))
}

/// GitHub's answer once the rate limit is spent: `403` with `x-ratelimit-remaining: 0` and
/// `x-ratelimit-reset` at `reset` (seconds since the epoch).
pub fn rate_limited(reset: i64) -> Reply {
    Reply {
        status: 403,
        headers: vec![
            ("x-ratelimit-remaining".into(), "0".into()),
            ("x-ratelimit-reset".into(), reset.to_string()),
        ],
        body: r#"{"message": "API rate limit exceeded"}"#.into(),
        delay: Duration::ZERO,
    }
}

/// `404 Not Found`, as GitHub answers a path it does not serve.
pub fn not_found() -> Reply {
    Reply {
        status: 404,
        headers: vec![],
        body: r#"{"message": "Not Found"}"#.into(),
        delay: Duration::ZERO,
    }
}
