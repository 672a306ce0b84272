//! A goal's state and its history as MCP resources: `loopx://goal/{id}` (the document of
//! `loopx goal show --json`) and `loopx://goal/{id}/log` (of `loopx log --json`). A goal id may
//! hold `/`: a URI ending in `/log` is always the history of the goal before it.

use loopx_kernel::seams::{Store, StoreError};
use loopx_kernel::{GoalId, Timestamp, words};
use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};

use crate::views;

/// The scheme and path every goal resource starts with.
pub const GOAL_PREFIX: &str = "loopx://goal/";

/// The suffix of a goal's history.
const LOG_SUFFIX: &str = "/log";

/// How many events a history resource holds at most (as `loopx log` by default).
pub const LOG_LIMIT: usize = 1000;

const JSON: &str = "application/json";

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalResource {
    /// A goal's state.
    State(GoalId),
    /// A goal's history.
    Log(GoalId),
}

impl GoalResource {
    /// The resource `uri` names, or `None` when it names none.
    pub fn parse(uri: &str) -> Option<GoalResource> {
        let rest = uri.strip_prefix(GOAL_PREFIX)?;
        match rest.strip_suffix(LOG_SUFFIX) {
            Some(goal) => GoalId::new(goal).ok().map(GoalResource::Log),
            None => GoalId::new(rest).ok().map(GoalResource::State),
        }
    }
}

fn store_error(error: &StoreError) -> ErrorData {
    let (code, hint) = words::store_error(error);
    ErrorData::internal_error(
        error.to_string(),
        Some(json!({ "code": code, "hint": hint })),
    )
}

fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("no resource `{uri}`: {why}"),
        Some(json!({ "uri": uri })),
    )
}

/// Both resources of every goal of the store.
pub async fn list(store: &dyn Store, now: Timestamp) -> Result<ListResourcesResult, ErrorData> {
    let goals = store.goals(now).await.map_err(|e| store_error(&e))?;
    let resources = goals
        .iter()
        .flat_map(|summary| {
            let state = format!("{GOAL_PREFIX}{}", summary.goal);
            let log = format!("{state}{LOG_SUFFIX}");
            [
                Resource::new(state, summary.goal.to_string())
                    .with_description(summary.objective.clone())
                    .with_mime_type(JSON),
                Resource::new(log, format!("{} log", summary.goal))
                    .with_description("its recorded events, with revisions")
                    .with_mime_type(JSON),
            ]
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

/// The two URI templates.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{GOAL_PREFIX}{{id}}"), "goal")
            .with_description("a goal's state: criteria, budget, policy, terminal")
            .with_mime_type(JSON),
        ResourceTemplate::new(format!("{GOAL_PREFIX}{{id}}{LOG_SUFFIX}"), "goal log")
            .with_description("a goal's recorded events, with revisions")
            .with_mime_type(JSON),
    ])
}

/// The document `uri` names, at `now`.
pub async fn read(
    store: &dyn Store,
    uri: &str,
    now: Timestamp,
) -> Result<ReadResourceResult, ErrorData> {
    let resource = GoalResource::parse(uri).ok_or_else(|| {
        not_found(
            uri,
            "goal resources are loopx://goal/{id} and loopx://goal/{id}/log",
        )
    })?;
    let goal = match &resource {
        GoalResource::State(goal) | GoalResource::Log(goal) => goal,
    };
    let state = store
        .load(goal)
        .await
        .map_err(|e| store_error(&e))?
        .ok_or_else(|| not_found(uri, "no such goal in this store"))?;
    let document: Value = match &resource {
        GoalResource::State(_) => json!({ "goal": views::goal(&state, now) }),
        GoalResource::Log(_) => {
            let events = store
                .events(goal, 0, LOG_LIMIT)
                .await
                .map_err(|e| store_error(&e))?;
            views::log(goal, &state, &events)
        }
    };
    let text = serde_json::to_string(&document).unwrap_or_default();
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(JSON),
    ]))
}
