//! Tower-style wrappers over [`Provider`] and [`Effector`]: each wraps a provider and is one
//! itself, so they stack (`Retry::new(Timeout::new(client, ..), ..)`). A wrapper implements
//! [`Effector`] exactly when the provider it wraps does, and forwards every method of both
//! traits, so wrapping never turns an effect into a refusal.
//!
//! - [`Timeout`] bounds every call;
//! - [`Retry`] retries **reads only** (`observe`, `readback`) with exponential backoff on
//!   transient failures (`Failed`, `Timeout`); it never retries `perform` (an effect's outcome
//!   after a failure is unknown and must be read back), nor `Invalid` or `RateLimited`;
//! - [`Backoff`] holds a failing source off: after a rate limit until the instant it names
//!   (`Retry-After`, `x-ratelimit-reset`), after other failures for a pause that doubles with
//!   each failure in a row ([`Retry`]'s rule), answering without calling the source meanwhile;
//! - [`FingerprintCache`] drops observations whose fingerprint equals the last one returned for
//!   the same key (or the caller's `known`), so an unchanged poll yields nothing;
//! - [`Record`] and [`Replay`] capture a provider's answers (observations and effects) on a
//!   [`Tape`] and play them back in order, for tests without the network.
//!
//! [`Timeout`] and [`Retry`] wait on a [`Clock`], never on the runtime's timer directly: the
//! host's [`SystemClock`](crate::clock::SystemClock) in production, a
//! [`ManualClock`](loopx_kernel::ManualClock) in tests, which moves only when told to.
//!
//! A wrapper over a provider that performs no effects performs none either:
//!
//! ```compile_fail
//! # use std::sync::Arc;
//! # use loopx_kernel::seams::Effector;
//! # use loopx_provider::layers::FingerprintCache;
//! # use loopx_provider::metrics::MetricsProvider;
//! fn performs(_: &impl Effector) {}
//! fn check(metrics: MetricsProvider) {
//!     performs(&FingerprintCache::new(metrics)); // MetricsProvider is no Effector
//! }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::future::{Either, select};
use loopx_kernel::seams::{
    Clock, Effect, EffectStatus, Effector, ObserveRequest, Provider, ProviderError,
};
use loopx_kernel::{Duration, Fingerprint, Observation, ObservationKey, SourceId};
use serde::{Deserialize, Serialize};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bounds every call of the inner provider.
pub struct Timeout<P> {
    inner: P,
    limit: Duration,
    clock: Arc<dyn Clock>,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Timeout<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeout")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<P> Timeout<P> {
    /// Wraps `inner`: a call still running once `clock` has moved `limit` past its start is
    /// dropped, and fails with [`ProviderError::Timeout`] (a readback answers
    /// [`EffectStatus::Unknown`] instead: it cannot tell).
    pub fn new(inner: P, limit: Duration, clock: Arc<dyn Clock>) -> Self {
        Timeout {
            inner,
            limit,
            clock,
        }
    }

    /// The call's answer, or `None` when the clock reached the limit first.
    async fn bounded<T, F>(&self, call: F) -> Option<T>
    where
        F: Future<Output = T> + Unpin,
    {
        match select(call, self.clock.sleep(self.limit)).await {
            Either::Left((answer, _)) => Some(answer),
            Either::Right(((), _)) => None,
        }
    }
}

#[async_trait]
impl<P: Provider> Provider for Timeout<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        self.bounded(self.inner.observe(request))
            .await
            .ok_or(ProviderError::Timeout(self.limit))?
    }
}

#[async_trait]
impl<P: Effector> Effector for Timeout<P> {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.bounded(self.inner.perform(effect))
            .await
            .ok_or(ProviderError::Timeout(self.limit))?
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.bounded(self.inner.readback(effect))
            .await
            .unwrap_or(Ok(EffectStatus::Unknown))
    }
}

/// Retries idempotent reads with exponential backoff.
pub struct Retry<P> {
    inner: P,
    attempts: u32,
    base_delay: Duration,
    clock: Arc<dyn Clock>,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Retry<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retry")
            .field("inner", &self.inner)
            .field("attempts", &self.attempts)
            .field("base_delay", &self.base_delay)
            .finish_non_exhaustive()
    }
}

