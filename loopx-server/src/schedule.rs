//! The schedules: every watch polled when it falls due, across all goals.
//!
//! A [`Poller`] reads the goals of the store, builds the capability each active goal is bound
//! to ([`Registry::bind_goal`]) and polls each stream it asks for ([`Bound::watches`](crate::capabilities::Bound::watches)) through
//! the provider of that source, once the stream's last observation is `every` old (as the
//! engine polls for one goal). The request carries the observation's durable tag
//! ([`Observation::etag`](loopx_kernel::Observation::etag)), so an unchanged stream costs a
//! conditional request (a `304` on GitHub) and writes nothing. What changed is recorded as the
//! provider and judged by the goal's capability in the same pass, exactly as a delivery is.
//!
//! Every provider is held off by a [`Backoff`]: after a rate limit until the instant the
//! source named (GitHub's `Retry-After` or `x-ratelimit-reset`), after a failure for a pause
//! that doubles; a held source is skipped (`backed_off`) while the others keep polling.
//!
//! Nothing grows without bound: a pass looks at most [`DEFAULT_MAX_GOALS`] goals (the next pass
//! goes on from where it stopped), and [`Poller::run`] sleeps until the next poll falls due, the
//! store's earliest wake ([`Store::next_wake`]) or a commit on a goal it polled
//! ([`Store::changed`]), whichever comes first, and never longer than [`DEFAULT_MAX_WAIT`] (so a
//! goal created meanwhile is polled within it).
//!
//! ```
//! use std::sync::Arc;
//! use loopx_kernel::{Duration, ManualClock, Timestamp};
//! use loopx_server::schedule::Poller;
//! use loopx_store::MemoryStore;
//!
//! let clock = Arc::new(ManualClock::new(Timestamp::EPOCH));
//! let poller = Poller::new(Arc::new(MemoryStore::new()), clock).every(Duration::seconds(30));
//! assert_eq!(poller.interval(), Duration::seconds(30));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use loopx_kernel::engine::record_observation;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{GoalStatus, ObserveRequest, Provider, ProviderError, StoreError};
use loopx_kernel::{Keyring, Observation, ObservationKey};
use loopx_provider::layers::Backoff;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tracing::Instrument as _;

use crate::capabilities::{Registry, Watched};
use crate::judging::Judging;

/// How often a watched stream is polled unless told otherwise: once a minute.
pub const DEFAULT_EVERY: Duration = Duration::minutes(1);

/// The most goals one pass looks at unless told otherwise.
pub const DEFAULT_MAX_GOALS: usize = 256;

/// The longest [`Poller::run`] sleeps between passes unless told otherwise: a minute.
pub const DEFAULT_MAX_WAIT: Duration = Duration::minutes(1);

/// The shortest sleep between passes, so a pass that leaves work due never spins.
const MIN_WAIT: Duration = Duration::from_millis(50);

/// The pause after a source's first failure; it doubles with each failure in a row.
pub const BACKOFF_BASE: Duration = Duration::seconds(5);

/// The longest pause after failures in a row (a rate limit holds until its own instant).
pub const BACKOFF_CAP: Duration = Duration::minutes(15);

/// What one poll of a stream came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PollOutcome {
    /// The provider answered something new, recorded on the goal.
    Changed,
    /// Nothing new: a `304` to the stored tag, or observations the goal already held.
    Unchanged,
    /// The provider failed (its source is held off from now on).
    Error,
    /// Not called: its source is held off after a rate limit or failures.
    BackedOff,
    /// The goal refused the observation (e.g. the provider's key is not registered).
    Refused,
}

impl PollOutcome {
    /// Its name in logs and metrics: `changed`, `unchanged`, `error`, `backed_off`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            PollOutcome::Changed => "changed",
            PollOutcome::Unchanged => "unchanged",
            PollOutcome::Error => "error",
            PollOutcome::BackedOff => "backed_off",
            PollOutcome::Refused => "refused",
        }
    }
}

/// One stream polled (or skipped as held off) in a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    /// The goal it was polled for.
    pub goal: GoalId,
    /// The stream.
    pub key: ObservationKey,
    /// The provider's source.
    pub source: SourceId,
    /// What it came to.
    pub outcome: PollOutcome,
    /// The commands the goal's capability proposed after it and the goal accepted.
    pub proposed: Vec<String>,
}

