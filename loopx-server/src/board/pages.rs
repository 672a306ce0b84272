//! The goals page and a goal's page.

use std::collections::{BTreeMap, HashMap, HashSet};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use loopx_kernel::seams::{DeadLetter, OperationRecord, PastState, Store};
use loopx_kernel::words::{freshness_words, headline};
use loopx_kernel::{
    AgentId, CriterionStatus, Decision, Freshness, GoalId, GoalState, Revision, Timestamp, TodoId,
    frontier,
};
use maud::{Markup, html};
use serde::Deserialize;

use super::render::{self, Nav, badge, maybe_time, time};
use super::{Board, Failure, Listed, all_goals, goal_href};
use crate::views::{self, STANDINGS};

/// How many rows each list of a goal's page shows at once: its todos, criteria, gates,
/// obligations and commits. A page of any goal therefore stays the same size however large the
/// goal grows; the rest is one link away.
const PAGE: usize = 100;

/// The goals page's filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct GoalsQuery {
    /// Only goals of this standing (one of [`STANDINGS`]); empty for all.
    #[serde(default)]
    state: String,
    /// Only goals this agent is registered with; empty for all.
    #[serde(default)]
    agent: String,
}

/// `GET /`: every goal with its standing, decisions, budget and next wake.
pub(super) async fn goals(
    State(board): State<Board>,
    Query(query): Query<GoalsQuery>,
) -> Result<Response, Failure> {
    let now = board.clock.now();
    let goals = all_goals(&*board.store, now).await?;
    Ok(render::html(goals_page(&goals, &query, now)))
}

/// The goals page over `goals` (each with its next wake), filtered by `query`.
fn goals_page(goals: &[Listed], query: &GoalsQuery, now: Timestamp) -> Markup {
    let mut agents: Vec<&AgentId> = goals.iter().flat_map(|(g, _)| &g.spec.agents).collect();
    agents.sort();
    agents.dedup();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let rows: Vec<Markup> = goals
        .iter()
        .filter_map(|(state, wake)| {
            let decisions = views::decisions(state, now);
            let standing = views::standing(state, &decisions, now);
            *counts.entry(standing).or_default() += 1;
            let shown = (query.state.is_empty() || query.state == standing)
                && (query.agent.is_empty()
                    || state.spec.agents.iter().any(|a| a.as_str() == query.agent));
            shown.then(|| goal_row(state, standing, &decisions, *wake))
        })
        .collect();
    let body = html! {
        h1 { "Goals" }
        p.summary {
            (goals.len()) " goals"
            @for name in STANDINGS {
                " · " (counts.get(name).copied().unwrap_or(0)) " " (name)
            }
        }
        form.filters method="get" action="/" {
            label { "State "
                select name="state" {
                    option value="" { "any" }
                    @for name in STANDINGS {
                        option value=(name) selected[query.state == name] { (name) }
                    }
                }
            }
            label { "Agent "
                select name="agent" {
                    option value="" { "any" }
                    @for agent in &agents {
                        option value=(agent) selected[query.agent == agent.as_str()] { (agent) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        @if rows.is_empty() {
            p.empty { "No goal matches." }
        } @else {
            table.goals {
                thead { tr { th { "Goal" } th { "State" } th { "Decisions" } th { "Budget" } th { "Next wake" } } }
                tbody { @for row in &rows { (row) } }
            }
        }
    };
    render::layout("Goals", Nav::Goals, Some("all"), &body)
}

fn goal_row(
    state: &GoalState,
    standing: &str,
    decisions: &[(AgentId, Decision)],
    wake: Option<Timestamp>,
) -> Markup {
    html! {
        tr data-goal=(state.spec.id) {
            td {
                a href=(goal_href(&state.spec.id)) { (state.spec.id) }
                div.objective { (state.spec.objective) }
            }
            td { (badge(standing)) }
            td { (decision_list(decisions)) }
            td { (render::budget(&state.ledger)) }
            td { (maybe_time(wake)) }
        }
    }
}

fn decision_list(decisions: &[(AgentId, Decision)]) -> Markup {
    html! {
        ul.decisions {
            @for (agent, decision) in decisions {
                li class={ "decision " (decision.kind()) } {
                    span.agent { (agent) } ": " (headline(decision))
                }
            }
        }
    }
}

/// A goal page's query: the revision to show (the head when absent), the page of each list
/// (from 1) and the revision the timeline lists commits up to.
#[derive(Debug, Default, Deserialize)]
pub(super) struct GoalQuery {
    revision: Option<String>,
    todos: Option<String>,
    criteria: Option<String>,
    gates: Option<String>,
    obligations: Option<String>,
    commits: Option<String>,
}

/// The page of each list a goal's page shows, from 1.
#[derive(Debug, Clone, Copy)]
struct Pages {
    todos: usize,
    criteria: usize,
    gates: usize,
    obligations: usize,
}

impl GoalQuery {
    fn pages(&self) -> Result<Pages, Failure> {
        Ok(Pages {
            todos: page_number("todos", self.todos.as_deref())?,
            criteria: page_number("criteria", self.criteria.as_deref())?,
            gates: page_number("gates", self.gates.as_deref())?,
            obligations: page_number("obligations", self.obligations.as_deref())?,
        })
    }
}

/// `?NAME=N`: a page from 1 (1 when absent).
fn page_number(name: &str, text: Option<&str>) -> Result<usize, Failure> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(1),
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "No such page",
                    format!("?{name}= takes a page number from 1"),
                )
            }),
    }
}

