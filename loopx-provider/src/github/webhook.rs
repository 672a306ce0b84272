//! Webhook ingestion: verify `X-Hub-Signature-256`, then read the payload into a typed
//! [`GitHubEvent`] and its observation.
//!
//! Guarantees: a body over the size bound is refused before it is hashed or parsed; a body is
//! parsed only after its HMAC-SHA256 signature matched (compared in constant time); every
//! failure is a typed [`WebhookError`] that never contains the secret nor text of the payload;
//! no input panics.

use hmac::{Hmac, Mac as _};
use loopx_kernel::{Observation, Timestamp};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;

use super::{
    CheckRun, CheckSuite, Comment, CommitStatus, GitHubEvent, Issue, PullRequest, Push, Review,
};

/// GitHub caps webhook payloads at 25 MB; larger bodies are refused unread.
pub const MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// The events this module reads (values of the `X-GitHub-Event` header).
pub const SUPPORTED_EVENTS: [&str; 8] = [
    "pull_request",
    "pull_request_review",
    "check_run",
    "check_suite",
    "status",
    "issues",
    "issue_comment",
    "push",
];

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

    /// Verifies a delivery, then reads it into its observation.
    ///
    /// # Errors
    /// Any [`WebhookError`]; nothing is parsed before the signature matched.
    pub fn ingest(
        &self,
        event: &str,
        signature: Option<&str>,
        body: &[u8],
        observed_at: Timestamp,
    ) -> Result<Observation, WebhookError> {
        self.verify(signature, body)?;
        let event_name = event;
        let typed = parse_event(event_name, body)?;
        typed
            .observation(observed_at)
            .map_err(|error| WebhookError::Malformed {
                event: event_name.to_owned(),
                detail: format!("the payload does not make a valid {}", error.kind),
            })
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
    repository: Repository,
}

fn read<T: DeserializeOwned>(event: &str, body: &[u8]) -> Result<T, WebhookError> {
    super::body::decode(body).map_err(|error| WebhookError::Malformed {
        event: event.to_owned(),
        detail: error.to_string(),
    })
}

/// Reads an unverified body as event `event` (the `X-GitHub-Event` header). Use
/// [`WebhookVerifier::ingest`] for deliveries from the network; this is for payloads whose
/// origin is already established (replays, tests).
///
/// # Errors
/// [`WebhookError::TooLarge`], [`WebhookError::UnknownEvent`] or [`WebhookError::Malformed`].
pub fn parse_event(event: &str, body: &[u8]) -> Result<GitHubEvent, WebhookError> {
    check_size(body)?;
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
            GitHubEvent::Push {
                repo: p.repository.full_name,
                push: p.push,
            }
        }
        other => {
            return Err(WebhookError::UnknownEvent {
                event: other.chars().take(64).collect(),
            });
        }
    })
}
