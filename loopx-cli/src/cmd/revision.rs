//! Past revisions of a goal: a range of its history (`loopx log --from N --to M`) and its state
//! as it stood at one revision (`loopx status --at-revision N`), folded with the kernel's
//! replay from the recorded events: the kept ones and, before the base a compaction left,
//! the archived ones.

use loopx_kernel::{GoalId, GoalState, RecordedEvent};

use crate::error::CliError;
use crate::store::Backend;

/// How many events one read of the store asks for.
const PAGE: usize = 1000;

/// `revision` is a revision the goal has reached: 1 up to its head. `flag` names the option it
/// came from, for the error.
pub fn check_revision(flag: &str, revision: u64, goal: &GoalId, head: u64) -> Result<(), CliError> {
    if revision == 0 {
        return Err(CliError::usage(
            "revision_out_of_range",
            format!("{flag} 0: revisions start at 1 (goal `{goal}` is at revision {head})"),
            format!("pass a revision from 1 to {head}"),
        ));
    }
    if revision > head {
        return Err(CliError::usage(
            "revision_out_of_range",
            format!("{flag} {revision} is beyond the head: goal `{goal}` is at revision {head}"),
            format!("pass a revision from 1 to {head}; `loopx log` lists them"),
        ));
    }
    Ok(())
}

/// `from..=to` is a range of revisions the goal has reached, in order.
pub fn check_range(from: u64, to: u64, goal: &GoalId, head: u64) -> Result<(), CliError> {
    check_revision("--from", from, goal, head)?;
    check_revision("--to", to, goal, head)?;
    if from > to {
        return Err(CliError::usage(
            "revision_range_reversed",
            format!(
                "--from {from} is after --to {to}: a range runs forwards (goal `{goal}` is at revision {head})"
            ),
            format!("pass --from N --to M with 1 <= N <= M <= {head}"),
        ));
    }
    Ok(())
}

/// The recorded events with a revision in `from..=to`, in order, read page by page: from the
/// goal's archive before its base, then from its kept history. The range starts later only for
/// a goal compacted before its store kept an archive (at the first event it holds).
pub async fn events_in(
    backend: &Backend,
    goal: &GoalId,
    from: u64,
    to: u64,
) -> Result<Vec<RecordedEvent>, CliError> {
    let mut events: Vec<RecordedEvent> = Vec::new();
    let mut after = from.saturating_sub(1);
    while after < to {
        let page = loopx_store::history(backend.retention(), goal, after, PAGE).await?;
        let Some(last) = page.last().map(|e| e.revision) else {
            break;
        };
        events.extend(page.into_iter().take_while(|e| e.revision <= to));
        after = last;
    }
    Ok(events)
}

/// The goal's state right after `revision`: its recorded events up to there folded with the
/// kernel's replay, onto the base snapshot when the revision is at or after it, and otherwise
/// from the goal's creation (or its archive's origin) through its archived events.
pub async fn state_at(
    backend: &Backend,
    goal: &GoalId,
    revision: u64,
) -> Result<GoalState, CliError> {
    let base = match backend.retention().base(goal).await? {
        Some(base) if base.state.revision <= revision => Some(base),
        _ => backend.retention().archive_origin(goal).await?,
    };
    let (mut state, from) = match base {
        Some(snapshot) => {
            let state = snapshot.into_state().map_err(replay_error)?;
            if revision < state.revision {
                return Err(CliError::usage(
                    "revision_compacted",
                    format!(
                        "the history of goal `{goal}` before revision {} was compacted: revision {revision} can no longer be shown",
                        state.revision
                    ),
                    format!("pass a revision from {} on", state.revision),
                ));
            }
            let from = state.revision + 1;
            (Some(state), from)
        }
        None => (None, 1),
    };
    for event in events_in(backend, goal, from, revision).await? {
        match &mut state {
            None => state = Some(GoalState::genesis(&event).map_err(replay_error)?),
            Some(state) => state.apply(&event).map_err(replay_error)?,
        }
    }
    match state {
        Some(state) if state.revision == revision => Ok(state),
        _ => Err(replay_error(format!(
            "the recorded events of goal `{goal}` do not reach revision {revision}"
        ))),
    }
}

fn replay_error(error: impl std::fmt::Display) -> CliError {
    CliError::new(
        crate::error::Exit::Store,
        "history_damaged",
        format!("the goal's history does not replay: {error}"),
        "run `loopx doctor` for details and restore the store from a backup",
    )
}
