//! What the durable backends compute before they write a commit: the folded batch, its index
//! rows, the encoded events and, when one is due, the snapshot.

use loopx_kernel::GoalState;
use loopx_kernel::seams::{AppendRequest, StoreError};

use crate::fold::{Folded, encode, encode_event, fold_batch};
use crate::index::Projection;

/// A commit ready to write.
pub(crate) struct Prepared {
    /// The batch folded into the goal's state, with its receipt.
    pub folded: Folded,
    /// The goal's index rows after the commit, computed at the commit time (their window holds
    /// it).
    pub projection: Projection,
    /// The events as stored JSON (without the revision and time the rows hold), in order.
    pub events: Vec<String>,
    /// The snapshot to write, when one is due.
    pub snapshot: Option<String>,
    /// Whether the registered agents differ from before the batch.
    pub agents_changed: bool,
}

/// Folds, indexes and encodes a commit of `request` onto `state` (the goal at the request's
/// expected revision, taken over), before the writer knows whether a snapshot is due: see
/// [`Prepared::plan_snapshot`].
pub(crate) fn prepare(
    state: Option<GoalState>,
    request: &AppendRequest,
) -> Result<Prepared, StoreError> {
    let agents_before = state.as_ref().map(|before| before.spec.agents.clone());
    let folded = fold_batch(state, request)?;
    let agents_changed = agents_before.is_none_or(|before| before != folded.state.spec.agents);
    let projection = Projection::compute(&folded.state, folded.receipt.committed_at);
    let events = request
        .events
        .iter()
        .map(encode_event)
        .collect::<Result<_, _>>()?;
    Ok(Prepared {
        folded,
        projection,
        events,
        snapshot: None,
        agents_changed,
    })
}

impl Prepared {
    /// Encodes the snapshot when one is due: the batch is not empty and at least
    /// `snapshot_every` events were committed since `last_snapshot` (the revision of the goal's
    /// latest snapshot as the write transaction reads it, 0 when it has none).
    pub(crate) fn plan_snapshot(
        &mut self,
        last_snapshot: u64,
        snapshot_every: u64,
    ) -> Result<(), StoreError> {
        let state = &self.folded.state;
        let due = self.folded.receipt.events > 0
            && state.revision.saturating_sub(last_snapshot) >= snapshot_every;
        self.snapshot = if due {
            Some(encode(&state.snapshot())?)
        } else {
            None
        };
        Ok(())
    }
}
