//! Building kernel observations: valid ids from external text, digests and fingerprints.
//!
//! Every provider turns its typed facts into an [`Observation`] through [`FactBuilder`], so the
//! fingerprint is always computed the same way: a SHA-256 over the key, the subject, the revision
//! and the facts (a sorted map), never over the summary or the observation time. Two
//! observations of the same fact therefore carry the same fingerprint, and the kernel drops the
//! second as unchanged. The facts come from a schema of [`loopx_kernel::facts`]
//! ([`FactBuilder::facts`]), the one definition capabilities read them back with.

use std::collections::BTreeMap;

use loopx_kernel::facts::FactSchema;
use loopx_kernel::{
    Fingerprint, InvalidId, Observation, ObservationKey, Revision, SourceOrder, Subject, Timestamp,
};
use sha2::{Digest as _, Sha256};

pub use loopx_kernel::ids::{hex, sha256_hex};

pub use loopx_kernel::ids::{bounded_id, id_component};

/// Accumulates the meaningful fields of one fact and builds the kernel [`Observation`].
#[derive(Debug, Clone)]
pub struct FactBuilder {
    key: String,
    subject: String,
    revision: String,
    summary: String,
    facts: BTreeMap<String, String>,
    order: Option<SourceOrder>,
}

/// The longest fact value kept, in bytes; longer values are cut at a character boundary.
pub const MAX_FACT_LEN: usize = 4096;

/// Outside text, normalised and cut to `limit` bytes (see [`outside_text`]).
fn cut(text: &str, limit: usize) -> String {
    let text = outside_text(text);
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Text from outside (a comment typed in a browser, a tool's output) as the kernel records
/// it: line endings become `\n` (`\r\n` and a lone `\r` alike), and every other control
/// character but the tab is neutralised into a visible stand-in — a C0 character into its
/// Unicode control picture (ESC into `␛`, so a terminal escape prints as text and does
/// nothing), DEL into `␡`, a C1 character and every character that reorders or hides the
/// text around it ([`loopx_kernel::text::reorders_or_hides`]: bidirectional overrides,
/// isolates and marks, zero-width spaces) into `�`. Nothing is dropped: the words stay
/// readable, and an observation is never refused for what its text holds.
pub fn outside_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push('\n');
            }
            '\n' | '\t' => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'));
            }
            '\u{7f}' => out.push('\u{2421}'),
            '\u{80}'..='\u{9f}' => out.push('\u{fffd}'),
            c if loopx_kernel::text::reorders_or_hides(c) => out.push('\u{fffd}'),
            _ => out.push(c),
        }
    }
    out
}

impl FactBuilder {
    /// A fact on stream `key` about `subject` at `revision`. The texts are bounded with
    /// [`bounded_id`]; the caller encodes external components with [`id_component`].
    pub fn new(key: &str, subject: &str, revision: &str) -> Self {
        FactBuilder {
            key: bounded_id(key),
            subject: bounded_id(subject),
            revision: bounded_id(revision),
            summary: String::new(),
            facts: BTreeMap::new(),
            order: None,
        }
    }

    /// Sets the fact's place in its source's own order (not part of the fingerprint: the same
    /// fact stamped later is unchanged); the kernel records no observation older than its
    /// stream's.
    #[must_use]
    pub fn order(mut self, order: Option<SourceOrder>) -> Self {
        self.order = order;
        self
    }

    /// Sets the human summary (not part of the fingerprint), cut to [`MAX_FACT_LEN`] bytes.
    #[must_use]
    pub fn summary(mut self, summary: impl AsRef<str>) -> Self {
        self.summary = cut(summary.as_ref(), MAX_FACT_LEN);
        self
    }

    /// Adds a fact (part of the fingerprint); the value is cut to [`MAX_FACT_LEN`] bytes.
    #[must_use]
    #[allow(clippy::needless_pass_by_value)] // taking numbers and texts alike by value reads best
    pub fn fact(mut self, name: &str, value: impl ToString) -> Self {
        self.facts
            .insert(name.to_owned(), cut(&value.to_string(), MAX_FACT_LEN));
        self
    }