/// What one pass did, and when the next poll falls due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Each stream that was due, in goal id order, then in the order its capability asks.
    pub polls: Vec<Poll>,
    /// When the earliest stream looked at falls due again (or its source's hold ends).
    pub next_due: Option<Timestamp>,
}

impl Pass {
    fn due_at(&mut self, at: Timestamp) {
        self.next_due = Some(self.next_due.map_or(at, |due| due.min(at)));
    }
}

/// The labels of the poll counter: the provider's source and the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PollLabels {
    source: String,
    outcome: &'static str,
}

/// The poll counter, by source and outcome; registered on the service's `/metrics` by
/// [`crate::Service::poller`].
#[derive(Debug, Clone, Default)]
pub struct PollMetrics {
    polls: Family<PollLabels, Counter>,
}

impl PollMetrics {
    /// Registers the counter (`loopx_polls_total`) on `registry`.
    pub(crate) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "polls",
            "Watched streams polled, by provider source and outcome",
            self.polls.clone(),
        );
    }

    fn count(&self, source: &SourceId, outcome: PollOutcome) {
        self.polls
            .get_or_create(&PollLabels {
                source: source.to_string(),
                outcome: outcome.as_str(),
            })
            .inc();
    }
}

/// A provider handed over as a trait object, so a [`Backoff`] can wrap it.
struct Shared(Arc<dyn Provider>);

#[async_trait]
impl Provider for Shared {
    fn source(&self) -> &SourceId {
        self.0.source()
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        self.0.observe(request).await
    }
}

/// What a poller remembers between passes (lost on restart, which only means one early poll).
#[derive(Default)]
struct Memory {
    /// When each goal's stream was last polled: a `304` records nothing, so the stream's last
    /// observation alone would call it due again at once.
    polled: HashMap<(GoalId, ObservationKey), Timestamp>,
    /// The last goal the previous pass looked at, when it stopped at the bound.
    after: Option<GoalId>,
}

/// Polls every watch when it falls due, across all goals. See the [module](self).
pub struct Poller {
    judging: Judging,
    sources: BTreeMap<SourceId, Arc<Backoff<Shared>>>,
    every: Duration,
    max_goals: usize,
    max_wait: Duration,
    metrics: PollMetrics,
    memory: Mutex<Memory>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("sources", &self.sources.keys().collect::<Vec<_>>())
            .field("every", &self.every)
            .field("max_goals", &self.max_goals)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl Poller {
    /// A poller over `store`, timed by `clock`, with no provider yet ([`Poller::provider`]),
    /// judging with the shipped capabilities, every command unsigned until a keyring is given,
    /// polling [`DEFAULT_EVERY`].
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Poller {
        Poller {
            judging: Judging::new(store, clock),
            sources: BTreeMap::new(),
            every: DEFAULT_EVERY,
            max_goals: DEFAULT_MAX_GOALS,
            max_wait: DEFAULT_MAX_WAIT,
            metrics: PollMetrics::default(),
            memory: Mutex::new(Memory::default()),
        }
    }

    /// The same, polling the streams of `provider`'s source through it (replacing any
    /// provider of that source), held off after failures from [`BACKOFF_BASE`] doubling up to
    /// [`BACKOFF_CAP`], and after a rate limit until the instant it names.
    #[must_use]
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Poller {
        let source = provider.source().clone();
        let held = Backoff::new(
            Shared(provider),
            BACKOFF_BASE,
            BACKOFF_CAP,
            Arc::clone(&self.judging.clock),
        );
        self.sources.insert(source, Arc::new(held));
        self
    }

    /// The same, judging with `registry`'s capabilities.
    #[must_use]
    pub fn registry(mut self, registry: Registry) -> Poller {
        self.judging.registry = Arc::new(registry);
        self
    }

    /// The same, signing as the actors `keyring` holds keys for: `provider:<source>` for the
    /// observations, `capability:<name>` for each capability's proposals.
    #[must_use]
    pub fn keyring(mut self, keyring: Keyring) -> Poller {
        self.judging.keyring = Arc::new(keyring);
        self
    }

    /// The same, noticing each pending gate whose owner's GitHub login is mapped once in the
    /// pull request its goal is bound to, after each pass over the goal, through `effector`
    /// (the GitHub client): see [`crate::notices`].
    #[must_use]
    pub fn notifier(mut self, effector: Arc<dyn loopx_kernel::seams::Effector>) -> Poller {
        self.judging.notifier = Some(effector);
        self
    }

    /// The same, polling each stream once its last observation (or poll) is `every` old.
    #[must_use]
    pub fn every(mut self, every: Duration) -> Poller {
        self.every = every;
        self
    }

    /// The same, looking at most `max_goals` goals a pass (at least one).
    #[must_use]
    pub fn max_goals(mut self, max_goals: usize) -> Poller {
        self.max_goals = max_goals.max(1);
        self
    }

    /// The same, sleeping at most `max_wait` between passes in [`Poller::run`].
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Poller {
        self.max_wait = max_wait;
        self
    }

    /// How often a stream is polled.
    pub fn interval(&self) -> Duration {
        self.every
    }

    /// The poll counter, to register on the service's `/metrics` ([`crate::Service::poller`]).
    pub fn metrics(&self) -> PollMetrics {
        self.metrics.clone()
    }

    /// Polls, until `shutdown` completes, every stream that falls due: a pass, then a sleep
    /// until the next poll is due, the store's earliest wake or a commit on a goal it looked
    /// at, bounded by the maximum wait. A store failure is logged and the pass tried again
    /// after a pause that doubles (up to the maximum wait). A pass in flight when `shutdown`
    /// completes is dropped between commits: what committed stays, and the next start polls
    /// again what did not.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        tokio::pin!(shutdown);
        let mut failures = 0u32;
        loop {
            let step = async {
                let wait = match self.pass().await {
                    Ok(pass) => {
                        failures = 0;
                        self.wait_after(&pass).await
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        tracing::warn!(error = %error, "poll pass: the store failed");
                        pause_after(failures, self.max_wait)
                    }
                };
                let watch = self.watched().await;
                // A failed wait is a wait that ended: the next pass reports the store.
                let _ = self.judging.store.changed(&watch, wait).await;
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = step => {}
            }
        }
    }

