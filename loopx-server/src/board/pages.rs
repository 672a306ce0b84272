//! The goals page and a goal's page.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use loopx_kernel::words::{freshness_words, headline};
use loopx_kernel::{
    AgentId, CriterionStatus, Decision, Freshness, GoalId, GoalState, RecordedEvent, Revision,
    Timestamp, TodoId, frontier,
};
use maud::{Markup, html};
use serde::Deserialize;

use super::render::{self, Nav, badge, maybe_time, time};
use super::{Board, Failure, Listed, all_goals, events_to, goal_href, state_at};
use crate::views::{self, STANDINGS};

/// How many of a goal's latest events its timeline lists.
const TIMELINE: usize = 200;

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

/// A goal page's query: the revision to show, the head when absent.
#[derive(Debug, Default, Deserialize)]
pub(super) struct GoalQuery {
    revision: Option<String>,
}

/// `GET /goals/{goal}`: one goal, now or at `?revision=N`.
pub(super) async fn goal(
    State(board): State<Board>,
    Path(goal): Path<String>,
    Query(query): Query<GoalQuery>,
) -> Result<Response, Failure> {
    let unknown = || {
        Failure::new(
            StatusCode::NOT_FOUND,
            "No such goal",
            "no goal by that id in this store; the goals page lists them",
        )
    };
    let goal = GoalId::new(goal).map_err(|_| unknown())?;
    let head = board
        .store
        .load(&goal)
        .await
        .map_err(|e| Failure::store(&e))?
        .ok_or_else(unknown)?;
    let at = match query.revision.as_deref().filter(|r| !r.is_empty()) {
        None => None,
        Some(text) => Some(parse_revision(text, head.revision)?),
    };
    let events = events_to(&*board.store, &goal, at.unwrap_or(head.revision)).await?;
    let (state, now) = match at {
        // A past revision is judged at its own commit time, as `loopx status --at-revision` does.
        Some(revision) => {
            let state = state_at(&goal, &events, revision)?;
            let now = state.last_commit();
            (state, now)
        }
        None => (head.clone(), board.clock.now()),
    };
    Ok(render::html(goal_page(
        &state,
        head.revision,
        &events,
        at.is_some(),
        now,
    )))
}

/// `text` is a revision from 1 to `head`.
fn parse_revision(text: &str, head: u64) -> Result<u64, Failure> {
    match text.parse::<u64>() {
        Ok(revision) if (1..=head).contains(&revision) => Ok(revision),
        _ => Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "No such revision",
            format!("?revision= takes a revision from 1 to {head}, the goal's head"),
        )),
    }
}

/// A goal's page: `state` judged at `now`, `past` when it is not the head.
fn goal_page(
    state: &GoalState,
    head: u64,
    events: &[RecordedEvent],
    past: bool,
    now: Timestamp,
) -> Markup {
    let decisions = views::decisions(state, now);
    let standing = views::standing(state, &decisions, now);
    let id = &state.spec.id;
    let body = html! {
        h1 { (id) " " (badge(standing)) }
        p.objective { (state.spec.objective) }
        @if past {
            p.notice.past {
                "As it stood at revision " (state.revision) " (" (time(now)) "); the goal is now at revision " (head) ". "
                a href=(goal_href(id)) { "Show the head" }
            }
        } @else {
            p.meta { "Revision " (state.revision) " · owner person:" (state.spec.owner) " · at " (time(now)) }
        }
        section { h2 { "Decisions" } (decision_list(&decisions)) }
        section { h2 { "Budget" } (render::budget(&state.ledger)) }
        section { h2 { "Criteria" } (criteria(state, now)) }
        section { h2 { "Todos" } (todos(state, now)) }
        section { h2 { "Gates" } (gates(state, now)) }
        section { h2 { "Obligations" } (obligations(state)) }
        section { h2 { "Timeline" } (timeline(id, events)) }
    };
    let live = (!past).then(|| id.as_str());
    render::layout(id.as_str(), Nav::Goals, live, &body)
}

