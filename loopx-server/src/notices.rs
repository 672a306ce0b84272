//! A pending gate's one notice to its owner in the pull request the goal is bound to.
//!
//! After each pass over a goal (a delivery, a poll) the service looks for pending gates owned
//! by a person whose GitHub login the goal owner mapped (`goal amend --map-login
//! PERSON=github:LOGIN`), on a goal bound to `prfix` for a pull request (its first `pulls`
//! entry). Each such gate gets one comment there, through the kernel's outbox: the intent
//! commits first (`intend_gate_notice` as `provider:github`, keyed by the gate, so a gate is
//! never intended twice), then the comment is posted with its idempotency-key marker, then it
//! is recorded `performed` (`record_gate_notice`). A notice left pending (a crash between the
//! intent and the post, or between the post and its record) is resolved on the next pass by
//! reading it back: found → `performed`; absent while the gate is pending → posted once;
//! absent once the gate is answered or withdrawn → `absent`. The passes of one process take
//! turns, so a pass never reads back a notice whose post another pass has in flight. The
//! comment names the gate, its question and the exact `/loopx answer GATE …` and
//! `/loopx reject GATE …` lines, which the webhook route relays as the owner's answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use loopx_kernel::ids::bounded_id;
use loopx_kernel::outbox::gate_notice_key;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{EffectStatus, Effector, StoreError};
use loopx_kernel::{
    Command, EffectId, EffectIntent, EffectOutcome, GateId, GateNotice, OperationId, Refusal,
};

use crate::judging::Judging;

/// The provider the notices are intended, posted and recorded as.
const PROVIDER: &str = "github";

/// What posts the notices: the GitHub client's effector (`github.comment`).
pub(crate) type Notifier = Arc<dyn Effector>;

/// Held by each notice pass of this process (deliveries and polls alike), so that one posts a
/// notice while the others wait and then find it performed.
static NOTICE_PASSES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Judging {
    /// Notices every pending gate of `goal` that is due one, and resolves every notice left
    /// pending; what became of each, by gate. Nothing happens without a notifier, or for a goal
    /// bound to no pull request.
    ///
    /// # Errors
    /// The store's failure; a failed post leaves the notice pending for the next pass.
    pub(crate) async fn notice_gates(
        &self,
        goal: &GoalId,
    ) -> Result<Vec<(GateId, &'static str)>, StoreError> {
        let Some(notifier) = self.notifier.clone() else {
            return Ok(Vec::new());
        };
        // One pass at a time in this process: a pass that finds a notice another pass has just
        // intended would read it back absent while its post is in flight, and post it again.
        let _one_at_a_time = NOTICE_PASSES.lock().await;
        let Some(state) = self.store.load(goal).await? else {
            return Ok(Vec::new());
        };
        let Some((repo, number)) = bound_pull(&state) else {
            return Ok(Vec::new());
        };
        let provider = source();
        let now = self.clock.now();
        let mut done = Vec::new();
        // Notices left pending first: read back, never posted twice.
        for (gate, notice) in &state.gate_notices {
            if notice.is_pending() && notice.provider == provider {
                let open = state
                    .gates
                    .get(gate)
                    .is_some_and(|g| g.state_at(now).is_pending());
                let step = self
                    .resolve_notice(&*notifier, &state, gate, notice, open)
                    .await?;
                done.push((gate.clone(), step));
            }
        }
        for gate in state.gates.values() {
            if !gate.state_at(now).is_pending() || state.gate_notices.contains_key(&gate.id) {
                continue;
            }
            let Actor::Person(owner) = &gate.owner else {
                continue;
            };
            if state.login_of(owner, &provider).is_none() {
                continue;
            }
            let effect = intent(goal, &gate.id, &gate.question, &repo, number);
            let command = Command::IntendGateNotice {
                gate: gate.id.clone(),
                effect,
            };
            let submitted = match self
                .submit(
                    goal,
                    &Actor::Provider(provider.clone()),
                    &command,
                    &operation(goal, &gate.id, "intend"),
                )
                .await?
            {
                Ok(submitted) => submitted,
                Err(refusal) => {
                    tracing::debug!(code = refusal.code(), gate = %gate.id, "a gate notice was refused");
                    continue;
                }
            };
            let Some(notice) = submitted.state.gate_notices.get(&gate.id) else {
                continue;
            };
            if !notice.is_pending() {
                continue; // a replay of an intent already recorded
            }
            let step = self
                .resolve_notice(&*notifier, &submitted.state, &gate.id, notice, true)
                .await?;
            done.push((gate.id.clone(), step));
        }
        Ok(done)
    }

    /// Reads a pending notice back and acts by the outbox's rule, the gate standing in for the
    /// lease: `performed`, `posted`, `absent` or `unresolved` (left pending).
    async fn resolve_notice(
        &self,
        notifier: &dyn Effector,
        state: &GoalState,
        gate: &GateId,
        notice: &GateNotice,
        open: bool,
    ) -> Result<&'static str, StoreError> {
        let goal = &state.spec.id;
        let effect = notice.effect(goal, gate);
        let status = notifier
            .readback(&effect)
            .await
            .unwrap_or(EffectStatus::Unknown);
        let (outcome, step, note) = match status {
            EffectStatus::Committed => (
                EffectOutcome::Performed,
                "read_back",
                "read back: it happened",
            ),
            EffectStatus::Absent if open => match notifier.perform(&effect).await {
                Ok(EffectStatus::Committed) => (EffectOutcome::Performed, "posted", "performed"),
                other => {
                    tracing::warn!(gate = %gate, outcome = ?other.map_err(|e| e.to_string()), "a gate notice was not posted; the next pass reads it back");
                    return Ok("unresolved");
                }
            },
            EffectStatus::Absent => (
                EffectOutcome::Absent,
                "absent",
                "read back: it did not happen, and the gate is no longer pending",
            ),
            EffectStatus::Unknown => return Ok("unresolved"),
        };
        let command = Command::RecordGateNotice {
            gate: gate.clone(),
            outcome,
            note: Some(note.to_owned()),
        };
        // Keyed by how the outcome was learnt: a record that another service process made
        // first is then the kernel's refusal (the notice is no longer pending), never an
        // operation conflict.
        if let Err(refusal) = self
            .submit(
                goal,
                &Actor::Provider(source()),
                &command,
                &operation(goal, gate, step),
            )
            .await?
        {
            log_refusal(&refusal);
        }
        Ok(step)
    }
}

