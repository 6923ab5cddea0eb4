//! The guard of a held lock: renewal watchdog, lost signal, ownership re-check, release.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::gate::Pass;
use crate::lease::{FencingToken, OwnerToken, validate_ttl};
use crate::lease_clock::{Deadline, LeaseClock};
use crate::loss_check::{Checked, LossCheck};
use crate::metrics::{self, Loss};
use crate::options::{LockOptions, Renew};
use crate::renewals::{Alarm, Renewals};

/// A held lock.
///
/// While the guard lives, a watchdog renews the lease (every `ttl / 3` by default) and
/// watches the local [deadline](Self::deadline). When a renewal is refused, or the deadline
/// passes without a successful renewal (a hung call, a paused process, a lost network, a
/// suspended machine), the **lost signal** fires: [`lost`](Self::lost) resolves,
/// [`run`](Self::run) cancels the work it runs, and [`is_held`](Self::is_held) answers `false`.
/// A renewal that fails with a transport error is retried until the deadline; one that the
/// backend *refuses* (the lease is gone or someone else's) fires the signal at once.
///
/// The watchdogs of a [`Locker`](crate::Locker)'s guards run in one task, started on the
/// runtime of the guard that needed it and picking each watchdog up when its first renewal is
/// due, so a short hold costs no task of its own. If that runtime shuts down while guards of
/// the locker acquired on another runtime are held, their lost signal fires.
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
    /// Ends the watchdog (which the locker's renewal task runs once it is due).
    stop: CancellationToken,
    /// The lease's place in the locker's loss check, taken off when the guard goes.
    _checked: Option<Checked>,
    on_drop: ReleaseOnDrop,
    /// When the grant was asked for.
    granted: Instant,
}

/// What the guard and its watchdog share.
#[derive(Debug)]
struct Lease {
    backend: Arc<dyn Backend>,
    key: String,
    owner: OwnerToken,
    fence: FencingToken,
    renew: Renew,
    /// How long a release or an ownership check may take.
    call_timeout: Duration,
    /// The current TTL and deadline; a change wakes the watchdog.
    times: watch::Sender<Times>,
    /// User extends run one at a time (renewals do not wait for them: the generation in
    /// `times` keeps their answers apart).
    extending: tokio::sync::Mutex<()>,
    /// Rung by the locker's loss check when the lease may be gone: renew at once.
    alarm: Alarm,
    lost: CancellationToken,
    /// The holder's place in its locker's line for the key ([`LockOptions::fair`]): passed on
    /// when the guard goes or the lock is lost.
    ///
    /// [`LockOptions::fair`]: crate::LockOptions::fair
    pass: std::sync::Mutex<Option<Pass>>,
}

#[derive(Debug, Clone, Copy)]
struct Times {
    ttl: Duration,
    /// Bumped by every user extend: a renewal sent for an older TTL no longer moves the
    /// deadline, so a shortened TTL is never overridden by a late answer for the longer one.
    generation: u64,
    deadline: Deadline,
}

impl Times {
    fn starting(sent: LeaseClock, ttl: Duration, generation: u64) -> Self {
        Times {
            ttl,
            generation,
            deadline: sent.deadline(ttl),
        }
    }
}

impl Lease {
    fn times(&self) -> Times {
        *self.times.borrow()
    }

    /// When the watchdog must next run, counted from `since` (its last renewal's send, or
    /// the grant's): the next renewal, the look at the boot clock every `ttl / 3`, the deadline.
    fn due(&self, since: Instant) -> Instant {
        let times = self.times();
        let mut due = times.deadline.at.min(since + times.ttl / 3);
        if let Some(every) = self.renew.interval(times.ttl) {
            due = due.min(since + every);
        }
        due
    }