/// One page of a list: its rows, which page it is and how many there are.
struct Paged<T> {
    rows: Vec<T>,
    page: usize,
    pages: usize,
    total: usize,
}

/// Page `page` of the `total` rows `all` yields (the last page when past it).
fn paged<T>(all: impl Iterator<Item = T>, total: usize, page: usize) -> Paged<T> {
    let pages = total.div_ceil(PAGE).max(1);
    let page = page.min(pages);
    let rows = all.skip((page - 1) * PAGE).take(PAGE).collect();
    Paged {
        rows,
        page,
        pages,
        total,
    }
}

/// Which revision a goal's page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// The head, judged now.
    Head,
    /// The past revision asked for, judged at its own commit time.
    Past,
    /// The earliest revision the store keeps, in place of `asked`, which compaction dropped.
    Earliest {
        /// The revision asked for.
        asked: u64,
    },
}

/// What a goal's page shows: the goal at one revision and what surrounds it.
struct GoalView<'a> {
    /// The goal at the revision shown.
    state: &'a GoalState,
    /// Which revision that is, and why.
    shown: Shown,
    /// The goal's current revision.
    head: u64,
    /// The earliest revision the store can show (1 unless the history was compacted).
    earliest: u64,
    /// The latest commits up to `commits_to`, newest first (at most [`PAGE`]).
    commits: &'a [OperationRecord],
    /// The revision the timeline lists commits up to (the revision shown, unless `?commits=`).
    commits_to: u64,
    /// The page of each list.
    pages: Pages,
    /// When the page judges the goal: now for the head, the revision's commit time otherwise.
    now: Timestamp,
    /// The facts from outside this goal refused to record, kept as dead letters (the head only).
    dead_letters: &'a [DeadLetter],
}

