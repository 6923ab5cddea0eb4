//! The guard of a held lock: renewal watchdog, lost signal, ownership re-check, release.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken, drift, validate_ttl};

/// A held lock.
///
/// While the guard lives, a watchdog task renews the lease (every `ttl / 3` by default) and
/// watches the local [deadline](Self::deadline). When a renewal is refused, or the deadline
/// passes without a successful renewal (a hung call, a paused process, a lost network), the
/// **lost signal** fires: [`lost`](Self::lost) resolves, [`run`](Self::run) cancels the work it
/// runs, and [`is_held`](Self::is_held) answers `false`.
///
/// # Dropping
///
/// Call [`release`](Self::release) to learn whether the lease was still ours. A guard dropped
/// without it schedules a best-effort compare-and-delete on the Tokio runtime it was acquired
/// on (never blocking, never needing a runtime in the dropping thread); if that runtime is gone
/// or the backend is unreachable, the TTL removes the lease. Either way the lost signal fires
/// for every clone of [`lost_token`](Self::lost_token), because the lock is no longer held.
#[must_use = "dropping a Guard releases the lock at once; keep it for as long as the work runs"]
#[derive(Debug)]
pub struct Guard {
    lease: Arc<Lease>,
    watchdog: tokio::task::JoinHandle<()>,
    on_drop: ReleaseOnDrop,
}

/// What the guard and its watchdog share.
#[derive(Debug)]
struct Lease {
    backend: Arc<dyn Backend>,
    key: String,
    owner: OwnerToken,
    fence: FencingToken,
    times: Mutex<Times>,
    lost: CancellationToken,
}

#[derive(Debug, Clone, Copy)]
struct Times {
    ttl: Duration,
    deadline: Instant,
}

impl Lease {
    fn times(&self) -> Times {
        *self.times.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn renewed(&self, sent: Instant, ttl: Duration) {
        let mut t = self.times.lock().unwrap_or_else(PoisonError::into_inner);
        *t = Times {
            ttl,
            deadline: sent + ttl - drift(ttl),
        };
    }

    fn mark_lost(&self, why: &str) {
        if !self.lost.is_cancelled() {
            tracing::warn!(key = %self.key, fence = %self.fence, why, "lock lost");
            self.lost.cancel();
        }
    }
}

impl Guard {
    /// Starts the watchdog of a fresh grant; `on_drop` names the backend, key and owner.
    pub(crate) fn start(
        on_drop: ReleaseOnDrop,
        fence: FencingToken,
        sent: Instant,
        ttl: Duration,
        renew_every: Option<Duration>,
    ) -> Guard {
        let lease = Arc::new(Lease {
            backend: on_drop.backend.clone(),
            key: on_drop.key.clone(),
            owner: on_drop.owner,
            fence,
            times: Mutex::new(Times {
                ttl,
                deadline: sent + ttl - drift(ttl),
            }),
            lost: CancellationToken::new(),
        });
        let watchdog = on_drop.handle.spawn(watchdog(lease.clone(), renew_every));
        Guard {
            lease,
            watchdog,
            on_drop,
        }
    }

    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.lease.key
    }

    /// The fencing token of this grant: pass it to the resource you protect.
    pub fn token(&self) -> FencingToken {
        self.lease.fence
    }

    /// The random owner token of this grant.
    pub fn owner(&self) -> OwnerToken {
        self.lease.owner
    }

    /// The monotonic instant after which this process must assume the lock is gone
    /// (`sent + ttl − drift`, see [`lease`](crate::lease)); moved forward by each successful
    /// renewal.
    pub fn deadline(&self) -> Instant {
        self.lease.times().deadline
    }

    /// Whether the lost signal has fired.
    pub fn is_lost(&self) -> bool {
        self.lease.lost.is_cancelled()
    }

