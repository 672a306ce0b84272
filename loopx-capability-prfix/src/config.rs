//! The capability's configuration: a plain, serde-(de)serialisable struct, validated once.

use std::collections::BTreeSet;

use loopx_kernel::{Duration, PersonId};
use serde::{Deserialize, Serialize};

/// How the capability judges issues and pull requests. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrFixConfig {
    /// The person who answers merge and ready-for-review gates; the goal owner when absent.
    /// Merging is always a person's decision, never the capability's.
    pub merge_owner: Option<PersonId>,
    /// Check-run names or status contexts that must be present and passing at the head before
    /// CI counts as green (default: none; then any non-empty, all-passing set is green).
    pub required_checks: BTreeSet<String>,
    /// Approvals at the exact head needed for a merge gate (default 1, at least 1).
    pub required_approvals: u32,
    /// How often a quiet monitor polls; its first poll is one cadence away (default 30 minutes).
    pub monitor_cadence: Duration,
    /// The most path prefixes a fix may write and still count as bounded (default 8).
    pub max_fix_scopes: usize,
}

impl Default for PrFixConfig {
    fn default() -> Self {
        PrFixConfig {
            merge_owner: None,
            required_checks: BTreeSet::new(),
            required_approvals: 1,
            monitor_cadence: Duration::minutes(30),
            max_fix_scopes: 8,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Monitors would poll continuously.
    #[error("monitor_cadence must be longer than zero")]
    ZeroCadence,
    /// A merge gate would need no approval at all.
    #[error("required_approvals must be at least 1: a merge gate needs an approval at the head")]
    NoApprovalRequired,
    /// No fix could ever count as bounded.
    #[error("max_fix_scopes must be at least 1")]
    NoFixScope,
    /// A required check name is blank or holds control characters.
    #[error("required check name `{0}` is blank or holds control characters")]
    BadCheckName(String),
}

impl PrFixConfig {
    /// Checks every field; a valid configuration is what [`crate::PrFix::new`] accepts.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.monitor_cadence <= Duration::ZERO {
            return Err(ConfigError::ZeroCadence);
        }
        if self.required_approvals == 0 {
            return Err(ConfigError::NoApprovalRequired);
        }
        if self.max_fix_scopes == 0 {
            return Err(ConfigError::NoFixScope);
        }
        if let Some(bad) = self
            .required_checks
            .iter()
            .find(|name| name.trim().is_empty() || name.chars().any(char::is_control))
        {
            return Err(ConfigError::BadCheckName(bad.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid() {
        assert_eq!(PrFixConfig::default().validate(), Ok(()));
    }

    #[test]
    fn each_bad_field_has_its_own_error() {
        let base = PrFixConfig::default;
        let zero = PrFixConfig {
            monitor_cadence: Duration::ZERO,
            ..base()
        };
        assert_eq!(zero.validate(), Err(ConfigError::ZeroCadence));
        let lax = PrFixConfig {
            required_approvals: 0,
            ..base()
        };
        assert_eq!(lax.validate(), Err(ConfigError::NoApprovalRequired));
        let narrow = PrFixConfig {
            max_fix_scopes: 0,
            ..base()
        };
        assert_eq!(narrow.validate(), Err(ConfigError::NoFixScope));
        let blank = PrFixConfig {
            required_checks: [" ".to_owned()].into(),
            ..base()
        };
        assert_eq!(blank.validate(), Err(ConfigError::BadCheckName(" ".into())));
    }

    #[test]
    fn it_round_trips_through_json_with_defaults_filled_in() {
        let config: PrFixConfig =
            serde_json::from_str(r#"{"required_checks": ["build"]}"#).expect("valid json");
        assert_eq!(config.required_approvals, 1);
        let back: PrFixConfig =
            serde_json::from_str(&serde_json::to_string(&config).expect("serializes"))
                .expect("round trips");
        assert_eq!(back, config);
        assert!(serde_json::from_str::<PrFixConfig>(r#"{"merge": true}"#).is_err());
    }
}
