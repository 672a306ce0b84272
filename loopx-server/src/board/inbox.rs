//! The inbox: sessions from a bearer token, the gates waiting on the signed-in person, and the
//! forms that answer them as that person.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use loopx_kernel::{Actor, Gate, GateAnswer, GateId, GateState, GoalId, GoalState, Timestamp};
use maud::{Markup, html};
use serde::Deserialize;
use subtle::ConstantTimeEq as _;

use super::render::{self, Nav, badge, maybe_time, time};
use super::{Board, Failure, Listed, all_goals, goal_href};
use crate::gates::{AnswerRefused, answer_as};
use crate::mcp::{Acting, Tokens};
use crate::site::Site;
use crate::views;

/// The cookie holding a signed-in person's session id (never the token it was opened with),
/// before the site names it after its listener ([`Site::cookie`]).
pub const SESSION_COOKIE: &str = "loopx_session";
/// The cookie the sign-in form's CSRF token is bound to, before the site names it.
const SIGN_IN_COOKIE: &str = "loopx_sign_in";
/// How long a session lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// How many of the todos a gate blocks its card names; the rest are counted.
const BLOCKED_NAMED: usize = 20;
/// The most sessions one person keeps at once (a browser each); past it, that person's oldest
/// goes first. Bounded per person, so nobody's sign-ins can end another's session, and the
/// whole is bounded by the people given a token.
const MAX_SESSIONS_PER_ACTOR: usize = 8;

/// A signed-in person: whom they act as, and the CSRF token of their forms.
struct Session {
    acting: Acting,
    csrf: String,
    expires: Instant,
}

/// The inbox's cookies as the site names them, and whether they must be `Secure`.
struct Cookies {
    session: String,
    sign_in: String,
    secure: bool,
}

impl Cookies {
    /// A cookie the script cannot read and no other site sends: `Max-Age=0` clears it.
    fn set(&self, name: &str, value: &str, max_age: u64) -> Option<HeaderValue> {
        let secure = if self.secure { "; Secure" } else { "" };
        let text =
            format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
        HeaderValue::from_str(&text).ok()
    }
}

/// The sessions the server keeps, by session id, the tokens a person signs in with, and the
/// cookies that carry them.
pub(super) struct Sessions {
    tokens: Tokens,
    open: Mutex<HashMap<String, Session>>,
    cookies: Cookies,
}

impl Sessions {
    pub(super) fn new(tokens: Tokens, site: &Site) -> Sessions {
        Sessions {
            tokens,
            open: Mutex::new(HashMap::new()),
            cookies: Cookies {
                session: site.cookie(SESSION_COOKIE),
                sign_in: site.cookie(SIGN_IN_COOKIE),
                secure: site.secure(),
            },
        }
    }

    /// Opens a session for `acting`: its id and CSRF token.
    fn open(&self, acting: Acting) -> Option<(String, String)> {
        let (id, csrf) = (random_token()?, random_token()?);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        open.retain(|_, s| s.expires > now);
        make_room(&mut open, acting.actor());
        let session = Session {
            acting,
            csrf: csrf.clone(),
            expires: now + SESSION_TTL,
        };
        open.insert(id.clone(), session);
        Some((id, csrf))
    }

    /// Whom the request's session acts as, and its CSRF token; `None` without a live one.
    fn of(&self, headers: &HeaderMap) -> Option<(Acting, String)> {
        let id = cookie(headers, &self.cookies.session)?;
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(id)
            .filter(|s| s.expires > Instant::now())
            .map(|s| (s.acting.clone(), s.csrf.clone()))
    }

    fn close(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, &self.cookies.session) {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            open.remove(id);
        }
    }
}

/// Ends `actor`'s oldest sessions until one more fits within [`MAX_SESSIONS_PER_ACTOR`];
/// nobody else's.
fn make_room(open: &mut HashMap<String, Session>, actor: &Actor) {
    let mut theirs: Vec<(Instant, String)> = open
        .iter()
        .filter(|(_, s)| s.acting.actor() == actor)
        .map(|(id, s)| (s.expires, id.clone()))
        .collect();
    theirs.sort();
    let excess = (theirs.len() + 1).saturating_sub(MAX_SESSIONS_PER_ACTOR);
    for (_, id) in theirs.into_iter().take(excess) {
        open.remove(&id);
    }
}

