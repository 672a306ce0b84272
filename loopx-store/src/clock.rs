//! Which clock a store bounds commit times by.

use loopx_kernel::Timestamp;
use loopx_kernel::seams::{AppendRequest, StoreError};

/// The clock a store bounds the time of each commit by, chosen when the store is created and
/// recorded with it (in the store's own metadata for the durable backends), so that every later
/// open sees it.
///
/// Under [`StoreClock::System`] a commit whose time is later than the store's clock plus the
/// goal's `clock_skew` is refused with
/// [`StoreError::ClockAhead`](loopx_kernel::seams::StoreError::ClockAhead) (the write path's
/// refusal `clock_ahead`) and writes nothing: no caller can expire another agent's lease by
/// claiming a later time. Under [`StoreClock::Test`] the store follows the times it is given,
/// which is what tests and scripts that move time need; `loopx status` and `loopx doctor` say
/// when a store runs on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreClock {
    /// The store's own clock: the system clock of the process for memory and SQLite, the
    /// server's `now()` inside the append transaction for PostgreSQL.
    #[default]
    System,
    /// A test clock: commit times are not bounded forward. Only for tests and scripts.
    Test,
}

impl StoreClock {
    /// `system` or `test`, as recorded and reported.
    pub fn name(self) -> &'static str {
        match self {
            StoreClock::System => "system",
            StoreClock::Test => "test",
        }
    }

    /// Refuses `request` when its time is beyond the system clock plus its skew (only under
    /// [`StoreClock::System`]).
    pub(crate) fn check(self, request: &AppendRequest) -> Result<(), StoreError> {
        match self {
            StoreClock::System => request.check_clock(system_now()),
            StoreClock::Test => Ok(()),
        }
    }
}

/// The system clock, in the kernel's time.
pub(crate) fn system_now() -> Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |span| {
            i64::try_from(span.as_millis()).unwrap_or(i64::MAX)
        });
    Timestamp::from_millis(millis)
}
