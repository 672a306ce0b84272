//! The goal: objective, acceptance criteria, registered agents, budget, policy and grants.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::{Amounts, Limits};
use crate::identity::{Identity, PublicKey, RegisteredKey};
use crate::ids::{
    AgentId, CheckId, CriterionId, GoalId, IntoId, InvalidId, PersonId, SourceId, Subject,
};
use crate::retry::{DEFAULT_STALL_GOAL_TURNS, DEFAULT_STALL_TURNS, RetryPolicy};
use crate::time::Duration;

/// Everything a goal is created with. Later changes go through revisioned amendments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSpec {
    /// The goal's id.
    pub id: GoalId,
    /// What the work is for, in a sentence a person can check.
    pub objective: String,
    /// The person who owns the goal: only they amend or abandon it.
    pub owner: PersonId,
    /// Acceptance criteria; the goal can only end accepted when each is met by fresh evidence.
    pub criteria: Vec<Criterion>,
    /// The agents that may claim work.
    pub agents: BTreeSet<AgentId>,
    /// Goal-wide budget limits. A spec that leaves them out gets [`Limits::GOAL_DEFAULT`] (a
    /// finite number of turns and of wall-clock time); `"unlimited"` (or every dimension `null`)
    /// asks for no limit explicitly.
    #[serde(
        default = "default_budget",
        deserialize_with = "crate::budget::limits_or_unlimited"
    )]
    pub budget: Limits,
    /// Tunables for leases, monitors, budget exhaustion, retries and stall detection.
    #[serde(default)]
    pub policy: Policy,
    /// Explicit rights of one agent to act on another agent's todos.
    #[serde(default)]
    pub grants: BTreeMap<AgentId, BTreeSet<GrantedAction>>,
    /// Whether commands must be signed (`signed`, the default, left out of the JSON) or actors
    /// are taken at their word (`declared`, for local experiments).
    #[serde(default, skip_serializing_if = "is_signed")]
    pub identity: Identity,
    /// The public keys commands are verified under, by actor; the owner's own key at creation,
    /// more registered by the owner's amendments. A signed goal must register the owner's key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<RegisteredKey>,
    /// Who may establish evidence for which check, by check: on a signed goal, evidence of a
    /// check listed here counts for a criterion only when one of its actors established it, and
    /// a settlement's verdict carrying evidence of it is accepted only from one of them. A check
    /// not listed (and so every check of a goal recorded before this registry existed) accepts
    /// evidence from anyone who may record it, which on a signed goal is only an actor whose key
    /// the goal registers. Declared and unsigned goals do not apply it. Left out of the JSON
    /// when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub validators: BTreeMap<CheckId, BTreeSet<Actor>>,
    /// The capability that judges the goal and its configuration, declared with the goal so
    /// that every host that runs it (`loopx run`, the service, an embedded host) wires the same
    /// judgement. Data only: no kernel rule reads it, and what the name and the configuration
    /// mean is the host's registry's to say. Left out of the JSON when the goal declares none,
    /// so a spec written before bindings existed reads and writes as it did. Boxed: most goals
    /// have none, and a spec travels inline in every `create_goal` command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Box<CapabilityBinding>>,
}

/// A goal's capability by name, with the configuration it is built from.
///
/// JSON: `{"name": "prfix", "config": {"pulls": ["acme/cli#42"]}}`; `config` may be left out
/// (an empty object). The kernel keeps both as they were given: the name is a [`SourceId`]
/// (which a host's registry looks up) and the configuration any JSON value (which the named
/// capability validates when it is built).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityBinding {
    /// The capability's name in the host's registry, e.g. `prfix`.
    pub name: SourceId,
    /// Its configuration, as the capability reads it.
    #[serde(default = "empty_config")]
    pub config: serde_json::Value,
    /// Subjects the host asks the goal to follow from its creation on, before it has observed
    /// anything about them: a goal bound to fix `acme/cli#42` follows `pr:acme/cli#42`, so
    /// the first webhook delivery about that PR reaches it. The kernel carries them and counts
    /// them among [`GoalState::watched_subjects`](crate::GoalState::watched_subjects); it
    /// never interprets them. Left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub follows: Vec<Subject>,
}