impl<P> Retry<P> {
    /// Wraps `inner`: at most `attempts` tries in all (at least one), waiting on `clock`
    /// `base_delay`, then twice that, and so on between tries.
    pub fn new(inner: P, attempts: u32, base_delay: Duration, clock: Arc<dyn Clock>) -> Self {
        Retry {
            inner,
            attempts: attempts.max(1),
            base_delay,
            clock,
        }
    }

    fn transient(error: &ProviderError) -> bool {
        matches!(error, ProviderError::Failed(_) | ProviderError::Timeout(_))
    }

    /// Waits the delay before try `tries + 1` (the base delay after the first try, doubling
    /// after each further one).
    async fn back_off(&self, tries: u32) {
        self.clock.sleep(doubling(self.base_delay, tries)).await;
    }
}

/// The pause after `failures` failures in a row (at least one): `base`, doubling with each
/// further failure, saturating. The one rule [`Retry`] and [`Backoff`] share.
fn doubling(base: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(62);
    Duration::from_millis(base.as_millis().saturating_mul(1 << doublings))
}

#[async_trait]
impl<P: Provider> Provider for Retry<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let mut tries = 1;
        loop {
            match self.inner.observe(request).await {
                Err(error) if Self::transient(&error) && tries < self.attempts => {
                    self.back_off(tries).await;
                    tries += 1;
                }
                other => return other,
            }
        }
    }
}

#[async_trait]
impl<P: Effector> Effector for Retry<P> {
    /// Never retried: a failed effect's outcome is unknown until read back.
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.perform(effect).await
    }

    /// Retried on a transient failure and on [`EffectStatus::Unknown`].
    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        let mut tries = 1;
        loop {
            match self.inner.readback(effect).await {
                Ok(EffectStatus::Unknown) if tries < self.attempts => {}
                Err(error) if Self::transient(&error) && tries < self.attempts => {}
                other => return other,
            }
            self.back_off(tries).await;
            tries += 1;
        }
    }
}

/// Holds a failing source off, so that a poll due again does not call a source that asked to
/// wait or keeps failing. After [`ProviderError::RateLimited`] it waits until the instant the
/// error names (GitHub's `Retry-After` or `x-ratelimit-reset`, read by the client); after a
/// transient failure ([`ProviderError::Failed`], [`ProviderError::Timeout`]) for `base`,
/// doubling with each failure in a row up to `cap`. Until then every `observe` answers
/// [`ProviderError::RateLimited`] with the instant it may call again, without calling the
/// source; a success ends the run of failures. The hold is the wrapped source's as a whole (a
/// rate limit is the source's, not one stream's). Effects are not held: they are forwarded as
/// they are, since their outcome must be read back whatever the source's state.
pub struct Backoff<P> {
    inner: P,
    base: Duration,
    cap: Duration,
    clock: Arc<dyn Clock>,
    hold: Mutex<Hold>,
}

/// A source's standing: the failures in a row, and until when it is held off.
#[derive(Debug, Default, Clone, Copy)]
struct Hold {
    failures: u32,
    until: Option<loopx_kernel::Timestamp>,
}

impl<P: std::fmt::Debug> std::fmt::Debug for Backoff<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backoff")
            .field("inner", &self.inner)
            .field("base", &self.base)
            .field("cap", &self.cap)
            .field("hold", &*lock(&self.hold))
            .finish_non_exhaustive()
    }
}

impl<P> Backoff<P> {
    /// Wraps `inner`: after a failure it is held off `base`, doubling with each failure in a
    /// row up to `cap`; after a rate limit until the instant named, on `clock`.
    pub fn new(inner: P, base: Duration, cap: Duration, clock: Arc<dyn Clock>) -> Self {
        Backoff {
            inner,
            base,
            cap,
            clock,
            hold: Mutex::new(Hold::default()),
        }
    }

