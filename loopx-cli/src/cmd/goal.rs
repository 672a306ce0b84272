//! `loopx goal create|show|list|amend|close|abandon|retire`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use loopx_kernel::{
    Actor, AgentId, Amendment, BudgetExhaustion, CheckId, Command, Criterion, CriterionId,
    Duration, GoalId, GoalSpec, Identity, Limits, PersonId, Policy, PublicKey, RegisteredKey,
    SourceId, Subject,
};
use serde_json::{Value, json};

use crate::cmd::capability::{self, CapabilityArgs};
use crate::cmd::view;
use crate::context::{Ctx, parse_actor, parse_duration, read_json, written, written_line};
use crate::error::{CliError, Exit};
use crate::output::{Table, or_dash};

/// `loopx goal …`
#[derive(Debug, Subcommand)]
pub enum GoalVerb {
    /// Create a goal (as its owner, a person) from flags and/or a `GoalSpec` JSON file.
    Create(Box<CreateArgs>),
    /// Show one goal: objective, criteria and their status, budget, closure.
    Show,
    /// List every goal in the store with its standing.
    List,
    /// Amend the goal (owner only) from flags and/or a JSON array of amendments.
    Amend(Box<AmendArgs>),
    /// Record the intent to close the goal once every condition holds.
    Close(ReasonArgs),
    /// Give the goal up (owner only).
    Abandon(ReasonArgs),
    /// Drop the goal's inert work from its state (closed todos, evidence about replaced
    /// revisions, streams nothing follows) older than its policy's `retire_after`; `loopx log`
    /// and `status --at-revision` still show it. The engine does this on its own when a batch
    /// is due (owner, registered agents, capabilities).
    Retire,
}

/// Budget limits as flags.
#[derive(Debug, Args, Default)]
pub struct LimitArgs {
    /// Turn limit.
    #[arg(long)]
    turns: Option<u64>,
    /// Token limit.
    #[arg(long)]
    tokens: Option<u64>,
    /// Cost limit, in millionths of the currency unit.
    #[arg(long)]
    cost_micros: Option<u64>,
    /// Wall-clock limit, in milliseconds.
    #[arg(long)]
    wall_ms: Option<u64>,
}

impl LimitArgs {
    fn any(&self) -> bool {
        self.turns.is_some()
            || self.tokens.is_some()
            || self.cost_micros.is_some()
            || self.wall_ms.is_some()
    }

    fn over(&self, mut limits: Limits) -> Limits {
        limits.turns = self.turns.or(limits.turns);
        limits.tokens = self.tokens.or(limits.tokens);
        limits.cost_micros = self.cost_micros.or(limits.cost_micros);
        limits.wall_ms = self.wall_ms.or(limits.wall_ms);
        limits
    }
}

/// A budget asked for by name.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum BudgetWord {
    /// No limit at all.
    Unlimited,
}

/// What exhausted budget does.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Exhaustion {
    /// Ask the owner for more.
    Ask,
    /// Wait quietly.
    Wait,
}

/// How the goal knows who issued a command.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum IdentityWord {
    /// Every command is signed by a key registered with the goal (the default).
    Signed,
    /// Every actor is taken at its word: for local experiments only.
    Declared,
}

/// Parses `ACTOR=KEY` (`agent:agent-a=ed25519:…`).
fn actor_key(text: &str) -> Result<RegisteredKey, CliError> {
    let bad = |problem: String| {
        CliError::usage(
            "invalid_key",
            problem,
            "pass ACTOR=KEY, e.g. agent:agent-a=ed25519:… (`loopx key new agent:agent-a` prints the key)",
        )
    };
    let (actor, key) = text
        .split_once('=')
        .ok_or_else(|| bad(format!("`{text}` is not ACTOR=KEY")))?;
    let actor = parse_actor(actor.trim())?;
    let key = PublicKey::parse(key.trim()).map_err(|e| bad(format!("`{text}`: {e}")))?;
    Ok(RegisteredKey { actor, key })
}

