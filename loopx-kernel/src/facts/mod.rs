//! Observation vocabularies: one typed definition of every fact that crosses from a provider to
//! a capability.
//!
//! On the wire and in stores an [`Observation`]'s facts stay a map of names to texts. Each kind
//! of observation a provider records and a capability reads has one schema here, in a
//! submodule per source ([`github`], [`git`], [`process`], [`metrics`], [`research`]): a plain
//! struct that the provider fills and turns into the map ([`FactSchema::to_facts`]), and its
//! read-back twin, generated from the same declaration, whose fields have the same Rust names
//! and are each a [`Fact`] ([`FactSchema::read`], [`Observation::read_facts`]). Both sides use
//! one definition: a fact's name on the wire is its field's name (or a name given once beside
//! it), also available as an associated constant of the same name (`PullRequest::head_sha` is
//! `"head_sha"`), so renaming a field on one side fails to compile on the other.
//!
//! ```
//! use loopx_kernel::facts::github::{PullRequest, PullState};
//! use loopx_kernel::facts::{Fact, FactSchema};
//!
//! // The provider's side: a typed value becomes the observation's facts.
//! let pull = PullRequest {
//!     status: PullState::Open,
//!     draft: false,
//!     head_sha: "ec26c3e5".into(),
//!     head_ref: "fix".into(),
//!     base_ref: "main".into(),
//!     title: "Fix the parser".into(),
//!     author: "octocat".into(),
//!     mergeable_state: Some("clean".into()),
//!     commits: None,
//! };
//! let facts = pull.to_facts();
//! assert_eq!(facts[PullRequest::head_sha], "ec26c3e5");
//! // The capability's side: the same fields, each a `Fact`.
//! let read = PullRequest::read(&facts);
//! assert_eq!(read.status, Fact::Known(PullState::Open));
//! assert_eq!(read.head_sha.known().map(String::as_str), Some("ec26c3e5"));
//! assert_eq!(read.commits, Fact::Missing);
//! ```
//!
//! A reader that names a field the schema does not declare does not compile:
//!
//! ```compile_fail
//! use loopx_kernel::facts::github::PullRequestRead;
//! // The reader names a field the schema does not declare.
//! fn head(pull: &PullRequestRead) -> Option<&String> {
//!     pull.head_commit.known()
//! }
//! ```
//!
//! Key prefixes and key builders belong to the schema too ([`FactSchema::PREFIX`],
//! `PullRequest::key`), so a prefix such as `pr:` is written once.
//!
//! Facts are outside input. Reading never fails and never panics: an absent fact is
//! [`Fact::Missing`], one that decodes is [`Fact::Known`], one that does not is
//! [`Fact::Missing`] when blank and [`Fact::Invalid`] (its text, cut to 64 characters)
//! otherwise. Numbers are read with surrounding whitespace trimmed; words (booleans,
//! enumerations) are read exactly as written; texts are kept as written, blank included. What
//! an unknown or invalid fact *means* is the capability's judgement, not the schema's.
//!
//! These are vocabulary, not rules: they are plain data with no I/O, shared here because
//! providers and capabilities both depend on the kernel and on nothing else. No kernel rule
//! (validation, `apply`, `decide`, the engine) reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evidence::Observation;
use crate::ids::AgentId;

/// The longest text kept in a [`Fact::Invalid`] or a verbatim fallback, in characters.
pub const MAX_ECHO_CHARS: usize = 64;

/// One fact as read back from an observation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "fact", content = "value", rename_all = "snake_case")]
pub enum Fact<T> {
    /// Not recorded, or recorded blank.
    #[default]
    Missing,
    /// Recorded but unreadable as the schema's type; the raw text, cut to
    /// [`MAX_ECHO_CHARS`] characters.
    Invalid(String),
    /// Read.
    Known(T),
}

