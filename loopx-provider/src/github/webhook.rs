//! Webhook ingestion: verify `X-Hub-Signature-256`, then read the payload into a typed
//! [`GitHubEvent`] and its observation.
//!
//! Guarantees: a body over the size bound is refused before it is hashed or parsed; a body is
//! parsed only after its HMAC-SHA256 signature matched (compared in constant time); every
//! failure is a typed [`WebhookError`] that never contains the secret nor text of the payload;
//! no input panics.
//!
//! Every event pull-request work needs is read ([`SUPPORTED_EVENTS`]). A delivery reads as a
//! [`Delivery`]: a fact, GitHub's `ping`, or an action the provider does not need (an issue
//! `pinned`, a pull request `milestoned`), which is [`Delivery::Ignored`] — accepted, nothing
//! to record — and never malformed. Only the actions in [`NEEDED_ACTIONS`] are parsed as facts,
//! so an action GitHub adds later is ignored too, not refused.

use hmac::{Hmac, Mac as _};
use loopx_kernel::{Observation, Subject, Timestamp};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;

use super::commands::{Ignored, RelayedAnswer};
use super::{
    CheckRun, CheckSuite, Comment, CommitStatus, GitHubEvent, Issue, PullRequest, Push, Review,
    ReviewComment, ReviewThread, WorkflowJob, WorkflowRun,
};

/// GitHub caps webhook payloads at 25 MB; larger bodies are refused unread.
pub const MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// The events this module reads (values of the `X-GitHub-Event` header).
pub const SUPPORTED_EVENTS: [&str; 13] = [
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "check_run",
    "check_suite",
    "status",
    "workflow_run",
    "workflow_job",
    "issues",
    "issue_comment",
    "push",
    "ping",
];

/// The actions read as facts, by event; every other action of these events is
/// [`Delivery::Ignored`]. Events without actions (`status`, `push`, `ping`) are always read.
pub const NEEDED_ACTIONS: [(&str, &[&str]); 10] = [
    (
        "pull_request",
        &[
            "opened",
            "edited",
            "closed",
            "reopened",
            "synchronize",
            "converted_to_draft",
            "ready_for_review",
            "review_requested",
            "review_request_removed",
            "labeled",
            "unlabeled",
            "assigned",
            "unassigned",
            "locked",
            "unlocked",
            "auto_merge_enabled",
            "auto_merge_disabled",
            "enqueued",
            "dequeued",
        ],
    ),
    ("pull_request_review", &["submitted", "edited", "dismissed"]),
    (
        "pull_request_review_comment",
        &["created", "edited", "deleted"],
    ),
    ("pull_request_review_thread", &["resolved", "unresolved"]),
    ("check_run", &["created", "completed", "rerequested"]),
    ("check_suite", &["requested", "rerequested", "completed"]),
    ("workflow_run", &["requested", "in_progress", "completed"]),
    (
        "workflow_job",
        &["queued", "waiting", "in_progress", "completed"],
    ),
    (
        "issues",
        &[
            "opened",
            "edited",
            "deleted",
            "closed",
            "reopened",
            "labeled",
            "unlabeled",
            "assigned",
            "unassigned",
            "locked",
            "unlocked",
        ],
    ),
    ("issue_comment", &["created", "edited", "deleted"]),
];

/// What a delivery came to: a fact (`T` is the [`GitHubEvent`] when parsed, its
/// [`Observation`] when ingested), GitHub's `ping`, or an action the provider does not need.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery<T> {
    /// A fact to record.
    Fact(T),
    /// GitHub's `ping`, sent when a hook is created or tested: answer it, record nothing.
    Ping {
        /// The hook's id, when the payload names it.
        hook_id: Option<u64>,
    },
    /// An action of a supported event that the provider does not need (e.g. `issues` /
    /// `pinned`): accepted, nothing recorded.
    Ignored {
        /// The event.
        event: String,
        /// The action (cut to 64 characters).
        action: String,
    },
}

impl<T> Delivery<T> {
    /// The fact, when the delivery carried one.
    pub fn fact(self) -> Option<T> {
        match self {
            Delivery::Fact(fact) => Some(fact),
            _ => None,
        }
    }
}

