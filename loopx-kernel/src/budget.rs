//! Multi-dimensional budgets with reserve-then-charge-once accounting.
//!
//! A turn *reserves* its expected usage before it runs and is *charged* its actual usage exactly
//! once, at settlement, bound to its turn id. Admission guarantees `spent + reserved ≤ limit` on
//! every limited dimension, so no admitted turn can be started into an overspend. A turn that
//! used more than it reserved is still charged all of it (the truth); the excess is recorded as
//! an *overrun*, so `spent + reserved ≤ limit + overrun` holds on every dimension at all times,
//! and the goal's owner is asked before the next turn begins.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::{TodoId, TurnId};

/// A quantity of each budget dimension.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Amounts {
    /// Bounded turns.
    pub turns: u64,
    /// Model tokens (input plus output).
    pub tokens: u64,
    /// Money, in millionths of the goal's currency unit (integer, so sums are exact).
    pub cost_micros: u64,
    /// Wall-clock time spent inside turns, in milliseconds.
    pub wall_ms: u64,
}

impl Amounts {
    /// Nothing at all.
    pub const ZERO: Amounts = Amounts {
        turns: 0,
        tokens: 0,
        cost_micros: 0,
        wall_ms: 0,
    };

    /// One turn and nothing else: the smallest reservation a turn can make.
    pub const ONE_TURN: Amounts = Amounts {
        turns: 1,
        tokens: 0,
        cost_micros: 0,
        wall_ms: 0,
    };

    /// The dimension-wise sum, saturating.
    #[must_use]
    pub fn plus(self, other: Amounts) -> Amounts {
        Amounts {
            turns: self.turns.saturating_add(other.turns),
            tokens: self.tokens.saturating_add(other.tokens),
            cost_micros: self.cost_micros.saturating_add(other.cost_micros),
            wall_ms: self.wall_ms.saturating_add(other.wall_ms),
        }
    }

    /// The dimension-wise difference, saturating at zero.
    #[must_use]
    pub fn minus(self, other: Amounts) -> Amounts {
        Amounts {
            turns: self.turns.saturating_sub(other.turns),
            tokens: self.tokens.saturating_sub(other.tokens),
            cost_micros: self.cost_micros.saturating_sub(other.cost_micros),
            wall_ms: self.wall_ms.saturating_sub(other.wall_ms),
        }
    }

    /// The dimension-wise maximum.
    #[must_use]
    pub fn max(self, other: Amounts) -> Amounts {
        Amounts {
            turns: self.turns.max(other.turns),
            tokens: self.tokens.max(other.tokens),
            cost_micros: self.cost_micros.max(other.cost_micros),
            wall_ms: self.wall_ms.max(other.wall_ms),
        }
    }

    /// What `self` (a usage) exceeds `reservation` by, dimension-wise: zero where it stayed
    /// within it.
    #[must_use]
    pub fn beyond(self, reservation: Amounts) -> Amounts {
        self.minus(reservation)
    }

    /// True when every dimension is zero.
    pub fn is_zero(self) -> bool {
        self == Amounts::ZERO
    }

    /// The amount on one dimension.
    pub fn get(self, dimension: Dimension) -> u64 {
        match dimension {
            Dimension::Turns => self.turns,
            Dimension::Tokens => self.tokens,
            Dimension::Cost => self.cost_micros,
            Dimension::WallClock => self.wall_ms,
        }
    }
}

impl fmt::Debug for Amounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{turns: {}, tokens: {}, cost_micros: {}, wall_ms: {}}}",
            self.turns, self.tokens, self.cost_micros, self.wall_ms
        )
    }
}

/// One dimension of a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Bounded turns.
    Turns,
    /// Model tokens.
    Tokens,
    /// Money (micro-units).
    Cost,
    /// Wall-clock milliseconds.
    WallClock,
}

impl Dimension {
    /// Every dimension, in a fixed order.
    pub const ALL: [Dimension; 4] = [
        Dimension::Turns,
        Dimension::Tokens,
        Dimension::Cost,
        Dimension::WallClock,
    ];
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dimension::Turns => "turns",
            Dimension::Tokens => "tokens",
            Dimension::Cost => "cost",
            Dimension::WallClock => "wall-clock",
        })
    }
}

/// Upper bounds per dimension; `None` means unlimited.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// At most this many turns.
    pub turns: Option<u64>,
    /// At most this many tokens.
    pub tokens: Option<u64>,
    /// At most this much money, in micro-units.
    pub cost_micros: Option<u64>,
    /// At most this much wall-clock time inside turns, in milliseconds.
    pub wall_ms: Option<u64>,
}