/// `GET /goals/{goal}`: one goal, now or at `?revision=N`. A revision before the earliest the
/// store keeps (the history before it was compacted) shows that earliest one, saying so.
pub(super) async fn goal(
    State(board): State<Board>,
    Path(goal): Path<String>,
    Query(query): Query<GoalQuery>,
) -> Result<Response, Failure> {
    let goal = GoalId::new(goal).map_err(|_| unknown_goal())?;
    let pages = query.pages()?;
    let head = board
        .store
        .load(&goal)
        .await
        .map_err(|e| Failure::store(&e))?
        .ok_or_else(unknown_goal)?;
    let earliest = earliest_kept(&*board.store, &goal).await?;
    let asked = match query.revision.as_deref().filter(|r| !r.is_empty()) {
        None => None,
        Some(text) => Some(parse_revision("revision", text, earliest, head.revision)?),
    };
    let (state, shown) = match asked {
        None => (head.clone(), Shown::Head),
        Some(revision) if revision >= earliest => (
            past_state(&*board.store, &goal, revision).await?,
            Shown::Past,
        ),
        Some(asked) => (
            past_state(&*board.store, &goal, earliest).await?,
            Shown::Earliest { asked },
        ),
    };
    // A past revision is judged at its own commit time, as `loopx status --at-revision` does.
    let now = match shown {
        Shown::Head => board.clock.now(),
        Shown::Past | Shown::Earliest { .. } => state.last_commit(),
    };
    let commits_to = match query.commits.as_deref().filter(|r| !r.is_empty()) {
        None => state.revision,
        Some(text) => parse_revision("commits", text, earliest, state.revision)?,
    };
    let commits = board
        .store
        .latest_operations(&goal, commits_to, PAGE)
        .await
        .map_err(|e| Failure::store(&e))?;
    let dead_letters = match shown {
        Shown::Head => dead_letters_of(&*board.store, &goal).await?,
        Shown::Past | Shown::Earliest { .. } => Vec::new(),
    };
    Ok(render::html(goal_page(&GoalView {
        state: &state,
        shown,
        head: head.revision,
        earliest,
        commits: &commits,
        commits_to,
        pages,
        now,
        dead_letters: &dead_letters,
    })))
}

/// How many of the store's dead letters a goal page reads to find its goal's.
const DEAD_LETTERS_READ: usize = 1000;

/// The dead letters of `goal` among the first the store keeps.
async fn dead_letters_of(store: &dyn Store, goal: &GoalId) -> Result<Vec<DeadLetter>, Failure> {
    let kept = store
        .dead_letters(DEAD_LETTERS_READ)
        .await
        .map_err(|e| Failure::store(&e))?;
    Ok(kept
        .letters
        .into_iter()
        .filter(|letter| letter.goal == *goal)
        .take(PAGE)
        .collect())
}

fn unknown_goal() -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        "No such goal",
        "no goal by that id in this store; the goals page lists them",
    )
}

/// The earliest revision of `goal` the store can show. Revision 0 is never a state, so the
/// store's answer for it names the revisions it keeps.
async fn earliest_kept(store: &dyn Store, goal: &GoalId) -> Result<u64, Failure> {
    match store.state_at(goal, 0).await {
        Ok(Some(PastState::Unavailable { earliest, .. })) => Ok(earliest),
        Ok(Some(PastState::Kept(_))) => Ok(1),
        Ok(None) => Err(unknown_goal()),
        Err(error) => Err(Failure::store(&error)),
    }
}

/// `goal` as it stood right after `revision`, which the store keeps (unless a compaction
/// removed it since the page looked).
async fn past_state(store: &dyn Store, goal: &GoalId, revision: u64) -> Result<GoalState, Failure> {
    match store.state_at(goal, revision).await {
        Ok(Some(PastState::Kept(state))) => Ok(*state),
        Ok(Some(PastState::Unavailable { earliest, head })) => Err(Failure::new(
            StatusCode::CONFLICT,
            "This revision cannot be shown",
            format!(
                "the history of goal `{goal}` was compacted meanwhile: revisions {earliest} to {head} can be viewed"
            ),
        )),
        Ok(None) => Err(unknown_goal()),
        Err(error) => Err(Failure::store(&error)),
    }
}

