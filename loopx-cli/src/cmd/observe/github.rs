//! `loopx observe github`: poll one pull request through the REST client and record what it
//! shows — the pull request, the latest review of each reviewer and the CI roll-up of its exact
//! head — as the GitHub provider. These are the observations the webhook path builds, from the
//! same code, so a fact already seen through a webhook fingerprints alike and records nothing.
//!
//! Every request is made before anything is written: a failed poll (network, rate limit,
//! refused token, unknown pull request, malformed body) writes nothing. The token is read from
//! the environment variable named by `--token-env` only, and never printed.

use std::fmt::Write as _;
use std::sync::Arc;

use clap::Args;
use loopx_kernel::ManualClock;
use loopx_kernel::facts::github::PullRequest;
use loopx_kernel::{Actor, Command, Duration, Observation, OperationId, SourceId};
use loopx_provider::github::rest::{GITHUB_API, GitHubClient, GitHubError, Token};
use serde_json::{Map, Value, json};

use crate::context::{Ctx, parse_duration, written, written_line};
use crate::error::{CliError, Exit};

/// The provider a poll records as when `--as` is not given.
const PROVIDER: &str = "github";

/// Flags of `loopx observe github`.
#[derive(Debug, Args)]
pub struct GitHubArgs {
    /// The repository, as owner/name.
    #[arg(long, value_name = "OWNER/NAME")]
    repo: String,
    /// The pull request number.
    #[arg(long, value_name = "N")]
    pull: u64,
    /// The REST API's base URL (GitHub Enterprise: `https://HOST/api/v3`).
    #[arg(long, value_name = "URL", default_value = GITHUB_API)]
    api_url: String,
    /// The environment variable holding the API token. The token is never taken on the command
    /// line; without this flag the requests are unauthenticated (public repositories only, at a
    /// lower rate limit).
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// The time limit of each request.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    timeout: Duration,
}

/// Polls the pull request and records each of its observations; unchanged ones are no-ops.
pub async fn run(ctx: &Ctx, args: &GitHubArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let actor = acting(ctx)?;
    let repo = check_repo(&args.repo)?;
    check_api_url("--api-url", "--token-env", &args.api_url)?;
    let token = token(args.token_env.as_deref())?;
    let given = ctx.operation_given()?;
    let backend = ctx.open().await?;
    // An unknown goal is found before GitHub is asked anything.
    ctx.load(&backend, &goal).await?;

    let observations = poll(ctx, args, repo, &actor, token).await?;

    let mut entries = Vec::with_capacity(observations.len());
    let mut lines = Vec::with_capacity(observations.len());
    let (mut recorded, mut unchanged, mut replayed) = (Vec::new(), Vec::new(), Vec::new());
    for (index, observation) in observations.iter().enumerate() {
        // One commit per observation; with --op each gets its own derived id, so a retry with
        // the same --op returns each first receipt.
        let operation = match &given {
            Some(op) => OperationId::new(format!("{op}.{}", index + 1))?,
            None => ctx.operation()?,
        };
        let command = Command::RecordObservation {
            observation: observation.clone(),
        };
        let done = ctx
            .submit_as(&backend, &goal, &actor, &command, &operation)
            .await?;
        let changed = !done.events.is_empty();
        let key = observation.key.to_string();
        let what = if done.replayed {
            replayed.push(key);
            format!("observation `{}`", observation.key)
        } else if changed {
            recorded.push(key);
            format!("observation `{}`", observation.key)
        } else {
            unchanged.push(key);
            format!("unchanged observation `{}` (no-op)", observation.key)
        };
        let mut entry = written(&done);
        entry.insert("recorded".into(), json!(changed));
        entry.insert("observation".into(), json!(observation));
        entries.push(Value::Object(entry));
        lines.push((done, what));
    }

    let head = observations
        .first()
        .and_then(Observation::read_facts::<PullRequest>)
        .and_then(|pr| pr.head_sha.into_known())
        .unwrap_or_default();
    let revision = observations
        .first()
        .map(|pr| pr.revision.to_string())
        .unwrap_or_default();
    let mut value = Map::new();
    value.insert(
        "github".into(),
        json!({ "repo": repo, "pull": args.pull, "head_sha": head, "revision": revision }),
    );
    value.insert("recorded".into(), json!(recorded));
    value.insert("unchanged".into(), json!(unchanged));
    value.insert("replayed".into(), json!(replayed));
    value.insert("observations".into(), Value::Array(entries));
    ctx.out.emit(&Value::Object(value), |out| {
        let mut text = String::new();
        for ((done, what), observation) in lines.iter().zip(&observations) {
            text.push_str(&written_line(out, done, what));
            let _ = writeln!(
                text,
                "  {} at {}: {}",
                observation.subject, observation.revision, observation.summary
            );
        }
        let _ = write!(
            text,
            "{repo}#{} at {revision}: {} recorded, {} unchanged",
            args.pull,
            recorded.len(),
            unchanged.len()
        );
        if !replayed.is_empty() {
            let _ = write!(text, ", {} already committed", replayed.len());
        }
        text.push('\n');
        text
    });
    Ok(Exit::Ok)
}

