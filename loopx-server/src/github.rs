//! GitHub's deliveries in: `POST /github/webhook`.
//!
//! A delivery is checked in this order, and nothing is read, parsed or written before the
//! check before it passed: its headers, before its body is read (`X-GitHub-Event` and
//! `X-GitHub-Delivery` present and well formed, else `400`; a declared `Content-Length` over
//! [`MAX_BODY_BYTES`] is `413`), its body as it arrives (cut off with `413` once it grows past
//! the cap; `408` when it does not arrive whole within the service's body timeout), its
//! `X-Hub-Signature-256` HMAC under the webhook's secret (missing, malformed or wrong is `401`),
//! then its payload (`400` when GitHub's shape does not parse; `ping` and the actions loopx
//! does not need answer `200` and record nothing).
//!
//! A fact is routed by its subjects ([`Routed`]) to every goal that follows one of them
//! ([`Store::watching`]), recorded on each as the provider (`provider:github`, signed with its
//! key when the keyring holds one), and judged in the same pass by the capability the goal is
//! bound to, for each agent registered with it, the proposals submitted as the capability.
//!
//! A comment or review whose body carries `/loopx answer <gate> …` or `/loopx reject <gate> …`
//! ([`Routed::answers`]) is relayed, after the fact, to each of those goals that recorded the
//! fact and holds the gate: `relay_gate_answer` as `provider:github`, naming the login that
//! wrote it. Only words as their author wrote them count (a created comment, a submitted
//! review: an edit never relays), each comment once whichever delivery carries it (the
//! operation is the comment's), and only for a gate that was open when the comment was written
//! (`comment_predates_gate` otherwise, so a captured delivery replayed later answers nothing). The delivery's
//! signature proves it came from GitHub; whether that login speaks for the gate's owner is the
//! kernel's rule (the goal owner's login mapping), so anyone else's comment is refused and
//! changes nothing. Each outcome is in the delivery's answer ([`AnswerOutcome`]).
//!
//! A fact a goal refuses (e.g. `key_unregistered`: the provider's key is not registered on a
//! signed goal) is not acknowledged as if it were recorded: it is kept as a dead letter
//! ([`Store::keep_dead_letter`]) that `status`, the board, `/metrics` and `loopx dead-letters`
//! show and re-apply, no `/loopx` command in it is relayed to that goal, and the route answers
//! `422`, so the delivery shows as failed on GitHub too.
//!
//! The `X-GitHub-Delivery` id is the idempotency key: the observation is committed under an
//! operation id derived from it, so a redelivery replays what the first delivery committed and
//! never conflicts. A store failure answers `503` before the delivery is acknowledged, so
//! GitHub (or an operator's redelivery) sends it again and what already committed replays.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::BodyExt as _;
use loopx_kernel::engine::Submission;
use loopx_kernel::ids::bounded_id;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{Clock, Store, StoreError};
use loopx_kernel::{Actor, Command, GateId, Keyring, Observation, OperationId, Relay, SourceId};
use loopx_provider::github::commands::RelayedAnswer;
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_provider::github::webhook::{Delivery, MAX_BODY_BYTES, Routed, WebhookError};
use serde::Serialize;
use serde_json::json;

use crate::capabilities::Registry;
use crate::judging::Judging;

/// The longest delivery id accepted: GitHub's are 36-character GUIDs.
const MAX_DELIVERY_ID: usize = 64;
/// The longest event name accepted: GitHub's are short words like `pull_request_review`.
const MAX_EVENT_NAME: usize = 64;

/// The provider deliveries are recorded as.
const PROVIDER: &str = "github";

/// Receives GitHub's deliveries into the goals that follow their subjects.
#[derive(Clone)]
pub struct Deliveries {
    judging: Judging,
    verifier: WebhookVerifier,
}

impl std::fmt::Debug for Deliveries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("verifier", &self.verifier)
            .finish_non_exhaustive()
    }
}

/// Why a delivery was not taken. Each maps to one HTTP status ([`DeliveryError::status`]) and
/// a stable code; none carries the secret or text of the payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// A required header is missing or malformed.
    #[error("the delivery's {header} header is {problem}")]
    Header {
        /// The header.
        header: &'static str,
        /// `missing` or what is wrong with it.
        problem: &'static str,
    },
    /// The webhook module refused it: size, signature or payload.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// The body did not arrive whole: it stalled past the service's body timeout, or the
    /// connection failed.
    #[error("the delivery's body did not arrive whole in time")]
    Incomplete,
    /// The store failed; the delivery is not acknowledged, and a redelivery replays what
    /// committed.
    #[error("the store failed: {0}")]
    Store(StoreError),
}

