//! The GitHub REST client: pull requests, reviews, checks and statuses as observations, and
//! fenced, idempotent effects (comments, commit statuses) with readback.
//!
//! Guarantees:
//! - the token is held in a [`Token`] whose `Debug` is redacted; it is sent only in the
//!   `Authorization` header and never appears in an error or a log line (errors carry the
//!   method, the path and the status, never headers or URLs with credentials, and never the
//!   text of a response body: a body that does not decode is described by the field path and
//!   the expected type, so a token a server echoes back is not quoted either);
//! - `GET`s are conditional: a response's `ETag` is remembered and sent back as
//!   `If-None-Match`; a `304 Not Modified` reuses the remembered body (and does not count
//!   against GitHub's rate limit);
//! - rate limits are typed: `429`, or `403` with `x-ratelimit-remaining: 0`, becomes
//!   [`GitHubError::RateLimited`] with the instant from `Retry-After` or `x-ratelimit-reset`;
//! - the CI roll-up reads checks and statuses **of the pull request's exact head sha**, read in
//!   the same poll, and binds its observation to that sha;
//! - every effect carries its idempotency key and lease epoch into the written object (a hidden
//!   marker in a comment; a tag in a status description); `perform` reads back first and never
//!   writes twice. The client keeps no fence of its own: an epoch is fenced by the store, where
//!   the effect's intent must commit under the todo's current lease epoch before the engine
//!   calls `perform` (the kernel's outbox), so two processes cannot both act on one todo's
//!   lease, whatever each remembers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use loopx_kernel::seams::{
    Clock, Effect, EffectStatus, Effector, ObserveRequest, Provider, ProviderError,
};
use loopx_kernel::{Observation, SourceId, Timestamp};
use reqwest::header::{ACCEPT, AUTHORIZATION, ETAG, HeaderMap, IF_NONE_MATCH, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{
    CheckRun, CiItem, CiRollup, GitHubEvent, PullRequest, Review, check_run_verdict, roll_up,
    status_verdict,
};
use crate::fact::sha256_hex;

/// An API token. Its `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Token(token.into())
    }

    /// Reads the token from the environment variable `name`; `None` when unset or empty.
    pub fn from_env(name: &str) -> Option<Self> {
        std::env::var(name)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(Token)
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A REST failure. No variant holds the token, a header, a full URL or any text of a response
/// body (a body that does not decode is described by field path and expected type).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GitHubError {
    /// Rate limited until the given instant.
    #[error("GitHub rate limit on {path}: retry after {until}")]
    RateLimited {
        /// The request path.
        path: String,
        /// When to retry.
        until: Timestamp,
    },
    /// `304` without a remembered body (should not happen; the cache was lost).
    #[error("GitHub answered 304 for {path} but no earlier body is remembered")]
    NotModifiedWithoutCache {
        /// The request path.
        path: String,
    },
    /// `401` or `403` (not a rate limit): the token is missing, wrong or lacks a scope.
    #[error("GitHub refused {method} {path} with {status}: check the token's permissions")]
    Unauthorized {
        /// The method.
        method: String,
        /// The request path.
        path: String,
        /// The status code.
        status: u16,
    },
    /// `404`.
    #[error("GitHub has no {path}")]
    NotFound {
        /// The request path.
        path: String,
    },
    /// `5xx`.
    #[error("GitHub failed {method} {path} with {status}")]
    Server {
        /// The method.
        method: String,
        /// The request path.
        path: String,
        /// The status code.
        status: u16,
    },
    /// Another unexpected status.
    #[error("GitHub answered {method} {path} with {status}")]
    Status {
        /// The method.
        method: String,
        /// The request path.
        path: String,
        /// The status code.
        status: u16,
    },
    /// No answer in time.
    #[error("GitHub did not answer {method} {path} in time")]
    Timeout {
        /// The method.
        method: String,
        /// The request path.
        path: String,
    },
    /// The connection failed.
    #[error("cannot reach GitHub for {method} {path}: {detail}")]
    Transport {
        /// The method.
        method: String,
        /// The request path.
        path: String,
        /// The transport's reason (without the URL).
        detail: String,
    },
    /// The body was not the expected JSON.
    #[error("unexpected body from {path}: {detail}")]
    Decode {
        /// The request path.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// The request was not valid (bad effect parameters, bad key).
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl From<GitHubError> for ProviderError {
    fn from(error: GitHubError) -> Self {
        match error {
            GitHubError::RateLimited { until, .. } => ProviderError::RateLimited(until),
            GitHubError::Timeout { .. } => ProviderError::Timeout(loopx_kernel::Duration::ZERO),
            GitHubError::Invalid(detail) => ProviderError::Invalid(detail),
            other => ProviderError::Failed(other.to_string()),
        }
    }
}

#[derive(Deserialize)]
struct CheckRuns {
    #[serde(default)]
    check_runs: Vec<CheckRun>,
}

#[derive(Deserialize)]
struct CombinedStatus {
    #[serde(default)]
    statuses: Vec<StatusItem>,
}

#[derive(Deserialize)]
struct StatusItem {
    context: String,
    state: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct CommentItem {
    #[serde(default)]
    body: Option<String>,
}

/// Remembered `ETag`s and bodies, by request path.
type EtagCache = HashMap<String, (String, Arc<Vec<u8>>)>;

/// A GitHub REST client for one API base URL.
pub struct GitHubClient {
    source: SourceId,
    http: reqwest::Client,
    base: String,
    token: Option<Token>,
    clock: Arc<dyn Clock>,
    etags: Mutex<EtagCache>,
}

impl std::fmt::Debug for GitHubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubClient")
            .field("source", &self.source)
            .field("base", &self.base)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default API base URL.
pub const GITHUB_API: &str = "https://api.github.com";

impl GitHubClient {
    /// A client for `base` (e.g. [`GITHUB_API`], a GitHub Enterprise `https://host/api/v3`, or a
    /// test server), with a per-request timeout.
    ///
    /// # Errors
    /// [`GitHubError::Transport`] when the HTTP client cannot be built.
    pub fn new(
        source: SourceId,
        base: impl Into<String>,
        token: Option<Token>,
        timeout: loopx_kernel::Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GitHubError> {
        let timeout = timeout.to_std();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| GitHubError::Transport {
                method: "-".into(),
                path: "-".into(),
                detail: e.without_url().to_string(),
            })?;
        Ok(GitHubClient {
            source,
            http,
            base: base.into().trim_end_matches('/').to_owned(),
            token,
            clock,
            etags: Mutex::new(HashMap::new()),
        })
    }

    fn rate_limit(&self, path: &str, headers: &HeaderMap) -> Option<GitHubError> {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<i64>().ok())
        };
        let now = self.clock.now();
        let until = if let Some(seconds) = number("retry-after") {
            now.plus(loopx_kernel::Duration::seconds(seconds))
        } else if number("x-ratelimit-remaining") == Some(0) {
            let reset = number("x-ratelimit-reset")?;
            Timestamp::from_millis(reset.saturating_mul(1000)).max(now)
        } else {
            return None;
        };
        Some(GitHubError::RateLimited {
            path: path.to_owned(),
            until,
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Vec<u8>, GitHubError> {
        let url = format!("{}{path}", self.base);
        let conditional = method == Method::GET;
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header(ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header(USER_AGENT, "loopx-provider");
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {}", token.0));
        }
        let remembered = if conditional {
            lock(&self.etags).get(path).cloned()
        } else {
            None
        };
        if let Some((etag, _)) = &remembered {
            request = request.header(IF_NONE_MATCH, etag);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let m = method.as_str().to_owned();
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                GitHubError::Timeout {
                    method: m.clone(),
                    path: path.to_owned(),
                }
            } else {
                GitHubError::Transport {
                    method: m.clone(),
                    path: path.to_owned(),
                    detail: e.without_url().to_string(),
                }
            }
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        if status == StatusCode::NOT_MODIFIED {
            return remembered
                .map(|(_, body)| body.as_ref().clone())
                .ok_or_else(|| GitHubError::NotModifiedWithoutCache {
                    path: path.to_owned(),
                });
        }
        if status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::FORBIDDEN && self.rate_limit(path, &headers).is_some())
        {
            return Err(self
                .rate_limit(path, &headers)
                .unwrap_or(GitHubError::RateLimited {
                    path: path.to_owned(),
                    until: self.clock.now().plus(loopx_kernel::Duration::minutes(1)),
                }));
        }
        refuse_status(&m, path, status)?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    GitHubError::Timeout {
                        method: m.clone(),
                        path: path.to_owned(),
                    }
                } else {
                    GitHubError::Transport {
                        method: m.clone(),
                        path: path.to_owned(),
                        detail: e.without_url().to_string(),
                    }
                }
            })?
            .to_vec();
        if conditional && let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
            lock(&self.etags).insert(path.to_owned(), (etag.to_owned(), Arc::new(bytes.clone())));
        }
        Ok(bytes)
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, GitHubError> {
        let bytes = self.send(Method::GET, path, None).await?;
        // The error names the field and the expected type, never the body's text.
        super::body::decode(&bytes).map_err(|e| GitHubError::Decode {
            path: path.to_owned(),
            detail: e.to_string(),
        })
    }

    /// `GET /repos/{repo}/pulls/{number}`.
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn pull_request(&self, repo: &str, number: u64) -> Result<PullRequest, GitHubError> {
        self.get(&format!("/repos/{}/pulls/{number}", check_repo(repo)?))
            .await
    }

    /// The latest review of each reviewer (pending reviews are skipped), sorted by reviewer.
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn latest_reviews(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<Vec<Review>, GitHubError> {
        let all: Vec<Review> = self
            .get(&format!(
                "/repos/{}/pulls/{number}/reviews?per_page=100",
                check_repo(repo)?
            ))
            .await?;
        let mut latest: BTreeMap<String, Review> = BTreeMap::new();
        for review in all {
            if review.normalized_state() == "pending" {
                continue;
            }
            let who = review
                .user
                .as_ref()
                .map_or_else(|| "ghost".to_owned(), |u| u.login.clone());
            // The API lists reviews in submission order: a later one replaces an earlier one.
            latest.insert(who, review);
        }
        Ok(latest.into_values().collect())
    }

    /// The checks and statuses of commit `sha`, rolled up.
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn ci(&self, repo: &str, number: u64, sha: &str) -> Result<CiRollup, GitHubError> {
        let repo_path = check_repo(repo)?;
        // The sha may come from a response body: the error does not quote it.
        if sha.is_empty() || sha.len() > 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(GitHubError::Invalid(format!(
                "the head of {repo}#{number} is not a commit sha ({} characters, not all hexadecimal)",
                sha.chars().count()
            )));
        }
        let runs: CheckRuns = self
            .get(&format!(
                "/repos/{repo_path}/commits/{sha}/check-runs?per_page=100"
            ))
            .await?;
        let combined: CombinedStatus = self
            .get(&format!("/repos/{repo_path}/commits/{sha}/status"))
            .await?;
        let mut items: Vec<CiItem> = runs
            .check_runs
            .iter()
            .filter(|run| run.head_sha == sha)
            .map(|run| CiItem {
                name: format!("check:{}", run.name),
                verdict: check_run_verdict(run),
            })
            .chain(combined.statuses.iter().map(|s| CiItem {
                name: format!("status:{}", s.context),
                verdict: status_verdict(&s.state),
            }))
            .collect();
        items.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(CiRollup {
            repo: repo.to_owned(),
            number,
            sha: sha.to_owned(),
            verdict: roll_up(&items),
            items,
        })
    }

    /// One poll of a pull request: its state, the latest review per reviewer, and the CI
    /// roll-up of its exact head sha, as observations (pull request first, then reviews, then
    /// CI).
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn observe_pull(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<Vec<Observation>, GitHubError> {
        let pull = self.pull_request(repo, number).await?;
        let reviews = self.latest_reviews(repo, number).await?;
        let ci = self.ci(repo, number, &pull.head.sha).await?;
        let now = self.clock.now();
        let mut events = vec![GitHubEvent::PullRequest {
            repo: repo.to_owned(),
            action: None,
            pull,
        }];
        events.extend(reviews.into_iter().map(|review| GitHubEvent::Review {
            repo: repo.to_owned(),
            number,
            review,
        }));
        events.push(GitHubEvent::Ci(ci));
        events
            .iter()
            .map(|e| {
                // An invalid id holds text of the answer: only its kind is named.
                e.observation(now).map_err(|error| GitHubError::Decode {
                    path: format!("/repos/{repo}/pulls/{number}"),
                    detail: format!("the answer does not make a valid {}", error.kind),
                })
            })
            .collect()
    }

    /// Performs a `github.comment` (params `repo`, `number`, `body`) or `github.status` (params
    /// `repo`, `sha`, `state`, `context`, optional `description`) effect, unless a readback shows
    /// it already happened. Call it only once the effect's intent committed under the lease
    /// epoch it carries (the engine does): the client does not fence epochs itself.
    ///
    /// # Errors
    /// [`GitHubError::Invalid`] for unknown kinds or missing parameters; any other
    /// [`GitHubError`] from the call (the effect's outcome is then unknown: read it back).
    pub async fn perform_effect(&self, effect: &Effect) -> Result<EffectStatus, GitHubError> {
        if self.readback_effect(effect).await? == EffectStatus::Committed {
            return Ok(EffectStatus::Committed);
        }
        let p = |name: &str| param(effect, name);
        match effect.kind.as_str() {
            "github.comment" => {
                let path = format!(
                    "/repos/{}/issues/{}/comments",
                    check_repo(p("repo")?)?,
                    number(p("number")?)?
                );
                let body = format!("{}\n\n{}", p("body")?, marker(effect));
                self.send(
                    Method::POST,
                    &path,
                    Some(&serde_json::json!({ "body": body })),
                )
                .await?;
            }
            "github.status" => {
                let path = format!(
                    "/repos/{}/statuses/{}",
                    check_repo(p("repo")?)?,
                    check_sha(p("sha")?)?
                );
                let description = effect.params.get("description").map_or("", String::as_str);
                let tag = status_tag(effect);
                let mut text: String = description.chars().take(140 - tag.len() - 1).collect();
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&tag);
                let body = serde_json::json!({
                    "state": p("state")?,
                    "context": p("context")?,
                    "description": text,
                });
                self.send(Method::POST, &path, Some(&body)).await?;
            }
            other => {
                return Err(GitHubError::Invalid(format!(
                    "unknown effect kind `{other}`"
                )));
            }
        }
        Ok(EffectStatus::Committed)
    }

    /// Reads back whether an effect happened: committed when its marker is found, absent when
    /// the listing was read and holds no marker.
    ///
    /// # Errors
    /// [`GitHubError::Invalid`] for unknown kinds or missing parameters; any other
    /// [`GitHubError`] when the listing cannot be read (the status is then unknown).
    pub async fn readback_effect(&self, effect: &Effect) -> Result<EffectStatus, GitHubError> {
        let p = |name: &str| param(effect, name);
        let found = match effect.kind.as_str() {
            "github.comment" => {
                let path = format!(
                    "/repos/{}/issues/{}/comments?per_page=100",
                    check_repo(p("repo")?)?,
                    number(p("number")?)?
                );
                let comments: Vec<CommentItem> = self.get(&path).await?;
                let needle = marker_key(effect);
                comments
                    .iter()
                    .any(|c| c.body.as_deref().is_some_and(|b| b.contains(&needle)))
            }
            "github.status" => {
                let path = format!(
                    "/repos/{}/commits/{}/statuses?per_page=100",
                    check_repo(p("repo")?)?,
                    check_sha(p("sha")?)?
                );
                let statuses: Vec<StatusItem> = self.get(&path).await?;
                let tag = status_tag(effect);
                let context = p("context")?;
                statuses.iter().any(|s| {
                    s.context == context
                        && s.description.as_deref().is_some_and(|d| d.contains(&tag))
                })
            }
            other => {
                return Err(GitHubError::Invalid(format!(
                    "unknown effect kind `{other}`"
                )));
            }
        };
        Ok(if found {
            EffectStatus::Committed
        } else {
            EffectStatus::Absent
        })
    }
}

