//! The capabilities a goal may be bound to, by name, and their wiring into an engine.
//!
//! A goal declares its capability in its spec ([`GoalSpec::capability`]: a name and a JSON
//! configuration); the kernel carries the binding as data and never reads it. A [`Registry`]
//! is where the name means something: it maps each name to a constructor that builds the
//! capability from the configuration, refusing an unknown name or a bad configuration with a
//! [`RegistryError`] that says what is known or what is wrong. [`Registry::shipped`] holds the
//! three capabilities loopx ships — `prfix`, `automl` and `research` — and a host adds its own
//! with [`Registry::with`] (or [`Registry::with_config`], which decodes a typed configuration).
//!
//! What a constructor builds is a [`Bound`]: the capability, and the observation streams it
//! asks its host to poll for the goal (for `prfix`, each pull request of its `pulls`, through
//! the provider named `github`). [`Bound::wire`] adds both to an [`EngineBuilder`], so every
//! host (`loopx run`, the service, an embedded host) wires a goal the same way.
//!
//! A goal bound to a capability should follow what those streams are about from the moment it
//! is created, before anything was observed on them: the first webhook delivery about its pull
//! request must reach it. [`Registry::follow`] returns the binding with
//! [`CapabilityBinding::follows`] filled from the streams ([`Bound::follows`]); bind a goal
//! with that binding (`loopx goal create --capability` does).
//!
//! ```
//! use loopx_kernel::{CapabilityBinding, GoalSpec};
//! use loopx_server::capabilities::Registry;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = GoalSpec::builder("fix-42", "CI of acme/cli#42 is green", "olivia")
//!     .capability("prfix", serde_json::json!({ "pulls": ["acme/cli#42"] }))
//!     .build()?;
//! let bound = Registry::shipped().bind(spec.capability.as_ref().expect("bound"))?;
//! assert_eq!(bound.actor().to_string(), "capability:prfix");
//! assert_eq!(bound.watches()[0].key.as_str(), "pr:acme/cli#42");
//!
//! // Bound so that it follows its pull request before it observed anything of it.
//! let binding = CapabilityBinding::new("prfix", serde_json::json!({ "pulls": ["acme/cli#42"] }))?;
//! let binding = Registry::shipped().follow(&binding)?;
//! assert_eq!(binding.follows[0].as_str(), "pr:acme/cli#42");
//! let spec = GoalSpec::builder("fix-42", "CI of acme/cli#42 is green", "olivia")
//!     .bound(binding)
//!     .build()?;
//! assert_eq!(spec.capability.expect("bound").follows.len(), 1);
//!
//! let unknown = CapabilityBinding::named("triage")?;
//! let error = Registry::shipped().bind(&unknown).err().expect("unknown");
//! assert_eq!(
//!     error.to_string(),
//!     "no capability named `triage` is registered; known: automl, prfix, research"
//! );
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use loopx_capability_automl::{AutoMl, ExperimentContract};
use loopx_capability_prfix::{PrFix, PrFixConfig, head_ci_evidence};
use loopx_capability_research::{Research, ResearchConfig};
use loopx_kernel::engine::{EngineBuilder, EvidenceRule};
use loopx_kernel::facts::github::subject_of;
use loopx_kernel::seams::{Capability, Provider};
use loopx_kernel::{
    Actor, CapabilityBinding, Duration, GoalSpec, GoalState, NewEvidence, Observation,
    ObservationKey, SourceId, Subject,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The name of the provider `prfix` asks its pull requests to be polled through: a host's
/// GitHub REST client, whose source (the actor its observations are recorded as) is this name.
pub const GITHUB_PROVIDER: &str = "github";

/// A capability built from a goal's binding, with the streams it asks its host to poll and
/// the evidence its providers' facts establish.
pub struct Bound {
    capability: Box<dyn Capability>,
    watches: Vec<Watched>,
    evidence: Option<EvidenceRule>,
}

/// An observation stream a bound capability asks its host to poll for the goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// The provider that observes it, by its source (e.g. [`GITHUB_PROVIDER`]).
    pub provider: SourceId,
    /// The stream.
    pub key: ObservationKey,
}

impl fmt::Debug for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound")
            .field("capability", self.capability.source())
            .field("watches", &self.watches)
            .field("evidence", &self.evidence.is_some())
            .finish()
    }
}

