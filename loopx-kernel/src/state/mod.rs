//! The goal's state: the fold of its events.
//!
//! `apply` never decides anything: every rule is checked when a command is executed, and an
//! event is a fact that only needs recording. Replaying stored events that contradict each other
//! (a corrupt or hand-edited log) yields a [`ReplayError`], never a panic.

mod read;

use std::collections::BTreeSet;

use imbl::Vector;
use serde::{Deserialize, Serialize};

use crate::actor::Actor;
use crate::budget::{Amounts, Ledger, Overrun};
use crate::command::GateAnswer;
use crate::event::{Event, RecordedEvent, SCHEMA_VERSION, SettledTransition};
use crate::evidence::{Evidence, Freshness, NewEvidence, Observation, SubjectHead};
use crate::gate::{Gate, GateStatus, NewGate};
use crate::goal::{Amendment, GoalSpec};
use crate::identity::RegisteredKey;
use crate::ids::{
    AgentId, CheckId, EffectId, EvidenceId, GateId, ObligationId, ObservationKey, PersonId,
    Revision, SourceId, Subject, TodoId, TurnId,
};
use crate::login::login_key;
use crate::obligation::{Discharge, Obligation, ObligationCause};
use crate::outbox::PendingEffect;
use crate::persistent::{Arena, Map, Set};
use crate::retire::Retirement;
use crate::retry::{Streak, TurnResult};
use crate::time::Timestamp;
use crate::todo::{
    ContinuationRecord, Lease, MonitorState, NewTodo, Priority, Todo, TodoClass, TodoStatus,
    TurnInFlight, Workspace,
};
use crate::todos::Todos;

/// A goal's complete state, rebuilt by folding its events.
///
/// Fields are public for reading; change the state only through commands (see
/// [`crate::execute`]) so every rule is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Unindexed")]
pub struct GoalState {
    /// The goal as created and amended.
    pub spec: GoalSpec,
    /// How many amendments were applied (the optimistic-concurrency revision of the spec).
    pub goal_revision: u64,
    /// How many events were applied (the store's compare-and-set revision).
    pub revision: u64,
    /// When the goal was created.
    pub created_at: Timestamp,
    /// Todos by id (an arena in creation order; see [`Todos`]).
    pub todos: Todos,
    /// Gates by id.
    pub gates: Map<GateId, Gate>,
    /// Evidence by id.
    pub evidence: Map<EvidenceId, Evidence>,
    /// The latest observation of each stream.
    pub observations: Map<ObservationKey, Observation>,
    /// The current revision of each subject.
    pub subjects: Map<Subject, SubjectHead>,
    /// Obligations by id.
    pub obligations: Map<ObligationId, Obligation>,
    /// The goal-wide budget.
    pub ledger: Ledger,
    /// The last workspace each agent reported.
    pub workspaces: Map<AgentId, Workspace>,
    /// The explicit intent to close, if declared.
    pub closure: Option<Intent>,
    /// The owner's abandonment, if any.
    pub abandoned: Option<Intent>,
    /// The next creation sequence number.
    pub next_seq: u64,
    /// Each todo's current streak of failed and of idle settled turns (only todos that have
    /// one); left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub streaks: Map<TodoId, Streak>,
    /// Settled turns in a row on the whole goal (monitors' polls excepted) that neither failed
    /// nor made progress; left out of the JSON when zero.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub idle_turns: u32,
    /// The latest time any of the goal's events was stamped with: the goal's own clock, which
    /// the write path never lets a command move backwards (see [`GoalState::last_commit`]).
    /// `None` only in a state decoded from a snapshot written before it was recorded, until the
    /// next event; left out of the JSON then, so such a snapshot keeps its bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_commit_at: Option<Timestamp>,
    /// The outbox: effects intended and not yet recorded as performed or absent; left out of
    /// the JSON when empty.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub pending_effects: Map<EffectId, PendingEffect>,
    /// Every effect id ever intended: an effect id is intended at most once; left out of the
    /// JSON when empty.
    #[serde(default, skip_serializing_if = "Set::is_empty")]
    pub used_effects: Set<EffectId>,
    /// The last turn that used more than it reserved, until the owner answers it by amending
    /// the budget or the policy; left out of the JSON when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrun: Option<Box<Overrun>>,
    /// The logins the owner mapped to people, by provider and then by login in lower case
    /// ([`Amendment::MapLogin`]); left out of the JSON when there is none.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub logins: Map<SourceId, Map<String, PersonId>>,
    /// Each gate's one notice to its owner, pending or recorded, by gate
    /// ([`GateNotice`](crate::outbox::GateNotice)); left out of the JSON when there is none.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub gate_notices: Map<GateId, crate::outbox::GateNotice>,
    /// The imported history its importer accepted without verifying it (`history_imported`);
    /// left out of the JSON when every commit verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified_history: Option<UnverifiedHistory>,
    #[serde(skip)]
    index: Index,
}

/// Imported commits accepted without verification: what `status`, `goal show` and the board
/// say about a goal whose history is not all proven.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnverifiedHistory {
    /// How many commits were taken unverified (over every import that accepted some).
    pub commits: u64,
    /// The revision of the first of them.
    pub first_revision: u64,
    /// Who accepted them, by the first such import.
    pub accepted_by: Actor,
    /// When.
    pub accepted_at: Timestamp,
}

/// A recorded intent (closure or abandonment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Why.
    pub reason: String,
    /// Who.
    pub by: Actor,
    /// When.
    pub at: Timestamp,
}

/// Derived lookups, rebuilt on load; never serialized. Persistent like the state's collections
/// (lists included, so that copying a shared node copies pointers, not lists).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Index {
    /// Todos that are not closed, in frontier order.
    pending: Set<(Priority, u32)>,
    /// Todos with a lease record (live or expired).
    leased: Set<u32>,
    /// Evidence per (check, subject), in record order.
    by_check: Map<(CheckId, Subject), Vector<EvidenceId>>,
    /// Per slot: how many of the todo's dependencies are not done. Kept so that `decide` can
    /// pass over work that waits on others without looking each dependency up.
    unmet: Arena<u32>,
    /// Per dependency slot: the dependents still counting it as not done.
    dependents: Map<u32, Vector<u32>>,
    /// Todos with a superseded dependency: they can never start as planned.
    dead_deps: Set<u32>,
}

