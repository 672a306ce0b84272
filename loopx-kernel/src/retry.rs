//! What a settled turn came to, and the rules that keep failing or idle turns from looping:
//! the retry policy (backoff, then a replan obligation) and stall detection.
//!
//! Every settlement is classified by the kernel as a [`TurnResult`] and recorded on its
//! `turn_settled` event:
//!
//! - **executor failure**: the settlement carries a [`TurnFailure`] (the executor could not do
//!   the turn: its process failed, timed out, was killed, lacked credentials, was rate-limited);
//! - **validation failure**: the validator's verdict is `failed`;
//! - **progress**: the todo's status changed (completed, deferred, blocked), an observation
//!   changed, or the evidence established a fact the goal did not hold (a check's outcome about a
//!   subject at a revision);
//! - **no progress**: none of that.
//!
//! Failures in a row on one todo are counted. After each, the todo may not be claimed again
//! before [`RetryPolicy::delay`] has passed since the failure (`decide` waits with
//! `WaitReason::Backoff`, a claim is refused with `backing_off`); when the count reaches
//! [`RetryPolicy::attempts`] a replan obligation (`ObligationCause::TurnsFailing`) names the
//! todo and its last failures. Settled turns in a row without progress on one todo raise a
//! replan obligation (`ObligationCause::NoProgress`) at [`Policy::stall_turns`](crate::Policy),
//! and on the whole goal (on whichever todos; monitors' polls excepted) at
//! `Policy::stall_goal_turns` (`ObligationCause::GoalStalled`);
//! a monitor's quiet polls are counted by its own streak against
//! `Policy::monitor_no_change_limit` (`ObligationCause::MonitorStalled`). A progress turn ends
//! both streaks; discharging the obligation a streak raised starts it over.

use serde::{Deserialize, Serialize};

use crate::ids::{GoalId, TodoId, TurnId, sha256_hex};
use crate::time::{Duration, Timestamp};

/// How many failures an obligation and a streak keep, newest last.
pub const RECENT_FAILURES: usize = 3;

/// Why an executor could not do a turn, by class. The command executor documents how it maps
/// exit statuses, signals, timeouts and recognisable errors to these.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The process ran and exited unsuccessfully without reporting a turn.
    Exited,
    /// The turn ran past its time and was stopped.
    TimedOut,
    /// A signal ended the process.
    Killed,
    /// It lacked credentials or was refused authorization.
    Unauthorized,
    /// It was rate-limited by a service it depends on.
    RateLimited,
    /// The executor could not run at all (the program is missing, the journal is unwritable).
    Unavailable,
    /// Any other failure.
    Other,
}

impl FailureClass {
    /// The class as its stable snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::Exited => "exited",
            FailureClass::TimedOut => "timed_out",
            FailureClass::Killed => "killed",
            FailureClass::Unauthorized => "unauthorized",
            FailureClass::RateLimited => "rate_limited",
            FailureClass::Unavailable => "unavailable",
            FailureClass::Other => "other",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An executor failure as a settlement reports it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnFailure {
    /// Its class.
    pub class: FailureClass,
    /// What failed, for people (at most `MAX_TEXT` bytes; never a secret).
    #[serde(default)]
    pub detail: String,
}

/// What a settled turn came to, as the kernel classified it (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnResult {
    /// Something the goal holds changed.
    Progress,
    /// The turn ran and was judged, and nothing changed.
    NoProgress,
    /// The executor failed.
    ExecutorFailed {
        /// The failure's class.
        class: FailureClass,
        /// What failed, as reported.
        #[serde(default)]
        detail: String,
    },
    /// The validator's verdict was `failed`.
    ValidationFailed {
        /// The verdict's summary.
        #[serde(default)]
        detail: String,
    },
}

impl TurnResult {
    /// True for the two failures.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            TurnResult::ExecutorFailed { .. } | TurnResult::ValidationFailed { .. }
        )
    }

    /// A stable short name (`progress`, `no_progress`, `executor_failed`, `validation_failed`).
    pub fn name(&self) -> &'static str {
        match self {
            TurnResult::Progress => "progress",
            TurnResult::NoProgress => "no_progress",
            TurnResult::ExecutorFailed { .. } => "executor_failed",
            TurnResult::ValidationFailed { .. } => "validation_failed",
        }
    }
}

/// One failed turn, as a streak and an obligation remember it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureNote {
    /// The turn.
    pub turn: TurnId,
    /// When it was settled.
    pub at: Timestamp,
    /// What it came to (one of the two failures).
    pub result: TurnResult,
}

/// A todo's current streaks of failed and of idle settled turns.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Streak {
    /// Failed turns in a row.
    #[serde(default)]
    pub failures: u32,
    /// Settled turns in a row that neither failed nor made progress.
    #[serde(default)]
    pub idle: u32,
    /// The last failures (at most [`RECENT_FAILURES`]), newest last; the newest one's time
    /// starts the backoff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<FailureNote>,
}

