//! The tower-style wrappers: each forwards every seam method of the provider it wraps, and
//! the ones that wait do so on the clock they are given.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use loopx_kernel::seams::{
    Clock, Effect, EffectStatus, Effector, ObserveRequest, Provider, ProviderError,
};
use loopx_kernel::{
    Duration, GoalId, ManualClock, Observation, ObservationKey, SourceId, Timestamp, TodoId,
};
use loopx_provider::fact::FactBuilder;
use loopx_provider::layers::{Backoff, FingerprintCache, Record, Replay, Retry, Tape, Timeout};

/// How often each seam method of a [`Probe`] was called.
#[derive(Debug, Default)]
struct Calls {
    source: AtomicU32,
    observe: AtomicU32,
    perform: AtomicU32,
    readback: AtomicU32,
}

impl Calls {
    /// `[source, observe, perform, readback]`.
    fn counts(&self) -> [u32; 4] {
        [
            self.source.load(Ordering::SeqCst),
            self.observe.load(Ordering::SeqCst),
            self.perform.load(Ordering::SeqCst),
            self.readback.load(Ordering::SeqCst),
        ]
    }
}

/// Observes and performs effects, counting every call. Its first `failures` observations and
/// readbacks fail with `error`; after that it observes one passing check and reads back
/// `absent`; `perform` always answers `committed`, unless `fails_effects`. With `hang`, no call
/// ever answers.
struct Probe {
    source: SourceId,
    calls: Arc<Calls>,
    failures: u32,
    error: ProviderError,
    fails_effects: bool,
    hang: bool,
}

impl Probe {
    fn new() -> (Probe, Arc<Calls>) {
        Probe::failing(0, ProviderError::Failed("503".into()))
    }

    fn failing(failures: u32, error: ProviderError) -> (Probe, Arc<Calls>) {
        let calls = Arc::new(Calls::default());
        let probe = Probe {
            source: SourceId::new("probe").expect("id"),
            calls: Arc::clone(&calls),
            failures,
            error,
            fails_effects: false,
            hang: false,
        };
        (probe, calls)
    }

    fn hanging() -> Probe {
        Probe {
            hang: true,
            ..Probe::new().0
        }
    }

    async fn answer<T>(&self, n: u32, answer: T) -> Result<T, ProviderError> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        if n < self.failures {
            Err(self.error.clone())
        } else {
            Ok(answer)
        }
    }
}

fn observation(state: &str) -> Observation {
    FactBuilder::new("ci:acme/cli#12", "pr:acme/cli#12", "git:abc")
        .fact("verdict", state)
        .build(Timestamp::from_millis(0))
        .expect("observation")
}

#[async_trait]
impl Provider for Probe {
    fn source(&self) -> &SourceId {
        self.calls.source.fetch_add(1, Ordering::SeqCst);
        &self.source
    }

    async fn observe(&self, _: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let n = self.calls.observe.fetch_add(1, Ordering::SeqCst);
        self.answer(n, vec![observation("passing")]).await
    }
}

#[async_trait]
impl Effector for Probe {
    async fn perform(&self, _: &Effect) -> Result<EffectStatus, ProviderError> {
        self.calls.perform.fetch_add(1, Ordering::SeqCst);
        if self.fails_effects {
            return Err(ProviderError::Failed("connection reset".into()));
        }
        self.answer(0, EffectStatus::Committed).await
    }

    async fn readback(&self, _: &Effect) -> Result<EffectStatus, ProviderError> {
        let n = self.calls.readback.fetch_add(1, Ordering::SeqCst);
        self.answer(n, EffectStatus::Absent).await
    }
}

fn request(known: Option<&Observation>) -> ObserveRequest {
    ObserveRequest {
        key: ObservationKey::new("ci:acme/cli#12").expect("id"),
        known: known.map(|o| o.fingerprint.clone()),
        etag: None,
    }
}

fn effect() -> Effect {
    Effect {
        idempotency_key: "k".into(),
        goal: GoalId::new("g").expect("id"),
        todo: TodoId::new("t").expect("id"),
        epoch: 1,
        kind: "github.comment".into(),
        params: BTreeMap::new(),
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(0)))
}

/// Polls `future` once, without a runtime: a wrapper waiting on a manual clock makes progress
/// only when polled after the clock moved.
fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