/// A delivery's fact with the subjects it is routed by ([`WebhookVerifier::route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// The fact, as an observation.
    pub observation: Observation,
    /// Its own subject first, then each pull request it concerns.
    pub subjects: Vec<Subject>,
    /// The `/loopx answer` and `/loopx reject` commands it carries, with the login that wrote
    /// them ([`GitHubEvent::commands`]): the delivery's signature proves they came from GitHub,
    /// and a host relays them to the goals that follow the pull request, where the kernel
    /// decides whether that login speaks for the gate's owner.
    pub answers: Vec<RelayedAnswer>,
    /// The `/loopx` lines that are not commands, each with the reason it was passed over.
    pub ignored: Vec<Ignored>,
}

/// Why a delivery was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The body is larger than the bound.
    #[error("webhook body of {size} bytes exceeds the bound of {limit} bytes")]
    TooLarge {
        /// The body's size.
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// No `X-Hub-Signature-256` header.
    #[error("the delivery carries no X-Hub-Signature-256 header")]
    MissingSignature,
    /// The header is not `sha256=` and 64 hexadecimal digits.
    #[error("the X-Hub-Signature-256 header is malformed")]
    MalformedSignature,
    /// The signature does not match the body under the configured secret.
    #[error("the X-Hub-Signature-256 signature does not match the body")]
    BadSignature,
    /// The event is not one this module reads.
    #[error("unsupported webhook event `{event}`")]
    UnknownEvent {
        /// The `X-GitHub-Event` value (cut to 64 characters).
        event: String,
    },
    /// The body is not valid JSON of the event's shape.
    #[error("malformed `{event}` payload: {detail}")]
    Malformed {
        /// The event.
        event: String,
        /// What was wrong: the field path and the expected type, with line and column; never
        /// text of the payload.
        detail: String,
    },
    /// The delivery is valid but carries no fact ([`Delivery::Ping`] or
    /// [`Delivery::Ignored`]); only [`parse_event`] and [`WebhookVerifier::ingest`], which
    /// promise a fact, answer it. Nothing is to be recorded.
    #[error("the `{event}` delivery ({action}) carries no fact to record")]
    NoFact {
        /// The event.
        event: String,
        /// The action, or `ping`.
        action: String,
    },
}

/// Verifies deliveries with the webhook's shared secret.
#[derive(Clone)]
pub struct WebhookVerifier {
    secret: Vec<u8>,
}

impl std::fmt::Debug for WebhookVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookVerifier { secret: <redacted> }")
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect()
}

