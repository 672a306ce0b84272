//! People answer gates over HTTP: `POST /goals/{goal}/gates/{gate}/answer`, as the person a
//! bearer token names (the MCP endpoint's [`Tokens`]), the command signed with that person's
//! key. The body is the kernel's [`GateAnswer`]: `{"kind": "resolve", "answer": "…"}` or
//! `{"kind": "reject", "reason": "…"}`.
//!
//! The kernel decides who may answer (the gate's owner only); this route only says who is
//! asking. Answers: `200` with the gate as it stands (the document `loopx gate answer --json`
//! prints), `400` for an id or body that does not read, `401` without a known token, `404` for
//! an unknown goal or gate, `409` for any other refusal (with the kernel's code, message and
//! hint), `503` when the store failed. A retry of the same answer replays.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{Clock, Store};
use loopx_kernel::write::SubmitError;
use loopx_kernel::{Command, GateAnswer, GateId, Refusal, words};
use serde_json::json;

use crate::mcp::{Acting, Tokens};
use crate::views;

/// The route's state: the store and the clock every answer is timed by.
#[derive(Clone)]
struct Answers {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

/// `POST /goals/{goal}/gates/{gate}/answer` for the holders of `tokens`, ready to mount
/// ([`crate::Service::mount`]).
pub fn router(store: Arc<dyn Store>, clock: Arc<dyn Clock>, tokens: Tokens) -> Router {
    let routes = Router::new()
        .route("/goals/{goal}/gates/{gate}/answer", post(answer))
        .with_state(Answers { store, clock });
    crate::mcp::http::authenticated(routes, tokens)
}

async fn answer(
    State(answers): State<Answers>,
    Extension(acting): Extension<Acting>,
    Path((goal, gate)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (Ok(goal), Ok(gate)) = (GoalId::new(goal), GateId::new(gate)) else {
        return failure(
            StatusCode::BAD_REQUEST,
            "invalid_id",
            "the goal or gate in the path is not a valid id",
            "",
        );
    };
    let answer: GateAnswer = match serde_json::from_slice(&body) {
        Ok(answer) => answer,
        Err(error) => {
            return failure(
                StatusCode::BAD_REQUEST,
                "invalid_answer",
                &format!("the body is not a gate answer: {error}"),
                r#"send {"kind": "resolve", "answer": "…"} or {"kind": "reject", "reason": "…"}"#,
            );
        }
    };
    match answer_as(
        &*answers.store,
        &*answers.clock,
        &acting,
        &goal,
        &gate,
        answer,
    )
    .await
    {
        Ok(shown) => (StatusCode::OK, axum::Json(shown)).into_response(),
        Err(refused) => failure(
            refused.status,
            refused.code,
            &refused.message,
            &refused.hint,
        ),
    }
}

/// Why an answer was not recorded, in the kernel's words, with the HTTP status it maps to.
#[derive(Debug, Clone)]
pub(crate) struct AnswerRefused {
    /// `404` for an unknown goal or gate, `409` for any other refusal, `503` for the store.
    pub status: StatusCode,
    /// The kernel's stable code.
    pub code: &'static str,
    /// What happened.
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

/// Submits `answer` to `gate` of `goal` as `acting` (signed with its key when it has one),
/// timed by `clock`: the one path by which a person's answer reaches the kernel over HTTP,
/// shared by this route and the board's inbox. `Ok` is the gate as it stands afterwards.
pub(crate) async fn answer_as(
    store: &dyn Store,
    clock: &dyn Clock,
    acting: &Acting,
    goal: &GoalId,
    gate: &GateId,
    answer: GateAnswer,
) -> Result<serde_json::Value, AnswerRefused> {
    let now = clock.now();
    let command = Command::AnswerGate {
        gate: gate.clone(),
        answer,
    };
    let mut handle = store.goal(goal).paced(clock);
    if let Some(signer) = acting.signer() {
        handle = handle.signed_by(signer);
    }
    match handle.submit(acting.actor(), now, &command).await {
        Ok(done) => Ok(views::gate_written(&done, gate, now)),
        Err(error) => {
            let status = match &error {
                SubmitError::Refused(Refusal::UnknownGoal | Refusal::UnknownGate { .. }) => {
                    StatusCode::NOT_FOUND
                }
                SubmitError::Refused(_) => StatusCode::CONFLICT,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let (code, message, hint) = words::submit_error(&error);
            Err(AnswerRefused {
                status,
                code,
                message,
                hint,
            })
        }
    }
}

fn failure(status: StatusCode, code: &str, message: &str, hint: &str) -> Response {
    (
        status,
        axum::Json(json!({"code": code, "message": message, "hint": hint})),
    )
        .into_response()
}
