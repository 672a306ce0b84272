//! What the durable backends compute before they write a commit: the folded batch, its index
//! rows, the encoded events and, when one is due, the snapshot.

use loopx_kernel::GoalState;
use loopx_kernel::seams::{AppendRequest, StoreError};

use crate::fold::{Folded, encode, fold_batch};
use crate::index::Projection;

/// A commit ready to write.
pub(crate) struct Prepared {
    /// The batch folded into the goal's state, with its receipt.
    pub folded: Folded,
    /// The goal's index rows after the commit, computed at the commit time.
    pub projection: Projection,
    /// The events as stored JSON, in order.
    pub events: Vec<String>,
    /// The snapshot to write, when one is due.
    pub snapshot: Option<String>,
    /// Whether the registered agents differ from before the batch.
    pub agents_changed: bool,
}

/// Folds, indexes and encodes a commit of `request` onto `state` (the goal at the request's
/// expected revision). A snapshot is due when the batch is not empty and at least
/// `snapshot_every` events were committed since `last_snapshot` (the revision of the goal's
/// latest snapshot, 0 when it has none).
pub(crate) fn prepare(
    state: Option<&GoalState>,
    last_snapshot: u64,
    snapshot_every: u64,
    request: &AppendRequest,
) -> Result<Prepared, StoreError> {
    let folded = fold_batch(state, request)?;
    let agents_changed = state.is_none_or(|before| before.spec.agents != folded.state.spec.agents);
    let projection = Projection::compute(&folded.state, folded.receipt.committed_at);
    let events = request
        .events
        .iter()
        .map(encode)
        .collect::<Result<_, _>>()?;
    let due = !request.events.is_empty()
        && folded.state.revision.saturating_sub(last_snapshot) >= snapshot_every;
    let snapshot = if due {
        Some(encode(&folded.state.snapshot())?)
    } else {
        None
    };
    Ok(Prepared {
        folded,
        projection,
        events,
        snapshot,
        agents_changed,
    })
}
