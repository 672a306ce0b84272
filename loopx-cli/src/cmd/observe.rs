//! `loopx observe git|process|webhook|github`: run a provider once and record its
//! observations. An unchanged observation (same fingerprint) is recorded as a no-op.

mod github;

pub(crate) use github::check_api_url;

use std::fmt::Write as _;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use loopx_kernel::ManualClock;
use loopx_kernel::facts::process::ProcessResult;
use loopx_kernel::{Command, Duration, Observation, SourceId};
use loopx_provider::fact::FactBuilder;
use loopx_provider::git::{Git, GitProvider};
use loopx_provider::github::webhook::{WebhookError, WebhookVerifier, parse_event};
use loopx_provider::process::CommandSpec;
use serde_json::{Value, json};

use crate::context::{Ctx, parse_duration, read_bytes, written_line};
use crate::error::{CliError, Exit};

/// `loopx observe …`
#[derive(Debug, Subcommand)]
pub enum ObserveVerb {
    /// Observe a git working tree: head, branch, dirty state, worktree identity.
    Git(GitArgs),
    /// Run a command (an argument vector, no shell) and observe its outcome.
    Process(ProcessArgs),
    /// Ingest a saved GitHub webhook delivery (event name and body file).
    Webhook(WebhookArgs),
    /// Poll a GitHub pull request: its state, latest reviews and CI at its exact head.
    Github(github::GitHubArgs),
}

/// Flags of `loopx observe git`.
#[derive(Debug, Args)]
pub struct GitArgs {
    /// The working tree.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The observation stream (e.g. git-head:acme/cli).
    #[arg(long)]
    key: String,
    /// What it is about (e.g. repo:acme/cli).
    #[arg(long)]
    subject: String,
}

/// Flags of `loopx observe process`.
#[derive(Debug, Args)]
pub struct ProcessArgs {
    /// The observation stream.
    #[arg(long)]
    key: String,
    /// What it is about.
    #[arg(long)]
    subject: String,
    /// The revision it observes (default: `run:` and the start of the outcome's digest).
    #[arg(long)]
    revision: Option<String>,
    /// Working directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Time limit (e.g. 10m); the process group is killed past it.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    timeout: Duration,
    /// An environment variable passed on to the command (repeatable); the command otherwise
    /// starts with an empty environment.
    #[arg(long = "allow-env")]
    allow_env: Vec<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

/// Flags of `loopx observe webhook`.
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// The event name (the `X-GitHub-Event` header), e.g. `pull_request`.
    #[arg(long)]
    event: String,
    /// The delivery's body, as saved.
    #[arg(long)]
    body: PathBuf,
    /// The X-Hub-Signature-256 header value (sha256=…), checked against the secret.
    #[arg(long)]
    signature: Option<String>,
    /// The environment variable holding the webhook secret; with it, the signature is
    /// verified before the body is read. The secret is never taken on the command line.
    #[arg(long, value_name = "VAR")]
    secret_env: Option<String>,
}

pub async fn run(ctx: &Ctx, verb: ObserveVerb) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    if !matches!(verb, ObserveVerb::Github(_)) {
        ctx.actor()?;
    }
    let (observation, extra) = match verb {
        // A poll records several observations, as the GitHub provider unless --as says else.
        ObserveVerb::Github(args) => return github::run(ctx, &args).await,
        ObserveVerb::Git(args) => (git(ctx, &args).await?, Value::Null),
        ObserveVerb::Process(args) => process(ctx, &args).await?,
        ObserveVerb::Webhook(args) => (webhook(ctx, &args)?, Value::Null),
    };
    let backend = ctx.open().await?;
    let command = Command::RecordObservation {
        observation: observation.clone(),
    };
    let done = ctx.submit(&backend, &goal, &command).await?;
    let recorded = !done.events.is_empty();
    let mut value = loopx_server::views::observed(&done, &observation);
    if let (false, Some(map)) = (extra.is_null(), value.as_object_mut()) {
        map.insert("process".into(), extra);
    }
    ctx.out.emit(&value, |out| {
        let what = if recorded || done.replayed {
            format!("observation `{}`", observation.key)
        } else {
            format!("unchanged observation `{}` (no-op)", observation.key)
        };
        let mut text = written_line(out, &done, &what);
        let _ = writeln!(
            text,
            "  {} at {}: {}",
            observation.subject, observation.revision, observation.summary
        );
        text
    });
    Ok(Exit::Ok)
}

