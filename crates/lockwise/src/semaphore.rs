//! A counting semaphore on any lock backend: at most `permits` holders at once, like
//! `consul lock -n`, Redisson's `RPermitExpirableSemaphore` or DistributedLock's semaphores.
//!
//! A permit is a lock on one of `permits` slot keys (`{name}#permit-{i}`), so it is everything
//! a [`Guard`] is: an owner token, a lease renewed while the work runs, a lost signal, and a
//! **fencing token per permit** that strictly increases on every grant of that slot. A holder
//! frozen past its lease loses its slot to the next holder, whose token is higher: a resource
//! that fences on the permit's [`key`](Guard::key) refuses the frozen holder's late writes.
//!
//! ```
//! # #[tokio::main] async fn main() -> lockwise::Result<()> {
//! use std::time::Duration;
//! use lockwise::{LockOptions, Locker, Semaphore};
//!
//! let locker = Locker::connect("memory:").await?;
//! let exports = Semaphore::new(locker, "exports", 2)?; // two at a time
//! let opts = LockOptions::ttl(Duration::from_secs(30)).wait(Duration::from_secs(5));
//!
//! let first = exports.acquire(&opts).await?;
//! let second = exports.acquire(&opts).await?;
//! assert!(exports.try_acquire(&opts).await?.is_none()); // both permits are taken
//! assert_ne!(first.key(), second.key()); // each permit its own slot, fenced on its own
//! first.run(async { /* the work, cancelled if the permit is lost */ }).await?;
//! first.release().await?;
//! let third = exports.acquire(&opts).await?; // the freed permit
//! # drop((second, third)); Ok(()) }
//! ```
//!
//! Every process must name the semaphore with the same `permits`: the limit is the number of
//! slots each one tries, it is not stored.

use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::lease::{validate_key, validate_ttl};
use crate::locker::Locker;
use crate::metrics;
use crate::options::LockOptions;

/// The most permits a semaphore may have.
pub const MAX_PERMITS: u32 = 1024;

/// How many slots a waiter listens on for releases (the first it tried; the others, which
/// other waiters try first, it polls at the retry strategy's pace). A watch may cost a
/// connection (PostgreSQL, MySQL) or a place in a line (etcd).
const WATCHED: usize = 4;

/// A counting semaphore: at most `permits` holders of `name` at once, across every process
/// that uses the same backend, name and number of permits. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Semaphore {
    locker: Locker,
    name: String,
    keys: std::sync::Arc<[String]>,
}

/// One permit of a [`Semaphore`]: a [`Guard`] on one of its slots (it dereferences to it, for
/// [`token`](Guard::token), [`lost`](Guard::lost), [`run`](Guard::run), …). Released when
/// dropped, as a guard is.
#[must_use = "a permit is released when dropped; bind it for as long as the work runs"]
#[derive(Debug)]
pub struct Permit {
    guard: Guard,
    slot: u32,
}

