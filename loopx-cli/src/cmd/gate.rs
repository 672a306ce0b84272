//! `loopx gate open|list|answer|reject|withdraw`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use loopx_kernel::{
    Command, DecisionScope, ExpiryPolicy, GateAnswer, GateId, GateScope, NewGate, Timestamp, TodoId,
};
use serde_json::{Value, json};

use crate::cmd::view;
use crate::context::{Ctx, parse_flag_actor, parse_time, read_json, written_line};
use crate::error::{CliError, Exit};
use crate::output::{Style, Table, or_dash};

/// `loopx gate …`
#[derive(Debug, Subcommand)]
pub enum GateVerb {
    /// Open a gate from flags and/or a `NewGate` JSON file.
    Open(OpenArgs),
    /// List the goal's gates with their state now.
    List,
    /// Answer a gate yes (its owner only).
    Answer(AnswerArgs),
    /// Answer a gate no (its owner only).
    Reject(RejectArgs),
    /// Withdraw a pending gate (whoever opened it, or the goal owner).
    Withdraw(RejectArgs),
}

/// Flags of `loopx gate open`.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The gate's id.
    #[arg(long)]
    id: Option<GateId>,
    /// The question, as its owner will read it.
    #[arg(long)]
    question: Option<String>,
    /// Who may answer: person:NAME (or another KIND:NAME).
    #[arg(long, value_name = "KIND:NAME")]
    owner: Option<String>,
    /// A todo it blocks (repeatable).
    #[arg(long = "todo")]
    todos: Vec<TodoId>,
    /// A decision scope it blocks (repeatable).
    #[arg(long = "decision")]
    decisions: Vec<DecisionScope>,
    /// It blocks the whole goal.
    #[arg(long)]
    whole_goal: bool,
    /// When an answer is due (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    deadline: Option<Timestamp>,
    /// Past the deadline, keep asking (overdue) instead of expiring.
    #[arg(long)]
    keep_asking: bool,
    /// A `NewGate` as JSON (`-` for standard input); flags override or add to it.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Flags of `loopx gate answer`.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The gate.
    #[arg(long)]
    gate: GateId,
    /// The answer.
    #[arg(long)]
    answer: String,
}

/// Flags of `loopx gate reject` and `withdraw`.
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The gate.
    #[arg(long)]
    gate: GateId,
    /// Why.
    #[arg(long)]
    reason: String,
}

pub async fn run(ctx: &Ctx, verb: GateVerb) -> Result<Exit, CliError> {
    match verb {
        GateVerb::Open(args) => open(ctx, args).await,
        GateVerb::List => list(ctx).await,
        GateVerb::Answer(args) => {
            let command = Command::AnswerGate {
                gate: args.gate.clone(),
                answer: GateAnswer::Resolve {
                    answer: args.answer,
                },
            };
            write(ctx, &args.gate, &command, "answer").await
        }
        GateVerb::Reject(args) => {
            let command = Command::AnswerGate {
                gate: args.gate.clone(),
                answer: GateAnswer::Reject {
                    reason: args.reason,
                },
            };
            write(ctx, &args.gate, &command, "rejection").await
        }
        GateVerb::Withdraw(args) => {
            let command = Command::WithdrawGate {
                gate: args.gate.clone(),
                reason: args.reason,
            };
            write(ctx, &args.gate, &command, "withdrawal").await
        }
    }
}

async fn open(ctx: &Ctx, args: OpenArgs) -> Result<Exit, CliError> {
    let owner = args
        .owner
        .as_deref()
        .map(|owner| parse_flag_actor("--owner", owner))
        .transpose()?;
    let mut gate = match &args.file {
        Some(path) => read_json::<NewGate>(path, "gate")?,
        None => NewGate {
            id: args.id.clone().ok_or_else(|| {
                CliError::usage("gate_missing", "the new gate needs an id", "pass --id GATE")
            })?,
            question: args.question.clone().ok_or_else(|| {
                CliError::usage(
                    "question_missing",
                    "the new gate needs a question",
                    "pass --question TEXT",
                )
            })?,
            owner: owner.clone().ok_or_else(|| {
                CliError::usage(
                    "owner_missing",
                    "the new gate needs an owner who may answer it",
                    "pass --owner person:NAME",
                )
            })?,
            scope: GateScope::default(),
            deadline: None,
            on_expiry: ExpiryPolicy::Expire,
        },
    };
    if let Some(id) = args.id {
        gate.id = id;
    }
    if let Some(question) = args.question {
        gate.question = question;
    }
    if let Some(owner) = owner {
        gate.owner = owner;
    }
    gate.scope.todos.extend(args.todos);
    gate.scope.decisions.extend(args.decisions);
    gate.scope.whole_goal |= args.whole_goal;
    // Said here, naming the flags: the kernel refuses an unscoped gate in its own words.
    if gate.scope == GateScope::default() {
        return Err(CliError::usage(
            "gate_unscoped",
            "the gate says nothing it blocks; an unscoped gate would block everything silently",
            "pass --todo TODO (repeatable), --decision SCOPE (repeatable) or --whole-goal",
        ));
    }
    if args.deadline.is_some() {
        gate.deadline = args.deadline;
    }
    if args.keep_asking {
        gate.on_expiry = ExpiryPolicy::KeepAsking;
    }
    let id = gate.id.clone();
    write(ctx, &id, &Command::OpenGate { gate }, "opening").await
}

async fn list(ctx: &Ctx) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let gates: Vec<Value> = state
        .gates
        .values()
        .map(|g| view::gate(g, ctx.now))
        .collect();
    let value = json!({ "goal": goal, "revision": state.revision, "gates": gates });
    ctx.out.emit(&value, |out| {
        if state.gates.is_empty() {
            return "no gates".to_owned();
        }
        let mut table = Table::new(&["GATE", "STATE", "OWNER", "DEADLINE", "BLOCKS", "QUESTION"]);
        for gate in state.gates.values() {
            let effective = crate::output::compact(&gate.state_at(ctx.now));
            let effective = effective.trim_matches('"');
            let shown = if gate.state_at(ctx.now).is_pending() {
                out.paint(Style::Warn, effective)
            } else {
                effective.to_owned()
            };
            table.row(vec![
                gate.id.to_string(),
                shown,
                gate.owner.to_string(),
                or_dash(gate.deadline),
                scope_text(&gate.scope),
                gate.question.clone(),
            ]);
        }
        let mut text = table.render(out);
        // What the decided gates came to, in the answerers' own words, every line of them.
        for decided in state.gates.values().filter_map(|g| g.decided(ctx.now)) {
            text.push('\n');
            text.push_str(&loopx_kernel::words::decided_words(&decided, ""));
        }
        text
    });
    Ok(Exit::Ok)
}

/// What a gate blocks, in words.
pub fn scope_text(scope: &GateScope) -> String {
    loopx_server::views::scope_text(scope)
}

async fn write(ctx: &Ctx, gate: &GateId, command: &Command, what: &str) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let backend = ctx.open().await?;
    let done = ctx.submit(&backend, &goal, command).await?;
    let value = loopx_server::views::gate_written(&done, gate, ctx.now);
    ctx.out.emit(&value, |out| {
        written_line(out, &done, &format!("{what} of gate `{gate}`"))
    });
    Ok(Exit::Ok)
}
