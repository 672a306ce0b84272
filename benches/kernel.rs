//! Kernel benchmarks at 1k, 10k and 100k todos: `decide` latency (common and worst case),
//! command throughput (full turn cycles and `add_todo`) and event replay rate; and the cost of
//! copying a long-lived goal's state, which a store pays on every commit.
//!
//! Each benchmark prints its own figure next to criterion's report, with the ratio to the
//! target where one is set. Run with `cargo bench -p loopx-benches --bench kernel`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use loopx_benches::{Fixture, Goal, Recorder, SCALES, Scratch, against, scale_name, turn_cycle};
use loopx_kernel::{Actor, Decision, GoalState, decide};

/// Samples per benchmark; the recorder's median is taken over these.
const SAMPLES: usize = 10;

/// `decide` must answer within this at 100k todos.
const DECIDE_TARGET: Duration = Duration::from_millis(1);

/// Replay must fold at least this many events per second.
const REPLAY_TARGET: f64 = 1_000_000.0;

/// The size of the goal whose history (just over a million events) measures replay at length.
const LONG_HISTORY_TODOS: usize = 225_000;

/// The goal whose state is copied: this many todos, then turns until this many were used.
const CLONED_TODOS: usize = 1_000;
const CLONED_TURNS: usize = 10_000;

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_clone(&mut criterion);
    for todos in SCALES {
        let started = Instant::now();
        let fixture = Fixture::build(todos);
        println!(
            "\ngoal @{}: {} (built in {:.1} s)",
            scale_name(todos),
            fixture.describe(),
            started.elapsed().as_secs_f64()
        );
        bench_decide(&mut criterion, &fixture);
        bench_turn_cycle(&mut criterion, &fixture);
        bench_add_todo(&mut criterion, &fixture);
        bench_replay(&mut criterion, &fixture, &scale_name(todos));
    }
    let started = Instant::now();
    let long = Fixture::build(LONG_HISTORY_TODOS);
    println!(
        "\nlong history: {} (built in {:.1} s)",
        long.describe(),
        started.elapsed().as_secs_f64()
    );
    bench_replay(&mut criterion, &long, "1M");
    criterion.final_summary();
}

fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

fn bench_decide(criterion: &mut Criterion, fixture: &Fixture) {
    let scale = scale_name(fixture.todos);
    let (worst, claimed) = fixture.saturated();
    let cases = [("common", fixture), ("worst", &worst)];
    let mut group = criterion.benchmark_group("decide");
    for (case, goal) in cases {
        let mut recorder = Recorder::default();
        group.bench_function(BenchmarkId::new(case, &scale), |b| {
            b.iter_custom(|iterations| {
                let start = Instant::now();
                for _ in 0..iterations {
                    black_box(decide(black_box(&goal.state), &goal.agent, goal.now));
                }
                let elapsed = start.elapsed();
                recorder.record(iterations, elapsed);
                elapsed
            });
        });
        if let Some(median) = recorder.median(SAMPLES) {
            let decision = decide(&goal.state, &goal.agent, goal.now);
            let detail = match &decision {
                Decision::Wait { until, .. } => format!(
                    "{} pending scanned after {claimed} ready todos were routed to other agents; wake in {}",
                    goal.state.pending_todos().count(),
                    until.map_or_else(
                        || "-".to_owned(),
                        |t| format!("{} min", t.since(goal.now).as_millis() / 60_000)
                    ),
                ),
                Decision::Continue(assignment) => format!(
                    "`{}` offered, {} gates pending alongside",
                    assignment.todo,
                    assignment.pending_gates.len()
                ),
                _ => String::new(),
            };
            println!(
                "decide {case} case @{scale}: {:.4} ms (target {} ms: {}) -> {} ({detail})",
                millis(median),
                millis(DECIDE_TARGET),
                against(
                    median.as_secs_f64(),
                    DECIDE_TARGET.as_secs_f64(),
                    Goal::AtMost
                ),
                decision.kind(),
            );
        }
    }
    group.finish();
}

/// Operations a working copy absorbs before it is refreshed: a tenth of the goal's todos.
fn headroom(fixture: &Fixture) -> u64 {
    (fixture.todos as u64 / 10).max(100)
}

fn bench_turn_cycle(criterion: &mut Criterion, fixture: &Fixture) {
    let scale = scale_name(fixture.todos);
    let todo = fixture.runnable();
    let agent = Actor::Agent(fixture.agent.clone());
    let mut scratch = Scratch::new(&fixture.state, headroom(fixture));
    let mut recorder = Recorder::default();
    let mut events = 0;
    let mut group = criterion.benchmark_group("commands");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("turn_cycle", &scale), |b| {
        b.iter_custom(|iterations| {
            let elapsed = scratch.timed(
                iterations,
                |first, count| fixture.cycle_inputs(first, count),
                |state, inputs| {
                    for (turn, evidence) in inputs {
                        events = turn_cycle(
                            state,
                            fixture.now,
                            &agent,
                            &fixture.validator,
                            &todo,
                            turn,
                            evidence,
                        );
                    }
                },
            );
            recorder.record(iterations, elapsed);
            elapsed
        });
    });
    group.finish();
    if let Some(median) = recorder.median(SAMPLES) {
        println!(
            "turn cycles @{scale}: {:.0} cycles/s ({:.1} µs per claim + begin_turn + settle_turn, {events} events; no target)",
            1.0 / median.as_secs_f64(),
            median.as_secs_f64() * 1e6,
        );
    }
}

