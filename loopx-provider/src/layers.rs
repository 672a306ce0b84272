//! Tower-style wrappers over [`Provider`]: each wraps a provider and is one itself, so they
//! stack (`Retry::new(Timeout::new(client, ..), ..)`).
//!
//! - [`Timeout`] bounds every call;
//! - [`Retry`] retries **reads only** (`observe`, `readback`) with exponential backoff on
//!   transient failures (`Failed`, `Timeout`); it never retries `perform` (an effect's outcome
//!   after a failure is unknown and must be read back), nor `Invalid` or `RateLimited`;
//! - [`FingerprintCache`] drops observations whose fingerprint equals the last one returned for
//!   the same key (or the caller's `known`), so an unchanged poll yields nothing;
//! - [`Record`] and [`Replay`] capture a provider's answers on a [`Tape`] and play them back
//!   in order, for tests without the network.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use loopx_kernel::seams::{Effect, EffectStatus, ObserveRequest, Provider, ProviderError};
use loopx_kernel::{Fingerprint, Observation, ObservationKey, SourceId};
use serde::{Deserialize, Serialize};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn kernel_duration(d: std::time::Duration) -> loopx_kernel::Duration {
    loopx_kernel::Duration::from_millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Bounds every call of the inner provider.
#[derive(Debug)]
pub struct Timeout<P> {
    inner: P,
    limit: std::time::Duration,
}

impl<P> Timeout<P> {
    /// Wraps `inner`; a call running past `limit` is dropped and fails with
    /// [`ProviderError::Timeout`].
    pub fn new(inner: P, limit: std::time::Duration) -> Self {
        Timeout { inner, limit }
    }
}

#[async_trait]
impl<P: Provider> Provider for Timeout<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        tokio::time::timeout(self.limit, self.inner.observe(request))
            .await
            .map_err(|_| ProviderError::Timeout(kernel_duration(self.limit)))?
    }

    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        tokio::time::timeout(self.limit, self.inner.perform(effect))
            .await
            .map_err(|_| ProviderError::Timeout(kernel_duration(self.limit)))?
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        match tokio::time::timeout(self.limit, self.inner.readback(effect)).await {
            Ok(result) => result,
            Err(_) => Ok(EffectStatus::Unknown),
        }
    }
}

/// Retries idempotent reads with exponential backoff.
#[derive(Debug)]
pub struct Retry<P> {
    inner: P,
    attempts: u32,
    base_delay: std::time::Duration,
}

impl<P> Retry<P> {
    /// Wraps `inner`: at most `attempts` tries in all (at least one), waiting `base_delay`,
    /// then twice that, and so on between tries.
    pub fn new(inner: P, attempts: u32, base_delay: std::time::Duration) -> Self {
        Retry {
            inner,
            attempts: attempts.max(1),
            base_delay,
        }
    }

    fn transient(error: &ProviderError) -> bool {
        matches!(error, ProviderError::Failed(_) | ProviderError::Timeout(_))
    }
}

#[async_trait]
impl<P: Provider> Provider for Retry<P> {
    fn source(&self) -> &SourceId {
        self.inner.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        let mut delay = self.base_delay;
        let mut tries = 1;
        loop {
            match self.inner.observe(request).await {
                Err(error) if Self::transient(&error) && tries < self.attempts => {
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2);
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// Never retried: a failed effect's outcome is unknown until read back.
    async fn perform(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        self.inner.perform(effect).await
    }

    async fn readback(&self, effect: &Effect) -> Result<EffectStatus, ProviderError> {
        let mut delay = self.base_delay;
        let mut tries = 1;
        loop {
            match self.inner.readback(effect).await {
                Ok(EffectStatus::Unknown) if tries < self.attempts => {}
                Err(error) if Self::transient(&error) && tries < self.attempts => {}
                other => return other,
            }
            tokio::time::sleep(delay).await;
            delay = delay.saturating_mul(2);
            tries += 1;
        }
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

/// Recorded observation calls, in order; serializable to keep as a test fixture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tape {
    /// The calls.
    pub entries: Vec<TapeEntry>,
}

/// Records every observation call of the inner provider on a shared [`Tape`].
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

/// Plays a [`Tape`] back: the n-th call gets the n-th answer, when its request matches.
#[derive(Debug)]
pub struct Replay {
    source: SourceId,
    tape: Tape,
    next: Mutex<usize>,
}

impl Replay {
    /// A provider named `source` answering from `tape`.
    pub fn new(source: SourceId, tape: Tape) -> Self {
        Replay {
            source,
            tape,
            next: Mutex::new(0),
        }
    }

    /// How many recorded calls have not been played yet.
    pub fn remaining(&self) -> usize {
        self.tape.entries.len().saturating_sub(*lock(&self.next))
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
            .get(*next)
            .ok_or_else(|| ProviderError::Invalid("the replay tape is exhausted".to_owned()))?;
        if &entry.request != request {
            return Err(ProviderError::Invalid(format!(
                "replay expected a request for `{}`, got `{}`",
                entry.request.key, request.key
            )));
        }
        *next += 1;
        match (&entry.observations, &entry.error) {
            (Some(observations), _) => Ok(observations.clone()),
            (None, Some(error)) => Err(ProviderError::Failed(error.clone())),
            (None, None) => Ok(Vec::new()),
        }
    }
}