impl DeliveryError {
    /// The HTTP status it answers.
    pub fn status(&self) -> StatusCode {
        match self {
            DeliveryError::Header { .. } => StatusCode::BAD_REQUEST,
            DeliveryError::Incomplete => StatusCode::REQUEST_TIMEOUT,
            DeliveryError::Webhook(error) => match error {
                WebhookError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                WebhookError::MissingSignature
                | WebhookError::MalformedSignature
                | WebhookError::BadSignature => StatusCode::UNAUTHORIZED,
                _ => StatusCode::BAD_REQUEST,
            },
            DeliveryError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Its stable code.
    pub fn code(&self) -> &'static str {
        match self {
            DeliveryError::Header { .. } => "bad_header",
            DeliveryError::Incomplete => "body_incomplete",
            DeliveryError::Webhook(error) => match error {
                WebhookError::TooLarge { .. } => "too_large",
                WebhookError::MissingSignature => "signature_missing",
                WebhookError::MalformedSignature => "signature_malformed",
                WebhookError::BadSignature => "signature_invalid",
                WebhookError::UnknownEvent { .. } => "unknown_event",
                _ => "malformed_payload",
            },
            DeliveryError::Store(_) => "store_unavailable",
        }
    }
}

/// What a delivery came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Received {
    /// The `X-GitHub-Delivery` id.
    pub delivery: String,
    /// The `X-GitHub-Event`.
    pub event: String,
    /// `recorded` (a fact routed to `goals`), `dead_letter` (a goal refused it: kept as a
    /// dead letter, the route answers `422`), `ping` or `ignored`.
    pub outcome: &'static str,
    /// What each goal that follows the fact's subjects made of it, in id order.
    pub goals: Vec<GoalOutcome>,
    /// What became of each `/loopx answer` or `/loopx reject` the delivery carried, on each
    /// goal that follows the pull request and holds the gate it names; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnswerOutcome>,
    /// Why each `/loopx` line that is not a command was passed over; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
}

/// What one goal made of an answer relayed from a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerOutcome {
    /// The goal, or `None` when no goal that follows the pull request holds the gate.
    pub goal: Option<GoalId>,
    /// The gate the command named.
    pub gate: GateId,
    /// The login that wrote it.
    pub login: String,
    /// `answered` (the gate is resolved or rejected as its owner's answer), `refused` (the
    /// goal refused it: `refused` says why, e.g. `relay_not_gate_owner` for anyone but the
    /// owner's mapped login, and nothing changed) or `unknown_gate`.
    pub outcome: &'static str,
    /// True when this delivery's answer had already been recorded: nothing was written.
    pub replayed: bool,
    /// The refusal's code when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'static str>,
}

/// What one goal made of a delivery's fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GoalOutcome {
    /// The goal.
    pub goal: GoalId,
    /// True when the fact changed the goal (a new or newer fact); false for an unchanged or
    /// older one.
    pub changed: bool,
    /// True when this delivery id had already been recorded on the goal: nothing was written.
    pub replayed: bool,
    /// The refusal's code when the goal refused the fact (e.g. `key_unregistered`): the fact
    /// is kept as a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'static str>,
    /// The refusal's words when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The commands its capability proposed in the same pass and the goal accepted.
    pub proposed: Vec<String>,
}

/// The headers a delivery is read by.
struct Headers<'h> {
    event: &'h str,
    delivery: &'h str,
    signature: Option<&'h str>,
}

