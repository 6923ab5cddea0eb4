//! The small trait every lock backend implements, and the backends themselves.
//!
//! A backend only stores leases: grant one with a fencing token, extend or release it after
//! comparing the owner token, tell whether an owner still holds it, and (optionally) tell
//! waiters when a lease is released. Waiting, retrying, renewal, the lost signal and cancel
//! safety live once, in [`Locker`](crate::Locker) and [`Guard`](crate::Guard), for every backend.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::error::Result;
use crate::lease::{FencingToken, OwnerToken};

pub use any::AnyBackend;
pub use inspect::{HeldLock, Holder, name_this_process};

mod any;
#[cfg(feature = "redis")]
mod coalesce;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod file;
pub(crate) mod inspect;
pub mod memory;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod session;

/// How often the server-side backends check their held leases by default (see
/// [`Backend::loss_check_every`]): a forgotten lease is noticed within this and two round
/// trips, at the cost of one small read per interval and locker while it holds a lock.
pub const LOSS_CHECK_EVERY: Duration = Duration::from_millis(20);

/// The answer to one acquire attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The lease is ours, with this fencing token.
    Granted(FencingToken),
    /// Someone else holds it; their lease has at most `expires_in` left, if the backend knows.
    Held {
        /// Remaining lifetime of the current holder's lease.
        expires_in: Option<Duration>,
    },
}

/// A lease store. Keys and TTLs arrive validated; every method is atomic on the server side.
///
/// Implement it to add a backend; [`Locker::new`](crate::Locker::new) turns it into locks.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Grants `key` to `owner` for `ttl` if no live lease exists, issuing the next fencing
    /// token in the same atomic step.
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt>;

    /// Resets the lease's TTL to `ttl` if `owner` still holds it; `false` if the lease is gone
    /// or belongs to someone else (it is never re-created).
    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool>;

    /// Removes the lease if `owner` still holds it; `false` (and nothing changed) otherwise.
    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool>;

    /// Whether `owner` holds a live lease on `key` right now.
    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool>;

    /// For each `(key, owner)`, whether that owner still holds that lease: the check a
    /// [`Locker`](crate::Locker) makes every [`loss_check_every`](Self::loss_check_every) to
    /// learn at once of a lease the server forgot without anyone asking (a restart without
    /// persistence, a failover, a killed session). One round trip where the store allows; the
    /// default asks [`holds`](Self::holds) for each lease in turn.
    async fn still_held(&self, leases: &[(&str, OwnerToken)]) -> Result<Vec<bool>> {
        let mut held = Vec::with_capacity(leases.len());
        for (key, owner) in leases {
            held.push(self.holds(key, *owner).await?);
        }
        Ok(held)
    }

    /// How often a [`Locker`](crate::Locker) should check its held leases with
    /// [`still_held`](Self::still_held): `Some` for a store whose server can lose a live lease
    /// (Redis, PostgreSQL, MySQL), `None` (the default) for one that cannot (memory, file).
    fn loss_check_every(&self) -> Option<Duration> {
        None
    }

    /// Starts listening for releases of `key`. Called *before* an attempt, so a release that
    /// happens between a failed attempt and the wait is not missed. Backends without events
    /// return [`ReleaseWatch::none`] and waiters poll.
    async fn watch(&self, key: &str) -> Result<ReleaseWatch>;

    /// What kind of store this is (`"redis"`, `"postgres"`, …): the `backend` label of the
    /// [metrics](crate::metrics). `"custom"` unless a backend says otherwise.
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// The locks held now whose key starts with `prefix` (`""` for all), ordered by key: what
    /// `lockwise locks` lists. Fields the store cannot tell are `None`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) from a backend that cannot list
    /// its locks (the default); [`Error::Backend`](crate::Error::Backend) when the server
    /// fails.
    async fn held(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        let _ = prefix;
        Err(inspect::unsupported("list the locks held", self.kind()))
    }

    /// Breaks `key`'s lock whoever holds it, an operator's action (`lockwise unlock --force`):
    /// what was held, or `None` when nothing was (and nothing changed). The next grant's
    /// fencing token is above the broken holder's, so a fenced resource refuses its writes,
    /// and the broken holder's guard reports the lock lost at its next check (its loss check
    /// on a server, its next renewal on memory and file).
    ///
    /// # Errors
    ///
    /// As [`held`](Self::held).
    async fn break_lock(&self, key: &str) -> Result<Option<HeldLock>> {
        let _ = key;
        Err(inspect::unsupported("break a lock", self.kind()))
    }
}

/// Wakes a waiter when a lease it waits for is released (or when the backend may have missed
/// a release, e.g. after a reconnect).
pub struct ReleaseWatch {
    rx: Option<watch::Receiver<u64>>,
    line: Option<watch::Receiver<bool>>,
    _keep: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for ReleaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseWatch")
            .field("events", &self.rx.is_some())
            .field("in_line", &self.line.is_some())
            .finish()
    }
}

impl ReleaseWatch {
    /// A watch that never fires: the waiter falls back to polling.
    pub fn none() -> Self {
        ReleaseWatch {
            rx: None,
            line: None,
            _keep: None,
        }
    }

    /// A watch woken whenever the value in `rx` changes. `keep` is dropped with the watch (an
    /// unsubscribe handle, a task to abort, …).
    pub fn new(mut rx: watch::Receiver<u64>, keep: Option<Box<dyn Send + Sync>>) -> Self {
        rx.mark_unchanged();
        ReleaseWatch {
            rx: Some(rx),
            line: None,
            _keep: keep,
        }
    }

    /// The same watch for a waiter that holds a place in a line kept by the server (etcd):
    /// `first` turns true when it is this waiter's turn to try. Until then the waiter sends
    /// no attempts. A dropped sender counts as its turn.
    #[must_use]
    pub fn in_line(mut self, first: watch::Receiver<bool>) -> Self {
        self.line = Some(first);
        self
    }

    /// Resolves when this waiter may try: at once without a line, otherwise when it is first
    /// in the line.
    pub async fn turn(&mut self) {
        if let Some(line) = self.line.as_mut()
            && line.wait_for(|first| *first).await.is_err()
        {
            self.line = None;
        }
    }

    /// Resolves at the next release event; never resolves when the backend has no events.
    pub async fn released(&mut self) {
        match self.rx.as_mut() {
            Some(rx) => {
                if rx.changed().await.is_err() {
                    // The sender is gone: no more events, only polling.
                    self.rx = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}