/// The amendments of `--map-login` and `--unmap-login`, in that order.
fn login_amendments(map: &[String], unmap: &[String]) -> Result<Vec<Amendment>, CliError> {
    let mut amendments = Vec::new();
    for text in map {
        amendments.push(map_login(text)?);
    }
    for text in unmap {
        let (provider, login) = provider_login(text)?;
        amendments.push(Amendment::UnmapLogin { provider, login });
    }
    Ok(amendments)
}

/// `PERSON=PROVIDER:LOGIN` as the amendment mapping the login to the person; the kernel
/// checks the login itself.
fn map_login(text: &str) -> Result<Amendment, CliError> {
    let (person, login) = text
        .split_once('=')
        .ok_or_else(|| login_usage(format!("`{text}` is not PERSON=PROVIDER:LOGIN")))?;
    let person = PersonId::new(person.trim()).map_err(|e| login_usage(format!("`{text}`: {e}")))?;
    let (provider, login) = provider_login(login)?;
    Ok(Amendment::MapLogin {
        person,
        provider,
        login,
    })
}

/// `PROVIDER:LOGIN`, e.g. `github:maria-gh`.
fn provider_login(text: &str) -> Result<(SourceId, String), CliError> {
    let (provider, login) = text
        .split_once(':')
        .ok_or_else(|| login_usage(format!("`{text}` is not PROVIDER:LOGIN")))?;
    let provider =
        SourceId::new(provider.trim()).map_err(|e| login_usage(format!("`{text}`: {e}")))?;
    Ok((provider, login.trim().to_owned()))
}

fn login_usage(problem: String) -> CliError {
    CliError::usage(
        "invalid_login",
        problem,
        "pass PERSON=PROVIDER:LOGIN to --map-login (e.g. maria=github:maria-gh) and PROVIDER:LOGIN to --unmap-login",
    )
}

/// The key of `actor` this machine holds, without making one: `LOOPX_KEY` for the acting
/// actor, else its file in its key directory.
fn held_key(ctx: &Ctx, actor: &Actor) -> Result<Option<PublicKey>, CliError> {
    // `LOOPX_KEY` is the acting actor's: the others' keys come from their directory only.
    let acting = ctx.actor_opt()?.as_ref() == Some(actor);
    let held = if acting {
        ctx.key_of(actor)?
    } else {
        ctx.key_dir(actor).get(actor)?
    };
    Ok(held.map(|key| key.public_key()))
}

/// The key of `actor` this machine signs with, made in its key directory when it has none (an
/// owner's own key, or the key of an agent the owner registers and runs here); whether it was
/// made. A provider's, validator's or capability's key is made in the service's key directory,
/// never where agents read theirs.
fn local_key(ctx: &Ctx, actor: &Actor) -> Result<(PublicKey, bool), CliError> {
    if let Some(key) = held_key(ctx, actor)? {
        return Ok((key, false));
    }
    let dir = ctx.key_dir(actor);
    match dir.create(actor) {
        Ok(key) => Ok((key.public_key(), true)),
        // Made by a concurrent invocation: read it.
        Err(loopx_provider::keys::KeyError::Exists { .. }) => match dir.get(actor)? {
            Some(key) => Ok((key.public_key(), false)),
            None => Err(loopx_provider::keys::KeyError::NotFound {
                actor: actor.clone(),
                dir: dir.path().to_owned(),
            }
            .into()),
        },
        Err(error) => Err(error.into()),
    }
}

/// The provider `loopx run` observes the workspace with, whose observations a signed goal
/// must be able to verify.
fn git_provider() -> Result<Actor, CliError> {
    Ok(Actor::Provider(loopx_kernel::SourceId::new(
        crate::cmd::run::GIT_PROVIDER,
    )?))
}

/// The validator `loopx run` checks `agent`'s turns with (`validator:validate.AGENT`): its key
/// is made in the service's key directory, apart from the agent's; independence is real when
/// the agent's OS user cannot read that directory.
fn run_validator(agent: &loopx_kernel::AgentId) -> Result<Actor, CliError> {
    Ok(Actor::Validator(crate::cmd::run::validator_source(agent)?))
}

