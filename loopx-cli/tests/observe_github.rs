//! `loopx observe github` against a small HTTP server on loopback that answers in GitHub's REST
//! shapes, built from the saved webhook payloads of the same pull request.

mod support;

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{Loopx, at};

const REPO: &str = "Codertocat/Hello-World";
const PULL: &str = "2";
const HEAD: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
const TOKEN: &str = "ghp_test_token_never_shown_5f1c0ffee";
const TOKEN_VAR: &str = "LOOPX_TEST_GITHUB_TOKEN";

/// A canned answer: status, extra headers, body.
type Reply = (u16, Vec<(String, String)>, String);
/// How the server answers a path; replaceable while it runs.
type Answer = Arc<Mutex<Box<dyn Fn(&str) -> Reply + Send>>>;
/// Each request's path and `Authorization` header, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A one-thread HTTP/1.1 server on loopback; each request gets `reply(path)` and the
/// connection is closed. Records each request's path and `Authorization` header.
struct Server {
    base: String,
    reply: Answer,
    seen: Seen,
}

impl Server {
    fn start(reply: impl Fn(&str) -> Reply + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let reply: Answer = Arc::new(Mutex::new(Box::new(reply)));
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let (answer, log) = (Arc::clone(&reply), Arc::clone(&seen));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
                let (mut auth, mut length) = (None, 0_usize);
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':') {
                        match name.trim().to_ascii_lowercase().as_str() {
                            "authorization" => auth = Some(value.trim().to_owned()),
                            "content-length" => length = value.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                log.lock().expect("log").push((path.clone(), auth));
                let (status, headers, body) = (answer.lock().expect("reply"))(&path);
                let mut out = format!(
                    "HTTP/1.1 {status} Status\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    let _ = write!(out, "{name}: {value}\r\n");
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = stream.write_all(out.as_bytes());
            }
        });
        Server { base, reply, seen }
    }

    fn answer(&self, reply: impl Fn(&str) -> Reply + Send + 'static) {
        *self.reply.lock().expect("reply") = Box::new(reply);
    }
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../loopx-provider/tests/fixtures/github-webhooks")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("a webhook fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

fn fixture_path(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../loopx-provider/tests/fixtures/github-webhooks")
        .join(name)
        .display()
        .to_string()
}

/// GitHub's REST answers for pull request 2, with the given check run fixture.
fn github(check_run: &str) -> impl Fn(&str) -> Reply + Send + 'static {
    let pull = fixture("pull_request/opened.payload.json")["pull_request"].clone();
    let review = fixture("pull_request_review/submitted.payload.json")["review"].clone();
    let run = fixture(check_run)["check_run"].clone();
    let status = fixture("status/payload.json");
    let reviews = json!([review]);
    let runs = json!({ "total_count": 1, "check_runs": [run] });
    let combined = json!({
        "state": status["state"], "sha": HEAD, "total_count": 1,
        "statuses": [{ "context": status["context"], "state": status["state"],
                       "description": status["description"] }],
    });
    move |path: &str| {
        let body = if path == format!("/repos/{REPO}/pulls/{PULL}") {
            &pull
        } else if path == format!("/repos/{REPO}/pulls/{PULL}/reviews?per_page=100") {
            &reviews
        } else if path == format!("/repos/{REPO}/commits/{HEAD}/check-runs?per_page=100") {
            &runs
        } else if path == format!("/repos/{REPO}/commits/{HEAD}/status") {
            &combined
        } else {
            return (404, vec![], r#"{"message": "Not Found"}"#.to_owned());
        };
        (200, vec![], body.to_string())
    }
}

/// A store with goal `g`.
fn store() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let github = lx.register_key("provider:github");
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:owner",
        "--now",
        &at(29, "10:00"),
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
        "--register-key",
        &github,
    ]);
    lx
}

/// Runs `observe github` against the server at `now`, with the token in its variable.
fn poll(lx: &Loopx, server: &Server, now: &str) -> support::Run {
    poll_with(lx, server, now, &[])
}

/// [`poll`] with more global flags.
fn poll_with(lx: &Loopx, server: &Server, now: &str, extra: &[&str]) -> support::Run {
    let args = [
        &[
            "--json",
            "--goal",
            "g",
            "--now",
            now,
            "observe",
            "github",
            "--repo",
            REPO,
            "--pull",
            PULL,
            "--api-url",
            &server.base,
            "--token-env",
            TOKEN_VAR,
        ][..],
        extra,
    ]
    .concat();
    lx.run_env(&args, &[(TOKEN_VAR, TOKEN)])
}

/// Every byte of the store's files (the database and any journal beside it; not the key
/// directory beside it).
fn store_bytes(lx: &Loopx) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(lx.dir.path())
        .expect("store dir")
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("loopx.db") && entry.path().is_file() {
            bytes.extend(std::fs::read(entry.path()).expect("store file"));
        }
    }
    bytes
}

