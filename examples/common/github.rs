//! A stand-in for GitHub on loopback, for the stories that run loopx as a service beside it:
//! one repository's pull request with its check runs, reviews and comments, served in the REST
//! shapes loopx's GitHub client reads, and every change sent to a webhook as GitHub sends it —
//! a signed delivery whose payload is one of GitHub's own example payloads (the provider's test
//! fixtures), edited to the change.
//!
//! What it keeps is GitHub's side only: who commented what, which checks ran at which commit.
//! A comment posted through the REST API is delivered to the webhook too, as its author's, the
//! author named by the token the request carried.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use loopx_kernel::Timestamp;
use loopx_kernel::seams::Clock;
use loopx_provider::clock::SystemClock;
use loopx_provider::github::webhook::WebhookVerifier;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::Result;

/// The repository every payload of the fixtures is about.
pub const REPO: &str = "Codertocat/Hello-World";
/// The pull request the stand-in serves.
pub const NUMBER: u64 = 2;

/// One check run at a commit.
#[derive(Debug, Clone)]
struct Check {
    id: u64,
    name: String,
    sha: String,
    status: String,
    conclusion: Option<String>,
    started_at: String,
    completed_at: Option<String>,
}

/// One comment on the pull request's conversation.
#[derive(Debug, Clone)]
pub struct Comment {
    /// GitHub's id of it.
    pub id: u64,
    /// Who wrote it.
    pub login: String,
    /// What it says.
    pub body: String,
    created_at: String,
}

/// One review of the pull request.
#[derive(Debug, Clone)]
struct Review {
    id: u64,
    login: String,
    state: String,
    commit_id: String,
    body: String,
    submitted_at: String,
}

/// What GitHub holds of the repository.
#[derive(Debug)]
struct Repo {
    author: String,
    head: String,
    state: String,
    merged: bool,
    updated_at: String,
    checks: Vec<Check>,
    comments: Vec<Comment>,
    reviews: Vec<Review>,
    /// Who each API token is.
    tokens: BTreeMap<String, String>,
    next_id: u64,
    last_time: i64,
}