impl Bound {
    /// `capability`, asking for no stream to be polled.
    pub fn new(capability: impl Capability + 'static) -> Bound {
        Bound {
            capability: Box::new(capability),
            watches: Vec::new(),
            evidence: None,
        }
    }

    /// The same, with the evidence its providers' facts establish decided by `rule` (for
    /// `prfix`, CI concluded at a pull request's exact head: [`head_ci_evidence`]); the
    /// provider records it after the fact, in the engine and in the service alike.
    #[must_use]
    pub fn evidence_from(
        mut self,
        rule: impl Fn(&GoalState, &Observation) -> Option<NewEvidence> + Send + Sync + 'static,
    ) -> Bound {
        self.evidence = Some(Arc::new(rule));
        self
    }

    /// The rule that says what its providers' facts establish (see [`EvidenceRule`]), if it
    /// has one.
    pub fn evidence(&self) -> Option<&EvidenceRule> {
        self.evidence.as_ref()
    }

    /// The same, asking its host to poll `key` through the provider `provider`.
    #[must_use]
    pub fn watch(mut self, provider: SourceId, key: ObservationKey) -> Bound {
        self.watches.push(Watched { provider, key });
        self
    }

    /// The capability.
    pub fn capability(&self) -> &dyn Capability {
        &*self.capability
    }

    /// The capability, to hand to an engine or judge with directly.
    pub fn into_capability(self) -> Box<dyn Capability> {
        self.capability
    }

    /// The streams it asks its host to poll, in the order asked.
    pub fn watches(&self) -> &[Watched] {
        &self.watches
    }

    /// The subjects the streams it asks for are about, each once, in the order asked: what a
    /// goal bound to it follows before it observed anything ([`CapabilityBinding::follows`]).
    /// A stream polled through [`GITHUB_PROVIDER`] is about the subject its observations name
    /// ([`subject_of`]: a pull request's stream `pr:acme/cli#42` is about `pr:acme/cli#42`,
    /// the subject a webhook delivery about that pull request is routed by); a stream of
    /// another provider about its own key.
    pub fn follows(&self) -> Vec<Subject> {
        let mut follows: Vec<Subject> = Vec::new();
        for watched in &self.watches {
            let about = if watched.provider.as_str() == GITHUB_PROVIDER {
                subject_of(watched.key.as_str())
            } else {
                watched.key.as_str().to_owned()
            };
            if let Ok(subject) = Subject::new(about)
                && !follows.contains(&subject)
            {
                follows.push(subject);
            }
        }
        follows
    }

    /// `binding` (the one this was built from) following what its streams are about: its own
    /// [`CapabilityBinding::follows`] kept, [`Bound::follows`] added after them.
    pub fn following(&self, binding: &CapabilityBinding) -> CapabilityBinding {
        let mut follows = binding.follows.clone();
        for subject in self.follows() {
            if !follows.contains(&subject) {
                follows.push(subject);
            }
        }
        binding.clone().following(follows)
    }

    /// The actor its proposals are recorded as (`capability:<source>`).
    pub fn actor(&self) -> Actor {
        Actor::Capability(self.capability.source().clone())
    }

    /// Every actor a signed goal must register a key for so that this binding's commands
    /// count: the capability, then each provider it asks to poll through (once each).
    pub fn actors(&self) -> Vec<Actor> {
        let mut actors = vec![self.actor()];
        for watched in &self.watches {
            let provider = Actor::Provider(watched.provider.clone());
            if !actors.contains(&provider) {
                actors.push(provider);
            }
        }
        actors
    }

    /// Adds the capability to `engine`, its evidence rule, and each stream it asks for, polled
    /// through the provider among `providers` whose source the stream names, at least every
    /// `every` (a monitor todo that watches the stream is polled through it too).
    ///
    /// # Errors
    /// [`RegistryError::ProviderMissing`] when `providers` has none of that source; nothing is
    /// added then.
    pub fn wire(
        self,
        engine: EngineBuilder,
        providers: &[Arc<dyn Provider>],
        every: Duration,
    ) -> Result<EngineBuilder, RegistryError> {
        let mut polled = Vec::with_capacity(self.watches.len());
        for watched in self.watches {
            let Some(provider) = providers.iter().find(|p| p.source() == &watched.provider) else {
                return Err(RegistryError::ProviderMissing {
                    capability: self.capability.source().clone(),
                    provider: watched.provider,
                    key: watched.key,
                });
            };
            polled.push((provider.clone(), watched.key));
        }
        let capability: Arc<dyn Capability> = Arc::from(self.capability);
        let engine = match self.evidence {
            Some(rule) => engine.evidence(rule),
            None => engine,
        };
        Ok(polled
            .into_iter()
            .fold(engine.capability(capability), |engine, (provider, key)| {
                engine.watch(provider, key, every)
            }))
    }
}

