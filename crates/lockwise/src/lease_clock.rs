//! The one rule for how long this process may trust a lease.
//!
//! A lease granted or extended by a request is trusted from the moment that request *left*,
//! for its TTL less the clock-drift margin ([`drift`]): the server counts from when it ran the
//! request, which is later, so the local deadline is never after the server's, however long
//! the round trip took. An answer that arrives after that deadline is worthless, so a request
//! is kept in flight until then and no longer.
//!
//! A lock's [`Guard`](crate::Guard) (grant, renewals, extends) and the queue's worker (claims
//! and heartbeats) count their deadlines here.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, timeout_at};

use crate::lease::{boottime_nanos, drift};

/// When a request that grants or extends a lease left this process, on the monotonic clock
/// and on `CLOCK_BOOTTIME` (which keeps counting while the machine is suspended, as the
/// server's TTL does).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseClock {
    sent: Instant,
    sent_boot: Option<u64>,
}

impl LeaseClock {
    /// Reads both clocks: call it right before the request leaves.
    pub(crate) fn start() -> Self {
        LeaseClock {
            sent: Instant::now(),
            sent_boot: boottime_nanos().ok(),
        }
    }

    /// When the request left, on the monotonic clock.
    pub(crate) fn sent(&self) -> Instant {
        self.sent
    }

    /// The local deadline of a lease of `ttl` granted or extended by this request:
    /// `sent + ttl − drift`.
    pub(crate) fn deadline(&self, ttl: Duration) -> Deadline {
        let trusted = ttl.saturating_sub(drift(ttl));
        Deadline {
            at: self.sent + trusted,
            boot: self
                .sent_boot
                .map(|b| b.saturating_add(u64::try_from(trusted.as_nanos()).unwrap_or(u64::MAX))),
        }
    }

    /// Awaits `request` (which grants or extends a lease of `ttl`) until the answer could no
    /// longer be trusted: `None` when none came by then.
    pub(crate) async fn in_flight<F: Future>(
        &self,
        ttl: Duration,
        request: F,
    ) -> Option<F::Output> {
        timeout_at(self.deadline(ttl).at, request).await.ok()
    }
}

/// The instant after which this process must assume a lease is gone, on both clocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    /// On the Tokio clock (`CLOCK_MONOTONIC`; paused in tests).
    pub(crate) at: Instant,
    /// On `CLOCK_BOOTTIME`, when it could be read.
    pub(crate) boot: Option<u64>,
}

impl Deadline {
    /// Whether the deadline has passed on either clock.
    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.at
            || self
                .boot
                .zip(boottime_nanos().ok())
                .is_some_and(|(deadline, now)| now >= deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_trusted_from_its_send_less_the_drift() {
        let clock = LeaseClock::start();
        tokio::time::advance(Duration::from_secs(1)).await;
        let deadline = clock.deadline(Duration::from_secs(10));
        assert_eq!(deadline.at - clock.sent(), Duration::from_millis(9_898));
        assert!(!deadline.passed());
        tokio::time::advance(Duration::from_millis(8_897)).await;
        assert!(!deadline.passed());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(deadline.passed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_stays_in_flight_until_its_answer_is_useless() {
        let clock = LeaseClock::start();
        let ttl = Duration::from_secs(1);
        let slow = tokio::time::sleep(Duration::from_millis(900));
        assert_eq!(clock.in_flight(ttl, slow).await, Some(()));
        let clock = LeaseClock::start();
        let late = tokio::time::sleep(Duration::from_millis(989));
        assert_eq!(clock.in_flight(ttl, late).await, None);
    }
}