    /// Adds every fact of a typed observation value (see [`loopx_kernel::facts`]), each cut to
    /// [`MAX_FACT_LEN`] bytes: the same names and texts the schema's reader reads back.
    #[must_use]
    pub fn facts<S: FactSchema>(mut self, value: &S) -> Self {
        for (name, value) in value.to_facts() {
            self.facts.insert(name, cut(&value, MAX_FACT_LEN));
        }
        self
    }

    /// Drops the fact `name`, if added.
    #[must_use]
    pub fn without(mut self, name: &str) -> Self {
        self.facts.remove(name);
        self
    }

    /// Adds a fact when `value` is present.
    #[must_use]
    #[allow(clippy::needless_pass_by_value)]
    pub fn fact_opt(self, name: &str, value: Option<impl ToString>) -> Self {
        match value {
            Some(value) => self.fact(name, value),
            None => self,
        }
    }

    /// The fingerprint: `sha256:` and the digest of key, subject, revision and facts, each
    /// length-prefixed so no two different field lists digest alike.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        let mut feed = |text: &str| {
            hasher.update((text.len() as u64).to_be_bytes());
            hasher.update(text.as_bytes());
        };
        feed(&self.key);
        feed(&self.subject);
        feed(&self.revision);
        for (name, value) in &self.facts {
            feed(name);
            feed(value);
        }
        format!("sha256:{}", hex(&hasher.finalize()))
    }

    /// Builds the observation, observed at `observed_at`.
    ///
    /// # Errors
    /// [`InvalidId`] when the key, subject or revision holds characters outside the kernel's id
    /// alphabet (components not passed through [`id_component`]).
    pub fn build(self, observed_at: Timestamp) -> Result<Observation, InvalidId> {
        let fingerprint = Fingerprint::new(self.fingerprint())?;
        Ok(Observation {
            key: ObservationKey::new(self.key)?,
            subject: Subject::new(self.subject)?,
            revision: Revision::new(self.revision)?,
            fingerprint,
            observed_at,
            summary: self.summary,
            facts: self.facts,
            order: self.order,
            etag: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_kernel::MAX_ID_LEN;

    #[test]
    fn outside_text_keeps_every_word_and_neutralises_controls() {
        assert_eq!(
            outside_text("ask:\r\nwhy?\rnow\tok\n\u{1b}[31mred\u{7f}\u{9b}\u{202e}txt"),
            "ask:\nwhy?\nnow\tok\n\u{241b}[31mred\u{2421}\u{fffd}\u{fffd}txt"
        );
        // What the kernel records it as: no control character but the newline and the tab.
        let built = FactBuilder::new("github-comment:1", "repo:acme/cli", "c1")
            .fact("body", "line one\r\nline two\u{1b}]8;;x\u{7}")
            .summary("a\r\nb")
            .build(Timestamp::from_millis(0))
            .unwrap();
        assert_eq!(
            built.facts["body"],
            "line one\nline two\u{241b}]8;;x\u{2407}"
        );
        assert_eq!(built.summary, "a\nb");
    }

    #[test]
    fn long_ids_are_cut_with_a_digest() {
        let long = "x".repeat(300);
        let other = format!("{}y", "x".repeat(299));
        assert_eq!(bounded_id(&long).len(), MAX_ID_LEN);
        assert_ne!(bounded_id(&long), bounded_id(&other));
        assert_eq!(bounded_id("short"), "short");
    }

    #[test]
    fn fingerprint_ignores_summary_and_time_but_not_facts() {
        let a = FactBuilder::new("k", "s", "r")
            .fact("state", "open")
            .summary("one");
        let b = FactBuilder::new("k", "s", "r")
            .fact("state", "open")
            .summary("two");
        let c = FactBuilder::new("k", "s", "r").fact("state", "closed");
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        let one = a.build(Timestamp::from_millis(1)).map(|o| o.fingerprint);
        let two = b.build(Timestamp::from_millis(2)).map(|o| o.fingerprint);
        assert_eq!(one, two);
    }
}
