//! Bookkeeping shared by the backends whose locks live in a database session (PostgreSQL
//! advisory locks, MySQL `GET_LOCK`): each grant owns a dedicated connection, found by owner
//! token behind the same five trait calls; a few idle connections are kept for later attempts;
//! and waiters learn of releases from a probe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::ReleaseWatch;
use crate::lease::OwnerToken;

/// How many idle connections are kept.
const SPARES: usize = 4;

/// A held lock's connection, locked while a call uses it.
pub(crate) type Shared<C> = Arc<tokio::sync::Mutex<C>>;

#[derive(Debug)]
pub(crate) struct Sessions<C> {
    held: Mutex<HashMap<OwnerToken, (String, Shared<C>)>>,
    spares: Mutex<Vec<C>>,
}

impl<C> Default for Sessions<C> {
    fn default() -> Self {
        Sessions {
            held: Mutex::default(),
            spares: Mutex::default(),
        }
    }
}

impl<C> Sessions<C> {
    /// Records the connection that holds `key` for `owner`.
    pub(crate) fn hold(&self, owner: OwnerToken, key: &str, conn: C) {
        let conn = Arc::new(tokio::sync::Mutex::new(conn));
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(owner, (key.to_owned(), conn));
    }

    /// The connection holding `key` for `owner`, if any.
    pub(crate) fn get(&self, owner: OwnerToken, key: &str) -> Option<Shared<C>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&owner)
            .filter(|(k, _)| k == key)
            .map(|(_, conn)| conn.clone())
    }

    /// Forgets `owner`'s session (its lock is released or lost) and returns its connection.
    pub(crate) fn end(&self, owner: OwnerToken) -> Option<Shared<C>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&owner)
            .map(|(_, conn)| conn)
    }

    /// An idle connection, if one is kept.
    pub(crate) fn spare(&self) -> Option<C> {
        self.spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// Keeps an idle connection for a later attempt (up to a few).
    pub(crate) fn keep(&self, conn: C) {
        let mut spares = self.spares.lock().unwrap_or_else(PoisonError::into_inner);
        if spares.len() < SPARES {
            spares.push(conn);
        }
    }

    /// Keeps a connection that sessions no longer share.
    pub(crate) fn keep_shared(&self, conn: Shared<C>) {
        if let Ok(conn) = Arc::try_unwrap(conn) {
            self.keep(conn.into_inner());
        }
    }
}

/// Release detection for session locks: a *probe* per watched key and process waits for the
/// lock with a blocking, time-limited lock call on a connection of its own, gives it back at
/// once, and wakes the waiters. Unlike a notification sent by the releaser, this also fires
/// when a holder's session dies or its server-side lease runs out.
#[derive(Debug, Default)]
pub(crate) struct Probes {
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
    pub(crate) fn watch<F, Fut>(&self, id: String, probe: F) -> ReleaseWatch
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
pub(crate) fn wake(released: &watch::Sender<u64>) {
    released.send_modify(|n| *n = n.wrapping_add(1));
}
