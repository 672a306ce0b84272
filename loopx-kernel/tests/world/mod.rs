//! A small scenario language for kernel tests: a goal built through commands only, at a fixed
//! clock, with short helpers for the steps scenarios repeat (claim, begin, settle, gates,
//! observations, evidence).
//!
//! Every step goes through `GoalState::handle`, so a scenario can only reach states that real
//! commands reach. A setup step that is refused panics with the refusal: a scenario that does not
//! build is a broken test, never a silent skip.

// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]
// Scenario steps take commands by value so each step stays one short expression.
#![allow(clippy::needless_pass_by_value)]

use std::collections::BTreeMap;

use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Continuation, Criterion, CriterionId, Decision,
    DecisionScope, Duration, EvidenceId, ExpiryPolicy, Fingerprint, GateAnswer, GateId, GateScope,
    GoalId, GoalSpec, GoalState, Limits, Lineage, MonitorSpec, NewEvidence, NewGate, NewTodo,
    Observation, ObservationKey, ObservedInput, Outcome, PersonId, Policy, Priority, RecordedEvent,
    Refusal, Revision, Settlement, SourceId, Subject, Timestamp, TodoClass, TodoId, Transition,
    TurnId, Verdict, VerdictOutcome, Workspace, WriteSet, decide, execute,
};

/// The repository every scenario works on.
pub const REPO: &str = "repo:acme/cli";
/// The repository named by write sets.
pub const REPO_URL: &str = "github.com/acme/cli";

/// An instant on the scenario's calendar: `"10:05"` is 2026-11-29 10:05 UTC, `"30 09:30"` is
/// 2026-11-30 09:30 UTC.
pub fn ts(clock: &str) -> Timestamp {
    let text = match clock.split_once(' ') {
        Some((day, time)) => format!("2026-11-{day}T{time}:00Z"),
        None => format!("2026-11-29T{clock}:00Z"),
    };
    Timestamp::parse(&text).unwrap()
}

pub fn agent(id: &str) -> AgentId {
    AgentId::new(id).unwrap()
}

pub fn ag(id: &str) -> Actor {
    Actor::Agent(agent(id))
}

/// The goal owner, who also answers gates unless a gate names someone else.
pub fn owner() -> Actor {
    Actor::Person(PersonId::new("maintainer").unwrap())
}

/// The independent validator that judges turns.
pub fn validator() -> Actor {
    Actor::Validator(SourceId::new("ci").unwrap())
}

pub fn provider() -> Actor {
    Actor::Provider(SourceId::new("github").unwrap())
}

pub fn capability() -> Actor {
    Actor::Capability(SourceId::new("prfix").unwrap())
}

/// A second capability, distinct from [`capability`].
pub fn other_capability() -> Actor {
    Actor::Capability(SourceId::new("automl").unwrap())
}

pub fn tid(id: &str) -> TodoId {
    TodoId::new(id).unwrap()
}

pub fn gid(id: &str) -> GateId {
    GateId::new(id).unwrap()
}

pub fn eid(id: &str) -> EvidenceId {
    EvidenceId::new(id).unwrap()
}

pub fn turn(id: &str) -> TurnId {
    TurnId::new(id).unwrap()
}

pub fn key(id: &str) -> ObservationKey {
    ObservationKey::new(id).unwrap()
}

pub fn scope(id: &str) -> DecisionScope {
    DecisionScope::new(id).unwrap()
}

pub fn ws(top_level: &str, common_dir: &str) -> Workspace {
    Workspace {
        top_level: top_level.into(),
        common_dir: common_dir.into(),
    }
}

/// A criterion met by passing `check` evidence on [`REPO`].
pub fn criterion(id: &str, text: &str, check: &str) -> Criterion {
    Criterion {
        id: CriterionId::new(id).unwrap(),
        text: text.into(),
        check: CheckId::new(check).unwrap(),
        subject: Subject::new(REPO).unwrap(),
    }
}

