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
//! `head(r - 1)` enters as its 32 bytes. The canonical JSON of a recorded event is its wire
//! form (schema, revision, time, actor, event) with object keys sorted at every depth and no
//! whitespace, so the head does not depend on how a file or a database happened to lay the
//! JSON out.

use loopx_kernel::{GoalId, RecordedEvent};
use serde_json::Value;
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
        let mut hasher = Sha256::new();
        hasher.update(self.head);
        hasher.update(b"\n");
        hasher.update(canonical(event).as_bytes());
        self.head = hasher.finalize().into();
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

/// The canonical JSON of `value`: keys sorted at every depth, no whitespace.
fn canonical<T: serde::Serialize>(value: &T) -> String {
    let mut out = String::new();
    match serde_json::to_value(value) {
        Ok(value) => write_canonical(&value, &mut out),
        // A recorded event always encodes; the text of the failure still chains deterministically.
        Err(error) => out.push_str(&Value::String(format!("unencodable: {error}")).to_string()),
    }
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
