//! The tower-style wrappers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use loopx_kernel::seams::{Effect, EffectStatus, ObserveRequest, Provider, ProviderError};
use loopx_kernel::{GoalId, Observation, ObservationKey, SourceId, Timestamp, TodoId};
use loopx_provider::fact::FactBuilder;
use loopx_provider::layers::{FingerprintCache, Retry, Timeout};

/// Fails `failures` times with `error`, then answers; sleeps `delay` per call.
struct Flaky {
    source: SourceId,
    calls: Arc<AtomicU32>,
    performs: Arc<AtomicU32>,
    failures: u32,
    error: ProviderError,
    delay: Duration,
}

fn observation(state: &str) -> Observation {
    FactBuilder::new("ci:acme/cli#12", "pr:acme/cli#12", "git:abc")
        .fact("verdict", state)
        .build(Timestamp::from_millis(0))
        .expect("observation")
}

#[async_trait]
impl Provider for Flaky {
    fn source(&self) -> &SourceId {
        &self.source
    }
    async fn observe(&self, _: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        if n < self.failures {
            Err(self.error.clone())
        } else {
            Ok(vec![observation("passing")])
        }
    }
    async fn perform(&self, _: &Effect) -> Result<EffectStatus, ProviderError> {
        self.performs.fetch_add(1, Ordering::SeqCst);
        Err(ProviderError::Failed("connection reset".into()))
    }
}

fn flaky(
    failures: u32,
    error: ProviderError,
    delay: Duration,
) -> (Flaky, Arc<AtomicU32>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let performs = Arc::new(AtomicU32::new(0));
    (
        Flaky {
            source: SourceId::new("flaky").expect("id"),
            calls: Arc::clone(&calls),
            performs: Arc::clone(&performs),
            failures,
            error,
            delay,
        },
        calls,
        performs,
    )
}

fn request(known: Option<&Observation>) -> ObserveRequest {
    ObserveRequest {
        key: ObservationKey::new("ci:acme/cli#12").expect("id"),
        known: known.map(|o| o.fingerprint.clone()),
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

#[tokio::test]
async fn retry_retries_transient_reads_and_never_effects() {
    let (inner, calls, performs) = flaky(2, ProviderError::Failed("503".into()), Duration::ZERO);
    let retry = Retry::new(inner, 3, Duration::from_millis(1));
    assert_eq!(
        retry
            .observe(&request(None))
            .await
            .expect("third try")
            .len(),
        1
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(retry.perform(&effect()).await.is_err());
    assert_eq!(
        performs.load(Ordering::SeqCst),
        1,
        "an effect is never retried"
    );

    let (inner, calls, _) = flaky(5, ProviderError::Failed("503".into()), Duration::ZERO);
    let retry = Retry::new(inner, 3, Duration::from_millis(1));
    assert!(retry.observe(&request(None)).await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 3, "bounded attempts");

    let until = Timestamp::from_millis(60_000);
    let (inner, calls, _) = flaky(5, ProviderError::RateLimited(until), Duration::ZERO);
    let retry = Retry::new(inner, 3, Duration::from_millis(1));
    assert_eq!(
        retry.observe(&request(None)).await,
        Err(ProviderError::RateLimited(until))
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a rate limit is not retried"
    );
}

#[tokio::test]
async fn timeout_bounds_a_slow_provider() {
    let (inner, _, _) = flaky(0, ProviderError::Failed("x".into()), Duration::from_secs(5));
    let bounded = Timeout::new(inner, Duration::from_millis(50));
    let started = std::time::Instant::now();
    let result = bounded.observe(&request(None)).await;
    assert_eq!(
        result,
        Err(ProviderError::Timeout(loopx_kernel::Duration::from_millis(
            50
        )))
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(bounded.readback(&effect()).await, Ok(EffectStatus::Unknown));
}

#[tokio::test]
async fn the_cache_drops_unchanged_fingerprints_and_honours_known() {
    let (inner, calls, _) = flaky(0, ProviderError::Failed("x".into()), Duration::ZERO);
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
        calls.load(Ordering::SeqCst),
        2,
        "the provider is still asked"
    );

    let (inner, _, _) = flaky(0, ProviderError::Failed("x".into()), Duration::ZERO);
    let fresh = FingerprintCache::new(inner);
    let known = observation("passing");
    assert!(
        fresh
            .observe(&request(Some(&known)))
            .await
            .expect("known")
            .is_empty()
    );
    let (inner, _, _) = flaky(0, ProviderError::Failed("x".into()), Duration::ZERO);
    let other = FingerprintCache::new(inner);
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