impl Repo {
    /// GitHub's time for the next change: the wall clock to the second, always after the last
    /// change, so GitHub's own order (which loopx orders facts by) follows the story's.
    fn stamp(&mut self) -> String {
        let now = SystemClock.now().as_millis() / 1000 * 1000;
        self.last_time = now.max(self.last_time + 1000);
        Timestamp::from_millis(self.last_time).to_string()
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn pull_json(&self) -> Value {
        json!({
            "number": NUMBER, "state": self.state, "title": "Add --format json",
            "draft": false, "merged": self.merged, "mergeable_state": "clean",
            "created_at": "2026-11-29T10:14:00Z", "updated_at": self.updated_at,
            "head": { "ref": "format-json", "sha": self.head },
            "base": { "ref": "main", "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e" },
            "user": { "login": self.author },
        })
    }
}

/// Where deliveries go, and the secret they are signed with.
struct Hook {
    url: String,
    secret: String,
}

struct Shared {
    repo: Mutex<Repo>,
    hook: Mutex<Option<Hook>>,
    /// Deliveries sent on their own (for comments posted through the API), not yet answered.
    sending: Mutex<Vec<JoinHandle<()>>>,
    /// Every delivery's answer, in the order they were answered.
    answers: Mutex<Vec<Delivered>>,
    http: reqwest::Client,
    deliveries: Mutex<u64>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A delivery and what the service answered.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// `X-GitHub-Event`.
    pub event: String,
    /// `X-GitHub-Delivery`.
    pub delivery: String,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The answer's JSON document.
    pub answer: Value,
}

/// The stand-in: its REST API on loopback, and the webhook it delivers to.
#[derive(Clone)]
pub struct GitHub {
    shared: Arc<Shared>,
    base: String,
}

impl GitHub {
    /// Starts the stand-in's API on a free loopback port, with pull request #2 open at `head`
    /// by `author`, and `tokens` mapping each API token to the login it speaks for.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start(author: &str, head: &str, tokens: &[(&str, &str)]) -> Result<GitHub> {
        let mut repo = Repo {
            author: author.to_owned(),
            head: head.to_owned(),
            state: "open".to_owned(),
            merged: false,
            updated_at: String::new(),
            checks: Vec::new(),
            comments: Vec::new(),
            reviews: Vec::new(),
            tokens: tokens
                .iter()
                .map(|(token, login)| ((*token).to_owned(), (*login).to_owned()))
                .collect(),
            next_id: 1000,
            last_time: 0,
        };
        repo.updated_at = repo.stamp();
        let shared = Arc::new(Shared {
            repo: Mutex::new(repo),
            hook: Mutex::new(None),
            sending: Mutex::new(Vec::new()),
            answers: Mutex::new(Vec::new()),
            http: reqwest::Client::new(),
            deliveries: Mutex::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let router = routes().with_state(Arc::clone(&shared));
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(GitHub { shared, base })
    }

    /// The REST API's base URL, for a GitHub client.
    pub fn api(&self) -> &str {
        &self.base
    }

    /// Sends every later change to `url`, signed with `secret`, as a repository webhook does.
    pub fn hook(&self, url: &str, secret: &str) {
        *lock(&self.shared.hook) = Some(Hook {
            url: url.to_owned(),
            secret: secret.to_owned(),
        });
    }

    /// The pull request's comments, oldest first.
    pub fn comments(&self) -> Vec<Comment> {
        lock(&self.shared.repo).comments.clone()
    }

    /// Every delivery's answer so far, in the order answered.
    pub fn answers(&self) -> Vec<Delivered> {
        lock(&self.shared.answers).clone()
    }

    /// Waits until every delivery sent on its own has been answered.
    pub async fn settled(&self) {
        loop {
            let pending: Vec<JoinHandle<()>> = lock(&self.shared.sending).drain(..).collect();
            if pending.is_empty() {
                return;
            }
            for sending in pending {
                let _ = sending.await;
            }
        }
    }

    /// The pull request opened: `pull_request` `opened` delivered.
    ///
    /// # Errors
    /// When the fixture cannot be read or the delivery not sent.
    pub async fn open_pull(&self) -> Result<Delivered> {
        let payload = {
            let repo = lock(&self.shared.repo);
            pull_payload(&repo, "opened")?
        };
        self.shared.deliver("pull_request", payload).await
    }

    /// A check run `name` queued at the head: `check_run` `created` delivered.
    ///
    /// # Errors
    /// As [`GitHub::open_pull`].
    pub async fn queue_check(&self, name: &str) -> Result<Delivered> {
        let payload = {
            let mut repo = lock(&self.shared.repo);
            let check = Check {
                id: repo.id(),
                name: name.to_owned(),
                sha: repo.head.clone(),
                status: "queued".to_owned(),
                conclusion: None,
                started_at: repo.stamp(),
                completed_at: None,
            };
            repo.checks.push(check.clone());
            check_payload(&repo, &check, "created")?
        };
        self.shared.deliver("check_run", payload).await
    }

    /// The check run `name` at the head completes with `conclusion` (`success`, `failure`):
    /// `check_run` `completed` delivered.
    ///
    /// # Errors
    /// As [`GitHub::open_pull`], or when no such check runs at the head.
    pub async fn complete_check(&self, name: &str, conclusion: &str) -> Result<Delivered> {
        let payload = {
            let mut repo = lock(&self.shared.repo);
            let at = repo.stamp();
            let head = repo.head.clone();
            let check = repo
                .checks
                .iter_mut()
                .rev()
                .find(|c| c.name == name && c.sha == head)
                .ok_or_else(|| format!("no check run `{name}` at the head"))?;
            "completed".clone_into(&mut check.status);
            check.conclusion = Some(conclusion.to_owned());
            check.completed_at = Some(at);
            let check = check.clone();
            check_payload(&repo, &check, "completed")?
        };
        self.shared.deliver("check_run", payload).await
    }

    /// `login` comments `body` on the pull request (through the web page): `issue_comment`
    /// `created` delivered, and its answer returned.
    ///
    /// # Errors
    /// As [`GitHub::open_pull`].
    pub async fn comment(&self, login: &str, body: &str) -> Result<Delivered> {
        let payload = lock(&self.shared.repo).add_comment(login, body).1?;
        self.shared.deliver("issue_comment", payload).await
    }

    /// `login` approves the pull request at its head: `pull_request_review` `submitted`.
    ///
    /// # Errors
    /// As [`GitHub::open_pull`].
    pub async fn approve(&self, login: &str, body: &str) -> Result<Delivered> {
        let payload = {
            let mut repo = lock(&self.shared.repo);
            let review = Review {
                id: repo.id(),
                login: login.to_owned(),
                state: "approved".to_owned(),
                commit_id: repo.head.clone(),
                body: body.to_owned(),
                submitted_at: repo.stamp(),
            };
            repo.reviews.push(review.clone());
            review_payload(&repo, &review)?
        };
        self.shared.deliver("pull_request_review", payload).await
    }

    /// `login` merges the pull request: `pull_request` `closed` (merged) delivered.
    ///
    /// # Errors
    /// As [`GitHub::open_pull`].
    pub async fn merge(&self) -> Result<Delivered> {
        let payload = {
            let mut repo = lock(&self.shared.repo);
            "closed".clone_into(&mut repo.state);
            repo.merged = true;
            repo.updated_at = repo.stamp();
            pull_payload(&repo, "closed")?
        };
        self.shared.deliver("pull_request", payload).await
    }
}

impl Repo {
    /// Adds `login`'s comment; the comment and its `issue_comment` payload.
    fn add_comment(&mut self, login: &str, body: &str) -> (Comment, Result<Value>) {
        let comment = Comment {
            id: self.id(),
            login: login.to_owned(),
            body: body.to_owned(),
            created_at: self.stamp(),
        };
        self.comments.push(comment.clone());
        let payload = comment_payload(self, &comment);
        (comment, payload)
    }
}

impl Shared {
    /// Signs and posts one delivery to the hook, and keeps its answer.
    async fn deliver(&self, event: &str, payload: Value) -> Result<Delivered> {
        let body = serde_json::to_vec(&payload)?;
        let (url, signature) = {
            let hook = lock(&self.hook);
            let hook = hook.as_ref().ok_or("no webhook is configured")?;
            (
                hook.url.clone(),
                WebhookVerifier::new(hook.secret.clone()).sign(&body),
            )
        };
        let delivery = {
            let mut count = lock(&self.deliveries);
            *count += 1;
            format!("7a1c0000-0000-4000-8000-{:012}", *count)
        };
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("X-GitHub-Event", event)
            .header("X-GitHub-Delivery", &delivery)
            .header("X-Hub-Signature-256", signature)
            .body(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let answer = response.json::<Value>().await.unwrap_or(Value::Null);
        let delivered = Delivered {
            event: event.to_owned(),
            delivery,
            status,
            answer,
        };
        lock(&self.answers).push(delivered.clone());
        Ok(delivered)
    }
}

fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/repos/{owner}/{name}/pulls/{number}", get(pull))
        .route("/repos/{owner}/{name}/pulls/{number}/reviews", get(reviews))
        .route(
            "/repos/{owner}/{name}/commits/{sha}/check-runs",
            get(check_runs),
        )
        .route("/repos/{owner}/{name}/commits/{sha}/status", get(status))
        .route(
            "/repos/{owner}/{name}/issues/{number}/comments",
            get(comments).post(post_comment),
        )
        .fallback(|| async { not_found() })
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({ "message": "Not Found" })),
    )
        .into_response()
}

