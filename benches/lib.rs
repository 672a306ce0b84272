//! Shared setup for the loopx benchmarks: realistic goals of any size, and a small timing
//! recorder that turns criterion's samples into the figures the benchmarks print.
//!
//! [`Fixture::build`] grows a goal the way a long-running goal grows. Todos are planned in waves
//! of [`WAVE`]; eight agents work most of them to completion in one or two turns (with the odd
//! renewal, release and handoff), a validator records evidence on the acceptance criteria,
//! new commits move the repository's revision, and a few todos are superseded. About a tenth
//! stay pending in a realistic mix (see [`Fate`]): waiting on dependencies, ready to run, leased
//! by other agents (some with a turn in flight), meant for other agents, blocked, deferred,
//! held by decision gates, and polled monitors. Every command goes through
//! [`GoalState::handle`], so [`Fixture::history`] is a real event history for replay.
//!
//! Everything is deterministic: the same size always gives the same goal.

use loopx_kernel::write::stamp;
use std::time::Duration as Elapsed;

use loopx_kernel::{
    Actor, AgentId, Amounts, CheckId, Command, Continuation, Criterion, CriterionId, DecisionScope,
    Duration, EvidenceId, ExpiryPolicy, Fingerprint, GateAnswer, GateId, GateScope, GoalId,
    GoalSpec, GoalState, HandoffNote, Limits, MonitorSpec, NewEvidence, NewGate, NewTodo,
    Observation, ObservationKey, Outcome, PersonId, Policy, Priority, RecordedEvent,
    ResumeCondition, Revision, Settlement, SourceId, Subject, Timestamp, TodoClass, TodoId,
    Transition, TurnId, Verdict, VerdictOutcome, WriteSet, execute, frontier,
};

/// The goal sizes every benchmark runs at, in todos.
pub const SCALES: [usize; 3] = [1_000, 10_000, 100_000];

/// How many todos are planned at once.
pub const WAVE: usize = 100;

/// How many agents are registered; the first one is the agent the benchmarks decide for.
pub const AGENTS: usize = 8;

/// The repository every writing todo writes to, and whose revision the evidence is bound to.
const REPOSITORY: &str = "github.com/acme/service";

/// Decision scopes that resolved gates have settled.
const RESOLVED_DECISIONS: usize = 5;

/// Decision scopes whose gates are still waiting on the owner.
const PENDING_DECISIONS: usize = 3;

/// What becomes of a todo by the end of the history. The shares are per mille of all todos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    /// Completed, in one or two turns (850 ‰).
    Done,
    /// Replaced before anyone finished it (50 ‰).
    Superseded,
    /// Open, behind a dependency that is itself still pending (35 ‰).
    WaitsOnDependency,
    /// Open with every dependency done: in the frontier (25 ‰).
    Runnable,
    /// Under another agent's live lease, half of them with a turn in flight (2 ‰: a few dozen
    /// leases per agent at 100k todos).
    LeasedByOther,
    /// Meant for another agent (18 ‰).
    AssignedElsewhere,
    /// Blocked by a recorded fact (5 ‰).
    Blocked,
    /// Deferred until two hours after the history ends (5 ‰).
    Deferred,
    /// Needs a decision whose gate is still pending, and waits on a dependency (4 ‰).
    GatedPending,
    /// Needs a decision a resolved gate settled: in the frontier after the gate check (3 ‰).
    GatedResolved,
    /// A monitor polled recently, not due again yet (3 ‰).
    Monitor,
}

impl Fate {
    /// The planned fate of the todo at `index`.
    pub fn planned(index: usize) -> Fate {
        match mix(index as u64) % 1000 {
            0..850 => Fate::Done,
            850..900 => Fate::Superseded,
            900..935 => Fate::WaitsOnDependency,
            935..960 => Fate::Runnable,
            960..962 => Fate::LeasedByOther,
            962..980 => Fate::AssignedElsewhere,
            980..985 => Fate::Blocked,
            985..990 => Fate::Deferred,
            990..994 => Fate::GatedPending,
            994..997 => Fate::GatedResolved,
            _ => Fate::Monitor,
        }
    }

    /// True for todos that end done or superseded.
    pub fn is_closed(self) -> bool {
        matches!(self, Fate::Done | Fate::Superseded)
    }
}

