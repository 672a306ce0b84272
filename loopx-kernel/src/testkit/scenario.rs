//! Scenario tables for capabilities: observations in, proposals validated by the kernel,
//! decisions out.
//!
//! A [`Scenario`] holds one goal in memory and a capability under test. Each step either sets
//! the world up (a command from a person or an agent, evidence from a provider, the passing of
//! time) or feeds observations: they are recorded by a provider actor, the capability judges
//! the goal as it stands, every proposal is executed **as the capability** through the same
//! validation as any other command, and the step ends with the kernel's [`Decision`] for the
//! scenario's agent. Recording and judging are the engine's own observe and judge phases
//! ([`record_observation`], [`JudgeRound`]), applied here to a goal in memory, so a scenario
//! table tests what the engine runs. The [`Transcript`] of all of it is plain data,
//! meant for snapshot assertions (`insta::assert_json_snapshot!`), so a table of scenarios
//! reads as a table of expected behaviour.
//!
//! Invariants are checked after every step; a capability whose proposals break one shows the
//! [`Violation`]s in its transcript, and [`Transcript::violations`] lets a property test assert
//! there are none.
//!
//! ```
//! use loopx_kernel::seams::{Capability, Proposal};
//! use loopx_kernel::testkit::scenario::{self, Scenario, ScenarioStep};
//! use loopx_kernel::*;
//!
//! /// Opens a follow-up todo for every failing check it sees.
//! struct FollowUps(SourceId);
//!
//! impl Capability for FollowUps {
//!     fn source(&self) -> &SourceId {
//!         &self.0
//!     }
//!     fn judge(&self, state: &GoalState, _: &AgentId, now: Timestamp) -> Vec<Proposal> {
//!         let mut proposals = Proposals::at(state, now);
//!         let failing = state.observations.values().filter(|o| o.fact("verdict") == Some("fail"));
//!         for id in failing.filter_map(|o| TodoId::new(format!("fix-{}", o.key)).ok()) {
//!             proposals.add_todo(NewTodo::advance(id, "fix the failing check"), "a check failed");
//!         }
//!         proposals.into_vec()
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let capability = FollowUps(SourceId::new("follow-ups")?);
//! let mut scenario = Scenario::new(&capability, &scenario::spec("demo")?)?;
//! let failing = scenario::observation("ci", "repo", "git:abc", &[("verdict", "fail")])?;
//! let transcript = scenario.run(vec![ScenarioStep::Observe(vec![failing])]);
//! assert_eq!(transcript.final_decision().map(Decision::kind), Some("continue"));
//! assert!(transcript.violations().is_empty());
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::{id, roster};
use crate::actor::Actor;
use crate::budget::Limits;
use crate::command::{Command, GateAnswer};
use crate::decide::{Decision, decide};
use crate::engine::{JudgeRound, Submission, record_observation};
use crate::evidence::{NewEvidence, Observation};
use crate::facts::FactSchema;
use crate::goal::{Criterion, GoalSpec, Policy};
use crate::ids::{
    AgentId, Fingerprint, GateId, GoalId, InvalidId, ObservationKey, PersonId, Revision, SourceId,
    Subject, sha256_hex,
};
use crate::invariants::{Violation, check_invariants};
use crate::refusal::Refusal;
use crate::seams::Capability;
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};

/// Builds a step from the goal as it stands and the scenario time, or `None` to skip it.
pub type StepBuilder = Arc<dyn Fn(&GoalState, Timestamp) -> Option<ScenarioStep> + Send + Sync>;

/// One step of a scenario table.
#[derive(Clone)]
pub enum ScenarioStep {
    /// Observations made by the scenario's provider; the capability then judges the goal.
    Observe(Vec<Observation>),
    /// A command issued by someone other than the capability (the owner answering a gate, an
    /// agent settling a turn). It is part of the setting, so a refusal is reported as such.
    Command(Actor, Command),
    /// Evidence recorded by the scenario's provider (CI results, metrics files).
    Evidence(NewEvidence),
    /// Evidence recorded by another actor (an independent validator, an agent).
    EvidenceBy(Actor, NewEvidence),
    /// A step built when it runs, from the goal as it stands (evidence derived from recorded
    /// observations, an answer to whichever gate is pending). When the builder returns `None`
    /// the step is recorded as `skipped`, with no judgement.
    Derived(StepBuilder),
    /// Time passes; the capability is asked to judge again with no new observations.
    Advance(Duration),
    /// The capability judges the goal as it stands, with no new observations.
    Judge,
}