/// The keys made in the key directory, as `goal create` and `goal amend` report them.
fn made_view(made: &[RegisteredKey]) -> Value {
    json!(
        made.iter()
            .map(|k| json!({ "actor": k.actor.to_string(), "key": k.key }))
            .collect::<Vec<_>>()
    )
}

fn made_text(ctx: &Ctx, made: &[RegisteredKey]) -> String {
    use std::fmt::Write as _;
    made.iter().fold(String::new(), |mut text, k| {
        let _ = writeln!(
            text,
            "made the key of {} ({}) in {}",
            k.actor,
            k.key,
            ctx.key_dir(&k.actor).file_of(&k.actor).display()
        );
        text
    })
}

/// On a signed spec, registers the key this machine holds for the owner, each agent,
/// `provider:git`, the validator `loopx run` uses for each agent, and the goal's capability
/// and the providers it polls through (`capability:prfix`, `provider:github`), when the spec
/// registers none for them (made in the key directory when missing); the keys made.
fn register_local_keys(ctx: &Ctx, spec: &mut GoalSpec) -> Result<Vec<RegisteredKey>, CliError> {
    let mut made = Vec::new();
    if spec.identity != Identity::Signed {
        return Ok(made);
    }
    let validators = spec
        .agents
        .iter()
        .map(run_validator)
        .collect::<Result<Vec<_>, _>>()?;
    let locals = std::iter::once(spec.owner_actor())
        .chain(spec.agents.iter().cloned().map(Actor::Agent))
        .chain(std::iter::once(git_provider()?))
        .chain(validators)
        .chain(capability::actors(spec)?)
        .collect::<Vec<_>>();
    for actor in locals {
        if spec.keys_of(&actor).next().is_some() {
            continue;
        }
        let (key, new) = local_key(ctx, &actor)?;
        let registered = RegisteredKey { actor, key };
        if new {
            made.push(registered.clone());
        }
        spec.keys.push(registered);
    }
    Ok(made)
}

/// Refuses a signed goal whose owner already has keys registered on other goals of this store
/// when the key it would register is none of them: a person's identity is not taken anew by
/// whoever creates a goal in their name. `new_owner_key` says the person really has a new key.
/// Reads every goal of the store once (a CLI verb's cost, said in the README); a damaged goal
/// is passed over.
async fn owner_key_known(
    ctx: &Ctx,
    backend: &crate::store::Backend,
    spec: &GoalSpec,
    new_owner_key: bool,
) -> Result<(), CliError> {
    let owner = spec.owner_actor();
    if spec.identity != Identity::Signed || new_owner_key {
        return Ok(());
    }
    let mut offered: Vec<PublicKey> = spec.keys_of(&owner).copied().collect();
    if offered.is_empty() {
        offered.extend(held_key(ctx, &owner)?);
    }
    let mut elsewhere = Vec::new();
    for summary in backend.store().goals(ctx.now).await? {
        // A goal whose history is damaged is neither read nor written (`loopx doctor` names
        // it): its keys are unknown here, and it stops no other goal from being created.
        let state = match backend.store().load(&summary.goal).await {
            Ok(Some(state)) => state,
            Ok(None)
            | Err(
                loopx_kernel::seams::StoreError::HistoryDamaged { .. }
                | loopx_kernel::seams::StoreError::Corrupt { .. },
            ) => continue,
            Err(error) => return Err(error.into()),
        };
        let mut keys = state.spec.keys_of(&owner).peekable();
        if keys.peek().is_none() {
            continue;
        }
        if keys.any(|key| offered.contains(key)) {
            return Ok(());
        }
        elsewhere.push(summary.goal);
    }
    if elsewhere.is_empty() {
        return Ok(());
    }
    Err(owner_key_differs(&owner, &elsewhere))
}

