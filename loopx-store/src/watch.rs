//! What every backend's `Store::changed` shares: which watched goals moved, and the deadline.

use std::time::Duration as StdDuration;

use loopx_kernel::seams::StoreError;
use loopx_kernel::{Duration, GoalId};
use tokio::time::Instant;

/// The watched goals that stand past the revision given for them, in the order of `watch`,
/// each once. `revision_of` answers 0 for a goal that does not exist.
pub(crate) fn past(watch: &[(GoalId, u64)], revision_of: impl Fn(&GoalId) -> u64) -> Vec<GoalId> {
    let mut out: Vec<GoalId> = Vec::new();
    for (goal, seen) in watch {
        if revision_of(goal) > *seen && !out.contains(goal) {
            out.push(goal.clone());
        }
    }
    out
}

/// A kernel duration as a standard one.
pub(crate) fn std_duration(span: Duration) -> StdDuration {
    StdDuration::from_millis(u64::try_from(span.as_millis()).unwrap_or(0))
}

/// When a wait of `timeout` started now ends. Waiting needs a tokio runtime with its timer
/// enabled; outside any runtime this is an error rather than a panic.
pub(crate) fn deadline(timeout: Duration) -> Result<Instant, StoreError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(StoreError::Unavailable {
            detail: "`changed` waits on tokio's timer: call it inside a tokio runtime with time enabled (e.g. `Builder::enable_all`)".into(),
        });
    }
    let now = Instant::now();
    Ok(now
        .checked_add(std_duration(timeout))
        .unwrap_or_else(|| now + StdDuration::from_secs(86_400 * 365)))
}