impl fmt::Debug for ScenarioStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioStep::Observe(o) => f.debug_tuple("Observe").field(o).finish(),
            ScenarioStep::Command(a, c) => f.debug_tuple("Command").field(a).field(c).finish(),
            ScenarioStep::Evidence(e) => f.debug_tuple("Evidence").field(e).finish(),
            ScenarioStep::EvidenceBy(a, e) => {
                f.debug_tuple("EvidenceBy").field(a).field(e).finish()
            }
            ScenarioStep::Derived(_) => f.write_str("Derived(..)"),
            ScenarioStep::Advance(d) => f.debug_tuple("Advance").field(d).finish(),
            ScenarioStep::Judge => f.write_str("Judge"),
        }
    }
}

impl ScenarioStep {
    /// A step built from the goal as it stands when it runs (see [`ScenarioStep::Derived`]).
    pub fn derived(
        build: impl Fn(&GoalState, Timestamp) -> Option<ScenarioStep> + Send + Sync + 'static,
    ) -> Self {
        ScenarioStep::Derived(Arc::new(build))
    }

    /// `person` answers `gate`: resolved with `yes`, or rejected with `no`.
    pub fn answer(person: PersonId, gate: GateId, resolve: bool) -> Self {
        ScenarioStep::Command(Actor::Person(person), answer_command(gate, resolve))
    }

    /// The goal owner answers the `n`-th gate (in id order) that still asks at the time the
    /// step runs, if there is one.
    pub fn owner_answers_pending(n: usize, resolve: bool) -> Self {
        ScenarioStep::derived(move |state, now| {
            let gate = state
                .gates
                .values()
                .filter(|g| g.state_at(now).is_pending())
                .nth(n)?;
            Some(ScenarioStep::answer(
                state.spec.owner.clone(),
                gate.id.clone(),
                resolve,
            ))
        })
    }
}

/// The command answering `gate`: resolve with `yes`, or reject with `no`.
pub fn answer_command(gate: GateId, resolve: bool) -> Command {
    let answer = if resolve {
        GateAnswer::Resolve {
            answer: "yes".into(),
        }
    } else {
        GateAnswer::Reject {
            reason: "no".into(),
        }
    };
    Command::AnswerGate { gate, answer }
}

/// What happened to one proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ProposalResult {
    /// The kernel accepted it; these events were recorded (by name).
    Accepted {
        /// The events.
        events: Vec<&'static str>,
    },
    /// The kernel refused it; nothing changed.
    Refused {
        /// The stable refusal code.
        code: &'static str,
        /// The refusal, in words.
        message: String,
    },
}

/// A proposal as the transcript shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JudgedProposal {
    /// The command's stable name.
    pub command: &'static str,
    /// The command in full.
    pub detail: Command,
    /// The capability's reason.
    pub rationale: String,
    /// What the kernel did with it.
    #[serde(flatten)]
    pub result: ProposalResult,
}

impl JudgedProposal {
    /// `command target`: the command's name and the id it is about ([`Command::target`]), or
    /// its name twice for a goal-wide command. What a scenario table lists as the point of a
    /// case.
    pub fn label(&self) -> String {
        format!(
            "{} {}",
            self.command,
            self.detail.target().unwrap_or(self.command)
        )
    }
}

/// The record of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
    /// What the step was (`observe`, `command`, `evidence`, `advance`, `judge`, or `skipped`
    /// for a derived step that built nothing).
    pub step: &'static str,
    /// The scenario time at the end of the step.
    pub at: Timestamp,
    /// Observation keys that changed something (unchanged ones are dropped by the kernel).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<ObservationKey>,
    /// For setting steps: the refusal, if the kernel refused the setting command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setting_refused: Option<String>,
    /// The capability's proposals and their fate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<JudgedProposal>,
    /// The kernel's decision for the scenario's agent after the step.
    pub decision: Decision,
    /// Invariant violations after the step (always empty for a correct kernel).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
}

