//! The locker's loss check: one task per [`Locker`](crate::Locker) that asks the server, every
//! few milliseconds and in one round trip, whether each lease it holds is still there.
//!
//! Renewals alone learn of a lease the server forgot (a Redis restart without persistence, a
//! failover to a replica that missed the write, a killed database session, a database restart)
//! only at the next renewal, a third of the TTL later, while a rival may already hold the lock.
//! The loss check narrows that window to its interval plus two round trips: when the server
//! says a lease is gone, or the check itself fails (the server may have restarted), the guards
//! concerned renew at once, and a refused renewal fires the lost signal as always. The check
//! never decides a loss on its own; it only makes the guard ask sooner.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;

use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::lease::OwnerToken;
use crate::renewals::Alarm;

/// How long one check may take before it counts as failed.
const CHECK_LIMIT: Duration = Duration::from_secs(1);

/// The leases a locker holds, and the task that checks them while there are any.
#[derive(Debug)]
pub(crate) struct LossCheck {
    backend: Arc<dyn Backend>,
    every: Option<Duration>,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    leases: HashMap<u64, Entry>,
    /// Whether the checking task runs; it stops when the last lease is gone.
    running: bool,
    /// The task, to start another if its runtime shut down under it.
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct Entry {
    key: String,
    owner: OwnerToken,
    alarm: Alarm,
    lost: CancellationToken,
}

/// A lease under the check; dropping it takes the lease off.
#[derive(Debug)]
pub(crate) struct Checked {
    id: u64,
    state: Arc<Mutex<State>>,
}

impl Drop for Checked {
    fn drop(&mut self) {
        lock(&self.state).leases.remove(&self.id);
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LossCheck {
    /// A check of `backend`'s leases every `every` (`None`: never).
    pub(crate) fn new(backend: Arc<dyn Backend>, every: Option<Duration>) -> Self {
        LossCheck {
            backend,
            every,
            state: Arc::default(),
        }
    }

    /// The interval, if the check runs.
    pub(crate) fn every(&self) -> Option<Duration> {
        self.every
    }

    /// Puts a lease under the check: `alarm` is notified whenever it may be lost. Returns
    /// `None` when the check is off.
    pub(crate) fn watch(
        &self,
        key: &str,
        owner: OwnerToken,
        alarm: Alarm,
        lost: CancellationToken,
        handle: &Handle,
    ) -> Option<Checked> {
        let every = self.every?;
        let mut state = lock(&self.state);
        let id = state.next_id;
        state.next_id += 1;
        state.leases.insert(
            id,
            Entry {
                key: key.to_owned(),
                owner,
                alarm,
                lost,
            },
        );
        let dead = state.task.as_ref().is_none_or(|task| task.is_finished());
        if !state.running || dead {
            state.running = true;
            let task = handle.spawn(check(
                self.backend.clone(),
                every,
                Arc::downgrade(&self.state),
            ));
            state.task = Some(task);
        }
        Some(Checked {
            id,
            state: self.state.clone(),
        })
    }
}

/// Checks the leases every `every` until there are none (or the locker is gone).
async fn check(backend: Arc<dyn Backend>, every: Duration, state: std::sync::Weak<Mutex<State>>) {
    let mut failing = false;
    loop {
        tokio::time::sleep(every).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let leases: Vec<(String, OwnerToken, Alarm)> = {
            let mut state = lock(&state);
            let live: Vec<_> = state
                .leases
                .values()
                .filter(|e| !e.lost.is_cancelled())
                .map(|e| (e.key.clone(), e.owner, e.alarm.clone()))
                .collect();
            if live.is_empty() {
                // Decided under the lock: a lease added after this starts a new task.
                state.running = false;
                return;
            }
            live
        };
        drop(state);
        let asked: Vec<(&str, OwnerToken)> =
            leases.iter().map(|(k, o, _)| (k.as_str(), *o)).collect();
        match tokio::time::timeout(CHECK_LIMIT, backend.still_held(&asked)).await {
            Ok(Ok(held)) => {
                failing = false;
                for ((key, _, alarm), held) in leases.iter().zip(held) {
                    if !held {
                        tracing::debug!(%key, "loss check: the server no longer has this lease");
                        alarm.ring();
                    }
                }
            }
            outcome => {
                // Once per streak of failures: the server may have restarted and forgotten
                // every lease, so each guard asks on its own at once.
                if !failing {
                    let error = match outcome {
                        Ok(Err(e)) => e.to_string(),
                        _ => format!("no answer within {CHECK_LIMIT:?}"),
                    };
                    tracing::debug!(%error, "loss check failed; every guard renews now");
                    for (_, _, alarm) in &leases {
                        alarm.ring();
                    }
                }
                failing = true;
            }
        }
    }
}