fn empty_config() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl CapabilityBinding {
    /// The capability `name` with `config`.
    ///
    /// # Errors
    /// [`InvalidId`] when `name` is not a valid id.
    pub fn new(
        name: impl IntoId<SourceId>,
        config: serde_json::Value,
    ) -> Result<CapabilityBinding, InvalidId> {
        Ok(CapabilityBinding {
            name: name.into_id()?,
            config,
            follows: Vec::new(),
        })
    }

    /// The binding with `follows` as the subjects it asks the goal to follow (see
    /// [`CapabilityBinding::follows`]).
    #[must_use]
    pub fn following(mut self, follows: impl IntoIterator<Item = Subject>) -> CapabilityBinding {
        self.follows = follows.into_iter().collect();
        self
    }

    /// The capability `name` with an empty configuration (every field at its default).
    ///
    /// # Errors
    /// [`InvalidId`] when `name` is not a valid id.
    pub fn named(name: impl IntoId<SourceId>) -> Result<CapabilityBinding, InvalidId> {
        CapabilityBinding::new(name, empty_config())
    }
}

// Serde's `skip_serializing_if` hands the field by reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_signed(identity: &Identity) -> bool {
    identity.is_signed()
}

impl GoalSpec {
    /// The goal's owner as the actor of the commands only they may issue.
    pub fn owner_actor(&self) -> Actor {
        Actor::Person(self.owner.clone())
    }

    /// Starts a spec of goal `id` with its objective and owner, no criteria, no agents, the
    /// default budget ([`Limits::GOAL_DEFAULT`]), the default policy, no grants and signed
    /// identity with no key yet (give the owner's with [`GoalSpecBuilder::owner_key`], or
    /// choose [`GoalSpecBuilder::declared_identity`]); the builder's methods add the rest.
    /// Ids may be given as text: an invalid one fails at [`GoalSpecBuilder::build`].
    pub fn builder(
        id: impl IntoId<GoalId>,
        objective: impl Into<String>,
        owner: impl IntoId<PersonId>,
    ) -> GoalSpecBuilder {
        let spec = id.into_id().and_then(|id| {
            Ok(GoalSpec {
                id,
                objective: objective.into(),
                owner: owner.into_id()?,
                criteria: Vec::new(),
                agents: BTreeSet::new(),
                budget: Limits::GOAL_DEFAULT,
                policy: Policy::default(),
                grants: BTreeMap::new(),
                identity: Identity::Signed,
                keys: Vec::new(),
                validators: BTreeMap::new(),
                capability: None,
            })
        });
        GoalSpecBuilder { spec }
    }
}

fn default_budget() -> Limits {
    Limits::GOAL_DEFAULT
}

/// Builds a [`GoalSpec`]; the first invalid id is kept and reported by [`Self::build`].
#[derive(Debug, Clone)]
#[must_use]
pub struct GoalSpecBuilder {
    spec: Result<GoalSpec, InvalidId>,
}

impl GoalSpecBuilder {
    fn with(mut self, change: impl FnOnce(&mut GoalSpec) -> Result<(), InvalidId>) -> Self {
        if let Ok(spec) = &mut self.spec
            && let Err(error) = change(spec)
        {
            self.spec = Err(error);
        }
        self
    }

    /// Registers an agent that may claim work.
    pub fn agent(self, agent: impl IntoId<AgentId>) -> Self {
        self.with(|spec| {
            spec.agents.insert(agent.into_id()?);
            Ok(())
        })
    }

    /// Adds an acceptance criterion.
    pub fn criterion(self, criterion: Criterion) -> Self {
        self.with(|spec| {
            spec.criteria.push(criterion);
            Ok(())
        })
    }

