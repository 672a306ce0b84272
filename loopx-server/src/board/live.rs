//! Live updates: `GET /events`, server-sent events from the store's change notification. Each
//! `changed` event's data is the ids of the goals that moved (or appeared), one per line;
//! `/board.js` reloads the part of the page that shows one of them.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration as StdDuration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use loopx_kernel::{Duration, GoalId};

use super::Board;

/// How long one wait on the store lasts before the listing is read again (a goal created
/// meanwhile is seen then; a commit to a known goal wakes the wait at once).
const WAIT: StdDuration = StdDuration::from_secs(5);
/// How long the stream backs off after the store failed.
const BACKOFF: StdDuration = StdDuration::from_secs(2);

/// The revision each goal stood at when last looked at.
type Seen = BTreeMap<GoalId, u64>;

/// `GET /events`: a `changed` event whenever goals move, kept alive with comments.
pub(super) async fn events(
    State(board): State<Board>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let start = listing(&board).await.unwrap_or_default();
    let stream = futures::stream::unfold((board, start), |(board, seen)| async move {
        let (moved, seen) = next_change(&board, seen).await;
        let event = Event::default().event("changed").data(moved.join("\n"));
        Some((Ok(event), (board, seen)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Every goal's revision now, or `None` when the store failed.
async fn listing(board: &Board) -> Option<Seen> {
    let now = board.clock.now();
    match board.store.goals(now).await {
        Ok(goals) => Some(goals.into_iter().map(|g| (g.goal, g.revision)).collect()),
        Err(error) => {
            tracing::warn!(error = %error, "board events: the store failed");
            None
        }
    }
}

/// Waits until some goal stands past the revision `seen` has for it, or a goal appears or
/// goes; answers their ids and the listing as it now stands.
async fn next_change(board: &Board, mut seen: Seen) -> (Vec<String>, Seen) {
    loop {
        let watch: Vec<(GoalId, u64)> = seen.iter().map(|(g, r)| (g.clone(), *r)).collect();
        let waited = board.store.changed(&watch, Duration::from_std(WAIT)).await;
        if waited.is_err() {
            tokio::time::sleep(BACKOFF).await;
        }
        let Some(now) = listing(board).await else {
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        let moved: Vec<String> = now
            .iter()
            .filter(|(goal, revision)| seen.get(*goal) != Some(*revision))
            .map(|(goal, _)| goal.to_string())
            .chain(
                seen.keys()
                    .filter(|g| !now.contains_key(*g))
                    .map(ToString::to_string),
            )
            .collect();
        seen = now;
        if !moved.is_empty() {
            return (moved, seen);
        }
    }
}