/// The goal every scenario starts from: owned by `maintainer`, agents `a`, `b` and `c`, no
/// criteria, unlimited budget, default policy.
pub fn spec() -> GoalSpec {
    GoalSpec {
        id: GoalId::new("cli-json").unwrap(),
        objective: "add --format json to the CLI".into(),
        owner: PersonId::new("maintainer").unwrap(),
        criteria: vec![],
        agents: [agent("a"), agent("b"), agent("c")].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: BTreeMap::new(),
        capability: None,
    }
}

/// An advancement todo.
pub fn todo(id: &str, title: &str) -> NewTodo {
    NewTodo::advance(tid(id), title)
}

/// Chainable edits of a [`NewTodo`].
pub trait TodoExt {
    fn after(self, deps: &[&str]) -> Self;
    fn needs(self, decision: &str) -> Self;
    fn excluding(self, agent: &str) -> Self;
    fn assigned(self, agent: &str) -> Self;
    fn writes(self, scopes: &[&str]) -> Self;
    fn idempotent(self) -> Self;
    fn turn_budget(self, turns: u64) -> Self;
    fn monitor(self, watches: &str, cadence: Duration) -> Self;
    fn review_of(self, todo: &str) -> Self;
    fn priority(self, priority: Priority) -> Self;
}

impl TodoExt for NewTodo {
    fn after(mut self, deps: &[&str]) -> Self {
        self.depends_on.extend(deps.iter().map(|d| tid(d)));
        self
    }
    fn needs(mut self, decision: &str) -> Self {
        self.requires_decisions.insert(scope(decision));
        self
    }
    fn excluding(mut self, who: &str) -> Self {
        self.excluded_agents.insert(agent(who));
        self
    }
    fn assigned(mut self, who: &str) -> Self {
        self.assignee = Some(agent(who));
        self
    }
    fn writes(mut self, scopes: &[&str]) -> Self {
        self.writes = Some(WriteSet {
            repository: REPO_URL.into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        });
        self
    }
    fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }
    fn turn_budget(mut self, turns: u64) -> Self {
        self.budget = Some(Limits {
            turns: Some(turns),
            ..Limits::UNLIMITED
        });
        self
    }
    fn monitor(mut self, watches: &str, cadence: Duration) -> Self {
        self.class = TodoClass::Monitor(MonitorSpec {
            watches: key(watches),
            cadence,
        });
        self
    }
    fn review_of(mut self, reviewed: &str) -> Self {
        self.class = TodoClass::Review { of: tid(reviewed) };
        self
    }
    fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

/// A gate owned by the goal owner that covers nothing yet.
pub fn gate(id: &str, question: &str) -> NewGate {
    NewGate {
        id: gid(id),
        question: question.into(),
        owner: owner(),
        scope: GateScope::default(),
        deadline: None,
        on_expiry: ExpiryPolicy::Expire,
    }
}

/// Chainable edits of a [`NewGate`].
pub trait GateExt {
    fn on_todos(self, todos: &[&str]) -> Self;
    fn on_decision(self, decision: &str) -> Self;
    fn whole_goal(self) -> Self;
    fn due(self, clock: &str) -> Self;
    fn keep_asking(self) -> Self;
}

impl GateExt for NewGate {
    fn on_todos(mut self, todos: &[&str]) -> Self {
        self.scope.todos.extend(todos.iter().map(|t| tid(t)));
        self
    }
    fn on_decision(mut self, decision: &str) -> Self {
        self.scope.decisions.insert(scope(decision));
        self
    }
    fn whole_goal(mut self) -> Self {
        self.scope.whole_goal = true;
        self
    }
    fn due(mut self, clock: &str) -> Self {
        self.deadline = Some(ts(clock));
        self
    }
    fn keep_asking(mut self) -> Self {
        self.on_expiry = ExpiryPolicy::KeepAsking;
        self
    }
}