impl Limits {
    /// No limit on any dimension.
    pub const UNLIMITED: Limits = Limits {
        turns: None,
        tokens: None,
        cost_micros: None,
        wall_ms: None,
    };

    /// What a goal gets when its spec names no budget: at most 200 turns and 8 hours of
    /// wall-clock time inside turns, and no limit on tokens or cost. Unlimited must be asked
    /// for explicitly ([`Limits::UNLIMITED`], `"budget": "unlimited"` in a spec).
    pub const GOAL_DEFAULT: Limits = Limits {
        turns: Some(200),
        tokens: None,
        cost_micros: None,
        wall_ms: Some(8 * 60 * 60 * 1000),
    };

    /// True when no dimension is limited.
    pub fn is_unlimited(&self) -> bool {
        *self == Limits::UNLIMITED
    }

    /// At most `turns` turns, and no limit on the other dimensions.
    pub const fn turns(turns: u64) -> Limits {
        Limits {
            turns: Some(turns),
            ..Limits::UNLIMITED
        }
    }

    /// The limit on one dimension (`None`: unlimited).
    pub fn get(self, dimension: Dimension) -> Option<u64> {
        match dimension {
            Dimension::Turns => self.turns,
            Dimension::Tokens => self.tokens,
            Dimension::Cost => self.cost_micros,
            Dimension::WallClock => self.wall_ms,
        }
    }

    /// The first dimension these limits bound on which `amounts` is not zero: where an
    /// overrun of `amounts` matters to the budget.
    pub fn bounds_any(self, amounts: Amounts) -> Option<Dimension> {
        Dimension::ALL
            .into_iter()
            .find(|&d| self.get(d).is_some() && amounts.get(d) > 0)
    }

    /// The first dimension on which `new` lowers these limits below `committed` (spent plus
    /// reserved). Raising a limit, or keeping it, is never a lowering, even when what is
    /// committed already exceeds it after an overrun.
    pub fn lowered_below(self, new: Limits, committed: Amounts) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|&d| {
            let lowered = match (self.get(d), new.get(d)) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(old), Some(new)) => new < old,
            };
            lowered && new.get(d).is_some_and(|n| n < committed.get(d))
        })
    }
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<u64>| v.map_or_else(|| "∞".to_owned(), |v| v.to_string());
        write!(
            f,
            "{{turns: {}, tokens: {}, cost_micros: {}, wall_ms: {}}}",
            show(self.turns),
            show(self.tokens),
            show(self.cost_micros),
            show(self.wall_ms)
        )
    }
}

/// Decodes limits from their object form or from the word `"unlimited"` (every dimension
/// unlimited), so a spec can ask for no limit explicitly.
///
/// # Errors
/// The decoder's error for anything else.
pub(crate) fn limits_or_unlimited<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Limits, D::Error> {
    // A visitor rather than an untagged enum, so that a bad field in the object form is
    // refused by name instead of as "no variant matched".
    struct Form;

    impl<'de> serde::de::Visitor<'de> for Form {
        type Value = Limits;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("limits as an object, or \"unlimited\"")
        }

        fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Limits, E> {
            match word {
                "unlimited" => Ok(Limits::UNLIMITED),
                other => Err(E::unknown_variant(other, &["unlimited"])),
            }
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Limits, A::Error> {
            Limits::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }

    deserializer.deserialize_any(Form)
}

/// Limits, what was charged and what is reserved by turns in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// The bounds.
    pub limits: Limits,
    /// Charged by settled turns.
    pub spent: Amounts,
    /// Held by turns that have begun and not yet settled.
    pub reserved: Amounts,
    /// Of `spent`, what settled turns used beyond their reservations (charged all the same):
    /// the only way `spent + reserved` exceeds a limit. Left out of the JSON when zero.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub overrun: Amounts,
}

impl Ledger {
    /// A fresh ledger with these limits.
    pub fn new(limits: Limits) -> Self {
        Ledger {
            limits,
            ..Ledger::default()
        }
    }

    /// The first dimension on which admitting `request` would exceed the limit, if any.
    pub fn shortfall(&self, request: Amounts) -> Option<Dimension> {
        let committed = self.spent.plus(self.reserved).plus(request);
        Dimension::ALL.into_iter().find(|&d| {
            self.limits
                .get(d)
                .is_some_and(|limit| committed.get(d) > limit)
        })
    }

    /// The first dimension already at or beyond its limit, if any.
    pub fn exhausted(&self) -> Option<Dimension> {
        let committed = self.spent.plus(self.reserved);
        Dimension::ALL.into_iter().find(|&d| {
            self.limits
                .get(d)
                .is_some_and(|limit| committed.get(d) >= limit)
        })
    }