/// A goal of a given size, its complete event history, and the actors that built it.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The goal's state.
    pub state: GoalState,
    /// Every event recorded while building the goal, from `goal_created` on.
    pub history: Vec<RecordedEvent>,
    /// The instant the benchmarks decide at: just after the last event.
    pub now: Timestamp,
    /// The agent the benchmarks decide for (registered, with its own workspace, no lease).
    pub agent: AgentId,
    /// The other registered agents.
    pub others: Vec<AgentId>,
    /// The goal owner.
    pub owner: Actor,
    /// The independent validator that judges every turn.
    pub validator: Actor,
    /// The fate each todo actually met, by index.
    pub fates: Vec<Fate>,
    /// How many todos were added.
    pub todos: usize,
    subject: Subject,
    checks: Vec<CheckId>,
    head: u64,
    step: Duration,
    recording: bool,
    next_turn: u64,
    next_evidence: u64,
    done: u64,
}

/// The id of the todo at `index`.
///
/// # Panics
/// Never: the id is always valid.
pub fn todo_id(index: usize) -> TodoId {
    id(TodoId::new(format!("todo-{index:06}")))
}

fn agent_id(index: usize) -> AgentId {
    id(AgentId::new(format!("agent-{index:02}")))
}

fn id<T>(parsed: Result<T, loopx_kernel::InvalidId>) -> T {
    match parsed {
        Ok(value) => value,
        Err(error) => panic!("benchmark ids are valid: {error}"),
    }
}

