//! The write path every host takes: the kernel's [`submit_paced`] (load, validate, stamp,
//! compare-and-set append under an operation id), pausing between attempts on a contended goal.

use loopx_kernel::seams::Store;
use loopx_kernel::{Actor, Command, GoalId, OperationId, Timestamp, backoff, submit_paced};
pub use loopx_kernel::{MAX_ATTEMPTS, MAX_BACKOFF, SubmitError, Submitted, digest};

/// Submits one command to a goal, exactly as [`loopx_kernel::submit`] does, except that a
/// retry on a goal that moved under it first pauses for [`loopx_kernel::backoff`] of the
/// operation and the retry, so agents contending for one goal spread out instead of colliding
/// again in step. All pauses of one call together stay under `MAX_ATTEMPTS × MAX_BACKOFF`
/// (about one second). Inside a tokio runtime a pause runs on its blocking pool (no timer
/// needed) and never blocks the caller's task; outside one it sleeps the calling thread.
///
/// # Errors
/// As [`loopx_kernel::submit`]: the kernel's refusal (nothing changed), a store failure, a goal
/// contended on every attempt, or a `create_goal` of another goal.
pub async fn submit<S: Store + ?Sized>(
    store: &S,
    goal: &GoalId,
    actor: &Actor,
    now: Timestamp,
    command: &Command,
    operation: &OperationId,
) -> Result<Submitted, SubmitError> {
    let pause = |retry| pause(backoff(operation, retry));
    submit_paced(store, goal, actor, now, command, operation, pause).await
}

async fn pause(span: loopx_kernel::Duration) {
    let span = std::time::Duration::from_millis(u64::try_from(span.as_millis()).unwrap_or(0));
    match tokio::runtime::Handle::try_current() {
        // A pause that could not run is simply skipped: the retry is still correct.
        Ok(handle) => drop(
            handle
                .spawn_blocking(move || std::thread::sleep(span))
                .await,
        ),
        Err(_) => std::thread::sleep(span),
    }
}
