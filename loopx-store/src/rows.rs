//! Checking a store's derived rows against the fold of its history: every goal row, the agents
//! registered with each goal, each agent's frontier row and the snapshot bookkeeping are
//! computed from the history when a commit writes them (so are the subjects each goal follows), so a row that differs from what the
//! history gives was changed outside loopx. [`Retention::check_rows`](crate::Retention::check_rows)
//! and [`Retention::orphans`](crate::Retention::orphans) report each difference as a
//! [`RowDamage`]; `loopx doctor` runs both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use loopx_kernel::{GoalId, GoalState, Timestamp};
use serde::Serialize;

use crate::index::{Projection, covers, status_name};

/// One way a store's derived rows disagree with its history. Each names the goal and what the
/// rows hold against what the history gives (stored text, never an event's payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RowDamage {
    /// Rows of a goal that has no goal row (its row was deleted): the goal answers as damaged,
    /// never as unknown.
    Orphaned {
        /// The goal the rows belong to.
        goal: GoalId,
        /// The tables that hold them (`events`, `snapshots`, `receipts`, `goal_agents`,
        /// `frontier`, `goal_subjects`).
        tables: Vec<String>,
    },
    /// A column of the goal's row differs from what the goal's history gives.
    GoalRow {
        /// The goal.
        goal: GoalId,
        /// The column (`revision`, `objective`, `status`, `valid_from`, `valid_until`,
        /// `snapshot_revision`, `base_revision`).
        column: String,
        /// What the row holds.
        stored: String,
        /// What the history gives.
        expected: String,
    },
    /// The agents registered with the goal differ from its spec's.
    Agents {
        /// The goal.
        goal: GoalId,
        /// The agents the rows hold.
        stored: Vec<String>,
        /// The agents the history gives.
        expected: Vec<String>,
    },
    /// The subjects the goal is indexed as following differ from those its history gives
    /// (`GoalState::watched_subjects`): a fact about them would be routed wrongly.
    Subjects {
        /// The goal.
        goal: GoalId,
        /// The subjects the rows hold.
        stored: Vec<String>,
        /// The subjects the history gives.
        expected: Vec<String>,
    },
    /// An agent's frontier row differs from the frontier the history gives.
    Frontier {
        /// The goal.
        goal: GoalId,
        /// The agent.
        agent: String,
        /// The stored row (JSON), absent when there is none.
        stored: Option<String>,
        /// The row the history gives (JSON), absent when the frontier is empty.
        expected: Option<String>,
    },
}

impl RowDamage {
    /// The stable snake-case name of the kind of damage.
    pub fn code(&self) -> &'static str {
        match self {
            RowDamage::Orphaned { .. } => "orphaned_rows",
            RowDamage::GoalRow { .. } => "goal_row_mismatch",
            RowDamage::Agents { .. } => "agents_mismatch",
            RowDamage::Subjects { .. } => "subjects_mismatch",
            RowDamage::Frontier { .. } => "frontier_mismatch",
        }
    }

    /// The goal whose rows are damaged.
    pub fn goal(&self) -> &GoalId {
        match self {
            RowDamage::Orphaned { goal, .. }
            | RowDamage::GoalRow { goal, .. }
            | RowDamage::Agents { goal, .. }
            | RowDamage::Subjects { goal, .. }
            | RowDamage::Frontier { goal, .. } => goal,
        }
    }
}

impl fmt::Display for RowDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |value: &Option<String>| value.clone().unwrap_or_else(|| "no row".into());
        match self {
            RowDamage::Orphaned { goal, tables } => write!(
                f,
                "goal `{goal}` has no goal row but rows in {}",
                tables.join(", ")
            ),
            RowDamage::GoalRow {
                goal,
                column,
                stored,
                expected,
            } => write!(
                f,
                "the row of goal `{goal}` holds {column} `{stored}`; its history gives `{expected}`"
            ),
            RowDamage::Agents {
                goal,
                stored,
                expected,
            } => write!(
                f,
                "goal `{goal}` has agents [{}] registered; its history gives [{}]",
                stored.join(", "),
                expected.join(", ")
            ),
            RowDamage::Subjects {
                goal,
                stored,
                expected,
            } => write!(
                f,
                "goal `{goal}` is indexed as following [{}]; its history gives [{}]",
                stored.join(", "),
                expected.join(", ")
            ),
            RowDamage::Frontier {
                goal,
                agent,
                stored,
                expected,
            } => write!(
                f,
                "the frontier row of `{agent}` in goal `{goal}` holds {}; its history gives {}",
                shown(stored),
                shown(expected)
            ),
        }
    }
}

/// A goal's derived rows as stored, read without judging them.
#[derive(Debug, Clone)]
pub(crate) struct StoredRows {
    /// The goal row's revision.
    pub revision: u64,
    /// Its objective.
    pub objective: String,
    /// Its standing, by name, as stored.
    pub status: String,
    /// The start of the window its rows are exact for.
    pub valid_from: Timestamp,
    /// The end of that window.
    pub valid_until: Option<Timestamp>,
    /// The revision its history was compacted to (0: never).
    pub base_revision: u64,
    /// The revision of its latest snapshot, as the row records it.
    pub snapshot_revision: u64,
    /// The revisions of its stored snapshots.
    pub snapshots: BTreeSet<u64>,
    /// The agents registered with it.
    pub agents: BTreeSet<String>,
    /// Each agent's frontier row (JSON).
    pub frontier: BTreeMap<String, String>,
    /// The subjects it is indexed as following.
    pub subjects: BTreeSet<String>,
}