fn bench_add_todo(criterion: &mut Criterion, fixture: &Fixture) {
    let scale = scale_name(fixture.todos);
    let planner = Actor::Agent(fixture.agent.clone());
    let mut scratch = Scratch::new(&fixture.state, headroom(fixture));
    let mut recorder = Recorder::default();
    let mut group = criterion.benchmark_group("commands");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("add_todo", &scale), |b| {
        b.iter_custom(|iterations| {
            let elapsed = scratch.timed(
                iterations,
                |first, count| {
                    let first = usize::try_from(first).unwrap_or(usize::MAX);
                    fixture.fresh_todos(first, usize::try_from(count).unwrap_or(usize::MAX))
                },
                |state, commands| {
                    for command in &commands {
                        if let Err(refusal) = state.handle(&planner, fixture.now, command) {
                            panic!("add_todo refused: {refusal}");
                        }
                    }
                },
            );
            recorder.record(iterations, elapsed);
            elapsed
        });
    });
    group.finish();
    if let Some(median) = recorder.median(SAMPLES) {
        println!(
            "add_todo @{scale}: {:.0} commands/s ({:.2} µs each; no target)",
            1.0 / median.as_secs_f64(),
            median.as_secs_f64() * 1e6,
        );
    }
}

/// Copies and drops the state of a goal with a long history: what a store's cache pays per
/// commit to hand out the state and to fold new events onto a copy of it.
fn bench_clone(criterion: &mut Criterion) {
    let fixture = Fixture::build(CLONED_TODOS);
    let mut state = fixture.state.clone();
    let todo = fixture.runnable();
    let agent = Actor::Agent(fixture.agent.clone());
    let begun = fixture.turns_begun();
    let more = CLONED_TURNS.saturating_sub(begun) as u64;
    let mut inputs = fixture.cycle_inputs(0, more + 1);
    let (next_turn, next_evidence) = inputs.pop().expect("one more turn than was run");
    for (turn, evidence) in inputs {
        turn_cycle(
            &mut state,
            fixture.now,
            &agent,
            &fixture.validator,
            &todo,
            turn,
            evidence,
        );
    }
    let scale = format!(
        "{}_turns_{}_todos",
        begun.max(CLONED_TURNS),
        state.todos.len()
    );
    let mut recorder = Recorder::default();
    let mut group = criterion.benchmark_group("state");
    group.bench_function(BenchmarkId::new("clone_and_drop", &scale), |b| {
        b.iter_custom(|iterations| {
            let start = Instant::now();
            for _ in 0..iterations {
                drop(black_box(black_box(&state).clone()));
            }
            let elapsed = start.elapsed();
            recorder.record(iterations, elapsed);
            elapsed
        });
    });
    // What a store's commit does with it: fold one more turn cycle onto a copy.
    let mut committed = Recorder::default();
    group.bench_function(BenchmarkId::new("clone_and_turn_cycle", &scale), |b| {
        b.iter_custom(|iterations| {
            let start = Instant::now();
            for _ in 0..iterations {
                let mut copy = black_box(&state).clone();
                turn_cycle(
                    &mut copy,
                    fixture.now,
                    &agent,
                    &fixture.validator,
                    &todo,
                    next_turn.clone(),
                    next_evidence.clone(),
                );
                drop(black_box(copy));
            }
            let elapsed = start.elapsed();
            committed.record(iterations, elapsed);
            elapsed
        });
    });
    group.finish();
    if let Some(median) = recorder.median(SAMPLES) {
        println!(
            "state clone + drop @{scale}: {:.3} µs ({} evidence; no target)",
            median.as_secs_f64() * 1e6,
            state.evidence.len(),
        );
    }
    if let Some(median) = committed.median(SAMPLES) {
        println!(
            "state clone + one turn cycle on the copy + drop @{scale}: {:.1} µs (no target)",
            median.as_secs_f64() * 1e6,
        );
    }
}

fn bench_replay(criterion: &mut Criterion, fixture: &Fixture, scale: &str) {
    let events = fixture.history.len();
    let mut recorder = Recorder::default();
    let mut group = criterion.benchmark_group("replay");
    group.throughput(Throughput::Elements(events as u64));
    group.bench_function(BenchmarkId::new("history", scale), |b| {
        b.iter_custom(|iterations| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iterations {
                let start = Instant::now();
                let state = GoalState::replay(black_box(&fixture.history));
                elapsed += start.elapsed();
                match state {
                    Ok(state) => drop(black_box(state)),
                    Err(error) => panic!("the history replays: {error}"),
                }
            }
            recorder.record(iterations, elapsed);
            elapsed
        });
    });
    group.finish();
    if let Some(median) = recorder.median(SAMPLES) {
        #[allow(clippy::cast_precision_loss)] // event counts stay far below 2^52
        let rate = events as f64 / median.as_secs_f64();
        println!(
            "replay @{scale}: {:.2} M events/s ({events} events in {:.1} ms; target 1 M events/s: {})",
            rate / 1e6,
            millis(median),
            against(rate, REPLAY_TARGET, Goal::AtLeast),
        );
    }
}