impl<T: FactValue> Fact<T> {
    /// Reads a fact's text: `None` is [`Fact::Missing`]; text that decodes is [`Fact::Known`];
    /// text that does not is [`Fact::Missing`] when blank and [`Fact::Invalid`] otherwise.
    pub fn read(text: Option<&str>) -> Fact<T> {
        let Some(text) = text else {
            return Fact::Missing;
        };
        match T::decode(text) {
            Some(value) => Fact::Known(value),
            None if text.trim().is_empty() => Fact::Missing,
            None => Fact::Invalid(echo(text)),
        }
    }
}

impl<T> Fact<T> {
    /// The value, when known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(value) => Some(value),
            _ => None,
        }
    }

    /// The value, when known, by value.
    pub fn into_known(self) -> Option<T> {
        match self {
            Fact::Known(value) => Some(value),
            _ => None,
        }
    }

    /// True for [`Fact::Missing`].
    pub fn is_missing(&self) -> bool {
        matches!(self, Fact::Missing)
    }
}

/// `text` cut to [`MAX_ECHO_CHARS`] characters.
pub fn echo(text: &str) -> String {
    text.chars().take(MAX_ECHO_CHARS).collect()
}

/// A value one fact holds: how it is written and read back.
///
/// `decode(&encode(v))` gives `v` back for every value a writer produces (for texts: every
/// text that is not blank; for lists: every list whose items hold no comma and are not blank).
pub trait FactValue: Sized {
    /// The value as the fact's text.
    fn encode(&self) -> String;
    /// The value from a fact's text (never blank); `None` when it is not one.
    fn decode(text: &str) -> Option<Self>;
}

