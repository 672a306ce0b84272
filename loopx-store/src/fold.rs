//! What every backend shares around its rows: a commit's receipt, the stored JSON of events and
//! snapshots and how they decode, and folding stored history with the kernel (a history that
//! does not fold is reported as damage, never folded past).

use loopx_kernel::seams::{AppendRequest, Receipt, StoreError};
use loopx_kernel::{
    Actor, Event, GoalId, GoalState, RecordedEvent, ReplayError, SCHEMA_VERSION, Timestamp,
};

/// The receipt a commit of `request` returns, `state` being the goal's state after it.
pub(crate) fn receipt(request: &AppendRequest, state: &GoalState) -> Receipt {
    Receipt {
        goal: request.goal.clone(),
        operation: request.operation.clone(),
        digest: request.digest.clone(),
        revision: state.revision,
        events: request.events.len() as u64,
        committed_at: request.at,
    }
}

/// The answer to a commit of an operation that committed before: its first receipt when the
/// payload digest is the same, otherwise [`StoreError::OperationConflict`].
pub(crate) fn same_operation(
    first: Receipt,
    request: &AppendRequest,
) -> Result<Receipt, StoreError> {
    if first.digest == request.digest {
        Ok(first)
    } else {
        Err(StoreError::OperationConflict {
            operation: request.operation.clone(),
        })
    }
}

/// A stored history that does not fold, as a store error naming the goal.
pub(crate) fn unfoldable(goal: &GoalId, error: &ReplayError) -> StoreError {
    match error {
        ReplayError::NewerSchema { found, .. } => StoreError::NewerSchema {
            found: *found,
            supported: SCHEMA_VERSION,
        },
        _ => StoreError::Corrupt {
            detail: format!(
                "the stored history of goal `{goal}` does not fold ({error}); restore the store from a backup"
            ),
        },
    }
}

/// One stored event row: the revision and time the row's own columns hold, and the stored
/// JSON (see [`encode_event`]).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) struct EventRow {
    /// The revision the row is keyed by.
    pub revision: u64,
    /// The row's time column, milliseconds since the Unix epoch.
    pub at: i64,
    /// The stored JSON.
    pub json: String,
    /// The chain stored with the row (hexadecimal; see [`crate::chain::link_row`]).
    pub chain: Option<String>,
}

/// Checks `row` against the chain stored with it, `head` being the chain before it (of the row
/// before, the snapshot it follows, or the genesis); the row's chain. A row whose bytes changed
/// since it was written (below SQL, where no damage trigger sees it) no longer links:
/// [`StoreError::HistoryDamaged`] at its revision.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn verify_row(
    goal: &GoalId,
    head: &[u8; 32],
    row: &EventRow,
) -> Result<[u8; 32], StoreError> {
    let linked = crate::chain::link_row(head, row.revision, row.at, &row.json);
    if row.chain.as_deref().and_then(crate::chain::from_hex) == Some(linked) {
        Ok(linked)
    } else {
        Err(StoreError::HistoryDamaged {
            goal: goal.clone(),
            revision: row.revision,
            detail: "its event row does not match the chain stored with the history (it was changed outside loopx)".into(),
        })
    }
}

/// Checks the chain a read of `goal`'s history reached at its goal row's revision against the
/// head the goal row stores.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn verify_head(
    goal: &GoalId,
    revision: u64,
    stored: Option<[u8; 32]>,
    head: &[u8; 32],
) -> Result<(), StoreError> {
    if stored.as_ref() == Some(head) {
        Ok(())
    } else {
        Err(StoreError::HistoryDamaged {
            goal: goal.clone(),
            revision,
            detail: "its goal row's chain head does not match its history (a row was changed outside loopx)".into(),
        })
    }
}

/// Folds stored event rows onto `state` (the snapshot they follow, `None` to start from the
/// genesis), checking each against the chain from `head` (the chain at `state`'s revision) with
/// [`verify_row`] and decoding it with [`decode_event`]; the state and the chain reached.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn fold_stored(
    goal: &GoalId,
    mut state: Option<GoalState>,
    mut head: [u8; 32],
    rows: &[EventRow],
) -> Result<(Option<GoalState>, [u8; 32]), StoreError> {
    for row in rows {
        // A missing row is named as such, before the fold would refuse the next one.
        let next = state.as_ref().map_or(1, |s| s.revision + 1);
        if row.revision != next {
            return Err(StoreError::HistoryDamaged {
                goal: goal.clone(),
                revision: next,
                detail: "an event is missing from its history".into(),
            });
        }
        let event = decode_event(goal, row)?;
        state = Some(match state {
            None => GoalState::genesis(&event).map_err(|e| unfoldable(goal, &e))?,
            Some(mut s) => {
                s.apply(&event).map_err(|e| unfoldable(goal, &e))?;
                s
            }
        });
        // Checked last: a row that does not decode or fold is reported as such, one that does
        // but was changed since it was written as damage to the chain.
        head = verify_row(goal, &head, row)?;
    }
    Ok((state, head))
}

/// Whether a cached state at `cached` is worth folding the goal's later events onto, for a goal
/// at `current` whose events up to `base` were compacted and whose latest snapshot is at
/// `snapshot`: the events after `cached` must still be kept, and folding them must be no more
/// work than decoding the snapshot and its tail (it starts at or after the snapshot, or at most
/// `snapshot_every` events behind).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn tail_usable(
    cached: u64,
    current: u64,
    base: u64,
    snapshot: u64,
    snapshot_every: u64,
) -> bool {
    cached < current && cached >= base && (cached >= snapshot || current - cached <= snapshot_every)
}