impl Deliveries {
    /// Deliveries verified with `verifier` into `store`, timed by `clock`, judged by the
    /// shipped capabilities ([`Registry::shipped`]), every command unsigned until a keyring is
    /// given ([`Deliveries::keyring`]).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, verifier: WebhookVerifier) -> Self {
        Deliveries {
            judging: Judging::new(store, clock),
            verifier,
        }
    }

    /// The same, judging with `registry`'s capabilities.
    #[must_use]
    pub fn registry(mut self, registry: Registry) -> Self {
        self.judging.registry = Arc::new(registry);
        self
    }

    /// The same, signing as the actors `keyring` holds keys for: `provider:github` for the
    /// facts, `capability:<name>` for each capability's proposals.
    #[must_use]
    pub fn keyring(mut self, keyring: Keyring) -> Self {
        self.judging.keyring = Arc::new(keyring);
        self
    }

    /// The same, noticing each pending gate whose owner's GitHub login is mapped once in the
    /// pull request its goal is bound to, through `effector` (the GitHub client): see
    /// [`crate::notices`].
    #[must_use]
    pub fn notifier(mut self, effector: Arc<dyn loopx_kernel::seams::Effector>) -> Self {
        self.judging.notifier = Some(effector);
        self
    }

    /// `POST /github/webhook`, ready to mount ([`crate::Service::mount`]).
    pub fn router(self) -> Router {
        Router::new()
            .route("/github/webhook", post(webhook))
            .with_state(self)
    }

    /// Takes one delivery, as the route does: `event`, `delivery` and `signature` are the
    /// values of `X-GitHub-Event`, `X-GitHub-Delivery` and `X-Hub-Signature-256`.
    ///
    /// # Errors
    /// [`DeliveryError`]; nothing is written for a refused delivery.
    pub async fn receive(
        &self,
        event: &str,
        delivery: &str,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<Received, DeliveryError> {
        let headers = Headers {
            event,
            delivery,
            signature,
        };
        self.take(&headers, body).await
    }

    #[tracing::instrument(name = "delivery", skip_all, fields(event = headers.event, delivery = headers.delivery))]
    async fn take(&self, headers: &Headers<'_>, body: &[u8]) -> Result<Received, DeliveryError> {
        let operation = delivery_operation(headers.delivery)?;
        let now = self.judging.clock.now();
        let routed = self
            .verifier
            .route(headers.event, headers.signature, body, now)?;
        let received = |outcome, goals| Received {
            delivery: headers.delivery.to_owned(),
            event: headers.event.to_owned(),
            outcome,
            goals,
            answers: Vec::new(),
            ignored: Vec::new(),
        };
        let Routed {
            observation,
            subjects,
            answers,
            ignored,
        } = match routed {
            Delivery::Fact(routed) => routed,
            Delivery::Ping { .. } => return Ok(received("ping", Vec::new())),
            _ => return Ok(received("ignored", Vec::new())),
        };
        let goals = self
            .judging
            .store
            .watching(&subjects, now)
            .await
            .map_err(DeliveryError::Store)?;
        let origin = format!("GitHub delivery {} ({})", headers.delivery, headers.event);
        let mut outcomes = Vec::with_capacity(goals.len());
        for goal in &goals {
            outcomes.push(
                self.deliver_to(goal, &observation, &operation, &origin)
                    .await?,
            );
        }
        // A command is relayed only where its comment is on record: a goal that refused the
        // fact (now a dead letter) must not be answered by words it never recorded.
        let recorded: Vec<GoalId> = outcomes
            .iter()
            .filter(|o| o.refused.is_none())
            .map(|o| o.goal.clone())
            .collect();
        let mut relayed = Vec::new();
        for (index, answer) in answers.iter().enumerate() {
            let relay = Relay {
                login: answer.login.clone(),
                delivery: headers.delivery.to_owned(),
                message: Some(answer.message.clone()),
            };
            let operation = answer_operation(&answer.message, index)?;
            relayed.extend(self.relay(&recorded, answer, relay, &operation).await?);
        }
        for goal in &goals {
            self.judging
                .notice_gates(goal)
                .await
                .map_err(DeliveryError::Store)?;
        }
        tracing::info!(
            goals = outcomes.len(),
            answers = relayed.len(),
            "delivery recorded"
        );
        let outcome = if outcomes.iter().any(|o| o.refused.is_some()) {
            "dead_letter"
        } else {
            "recorded"
        };
        Ok(Received {
            answers: relayed,
            ignored: ignored.into_iter().map(|i| i.reason).collect(),
            ..received(outcome, outcomes)
        })
    }

    /// Submits a relayed answer to each of `goals` that holds its gate, as `provider:github`:
    /// the kernel answers the gate only when the login is mapped to the gate's owner.
    #[tracing::instrument(name = "relay", skip_all, fields(gate = %answer.gate))]
    async fn relay(
        &self,
        goals: &[GoalId],
        answer: &RelayedAnswer,
        relay: Relay,
        operation: &OperationId,
    ) -> Result<Vec<AnswerOutcome>, DeliveryError> {
        let provider = Actor::Provider(source(PROVIDER));
        let command = Command::RelayGateAnswer {
            gate: answer.gate.clone(),
            answer: answer.answer.clone(),
            relay,
        };
        let outcome = |goal: Option<&GoalId>, outcome, replayed, refused| AnswerOutcome {
            goal: goal.cloned(),
            gate: answer.gate.clone(),
            login: answer.login.clone(),
            outcome,
            replayed,
            refused,
        };
        let mut outcomes = Vec::new();
        for goal in goals {
            let state = self
                .judging
                .store
                .goal(goal)
                .state()
                .await
                .map_err(DeliveryError::Store)?;
            let Some(gate) = state.gates.get(&answer.gate) else {
                continue;
            };
            // Words written before the question was asked do not answer it (a comment from
            // 2019 replayed under a new delivery id, say); a comment of unknown time neither.
            if answer
                .written_at
                .is_none_or(|written| written < gate.opened_at)
            {
                outcomes.push(outcome(
                    Some(goal),
                    "refused",
                    false,
                    Some("comment_predates_gate"),
                ));
                continue;
            }
            outcomes.push(
                match self
                    .judging
                    .submit(goal, &provider, &command, operation)
                    .await
                {
                    Ok(Ok(submitted)) => outcome(Some(goal), "answered", submitted.replayed, None),
                    Ok(Err(refusal)) => outcome(Some(goal), "refused", false, Some(refusal.code())),
                    // The operation is the comment's: another delivery of the same comment
                    // already relayed it, so it answers once.
                    Err(StoreError::OperationConflict { .. }) => {
                        outcome(Some(goal), "answered", true, None)
                    }
                    Err(error) => return Err(DeliveryError::Store(error)),
                },
            );
        }
        if outcomes.is_empty() {
            outcomes.push(outcome(None, "unknown_gate", false, None));
        }
        Ok(outcomes)
    }

    /// Records the fact on `goal` and judges the goal in the same pass.
    #[tracing::instrument(name = "record", skip_all, fields(goal = %goal))]
    async fn deliver_to(
        &self,
        goal: &GoalId,
        observation: &Observation,
        operation: &OperationId,
        origin: &str,
    ) -> Result<GoalOutcome, DeliveryError> {
        let record = Submission {
            actor: Actor::Provider(source(PROVIDER)),
            command: Command::RecordObservation {
                observation: observation.clone(),
            },
            operation: operation.clone(),
        };
        self.judging
            .record_and_judge(goal, vec![record], origin)
            .await
            .map_err(DeliveryError::Store)
    }
}

