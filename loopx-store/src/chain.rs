//! The chained digest of a goal's history: one SHA-256 value that commits to every recorded
//! event up to a revision, in order. An export ends with it (so an import refuses a file cut
//! short or changed), and a signature over a command can cover the head it was issued on (see
//! the crate README).
//!
//! ```text
//! head(0) = SHA-256("loopx.chain.v1\n" || goal id)
//! head(r) = SHA-256(head(r - 1) || "\n" || canonical JSON of the recorded event at revision r)
//! ```
//!
//! `head(r - 1)` enters as its 32 bytes. The SQL backends also store a chain with every event
//! row, its goal row and its snapshots (see the crate README): the same step
//! over the row's stored bytes, `revision "\n" time "\n" stored JSON`, so that a row changed
//! below SQL (a byte flipped on disk) no longer links to its neighbours.
//! The canonical JSON of a recorded event is its wire
//! form (schema, revision, time, actor, event) with object keys sorted at every depth and no
//! whitespace, so the head does not depend on how a file or a database happened to lay the
//! JSON out.

use loopx_kernel::write::canonical_json;
use loopx_kernel::{GoalId, RecordedEvent};
use sha2::{Digest as _, Sha256};

/// The running chained digest of one goal's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryChain {
    head: [u8; 32],
    revision: u64,
    events: u64,
}

impl HistoryChain {
    /// The chain of `goal` before its first event (`head(0)`).
    pub fn new(goal: &GoalId) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"loopx.chain.v1\n");
        hasher.update(goal.as_str().as_bytes());
        HistoryChain {
            head: hasher.finalize().into(),
            revision: 0,
            events: 0,
        }
    }

    /// Folds in the next event. Returns the revision the chain expected instead when `event`
    /// is not at the revision right after the last one (a gap or a repeat), leaving the chain
    /// as it was.
    ///
    /// # Errors
    /// The revision expected, when `event` does not follow the chain's last revision.
    pub fn push(&mut self, event: &RecordedEvent) -> Result<(), u64> {
        let expected = self.revision + 1;
        if event.revision != expected {
            return Err(expected);
        }
        self.head = step(&self.head, canonical_json(event).as_bytes());
        self.revision = event.revision;
        self.events += 1;
        Ok(())
    }

    /// The head as 64 lowercase hexadecimal digits.
    pub fn head(&self) -> String {
        loopx_kernel::ids::hex(&self.head)
    }

    /// The revision of the last event folded in (0: none).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// How many events were folded in.
    pub fn events(&self) -> u64 {
        self.events
    }
}

/// One step of a chain: `SHA-256(head || "\n" || bytes)`.
fn step(head: &[u8; 32], bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(head);
    hasher.update(b"\n");
    hasher.update(bytes);
    hasher.finalize().into()
}

/// The head of `goal`'s stored chain before its first row (`head(0)`, as [`HistoryChain::new`]).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn genesis(goal: &GoalId) -> [u8; 32] {
    HistoryChain::new(goal).head
}

/// The stored chain of an event row: [`step`] from `head` (the chain of the row before it, or
/// of the snapshot or genesis it follows) over `revision "\n" at "\n" json`, the row's stored
/// bytes. PostgreSQL's `loopx_append` computes the same in SQL.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn link_row(head: &[u8; 32], revision: u64, at: i64, json: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(head);
    hasher.update(b"\n");
    hasher.update(revision.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(at.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(json.as_bytes());
    hasher.finalize().into()
}

/// A stored chain as its 64 lowercase hexadecimal digits.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn to_hex(head: &[u8; 32]) -> String {
    loopx_kernel::ids::hex(head)
}

/// A stored chain read back from its hexadecimal digits; `None` when it is not one.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn from_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |b: u8| char::from(b).to_digit(16);
        let value = digit(pair[0])? * 16 + digit(pair[1])?;
        out[i] = u8::try_from(value).ok()?;
    }
    Some(out)
}