/// Makes every request of one poll; nothing is written here.
async fn poll(
    ctx: &Ctx,
    args: &GitHubArgs,
    repo: &str,
    actor: &Actor,
    token: Option<Token>,
) -> Result<Vec<Observation>, CliError> {
    let source = match actor {
        Actor::Provider(id) => id.clone(),
        _ => SourceId::new(PROVIDER)?,
    };
    let client = GitHubClient::new(
        source,
        args.api_url.as_str(),
        token,
        loopx_kernel::Duration::from_millis(args.timeout.as_millis().max(1)),
        Arc::new(ManualClock::new(ctx.now)),
    )
    .map_err(|e| github_error(&e))?;
    client
        .observe_pull(repo, args.pull)
        .await
        .map_err(|e| github_error(&e))
}

/// The acting actor: `--as` when given, otherwise the GitHub provider.
fn acting(ctx: &Ctx) -> Result<Actor, CliError> {
    match ctx.actor() {
        Ok(actor) => Ok(actor),
        Err(error) if error.code == "actor_missing" => {
            Ok(Actor::Provider(SourceId::new(PROVIDER)?))
        }
        Err(error) => Err(error),
    }
}

fn check_repo(repo: &str) -> Result<&str, CliError> {
    let ok = loopx_provider::github::rest::is_repository(repo);
    if ok {
        Ok(repo)
    } else {
        Err(CliError::usage(
            "invalid_repo",
            format!("`{repo}` is not an owner/name repository"),
            "pass --repo OWNER/NAME, e.g. --repo acme/cli",
        ))
    }
}

/// Refuses a base URL that is not http(s) or carries credentials; `flag` names where it came
/// from and `token_flag` where the token goes instead. The URL is never repeated: it might
/// hold credentials.
pub(crate) fn check_api_url(flag: &str, token_flag: &str, url: &str) -> Result<(), CliError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let authority = rest.and_then(|r| r.split('/').next()).unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        // The URL is not repeated: it might hold credentials.
        return Err(CliError::usage(
            "invalid_api_url",
            format!("{flag} is not an http(s) URL without credentials"),
            format!(
                "pass the API's base URL, e.g. {GITHUB_API} or https://HOST/api/v3; put the token in an environment variable named by {token_flag}"
            ),
        ));
    }
    Ok(())
}

fn token(var: Option<&str>) -> Result<Option<Token>, CliError> {
    let Some(var) = var else {
        return Ok(None);
    };
    Token::from_env(var).map(Some).ok_or_else(|| {
        CliError::usage(
            "token_missing",
            format!("the environment variable `{var}` holds no GitHub token"),
            "export the token in that variable (never pass it as a flag), or drop --token-env for unauthenticated requests",
        )
    })
}

const NOTHING: &str = "nothing was written";

/// A REST failure as a CLI error. The client's errors hold the method, the path and the
/// status, never the token, a header or the base URL.
fn github_error(error: &GitHubError) -> CliError {
    let message = error.to_string();
    match error {
        GitHubError::RateLimited { until, .. } => {
            let mut e = CliError::new(
                Exit::Other,
                "rate_limited",
                message,
                format!(
                    "GitHub's rate limit resets at {until}: poll again after it (a token, with --token-env, has a higher limit); {NOTHING}"
                ),
            );
            e.details = Some(json!({ "retry_after": until.to_string() }));
            e
        }
        GitHubError::Unauthorized { .. } => CliError::usage(
            "github_unauthorized",
            message,
            format!(
                "check the token in the variable named by --token-env: it may be missing, expired, or lack read access to pull requests, checks and statuses; {NOTHING}"
            ),
        ),
        GitHubError::NotFound { .. } => CliError::not_found(
            "github_not_found",
            message,
            format!(
                "check --repo and --pull (a private repository answers 404 without a token); {NOTHING}"
            ),
        ),
        GitHubError::Decode { .. } | GitHubError::Invalid(_) => CliError::input(
            "malformed_response",
            message,
            format!("the API's answer is not in GitHub's shape: check --api-url; {NOTHING}"),
        ),
        GitHubError::Timeout { .. } => CliError::new(
            Exit::Other,
            "github_timeout",
            message,
            format!("retry, or allow more time with --timeout; {NOTHING}"),
        ),
        GitHubError::Transport { .. } => CliError::new(
            Exit::Other,
            "github_unreachable",
            message,
            format!("check --api-url and the network; {NOTHING}"),
        ),
        _ => CliError::new(
            Exit::Other,
            "github_failed",
            message,
            format!("retry later; {NOTHING}"),
        ),
    }
}