impl WebhookVerifier {
    /// A verifier for `secret` (the webhook's configured secret).
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        WebhookVerifier {
            secret: secret.as_ref().to_vec(),
        }
    }

    fn mac(&self, body: &[u8]) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.secret) else {
            unreachable!("HMAC takes keys of any length")
        };
        mac.update(body);
        mac
    }

    /// The header value GitHub would send for `body`: `sha256=` and the hexadecimal HMAC.
    pub fn sign(&self, body: &[u8]) -> String {
        format!(
            "sha256={}",
            crate::fact::hex(&self.mac(body).finalize().into_bytes())
        )
    }

    /// Checks `signature` (the `X-Hub-Signature-256` value) against `body`, in constant time.
    ///
    /// # Errors
    /// [`WebhookError::TooLarge`], [`WebhookError::MissingSignature`],
    /// [`WebhookError::MalformedSignature`] or [`WebhookError::BadSignature`].
    pub fn verify(&self, signature: Option<&str>, body: &[u8]) -> Result<(), WebhookError> {
        check_size(body)?;
        let header = signature.ok_or(WebhookError::MissingSignature)?;
        let digits = header
            .trim()
            .strip_prefix("sha256=")
            .ok_or(WebhookError::MalformedSignature)?;
        let expected = unhex(digits)
            .filter(|b| b.len() == 32)
            .ok_or(WebhookError::MalformedSignature)?;
        self.mac(body)
            .verify_slice(&expected)
            .map_err(|_| WebhookError::BadSignature)
    }

    /// Verifies a delivery, then reads it: its observation, a ping, or an ignored action.
    ///
    /// # Errors
    /// Any [`WebhookError`] but [`WebhookError::NoFact`]; nothing is parsed before the
    /// signature matched.
    pub fn receive(
        &self,
        event: &str,
        signature: Option<&str>,
        body: &[u8],
        observed_at: Timestamp,
    ) -> Result<Delivery<Observation>, WebhookError> {
        Ok(match self.route(event, signature, body, observed_at)? {
            Delivery::Fact(routed) => Delivery::Fact(routed.observation),
            Delivery::Ping { hook_id } => Delivery::Ping { hook_id },
            Delivery::Ignored { event, action } => Delivery::Ignored { event, action },
        })
    }

    /// Verifies a delivery, then reads it as [`receive`](Self::receive) does, with the
    /// subjects a host routes its fact by: the observation's own and each of its
    /// [`GitHubEvent::threads`], each once.
    ///
    /// # Errors
    /// As [`receive`](Self::receive).
    pub fn route(
        &self,
        event: &str,
        signature: Option<&str>,
        body: &[u8],
        observed_at: Timestamp,
    ) -> Result<Delivery<Routed>, WebhookError> {
        self.verify(signature, body)?;
        let typed = match parse_delivery(event, body)? {
            Delivery::Fact(typed) => typed,
            Delivery::Ping { hook_id } => return Ok(Delivery::Ping { hook_id }),
            Delivery::Ignored { event, action } => {
                return Ok(Delivery::Ignored { event, action });
            }
        };
        let malformed = |kind: &str| WebhookError::Malformed {
            event: event.to_owned(),
            detail: format!("the payload does not make a valid {kind}"),
        };
        let observation = typed
            .observation(observed_at)
            .map_err(|error| malformed(error.kind))?;
        let mut subjects = vec![observation.subject.clone()];
        for thread in typed.threads() {
            let subject = Subject::new(thread).map_err(|error| malformed(error.kind))?;
            if !subjects.contains(&subject) {
                subjects.push(subject);
            }
        }
        let (answers, ignored) = typed.commands();
        Ok(Delivery::Fact(Routed {
            observation,
            subjects,
            answers,
            ignored,
        }))
    }

    /// Verifies a delivery, then reads it into its observation.
    ///
    /// # Errors
    /// Any [`WebhookError`]: [`WebhookError::NoFact`] for a ping or an ignored action (see
    /// [`WebhookVerifier::receive`]); nothing is parsed before the signature matched.
    pub fn ingest(
        &self,
        event: &str,
        signature: Option<&str>,
        body: &[u8],
        observed_at: Timestamp,
    ) -> Result<Observation, WebhookError> {
        let delivery = self.receive(event, signature, body, observed_at)?;
        fact_of(event, delivery)
    }
}

/// The fact of a delivery, or [`WebhookError::NoFact`].
fn fact_of<T>(event: &str, delivery: Delivery<T>) -> Result<T, WebhookError> {
    match delivery {
        Delivery::Fact(fact) => Ok(fact),
        Delivery::Ping { .. } => Err(WebhookError::NoFact {
            event: event.to_owned(),
            action: "ping".to_owned(),
        }),
        Delivery::Ignored { event, action } => Err(WebhookError::NoFact { event, action }),
    }
}

fn check_size(body: &[u8]) -> Result<(), WebhookError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(WebhookError::TooLarge {
            size: body.len(),
            limit: MAX_BODY_BYTES,
        });
    }
    Ok(())
}

#[derive(Deserialize)]
struct Repository {
    full_name: String,
}

#[derive(Deserialize)]
struct PullRequestPayload {
    action: Option<String>,
    pull_request: PullRequest,
    repository: Repository,
}

#[derive(Deserialize)]
struct ReviewPayload {
    action: Option<String>,
    review: Review,
    pull_request: PullNumber,
    repository: Repository,
}

#[derive(Deserialize)]
struct PullNumber {
    number: u64,
}

#[derive(Deserialize)]
struct CheckRunPayload {
    check_run: CheckRun,
    repository: Repository,
}

