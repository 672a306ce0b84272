//! The metric contract: what counts as better, by how much, against which baseline, and which
//! guardrails a candidate must keep. Plain data, (de)serialisable, validated once at
//! construction so judgement never meets a nonsensical threshold.

use loopx_kernel::facts::metrics::Metric;
use loopx_kernel::{ObservationKey, PersonId};
use serde::{Deserialize, Serialize};

use crate::facts::HOLDOUT_SUFFIX;

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Larger values are better (accuracy, AUC).
    HigherIsBetter,
    /// Smaller values are better (loss, latency).
    LowerIsBetter,
}

impl Direction {
    /// How much `value` improves on `reference` in this direction: positive is better,
    /// negative is worse, in the metric's own units.
    pub fn gain(self, value: f64, reference: f64) -> f64 {
        match self {
            Direction::HigherIsBetter => value - reference,
            Direction::LowerIsBetter => reference - value,
        }
    }
}

/// A secondary metric that must not regress against the baseline by more than `tolerance`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecondaryMetric {
    /// The metric's name as the metrics provider reports it.
    pub metric: String,
    /// Which way it improves.
    pub direction: Direction,
    /// The largest regression (in the metric's units) that is only a warning.
    pub tolerance: f64,
}

/// Limits a candidate must respect whatever its primary metric says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guardrails {
    /// The most a run may cost (the `cost` fact's unit); `None` for no cap.
    #[serde(default)]
    pub cost_cap: Option<f64>,
    /// The longest a run may take, in seconds of wall time; `None` for no cap.
    #[serde(default)]
    pub time_cap_secs: Option<f64>,
    /// The share of a cap from which a run is reported as a warning (default 0.9).
    #[serde(default = "default_warn_fraction")]
    pub warn_fraction: f64,
    /// Secondary metrics that must not regress beyond their tolerance.
    #[serde(default)]
    pub secondary: Vec<SecondaryMetric>,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails {
            cost_cap: None,
            time_cap_secs: None,
            warn_fraction: default_warn_fraction(),
            secondary: Vec::new(),
        }
    }
}

fn default_warn_fraction() -> f64 {
    0.9
}

fn default_max_attempts() -> u32 {
    3
}

/// The contract every experiment of the goal is judged by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentContract {
    /// The primary metric's name as the metrics provider reports it.
    pub primary: String,
    /// Which way the primary metric improves.
    pub direction: Direction,
    /// The smallest improvement (in the metric's units) that counts; smaller differences
    /// either way are inconclusive.
    #[serde(default)]
    pub min_effect: f64,
    /// The baseline experiment every other experiment is compared with.
    pub baseline: String,
    /// The guardrails.
    #[serde(default)]
    pub guardrails: Guardrails,
    /// Who decides promotions; the goal owner when absent.
    #[serde(default)]
    pub approver: Option<PersonId>,
    /// How many attempts of one run at one revision may end in an infrastructure failure
    /// before the capability asks for a repair instead of another retry (default 3).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
}

/// Why a contract was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// A metric or experiment name cannot form an observation key.
    #[error("{field} `{value}` cannot name an observation stream (letters, digits and ._:/@#+-)")]
    InvalidName {
        /// The field.
        field: &'static str,
        /// The value, cut to 64 characters.
        value: String,
    },
    /// A threshold is NaN or infinite.
    #[error("{field} must be a finite number")]
    NotFinite {
        /// The field.
        field: String,
    },
    /// A threshold that must be zero or more is negative.
    #[error("{field} must not be negative")]
    Negative {
        /// The field.
        field: String,
    },
    /// A cap is zero or negative: no run could ever pass it.
    #[error("{field} must be greater than zero")]
    NonPositiveCap {
        /// The field.
        field: &'static str,
    },
    /// The warning fraction is outside (0, 1].
    #[error("guardrails.warn_fraction must be in (0, 1]")]
    WarnFraction,
    /// `max_attempts` is zero.
    #[error("max_attempts must be at least 1")]
    NoAttempts,
    /// A metric is named twice (as primary and secondary, or as two secondaries).
    #[error("metric `{metric}` is named more than once")]
    DuplicateMetric {
        /// The metric.
        metric: String,
    },
    /// The baseline names a holdout evaluation instead of an experiment.
    #[error("the baseline `{baseline}` must name an experiment, not its holdout evaluation")]
    BaselineIsHoldout {
        /// The baseline.
        baseline: String,
    },
}

