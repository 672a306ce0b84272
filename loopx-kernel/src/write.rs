//! The write path every host takes: load the goal, let the kernel validate the command, stamp
//! the events and append them under compare-and-set, idempotent by operation id.
//!
//! Hosts, the engine and the CLI all write through a [`GoalHandle`] (`store.goal(&id)`, from
//! [`StoreExt`]), which runs [`submit`] or, paced on a clock, [`submit_paced`]. The digest,
//! the pacing between attempts and the stamping of events are here for adapters that build
//! their own path.

use std::future::Future;

use crate::actor::Actor;
use crate::command::Command;
use crate::decide::{Decision, decide};
use crate::event::RecordedEvent;
use crate::execute::execute;
pub use crate::execute::stamp;
use crate::goal::GoalSpec;
use crate::identity::{self, Identity, RegisteredKey, Signature, Signer};
use crate::ids::{AgentId, GoalId, IntoId, InvalidId, OperationId};
use crate::refusal::Refusal;
use crate::seams::{
    AppendRequest, Appended, Authorship, Clock, Commit, Receipt, Store, StoreError,
};
use crate::state::GoalState;
use crate::time::{Duration, Timestamp};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// How many times [`submit`] re-validates a command against a goal that moved under it before
/// giving up with [`SubmitError::Contended`]. Each attempt is one load, one validation and one
/// compare-and-set; several agents committing to one goal at once can lose a handful in a row,
/// so the bound is generous while still finite.
pub const MAX_ATTEMPTS: u32 = 64;

/// The longest pause [`backoff`] proposes: 16 ms. All pauses of one call stay below
/// `MAX_ATTEMPTS × MAX_BACKOFF` (about one second).
pub const MAX_BACKOFF: Duration = Duration::from_millis(16);

/// How long to pause before retry number `retry` of `operation`: a bound that doubles from
/// 1 ms up to [`MAX_BACKOFF`], and a part of it derived from the operation id and the retry
/// (deterministic, so replays pace alike; different operations spread apart, which is what
/// stops contending writers from colliding again in step).
pub fn backoff(operation: &OperationId, retry: u32) -> Duration {
    let bound = (1_i64 << retry.min(4)).min(MAX_BACKOFF.as_millis());
    let digest = Sha256::digest(format!("{operation}\n{retry}").as_bytes());
    let spread = i64::from(digest[0]) * (bound + 1) / 256;
    Duration::from_millis(spread.min(bound))
}

/// A command that took effect (or had already taken effect under the same operation id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The operation's receipt.
    pub receipt: Receipt,
    /// The events this call committed, in order; empty for a recorded no-op and when the
    /// operation had already committed (`replayed`).
    pub events: Vec<RecordedEvent>,
    /// The goal's state right after this call's commit; when `replayed`, its current state as
    /// loaded.
    pub state: GoalState,
    /// True when the operation had already committed with the same payload (a retry, or a
    /// concurrent duplicate that committed first): nothing changed and `receipt` is the first
    /// one. Of all the calls that submit one operation, exactly one is told `false`.
    pub replayed: bool,
}

/// Why [`submit`] did not commit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The kernel refused the command; nothing changed and nothing was charged.
    #[error("refused: {0}")]
    Refused(Refusal),
    /// The store failed; see [`StoreError`] for what each case means. An
    /// [`StoreError::OperationConflict`] says the operation id was used for another payload.
    #[error(transparent)]
    Store(StoreError),
    /// The goal moved under every attempt: other writers keep committing to it.
    #[error(
        "goal `{goal}` moved under each of {attempts} attempts; other writers are busy on it: retry later with the same operation id"
    )]
    Contended {
        /// The goal.
        goal: GoalId,
        /// Attempts made.
        attempts: u32,
    },
    /// A `create_goal` command names another goal than the one it was submitted for.
    #[error("the command creates goal `{created}` but was submitted for goal `{goal}`")]
    GoalMismatch {
        /// The goal it was submitted for.
        goal: GoalId,
        /// The goal the command creates.
        created: GoalId,
    },
}

impl From<StoreError> for SubmitError {
    fn from(error: StoreError) -> Self {
        SubmitError::Store(error)
    }
}

