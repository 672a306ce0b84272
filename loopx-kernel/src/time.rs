//! Time as data. The kernel never reads a clock: every command and every decision receives
//! `now` as a [`Timestamp`] argument, which keeps replay and `decide` deterministic.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant with millisecond precision.
///
/// Serialized as an RFC 3339 string (`2026-11-29T10:02:00.000Z`) so stored events and JSON
/// output stay readable; ordering is the ordering of instants.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// An instant given in milliseconds since the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Parses an RFC 3339 string with an explicit offset; a string without one is refused,
    /// because a wake time that means different instants on different hosts is a bug.
    ///
    /// # Errors
    /// [`TimestampError`] when the text is not RFC 3339.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| Timestamp(t.with_timezone(&Utc).timestamp_millis()))
            .map_err(|_| TimestampError(text.chars().take(64).collect()))
    }

    /// This instant moved forward by `span`, saturating at the representable range.
    #[must_use]
    pub fn plus(self, span: Duration) -> Self {
        Timestamp(self.0.saturating_add(span.as_millis()))
    }

    /// This instant moved back by `span`, saturating at the representable range.
    #[must_use]
    pub fn minus(self, span: Duration) -> Self {
        Timestamp(self.0.saturating_sub(span.as_millis()))
    }

    /// The span from `earlier` to `self`; zero when `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis((self.0 - earlier.0).max(0))
    }

    fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_millis(self.0)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_datetime() {
            Some(t) => f.write_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true)),
            None => write!(f, "{}ms", self.0),
        }
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    /// An RFC 3339 string (see [`Timestamp::parse`]), parsed straight from the input's text.
    /// It is parsed after the string has been read, so a malformed one is reported exactly as
    /// before (without a position in the input).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TimestampVisitor;

        impl Visitor<'_> for TimestampVisitor {
            type Value = Result<Timestamp, TimestampError>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Timestamp::parse(text))
            }

            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
                match std::str::from_utf8(bytes) {
                    Ok(text) => self.visit_str(text),
                    Err(_) => Err(E::invalid_value(Unexpected::Bytes(bytes), &self)),
                }
            }
        }

        deserializer
            .deserialize_str(TimestampVisitor)?
            .map_err(de::Error::custom)
    }
}

/// A text that is not an RFC 3339 timestamp with an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an RFC 3339 timestamp with a time zone (e.g. 2026-11-29T10:00:00Z)")]
pub struct TimestampError(String);

/// A non-negative span of time with millisecond precision, serialized as integer milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Duration(i64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);

    /// A span of `millis` milliseconds; negative input is clamped to zero.
    pub const fn from_millis(millis: i64) -> Self {
        Duration(if millis < 0 { 0 } else { millis })
    }

    /// A span of whole seconds.
    pub const fn seconds(seconds: i64) -> Self {
        Duration::from_millis(seconds.saturating_mul(1000))
    }

    /// A span of whole minutes.
    pub const fn minutes(minutes: i64) -> Self {
        Duration::seconds(minutes.saturating_mul(60))
    }

    /// A span of whole hours.
    pub const fn hours(hours: i64) -> Self {
        Duration::minutes(hours.saturating_mul(60))
    }

    /// The span in milliseconds.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The same span as the standard library's type, for adapters that hand it to a timer
    /// or a driver.
    pub const fn to_std(self) -> std::time::Duration {
        // Never negative: every constructor clamps at zero.
        std::time::Duration::from_millis(self.0.unsigned_abs())
    }

    /// A standard library span, in whole milliseconds (rounded down, saturating at the
    /// largest span this type holds).
    pub fn from_std(span: std::time::Duration) -> Self {
        Duration::from_millis(i64::try_from(span.as_millis()).unwrap_or(i64::MAX))
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0 / 1000;
        match secs {
            s if s % 3600 == 0 && s > 0 => write!(f, "{}h", s / 3600),
            s if s % 60 == 0 && s > 0 => write!(f, "{}m", s / 60),
            s if self.0 % 1000 == 0 => write!(f, "{s}s"),
            _ => write!(f, "{}ms", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_rfc3339() {
        let t = Timestamp::parse("2026-11-29T10:02:00+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-29T09:02:00.000Z");
        assert_eq!(Timestamp::parse(&t.to_string()).unwrap(), t);
    }

    #[test]
    fn a_timestamp_without_zone_is_refused() {
        assert!(Timestamp::parse("2026-11-29T10:02:00").is_err());
    }

    #[test]
    fn spans_saturate_and_clamp() {
        assert_eq!(Duration::from_millis(-5), Duration::ZERO);
        assert_eq!(
            Timestamp::from_millis(i64::MAX)
                .plus(Duration::hours(1))
                .as_millis(),
            i64::MAX
        );
        assert_eq!(
            Timestamp::from_millis(5).since(Timestamp::from_millis(9)),
            Duration::ZERO
        );
    }
}