/// The stored form of [`GoalState`]; like events, it refuses fields it does not know, so a
/// snapshot written by a newer kernel fails closed instead of losing data silently, and it
/// refuses a state no history could have folded (see [`Unindexed::check`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Unindexed {
    spec: GoalSpec,
    goal_revision: u64,
    revision: u64,
    created_at: Timestamp,
    todos: Todos,
    gates: Map<GateId, Gate>,
    evidence: Map<EvidenceId, Evidence>,
    observations: Map<ObservationKey, Observation>,
    subjects: Map<Subject, SubjectHead>,
    obligations: Map<ObligationId, Obligation>,
    ledger: Ledger,
    /// Every turn id ever begun, as kernels before a turn was its lease's one run kept it: read
    /// and dropped (see [`Lease::turn`]), so that their snapshots still load.
    #[serde(default, rename = "used_turns")]
    _used_turns: serde::de::IgnoredAny,
    workspaces: Map<AgentId, Workspace>,
    closure: Option<Intent>,
    abandoned: Option<Intent>,
    next_seq: u64,
    #[serde(default)]
    streaks: Map<TodoId, Streak>,
    #[serde(default)]
    idle_turns: u32,
    #[serde(default)]
    last_commit_at: Option<Timestamp>,
    #[serde(default)]
    pending_effects: Map<EffectId, PendingEffect>,
    #[serde(default)]
    used_effects: Set<EffectId>,
    #[serde(default)]
    overrun: Option<Box<Overrun>>,
    #[serde(default)]
    logins: Map<SourceId, Map<String, PersonId>>,
    #[serde(default)]
    gate_notices: Map<GateId, crate::outbox::GateNotice>,
    #[serde(default)]
    unverified_history: Option<UnverifiedHistory>,
}

impl Unindexed {
    /// What every folded state holds and a changed text may not: each entry filed under its
    /// own id, creation sequence numbers distinct and below `next_seq`, dependencies that
    /// exist, and fewer amendments than events. A violation names the entry, not its contents.
    fn check(&self) -> Result<(), String> {
        if self.revision == 0 || self.goal_revision >= self.revision {
            return Err(format!(
                "revision {} with {} amendments: a goal's first event is revision 1 and every amendment is an event after it",
                self.revision, self.goal_revision
            ));
        }
        if let Some(last) = self.last_commit_at
            && last < self.created_at
        {
            return Err(format!(
                "last commit at {last}, before the goal was created ({})",
                self.created_at
            ));
        }
        filed_under_own_id("gate", &self.gates, |g| &g.id)?;
        filed_under_own_id("evidence", &self.evidence, |e| &e.id)?;
        filed_under_own_id("obligation", &self.obligations, |o| &o.id)?;
        filed_under_own_id("observation", &self.observations, |o| &o.key)?;
        filed_under_own_id("pending effect", &self.pending_effects, |e| &e.effect.id)?;
        if let Some(id) = self
            .pending_effects
            .keys()
            .find(|id| !self.used_effects.contains(id))
        {
            return Err(format!("effect `{id}` is pending but was never intended"));
        }
        let mut seqs: Vec<u64> = self.todos.values().map(|t| t.seq).collect();
        seqs.extend(self.evidence.values().map(|e| e.seq));
        seqs.sort_unstable();
        if let Some(seq) = seqs.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]) {
            return Err(format!("creation sequence number {seq} is used twice"));
        }
        if let Some(&last) = seqs.last()
            && last >= self.next_seq
        {
            return Err(format!(
                "creation sequence number {last} is not below the next one, {}",
                self.next_seq
            ));
        }
        for todo in self.todos.values() {
            if let Some(dep) = todo.depends_on.iter().find(|d| !self.todos.contains_key(d)) {
                return Err(format!(
                    "todo `{}` depends on `{dep}`, which does not exist",
                    todo.id
                ));
            }
        }
        Ok(())
    }
}

/// Checks that every entry of `map` is filed under its own id.
fn filed_under_own_id<K: Ord + PartialEq + std::fmt::Display, V>(
    what: &str,
    map: &Map<K, V>,
    id: impl Fn(&V) -> &K,
) -> Result<(), String> {
    match map.iter().find(|(key, value)| id(value) != *key) {
        Some((key, value)) => Err(format!(
            "the {what} under key `{key}` has id `{}`",
            id(value)
        )),
        None => Ok(()),
    }
}

impl TryFrom<Unindexed> for GoalState {
    type Error = String;

    fn try_from(raw: Unindexed) -> Result<Self, String> {
        raw.check()?;
        let mut state = GoalState {
            spec: raw.spec,
            goal_revision: raw.goal_revision,
            revision: raw.revision,
            created_at: raw.created_at,
            todos: raw.todos,
            gates: raw.gates,
            evidence: raw.evidence,
            observations: raw.observations,
            subjects: raw.subjects,
            obligations: raw.obligations,
            ledger: raw.ledger,
            workspaces: raw.workspaces,
            closure: raw.closure,
            abandoned: raw.abandoned,
            next_seq: raw.next_seq,
            streaks: raw.streaks,
            idle_turns: raw.idle_turns,
            last_commit_at: raw.last_commit_at,
            pending_effects: raw.pending_effects,
            used_effects: raw.used_effects,
            overrun: raw.overrun,
            logins: raw.logins,
            gate_notices: raw.gate_notices,
            unverified_history: raw.unverified_history,
            index: Index::default(),
        };
        state.rebuild_index();
        Ok(state)
    }
}

/// A stored event history that cannot be folded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The history is empty.
    #[error("the event history is empty")]
    Empty,
    /// The first event does not create the goal.
    #[error("the first event is `{found}`, not `goal_created`")]
    NotGenesis {
        /// The event found.
        found: &'static str,
    },
    /// An event was written by a newer kernel.
    #[error(
        "event at revision {revision} has schema {found}; this build reads up to {SCHEMA_VERSION}: upgrade loopx"
    )]
    NewerSchema {
        /// The revision.
        revision: u64,
        /// The schema found.
        found: u32,
    },
    /// Revisions do not follow each other.
    #[error(
        "event revision {found} follows revision {previous}; the history has a gap or a duplicate"
    )]
    RevisionGap {
        /// The previous revision.
        previous: u64,
        /// The revision found.
        found: u64,
    },
    /// An event contradicts the state it is applied to.
    #[error("event at revision {revision} (`{event}`) is inconsistent with the history: {problem}")]
    Inconsistent {
        /// The revision.
        revision: u64,
        /// The event.
        event: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// Where a criterion stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CriterionStatus {
    /// Met by fresh passing evidence at the current revision.
    Met {
        /// The evidence.
        evidence: EvidenceId,
    },
    /// No evidence for its check and subject at all.
    NoEvidence,
    /// The newest evidence at the current revision fails.
    Failing {
        /// The evidence.
        evidence: EvidenceId,
    },
    /// The newest passing evidence is not fresh.
    Stale {
        /// The evidence.
        evidence: EvidenceId,
        /// Why.
        freshness: Freshness,
    },
    /// There is evidence for its check and subject, but none from a validator the goal
    /// registers for the check (on a signed goal, [`GoalSpec::validators`]): it is ignored.
    UnregisteredValidator {
        /// The newest evidence ignored.
        evidence: EvidenceId,
        /// Who established it.
        produced_by: Actor,
    },
}

