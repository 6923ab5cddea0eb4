//! The line of waiters for a lock, kept by etcd: first come, first served across processes.
//!
//! A waiting acquire puts a waiter key, `P` `wait/` `K` `\0` `<id>`, on a lease of its own,
//! granted for the wait and kept alive only by the waiter's task. Its place is the key's create
//! revision. Whatever ends the wait, the key cannot outlive it by more than the lease: a waiter
//! that is dropped halfway through joining (its put in flight, say) or whose process dies sends
//! no more keep-alives. A lease shared with the process's locks would keep such a key, and the
//! waiters behind it, for as long as the process lives. It watches only the waiter just
//! ahead of it, as etcd's own `concurrency.Mutex` does, and is first once no waiter key with
//! a lower create revision is left; a key created later always has a higher revision, so being
//! first lasts. Only the first waiter sends attempts; the others wait for their turn, not for
//! the lock. The lease is revoked, and the key goes with it, when the acquire ends (granted,
//! timed out or dropped).
//!
//! The line orders waiters, not every caller: a `try_acquire`, and an acquire's first
//! attempt (made before it joins), can still take a free lock ahead of the line.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, PutOptions, SortOrder, SortTarget, WatchOptions};
use tokio::sync::watch;
use tokio::time::Instant;

use super::EtcdBackend;
use super::session::Session;
use crate::error::Result;
use crate::lease::OwnerToken;

/// How long a waiter's lease lasts past its last keep-alive: the longest that a waiter gone
/// without a word holds up the line.
const WAITER_LEASE_SECONDS: i64 = 3;

/// What the waiter's keep-alives keep of its lease: at least this much ahead, which leaves a
/// second of margin for a keep-alive to go out (see the session module's rule).
const KEEP_AHEAD: Duration = Duration::from_secs(2);

/// How often a waiter checks that its lease is alive (a keep-alive goes out only when due).
const KEEP_ALIVE_CHECK: Duration = Duration::from_millis(250);

/// A place in the line: `first` turns true when it is this waiter's turn (or when the line is
/// lost, and the waiter goes back to racing). Dropping it leaves the line.
pub(super) struct Place {
    pub(super) first: watch::Receiver<bool>,
    pub(super) keep: Leave,
}

/// Leaves the line when dropped: stops the waiter's task and revokes its lease, which deletes
/// its key. Armed from the lease's grant on, so a join dropped mid-way leaves too.
pub(super) struct Leave {
    task: Option<tokio::task::JoinHandle<()>>,
    backend: EtcdBackend,
    lease: i64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // No runtime: the lease, no longer kept alive, ends the key.
            return;
        };
        let (backend, lease) = (self.backend.clone(), self.lease);
        handle.spawn(async move {
            let _ = backend
                .call(|mut client| async move { client.lease_revoke(lease).await })
                .await;
        });
    }
}

/// The prefix of the waiter keys of lock `key` under `prefix`: `P` `wait/` `K` `\0`. A key has
/// no control character, so no other key's waiters share it.
pub(super) fn waiter_prefix(prefix: &str, key: &str) -> Vec<u8> {
    let mut name = format!("{prefix}wait/{key}").into_bytes();
    name.push(0);
    name
}

impl EtcdBackend {
    /// Joins the line of waiters for lock `key`.
    pub(super) async fn join_line(&self, key: &str) -> Result<Place> {
        let session = Session::grant(self, WAITER_LEASE_SECONDS).await?;
        let mut keep = Leave {
            task: None,
            backend: self.clone(),
            lease: session.id,
        };
        let prefix = waiter_prefix(&self.inner.prefix, key);
        let mut name = prefix.clone();
        name.extend_from_slice(OwnerToken::random().to_hex().as_bytes());
        let lease = session.id;
        self.call(|mut client| {
            let name = name.clone();
            async move {
                client
                    .put(name, Vec::new(), Some(PutOptions::new().with_lease(lease)))
                    .await
            }
        })
        .await?;
        let (tx, first) = watch::channel(false);
        let backend = self.clone();
        keep.task = Some(tokio::spawn(async move {
            tokio::join!(
                backend.keep_in_line(&session, &tx),
                backend.wait_for_turn(&prefix, &name, &tx),
            );
        }));
        Ok(Place { first, keep })
    }

    /// Keeps the waiter's lease alive; if it is gone, so is the waiter's key, and the waiter
    /// races for the lock again.
    async fn keep_in_line(&self, session: &Arc<Session>, first: &watch::Sender<bool>) {
        loop {
            tokio::time::sleep(KEEP_ALIVE_CHECK).await;
            match session.cover(self, KEEP_AHEAD, Instant::now()).await {
                Ok(Ok(())) => {}
                Ok(Err(_gone)) => {
                    first.send_replace(true);
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "etcd: a waiter's keep-alive failed"),
            }
        }
    }

    /// Sets `first` once no waiter key older than `mine` is left under `prefix`.
    async fn wait_for_turn(&self, prefix: &[u8], mine: &[u8], first: &watch::Sender<bool>) {
        loop {
            let line = self
                .call(|mut client| {
                    let prefix = prefix.to_vec();
                    async move {
                        let options = GetOptions::new()
                            .with_prefix()
                            .with_keys_only()
                            .with_sort(SortTarget::Create, SortOrder::Ascend);
                        client.get(prefix, Some(options)).await
                    }
                })
                .await;
            let Ok(line) = line else {
                // The line cannot be read: race for the lock rather than wait blind.
                first.send_replace(true);
                return;
            };
            let position = line.kvs().iter().position(|kv| kv.key() == mine);
            let ahead = match position {
                Some(0) | None => None,
                Some(i) => line.kvs().get(i - 1).map(|kv| kv.key().to_vec()),
            };
            let Some(ahead) = ahead else {
                // First, or out of the line (the key is gone with its lease): race.
                first.send_replace(true);
                return;
            };
            let read_at = line.header().map_or(0, |h| h.revision());
            if !self.gone(&ahead, read_at + 1).await {
                // The watch broke (its member died, say): read the line again.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Waits until the key `name` is deleted at or after `revision`; false when the watch
    /// broke before it could tell.
    async fn gone(&self, name: &[u8], revision: i64) -> bool {
        let stream = self
            .call(|mut client| {
                let name = name.to_vec();
                async move {
                    let options = WatchOptions::new().with_start_revision(revision);
                    client.watch(name, Some(options)).await
                }
            })
            .await;
        let Ok(mut stream) = stream else {
            return false;
        };
        loop {
            match stream.message().await {
                Ok(Some(answer)) => {
                    if answer
                        .events()
                        .iter()
                        .any(|event| event.event_type() == EventType::Delete)
                    {
                        return true;
                    }
                    if answer.canceled() {
                        return false;
                    }
                }
                Ok(None) | Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::waiter_prefix;

    /// Stored names are fixed: two versions of lockwise must share one line.
    #[test]
    fn waiter_keys_are_named_after_the_lock_and_a_nul() {
        assert_eq!(
            waiter_prefix("lockwise/", "a/b"),
            b"lockwise/wait/a/b\0".to_vec()
        );
    }
}