impl FactValue for String {
    fn encode(&self) -> String {
        self.clone()
    }
    fn decode(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

impl FactValue for bool {
    fn encode(&self) -> String {
        self.to_string()
    }
    fn decode(text: &str) -> Option<Self> {
        match text {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

macro_rules! number_fact {
    ($($ty:ty),+) => {$(
        impl FactValue for $ty {
            fn encode(&self) -> String {
                self.to_string()
            }
            fn decode(text: &str) -> Option<Self> {
                text.trim().parse().ok()
            }
        }
    )+};
}

number_fact!(u64, u32);

/// NaN and infinities are values (a diverged loss is a fact); see [`Finite`] for facts that
/// must be finite.
impl FactValue for f64 {
    fn encode(&self) -> String {
        self.to_string()
    }
    fn decode(text: &str) -> Option<Self> {
        text.trim().parse().ok()
    }
}

/// A finite number: NaN, infinities and numbers too large for `f64` do not decode.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Finite(f64);

impl Finite {
    /// `value` when it is finite.
    pub fn new(value: f64) -> Option<Finite> {
        value.is_finite().then_some(Finite(value))
    }

    /// The number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl FactValue for Finite {
    fn encode(&self) -> String {
        self.0.to_string()
    }
    fn decode(text: &str) -> Option<Self> {
        f64::decode(text).and_then(Finite::new)
    }
}

impl FactValue for AgentId {
    fn encode(&self) -> String {
        self.as_str().to_owned()
    }
    fn decode(text: &str) -> Option<Self> {
        AgentId::new(text).ok()
    }
}

/// A comma-separated list; items are trimmed and blank items skipped when read.
impl<T: FactValue> FactValue for Vec<T> {
    fn encode(&self) -> String {
        self.iter()
            .map(FactValue::encode)
            .collect::<Vec<_>>()
            .join(",")
    }
    fn decode(text: &str) -> Option<Self> {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(T::decode)
            .collect()
    }
}

/// Why a schema's strict reading ([`FactSchema::parse`]) refused an observation's facts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactError {
    /// A fact the schema requires is not recorded (or recorded blank where a value is needed).
    #[error("fact `{fact}` is missing")]
    Missing {
        /// The fact's name.
        fact: String,
    },
    /// A fact is recorded but is not a value of its type.
    #[error("fact `{fact}` has an unreadable value `{value}`")]
    Invalid {
        /// The fact's name.
        fact: String,
        /// Its text, cut to [`MAX_ECHO_CHARS`] characters.
        value: String,
    },
}

/// One kind of observation: its streams' key prefix and its facts, written from a typed value
/// and read back as a typed [`FactSchema::Read`].
pub trait FactSchema {
    /// The kind's name, e.g. `pull_request`.
    const KIND: &'static str;
    /// The prefix of its observation keys, e.g. `pr:`; empty when the caller chooses the key.
    const PREFIX: &'static str;
    /// The value as read back: the same fields, each a [`Fact`].
    type Read;
    /// The facts as the observation records them.
    fn to_facts(&self) -> BTreeMap<String, String>;
    /// Reads the facts back. Never fails: every field says whether it was known.
    fn read(facts: &BTreeMap<String, String>) -> Self::Read;
    /// Reads the facts back strictly: the value when every required fact is known and every
    /// recorded one is readable, so `parse(&v.to_facts())` gives `v` back.
    ///
    /// # Errors
    /// [`FactError`] naming the first fact (in declaration order) that is missing or unreadable.
    fn parse(facts: &BTreeMap<String, String>) -> Result<Self, FactError>
    where
        Self: Sized;
}

impl Observation {
    /// This observation's facts read as schema `S`; `None` when its key is not one of `S`'s
    /// streams (does not start with [`FactSchema::PREFIX`]).
    pub fn read_facts<S: FactSchema>(&self) -> Option<S::Read> {
        self.key
            .as_str()
            .starts_with(S::PREFIX)
            .then(|| S::read(&self.facts))
    }
}

/// Writers the schema macro calls, one per field mode.
pub(crate) mod write {
    use std::collections::BTreeMap;

    use super::FactValue;

    pub(crate) fn req<T: FactValue>(facts: &mut BTreeMap<String, String>, name: &str, value: &T) {
        facts.insert(name.to_owned(), value.encode());
    }

    #[allow(clippy::ref_option)] // the schema macro passes every field by reference
    pub(crate) fn opt<T: FactValue>(
        facts: &mut BTreeMap<String, String>,
        name: &str,
        value: &Option<T>,
    ) {
        if let Some(value) = value {
            req(facts, name, value);
        }
    }

    pub(crate) fn map<T: FactValue>(
        facts: &mut BTreeMap<String, String>,
        prefix: &str,
        values: &BTreeMap<String, T>,
    ) {
        for (name, value) in values {
            facts.insert(format!("{prefix}{name}"), value.encode());
        }
    }
}

/// Readers the schema macro calls, one per field mode.
pub(crate) mod read {
    use std::collections::BTreeMap;

    use super::{Fact, FactValue};

    pub(crate) fn req<T: FactValue>(facts: &BTreeMap<String, String>, name: &str) -> Fact<T> {
        Fact::read(facts.get(name).map(String::as_str))
    }

    pub(crate) fn opt<T: FactValue>(facts: &BTreeMap<String, String>, name: &str) -> Fact<T> {
        req(facts, name)
    }

    pub(crate) fn map<T: FactValue>(
        facts: &BTreeMap<String, String>,
        prefix: &str,
    ) -> BTreeMap<String, Fact<T>> {
        facts
            .range(prefix.to_owned()..)
            .map_while(|(name, value)| Some((name.strip_prefix(prefix)?, value)))
            .map(|(name, value)| (name.to_owned(), Fact::read(Some(value))))
            .collect()
    }
}

/// Strict readers the schema macro calls, one per field mode.
pub(crate) mod strict {
    use std::collections::BTreeMap;

    use super::{Fact, FactError};

    pub(crate) fn req<T>(fact: Fact<T>, name: &str) -> Result<T, FactError> {
        match fact {
            Fact::Known(value) => Ok(value),
            Fact::Missing => Err(FactError::Missing {
                fact: name.to_owned(),
            }),
            Fact::Invalid(value) => Err(FactError::Invalid {
                fact: name.to_owned(),
                value,
            }),
        }
    }

    pub(crate) fn opt<T>(fact: Fact<T>, name: &str) -> Result<Option<T>, FactError> {
        match fact {
            Fact::Missing => Ok(None),
            fact => req(fact, name).map(Some),
        }
    }

    pub(crate) fn map<T>(
        facts: BTreeMap<String, Fact<T>>,
        prefix: &str,
    ) -> Result<BTreeMap<String, T>, FactError> {
        facts
            .into_iter()
            .map(|(name, fact)| Ok((name.clone(), req(fact, &format!("{prefix}{name}"))?)))
            .collect()
    }
}

/// An enumeration held by a fact: each variant with the word that spells it.
macro_rules! fact_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant, )+
        }

        impl $name {
            /// The word the fact spells this value with.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::facts::FactValue for $name {
            fn encode(&self) -> String {
                self.as_str().to_owned()
            }
            fn decode(text: &str) -> Option<Self> {
                match text {
                    $( $wire => Some($name::$variant), )+
                    _ => None,
                }
            }
        }
    };
}