/// `owner_key_differs`, naming the person and (up to five of) the goals that know their key.
fn owner_key_differs(owner: &Actor, goals: &[GoalId]) -> CliError {
    let shown: Vec<String> = goals.iter().take(5).map(|g| format!("`{g}`")).collect();
    let more = goals.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    CliError::new(
        Exit::Refused,
        "owner_key_differs",
        format!(
            "{owner} is registered on goal(s) {}{more} of this store with another key than the one this goal would register for them; nothing was written",
            shown.join(", ")
        ),
        format!(
            "create the goal as {owner} with the key they already use (their `--keys` directory or `LOOPX_KEY`), or register it with --register-key {owner}=KEY (`loopx --goal {} goal show` lists it); if {owner} really has a new key, pass --new-owner-key",
            goals.first().map_or_else(String::new, ToString::to_string)
        ),
    )
}

/// Flags of `loopx goal create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The goal's id (or --goal, or the file's `id`).
    #[arg(long)]
    id: Option<GoalId>,
    /// What the work is for.
    #[arg(long)]
    objective: Option<String>,
    /// The owning person (default: the acting person).
    #[arg(long)]
    owner: Option<PersonId>,
    /// An acceptance criterion: ID,CHECK,SUBJECT,TEXT (repeatable).
    #[arg(long = "criterion", value_name = "ID,CHECK,SUBJECT,TEXT")]
    criteria: Vec<String>,
    /// An agent that may claim work (repeatable).
    #[arg(long = "agent")]
    agents: Vec<AgentId>,
    #[command(flatten)]
    limits: LimitArgs,
    /// `unlimited`: no budget limit on any dimension the limit flags do not name. Without it a
    /// goal gets the default budget (200 turns, 8 hours of wall-clock time inside turns).
    #[arg(long, value_enum, value_name = "unlimited")]
    budget: Option<BudgetWord>,
    /// Lease time-to-live when a claim does not say (e.g. 15m).
    #[arg(long, value_parser = parse_duration)]
    lease_ttl: Option<Duration>,
    /// What exhausted budget does.
    #[arg(long, value_enum)]
    on_budget_exhausted: Option<Exhaustion>,
    /// `signed` (the default): every command must carry its actor's signature by a registered
    /// key; the owner's key and each `--agent`'s come from the key directory, those of
    /// `provider:git` (which `loopx run` observes the workspace with), of each agent's `run`
    /// validator and of the capability and its providers from the service's key directory, made
    /// there when missing.
    /// `declared`: actors are taken at their word, for local experiments only.
    #[arg(long, value_enum)]
    identity: Option<IdentityWord>,
    /// Register an actor's public key: ACTOR=KEY, e.g. validator:ci=ed25519:… (repeatable).
    #[arg(long = "register-key", value_name = "ACTOR=KEY")]
    register_keys: Vec<String>,
    /// The owner has a new key: register it although other goals of this store know the owner
    /// by another one (without it such a goal is refused, `owner_key_differs`).
    #[arg(long)]
    new_owner_key: bool,
    #[command(flatten)]
    capability: CapabilityArgs,
    /// A `GoalSpec` as JSON (`-` for standard input); flags override or add to it.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// Flags of `loopx goal amend`.