/// The operation the `index`th command of a comment or review (`message`, e.g. `comment:1984`)
/// commits under: derived from the comment, not the delivery, so a comment relays once
/// whichever delivery carries it, and a redelivery replays.
fn answer_operation(message: &str, index: usize) -> Result<OperationId, DeliveryError> {
    let message = message.replace(':', "-");
    OperationId::new(bounded_id(&format!("github-{message}-answer-{index}"))).map_err(|_| {
        DeliveryError::Header {
            header: "X-GitHub-Delivery",
            problem: "not a delivery id (up to 64 letters, digits and dashes)",
        }
    })
}

/// The operation a delivery's fact commits under on every goal: derived from the delivery id
/// alone, so a redelivery (same id, same body) replays.
fn delivery_operation(delivery: &str) -> Result<OperationId, DeliveryError> {
    let well_formed = !delivery.is_empty()
        && delivery.len() <= MAX_DELIVERY_ID
        && delivery
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !well_formed {
        return Err(DeliveryError::Header {
            header: "X-GitHub-Delivery",
            problem: "not a delivery id (up to 64 letters, digits and dashes)",
        });
    }
    OperationId::new(bounded_id(&format!("github-delivery-{delivery}"))).map_err(|_| {
        DeliveryError::Header {
            header: "X-GitHub-Delivery",
            problem: "not a delivery id (up to 64 letters, digits and dashes)",
        }
    })
}

fn source(name: &str) -> SourceId {
    match SourceId::new(name) {
        Ok(id) => id,
        Err(_) => unreachable!("`github` is a valid source id"),
    }
}

