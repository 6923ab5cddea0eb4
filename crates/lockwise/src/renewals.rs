//! One task per [`Locker`](crate::Locker) runs the watchdogs of its guards, picking each up
//! only when it is due.
//!
//! A guard's watchdog has nothing to do before its first renewal (`ttl / 3` by default) or its
//! deadline, and most guards are released long before. Spawning a task per grant cost ~40 µs
//! of every cycle on a two-core machine shared with the server (the task woke another worker
//! thread while the grant's answer was on its way); here a grant only puts its watchdog in a
//! list. The driver takes the list when the earliest of them is due, so a released guard's
//! watchdog is never polled, and the driver is woken only when
//! a guard is due before the time it already sleeps to: once per `ttl / 3` under a steady
//! stream of grants. Anything that makes a watchdog due earlier (a shorter TTL from an extend,
//! the loss check's alarm) says so with [`Renewals::due`].

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

type Watchdog = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The watchdogs of one locker's guards.
#[derive(Debug, Default)]
pub(crate) struct Renewals {
    state: Mutex<State>,
    /// Wakes the driver to take the list, or to sleep to an earlier time.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Watchdogs not yet polled, with the token that ends each.
    pending: Vec<(CancellationToken, Watchdog)>,
    /// When the driver takes `pending` (`None`: nothing pending).
    intake: Option<Instant>,
    /// The list's length above which ended watchdogs are dropped from it.
    prune_at: usize,
    driver: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("pending", &self.pending.len())
            .field("intake", &self.intake)
            .finish_non_exhaustive()
    }
}

/// The fewest watchdogs kept in the list before ended ones are dropped from it.
const PRUNE_FLOOR: usize = 256;

impl Renewals {
    /// Adds a watchdog that must first run by `due`; `stop` ends it (it is dropped unpolled
    /// if it was never due).
    pub(crate) fn add(
        self: &Arc<Self>,
        due: Instant,
        stop: CancellationToken,
        watchdog: impl Future<Output = ()> + Send + 'static,
        handle: &Handle,
    ) {
        let mut state = self.lock();
        if state.pending.len() >= state.prune_at.max(PRUNE_FLOOR) {
            state.pending.retain(|(stop, _)| !stop.is_cancelled());
            state.prune_at = state.pending.len() * 2;
        }
        state.pending.push((stop, Box::pin(watchdog)));
        self.due_locked(&mut state, due, Some(handle));
    }

    /// A watchdog in the list is due at `at` (now, for an alarm), perhaps sooner than it said.
    pub(crate) fn due(self: &Arc<Self>, at: Instant) {
        let mut state = self.lock();
        if state.pending.is_empty() {
            return;
        }
        let handle = Handle::try_current().ok();
        self.due_locked(&mut state, at, handle.as_ref());
    }

