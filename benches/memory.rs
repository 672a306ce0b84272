//! In-memory state size per todo at 1k, 10k and 100k todos, measured as real heap bytes with a
//! counting global allocator (kept out of the timing benchmarks, which use the plain system
//! allocator).
//!
//! The state is rebuilt by replaying the goal's history inside a counting region: what is still
//! allocated when the replay returns is exactly what the state holds. Its parts are measured by
//! what dropping each of them from the replayed state frees (a clone would share them). Run with `cargo bench -p loopx-benches --bench memory`.

use std::alloc::System;
use std::mem::size_of;

use loopx_benches::{Fixture, Goal, SCALES, against, scale_name};
use loopx_kernel::{Evidence, GoalState, RecordedEvent, Todo};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, Stats, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The in-memory state must stay within this many bytes per todo.
const TARGET_PER_TODO: f64 = 1024.0;

/// Heap bytes and allocations still live after a piece of work.
#[derive(Debug, Clone, Copy)]
struct Held {
    bytes: i128,
    allocations: i128,
}

/// The counting allocator already books a reallocation's growth as allocated bytes (and its
/// shrinking as deallocated), so live bytes are simply allocated minus deallocated.
fn held(change: &Stats) -> Held {
    let widen = |n: usize| i128::try_from(n).unwrap_or(i128::MAX);
    Held {
        bytes: widen(change.bytes_allocated) - widen(change.bytes_deallocated),
        allocations: widen(change.allocations) - widen(change.deallocations),
    }
}

/// Runs `make` in a counting region and returns its value with the heap it still holds.
fn measure<T>(make: impl FnOnce() -> T) -> (T, Held) {
    let region = Region::new(GLOBAL);
    let value = make();
    let change = region.change();
    (value, held(&change))
}

/// The heap bytes `drop_part` frees.
fn freed(drop_part: impl FnOnce()) -> Held {
    let ((), held) = measure(drop_part);
    Held {
        bytes: -held.bytes,
        allocations: -held.allocations,
    }
}

#[allow(clippy::cast_precision_loss)] // byte counts stay far below 2^52
fn per(held: i128, count: usize) -> f64 {
    held as f64 / count.max(1) as f64
}

#[allow(clippy::cast_precision_loss)]
fn mib(bytes: i128) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    // Accept criterion-style arguments: run unless a filter is given that does not match.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "memory/state".contains(f.as_str())) {
        return;
    }
    println!(
        "inline sizes: Todo {} B, Evidence {} B, RecordedEvent {} B, GoalState {} B",
        size_of::<Todo>(),
        size_of::<Evidence>(),
        size_of::<RecordedEvent>(),
        size_of::<GoalState>(),
    );
    for todos in SCALES {
        let fixture = Fixture::build(todos);
        let scale = scale_name(todos);
        let (state, total) = measure(|| GoalState::replay(&fixture.history));
        let state = match state {
            Ok(state) => state,
            Err(error) => panic!("the history replays: {error}"),
        };
        let total_bytes = total.bytes + i128::try_from(size_of::<GoalState>()).unwrap_or(0);
        let per_todo = per(total_bytes, todos);
        println!("\ngoal @{scale}: {}", fixture.describe());
        println!(
            "state @{scale}: {per_todo:.0} B per todo (target {TARGET_PER_TODO:.0} B: {}); {:.1} MiB in {:.1} allocations per todo",
            against(per_todo, TARGET_PER_TODO, Goal::AtMost),
            mib(total_bytes),
            per(total.allocations, todos),
        );
        let counts = (state.todos.len(), state.evidence.len());
        let mut state = state;
        let todo_map = freed(|| drop(std::mem::take(&mut state.todos)));
        let evidence = freed(|| drop(std::mem::take(&mut state.evidence)));
        let rest = total_bytes - todo_map.bytes - evidence.bytes;
        println!(
            "  todos map {:.0} B per todo ({} todos), evidence {:.0} B per todo ({} items), everything else {:.0} B per todo",
            per(todo_map.bytes, todos),
            counts.0,
            per(evidence.bytes, todos),
            counts.1,
            per(rest, todos),
        );
        let (_, history) = measure(|| fixture.history.clone());
        println!(
            "  event history (not held by the state): {:.0} B per event, {:.1} MiB for {} events",
            per(history.bytes, fixture.history.len()),
            mib(history.bytes),
            fixture.history.len(),
        );
    }
}
