//! The GitHub REST client: pull requests, reviews, checks and statuses as observations, and
//! fenced, idempotent effects (comments, commit statuses) with readback.
//!
//! Guarantees:
//! - the token is held in a [`Token`] whose `Debug` is redacted; it is sent only in the
//!   `Authorization` header and never appears in an error or a log line (errors carry the
//!   method, the path and the status, never headers or URLs with credentials, and never the
//!   text of a response body: a body that does not decode is described by the field path and
//!   the expected type, so a token a server echoes back is not quoted either);
//! - every listing (reviews, check runs, statuses, the comment read-back) follows the `Link`
//!   header's `rel="next"` page by page, up to [`MAX_PAGES`] pages (more is an error, never a
//!   first part read as the whole), and only to pages under the client's base URL;
//! - review threads come from the GraphQL API (`reviewThreads` with `isResolved`, a page at a
//!   time): `threads:<repo>#<n>` observations of how many are unresolved;
//! - `GET`s are conditional: a response's `ETag` is remembered and sent back as
//!   `If-None-Match`; a `304 Not Modified` reuses the remembered body (and does not count
//!   against GitHub's rate limit). A poll's observations also carry its `ETag`s as their tag
//!   ([`Observation::etag`]); given back in the next [`ObserveRequest`] (the engine hands the
//!   recorded one), a poll to which GitHub answers `304` throughout returns nothing — an
//!   unchanged poll costs one `304` per request, also after a restart;
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
use reqwest::header::{ACCEPT, AUTHORIZATION, ETAG, HeaderMap, IF_NONE_MATCH, LINK, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{
    CheckRun, CiItem, CiRollup, GitHubEvent, PullRequest, Review, check_run_verdict, roll_up,
    status_verdict,
};
use crate::fact::{FactBuilder, sha256_hex};
use loopx_kernel::facts::git;
use loopx_kernel::facts::github::{self as facts, Thread};

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
    /// `304` to an `ETag` the caller kept: what it read before is still current.
    #[error("GitHub answered 304 for {path}: unchanged since it was last read")]
    NotModified {
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

/// How many review threads a pull request has, and how many are not resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewThreadCount {
    /// The pull request's head sha, as GitHub answered.
    pub head_sha: String,
    /// Every thread.
    pub total: u64,
    /// Threads not resolved.
    pub unresolved: u64,
}

/// The GraphQL query of a pull request's review threads, a page at a time.
const REVIEW_THREADS_QUERY: &str = "query($owner: String!, $name: String!, $number: Int!, \
    $first: Int!, $after: String) { repository(owner: $owner, name: $name) { \
    pullRequest(number: $number) { headRefOid reviewThreads(first: $first, after: $after) { \
    pageInfo { hasNextPage endCursor } nodes { id isResolved } } } } }";

#[derive(Deserialize)]
struct GraphQl {
    #[serde(default)]
    data: Option<GraphQlData>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct GraphQlData {
    #[serde(default)]
    repository: Option<GraphQlRepository>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQlRepository {
    #[serde(default)]
    pull_request: Option<GraphQlPull>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQlPull {
    head_ref_oid: String,
    review_threads: GraphQlThreads,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQlThreads {
    page_info: GraphQlPageInfo,
    #[serde(default)]
    nodes: Vec<GraphQlThread>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQlPageInfo {
    has_next_page: bool,
    #[serde(default)]
    end_cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphQlThread {
    is_resolved: bool,
}

/// What a `GET` answered, remembered by request path: its `ETag`, its body and the next
/// page's path, so a `304` answers as the `200` did.
#[derive(Clone)]
struct Remembered {
    etag: String,
    body: Arc<Vec<u8>>,
    next: Option<String>,
}

/// Remembered answers, by request path.
type EtagCache = HashMap<String, Remembered>;

/// A response's body and the path of the next page its `Link` header names, if any.
struct Page {
    body: Vec<u8>,
    next: Option<String>,
}

/// The most pages one listing reads (100 items a page): a listing longer than this is an
/// error, never a silent first part.
pub const MAX_PAGES: usize = 100;

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
        Ok(self.send_page(method, path, body, None).await?.body)
    }

    /// One request to `path` under the base URL. A `GET` is conditional: it carries `etag`
    /// (one the caller kept, e.g. in the goal's last observation) or else the remembered `ETag`
    /// of `path` as `If-None-Match`. A `304` to the caller's `etag` is
    /// [`GitHubError::NotModified`] (the caller's copy is current); to the remembered one, it
    /// answers with the remembered body.
    async fn send_page(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        etag: Option<&str>,
    ) -> Result<Page, GitHubError> {
        let url = format!("{}{path}", self.base);
        self.send_to(method, &url, path, body, etag).await
    }

    /// [`send_page`](Self::send_page) to `url`, named `path` in errors and in the cache.
    async fn send_to(
        &self,
        method: Method,
        url: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        etag: Option<&str>,
    ) -> Result<Page, GitHubError> {
        let conditional = method == Method::GET;
        let mut request = self
            .http
            .request(method.clone(), url)
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
        let if_none_match = etag.or(remembered.as_ref().map(|r| r.etag.as_str()));
        if conditional && let Some(tag) = if_none_match {
            request = request.header(IF_NONE_MATCH, tag);
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
            return match remembered {
                _ if etag.is_some() => Err(GitHubError::NotModified {
                    path: path.to_owned(),
                }),
                Some(r) => Ok(Page {
                    body: r.body.as_ref().clone(),
                    next: r.next,
                }),
                None => Err(GitHubError::NotModifiedWithoutCache {
                    path: path.to_owned(),
                }),
            };
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
        let next = self.next_page(path, &headers)?;
        if conditional && let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
            let remembered = Remembered {
                etag: etag.to_owned(),
                body: Arc::new(bytes.clone()),
                next: next.clone(),
            };
            lock(&self.etags).insert(path.to_owned(), remembered);
        }
        Ok(Page { body: bytes, next })
    }

    /// The path of the next page the `Link` header of `path`'s answer names, if any. A link
    /// outside the client's base URL is refused: the token is sent to the base only.
    fn next_page(&self, path: &str, headers: &HeaderMap) -> Result<Option<String>, GitHubError> {
        let Some(url) = headers
            .get_all(LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(next_link)
        else {
            return Ok(None);
        };
        match url.strip_prefix(&self.base) {
            Some(rest) if rest.starts_with('/') => Ok(Some(rest.to_owned())),
            _ => Err(GitHubError::Decode {
                path: path.to_owned(),
                detail: "the Link header's next page is not under the API base URL".to_owned(),
            }),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, GitHubError> {
        let bytes = self.send(Method::GET, path, None).await?;
        decode(path, &bytes)
    }

    /// Every page of a listing from `path` on, following `Link: <…>; rel="next"`, each page's
    /// items taken by `items`; at most [`MAX_PAGES`] pages.
    async fn get_all<P: DeserializeOwned, T>(
        &self,
        path: &str,
        items: impl Fn(P) -> Vec<T>,
    ) -> Result<Vec<T>, GitHubError> {
        Ok(self.get_pages(path, items).await?.0)
    }

    /// [`get_all`](Self::get_all), with the path of every page read, in order.
    async fn get_pages<P: DeserializeOwned, T>(
        &self,
        path: &str,
        items: impl Fn(P) -> Vec<T>,
    ) -> Result<(Vec<T>, Vec<String>), GitHubError> {
        let mut all = Vec::new();
        let mut read = Vec::new();
        let mut next = Some(path.to_owned());
        for _ in 0..MAX_PAGES {
            let Some(page_path) = next.take() else {
                return Ok((all, read));
            };
            let page = self.send_page(Method::GET, &page_path, None, None).await?;
            all.extend(items(decode(&page_path, &page.body)?));
            next = page.next;
            read.push(page_path);
        }
        match next {
            None => Ok((all, read)),
            Some(_) => Err(GitHubError::Decode {
                path: path.to_owned(),
                detail: format!("the listing has more than {MAX_PAGES} pages"),
            }),
        }
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
        Ok(self.read_reviews(repo, number).await?.0)
    }

    /// [`latest_reviews`](Self::latest_reviews), with the paths of the pages read.
    async fn read_reviews(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<(Vec<Review>, Vec<String>), GitHubError> {
        let path = format!(
            "/repos/{}/pulls/{number}/reviews?per_page=100",
            check_repo(repo)?
        );
        let (all, read) = self.get_pages(&path, |page: Vec<Review>| page).await?;
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
        Ok((latest.into_values().collect(), read))
    }

    /// The checks and statuses of commit `sha`, rolled up.
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn ci(&self, repo: &str, number: u64, sha: &str) -> Result<CiRollup, GitHubError> {
        Ok(self.read_ci(repo, number, sha).await?.0)
    }

    /// [`ci`](Self::ci), with the paths of the pages read.
    async fn read_ci(
        &self,
        repo: &str,
        number: u64,
        sha: &str,
    ) -> Result<(CiRollup, Vec<String>), GitHubError> {
        let repo_path = check_repo(repo)?;
        // The sha may come from a response body: the error does not quote it.
        if sha.is_empty() || sha.len() > 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(GitHubError::Invalid(format!(
                "the head of {repo}#{number} is not a commit sha ({} characters, not all hexadecimal)",
                sha.chars().count()
            )));
        }
        let (runs, mut read) = self
            .get_pages(
                &format!("/repos/{repo_path}/commits/{sha}/check-runs?per_page=100"),
                |page: CheckRuns| page.check_runs,
            )
            .await?;
        let (statuses, status_pages) = self
            .get_pages(
                // GitHub pages the combined status too (30 contexts a page by default).
                &format!("/repos/{repo_path}/commits/{sha}/status"),
                |page: CombinedStatus| page.statuses,
            )
            .await?;
        read.extend(status_pages);
        let mut items: Vec<CiItem> = runs
            .iter()
            .filter(|run| run.head_sha == sha)
            .map(|run| CiItem {
                name: format!("check:{}", run.name),
                verdict: check_run_verdict(run),
            })
            .chain(statuses.iter().map(|s| CiItem {
                name: format!("status:{}", s.context),
                verdict: status_verdict(&s.state),
            }))
            .collect();
        items.sort_by(|a, b| a.name.cmp(&b.name));
        let rollup = CiRollup {
            repo: repo.to_owned(),
            number,
            sha: sha.to_owned(),
            verdict: roll_up(&items),
            items,
        };
        Ok((rollup, read))
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
        let pull_path = format!("/repos/{}/pulls/{number}", check_repo(repo)?);
        let pull: PullRequest = self.get(&pull_path).await?;
        let (reviews, mut read) = self.read_reviews(repo, number).await?;
        let (ci, ci_pages) = self.read_ci(repo, number, &pull.head.sha).await?;
        read.insert(0, pull_path);
        read.extend(ci_pages);
        let tag = self.poll_tag(&read);
        let now = self.clock.now();
        let mut events = vec![GitHubEvent::PullRequest {
            repo: repo.to_owned(),
            action: None,
            pull,
        }];
        events.extend(reviews.into_iter().map(|review| GitHubEvent::Review {
            repo: repo.to_owned(),
            action: None,
            number,
            review,
        }));
        events.push(GitHubEvent::Ci(ci));
        events
            .iter()
            .map(|e| {
                // An invalid id holds text of the answer: only its kind is named.
                let observed = e.observation(now).map_err(|error| GitHubError::Decode {
                    path: format!("/repos/{repo}/pulls/{number}"),
                    detail: format!("the answer does not make a valid {}", error.kind),
                })?;
                Ok(Observation {
                    etag: tag.clone(),
                    ..observed
                })
            })
            .collect()
    }

    /// The tag of a poll that read `paths`: the `ETag` each answered, as a JSON object by path
    /// (what [`unchanged_since`](Self::unchanged_since) reads back). `None` when a path
    /// answered without one, or when the tag would exceed what an observation keeps.
    fn poll_tag(&self, paths: &[String]) -> Option<String> {
        let remembered = lock(&self.etags);
        let tags: BTreeMap<&str, &str> = paths
            .iter()
            .map(|path| Some((path.as_str(), remembered.get(path)?.etag.as_str())))
            .collect::<Option<_>>()?;
        let text = serde_json::to_string(&tags).ok()?;
        (text.len() <= loopx_kernel::MAX_TEXT).then_some(text)
    }

    /// True when every request of the poll that made `tag` (see [`observe_pull`]) answers
    /// `304 Not Modified` to the `ETag` it answered then: nothing the poll read has changed.
    /// Each request costs a conditional `GET`, which GitHub does not count against the rate
    /// limit when it answers `304`. A tag that does not read as one, or names a path outside
    /// `repo`, is not a proof of anything: false.
    ///
    /// # Errors
    /// Any [`GitHubError`] of a request but [`GitHubError::NotModified`].
    ///
    /// [`observe_pull`]: Self::observe_pull
    pub async fn unchanged_since(&self, repo: &str, tag: &str) -> Result<bool, GitHubError> {
        let Ok(tags) = serde_json::from_str::<BTreeMap<String, String>>(tag) else {
            return Ok(false);
        };
        let scope = format!("/repos/{}/", check_repo(repo)?);
        if tags.is_empty() || tags.keys().any(|path| !path.starts_with(&scope)) {
            return Ok(false);
        }
        for (path, etag) in &tags {
            match self.send_page(Method::GET, path, None, Some(etag)).await {
                Err(GitHubError::NotModified { .. }) => {}
                Ok(_) => return Ok(false),
                Err(other) => return Err(other),
            }
        }
        Ok(true)
    }

    /// The GraphQL endpoint beside the REST base: `https://api.github.com/graphql` for
    /// `https://api.github.com`, `https://host/api/graphql` for GitHub Enterprise's
    /// `https://host/api/v3`, and `<base>/graphql` for any other base (a test server).
    pub fn graphql_url(&self) -> String {
        match self.base.strip_suffix("/api/v3") {
            Some(host) => format!("{host}/api/graphql"),
            None => format!("{}/graphql", self.base),
        }
    }

    /// A pull request's review threads through the GraphQL API, every page read (100 threads
    /// a page, at most [`MAX_PAGES`] pages), and the head sha GitHub answered with.
    ///
    /// # Errors
    /// Any [`GitHubError`]; an answer with GraphQL `errors` (say, no such pull request) is
    /// [`GitHubError::Decode`] naming how many, never their text.
    pub async fn review_threads(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<ReviewThreadCount, GitHubError> {
        let (owner, name) = check_repo(repo)?
            .split_once('/')
            .ok_or_else(|| GitHubError::Invalid(format!("`{repo}` is not owner/name")))?;
        let url = self.graphql_url();
        let mut count = ReviewThreadCount::default();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let request = serde_json::json!({
                "query": REVIEW_THREADS_QUERY,
                "variables": {
                    "owner": owner, "name": name, "number": number, "first": 100, "after": after,
                },
            });
            let page = self
                .send_to(Method::POST, &url, "/graphql", Some(&request), None)
                .await?;
            let answer: GraphQl = decode("/graphql", &page.body)?;
            if !answer.errors.is_empty() {
                return Err(GitHubError::Decode {
                    path: "/graphql".to_owned(),
                    detail: format!("the answer holds {} GraphQL errors", answer.errors.len()),
                });
            }
            let pull = answer
                .data
                .and_then(|d| d.repository)
                .and_then(|r| r.pull_request)
                .ok_or_else(|| GitHubError::NotFound {
                    path: format!("/repos/{repo}/pulls/{number} (GraphQL)"),
                })?;
            count.head_sha = pull.head_ref_oid;
            let threads = pull.review_threads;
            count.total += threads.nodes.len() as u64;
            count.unresolved += threads.nodes.iter().filter(|t| !t.is_resolved).count() as u64;
            match threads.page_info.end_cursor {
                Some(cursor) if threads.page_info.has_next_page => after = Some(cursor),
                _ => return Ok(count),
            }
        }
        Err(GitHubError::Decode {
            path: "/graphql".to_owned(),
            detail: format!("the review threads run past {MAX_PAGES} pages"),
        })
    }

    /// The review threads of a pull request as an observation on `threads:<repo>#<n>`, bound
    /// to the head GitHub answered with (see [`review_threads`](Self::review_threads)).
    ///
    /// # Errors
    /// Any [`GitHubError`].
    pub async fn observe_review_threads(
        &self,
        repo: &str,
        number: u64,
    ) -> Result<Observation, GitHubError> {
        let count = self.review_threads(repo, number).await?;
        let thread = Thread::new(repo, number);
        let key = facts::ReviewThreads::key(&thread);
        FactBuilder::new(&key, &key, &git::revision(&count.head_sha))
            .summary(format!(
                "{repo}#{number}: {} of {} review threads unresolved",
                count.unresolved, count.total
            ))
            .facts(&facts::ReviewThreads {
                unresolved: count.unresolved,
                complete: true,
            })
            .build(self.clock.now())
            .map_err(|error| GitHubError::Decode {
                path: "/graphql".to_owned(),
                detail: format!("the answer does not make a valid {}", error.kind),
            })
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
                let comments: Vec<CommentItem> =
                    self.get_all(&path, |page: Vec<CommentItem>| page).await?;
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
                let statuses: Vec<StatusItem> =
                    self.get_all(&path, |page: Vec<StatusItem>| page).await?;
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

/// Decodes a body; the error names the field and the expected type, never the body's text.
fn decode<T: DeserializeOwned>(path: &str, bytes: &[u8]) -> Result<T, GitHubError> {
    super::body::decode(bytes).map_err(|e| GitHubError::Decode {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// The URL of `rel="next"` in one `Link` header value (`<url>; rel="next", <url>; rel="last"`).
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|link| {
        let (target, params) = link.split_once(';')?;
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .filter_map(|param| param.split_once('='))
            .any(|(name, value)| {
                name.trim().eq_ignore_ascii_case("rel")
                    && value
                        .trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|rel| rel == "next")
            })
            .then(|| url.to_owned())
    })
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
    /// with its reviews and CI (see [`GitHubClient::observe_pull`]); when the request carries
    /// the tag of the recorded poll and GitHub answers `304` to all of it, nothing (unchanged).
    /// `threads:<owner>/<name>#<n>` reads its review threads through the GraphQL API (see
    /// [`GitHubClient::observe_review_threads`]).
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let key = request.key.as_str();
        let threads = key.strip_prefix("threads:");
        let rest = key
            .strip_prefix("pr:")
            .or_else(|| key.strip_prefix("ci:"))
            .or(threads)
            .ok_or_else(|| {
                ProviderError::Invalid(format!("`{key}` is not a pr:, ci: or threads: key"))
            })?;
        let (repo, n) = rest
            .rsplit_once('#')
            .ok_or_else(|| ProviderError::Invalid(format!("`{key}` names no pull request")))?;
        let n = number(n)?;
        if threads.is_some() {
            return Ok(vec![self.observe_review_threads(repo, n).await?]);
        }
        if let Some(tag) = &request.etag
            && self.unchanged_since(repo, tag).await?
        {
            return Ok(Vec::new());
        }
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