/// Calls every seam method once through `wrapped` and checks that each reached the probe
/// once with the probe's own answer.
async fn forwards_every_method(name: &str, wrapped: &(impl Provider + Effector), calls: &Calls) {
    assert_eq!(wrapped.source().as_str(), "probe", "{name}: source");
    let observed = wrapped.observe(&request(None)).await;
    assert_eq!(
        observed,
        Ok(vec![observation("passing")]),
        "{name}: observe"
    );
    assert_eq!(
        wrapped.perform(&effect()).await,
        Ok(EffectStatus::Committed),
        "{name}: perform"
    );
    assert_eq!(
        wrapped.readback(&effect()).await,
        Ok(EffectStatus::Absent),
        "{name}: readback"
    );
    assert_eq!(calls.counts(), [1, 1, 1, 1], "{name}: each method once");
}

#[tokio::test]
async fn every_wrapper_forwards_every_seam_method() {
    let (probe, calls) = Probe::new();
    let timeout = Timeout::new(probe, Duration::seconds(5), clock());
    forwards_every_method("Timeout", &timeout, &calls).await;

    let (probe, calls) = Probe::new();
    let retry = Retry::new(probe, 3, Duration::seconds(1), clock());
    forwards_every_method("Retry", &retry, &calls).await;

    let (probe, calls) = Probe::new();
    forwards_every_method("FingerprintCache", &FingerprintCache::new(probe), &calls).await;

    let (probe, calls) = Probe::new();
    let backoff = Backoff::new(probe, Duration::seconds(1), Duration::minutes(1), clock());
    forwards_every_method("Backoff", &backoff, &calls).await;

    let (probe, calls) = Probe::new();
    let tape = Arc::new(Mutex::new(Tape::default()));
    let record = Record::new(probe, Arc::clone(&tape));
    forwards_every_method("Record", &record, &calls).await;
    let tape = tape.lock().expect("tape").clone();
    assert_eq!(tape.entries.len(), 1, "the observation call is on the tape");
    assert_eq!(tape.effects.len(), 2, "both effect calls are on the tape");

    // Stacked, the same holds: every layer forwards to the next.
    let (probe, calls) = Probe::new();
    let clock = clock();
    let stack = FingerprintCache::new(Retry::new(
        Timeout::new(probe, Duration::seconds(5), clock.clone()),
        3,
        Duration::seconds(1),
        clock,
    ));
    forwards_every_method("a stack", &stack, &calls).await;
}

