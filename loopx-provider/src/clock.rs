//! The system clock: the one place a host reads real time and sleeps on it.

use async_trait::async_trait;
use loopx_kernel::seams::Clock;
use loopx_kernel::{Duration, Timestamp};

/// Wall-clock time in milliseconds, and sleeping on the tokio timer (so it needs a tokio
/// runtime with time enabled).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Timestamp::from_millis(millis)
    }

    async fn sleep(&self, span: Duration) {
        let millis = u64::try_from(span.as_millis()).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
    }
}
