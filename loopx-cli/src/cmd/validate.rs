//! `loopx validate`: check a criterion again at the workspace's current head, without a turn.
//! Evidence goes stale when the subject moves on (a new head) or was checked on a dirty tree;
//! this is how it is refreshed: the workspace's head is recorded as `provider:git` observes it
//! (as `run` does before every step), the validator runs its command, and its verdict is
//! recorded as the validator's evidence of the criterion's check about its subject, signed with
//! its key.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use loopx_kernel::{Actor, Command, CriterionId, Duration, EvidenceId, Outcome, SourceId};
use loopx_provider::clock::SystemClock;
use loopx_provider::fact::{bounded_id, id_component};
use loopx_provider::git::{Git, GitProvider};
use loopx_provider::validator::CommandValidator;
use serde_json::json;

use crate::cmd::run::{Bounds, GIT_PROVIDER, command};
use crate::context::{Ctx, parse_duration, written_line};
use crate::error::{CliError, Exit};
use crate::store::Backend;

/// Flags of `loopx validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The criterion to check again; its check and subject come from the goal.
    #[arg(long)]
    criterion: CriterionId,
    /// The validator's command: exit code zero passes. Split like `run --validate`.
    #[arg(long, value_name = "COMMAND")]
    validate: String,
    /// The git working tree the command runs in; the evidence is bound to its head.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Environment variables passed through to the command (PATH and HOME always are).
    #[arg(long = "pass-env", value_name = "NAME")]
    pass_env: Vec<String>,
    /// Longest time the command may take (e.g. 30m).
    #[arg(long, value_parser = parse_duration, default_value = "30m")]
    timeout: Duration,
}

pub async fn run(ctx: &Ctx, args: &ValidateArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let Actor::Validator(source) = ctx.actor()? else {
        return Err(CliError::usage(
            "validator_expected",
            "`validate` records a validator's evidence, so it acts as one",
            "pass --as validator:NAME (one the goal registers for the criterion's check)",
        ));
    };
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let Some(criterion) = state.spec.criteria.iter().find(|c| c.id == args.criterion) else {
        return Err(CliError::not_found(
            "criterion_unknown",
            format!("goal `{goal}` has no criterion `{}`", args.criterion),
            "`loopx goal show` lists its criteria",
        ));
    };
    let bounds = Bounds {
        timeout: args.timeout,
        pass_env: &args.pass_env,
    };
    let workspace = args.workspace.clone();
    record_head(ctx, &backend, &goal, &workspace, criterion.subject.as_str()).await?;
    let validator = CommandValidator::new(
        source,
        criterion.check.clone(),
        criterion.subject.clone(),
        &workspace,
        command(&bounds, "--validate", &args.validate, &workspace)?,
        Arc::new(SystemClock),
    );
    let verdict = validator.run().await.map_err(|error| {
        CliError::new(
            Exit::Other,
            "validator_failed",
            format!("the validator could not run: {error}"),
            "check --validate and that --workspace is a git working tree with a commit",
        )
    })?;
    let id = EvidenceId::new(bounded_id(&format!(
        "validate.{}.{}",
        id_component(criterion.check.as_str()),
        ctx.now.as_millis()
    )))?;
    let evidence = validator.evidence(id, &verdict);
    let passed = evidence.outcome == Outcome::Pass;
    let command = Command::RecordEvidence {
        evidence: evidence.clone(),
    };
    let done = ctx.submit(&backend, &goal, &command).await?;
    let value = json!({
        "goal": goal,
        "revision": done.state.revision,
        "replayed": done.replayed,
        "criterion": args.criterion,
        "evidence": evidence,
        "criterion_status": done.state.criterion_status(&args.criterion, ctx.now),
    });
    ctx.out.emit(&value, |out| {
        let what = format!(
            "evidence `{}` of `{}` at {}: {}",
            evidence.id,
            criterion.check,
            evidence.revision,
            if passed { "passed" } else { "failed" }
        );
        let mut text = written_line(out, &done, &what);
        let _ = writeln!(text, "  {}", evidence.summary);
        if let Some(status) = done.state.criterion_status(&args.criterion, ctx.now) {
            let _ = writeln!(
                text,
                "  {}",
                loopx_kernel::words::criterion_words(&args.criterion, &status)
            );
        }
        text
    });
    // A failing check is recorded, and says so in the exit, so that a script stops there.
    Ok(if passed { Exit::Ok } else { Exit::Other })
}

/// Records the workspace's head as `provider:git` observes it, on the stream `run` uses, so
/// that the evidence is judged against the revision it was established at (unchanged, it
/// records nothing).
async fn record_head(
    ctx: &Ctx,
    backend: &Backend,
    goal: &loopx_kernel::GoalId,
    workspace: &PathBuf,
    subject: &str,
) -> Result<(), CliError> {
    let source = SourceId::new(GIT_PROVIDER)?;
    let head = GitProvider::new(
        source.clone(),
        Git::new(),
        workspace,
        subject,
        Arc::new(SystemClock),
    );
    let observation = head
        .read(&format!("head:{subject}"))
        .await
        .map_err(|error| {
            CliError::new(
                Exit::Other,
                "workspace_unreadable",
                format!("the workspace's head cannot be read: {error}"),
                "--workspace must be a git working tree with a commit",
            )
        })?;
    let command = Command::RecordObservation { observation };
    ctx.submit_as(
        backend,
        goal,
        &Actor::Provider(source),
        &command,
        // Its own operation: with --op, the evidence's commit takes the id as given.
        &loopx_kernel::OperationId::new(format!("{}.head", ctx.operation()?))?,
    )
    .await?;
    Ok(())
}
