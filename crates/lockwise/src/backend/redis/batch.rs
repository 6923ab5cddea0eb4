//! Grants and releases of one process, coalesced: the calls that concurrent tasks make while
//! earlier ones are on their way go to Redis as one script call (`lua/acquire.lua`,
//! `lua/release.lua` take any number of locks). Each lock keeps its own owner token, fencing
//! token and TTL; only the round trip is shared. On a cluster each call goes alone (its
//! coalescers have a lane per call).

use std::time::Duration;

use async_trait::async_trait;

use super::{ACQUIRE, RELEASE, RedisBackend, Target, ttl_millis};
use crate::backend::coalesce::Batch;
use crate::error::Result;
use crate::lease::OwnerToken;

/// The most requests of each kind in flight at once; calls beyond wait and go together.
///
/// Four lanes of at most 16 locks keep the client and the server busy at once: with fewer,
/// larger batches, 64 tasks move in lock step (the server runs one large script while the
/// client waits, then the other way round). 64 tasks on one key each: 2 × 64 gave 71k–78k
/// cycles/s, 4 × 16 86k–94k, 8 × 8 80k–88k (docs/performance.md).
pub(super) const LANES: usize = 4;

/// The most locks in one script call.
pub(super) const MOST: usize = 16;

/// One grant asked for.
pub(super) struct Grant {
    pub(super) key: String,
    pub(super) owner: OwnerToken,
    pub(super) ttl: Duration,
}

/// The acquire script's answer for one lock: `(1, fencing token)` or `(0, PTTL)`.
pub(super) type Granted = (i64, i64);

/// Grants through `lua/acquire.lua`.
#[derive(Clone)]
pub(super) struct Grants(pub(super) RedisBackend);

#[async_trait]
impl Batch for Grants {
    type Call = Grant;
    type Answer = Granted;

    async fn send(&self, calls: &[Grant]) -> Result<Vec<Granted>> {
        let backend = &self.0;
        let mut invocation = ACQUIRE.prepare_invoke();
        for call in calls {
            invocation
                .key(backend.lock_name(&call.key))
                .key(backend.fence_name(&call.key))
                .arg(call.owner.to_hex())
                .arg(ttl_millis(call.ttl));
        }
        let flat: Vec<i64> = invocation
            .invoke_async(&mut backend.conn())
            .await
            .map_err(|e| backend.fail("acquire", e))?;
        Ok(flat
            .chunks_exact(2)
            .map(|pair| (pair[0], pair[1]))
            .collect())
    }

    /// A grant whose caller went away while it was queued: given back at once rather than
    /// left to its TTL. (The caller's own release by owner may have come before the grant.)
    async fn orphaned(&self, call: Grant, (granted, _): Granted) {
        if granted == 1 {
            let _ = crate::backend::Backend::release(&self.0, &call.key, call.owner).await;
        }
    }
}

/// One release asked for.
pub(super) struct Release {
    pub(super) key: String,
    pub(super) owner: OwnerToken,
}

/// Releases through `lua/release.lua`: whether each caller's lock was deleted.
#[derive(Clone)]
pub(super) struct Releases(pub(super) RedisBackend);

#[async_trait]
impl Batch for Releases {
    type Call = Release;
    type Answer = bool;

    async fn send(&self, calls: &[Release]) -> Result<Vec<bool>> {
        let backend = &self.0;
        let mut invocation = RELEASE.prepare_invoke();
        invocation.arg(match backend.inner.target {
            Target::Cluster { .. } => "SPUBLISH",
            _ => "PUBLISH",
        });
        for call in calls {
            invocation
                .key(backend.lock_name(&call.key))
                .arg(call.owner.to_hex())
                .arg(backend.channel_name(&call.key));
        }
        let deleted: Vec<i64> = invocation
            .invoke_async(&mut backend.conn())
            .await
            .map_err(|e| backend.fail("release", e))?;
        Ok(deleted.into_iter().map(|n| n == 1).collect())
    }
}