impl Semaphore {
    /// The semaphore `name` with `permits` permits on `locker`'s backend.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for 0 permits or more than [`MAX_PERMITS`];
    /// [`Error::InvalidKey`] for a name that does not leave room for the slot suffix within
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN), or an invalid key.
    pub fn new(locker: Locker, name: impl Into<String>, permits: u32) -> Result<Self> {
        let name = name.into();
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::config(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"
            )));
        }
        validate_key(&name)?;
        let keys: Vec<String> = (0..permits).map(|i| slot_key(&name, i)).collect();
        for key in &keys {
            validate_key(key)?;
        }
        Ok(Semaphore {
            locker,
            name,
            keys: keys.into(),
        })
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock keys of its slots, in slot order.
    pub(crate) fn slot_keys(&self) -> &[String] {
        &self.keys
    }

    /// How many permits it has.
    pub fn permits(&self) -> u32 {
        u32::try_from(self.keys.len()).unwrap_or(MAX_PERMITS)
    }

    /// One round over the slots, from a random one: `Ok(Some(permit))` when one was granted,
    /// `Ok(None)` when every permit is held (not an error). Slots that another task of this
    /// locker holds cost no round trip.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTtl`] for a TTL out of range; a backend failure when no slot was granted
    /// and at least one attempt failed.
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::try_acquire`]: a grant in flight when the future is dropped is released by
    /// its owner token.
    pub async fn try_acquire(&self, opts: &LockOptions) -> Result<Option<Permit>> {
        validate_ttl(opts.ttl)?;
        let kind = self.locker.backend().kind();
        let round = self.round(opts, None).await;
        let (granted, result) = match round {
            Ok(Round::Granted(permit)) => (Ok(Some(permit)), "granted"),
            Ok(Round::Held { failure: None, .. }) => (Ok(None), "busy"),
            Ok(Round::Held {
                failure: Some(e), ..
            })
            | Err(e) => (Err(e), "error"),
        };
        metrics::acquisition(kind, result);
        granted
    }

    /// Waits for a permit: until one is granted, [`LockOptions::wait`] runs out
    /// ([`Error::WaitTimeout`]), or the retry strategy gives up (also `WaitTimeout`, or the
    /// backend failure the wait ended on).
    ///
    /// Between rounds a waiter sleeps for the retry strategy's backoff, never past the end of
    /// the earliest lease it saw, and wakes early when one of the slots it listens on is
    /// released. Waiters are not served in order.
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::acquire`]: dropping the future at any point leaves no permit behind.
    pub async fn acquire(&self, opts: &LockOptions) -> Result<Permit> {
        validate_ttl(opts.ttl)?;
        let (kind, start) = (self.locker.backend().kind(), Instant::now());
        let granted = self.wait(opts, start).await;
        let result = match &granted {
            Ok(_) => {
                metrics::waited(kind, start.elapsed());
                "granted"
            }
            Err(Error::WaitTimeout { .. }) => "timeout",
            Err(_) => "error",
        };
        metrics::acquisition(kind, result);
        granted
    }

    async fn wait(&self, opts: &LockOptions, start: Instant) -> Result<Permit> {
        let give_up = opts.wait.map(|w| start + w);
        let mut retry = opts.retry.clone();
        let mut watches: Option<Vec<crate::backend::ReleaseWatch>> = None;
        loop {
            let (expires_in, failure) = match self.round(opts, give_up).await {
                Ok(Round::Granted(permit)) => return Ok(permit),
                Ok(Round::Held {
                    expires_in,
                    failure,
                }) => (expires_in, failure),
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            let timed_out = |failure: Option<Error>| {
                failure.unwrap_or_else(|| Error::WaitTimeout {
                    key: self.name.clone(),
                    waited: now - start,
                })
            };
            if give_up.is_some_and(|at| now >= at) {
                return Err(timed_out(failure));
            }
            let Some(watches) = watches.as_mut() else {
                // Listen before the next round, so that a release in between is not missed.
                watches = Some(self.watch(give_up, opts).await);
                continue;
            };
            let Some(backoff) = retry.next_backoff() else {
                return Err(timed_out(failure));
            };
            let mut wake = now + backoff;
            if let Some(left) = expires_in {
                // Expiry announces nothing: come back when the first lease seen runs out.
                wake = wake.min(now + left.max(Duration::from_millis(1)));
            }
            if let Some(at) = give_up {
                wake = wake.min(at);
            }
            let released = async {
                if watches.is_empty() {
                    std::future::pending::<()>().await;
                }
                futures_util::future::select_all(
                    watches.iter_mut().map(|w| Box::pin(w.released())),
                )
                .await;
            };
            tokio::select! {
                () = released => {}
                () = sleep_until(wake) => {}
            }
        }
    }

    /// Listens for releases on the first slots, within the call timeout and the wait; a slot
    /// whose watch fails is polled instead.
    async fn watch(
        &self,
        give_up: Option<Instant>,
        opts: &LockOptions,
    ) -> Vec<crate::backend::ReleaseWatch> {
        let limit = give_up.map_or(opts.call_timeout, |at| {
            opts.call_timeout
                .min(at.saturating_duration_since(Instant::now()))
        });
        let backend = self.locker.backend();
        let first = self.first_slot();
        let mut watches = Vec::new();
        for i in 0..self.keys.len().min(WATCHED) {
            let key = &self.keys[(first + i) % self.keys.len()];
            match tokio::time::timeout(limit, backend.watch(key)).await {
                Ok(Ok(watch)) => watches.push(watch),
                Ok(Err(error)) => tracing::debug!(key, %error, "watch failed; polling"),
                Err(_) => tracing::debug!(key, "watch timed out; polling"),
            }
        }
        watches
    }

    /// Tries every slot once, from a random one, until one is granted or the wait ends.
    async fn round(&self, opts: &LockOptions, give_up: Option<Instant>) -> Result<Round> {
        let first = self.first_slot();
        let mut expires_in: Option<Duration> = None;
        let mut failure = None;
        for i in 0..self.keys.len() {
            let slot = (first + i) % self.keys.len();
            if give_up.is_some_and(|at| Instant::now() >= at) && i > 0 {
                break;
            }
            match self
                .locker
                .attempt_once(&self.keys[slot], opts, give_up)
                .await
            {
                Ok(Ok(guard)) => {
                    tracing::debug!(semaphore = %self.name, slot, fence = %guard.token(), "permit granted");
                    return Ok(Round::Granted(Permit {
                        guard,
                        slot: u32::try_from(slot).unwrap_or(u32::MAX),
                    }));
                }
                Ok(Err(left)) => {
                    if let Some(left) = left {
                        expires_in = Some(expires_in.map_or(left, |e| e.min(left)));
                    }
                }
                // One slot's failure does not hide the others' permits.
                Err(e) if e.is_transient() => {
                    tracing::warn!(semaphore = %self.name, slot, error = %e, "permit attempt failed");
                    failure.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Round::Held {
            expires_in,
            failure,
        })
    }

    fn first_slot(&self) -> usize {
        rand::random_range(0..self.keys.len())
    }
}

/// What one round over the slots found.
enum Round {
    Granted(Permit),
    Held {
        /// The shortest lease left among the holders that said.
        expires_in: Option<Duration>,
        /// A failed attempt, if any.
        failure: Option<Error>,
    },
}

/// The lock key of slot `i` of the semaphore `name`.
fn slot_key(name: &str, i: u32) -> String {
    format!("{name}#permit-{i}")
}

impl Permit {
    /// The slot this permit holds, `0..permits`; its lock key is [`key`](Guard::key).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The permit's guard.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The guard, to keep on its own (it is still released when dropped).
    pub fn into_guard(self) -> Guard {
        self.guard
    }

    /// Gives the permit back: `true` if it was still held (see [`Guard::release`]).
    ///
    /// # Errors
    ///
    /// As [`Guard::release`].
    pub async fn release(self) -> Result<bool> {
        self.guard.release().await
    }
}

impl std::ops::Deref for Permit {
    type Target = Guard;

    fn deref(&self) -> &Guard {
        &self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_limits_and_names_are_refused() {
        let locker = Locker::connect("memory:").await.unwrap();
        for permits in [0, MAX_PERMITS + 1] {
            let err = Semaphore::new(locker.clone(), "s", permits).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{err:?}");
        }
        let err = Semaphore::new(locker.clone(), "", 2).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { .. }), "{err:?}");
        let long = "k".repeat(crate::MAX_KEY_LEN - 8);
        let err = Semaphore::new(locker.clone(), long, 2).unwrap_err();
        assert!(matches!(err, Error::InvalidKey { .. }), "{err:?}");
        let s = Semaphore::new(locker, "s", MAX_PERMITS).unwrap();
        assert_eq!(s.permits(), MAX_PERMITS);
        assert_eq!(s.keys[7], "s#permit-7");
    }
}