/// `text` is a revision from 1 to `head` (one before `earliest` is shown as `earliest`).
fn parse_revision(name: &str, text: &str, earliest: u64, head: u64) -> Result<u64, Failure> {
    match text.parse::<u64>() {
        Ok(revision) if (1..=head).contains(&revision) => Ok(revision),
        _ => Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "No such revision",
            format!(
                "?{name}= takes a revision the goal has reached; revisions {earliest} to {head} can be viewed"
            ),
        )),
    }
}

/// A goal's page: the goal at the revision `view` shows.
fn goal_page(view: &GoalView<'_>) -> Markup {
    let (state, now) = (view.state, view.now);
    let decisions = views::decisions(state, now);
    let standing = views::standing(state, &decisions, now);
    let id = &state.spec.id;
    let body = html! {
        h1 { (id) " " (badge(standing)) }
        p.objective { (state.spec.objective) }
        (revision_notice(view))
        (unverified_notice(state))
        section { h2 { "Decisions" } (decision_list(&decisions)) }
        section { h2 { "Budget" } (render::budget(&state.ledger)) }
        section #criteria { h2 { "Criteria" } (criteria(view)) }
        section #todos { h2 { "Todos" } (todos(view)) }
        section #gates { h2 { "Gates" } (gates(view)) }
        @if !view.dead_letters.is_empty() {
            section #dead-letters { h2 { "Dead letters" } (dead_letters(view.dead_letters)) }
        }
        section #obligations { h2 { "Obligations" } (obligations(view)) }
        section #timeline { h2 { "Timeline" } (revision_form(view)) (timeline(view)) }
    };
    let live = (view.shown == Shown::Head).then(|| id.as_str());
    render::layout(id.as_str(), Nav::Goals, live, &body)
}

/// Which revision the page shows: the head's line, or the notice of a past one.
fn revision_notice(view: &GoalView<'_>) -> Markup {
    let state = view.state;
    let head_link = html! { a href=(goal_href(&state.spec.id)) { "Show the head" } };
    html! {
        @match view.shown {
            Shown::Head => p.meta {
                "Revision " (state.revision) " · owner person:" (state.spec.owner) " · at " (time(view.now))
            },
            Shown::Past => p.notice.past {
                "As it stood at revision " (state.revision) " (" (time(view.now)) "); the goal is now at revision " (view.head) ". "
                (head_link)
            },
            Shown::Earliest { asked } => p.notice.past.compacted {
                "Revision " (asked) " can no longer be shown: the goal's history before revision "
                (view.earliest) " was compacted. Revisions " (view.earliest) " to " (view.head)
                " can be viewed; this is revision " (state.revision) ", as it stood at " (time(view.now)) ". "
                (head_link)
            },
        }
    }
}

/// The notice of imported commits taken without verification, when the goal holds any.
fn unverified_notice(state: &GoalState) -> Markup {
    html! {
        @if let Some(words) = views::unverified_words(state) {
            p.notice.unverified { (words) }
        }
    }
}

/// A plain GET form to show any revision the store keeps, naming them.
fn revision_form(view: &GoalView<'_>) -> Markup {
    html! {
        form.revision method="get" action=(goal_href(&view.state.spec.id)) {
            label { "Show revision "
                input type="number" name="revision" min=(view.earliest) max=(view.head)
                    value=(view.state.revision) required;
            }
            " " button type="submit" { "Show" }
            " " span.meta { "revisions " (view.earliest) " to " (view.head) " can be viewed" }
        }
    }
}

fn criteria(view: &GoalView<'_>) -> Markup {
    let (state, now) = (view.state, view.now);
    let status: HashMap<_, _> = state.criteria_status(now).into_iter().collect();
    let all = &state.spec.criteria;
    let page = paged(all.iter(), all.len(), view.pages.criteria);
    html! {
        table.criteria {
            thead { tr { th { "Criterion" } th { "Status" } th { "Evidence" } th { "Shown at" } th { "Why" } } }
            tbody {
                @for criterion in &page.rows {
                    tr data-criterion=(criterion.id) {
                        td { strong { (criterion.id) } div { (criterion.text) } }
                        @match status.get(&criterion.id) {
                            Some(status) => (criterion_cells(state, status)),
                            None => td colspan="4" { "—" },
                        }
                    }
                }
            }
        }
        (pager(view, "criteria", &page))
    }
}