/// Why a constructor refused a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// The JSON is not of the configuration's shape.
    #[error("at `{path}`: {detail}")]
    Malformed {
        /// Where in the configuration (`.` for the whole of it).
        path: String,
        /// What was wrong there.
        detail: String,
    },
    /// The configuration decoded, and the capability refused a value in it.
    #[error("{0}")]
    Refused(String),
}

impl ConfigProblem {
    /// A value the capability refused, in its own words.
    pub fn refused(error: &impl fmt::Display) -> ConfigProblem {
        ConfigProblem::Refused(error.to_string())
    }
}

/// Why a binding could not be turned into a capability, or wired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No capability of that name is registered.
    #[error("no capability named `{name}` is registered; known: {}", .known.join(", "))]
    Unknown {
        /// The name asked for.
        name: SourceId,
        /// The registered names, in order.
        known: Vec<String>,
    },
    /// The configuration is not of the capability's shape.
    #[error("the configuration of capability `{name}` is malformed at `{path}`: {detail}")]
    Malformed {
        /// The capability.
        name: SourceId,
        /// Where in the configuration (`.` for the whole of it).
        path: String,
        /// What was wrong there.
        detail: String,
    },
    /// The capability refused a value of its configuration.
    #[error("capability `{name}` refused its configuration: {detail}")]
    Refused {
        /// The capability.
        name: SourceId,
        /// Why, in the capability's words.
        detail: String,
    },
    /// The capability asks for a stream to be polled through a provider the host lacks.
    #[error(
        "capability `{capability}` asks for `{key}` to be polled through provider `{provider}`, which this host does not have"
    )]
    ProviderMissing {
        /// The capability.
        capability: SourceId,
        /// The provider it names.
        provider: SourceId,
        /// The stream.
        key: ObservationKey,
    },
}

/// Builds a capability from a binding's name and configuration.
pub type Constructor = Arc<dyn Fn(&SourceId, &Value) -> Result<Bound, ConfigProblem> + Send + Sync>;

/// Capability constructors by name. Cloning shares the constructors.
#[derive(Clone, Default)]
pub struct Registry {
    constructors: BTreeMap<String, Constructor>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.constructors.keys()).finish()
    }
}

impl Registry {
    /// A registry with no capability.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The capabilities loopx ships: `prfix` ([`PrFixConfig`], its `pulls` polled through
    /// [`GITHUB_PROVIDER`], CI concluded at a pull request's head recorded as evidence by the
    /// provider that observed it), `automl` ([`ExperimentContract`]) and `research`
    /// ([`ResearchConfig`]; its proposals are recorded under the configuration's `name`,
    /// `research` by default).
    pub fn shipped() -> Registry {
        Registry::new()
            .with_config("prfix", prfix)
            .with_config("automl", |name: &SourceId, contract: ExperimentContract| {
                AutoMl::new(name.clone(), contract)
                    .map(Bound::new)
                    .map_err(|e| ConfigProblem::refused(&e))
            })
            .with_config("research", |_: &SourceId, config: ResearchConfig| {
                Research::new(config)
                    .map(Bound::new)
                    .map_err(|e| ConfigProblem::refused(&e))
            })
    }

    /// The same registry with `name` built by `constructor` (replacing any constructor of
    /// that name): the constructor gets the binding's name (a [`SourceId`], the natural
    /// source of the capability's proposals) and its configuration as JSON.
    #[must_use]
    pub fn with(
        mut self,
        name: impl Into<String>,
        constructor: impl Fn(&SourceId, &Value) -> Result<Bound, ConfigProblem> + Send + Sync + 'static,
    ) -> Registry {
        self.constructors.insert(name.into(), Arc::new(constructor));
        self
    }