impl StepRecord {
    /// The step's proposals the kernel accepted, in order.
    pub fn accepted(&self) -> impl Iterator<Item = &JudgedProposal> {
        self.proposals
            .iter()
            .filter(|p| matches!(p.result, ProposalResult::Accepted { .. }))
    }

    /// Checks what every capability promises after every step: the kernel's invariants hold
    /// and the kernel refused none of its proposals.
    ///
    /// # Errors
    /// A failing test case naming the first violation or refused proposal.
    pub fn check_legal(&self) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::test_runner::TestCaseError;
        if let Some(violation) = self.violations.first() {
            return Err(TestCaseError::fail(format!(
                "kernel invariants hold after `{}`: {violation:?}",
                self.step
            )));
        }
        for proposal in &self.proposals {
            if let ProposalResult::Refused { code, message } = &proposal.result {
                return Err(TestCaseError::fail(format!(
                    "proposals are legal: {} refused ({code}): {message}",
                    proposal.command
                )));
            }
        }
        Ok(())
    }
}

/// Everything a scenario did, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transcript {
    /// One record per step.
    pub steps: Vec<StepRecord>,
}

impl Transcript {
    /// The decision after the last step.
    pub fn final_decision(&self) -> Option<&Decision> {
        self.steps.last().map(|s| &s.decision)
    }

    /// Every invariant violation seen, in order.
    pub fn violations(&self) -> Vec<&Violation> {
        self.steps.iter().flat_map(|s| &s.violations).collect()
    }

    /// Every proposal the kernel accepted, in order.
    pub fn accepted(&self) -> impl Iterator<Item = &JudgedProposal> {
        self.steps
            .iter()
            .flat_map(|s| &s.proposals)
            .filter(|p| matches!(p.result, ProposalResult::Accepted { .. }))
    }

    /// Every proposal the kernel refused, in order.
    pub fn refused(&self) -> impl Iterator<Item = &JudgedProposal> {
        self.steps
            .iter()
            .flat_map(|s| &s.proposals)
            .filter(|p| matches!(p.result, ProposalResult::Refused { .. }))
    }

    /// Asserts what a row `case` of a scenario table expects: the kernel's invariants held
    /// after every step, it refused none of the capability's proposals, the accepted
    /// proposals, each shown by `label`, are `accepted` in order, and the final decision is of
    /// kind `decision`.
    ///
    /// # Panics
    /// When one of these does not hold, with a message naming `case` and what differs.
    #[track_caller]
    pub fn assert_case<S: AsRef<str>>(
        &self,
        case: &str,
        decision: &str,
        accepted: &[S],
        label: impl Fn(&JudgedProposal) -> String,
    ) {
        assert!(
            self.violations().is_empty(),
            "{case}: invariants hold: {:?}",
            self.violations()
        );
        let refused: Vec<&str> = self.refused().map(|p| p.command).collect();
        assert!(
            refused.is_empty(),
            "{case}: nothing proposed is refused: {refused:?}"
        );
        let shown: Vec<String> = self.accepted().map(label).collect();
        let expected: Vec<&str> = accepted.iter().map(AsRef::as_ref).collect();
        assert_eq!(shown, expected, "{case}: accepted proposals");
        assert_eq!(
            self.final_decision().map(Decision::kind),
            Some(decision),
            "{case}: final decision"
        );
    }
}

/// One goal, one capability, one agent, a manual clock.
pub struct Scenario<'c, C: Capability + ?Sized> {
    capability: &'c C,
    state: GoalState,
    agent: AgentId,
    provider: SourceId,
    now: Timestamp,
    judge_after_settings: bool,
}