#[derive(Debug, Args)]
pub struct AmendArgs {
    /// The goal revision the amendments were written against (default: the current one).
    #[arg(long)]
    expected_revision: Option<u64>,
    /// Replace the objective.
    #[arg(long)]
    objective: Option<String>,
    /// Add a criterion: ID,CHECK,SUBJECT,TEXT (repeatable).
    #[arg(long = "add-criterion", value_name = "ID,CHECK,SUBJECT,TEXT")]
    add_criteria: Vec<String>,
    /// Remove a criterion (repeatable).
    #[arg(long = "remove-criterion")]
    remove_criteria: Vec<CriterionId>,
    /// Register an agent (repeatable); on a signed goal its key (and `provider:git`'s) comes
    /// from the key directory, made there when missing, unless one is registered already.
    #[arg(long = "register-agent")]
    register: Vec<AgentId>,
    /// Unregister an agent (repeatable).
    #[arg(long = "unregister-agent")]
    unregister: Vec<AgentId>,
    /// Register a validator for a check, CHECK=KIND:NAME (repeatable): on a signed goal the
    /// check's evidence then counts only from its registered validators.
    #[arg(long = "register-validator", value_name = "CHECK=ACTOR")]
    register_validators: Vec<String>,
    /// Withdraw a validator from a check, CHECK=KIND:NAME (repeatable).
    #[arg(long = "unregister-validator", value_name = "CHECK=ACTOR")]
    unregister_validators: Vec<String>,
    /// Register an actor's public key: ACTOR=KEY, e.g. agent:agent-b=ed25519:… (repeatable);
    /// its commands signed with that key are accepted from then on.
    #[arg(long = "register-key", value_name = "ACTOR=KEY")]
    register_keys: Vec<String>,
    /// Withdraw an actor's key: ACTOR=KEY (repeatable); the owner keeps at least one.
    #[arg(long = "revoke-key", value_name = "ACTOR=KEY")]
    revoke_keys: Vec<String>,
    /// Say who a provider's login is: PERSON=PROVIDER:LOGIN, e.g. maria=github:maria-gh
    /// (repeatable). Her `/loopx answer` comments in the pull request, relayed by `loopx serve`,
    /// then answer the gates she owns, and those gates are delivered to her there.
    #[arg(long = "map-login", value_name = "PERSON=PROVIDER:LOGIN")]
    map_logins: Vec<String>,
    /// Withdraw a login's mapping: PROVIDER:LOGIN (repeatable).
    #[arg(long = "unmap-login", value_name = "PROVIDER:LOGIN")]
    unmap_logins: Vec<String>,
    /// New budget limits (unnamed dimensions keep their current limit).
    #[command(flatten)]
    limits: LimitArgs,
    /// Bind the goal to this capability instead (with its flags as at creation); on a signed
    /// goal its key, and its providers', come from the key directory unless registered.
    #[command(flatten)]
    capability: CapabilityArgs,
    /// Bind the goal to no capability.
    #[arg(long, conflicts_with = "capability")]
    no_capability: bool,
    /// How long inert work (closed todos, evidence about replaced revisions, streams nothing
    /// follows) stays in the goal's state before `goal retire` or the engine may drop it:
    /// a span (`90s`, `30m`, `2h`, `7d`) or `never`.
    #[arg(long = "retire-after", value_name = "SPAN|never", value_parser = retire_after)]
    retire_after: Option<RetireAfter>,
    /// A JSON array of amendments (`-` for standard input), applied before the flags'.
    #[arg(long)]
    file: Option<PathBuf>,
}

/// The budget and policy amendments the flags ask for, over the goal's current ones.
fn tunables(limits: &LimitArgs, retire: Option<RetireAfter>, spec: &GoalSpec) -> Vec<Amendment> {
    let mut amendments = Vec::new();
    if limits.any() {
        amendments.push(Amendment::SetBudget {
            limits: limits.over(spec.budget),
        });
    }
    if let Some(RetireAfter(after)) = retire {
        amendments.push(Amendment::SetPolicy {
            policy: Policy {
                retire_after: after,
                ..spec.policy.clone()
            },
        });
    }
    amendments
}

/// `--retire-after`: a span, or `never` (`None`).
#[derive(Debug, Clone, Copy)]
struct RetireAfter(Option<Duration>);

fn retire_after(text: &str) -> Result<RetireAfter, String> {
    if text.trim() == "never" {
        return Ok(RetireAfter(None));
    }
    crate::context::parse_duration(text).map(|span| RetireAfter(Some(span)))
}

/// A reason.
#[derive(Debug, Args)]
pub struct ReasonArgs {
    /// Why.
    #[arg(long)]
    reason: String,
}