impl CriterionStatus {
    /// True for [`CriterionStatus::Met`].
    pub fn is_met(&self) -> bool {
        matches!(self, CriterionStatus::Met { .. })
    }

    /// The evidence the status rests on, when there is any.
    pub fn evidence(&self) -> Option<&EvidenceId> {
        match self {
            CriterionStatus::Met { evidence }
            | CriterionStatus::Failing { evidence }
            | CriterionStatus::Stale { evidence, .. }
            | CriterionStatus::UnregisteredValidator { evidence, .. } => Some(evidence),
            CriterionStatus::NoEvidence => None,
        }
    }
}

fn inconsistent(event: &RecordedEvent, problem: impl Into<String>) -> ReplayError {
    ReplayError::Inconsistent {
        revision: event.revision,
        event: event.event.name(),
        problem: problem.into(),
    }
}

impl GoalState {
    /// Folds a complete history, from `goal_created` on.
    ///
    /// # Errors
    /// [`ReplayError`] when the history is empty, starts elsewhere, skips a revision, carries a
    /// newer schema or contradicts itself.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a RecordedEvent>,
    ) -> Result<GoalState, ReplayError> {
        let mut events = events.into_iter();
        let first = events.next().ok_or(ReplayError::Empty)?;
        let mut state = GoalState::genesis(first)?;
        for event in events {
            state.apply(event)?;
        }
        Ok(state)
    }

    /// The state right after `goal_created`.
    ///
    /// # Errors
    /// [`ReplayError`] when the event is not a `goal_created` at revision 1 of a known schema.
    pub fn genesis(event: &RecordedEvent) -> Result<GoalState, ReplayError> {
        check_schema(event)?;
        let Event::GoalCreated { spec } = &event.event else {
            return Err(ReplayError::NotGenesis {
                found: event.event.name(),
            });
        };
        if event.revision != 1 {
            return Err(ReplayError::RevisionGap {
                previous: 0,
                found: event.revision,
            });
        }
        Ok(GoalState {
            ledger: Ledger::new(spec.budget),
            spec: spec.clone(),
            goal_revision: 0,
            revision: 1,
            created_at: event.at,
            todos: Todos::default(),
            gates: Map::new(),
            evidence: Map::new(),
            observations: Map::new(),
            subjects: Map::new(),
            obligations: Map::new(),
            workspaces: Map::new(),
            closure: None,
            abandoned: None,
            next_seq: 0,
            streaks: Map::new(),
            idle_turns: 0,
            last_commit_at: Some(event.at),
            pending_effects: Map::new(),
            used_effects: Set::new(),
            overrun: None,
            logins: Map::new(),
            gate_notices: Map::new(),
            unverified_history: None,
            index: Index::default(),
        })
    }

    /// The goal's time: the latest time any of its events was stamped with (for a state from a
    /// snapshot older than that record, its creation time until its next event). The write path
    /// brings a command whose `now` is earlier up to it, so a goal's history never runs
    /// backwards.
    pub fn last_commit(&self) -> Timestamp {
        self.last_commit_at.unwrap_or(self.created_at)
    }

    /// Applies one recorded event. The revision must be the next one.
    ///
    /// # Errors
    /// [`ReplayError`] when the event does not fit the state; the state may then be partly
    /// updated and must be discarded (stores apply to a copy or reload).
    pub fn apply(&mut self, event: &RecordedEvent) -> Result<(), ReplayError> {
        check_schema(event)?;
        if event.revision != self.revision + 1 {
            return Err(ReplayError::RevisionGap {
                previous: self.revision,
                found: event.revision,
            });
        }
        self.apply_event(event)?;
        self.revision = event.revision;
        // The latest, not the last: a history written before the write path kept time from
        // running backwards may hold an earlier time after a later one.
        self.last_commit_at = Some(self.last_commit().max(event.at));
        Ok(())
    }

    #[allow(clippy::too_many_lines)]
    fn apply_event(&mut self, recorded: &RecordedEvent) -> Result<(), ReplayError> {
        let at = recorded.at;
        match &recorded.event {
            Event::GoalCreated { .. } => {
                return Err(inconsistent(recorded, "the goal already exists"));
            }
            Event::GoalAmended {
                goal_revision,
                amendments,
            } => {
                for amendment in amendments {
                    self.amend(amendment);
                }
                self.goal_revision = *goal_revision;
            }
            Event::GoalAbandoned { reason } => {
                self.abandoned = Some(Self::intent(reason, recorded));
            }
            Event::ClosureDeclared { reason } => {
                self.closure = Some(Self::intent(reason, recorded));
            }
            Event::TodoAdded { todo } => self.add_todo(todo, &recorded.actor, at, recorded)?,
            Event::TodoReassigned { todo, to, .. } => {
                self.todo_mut(todo, recorded)?.assignee.clone_from(to);
            }
            Event::TodoDeferred {
                todo,
                until,
                baseline,
                ..
            } => {
                self.end_lease(todo, recorded)?;
                self.set_status(
                    todo,
                    TodoStatus::Deferred {
                        until: until.clone(),
                        baseline: baseline.clone(),
                    },
                    recorded,
                )?;
            }
            Event::TodoBlocked { todo, reason, .. } => {
                self.end_lease(todo, recorded)?;
                self.set_status(
                    todo,
                    TodoStatus::Blocked {
                        reason: reason.clone(),
                    },
                    recorded,
                )?;
            }
            Event::TodoUnblocked { todo, .. } => {
                self.set_status(todo, TodoStatus::Open, recorded)?;
            }
            Event::TodoSuperseded {
                todo,
                reason,
                replacement,
                ..
            } => {
                self.end_lease(todo, recorded)?;
                self.set_status(
                    todo,
                    TodoStatus::Superseded {
                        reason: reason.clone(),
                        replacement: replacement.clone(),
                    },
                    recorded,
                )?;
            }
            Event::LeaseAcquired {
                todo,
                holder,
                epoch,
                expires_at,
                workspace,
                ..
            } => {
                self.end_lease(todo, recorded)?;
                if let Some(ws) = workspace {
                    self.workspaces.insert(holder.clone(), ws.clone());
                }
                let entry = self.todo_mut(todo, recorded)?;
                if matches!(entry.status, TodoStatus::Deferred { .. }) {
                    entry.status = TodoStatus::Open;
                }
                entry.handoff = None;
                entry.last_epoch = *epoch;
                entry.lease = Some(Box::new(Lease {
                    holder: holder.clone(),
                    epoch: *epoch,
                    acquired_at: at,
                    expires_at: *expires_at,
                    workspace: workspace.clone(),
                    turn: None,
                }));
                self.index_lease(todo, true);
            }
            Event::LeaseRenewed {
                todo, expires_at, ..
            } => {
                let lease = self.lease_mut(todo, recorded)?;
                lease.expires_at = *expires_at;
            }
            Event::TurnTakenOver {
                todo,
                turn,
                epoch,
                expires_at,
                ..
            } => {
                let entry = self.todo_mut(todo, recorded)?;
                let in_flight = entry.turn_in_flight().is_some_and(|t| &t.id == turn);
                if !in_flight || *epoch <= entry.last_epoch {
                    return Err(inconsistent(
                        recorded,
                        format!(
                            "turn `{turn}` taken over on `{todo}` while not in flight or under an old epoch"
                        ),
                    ));
                }
                entry.last_epoch = *epoch;
                let lease = self.lease_mut(todo, recorded)?;
                lease.epoch = *epoch;
                lease.expires_at = *expires_at;
            }
            Event::LeaseReleased { todo, .. } | Event::OutcomeAbsent { todo, .. } => {
                self.end_lease(todo, recorded)?;
            }
            Event::LeaseHandedOff {
                todo,
                to,
                epoch,
                expires_at,
                workspace,
                note,
                ..
            } => {
                self.end_lease(todo, recorded)?;
                let entry = self.todo_mut(todo, recorded)?;
                entry.last_epoch = *epoch;
                entry.handoff = Some(Box::new(note.clone()));
                entry.lease = Some(Box::new(Lease {
                    holder: to.clone(),
                    epoch: *epoch,
                    acquired_at: at,
                    expires_at: *expires_at,
                    workspace: workspace.clone(),
                    turn: None,
                }));
                self.index_lease(todo, true);
            }
            Event::TurnBegun {
                todo,
                epoch,
                turn,
                reserved,
            } => {
                let lease = self.lease_mut(todo, recorded)?;
                if let Some(running) = &lease.turn {
                    return Err(inconsistent(
                        recorded,
                        format!("turn `{turn}` began while `{}` is in flight", running.id),
                    ));
                }
                lease.turn = Some(TurnInFlight {
                    id: turn.clone(),
                    began_under: if recorded.schema >= crate::event::RUNS_KEYED_BY_EPOCH {
                        *epoch
                    } else {
                        0
                    },
                    begun_at: at,
                    reserved: *reserved,
                });
                if let Some(ledger) = self.todo_mut(todo, recorded)?.budget.as_mut() {
                    ledger.reserve(*reserved);
                }
                self.ledger.reserve(*reserved);
            }
            Event::TurnSettled {
                todo,
                turn,
                verdict,
                evidence,
                observations,
                transition,
                charged,
                overrun,
                result,
                ..
            } => {
                let agent = self.settle(todo, turn, *charged, *overrun, recorded)?;
                if let Some(result) = result {
                    self.count_streak(todo, turn, result, at);
                    let monitor = self.todos.get(todo).is_some_and(|t| t.monitor.is_some());
                    match result {
                        TurnResult::Progress => self.idle_turns = 0,
                        TurnResult::NoProgress if !monitor => {
                            self.idle_turns = self.idle_turns.saturating_add(1);
                        }
                        _ => {}
                    }
                }
                for obs in observations {
                    self.record_observation(obs);
                }
                // A turn's evidence is what its validator established, not the executor's claim.
                for item in evidence {
                    let producer = verdict.validator.clone();
                    self.record_evidence(item, producer, Some(turn.clone()), recorded)?;
                }
                self.tick_monitor(todo, observations, at, recorded)?;
                self.apply_transition(todo, turn, &agent, transition, recorded)?;
            }
            Event::EffectIntended {
                todo,
                epoch,
                holder,
                turn,
                effect,
            } => {
                if !self.used_effects.insert(effect.id.clone()) {
                    return Err(inconsistent(
                        recorded,
                        format!("effect `{}` was intended twice", effect.id),
                    ));
                }
                self.todo_mut(todo, recorded)?;
                self.pending_effects.insert(
                    effect.id.clone(),
                    PendingEffect {
                        effect: effect.clone(),
                        todo: todo.clone(),
                        epoch: *epoch,
                        holder: holder.clone(),
                        turn: turn.clone(),
                        intended_at: at,
                    },
                );
            }
            Event::EffectRecorded { effect, .. } => {
                if self.pending_effects.remove(effect).is_none() {
                    return Err(inconsistent(
                        recorded,
                        format!("effect `{effect}` is not pending"),
                    ));
                }
            }
            Event::GateOpened { gate } => self.open_gate(gate, recorded)?,
            Event::GateResolved { gate, answer } => {
                let status = GateStatus::Resolved {
                    answer: answer.clone(),
                    by: recorded.actor.clone(),
                    at,
                };
                self.gate_mut(gate, recorded)?.status = status;
            }
            Event::GateRejected { gate, reason } => {
                let status = GateStatus::Rejected {
                    reason: reason.clone(),
                    by: recorded.actor.clone(),
                    at,
                };
                self.gate_mut(gate, recorded)?.status = status;
            }
            Event::GateAnswerRelayed {
                gate,
                answer,
                person,
                ..
            } => {
                let by = Actor::Person(person.clone());
                let status = match answer {
                    GateAnswer::Resolve { answer } => GateStatus::Resolved {
                        answer: answer.clone(),
                        by,
                        at,
                    },
                    GateAnswer::Reject { reason } => GateStatus::Rejected {
                        reason: reason.clone(),
                        by,
                        at,
                    },
                };
                self.gate_mut(gate, recorded)?.status = status;
            }
            Event::GateNoticeIntended {
                gate,
                provider,
                effect,
            } => {
                self.gate_mut(gate, recorded)?;
                if !self.used_effects.insert(effect.id.clone())
                    || self.gate_notices.contains_key(gate)
                {
                    return Err(inconsistent(
                        recorded,
                        format!("gate `{gate}`'s notice `{}` was intended twice", effect.id),
                    ));
                }
                self.gate_notices.insert(
                    gate.clone(),
                    crate::outbox::GateNotice {
                        effect: effect.clone(),
                        provider: provider.clone(),
                        intended_at: at,
                        outcome: None,
                    },
                );
            }
            Event::GateNoticeRecorded { gate, outcome, .. } => {
                match self.gate_notices.get_mut(gate) {
                    Some(notice) if notice.is_pending() => notice.outcome = Some(*outcome),
                    _ => {
                        return Err(inconsistent(
                            recorded,
                            format!("gate `{gate}` has no pending notice"),
                        ));
                    }
                }
            }
            Event::GateWithdrawn { gate, reason } => {
                let status = GateStatus::Withdrawn {
                    reason: reason.clone(),
                    by: recorded.actor.clone(),
                    at,
                };
                self.gate_mut(gate, recorded)?.status = status;
            }
            Event::ObservationRecorded { observation } => self.record_observation(observation),
            Event::EvidenceRecorded { evidence } => {
                self.record_evidence(evidence, recorded.actor.clone(), None, recorded)?;
            }
            Event::ObligationRaised {
                id,
                kind,
                cause,
                detail,
                owner,
            } => {
                if self.obligations.contains_key(id) {
                    return Err(inconsistent(
                        recorded,
                        format!("obligation `{id}` raised twice"),
                    ));
                }
                self.obligations.insert(
                    id.clone(),
                    Obligation {
                        id: id.clone(),
                        kind: *kind,
                        cause: cause.clone(),
                        detail: detail.clone(),
                        owner: owner.clone(),
                        raised_by: recorded.actor.clone(),
                        raised_at: at,
                        discharged: None,
                    },
                );
            }
            Event::ObligationDischarged { obligation } => {
                let entry = self.obligations.get_mut(obligation).ok_or_else(|| {
                    inconsistent(recorded, format!("no obligation `{obligation}`"))
                })?;
                entry.discharged = Some(Discharge {
                    by: recorded.actor.clone(),
                    at,
                });
                // The plan changed in answer to the streak: it starts over.
                if let Some(todo) = entry.cause.streak_todo().cloned() {
                    self.streaks.remove(&todo);
                }
                if matches!(entry.cause, ObligationCause::GoalStalled { .. }) {
                    self.idle_turns = 0;
                }
            }
            Event::WorkspaceReported { agent, workspace } => {
                self.workspaces.insert(agent.clone(), workspace.clone());
            }
            Event::Retired(retirement) => self.retire(recorded, retirement)?,
            Event::HistoryImported {
                unverified,
                first_unverified,
                ..
            } => self.take_unverified(recorded, *unverified, *first_unverified),
        }
        Ok(())
    }

    /// Adds an import's unverified commits; a later import never clears an earlier one's.
    fn take_unverified(&mut self, recorded: &RecordedEvent, commits: u64, first: u64) {
        if commits == 0 {
            return;
        }
        match &mut self.unverified_history {
            Some(held) => {
                held.commits = held.commits.saturating_add(commits);
                held.first_revision = held.first_revision.min(first);
            }
            None => {
                self.unverified_history = Some(UnverifiedHistory {
                    commits,
                    first_revision: first,
                    accepted_by: recorded.actor.clone(),
                    accepted_at: recorded.at,
                });
            }
        }
    }

    /// Drops what a `retired` event lists; each item must be there (and a todo closed).
    fn retire(&mut self, recorded: &RecordedEvent, gone: &Retirement) -> Result<(), ReplayError> {
        let todos: BTreeSet<&TodoId> = gone.todos.iter().collect();
        if let Some(id) = gone
            .todos
            .iter()
            .find(|id| !self.todos.get(id).is_some_and(|t| t.status.is_closed()))
        {
            return Err(inconsistent(
                recorded,
                format!("no closed todo `{id}` to retire"),
            ));
        }
        for id in &gone.evidence {
            self.evidence
                .remove(id)
                .ok_or_else(|| inconsistent(recorded, format!("no evidence `{id}` to retire")))?;
        }
        for key in &gone.observations {
            self.observations
                .remove(key)
                .ok_or_else(|| inconsistent(recorded, format!("no stream `{key}` to retire")))?;
        }
        for subject in &gone.subjects {
            self.subjects.remove(subject).ok_or_else(|| {
                inconsistent(recorded, format!("no subject `{subject}` to retire"))
            })?;
        }
        for id in &gone.obligations {
            self.obligations
                .remove(id)
                .ok_or_else(|| inconsistent(recorded, format!("no obligation `{id}` to retire")))?;
        }
        if !todos.is_empty() {
            self.todos.remove_all(&todos);
            for id in todos {
                self.streaks.remove(id);
            }
        }
        self.rebuild_index();
        Ok(())
    }

    fn count_streak(&mut self, todo: &TodoId, turn: &TurnId, result: &TurnResult, at: Timestamp) {
        let streak = self
            .streaks
            .get(todo)
            .cloned()
            .unwrap_or_default()
            .after(result, turn, at);
        if streak == Streak::default() {
            self.streaks.remove(todo);
        } else {
            self.streaks.insert(todo.clone(), streak);
        }
    }

    fn intent(reason: &str, recorded: &RecordedEvent) -> Intent {
        Intent {
            reason: reason.to_owned(),
            by: recorded.actor.clone(),
            at: recorded.at,
        }
    }

    fn amend(&mut self, amendment: &Amendment) {
        let spec = &mut self.spec;
        match amendment {
            Amendment::SetObjective { objective } => spec.objective.clone_from(objective),
            Amendment::AddCriterion { criterion } => spec.criteria.push(criterion.clone()),
            Amendment::RemoveCriterion { id } => spec.criteria.retain(|c| &c.id != id),
            Amendment::RegisterAgent { agent } => {
                spec.agents.insert(agent.clone());
            }
            Amendment::UnregisterAgent { agent } => {
                spec.agents.remove(agent);
            }
            // The owner's answer to an overrun is a new budget or a new policy (its reservation).
            Amendment::SetBudget { limits } => {
                spec.budget = *limits;
                self.ledger.limits = *limits;
                self.overrun = None;
            }
            Amendment::SetPolicy { policy } => {
                spec.policy = policy.clone();
                self.overrun = None;
            }
            Amendment::Grant { agent, action } => {
                spec.grants
                    .entry(agent.clone())
                    .or_default()
                    .insert(*action);
            }
            Amendment::Revoke { agent, action } => {
                if let Some(actions) = spec.grants.get_mut(agent) {
                    actions.remove(action);
                    if actions.is_empty() {
                        spec.grants.remove(agent);
                    }
                }
            }
            Amendment::RegisterKey { actor, key } => spec.keys.push(RegisteredKey {
                actor: actor.clone(),
                key: *key,
            }),
            Amendment::RevokeKey { actor, key } => {
                spec.keys.retain(|k| !(&k.actor == actor && &k.key == key));
            }
            Amendment::RegisterValidator { check, validator } => {
                spec.validators
                    .entry(check.clone())
                    .or_default()
                    .insert(validator.clone());
            }
            Amendment::UnregisterValidator { check, validator } => {
                if let Some(validators) = spec.validators.get_mut(check) {
                    validators.remove(validator);
                    if validators.is_empty() {
                        spec.validators.remove(check);
                    }
                }
            }
            Amendment::SetCapability { capability } => {
                spec.capability = capability.clone().map(Box::new);
            }
            Amendment::MapLogin {
                person,
                provider,
                login,
            } => {
                self.logins
                    .get_or_default(provider.clone())
                    .insert(login_key(login), person.clone());
            }
            Amendment::UnmapLogin { provider, login } => {
                if let Some(logins) = self.logins.get_mut(provider) {
                    logins.remove(&login_key(login));
                    if logins.is_empty() {
                        self.logins.remove(provider);
                    }
                }
            }
        }
    }

    fn add_todo(
        &mut self,
        new: &NewTodo,
        actor: &Actor,
        at: Timestamp,
        recorded: &RecordedEvent,
    ) -> Result<(), ReplayError> {
        if self.todos.contains_key(&new.id) {
            return Err(inconsistent(
                recorded,
                format!("todo `{}` added twice", new.id),
            ));
        }
        // Validation only accepts dependencies on todos added before (earlier in the same
        // commit at the latest); a history that says otherwise was changed.
        if let Some(dep) = new
            .depends_on
            .iter()
            .find(|dep| !self.todos.contains_key(dep))
        {
            return Err(inconsistent(
                recorded,
                format!("todo `{}` depends on `{dep}`, which does not exist", new.id),
            ));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let monitor = matches!(new.class, TodoClass::Monitor(_)).then_some(MonitorState {
            next_due: at,
            no_change_streak: 0,
        });
        let todo = Todo {
            id: new.id.clone(),
            title: new.title.clone(),
            class: new.class.clone(),
            priority: new.priority,
            depends_on: new.depends_on.iter().cloned().collect(),
            requires_decisions: new.requires_decisions.iter().cloned().collect(),
            excluded_agents: new.excluded_agents.iter().cloned().collect(),
            assignee: new.assignee.clone(),
            writes: new.writes.clone().map(Box::new),
            idempotent: new.idempotent,
            budget: new.budget.map(|limits| Box::new(Ledger::new(limits))),
            expected_usage: new.expected_usage.clone(),
            created_by: actor.clone(),
            created_at: at,
            seq,
            status: TodoStatus::Open,
            lease: None,
            last_epoch: 0,
            monitor,
            handoff: None,
        };
        let priority = todo.priority;
        let slot = self.todos.push(todo);
        self.index.pending.insert((priority, slot));
        self.index_dependencies(slot);
        Ok(())
    }

    fn todo_mut(
        &mut self,
        id: &TodoId,
        recorded: &RecordedEvent,
    ) -> Result<&mut Todo, ReplayError> {
        self.todos
            .get_mut(id)
            .ok_or_else(|| inconsistent(recorded, format!("no todo `{id}`")))
    }

    fn gate_mut(
        &mut self,
        id: &GateId,
        recorded: &RecordedEvent,
    ) -> Result<&mut Gate, ReplayError> {
        self.gates
            .get_mut(id)
            .ok_or_else(|| inconsistent(recorded, format!("no gate `{id}`")))
    }

    fn lease_mut(
        &mut self,
        id: &TodoId,
        recorded: &RecordedEvent,
    ) -> Result<&mut Lease, ReplayError> {
        self.todo_mut(id, recorded)?
            .lease
            .as_deref_mut()
            .ok_or_else(|| inconsistent(recorded, format!("todo `{id}` has no lease")))
    }

    fn set_status(
        &mut self,
        id: &TodoId,
        status: TodoStatus,
        recorded: &RecordedEvent,
    ) -> Result<(), ReplayError> {
        let todo = self.todo_mut(id, recorded)?;
        todo.status = status;
        if todo.status.is_closed() {
            let priority = todo.priority;
            let done = matches!(todo.status, TodoStatus::Done { .. });
            if let Some(slot) = self.todos.slot(id) {
                self.index.pending.remove(&(priority, slot));
                self.release_dependents(slot, done);
            }
        }
        Ok(())
    }

    /// Drops the todo's lease, returning an in-flight turn's reservation uncharged.
    fn end_lease(&mut self, id: &TodoId, recorded: &RecordedEvent) -> Result<(), ReplayError> {
        let todo = self.todo_mut(id, recorded)?;
        let Some(lease) = todo.lease.take() else {
            return Ok(());
        };
        if let Some(turn) = lease.turn {
            if let Some(ledger) = todo.budget.as_mut() {
                ledger.cancel(turn.reserved);
            }
            self.ledger.cancel(turn.reserved);
        }
        self.index_lease(id, false);
        Ok(())
    }

    /// Charges a settled turn once, in full, and drops its lease; records what it was charged
    /// beyond its reservation as the goal's overrun (a recorded overrun must agree); returns
    /// the agent that ran it.
    fn settle(
        &mut self,
        id: &TodoId,
        turn: &TurnId,
        charged: Amounts,
        overrun: Amounts,
        recorded: &RecordedEvent,
    ) -> Result<AgentId, ReplayError> {
        let todo = self.todo_mut(id, recorded)?;
        let lease = todo
            .lease
            .take()
            .filter(|l| l.turn.as_ref().is_some_and(|t| &t.id == turn))
            .ok_or_else(|| inconsistent(recorded, format!("turn `{turn}` is not in flight")))?;
        let reserved = lease.turn.map_or(Amounts::ZERO, |t| t.reserved);
        // Events written before overruns were recorded carry none: the truth is derived.
        let derived = charged.beyond(reserved);
        if !overrun.is_zero() && overrun != derived {
            return Err(inconsistent(
                recorded,
                format!(
                    "turn `{turn}` records an overrun of {overrun:?}, but it was charged {charged:?} against {reserved:?}"
                ),
            ));
        }
        todo.handoff = None;
        if let Some(ledger) = todo.budget.as_mut() {
            ledger.charge(reserved, charged);
        }
        self.ledger.charge(reserved, charged);
        if !derived.is_zero() {
            self.overrun = Some(Box::new(Overrun {
                todo: id.clone(),
                turn: turn.clone(),
                by: derived,
            }));
        }
        self.index_lease(id, false);
        Ok(lease.holder)
    }

    fn tick_monitor(
        &mut self,
        id: &TodoId,
        observations: &[Observation],
        at: Timestamp,
        recorded: &RecordedEvent,
    ) -> Result<(), ReplayError> {
        let todo = self.todo_mut(id, recorded)?;
        let TodoClass::Monitor(spec) = &todo.class else {
            return Ok(());
        };
        let changed = observations.iter().any(|o| o.key == spec.watches);
        let next_due = at.plus(spec.cadence);
        if let Some(state) = todo.monitor.as_mut() {
            state.next_due = next_due;
            state.no_change_streak = if changed {
                0
            } else {
                state.no_change_streak.saturating_add(1)
            };
        }
        Ok(())
    }

    fn apply_transition(
        &mut self,
        id: &TodoId,
        turn: &TurnId,
        agent: &AgentId,
        transition: &SettledTransition,
        recorded: &RecordedEvent,
    ) -> Result<(), ReplayError> {
        let status = match transition {
            SettledTransition::KeepOpen => return Ok(()),
            SettledTransition::Defer { until, baseline } => TodoStatus::Deferred {
                until: until.clone(),
                baseline: baseline.clone(),
            },
            SettledTransition::Block { reason } => TodoStatus::Blocked {
                reason: reason.clone(),
            },
            SettledTransition::Complete {
                continuation,
                successors,
            } => {
                // The turn's agent completed the work, even when someone else resolved its
                // unknown outcome.
                let by = agent.clone();
                for successor in successors {
                    self.add_todo(successor, &recorded.actor, recorded.at, recorded)?;
                }
                if matches!(continuation, ContinuationRecord::NoFollowUp) {
                    self.closure = Some(Self::intent(
                        &format!("completed `{id}` with no follow-up"),
                        recorded,
                    ));
                }
                TodoStatus::Done {
                    continuation: continuation.clone(),
                    by,
                    turn: turn.clone(),
                    at: recorded.at,
                }
            }
        };
        self.set_status(id, status, recorded)
    }

    fn open_gate(&mut self, gate: &NewGate, recorded: &RecordedEvent) -> Result<(), ReplayError> {
        if self.gates.contains_key(&gate.id) {
            return Err(inconsistent(
                recorded,
                format!("gate `{}` opened twice", gate.id),
            ));
        }
        self.gates.insert(
            gate.id.clone(),
            Gate {
                id: gate.id.clone(),
                question: gate.question.clone(),
                owner: gate.owner.clone(),
                scope: gate.scope.clone(),
                deadline: gate.deadline,
                on_expiry: gate.on_expiry,
                opened_by: recorded.actor.clone(),
                opened_at: recorded.at,
                status: GateStatus::Pending,
            },
        );
        Ok(())
    }

    fn record_observation(&mut self, observation: &Observation) {
        self.advance_subject(
            &observation.subject,
            &observation.revision,
            observation.observed_at,
        );
        self.observations
            .insert(observation.key.clone(), observation.clone());
    }

    fn record_evidence(
        &mut self,
        new: &NewEvidence,
        produced_by: Actor,
        turn: Option<TurnId>,
        recorded: &RecordedEvent,
    ) -> Result<(), ReplayError> {
        if self.evidence.contains_key(&new.id) {
            return Err(inconsistent(
                recorded,
                format!("evidence `{}` recorded twice", new.id),
            ));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.index
            .by_check
            .get_or_default((new.check.clone(), new.subject.clone()))
            .push_back(new.id.clone());
        self.evidence.insert(
            new.id.clone(),
            Evidence {
                id: new.id.clone(),
                check: new.check.clone(),
                subject: new.subject.clone(),
                revision: new.revision.clone(),
                outcome: new.outcome,
                summary: new.summary.clone(),
                produced_by,
                turn,
                observed_at: new.observed_at,
                ttl: new.ttl,
                inputs: new.inputs.clone(),
                seq,
            },
        );
        Ok(())
    }

    /// The newest observation of a subject sets its current revision (ties go to the later
    /// record). Evidence never moves it: a late report about an old commit must not make the
    /// newest commit's evidence stale.
    fn advance_subject(&mut self, subject: &Subject, revision: &Revision, observed_at: Timestamp) {
        let newer = self
            .subjects
            .get(subject)
            .is_none_or(|head| observed_at >= head.observed_at);
        if newer {
            self.subjects.insert(
                subject.clone(),
                SubjectHead {
                    revision: revision.clone(),
                    observed_at,
                },
            );
        }
    }

    fn index_lease(&mut self, id: &TodoId, leased: bool) {
        if let Some(slot) = self.todos.slot(id) {
            if leased {
                self.index.leased.insert(slot);
            } else {
                self.index.leased.remove(&slot);
            }
        }
    }

    /// Counts the not-done dependencies of the todo at `slot` and registers it with them.
    /// Dependencies always sit at lower slots: they must exist when a todo is added.
    fn index_dependencies(&mut self, slot: u32) {
        let index = &mut self.index;
        let todo = self.todos.at(slot);
        let mut unmet = 0;
        for dep in &todo.depends_on {
            let Some(dep_slot) = self.todos.slot(dep) else {
                continue;
            };
            match self.todos.at(dep_slot).status {
                TodoStatus::Done { .. } => continue,
                TodoStatus::Superseded { .. } => {
                    index.dead_deps.insert(slot);
                }
                _ => index.dependents.get_or_default(dep_slot).push_back(slot),
            }
            unmet += 1;
        }
        let at = slot as usize;
        while index.unmet.len() <= at {
            index.unmet.push(0);
        }
        if let Some(count) = index.unmet.get_mut(at) {
            *count = unmet;
        }
    }

    /// The todo at `slot` closed: its dependents count it as done, or can never start.
    fn release_dependents(&mut self, slot: u32, done: bool) {
        let Some(dependents) = self.index.dependents.remove(&slot) else {
            return;
        };
        for dependent in dependents {
            if done {
                if let Some(count) = self.index.unmet.get_mut(dependent as usize) {
                    *count = count.saturating_sub(1);
                }
            } else {
                self.index.dead_deps.insert(dependent);
            }
        }
    }

    /// Pending todos with their slots, in frontier order.
    pub(crate) fn pending_slots(&self) -> impl Iterator<Item = (u32, &Todo)> + '_ {
        self.index
            .pending
            .iter()
            .map(|&(_, slot)| (slot, self.todos.at(slot)))
    }

    /// True when the todo at `slot` has dependencies that are not done.
    pub(crate) fn waits_on_dependencies(&self, slot: u32) -> bool {
        self.index.unmet.get(slot as usize).is_some_and(|&n| n > 0)
    }

    /// True when a dependency of the todo at `slot` was superseded.
    pub(crate) fn has_dead_dependency(&self, slot: u32) -> bool {
        self.index.dead_deps.contains(&slot)
    }

    fn rebuild_index(&mut self) {
        let mut index = Index::default();
        for (slot, todo) in (0..).zip(self.todos.values()) {
            if !todo.status.is_closed() {
                index.pending.insert((todo.priority, slot));
            }
            if todo.lease.is_some() {
                index.leased.insert(slot);
            }
        }
        let mut evidence: Vec<&Evidence> = self.evidence.values().collect();
        evidence.sort_by_key(|e| e.seq);
        for e in evidence {
            index
                .by_check
                .get_or_default((e.check.clone(), e.subject.clone()))
                .push_back(e.id.clone());
        }
        self.index = index;
        for slot in 0..u32::try_from(self.todos.len()).unwrap_or(u32::MAX) {
            self.index_dependencies(slot);
        }
    }
}

