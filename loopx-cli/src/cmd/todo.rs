//! `loopx todo add|list|defer|supersede|block|unblock|reassign`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::{
    AgentId, Command, DecisionScope, GateId, NewTodo, ObservationKey, Priority, ResumeCondition,
    Timestamp, TodoId,
};
use serde_json::json;

use crate::cmd::view;
use crate::context::{Ctx, parse_time, read_json, written_line};
use crate::error::{CliError, Exit};

/// `loopx todo …`
#[derive(Debug, Subcommand)]
pub enum TodoVerb {
    /// Add a todo from flags and/or a `NewTodo` JSON file.
    Add(AddArgs),
    /// List the goal's todos.
    List,
    /// Set a todo aside until a condition holds.
    Defer(DeferArgs),
    /// Replace a todo; it never runs again.
    Supersede(SupersedeArgs),
    /// Record a blocking fact on a todo; it leaves every frontier until unblocked.
    Block(BlockArgs),
    /// Clear a todo's blocking fact; it returns to open.
    Unblock(UnblockArgs),
    /// Change which agent a todo is meant for (a live lease on it stays; use `loopx handoff`).
    Reassign(ReassignArgs),
}

/// Flags of `loopx todo block`.
#[derive(Debug, Args)]
pub struct BlockArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The blocking fact, for whoever unblocks it.
    #[arg(long)]
    reason: String,
    /// Why you may act on another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// Flags of `loopx todo unblock`.
#[derive(Debug, Args)]
pub struct UnblockArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// Why you may act on another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// Flags of `loopx todo reassign`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to", "anyone"])))]
pub struct ReassignArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// The agent it is meant for from now on.
    #[arg(long)]
    to: Option<AgentId>,
    /// Meant for any registered agent from now on.
    #[arg(long)]
    anyone: bool,
    /// Why you may act on another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Pri {
    P0,
    P1,
    P2,
    P3,
    P4,
}

/// Flags of `loopx todo add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The todo's id (or the file's `id`).
    #[arg(long)]
    id: Option<TodoId>,
    /// What to do.
    #[arg(long)]
    title: Option<String>,
    /// Priority (p0 most urgent; default p2).
    #[arg(long, value_enum)]
    priority: Option<Pri>,
    /// A todo that must be done first (repeatable).
    #[arg(long = "depends-on")]
    depends_on: Vec<TodoId>,
    /// A decision scope a gate must resolve first (repeatable).
    #[arg(long = "requires-decision")]
    requires_decisions: Vec<DecisionScope>,
    /// The agent it is meant for.
    #[arg(long)]
    assignee: Option<AgentId>,
    /// An agent that may never take it (repeatable).
    #[arg(long = "exclude-agent")]
    excluded: Vec<AgentId>,
    /// The work is safe to re-run after an expired lease.
    #[arg(long)]
    idempotent: bool,
    /// A `NewTodo` as JSON (`-` for standard input); flags override or add to it.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Flags of `loopx todo defer`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("until").required(true).args(["until_time", "until_todo", "until_gate", "until_observation"])))]
pub struct DeferArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// Resume at this time (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    until_time: Option<Timestamp>,
    /// Resume when this todo is done.
    #[arg(long)]
    until_todo: Option<TodoId>,
    /// Resume when this gate is settled.
    #[arg(long)]
    until_gate: Option<GateId>,
    /// Resume when this observation stream changes.
    #[arg(long)]
    until_observation: Option<ObservationKey>,
    /// Why you may act on another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

/// Flags of `loopx todo supersede`.
#[derive(Debug, Args)]
pub struct SupersedeArgs {
    /// The todo.
    #[arg(long)]
    todo: TodoId,
    /// Why.
    #[arg(long)]
    reason: String,
    /// Its replacement, a `NewTodo` as JSON, added in the same commit.
    #[arg(long)]
    replacement_file: Option<PathBuf>,
    /// Why you may act on another agent's todo (under a grant).
    #[arg(long)]
    grant_reason: Option<String>,
}

