//! How a lock is taken and kept: TTL, waiting, retry strategy, renewal.

use std::time::Duration;

/// The default of [`LockOptions::call_timeout`].
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Options for one acquire.
///
/// ```
/// use std::time::Duration;
/// use lockwise::{LockOptions, Retry};
///
/// let opts = LockOptions::ttl(Duration::from_secs(30))
///     .wait(Duration::from_secs(5))
///     .retry(Retry::exponential(Duration::from_millis(20), Duration::from_secs(1)))
///     .renew_every(Duration::from_secs(5));
/// assert_eq!(opts.get_ttl(), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone)]
pub struct LockOptions {
    pub(crate) ttl: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) retry: Retry,
    pub(crate) renew: Renew,
    pub(crate) call_timeout: Duration,
    pub(crate) fair: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renew {
    Off,
    /// Every `ttl / 3`.
    Default,
    Every(Duration),
}

impl LockOptions {
    /// A lease of `ttl`, renewed every `ttl / 3` while the guard lives; [`Locker::acquire`]
    /// waits without a time limit unless [`wait`](Self::wait) is set.
    ///
    /// The TTL must lie within [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL); this
    /// is checked when the lock is acquired.
    ///
    /// [`Locker::acquire`]: crate::Locker::acquire
    pub fn ttl(ttl: Duration) -> Self {
        LockOptions {
            ttl,
            wait: None,
            retry: Retry::default(),
            renew: Renew::Default,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            fair: true,
        }
    }

    /// Whether the tasks of one [`Locker`](crate::Locker) (and its clones) that want the same
    /// key take turns in the order they asked (default `true`): only the first of them asks
    /// the server, the others wait in line in this process, and a holder that asks again
    /// after its release queues behind them instead of barging back in. A try_acquire while
    /// another task of the locker holds or waits for the key answers `None` without a round
    /// trip. Between processes the server decides, as always.
    ///
    /// `false` sends every attempt to the server at once: the most acquisitions per second
    /// under contention within one process, in no particular order.
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// The longest one round trip to the lock server may take: an acquire attempt, a release,
    /// an ownership check (default 5 s). A call with no answer by then fails with a transient
    /// [`Error::Backend`](crate::Error::Backend) (an attempt of [`Locker::acquire`] also ends
    /// at the `wait` deadline), so no call hangs for as long as a partition lasts. A grant that
    /// did not come back within the lease's own deadline is released, never used. Renewals
    /// are bounded by the lease's deadline instead.
    ///
    /// [`Locker::acquire`]: crate::Locker::acquire
    pub fn call_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit.max(Duration::from_millis(1));
        self
    }

    /// The longest [`Locker::acquire`](crate::Locker::acquire) waits before it returns
    /// [`Error::WaitTimeout`](crate::Error::WaitTimeout).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// How long a waiter sleeps between attempts when no release event wakes it earlier.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Turns automatic renewal on (the default) or off. With renewal off the lease simply
    /// runs out after its TTL, and the lost signal fires at the local deadline.
    pub fn renew(mut self, on: bool) -> Self {
        self.renew = if on { Renew::Default } else { Renew::Off };
        self
    }

    /// Renews at this interval instead of `ttl / 3`. An interval not shorter than the TTL is
    /// clamped to `ttl / 3`.
    pub fn renew_every(mut self, interval: Duration) -> Self {
        self.renew = Renew::Every(interval);
        self
    }

    /// The TTL of the lease.
    pub fn get_ttl(&self) -> Duration {
        self.ttl
    }

    #[cfg(test)]
    fn renew_interval(&self) -> Option<Duration> {
        self.renew.interval(self.ttl)
    }
}

impl Renew {
    /// The renewal interval for a lease of `ttl` (the current one: `extend` may change it).
    pub(crate) fn interval(self, ttl: Duration) -> Option<Duration> {
        let default = ttl / 3;
        match self {
            Renew::Off => None,
            Renew::Default => Some(default),
            Renew::Every(d) if d.is_zero() || d >= ttl => Some(default),
            Renew::Every(d) => Some(d),
        }
    }
}

