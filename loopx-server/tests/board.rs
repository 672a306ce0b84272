//! The board over HTTP on loopback, on the seed story's store at its three moments: what each
//! page shows (and that it is valid HTML), the inbox's sessions and forms, every refusal of a
//! forged post (which changes nothing), and the live-update stream.

#[allow(dead_code, reason = "each test tells part of the story")]
#[path = "support/story.rs"]
mod story;
#[allow(dead_code, reason = "the shared support serves several tests")]
mod support;

use std::sync::Arc;
use std::time::Duration;

use loopx_kernel::{
    Command, ExpiryPolicy, GateScope, GateState, GoalId, GoalSpec, NewGate, NewTodo, StoreExt,
    Timestamp,
};
use loopx_server::Service;
use loopx_store::{Retention, SqliteOptions, SqliteStore, StoreClock};
use scraper::{Html, Selector};
use story::{AGENT_TOKEN, GATE, GOAL, MAINTAINER_TOKEN, REVIEWER_TOKEN, Story};

/// The board of `story` served on loopback (with the house routes, as `loopx serve` mounts it).
async fn serve(story: &Story) -> String {
    let clock: Arc<dyn loopx_kernel::seams::Clock> = story.clock.clone();
    let router = Service::new(story.store.clone(), clock.clone())
        .mount(loopx_server::board::router(
            story.store.clone(),
            clock,
            story.tokens(),
            &loopx_server::Site::default(),
        ))
        .router();
    support::on_loopback(router).await
}

/// A client that keeps redirects to itself, so a test sees each answer and its cookies.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