fn criterion_cells(state: &GoalState, status: &CriterionStatus) -> Markup {
    let (name, evidence) = match status {
        CriterionStatus::Met { evidence } => ("met", Some(evidence)),
        CriterionStatus::Failing { evidence } => ("failing", Some(evidence)),
        CriterionStatus::Stale { evidence, .. } => ("stale", Some(evidence)),
        CriterionStatus::UnregisteredValidator { evidence, .. } => ("ignored", Some(evidence)),
        CriterionStatus::NoEvidence => ("no-evidence", None),
    };
    let shown = evidence.and_then(|id| state.evidence.get(id));
    html! {
        td { (badge(name)) }
        td { @if let Some(id) = evidence { code { (id) } } @else { "none yet" } }
        td { @if let Some(e) = shown { code { (e.revision) } } @else { "—" } }
        td.why {
            @match status {
                CriterionStatus::Stale { freshness, .. } => {
                    @if let Some(current) = superseded(freshness) {
                        span.stale { "stale: superseded by " code { (current) } }
                    } @else {
                        span.stale { "stale: " (freshness_words(freshness)) }
                    }
                }
                CriterionStatus::UnregisteredValidator { produced_by, .. } => {
                    "established by " (produced_by) ", which the goal does not register for this check"
                }
                _ => { @if let Some(e) = shown { (e.summary) } }
            }
        }
    }
}

/// The newer revision that made evidence stale, when that is why.
fn superseded(freshness: &Freshness) -> Option<&Revision> {
    match freshness {
        Freshness::Superseded { current } => Some(current),
        _ => None,
    }
}

fn todos(view: &GoalView<'_>) -> Markup {
    let (state, now) = (view.state, view.now);
    let frontiers: Vec<(&AgentId, HashSet<TodoId>)> = state
        .spec
        .agents
        .iter()
        .map(|agent| (agent, frontier(state, agent, now).into_iter().collect()))
        .collect();
    let page = paged(state.todos.values(), state.todos.len(), view.pages.todos);
    html! {
        @if state.todos.is_empty() {
            p.empty { "No todos yet." }
        } @else {
            table.todos {
                thead { tr { th { "Todo" } th { "Status" } th { "Depends on" } th { "Lease" } th { "Ready for" } } }
                tbody {
                    @for todo in &page.rows {
                        @let ready: Vec<&AgentId> = frontiers.iter().filter(|(_, f)| f.contains(&todo.id)).map(|(a, _)| *a).collect();
                        tr id={ "todo-" (todo.id) } class=[(!ready.is_empty()).then_some("frontier")] {
                            td {
                                code { (todo.id) } div { (todo.title) }
                                // Why its last turn failed, in the words of whoever failed it.
                                @if let Some((failures, note)) = state.last_failure(&todo.id) {
                                    pre.failure { (loopx_kernel::words::failure_words(failures, note, "")) }
                                }
                            }
                            td { (badge(views::column(todo))) }
                            td {
                                @for dep in &todo.depends_on {
                                    a.dep href={ "#todo-" (dep) } { (dep) } " "
                                }
                            }
                            td {
                                @if let Some(lease) = &todo.lease {
                                    "held by agent:" (lease.holder) " until " (time(lease.expires_at))
                                    @if !lease.is_live(now) { " " span.stale { "(expired)" } }
                                } @else { "—" }
                            }
                            td { @for agent in &ready { span.ready { (agent) } " " } }
                        }
                    }
                }
            }
            (pager(view, "todos", &page))
        }
    }
}