impl<'c, C: Capability + ?Sized> Scenario<'c, C> {
    /// A scenario over a goal created from `spec` by its owner at [`roster::start`], judged
    /// for the first registered agent (or `alice` when none is registered).
    ///
    /// # Errors
    /// The kernel's refusal of the spec.
    pub fn new(capability: &'c C, spec: &GoalSpec) -> Result<Self, Refusal> {
        let now = roster::start();
        let state = GoalState::create(&Actor::Person(spec.owner.clone()), now, spec)?;
        let agent = spec
            .agents
            .iter()
            .next()
            .cloned()
            .unwrap_or_else(|| id("alice"));
        Ok(Scenario {
            capability,
            state,
            agent,
            provider: roster::provider(),
            now,
            judge_after_settings: false,
        })
    }

    /// Judges for `agent` instead of the first registered agent.
    #[must_use]
    pub fn for_agent(mut self, agent: AgentId) -> Self {
        self.agent = agent;
        self
    }

    /// Records observations and evidence as `provider` instead of the roster's.
    #[must_use]
    pub fn with_provider(mut self, provider: SourceId) -> Self {
        self.provider = provider;
        self
    }

    /// With `true`, the capability judges right after every setting step (a command or
    /// evidence), as a host does after every commit; its proposals are part of that step's
    /// record. The default is `false`: setting steps are not judged.
    #[must_use]
    pub fn judge_after_settings(mut self, judge: bool) -> Self {
        self.judge_after_settings = judge;
        self
    }

    /// The goal as it stands.
    pub fn state(&self) -> &GoalState {
        &self.state
    }

    /// The scenario time.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The agent decisions are made for.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// Runs the steps in order and returns their transcript.
    pub fn run(&mut self, steps: impl IntoIterator<Item = ScenarioStep>) -> Transcript {
        Transcript {
            steps: steps.into_iter().map(|step| self.step(step)).collect(),
        }
    }

    /// Runs one step.
    pub fn step(&mut self, step: ScenarioStep) -> StepRecord {
        match step {
            ScenarioStep::Observe(observations) => self.observe(observations),
            ScenarioStep::Command(actor, command) => {
                let refused = self.setting(&actor, &command);
                let proposals = self.judge_setting();
                self.record("command", vec![], refused, proposals)
            }
            ScenarioStep::Evidence(evidence) => {
                let actor = Actor::Provider(self.provider.clone());
                self.step(ScenarioStep::EvidenceBy(actor, evidence))
            }
            ScenarioStep::EvidenceBy(actor, evidence) => {
                let refused = self.setting(&actor, &Command::RecordEvidence { evidence });
                let proposals = self.judge_setting();
                self.record("evidence", vec![], refused, proposals)
            }
            ScenarioStep::Derived(build) => match build(&self.state, self.now) {
                Some(step) => self.step(step),
                None => self.record("skipped", vec![], None, vec![]),
            },
            ScenarioStep::Advance(span) => {
                self.now = self.now.plus(span);
                let proposals = self.judge();
                self.record("advance", vec![], None, proposals)
            }
            ScenarioStep::Judge => {
                let proposals = self.judge();
                self.record("judge", vec![], None, proposals)
            }
        }
    }

    /// Records the observations as the engine's observe phase does
    /// ([`record_observation`]), stamped with the scenario time, then judges.
    fn observe(&mut self, observations: Vec<Observation>) -> StepRecord {
        let mut changed = Vec::new();
        let mut refused = None;
        for mut observation in observations {
            observation.observed_at = self.now;
            let key = observation.key.clone();
            let Submission { actor, command, .. } = record_observation(&self.provider, observation);
            match self.state.handle(&actor, self.now, &command) {
                Ok(events) if events.is_empty() => {}
                Ok(_) => changed.push(key),
                Err(refusal) => refused = Some(refusal.to_string()),
            }
        }
        let proposals = self.judge();
        self.record("observe", changed, refused, proposals)
    }

    fn judge_setting(&mut self) -> Vec<JudgedProposal> {
        if self.judge_after_settings {
            self.judge()
        } else {
            vec![]
        }
    }

    fn setting(&mut self, actor: &Actor, command: &Command) -> Option<String> {
        self.state
            .handle(actor, self.now, command)
            .err()
            .map(|refusal| format!("{}: {refusal}", refusal.code()))
    }

