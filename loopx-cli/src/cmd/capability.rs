//! A goal's capability from the command line: the binding `goal create` and `goal amend`
//! write (`--capability NAME --capability-config FILE.json`, and prfix's `--repo`/`--pr`),
//! checked against the shipped capabilities before anything is written, and its wiring into
//! `loopx run`'s engine (the capability judges every step; the streams it asks for are polled,
//! a pull request through the GitHub REST client).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use loopx_kernel::engine::EngineBuilder;
use loopx_kernel::seams::{Clock, Provider};
use loopx_kernel::{Actor, CapabilityBinding, Duration, GoalSpec, SourceId};
use loopx_provider::github::rest::{GITHUB_API, GitHubClient, Token};
use loopx_server::capabilities::{Bound, GITHUB_PROVIDER, Registry, RegistryError};
use serde_json::{Value, json};

use crate::context::{parse_duration, read_json};
use crate::error::CliError;

/// Flags that bind a goal to a capability.
#[derive(Debug, Args, Default)]
pub struct CapabilityArgs {
    /// The capability that judges the goal: `prfix`, `automl` or `research`. Its
    /// configuration comes from --capability-config (and for prfix --repo/--pr); `loopx run`
    /// then judges every step with it.
    #[arg(long, value_name = "NAME")]
    capability: Option<SourceId>,
    /// The capability's configuration, a JSON object (`-` for standard input): prfix's
    /// `PrFixConfig`, automl's `ExperimentContract`, research's `ResearchConfig`.
    #[arg(long, value_name = "FILE.json", requires = "capability")]
    capability_config: Option<PathBuf>,
    /// prfix: the repository of the pull request the goal is about, as OWNER/NAME (with --pr).
    #[arg(long, value_name = "OWNER/NAME", requires = "pulls")]
    repo: Option<String>,
    /// prfix: a pull request of --repo the goal is about (repeatable); `loopx run` polls it.
    #[arg(long = "pr", value_name = "N", requires = "repo")]
    pulls: Vec<u64>,
}

impl CapabilityArgs {
    /// The binding the flags ask for, checked by building it and following what its
    /// capability watches (a prfix goal follows its pull requests from its creation on, so the
    /// first delivery about one reaches it); `None` without `--capability`.
    pub fn binding(&self) -> Result<Option<CapabilityBinding>, CliError> {
        let Some(name) = &self.capability else {
            if self.repo.is_some() {
                return Err(CliError::usage(
                    "capability_missing",
                    "--repo and --pr configure the prfix capability, and no capability was named",
                    "add --capability prfix",
                ));
            }
            return Ok(None);
        };
        let mut config: Value = match &self.capability_config {
            Some(path) => read_json(path, "capability configuration")?,
            None => json!({}),
        };
        if let Some(repo) = &self.repo {
            add_pulls(name, &mut config, repo, &self.pulls)?;
        }
        let binding = CapabilityBinding {
            name: name.clone(),
            config,
            follows: Vec::new(),
        };
        follow(&binding).map(Some)
    }
}

/// Adds `repo`'s `numbers` to prfix's `pulls`.
fn add_pulls(
    name: &SourceId,
    config: &mut Value,
    repo: &str,
    numbers: &[u64],
) -> Result<(), CliError> {
    if name.as_str() != "prfix" {
        return Err(CliError::usage(
            "capability_flag_invalid",
            format!("--repo and --pr configure the prfix capability, not `{name}`"),
            format!("put the pull requests in `{name}`'s --capability-config, or bind prfix"),
        ));
    }
    let Some(object) = config.as_object_mut() else {
        return Err(CliError::input(
            "capability_config_invalid",
            "the capability configuration is not a JSON object",
            "write the configuration as an object, e.g. {\"required_checks\": [\"build\"]}",
        ));
    };
    let pulls = object.entry("pulls").or_insert_with(|| json!([]));
    let Some(pulls) = pulls.as_array_mut() else {
        return Err(CliError::input(
            "capability_config_invalid",
            "the configuration's `pulls` is not a list",
            "write `pulls` as a list of owner/name#number, or leave it to --repo/--pr",
        ));
    };
    pulls.extend(numbers.iter().map(|n| json!(format!("{repo}#{n}"))));
    Ok(())
}