/// True when the path names the stand-in's repository (and pull request, when given).
fn ours(owner: &str, name: &str, number: Option<u64>) -> bool {
    format!("{owner}/{name}") == REPO && number.is_none_or(|n| n == NUMBER)
}

async fn pull(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Response {
    if !ours(&owner, &name, Some(number)) {
        return not_found();
    }
    Json(lock(&shared.repo).pull_json()).into_response()
}

async fn reviews(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Response {
    if !ours(&owner, &name, Some(number)) {
        return not_found();
    }
    let repo = lock(&shared.repo);
    let list: Vec<Value> = repo
        .reviews
        .iter()
        .map(|r| {
            json!({
                "id": r.id, "user": { "login": r.login }, "state": r.state.to_uppercase(),
                "commit_id": r.commit_id, "body": r.body, "submitted_at": r.submitted_at,
            })
        })
        .collect();
    Json(list).into_response()
}

async fn check_runs(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, sha)): Path<(String, String, String)>,
) -> Response {
    if !ours(&owner, &name, None) {
        return not_found();
    }
    let repo = lock(&shared.repo);
    let runs: Vec<Value> = repo
        .checks
        .iter()
        .filter(|c| c.sha == sha)
        .map(|c| {
            json!({
                "id": c.id, "name": c.name, "head_sha": c.sha, "status": c.status,
                "conclusion": c.conclusion, "started_at": c.started_at,
                "completed_at": c.completed_at, "app": { "slug": "github-actions" },
                "pull_requests": [{ "number": NUMBER }],
            })
        })
        .collect();
    Json(json!({ "total_count": runs.len(), "check_runs": runs })).into_response()
}

async fn status(Path((owner, name, sha)): Path<(String, String, String)>) -> Response {
    if !ours(&owner, &name, None) {
        return not_found();
    }
    Json(json!({ "state": "pending", "sha": sha, "total_count": 0, "statuses": [] }))
        .into_response()
}