fn keys(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
#[allow(clippy::too_many_lines, reason = "one pull request, polled in order")]
fn a_poll_records_the_pull_reviews_and_ci_at_the_exact_head_then_nothing_when_unchanged() {
    let lx = store();
    let server = Server::start(github("check_run/completed.payload.json"));
    let pr = format!("pr:{REPO}#{PULL}");
    let review = format!("review:{REPO}#{PULL}/Codertocat");
    let ci = format!("ci:{REPO}#{PULL}");
    let revision = format!("git:{HEAD}");

    // The same pull request seen first through a saved webhook delivery.
    let hook = lx.ok(&[
        "--goal",
        "g",
        "--as",
        "provider:github",
        "--now",
        &at(29, "10:01"),
        "observe",
        "webhook",
        "--event",
        "pull_request",
        "--body",
        &fixture_path("pull_request/opened.payload.json"),
    ]);
    assert_eq!(hook["recorded"], true);

    let first = poll(&lx, &server, &at(29, "10:02"));
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let doc = first.json();
    assert_eq!(
        doc["github"],
        json!({ "repo": REPO, "pull": 2, "head_sha": HEAD, "revision": revision })
    );
    assert_eq!(
        keys(&doc["unchanged"]),
        [pr.as_str()],
        "the webhook's observation fingerprints alike"
    );
    assert_eq!(keys(&doc["recorded"]), [review.as_str(), ci.as_str()]);
    assert!(keys(&doc["replayed"]).is_empty());
    let observations = doc["observations"].as_array().expect("observations");
    assert_eq!(observations.len(), 3);
    for entry in observations {
        assert_eq!(entry["observation"]["revision"], revision.as_str());
        assert_eq!(entry["replayed"], false);
        assert!(entry["receipt"]["revision"].is_u64());
    }
    assert_eq!(observations[0]["recorded"], false);
    assert_eq!(observations[0]["observation"]["facts"]["head_sha"], HEAD);
    assert_eq!(observations[2]["observation"]["subject"], pr.as_str());
    assert_eq!(
        observations[2]["observation"]["facts"]["verdict"],
        "passing"
    );
    assert_eq!(
        observations[2]["observation"]["facts"]["item.check:Octocoders-linter"],
        "passing"
    );
    let log = lx.ok(&["--goal", "g", "log", "--after", "1"]);
    let actors: Vec<&Value> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| &e["actor"])
        .collect();
    assert_eq!(actors.len(), 3, "{log}");
    assert!(
        actors
            .iter()
            .all(|a| **a == json!({ "kind": "provider", "id": "github" })),
        "recorded as the GitHub provider: {actors:?}"
    );

    // The same data again, later: nothing recorded, the goal does not move.
    let before = lx.revision("g");
    let again = poll(&lx, &server, &at(29, "10:07"));
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let doc = again.json();
    assert!(keys(&doc["recorded"]).is_empty());
    assert_eq!(
        keys(&doc["unchanged"]),
        [pr.as_str(), review.as_str(), ci.as_str()]
    );
    assert_eq!(lx.revision("g"), before);

    // The check fails: only the CI roll-up changes.
    server.answer(github("check_run/completed.1.payload.json"));
    let failed = poll_with(&lx, &server, &at(29, "10:09"), &["--op", "poll-3"]);
    assert_eq!(failed.code, 0, "{}{}", failed.stdout, failed.stderr);
    let doc = failed.json();
    assert_eq!(keys(&doc["recorded"]), [ci.as_str()]);
    assert_eq!(
        doc["observations"][2]["observation"]["facts"]["verdict"],
        "failing"
    );
    assert_eq!(doc["observations"][2]["receipt"]["operation"], "poll-3.3");
    assert_eq!(lx.revision("g"), before + 1);
    // A retry under the same operation id returns each first receipt and changes nothing.
    let retry = poll_with(&lx, &server, &at(29, "10:09"), &["--op", "poll-3"]);
    assert_eq!(retry.code, 0, "{}{}", retry.stdout, retry.stderr);
    let doc = retry.json();
    assert_eq!(
        keys(&doc["replayed"]),
        [pr.as_str(), review.as_str(), ci.as_str()]
    );
    assert_eq!(lx.revision("g"), before + 1);

    // Human output names each observation and the tally.
    let text = lx.run_env(
        &[
            "--goal",
            "g",
            "--now",
            &at(29, "10:10"),
            "observe",
            "github",
            "--repo",
            REPO,
            "--pull",
            PULL,
            "--api-url",
            &server.base,
            "--token-env",
            TOKEN_VAR,
        ],
        &[(TOKEN_VAR, TOKEN)],
    );
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains(&format!("unchanged observation `{ci}` (no-op)")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("0 recorded, 3 unchanged"),
        "{}",
        text.stdout
    );

    // The token was sent on every request, and is nowhere else.
    let seen = server.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 20, "four requests a poll: {seen:?}");
    let bearer = format!("Bearer {TOKEN}");
    assert!(
        seen.iter()
            .all(|(_, auth)| auth.as_deref() == Some(&*bearer))
    );
    for run in [&first, &again, &failed, &retry, &text] {
        assert!(!run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN));
    }
    assert!(
        !contains(&store_bytes(&lx), TOKEN),
        "the token is in the store"
    );
}