impl ExperimentContract {
    /// A contract that compares every experiment's `primary` metric, better in `direction`,
    /// with the experiment `baseline`; every other field has the value a serialised contract
    /// that omits it gets: no minimum effect, no guardrails, promotions decided by the goal
    /// owner, 3 attempts. Nothing is checked yet: [`ExperimentContract::validate`] (which
    /// `AutoMl::new` calls) does that.
    pub fn new(
        primary: impl Into<String>,
        direction: Direction,
        baseline: impl Into<String>,
    ) -> Self {
        ExperimentContract {
            primary: primary.into(),
            direction,
            min_effect: 0.0,
            baseline: baseline.into(),
            guardrails: Guardrails::default(),
            approver: None,
            max_attempts: default_max_attempts(),
        }
    }

    /// The same contract, with `min_effect` as the smallest improvement that counts.
    #[must_use]
    pub fn with_min_effect(mut self, min_effect: f64) -> Self {
        self.min_effect = min_effect;
        self
    }

    /// The same contract, with `guardrails` in place of its guardrails.
    #[must_use]
    pub fn with_guardrails(mut self, guardrails: Guardrails) -> Self {
        self.guardrails = guardrails;
        self
    }

    /// The same contract, with promotions decided by `approver` instead of the goal owner.
    #[must_use]
    pub fn with_approver(mut self, approver: PersonId) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Checks every name and threshold.
    ///
    /// # Errors
    /// The first [`ContractError`] found.
    pub fn validate(&self) -> Result<(), ContractError> {
        check_name("primary", &self.primary)?;
        check_name("baseline", &self.baseline)?;
        if self.baseline.ends_with(HOLDOUT_SUFFIX) {
            return Err(ContractError::BaselineIsHoldout {
                baseline: self.baseline.clone(),
            });
        }
        check_non_negative("min_effect", self.min_effect)?;
        self.guardrails.validate(&self.primary)?;
        if self.max_attempts == 0 {
            return Err(ContractError::NoAttempts);
        }
        Ok(())
    }
}

impl Guardrails {
    /// The same guardrails, with runs capped at `cap` (the `cost` fact's unit).
    #[must_use]
    pub fn with_cost_cap(mut self, cap: f64) -> Self {
        self.cost_cap = Some(cap);
        self
    }

    /// The same guardrails, with runs capped at `secs` seconds of wall time.
    #[must_use]
    pub fn with_time_cap_secs(mut self, secs: f64) -> Self {
        self.time_cap_secs = Some(secs);
        self
    }

    /// The same guardrails, plus the secondary metric `metric`, better in `direction`, which
    /// may regress against the baseline by at most `tolerance` (in its own units).
    #[must_use]
    pub fn with_secondary(
        mut self,
        metric: impl Into<String>,
        direction: Direction,
        tolerance: f64,
    ) -> Self {
        self.secondary.push(SecondaryMetric {
            metric: metric.into(),
            direction,
            tolerance,
        });
        self
    }

    fn validate(&self, primary: &str) -> Result<(), ContractError> {
        check_cap("guardrails.cost_cap", self.cost_cap)?;
        check_cap("guardrails.time_cap_secs", self.time_cap_secs)?;
        if !(self.warn_fraction > 0.0 && self.warn_fraction <= 1.0) {
            return Err(ContractError::WarnFraction);
        }
        let mut seen = vec![primary];
        for secondary in &self.secondary {
            check_name("guardrails.secondary.metric", &secondary.metric)?;
            if seen.contains(&secondary.metric.as_str()) {
                return Err(ContractError::DuplicateMetric {
                    metric: secondary.metric.clone(),
                });
            }
            seen.push(&secondary.metric);
            let field = format!("guardrails.secondary[{}].tolerance", secondary.metric);
            check_non_negative(&field, secondary.tolerance)?;
        }
        Ok(())
    }
}