/// Every difference between `stored` and the rows `state` (the fold of the goal's history)
/// gives. Standing, window and frontier are computed at an instant inside the stored window
/// (`now` when the window covers it): rows are exact for every instant of their window, so a
/// stale window is compared where it held.
pub(crate) fn compare(
    stored: &StoredRows,
    state: &GoalState,
    now: Timestamp,
) -> Result<Vec<RowDamage>, loopx_kernel::seams::StoreError> {
    let goal = &state.spec.id;
    let at = if covers(stored.valid_from, stored.valid_until, now) {
        now
    } else if stored.valid_from > Timestamp::from_millis(i64::MIN) {
        stored.valid_from
    } else {
        stored
            .valid_until
            .map_or(now, |until| Timestamp::from_millis(until.as_millis() - 1))
    };
    let projection = Projection::compute(state, at);
    let mut found = Vec::new();
    let mut column = |name: &str, stored: String, expected: String| {
        if stored != expected {
            found.push(RowDamage::GoalRow {
                goal: goal.clone(),
                column: name.into(),
                stored,
                expected,
            });
        }
    };
    let millis =
        |t: Option<Timestamp>| t.map_or_else(|| "none".into(), |t| t.as_millis().to_string());
    column(
        "revision",
        stored.revision.to_string(),
        state.revision.to_string(),
    );
    column(
        "objective",
        stored.objective.clone(),
        state.spec.objective.clone(),
    );
    column(
        "status",
        stored.status.clone(),
        status_name(projection.summary.status).into(),
    );
    column(
        "valid_from",
        millis(Some(stored.valid_from)),
        millis(Some(projection.valid_from)),
    );
    column(
        "valid_until",
        millis(stored.valid_until),
        millis(projection.summary.next_wake),
    );
    let newest = stored.snapshots.last().copied().unwrap_or(0);
    column(
        "snapshot_revision",
        stored.snapshot_revision.to_string(),
        newest.to_string(),
    );
    if stored.base_revision > 0 && !stored.snapshots.contains(&stored.base_revision) {
        column(
            "base_revision",
            stored.base_revision.to_string(),
            "the revision of a stored base snapshot".into(),
        );
    }
    index_rows(stored, &projection, goal, &mut found)?;
    Ok(found)
}

/// The differences between the stored index rows (agents, subjects, frontier) of `goal` and
/// those of `projection`, appended to `found`.
fn index_rows(
    stored: &StoredRows,
    projection: &Projection,
    goal: &GoalId,
    found: &mut Vec<RowDamage>,
) -> Result<(), loopx_kernel::seams::StoreError> {
    let expected: BTreeSet<String> = projection
        .agents
        .iter()
        .map(|a| a.as_str().to_owned())
        .collect();
    if stored.agents != expected {
        found.push(RowDamage::Agents {
            goal: goal.clone(),
            stored: stored.agents.iter().cloned().collect(),
            expected: expected.into_iter().collect(),
        });
    }
    let expected: BTreeSet<String> = projection
        .subjects
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    if stored.subjects != expected {
        found.push(RowDamage::Subjects {
            goal: goal.clone(),
            stored: stored.subjects.iter().cloned().collect(),
            expected: expected.into_iter().collect(),
        });
    }
    let mut rows = BTreeMap::new();
    for (agent, todos) in &projection.frontier {
        rows.insert(agent.as_str().to_owned(), crate::fold::encode(todos)?);
    }
    let agents: BTreeSet<&String> = rows.keys().chain(stored.frontier.keys()).collect();
    for agent in agents {
        let (held, wanted) = (stored.frontier.get(agent), rows.get(agent));
        if held != wanted {
            found.push(RowDamage::Frontier {
                goal: goal.clone(),
                agent: agent.clone(),
                stored: held.cloned(),
                expected: wanted.cloned(),
            });
        }
    }
    Ok(())
}

/// The goals with rows in some table but no goal row, from `(goal, table)` pairs.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn orphaned(
    rows: Vec<(String, String)>,
) -> Result<Vec<RowDamage>, loopx_kernel::seams::StoreError> {
    let mut by_goal: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (goal, table) in rows {
        by_goal.entry(goal).or_default().insert(table);
    }
    by_goal
        .into_iter()
        .map(|(goal, tables)| {
            Ok(RowDamage::Orphaned {
                goal: crate::dialect::stored_id(goal, "goal id")?,
                tables: tables.into_iter().collect(),
            })
        })
        .collect()
}

/// The damage of a goal whose history is stored but whose row is not.
pub(crate) fn missing_row(goal: &GoalId) -> RowDamage {
    RowDamage::GoalRow {
        goal: goal.clone(),
        column: "goal".into(),
        stored: "no row".into(),
        expected: goal.as_str().to_owned(),
    }
}
