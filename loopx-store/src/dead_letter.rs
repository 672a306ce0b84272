//! Dead letters as every backend stores them: one JSON document per goal and operation.

use std::cmp::Ordering;

use loopx_kernel::seams::{DeadLetter, StoreError};

/// The order letters are listed in: the first refused first, then by goal and operation.
pub(crate) fn order(a: &DeadLetter, b: &DeadLetter) -> Ordering {
    (a.first_refused, &a.goal, &a.operation).cmp(&(b.first_refused, &b.goal, &b.operation))
}

/// A stored letter, decoded; one that does not decode is damage.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn decode(stored: &str) -> Result<DeadLetter, StoreError> {
    serde_json::from_str(stored).map_err(|error| StoreError::Corrupt {
        detail: format!(
            "a stored dead letter does not decode ({error}); remove it with `loopx dead-letters drop` or restore the store from a backup"
        ),
    })
}