fn check_name(field: &'static str, value: &str) -> Result<(), ContractError> {
    // Experiment and metric names become parts of observation keys, so they must fit the
    // kernel's id alphabet on their own (an empty name would silently merge streams).
    if value.is_empty() || ObservationKey::new(format!("{}{value}", Metric::PREFIX)).is_err() {
        return Err(ContractError::InvalidName {
            field,
            value: value.chars().take(64).collect(),
        });
    }
    Ok(())
}

fn check_non_negative(field: &str, value: f64) -> Result<(), ContractError> {
    if !value.is_finite() {
        return Err(ContractError::NotFinite {
            field: field.to_owned(),
        });
    }
    if value < 0.0 {
        return Err(ContractError::Negative {
            field: field.to_owned(),
        });
    }
    Ok(())
}

fn check_cap(field: &'static str, cap: Option<f64>) -> Result<(), ContractError> {
    let Some(cap) = cap else { return Ok(()) };
    if !cap.is_finite() {
        return Err(ContractError::NotFinite {
            field: field.to_owned(),
        });
    }
    if cap <= 0.0 {
        return Err(ContractError::NonPositiveCap { field });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> ExperimentContract {
        ExperimentContract::new("accuracy", Direction::HigherIsBetter, "base")
    }

    #[test]
    fn a_sound_contract_validates_and_round_trips() {
        let json = r#"{"primary":"accuracy","direction":"higher_is_better","baseline":"base",
            "guardrails":{"cost_cap":50,"secondary":[{"metric":"latency_ms","direction":"lower_is_better","tolerance":2}]}}"#;
        let parsed: ExperimentContract = serde_json::from_str(json).expect("parses");
        assert_eq!(parsed.validate(), Ok(()));
        assert_eq!(parsed.max_attempts, 3);
        assert!((parsed.guardrails.warn_fraction - 0.9).abs() < f64::EPSILON);
        let again: ExperimentContract =
            serde_json::from_value(serde_json::to_value(&parsed).expect("serialises"))
                .expect("parses");
        assert_eq!(again, parsed);
        assert!(
            serde_json::from_str::<ExperimentContract>(
                r#"{"primary":"a","direction":"up","baseline":"b"}"#
            )
            .is_err()
        );
    }

    #[test]
    fn nonsense_is_refused_with_a_typed_error() {
        let refused = |edit: fn(&mut ExperimentContract)| {
            let mut c = contract();
            edit(&mut c);
            c.validate().expect_err("refused")
        };
        assert!(matches!(
            refused(|c| c.primary = "has space".into()),
            ContractError::InvalidName { .. }
        ));
        assert!(matches!(
            refused(|c| c.baseline = String::new()),
            ContractError::InvalidName { .. }
        ));
        assert!(matches!(
            refused(|c| c.baseline = "base@holdout".into()),
            ContractError::BaselineIsHoldout { .. }
        ));
        assert!(matches!(
            refused(|c| c.min_effect = f64::NAN),
            ContractError::NotFinite { .. }
        ));
        assert!(matches!(
            refused(|c| c.min_effect = -0.1),
            ContractError::Negative { .. }
        ));
        assert!(matches!(
            refused(|c| c.guardrails.cost_cap = Some(0.0)),
            ContractError::NonPositiveCap { .. }
        ));
        assert!(matches!(
            refused(|c| c.guardrails.warn_fraction = 1.5),
            ContractError::WarnFraction
        ));
        assert!(matches!(
            refused(|c| c.max_attempts = 0),
            ContractError::NoAttempts
        ));
        assert!(matches!(
            refused(|c| c.guardrails.secondary = vec![SecondaryMetric {
                metric: "accuracy".into(),
                direction: Direction::HigherIsBetter,
                tolerance: 1.0,
            }]),
            ContractError::DuplicateMetric { .. }
        ));
    }
}