/// A page: its status and document, which must parse as HTML5 without a single error.
async fn page(request: reqwest::RequestBuilder) -> (u16, Html, String) {
    let response = request.send().await.expect("the board answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let html = valid(&text);
    (status, html, text)
}

/// The document, failing the test on any HTML5 parse error.
fn valid(text: &str) -> Html {
    let html = Html::parse_document(text);
    assert!(
        html.errors.is_empty(),
        "the page is not valid HTML: {:?}\n{text}",
        html.errors
    );
    html
}

fn texts(html: &Html, selector: &str) -> Vec<String> {
    let selector = Selector::parse(selector).expect("a selector");
    html.select(&selector)
        .map(|e| {
            e.text()
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn count(html: &Html, selector: &str) -> usize {
    texts(html, selector).len()
}

/// The value of `name` among a response's `Set-Cookie` headers, with the header itself.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<(String, String)> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| {
            let value = v[name.len() + 1..].split(';').next().unwrap_or_default();
            (value.to_owned(), v.to_owned())
        })
}

/// A signed-in session: its cookie header and its CSRF token, read off the inbox's forms.
async fn sign_in(base: &str, token: &str) -> (String, String) {
    let anonymous = client()
        .get(format!("{base}/inbox"))
        .send()
        .await
        .expect("an inbox");
    let (bound, _) = set_cookie(&anonymous, "loopx_sign_in").expect("the sign-in form's cookie");
    let html = valid(&anonymous.text().await.expect("a body"));
    let csrf = attribute(&html, "form.sign-in input[name=csrf]", "value");
    assert_eq!(csrf, bound, "the sign-in form's CSRF token is its cookie's");
    let response = client()
        .post(format!("{base}/inbox/sign-in"))
        .header("cookie", format!("loopx_sign_in={bound}"))
        .form(&[("csrf", csrf.as_str()), ("token", token)])
        .send()
        .await
        .expect("a sign-in");
    assert_eq!(
        response.status().as_u16(),
        303,
        "a sign-in goes back to the inbox"
    );
    let (session, header) = set_cookie(&response, "loopx_session").expect("a session cookie");
    assert!(
        header.contains("HttpOnly") && header.contains("SameSite=Strict"),
        "{header}"
    );
    assert!(
        !header.contains(token) && session != token,
        "the cookie never holds the token"
    );
    let cookie = format!("loopx_session={session}");
    let (_, html, _) = page(
        client()
            .get(format!("{base}/inbox"))
            .header("cookie", &cookie),
    )
    .await;
    let csrf = attribute(&html, "form.session input[name=csrf]", "value");
    (cookie, csrf)
}

fn attribute(html: &Html, selector: &str, name: &str) -> String {
    let selector = Selector::parse(selector).expect("a selector");
    html.select(&selector)
        .next()
        .and_then(|e| e.value().attr(name))
        .unwrap_or_else(|| panic!("no {selector:?} with {name}"))
        .to_owned()
}

async fn gate_state(story: &Story) -> (u64, GateState) {
    let state = story.state().await;
    let gate = &state.gates[&GATE.parse().expect("an id")];
    (state.revision, gate.state_at(story.clock_now()))
}

trait ClockNow {
    fn clock_now(&self) -> loopx_kernel::Timestamp;
}

impl ClockNow for Story {
    fn clock_now(&self) -> loopx_kernel::Timestamp {
        use loopx_kernel::seams::Clock as _;
        self.clock.now()
    }
}

async fn answer_post(
    base: &str,
    cookie: Option<&str>,
    csrf: &str,
    kind: &str,
) -> (u16, Html, String) {
    let mut request = client().post(format!("{base}/inbox/answer")).form(&[
        ("csrf", csrf),
        ("goal", GOAL),
        ("gate", GATE),
        ("kind", kind),
        ("text", "yes, keep error_code"),
    ]);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let html = if text.is_empty() {
        Html::parse_document("")
    } else {
        valid(&text)
    };
    (status, html, text)
}

#[tokio::test]
async fn the_goals_page_shows_each_goal_with_its_state_decisions_budget_and_wake() {
    let story = Story::gate_open().await;
    let base = serve(&story).await;
    let (status, html, _) = page(client().get(format!("{base}/"))).await;
    assert_eq!(status, 200);
    let rows = texts(&html, "table.goals tbody tr");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].contains(GOAL) && rows[0].contains("waiting"),
        "{rows:?}"
    );
    let decisions = texts(&html, "tr[data-goal] .decision");
    assert_eq!(decisions.len(), 1, "one registered agent: {decisions:?}");
    assert!(
        decisions[0].starts_with("agent-a: continue: work on `update-help`"),
        "{decisions:?}"
    );
    let meters = Selector::parse("tr[data-goal] meter").expect("a selector");
    let gauges: Vec<(String, String)> = html
        .select(&meters)
        .map(|m| {
            (
                m.value().attr("value").unwrap_or_default().to_owned(),
                m.value().attr("max").unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        gauges,
        [
            ("1".to_owned(), "20".to_owned()),
            ("18000".to_owned(), "500000".to_owned())
        ],
        "turns and tokens"
    );
    assert_eq!(
        texts(&html, "tr[data-goal] td:nth-child(5) time").len(),
        1,
        "a next wake"
    );
    // Filters by state and agent, through the query string (a plain GET form).
    for (query, shown) in [
        ("state=waiting", 1),
        ("state=accepted", 0),
        ("agent=agent-a", 1),
        ("agent=agent-z", 0),
        ("state=waiting&agent=agent-a", 1),
    ] {
        let (status, html, _) = page(client().get(format!("{base}/?{query}"))).await;
        assert_eq!(status, 200);
        assert_eq!(count(&html, "table.goals tbody tr"), shown, "{query}");
    }
    let (_, html, _) = page(client().get(format!("{base}/?state=waiting"))).await;
    assert_eq!(
        attribute(&html, "select[name=state] option[selected]", "value"),
        "waiting"
    );
}

#[tokio::test]
async fn a_goals_page_shows_stale_evidence_with_the_revision_that_made_it_so() {
    let story = Story::stale().await;
    let base = serve(&story).await;
    let (status, html, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    assert_eq!(status, 200);
    let json = texts(&html, "tr[data-criterion=json-schema-tested] td");
    assert!(json[1].contains("stale"), "{json:?}");
    assert_eq!(
        json[3], "git:abc123",
        "shown at the revision it was established at: {json:?}"
    );
    assert!(
        json[4].starts_with("stale: superseded by git:def456"),
        "{json:?}"
    );
    let text = texts(&html, "tr[data-criterion=text-unchanged] td");
    assert!(
        text[1].contains("met") && text[3] == "git:def456",
        "{text:?}"
    );
    // The todo graph: dependencies, statuses, and the agent's frontier highlighted.
    let help = texts(&html, "tr#todo-update-help td");
    assert!(
        help[1] == "done" && help[2] == "change-output-layer",
        "{help:?}"
    );
    assert_eq!(
        count(&html, "tr.frontier"),
        0,
        "document-json waits on the gate: {:?}",
        texts(&html, "table.todos tr")
    );
    let gate = texts(&html, "tr[data-gate] td");
    assert!(
        gate[0].contains(GATE) && gate[1] == "pending" && gate[2] == "person:maintainer",
        "{gate:?}"
    );
    assert_eq!(gate[4], "decision api:error_code");
    assert!(gate[3].starts_with("2026-11-30T17:00"), "{gate:?}");
    let decisions = texts(&html, ".decision");
    assert_eq!(decisions.len(), 1);
    assert!(
        decisions[0].starts_with("agent-a: ask: gate error-code-name for person:maintainer"),
        "{decisions:?}"
    );
    assert_eq!(texts(&html, "section h2").len(), 7);
}

#[tokio::test]
async fn a_goals_timeline_lists_each_commit_with_its_actor_command_and_receipt() {
    let story = Story::stale().await;
    let base = serve(&story).await;
    let (status, html, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    assert_eq!(status, 200);
    // One row per commit, newest first, with who, which command and its events,
    // and the receipt the store recorded for it.
    let timeline = texts(&html, "table.timeline tbody tr");
    let head = story.state().await.revision;
    let goal: GoalId = GOAL.parse().expect("an id");
    let audit = story
        .store
        .latest_operations(&goal, head, usize::MAX)
        .await
        .expect("the audit trail");
    assert_eq!(
        timeline.len(),
        audit.len(),
        "every commit listed: {timeline:?}"
    );
    assert_eq!(
        u64::try_from(audit.len()).ok(),
        Some(head),
        "one event per commit in the story"
    );
    let cells = |revision: u64| texts(&html, &format!("tr[data-revision='{revision}'] td"));
    assert_eq!(
        cells(head)[..4],
        [
            format!("r{head}"),
            "2026-11-29T10:16:00.000Z".into(),
            "agent:agent-a".into(),
            "settle_turn turn_settled".into()
        ],
        "newest first"
    );
    assert_eq!(
        cells(1)[..4],
        [
            "r1",
            "2026-11-29T10:02:00.000Z",
            "person:maintainer",
            "create_goal goal_created"
        ]
    );
    let rows = texts(&html, "table.timeline tbody tr td:first-child");
    for (row, record) in rows.iter().zip(&audit) {
        let receipt = &record.receipt;
        assert_eq!(row, &format!("r{}", receipt.revision), "newest first");
        assert_eq!(
            cells(receipt.revision)[4],
            format!(
                "{} digest {}… · revision {} · 1 event",
                receipt.operation,
                &receipt.digest[..12],
                receipt.revision
            )
        );
    }
    assert_eq!(
        attribute(&html, "tr[data-revision='8'] td a", "href"),
        format!("/goals/{GOAL}?revision=8")
    );
    assert_eq!(
        attribute(&html, "form.revision input[name=revision]", "min"),
        "1"
    );
}

#[tokio::test]
async fn a_past_revision_shows_the_goal_as_it_stood_then() {
    let story = Story::stale().await;
    let base = serve(&story).await;
    let head = story.state().await.revision;
    // Revision 4: planned, nothing done yet, change-output-layer on the frontier.
    let (status, html, _) = page(client().get(format!("{base}/goals/{GOAL}?revision=4"))).await;
    assert_eq!(status, 200);
    let notice = texts(&html, ".notice.past");
    assert!(
        notice[0].starts_with("As it stood at revision 4")
            && notice[0].contains(&format!("now at revision {head}")),
        "{notice:?}"
    );
    assert_eq!(
        texts(&html, "tr.frontier td:first-child code"),
        ["change-output-layer"]
    );
    assert_eq!(texts(&html, "table.gates").len(), 0, "no gate yet");
    let timeline = texts(&html, "table.timeline tbody tr td:first-child");
    assert_eq!(
        timeline,
        ["r4", "r3", "r2", "r1"],
        "the commits up to revision 4"
    );
    assert!(texts(&html, "tr[data-criterion=json-schema-tested] td")[1].contains("no-evidence"));
    for (query, status) in [
        ("revision=0", 400),
        (&format!("revision={}", head + 1), 400),
        ("revision=x", 400),
    ] {
        let (got, html, _) = page(client().get(format!("{base}/goals/{GOAL}?{query}"))).await;
        assert_eq!(got, status, "{query}");
        assert_eq!(texts(&html, "h1"), ["No such revision"]);
        assert!(
            texts(&html, ".notice")[0].contains(&format!("revisions 1 to {head} can be viewed")),
            "{query}: {:?}",
            texts(&html, ".notice")
        );
    }
    let (status, _, _) = page(client().get(format!("{base}/goals/no-such-goal"))).await;
    assert_eq!(status, 404);
    let (status, _, _) = page(client().get(format!("{base}/goals/..%2Fx"))).await;
    assert_eq!(status, 404, "an id outside the grammar is no goal");
}

#[tokio::test]
async fn the_inbox_answers_the_gate_as_its_owner_and_the_agents_decision_changes() {
    let story = Story::stale().await;
    let base = serve(&story).await;
    // Anyone reads the open gate; nobody signed in gets a form to answer it.
    let (status, html, text) = page(client().get(format!("{base}/inbox"))).await;
    assert_eq!(status, 200);
    assert_eq!(count(&html, "form.sign-in"), 1);
    assert_eq!(count(&html, "form.answer"), 0);
    let cards = texts(&html, "article.gate");
    assert!(
        cards[0].contains("Is `error_code` acceptable") && cards[0].contains("document-json"),
        "what it blocks: {cards:?}"
    );
    assert!(!text.contains(MAINTAINER_TOKEN));
    let (cookie, csrf) = sign_in(&base, MAINTAINER_TOKEN).await;
    let (_, html, text) = page(
        client()
            .get(format!("{base}/inbox"))
            .header("cookie", &cookie),
    )
    .await;
    assert!(texts(&html, "form.session")[0].contains("person:maintainer"));
    assert_eq!(count(&html, "article.gate form.answer.resolve"), 1);
    assert_eq!(count(&html, "article.gate form.answer.reject"), 1);
    assert_eq!(
        count(&html, "form input[name=csrf]"),
        3,
        "every form carries the CSRF token"
    );
    assert!(
        !text.contains(MAINTAINER_TOKEN)
            && !text.contains(cookie.trim_start_matches("loopx_session=")),
        "no secret on the page"
    );
    let (status, _, _) = answer_post(&base, Some(&cookie), &csrf, "resolve").await;
    assert_eq!(status, 303, "answered, back to the inbox");
    assert_eq!(gate_state(&story).await.1, GateState::Resolved);
    let (_, html, _) = page(
        client()
            .get(format!("{base}/inbox?answered={GATE}"))
            .header("cookie", &cookie),
    )
    .await;
    assert_eq!(
        texts(&html, ".notice.done"),
        [format!("Your answer to gate `{GATE}` was recorded.")]
    );
    assert_eq!(count(&html, "article.gate"), 0, "nothing waits any more");
    let (_, html, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    assert_eq!(
        texts(&html, ".decision"),
        ["agent-a: continue: work on `document-json` (document the JSON fields)"]
    );
    assert_eq!(
        texts(&html, "tr.frontier td:first-child code"),
        ["document-json"]
    );
    // The gate's row carries the answer, whole, as a quotation with who gave it.
    assert_eq!(
        texts(&html, "tr[data-gate] blockquote.answer"),
        ["yes, keep error_code"]
    );
    let decided = texts(&html, "tr[data-gate] .decided");
    assert!(
        decided[0].starts_with("answered by person:maintainer at "),
        "{decided:?}"
    );
    // Answered again: the kernel's refusal, shown with its message and hint.
    let (status, html, _) = answer_post(&base, Some(&cookie), &csrf, "reject").await;
    assert_eq!(status, 409);
    let refusal = texts(&html, ".notice.refused");
    assert!(
        refusal[0].starts_with("Refused (gate_not_pending)"),
        "{refusal:?}"
    );
    // Accepted once the last turn lands.
    story.finish().await;
    let (_, html, _) = page(client().get(format!("{base}/"))).await;
    assert!(texts(&html, "tr[data-goal] td")[1] == "accepted");
    assert_eq!(texts(&html, ".decision"), ["agent-a: terminal (accepted)"]);
    let (_, html, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    assert!(
        texts(&html, "tr[data-criterion] td:nth-child(2)")
            .iter()
            .all(|s| s == "met")
    );
}

#[tokio::test]
async fn forged_answers_are_refused_and_change_nothing() {
    let story = Story::stale().await;
    let base = serve(&story).await;
    let before = gate_state(&story).await;
    assert_eq!(before.1, GateState::Pending);
    // No session.
    let (status, html, _) = answer_post(&base, None, "anything", "resolve").await;
    assert_eq!(status, 401);
    assert_eq!(texts(&html, "h1"), ["Not signed in"]);
    // A session, but a CSRF token that is not its own.
    let (cookie, csrf) = sign_in(&base, MAINTAINER_TOKEN).await;
    let (status, _, _) = answer_post(&base, Some(&cookie), &format!("{csrf}0"), "resolve").await;
    assert_eq!(status, 403);
    let (status, _, _) = answer_post(&base, Some(&cookie), "", "resolve").await;
    assert_eq!(status, 403);
    // An unknown session id.
    let (status, _, _) = answer_post(&base, Some("loopx_session=0123abcd"), &csrf, "resolve").await;
    assert_eq!(status, 401);
    // Someone who does not own the gate: no form, and a post of their own is the kernel's refusal.
    let (reviewer, reviewer_csrf) = sign_in(&base, REVIEWER_TOKEN).await;
    let (_, html, _) = page(
        client()
            .get(format!("{base}/inbox"))
            .header("cookie", &reviewer),
    )
    .await;
    assert_eq!(
        count(&html, "form.answer"),
        0,
        "no form for someone else's gate"
    );
    assert_eq!(count(&html, "article.gate"), 1, "read-only");
    let (status, html, _) = answer_post(&base, Some(&reviewer), &reviewer_csrf, "resolve").await;
    assert_eq!(status, 409);
    assert!(
        texts(&html, ".notice.refused")[0].starts_with("Refused ("),
        "{:?}",
        texts(&html, ".notice.refused")
    );
    // Sign-in forged: a CSRF token without its cookie, and an unknown token.
    let response = client()
        .post(format!("{base}/inbox/sign-in"))
        .form(&[("csrf", "x"), ("token", MAINTAINER_TOKEN)])
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 403);
    assert!(set_cookie(&response, "loopx_session").is_none());
    let response = client()
        .post(format!("{base}/inbox/sign-in"))
        .header("cookie", "loopx_sign_in=abc")
        .form(&[("csrf", "abc"), ("token", "not-a-token")])
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 401);
    assert!(set_cookie(&response, "loopx_session").is_none());
    // An agent's token is known, but the inbox is for people: no session.
    let response = client()
        .post(format!("{base}/inbox/sign-in"))
        .header("cookie", "loopx_sign_in=abc")
        .form(&[("csrf", "abc"), ("token", AGENT_TOKEN)])
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 403);
    assert!(set_cookie(&response, "loopx_session").is_none());
    let html = response.text().await.expect("a page");
    assert!(
        html.contains("not_a_person") && !html.contains(AGENT_TOKEN),
        "{html}"
    );
    assert_eq!(gate_state(&story).await, before, "nothing changed");
    // Signed out, the session no longer answers.
    let response = client()
        .post(format!("{base}/inbox/sign-out"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("a sign-out");
    assert_eq!(response.status().as_u16(), 303);
    let (status, _, _) = answer_post(&base, Some(&cookie), &csrf, "resolve").await;
    assert_eq!(status, 401);
    assert_eq!(gate_state(&story).await, before, "nothing changed");
}

#[tokio::test]
async fn a_commit_is_announced_on_the_event_stream() {
    let story = Story::gate_open().await;
    let base = serve(&story).await;
    let mut events = client()
        .get(format!("{base}/events"))
        .send()
        .await
        .expect("a stream");
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    story.to_stale().await;
    let mut seen = String::new();
    while !seen.contains("event: changed") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), events.chunk())
            .await
            .expect("an event in time")
            .expect("the stream reads")
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains(&format!("data: {GOAL}")), "{seen}");
}

#[tokio::test]
async fn the_style_sheet_and_the_script_are_served() {
    let story = Story::planned().await;
    let base = serve(&story).await;
    for (path, kind) in [("/board.css", "text/css"), ("/board.js", "text/javascript")] {
        let response = client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("an asset");
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap_or_default()
                .starts_with(kind)
        );
    }
}