    /// What remains on each limited dimension (`None` for unlimited ones).
    pub fn remaining(&self) -> Limits {
        let committed = self.spent.plus(self.reserved);
        let left = |d: Dimension| {
            self.limits
                .get(d)
                .map(|l| l.saturating_sub(committed.get(d)))
        };
        Limits {
            turns: left(Dimension::Turns),
            tokens: left(Dimension::Tokens),
            cost_micros: left(Dimension::Cost),
            wall_ms: left(Dimension::WallClock),
        }
    }

    pub(crate) fn reserve(&mut self, amount: Amounts) {
        self.reserved = self.reserved.plus(amount);
    }

    pub(crate) fn cancel(&mut self, reservation: Amounts) {
        self.reserved = self.reserved.minus(reservation);
    }

    /// Charges `usage` in full against `reservation`, and records what it used beyond it.
    pub(crate) fn charge(&mut self, reservation: Amounts, usage: Amounts) {
        self.reserved = self.reserved.minus(reservation);
        self.spent = self.spent.plus(usage);
        self.overrun = self.overrun.plus(usage.beyond(reservation));
    }

    /// Spent plus reserved: what the limits are measured against.
    pub fn committed(&self) -> Amounts {
        self.spent.plus(self.reserved)
    }
}

/// A settled turn that used more than it reserved, recorded until the goal's owner answers it
/// (by amending the budget or the policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrun {
    /// The todo the turn ran on.
    pub todo: TodoId,
    /// The turn.
    pub turn: TurnId,
    /// What it used beyond its reservation, per dimension (charged in full).
    pub by: Amounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_counts_spent_and_reserved() {
        let mut ledger = Ledger::new(Limits {
            turns: Some(2),
            ..Limits::UNLIMITED
        });
        assert_eq!(ledger.shortfall(Amounts::ONE_TURN), None);
        ledger.reserve(Amounts::ONE_TURN);
        ledger.charge(Amounts::ONE_TURN, Amounts::ONE_TURN);
        ledger.reserve(Amounts::ONE_TURN);
        assert_eq!(ledger.shortfall(Amounts::ONE_TURN), Some(Dimension::Turns));
        assert_eq!(ledger.exhausted(), Some(Dimension::Turns));
        ledger.cancel(Amounts::ONE_TURN);
        assert_eq!(ledger.exhausted(), None);
        assert_eq!(ledger.remaining().turns, Some(1));
    }

    #[test]
    fn an_overrun_is_charged_in_full_and_recorded() {
        let mut ledger = Ledger::new(Limits {
            tokens: Some(1_000),
            ..Limits::UNLIMITED
        });
        let reserved = Amounts {
            tokens: 400,
            ..Amounts::ONE_TURN
        };
        ledger.reserve(reserved);
        ledger.charge(
            reserved,
            Amounts {
                tokens: 1_500,
                ..Amounts::ONE_TURN
            },
        );
        assert_eq!(ledger.spent.tokens, 1_500);
        assert_eq!(ledger.overrun.tokens, 1_100);
        assert_eq!(ledger.overrun.turns, 0);
        // Spent beyond the limit admits nothing, not even a reservation of no tokens.
        assert_eq!(ledger.shortfall(Amounts::ONE_TURN), Some(Dimension::Tokens));
        assert!(ledger.committed().tokens <= 1_000 + ledger.overrun.tokens);
    }

    #[test]
    fn only_a_lowering_below_what_is_committed_counts() {
        let old = Limits {
            tokens: Some(1_000),
            turns: None,
            ..Limits::UNLIMITED
        };
        let committed = Amounts {
            tokens: 1_500,
            turns: 3,
            ..Amounts::ZERO
        };
        // Raised, still below what an overrun committed: not a lowering.
        let raised = Limits {
            tokens: Some(1_200),
            ..old
        };
        assert_eq!(old.lowered_below(raised, committed), None);
        assert_eq!(old.lowered_below(old, committed), None);
        let lowered = Limits {
            tokens: Some(900),
            ..old
        };
        assert_eq!(
            old.lowered_below(lowered, committed),
            Some(Dimension::Tokens)
        );
        // Bounding an unlimited dimension is a lowering; at what is committed it is allowed.
        let bounded = |turns| Limits {
            turns: Some(turns),
            ..old
        };
        assert_eq!(
            old.lowered_below(bounded(2), committed),
            Some(Dimension::Turns)
        );
        assert_eq!(old.lowered_below(bounded(3), committed), None);
    }
}
