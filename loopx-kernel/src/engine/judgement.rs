//! The observe and judge phases, written once for every driver.
//!
//! The [`Engine`](super::Engine) feeds what they yield through the store's write path;
//! [`testkit::scenario`](crate::testkit::scenario) feeds it through
//! [`GoalState::handle`] on a goal held in memory. Both therefore record observations as the
//! same actor and have capabilities judge the same states in the same order, so a
//! capability's scenario tables run exactly what the engine runs.
//!
//! Sans-IO: a phase says what to submit (who, which command, under which deterministic
//! operation id); the driver submits it, moves the state it holds to what committed, and asks
//! for the next.

use std::sync::Arc;

use super::operation;
use crate::actor::Actor;
use crate::command::Command;
use crate::evidence::{NewEvidence, Observation};
use crate::ids::{AgentId, GoalId, OperationId, SourceId};
use crate::refusal::Refusal;
use crate::seams::{Capability, DeadLetter, Proposal};
use crate::state::GoalState;
use crate::time::Timestamp;
use crate::write::digest;

/// A command to submit, who issues it and under which operation id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// Who issues the command.
    pub actor: Actor,
    /// The command.
    pub command: Command,
    /// A deterministic operation id, so that a step retried after a lost reply or a crash
    /// replays the commit instead of repeating it.
    pub operation: OperationId,
}

/// Records `observation` as made by `provider`: the provider is the actor, and the operation
/// id is bound to the stream, the fingerprint and the observation time. An unchanged
/// observation commits no event (the kernel drops it), which is how a driver tells it changed
/// nothing.
pub fn record_observation(provider: &SourceId, observation: Observation) -> Submission {
    let seen = observation.observed_at.as_millis().to_string();
    let operation = operation(&[
        "observe",
        observation.key.as_str(),
        observation.fingerprint.as_str(),
        &seen,
    ]);
    Submission {
        actor: Actor::Provider(provider.clone()),
        command: Command::RecordObservation { observation },
        operation,
    }
}

/// The dead letter of `record`, a provider's fact that `goal` refused with `refusal` at `now`:
/// what a driver keeps ([`Store::keep_dead_letter`](crate::seams::Store::keep_dead_letter)) so
/// that the fact is not lost without a trace. `origin` says where it came from, in words.
pub fn dead_letter(
    goal: &GoalId,
    record: &Submission,
    refusal: &Refusal,
    origin: String,
    now: Timestamp,
) -> DeadLetter {
    DeadLetter {
        goal: goal.clone(),
        operation: record.operation.clone(),
        actor: record.actor.clone(),
        command: record.command.clone(),
        origin,
        code: refusal.code().to_owned(),
        reason: refusal.to_string(),
        first_refused: now,
        last_refused: now,
        refusals: 1,
    }
}

/// What a provider's fact establishes for a goal: given the goal's state right after the
/// provider recorded `observation`, the evidence the same provider records next, if any (for a
/// pull request, CI concluded at its exact head). A capability may not record evidence; this
/// is how a domain says which facts are evidence while the provider, whose word the fact is,
/// records it. Pure: it reads the state and the observation, nothing else.
pub type EvidenceRule = Arc<dyn Fn(&GoalState, &Observation) -> Option<NewEvidence> + Send + Sync>;

/// The evidence `rule` finds in `recorded` (a provider's [`record_observation`] that just
/// committed, leaving the goal at `state`), as that provider's `RecordEvidence` under an
/// operation id derived from the record's, so a replayed record replays its evidence too.
/// `None` when the submission records no observation, is not a provider's, or the rule finds
/// nothing.
pub fn record_evidence(
    rule: &EvidenceRule,
    state: &GoalState,
    recorded: &Submission,
) -> Option<Submission> {
    let (Actor::Provider(_), Command::RecordObservation { observation }) =
        (&recorded.actor, &recorded.command)
    else {
        return None;
    };
    let evidence = rule(state, observation)?;
    Some(Submission {
        actor: recorded.actor.clone(),
        command: Command::RecordEvidence { evidence },
        operation: operation(&[recorded.operation.as_str(), "evidence"]),
    })
}

/// A capability's proposal, ready to submit as the capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// The capability that proposed it.
    pub capability: SourceId,
    /// Its reason.
    pub rationale: String,
    /// The command, as the capability ([`Actor::Capability`]), under an operation id bound to
    /// the capability, the revision it judged and the command's digest.
    pub submission: Submission,
}

/// One judgement round: each capability, in order, judges the goal as it stands after every
/// proposal of the ones before it was submitted, and each of its proposals is yielded in the
/// order it proposed them.
///
/// ```
/// # use loopx_kernel::engine::JudgeRound;
/// # use loopx_kernel::seams::Capability;
/// # use loopx_kernel::{AgentId, GoalState, Timestamp};
/// // The loop every driver runs; here the goal is held in memory.
/// fn judge_in_memory(capability: &dyn Capability, state: &mut GoalState, agent: &AgentId, now: Timestamp) {
///     let mut round = JudgeRound::new([capability], agent, now);
///     while let Some(proposed) = round.next_proposal(state) {
///         let submission = proposed.submission;
///         // A refusal changes nothing; the round goes on with the next proposal.
///         let _ = state.handle(&submission.actor, now, &submission.command);
///     }
/// }
/// ```
pub struct JudgeRound<'c, C: Capability + ?Sized> {
    /// The capabilities still to judge, last first.
    waiting: Vec<&'c C>,
    agent: AgentId,
    now: Timestamp,
    current: Option<Judged>,
}

/// The proposals of the capability that judged last, not yet handed out.
struct Judged {
    capability: SourceId,
    actor: Actor,
    revision: String,
    proposals: std::vec::IntoIter<Proposal>,
}

impl<'c, C: Capability + ?Sized> JudgeRound<'c, C> {
    /// A round of `capabilities`, in order, judging for `agent` at `now`.
    pub fn new(
        capabilities: impl IntoIterator<Item = &'c C>,
        agent: &AgentId,
        now: Timestamp,
    ) -> Self {
        let mut waiting: Vec<&'c C> = capabilities.into_iter().collect();
        waiting.reverse();
        JudgeRound {
            waiting,
            agent: agent.clone(),
            now,
            current: None,
        }
    }

    /// The next proposal to submit, or `None` when every capability has judged and every
    /// proposal was handed out. `state` is the goal as it stands now, after every submission
    /// handed out before: when the capability that judged last has nothing left, the next one
    /// judges `state`.
    pub fn next_proposal(&mut self, state: &GoalState) -> Option<Proposed> {
        loop {
            if let Some(judged) = &mut self.current
                && let Some(proposal) = judged.proposals.next()
            {
                return Some(judged.submission(proposal));
            }
            let capability = self.waiting.pop()?;
            let proposals = capability.judge(state, &self.agent, self.now);
            self.current = Some(Judged {
                capability: capability.source().clone(),
                actor: Actor::Capability(capability.source().clone()),
                revision: state.revision.to_string(),
                proposals: proposals.into_iter(),
            });
        }
    }
}

impl Judged {
    fn submission(&self, proposal: Proposal) -> Proposed {
        // Bound to the revision judged and the payload, so a step retried after a crash
        // replays its proposals instead of repeating them.
        let payload = digest(&self.actor, &proposal.command);
        let operation = operation(&[
            "propose",
            self.capability.as_str(),
            &self.revision,
            &payload[..32],
        ]);
        Proposed {
            capability: self.capability.clone(),
            rationale: proposal.rationale,
            submission: Submission {
                actor: self.actor.clone(),
                command: proposal.command,
                operation,
            },
        }
    }
}
