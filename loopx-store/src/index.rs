//! The per-goal index rows both backends keep: the goal's standing, the agents registered with
//! it, each agent's frontier and the subjects it follows, computed with the kernel's own
//! functions.
//!
//! Standing and frontier depend on time. The kernel's [`next_wake`] is the earliest instant
//! after `t` at which time alone can change any decision on the goal, and its [`last_change`]
//! the latest such instant at or before `t`, so rows computed from a state at `t` are exact for
//! every `now` in `[last_change, next_wake)`. Each row set carries that window (`valid_from`,
//! `valid_until`); a query at `now` reads the rows of every goal whose window covers `now` and
//! recomputes (and rewrites) only the goals whose window does not. The window's start is the
//! last change rather than `t` so that it stays put from commit to commit (it moves only when a
//! lease expires, a deferral comes due and the like): a commit leaves its index entry alone.

use std::collections::{BTreeMap, BTreeSet};

use loopx_kernel::seams::{GoalStatus, GoalSummary};
use loopx_kernel::{
    AgentId, GoalId, GoalState, Priority, Subject, TerminalOutcome, Timestamp, TodoId, frontier,
    last_change, next_wake, terminal,
};

/// The start of a window that reaches back indefinitely: no instant at or before the rows'
/// computation changed anything by time alone.
const SINCE_EVER: Timestamp = Timestamp::from_millis(i64::MIN);

/// A goal's index rows, valid for `valid_from <= now < summary.next_wake`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Projection {
    /// Standing, revision, objective and the end of the window (`next_wake`).
    pub summary: GoalSummary,
    /// Start of the window: the last instant at or before the computation at which time alone
    /// changed anything ([`last_change`]), or the earliest representable instant.
    pub valid_from: Timestamp,
    /// The agents registered with the goal.
    pub agents: BTreeSet<AgentId>,
    /// Each registered agent's frontier, as (priority, todo) in the kernel's order (priority
    /// 0 is the most urgent); agents with an empty frontier are absent.
    pub frontier: BTreeMap<AgentId, Vec<(u8, TodoId)>>,
    /// The subjects the goal follows ([`GoalState::watched_subjects`]): they change with its
    /// history only, never with time.
    pub subjects: BTreeSet<Subject>,
}

impl Projection {
    /// The rows for `state` as they stand at `at`.
    pub fn compute(state: &GoalState, at: Timestamp) -> Projection {
        let agents = state.spec.agents.clone();
        let mut rows = BTreeMap::new();
        for agent in &agents {
            let todos: Vec<(u8, TodoId)> = frontier(state, agent, at)
                .into_iter()
                .map(|todo| {
                    let priority = state
                        .todos
                        .get(&todo)
                        .map_or(u8::MAX, |t| priority_rank(t.priority));
                    (priority, todo)
                })
                .collect();
            if !todos.is_empty() {
                rows.insert(agent.clone(), todos);
            }
        }
        Projection {
            summary: GoalSummary {
                goal: state.spec.id.clone(),
                objective: state.spec.objective.clone(),
                status: status(state, at),
                revision: state.revision,
                next_wake: next_wake(state, at),
            },
            valid_from: last_change(state, at).unwrap_or(SINCE_EVER),
            agents,
            frontier: rows,
            subjects: subjects(state),
        }
    }
}

/// The subjects `state` follows, as the index keeps them.
pub(crate) fn subjects(state: &GoalState) -> BTreeSet<Subject> {
    state.watched_subjects().into_iter().cloned().collect()
}

/// True when rows whose window is `[valid_from, valid_until)` are exact at `now`.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn covers(
    valid_from: Timestamp,
    valid_until: Option<Timestamp>,
    now: Timestamp,
) -> bool {
    valid_from <= now && valid_until.is_none_or(|until| now < until)
}

/// The goal's standing at `now`, from the kernel's `terminal`.
pub(crate) fn status(state: &GoalState, now: Timestamp) -> GoalStatus {
    match terminal(state, now) {
        None => GoalStatus::Active,
        Some(TerminalOutcome::Accepted) => GoalStatus::Accepted,
        Some(TerminalOutcome::Abandoned) => GoalStatus::Abandoned,
    }
}

/// A priority as a small integer, 0 the most urgent.
pub(crate) fn priority_rank(priority: Priority) -> u8 {
    match priority {
        Priority::P0 => 0,
        Priority::P1 => 1,
        Priority::P2 => 2,
        Priority::P3 => 3,
        Priority::P4 => 4,
    }
}

/// The stable name of a standing, as stored.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn status_name(status: GoalStatus) -> &'static str {
    match status {
        GoalStatus::Active => "active",
        GoalStatus::Accepted => "accepted",
        GoalStatus::Abandoned => "abandoned",
    }
}

/// A stored standing name.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn parse_status(name: &str) -> Option<GoalStatus> {
    match name {
        "active" => Some(GoalStatus::Active),
        "accepted" => Some(GoalStatus::Accepted),
        "abandoned" => Some(GoalStatus::Abandoned),
        _ => None,
    }
}

/// The cross-goal frontier from per-goal frontiers: most urgent first, then by goal, then in
/// each goal's own frontier order.
pub(crate) fn merge_frontiers<'a>(
    per_goal: impl IntoIterator<Item = (&'a GoalId, &'a [(u8, TodoId)])>,
) -> Vec<(GoalId, TodoId)> {
    let mut rows: Vec<(u8, &GoalId, usize, &TodoId)> = Vec::new();
    for (goal, todos) in per_goal {
        rows.extend(
            todos
                .iter()
                .enumerate()
                .map(|(rank, (priority, todo))| (*priority, goal, rank, todo)),
        );
    }
    rows.sort();
    rows.into_iter()
        .map(|(_, goal, _, todo)| (goal.clone(), todo.clone()))
        .collect()
}