/// Checks a state folded from stored rows against the revision the goal row records.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn check_loaded(
    goal: &GoalId,
    state: Option<GoalState>,
    recorded: u64,
) -> Result<GoalState, StoreError> {
    let Some(state) = state else {
        return Err(StoreError::Corrupt {
            detail: format!(
                "goal `{goal}` has a row but no events; restore the store from a backup"
            ),
        });
    };
    if state.revision < recorded && &state.spec.id == goal {
        return Err(StoreError::HistoryDamaged {
            goal: goal.clone(),
            revision: state.revision + 1,
            detail: format!(
                "it is recorded at revision {recorded} but its history ends at revision {}",
                state.revision
            ),
        });
    }
    if state.revision != recorded || &state.spec.id != goal {
        return Err(StoreError::Corrupt {
            detail: format!(
                "goal `{goal}` is recorded at revision {recorded} but its history folds to goal `{}` at revision {}; restore the store from a backup",
                state.spec.id, state.revision
            ),
        });
    }
    Ok(state)
}

/// The error for a compacted goal whose base snapshot is gone.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn missing_base(goal: &GoalId, base_revision: u64) -> StoreError {
    StoreError::Corrupt {
        detail: format!(
            "goal `{goal}` was compacted to revision {base_revision} but its base snapshot is missing; restore the store from a backup"
        ),
    }
}

/// The schema version a stored JSON document declares, read before decoding it, so that a
/// document written by a newer version is reported as such rather than as damage. Only the one
/// field is decoded; the rest is skipped without being built.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
fn declared_schema(json: &str) -> Result<Option<u64>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Declared {
        schema: Option<u64>,
    }
    serde_json::from_str::<Declared>(json).map(|d| d.schema)
}

/// An event as stored from store schema 2 on: the row's columns hold its revision and time,
/// so the JSON carries only the kernel's schema version, the actor and the fact. Rows written
/// by schema 1 also carry `revision` and `at`; both forms decode.
#[derive(serde::Serialize)]
struct StoredEventRef<'a> {
    schema: u32,
    actor: &'a Actor,
    event: &'a Event,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredEvent {
    schema: u32,
    #[serde(default)]
    revision: Option<u64>,
    #[serde(default)]
    at: Option<Timestamp>,
    actor: Actor,
    event: Event,
}

/// The stored JSON of an event: its schema version, actor and fact; the revision and time go
/// into the row's own columns.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode_event(event: &RecordedEvent) -> Result<String, StoreError> {
    encode(&StoredEventRef {
        schema: event.schema,
        actor: &event.actor,
        event: &event.event,
    })
}

/// Decodes one stored event row of `goal`. The JSON is parsed once; only when it does not
/// parse is its declared schema read, so that a row written by a newer version is reported as
/// [`StoreError::NewerSchema`] rather than as damage.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_event(goal: &GoalId, row: &EventRow) -> Result<RecordedEvent, StoreError> {
    let revision = row.revision;
    let damaged = |problem: String| StoreError::Corrupt {
        detail: format!(
            "event {revision} of goal `{goal}` cannot be read ({problem}); the row was changed \
             outside loopx: restore the store from a backup"
        ),
    };
    let stored: StoredEvent = match serde_json::from_str(&row.json) {
        Ok(stored) => stored,
        Err(error) => {
            newer(declared_schema(&row.json).map_err(|e| damaged(e.to_string()))?)?;
            return Err(damaged(error.to_string()));
        }
    };
    newer(Some(u64::from(stored.schema)))?;
    if let Some(written) = stored.revision
        && written != revision
    {
        return Err(damaged(format!(
            "it says revision {written} but is stored at revision {revision}"
        )));
    }
    Ok(RecordedEvent {
        schema: stored.schema,
        revision,
        at: stored.at.unwrap_or(Timestamp::from_millis(row.at)),
        actor: stored.actor,
        event: stored.event,
    })
}

/// Decodes one stored snapshot of `goal` at `revision`.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode_snapshot(
    goal: &GoalId,
    revision: u64,
    json: &str,
) -> Result<GoalState, StoreError> {
    let damaged = |problem: String| StoreError::Corrupt {
        detail: format!(
            "the snapshot of goal `{goal}` at revision {revision} cannot be read ({problem}); \
             the row was changed outside loopx: restore the store from a backup"
        ),
    };
    // Only the exact text the kernel writes is accepted: a changed row is damage, not a state.
    let snapshot = match loopx_kernel::Snapshot::decode(json) {
        Ok(snapshot) => snapshot,
        Err(error) => {
            newer(declared_schema(json).map_err(|e| damaged(e.to_string()))?)?;
            return Err(damaged(error.to_string()));
        }
    };
    let state = snapshot
        .into_state()
        .map_err(|error| unfoldable(goal, &error))?;
    if state.revision != revision || &state.spec.id != goal {
        return Err(damaged(format!(
            "it holds goal `{}` at revision {}",
            state.spec.id, state.revision
        )));
    }
    Ok(state)
}

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
fn newer(schema: Option<u64>) -> Result<(), StoreError> {
    match schema {
        Some(found) if found > u64::from(SCHEMA_VERSION) => Err(StoreError::NewerSchema {
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: SCHEMA_VERSION,
        }),
        _ => Ok(()),
    }
}

/// The stored JSON form of an event.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Corrupt {
        detail: format!("a value cannot be encoded as JSON ({error}); nothing was written"),
    })
}

/// The names of a batch's events, for the audit trail kept with receipts.
pub(crate) fn kinds(events: &[RecordedEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| Event::name(&e.event).to_owned())
        .collect()
}
