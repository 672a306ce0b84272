//! The capability's configuration: a plain, serde-(de)serialisable struct, validated once.

use std::collections::BTreeSet;

use loopx_kernel::facts::github::{PullRequest, Thread};
use loopx_kernel::{Duration, ObservationKey, PersonId};
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
    /// The pull requests the goal is about, as `owner/name#number` (default: none). The
    /// judgement reads whatever the goal has observed; these tell a host which pull requests
    /// to observe for it ([`PrFixConfig::pull_keys`]), so that a goal bound to the capability
    /// says all its host needs to know. Left out of the JSON when empty.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub pulls: BTreeSet<String>,
    /// Whose questions in a pull request become the agent's work at once (default
    /// `trusted`: the repository's owners, members and collaborators, by GitHub's
    /// `author_association`, and the logins the goal's owner mapped). Anyone else's question
    /// waits for the goal's owner to accept it (answer its gate) or dismiss it (reject it);
    /// `anyone` takes every question as work, which lets a stranger's words reach the agent.
    pub questions_from: QuestionsFrom,
}

/// Whose questions become the agent's work at once ([`PrFixConfig::questions_from`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionsFrom {
    /// The repository's owners, members and collaborators, and the goal's mapped logins.
    #[default]
    Trusted,
    /// Anyone who comments (the looser policy, said outright).
    Anyone,
}

impl Default for PrFixConfig {
    fn default() -> Self {
        PrFixConfig {
            merge_owner: None,
            required_checks: BTreeSet::new(),
            required_approvals: 1,
            monitor_cadence: Duration::minutes(30),
            max_fix_scopes: 8,
            pulls: BTreeSet::new(),
            questions_from: QuestionsFrom::Trusted,
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
    /// A pull request is not written `owner/name#number`.
    #[error(
        "pull request `{0}` is not written owner/name#number (letters, digits, `-`, `_` and `.` in each name; a number from 1)"
    )]
    BadPull(String),
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
        if let Some(bad) = self.pulls.iter().find(|pull| parse_pull(pull).is_none()) {
            return Err(ConfigError::BadPull(bad.clone()));
        }
        Ok(())
    }

    /// The observation streams of [`PrFixConfig::pulls`] (`pr:owner/name#number`), the keys a
    /// host polls for the goal, in order; a pull that does not validate is left out.
    pub fn pull_keys(&self) -> Vec<ObservationKey> {
        self.pulls
            .iter()
            .filter_map(|pull| parse_pull(pull))
            .filter_map(|(repo, number)| {
                ObservationKey::new(PullRequest::key(&Thread::new(repo, number))).ok()
            })
            .collect()
    }
}

/// `owner/name#number` as its repository and number, when it is one.
fn parse_pull(text: &str) -> Option<(&str, u64)> {
    let (repo, number) = text.rsplit_once('#')?;
    let number: u64 = number.parse().ok().filter(|n| *n > 0)?;
    let (owner, name) = repo.split_once('/')?;
    let part = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    (part(owner) && part(name)).then_some((repo, number))
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
        for bad in [
            "acme/cli",
            "acme/cli#0",
            "acme#4",
            "acme/cli/x#4",
            "acme/../#4",
            "a b/c#1",
        ] {
            let pulls = PrFixConfig {
                pulls: [bad.to_owned()].into(),
                ..base()
            };
            assert_eq!(
                pulls.validate(),
                Err(ConfigError::BadPull(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn pulls_name_the_streams_a_host_polls() {
        let config = PrFixConfig {
            pulls: ["acme/cli#42".to_owned(), "acme/web.site#7".to_owned()].into(),
            ..PrFixConfig::default()
        };
        assert_eq!(config.validate(), Ok(()));
        let keys: Vec<String> = config.pull_keys().iter().map(ToString::to_string).collect();
        assert_eq!(keys, ["pr:acme/cli#42", "pr:acme/web.site#7"]);
        let json = serde_json::to_value(&config).expect("serializes");
        assert_eq!(
            json["pulls"],
            serde_json::json!(["acme/cli#42", "acme/web.site#7"])
        );
        assert!(
            serde_json::to_value(PrFixConfig::default())
                .expect("serializes")
                .get("pulls")
                .is_none()
        );
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