    /// Until when the source is held off, if it is at `clock`'s now.
    pub fn held_until(&self) -> Option<loopx_kernel::Timestamp> {
        let now = self.clock.now();
        lock(&self.hold).until.filter(|until| *until > now)
    }

    /// Records what a call answered: a success ends the hold, a failure (re)starts it.
    fn record<T>(&self, answer: &Result<T, ProviderError>) {
        let now = self.clock.now();
        let mut hold = lock(&self.hold);
        match answer {
            Ok(_) => *hold = Hold::default(),
            Err(ProviderError::RateLimited(until)) => {
                hold.failures = hold.failures.saturating_add(1);
                hold.until = Some((*until).max(now));
            }
            Err(ProviderError::Failed(_) | ProviderError::Timeout(_)) => {
                hold.failures = hold.failures.saturating_add(1);
                let pause = doubling(self.base, hold.failures).min(self.cap);
                hold.until = Some(now.plus(pause));
            }
            // A malformed request says nothing about the source.
            Err(_) => {}
        }
    }
}

#[async_trait]
impl<P: Provider> Provider for Backoff<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    /// [`ProviderError::RateLimited`] with the instant the hold ends while the source is held
    /// off (the source is not called); the source's answer otherwise.
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        if let Some(until) = self.held_until() {
            return Err(ProviderError::RateLimited(until));
        }
        let answer = self.inner.observe(request).await;
        self.record(&answer);
        answer
    }
}

#[async_trait]
impl<P: Effector> Effector for Backoff<P> {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.perform(effect).await
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.readback(effect).await
    }
}

/// Drops observations whose fingerprint has not changed.
#[derive(Debug)]
pub struct FingerprintCache<P> {
    inner: P,
    last: Mutex<HashMap<ObservationKey, Fingerprint>>,
}

impl<P> FingerprintCache<P> {
    /// Wraps `inner` with an empty cache.
    pub fn new(inner: P) -> Self {
        FingerprintCache {
            inner,
            last: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl<P: Provider> Provider for FingerprintCache<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    /// The inner observations minus those whose fingerprint equals the last one returned for
    /// their key, or `request.known` for the requested key.
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let observations = self.inner.observe(request).await?;
        let mut last = lock(&self.last);
        if let Some(known) = &request.known {
            last.entry(request.key.clone())
                .or_insert_with(|| known.clone());
        }
        Ok(observations
            .into_iter()
            .filter(|o| {
                let unchanged = last.get(&o.key) == Some(&o.fingerprint);
                last.insert(o.key.clone(), o.fingerprint.clone());
                !unchanged
            })
            .collect())
    }
}

#[async_trait]
impl<P: Effector> Effector for FingerprintCache<P> {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.perform(effect).await
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.readback(effect).await
    }
}

/// One recorded observation call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapeEntry {
    /// The request.
    pub request: ObserveRequest,
    /// The observations, when the call succeeded.
    pub observations: Option<Vec<Observation>>,
    /// The error's text, when it failed.
    pub error: Option<String>,
}

/// Which effect call was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectCall {
    /// [`Effector::perform`].
    Perform,
    /// [`Effector::readback`].
    Readback,
}

/// One recorded effect call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectEntry {
    /// Which call.
    pub call: EffectCall,
    /// The effect asked for.
    pub effect: Effect,
    /// The answer, when the call succeeded.
    pub status: Option<EffectStatus>,
    /// The error's text, when it failed.
    pub error: Option<String>,
}

/// Recorded calls, in order per kind (observations, effects); serializable to keep as a
/// test fixture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tape {
    /// The observation calls.
    pub entries: Vec<TapeEntry>,
    /// The effect calls (`perform` and `readback`); absent from tapes of providers that
    /// performed none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<EffectEntry>,
}

/// Records every call of the inner provider on a shared [`Tape`].
#[derive(Debug)]
pub struct Record<P> {
    inner: P,
    tape: Arc<Mutex<Tape>>,
}

impl<P> Record<P> {
    /// Wraps `inner`, appending to `tape`.
    pub fn new(inner: P, tape: Arc<Mutex<Tape>>) -> Self {
        Record { inner, tape }
    }