#[tokio::test]
async fn a_replayed_tape_answers_what_was_recorded_observations_and_effects() {
    let (probe, _) = Probe::new();
    let tape = Arc::new(Mutex::new(Tape::default()));
    let record = Record::new(probe, Arc::clone(&tape));
    let observed = record.observe(&request(None)).await;
    let performed = record.perform(&effect()).await;
    let read_back = record.readback(&effect()).await;

    // A tape survives its fixture file, effects included.
    let json = serde_json::to_string(&*tape.lock().expect("tape")).expect("json");
    let tape: Tape = serde_json::from_str(&json).expect("a tape");
    let replay = Replay::new(SourceId::new("probe").expect("id"), tape);
    assert_eq!(replay.remaining(), 3);
    assert_eq!(replay.observe(&request(None)).await, observed);
    assert_eq!(replay.perform(&effect()).await, performed);
    assert_eq!(replay.readback(&effect()).await, read_back);
    assert_eq!(replay.remaining(), 0);
    assert!(
        matches!(
            replay.perform(&effect()).await,
            Err(ProviderError::Invalid(_))
        ),
        "an exhausted tape refuses"
    );

    // Played out of order, a recorded perform is no answer to a readback.
    let (probe, _) = Probe::new();
    let tape = Arc::new(Mutex::new(Tape::default()));
    let record = Record::new(probe, Arc::clone(&tape));
    record.perform(&effect()).await.expect("performed");
    let replay = Replay::new(
        SourceId::new("probe").expect("id"),
        tape.lock().expect("tape").clone(),
    );
    assert!(matches!(
        replay.readback(&effect()).await,
        Err(ProviderError::Invalid(_))
    ));
    assert_eq!(
        replay.perform(&effect()).await,
        Ok(EffectStatus::Committed),
        "the refused call played nothing"
    );

    // A tape written before effects were recorded still reads.
    let old: Tape = serde_json::from_str(r#"{"entries":[]}"#).expect("an old tape");
    assert!(old.effects.is_empty());
}

#[test]
fn a_timeout_fires_when_the_clock_reaches_its_limit_and_not_before() {
    let clock = clock();
    let bounded = Timeout::new(Probe::hanging(), Duration::seconds(5), clock.clone());
    let request = request(None);
    let mut observing = bounded.observe(&request);
    let effect = effect();
    let mut performing = bounded.perform(&effect);
    let mut reading = bounded.readback(&effect);
    assert!(poll(&mut observing).is_pending());
    assert!(poll(&mut performing).is_pending());
    assert!(poll(&mut reading).is_pending());

    clock.advance(Duration::from_millis(4_999));
    assert!(poll(&mut observing).is_pending(), "not before the limit");
    assert!(poll(&mut performing).is_pending());
    assert!(poll(&mut reading).is_pending());

    clock.advance(Duration::from_millis(1));
    let limit = Duration::seconds(5);
    assert_eq!(
        poll(&mut observing),
        Poll::Ready(Err(ProviderError::Timeout(limit)))
    );
    assert_eq!(
        poll(&mut performing),
        Poll::Ready(Err(ProviderError::Timeout(limit)))
    );
    assert_eq!(
        poll(&mut reading),
        Poll::Ready(Ok(EffectStatus::Unknown)),
        "a readback that cannot finish cannot tell"
    );
}

#[test]
fn a_retry_backs_off_on_the_clock_doubling_the_delay() {
    let clock = clock();
    let (probe, calls) = Probe::failing(2, ProviderError::Failed("503".into()));
    let retry = Retry::new(probe, 3, Duration::seconds(1), clock.clone());
    let request = request(None);
    let mut observing = retry.observe(&request);
    let observes = || calls.observe.load(Ordering::SeqCst);

    assert!(poll(&mut observing).is_pending());
    assert_eq!(observes(), 1, "the first try failed; waiting one second");
    clock.advance(Duration::from_millis(999));
    assert!(poll(&mut observing).is_pending());
    assert_eq!(observes(), 1, "no retry before the delay");
    clock.advance(Duration::from_millis(1));
    assert!(poll(&mut observing).is_pending());
    assert_eq!(observes(), 2, "the second try failed; waiting two seconds");
    clock.advance(Duration::from_millis(1_999));
    assert!(poll(&mut observing).is_pending());
    assert_eq!(observes(), 2, "the delay doubled");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        poll(&mut observing),
        Poll::Ready(Ok(vec![observation("passing")]))
    );
    assert_eq!(observes(), 3);

    // Readbacks back off alike.
    let (probe, calls) = Probe::failing(1, ProviderError::Timeout(Duration::seconds(1)));
    let retry = Retry::new(probe, 3, Duration::seconds(1), clock.clone());
    let effect = effect();
    let mut reading = retry.readback(&effect);
    assert!(poll(&mut reading).is_pending());
    clock.advance(Duration::from_millis(999));
    assert!(poll(&mut reading).is_pending());
    assert_eq!(calls.readback.load(Ordering::SeqCst), 1);
    clock.advance(Duration::from_millis(1));
    assert_eq!(poll(&mut reading), Poll::Ready(Ok(EffectStatus::Absent)));
}

#[tokio::test]
async fn retry_retries_transient_reads_and_never_effects() {
    let (mut inner, calls) = Probe::failing(5, ProviderError::Failed("503".into()));
    inner.fails_effects = true;
    let retry = Retry::new(inner, 3, Duration::ZERO, clock());
    assert!(retry.perform(&effect()).await.is_err());
    assert_eq!(
        calls.perform.load(Ordering::SeqCst),
        1,
        "an effect is never retried"
    );
    assert!(retry.observe(&request(None)).await.is_err());
    assert_eq!(calls.observe.load(Ordering::SeqCst), 3, "bounded attempts");

    let until = Timestamp::from_millis(60_000);
    let (inner, calls) = Probe::failing(5, ProviderError::RateLimited(until));
    let retry = Retry::new(inner, 3, Duration::ZERO, clock());
    assert_eq!(
        retry.observe(&request(None)).await,
        Err(ProviderError::RateLimited(until))
    );
    assert_eq!(
        calls.observe.load(Ordering::SeqCst),
        1,
        "a rate limit is not retried"
    );
}