    /// Sets the goal-wide budget limits (`Limits::UNLIMITED` for none at all).
    pub fn budget(self, limits: Limits) -> Self {
        self.with(|spec| {
            spec.budget = limits;
            Ok(())
        })
    }

    /// Sets the policy.
    pub fn policy(self, policy: Policy) -> Self {
        self.with(|spec| {
            spec.policy = policy;
            Ok(())
        })
    }

    /// Grants `agent` the right to act on other agents' todos in the way `action` says.
    pub fn grant(self, agent: impl IntoId<AgentId>, action: GrantedAction) -> Self {
        self.with(|spec| {
            spec.grants
                .entry(agent.into_id()?)
                .or_default()
                .insert(action);
            Ok(())
        })
    }

    /// Registers `key` for the owner: the goal is signed, and only that key's holder creates
    /// it and issues the owner's commands.
    pub fn owner_key(self, key: PublicKey) -> Self {
        self.with(|spec| {
            let actor = spec.owner_actor();
            spec.keys.push(RegisteredKey { actor, key });
            Ok(())
        })
    }

    /// Registers `key` for `actor`.
    pub fn key(self, actor: Actor, key: PublicKey) -> Self {
        self.with(|spec| {
            spec.keys.push(RegisteredKey { actor, key });
            Ok(())
        })
    }

    /// Registers `validator` as one who may establish evidence of `check` (see
    /// [`GoalSpec::validators`]).
    pub fn validator(self, check: impl IntoId<CheckId>, validator: Actor) -> Self {
        self.with(|spec| {
            spec.validators
                .entry(check.into_id()?)
                .or_default()
                .insert(validator);
            Ok(())
        })
    }

    /// Binds the goal to the capability `name`, built from `config` by the host's registry
    /// (see [`GoalSpec::capability`]). The binding follows no subject of its own; a host that
    /// knows what the capability watches binds with [`GoalSpecBuilder::bound`] instead, so
    /// that the goal follows those subjects from its creation on.
    pub fn capability(self, name: impl IntoId<SourceId>, config: serde_json::Value) -> Self {
        self.with(|spec| {
            spec.capability = Some(Box::new(CapabilityBinding::new(name, config)?));
            Ok(())
        })
    }

    /// Binds the goal to `binding` as given, its [`CapabilityBinding::follows`] included (a
    /// host's registry fills them from what the capability watches: `loopx_server`'s
    /// `Registry::follow`).
    pub fn bound(self, binding: CapabilityBinding) -> Self {
        self.with(|spec| {
            spec.capability = Some(Box::new(binding));
            Ok(())
        })
    }

    /// Takes every actor at its word (`identity: declared`): for local experiments, where no
    /// one needs to prove who they are. `status` says so.
    pub fn declared_identity(self) -> Self {
        self.with(|spec| {
            spec.identity = Identity::Declared;
            Ok(())
        })
    }

    /// The spec.
    ///
    /// # Errors
    /// The first [`InvalidId`] given to the builder.
    pub fn build(self) -> Result<GoalSpec, InvalidId> {
        self.spec
    }
}

impl Criterion {
    /// Criterion `id`, met by fresh passing evidence of `check` about `subject`.
    ///
    /// # Errors
    /// [`InvalidId`] for an invalid id text.
    pub fn new(
        id: impl IntoId<CriterionId>,
        text: impl Into<String>,
        check: impl IntoId<CheckId>,
        subject: impl IntoId<Subject>,
    ) -> Result<Criterion, InvalidId> {
        Ok(Criterion {
            id: id.into_id()?,
            text: text.into(),
            check: check.into_id()?,
            subject: subject.into_id()?,
        })
    }
}

/// An acceptance criterion and the evidence that would satisfy it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Criterion id.
    pub id: CriterionId,
    /// The criterion in words.
    pub text: String,
    /// The check whose passing evidence satisfies it.
    pub check: CheckId,
    /// The subject that evidence must be about, at its current revision.
    pub subject: Subject,
}