pub async fn run(ctx: &Ctx, verb: GoalVerb) -> Result<Exit, CliError> {
    match verb {
        GoalVerb::Create(args) => create(ctx, *args).await,
        GoalVerb::Show => show(ctx).await,
        GoalVerb::List => list(ctx).await,
        GoalVerb::Amend(args) => amend(ctx, *args).await,
        GoalVerb::Close(args) => {
            let command = Command::DeclareClosure {
                reason: args.reason,
            };
            write(ctx, &command, "closure intent").await
        }
        GoalVerb::Abandon(args) => {
            let command = Command::AbandonGoal {
                reason: args.reason,
            };
            write(ctx, &command, "abandonment").await
        }
        GoalVerb::Retire => write(ctx, &Command::Retire {}, "retirement").await,
    }
}

/// Parses `CHECK=KIND:NAME`.
fn check_and_validator(text: &str) -> Result<(CheckId, Actor), CliError> {
    let Some((check, actor)) = text.split_once('=') else {
        return Err(CliError::usage(
            "invalid_validator",
            format!("`{text}` is not a check and its validator: expected CHECK=KIND:NAME"),
            "e.g. --register-validator tests=validator:ci",
        ));
    };
    Ok((
        CheckId::new(check.trim())?,
        crate::context::parse_actor(actor.trim())?,
    ))
}

/// Parses `ID,CHECK,SUBJECT,TEXT`.
pub fn criterion(text: &str) -> Result<Criterion, CliError> {
    let parts: Vec<&str> = text.splitn(4, ',').collect();
    let [id, check, subject, words] = parts.as_slice() else {
        return Err(CliError::usage(
            "invalid_criterion",
            format!("`{text}` is not a criterion: expected ID,CHECK,SUBJECT,TEXT"),
            "e.g. --criterion 'text-unchanged,tests.text_output,repo:acme/cli,default text output unchanged'",
        ));
    };
    Ok(Criterion {
        id: CriterionId::new(id.trim())?,
        check: CheckId::new(check.trim())?,
        subject: Subject::new(subject.trim())?,
        text: words.trim().to_owned(),
    })
}

/// The policy and identity flags of `goal create` over `spec`.
fn policy_and_identity(
    lease_ttl: Option<Duration>,
    on_budget_exhausted: Option<Exhaustion>,
    identity: Option<IdentityWord>,
    spec: &mut GoalSpec,
) {
    if let Some(ttl) = lease_ttl {
        spec.policy.lease_ttl = ttl;
    }
    if let Some(on) = on_budget_exhausted {
        spec.policy.on_budget_exhausted = match on {
            Exhaustion::Ask => BudgetExhaustion::Ask,
            Exhaustion::Wait => BudgetExhaustion::Wait,
        };
    }
    match identity {
        Some(IdentityWord::Signed) => spec.identity = Identity::Signed,
        Some(IdentityWord::Declared) => spec.identity = Identity::Declared,
        None => {}
    }
}

/// Binds `spec` to the capability the flags name; a spec file's binding, when the flags name
/// none, is checked as theirs is: both before anything is written.
fn bind_capability(flags: &CapabilityArgs, spec: &mut GoalSpec) -> Result<(), CliError> {
    if let Some(binding) = flags.binding()? {
        spec.capability = Some(Box::new(binding));
    } else if let Some(binding) = &spec.capability {
        spec.capability = Some(Box::new(capability::follow(binding)?));
    }
    Ok(())
}