/// The text of each of a goal page's sections but the timeline (whose links a compaction
/// changes): what the goal looked like.
fn sections(html: &Html) -> Vec<String> {
    let mut sections = texts(html, "main section");
    sections.pop();
    sections
}

#[tokio::test]
async fn a_compacted_goal_shows_every_revision_from_its_archive_and_every_receipt() {
    let dir = tempfile::tempdir().expect("a directory");
    let sqlite = Arc::new(
        SqliteStore::create_with(
            dir.path().join("loopx.db"),
            SqliteOptions::default().clock(StoreClock::Test),
        )
        .expect("a store"),
    );
    let story = Story::stale_on(sqlite.clone()).await;
    let base = serve(&story).await;
    let head = story.state().await.revision;
    let goal: GoalId = GOAL.parse().expect("an id");
    let mut then = Vec::new();
    for revision in [3, 6, 8] {
        let (_, html, _) =
            page(client().get(format!("{base}/goals/{GOAL}?revision={revision}"))).await;
        then.push((revision, html));
    }
    let (_, before, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    let receipts = texts(&before, "table.timeline td.receipt");
    assert_eq!(u64::try_from(receipts.len()).ok(), Some(head));

    let compaction = sqlite.compact(&goal, 6).await.expect("compacts");
    assert_eq!(compaction.base_revision, 6);

    // Before the base (from the archive), at it and after it: each revision shows as it did
    // before the compaction.
    for (revision, html_then) in &then {
        let (status, html, _) =
            page(client().get(format!("{base}/goals/{GOAL}?revision={revision}"))).await;
        assert_eq!(status, 200, "revision {revision}");
        assert!(
            texts(&html, ".notice.past")[0]
                .starts_with(&format!("As it stood at revision {revision} ")),
            "{:?}",
            texts(&html, ".notice.past")
        );
        assert_eq!(sections(&html), sections(html_then), "revision {revision}");
    }
    // The head's timeline still lists every commit with its receipt, each linked.
    let (status, html, _) = page(client().get(format!("{base}/goals/{GOAL}"))).await;
    assert_eq!(status, 200);
    assert_eq!(texts(&html, "table.timeline td.receipt"), receipts);
    assert_eq!(sections(&html), sections(&before));
    assert_eq!(
        attribute(&html, "form.revision input[name=revision]", "min"),
        "1"
    );
    for revision in 1..=head {
        let cell = texts(
            &html,
            &format!("tr[data-revision='{revision}'] td:first-child"),
        );
        let links = count(
            &html,
            &format!("tr[data-revision='{revision}'] td:first-child a"),
        );
        assert_eq!(cell, [format!("r{revision}")]);
        assert_eq!(links, 1, "revision {revision}");
    }
    // Outside the goal's revisions: refused, naming the ones that can be viewed.
    let (status, html, _) = page(client().get(format!("{base}/goals/{GOAL}?revision=0"))).await;
    assert_eq!(status, 400);
    assert!(
        texts(&html, ".notice")[0].contains(&format!("revisions 1 to {head} can be viewed")),
        "{:?}",
        texts(&html, ".notice")
    );
}

#[tokio::test]
async fn the_timeline_lists_the_latest_commits_and_links_the_earlier_ones() {
    let story = Story::planned().await;
    let base = serve(&story).await;
    let spec = GoalSpec::builder("long", "a goal of many commits", "maintainer")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("a spec");
    let long = story.store.goal(&spec.id);
    let now = story.clock_now();
    long.create(&spec, now).await.expect("created");
    for i in 0..110 {
        let todo = NewTodo::advance(format!("t{i}").parse().expect("an id"), "one more");
        long.submit(&spec.owner_actor(), now, &Command::AddTodo { todo })
            .await
            .expect("added");
    }
    let (status, html, _) = page(client().get(format!("{base}/goals/long"))).await;
    assert_eq!(status, 200);
    let revisions = texts(&html, "table.timeline tbody tr td:first-child");
    assert_eq!(revisions.len(), 100, "the latest 100 commits");
    assert_eq!(
        (revisions[0].as_str(), revisions[99].as_str()),
        ("r111", "r12")
    );
    assert_eq!(
        attribute(&html, "table.timeline + p.meta a[rel=next]", "href"),
        "/goals/long?commits=11#commits"
    );
    let (_, html, _) = page(client().get(format!("{base}/goals/long?commits=11"))).await;
    let revisions = texts(&html, "table.timeline tbody tr td:first-child");
    assert_eq!(revisions.len(), 11, "the rest: {revisions:?}");
    assert_eq!(revisions.last().map(String::as_str), Some("r1"));
    assert_eq!(count(&html, "p.meta a[rel=next]"), 0, "nothing earlier");
    assert_eq!(
        attribute(&html, "table.timeline + p.meta a[rel=first]", "href"),
        "/goals/long?commits=111#commits"
    );
    // The goal itself is still the head: its todos are all there, a page at a time.
    assert_eq!(count(&html, "table.todos tbody tr"), 100);
    assert_eq!(
        texts(&html, "#todos nav.pager")[0],
        "Page 1 of 2 (110 todos) · Next"
    );
    let next = attribute(&html, "#todos nav.pager a[rel=next]", "href");
    assert_eq!(next, "/goals/long?todos=2#todos");
    let (_, html, _) = page(client().get(format!("{base}{next}"))).await;
    assert_eq!(count(&html, "table.todos tbody tr"), 10);
    assert_eq!(
        attribute(&html, "#todos nav.pager a[rel=prev]", "href"),
        "/goals/long?todos=1#todos"
    );
    let (status, _, _) = page(client().get(format!("{base}/goals/long?todos=0"))).await;
    assert_eq!(status, 400, "pages count from 1");
}

#[tokio::test]
async fn the_inbox_lists_the_most_overdue_gates_first_then_by_deadline_then_the_oldest() {
    let story = Story::gate_open().await;
    let base = serve(&story).await;
    let spec = GoalSpec::builder("fleet", "a goal with several questions", "maintainer")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("a spec");
    let fleet = story.store.goal(&spec.id);
    let when = |text: &str| Timestamp::parse(text).expect("a time");
    let open = async |gate: &str, deadline: Option<&str>, now: &str| {
        let gate = NewGate {
            id: gate.parse().expect("an id"),
            question: format!("Question {gate}?"),
            owner: spec.owner_actor(),
            scope: GateScope {
                decisions: [format!("d:{gate}").parse().expect("an id")].into(),
                ..GateScope::default()
            },
            deadline: deadline.map(when),
            on_expiry: ExpiryPolicy::KeepAsking,
        };
        fleet
            .submit(&spec.owner_actor(), when(now), &Command::OpenGate { gate })
            .await
            .expect("opened");
    };
    fleet
        .create(&spec, when("2026-11-29T10:14:00Z"))
        .await
        .expect("created");
    open("someday", None, "2026-11-29T10:14:00Z").await;
    open("late", Some("2026-11-29T11:00:00Z"), "2026-11-29T10:15:00Z").await;
    open("soon", Some("2026-11-30T12:00:00Z"), "2026-11-29T10:16:00Z").await;
    open("later", None, "2026-11-29T10:17:00Z").await;
    story.clock.set(when("2026-11-29T12:00:00Z"));

    let (status, html, _) = page(client().get(format!("{base}/inbox"))).await;
    assert_eq!(status, 200);
    let selector = Selector::parse("article.gate").expect("a selector");
    let order: Vec<&str> = html
        .select(&selector)
        .filter_map(|a| a.value().attr("data-gate"))
        .collect();
    assert_eq!(order, ["late", "soon", GATE, "someday", "later"]);
    assert!(
        texts(&html, "article.gate[data-gate=late] h3")[0].ends_with("overdue"),
        "{:?}",
        texts(&html, "article.gate h3")
    );
}

/// Why a turn failed reaches whoever looks at the board: the failed todo's row carries what
/// the executor printed, in the same words `status` and the brief use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turns_words_are_on_the_todos_row() {
    use loopx_kernel::{Actor, AgentId};
    let store: Arc<dyn loopx_kernel::seams::Store> = Arc::new(loopx_store::MemoryStore::new());
    let at = Timestamp::parse("2026-11-29T10:00:00Z").expect("a time");
    let spec = GoalSpec::builder("failing", "a turn that fails", "olivia")
        .agent("agent-a")
        .declared_identity()
        .build()
        .expect("a spec");
    let goal = store.goal(&spec.id);
    goal.create(&spec, at).await.expect("created");
    let owner = Actor::Person("olivia".parse().expect("an id"));
    let agent = Actor::Agent(AgentId::new("agent-a").expect("an id"));
    let todo = NewTodo::advance("bump".parse().expect("an id"), "bump the parser");
    let steps: Vec<(&Actor, Command)> = vec![
        (&owner, Command::AddTodo { todo }),
        (
            &agent,
            serde_json::from_value(serde_json::json!({"command": "claim", "todo": "bump"}))
                .expect("a claim"),
        ),
        (
            &agent,
            serde_json::from_value(
                serde_json::json!({"command": "begin_turn", "todo": "bump", "epoch": 1, "turn": "t1"}),
            )
            .expect("a begin"),
        ),
        (
            &agent,
            Command::SettleTurn(
                serde_json::from_value(serde_json::json!({
                    "todo": "bump", "epoch": 1, "turn": "t1",
                    "verdict": {"validator": {"kind": "validator", "id": "ci"}, "outcome": "failed",
                                "summary": "tests failed: 3 failures in serde_roundtrip"},
                    "transition": {"kind": "keep_open"},
                    "usage": {"turns": 1},
                    "failure": {"class": "exited", "detail": "tests failed: 3 failures in serde_roundtrip"}
                }))
                .expect("a settlement"),
            ),
        ),
    ];
    for (actor, command) in steps {
        goal.submit(actor, at, &command).await.expect("accepted");
    }
    let clock: Arc<dyn loopx_kernel::seams::Clock> = Arc::new(loopx_kernel::ManualClock::new(at));
    let router = Service::new(store.clone(), clock.clone())
        .mount(loopx_server::board::router(
            store,
            clock,
            loopx_server::mcp::Tokens::new(),
            &loopx_server::Site::default(),
        ))
        .router();
    let base = support::on_loopback(router).await;
    let page = client()
        .get(format!("{base}/goals/failing"))
        .header("Host", "localhost")
        .send()
        .await
        .expect("the page")
        .text()
        .await
        .expect("a body");
    let html = Html::parse_document(&page);
    let failure = Selector::parse("tr#todo-bump pre.failure").expect("a selector");
    let words: String = html.select(&failure).flat_map(|e| e.text()).collect();
    assert!(
        words.contains("3 failures in serde_roundtrip"),
        "the failure's words on the todo's row: {page}"
    );
}