/// Goal-wide tunables. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Lease time-to-live when a claim does not say (default 15 minutes).
    pub lease_ttl: Duration,
    /// What a turn of a todo that states no expected usage reserves, in every dimension
    /// (default: one turn and 15 minutes of wall-clock time, [`Policy::DEFAULT_RESERVATION`]).
    /// A turn that uses more is charged all of it, and the owner is asked before the next one.
    pub default_reservation: Amounts,
    /// Whether exhausted budget asks the owner for more or just waits (default: ask).
    pub on_budget_exhausted: BudgetExhaustion,
    /// Unchanged monitor polls in a row that raise a replan obligation (default 3).
    pub monitor_no_change_limit: u32,
    /// How failed turns are retried: backoff, then a replan obligation (see [`RetryPolicy`]).
    pub retry: RetryPolicy,
    /// Settled turns in a row on one todo (a monitor excepted) that neither failed nor made
    /// progress and raise a replan obligation (default 5; 0 never raises one).
    pub stall_turns: u32,
    /// Settled turns in a row on the whole goal (monitors' polls excepted) that neither failed
    /// nor made progress and raise a replan obligation, whichever todos they ran on (default
    /// 20; 0 never raises one).
    pub stall_goal_turns: u32,
    /// How far ahead of the store's own clock a command's time may be (default
    /// [`DEFAULT_CLOCK_SKEW`], 2 minutes). A commit stamped later than the store's clock plus
    /// this skew is refused (`clock_ahead`) and writes nothing, so no caller can expire another
    /// agent's lease by claiming a later time; a store created with a test clock follows the
    /// times it is given instead. Left out of the JSON at its default.
    #[serde(skip_serializing_if = "is_default_skew")]
    pub clock_skew: Duration,
    /// How long inert work stays in the goal's state before a `retire` command may drop it
    /// (default [`DEFAULT_RETIRE_AFTER`], 7 days; `None` never retires): closed todos, evidence
    /// about replaced revisions, streams nothing follows (see [`crate::retire`]). History keeps
    /// all of it. Left out of the JSON at its default.
    #[serde(skip_serializing_if = "is_default_retire_after")]
    pub retire_after: Option<Duration>,
}

/// The default of [`Policy::retire_after`]: 7 days, so a week's closed work stays at hand.
pub const DEFAULT_RETIRE_AFTER: Duration = Duration::hours(7 * 24);

#[allow(clippy::ref_option)] // serde's skip_serializing_if passes a reference
fn is_default_retire_after(after: &Option<Duration>) -> bool {
    *after == Some(DEFAULT_RETIRE_AFTER)
}

/// The default of [`Policy::clock_skew`]: 2 minutes, well above the drift of hosts that keep
/// their clocks synchronized, well below any lease's time-to-live.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::minutes(2);

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_default_skew(skew: &Duration) -> bool {
    *skew == DEFAULT_CLOCK_SKEW
}

impl Policy {
    /// The default [`Policy::default_reservation`]: one turn and 15 minutes of wall-clock
    /// time (a default lease's length), no tokens and no cost.
    pub const DEFAULT_RESERVATION: Amounts = Amounts {
        wall_ms: 15 * 60 * 1000,
        ..Amounts::ONE_TURN
    };
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            lease_ttl: Duration::minutes(15),
            default_reservation: Policy::DEFAULT_RESERVATION,
            on_budget_exhausted: BudgetExhaustion::Ask,
            monitor_no_change_limit: 3,
            retry: RetryPolicy::default(),
            stall_turns: DEFAULT_STALL_TURNS,
            stall_goal_turns: DEFAULT_STALL_GOAL_TURNS,
            clock_skew: DEFAULT_CLOCK_SKEW,
            retire_after: Some(DEFAULT_RETIRE_AFTER),
        }
    }
}