    fn record_effect(
        &self,
        call: EffectCall,
        effect: &Effect,
        result: &Result<EffectStatus, ProviderError>,
    ) {
        lock(&self.tape).effects.push(EffectEntry {
            call,
            effect: effect.clone(),
            status: result.as_ref().ok().copied(),
            error: result.as_ref().err().map(ToString::to_string),
        });
    }
}

#[async_trait]
impl<P: Provider> Provider for Record<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let result = self.inner.observe(request).await;
        lock(&self.tape).entries.push(TapeEntry {
            request: request.clone(),
            observations: result.as_ref().ok().cloned(),
            error: result.as_ref().err().map(ToString::to_string),
        });
        result
    }
}

#[async_trait]
impl<P: Effector> Effector for Record<P> {
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        let result = self.inner.perform(effect).await;
        self.record_effect(EffectCall::Perform, effect, &result);
        result
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        let result = self.inner.readback(effect).await;
        self.record_effect(EffectCall::Readback, effect, &result);
        result
    }
}

/// Plays a [`Tape`] back: the n-th observation call gets the n-th recorded observation answer
/// and the n-th effect call the n-th recorded effect answer, when the request matches.
#[derive(Debug)]
pub struct Replay {
    source: SourceId,
    tape: Tape,
    next: Mutex<Cursor>,
}

/// How far each kind of call has been played.
#[derive(Debug, Default)]
struct Cursor {
    observations: usize,
    effects: usize,
}

impl Replay {
    /// A provider named `source` answering from `tape`.
    pub fn new(source: SourceId, tape: Tape) -> Self {
        Replay {
            source,
            tape,
            next: Mutex::new(Cursor::default()),
        }
    }

    /// How many recorded calls (of both kinds) have not been played yet.
    pub fn remaining(&self) -> usize {
        let next = lock(&self.next);
        self.tape.entries.len().saturating_sub(next.observations)
            + self.tape.effects.len().saturating_sub(next.effects)
    }

    fn replay_effect(
        &self,
        call: EffectCall,
        effect: &Effect,
    ) -> Result<EffectStatus, ProviderError> {
        let mut next = lock(&self.next);
        let entry = self.tape.effects.get(next.effects).ok_or_else(|| {
            ProviderError::Invalid("the replay tape has no effect calls left".to_owned())
        })?;
        if entry.call != call || &entry.effect != effect {
            return Err(ProviderError::Invalid(format!(
                "replay expected {:?} of `{}`, got {call:?} of `{}`",
                entry.call, entry.effect.idempotency_key, effect.idempotency_key
            )));
        }
        next.effects += 1;
        match (entry.status, &entry.error) {
            (Some(status), _) => Ok(status),
            (None, Some(error)) => Err(ProviderError::Failed(error.clone())),
            (None, None) => Ok(EffectStatus::Unknown),
        }
    }
}

#[async_trait]
impl Provider for Replay {
    fn source(&self) -> &SourceId {
        &self.source
    }

    /// The next recorded answer; [`ProviderError::Invalid`] when the tape is exhausted or the
    /// request differs from the recorded one.
    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let mut next = lock(&self.next);
        let entry = self
            .tape
            .entries
            .get(next.observations)
            .ok_or_else(|| ProviderError::Invalid("the replay tape is exhausted".to_owned()))?;
        if &entry.request != request {
            return Err(ProviderError::Invalid(format!(
                "replay expected a request for `{}`, got `{}`",
                entry.request.key, request.key
            )));
        }
        next.observations += 1;
        match (&entry.observations, &entry.error) {
            (Some(observations), _) => Ok(observations.clone()),
            (None, Some(error)) => Err(ProviderError::Failed(error.clone())),
            (None, None) => Ok(Vec::new()),
        }
    }
}

#[async_trait]
impl Effector for Replay {
    /// The next recorded effect answer; [`ProviderError::Invalid`] when no effect call is left
    /// or the next one recorded is another call or another effect.
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.replay_effect(EffectCall::Perform, effect)
    }

    /// As `perform`, for a recorded readback.
    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.replay_effect(EffectCall::Readback, effect)
    }
}