/// A deterministic 64-bit mixer (splitmix64), so goals vary without a random number generator.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Fixture {
    /// Builds a goal with `todos` todos (see the module documentation for its shape).
    ///
    /// # Panics
    /// When the kernel refuses a command the builder issues: a builder bug.
    pub fn build(todos: usize) -> Fixture {
        let mut fixture = Fixture::create();
        let waves = todos.div_ceil(WAVE);
        for wave in 0..waves {
            let range = wave * WAVE..((wave + 1) * WAVE).min(todos);
            fixture.plan_wave(range.clone());
            fixture.work_wave(range);
        }
        fixture.settle_pending();
        fixture.now = fixture.now.plus(Duration::seconds(1));
        fixture
    }

    fn create() -> Fixture {
        let owner_id = id(PersonId::new("maintainer"));
        let owner = Actor::Person(owner_id.clone());
        let agents: Vec<AgentId> = (0..AGENTS).map(agent_id).collect();
        let subject = id(Subject::new("repo:acme/service"));
        let checks: Vec<CheckId> = ["tests.unit", "tests.integration", "lint", "docs.build"]
            .into_iter()
            .map(|c| id(CheckId::new(c)))
            .collect();
        let criteria = checks
            .iter()
            .map(|check| Criterion {
                id: id(CriterionId::new(format!("crit-{check}"))),
                text: format!("`{check}` passes at the current revision"),
                check: check.clone(),
                subject: subject.clone(),
            })
            .collect();
        let spec = GoalSpec {
            id: id(GoalId::new("service-migration")),
            objective: "migrate the service to the new storage layer without downtime".into(),
            owner: owner_id,
            criteria,
            agents: agents.iter().cloned().collect(),
            budget: Limits {
                turns: Some(u64::MAX / 4),
                tokens: Some(u64::MAX / 4),
                ..Limits::UNLIMITED
            },
            policy: Policy::default(),
            grants: std::collections::BTreeMap::new(),
            identity: loopx_kernel::Identity::Declared,
            keys: Vec::new(),
            validators: std::collections::BTreeMap::new(),
            capability: None,
        };
        let start = Timestamp::from_millis(1_780_000_000_000);
        let created = match execute(None, &owner, start, &Command::CreateGoal { spec }) {
            Ok(events) => events,
            Err(refusal) => panic!("the benchmark goal is valid: {refusal}"),
        };
        let history = stamp(0, &owner, start, created);
        let state = match GoalState::replay(&history) {
            Ok(state) => state,
            Err(error) => panic!("the benchmark goal replays: {error}"),
        };
        let mut fixture = Fixture {
            state,
            history,
            now: start,
            agent: agents[0].clone(),
            others: agents[1..].to_vec(),
            owner,
            validator: Actor::Validator(id(SourceId::new("ci"))),
            fates: Vec::new(),
            todos: 0,
            subject,
            checks,
            head: 0,
            step: Duration::seconds(2),
            recording: true,
            next_turn: 0,
            next_evidence: 0,
            done: 0,
        };
        for agent in &agents {
            let workspace = loopx_kernel::Workspace {
                top_level: format!("/srv/worktrees/{agent}/service"),
                common_dir: "/srv/clones/service/.git".into(),
            };
            fixture.run(
                &Actor::Agent(agent.clone()),
                &Command::ReportWorkspace { workspace },
            );
        }
        fixture.open_gates();
        fixture
    }

    /// Opens the decision gates: the first [`RESOLVED_DECISIONS`] answered at once, the others
    /// left pending with a deadline well after the history ends.
    fn open_gates(&mut self) {
        let owner = self.owner.clone();
        let deadline = self.now.plus(Duration::hours(24 * 90));
        for k in 0..RESOLVED_DECISIONS + PENDING_DECISIONS {
            let gate = id(GateId::new(format!("gate-{k}")));
            self.run(
                &owner,
                &Command::OpenGate {
                    gate: NewGate {
                        id: gate.clone(),
                        question: format!("Which option do we take for decision {k}?"),
                        owner: owner.clone(),
                        scope: GateScope {
                            decisions: [decision(k)].into(),
                            ..GateScope::default()
                        },
                        deadline: Some(deadline),
                        on_expiry: ExpiryPolicy::KeepAsking,
                    },
                },
            );
            if k < RESOLVED_DECISIONS {
                self.run(
                    &owner,
                    &Command::AnswerGate {
                        gate,
                        answer: GateAnswer::Resolve {
                            answer: "take the first option".into(),
                        },
                    },
                );
            }
        }
    }

    /// Runs a command at the fixture's clock, records its events and advances the clock.
    ///
    /// # Panics
    /// When the kernel refuses the command: a builder bug.
    pub fn run(&mut self, actor: &Actor, command: &Command) -> Vec<RecordedEvent> {
        let recorded = match self.state.handle(actor, self.now, command) {
            Ok(recorded) => recorded,
            Err(refusal) => panic!("the kernel refused `{}`: {refusal}", command.name()),
        };
        if self.recording {
            self.history.extend(recorded.iter().cloned());
        }
        self.now = self.now.plus(self.step);
        recorded
    }

    fn plan_wave(&mut self, range: std::ops::Range<usize>) {
        let planner = Actor::Agent(self.agent.clone());
        for index in range {
            let mut fate = Fate::planned(index);
            let last_done = self.last(index, |f| f == Fate::Done);
            let last_pending = self.last(index, |f| !f.is_closed());
            if matches!(fate, Fate::WaitsOnDependency | Fate::GatedPending)
                && last_pending.is_none()
            {
                fate = Fate::Runnable;
            }
            let todo = self.new_todo(index, fate, last_done, last_pending);
            self.fates.push(fate);
            self.todos += 1;
            self.run(&planner, &Command::AddTodo { todo });
        }
    }

    /// The most recent todo before `index` whose fate matches, within the last two waves.
    fn last(&self, index: usize, wanted: impl Fn(Fate) -> bool) -> Option<usize> {
        let floor = index.saturating_sub(2 * WAVE);
        (floor..index).rev().find(|&i| wanted(self.fates[i]))
    }

    fn new_todo(
        &self,
        index: usize,
        fate: Fate,
        last_done: Option<usize>,
        last_pending: Option<usize>,
    ) -> NewTodo {
        let r = mix(index as u64 ^ 0x5EED);
        let wave = index / WAVE;
        let mut todo = NewTodo::advance(
            todo_id(index),
            format!("step {index} of wave {wave}: update the storage adapter and its tests"),
        );
        todo.priority = match r % 10 {
            0 => Priority::P1,
            1 | 2 => Priority::P3,
            _ => Priority::P2,
        };
        if r % 100 < 40
            && let Some(dep) = last_done
        {
            todo.depends_on.insert(todo_id(dep));
        }
        if r % 100 < 30 {
            todo.writes = Some(WriteSet {
                repository: REPOSITORY.into(),
                scopes: [format!("src/storage/step-{index}")].into(),
            });
        }
        if r % 100 == 99 {
            todo.budget = Some(Limits {
                turns: Some(5),
                ..Limits::UNLIMITED
            });
        }
        match fate {
            Fate::WaitsOnDependency => {
                todo.depends_on.extend(last_pending.map(todo_id));
            }
            Fate::GatedPending => {
                todo.depends_on.extend(last_pending.map(todo_id));
                todo.requires_decisions
                    .insert(decision(RESOLVED_DECISIONS + index % PENDING_DECISIONS));
            }
            Fate::GatedResolved => {
                todo.requires_decisions
                    .insert(decision(index % RESOLVED_DECISIONS));
            }
            Fate::Done if r % 100 < 3 => {
                todo.requires_decisions
                    .insert(decision(index % RESOLVED_DECISIONS));
            }
            Fate::AssignedElsewhere => {
                todo.assignee = Some(self.others[index % self.others.len()].clone());
            }
            Fate::Monitor => {
                todo.class = TodoClass::Monitor(MonitorSpec {
                    watches: id(ObservationKey::new(format!("ci:acme/service#{index}"))),
                    cadence: Duration::minutes(30),
                });
                todo.depends_on.clear();
                todo.writes = None;
                todo.idempotent = true;
            }
            _ => {}
        }
        todo
    }

    fn work_wave(&mut self, range: std::ops::Range<usize>) {
        for index in range {
            match self.fates[index] {
                Fate::Done => self.complete(index),
                Fate::Superseded => {
                    let owner = self.owner.clone();
                    self.run(
                        &owner,
                        &Command::Supersede {
                            todo: todo_id(index),
                            reason: "covered by the new migration plan".into(),
                            replacement: None,
                            grant_reason: None,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    fn agent_at(&self, index: usize) -> AgentId {
        if index == 0 {
            self.agent.clone()
        } else {
            self.others[(index - 1) % self.others.len()].clone()
        }
    }

    fn claim(&mut self, agent: &AgentId, todo: &TodoId, ttl: Option<Duration>) -> u64 {
        self.run(
            &Actor::Agent(agent.clone()),
            &Command::Claim {
                todo: todo.clone(),
                ttl,
                workspace: None,
                grant_reason: None,
            },
        );
        self.epoch(todo)
    }

    fn epoch(&self, todo: &TodoId) -> u64 {
        self.state.todos.get(todo).map_or(0, |t| t.last_epoch)
    }

    fn begin(&mut self, agent: &AgentId, todo: &TodoId, epoch: u64) -> TurnId {
        let turn = self.fresh_turn();
        self.run(
            &Actor::Agent(agent.clone()),
            &Command::BeginTurn {
                todo: todo.clone(),
                epoch,
                turn: turn.clone(),
                reserve: None,
            },
        );
        turn
    }

    fn fresh_turn(&mut self) -> TurnId {
        self.next_turn += 1;
        id(TurnId::new(format!("turn-{:07}", self.next_turn)))
    }

    fn fresh_evidence(&mut self) -> NewEvidence {
        self.next_evidence += 1;
        self.evidence(&format!("ev-{:07}", self.next_evidence), self.next_evidence)
    }

    /// Inputs for turn cycles `from..from + count` (see [`turn_cycle`]): turn and evidence ids
    /// unused in the goal as built (the same numbers give the same ids, so a copy of the goal
    /// takes each number once).
    ///
    /// # Panics
    /// Never: the ids are always valid.
    pub fn cycle_inputs(&self, from: u64, count: u64) -> Vec<(TurnId, NewEvidence)> {
        (from..from + count)
            .map(|k| {
                let turn = id(TurnId::new(format!("cycle-turn-{k:08}")));
                (turn, self.evidence(&format!("cycle-ev-{k:08}"), k))
            })
            .collect()
    }

    /// Evidence for one of the criteria's checks at the repository's current revision; every
    /// tenth one fails.
    fn evidence(&self, evidence: &str, n: u64) -> NewEvidence {
        NewEvidence {
            id: id(EvidenceId::new(evidence)),
            check: self.checks[usize::try_from(n).unwrap_or(0) % self.checks.len()].clone(),
            subject: self.subject.clone(),
            revision: self.revision(),
            outcome: if n.is_multiple_of(10) {
                Outcome::Fail
            } else {
                Outcome::Pass
            },
            summary: format!("{n} checks passed"),
            observed_at: self.now,
            ttl: None,
            inputs: loopx_kernel::Lineage::default(),
        }
    }

    fn revision(&self) -> Revision {
        id(Revision::new(format!("git:{:012x}", mix(self.head) >> 16)))
    }

    fn new_commit(&mut self) -> Observation {
        self.head += 1;
        let revision = self.revision();
        Observation {
            key: id(ObservationKey::new("git:acme/service@main")),
            subject: self.subject.clone(),
            fingerprint: id(Fingerprint::new(revision.as_str())),
            revision,
            observed_at: self.now,
            summary: "main moved".into(),
            facts: std::collections::BTreeMap::new(),
            order: None,
            etag: None,
        }
    }

    fn usage(index: usize) -> Amounts {
        let r = mix(index as u64 ^ 0xC0DE);
        Amounts {
            turns: 1,
            tokens: 8_000 + r % 40_000,
            cost_micros: 20_000 + r % 200_000,
            wall_ms: 30_000 + r % 600_000,
        }
    }

    fn settle(&mut self, turn: Begun, transition: Transition, facts: Facts, usage: Amounts) {
        let Begun {
            agent,
            todo,
            epoch,
            turn,
        } = turn;
        let Facts {
            evidence,
            observations,
        } = facts;
        let passed = matches!(transition, Transition::Complete { .. });
        let verdict = Verdict {
            validator: self.validator.clone(),
            outcome: if passed {
                VerdictOutcome::Passed
            } else {
                VerdictOutcome::Progress
            },
            summary: "validated by CI".into(),
            signature: None,
        };
        self.run(
            &Actor::Agent(agent),
            &Command::SettleTurn(Settlement {
                todo,
                epoch,
                turn,
                verdict,
                evidence,
                observations,
                transition,
                usage,
                failure: None,
            }),
        );
    }

    /// Works the todo at `index` to completion the way agents do.
    fn complete(&mut self, index: usize) {
        let todo = todo_id(index);
        let r = mix(index as u64 ^ 0xD0E);
        let mut holder = self.agent_at(index % AGENTS);
        let next = self.agent_at((index + 3) % AGENTS);
        let mut epoch = self.claim(&holder, &todo, None);
        match r % 100 {
            0..3 => {
                self.run(
                    &Actor::Agent(holder.clone()),
                    &Command::Release {
                        todo: todo.clone(),
                        epoch,
                    },
                );
                holder = next.clone();
                epoch = self.claim(&holder, &todo, None);
            }
            3..5 => {
                self.run(
                    &Actor::Agent(holder.clone()),
                    &Command::Handoff {
                        todo: todo.clone(),
                        epoch,
                        to: next.clone(),
                        note: HandoffNote {
                            next_action: "finish the adapter change and rerun the tests".into(),
                            stop_condition: "tests pass at the new revision".into(),
                            evidence: Vec::new(),
                        },
                        grant_reason: None,
                    },
                );
                holder = next.clone();
                epoch = self.epoch(&todo);
            }
            _ => {}
        }
        if (r >> 8) % 100 < 30 {
            let turn = self.begin(&holder, &todo, epoch);
            let begun = Begun::new(&holder, &todo, epoch, turn);
            self.settle(
                begun,
                Transition::KeepOpen,
                Facts::default(),
                Self::usage(index),
            );
            if (r >> 16).is_multiple_of(2) {
                holder = next;
            }
            epoch = self.claim(&holder, &todo, None);
        }
        let turn = self.begin(&holder, &todo, epoch);
        if (r >> 24) % 100 < 10 {
            self.run(
                &Actor::Agent(holder.clone()),
                &Command::Renew {
                    todo: todo.clone(),
                    epoch,
                    ttl: None,
                },
            );
        }
        self.done += 1;
        let observations = if self.done.is_multiple_of(25) {
            vec![self.new_commit()]
        } else {
            Vec::new()
        };
        let evidence = if self.done.is_multiple_of(4) {
            vec![self.fresh_evidence()]
        } else {
            Vec::new()
        };
        self.settle(
            Begun::new(&holder, &todo, epoch, turn),
            Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            Facts {
                evidence,
                observations,
            },
            Self::usage(index),
        );
    }

    /// Brings the pending todos to their final standing, just before [`Fixture::now`]: blocks,
    /// deferrals, monitor polls, then other agents' leases (last, so they are live at `now`).
    fn settle_pending(&mut self) {
        self.step = Duration::from_millis(50);
        let owner = self.owner.clone();
        let defer_until = self.now.plus(Duration::hours(2));
        for index in 0..self.todos {
            let todo = todo_id(index);
            match self.fates[index] {
                Fate::Blocked => {
                    self.run(
                        &owner,
                        &Command::Block {
                            todo,
                            reason: "the staging database is down".into(),
                            grant_reason: None,
                        },
                    );
                }
                Fate::Deferred => {
                    self.run(
                        &owner,
                        &Command::Defer {
                            todo,
                            until: ResumeCondition::At { at: defer_until },
                            grant_reason: None,
                        },
                    );
                }
                Fate::Monitor => {
                    let agent = self.agent_at(1 + index % (AGENTS - 1));
                    let epoch = self.claim(&agent, &todo, None);
                    let turn = self.begin(&agent, &todo, epoch);
                    let poll = Observation {
                        key: id(ObservationKey::new(format!("ci:acme/service#{index}"))),
                        subject: self.subject.clone(),
                        revision: self.revision(),
                        fingerprint: id(Fingerprint::new(format!("ci-{index}-running"))),
                        observed_at: self.now,
                        summary: "CI is running".into(),
                        facts: std::collections::BTreeMap::new(),
                        order: None,
                        etag: None,
                    };
                    let facts = Facts {
                        evidence: Vec::new(),
                        observations: vec![poll],
                    };
                    let begun = Begun::new(&agent, &todo, epoch, turn);
                    self.settle(begun, Transition::KeepOpen, facts, Amounts::ONE_TURN);
                }
                _ => {}
            }
        }
        for index in 0..self.todos {
            if self.fates[index] == Fate::LeasedByOther {
                let todo = todo_id(index);
                let agent = self.agent_at(1 + index % (AGENTS - 1));
                let epoch = self.claim(&agent, &todo, Some(Duration::hours(1)));
                if index % 2 == 0 {
                    self.begin(&agent, &todo, epoch);
                }
            }
        }
    }

    /// The worst case for [`Fixture::agent`]: a copy of the goal in which the owner has routed
    /// every todo in its frontier to the other agents (`reassign`), so nothing is runnable for
    /// it and `decide` must scan the whole pending set to compute the wait. The copy's history
    /// is left empty (it is not used for replay). Returns the copy and how many todos were
    /// reassigned.
    ///
    /// # Panics
    /// When the kernel refuses a reassignment: a builder bug.
    pub fn saturated(&self) -> (Fixture, usize) {
        let mut copy = Fixture {
            state: self.state.clone(),
            history: Vec::new(),
            fates: self.fates.clone(),
            subject: self.subject.clone(),
            checks: self.checks.clone(),
            others: self.others.clone(),
            agent: self.agent.clone(),
            owner: self.owner.clone(),
            validator: self.validator.clone(),
            recording: false,
            step: Duration::ZERO,
            ..*self
        };
        let ready = frontier(&copy.state, &copy.agent, copy.now);
        let owner = copy.owner.clone();
        for (k, todo) in ready.iter().enumerate() {
            let agent = copy.others[k % copy.others.len()].clone();
            copy.run(
                &owner,
                &Command::Reassign {
                    todo: todo.clone(),
                    to: Some(agent),
                    grant_reason: None,
                },
            );
        }
        (copy, ready.len())
    }

    /// The first todo in [`Fixture::agent`]'s frontier: what `decide` offers it.
    ///
    /// # Panics
    /// When the frontier is empty (a saturated fixture).
    pub fn runnable(&self) -> TodoId {
        match frontier(&self.state, &self.agent, self.now)
            .into_iter()
            .next()
        {
            Some(todo) => todo,
            None => panic!("the fixture's agent has nothing runnable"),
        }
    }

    /// `add_todo` commands for new todos `from..from + count` past the built ones, shaped like
    /// the planned ones (dependencies on done todos, write sets, priorities).
    pub fn fresh_todos(&self, from: usize, count: usize) -> Vec<Command> {
        let done: Vec<usize> = (0..self.todos)
            .rev()
            .filter(|&i| self.fates[i] == Fate::Done)
            .take(64)
            .collect();
        (from..from + count)
            .map(|k| {
                let last_done = (!done.is_empty()).then(|| done[k % done.len()]);
                Command::AddTodo {
                    todo: self.new_todo(self.todos + k, Fate::Runnable, last_done, None),
                }
            })
            .collect()
    }

    /// The turns begun in the goal's history.
    pub fn turns_begun(&self) -> usize {
        self.history
            .iter()
            .filter(|e| matches!(e.event, loopx_kernel::Event::TurnBegun { .. }))
            .count()
    }

    /// A one-line description of the goal, for benchmark output.
    pub fn describe(&self) -> String {
        let pending = self.state.pending_todos().count();
        let leased = self.state.leased_todos().count();
        format!(
            "{} todos ({} pending, {} leased), {} gates, {} evidence, {} turns, {} events",
            self.state.todos.len(),
            pending,
            leased,
            self.state.gates.len(),
            self.state.evidence.len(),
            self.turns_begun(),
            self.history.len()
        )
    }
}

/// A turn that has begun: who runs it, on which todo, under which epoch.
struct Begun {
    agent: AgentId,
    todo: TodoId,
    epoch: u64,
    turn: TurnId,
}

impl Begun {
    fn new(agent: &AgentId, todo: &TodoId, epoch: u64, turn: TurnId) -> Begun {
        Begun {
            agent: agent.clone(),
            todo: todo.clone(),
            epoch,
            turn,
        }
    }
}

/// What a settlement reports besides its verdict.
#[derive(Default)]
struct Facts {
    evidence: Vec<NewEvidence>,
    observations: Vec<Observation>,
}

fn decision(k: usize) -> DecisionScope {
    id(DecisionScope::new(format!("storage:decision-{k}")))
}

/// One full turn cycle on `todo` for `agent`: claim, begin a turn, settle it with a progress
/// verdict, one piece of evidence and the todo kept open (so the same todo can cycle again).
/// Returns how many events were recorded.
///
/// # Panics
/// When the kernel refuses a command: the todo was not runnable for the agent.
pub fn turn_cycle(
    state: &mut GoalState,
    now: Timestamp,
    agent: &Actor,
    validator: &Actor,
    todo: &TodoId,
    turn: TurnId,
    evidence: NewEvidence,
) -> usize {
    let mut events = 0;
    let mut run = |state: &mut GoalState, command: Command| match state.handle(agent, now, &command)
    {
        Ok(recorded) => events += recorded.len(),
        Err(refusal) => panic!("the kernel refused `{}`: {refusal}", command.name()),
    };
    run(
        state,
        Command::Claim {
            todo: todo.clone(),
            ttl: None,
            workspace: None,
            grant_reason: None,
        },
    );
    let epoch = state.todos.get(todo).map_or(0, |t| t.last_epoch);
    run(
        state,
        Command::BeginTurn {
            todo: todo.clone(),
            epoch,
            turn: turn.clone(),
            reserve: None,
        },
    );
    run(
        state,
        Command::SettleTurn(Settlement {
            todo: todo.clone(),
            epoch,
            turn,
            verdict: Verdict {
                validator: validator.clone(),
                outcome: VerdictOutcome::Progress,
                summary: "one more module migrated".into(),
                signature: None,
            },
            evidence: vec![evidence],
            observations: Vec::new(),
            transition: Transition::KeepOpen,
            usage: Amounts {
                turns: 1,
                tokens: 20_000,
                ..Amounts::ZERO
            },
            failure: None,
        }),
    );
    events
}

/// A working copy of a goal for benchmarks that change it. Commands run against the copy, which
/// is replaced by a fresh clone of the original once it has absorbed `limit` operations, so the
/// goal stays close to its original size however many iterations criterion asks for.
#[derive(Debug)]
pub struct Scratch<'a> {
    original: &'a GoalState,
    state: GoalState,
    used: u64,
    limit: u64,
}

impl<'a> Scratch<'a> {
    /// A copy of `original` that absorbs at most `limit` operations between refreshes.
    pub fn new(original: &'a GoalState, limit: u64) -> Scratch<'a> {
        Scratch {
            original,
            state: original.clone(),
            used: 0,
            limit: limit.max(1),
        }
    }

    /// Runs `count` operations in chunks that fit the copy's headroom and returns the time
    /// spent in `run` alone. `prepare(first, n)` builds the inputs of operations
    /// `first..first + n` of the current copy (untimed); `run` applies them (timed).
    pub fn timed<I>(
        &mut self,
        count: u64,
        mut prepare: impl FnMut(u64, u64) -> I,
        mut run: impl FnMut(&mut GoalState, I),
    ) -> Elapsed {
        let mut left = count;
        let mut elapsed = Elapsed::ZERO;
        while left > 0 {
            if self.used >= self.limit {
                self.state = self.original.clone();
                self.used = 0;
            }
            let chunk = left.min(self.limit - self.used);
            let inputs = prepare(self.used, chunk);
            let start = std::time::Instant::now();
            run(&mut self.state, inputs);
            elapsed += start.elapsed();
            self.used += chunk;
            left -= chunk;
        }
        elapsed
    }
}

/// Collects criterion's samples (iterations and elapsed time per sample) so a benchmark can
/// print its own figure next to criterion's report.
#[derive(Debug, Default)]
pub struct Recorder {
    samples: Vec<(u64, Elapsed)>,
}

impl Recorder {
    /// Records one sample.
    pub fn record(&mut self, iterations: u64, elapsed: Elapsed) {
        self.samples.push((iterations, elapsed));
    }

    /// The median time per iteration over the last `samples` samples (criterion measures after
    /// warming up, so the last ones are the measurement), or `None` when fewer were recorded (a
    /// filtered-out benchmark, or a `--test` run whose single cold iteration means nothing).
    pub fn median(&self, samples: usize) -> Option<Elapsed> {
        if samples == 0 || self.samples.len() < samples {
            return None;
        }
        let start = self.samples.len() - samples;
        let mut per_iteration: Vec<Elapsed> = self.samples[start..]
            .iter()
            .filter(|(iterations, _)| *iterations > 0)
            .map(|(iterations, elapsed)| {
                elapsed.div_f64(f64::from(u32::try_from(*iterations).unwrap_or(u32::MAX)))
            })
            .collect();
        per_iteration.sort();
        per_iteration.get(per_iteration.len() / 2).copied()
    }
}

/// Whether a figure should stay under its target (latency, bytes) or above it (rates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// The figure must not exceed the target.
    AtMost,
    /// The figure must reach the target.
    AtLeast,
}

/// Formats a figure against its target: `2.4x headroom` when met, `missed by 1.3x` otherwise.
pub fn against(value: f64, target: f64, goal: Goal) -> String {
    let ratio = match goal {
        Goal::AtMost => target / value,
        Goal::AtLeast => value / target,
    };
    if ratio >= 1.0 {
        format!("{ratio:.1}x headroom")
    } else {
        format!("missed by {:.1}x", 1.0 / ratio)
    }
}

/// A size as `1k`, `10k`, `100k`.
pub fn scale_name(todos: usize) -> String {
    if todos >= 1_000 && todos.is_multiple_of(1_000) {
        format!("{}k", todos / 1_000)
    } else {
        todos.to_string()
    }
}

/// The `percent`th percentile of `sorted` samples, by nearest rank (zero when there are none).
pub fn percentile(sorted: &[Elapsed], percent: usize) -> Elapsed {
    let index = (sorted.len() * percent).div_ceil(100).saturating_sub(1);
    sorted.get(index).copied().unwrap_or_default()
}

/// A declared goal (actors taken at their word) for `agents`, owned by `owner`: no criteria, no
/// budget, hour-long leases: the goal the store benchmarks drive turns through.
pub fn declared_spec(
    goal: GoalId,
    objective: &str,
    owner: PersonId,
    agents: impl IntoIterator<Item = AgentId>,
) -> GoalSpec {
    GoalSpec {
        id: goal,
        objective: objective.into(),
        owner,
        criteria: vec![],
        agents: agents.into_iter().collect(),
        budget: Limits::UNLIMITED,
        policy: Policy {
            lease_ttl: Duration::hours(1),
            ..Policy::default()
        },
        grants: std::collections::BTreeMap::new(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    }
}