fn provider_failed(what: &str, error: &impl std::fmt::Display) -> CliError {
    CliError::new(
        Exit::Other,
        "provider_failed",
        format!("{what}: {error}"),
        "check the directory, the program and its permissions",
    )
}

fn invalid_id(error: &impl std::fmt::Display) -> CliError {
    CliError::usage(
        "invalid_id",
        error.to_string(),
        loopx_kernel::ids::ID_GRAMMAR,
    )
}

async fn git(ctx: &Ctx, args: &GitArgs) -> Result<Observation, CliError> {
    let clock = Arc::new(ManualClock::new(ctx.now));
    let provider = GitProvider::new(
        SourceId::new("git")?,
        Git::new(),
        &args.dir,
        args.subject.as_str(),
        clock,
    );
    provider
        .read(&args.key)
        .await
        .map_err(|e| provider_failed("git", &e))
}

async fn process(ctx: &Ctx, args: &ProcessArgs) -> Result<(Observation, Value), CliError> {
    let mut spec = CommandSpec::from_argv(&args.argv)
        .map_err(|e| CliError::usage("usage", e.to_string(), "pass the command after `--`"))?;
    spec = spec.timeout(args.timeout);
    if let Some(dir) = &args.dir {
        spec = spec.current_dir(dir);
    }
    for name in &args.allow_env {
        spec = spec.allow_env(name);
    }
    let output = spec
        .run()
        .await
        .map_err(|e| provider_failed("process", &e))?;
    let digest = output.digest();
    let revision = args
        .revision
        .clone()
        .unwrap_or_else(|| format!("run:{}", digest.get(..16).unwrap_or(&digest)));
    let observation = FactBuilder::new(&args.key, &args.subject, &revision)
        .summary(format!("{} ended with {}", spec.display(), output.exit))
        .facts(&ProcessResult {
            exit: output.exit.to_string(),
            success: output.exit.success(),
            stdout_sha256: output.stdout.sha256.clone(),
            stderr_sha256: output.stderr.sha256.clone(),
        })
        .build(ctx.now)
        .map_err(|e| invalid_id(&e))?;
    let extra = json!({
        "exit": output.exit,
        "success": output.exit.success(),
        "duration_ms": u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        "stdout_bytes": output.stdout.total_bytes,
        "stderr_bytes": output.stderr.total_bytes,
        "digest": digest,
    });
    Ok((observation, extra))
}

fn webhook_error(error: &WebhookError) -> CliError {
    let code = match error {
        WebhookError::TooLarge { .. } => "payload_too_large",
        WebhookError::MissingSignature => "signature_missing",
        WebhookError::MalformedSignature => "signature_malformed",
        WebhookError::BadSignature => "signature_mismatch",
        WebhookError::UnknownEvent { .. } => "unsupported_event",
        WebhookError::NoFact { .. } => "nothing_to_record",
        _ => "malformed_payload",
    };
    CliError::input(
        code,
        error.to_string(),
        "check the event name, the saved body and the signature; nothing was written",
    )
}

fn webhook(ctx: &Ctx, args: &WebhookArgs) -> Result<Observation, CliError> {
    let body = read_bytes(&args.body)?;
    match &args.secret_env {
        Some(var) => {
            let secret = std::env::var(var)
                .ok()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    CliError::usage(
                        "secret_missing",
                        format!("the environment variable `{var}` holds no webhook secret"),
                        "export the webhook's secret in that variable (never pass it as a flag)",
                    )
                })?;
            WebhookVerifier::new(secret.as_bytes())
                .ingest(&args.event, args.signature.as_deref(), &body, ctx.now)
                .map_err(|e| webhook_error(&e))
        }
        None if args.signature.is_some() => Err(CliError::usage(
            "secret_missing",
            "a signature was given but no secret to check it against",
            "pass --secret-env VAR naming the variable that holds the webhook secret",
        )),
        None => parse_event(&args.event, &body)
            .map_err(|e| webhook_error(&e))?
            .observation(ctx.now)
            .map_err(|e| {
                CliError::input(
                    "malformed_payload",
                    e.to_string(),
                    "the payload's fields do not form valid ids",
                )
            }),
    }
}
