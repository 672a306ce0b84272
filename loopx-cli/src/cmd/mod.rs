//! The verbs, one module per group. Each module defines its flags (clap `Args`) and a `run`
//! that returns the exit code of a success (or an error). A new verb group is a new module, a
//! variant of [`Verb`] and a line in [`run()`].

use clap::Subcommand;

use crate::context::Ctx;
use crate::error::{CliError, Exit};

mod brief;
mod capability;
mod dead_letters;
mod describe;
mod doctor;
mod effect;
mod evidence;
mod gate;
mod goal;
mod hooks;
mod init;
mod key;
mod lease;
mod log;
mod mcp;
pub mod next;
mod obligation;
mod observe;
mod ready;
mod revision;
mod run;
mod serve;
mod settle;
mod status;
mod todo;
mod transfer;
mod validate;
pub mod verdict;
mod view;

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Create the store (the SQLite file and its directory) or check that it can be opened,
    /// and make the local operator's key (of --as, or person:$USER) in the key directory.
    Init(init::InitArgs),
    /// Make or show an actor's signing key in the key directory.
    #[command(subcommand)]
    Key(key::KeyVerb),
    /// Create, show, list, amend, close or abandon goals.
    #[command(subcommand)]
    Goal(goal::GoalVerb),
    /// Add, list, defer, supersede, block, unblock or reassign todos.
    #[command(subcommand)]
    Todo(todo::TodoVerb),
    /// The next legal step for an agent: continue, wait, ask, replan, repair or terminal.
    Next(next::NextArgs),
    /// The work legal for an agent now across every goal of the store, most urgent first.
    Ready(ready::ReadyArgs),
    /// What a fresh session must know to take up an agent's work, as Markdown (`--json`: the
    /// same data): on the goal given, or across every goal the agent works on.
    Brief(brief::BriefArgs),
    /// loopx's tools for agent runtimes over MCP on standard input and output, acting as
    /// --as with its key (`claude mcp add loopx -- loopx mcp --as agent:NAME`).
    Mcp(mcp::McpArgs),
    /// Agent runtimes' hooks (Claude Code, Codex): install them, or answer one hook call.
    #[command(subcommand)]
    Hooks(hooks::HooksVerb),
    /// Acquire the lease on a todo (as an agent).
    Claim(lease::ClaimArgs),
    /// Begin a turn under a held lease, reserving its budget.
    Begin(lease::BeginArgs),
    /// Extend a held lease.
    Renew(lease::RenewArgs),
    /// Take your own turn in flight over in this session, under a new epoch: the session that
    /// began it can no longer renew or settle it.
    TakeOver(lease::TakeOverArgs),
    /// Give a lease up (a begun turn's reservation is returned uncharged).
    Release(lease::ReleaseArgs),
    /// Move a held lease to another agent, with a note for it, under a new epoch.
    Handoff(lease::HandoffArgs),
    /// Resolve a turn whose lease expired with its outcome unknown, after reading back what
    /// happened: absent (the todo reopens) or committed (settled as it happened).
    #[command(name = "resolve-outcome", visible_alias = "resolve")]
    ResolveOutcome(lease::ResolveArgs),
    /// Settle a turn: verdict, evidence, transition, charge and lease release in one commit.
    #[command(after_help = settle::SHAPE)]
    Settle(settle::SettleArgs),
    /// List the effects intended and not yet recorded (the outbox), or resolve one after
    /// reading it back.
    #[command(subcommand)]
    Effect(effect::EffectVerb),
    /// As a validator: sign a verdict on one turn and print it as JSON, for the agent to carry
    /// into its settlement (`loopx settle --verdict FILE`).
    Verdict(verdict::VerdictArgs),
    /// As a validator: check a criterion again at the workspace's current head, without a
    /// turn, and record the verdict as evidence (what refreshes stale evidence).
    Validate(validate::ValidateArgs),
    /// Open, list, answer, reject or withdraw gates (questions for a person).
    #[command(subcommand)]
    Gate(gate::GateVerb),
    /// Raise, list or discharge replan and repair obligations.
    #[command(subcommand)]
    Obligation(obligation::ObligationVerb),
    /// Record or list evidence.
    #[command(subcommand)]
    Evidence(evidence::EvidenceVerb),
    /// Observe the outside world: a git working tree, a process, a GitHub pull request (REST),
    /// a saved GitHub webhook.
    #[command(subcommand)]
    Observe(observe::ObserveVerb),
    /// The loop for one agent: observe, decide, run a turn with --exec, validate it with
    /// --validate, settle; until the decision is not `continue` (or, with --wait, needs a host).
    #[command(after_help = crate::error::RUN_EXIT_CODES)]
    Run(Box<run::RunArgs>),
    /// The goal's event history, with revisions (all of it, or a range).
    Log(log::LogArgs),
    /// The board: todos by column, open gates, budget left, criteria and evidence freshness;
    /// now, or as it stood at a past revision.
    Status(status::StatusArgs),
    /// Check the store: integrity, replay equals stored state, kernel invariants; with
    /// --verify, every commit against its recorded command and signature.
    Doctor(doctor::DoctorArgs),
    /// Run the service over the store until SIGTERM or SIGINT: `/healthz`, `/metrics`
    /// (Prometheus text) and, with --mcp-token, the MCP tools at `/mcp`; requests in flight
    /// finish before it exits.
    Serve(serve::ServeArgs),
    /// Print a shell's completion script for loopx (bash, zsh, fish, elvish, powershell).
    Completions(describe::CompletionsArgs),
    /// Print loopx's man page (roff), generated from the command line itself.
    Man,
    /// List, re-apply or dismiss the provider facts a goal refused to record (dead letters).
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(dead_letters::DeadLettersVerb),
    /// Write a goal's recorded events as JSON lines.
    Export(transfer::ExportArgs),
    /// Create a goal from exported JSON lines (validated by replay before anything is written).
    Import(transfer::ImportArgs),
}

