//! The capability's configuration: a plain, serde-(de)serialisable struct (unknown fields and
//! invalid ids are refused by deserialisation), validated with typed errors before a capability
//! is built from it.

use loopx_kernel::{AgentId, Duration, PersonId, SourceId};
use serde::{Deserialize, Serialize};

/// How the research capability is set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResearchConfig {
    /// The capability's name, recorded as the actor of its proposals (`research` by default).
    pub name: SourceId,
    /// The person who answers promotion and retirement gates; the goal owner when `None`.
    pub decider: Option<PersonId>,
    /// How long a person has to answer a promotion or retirement gate before it is asked again
    /// as overdue; no deadline when `None`. A person's decision never expires silently.
    pub decision_window: Option<Duration>,
    /// The agent holdout evaluations are handed to. When `None`, not registered, or the
    /// hypothesis's own owner, the first registered agent other than the owner (by id) is.
    pub evaluator: Option<AgentId>,
}

impl Default for ResearchConfig {
    fn default() -> Self {
        ResearchConfig {
            name: match SourceId::new("research") {
                Ok(name) => name,
                Err(_) => unreachable!("`research` is a valid source id"),
            },
            decider: None,
            decision_window: None,
            evaluator: None,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A decision window of zero would make every gate overdue at once.
    #[error("decision_window must be longer than zero")]
    EmptyDecisionWindow,
}

impl ResearchConfig {
    /// Checks the values serde cannot: a decision window, when set, is longer than zero.
    ///
    /// # Errors
    /// [`ConfigError::EmptyDecisionWindow`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.decision_window.is_some_and(|w| w.as_millis() <= 0) {
            return Err(ConfigError::EmptyDecisionWindow);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid_and_named_research() {
        let config = ResearchConfig::default();
        assert_eq!(config.name.as_str(), "research");
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn a_zero_decision_window_is_refused() {
        let config = ResearchConfig {
            decision_window: Some(Duration::ZERO),
            ..ResearchConfig::default()
        };
        assert_eq!(config.validate(), Err(ConfigError::EmptyDecisionWindow));
    }

    #[test]
    fn it_round_trips_through_json_and_refuses_unknown_fields() {
        let config = ResearchConfig {
            decider: Some(PersonId::new("pat").expect("valid id")),
            decision_window: Some(Duration::hours(4)),
            evaluator: Some(AgentId::new("bob").expect("valid id")),
            ..ResearchConfig::default()
        };
        let text = serde_json::to_string(&config).expect("serialises");
        let back: ResearchConfig = serde_json::from_str(&text).expect("deserialises");
        assert_eq!(back, config);
        let partial: ResearchConfig =
            serde_json::from_str(r#"{"decider":"pat"}"#).expect("defaults fill the rest");
        assert_eq!(partial.name.as_str(), "research");
        assert!(serde_json::from_str::<ResearchConfig>(r#"{"min_lift":1}"#).is_err());
        assert!(serde_json::from_str::<ResearchConfig>(r#"{"decider":"two words"}"#).is_err());
    }
}