/// A goal's state as stored by a snapshot, with the schema version it was written with.
///
/// A reader should look at `schema` before decoding `state` (e.g. decode `{"schema": n}` alone
/// first): a state written by a newer kernel may not decode at all, and the schema says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The schema version of the state's JSON form.
    pub schema: u32,
    /// The state.
    pub state: GoalState,
}

impl GoalState {
    /// The state wrapped with the current schema version, ready to store.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            schema: SCHEMA_VERSION,
            state: self.clone(),
        }
    }
}

/// Why a stored snapshot's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The text is not the JSON of a snapshot, or holds a state no history could have folded.
    #[error("not a snapshot at line {line}, column {column}: {problem}")]
    Malformed {
        /// The line of the input where decoding stopped (1-based).
        line: usize,
        /// The column of the input where decoding stopped (1-based).
        column: usize,
        /// What was wrong, as the decoder reports it (it may quote a short piece of the text).
        problem: String,
    },
    /// The text decodes, but is not the exact text the kernel writes for what it decodes to
    /// (reordered, repeated, re-spaced or re-escaped): the stored text was changed.
    #[error("the snapshot differs from the kernel's encoding of it from byte {offset} on")]
    NotCanonical {
        /// The first byte at which the text and the kernel's encoding differ.
        offset: usize,
    },
}