/// `binding` following what its shipped capability watches ([`Registry::follow`]).
pub fn follow(binding: &CapabilityBinding) -> Result<CapabilityBinding, CliError> {
    Registry::shipped()
        .follow(binding)
        .map_err(|error| registry_error(&error))
}

/// The shipped capability `binding` names, built from its configuration.
pub fn bind(binding: &CapabilityBinding) -> Result<Bound, CliError> {
    Registry::shipped()
        .bind(binding)
        .map_err(|error| registry_error(&error))
}

fn registry_error(error: &RegistryError) -> CliError {
    let message = error.to_string();
    match error {
        RegistryError::Unknown { known, .. } => CliError::usage(
            "capability_unknown",
            message,
            format!("pass --capability with one of {}", known.join(", ")),
        ),
        RegistryError::Malformed { .. } | RegistryError::Refused { .. } => CliError::input(
            "capability_config_invalid",
            message,
            "fix the configuration; each capability's README documents its fields",
        ),
        _ => CliError::usage(
            "capability_unwired",
            message,
            "run the goal from a host that has the provider, or bind another capability",
        ),
    }
}

/// Every actor a signed goal bound as `spec` is registers a key for: the capability and the
/// providers it polls through.
pub fn actors(spec: &GoalSpec) -> Result<Vec<Actor>, CliError> {
    binding_actors(spec.capability.as_deref())
}

/// [`actors`] of `binding`; none without one.
pub fn binding_actors(binding: Option<&CapabilityBinding>) -> Result<Vec<Actor>, CliError> {
    match binding {
        Some(binding) => Ok(bind(binding)?.actors()),
        None => Ok(Vec::new()),
    }
}

/// How `loopx run` reaches what the goal's capability asks it to poll.
#[derive(Debug, Args)]
pub struct WiringArgs {
    /// The GitHub REST API's base URL, for a bound prfix capability's pull requests (GitHub
    /// Enterprise: `https://HOST/api/v3`).
    #[arg(long, value_name = "URL", default_value = GITHUB_API)]
    github_api: String,
    /// The environment variable holding the GitHub token (never taken on the command line);
    /// requests are unauthenticated when it is unset.
    #[arg(long, value_name = "NAME", default_value = "GITHUB_TOKEN")]
    github_token_env: String,
    /// How often the streams the goal's capability asks for are polled at the least; every
    /// step when zero (a step that waits re-decides at least every 5 minutes).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    poll_every: Duration,
}

/// `engine` with the goal's capability judging every step and its streams polled; the actors
/// whose keys sign what they submit. `engine` as it was when the goal is bound to none.
pub fn wire(
    args: &WiringArgs,
    spec: &GoalSpec,
    engine: EngineBuilder,
    clock: &Arc<dyn Clock>,
) -> Result<(EngineBuilder, Vec<Actor>), CliError> {
    let Some(binding) = &spec.capability else {
        return Ok((engine, Vec::new()));
    };
    let bound = bind(binding)?;
    let actors = bound.actors();
    let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
    if bound
        .watches()
        .iter()
        .any(|w| w.provider.as_str() == GITHUB_PROVIDER)
    {
        providers.push(Arc::new(github(args, clock)?));
    }
    let engine = bound
        .wire(engine, &providers, args.poll_every)
        .map_err(|error| registry_error(&error))?;
    Ok((engine, actors))
}

fn github(args: &WiringArgs, clock: &Arc<dyn Clock>) -> Result<GitHubClient, CliError> {
    crate::cmd::observe::check_api_url("--github-api", "--github-token-env", &args.github_api)?;
    GitHubClient::new(
        SourceId::new(GITHUB_PROVIDER)?,
        &args.github_api,
        Token::from_env(&args.github_token_env),
        Duration::seconds(30),
        clock.clone(),
    )
    .map_err(|error| {
        CliError::usage(
            "github_client",
            error.to_string(),
            "check the machine's TLS setup",
        )
    })
}

/// The binding in a few words, as `goal show` and `status` say it.
pub fn words(binding: &CapabilityBinding) -> String {
    let config = binding.config.to_string();
    if config == "{}" {
        binding.name.to_string()
    } else {
        format!("{} {config}", binding.name)
    }
}
