//! [`ManualClock`]: a [`Clock`] that moves only when told to, for deterministic tests and
//! simulations of hosts, engines and wrappers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;

use crate::seams::Clock;
use crate::time::{Duration, Timestamp};

/// A clock that moves only when told to: deterministic tests and simulations. Sleepers wake
/// when the clock is moved past their deadline, never by real time passing.
#[derive(Debug)]
pub struct ManualClock(Mutex<ManualTime>);

#[derive(Debug)]
struct ManualTime {
    now: Timestamp,
    sleepers: Vec<Waker>,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Mutex::new(ManualTime {
            now: start,
            sleepers: Vec::new(),
        }))
    }

    fn time(&self) -> std::sync::MutexGuard<'_, ManualTime> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves the clock forward and wakes the sleepers that are due.
    pub fn advance(&self, span: Duration) {
        let mut time = self.time();
        time.now = time.now.plus(span);
        time.sleepers.drain(..).for_each(Waker::wake);
    }

    /// Sets the clock and wakes the sleepers that are due.
    pub fn set(&self, to: Timestamp) {
        let mut time = self.time();
        time.now = to;
        time.sleepers.drain(..).for_each(Waker::wake);
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.time().now
    }

    async fn sleep(&self, span: Duration) {
        let until = self.now().plus(span);
        ManualSleep { clock: self, until }.await;
    }
}

/// Pending until the manual clock reaches `until`; every move of the clock re-polls it.
struct ManualSleep<'c> {
    clock: &'c ManualClock,
    until: Timestamp,
}

impl Future for ManualSleep<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut time = self.clock.time();
        if time.now >= self.until {
            Poll::Ready(())
        } else {
            time.sleepers.push(cx.waker().clone());
            Poll::Pending
        }
    }
}
