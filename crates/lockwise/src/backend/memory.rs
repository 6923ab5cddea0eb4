//! Leases in this process's memory: the test double, and a lock between tasks of one process.
//!
//! Time comes from [`tokio::time::Instant`], so a test on a paused runtime
//! (`#[tokio::test(start_paused = true)]`) controls expiry exactly with `tokio::time::advance`.
//! It cannot exclude two processes; `Locker::connect("memory:")` is for tests and examples.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Backend, HeldLock, Holder, ReleaseWatch};
use crate::error::Result;
use crate::lease::{FencingToken, OwnerToken};

/// In-process lease store. Clones share the same leases.
#[derive(Debug, Clone, Default)]
pub struct MemoryBackend {
    keys: Arc<Mutex<HashMap<String, Slot>>>,
}

#[derive(Debug)]
struct Slot {
    holder: Option<(OwnerToken, Instant)>,
    /// The last fencing token issued; kept after release so tokens never repeat.
    fence: u64,
    /// When the last grant was made.
    granted: Instant,
    released: watch::Sender<u64>,
}

impl Slot {
    fn live_holder(&self, now: Instant) -> Option<(OwnerToken, Instant)> {
        self.holder.filter(|(_, expires)| *expires > now)
    }
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_slot<T>(&self, key: &str, f: impl FnOnce(&mut Slot, Instant) -> T) -> T {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = keys.entry(key.to_owned()).or_insert_with(|| Slot {
            holder: None,
            fence: 0,
            granted: Instant::now(),
            released: watch::channel(0).0,
        });
        f(slot, Instant::now())
    }

    /// Removes a lease whoever holds it: the fault "someone deleted the key" for tests.
    pub fn force_delete(&self, key: &str) {
        self.with_slot(key, |slot, _| slot.holder = None);
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        Ok(
            self.with_slot(key, |slot, now| match slot.live_holder(now) {
                Some((_, expires)) => Attempt::Held {
                    expires_in: Some(expires - now),
                },
                None => {
                    slot.fence += 1;
                    slot.granted = now;
                    slot.holder = Some((owner, now + ttl));
                    Attempt::Granted(FencingToken::new(slot.fence))
                }
            }),
        )
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        Ok(
            self.with_slot(key, |slot, now| match slot.live_holder(now) {
                Some((o, _)) if o == owner => {
                    slot.holder = Some((owner, now + ttl));
                    true
                }
                _ => false,
            }),
        )
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        Ok(
            self.with_slot(key, |slot, now| match slot.live_holder(now) {
                Some((o, _)) if o == owner => {
                    slot.holder = None;
                    slot.released.send_modify(|n| *n += 1);
                    true
                }
                _ => false,
            }),
        )
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        Ok(self.with_slot(key, |slot, now| {
            slot.live_holder(now).is_some_and(|(o, _)| o == owner)
        }))
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        Ok(self.with_slot(key, |slot, _| {
            ReleaseWatch::new(slot.released.subscribe(), None)
        }))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn held(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let mut held: Vec<HeldLock> = keys
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .filter_map(|(key, slot)| Some(slot.described(key, slot.live_holder(now)?.1, now)))
            .collect();
        held.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(held)
    }

    async fn break_lock(&self, key: &str) -> Result<Option<HeldLock>> {
        Ok(self.with_slot(key, |slot, now| {
            let (_, expires) = slot.live_holder(now)?;
            let broken = slot.described(key, expires, now);
            slot.holder = None;
            slot.released.send_modify(|n| *n += 1);
            Some(broken)
        }))
    }
}

impl Slot {
    /// The live lease of `key`, which runs out at `expires`.
    fn described(&self, key: &str, expires: Instant, now: Instant) -> HeldLock {
        HeldLock {
            key: key.to_owned(),
            token: Some(FencingToken::new(self.fence)),
            holder: Holder::this_process(),
            held_for: Some(now - self.granted),
            ttl_left: Some(expires - now),
            // Each waiter subscribes to the slot's releases.
            waiters: u64::try_from(self.released.receiver_count()).ok(),
        }
    }
}
