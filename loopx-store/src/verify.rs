//! Re-checking a goal's recorded commits against what they were made from (store schema 7).
//!
//! Each commit keeps its [`Authorship`] with its receipt: the
//! command as submitted and its actor's signature. [`verify_history`] walks the goal's recorded
//! history — its archive (the events compaction moved out, from store schema 9 on) and its
//! kept events — commit by commit, on the state before each, and checks that
//!
//! - the receipt's digest is the command's ([`loopx_kernel::write::digest`] of the actor and
//!   the command), so the command was not changed;
//! - on a signed goal, the signature verifies under the keys registered at that revision
//!   ([`loopx_kernel::identity::authenticate`]);
//! - the kernel, re-executing the command at the commit's time on the state before it, records
//!   exactly the events the store holds;
//! - on a compacted goal, the fold of its archived events up to the base is the base snapshot
//!   (the state loads and compaction start from).
//!
//! A row edited directly in the database — an event's payload changed and the chain recomputed
//! by the editor, or a stored command changed — fails one of these and is named by goal and
//! revision. Commits written before schema 7 (or by an import) carry no authorship: they are
//! counted as unverifiable history, not reported as damage. The chain check, the replay check
//! and the row checks (`loopx doctor`) find damage of other kinds; this finds a history that is
//! self-consistent but not what its commands make.

use loopx_kernel::seams::{Authorship, StoreError};
use loopx_kernel::write::stamp;
use loopx_kernel::{GoalId, GoalState, OperationId, RecordedEvent, execute};

use crate::retention::Retention;

/// How many rows are read per page.
const PAGE: usize = 1000;

/// What re-checking one goal's history found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Commits whose command, signature and events were re-checked and agree.
    pub verified: u64,
    /// Commits that keep no authorship (written before store schema 7, or by an import): they
    /// cannot be re-checked, which is not damage.
    pub unverifiable: u64,
    /// The revision of the first of them.
    pub first_unverifiable: Option<u64>,
    /// The commits that do not agree with what they were made from, in revision order.
    pub findings: Vec<Finding>,
}

/// One commit that does not agree with what it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The goal.
    pub goal: GoalId,
    /// The revision the commit produced (its last event's).
    pub revision: u64,
    /// What disagrees, in words.
    pub problem: String,
}

impl Verification {
    /// The first commit that is not proven, by revision: the first finding or the first
    /// unverifiable commit, with what is wrong with it in words.
    pub fn first_unproven(&self) -> Option<(u64, String)> {
        let finding = self
            .findings
            .first()
            .map(|f| (f.revision, f.problem.clone()));
        let unverifiable = self.first_unverifiable.map(|revision| {
            (
                revision,
                "it keeps no command or signature to verify it by".to_owned(),
            )
        });
        match (finding, unverifiable) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "goal `{}` at revision {}: {}",
            self.goal, self.revision, self.problem
        )
    }
}

/// Re-checks every recorded commit of `goal`, archived or kept (see the module's
/// documentation), from its archive's origin (see [`Retention::archive_origin`]). Reads only.
///
/// # Errors
/// The store's errors (a history that does not fold is [`StoreError::Corrupt`]).
pub async fn verify_history<S: Retention + ?Sized>(
    store: &S,
    goal: &GoalId,
) -> Result<Verification, StoreError> {
    let base = match store.archive_origin(goal).await? {
        Some(snapshot) => Some(
            snapshot
                .into_state()
                .map_err(|error| corrupt(goal, &error))?,
        ),
        None => None,
    };
    let after = base.as_ref().map_or(0, |s| s.revision);
    let events = all_events(store, goal, after).await?;
    let mut operations = Vec::new();
    let mut from = after;
    loop {
        let page = store.operations(goal, from, PAGE).await?;
        let Some(last) = page.last() else { break };
        from = last.receipt.revision;
        let full = page.len() == PAGE;
        operations.extend(page);
        if !full {
            break;
        }
    }
    // The base snapshot a compaction left, checked against the fold of the archive.
    let kept_base = match store.base(goal).await? {
        Some(snapshot) => Some(
            snapshot
                .into_state()
                .map_err(|error| corrupt(goal, &error))?,
        ),
        None => None,
    };
    let mut commits = Vec::new();
    let mut next = 0usize;
    for operation in operations.iter().filter(|o| o.receipt.events > 0) {
        let receipt = &operation.receipt;
        let count = usize::try_from(receipt.events).unwrap_or(usize::MAX);
        let Some(recorded) = events.get(next..next.saturating_add(count)) else {
            return Err(StoreError::Corrupt {
                detail: format!(
                    "goal `{goal}`: the receipt at revision {} names {} events the history does not hold; restore the store from a backup",
                    receipt.revision, receipt.events
                ),
            });
        };
        next += count;
        commits.push(RecordedCommit {
            operation: &receipt.operation,
            digest: &receipt.digest,
            revision: receipt.revision,
            authorship: operation.authorship.as_ref(),
            events: recorded,
        });
    }
    verify_commits(goal, base, commits, kept_base.as_ref())
}

/// One commit as a store or an export holds it: its receipt's operation, digest and revision,
/// what it was made from (when that was kept) and its events.
#[derive(Debug, Clone, Copy)]
pub struct RecordedCommit<'a> {
    /// The operation id it was committed under.
    pub operation: &'a OperationId,
    /// The digest its receipt keeps.
    pub digest: &'a str,
    /// The revision it produced (its last event's).
    pub revision: u64,
    /// The command and its signature; `None` when they were not kept.
    pub authorship: Option<&'a Authorship>,
    /// Its events, in order.
    pub events: &'a [RecordedEvent],
}