#[tokio::test]
async fn timeout_bounds_a_slow_provider_on_the_system_clock() {
    let clock: Arc<dyn Clock> = Arc::new(loopx_provider::clock::SystemClock);
    let bounded = Timeout::new(Probe::hanging(), Duration::from_millis(50), clock);
    let started = std::time::Instant::now();
    let result = bounded.observe(&request(None)).await;
    assert_eq!(
        result,
        Err(ProviderError::Timeout(Duration::from_millis(50)))
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[tokio::test]
async fn the_cache_drops_unchanged_fingerprints_and_honours_known() {
    let (inner, calls) = Probe::new();
    let cache = FingerprintCache::new(inner);
    assert_eq!(cache.observe(&request(None)).await.expect("first").len(), 1);
    assert!(
        cache
            .observe(&request(None))
            .await
            .expect("second")
            .is_empty()
    );
    assert_eq!(
        calls.observe.load(Ordering::SeqCst),
        2,
        "the provider is still asked"
    );

    let fresh = FingerprintCache::new(Probe::new().0);
    let known = observation("passing");
    assert!(
        fresh
            .observe(&request(Some(&known)))
            .await
            .expect("known")
            .is_empty()
    );
    let other = FingerprintCache::new(Probe::new().0);
    let stale = observation("pending");
    assert_eq!(
        other
            .observe(&request(Some(&stale)))
            .await
            .expect("changed")
            .len(),
        1
    );
}

/// A rate limit holds the source off until the instant it names: meanwhile every poll answers
/// the same instant without calling the source; after it, the source is called again.
#[tokio::test]
async fn backoff_honours_the_instant_a_rate_limit_names() {
    let clock = clock();
    let reset = Timestamp::from_millis(0).plus(Duration::minutes(15));
    let (probe, calls) = Probe::failing(1, ProviderError::RateLimited(reset));
    let held = Backoff::new(
        probe,
        Duration::seconds(1),
        Duration::minutes(1),
        clock.clone(),
    );
    assert_eq!(
        held.observe(&request(None)).await,
        Err(ProviderError::RateLimited(reset))
    );
    assert_eq!(held.held_until(), Some(reset));
    clock.advance(Duration::minutes(14));
    assert_eq!(
        held.observe(&request(None)).await,
        Err(ProviderError::RateLimited(reset)),
        "still held: answered without calling the source"
    );
    assert_eq!(calls.counts()[1], 1);
    clock.advance(Duration::minutes(1));
    assert_eq!(
        held.observe(&request(None)).await,
        Ok(vec![observation("passing")])
    );
    assert_eq!(calls.counts()[1], 2);
    assert_eq!(held.held_until(), None, "a success ends the hold");
}

/// Failures in a row hold the source off for a pause that doubles, up to its cap.
#[tokio::test]
async fn backoff_doubles_the_pause_after_each_failure_in_a_row() {
    let clock = clock();
    let (probe, calls) = Probe::failing(5, ProviderError::Failed("503".into()));
    let held = Backoff::new(
        probe,
        Duration::seconds(10),
        Duration::seconds(30),
        clock.clone(),
    );
    let mut pauses = Vec::new();
    for _ in 0..4 {
        let failed = held.observe(&request(None)).await;
        assert_eq!(failed, Err(ProviderError::Failed("503".into())));
        let until = held.held_until().expect("held");
        pauses.push(until.since(clock.now()).as_millis() / 1000);
        // Held: the source is not called.
        assert!(matches!(
            held.observe(&request(None)).await,
            Err(ProviderError::RateLimited(at)) if at == until
        ));
        clock.advance(until.since(clock.now()));
    }
    assert_eq!(pauses, [10, 20, 30, 30]);
    assert_eq!(calls.counts()[1], 4, "one call per pause");
    // A malformed request says nothing about the source: no hold.
    let (probe, _) = Probe::failing(1, ProviderError::Invalid("bad key".into()));
    let held = Backoff::new(
        probe,
        Duration::seconds(10),
        Duration::seconds(30),
        clock.clone(),
    );
    assert!(held.observe(&request(None)).await.is_err());
    assert_eq!(held.held_until(), None);
}
