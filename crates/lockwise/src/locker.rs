//! The generic layer that turns any [`Backend`] into locks with one behaviour.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, sleep_until};

use crate::backend::{AnyBackend, Attempt, Backend};
use crate::error::{Error, Result};
use crate::gate::{Gates, Pass};
use crate::guard::{Guard, ReleaseOnDrop};
use crate::lease::{OwnerToken, validate_key, validate_ttl};
use crate::lease_clock::LeaseClock;
use crate::loss_check::LossCheck;
use crate::metrics;
use crate::options::LockOptions;
use crate::renewals::Renewals;

/// Even at its `wait` deadline, an acquire makes one attempt of at least this long.
const MIN_ATTEMPT: std::time::Duration = std::time::Duration::from_millis(50);

/// Takes locks on one backend. Cheap to clone; clones share the backend's connection.
///
/// ```
/// # #[tokio::main] async fn main() -> lockwise::Result<()> {
/// use std::time::Duration;
/// use lockwise::{LockOptions, Locker};
///
/// let locker = Locker::connect("memory:").await?;
/// let opts = LockOptions::ttl(Duration::from_secs(30));
///
/// let Some(guard) = locker.try_acquire("outbox-dispatcher", &opts).await? else {
///     return Ok(()); // another instance is on it: not an error
/// };
/// assert!(locker.try_acquire("outbox-dispatcher", &opts).await?.is_none());
/// let token = guard.token(); // hand this to the resource you write to
/// guard.run(async { /* the protected work */ }).await?;
/// assert!(guard.release().await?);
/// # let _ = token; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Locker {
    backend: Arc<dyn Backend>,
    loss_check: Arc<LossCheck>,
    /// Turns among this locker's waiters of one key ([`LockOptions::fair`]).
    gates: Arc<Gates>,
    /// Runs the watchdogs of this locker's guards.
    renewals: Arc<Renewals>,
}

impl Locker {
    /// Locks on `backend`.
    pub fn new(backend: impl Backend) -> Self {
        let backend: Arc<dyn Backend> = Arc::new(backend);
        let every = backend.loss_check_every();
        Locker {
            loss_check: Arc::new(LossCheck::new(backend.clone(), every)),
            backend,
            gates: Arc::default(),
            renewals: Arc::default(),
        }
    }

    /// Sets how often this locker asks the server, in one round trip, whether every lease it
    /// holds is still there; `None` turns the check off.
    ///
    /// A server can forget a live lease without anyone asking: Redis restarted without
    /// persistence or failed over to a replica that missed the write, a database session
    /// killed (`pg_terminate_backend`, `KILL CONNECTION`) or a database restarted. A rival may
    /// get the lock at once, while renewals alone would notice only a third of the TTL later.
    /// With the check, the guards concerned renew at once and their lost signal fires within
    /// the interval and two round trips. The default is the backend's
    /// ([`Backend::loss_check_every`]): [`LOSS_CHECK_EVERY`](crate::backend::LOSS_CHECK_EVERY)
    /// (20 ms) on Redis, PostgreSQL and MySQL, off on memory and file. It costs one small read
    /// per interval while this locker holds at least one lock, none otherwise.
    ///
    /// What no check can see in time (a pause of this process, a loss between two checks)
    /// only a fencing token checked by the resource stops.
    ///
    /// ```
    /// # fn demo(locker: lockwise::Locker) {
    /// use std::time::Duration;
    /// let locker = locker.loss_check(Some(Duration::from_millis(50)));
    /// # let _ = locker; }
    /// ```
    #[must_use]
    pub fn loss_check(self, every: Option<Duration>) -> Self {
        Locker {
            loss_check: Arc::new(LossCheck::new(self.backend.clone(), every)),
            backend: self.backend,
            gates: self.gates,
            renewals: self.renewals,
        }
    }

    /// How often this locker checks its held leases, if it does (see
    /// [`loss_check`](Self::loss_check)).
    pub fn loss_check_every(&self) -> Option<Duration> {
        self.loss_check.every()
    }