    /// One pass: every stream of the goals looked at that is due is polled, and what changed
    /// is recorded and judged.
    ///
    /// # Errors
    /// The store's failure; what committed before it stays committed.
    pub async fn pass(&self) -> Result<Pass, StoreError> {
        let now = self.judging.clock.now();
        let mut pass = Pass::default();
        for goal in self.goals_this_pass(now).await? {
            let Some(state) = self.judging.store.load(&goal).await? else {
                continue;
            };
            let bound = match self.judging.registry.bind_goal(&state.spec) {
                Ok(Some(bound)) => bound,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(goal = %goal, error = %error, "the goal's capability cannot be built; its watches are not polled");
                    continue;
                }
            };
            for watched in bound.watches() {
                self.poll_if_due(&state, watched, now, &mut pass).await?;
            }
            self.judging.notice_gates(&goal).await?;
        }
        Ok(pass)
    }

    /// The active goals this pass looks at: at most the bound, in id order, going on after the
    /// goal the previous pass stopped at.
    async fn goals_this_pass(&self, now: Timestamp) -> Result<Vec<GoalId>, StoreError> {
        let mut goals: Vec<GoalId> = self
            .judging
            .store
            .goals(now)
            .await?
            .into_iter()
            .filter(|summary| summary.status == GoalStatus::Active)
            .map(|summary| summary.goal)
            .collect();
        goals.sort();
        let mut memory = lock(&self.memory);
        let start = memory
            .after
            .as_ref()
            .map_or(0, |after| goals.partition_point(|goal| goal <= after));
        let chosen: Vec<GoalId> = goals[start..]
            .iter()
            .chain(&goals[..start])
            .take(self.max_goals)
            .cloned()
            .collect();
        memory.after = if chosen.len() < goals.len() {
            chosen.last().cloned()
        } else {
            None
        };
        Ok(chosen)
    }

    /// Polls one stream of a goal when it is due and its source is not held off.
    async fn poll_if_due(
        &self,
        state: &GoalState,
        watched: &Watched,
        now: Timestamp,
        pass: &mut Pass,
    ) -> Result<(), StoreError> {
        let goal = &state.spec.id;
        let last = state.observations.get(&watched.key);
        let due = self.due(goal, &watched.key, last.map(|o| o.observed_at));
        if due > now {
            pass.due_at(due);
            return Ok(());
        }
        let Some(provider) = self.sources.get(&watched.provider) else {
            tracing::debug!(goal = %goal, source = %watched.provider, "no provider of this source: not polled");
            return Ok(());
        };
        let mut poll = Poll {
            goal: goal.clone(),
            key: watched.key.clone(),
            source: watched.provider.clone(),
            outcome: PollOutcome::BackedOff,
            proposed: Vec::new(),
        };
        if let Some(until) = provider.held_until() {
            pass.due_at(until);
        } else {
            lock(&self.memory)
                .polled
                .insert((goal.clone(), watched.key.clone()), now);
            pass.due_at(now.plus(self.every));
            let request = ObserveRequest {
                key: watched.key.clone(),
                known: last.map(|o| o.fingerprint.clone()),
                etag: last.and_then(|o| o.etag.clone()),
            };
            let span = tracing::info_span!("poll", goal = %goal, key = %watched.key, source = %watched.provider, outcome = tracing::field::Empty);
            self.poll(provider, &request, &mut poll)
                .instrument(span.clone())
                .await?;
            span.record("outcome", poll.outcome.as_str());
            if let Some(until) = provider.held_until() {
                pass.due_at(until);
            }
        }
        self.metrics.count(&poll.source, poll.outcome);
        pass.polls.push(poll);
        Ok(())
    }

    /// Calls the provider, and records and judges what it answered.
    async fn poll(
        &self,
        provider: &Backoff<Shared>,
        request: &ObserveRequest,
        poll: &mut Poll,
    ) -> Result<(), StoreError> {
        let observations = match provider.observe(request).await {
            Ok(observations) => observations,
            Err(error) => {
                tracing::warn!(error = %error, "the provider failed; its source is held off");
                poll.outcome = PollOutcome::Error;
                return Ok(());
            }
        };
        if observations.is_empty() {
            poll.outcome = PollOutcome::Unchanged;
            return Ok(());
        }
        let records = observations
            .into_iter()
            .map(|observation| record_observation(&poll.source, observation))
            .collect();
        let origin = format!("poll of {} `{}`", poll.source, request.key);
        // Boxed: the pass holds a write path's future, and a poll's future stays small.
        let outcome = Box::pin(self.judging.record_and_judge(&poll.goal, records, &origin)).await?;
        poll.outcome = match (outcome.refused, outcome.changed) {
            (Some(code), _) => {
                tracing::warn!(
                    code,
                    "the goal refused the observation; kept as a dead letter"
                );
                PollOutcome::Refused
            }
            (None, true) => PollOutcome::Changed,
            (None, false) => PollOutcome::Unchanged,
        };
        poll.proposed = outcome.proposed;
        Ok(())
    }

    /// When a goal's stream falls due: `every` after its last observation or poll, whichever
    /// is later; now when it was never observed nor polled.
    fn due(&self, goal: &GoalId, key: &ObservationKey, observed: Option<Timestamp>) -> Timestamp {
        let polled = lock(&self.memory)
            .polled
            .get(&(goal.clone(), key.clone()))
            .copied();
        match observed.max(polled) {
            Some(last) => last.plus(self.every),
            None => Timestamp::EPOCH,
        }
    }

    /// How long to sleep after `pass`: until its next poll, or the store's earliest wake,
    /// whichever is first, within the bounds.
    async fn wait_after(&self, pass: &Pass) -> Duration {
        let now = self.judging.clock.now();
        let wake = match self.judging.store.next_wake(now).await {
            Ok(wake) => wake,
            Err(error) => {
                tracing::warn!(error = %error, "the store's next wake could not be read");
                None
            }
        };
        let earliest = match (pass.next_due, wake) {
            (Some(due), Some(wake)) => Some(due.min(wake)),
            (due, wake) => due.or(wake),
        };
        earliest.map_or(self.max_wait, |at| {
            clamp(at.since(now), MIN_WAIT, self.max_wait)
        })
    }

    /// The active goals and their revisions, for [`Store::changed`]: at most the bound.
    async fn watched(&self) -> Vec<(GoalId, u64)> {
        let now = self.judging.clock.now();
        match self.judging.store.goals(now).await {
            Ok(goals) => goals
                .into_iter()
                .filter(|summary| summary.status == GoalStatus::Active)
                .take(self.max_goals)
                .map(|summary| (summary.goal, summary.revision))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// The pause after `failures` store failures in a row: a second, doubling, up to `cap`.
fn pause_after(failures: u32, cap: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    clamp(
        Duration::from_millis(1000i64.saturating_mul(1 << doublings)),
        MIN_WAIT,
        cap,
    )
}

fn clamp(span: Duration, low: Duration, high: Duration) -> Duration {
    Duration::from_millis(
        span.as_millis()
            .clamp(low.as_millis(), high.as_millis().max(low.as_millis())),
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