    /// [`Registry::with`] for a constructor of a typed configuration `C`, decoded from the
    /// binding's JSON (an absent or `null` configuration reads as `{}`); a configuration that
    /// does not decode is [`ConfigProblem::Malformed`] at the path where it went wrong.
    #[must_use]
    pub fn with_config<C: DeserializeOwned>(
        self,
        name: impl Into<String>,
        build: impl Fn(&SourceId, C) -> Result<Bound, ConfigProblem> + Send + Sync + 'static,
    ) -> Registry {
        self.with(name, move |name: &SourceId, config: &Value| {
            build(name, decode(config)?)
        })
    }

    /// The registered names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.constructors.keys().map(String::as_str)
    }

    /// The capability `binding` names, built from its configuration, with the streams it asks
    /// to be polled.
    ///
    /// # Errors
    /// [`RegistryError::Unknown`] (naming every registered capability),
    /// [`RegistryError::Malformed`] or [`RegistryError::Refused`].
    pub fn bind(&self, binding: &CapabilityBinding) -> Result<Bound, RegistryError> {
        let name = &binding.name;
        let constructor =
            self.constructors
                .get(name.as_str())
                .ok_or_else(|| RegistryError::Unknown {
                    name: name.clone(),
                    known: self.names().map(str::to_owned).collect(),
                })?;
        constructor(name, &binding.config).map_err(|problem| match problem {
            ConfigProblem::Malformed { path, detail } => RegistryError::Malformed {
                name: name.clone(),
                path,
                detail,
            },
            ConfigProblem::Refused(detail) => RegistryError::Refused {
                name: name.clone(),
                detail,
            },
        })
    }

    /// `binding`, checked by building it, with [`CapabilityBinding::follows`] filled from the
    /// streams its capability asks for (see [`Bound::following`]): the binding to create a goal
    /// with, so that it follows its subjects before it observed anything.
    ///
    /// # Errors
    /// As [`Registry::bind`].
    pub fn follow(&self, binding: &CapabilityBinding) -> Result<CapabilityBinding, RegistryError> {
        Ok(self.bind(binding)?.following(binding))
    }

    /// The capability `binding` names, as [`Registry::bind`] builds it.
    ///
    /// # Errors
    /// As [`Registry::bind`].
    pub fn build(&self, binding: &CapabilityBinding) -> Result<Box<dyn Capability>, RegistryError> {
        self.bind(binding).map(Bound::into_capability)
    }

    /// The capability `spec` is bound to, when it is bound to one.
    ///
    /// # Errors
    /// As [`Registry::bind`].
    pub fn bind_goal(&self, spec: &GoalSpec) -> Result<Option<Bound>, RegistryError> {
        spec.capability
            .as_ref()
            .map(|binding| self.bind(binding))
            .transpose()
    }

    /// `engine` with the capability `spec` is bound to and its streams wired (see
    /// [`Bound::wire`]); `engine` as it was when the goal is bound to none.
    ///
    /// # Errors
    /// As [`Registry::bind`] and [`Bound::wire`].
    pub fn wire(
        &self,
        engine: EngineBuilder,
        spec: &GoalSpec,
        providers: &[Arc<dyn Provider>],
        every: Duration,
    ) -> Result<EngineBuilder, RegistryError> {
        match self.bind_goal(spec)? {
            Some(bound) => bound.wire(engine, providers, every),
            None => Ok(engine),
        }
    }
}

/// Decodes a configuration, naming the path of the first thing wrong in it.
fn decode<C: DeserializeOwned>(config: &Value) -> Result<C, ConfigProblem> {
    let empty = Value::Object(serde_json::Map::new());
    let config = if config.is_null() { &empty } else { config };
    serde_path_to_error::deserialize(config).map_err(|error| ConfigProblem::Malformed {
        path: error.path().to_string(),
        detail: error.into_inner().to_string(),
    })
}

fn prfix(name: &SourceId, config: PrFixConfig) -> Result<Bound, ConfigProblem> {
    let keys = config.pull_keys();
    let capability = PrFix::new(name.clone(), config).map_err(|e| ConfigProblem::refused(&e))?;
    let github = SourceId::new(GITHUB_PROVIDER).map_err(|e| ConfigProblem::refused(&e))?;
    let bound = Bound::new(capability).evidence_from(head_ci_evidence);
    Ok(keys
        .into_iter()
        .fold(bound, |bound, key| bound.watch(github.clone(), key)))
}