#[derive(Deserialize)]
struct CheckSuitePayload {
    check_suite: CheckSuite,
    repository: Repository,
}

#[derive(Deserialize)]
struct StatusPayload {
    sha: String,
    #[serde(flatten)]
    status: CommitStatus,
    repository: Repository,
}

#[derive(Deserialize)]
struct IssuesPayload {
    issue: Issue,
    repository: Repository,
}

#[derive(Deserialize)]
struct IssueCommentPayload {
    action: Option<String>,
    issue: Issue,
    comment: Comment,
    repository: Repository,
}

#[derive(Deserialize)]
struct PushPayload {
    #[serde(flatten)]
    push: Push,
    repository: PushRepository,
}

/// A push delivery's repository, whose `pushed_at` is a number of seconds (elsewhere GitHub
/// sends a time as text).
#[derive(Deserialize)]
struct PushRepository {
    full_name: String,
    #[serde(default)]
    pushed_at: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ReviewCommentPayload {
    action: Option<String>,
    comment: ReviewComment,
    pull_request: PullNumber,
    repository: Repository,
}

#[derive(Deserialize)]
struct ReviewThreadPayload {
    action: Option<String>,
    thread: ReviewThread,
    pull_request: PullNumber,
    repository: Repository,
}

#[derive(Deserialize)]
struct WorkflowRunPayload {
    workflow_run: WorkflowRun,
    repository: Repository,
}

#[derive(Deserialize)]
struct WorkflowJobPayload {
    workflow_job: WorkflowJob,
    repository: Repository,
}

#[derive(Deserialize)]
struct PingPayload {
    /// Required, so that a body which is not GitHub's ping does not pass for one.
    #[allow(dead_code)]
    zen: String,
    #[serde(default)]
    hook_id: Option<u64>,
}

/// Only the action, read first: an action the provider does not need is ignored before the
/// rest of the payload is read.
#[derive(Deserialize)]
struct ActionOnly {
    #[serde(default)]
    action: Option<String>,
}

fn read<T: DeserializeOwned>(event: &str, body: &[u8]) -> Result<T, WebhookError> {
    super::body::decode(body).map_err(|error| WebhookError::Malformed {
        event: event.to_owned(),
        detail: error.to_string(),
    })
}

/// Reads an unverified body as event `event` (the `X-GitHub-Event` header) into its fact. Use
/// [`WebhookVerifier::ingest`] for deliveries from the network; this is for payloads whose
/// origin is already established (replays, tests).
///
/// # Errors
/// [`WebhookError::TooLarge`], [`WebhookError::UnknownEvent`], [`WebhookError::Malformed`],
/// or [`WebhookError::NoFact`] for a ping or an action the provider does not need (see
/// [`parse_delivery`]).
pub fn parse_event(event: &str, body: &[u8]) -> Result<GitHubEvent, WebhookError> {
    fact_of(event, parse_delivery(event, body)?)
}

/// True when `action` of `event` is read as a fact (see [`NEEDED_ACTIONS`]); a delivery
/// without an action is read.
pub fn is_needed(event: &str, action: Option<&str>) -> bool {
    let Some(action) = action else {
        return true;
    };
    NEEDED_ACTIONS
        .iter()
        .find(|(name, _)| *name == event)
        .is_none_or(|(_, actions)| actions.contains(&action))
}

/// Reads an unverified body as event `event`: a fact, a ping, or an ignored action. Use
/// [`WebhookVerifier::receive`] for deliveries from the network.
///
/// # Errors
/// [`WebhookError::TooLarge`], [`WebhookError::UnknownEvent`] or [`WebhookError::Malformed`]
/// (also for a body that is not JSON, whatever its action).
pub fn parse_delivery(event: &str, body: &[u8]) -> Result<Delivery<GitHubEvent>, WebhookError> {
    check_size(body)?;
    if !SUPPORTED_EVENTS.contains(&event) {
        return Err(WebhookError::UnknownEvent {
            event: event.chars().take(64).collect(),
        });
    }
    if event == "ping" {
        let ping: PingPayload = read(event, body)?;
        return Ok(Delivery::Ping {
            hook_id: ping.hook_id,
        });
    }
    let ActionOnly { action } = read(event, body)?;
    if !is_needed(event, action.as_deref()) {
        return Ok(Delivery::Ignored {
            event: event.to_owned(),
            action: action.unwrap_or_default().chars().take(64).collect(),
        });
    }
    parse_fact(event, body).map(Delivery::Fact)
}

fn parse_fact(event: &str, body: &[u8]) -> Result<GitHubEvent, WebhookError> {
    Ok(match event {
        "pull_request" => {
            let p: PullRequestPayload = read(event, body)?;
            GitHubEvent::PullRequest {
                repo: p.repository.full_name,
                action: p.action,
                pull: p.pull_request,
            }
        }
        "pull_request_review" => {
            let p: ReviewPayload = read(event, body)?;
            GitHubEvent::Review {
                repo: p.repository.full_name,
                action: p.action,
                number: p.pull_request.number,
                review: p.review,
            }
        }
        "check_run" => {
            let p: CheckRunPayload = read(event, body)?;
            GitHubEvent::CheckRun {
                repo: p.repository.full_name,
                run: p.check_run,
            }
        }
        "check_suite" => {
            let p: CheckSuitePayload = read(event, body)?;
            GitHubEvent::CheckSuite {
                repo: p.repository.full_name,
                suite: p.check_suite,
            }
        }
        "status" => {
            let p: StatusPayload = read(event, body)?;
            GitHubEvent::Status {
                repo: p.repository.full_name,
                sha: p.sha,
                status: p.status,
            }
        }
        "issues" => {
            let p: IssuesPayload = read(event, body)?;
            GitHubEvent::Issue {
                repo: p.repository.full_name,
                issue: p.issue,
            }
        }
        "issue_comment" => {
            let p: IssueCommentPayload = read(event, body)?;
            GitHubEvent::IssueComment {
                repo: p.repository.full_name,
                action: p.action,
                number: p.issue.number,
                on_pull_request: p.issue.pull_request.is_some(),
                comment: p.comment,
            }
        }
        "push" => {
            let p: PushPayload = read(event, body)?;
            let pushed_at = p.repository.pushed_at.as_ref().and_then(seconds);
            GitHubEvent::Push {
                repo: p.repository.full_name,
                push: Push {
                    pushed_at,
                    ..p.push
                },
            }
        }
        other => return parse_review_or_workflow(other, body),
    })
}

/// The review comment, review thread and workflow events of [`parse_fact`].
fn parse_review_or_workflow(event: &str, body: &[u8]) -> Result<GitHubEvent, WebhookError> {
    Ok(match event {
        "pull_request_review_comment" => {
            let p: ReviewCommentPayload = read(event, body)?;
            GitHubEvent::ReviewComment {
                repo: p.repository.full_name,
                action: p.action,
                number: p.pull_request.number,
                comment: p.comment,
            }
        }
        "pull_request_review_thread" => {
            let p: ReviewThreadPayload = read(event, body)?;
            GitHubEvent::ReviewThread {
                repo: p.repository.full_name,
                number: p.pull_request.number,
                resolved: p.action.as_deref() == Some("resolved"),
                thread: p.thread,
            }
        }
        "workflow_run" => {
            let p: WorkflowRunPayload = read(event, body)?;
            GitHubEvent::WorkflowRun {
                repo: p.repository.full_name,
                run: p.workflow_run,
            }
        }
        "workflow_job" => {
            let p: WorkflowJobPayload = read(event, body)?;
            GitHubEvent::WorkflowJob {
                repo: p.repository.full_name,
                job: p.workflow_job,
            }
        }
        other => {
            return Err(WebhookError::UnknownEvent {
                event: other.chars().take(64).collect(),
            });
        }
    })
}

/// `repository.pushed_at` of a push delivery: seconds since the Unix epoch (as a number, or
/// as a time in the text form GitHub uses elsewhere).
fn seconds(value: &serde_json::Value) -> Option<i64> {
    match value {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(text) => Timestamp::parse(text)
            .ok()
            .map(|t| t.as_millis().div_euclid(1000)),
        _ => None,
    }
}