#[test]
fn refusals_and_malformed_answers_are_typed_errors_that_write_nothing() {
    let lx = store();
    let server = Server::start(|_: &str| {
        (
            401,
            vec![],
            r#"{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}"#
                .to_owned(),
        )
    });
    let revision = lx.revision("g");
    let bytes = store_bytes(&lx);
    let mut runs = Vec::new();

    let refused = poll(&lx, &server, &at(29, "10:02"));
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "github_unauthorized");
    assert!(error["message"].as_str().unwrap_or("").contains("401"));
    assert!(error["hint"].as_str().unwrap_or("").contains("--token-env"));
    runs.push(refused);

    // The pull request answers with something that is not a pull request.
    let malformed = format!("/repos/{REPO}/pulls/{PULL}");
    server.answer(move |path: &str| {
        if path == malformed {
            (200, vec![], r#"{"number": "two", "head": null"#.to_owned())
        } else {
            (404, vec![], "{}".to_owned())
        }
    });
    let bad = poll(&lx, &server, &at(29, "10:03"));
    assert_eq!(bad.code, 7, "{}{}", bad.stdout, bad.stderr);
    assert_eq!(bad.json()["error"]["code"], "malformed_response");
    runs.push(bad);

    // A rate limit says when it resets.
    server.answer(|_: &str| {
        (
            403,
            vec![
                ("x-ratelimit-remaining".to_owned(), "0".to_owned()),
                ("x-ratelimit-reset".to_owned(), "1796112000".to_owned()),
            ],
            r#"{"message": "API rate limit exceeded"}"#.to_owned(),
        )
    });
    let limited = poll(&lx, &server, &at(29, "10:04"));
    assert_eq!(limited.code, 1, "{}{}", limited.stdout, limited.stderr);
    let error = &limited.json()["error"];
    assert_eq!(error["code"], "rate_limited");
    assert_eq!(error["details"]["retry_after"], "2026-12-01T08:00:00.000Z");
    assert!(
        error["hint"]
            .as_str()
            .unwrap_or("")
            .contains("2026-12-01T08:00:00.000Z")
    );
    runs.push(limited);

    // An unknown pull request.
    server.answer(|_: &str| (404, vec![], r#"{"message": "Not Found"}"#.to_owned()));
    let missing = poll(&lx, &server, &at(29, "10:05"));
    assert_eq!(missing.code, 5, "{}{}", missing.stdout, missing.stderr);
    assert_eq!(missing.json()["error"]["code"], "github_not_found");
    runs.push(missing);

    // A token variable that is not set: refused before any request.
    let asked = server.seen.lock().expect("log").len();
    let unset = lx.run(&[
        "--json",
        "--goal",
        "g",
        "observe",
        "github",
        "--repo",
        REPO,
        "--pull",
        PULL,
        "--api-url",
        &server.base,
        "--token-env",
        "LOOPX_TEST_UNSET_GITHUB_TOKEN",
    ]);
    assert_eq!(unset.code, 2);
    assert_eq!(unset.json()["error"]["code"], "token_missing");
    assert_eq!(server.seen.lock().expect("log").len(), asked);

    // Nothing reached the store, and the token appears nowhere.
    assert_eq!(lx.revision("g"), revision);
    assert_eq!(store_bytes(&lx), bytes, "the store's bytes are unchanged");
    for run in &runs {
        assert!(!run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN));
    }
    assert!(!contains(&store_bytes(&lx), TOKEN));
}

/// A poll retried with the same `--op` on the wall clock (no `--now`) replays each first
/// receipt, as the README promises: the observation time the CLI fills in is not the intent.
#[test]
fn a_poll_retried_with_the_same_op_on_the_wall_clock_replays() {
    let lx = store();
    let server = Server::start(github("check_run/completed.payload.json"));
    let args = [
        "--json",
        "--goal",
        "g",
        "--op",
        "poll-1",
        "observe",
        "github",
        "--repo",
        REPO,
        "--pull",
        PULL,
        "--api-url",
        &server.base,
        "--token-env",
        TOKEN_VAR,
    ];
    let first = lx.run_env(&args, &[(TOKEN_VAR, TOKEN)]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let first = first.json();
    assert_eq!(keys(&first["recorded"]).len(), 3, "{first}");
    let revision = lx.revision("g");
    // The wall clock has moved on (timestamps are in milliseconds).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let again = lx.run_env(&args, &[(TOKEN_VAR, TOKEN)]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let again = again.json();
    assert_eq!(
        keys(&again["replayed"]),
        keys(&first["recorded"]),
        "{again}"
    );
    let receipts = |doc: &Value| -> Vec<Value> {
        doc["observations"]
            .as_array()
            .expect("observations")
            .iter()
            .map(|o| o["receipt"].clone())
            .collect()
    };
    assert_eq!(receipts(&again), receipts(&first));
    assert_eq!(lx.revision("g"), revision);
}