/// The facts from outside the goal refused to record: where each came from, why, how often,
/// and the verb that re-applies them once the cause is fixed.
fn dead_letters(letters: &[DeadLetter]) -> Markup {
    html! {
        p { "Facts from outside this goal refused to record. Fix the cause, then re-apply them: "
            code { "loopx dead-letters retry --goal " (letters[0].goal) } }
        table.dead-letters {
            thead { tr { th { "From" } th { "Letter" } th { "Why" } th { "Refused" } } }
            tbody {
                @for letter in letters {
                    tr {
                        td { (letter.origin) }
                        td { code { (letter.operation) } }
                        td { code { (letter.code) } div { (letter.reason) } }
                        td { (letter.refusals) "×, last " (time(letter.last_refused)) }
                    }
                }
            }
        }
    }
}

fn gates(view: &GoalView<'_>) -> Markup {
    let (state, now) = (view.state, view.now);
    let page = paged(state.gates.values(), state.gates.len(), view.pages.gates);
    html! {
        @if state.gates.is_empty() {
            p.empty { "No gates." }
        } @else {
            table.gates {
                thead { tr { th { "Gate" } th { "State" } th { "Owner" } th { "Deadline" } th { "Blocks" } } }
                tbody {
                    @for gate in &page.rows {
                        tr data-gate=(gate.id) {
                            td {
                                code { (gate.id) } div { (gate.question) }
                                @if let Some(decided) = gate.decided(now) {
                                    (decided_words(&decided))
                                }
                            }
                            td { (badge(views::gate_state_word(gate.state_at(now)))) }
                            td { (gate.owner) }
                            td { (maybe_time(gate.deadline)) }
                            td { (views::scope_text(&gate.scope)) }
                        }
                    }
                }
            }
            (pager(view, "gates", &page))
        }
    }
}

/// What a decided gate came to: who and when, then their words whole, as a quotation.
fn decided_words(decided: &loopx_kernel::Decided) -> Markup {
    html! {
        div.decided {
            (loopx_kernel::words::decided_word(decided.outcome))
            @if let Some(by) = &decided.by { " by " (by) }
            " at " (decided.at)
        }
        @if !decided.text.is_empty() {
            blockquote.answer { (decided.text) }
        }
    }
}

fn obligations(view: &GoalView<'_>) -> Markup {
    let state = view.state;
    let all = &state.obligations;
    let page = paged(all.values(), all.len(), view.pages.obligations);
    html! {
        @if all.is_empty() {
            p.empty { "No obligations." }
        } @else {
            table.obligations {
                thead { tr { th { "Obligation" } th { "Owner" } th { "Raised" } th { "Discharged" } } }
                tbody {
                    @for o in &page.rows {
                        tr {
                            td { code { (o.id) } div { (o.detail) } }
                            td { @if let Some(owner) = &o.owner { "agent:" (owner) } @else { "anyone" } }
                            td { "by " (o.raised_by) " at " (time(o.raised_at)) }
                            td { @if let Some(d) = &o.discharged { "by " (d.by) " at " (time(d.at)) } @else { "open" } }
                        }
                    }
                }
            }
            (pager(view, "obligations", &page))
        }
    }
}

/// The link to page `page` of the list `list`, on the revision the page shows.
fn list_href(view: &GoalView<'_>, list: &str, page: impl std::fmt::Display) -> String {
    let goal = goal_href(&view.state.spec.id);
    match view.shown {
        Shown::Head => format!("{goal}?{list}={page}#{list}"),
        _ => format!(
            "{goal}?revision={}&{list}={page}#{list}",
            view.state.revision
        ),
    }
}

/// Where a list's page stands among its pages, with links to the previous and the next one;
/// nothing for a list that fits on one page.
fn pager<T>(view: &GoalView<'_>, list: &str, page: &Paged<T>) -> Markup {
    html! {
        @if page.pages > 1 {
            nav.pager aria-label={ (list) " pages" } {
                "Page " (page.page) " of " (page.pages) " (" (page.total) " " (list) ")"
                @if page.page > 1 {
                    " · " a rel="prev" href=(list_href(view, list, page.page - 1)) { "Previous" }
                }
                @if page.page < page.pages {
                    " · " a rel="next" href=(list_href(view, list, page.page + 1)) { "Next" }
                }
            }
        }
    }
}

