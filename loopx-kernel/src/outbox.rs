//! The outbox: external effects fenced by the store, not by a process.
//!
//! An external effect (a pull-request comment, a commit status) is performed only after its
//! **intent** committed to the goal (`intend_effect` → `effect_intended`) under the todo's
//! current lease epoch, by the holder of that live lease, with a turn in flight. The kernel
//! refuses the intent of a holder fenced out by a newer epoch or whose lease expired, and an
//! effect id once intended is never intended again. Whoever performs it then records what
//! happened (`record_effect` → `effect_recorded`); until then the intent is **pending** and the
//! goal cannot end.
//!
//! A pending intent is resolved by reading the effect back
//! ([`Effector::readback`](crate::seams::Effector::readback)), by the rule [`resolve`]:
//!
//! | readback | intent still live (its epoch current, its lease live) | intent fenced (lease gone or newer epoch) |
//! |---|---|---|
//! | committed | record `performed` | record `performed` |
//! | absent | perform it (once), then record `performed` | record `absent`: never performed under a dead epoch |
//! | unknown | repair | repair |
//!
//! A fenced intent found absent is not performed by anyone: its holder may still be alive
//! between its commit and its call, so performing it elsewhere could do it twice. Work that
//! still needs the effect intends a new one under the current epoch (a new id, the same
//! idempotency key, so the provider's own readback still finds an earlier write). An intent
//! whose readback cannot tell stays pending, and [`decide`](crate::decide) sends it to `repair`
//! ([`RepairIssue::EffectUnresolved`](crate::RepairIssue::EffectUnresolved)) once its lease is
//! gone; its fix records what a person read back (`loopx effect resolve`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, EffectId, GoalId, TodoId, TurnId, bounded_id, sha256_hex};
use crate::seams::{Effect, EffectStatus};
use crate::state::GoalState;
use crate::time::Timestamp;

/// What an intent commits to: the effect's id, its kind, what it acts on, its idempotency key
/// and parameters (so that anyone can read it back from the store alone, after a crash) and a
/// digest of all of them, which the kernel checks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectIntent {
    /// The effect's id in the outbox; intended at most once per goal.
    pub id: EffectId,
    /// What is done, as the effector names it (e.g. `github.comment`).
    pub kind: String,
    /// What it acts on, for people (e.g. `acme/cli#12`).
    pub target: String,
    /// The key the effector deduplicates and reads the effect back by (the same across epochs).
    pub key: String,
    /// The effect's parameters, as the effector documents them for `kind`.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// [`EffectIntent::digest_of`] the kind, target, key and parameters: what exactly was meant.
    pub digest: String,
}

impl EffectIntent {
    /// An intent for an effect, its digest computed.
    pub fn new(
        id: EffectId,
        kind: impl Into<String>,
        target: impl Into<String>,
        key: impl Into<String>,
        params: BTreeMap<String, String>,
    ) -> Self {
        let (kind, target, key) = (kind.into(), target.into(), key.into());
        let digest = Self::digest_of(&kind, &target, &key, &params);
        EffectIntent {
            id,
            kind,
            target,
            key,
            params,
            digest,
        }
    }

    /// `sha256:` and the SHA-256 of the canonical JSON of kind, target, key and parameters.
    pub fn digest_of(
        kind: &str,
        target: &str,
        key: &str,
        params: &BTreeMap<String, String>,
    ) -> String {
        let json = serde_json::json!([kind, target, key, params]);
        format!("sha256:{}", sha256_hex(json.to_string().as_bytes()))
    }

    /// The effect to hand an effector for the todo's lease at `epoch` in `goal`.
    pub fn effect(&self, goal: &GoalId, todo: &TodoId, epoch: u64) -> Effect {
        Effect {
            idempotency_key: self.key.clone(),
            goal: goal.clone(),
            todo: todo.clone(),
            epoch,
            kind: self.kind.clone(),
            params: self.params.clone(),
        }
    }
}

/// An intent committed and not yet recorded as performed or absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingEffect {
    /// What was intended.
    pub effect: EffectIntent,
    /// The todo whose lease authorised it.
    pub todo: TodoId,
    /// The lease epoch it was intended under.
    pub epoch: u64,
    /// The holder of that lease, who intended it.
    pub holder: AgentId,
    /// The turn in flight when it was intended.
    pub turn: TurnId,
    /// When the intent committed.
    pub intended_at: Timestamp,
}

impl PendingEffect {
    /// The effect as its intent committed it, for a readback or its one performance.
    pub fn effect(&self, goal: &GoalId) -> Effect {
        self.effect.effect(goal, &self.todo, self.epoch)
    }

    /// True while the lease it was intended under is the todo's current one and live: only its
    /// holder may then resolve it, and only its holder may perform it.
    pub fn is_live(&self, state: &GoalState, now: Timestamp) -> bool {
        state.todos.get(&self.todo).is_some_and(|todo| {
            todo.last_epoch == self.epoch
                && todo
                    .live_lease(now)
                    .is_some_and(|lease| lease.epoch == self.epoch && lease.holder == self.holder)
        })
    }
}