    fn due_locked(self: &Arc<Self>, state: &mut State, at: Instant, handle: Option<&Handle>) {
        let dead = state.driver.as_ref().is_none_or(JoinHandle::is_finished);
        if dead {
            // The earliest of what is pending (a driver that died with its runtime may have
            // left an earlier one).
            state.intake = Some(state.intake.map_or(at, |intake| intake.min(at)));
            // Without a runtime here, the next grant or alarm on one starts the driver.
            if let Some(handle) = handle {
                state.driver = Some(handle.spawn(drive(self.clone())));
            }
            return;
        }
        if state.intake.is_none_or(|intake| at < intake) {
            state.intake = Some(at);
            self.wake.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs the watchdogs taken from the list until none is left running or pending.
async fn drive(renewals: Arc<Renewals>) {
    let mut running = FuturesUnordered::new();
    loop {
        let intake = {
            let mut state = renewals.lock();
            match state.intake {
                Some(at) if at <= Instant::now() => {
                    // Those of released guards are dropped unpolled.
                    running.extend(
                        state
                            .pending
                            .drain(..)
                            .filter(|(stop, _)| !stop.is_cancelled())
                            .map(|(_, watchdog)| watchdog),
                    );
                    state.intake = None;
                    state.prune_at = 0;
                }
                _ => {}
            }
            if running.is_empty() && state.intake.is_none() {
                // Decided under the lock: a watchdog added after this starts a new driver.
                state.driver = None;
                return;
            }
            state.intake
        };
        let sleep = async {
            match intake {
                Some(at) => sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // In a fixed order: a simulation replays a seed exactly.
        tokio::select! {
            biased;
            () = renewals.wake.notified() => {}
            () = sleep => {}
            Some(()) = running.next(), if !running.is_empty() => {}
        }
    }
}

/// What wakes one guard's watchdog: the loss check rings it when the lease may be gone, and
/// the guard says when a changed TTL makes it due sooner.
#[derive(Debug, Clone)]
pub(crate) struct Alarm {
    notify: Arc<Notify>,
    renewals: Arc<Renewals>,
}

impl Alarm {
    pub(crate) fn new(renewals: Arc<Renewals>) -> Self {
        Alarm {
            notify: Arc::new(Notify::new()),
            renewals,
        }
    }

    /// Renew at once (the watchdog is picked up now if it was waiting in the list).
    pub(crate) fn ring(&self) {
        self.notify.notify_one();
        self.renewals.due(Instant::now());
    }

    /// The watchdog must run by `at`.
    pub(crate) fn due(&self, at: Instant) {
        self.renewals.due(at);
    }

    /// Resolves when rung (at once if rung since the last time).
    pub(crate) fn rung(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Adds a watchdog due at `due` that counts its first poll in `polled` and then runs until
    /// the token returned is cancelled.
    fn watch(
        renewals: &Arc<Renewals>,
        due: Instant,
        polled: &Arc<AtomicUsize>,
    ) -> CancellationToken {
        let (polled, stop) = (polled.clone(), CancellationToken::new());
        let watchdog = {
            let stop = stop.clone();
            async move {
                polled.fetch_add(1, Ordering::SeqCst);
                stop.cancelled().await;
            }
        };
        renewals.add(due, stop.clone(), watchdog, &Handle::current());
        stop
    }

    #[tokio::test(start_paused = true)]
    async fn a_watchdog_stopped_before_it_is_due_is_never_polled() {
        let renewals = Arc::new(Renewals::default());
        let polled = Arc::new(AtomicUsize::new(0));
        for _ in 0..1_000 {
            let stop = watch(&renewals, Instant::now() + Duration::from_secs(10), &polled);
            tokio::time::advance(Duration::from_millis(1)).await;
            stop.cancel();
        }
        // Ended ones are dropped from the list as it grows.
        assert!(renewals.lock().pending.len() <= 2 * PRUNE_FLOOR);
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(polled.load(Ordering::SeqCst), 0);
        tokio::task::yield_now().await;
        assert!(renewals.lock().driver.is_none(), "the driver did not end");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watchdog_runs_by_the_time_it_is_due() {
        let renewals = Arc::new(Renewals::default());
        let polled = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let stop = watch(&renewals, start + Duration::from_secs(10), &polled);
        // A later one does not delay it; an earlier one goes first.
        let late = watch(&renewals, start + Duration::from_secs(30), &polled);
        tokio::time::sleep(Duration::from_millis(9_990)).await;
        assert_eq!(polled.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            polled.load(Ordering::SeqCst),
            2,
            "taken together when the first is due"
        );
        stop.cancel();
        late.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn due_and_an_alarm_bring_a_watchdog_forward() {
        let renewals = Arc::new(Renewals::default());
        let polled = Arc::new(AtomicUsize::new(0));
        let stop = watch(&renewals, Instant::now() + Duration::from_secs(10), &polled);
        tokio::time::sleep(Duration::from_secs(1)).await;
        renewals.due(Instant::now() + Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(2_010)).await;
        assert_eq!(
            polled.load(Ordering::SeqCst),
            1,
            "due() did not bring it forward"
        );

        let alarmed = watch(&renewals, Instant::now() + Duration::from_secs(10), &polled);
        Alarm::new(renewals.clone()).ring();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            polled.load(Ordering::SeqCst),
            2,
            "the alarm did not bring it forward"
        );
        stop.cancel();
        alarmed.cancel();
    }
}