    /// Resolves when the lock is lost. Usable in `tokio::select!`:
    ///
    /// ```
    /// # async fn work() {}
    /// # async fn demo(guard: lockwise::Guard) {
    /// tokio::select! {
    ///     _ = guard.lost() => eprintln!("lock lost, stopping"),
    ///     _ = work() => {}
    /// }
    /// # }
    /// ```
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lease.lost.cancelled()
    }

    /// A token cancelled when the lock is lost (or released), to hand to spawned tasks.
    pub fn lost_token(&self) -> CancellationToken {
        self.lease.lost.child_token()
    }

    /// Asks the backend whether this grant still holds the lock: the check to make right before
    /// a critical action. It narrows the unsafe window to one round trip; it cannot close it
    /// (only a fencing token checked by the resource does). Fires the lost signal when the
    /// answer is no.
    pub async fn is_held(&self) -> Result<bool> {
        if self.is_lost() {
            return Ok(false);
        }
        let held = self
            .lease
            .backend
            .holds(&self.lease.key, self.lease.owner)
            .await?;
        // The answer is only good if it came back before the local deadline.
        if !held || Instant::now() >= self.deadline() {
            self.lease.mark_lost("ownership check failed");
            return Ok(false);
        }
        Ok(true)
    }

    /// Resets the lease to `ttl` from now. Fails with [`Error::LockLost`] (and fires the lost
    /// signal) when the lease expired or belongs to someone else: it is never re-created.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        validate_ttl(ttl)?;
        if self.is_lost() {
            return Err(self.lost_error());
        }
        let sent = Instant::now();
        let ok = self
            .lease
            .backend
            .extend(&self.lease.key, self.lease.owner, ttl)
            .await?;
        if !ok {
            self.lease.mark_lost("extend refused");
            return Err(self.lost_error());
        }
        self.lease.renewed(sent, ttl);
        Ok(())
    }

    /// Runs `work` while the lock is held and cancels it (drops the future) as soon as the lock
    /// is lost, returning [`Error::LockLost`].
    ///
    /// ```
    /// # async fn demo(locker: lockwise::Locker) -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// let opts = lockwise::LockOptions::ttl(Duration::from_secs(10));
    /// if let Some(guard) = locker.try_acquire("report", &opts).await? {
    ///     let token = guard.token();
    ///     guard.run(async move { println!("writing with token {token}") }).await?;
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output> {
        tokio::select! {
            biased;
            _ = self.lease.lost.cancelled() => Err(self.lost_error()),
            out = work => Ok(out),
        }
    }

    /// Releases the lock by compare-and-delete. `Ok(true)` when this grant still held it,
    /// `Ok(false)` when it had already expired or been taken over (nothing is removed then).
    pub async fn release(mut self) -> Result<bool> {
        self.watchdog.abort();
        self.on_drop.armed = false;
        let released = self
            .lease
            .backend
            .release(&self.lease.key, self.lease.owner)
            .await;
        self.lease.lost.cancel();
        tracing::debug!(key = %self.lease.key, fence = %self.lease.fence, ?released, "release");
        released
    }

    fn lost_error(&self) -> Error {
        Error::LockLost {
            key: self.lease.key.clone(),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.watchdog.abort();
        self.lease.lost.cancel();
    }
}

/// Renews the lease and fires the lost signal at the local deadline.
async fn watchdog(lease: Arc<Lease>, renew_every: Option<Duration>) {
    let mut next_renewal = renew_every.map(|every| Instant::now() + every);
    loop {
        let deadline = lease.times().deadline;
        let wake = next_renewal.map_or(deadline, |at| at.min(deadline));
        tokio::select! {
            _ = sleep_until(wake) => {}
            _ = lease.lost.cancelled() => return,
        }
        let Times { ttl, deadline } = lease.times();
        if Instant::now() >= deadline {
            lease.mark_lost("the local deadline passed without a successful renewal");
            return;
        }
        let (Some(every), Some(at)) = (renew_every, next_renewal) else {
            continue;
        };
        if Instant::now() < at {
            continue;
        }
        // The response must come back well before the next renewal and before the deadline.
        let sent = Instant::now();
        let give_up = (sent + every / 2).min(deadline);
        match timeout_at(give_up, lease.backend.extend(&lease.key, lease.owner, ttl)).await {
            Ok(Ok(true)) => {
                lease.renewed(sent, ttl);
                next_renewal = Some(sent + every);
                tracing::trace!(key = %lease.key, "renewed");
            }
            Ok(Ok(false)) => {
                lease.mark_lost("renewal refused: the lease expired or belongs to someone else");
                return;
            }
            Ok(Err(error)) => {
                tracing::warn!(key = %lease.key, %error, "renewal failed; retrying until the deadline");
                next_renewal = Some(Instant::now() + (every / 4).max(Duration::from_millis(10)));
            }
            Err(_) => {
                tracing::warn!(key = %lease.key, "renewal timed out; retrying until the deadline");
                next_renewal = Some(Instant::now());
            }
        }
    }
}

/// Releases a lease by owner token when dropped while armed: the cancel-safety net of acquire
/// and the release-on-drop of [`Guard`].
#[derive(Debug)]
pub(crate) struct ReleaseOnDrop {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) key: String,
    pub(crate) owner: OwnerToken,
    pub(crate) handle: Handle,
    pub(crate) armed: bool,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let backend = self.backend.clone();
        let key = std::mem::take(&mut self.key);
        let owner = self.owner;
        // `Handle::spawn` works from any thread; on a runtime that is shutting down the task is
        // dropped and the TTL removes the lease.
        self.handle.spawn(async move {
            match backend.release(&key, owner).await {
                Ok(released) => tracing::debug!(%key, released, "released on drop"),
                Err(error) => {
                    tracing::debug!(%key, %error, "release on drop failed; the TTL will expire it")
                }
            }
        });
    }
}