/// Runs one verb.
pub async fn run(ctx: &Ctx, verb: Verb) -> Result<Exit, CliError> {
    match verb {
        Verb::Init(args) => init::run(ctx, &args).await,
        Verb::Key(verb) => key::run(ctx, &verb),
        Verb::Goal(verb) => goal::run(ctx, verb).await,
        Verb::Todo(verb) => todo::run(ctx, verb).await,
        Verb::Next(args) => next::run(ctx, &args).await,
        Verb::Ready(args) => ready::run(ctx, &args).await,
        Verb::Brief(args) => brief::run(ctx, &args).await,
        Verb::Hooks(verb) => hooks::run(ctx, verb).await,
        Verb::Mcp(args) => mcp::run(ctx, &args).await,
        Verb::Claim(args) => lease::claim(ctx, args).await,
        Verb::Begin(args) => lease::begin(ctx, &args).await,
        Verb::Renew(args) => lease::renew(ctx, &args).await,
        Verb::TakeOver(args) => lease::take_over(ctx, &args).await,
        Verb::Release(args) => lease::release(ctx, &args).await,
        Verb::Handoff(args) => lease::handoff(ctx, args).await,
        Verb::ResolveOutcome(args) => lease::resolve(ctx, args).await,
        Verb::Settle(args) => settle::run(ctx, &args).await,
        Verb::Effect(verb) => effect::run(ctx, verb).await,
        Verb::Verdict(args) => verdict::run(ctx, args),
        Verb::Validate(args) => validate::run(ctx, &args).await,
        Verb::Gate(verb) => gate::run(ctx, verb).await,
        Verb::Obligation(verb) => obligation::run(ctx, verb).await,
        Verb::Evidence(verb) => evidence::run(ctx, verb).await,
        Verb::Observe(verb) => observe::run(ctx, verb).await,
        Verb::Run(args) => Box::pin(run::run(ctx, *args)).await,
        Verb::Log(args) => log::run(ctx, &args).await,
        Verb::Status(args) => status::run(ctx, &args).await,
        Verb::Doctor(args) => doctor::run(ctx, &args).await,
        Verb::Serve(args) => serve::run(ctx, &args).await,
        Verb::Completions(args) => Ok(describe::completions(&args)),
        Verb::Man => describe::man(),
        Verb::DeadLetters(verb) => dead_letters::run(ctx, verb).await,
        Verb::Export(args) => transfer::export(ctx, &args).await,
        Verb::Import(args) => transfer::import(ctx, &args).await,
    }
}