/// Passing evidence for `check` on [`REPO`] at `revision`; observed when recorded unless
/// [`EvidenceExt::seen_at`] says otherwise.
pub fn ev(id: &str, check: &str, revision: &str) -> NewEvidence {
    NewEvidence {
        id: eid(id),
        check: CheckId::new(check).unwrap(),
        subject: Subject::new(REPO).unwrap(),
        revision: Revision::new(revision).unwrap(),
        outcome: Outcome::Pass,
        summary: format!("{check} at {revision}"),
        observed_at: Timestamp::EPOCH,
        ttl: None,
        inputs: Lineage::default(),
    }
}

/// Chainable edits of a [`NewEvidence`].
pub trait EvidenceExt {
    fn about(self, subject: &str) -> Self;
    fn failing(self) -> Self;
    fn ttl(self, ttl: Duration) -> Self;
    fn derived_from(self, inputs: &[&str]) -> Self;
    fn reads(self, key: &str, fingerprint: &str) -> Self;
    fn seen_at(self, clock: &str) -> Self;
}

impl EvidenceExt for NewEvidence {
    fn about(mut self, subject: &str) -> Self {
        self.subject = Subject::new(subject).unwrap();
        self
    }
    fn failing(mut self) -> Self {
        self.outcome = Outcome::Fail;
        self
    }
    fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    fn derived_from(mut self, inputs: &[&str]) -> Self {
        self.inputs.evidence.extend(inputs.iter().map(|i| eid(i)));
        self
    }
    fn reads(mut self, stream: &str, fingerprint: &str) -> Self {
        self.inputs.observations.push(ObservedInput {
            key: key(stream),
            fingerprint: Fingerprint::new(fingerprint).unwrap(),
        });
        self
    }
    fn seen_at(mut self, clock: &str) -> Self {
        self.observed_at = ts(clock);
        self
    }
}

/// An observation of [`REPO`] on stream `key`.
pub fn obs(stream: &str, revision: &str, fingerprint: &str) -> Observation {
    Observation {
        key: key(stream),
        subject: Subject::new(REPO).unwrap(),
        revision: Revision::new(revision).unwrap(),
        fingerprint: Fingerprint::new(fingerprint).unwrap(),
        observed_at: Timestamp::EPOCH,
        summary: String::new(),
        facts: BTreeMap::default(),
        order: None,
        etag: None,
    }
}

/// A passing settlement that completes the todo with `goal_still_active` and uses one turn.
pub fn settlement(todo: &str, epoch: u64, turn_id: &str) -> Settlement {
    Settlement {
        todo: tid(todo),
        epoch,
        turn: turn(turn_id),
        verdict: Verdict {
            validator: validator(),
            outcome: VerdictOutcome::Passed,
            summary: "validated".into(),
            signature: None,
        },
        evidence: vec![],
        observations: vec![],
        transition: Transition::Complete {
            continuation: Continuation::GoalStillActive,
        },
        usage: Amounts::ONE_TURN,
        failure: None,
    }
}

/// The fixed key of a scenario actor on a signed goal: the owner 1, validator `ci` 2, agent `a`
/// 3, validator `lint` 4, agent `b` 5.
pub fn key_of(seed: u8) -> loopx_kernel::SecretKey {
    loopx_kernel::SecretKey::from_seed([seed; 32])
}

/// Validator `lint`, a second validator with a key of its own.
pub fn lint() -> Actor {
    Actor::Validator(SourceId::new("lint").unwrap())
}

/// The default spec made signed: the owner, validator `ci`, validator `lint` and agents `a` and
/// `b` each with a key ([`key_of`]), and check `tests.json_schema` registered for `ci` only.
pub fn signed_spec(spec: &mut GoalSpec) {
    use loopx_kernel::Signer as _;
    spec.identity = loopx_kernel::Identity::Signed;
    spec.keys = [
        (owner(), 1),
        (validator(), 2),
        (ag("a"), 3),
        (lint(), 4),
        (ag("b"), 5),
    ]
    .into_iter()
    .map(|(actor, seed)| loopx_kernel::RegisteredKey {
        actor,
        key: key_of(seed).public_key(),
    })
    .collect();
    spec.validators.insert(
        CheckId::new("tests.json_schema").unwrap(),
        [validator()].into(),
    );
}