impl Streak {
    /// The streak after a turn with `result` settled as `turn` at `at`.
    #[must_use]
    pub fn after(mut self, result: &TurnResult, turn: &TurnId, at: Timestamp) -> Streak {
        match result {
            TurnResult::Progress => return Streak::default(),
            TurnResult::NoProgress => self.idle = self.idle.saturating_add(1),
            TurnResult::ExecutorFailed { .. } | TurnResult::ValidationFailed { .. } => {
                self.failures = self.failures.saturating_add(1);
                self.recent.push(FailureNote {
                    turn: turn.clone(),
                    at,
                    result: result.clone(),
                });
                let excess = self.recent.len().saturating_sub(RECENT_FAILURES);
                self.recent.drain(..excess);
            }
        }
        self
    }

    /// When the last failure happened, if the streak has any.
    pub fn failed_at(&self) -> Option<Timestamp> {
        (self.failures > 0)
            .then(|| self.recent.last().map(|n| n.at))
            .flatten()
    }
}

/// How failed turns on one todo are retried. Every field has a documented default; the policy
/// is part of the goal's [`Policy`](crate::Policy) and amended with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Failed turns in a row on one todo that raise a replan obligation (default 3); 0 never
    /// raises one (the backoff still applies).
    pub attempts: u32,
    /// The pause after the first failure (default 30 seconds); each further failure doubles it.
    pub backoff: Duration,
    /// The longest pause, jitter included (default 15 minutes).
    pub max_backoff: Duration,
    /// Up to this many percent of the pause are added as jitter (default 20), derived from the
    /// goal, the todo and the failure count, so that agents retrying the same todo spread out
    /// and the same history always gives the same pause.
    pub jitter_percent: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            backoff: Duration::seconds(30),
            max_backoff: Duration::minutes(15),
            jitter_percent: 20,
        }
    }
}

impl RetryPolicy {
    /// The pause after the `failures`-th failure in a row on `todo` of `goal`: the base
    /// `min(max_backoff, backoff × 2^(failures − 1))`, plus `base × jitter_percent × d / 100`
    /// (rounded down) where `d ∈ [0, 1)` is the first 32 bits of the SHA-256 of
    /// `"{goal}\n{todo}\n{failures}"` over 2³², the sum capped at `max_backoff`. Zero for no
    /// failures.
    pub fn delay(&self, goal: &GoalId, todo: &TodoId, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let cap = self.max_backoff.as_millis().max(0);
        let doublings = failures.saturating_sub(1).min(62);
        let base = self
            .backoff
            .as_millis()
            .max(0)
            .saturating_mul(1_i64 << doublings)
            .min(cap);
        let seed = sha256_hex(format!("{goal}\n{todo}\n{failures}").as_bytes());
        // The first 8 hexadecimal digits as a fraction of 2^32.
        let draw = u128::from(u32::from_str_radix(&seed[..8], 16).unwrap_or(0));
        let percent = u128::from(self.jitter_percent.min(100));
        let jitter = u128::try_from(base).unwrap_or(0) * percent * draw / (100 << 32);
        let jitter = i64::try_from(jitter).unwrap_or(i64::MAX);
        Duration::from_millis(base.saturating_add(jitter).min(cap))
    }
}

/// The default of [`Policy::stall_turns`](crate::Policy): settled turns in a row without
/// progress on one todo that raise a replan obligation.
pub const DEFAULT_STALL_TURNS: u32 = 5;

/// The default of [`Policy::stall_goal_turns`](crate::Policy): settled turns in a row without
/// progress on the whole goal, on whichever todos, that raise a replan obligation.
pub const DEFAULT_STALL_GOAL_TURNS: u32 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (GoalId, TodoId) {
        (GoalId::new("g").unwrap(), TodoId::new("t").unwrap())
    }

    #[test]
    fn the_pause_doubles_with_jitter_and_stays_under_the_cap() {
        let (goal, todo) = ids();
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(&goal, &todo, 0), Duration::ZERO);
        for n in 1..=12 {
            let base = (30_000_i64 << (n - 1)).min(900_000);
            let pause = policy.delay(&goal, &todo, n).as_millis();
            assert!(
                pause >= base && pause <= (base * 6 / 5).min(900_000),
                "{n}: {pause}"
            );
            assert_eq!(
                policy.delay(&goal, &todo, n).as_millis(),
                pause,
                "deterministic"
            );
        }
        let flat = RetryPolicy {
            jitter_percent: 0,
            ..policy
        };
        assert_eq!(flat.delay(&goal, &todo, 3), Duration::minutes(2));
        assert_eq!(flat.delay(&goal, &todo, u32::MAX), Duration::minutes(15));
    }

    #[test]
    fn a_streak_counts_failures_and_idle_turns_until_progress() {
        let turn = TurnId::new("u1").unwrap();
        let at = Timestamp::parse("2026-11-29T10:00:00Z").unwrap();
        let failed = TurnResult::ValidationFailed {
            detail: String::new(),
        };
        let mut streak = Streak::default();
        for _ in 0..5 {
            streak = streak.after(&failed, &turn, at);
        }
        streak = streak.after(&TurnResult::NoProgress, &turn, at);
        assert_eq!((streak.failures, streak.idle), (5, 1));
        assert_eq!(streak.recent.len(), RECENT_FAILURES);
        assert_eq!(streak.failed_at(), Some(at));
        assert_eq!(
            streak.after(&TurnResult::Progress, &turn, at),
            Streak::default()
        );
    }
}