/// Writes to one goal of a store: create it from its spec, submit commands, read its state and
/// its decision, without naming the goal on every call. Cheap to make and to clone; it holds
/// no state of its own beyond the store, the goal id and an optional clock to pace retries on.
pub struct GoalHandle<'s, S: ?Sized> {
    store: &'s S,
    goal: GoalId,
    pacing: Option<&'s dyn Clock>,
    signer: Option<&'s dyn Signer>,
}

impl<S: ?Sized> Clone for GoalHandle<'_, S> {
    fn clone(&self) -> Self {
        GoalHandle {
            store: self.store,
            goal: self.goal.clone(),
            pacing: self.pacing,
            signer: self.signer,
        }
    }
}

/// [`Store::goal`](StoreExt::goal) for every store: the entry to a [`GoalHandle`].
pub trait StoreExt: Store {
    /// A handle on goal `goal` of this store (which need not exist yet).
    fn goal(&self, goal: &GoalId) -> GoalHandle<'_, Self> {
        GoalHandle {
            store: self,
            goal: goal.clone(),
            pacing: None,
            signer: None,
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

impl<'s, S: Store + ?Sized> GoalHandle<'s, S> {
    /// The goal.
    pub fn id(&self) -> &GoalId {
        &self.goal
    }

    /// The same handle, pausing on `clock` for [`backoff`] between attempts on a goal that
    /// other writers keep moving (without it, attempts follow each other at once).
    #[must_use]
    pub fn paced(mut self, clock: &'s dyn Clock) -> Self {
        self.pacing = Some(clock);
        self
    }

    /// The same handle, signing every command with `signer` (see [`crate::identity`]): the
    /// signature covers the goal, the operation id and the command's [`digest`], and a signed
    /// goal accepts it only when `signer`'s key is registered for the command's actor.
    #[must_use]
    pub fn signed_by(mut self, signer: &'s dyn Signer) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Creates the goal from `spec`, as its owner. Idempotent: creating the same spec again
    /// replays the first receipt (`replayed`). A signed spec that registers no key for its
    /// owner gets the key of the handle's signer ([`Self::signed_by`]) as the owner's.
    ///
    /// # Errors
    /// [`SubmitError::GoalMismatch`] when `spec` names another goal; otherwise as
    /// [`submit`] (`goal_exists` when another spec already created it, `key_unregistered`
    /// for a signed spec with no owner key and no signer).
    pub async fn create(&self, spec: &GoalSpec, now: Timestamp) -> Result<Submitted, SubmitError> {
        let owner = spec.owner_actor();
        let mut spec = spec.clone();
        if let Some(signer) = self.signer
            && spec.identity == Identity::Signed
            && spec.keys_of(&owner).next().is_none()
        {
            spec.keys.push(RegisteredKey {
                actor: owner.clone(),
                key: signer.public_key(),
            });
        }
        self.submit(&owner, now, &Command::CreateGoal { spec })
            .await
    }

    /// Submits `command` as `actor` under an operation id derived from the actor and the
    /// command ([`derived_operation`]): a retry of the same write replays its first receipt.
    /// A command meant to take effect twice with the same payload (a second identical renewal,
    /// say) needs ids of its own, and so does a retry that fills in its observation times from
    /// the clock again (the derived id keeps them): [`Self::submit_operation`].
    ///
    /// # Errors
    /// As [`submit`].
    pub async fn submit(
        &self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Submitted, SubmitError> {
        let operation = derived_operation(actor, command);
        self.submit_operation(actor, now, command, &operation).await
    }

    /// Submits `command` as `actor` under the caller's operation id.
    ///
    /// # Errors
    /// As [`submit`].
    pub async fn submit_operation(
        &self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
        operation: &OperationId,
    ) -> Result<Submitted, SubmitError> {
        let (store, goal) = (self.store, &self.goal);
        let call = Call::new(goal, actor, now, command, operation, self.signer);
        match self.pacing {
            Some(clock) => {
                let pause = |retry| clock.sleep(backoff(operation, retry));
                call.run(store, pause).await
            }
            None => call.run(store, |_| async {}).await,
        }
    }

    /// The goal's current state.
    ///
    /// # Errors
    /// [`StoreError::UnknownGoal`] when it does not exist, or a store failure.
    pub async fn state(&self) -> Result<GoalState, StoreError> {
        self.store
            .load(&self.goal)
            .await?
            .ok_or_else(|| StoreError::UnknownGoal {
                goal: self.goal.clone(),
            })
    }

    /// The kernel's decision for `agent` at `now`, from the goal's current state.
    ///
    /// # Errors
    /// [`HandleError::InvalidId`] for an invalid agent text; otherwise as [`Self::state`].
    pub async fn decide(
        &self,
        agent: impl IntoId<AgentId>,
        now: Timestamp,
    ) -> Result<Decision, HandleError> {
        let agent = agent.into_id()?;
        Ok(decide(&self.state().await?, &agent, now))
    }
}

/// Why a [`GoalHandle`] read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandleError {
    /// An id given as text is not valid.
    #[error(transparent)]
    InvalidId(#[from] InvalidId),
    /// The store failed, or the goal does not exist.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The operation id a [`GoalHandle`] derives when the caller gives none: `op-` and the first 32
/// hexadecimal digits of the SHA-256 of (actor, command) in [`digest`]'s form, with every
/// field as given, observation times included. Equal for a retry of the same write, distinct
/// for another actor or payload — and for an observation that differs only in when it was
/// made. Unlike the digest, it keeps observation times: without an operation id, a retry that
/// read the clock again cannot be told from a new observation of the same fact (a check that
/// fails, passes, then fails again), and swallowing the latter would lose a fact. A host that
/// re-reads the clock on a retry gives its own operation id ([`GoalHandle::submit_operation`]),
/// as the CLI's `--op` does; then the retry replays.
pub fn derived_operation(actor: &Actor, command: &Command) -> OperationId {
    let text = format!("op-{}", &hash(actor, &json(command))[..32]);
    match OperationId::new(text) {
        Ok(id) => id,
        Err(_) => unreachable!("`op-` and 32 hexadecimal digits form a valid id"),
    }
}

/// The payload digest of a command issued by an actor: the lowercase hex SHA-256 of
/// `loopx.submit.v1`, the actor's canonical JSON and the command's canonical JSON, each
/// followed by a newline except the last (canonical: object keys sorted at every depth, no
/// whitespace), the command's observation times left out.
///
/// The digest covers the intent, not the clock. Neither the time of issue nor the time an
/// observation was made is part of it: the `observed_at` of recorded evidence, of a recorded
/// observation, and of a settlement's `evidence` and `observations` is left out of the
/// command's JSON. That is the time a host or the CLI fills in from its clock when the caller
/// gives none, so a retry of the same write under the same operation id, at any later time,
/// has the same digest and replays its first receipt instead of conflicting; the operation's
/// first commit stands, with the time it recorded. Any other field changed on a retry is
/// another payload ([`StoreError::OperationConflict`]). No command can take effect twice by
/// differing only in those times: evidence ids are recorded once, an observation whose
/// fingerprint is unchanged is a no-op, a turn settles once.
pub fn digest(actor: &Actor, command: &Command) -> String {
    let mut value = json(command);
    without_observation_times(&mut value, command);
    hash(actor, &value)
}

fn hash(actor: &Actor, command: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"loopx.submit.v1\n");
    hasher.update(canonical_json(actor).as_bytes());
    hasher.update(b"\n");
    let mut text = String::new();
    write_canonical(command, &mut text);
    hasher.update(text.as_bytes());
    crate::ids::hex(&hasher.finalize())
}

/// Removes from `value` (the JSON of `command`) every observation time. The paths follow the
/// command's wire shape, which the wire-format snapshots pin.
fn without_observation_times(value: &mut Value, command: &Command) {
    let mut remove = |pointer: &str| {
        if let Some(Value::Object(map)) = value.pointer_mut(pointer) {
            map.remove("observed_at");
        }
    };
    match command {
        Command::RecordEvidence { .. } => remove("/evidence"),
        Command::RecordObservation { .. } => remove("/observation"),
        Command::SettleTurn(settlement) => {
            for i in 0..settlement.evidence.len() {
                remove(&format!("/evidence/{i}"));
            }
            for i in 0..settlement.observations.len() {
                remove(&format!("/observations/{i}"));
            }
        }
        _ => {}
    }
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value)
        .unwrap_or_else(|error| Value::String(format!("unencodable: {error}")))
}

/// The canonical JSON of `value`: object keys sorted at every depth, no whitespace, so equal
/// values always give equal text (the operation digest hashes it; a store's history chain
/// too). A value that cannot be encoded gives the JSON string `"unencodable: …"`.
pub fn canonical_json<T: serde::Serialize>(value: &T) -> String {
    let value = json(value);
    let mut out = String::new();
    write_canonical(&value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Submits one command to a goal: loads the goal, validates the command with the kernel's
/// [`execute`], stamps the events after the loaded revision and appends them under
/// compare-and-set with `operation` and the [`digest`] of (actor, command).
///
/// - The first attempt starts from the state the store has at hand ([`Store::cached`]) when it
///   has one, instead of loading: a stale one fails the compare-and-set (or the validation) and
///   the goal is loaded at once, without counting as a contended attempt. A refusal is only
///   ever reported against a loaded state.
/// - When `operation` already committed with the same payload, returns its first receipt with
///   `replayed` set, whatever the command would do against the goal now (a retry after a crash
///   or a lost reply is safe). With another payload it is `Store(OperationConflict)`. The
///   receipt is checked by the append itself, inside its transaction, and read separately only
///   when the kernel refuses the command.
/// - `replayed` is false for exactly one call per operation: the one whose append the store
///   answered [`Appended::Committed`]. Concurrent duplicates (the same operation, payload and
///   time from several processes) all return the same receipt, and all but one say `replayed`.
/// - When the goal moved between load and append, validates again against the new state, up
///   to [`MAX_ATTEMPTS`] times, at once. Use [`submit_paced`] to pause between attempts when
///   several writers contend for one goal.
/// - Time never runs backwards and cannot be forged forward: the command is validated and
///   stamped at `now`, or at the goal's last commit ([`GoalState::last_commit`]) when `now` is
///   earlier (a host whose clock is behind is brought up to it, not refused). The store bounds
///   it forward by its own clock plus the goal's [`Policy::clock_skew`](crate::Policy): a
///   commit beyond that is refused as [`Refusal::ClockAhead`] and writes nothing (unless the
///   store was created with a test clock, which follows the times it is given).
/// - A command the kernel accepts with no events (an unchanged observation) is recorded as a
///   no-op receipt: nothing else changes.
/// - A commit whose outcome the store reports as [`StoreError::Ambiguous`] is resolved by
///   reading the outcome back ([`Store::resolve`]), never guessed: it counts as this call's
///   commit only when the store proves that this call's attempt wrote the receipt; otherwise
///   it is `replayed`.
///
/// # Errors
/// [`SubmitError::Refused`] with the kernel's refusal, or `clock_ahead` from the store
/// (nothing changed);
/// [`SubmitError::Store`] for store failures; [`SubmitError::Contended`] when every attempt
/// found the goal moved; [`SubmitError::GoalMismatch`] for a `create_goal` of another goal.
pub async fn submit<S: Store + ?Sized>(
    store: &S,
    goal: &GoalId,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    operation: &OperationId,
) -> Result<Submitted, SubmitError> {
    submit_paced(store, goal, actor, now, command, operation, |_| async {}).await
}

/// [`submit`], pausing before each re-validation: `pause(retry)` is awaited before retry
/// number `retry` (0 for the first), so a caller can back off with its own timer, typically
/// for [`backoff`]`(operation, retry)`.
///
/// # Errors
/// As [`submit`].
pub async fn submit_paced<S, P, F>(
    store: &S,
    goal: &GoalId,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    operation: &OperationId,
    pause: P,
) -> Result<Submitted, SubmitError>
where
    S: Store + ?Sized,
    P: Fn(u32) -> F,
    F: Future<Output = ()>,
{
    Call::new(goal, actor, now, command, operation, None)
        .run(store, pause)
        .await
}

/// Where an attempt's starting state came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// [`Store::cached`]: possibly stale.
    AtHand,
    /// [`Store::load`]: the goal's state when it was read.
    Loaded,
}

/// One `submit` call's arguments, with the digest and the signature worked out once.
struct Call<'a> {
    goal: &'a GoalId,
    actor: &'a Actor,
    now: Timestamp,
    command: &'a Command,
    operation: &'a OperationId,
    digest: String,
    signature: Option<Signature>,
}

impl<'a> Call<'a> {
    fn new(
        goal: &'a GoalId,
        actor: &'a Actor,
        now: Timestamp,
        command: &'a Command,
        operation: &'a OperationId,
        signer: Option<&dyn Signer>,
    ) -> Self {
        let digest = digest(actor, command);
        let signature =
            signer.map(|signer| signer.sign(&identity::command_message(goal, operation, &digest)));
        Call {
            goal,
            actor,
            now,
            command,
            operation,
            digest,
            signature,
        }
    }

    async fn run<S, P, F>(&self, store: &S, pause: P) -> Result<Submitted, SubmitError>
    where
        S: Store + ?Sized,
        P: Fn(u32) -> F,
        F: Future<Output = ()>,
    {
        let goal = self.goal;
        if let Command::CreateGoal { spec } = self.command
            && &spec.id != goal
        {
            return Err(SubmitError::GoalMismatch {
                goal: goal.clone(),
                created: spec.id.clone(),
            });
        }
        // The state the store has at hand saves a read: a stale one only costs a second pass,
        // since the append's compare-and-set refuses it and a refusal it leads to is never
        // reported before the goal is loaded.
        let mut at_hand = store.cached(goal);
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                pause(attempt - 1).await;
            }
            if let Some(state) = at_hand.take()
                && let Some(done) = self.attempt(store, Some(state), Start::AtHand).await?
            {
                return Ok(done);
            }
            let current = store.load(goal).await?;
            if let Some(done) = self.attempt(store, current, Start::Loaded).await? {
                return Ok(done);
            }
        }
        Err(SubmitError::Contended {
            goal: goal.clone(),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Whether the command's actor is who it says, against the goal as `current` has it:
    /// checked before anything else, so a forged command learns nothing about the goal.
    fn authenticate(&self, current: Option<&GoalState>) -> Result<(), Refusal> {
        identity::authenticate(
            current.map(|state| &state.spec),
            self.goal,
            self.actor,
            self.command,
            self.operation,
            &self.digest,
            self.signature.as_ref(),
        )
    }

    /// Validates the command against `current` and appends its events after it. `None` when
    /// the goal had moved on from `current` (or, for a state at hand, the kernel refused: the
    /// refusal may be the staleness speaking), so the caller loads and tries again.
    async fn attempt<S: Store + ?Sized>(
        &self,
        store: &S,
        current: Option<GoalState>,
        start: Start,
    ) -> Result<Option<Submitted>, SubmitError> {
        let (goal, operation, digest) = (self.goal, self.operation, self.digest.as_str());
        match self.authenticate(current.as_ref()) {
            Ok(()) => {}
            // A key registered since the state at hand was cached: look again.
            Err(_) if start == Start::AtHand => return Ok(None),
            Err(refusal) => return Err(SubmitError::Refused(refusal)),
        }
        // A goal's time never runs backwards: a caller whose clock is behind the last commit is
        // brought up to it, and validated and stamped there. How far ahead it may run is the
        // store's to bound, by its own clock and the goal's skew.
        let now = current
            .as_ref()
            .map_or(self.now, |s| self.now.max(s.last_commit()));
        let clock_skew = match (current.as_ref(), self.command) {
            (Some(state), _) => state.spec.policy.clock_skew,
            (None, Command::CreateGoal { spec }) => spec.policy.clock_skew,
            (None, _) => crate::goal::DEFAULT_CLOCK_SKEW,
        };
        // The receipt is not read first: the append checks it inside its own transaction and
        // answers a committed operation with its first receipt (or a conflict). Only a refusal
        // needs it read here, since a retry of a command that took effect may no longer apply.
        let events = match execute(current.as_ref(), self.actor, now, self.command) {
            Ok(events) => events,
            Err(_) if start == Start::AtHand => return Ok(None),
            Err(refusal) => {
                return match committed(store, goal, operation, digest).await? {
                    Some(done) => Ok(Some(done)),
                    None => Err(SubmitError::Refused(refusal)),
                };
            }
        };
        let after = current.as_ref().map_or(0, |s| s.revision);
        let recorded = stamp(after, self.actor, now, events);
        let request = AppendRequest {
            goal: goal.clone(),
            expected_revision: after,
            operation: operation.clone(),
            digest: digest.to_owned(),
            at: now,
            events: recorded.clone(),
            authorship: Some(Authorship {
                command: self.command.clone(),
                signature: self.signature,
            }),
            clock_skew,
        };
        // Folded once, here: the store commits this state rather than folding the batch again.
        let commit = Commit::fold(current, request).map_err(|error| kernel_bug(goal, &error))?;
        let state = commit.state().clone();
        // Whether this call committed is the store's answer, decided inside the transaction that
        // recorded the operation: receipts of concurrent duplicates are alike and cannot tell.
        let appended = match store.append(commit).await {
            Ok(appended) => appended,
            Err(StoreError::Conflict { .. }) => return Ok(None),
            Err(StoreError::ClockAhead {
                at,
                store_time,
                skew,
            }) => {
                return Err(SubmitError::Refused(Refusal::ClockAhead {
                    at,
                    store_time,
                    skew,
                }));
            }
            Err(StoreError::Ambiguous {
                operation: op,
                attempt,
            }) => match store.resolve(goal, &op, &attempt).await {
                Ok(Some(appended)) if appended.receipt().digest == digest => appended,
                Ok(Some(_)) => {
                    return Err(StoreError::OperationConflict { operation: op }.into());
                }
                Ok(None) => return Ok(None),
                Err(_) => {
                    return Err(StoreError::Ambiguous {
                        operation: op,
                        attempt,
                    }
                    .into());
                }
            },
            Err(error) => return Err(error.into()),
        };
        match appended {
            Appended::Committed(receipt) => Ok(Some(Submitted {
                receipt,
                events: recorded,
                state,
                replayed: false,
            })),
            Appended::Replayed(receipt) => replayed(store, goal, receipt).await.map(Some),
        }
    }
}

/// The first receipt of `operation`, when it already committed with this digest.
async fn committed<S: Store + ?Sized>(
    store: &S,
    goal: &GoalId,
    operation: &OperationId,
    digest: &str,
) -> Result<Option<Submitted>, SubmitError> {
    match store.receipt(goal, operation).await? {
        None => Ok(None),
        Some(receipt) if receipt.digest == digest => replayed(store, goal, receipt).await.map(Some),
        Some(_) => Err(StoreError::OperationConflict {
            operation: operation.clone(),
        }
        .into()),
    }
}

async fn replayed<S: Store + ?Sized>(
    store: &S,
    goal: &GoalId,
    receipt: Receipt,
) -> Result<Submitted, SubmitError> {
    let state = store
        .load(goal)
        .await?
        .ok_or_else(|| StoreError::UnknownGoal { goal: goal.clone() })?;
    Ok(Submitted {
        receipt,
        events: Vec::new(),
        state,
        replayed: true,
    })
}

/// Events the kernel validated and stamped that do not fold onto the state they were validated
/// against.
fn kernel_bug(goal: &GoalId, error: &StoreError) -> SubmitError {
    SubmitError::Store(StoreError::Corrupt {
        detail: format!(
            "events the kernel validated for goal `{goal}` do not apply ({error}); this is a kernel bug, nothing was written"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Lineage, NewEvidence, Observation, Outcome};
    use crate::ids::{AgentId, PersonId, SourceId, TodoId};
    use crate::todo::NewTodo;

    fn add(title: &str) -> Command {
        Command::AddTodo {
            todo: NewTodo::advance(TodoId::new("t1").unwrap(), title),
        }
    }

    #[test]
    fn the_digest_is_stable_and_binds_actor_and_payload() {
        let agent = Actor::Agent(AgentId::new("a").unwrap());
        let other = Actor::Agent(AgentId::new("b").unwrap());
        // Pinned to the documented input: the tag, the actor's and the command's canonical
        // JSON, one line each. A change here breaks idempotency across versions.
        let owner = Actor::Person(PersonId::new("olivia").unwrap());
        let abandon = Command::AbandonGoal { reason: "x".into() };
        assert_eq!(
            digest(&owner, &abandon),
            "24a637872dfbbd9574d23d19aea1f0508c2a4ee41a1f302d5c0d7067aee0f992"
        );
        let digest_a = digest(&agent, &add("x"));
        assert_eq!(digest_a.len(), 64);
        assert_eq!(digest(&agent, &add("x")), digest_a);
        assert_ne!(digest(&other, &add("x")), digest_a);
        assert_ne!(digest(&agent, &add("y")), digest_a);
        // A command without observation times derives its id from the same hash, as before.
        assert_eq!(
            derived_operation(&owner, &abandon).as_str(),
            "op-24a637872dfbbd9574d23d19aea1f050"
        );
    }

    fn evidence(observed_at: Timestamp) -> NewEvidence {
        NewEvidence {
            id: "e1".into_id().unwrap(),
            check: "ci".into_id().unwrap(),
            subject: "pr:1".into_id().unwrap(),
            revision: "sha:1".into_id().unwrap(),
            outcome: Outcome::Pass,
            summary: String::new(),
            observed_at,
            ttl: None,
            inputs: Lineage::default(),
        }
    }

    fn observation(observed_at: Timestamp) -> Observation {
        Observation {
            key: "ci:1".into_id().unwrap(),
            subject: "pr:1".into_id().unwrap(),
            revision: "sha:1".into_id().unwrap(),
            fingerprint: "f1".into_id().unwrap(),
            observed_at,
            summary: String::new(),
            facts: std::collections::BTreeMap::new(),
            order: None,
            etag: None,
        }
    }

    /// When a fact was observed is not part of the intent: the same write with its times filled
    /// in again later digests alike, while any other field is another payload. Derived ids keep
    /// the times, so a new observation of the same fact is never taken for a retry.
    #[test]
    fn observation_times_are_not_part_of_the_digest() {
        let provider = Actor::Provider(SourceId::new("ci").unwrap());
        let (t1, t2) = (Timestamp::from_millis(1_000), Timestamp::from_millis(2_000));
        let record = |at| Command::RecordEvidence {
            evidence: evidence(at),
        };
        let observe = |at| Command::RecordObservation {
            observation: observation(at),
        };
        // Built from its wire shape, so that a field added to settlements keeps this compiling.
        let settle = |at| {
            let settlement = serde_json::json!({
                "todo": "t1",
                "epoch": 1,
                "turn": "turn-1",
                "verdict": { "validator": provider, "outcome": "passed" },
                "evidence": [evidence(t1), evidence(at)],
                "observations": [observation(at)],
                "transition": {
                    "kind": "complete",
                    "continuation": { "kind": "goal_still_active" },
                },
            });
            Command::SettleTurn(serde_json::from_value(settlement).unwrap())
        };
        let commands: [&dyn Fn(Timestamp) -> Command; 3] = [&record, &observe, &settle];
        for command in commands {
            assert_eq!(
                digest(&provider, &command(t1)),
                digest(&provider, &command(t2))
            );
            assert_ne!(
                derived_operation(&provider, &command(t1)),
                derived_operation(&provider, &command(t2))
            );
            assert_eq!(
                derived_operation(&provider, &command(t1)),
                derived_operation(&provider, &command(t1))
            );
        }
        // Another field is another payload, whatever the times.
        let mut failed = evidence(t2);
        failed.outcome = Outcome::Fail;
        assert_ne!(
            digest(&provider, &record(t1)),
            digest(&provider, &Command::RecordEvidence { evidence: failed })
        );
        let mut moved = observation(t1);
        moved.fingerprint = "f2".into_id().unwrap();
        assert_ne!(
            digest(&provider, &observe(t1)),
            digest(
                &provider,
                &Command::RecordObservation { observation: moved }
            )
        );
    }

    #[test]
    fn backoff_grows_within_its_bound_and_spreads_operations() {
        let op = |name: &str| OperationId::new(name).unwrap();
        for retry in 0..64 {
            let pause = backoff(&op("a"), retry);
            assert!(pause.as_millis() >= 0 && pause.as_millis() <= MAX_BACKOFF.as_millis());
            assert!(
                pause.as_millis() <= 1 << retry.min(4),
                "retry {retry}: {pause}"
            );
            assert_eq!(pause, backoff(&op("a"), retry), "deterministic");
        }
        let late: Vec<i64> = (0..32)
            .map(|n| backoff(&op(&format!("op-{n}")), 10).as_millis())
            .collect();
        assert!(
            late.iter().any(|p| *p != late[0]),
            "operations spread apart: {late:?}"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value: Value =
            serde_json::from_str(r#"{"b": [{"z": 1, "a": "é\n"}], "a": null}"#).unwrap();
        let mut out = String::new();
        write_canonical(&value, &mut out);
        assert_eq!(out, r#"{"a":null,"b":[{"a":"é\n","z":1}]}"#);
    }
}
