//! What the durable backends compute before they write a commit: its receipt, its index rows,
//! the encoded events and, when one is due, the snapshot — all from the state the kernel's
//! [`Commit::fold`] folded, which is not folded again here.

use std::sync::Arc;

use loopx_kernel::GoalState;
use loopx_kernel::seams::{AppendRequest, Commit, Receipt, StoreError};

use crate::cache::{Known, StateCache};
use crate::fold::{encode, encode_event, receipt};
use crate::index::Projection;

/// A commit ready to write.
pub(crate) struct Prepared {
    /// The request.
    pub request: AppendRequest,
    /// The goal's state after the commit.
    pub state: GoalState,
    /// The receipt the commit returns.
    pub receipt: Receipt,
    /// This append's attempt id, recorded with the receipt: an ambiguous commit is proved this
    /// append's by reading it back (see `Store::resolve`).
    pub attempt: String,
    /// The goal's index rows after the commit, computed at the commit time (their window holds
    /// it).
    pub projection: Projection,
    /// The events as stored JSON (without the revision and time the rows hold), in order.
    pub events: Vec<String>,
    /// What this handle's cache knows of the goal at the expected revision.
    pub known: Option<Known>,
    /// The snapshot to write, when one is due (see [`Prepared::plan_snapshot`]).
    pub snapshot: Option<String>,
    /// The revision of the goal's latest snapshot before the commit, as the writer read it.
    pub last_snapshot: u64,
    /// The chain head after the commit, once the writer computed it from the goal row's.
    pub chain: Option<[u8; 32]>,
    /// The commit's authorship as stored JSON (schema 7), kept with its receipt.
    pub authorship: Option<String>,
}

/// Indexes and encodes `commit`, before the writer knows whether a snapshot is due: see
/// [`Prepared::plan_snapshot`].
pub(crate) fn prepare(commit: Commit, cache: &StateCache) -> Result<Prepared, StoreError> {
    let (request, state) = commit.into_parts();
    let known = cache.known(&request.goal, request.expected_revision, &state);
    let projection = Projection::compute(&state, request.at);
    let events = request
        .events
        .iter()
        .map(encode_event)
        .collect::<Result<_, _>>()?;
    let authorship = request
        .authorship
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| StoreError::InvalidBatch {
            detail: format!("the commit's authorship does not encode: {error}"),
        })?;
    Ok(Prepared {
        authorship,
        receipt: receipt(&request, &state),
        attempt: new_attempt(),
        request,
        state,
        projection,
        events,
        known,
        snapshot: None,
        last_snapshot: 0,
        chain: None,
    })
}

/// A new attempt id: 32 hexadecimal digits of a version 7 UUID, whose 74 random bits tell the
/// appends of one operation apart, in any process on any machine.
fn new_attempt() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

impl Prepared {
    /// Whether the registered agents may differ from the goal's before the commit (they do, or
    /// this handle does not know the goal's previous state).
    pub(crate) fn agents_changed(&self) -> bool {
        self.known.as_ref().is_none_or(|known| !known.same_agents)
    }

    /// Whether the subjects the goal follows may differ from those before the commit (they do,
    /// or this handle does not know the goal's previous state).
    pub(crate) fn subjects_changed(&self) -> bool {
        self.known.as_ref().is_none_or(|known| !known.same_subjects)
    }

    /// The index rows the goal was committed with at the expected revision, when this handle
    /// wrote them.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn known_rows(&self) -> Option<&Arc<Projection>> {
        self.known.as_ref().and_then(|known| known.rows.as_ref())
    }

    /// Encodes the snapshot when one is due: the batch is not empty and at least
    /// `snapshot_every` events were committed since `last_snapshot` (the revision of the goal's
    /// latest snapshot as the writer reads it, 0 when it has none).
    pub(crate) fn plan_snapshot(
        &mut self,
        last_snapshot: u64,
        snapshot_every: u64,
    ) -> Result<(), StoreError> {
        let due = self.receipt.events > 0
            && self.state.revision.saturating_sub(last_snapshot) >= snapshot_every;
        self.last_snapshot = last_snapshot;
        self.snapshot = if due {
            Some(encode(&self.state.snapshot())?)
        } else {
            None
        };
        Ok(())
    }

    /// The revision of the goal's latest snapshot once the commit is written.
    pub(crate) fn snapshot_revision(&self) -> u64 {
        if self.snapshot.is_some() {
            self.state.revision
        } else {
            self.last_snapshot
        }
    }
}