/// What happened to an intended effect, as `record_effect` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectOutcome {
    /// It happened (performed, or read back as committed).
    Performed,
    /// It did not happen and never will under this intent: its id is spent.
    Absent,
}

impl EffectOutcome {
    /// `performed` or `absent`.
    pub fn name(self) -> &'static str {
        match self {
            EffectOutcome::Performed => "performed",
            EffectOutcome::Absent => "absent",
        }
    }
}

/// The next step for a pending intent, by the outbox's rule (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Record it `performed`: the readback found it.
    RecordPerformed,
    /// Perform it (the intent is live and the readback found it absent), then record it.
    Perform,
    /// Record it `absent`: it never happened and its epoch is fenced.
    RecordAbsent,
    /// Leave it pending: nobody can tell; a person reads it back and records it.
    Repair,
}

/// The outbox's rule: what a readback's `status` means for a pending intent that is `live`
/// (see [`PendingEffect::is_live`]).
pub fn resolve(status: EffectStatus, live: bool) -> Resolution {
    match status {
        EffectStatus::Committed => Resolution::RecordPerformed,
        EffectStatus::Absent if live => Resolution::Perform,
        EffectStatus::Absent => Resolution::RecordAbsent,
        EffectStatus::Unknown => Resolution::Repair,
    }
}

/// The id of the `n`-th effect a run of `turn` on `todo` asks for under lease `epoch`: a new
/// epoch makes a new id, since a fenced intent is never intended again. A lease runs one turn,
/// so the todo and the epoch tell runs apart even where one turn id names several (the todo
/// enters as a short digest, after the readable part; its last part is hexadecimal, never
/// `x` and a number as in the older form). A run begun before its epoch was recorded
/// (`began_under` 0, see [`idempotency_key`]) keeps the older form its effects were intended
/// with.
pub fn effect_id(todo: &TodoId, turn: &TurnId, began_under: u64, epoch: u64, n: usize) -> EffectId {
    let text = if began_under == 0 {
        format!("{turn}-e{epoch}-x{n}")
    } else {
        let of_todo = &sha256_hex(todo.as_str().as_bytes())[..8];
        format!("{turn}-e{epoch}-x{n}-{of_todo}")
    };
    EffectId::new(bounded_id(&text)).unwrap_or_else(|_| {
        match EffectId::new(format!("h-{}", &sha256_hex(text.as_bytes())[..32])) {
            Ok(id) => id,
            Err(_) => unreachable!("`h-` and 32 hexadecimal digits form a valid id"),
        }
    })
}

/// The idempotency key of the `n`-th effect the run of `turn` on `todo` that began under lease
/// epoch `began_under` asks for: the same under every epoch the run is taken over under, so an
/// effector that finds an earlier write of it (by its key) never writes it again, and another
/// for every other run of the turn id. A run begun before the epoch was recorded
/// (`began_under` 0) keeps the key its effects were first intended with.
pub fn idempotency_key(
    goal: &GoalId,
    todo: &TodoId,
    turn: &TurnId,
    began_under: u64,
    n: usize,
) -> String {
    if began_under == 0 {
        format!("{goal}/{turn}/{n}")
    } else {
        // The last part holds an `@`, which the older form's last part (a number) never does.
        format!("{goal}/{todo}/{turn}/{n}@e{began_under}")
    }
}

/// The one notice a gate's owner gets where they work (a pull-request comment naming the gate
/// and how to answer it), intended by a provider (`intend_gate_notice`) while the gate is
/// pending and its owner's login at that provider is mapped, keyed by the gate: a gate has at
/// most one notice, ever. There is no lease: the notice is fenced by the gate instead. A notice
/// still pending is resolved by reading it back: committed → `performed`; absent while the gate
/// is pending → performed once, then `performed`; absent once the gate is answered or withdrawn
/// → `absent` (nobody needs it any more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateNotice {
    /// What is to be performed (e.g. a `github.comment` with its idempotency key).
    pub effect: EffectIntent,
    /// The provider that intended it, the only one that records it.
    pub provider: crate::ids::SourceId,
    /// When the intent committed.
    pub intended_at: Timestamp,
    /// What became of it; `None` while it is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<EffectOutcome>,
}

impl GateNotice {
    /// True while nobody recorded what became of it.
    pub fn is_pending(&self) -> bool {
        self.outcome.is_none()
    }

    /// The effect to hand an effector: no lease authorises it, so its todo is named after the
    /// gate and its epoch is 0 (the effector finds it by its idempotency key alone).
    pub fn effect(&self, goal: &GoalId, gate: &crate::ids::GateId) -> Effect {
        let todo =
            TodoId::new(bounded_id(&format!("gate-{gate}"))).unwrap_or_else(|_| match TodoId::new(
                format!("h-{}", &sha256_hex(gate.as_str().as_bytes())[..32]),
            ) {
                Ok(id) => id,
                Err(_) => unreachable!("`h-` and 32 hexadecimal digits form a valid id"),
            });
        self.effect.effect(goal, &todo, 0)
    }
}

/// The idempotency key of a gate's notice: one per gate and goal.
pub fn gate_notice_key(goal: &GoalId, gate: &crate::ids::GateId) -> String {
    format!("{goal}/gate-notice/{gate}")
}