    /// The engine's judge phase: one [`JudgeRound`] of the capability, each proposal applied
    /// as the capability.
    fn judge(&mut self) -> Vec<JudgedProposal> {
        let mut round = JudgeRound::new([self.capability], &self.agent, self.now);
        let mut judged = Vec::new();
        while let Some(proposed) = round.next_proposal(&self.state) {
            let Submission { actor, command, .. } = proposed.submission;
            let result = match self.state.handle(&actor, self.now, &command) {
                Ok(events) => ProposalResult::Accepted {
                    events: events.iter().map(|e| e.event.name()).collect(),
                },
                Err(refusal) => ProposalResult::Refused {
                    code: refusal.code(),
                    message: refusal.to_string(),
                },
            };
            judged.push(JudgedProposal {
                command: command.name(),
                detail: command,
                rationale: proposed.rationale,
                result,
            });
        }
        judged
    }

    fn record(
        &self,
        step: &'static str,
        observed: Vec<ObservationKey>,
        setting_refused: Option<String>,
        proposals: Vec<JudgedProposal>,
    ) -> StepRecord {
        StepRecord {
            step,
            at: self.now,
            observed,
            setting_refused,
            proposals,
            decision: decide(&self.state, &self.agent, self.now),
            violations: check_invariants(&self.state, self.now),
        }
    }
}

/// A goal spec with the testkit roster: owner `olivia`, agents `alice`, `bob` and
/// `carol`, no criteria, no budget limit. Add criteria with [`criterion`].
///
/// # Errors
/// [`InvalidId`] when `goal` is not a valid id.
pub fn spec(goal: &str) -> Result<GoalSpec, InvalidId> {
    Ok(GoalSpec {
        id: GoalId::new(goal)?,
        objective: format!("scenario {goal}"),
        owner: roster::owner(),
        criteria: vec![],
        agents: roster::agents().into_iter().collect(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: BTreeMap::default(),
        identity: crate::Identity::Declared,
        keys: Vec::new(),
        validators: BTreeMap::new(),
        capability: None,
    })
}

/// An acceptance criterion met by passing evidence of `check` about `subject`.
///
/// # Errors
/// [`InvalidId`] when a name is not a valid id.
pub fn criterion(id: &str, check: &str, subject: &str) -> Result<Criterion, InvalidId> {
    Ok(Criterion {
        id: id.try_into()?,
        text: format!("{check} passes for {subject}"),
        check: check.try_into()?,
        subject: subject.try_into()?,
    })
}

/// An observation of stream `key` about `subject` at `revision`, with `facts`; its
/// fingerprint is derived from all of them, so the same facts are "unchanged".
///
/// # Errors
/// [`InvalidId`] when a name is not a valid id.
pub fn observation(
    key: &str,
    subject: &str,
    revision: &str,
    facts: &[(&str, &str)],
) -> Result<Observation, InvalidId> {
    let facts: BTreeMap<String, String> = facts
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    with_facts(key, subject, revision, facts)
}

/// An observation of stream `key` about `subject` at `revision` whose facts are a typed
/// `value` of one of the kernel's observation schemas ([`crate::facts`]), written as a
/// provider writes them; fingerprinted as [`observation`] does, so both build the same
/// observation from the same facts.
///
/// # Errors
/// [`InvalidId`] when a name is not a valid id.
pub fn observed<S: FactSchema>(
    key: &str,
    subject: &str,
    revision: &str,
    value: &S,
) -> Result<Observation, InvalidId> {
    with_facts(key, subject, revision, value.to_facts())
}

fn with_facts(
    key: &str,
    subject: &str,
    revision: &str,
    facts: BTreeMap<String, String>,
) -> Result<Observation, InvalidId> {
    let fingerprint = format!("{key}|{subject}|{revision}|{facts:?}");
    Ok(Observation {
        key: ObservationKey::new(key)?,
        subject: Subject::new(subject)?,
        revision: Revision::new(revision)?,
        fingerprint: Fingerprint::new(&sha256_hex(fingerprint.as_bytes())[..16])?,
        observed_at: roster::start(),
        summary: String::new(),
        facts,
        order: None,
        etag: None,
    })
}