/// `settlement`'s verdict signed with key `seed` for the goal of [`spec`].
pub fn sign(mut settlement: Settlement, seed: u8) -> Settlement {
    settlement.verdict = loopx_kernel::sign_verdict(
        &key_of(seed),
        &spec().id,
        &settlement.todo,
        &settlement.turn,
        settlement.epoch,
        settlement.verdict,
        &settlement.evidence,
    );
    settlement
}

/// A goal, the clock, and everything recorded so far.
pub struct World {
    pub goal: GoalState,
    pub now: Timestamp,
    pub log: Vec<RecordedEvent>,
    turns: u32,
}

impl World {
    /// The default goal, created by its owner at 10:00.
    pub fn new() -> World {
        World::with(|_| {})
    }

    /// The default goal with `edit` applied to its spec before creation.
    pub fn with(edit: impl FnOnce(&mut GoalSpec)) -> World {
        let mut spec = spec();
        edit(&mut spec);
        let now = ts("10:00");
        let command = Command::CreateGoal { spec };
        let events = execute(None, &owner(), now, &command).unwrap();
        let log = loopx_kernel::write::stamp(0, &owner(), now, events);
        let goal = GoalState::replay(&log).unwrap();
        World {
            goal,
            now,
            log,
            turns: 0,
        }
    }

    /// Moves the clock (see [`ts`]).
    pub fn at(&mut self, clock: &str) -> &mut World {
        self.now = ts(clock);
        self
    }

    /// Runs a command that must be accepted.
    pub fn run(&mut self, actor: &Actor, command: Command) -> Vec<RecordedEvent> {
        match self.try_run(actor, command.clone()) {
            Ok(events) => events,
            Err(refusal) => panic!(
                "setup step `{}` by {actor} refused ({}): {refusal}",
                command.name(),
                refusal.code()
            ),
        }
    }

    /// Runs a command, keeping the recorded events.
    pub fn try_run(
        &mut self,
        actor: &Actor,
        command: Command,
    ) -> Result<Vec<RecordedEvent>, Refusal> {
        let events = self.goal.handle(actor, self.now, &command)?;
        self.log.extend(events.iter().cloned());
        Ok(events)
    }

    /// Runs a command that must be refused, and checks that the refusal changed nothing:
    /// validation produces no event and the whole state compares equal afterwards.
    pub fn refuse(&mut self, actor: &Actor, command: Command) -> Refusal {
        let before = self.goal.clone();
        let validated = execute(Some(&self.goal), actor, self.now, &command);
        let handled = self.try_run(actor, command.clone());
        let Err(refusal) = handled else {
            panic!("`{}` by {actor} was accepted", command.name());
        };
        assert_eq!(
            validated,
            Err(refusal.clone()),
            "execute and handle disagree"
        );
        assert_eq!(
            self.goal,
            before,
            "a refused `{}` changed the state",
            command.name()
        );
        refusal
    }

    pub fn decide(&self, who: &str) -> Decision {
        decide(&self.goal, &agent(who), self.now)
    }

    /// The decision for `who` now, as JSON that names the agent and the time.
    pub fn seen(&self, who: &str) -> serde_json::Value {
        serde_json::json!({
            "agent": who,
            "at": self.now,
            "decision": self.decide(who),
        })
    }

    // ----- plan ------------------------------------------------------------------------------

    /// Adds a todo as the goal owner.
    pub fn add(&mut self, new: NewTodo) -> &mut World {
        self.run(&owner(), Command::AddTodo { todo: new });
        self
    }

    /// Opens a gate as agent `a` (the executor that needs the answer).
    pub fn gate(&mut self, new: NewGate) -> &mut World {
        self.run(&ag("a"), Command::OpenGate { gate: new });
        self
    }

