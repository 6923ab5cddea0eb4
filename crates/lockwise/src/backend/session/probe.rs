//! Release detection for session locks, shared by every database's backend.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use crate::backend::ReleaseWatch;

/// Release detection for session locks: a *probe* per watched key and process waits for the
/// lock with a blocking, time-limited lock call on a connection of its own, gives it back at
/// once, and wakes the waiters. Unlike a notification sent by the releaser, this also fires
/// when a holder's session dies or its server-side lease runs out.
#[derive(Debug, Default)]
pub(super) struct Probes {
    keys: Arc<Mutex<HashMap<String, Probe>>>,
}

#[derive(Debug)]
struct Probe {
    released: watch::Sender<u64>,
    waiters: usize,
    task: tokio::task::AbortHandle,
}

impl Probes {
    /// A watch on lock `id`; the first waiter starts `probe`, the last one out stops it.
    pub(super) fn watch<F, Fut>(&self, id: String, probe: F) -> ReleaseWatch
    where
        F: FnOnce(watch::Sender<u64>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = keys.entry(id.clone()).or_insert_with(|| {
            let released = watch::Sender::new(0);
            let task = tokio::spawn(probe(released.clone())).abort_handle();
            Probe {
                released,
                waiters: 0,
                task,
            }
        });
        entry.waiters += 1;
        let rx = entry.released.subscribe();
        let unwatch = Unwatch {
            keys: self.keys.clone(),
            id,
        };
        ReleaseWatch::new(rx, Some(Box::new(unwatch)))
    }
}

struct Unwatch {
    keys: Arc<Mutex<HashMap<String, Probe>>>,
    id: String,
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(probe) = keys.get_mut(&self.id) {
            probe.waiters -= 1;
            if probe.waiters == 0 {
                probe.task.abort();
                keys.remove(&self.id);
            }
        }
    }
}

/// Wakes every waiter of a probe.
pub(super) fn wake(released: &watch::Sender<u64>) {
    released.send_modify(|n| *n = n.wrapping_add(1));
}