/// The latest commits up to the revision shown, newest first: when, who, which command (and
/// its events), and the receipt. A commit before the earliest revision kept has no link.
fn timeline(view: &GoalView<'_>) -> Markup {
    let goal = &view.state.spec.id;
    html! {
        @if view.commits.is_empty() {
            p.empty { "No commits recorded." }
        } @else {
            table.timeline {
                thead { tr { th { "Revision" } th { "When" } th { "Actor" } th { "Command" } th { "Receipt" } } }
                tbody {
                    @for record in view.commits {
                        (commit_row(goal, record, view.earliest))
                    }
                }
            }
            @if let Some(before) = earlier_page(view) {
                p.meta {
                    "Only " (PAGE) " commits are listed. "
                    a rel="next" href=(list_href(view, "commits", before)) { "Earlier commits" }
                    @if view.commits_to < view.state.revision {
                        " · " a rel="first" href={ (list_href(view, "commits", view.state.revision)) } { "Latest commits" }
                    }
                }
            } @else if view.commits_to < view.state.revision {
                p.meta {
                    a rel="first" href={ (list_href(view, "commits", view.state.revision)) } { "Latest commits" }
                }
            }
        }
    }
}

fn commit_row(goal: &GoalId, record: &OperationRecord, earliest: u64) -> Markup {
    let receipt = &record.receipt;
    let short: String = receipt.digest.chars().take(12).collect();
    html! {
        tr data-revision=(receipt.revision) {
            td {
                @if receipt.revision >= earliest {
                    a href={ (goal_href(goal)) "?revision=" (receipt.revision) } { "r" (receipt.revision) }
                } @else {
                    "r" (receipt.revision) " " span.meta { "(compacted)" }
                }
            }
            td { (time(receipt.committed_at)) }
            td.actor { @if let Some(actor) = &record.actor { (actor) } @else { "—" } }
            td.command {
                @if let Some(name) = record.command_name() { code { (name) } " " }
                @if record.events.is_empty() {
                    div.detail { "recorded, nothing changed" }
                } @else {
                    div.detail { (event_runs(&record.events)) }
                }
            }
            td.receipt {
                code.operation { (receipt.operation) } " "
                div.detail {
                    "digest " code title=(receipt.digest) { (short) "…" }
                    " · revision " (receipt.revision) " · " (receipt.events)
                    @if receipt.events == 1 { " event" } @else { " events" }
                }
            }
        }
    }
}

/// A commit's events by name, a run of one name counted (`todo_added ×3`), so a commit of many
/// events takes one line.
fn event_runs(events: &[String]) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for event in events {
        match runs.last_mut() {
            Some((name, count)) if *name == event.as_str() => *count += 1,
            _ => runs.push((event, 1)),
        }
    }
    let words: Vec<String> = runs
        .into_iter()
        .take(PAGE)
        .map(|(name, count)| match count {
            1 => name.to_owned(),
            _ => format!("{name} ×{count}"),
        })
        .collect();
    words.join(", ")
}

/// The revision up to which the next page lists the commits before the ones listed, when the
/// timeline was cut at [`PAGE`] and that revision is kept.
fn earlier_page(view: &GoalView<'_>) -> Option<u64> {
    if view.commits.len() < PAGE {
        return None;
    }
    let oldest = view.commits.last()?;
    // A recorded no-op keeps its revision, so the commit to that revision may not be listed.
    let before = if oldest.receipt.events > 0 {
        oldest.receipt.revision.checked_sub(1)?
    } else {
        oldest.receipt.revision
    };
    (before >= view.earliest && before < view.commits_to).then_some(before)
}