impl Snapshot {
    /// Decodes a stored snapshot, accepting only the exact text the kernel writes: the text of
    /// `serde_json::to_string(&state.snapshot())` for some state. Whatever decodes re-encodes
    /// to the same bytes, so nothing a changed text held is silently dropped, reordered or
    /// read as something else. A newer schema decodes as far as its text allows; call
    /// [`Snapshot::into_state`] to refuse it.
    ///
    /// # Errors
    /// [`SnapshotError::Malformed`] when the text is not a snapshot or its state could not
    /// have been folded; [`SnapshotError::NotCanonical`] when it decodes but is not the text
    /// the kernel writes for it.
    pub fn decode(text: &str) -> Result<Snapshot, SnapshotError> {
        let snapshot: Snapshot =
            serde_json::from_str(text).map_err(|error| SnapshotError::Malformed {
                line: error.line(),
                column: error.column(),
                problem: without_position(&error),
            })?;
        let mut same = SameBytes {
            expected: text.as_bytes(),
            offset: 0,
        };
        // The encoding is compared as it is written, so a snapshot is never encoded whole.
        let encoded = serde_json::to_writer(&mut same, &snapshot);
        if encoded.is_err() || same.offset != text.len() {
            return Err(SnapshotError::NotCanonical {
                offset: same.offset,
            });
        }
        Ok(snapshot)
    }

    /// The state, if this build can read the snapshot's schema.
    ///
    /// # Errors
    /// [`ReplayError::NewerSchema`] for a snapshot written by a newer version.
    pub fn into_state(self) -> Result<GoalState, ReplayError> {
        if self.schema > SCHEMA_VERSION {
            return Err(ReplayError::NewerSchema {
                revision: self.state.revision,
                found: self.schema,
            });
        }
        Ok(self.state)
    }
}

/// serde's message without the ` at line L column C` it appends (the error carries both).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

/// A writer that compares what is written with `expected`, failing at the first difference;
/// `offset` is how many bytes matched.
struct SameBytes<'a> {
    expected: &'a [u8],
    offset: usize,
}

impl std::io::Write for SameBytes<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let rest = &self.expected[self.offset..];
        let matched = rest.iter().zip(buf).take_while(|(a, b)| a == b).count();
        self.offset += matched;
        if matched == buf.len() {
            Ok(buf.len())
        } else {
            Err(std::io::Error::other("differs"))
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn check_schema(event: &RecordedEvent) -> Result<(), ReplayError> {
    if event.schema > SCHEMA_VERSION {
        return Err(ReplayError::NewerSchema {
            revision: event.revision,
            found: event.schema,
        });
    }
    Ok(())
}