fn refuse_status(method: &str, path: &str, status: StatusCode) -> Result<(), GitHubError> {
    let (method, path, code) = (method.to_owned(), path.to_owned(), status.as_u16());
    match code {
        200..=299 => Ok(()),
        401 | 403 => Err(GitHubError::Unauthorized {
            method,
            path,
            status: code,
        }),
        404 => Err(GitHubError::NotFound { path }),
        500..=599 => Err(GitHubError::Server {
            method,
            path,
            status: code,
        }),
        _ => Err(GitHubError::Status {
            method,
            path,
            status: code,
        }),
    }
}

fn param<'a>(effect: &'a Effect, name: &str) -> Result<&'a str, GitHubError> {
    effect
        .params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| GitHubError::Invalid(format!("effect `{}` needs `{name}`", effect.kind)))
}

/// True when `repo` is an `owner/name` repository: two non-empty parts of ASCII letters, digits,
/// `-`, `_` and `.`, neither `.` nor `..` (so it is safe in a URL path).
pub fn is_repository(repo: &str) -> bool {
    repo.split('/').count() == 2
        && repo.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
}

fn check_repo(repo: &str) -> Result<&str, GitHubError> {
    if is_repository(repo) {
        Ok(repo)
    } else {
        Err(GitHubError::Invalid(format!(
            "`{repo}` is not an owner/name repository"
        )))
    }
}