/// 32 random bytes in hex, or `None` when the system has no randomness to give.
fn random_token() -> Option<String> {
    use std::fmt::Write as _;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}

/// The value of cookie `name` in the request, if it sends one.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// What a page says after a post.
enum Notice {
    /// An answer to this gate was recorded; said only when some goal holds the gate, so the
    /// page never repeats text a link brought.
    Answered(GateId),
    Refused {
        code: String,
        message: String,
        hint: String,
    },
}

/// The inbox page's query: what the last answer did.
#[derive(Debug, Default, Deserialize)]
pub(super) struct InboxQuery {
    answered: Option<String>,
}

/// `GET /inbox`: the sign-in form, or the gates waiting on the signed-in person.
pub(super) async fn page(
    State(board): State<Board>,
    headers: HeaderMap,
    Query(query): Query<InboxQuery>,
) -> Result<Response, Failure> {
    let answered = query
        .answered
        .and_then(|gate| GateId::new(gate).ok())
        .map(Notice::Answered);
    show(&board, &headers, StatusCode::OK, answered.as_ref()).await
}

/// The inbox as the request's session sees it, answered with `status`.
async fn show(
    board: &Board,
    headers: &HeaderMap,
    status: StatusCode,
    notice: Option<&Notice>,
) -> Result<Response, Failure> {
    let now = board.clock.now();
    let goals = all_goals(&*board.store, now).await?;
    let session = board.sessions.of(headers);
    let mut sign_in = None;
    if session.is_none() {
        sign_in = random_token();
    }
    let page = inbox_page(
        &goals,
        session.as_ref().map(|(a, c)| (a.actor(), c.as_str())),
        sign_in.as_deref(),
        notice,
        now,
    );
    let mut response = (status, render::html(page)).into_response();
    let cookies = &board.sessions.cookies;
    if let Some(csrf) = sign_in
        && let Some(value) = cookies.set(&cookies.sign_in, &csrf, 3600)
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// Every open gate across `goals` with its goal, oldest and most overdue first: overdue ones
/// before the rest, then by deadline (none last), then by when they were opened.
fn open_gates(goals: &[Listed], now: Timestamp) -> Vec<(&GoalState, &Gate, GateState)> {
    let mut open: Vec<(&GoalState, &Gate, GateState)> = goals
        .iter()
        .flat_map(|(state, _)| {
            state
                .gates
                .values()
                .map(move |g| (state, g, g.state_at(now)))
        })
        .filter(|(_, _, effective)| effective.is_pending())
        .collect();
    open.sort_by_key(|(_, g, effective)| {
        (
            *effective != GateState::Overdue,
            g.deadline.is_none(),
            g.deadline,
            g.opened_at,
        )
    });
    open
}

/// The inbox page: for a signed-in `person` (with their CSRF token) the gates waiting on them
/// with forms, and every other open gate read-only; for anyone else the sign-in form (its CSRF
/// token `sign_in`) and every open gate read-only.
fn inbox_page(
    goals: &[Listed],
    person: Option<(&Actor, &str)>,
    sign_in: Option<&str>,
    notice: Option<&Notice>,
    now: Timestamp,
) -> Markup {
    let notice = notice.filter(|n| !matches!(n, Notice::Answered(gate) if !held(goals, gate)));
    let open = open_gates(goals, now);
    let (mine, others): (Vec<_>, Vec<_>) = open
        .into_iter()
        .partition(|(_, g, _)| person.is_some_and(|(actor, _)| &g.owner == actor));
    let body = html! {
        h1 { "Inbox" }
        @match notice {
            Some(Notice::Answered(gate)) => p.notice.done role="status" {
                "Your answer to gate `" (gate) "` was recorded."
            },
            Some(Notice::Refused { code, message, hint }) => div.notice.refused role="alert" {
                p { strong { "Refused (" (code) "): " } (message) }
                @if !hint.is_empty() { p.hint { (hint) } }
            },
            None => {}
        }
        @match person {
            Some((actor, csrf)) => {
                form.session method="post" action="/inbox/sign-out" {
                    "Signed in as " strong { (actor) } " "
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" { "Sign out" }
                }
                h2 { "Waiting on you (" (mine.len()) ")" }
                @if mine.is_empty() { p.empty { "Nothing waits on you." } }
                @for (state, gate, effective) in &mine {
                    (gate_card(state, gate, *effective, Some(csrf)))
                }
            }
            None => (sign_in_form(sign_in.unwrap_or_default())),
        }
        h2 { "Waiting on others (" (others.len()) ")" }
        @if others.is_empty() { p.empty { "No other open gates." } }
        @for (state, gate, effective) in &others {
            (gate_card(state, gate, *effective, None))
        }
    };
    render::layout("Inbox", Nav::Inbox, Some("all"), &body)
}

/// Whether some goal holds `gate`.
fn held(goals: &[Listed], gate: &GateId) -> bool {
    goals
        .iter()
        .any(|(state, _)| state.gates.contains_key(gate))
}

fn sign_in_form(csrf: &str) -> Markup {
    html! {
        form.sign-in method="post" action="/inbox/sign-in" {
            p { "Sign in with the token issued for you to answer the gates that wait on you." }
            input type="hidden" name="csrf" value=(csrf);
            label { "Token " input type="password" name="token" autocomplete="off" required; }
            " "
            button type="submit" { "Sign in" }
        }
    }
}

/// One open gate: its question, what it blocks, and, with `csrf`, the forms that answer it.
fn gate_card(state: &GoalState, gate: &Gate, effective: GateState, csrf: Option<&str>) -> Markup {
    let mut blocked = state
        .todos
        .values()
        .filter(|t| !matches!(views::column(t), "done" | "superseded") && gate.scope.covers(t));
    let named: Vec<_> = blocked.by_ref().take(BLOCKED_NAMED).collect();
    let more = blocked.count();
    html! {
        article.gate data-goal=(state.spec.id) data-gate=(gate.id) {
            h3 {
                (gate.question) " "
                (badge(views::gate_state_word(effective)))
            }
            p.meta {
                "Gate " code { (gate.id) } " of "
                a href=(goal_href(&state.spec.id)) { (state.spec.id) }
                " · asked by " (gate.opened_by) " at " (time(gate.opened_at))
                " · owner " (gate.owner) " · due " (maybe_time(gate.deadline))
            }
            p { "Blocks " (views::scope_text(&gate.scope))
                @if !named.is_empty() {
                    ": " @for todo in &named { code { (todo.id) } " (" (todo.title) ") " }
                }
                @if more > 0 { "and " (more) " more" }
            }
            @if let Some(csrf) = csrf {
                div.answers {
                    (answer_form(state, gate, csrf, "resolve", "Answer", "answer"))
                    (answer_form(state, gate, csrf, "reject", "Reject", "reason"))
                }
            }
        }
    }
}

fn answer_form(
    state: &GoalState,
    gate: &Gate,
    csrf: &str,
    kind: &str,
    verb: &str,
    field: &str,
) -> Markup {
    html! {
        form class={ "answer " (kind) } method="post" action="/inbox/answer" {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="goal" value=(state.spec.id);
            input type="hidden" name="gate" value=(gate.id);
            input type="hidden" name="kind" value=(kind);
            label { (verb) " — " (field) " "
                input type="text" name="text" required;
            }
            " "
            button type="submit" { (verb) }
        }
    }
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct SignIn {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// `POST /inbox/sign-in`: opens a session for the token's actor and sets its cookie.
pub(super) async fn sign_in(
    State(board): State<Board>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Result<Response, Failure> {
    let cookies = &board.sessions.cookies;
    let bound = cookie(&headers, &cookies.sign_in).unwrap_or_default();
    if bound.is_empty() || !same(bound, &form.csrf) {
        return Err(forged());
    }
    let Some(acting) = board.sessions.tokens.find(form.token.trim()).cloned() else {
        let notice = Notice::Refused {
            code: "unauthorized".into(),
            message: "the server knows no such token".into(),
            hint: "paste the token issued for you (the one your `--mcp-token` names)".into(),
        };
        return show(&board, &headers, StatusCode::UNAUTHORIZED, Some(&notice)).await;
    };
    if !matches!(acting.actor(), Actor::Person(_)) {
        // The inbox is where people answer; an agent's or a service's token acts at `/mcp`.
        let notice = Notice::Refused {
            code: "not_a_person".into(),
            message: format!(
                "the token is {}'s, and only a person signs in to the inbox",
                acting.actor()
            ),
            hint: "sign in with the token issued for you as person:NAME".into(),
        };
        return show(&board, &headers, StatusCode::FORBIDDEN, Some(&notice)).await;
    }
    let (id, _) = board.sessions.open(acting).ok_or_else(|| {
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "No session could be opened",
            "the system gave no randomness for a session id; try again",
        )
    })?;
    let mut response = Redirect::to("/inbox").into_response();
    for value in [
        cookies.set(&cookies.session, &id, SESSION_TTL.as_secs()),
        cookies.set(&cookies.sign_in, "", 0),
    ]
    .into_iter()
    .flatten()
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// A form whose only field is its CSRF token.
#[derive(Debug, Deserialize)]
pub(super) struct Plain {
    #[serde(default)]
    csrf: String,
}

/// `POST /inbox/sign-out`: closes the session.
pub(super) async fn sign_out(
    State(board): State<Board>,
    headers: HeaderMap,
    Form(form): Form<Plain>,
) -> Result<Response, Failure> {
    checked(&board, &headers, &form.csrf)?;
    board.sessions.close(&headers);
    let mut response = Redirect::to("/inbox").into_response();
    let cookies = &board.sessions.cookies;
    if let Some(value) = cookies.set(&cookies.session, "", 0) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// The session of a post whose CSRF token is its session's: `401` without a session, `403`
/// with another token.
fn checked(board: &Board, headers: &HeaderMap, csrf: &str) -> Result<Acting, Failure> {
    let Some((acting, expected)) = board.sessions.of(headers) else {
        return Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "Not signed in",
            "sign in on the inbox first; nothing was changed",
        ));
    };
    if !same(&expected, csrf) {
        return Err(forged());
    }
    Ok(acting)
}

fn forged() -> Failure {
    Failure::new(
        StatusCode::FORBIDDEN,
        "Refused: the form is not this page's",
        "the form's CSRF token does not match this session; reload the inbox and submit again. Nothing was changed.",
    )
}

/// An answer form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct AnswerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    goal: String,
    #[serde(default)]
    gate: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    text: String,
}

/// `POST /inbox/answer`: answers or rejects a gate as the session's actor.
pub(super) async fn answer(
    State(board): State<Board>,
    headers: HeaderMap,
    Form(form): Form<AnswerForm>,
) -> Result<Response, Failure> {
    let acting = checked(&board, &headers, &form.csrf)?;
    let (Ok(goal), Ok(gate)) = (GoalId::new(form.goal), GateId::new(form.gate)) else {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "No such gate",
            "the form names no valid goal and gate; nothing was changed",
        ));
    };
    let answer = match form.kind.as_str() {
        "resolve" => GateAnswer::Resolve { answer: form.text },
        "reject" => GateAnswer::Reject { reason: form.text },
        _ => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "No such answer",
                "an answer is `resolve` or `reject`; nothing was changed",
            ));
        }
    };
    match answer_as(&*board.store, &*board.clock, &acting, &goal, &gate, answer).await {
        Ok(_) => {
            let to = format!("/inbox?answered={}", super::segment(gate.as_str()));
            Ok(Redirect::to(&to).into_response())
        }
        Err(AnswerRefused {
            status,
            code,
            message,
            hint,
        }) => {
            let notice = Notice::Refused {
                code: code.to_owned(),
                message,
                hint,
            };
            show(&board, &headers, status, Some(&notice)).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_kernel::PersonId;

    fn person(name: &str) -> Acting {
        Acting::unsigned(Actor::Person(PersonId::new(name).expect("a person id")))
    }

    #[test]
    fn sign_ins_past_the_bound_end_only_the_same_persons_oldest_sessions() {
        let site = Site::local(std::net::SocketAddr::from(([127, 0, 0, 1], 7468)));
        let sessions = Sessions::new(Tokens::new(), &site);
        let (maria, _) = sessions.open(person("maria")).expect("a session");
        let (mallory_first, _) = sessions.open(person("mallory")).expect("a session");
        for _ in 0..10_000 {
            sessions.open(person("mallory")).expect("a session");
        }
        let open = sessions.open.lock().expect("the sessions");
        assert!(open.contains_key(&maria), "another person's session stays");
        assert!(
            !open.contains_key(&mallory_first),
            "their own oldest went first"
        );
        let mallory = Actor::Person(PersonId::new("mallory").expect("a person id"));
        let theirs = open
            .values()
            .filter(|s| s.acting.actor() == &mallory)
            .count();
        assert_eq!(theirs, MAX_SESSIONS_PER_ACTOR);
    }
}