/// What `decide` does when the budget cannot admit another turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetExhaustion {
    /// Ask the goal owner to raise the budget.
    Ask,
    /// Wait quietly until the budget changes.
    Wait,
}

/// An action one agent may take on a todo assigned to or leased by another, when granted.
/// Using a grant always requires a reason, which is recorded with the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantedAction {
    /// Claim (and so complete) a todo assigned to another agent, or hand off its live lease.
    TakeOver,
    /// Change a todo's assignee.
    Reassign,
    /// Supersede, defer or block another agent's todo.
    Supersede,
}

/// One change to a goal, applied by its owner against an expected goal revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Amendment {
    /// Replace the objective.
    SetObjective {
        /// The new objective.
        objective: String,
    },
    /// Add an acceptance criterion.
    AddCriterion {
        /// The criterion.
        criterion: Criterion,
    },
    /// Remove an acceptance criterion.
    RemoveCriterion {
        /// Its id.
        id: CriterionId,
    },
    /// Register an agent.
    RegisterAgent {
        /// The agent.
        agent: AgentId,
    },
    /// Unregister an agent; its live leases stay fenced until they expire or are released.
    UnregisterAgent {
        /// The agent.
        agent: AgentId,
    },
    /// Replace the goal-wide limits.
    SetBudget {
        /// The new limits.
        limits: Limits,
    },
    /// Replace the policy.
    SetPolicy {
        /// The new policy.
        policy: Policy,
    },
    /// Grant an agent an action on other agents' todos.
    Grant {
        /// The agent.
        agent: AgentId,
        /// The action.
        action: GrantedAction,
    },
    /// Withdraw a grant.
    Revoke {
        /// The agent.
        agent: AgentId,
        /// The action.
        action: GrantedAction,
    },
    /// Register a public key for an actor: its signed commands are accepted from now on.
    RegisterKey {
        /// The actor the key signs as.
        actor: Actor,
        /// The key.
        key: PublicKey,
    },
    /// Withdraw an actor's key: commands signed with it are refused from now on (the owner's
    /// last key cannot be withdrawn).
    RevokeKey {
        /// The actor.
        actor: Actor,
        /// The key.
        key: PublicKey,
    },
    /// Register a validator for a check: on a signed goal, evidence of the check counts from the
    /// check's registered validators only (see [`GoalSpec::validators`]).
    RegisterValidator {
        /// The check.
        check: CheckId,
        /// Who may establish its evidence.
        validator: Actor,
    },
    /// Withdraw a validator from a check: its evidence of the check stops counting, including
    /// what it established before; a check left with none accepts anyone again.
    UnregisterValidator {
        /// The check.
        check: CheckId,
        /// The validator.
        validator: Actor,
    },
    /// Bind the goal to another capability or configuration (`null`: to none). Hosts build
    /// the goal's capability when they start working it, so the change takes effect at the
    /// next `loopx run` or service restart. A capability judges from the goal's state alone,
    /// so a new configuration simply judges the same facts anew; todos the previous
    /// capability created stay the previous capability's (only it or the owner changes them).
    SetCapability {
        /// The binding, or `None` to bind none.
        capability: Option<CapabilityBinding>,
    },
    /// Say that `login` at `provider` is `person`: an answer that provider relays from that
    /// login (a `/loopx answer` comment on GitHub, say) answers the gates `person` owns, and
    /// the gate is delivered to them there. A login speaks for one person; a person may have
    /// several. Refused when the login does not read as one (`login_malformed`) or is mapped
    /// to someone else already (`login_taken`).
    MapLogin {
        /// The person the login speaks for.
        person: PersonId,
        /// The provider whose login it is, as its actor is named (`github`).
        provider: SourceId,
        /// The login, compared case-insensitively.
        login: String,
    },
    /// Withdraw a login's mapping: what that provider relays from it answers nothing any more.
    UnmapLogin {
        /// The provider.
        provider: SourceId,
        /// The login.
        login: String,
    },
}
