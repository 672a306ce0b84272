//! Observations and evidence, both bound to revisions.
//!
//! The current revision of a subject is the revision of its most recent observation (ordered by
//! observation time, then by record order); an observation older in its source's own order
//! ([`SourceOrder`]) than the one its stream recorded is not recorded at all. Evidence bound to any other revision is stale by
//! rule; so is evidence past its time-to-live and evidence derived from stale inputs. Evidence
//! about a subject nobody has observed is judged by its time-to-live and inputs alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::ids::{CheckId, EvidenceId, Fingerprint, ObservationKey, Revision, Subject, TurnId};
use crate::time::{Duration, Timestamp};

/// A provider's record of an external fact.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// The stream this fact belongs to.
    pub key: ObservationKey,
    /// What it is about.
    pub subject: Subject,
    /// Which version of the subject it saw.
    pub revision: Revision,
    /// A digest of the fact; unchanged means no-op.
    pub fingerprint: Fingerprint,
    /// When it was observed.
    pub observed_at: Timestamp,
    /// A short human summary.
    #[serde(default)]
    pub summary: String,
    /// Typed domain facts as name/value pairs, for capabilities to read.
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    /// Where the fact stands in its source's own order, when the source says (GitHub: the
    /// object's `updated_at`, a check run's `completed_at` or `started_at`). An observation of a
    /// stream older than the one recorded changes nothing, so a late delivery of an older
    /// state never moves a fact back. Absent: the source has no order, and the latest record
    /// stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<SourceOrder>,
    /// An opaque tag of the source's state when the fact was read (for HTTP sources, what their
    /// `ETag`s answered), not part of the fact: the engine hands the recorded one back in the
    /// next poll's [`ObserveRequest`](crate::seams::ObserveRequest), so an unchanged source can
    /// answer "not modified" even after a restart. Kept with the fact it was read with: an
    /// unchanged observation is not recorded, so its tag is not renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
}

/// An observation's place in its source's own order: the time the source stamped the object
/// with, then a step for the states it stamps with the same time. Compared by `at`, then
/// `step`; its JSON form is `{"at": "…", "step": 2}` (`step` left out when 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SourceOrder {
    /// The object's own time, as its source stamped it (not when it was received).
    pub at: Timestamp,
    /// Orders the states a source stamps with the same time (a check run queued, then in
    /// progress, then completed); 0 when the source has none.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub step: u32,
}

impl SourceOrder {
    /// The order of an object stamped at `at`, with no step.
    pub fn at(at: Timestamp) -> SourceOrder {
        SourceOrder { at, step: 0 }
    }

    /// True when an observation in this order comes before one in `recorded`: it then changes
    /// nothing. No order on either side means "not older".
    pub fn is_older(observed: Option<&SourceOrder>, recorded: Option<&SourceOrder>) -> bool {
        matches!((observed, recorded), (Some(observed), Some(recorded)) if observed < recorded)
    }
}

/// Passed or failed. On the wire `passed` or `failed`, the words a turn's verdict uses; the
/// earlier spellings `pass` and `fail` are still read.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// The check passed.
    #[serde(rename = "passed", alias = "pass")]
    Pass,
    /// The check failed.
    #[serde(rename = "failed", alias = "fail")]
    Fail,
}

/// Evidence as a command records it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewEvidence {
    /// Its id.
    pub id: EvidenceId,
    /// What it shows.
    pub check: CheckId,
    /// What it is about.
    pub subject: Subject,
    /// The revision it is bound to.
    pub revision: Revision,
    /// Pass or fail.
    pub outcome: Outcome,
    /// A short human summary (never raw logs).
    #[serde(default)]
    pub summary: String,
    /// When the fact was established.
    pub observed_at: Timestamp,
    /// Optional freshness limit.
    #[serde(default)]
    pub ttl: Option<Duration>,
    /// What it was derived from.
    #[serde(default)]
    pub inputs: Lineage,
}

/// The inputs a piece of evidence was derived from.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Lineage {
    /// Other evidence.
    pub evidence: Vec<EvidenceId>,
    /// Observations, with the fingerprint that was read.
    pub observations: Vec<ObservedInput>,
}

impl Lineage {
    /// True when nothing is cited.
    pub fn is_empty(&self) -> bool {
        self.evidence.is_empty() && self.observations.is_empty()
    }
}

/// An observation cited as an input, pinned to the fingerprint that was read.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservedInput {
    /// The stream.
    pub key: ObservationKey,
    /// The fingerprint read.
    pub fingerprint: Fingerprint,
}

/// Evidence as the goal holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Its id.
    pub id: EvidenceId,
    /// What it shows.
    pub check: CheckId,
    /// What it is about.
    pub subject: Subject,
    /// The revision it is bound to.
    pub revision: Revision,
    /// Pass or fail.
    pub outcome: Outcome,
    /// A short human summary.
    pub summary: String,
    /// Who established it.
    pub produced_by: Actor,
    /// The turn it was settled with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnId>,
    /// When the fact was established.
    pub observed_at: Timestamp,
    /// Optional freshness limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// What it was derived from.
    #[serde(default, skip_serializing_if = "Lineage::is_empty")]
    pub inputs: Lineage,
    /// Record order within the goal.
    pub seq: u64,
}

/// Whether a piece of evidence may still be relied on, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "freshness", rename_all = "snake_case")]
pub enum Freshness {
    /// Bound to the current revision, within its time-to-live, with fresh inputs.
    Fresh,
    /// A newer revision of the subject has been observed.
    Superseded {
        /// The subject's current revision.
        current: Revision,
    },
    /// Established on a working tree with uncommitted or untracked files (a revision
    /// `git:<sha>+dirty`) whose commit is the subject's current revision: no clean observation
    /// ever matches it, so it must be checked again on a clean tree.
    DirtyTree {
        /// The revision it was established at.
        established: Revision,
        /// The subject's current revision.
        current: Revision,
    },
    /// Past its time-to-live.
    Expired {
        /// When it expired.
        at: Timestamp,
    },
    /// An input evidence is stale.
    InputStale {
        /// The stale input.
        input: EvidenceId,
    },
    /// A cited observation stream has changed since it was read.
    ObservationChanged {
        /// The stream.
        key: ObservationKey,
    },
}

impl Freshness {
    /// True for [`Freshness::Fresh`].
    pub fn is_fresh(&self) -> bool {
        matches!(self, Freshness::Fresh)
    }
}

/// The current revision of a subject and the fact that set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectHead {
    /// The current revision.
    pub revision: Revision,
    /// When that fact was observed.
    pub observed_at: Timestamp,
}