/// A schema: the value a provider writes (`req` fields always, `opt` fields when present, `map`
/// fields as one fact per entry under a name prefix) and its read-back twin with the same field
/// names, each a [`Fact`]. A field's wire name is its Rust name unless given in brackets.
macro_rules! fact_schema {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, read as $read:ident, kind $kind:literal, prefix $prefix:literal {
            $( $(#[$fmeta:meta])* $mode:ident $field:ident $([$wire:literal])? : $ty:ty ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: fact_schema!(@value $mode $ty), )+
        }

        #[doc = concat!(
            "A [`", stringify!($name), "`] as read back from an observation's facts: the same ",
            "fields, each a [`Fact`](crate::facts::Fact)."
        )]
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $read {
            $( $(#[$fmeta])* pub $field: fact_schema!(@read $mode $ty), )+
        }

        #[allow(non_upper_case_globals)]
        impl $name {
            /// The prefix of these observations' keys.
            pub const PREFIX: &'static str = $prefix;
            $(
                #[doc = concat!(
                    "The fact name of [`", stringify!($name), "::", stringify!($field), "`]."
                )]
                pub const $field: &'static str = fact_schema!(@wire $field $($wire)?);
            )+
        }

        impl $crate::facts::FactSchema for $name {
            const KIND: &'static str = $kind;
            const PREFIX: &'static str = $prefix;
            type Read = $read;

            fn to_facts(&self) -> std::collections::BTreeMap<String, String> {
                let mut facts = std::collections::BTreeMap::new();
                $( $crate::facts::write::$mode(&mut facts, Self::$field, &self.$field); )+
                facts
            }

            fn read(facts: &std::collections::BTreeMap<String, String>) -> $read {
                $read {
                    $( $field: $crate::facts::read::$mode(facts, Self::$field), )+
                }
            }

            fn parse(
                facts: &std::collections::BTreeMap<String, String>,
            ) -> Result<Self, $crate::facts::FactError> {
                let read = <Self as $crate::facts::FactSchema>::read(facts);
                Ok($name {
                    $( $field: $crate::facts::strict::$mode(read.$field, Self::$field)?, )+
                })
            }
        }
    };
    (@value req $ty:ty) => { $ty };
    (@value opt $ty:ty) => { Option<$ty> };
    (@value map $ty:ty) => { std::collections::BTreeMap<String, $ty> };
    (@read map $ty:ty) => { std::collections::BTreeMap<String, $crate::facts::Fact<$ty>> };
    (@read $mode:ident $ty:ty) => { $crate::facts::Fact<$ty> };
    (@wire $field:ident) => { stringify!($field) };
    (@wire $field:ident $wire:literal) => { $wire };
}

pub mod git;
pub mod github;
pub mod metrics;
pub mod process;
pub mod research;

fact_enum! {
    /// Which part of the data a result was measured on.
    pub enum Split {
        /// The development split, the one the work was tuned on.
        Dev = "dev",
        /// Data held out from tuning.
        Holdout = "holdout",
    }
}