pub async fn run(ctx: &Ctx, verb: TodoVerb) -> Result<Exit, CliError> {
    match verb {
        TodoVerb::Add(args) => add(ctx, args).await,
        TodoVerb::List => list(ctx).await,
        TodoVerb::Defer(args) => {
            let until = if let Some(at) = args.until_time {
                ResumeCondition::At { at }
            } else if let Some(todo) = args.until_todo {
                ResumeCondition::TodoDone { todo }
            } else if let Some(gate) = args.until_gate {
                ResumeCondition::GateSettled { gate }
            } else if let Some(key) = args.until_observation {
                ResumeCondition::ObservationChanged { key }
            } else {
                return Err(CliError::usage(
                    "condition_missing",
                    "a deferral needs a resume condition",
                    "pass --until-time, --until-todo, --until-gate or --until-observation",
                ));
            };
            let todo = args.todo.clone();
            let command = Command::Defer {
                todo: args.todo,
                until,
                grant_reason: args.grant_reason,
            };
            write(ctx, &todo, &command, "deferral").await
        }
        TodoVerb::Supersede(args) => {
            let replacement = match &args.replacement_file {
                Some(path) => Some(read_json::<NewTodo>(path, "todo")?),
                None => None,
            };
            let todo = args.todo.clone();
            let command = Command::Supersede {
                todo: args.todo,
                reason: args.reason,
                replacement,
                grant_reason: args.grant_reason,
            };
            write(ctx, &todo, &command, "supersession").await
        }
        TodoVerb::Block(args) => {
            let todo = args.todo.clone();
            let command = Command::Block {
                todo: args.todo,
                reason: args.reason,
                grant_reason: args.grant_reason,
            };
            write(ctx, &todo, &command, "block").await
        }
        TodoVerb::Unblock(args) => {
            let todo = args.todo.clone();
            let command = Command::Unblock {
                todo: args.todo,
                grant_reason: args.grant_reason,
            };
            write(ctx, &todo, &command, "unblock").await
        }
        TodoVerb::Reassign(args) => {
            let todo = args.todo.clone();
            let command = Command::Reassign {
                todo: args.todo,
                to: args.to,
                grant_reason: args.grant_reason,
            };
            write(ctx, &todo, &command, "reassignment").await
        }
    }
}

async fn add(ctx: &Ctx, args: AddArgs) -> Result<Exit, CliError> {
    ctx.goal()?;
    ctx.actor()?;
    let mut todo = if let Some(path) = &args.file {
        read_json::<NewTodo>(path, "todo")?
    } else {
        let id = args.id.clone().ok_or_else(|| {
            CliError::usage("todo_missing", "the new todo needs an id", "pass --id TODO")
        })?;
        let title = args.title.clone().ok_or_else(|| {
            CliError::usage(
                "title_missing",
                "the new todo needs a title",
                "pass --title TEXT",
            )
        })?;
        NewTodo::advance(id, title)
    };
    if let Some(id) = args.id {
        todo.id = id;
    }
    if let Some(title) = args.title {
        todo.title = title;
    }
    if let Some(priority) = args.priority {
        todo.priority = match priority {
            Pri::P0 => Priority::P0,
            Pri::P1 => Priority::P1,
            Pri::P2 => Priority::P2,
            Pri::P3 => Priority::P3,
            Pri::P4 => Priority::P4,
        };
    }
    todo.depends_on.extend(args.depends_on);
    todo.requires_decisions.extend(args.requires_decisions);
    todo.excluded_agents.extend(args.excluded);
    if args.assignee.is_some() {
        todo.assignee = args.assignee;
    }
    todo.idempotent |= args.idempotent;
    let id = todo.id.clone();
    write(ctx, &id, &Command::AddTodo { todo }, "addition").await
}

async fn list(ctx: &Ctx) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let todos: Vec<_> = state.todos.values().collect();
    let value = json!({ "goal": goal, "revision": state.revision, "todos": todos });
    ctx.out.emit(&value, |out| {
        if todos.is_empty() {
            "no todos yet; add one with `loopx todo add`".to_owned()
        } else {
            view::todo_table(out, &todos, ctx.now)
        }
    });
    Ok(Exit::Ok)
}

async fn write(ctx: &Ctx, todo: &TodoId, command: &Command, what: &str) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let backend = ctx.open().await?;
    let done = ctx.submit(&backend, &goal, command).await?;
    let value = loopx_server::views::todo_written(&done, todo);
    ctx.out.emit(&value, |out| {
        written_line(out, &done, &format!("{what} of todo `{todo}`"))
    });
    Ok(Exit::Ok)
}