async fn comments(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Response {
    if !ours(&owner, &name, Some(number)) {
        return not_found();
    }
    let repo = lock(&shared.repo);
    let list: Vec<Value> = repo.comments.iter().map(comment_json).collect();
    Json(list).into_response()
}

/// `POST …/issues/2/comments`: the comment is added as the token's login, answered `201`, and
/// delivered to the webhook on its own, as GitHub does.
async fn post_comment(
    State(shared): State<Arc<Shared>>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    if !ours(&owner, &name, Some(number)) {
        return not_found();
    }
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    let Some(body) = request.get("body").and_then(Value::as_str) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "message": "body" })),
        )
            .into_response();
    };
    let (comment, payload) = {
        let mut repo = lock(&shared.repo);
        let Some(login) = repo.tokens.get(&token).cloned() else {
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({ "message": "Bad credentials" })),
            )
                .into_response();
        };
        repo.add_comment(&login, body)
    };
    if let Ok(payload) = payload {
        let sender = Arc::clone(&shared);
        let sending = tokio::spawn(async move {
            let _ = sender.deliver("issue_comment", payload).await;
        });
        lock(&shared.sending).push(sending);
    }
    (StatusCode::CREATED, Json(comment_json(&comment))).into_response()
}

fn comment_json(c: &Comment) -> Value {
    json!({
        "id": c.id, "user": { "login": c.login }, "body": c.body,
        "created_at": c.created_at, "updated_at": c.created_at,
    })
}

// ----- GitHub's example payloads, edited ---------------------------------------------------

fn fixture(path: &str) -> Result<Value> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../loopx-provider/tests/fixtures/github-webhooks");
    let text = std::fs::read(root.join(path))?;
    Ok(serde_json::from_slice(&text)?)
}

/// Sets each `(pointer, value)` of `edits` in `payload`; a pointer the payload lacks is an
/// error, so an edit never silently misses.
fn edit(mut payload: Value, edits: &[(&str, Value)]) -> Result<Value> {
    for (pointer, value) in edits {
        let slot = payload
            .pointer_mut(pointer)
            .ok_or_else(|| format!("the payload has no `{pointer}`"))?;
        *slot = value.clone();
    }
    Ok(payload)
}

fn pull_payload(repo: &Repo, action: &str) -> Result<Value> {
    edit(
        fixture("pull_request/opened.payload.json")?,
        &[
            ("/action", json!(action)),
            ("/pull_request/state", json!(repo.state)),
            ("/pull_request/merged", json!(repo.merged)),
            ("/pull_request/head/sha", json!(repo.head)),
            ("/pull_request/updated_at", json!(repo.updated_at)),
            ("/pull_request/user/login", json!(repo.author)),
        ],
    )
}

fn check_payload(repo: &Repo, check: &Check, action: &str) -> Result<Value> {
    edit(
        fixture("check_run/completed.payload.json")?,
        &[
            ("/action", json!(action)),
            ("/check_run/id", json!(check.id)),
            ("/check_run/name", json!(check.name)),
            ("/check_run/head_sha", json!(check.sha)),
            ("/check_run/status", json!(check.status)),
            ("/check_run/conclusion", json!(check.conclusion)),
            ("/check_run/started_at", json!(check.started_at)),
            ("/check_run/completed_at", json!(check.completed_at)),
            ("/check_run/pull_requests/0/head/sha", json!(repo.head)),
        ],
    )
}

fn comment_payload(repo: &Repo, comment: &Comment) -> Result<Value> {
    let mut payload = edit(
        fixture("issue_comment/created.payload.json")?,
        &[
            ("/issue/number", json!(NUMBER)),
            ("/comment/id", json!(comment.id)),
            ("/comment/user/login", json!(comment.login)),
            ("/comment/body", json!(comment.body)),
            ("/comment/created_at", json!(comment.created_at)),
            ("/comment/updated_at", json!(comment.created_at)),
            ("/issue/user/login", json!(repo.author)),
        ],
    )?;
    // A comment on a pull request's conversation is an issue comment whose issue is the pull.
    payload["issue"]["pull_request"] = json!({
        "url": format!("https://api.github.com/repos/{REPO}/pulls/{NUMBER}")
    });
    Ok(payload)
}

fn review_payload(repo: &Repo, review: &Review) -> Result<Value> {
    edit(
        fixture("pull_request_review/submitted.payload.json")?,
        &[
            ("/review/id", json!(review.id)),
            ("/review/user/login", json!(review.login)),
            ("/review/state", json!(review.state)),
            ("/review/commit_id", json!(review.commit_id)),
            ("/review/body", json!(review.body)),
            ("/review/submitted_at", json!(review.submitted_at)),
            ("/pull_request/head/sha", json!(repo.head)),
            ("/pull_request/user/login", json!(repo.author)),
        ],
    )
}