    /// Locks on the backend a URL names: `file:///dir`, `redis://host[:port][/db]`,
    /// `rediss://…`, `postgres://…` (session-scoped advisory locks), `mysql://…` /
    /// `mariadb://…` (`GET_LOCK`), or `memory:` (one process only).
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(AnyBackend::connect(url).await?.into_locker())
    }

    /// The backend, for calls the lock API does not cover.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The locks held now on this locker's backend whose key starts with `prefix` (`""` for
    /// all), whoever holds them: key, fencing token, holder, time held, TTL left, waiters.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// let locker = lockwise::Locker::connect("memory:").await?;
    /// let opts = lockwise::LockOptions::ttl(Duration::from_secs(30));
    /// let guard = locker.acquire("orders:42", &opts).await?;
    /// let held = locker.held("orders:").await?;
    /// assert_eq!(held[0].key, "orders:42");
    /// assert_eq!(held[0].token, Some(guard.token()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Backend::held`].
    pub async fn held(&self, prefix: &str) -> Result<Vec<crate::backend::HeldLock>> {
        self.backend.held(prefix).await
    }

    /// Breaks `key`'s lock whoever holds it, an operator's action: what was held, or `None`
    /// when nothing was. The next grant's token is above the broken one, and the broken
    /// holder's guard reports the lock lost (see [`Backend::break_lock`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`](crate::Error::InvalidKey) for a key no lock could have; otherwise
    /// as [`Backend::break_lock`].
    pub async fn break_lock(&self, key: &str) -> Result<Option<crate::backend::HeldLock>> {
        validate_key(key)?;
        self.backend.break_lock(key).await
    }

    /// One attempt: `Ok(Some(guard))` when granted, `Ok(None)` when someone else holds the
    /// lock (not an error). With [`LockOptions::fair`] (the default), `Ok(None)` also comes at
    /// once, without a round trip, while another task of this locker holds or waits for the
    /// key.
    ///
    /// # Cancel safety
    ///
    /// If this future is dropped after the request may have reached the backend, a
    /// compare-and-delete by this attempt's owner token is scheduled on the Tokio runtime the
    /// attempt started on, so a grant nobody received is released at once; the TTL is the
    /// backstop if that release cannot run. Dropping it never leaves a lock that nobody will
    /// release.
    #[tracing::instrument(level = "debug", skip(self, opts), fields(ttl = ?opts.ttl, fence = tracing::field::Empty))]
    pub async fn try_acquire(&self, key: &str, opts: &LockOptions) -> Result<Option<Guard>> {
        let kind = self.backend.kind();
        let granted = self.try_acquire_inner(key, opts).await;
        metrics::acquisition(
            kind,
            match &granted {
                Ok(Some(_)) => "granted",
                Ok(None) => "busy",
                Err(_) => "error",
            },
        );
        granted
    }

    async fn try_acquire_inner(&self, key: &str, opts: &LockOptions) -> Result<Option<Guard>> {
        validate_key(key)?;
        validate_ttl(opts.ttl)?;
        let mut pass = None;
        if opts.fair {
            // Another task of this locker holds it or is first in line: not ours to ask.
            let Some(first) = self.gates.try_enter(key) else {
                return Ok(None);
            };
            pass = Some(first);
        }
        Ok(self.attempt(key, opts, None, &mut pass).await?.ok())
    }

    /// Waits for the lock: until it is granted, [`LockOptions::wait`] runs out
    /// ([`Error::WaitTimeout`]), or the retry strategy gives up (also `WaitTimeout`). With
    /// [`LockOptions::fair`] (the default) the tasks of this locker that wait for the key take
    /// turns first come, first served; only the first of them asks the server.
    /// Transient backend failures are retried like a held lock; if the wait ends on one, that
    /// error is returned instead of `WaitTimeout`.
    ///
    /// Between attempts a waiter sleeps for the retry strategy's backoff, but never longer than
    /// the holder's remaining TTL, and wakes early when the backend announces a release
    /// (Redis pub/sub, inotify on the file backend, in-process on memory).
    ///
    /// # Cancel safety
    ///
    /// As for [`try_acquire`](Self::try_acquire): dropping the future at any point leaves no
    /// lock behind (a grant in flight is released by owner token on the acquiring runtime).
    #[tracing::instrument(level = "debug", skip(self, opts), fields(ttl = ?opts.ttl, wait = ?opts.wait, fence = tracing::field::Empty))]
    pub async fn acquire(&self, key: &str, opts: &LockOptions) -> Result<Guard> {
        let (kind, start) = (self.backend.kind(), Instant::now());
        let granted = self.acquire_inner(key, opts, start).await;
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

    async fn acquire_inner(&self, key: &str, opts: &LockOptions, start: Instant) -> Result<Guard> {
        validate_key(key)?;
        validate_ttl(opts.ttl)?;
        let give_up = opts.wait.map(|w| start + w);
        let mut retry = opts.retry.clone();
        // First in this locker's line for the key (with `fair`), within the wait.
        let mut pass = None;
        if opts.fair {
            let entered = match give_up {
                Some(at) => tokio::time::timeout_at(at, self.gates.enter(key))
                    .await
                    .ok(),
                None => Some(self.gates.enter(key).await),
            };
            let Some(entered) = entered else {
                return Err(Error::WaitTimeout {
                    key: key.to_owned(),
                    waited: start.elapsed(),
                });
            };
            pass = Some(entered);
        }
        // An uncontended lock is granted at once, without listening for releases (which may
        // cost a connection). Otherwise: subscribe, then try again before waiting, so that a
        // release between the first attempt and the subscription is not missed.
        if let Ok(Ok(guard)) = self.attempt(key, opts, give_up, &mut pass).await {
            return Ok(guard);
        }
        let watch_limit = give_up.map_or(opts.call_timeout, |at| {
            opts.call_timeout
                .min(at.saturating_duration_since(Instant::now()))
        });
        let mut released = tokio::time::timeout(watch_limit, self.backend.watch(key))
            .await
            .map_err(|_| Error::no_answer("a watch for releases", watch_limit))??;
        loop {
            // Behind other waiters in a line the server keeps (etcd): wait for the turn.
            match give_up {
                Some(at) => {
                    if tokio::time::timeout_at(at, released.turn()).await.is_err() {
                        return Err(Error::WaitTimeout {
                            key: key.to_owned(),
                            waited: start.elapsed(),
                        });
                    }
                }
                None => released.turn().await,
            }
            let (expires_in, failure) = match self.attempt(key, opts, give_up, &mut pass).await {
                Ok(Ok(guard)) => return Ok(guard),
                Ok(Err(expires_in)) => (expires_in, None),
                // A backend that is down for a moment (a restart, a failover) is waited out
                // like a holder; the error is returned if the wait ends on it.
                Err(e) if e.is_transient() => {
                    tracing::warn!(key, error = %e, "acquire attempt failed; retrying");
                    (None, Some(e))
                }
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            let timed_out = || {
                failure.unwrap_or_else(|| Error::WaitTimeout {
                    key: key.to_owned(),
                    waited: now - start,
                })
            };
            let Some(backoff) = retry.next_backoff() else {
                return Err(timed_out());
            };
            let mut wake = now + backoff;
            if let Some(left) = expires_in {
                // Expiry announces nothing: come back when the holder's TTL runs out.
                wake = wake.min(now + left.max(std::time::Duration::from_millis(1)));
            }
            if let Some(give_up) = give_up {
                if now >= give_up {
                    return Err(timed_out());
                }
                wake = wake.min(give_up);
            }
            tokio::select! {
                _ = released.released() => {}
                _ = sleep_until(wake) => {}
            }
        }
    }

    /// One attempt on `key` for a caller that waits on its own (a [`Semaphore`](crate::Semaphore)
    /// tries several keys): `Err(expires_in)` when the key is held, here without a round trip
    /// while another task of this locker holds or waits for it ([`LockOptions::fair`]).
    pub(crate) async fn attempt_once(
        &self,
        key: &str,
        opts: &LockOptions,
        give_up: Option<Instant>,
    ) -> Result<Result<Guard, Option<std::time::Duration>>> {
        let mut pass = None;
        if opts.fair {
            let Some(first) = self.gates.try_enter(key) else {
                return Ok(Err(None));
            };
            pass = Some(first);
        }
        self.attempt(key, opts, give_up, &mut pass).await
    }

    /// One attempt, answered within the call timeout and before `give_up` (an error otherwise).
    /// `Err(expires_in)` when someone else holds the lock, or when the grant came back too late
    /// to be used (it is released). A grant takes the caller's `pass`, if any, into its guard.
    async fn attempt(
        &self,
        key: &str,
        opts: &LockOptions,
        give_up: Option<Instant>,
        pass: &mut Option<Pass>,
    ) -> Result<Result<Guard, Option<std::time::Duration>>> {
        let handle = Handle::try_current()
            .map_err(|_| Error::config("lockwise must run inside a Tokio runtime"))?;
        let owner = OwnerToken::random();
        // Armed until we know the outcome: if this future is dropped mid-request, or the
        // request fails after it may have reached the server, the grant is released by owner.
        let mut pending = ReleaseOnDrop {
            backend: self.backend.clone(),
            key: key.to_owned(),
            owner,
            handle,
            armed: true,
        };
        let sent = LeaseClock::start();
        let mut limit = opts.call_timeout;
        if let Some(at) = give_up {
            limit = limit.min(at.saturating_duration_since(sent.sent()).max(MIN_ATTEMPT));
        }
        // On a timeout `pending` stays armed: a grant that arrives later is released.
        let answer = tokio::time::timeout(limit, self.backend.try_acquire(key, owner, opts.ttl))
            .await
            .map_err(|_| Error::no_answer("an acquire attempt", limit))??;
        match answer {
            Attempt::Granted(fence) => {
                if sent.deadline(opts.ttl).passed() {
                    // The answer came back after the lease may already have run out: never act
                    // on it. `pending` releases it.
                    tracing::warn!(key, %fence, "grant arrived after its local deadline; discarded");
                    return Ok(Err(None));
                }
                tracing::debug!(key, %fence, "acquired");
                // The acquire's span carries the token, for a subscriber that exports spans.
                tracing::Span::current().record("fence", fence.get());
                pending.armed = false;
                let on_drop = ReleaseOnDrop {
                    backend: self.backend.clone(),
                    key: key.to_owned(),
                    owner,
                    handle: pending.handle.clone(),
                    armed: true,
                };
                Ok(Ok(Guard::start(
                    on_drop,
                    fence,
                    sent,
                    opts,
                    &self.loss_check,
                    pass.take(),
                    &self.renewals,
                )))
            }
            Attempt::Held { expires_in } => {
                pending.armed = false;
                Ok(Err(expires_in))
            }
        }
    }
}