async fn create(ctx: &Ctx, args: CreateArgs) -> Result<Exit, CliError> {
    let actor = ctx.actor()?;
    let mut spec = match &args.file {
        Some(path) => Some(read_json::<GoalSpec>(path, "goal spec")?),
        None => None,
    };
    let id = args
        .id
        .or(ctx.goal_opt()?)
        .or_else(|| spec.as_ref().map(|s| s.id.clone()))
        .ok_or_else(|| {
            CliError::usage(
                "goal_missing",
                "the new goal needs an id",
                "pass --id GOAL (or --goal), or an `id` in --file",
            )
        })?;
    let owner = match (args.owner, &actor, &spec) {
        (Some(owner), _, _) => owner,
        (None, _, Some(spec)) => spec.owner.clone(),
        (None, Actor::Person(person), None) => person.clone(),
        (None, _, None) => {
            return Err(CliError::usage(
                "owner_missing",
                "a goal is owned by a person and none was named",
                "act as the owner (--as person:NAME) or pass --owner NAME",
            ));
        }
    };
    let criteria = args
        .criteria
        .iter()
        .map(|c| criterion(c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut spec = match spec.take() {
        Some(spec) => spec,
        None => GoalSpec {
            id: id.clone(),
            objective: args.objective.clone().ok_or_else(|| {
                CliError::usage(
                    "objective_missing",
                    "the new goal needs an objective",
                    "pass --objective TEXT, or a GoalSpec with --file",
                )
            })?,
            owner: owner.clone(),
            criteria: Vec::new(),
            agents: std::collections::BTreeSet::new(),
            budget: Limits::GOAL_DEFAULT,
            policy: Policy::default(),
            grants: BTreeMap::new(),
            identity: Identity::Signed,
            keys: Vec::new(),
            validators: std::collections::BTreeMap::new(),
            capability: None,
        },
    };
    bind_capability(&args.capability, &mut spec)?;
    policy_and_identity(
        args.lease_ttl,
        args.on_budget_exhausted,
        args.identity,
        &mut spec,
    );
    spec.id = id.clone();
    spec.owner = owner;
    if let Some(objective) = args.objective {
        spec.objective = objective;
    }
    spec.criteria.extend(criteria);
    spec.agents.extend(args.agents);
    if let Some(BudgetWord::Unlimited) = args.budget {
        spec.budget = Limits::UNLIMITED;
    }
    spec.budget = args.limits.over(spec.budget);
    for text in &args.register_keys {
        spec.keys.push(actor_key(text)?);
    }
    let backend = ctx.open().await?;
    // Before any key is made: the owner's identity is the one this store already knows.
    owner_key_known(ctx, &backend, &spec, args.new_owner_key).await?;
    // The store must open before a key is made for it.
    let made = register_local_keys(ctx, &mut spec)?;
    let done = ctx
        .submit(&backend, &id, &Command::CreateGoal { spec })
        .await?;
    let mut value = written(&done);
    value.insert("goal".into(), view::goal(&done.state, ctx.now));
    value.insert("keys_made".into(), made_view(&made));
    ctx.out.emit(&Value::Object(value), |out| {
        let mut text = made_text(ctx, &made);
        text.push_str(&written_line(out, &done, &format!("goal `{id}`")));
        text.push_str(&view::goal_text(out, &done.state, ctx.now));
        text
    });
    Ok(Exit::Ok)
}

async fn show(ctx: &Ctx) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let value = json!({ "goal": view::goal(&state, ctx.now) });
    ctx.out
        .emit(&value, |out| view::goal_text(out, &state, ctx.now));
    Ok(Exit::Ok)
}

async fn list(ctx: &Ctx) -> Result<Exit, CliError> {
    let backend = ctx.open().await?;
    let goals = backend.store().goals(ctx.now).await?;
    let value = json!({ "goals": goals });
    ctx.out.emit(&value, |out| {
        if goals.is_empty() {
            return "no goals yet; create one with `loopx goal create`".to_owned();
        }
        let mut table = Table::new(&["GOAL", "STATUS", "REVISION", "NEXT WAKE", "OBJECTIVE"]);
        for goal in &goals {
            table.row(vec![
                goal.goal.to_string(),
                crate::output::compact(&goal.status)
                    .trim_matches('"')
                    .to_owned(),
                goal.revision.to_string(),
                or_dash(goal.next_wake),
                goal.objective.clone(),
            ]);
        }
        table.render(out)
    });
    Ok(Exit::Ok)
}

async fn amend(ctx: &Ctx, args: AmendArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let mut amendments: Vec<Amendment> = match &args.file {
        Some(path) => read_json(path, "list of amendments")?,
        None => Vec::new(),
    };
    if let Some(objective) = args.objective {
        amendments.push(Amendment::SetObjective { objective });
    }
    for text in &args.add_criteria {
        amendments.push(Amendment::AddCriterion {
            criterion: criterion(text)?,
        });
    }
    for id in args.remove_criteria {
        amendments.push(Amendment::RemoveCriterion { id });
    }
    for text in &args.register_keys {
        let RegisteredKey { actor, key } = actor_key(text)?;
        amendments.push(Amendment::RegisterKey { actor, key });
    }
    for text in &args.revoke_keys {
        let RegisteredKey { actor, key } = actor_key(text)?;
        amendments.push(Amendment::RevokeKey { actor, key });
    }
    amendments.extend(login_amendments(&args.map_logins, &args.unmap_logins)?);
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    // An agent registered on a signed goal gets its key as at creation: the key directory's,
    // made there when missing, unless a key for it is registered already or in these flags.
    let mut made = Vec::new();
    let signed = state.spec.identity_mode() == loopx_kernel::IdentityMode::Signed;
    let mut locals: Vec<Actor> = Vec::new();
    for agent in args.register {
        locals.push(Actor::Agent(agent.clone()));
        locals.push(run_validator(&agent)?);
        amendments.push(Amendment::RegisterAgent { agent });
    }
    if signed && !locals.is_empty() {
        locals.push(git_provider()?);
    }
    // A new binding's capability and providers sign what they submit, as at creation.
    let rebound = args.capability.binding()?;
    locals.extend(capability::binding_actors(rebound.as_ref())?);
    for actor in locals {
        let keyed = state.spec.keys_of(&actor).next().is_some()
            || amendments.iter().any(
                |a| matches!(a, Amendment::RegisterKey { actor: registered, .. } if registered == &actor),
            );
        if signed && !keyed {
            let (key, new) = local_key(ctx, &actor)?;
            if new {
                made.push(RegisteredKey {
                    actor: actor.clone(),
                    key,
                });
            }
            amendments.push(Amendment::RegisterKey { actor, key });
        }
    }
    for agent in args.unregister {
        amendments.push(Amendment::UnregisterAgent { agent });
    }
    for text in &args.register_validators {
        let (check, validator) = check_and_validator(text)?;
        amendments.push(Amendment::RegisterValidator { check, validator });
    }
    for text in &args.unregister_validators {
        let (check, validator) = check_and_validator(text)?;
        amendments.push(Amendment::UnregisterValidator { check, validator });
    }
    amendments.extend(tunables(&args.limits, args.retire_after, &state.spec));
    if rebound.is_some() || args.no_capability {
        amendments.push(Amendment::SetCapability {
            capability: rebound,
        });
    }
    let command = Command::AmendGoal {
        expected_revision: args.expected_revision.unwrap_or(state.goal_revision),
        amendments,
    };
    let done = ctx.submit(&backend, &goal, &command).await?;
    let mut value = written(&done);
    value.insert("goal".into(), view::goal(&done.state, ctx.now));
    if !made.is_empty() {
        value.insert("keys_made".into(), made_view(&made));
    }
    ctx.out.emit(&Value::Object(value), |out| {
        let mut text = made_text(ctx, &made);
        text.push_str(&written_line(
            out,
            &done,
            &format!("amendment of goal `{goal}`"),
        ));
        text
    });
    Ok(Exit::Ok)
}

async fn write(ctx: &Ctx, command: &Command, what: &str) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    ctx.actor()?;
    let backend = ctx.open().await?;
    let done = ctx.submit(&backend, &goal, command).await?;
    let mut value = written(&done);
    value.insert("goal".into(), view::goal(&done.state, ctx.now));
    ctx.out
        .emit(&Value::Object(value), |out| written_line(out, &done, what));
    Ok(Exit::Ok)
}
