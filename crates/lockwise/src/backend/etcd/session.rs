//! The leases a backend's locks live on: one per TTL class (see [`lease_seconds`]), granted on
//! first use and kept alive by the acquires and renewals of its locks, as etcd's own
//! `concurrency.Session` does for its mutexes. A grant is then one transaction and a release one
//! delete, instead of a lease grant and a revoke around each.
//!
//! # Why a shared lease never outlives nor undercuts a lock's deadline
//!
//! A lock of TTL `ttl` goes on the lease of `ceil(ttl + 0.25 s)` seconds (or more, if the
//! server raised it). The server keeps the lease at least `granted` after each keep-alive it
//! answered, counted from when the keep-alive was *sent*. A lock's local deadline is its
//! attempt's send time plus `ttl`, so an acquire or a renewal started at `t` is safe when the
//! last answered keep-alive was sent at or after `t + ttl - granted`: within the *margin*
//! `granted - ttl` (at least 0.25 s). Older than that, the call sends a keep-alive first and
//! waits for it; older than half the margin, it sends one in the background, so that a busy
//! lock never waits for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::EtcdBackend;
use crate::error::Result;

/// etcd's lease TTL, in whole seconds, for a lock of `ttl`: at least a quarter second above it,
/// rounded up (the server may still raise it to its own minimum, 1.5 election timeouts).
///
/// ```
/// use std::time::Duration;
/// use lockwise::backend::etcd::lease_seconds;
/// assert_eq!(lease_seconds(Duration::from_secs(30)), 31);
/// assert_eq!(lease_seconds(Duration::from_millis(200)), 1);
/// ```
pub fn lease_seconds(ttl: Duration) -> i64 {
    let padded = ttl.saturating_add(Duration::from_millis(250));
    let whole = padded
        .as_secs()
        .saturating_add(u64::from(padded.subsec_nanos() > 0));
    i64::try_from(whole.max(1)).unwrap_or(i64::MAX)
}

/// One lease and what this process knows of it.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) id: i64,
    /// The TTL the server granted.
    granted: Duration,
    /// When the last keep-alive that found the lease alive (or the grant) was sent.
    alive_at: Mutex<Instant>,
    /// One keep-alive in flight at a time; those who wait for it may be served by the next.
    sending: tokio::sync::Mutex<()>,
    /// A keep-alive is being sent in the background.
    refreshing: AtomicBool,
    /// The server said the lease is gone.
    gone: AtomicBool,
}

/// A lease that the server no longer has: its keys are gone with it.
#[derive(Debug)]
pub(super) struct Gone;

impl Session {
    fn alive_at(&self) -> Instant {
        *self.alive_at.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    pub(super) fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Makes sure the lease lasts at least `ttl` past `start`, the send time of the call a
    /// lock's deadline counts from (see the module's rule). `Err(Gone)` when the server has
    /// lost the lease.
    pub(super) async fn cover(
        self: &Arc<Self>,
        backend: &EtcdBackend,
        ttl: Duration,
        start: Instant,
    ) -> Result<std::result::Result<(), Gone>> {
        let margin = self.granted.saturating_sub(ttl);
        let age = start.saturating_duration_since(self.alive_at());
        if age > margin {
            return self.keep_alive(backend, start).await;
        }
        if age > margin / 2 && !self.refreshing.swap(true, Ordering::AcqRel) {
            let (session, backend) = (self.clone(), backend.clone());
            tokio::spawn(async move {
                let _ = session.keep_alive(&backend, Instant::now()).await;
                session.refreshing.store(false, Ordering::Release);
            });
        }
        Ok(Ok(()))
    }

    /// A keep-alive sent at or after `since` (coalesced: callers waiting while one is in
    /// flight share the next).
    async fn keep_alive(
        &self,
        backend: &EtcdBackend,
        since: Instant,
    ) -> Result<std::result::Result<(), Gone>> {
        let _alone = self.sending.lock().await;
        if self.is_gone() {
            return Ok(Err(Gone));
        }
        if self.alive_at() >= since {
            return Ok(Ok(()));
        }
        let sent = Instant::now();
        let id = self.id;
        let answer = backend
            .call_raw(|mut client| async move { client.lease_keep_alive(id).await })
            .await;
        match answer {
            Ok(_) => {
                let mut alive_at = self.alive_at.lock().unwrap_or_else(PoisonError::into_inner);
                *alive_at = (*alive_at).max(sent);
                Ok(Ok(()))
            }
            // The client's own word for a keep-alive answered with TTL 0.
            Err(etcd_client::Error::LeaseKeepAliveError(_)) => {
                self.mark_gone();
                Ok(Err(Gone))
            }
            Err(e) if lease_not_found(&e) => {
                self.mark_gone();
                Ok(Err(Gone))
            }
            Err(e) => Err(backend.error(e)),
        }
    }
}

/// Whether etcd refused a call because its lease does not exist (expired or revoked).
pub(super) fn lease_not_found(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::NotFound && status.message().contains("lease not found"))
}

/// The sessions of one backend, by lease seconds.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    by_seconds: tokio::sync::Mutex<HashMap<i64, Arc<Session>>>,
}

impl Sessions {
    /// The live session for locks of `ttl`, granted now if there is none.
    pub(super) async fn get(&self, backend: &EtcdBackend, ttl: Duration) -> Result<Arc<Session>> {
        let seconds = lease_seconds(ttl);
        let mut sessions = self.by_seconds.lock().await;
        if let Some(session) = sessions.get(&seconds).filter(|s| !s.is_gone()) {
            return Ok(session.clone());
        }
        let session = Session::grant(backend, seconds).await?;
        sessions.insert(seconds, session.clone());
        Ok(session)
    }
}

impl Session {
    /// A new lease of `seconds` (or more, if the server raised it), shared with no one.
    pub(super) async fn grant(backend: &EtcdBackend, seconds: i64) -> Result<Arc<Session>> {
        let sent = Instant::now();
        let answer = backend
            .call(|mut client| async move { client.lease_grant(seconds, None).await })
            .await?;
        let granted = Duration::from_secs(answer.ttl().max(seconds).unsigned_abs());
        let session = Arc::new(Session {
            id: answer.id(),
            granted,
            alive_at: Mutex::new(sent),
            sending: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        });
        tracing::debug!(lease = session.id, ?granted, "etcd: a lease granted");
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    use super::lease_seconds;
    use std::time::Duration;

    #[test]
    fn leases_are_at_least_a_quarter_second_longer_in_whole_seconds() {
        assert_eq!(lease_seconds(Duration::from_millis(100)), 1);
        assert_eq!(lease_seconds(Duration::from_millis(750)), 1);
        assert_eq!(lease_seconds(Duration::from_millis(751)), 2);
        assert_eq!(lease_seconds(Duration::from_secs(1)), 2);
        assert_eq!(lease_seconds(Duration::from_secs(30)), 31);
        assert_eq!(lease_seconds(Duration::MAX), i64::MAX);
    }
}