    /// The gate's owner (the goal owner) answers yes.
    pub fn answer(&mut self, gate: &str, answer: &str) -> &mut World {
        self.run(
            &owner(),
            Command::AnswerGate {
                gate: gid(gate),
                answer: GateAnswer::Resolve {
                    answer: answer.into(),
                },
            },
        );
        self
    }

    pub fn amend(&mut self, amendments: Vec<loopx_kernel::Amendment>) -> &mut World {
        let expected_revision = self.goal.goal_revision;
        self.run(
            &owner(),
            Command::AmendGoal {
                expected_revision,
                amendments,
            },
        );
        self
    }

    pub fn report(&mut self, who: &str, workspace: Workspace) -> &mut World {
        self.run(&ag(who), Command::ReportWorkspace { workspace });
        self
    }

    // ----- facts -----------------------------------------------------------------------------

    /// A provider observation, observed now.
    pub fn observe(&mut self, mut observation: Observation) -> &mut World {
        observation.observed_at = self.now;
        self.run(&provider(), Command::RecordObservation { observation });
        self
    }

    /// Validator evidence, observed now unless it says otherwise.
    pub fn evidence(&mut self, mut evidence: NewEvidence) -> &mut World {
        if evidence.observed_at == Timestamp::EPOCH {
            evidence.observed_at = self.now;
        }
        self.run(&validator(), Command::RecordEvidence { evidence });
        self
    }

    // ----- leases and turns ------------------------------------------------------------------

    pub fn epoch(&self, todo: &str) -> u64 {
        self.goal.todos[&tid(todo)].last_epoch
    }

    /// Claims with the policy's lease time-to-live and the agent's reported workspace.
    pub fn claim(&mut self, who: &str, todo: &str) -> u64 {
        self.claim_for(who, todo, None)
    }

    /// Claims with an explicit lease time-to-live.
    pub fn claim_for(&mut self, who: &str, todo: &str, ttl: Option<Duration>) -> u64 {
        self.run(
            &ag(who),
            Command::Claim {
                todo: tid(todo),
                ttl,
                workspace: None,
                grant_reason: None,
            },
        );
        self.epoch(todo)
    }

    pub fn begin(&mut self, who: &str, todo: &str, turn_id: &str) -> &mut World {
        let epoch = self.epoch(todo);
        self.run(
            &ag(who),
            Command::BeginTurn {
                todo: tid(todo),
                epoch,
                turn: turn(turn_id),
                reserve: None,
            },
        );
        self
    }

    /// Settles `turn_id` under the current epoch; `edit` adjusts the passing settlement.
    pub fn settle(
        &mut self,
        who: &str,
        todo: &str,
        turn_id: &str,
        edit: impl FnOnce(&mut Settlement),
    ) -> &mut World {
        let mut settled = settlement(todo, self.epoch(todo), turn_id);
        if let Some(lease) = &self.goal.todos[&tid(todo)].lease
            && let Some(in_flight) = &lease.turn
            && in_flight.id.as_str() != turn_id
        {
            panic!("turn `{turn_id}` is not the one in flight on `{todo}`");
        }
        edit(&mut settled);
        for evidence in &mut settled.evidence {
            if evidence.observed_at == Timestamp::EPOCH {
                evidence.observed_at = self.now;
            }
        }
        for observation in &mut settled.observations {
            observation.observed_at = self.now;
        }
        self.run(&ag(who), Command::SettleTurn(settled));
        self
    }

    /// Claims, runs one turn and settles it; `edit` adjusts the passing, completing settlement.
    pub fn turn(
        &mut self,
        who: &str,
        todo: &str,
        edit: impl FnOnce(&mut Settlement),
    ) -> &mut World {
        self.claim(who, todo);
        self.turns += 1;
        let turn_id = format!("{todo}.t{}", self.turns);
        self.begin(who, todo, &turn_id);
        self.settle(who, todo, &turn_id, edit)
    }

    /// Claims, runs one turn and completes the todo with `goal_still_active`.
    pub fn finish(&mut self, who: &str, todo: &str) -> &mut World {
        self.turn(who, todo, |_| {})
    }
}
