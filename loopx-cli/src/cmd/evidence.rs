//! `loopx evidence add|list`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::{
    CheckId, Command, Duration, EvidenceId, Lineage, NewEvidence, Outcome, Revision, Subject,
    Timestamp,
};
use serde_json::{Value, json};

use crate::cmd::view;
use crate::context::{Ctx, observed_now, parse_duration, parse_time, read_json_with, written_line};
use crate::error::{CliError, Exit};
use crate::output::{Style, Table};

/// `loopx evidence …`
#[derive(Debug, Subcommand)]
pub enum EvidenceVerb {
    /// Record evidence established outside a turn (validators, providers and the owner only).
    Add(AddArgs),
    /// List the goal's evidence with its freshness now.
    List,
}

/// An evidence outcome on the command line: the words of the wire format, with the earlier
/// `pass` and `fail` still accepted.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum PassFail {
    /// The check passed.
    #[value(alias = "pass")]
    Passed,
    /// The check failed.
    #[value(alias = "fail")]
    Failed,
}

/// Flags of `loopx evidence add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The evidence's id.
    #[arg(long)]
    id: Option<EvidenceId>,
    /// The check it is the result of.
    #[arg(long)]
    check: Option<CheckId>,
    /// What it is about (e.g. repo:acme/cli).
    #[arg(long)]
    subject: Option<Subject>,
    /// The revision it was established at (e.g. git:abc123).
    #[arg(long)]
    revision: Option<Revision>,
    /// Passed or failed (`pass` and `fail` are accepted too).
    #[arg(long, value_enum)]
    outcome: Option<PassFail>,
    /// A short explanation.
    #[arg(long)]
    summary: Option<String>,
    /// When it was observed (default: now).
    #[arg(long, value_parser = parse_time)]
    observed_at: Option<Timestamp>,
    /// How long it stays fresh (e.g. 1d).
    #[arg(long, value_parser = parse_duration)]
    ttl: Option<Duration>,
    /// A `NewEvidence` as JSON (`-` for standard input); flags override it, and a missing
    /// `observed_at` is now, as for the flag.
    #[arg(long)]
    file: Option<PathBuf>,
}

fn required<T>(value: Option<T>, flag: &str) -> Result<T, CliError> {
    value.ok_or_else(|| {
        CliError::usage(
            "evidence_incomplete",
            format!("the evidence needs {flag}"),
            format!("pass {flag}, or give the whole evidence with --file"),
        )
    })
}

pub async fn run(ctx: &Ctx, verb: EvidenceVerb) -> Result<Exit, CliError> {
    match verb {
        EvidenceVerb::Add(args) => add(ctx, args).await,
        EvidenceVerb::List => list(ctx).await,
    }
}

async fn add(ctx: &Ctx, args: AddArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let outcome = args.outcome.map(|o| match o {
        PassFail::Passed => Outcome::Pass,
        PassFail::Failed => Outcome::Fail,
    });
    let mut evidence = match &args.file {
        Some(path) => read_json_with::<NewEvidence>(path, "evidence", |value| {
            observed_now(value, ctx.now);
        })?,
        None => NewEvidence {
            id: required(args.id.clone(), "--id")?,
            check: required(args.check.clone(), "--check")?,
            subject: required(args.subject.clone(), "--subject")?,
            revision: required(args.revision.clone(), "--revision")?,
            outcome: required(outcome, "--outcome")?,
            summary: String::new(),
            observed_at: ctx.now,
            ttl: None,
            inputs: Lineage::default(),
        },
    };
    if let Some(id) = args.id {
        evidence.id = id;
    }
    if let Some(check) = args.check {
        evidence.check = check;
    }
    if let Some(subject) = args.subject {
        evidence.subject = subject;
    }
    if let Some(revision) = args.revision {
        evidence.revision = revision;
    }
    if let Some(outcome) = outcome {
        evidence.outcome = outcome;
    }
    if let Some(summary) = args.summary {
        evidence.summary = summary;
    }
    if let Some(at) = args.observed_at {
        evidence.observed_at = at;
    }
    if args.ttl.is_some() {
        evidence.ttl = args.ttl;
    }
    let id = evidence.id.clone();
    let backend = ctx.open().await?;
    let done = ctx
        .submit(&backend, &goal, &Command::RecordEvidence { evidence })
        .await?;
    let value = loopx_server::views::evidence_written(&done, &id, ctx.now);
    ctx.out.emit(&value, |out| {
        written_line(out, &done, &format!("evidence `{id}`"))
    });
    Ok(Exit::Ok)
}

async fn list(ctx: &Ctx) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let items: Vec<Value> = state
        .evidence
        .values()
        .map(|e| view::evidence(&state, e, ctx.now))
        .collect();
    let value = json!({ "goal": goal, "revision": state.revision, "evidence": items });
    ctx.out.emit(&value, |out| table(out, &state, ctx.now));
    Ok(Exit::Ok)
}

/// The evidence as a table with freshness.
pub fn table(
    out: &crate::output::Output,
    state: &loopx_kernel::GoalState,
    now: Timestamp,
) -> String {
    if state.evidence.is_empty() {
        return "no evidence\n".to_owned();
    }
    let mut table = Table::new(&[
        "EVIDENCE",
        "CHECK",
        "SUBJECT",
        "REVISION",
        "OUTCOME",
        "FRESHNESS",
    ]);
    for evidence in state.evidence.values() {
        let freshness = state.freshness(&evidence.id, now);
        let shown = if freshness.is_fresh() {
            out.paint(Style::Good, "fresh")
        } else {
            out.paint(
                Style::Warn,
                &format!("stale: {}", view::stale_words(&freshness)),
            )
        };
        let outcome = match evidence.outcome {
            Outcome::Pass => out.paint(Style::Good, "passed"),
            Outcome::Fail => out.paint(Style::Bad, "failed"),
        };
        table.row(vec![
            evidence.id.to_string(),
            evidence.check.to_string(),
            evidence.subject.to_string(),
            evidence.revision.to_string(),
            outcome,
            shown,
        ]);
    }
    table.render(out)
}