/// The route: the headers checked, then the body read (never more than the cap), then the
/// delivery taken; its outcome or refusal as JSON.
async fn webhook(State(deliveries): State<Deliveries>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let text = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let checked = delivery_headers(text("x-github-event"), text("x-github-delivery"))
        .and_then(|(event, delivery)| Ok((event, delivery, declared_size(&parts.headers)?)));
    let (event, delivery, size) = match checked {
        Ok(checked) => checked,
        Err(error) => return refused(&error),
    };
    let body = match read_body(body, size).await {
        Ok(body) => body,
        Err(error) => return refused(&error),
    };
    let signature = text("x-hub-signature-256");
    match deliveries.receive(event, delivery, signature, &body).await {
        // A fact a goal could not record is kept as a dead letter and answered 422, so the
        // delivery shows as failed in GitHub's list of recent deliveries too.
        Ok(received) if received.outcome == "dead_letter" => {
            tracing::warn!("a goal refused the delivery's fact; kept as a dead letter");
            (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(received)).into_response()
        }
        Ok(received) => (StatusCode::OK, axum::Json(received)).into_response(),
        Err(error) => {
            tracing::warn!(code = error.code(), "delivery refused");
            refused(&error)
        }
    }
}

/// `X-GitHub-Event` and `X-GitHub-Delivery`, present and well formed.
fn delivery_headers<'h>(
    event: Option<&'h str>,
    delivery: Option<&'h str>,
) -> Result<(&'h str, &'h str), DeliveryError> {
    let missing = |header| DeliveryError::Header {
        header,
        problem: "missing",
    };
    let event = event.ok_or_else(|| missing("X-GitHub-Event"))?;
    let delivery = delivery.ok_or_else(|| missing("X-GitHub-Delivery"))?;
    let event_name = !event.is_empty()
        && event.len() <= MAX_EVENT_NAME
        && event
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !event_name {
        return Err(DeliveryError::Header {
            header: "X-GitHub-Event",
            problem: "not an event name (up to 64 letters, digits, `_` and `-`)",
        });
    }
    delivery_operation(delivery)?;
    Ok((event, delivery))
}

/// The body's declared size, refused when over the cap, before a byte of it is read.
fn declared_size(headers: &HeaderMap) -> Result<Option<usize>, DeliveryError> {
    let Some(length) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    let size = length
        .to_str()
        .ok()
        .and_then(|l| l.parse::<usize>().ok())
        .ok_or(DeliveryError::Header {
            header: "Content-Length",
            problem: "not a length",
        })?;
    if size > MAX_BODY_BYTES {
        return Err(WebhookError::TooLarge {
            size,
            limit: MAX_BODY_BYTES,
        }
        .into());
    }
    Ok(Some(size))
}

/// The body, read frame by frame into one buffer of its declared size; a body that grows past
/// the cap (chunked, or longer than declared) is cut off there.
async fn read_body(mut body: Body, declared: Option<usize>) -> Result<Vec<u8>, DeliveryError> {
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| DeliveryError::Incomplete)?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > MAX_BODY_BYTES {
                return Err(WebhookError::TooLarge {
                    size: bytes.len() + data.len(),
                    limit: MAX_BODY_BYTES,
                }
                .into());
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}

fn refused(error: &DeliveryError) -> Response {
    let message = match error {
        // The store's own words may name a host or a path: they go to the log only.
        DeliveryError::Store(_) => "the store failed; redeliver".to_owned(),
        other => other.to_string(),
    };
    (
        error.status(),
        axum::Json(json!({"code": error.code(), "message": message})),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt as _;

    use super::*;

    #[tokio::test]
    async fn a_chunked_body_that_grows_past_the_cap_is_cut_off_there() {
        const CHUNK: usize = 1024 * 1024;
        let pulled = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&pulled);
        let chunks = futures::stream::iter(0..40).map(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b'x'; CHUNK]))
        });
        let refused = read_body(Body::from_stream(chunks), None).await;
        assert!(
            matches!(
                refused,
                Err(DeliveryError::Webhook(WebhookError::TooLarge { .. }))
            ),
            "{refused:?}"
        );
        let read = pulled.load(Ordering::Relaxed);
        assert_eq!(
            read,
            MAX_BODY_BYTES / CHUNK + 1,
            "no chunk past the cap is read"
        );
    }
}