    /// Lets the next waiter of this locker ask for the key.
    fn pass_on(&self) {
        drop(
            self.pass
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
    }

    fn mark_lost(&self, cause: Loss, why: &str) {
        if !self.lost.is_cancelled() {
            tracing::warn!(key = %self.key, fence = %self.fence, why, "lock lost");
            metrics::lost(self.backend.kind(), cause);
            self.lost.cancel();
        }
    }

    /// Whether the lock must be considered lost now; fires the signal if the deadline passed.
    fn is_lost(&self) -> bool {
        if !self.lost.is_cancelled() && self.times().deadline.passed() {
            self.mark_lost(
                Loss::Deadline,
                "the local deadline passed without a successful renewal",
            );
        }
        self.lost.is_cancelled()
    }

    /// Counts an extend sent at `sent` that the backend agreed to, trusting `ttl` from the send:
    /// the deadline moves to `sent + ttl − drift`, unless the TTL changed since (a newer
    /// generation) or, for a renewal (`replace` false), an answer to a later renewal already
    /// moved it further.
    fn extended(&self, sent: LeaseClock, ttl: Duration, generation: u64, replace: bool) {
        // An answer that comes after the deadline is worthless: the lock is already given up.
        if self.is_lost() {
            return;
        }
        let next = sent.deadline(ttl);
        let moved = self.times.send_if_modified(|times| {
            let newer = times.generation == generation && (replace || next.at > times.deadline.at);
            if newer {
                times.deadline = next;
            }
            newer
        });
        if moved {
            tracing::trace!(key = %self.key, ?ttl, "extended");
        }
    }

    /// A user extend: the TTL changes now (a new generation, which later renewals keep).
    ///
    /// Until the backend answers, the server's lease may already be the new TTL from any
    /// moment, so the deadline trusts the shorter of the old and the new TTL from the send. A
    /// renewal sent earlier with the old TTL may still reach the server after this extend, so
    /// even its success only trusts the shorter TTL; the next renewal trusts the new one.
    async fn extend(&self, ttl: Duration) -> Result<bool> {
        let _alone = self.extending.lock().await;
        if self.is_lost() {
            return Ok(false);
        }
        let sent = LeaseClock::start();
        let (mut generation, mut trusted) = (0, ttl);
        self.times.send_modify(|times| {
            trusted = ttl.min(times.ttl);
            times.generation += 1;
            times.ttl = ttl;
            generation = times.generation;
            let bound = sent.deadline(trusted);
            if bound.at < times.deadline.at {
                times.deadline = bound;
            }
        });
        // A shorter TTL may make the watchdog due before the time it was put down for.
        self.alarm.due(self.due(sent.sent()));
        let extended = self.backend.extend(&self.key, self.owner, ttl).await?;
        if extended {
            self.extended(sent, trusted, generation, true);
        } else {
            self.mark_lost(
                Loss::Refused,
                "extend refused: the lease expired or belongs to someone else",
            );
        }
        Ok(extended && !self.is_lost())
    }
}

impl Guard {
    /// Starts the watchdog of a fresh grant made with `opts` and puts it under the locker's
    /// loss check; `on_drop` names the backend, key and owner, and `pass` is the holder's
    /// place in the locker's line for the key.
    pub(crate) fn start(
        on_drop: ReleaseOnDrop,
        fence: FencingToken,
        sent: LeaseClock,
        opts: &LockOptions,
        loss_check: &LossCheck,
        pass: Option<Pass>,
        renewals: &Arc<Renewals>,
    ) -> Guard {
        let (ttl, renew, call_timeout) = (opts.ttl, opts.renew, opts.call_timeout);
        let lease = Arc::new(Lease {
            backend: on_drop.backend.clone(),
            key: on_drop.key.clone(),
            owner: on_drop.owner,
            fence,
            renew,
            call_timeout,
            times: watch::Sender::new(Times::starting(sent, ttl, 0)),
            extending: tokio::sync::Mutex::new(()),
            alarm: Alarm::new(renewals.clone()),
            lost: CancellationToken::new(),
            pass: std::sync::Mutex::new(pass),
        });
        let started = sent.sent();
        let stop = CancellationToken::new();
        let mut watched = Watched {
            lease: lease.clone(),
            stop: stop.clone(),
            ended: false,
        };
        let watchdog = async move {
            let lease = watched.lease.clone();
            tokio::select! {
                biased;
                () = watched.stop.cancelled() => {}
                // Nothing to renew once the lock is lost, however that was learnt; the next
                // waiter in line may ask at once.
                () = lease.lost.cancelled() => lease.pass_on(),
                () = watchdog(lease.clone(), started) => lease.pass_on(),
            }
            watched.end();
        };
        renewals.add(lease.due(started), stop.clone(), watchdog, &on_drop.handle);
        let checked = loss_check.watch(
            &lease.key,
            lease.owner,
            lease.alarm.clone(),
            lease.lost.clone(),
            &on_drop.handle,
        );
        Guard {
            lease,
            stop,
            _checked: checked,
            on_drop,
            granted: started,
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
    /// renewal. (It is also tracked on `CLOCK_BOOTTIME`, so a suspend of the machine counts.)
    pub fn deadline(&self) -> Instant {
        self.lease.times().deadline.at
    }

    /// Whether the lost signal has fired (or the deadline has passed, which fires it).
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
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
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing on the server or in the guard (the lost
    /// signal fires only on a "no" that arrived).
    pub async fn is_held(&self) -> Result<bool> {
        if self.is_lost() {
            return Ok(false);
        }
        let limit = self.lease.call_timeout;
        let held = tokio::time::timeout(
            limit,
            self.lease.backend.holds(&self.lease.key, self.lease.owner),
        )
        .await
        .map_err(|_| Error::no_answer("an ownership check", limit))??;
        if !held {
            self.lease
                .mark_lost(Loss::ServerForgot, "ownership check failed");
        }
        // The answer is only good if it came back before the local deadline.
        Ok(held && !self.is_lost())
    }

    /// Resets the lease to `ttl` from now (later renewals keep this TTL). Fails with
    /// [`Error::LockLost`] (and fires the lost signal) when the lease expired or belongs to
    /// someone else: it is never re-created.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future after the request was sent may leave the server's lease at either
    /// TTL; the guard's deadline then counts the shorter one from the send, which only makes it
    /// give up sooner than it must, and later renewals use the new TTL. Nothing is ever
    /// re-created.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        validate_ttl(ttl)?;
        if self.lease.extend(ttl).await? {
            Ok(())
        } else {
            Err(self.lost_error())
        }
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
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops `work` and nothing else: the guard still holds the lock
    /// (and renews it) until it is released or dropped.
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output> {
        if self.is_lost() {
            return Err(self.lost_error());
        }
        tokio::select! {
            biased;
            _ = self.lease.lost.cancelled() => Err(self.lost_error()),
            out = work => Ok(out),
        }
    }

    /// Releases the lock by compare-and-delete. `Ok(true)` when this grant still held it,
    /// `Ok(false)` when it had already expired or been taken over (nothing is removed then).
    ///
    /// # Cancel safety
    ///
    /// If this future is dropped, or the backend fails, the release is retried in the
    /// background as if the guard had been dropped; the TTL is the backstop.
    pub async fn release(mut self) -> Result<bool> {
        self.stop.cancel();
        let limit = self.lease.call_timeout;
        let released = tokio::time::timeout(
            limit,
            self.lease
                .backend
                .release(&self.lease.key, self.lease.owner),
        )
        .await
        .map_err(|_| Error::no_answer("a release", limit))??;
        self.on_drop.armed = false;
        tracing::debug!(key = %self.lease.key, fence = %self.lease.fence, released, "released");
        Ok(released)
    }

    fn lost_error(&self) -> Error {
        Error::LockLost {
            key: self.lease.key.clone(),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.cancel();
        self.lease.lost.cancel();
        self.lease.pass_on();
        let (kind, held) = (self.lease.backend.kind(), self.granted.elapsed());
        metrics::held(kind, held);
        let ttl = self.lease.times().ttl;
        if self.lease.renew.interval(ttl).is_none() {
            metrics::headroom(kind, "hold", &self.lease.key, held, ttl);
        }
    }
}

/// The answer to one renewal, with what it was sent for.
struct Renewal {
    sent: LeaseClock,
    ttl: Duration,
    generation: u64,
    /// `None`: no answer while it could still have moved the deadline.
    answer: Option<Result<bool>>,
}

/// Renews the lease and fires the lost signal at the local deadline.
///
/// Renewals start on schedule (every `ttl / 3` by default) counted from the previous send, and
/// each stays in flight until the deadline: a slow round trip still counts when its answer
/// arrives in time, and the next renewal does not wait for it. Whichever answer comes back
/// first moves the deadline to `its send + ttl − drift`; a refusal fires the lost signal.
///
/// It first runs when the first renewal is due (see [`Renewals`]): the schedule counts from
/// `started`, the grant's send.
async fn watchdog(lease: Arc<Lease>, started: Instant) {
    let mut changes = lease.times.subscribe();
    let mut in_flight = FuturesUnordered::new();
    let mut next_renewal = lease
        .renew
        .interval(lease.times().ttl)
        .map(|every| started + every);
    loop {
        let times = lease.times();
        let every = lease.renew.interval(times.ttl);
        // Wake at least every ttl/3 even without renewal: a suspended machine stops the
        // monotonic clock, and only a look at CLOCK_BOOTTIME notices.
        let mut wake = times.deadline.at.min(Instant::now() + times.ttl / 3);
        if let Some(at) = next_renewal {
            wake = wake.min(at);
        }
        // In a fixed order (a simulation replays a seed exactly): answers, then the timer.
        tokio::select! {
            biased;
            Some(renewal) = in_flight.next(), if !in_flight.is_empty() => {
                let renewal: Renewal = renewal;
                match renewal.answer {
                    Some(Ok(true)) => {
                        let round_trip = renewal.sent.sent().elapsed();
                        let kind = lease.backend.kind();
                        metrics::renewed(kind, round_trip);
                        metrics::headroom(kind, "renewal", &lease.key, round_trip, renewal.ttl);
                        lease.extended(renewal.sent, renewal.ttl, renewal.generation, false);
                    }
                    Some(Ok(false)) => {
                        metrics::renewal_failed(lease.backend.kind(), "refused");
                        lease.mark_lost(Loss::Refused, "renewal refused: the lease expired or belongs to someone else");
                        return;
                    }
                    Some(Err(error)) => {
                        tracing::warn!(key = %lease.key, %error, "renewal failed; retrying until the deadline");
                        metrics::renewal_failed(lease.backend.kind(), "error");
                        if in_flight.is_empty() && let Some(every) = every {
                            // Not a busy loop, but sooner than the schedule.
                            let soon = Instant::now() + (every / 4).max(Duration::from_millis(5));
                            next_renewal = Some(next_renewal.map_or(soon, |at| at.min(soon)));
                        }
                    }
                    None => {}
                }
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                // A user extend may have shortened the TTL: renew at the new pace.
                if let Some(every) = lease.renew.interval(lease.times().ttl) {
                    next_renewal = Some(next_renewal.map_or(Instant::now() + every, |at| at.min(Instant::now() + every)));
                }
                continue;
            }
            _ = lease.alarm.rung() => {
                // The locker's loss check saw the lease gone, or could not ask: renew now.
                tracing::debug!(key = %lease.key, "possible loss; renewing at once");
                if every.is_some() {
                    next_renewal = Some(Instant::now());
                } else {
                    // No renewals (renew off): ask, without extending, before the deadline.
                    let asked = timeout_at(
                        lease.times().deadline.at,
                        lease.backend.holds(&lease.key, lease.owner),
                    );
                    if let Ok(Ok(false)) = asked.await {
                        lease.mark_lost(Loss::ServerForgot, "the server no longer has the lease");
                        return;
                    }
                }
            }
            _ = lease.lost.cancelled() => return,
            _ = sleep_until(wake) => {}
        }
        if lease.is_lost() {
            return;
        }
        let (Some(every), Some(at)) = (every, next_renewal) else {
            continue;
        };
        if Instant::now() < at {
            continue;
        }
        let times = lease.times();
        let sent = LeaseClock::start();
        next_renewal = Some(sent.sent() + every);
        let renewing = lease.clone();
        // In flight until its answer could no longer move the deadline, even if an earlier
        // renewal's answer moves the deadline meanwhile.
        in_flight.push(async move {
            let answer = sent
                .in_flight(
                    times.ttl,
                    renewing
                        .backend
                        .extend(&renewing.key, renewing.owner, times.ttl),
                )
                .await;
            Renewal {
                sent,
                ttl: times.ttl,
                generation: times.generation,
                answer,
            }
        });
    }
}

/// A guard's watchdog, as the locker's renewal task holds it: dropped before it ended and
/// while its guard lives (the runtime running it shut down), it fires the lost signal, since
/// nothing renews the lease any more.
struct Watched {
    lease: Arc<Lease>,
    stop: CancellationToken,
    ended: bool,
}

impl Watched {
    fn end(&mut self) {
        self.ended = true;
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.ended && !self.stop.is_cancelled() {
            self.lease.mark_lost(
                Loss::Stopped,
                "its renewals stopped: the runtime running them shut down",
            );
            self.lease.pass_on();
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
