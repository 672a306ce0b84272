//! The board: loopx's goals as server-rendered pages, and the inbox where a person answers the
//! gates that wait on them.
//!
//! - `GET /`: every goal with its standing ([`views::standing`](crate::views::standing)), the decision of each
//!   registered agent, its budget as gauges and its next wake; `?state=` and `?agent=` filter.
//! - `GET /goals/{goal}`: one goal — criteria with their evidence and freshness, the todo graph
//!   with leases and each agent's frontier, gates, obligations and the timeline of its latest
//!   commits (who, which command and events, and the receipt: operation id, digest, revision),
//!   read from the store's audit trail ([`Store::latest_operations`]), so a commit whose events
//!   were moved to its archive is still listed; `?revision=N` shows it as it stood right after
//!   revision N ([`Store::state_at`], which reads the archive too). A revision before the
//!   earliest the store can show (a goal compacted before its store kept an archive) shows
//!   that earliest one, saying which can be viewed.
//! - `GET /inbox`: the gates waiting on the signed-in person, oldest and most overdue first, with
//!   forms that answer or reject them as that person (see [`inbox`](self#the-inbox)).
//! - `GET /events`: server-sent events, one `changed` event naming the goals that moved.
//!
//! Every page is plain HTML that works without JavaScript; a few lines of script (`/board.js`)
//! reload the page's content when a `changed` event names a goal it shows. No page shows a
//! token, a key or a session id.
//!
//! # The inbox
//!
//! A person signs in by posting the bearer token issued for them (the MCP endpoint's
//! [`Tokens`]); the server keeps the session and answers with a cookie holding only a random
//! session id (`HttpOnly`, `SameSite=Strict`, named after the listener's port, and `Secure`
//! when the site is served over https: [`Site::cookie`]). Browsers send a host's cookies to
//! every port of it and count every port as the same site, so the service also refuses any
//! post a browser says came from another origin ([`crate::site`]). Every form carries a CSRF token: the sign-in form
//! one bound to a cookie of its own, the others the session's. An answer is submitted through the
//! same path as `POST /goals/{goal}/gates/{gate}/answer` ([`crate::gates`]): as the session's
//! actor, signed with its key; the kernel decides who may answer, and its refusal is shown with
//! its message and hint. A post without a session or with a wrong CSRF token changes nothing.

mod inbox;
mod live;
mod pages;
mod render;

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use loopx_kernel::seams::{Clock, Store, StoreError};
use loopx_kernel::{GoalId, GoalState, Timestamp};

use crate::mcp::Tokens;
use crate::site::Site;

pub use inbox::SESSION_COOKIE;

/// The style sheet every page links, embedded in the binary.
const STYLE: &str = include_str!("board.css");
/// The live-update script every page loads (deferred; pages work without it).
const SCRIPT: &str = include_str!("board.js");

/// What every route of the board shares.
#[derive(Clone)]
struct Board {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    sessions: Arc<inbox::Sessions>,
}

/// The board's routes over `store`, timed by `clock`, with the inbox open to the holders of
/// `tokens` (none: everyone reads, nobody signs in), its cookies named and secured for `site`
/// ([`Site::cookie`]). Ready to mount ([`crate::Service::mount`]) on a service served as `site`
/// ([`crate::Service::site`]), which checks each request's host and origin.
pub fn router(store: Arc<dyn Store>, clock: Arc<dyn Clock>, tokens: Tokens, site: &Site) -> Router {
    let board = Board {
        store,
        clock,
        sessions: Arc::new(inbox::Sessions::new(tokens, site)),
    };
    Router::new()
        .route("/", get(pages::goals))
        .route("/goals/{goal}", get(pages::goal))
        .route("/inbox", get(inbox::page))
        .route("/inbox/sign-in", post(inbox::sign_in))
        .route("/inbox/sign-out", post(inbox::sign_out))
        .route("/inbox/answer", post(inbox::answer))
        .route("/events", get(live::events))
        .route("/board.css", get(style))
        .route("/board.js", get(script))
        .with_state(board)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Why a page could not be shown: an HTTP status and words for the person reading it.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    title: &'static str,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, title: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            title,
            message: message.into(),
        }
    }

    /// The store failed. Its own text may name a host or a path, so it goes to the log only.
    fn store(error: &StoreError) -> Failure {
        tracing::warn!(error = %error, "board: the store failed");
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "The store is unavailable",
            "the store did not answer; try again shortly",
        )
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let page = render::failure(self.title, &self.message);
        (self.status, render::html(page)).into_response()
    }
}

/// A goal as the store lists it: its state and its next wake.
type Listed = (GoalState, Option<Timestamp>);

/// Every goal of the store with its state, in the store's listing order, with its next wake
/// after `now`.
async fn all_goals(store: &dyn Store, now: Timestamp) -> Result<Vec<Listed>, Failure> {
    let summaries = store.goals(now).await.map_err(|e| Failure::store(&e))?;
    let mut goals = Vec::with_capacity(summaries.len());
    for summary in summaries {
        if let Some(state) = store
            .load(&summary.goal)
            .await
            .map_err(|e| Failure::store(&e))?
        {
            goals.push((state, summary.next_wake));
        }
    }
    Ok(goals)
}

/// A path segment for an id: every byte outside the URL's unreserved set percent-encoded, so
/// an id holding `/`, `#` or `+` stays one segment.
fn segment(id: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The page of one goal.
fn goal_href(goal: &GoalId) -> String {
    format!("/goals/{}", segment(goal.as_str()))
}