fn log_refusal(refusal: &Refusal) {
    tracing::debug!(code = refusal.code(), "a gate notice's record was refused");
}

/// The pull request a goal is bound to: the first of its `prfix` binding's `pulls`
/// (`owner/name#number`).
fn bound_pull(state: &GoalState) -> Option<(String, u64)> {
    let binding = state.spec.capability.as_ref()?;
    if binding.name.as_str() != "prfix" {
        return None;
    }
    let first = binding.config.get("pulls")?.as_array()?.first()?.as_str()?;
    let (repo, number) = first.split_once('#')?;
    let number = number.parse().ok()?;
    loopx_provider::github::rest::is_repository(repo).then(|| (repo.to_owned(), number))
}

/// The comment a gate's owner reads: the gate, its question, and how to answer it.
pub fn notice_body(gate: &GateId, question: &str) -> String {
    format!(
        "**loopx is waiting for your decision** on gate `{gate}`:\n\n> {question}\n\nAnswer it with a comment holding one of these lines:\n\n```\n/loopx answer {gate} YOUR ANSWER\n/loopx reject {gate} YOUR REASON\n```"
    )
}

fn intent(goal: &GoalId, gate: &GateId, question: &str, repo: &str, number: u64) -> EffectIntent {
    let params: BTreeMap<String, String> = [
        ("repo".to_owned(), repo.to_owned()),
        ("number".to_owned(), number.to_string()),
        ("body".to_owned(), notice_body(gate, question)),
    ]
    .into_iter()
    .collect();
    EffectIntent::new(
        effect_id(gate),
        "github.comment",
        format!("{repo}#{number}"),
        gate_notice_key(goal, gate),
        params,
    )
}

fn effect_id(gate: &GateId) -> EffectId {
    EffectId::new(bounded_id(&format!("gate-notice-{gate}"))).unwrap_or_else(
        |_| match EffectId::new("gate-notice") {
            Ok(id) => id,
            Err(_) => unreachable!("`gate-notice` is a valid id"),
        },
    )
}

fn operation(goal: &GoalId, gate: &GateId, step: &str) -> OperationId {
    let text = bounded_id(&format!("gate-notice-{goal}-{gate}-{step}"));
    OperationId::new(text).unwrap_or_else(|_| match OperationId::new("gate-notice") {
        Ok(id) => id,
        Err(_) => unreachable!("`gate-notice` is a valid id"),
    })
}

fn source() -> SourceId {
    match SourceId::new(PROVIDER) {
        Ok(id) => id,
        Err(_) => unreachable!("`github` is a valid source id"),
    }
}