fn criteria(state: &GoalState, now: Timestamp) -> Markup {
    let status = state.criteria_status(now);
    html! {
        table.criteria {
            thead { tr { th { "Criterion" } th { "Status" } th { "Evidence" } th { "Shown at" } th { "Why" } } }
            tbody {
                @for criterion in &state.spec.criteria {
                    @let found = status.iter().find(|(c, _)| c == &criterion.id).map(|(_, s)| s);
                    tr data-criterion=(criterion.id) {
                        td { strong { (criterion.id) } div { (criterion.text) } }
                        @match found {
                            Some(status) => (criterion_cells(state, status)),
                            None => td colspan="4" { "—" },
                        }
                    }
                }
            }
        }
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
                CriterionStatus::Stale { evidence, freshness } => {
                    @if let Some(current) = superseded(freshness) {
                        span.stale { "stale: superseded by " code { (current) } }
                    } @else {
                        span.stale { "stale: " (freshness_words(freshness)) }
                    }
                    @if let Some(e) = state.evidence.get(evidence) {
                        div.detail { (views::stale_words(e, freshness)) }
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

fn todos(state: &GoalState, now: Timestamp) -> Markup {
    let frontiers: Vec<(&AgentId, Vec<TodoId>)> = state
        .spec
        .agents
        .iter()
        .map(|agent| (agent, frontier(state, agent, now)))
        .collect();
    html! {
        @if state.todos.is_empty() {
            p.empty { "No todos yet." }
        } @else {
            table.todos {
                thead { tr { th { "Todo" } th { "Status" } th { "Depends on" } th { "Lease" } th { "Ready for" } } }
                tbody {
                    @for todo in state.todos.values() {
                        @let ready: Vec<&AgentId> = frontiers.iter().filter(|(_, f)| f.contains(&todo.id)).map(|(a, _)| *a).collect();
                        tr id={ "todo-" (todo.id) } class=[(!ready.is_empty()).then_some("frontier")] {
                            td { code { (todo.id) } div { (todo.title) } }
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
        }
    }
}

fn gates(state: &GoalState, now: Timestamp) -> Markup {
    html! {
        @if state.gates.is_empty() {
            p.empty { "No gates." }
        } @else {
            table.gates {
                thead { tr { th { "Gate" } th { "State" } th { "Owner" } th { "Deadline" } th { "Blocks" } } }
                tbody {
                    @for gate in state.gates.values() {
                        tr data-gate=(gate.id) {
                            td { code { (gate.id) } div { (gate.question) } }
                            td { (badge(views::gate_state_word(gate.state_at(now)))) }
                            td { (gate.owner) }
                            td { (maybe_time(gate.deadline)) }
                            td { (views::scope_text(&gate.scope)) }
                        }
                    }
                }
            }
        }
    }
}

fn obligations(state: &GoalState) -> Markup {
    html! {
        @if state.obligations.is_empty() {
            p.empty { "No obligations." }
        } @else {
            table.obligations {
                thead { tr { th { "Obligation" } th { "Owner" } th { "Raised" } th { "Discharged" } } }
                tbody {
                    @for o in state.obligations.values() {
                        tr {
                            td { code { (o.id) } div { (o.detail) } }
                            td { @if let Some(owner) = &o.owner { "agent:" (owner) } @else { "anyone" } }
                            td { "by " (o.raised_by) " at " (time(o.raised_at)) }
                            td { @if let Some(d) = &o.discharged { "by " (d.by) " at " (time(d.at)) } @else { "open" } }
                        }
                    }
                }
            }
        }
    }
}

fn timeline(goal: &GoalId, events: &[RecordedEvent]) -> Markup {
    let skipped = events.len().saturating_sub(TIMELINE);
    html! {
        @if skipped > 0 { p.meta { (skipped) " earlier events not listed." } }
        ol.timeline reversed {
            @for event in events.iter().skip(skipped).rev() {
                li {
                    a href={ (goal_href(goal)) "?revision=" (event.revision) } { "r" (event.revision) }
                    " " (time(event.at)) " " span.actor { (event.actor) } " " code { (event.event.name()) }
                }
            }
        }
    }
}