/// When to try again after a failed attempt: a one-method strategy (`next_backoff`) with small
/// combinators, after bsm/redislock.
///
/// A waiter is also woken early by the backend's release event where the backend has one, so
/// the backoff is the *fallback* poll interval.
///
/// ```
/// use std::time::Duration;
/// use lockwise::Retry;
///
/// let mut r = Retry::linear(Duration::from_millis(100)).limit(2);
/// assert_eq!(r.next_backoff(), Some(Duration::from_millis(100)));
/// assert_eq!(r.next_backoff(), Some(Duration::from_millis(100)));
/// assert_eq!(r.next_backoff(), None);
/// assert_eq!(Retry::none().next_backoff(), None);
/// ```
#[derive(Debug, Clone)]
pub struct Retry {
    kind: RetryKind,
    limit: Option<u32>,
    attempts: u32,
}

#[derive(Debug, Clone)]
enum RetryKind {
    None,
    Linear(Duration),
    Exponential { min: Duration, max: Duration },
}

impl Retry {
    /// Never try again: a single attempt.
    pub fn none() -> Self {
        Retry::from_kind(RetryKind::None)
    }

    /// Wait the same `interval` between attempts.
    pub fn linear(interval: Duration) -> Self {
        Retry::from_kind(RetryKind::Linear(interval))
    }

    /// Double the wait after each attempt from `min` up to `max`, with full jitter (each wait is
    /// drawn uniformly from half to all of the current step, so waiters do not move in lockstep).
    pub fn exponential(min: Duration, max: Duration) -> Self {
        Retry::from_kind(RetryKind::Exponential {
            min,
            max: max.max(min),
        })
    }

    /// At most `attempts` further attempts.
    pub fn limit(mut self, attempts: u32) -> Self {
        self.limit = Some(attempts);
        self
    }

    fn from_kind(kind: RetryKind) -> Self {
        Retry {
            kind,
            limit: None,
            attempts: 0,
        }
    }

    /// The pause before the next attempt, or `None` to give up.
    pub fn next_backoff(&mut self) -> Option<Duration> {
        let pause = self.backoff(self.attempts);
        self.attempts = self.attempts.saturating_add(1);
        pause
    }

    /// The pause after `failures` failed attempts (0 for the first pause), without changing
    /// the strategy: for callers that count attempts themselves, like a job's attempt number.
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockwise::Retry;
    ///
    /// let r = Retry::exponential(Duration::from_secs(1), Duration::from_secs(60));
    /// let third = r.backoff(2).unwrap(); // a 4 s step, jittered down to no less than 2 s
    /// assert!(third >= Duration::from_secs(2) && third <= Duration::from_secs(4));
    /// assert_eq!(r.clone().limit(2).backoff(2), None);
    /// ```
    pub fn backoff(&self, failures: u32) -> Option<Duration> {
        if self.limit.is_some_and(|limit| failures >= limit) {
            return None;
        }
        match self.kind {
            RetryKind::None => None,
            RetryKind::Linear(d) => Some(d),
            RetryKind::Exponential { min, max } => {
                let step = min.saturating_mul(1u32 << failures.min(20)).min(max);
                let jitter = rand::random_range(0.5..=1.0);
                Some(step.mul_f64(jitter).max(min.min(step)))
            }
        }
    }
}

impl Default for Retry {
    /// Exponential from 16 ms to 1 s, without limit.
    fn default() -> Self {
        Retry::exponential(Duration::from_millis(16), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_grows_and_stays_within_bounds() {
        let min = Duration::from_millis(10);
        let max = Duration::from_millis(200);
        let mut r = Retry::exponential(min, max);
        let waits: Vec<_> = (0..10).filter_map(|_| r.next_backoff()).collect();
        assert_eq!(waits.len(), 10);
        assert!(waits.iter().all(|w| *w >= min && *w <= max), "{waits:?}");
        assert!(waits[9] >= max / 2, "{waits:?}");
    }

    #[test]
    fn renew_interval_defaults_to_a_third_and_can_be_off() {
        let o = LockOptions::ttl(Duration::from_secs(3));
        assert_eq!(o.renew_interval(), Some(Duration::from_secs(1)));
        assert_eq!(o.clone().renew(false).renew_interval(), None);
        let every = o.clone().renew_every(Duration::from_millis(500));
        assert_eq!(every.renew_interval(), Some(Duration::from_millis(500)));
        let too_long = o.renew_every(Duration::from_secs(9));
        assert_eq!(too_long.renew_interval(), Some(Duration::from_secs(1)));
    }
}
