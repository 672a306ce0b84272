//! `loopx verdict`: a validator's signed verdict on one turn, printed as JSON for the agent to
//! carry into its settlement (`loopx settle --verdict FILE`).
//!
//! Run as the validator (`--as validator:NAME`) with its key (its key directory, `--keys DIR`, or its key file, `LOOPX_KEY`):
//! the verdict is signed over the goal, the todo, the turn, the lease epoch, the outcome, the
//! summary and the evidence (`loopx_kernel::verdict_message`). Nothing is read from or written
//! to the store, so the validator can run where the store is not (CI), and where the agent
//! cannot read the validator's key, which is what makes the verdict independent.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use loopx_kernel::{NewEvidence, TodoId, TurnId, Verdict, VerdictOutcome, sign_verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{Ctx, observed_now, read_json_with};
use crate::error::{CliError, Exit};
use crate::output::Output;

/// A verdict with the evidence it was signed over: what `loopx verdict` prints and
/// `loopx settle --verdict` reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedVerdict {
    /// The verdict, with the validator's signature.
    pub verdict: Verdict,
    /// The evidence the signature covers, in order (each with its `observed_at`).
    #[serde(default)]
    pub evidence: Vec<NewEvidence>,
}

/// A verdict's outcome as a flag value.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum OutcomeArg {
    /// The todo's postcondition holds.
    Passed,
    /// A bounded step is proven.
    Progress,
    /// Nothing was proven.
    Failed,
}

/// Flags of `loopx verdict`.
#[derive(Debug, Args)]
pub struct VerdictArgs {
    /// The todo the turn ran on.
    #[arg(long)]
    todo: TodoId,
    /// The turn.
    #[arg(long)]
    turn: TurnId,
    /// The lease epoch the turn ran under (what `loopx claim` printed).
    #[arg(long)]
    epoch: u64,
    /// The outcome.
    #[arg(long, value_enum)]
    outcome: OutcomeArg,
    /// A short explanation.
    #[arg(long, default_value = "")]
    summary: String,
    /// Evidence the verdict vouches for: a `NewEvidence` JSON object (repeatable, in order; one
    /// without `observed_at` is observed now).
    #[arg(long = "evidence", value_name = "FILE")]
    evidence: Vec<PathBuf>,
}

pub fn run(ctx: &Ctx, args: VerdictArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let validator = ctx.actor()?;
    let key = ctx.key_of(&validator)?.ok_or_else(|| {
        CliError::usage(
            "key_missing",
            format!("a verdict is signed with the key of `{validator}` and it has none here"),
            "run it where the validator's key is: its key directory (--keys DIR) or its key file (LOOPX_KEY)",
        )
    })?;
    let evidence = args
        .evidence
        .iter()
        .map(|path| {
            read_json_with::<NewEvidence>(path, "evidence", |value: &mut Value| {
                observed_now(value, ctx.now);
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let verdict = Verdict {
        validator,
        outcome: match args.outcome {
            OutcomeArg::Passed => VerdictOutcome::Passed,
            OutcomeArg::Progress => VerdictOutcome::Progress,
            OutcomeArg::Failed => VerdictOutcome::Failed,
        },
        summary: args.summary,
        signature: None,
    };
    let verdict = sign_verdict(
        &key.secret,
        &goal,
        &args.todo,
        &args.turn,
        args.epoch,
        verdict,
        &evidence,
    );
    let signed = SignedVerdict { verdict, evidence };
    // The document is the output in both modes: it is meant to be saved and carried.
    Output::document(&serde_json::to_value(&signed).unwrap_or(Value::Null));
    Ok(Exit::Ok)
}