/// Re-checks `commits` in order, from `base` (the state before the first; `None` for a history
/// from its creation), as [`verify_history`] does for a store's: the digest, the signature
/// against the keys registered at each revision, and the events against the kernel's
/// re-execution. `kept_base`, a compacted goal's base snapshot, is compared with the fold when
/// it reaches its revision. Pure: `loopx import` checks an export with it before writing.
///
/// # Errors
/// [`StoreError::Corrupt`] when the events do not fold.
pub fn verify_commits<'a>(
    goal: &GoalId,
    base: Option<GoalState>,
    commits: impl IntoIterator<Item = RecordedCommit<'a>>,
    kept_base: Option<&GoalState>,
) -> Result<Verification, StoreError> {
    let mut outcome = Verification::default();
    let mut state = base;
    for commit in commits {
        if let Some(authorship) = commit.authorship {
            if let Some(problem) = check_commit(state.as_ref(), goal, &commit, authorship) {
                outcome.findings.push(Finding {
                    goal: goal.clone(),
                    revision: commit.revision,
                    problem,
                });
            } else {
                outcome.verified += 1;
            }
        } else {
            outcome.unverifiable += 1;
            outcome.first_unverifiable.get_or_insert(commit.revision);
        }
        // On from the events as recorded, so one finding does not hide the next.
        state = Some(fold(state, commit.events, goal, kept_base, &mut outcome)?);
    }
    Ok(outcome)
}

/// What is wrong with one commit, if anything.
fn check_commit(
    before: Option<&GoalState>,
    goal: &GoalId,
    commit: &RecordedCommit<'_>,
    authorship: &Authorship,
) -> Option<String> {
    let recorded = commit.events;
    let first = recorded.first()?;
    let (actor, at) = (&first.actor, first.at);
    let command = &authorship.command;
    let digest = loopx_kernel::write::digest(actor, command);
    if digest != commit.digest {
        return Some(format!(
            "the stored command is not the one the receipt's digest covers (it was changed after the commit by `{actor}`)"
        ));
    }
    if let Err(refusal) = loopx_kernel::identity::authenticate(
        before.map(|s| &s.spec),
        goal,
        actor,
        command,
        commit.operation,
        &digest,
        authorship.signature.as_ref(),
    ) {
        return Some(format!(
            "the commit's signature does not verify against the keys registered at revision {} ({}: {refusal})",
            before.map_or(0, |s| s.revision),
            refusal.code()
        ));
    }
    let after = before.map_or(0, |s| s.revision);
    let expected = match execute(before, actor, at, command) {
        Ok(events) => stamp(after, actor, at, events),
        Err(refusal) => {
            return Some(format!(
                "the kernel refuses the stored command on the state before it ({}): the history before it or the command was changed",
                refusal.code()
            ));
        }
    };
    let same = expected.len() == recorded.len()
        && expected
            .iter()
            .zip(recorded)
            .all(|(made, written)| written_alike(made, written));
    if same {
        None
    } else {
        let at_revision = expected
            .iter()
            .zip(recorded)
            .find(|(made, written)| !written_alike(made, written))
            .map_or(commit.revision, |(_, b)| b.revision);
        Some(format!(
            "the recorded events are not what the command makes (first difference at revision {at_revision}): an event was changed after the commit"
        ))
    }
}

/// Whether `written` is the event `made` (what the command makes on re-execution), written
/// under whichever schema version: what a command makes is compared, not the version of the
/// kernel that wrote it.
fn written_alike(made: &RecordedEvent, written: &RecordedEvent) -> bool {
    let mut made = made.clone();
    made.schema = written.schema;
    serde_json::to_value(&made).ok() == serde_json::to_value(written).ok() && made.at == written.at
}

async fn all_events<S: Retention + ?Sized>(
    store: &S,
    goal: &GoalId,
    after: u64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let mut events = Vec::new();
    let mut from = after;
    loop {
        let page = crate::retention::history(store, goal, from, PAGE).await?;
        let Some(last) = page.last() else { break };
        from = last.revision;
        let full = page.len() == PAGE;
        events.extend(page);
        if !full {
            break;
        }
    }
    Ok(events)
}

/// Folds a commit's events onto `state` one by one; when the fold reaches the base snapshot's
/// revision, a base that differs from it is a finding (the snapshot loads start from was
/// changed, or the archive before it was).
fn fold(
    state: Option<GoalState>,
    events: &[RecordedEvent],
    goal: &GoalId,
    base: Option<&GoalState>,
    outcome: &mut Verification,
) -> Result<GoalState, StoreError> {
    let mut state = state;
    for event in events {
        let next = match state {
            Some(mut state) => state.apply(event).map(|()| state),
            None => GoalState::genesis(event),
        };
        let next = next.map_err(|error| corrupt(goal, &error))?;
        if let Some(base) = base
            && base.revision == next.revision
            && *base != next
        {
            outcome.findings.push(Finding {
                goal: goal.clone(),
                revision: base.revision,
                problem: "the base snapshot is not the state its archived history folds to (the snapshot or the archive was changed outside loopx)".into(),
            });
        }
        state = Some(next);
    }
    state.ok_or_else(|| corrupt(goal, &"a commit without events"))
}

fn corrupt(goal: &GoalId, error: &impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        detail: format!(
            "goal `{goal}`: its history does not fold ({error}); restore the store from a backup"
        ),
    }
}