fn check_sha(sha: &str) -> Result<&str, GitHubError> {
    if !sha.is_empty() && sha.len() <= 64 && sha.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(sha)
    } else {
        Err(GitHubError::Invalid(format!("`{sha}` is not a commit sha")))
    }
}

fn number(text: &str) -> Result<u64, GitHubError> {
    text.parse()
        .map_err(|_| GitHubError::Invalid(format!("`{text}` is not an issue number")))
}

fn marker_key(effect: &Effect) -> String {
    format!(
        "loopx-effect:{}",
        &sha256_hex(effect.idempotency_key.as_bytes())[..32]
    )
}

/// The hidden marker a comment effect carries: the digest of its idempotency key and its epoch.
fn marker(effect: &Effect) -> String {
    format!("<!-- {} epoch:{} -->", marker_key(effect), effect.epoch)
}

fn status_tag(effect: &Effect) -> String {
    format!(
        "[loopx {}]",
        &sha256_hex(effect.idempotency_key.as_bytes())[..12]
    )
}

#[async_trait]
impl Provider for GitHubClient {
    fn source(&self) -> &SourceId {
        &self.source
    }

    /// Observes `pr:<owner>/<name>#<n>` or `ci:<owner>/<name>#<n>`: both poll the pull request
    /// with its reviews and CI (see [`GitHubClient::observe_pull`]).
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let key = request.key.as_str();
        let rest = key
            .strip_prefix("pr:")
            .or_else(|| key.strip_prefix("ci:"))
            .ok_or_else(|| ProviderError::Invalid(format!("`{key}` is not a pr: or ci: key")))?;
        let (repo, n) = rest
            .rsplit_once('#')
            .ok_or_else(|| ProviderError::Invalid(format!("`{key}` names no pull request")))?;
        let n = number(n)?;
        Ok(self.observe_pull(repo, n).await?)
    }
}

#[async_trait]
impl Effector for GitHubClient {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        Ok(self.perform_effect(effect).await?)
    }

    /// Committed or absent when the listing could be read; unknown otherwise.
    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        match self.readback_effect(effect).await {
            Ok(status) => Ok(status),
            Err(GitHubError::Invalid(detail)) => Err(ProviderError::Invalid(detail)),
            Err(_) => Ok(EffectStatus::Unknown),
        }
    }
}
