//! A read-write lock on any lock backend: many readers at once, or one writer — Redisson's
//! `RReadWriteLock`, DistributedLock's `*DistributedReaderWriterLock`, `flock -s` / `-x`.
//!
//! Built from two things the lease core already has, so it works on every backend:
//! - the **gate**, a lock on `{name}#rw-writer`: a writer holds it for its whole critical
//!   section; a reader holds it only while it enters;
//! - the **reader slots**, a [`Semaphore`] of `max_readers` permits (`{name}#rw-readers`): a
//!   reader holds one while it reads.
//!
//! A reader takes the gate, takes a slot, and gives the gate back (entering again if it lost
//! the gate meanwhile). A writer takes the gate —
//! from then on no reader enters — then waits until every slot is free (it takes each one and
//! gives it back at once), and works holding the gate. So writers are not starved by a stream
//! of readers, and a writer's fencing token is the gate's, which strictly increases from one
//! writer to the next: a resource that fences on [`RwLock::writer_key`] refuses a frozen
//! writer once its successor has written. A reader frozen past its lease loses its slot (its
//! lost signal fires when it wakes) and the writer goes ahead.
//!
//! ```
//! # #[tokio::main] async fn main() -> lockwise::Result<()> {
//! use std::time::Duration;
//! use lockwise::{LockOptions, Locker, RwLock};
//!
//! let locker = Locker::connect("memory:").await?;
//! let catalog = RwLock::new(locker, "catalog", 16)?; // up to 16 readers at once
//! let opts = LockOptions::ttl(Duration::from_secs(30)).wait(Duration::from_secs(5));
//!
//! let a = catalog.read(&opts).await?;
//! let b = catalog.read(&opts).await?; // readers share
//! assert!(catalog.try_write(&opts).await?.is_none()); // a writer waits for them
//! a.release().await?;
//! b.release().await?;
//! let writer = catalog.write(&opts).await?;
//! let token = writer.token(); // fence the writes on catalog.writer_key()
//! assert!(catalog.try_read(&opts).await?.is_none());
//! writer.release().await?;
//! # let _ = token; Ok(()) }
//! ```
//!
//! Every process must give the same `max_readers`.

use std::time::Duration;

use futures_util::future::try_join_all;
use tokio::time::Instant;

use crate::error::Result;
use crate::guard::Guard;
use crate::lease::validate_key;
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::semaphore::{Permit, Semaphore};

/// A read-write lock: many readers at once, or one writer. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RwLock {
    locker: Locker,
    gate: String,
    readers: Semaphore,
}

/// A reader's hold on an [`RwLock`]: the [`Permit`] of its reader slot (it dereferences to
/// the slot's [`Guard`], for [`lost`](Guard::lost), [`run`](Guard::run), …). Released when
/// dropped.
#[must_use = "a read lock is released when dropped; bind it for as long as the reading runs"]
#[derive(Debug)]
pub struct ReadGuard {
    permit: Permit,
}

impl RwLock {
    /// The read-write lock `name` on `locker`'s backend, with at most `max_readers` readers at
    /// once (a reader beyond them waits for one to leave).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::new`] for `max_readers` and the name.
    pub fn new(locker: Locker, name: impl Into<String>, max_readers: u32) -> Result<Self> {
        let name = name.into();
        let gate = format!("{name}#rw-writer");
        validate_key(&gate)?;
        let readers = Semaphore::new(locker.clone(), format!("{name}#rw-readers"), max_readers)?;
        Ok(RwLock {
            locker,
            gate,
            readers,
        })
    }

    /// The key of the writers' lock: fence a writer's writes on it, with the token of the
    /// guard [`write`](Self::write) returns.
    pub fn writer_key(&self) -> &str {
        &self.gate
    }

    /// Waits for a read lock: until no writer holds or waits for the lock and a reader slot
    /// is free, or [`LockOptions::wait`] runs out ([`Error::WaitTimeout`](crate::Error::WaitTimeout)).
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::acquire`]: dropping the future leaves no lock behind.
    pub async fn read(&self, opts: &LockOptions) -> Result<ReadGuard> {
        let start = Instant::now();
        loop {
            let gate = self
                .locker
                .acquire(&self.gate, &within(opts, start))
                .await?;
            let permit = self.readers.acquire(&within(opts, start)).await;
            // A gate lost while waiting for a slot (a frozen reader): a writer may have
            // drained the slots since; enter again.
            let entered = !gate.is_lost();
            release(gate).await;
            let permit = permit?;
            if entered {
                return Ok(ReadGuard { permit });
            }
            let _ = permit.release().await;
        }
    }

    /// One attempt at a read lock: `None` when a writer holds or waits for it, or every
    /// reader slot is taken.
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::try_acquire`].
    pub async fn try_read(&self, opts: &LockOptions) -> Result<Option<ReadGuard>> {
        let Some(gate) = self.locker.try_acquire(&self.gate, opts).await? else {
            return Ok(None);
        };
        let permit = self.readers.try_acquire(opts).await;
        let entered = !gate.is_lost();
        release(gate).await;
        match permit? {
            Some(permit) if entered => Ok(Some(ReadGuard { permit })),
            Some(permit) => {
                let _ = permit.release().await;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Waits for the write lock: it takes the writers' lock (no reader enters from then on),
    /// then waits until every reader has left, within [`LockOptions::wait`]. The guard is the
    /// writers' lock: its token strictly increases from one writer to the next.
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::acquire`]: dropping the future releases what it took.
    pub async fn write(&self, opts: &LockOptions) -> Result<Guard> {
        let start = Instant::now();
        let gate = self.locker.acquire(&self.gate, opts).await?;
        let drain = within(opts, start).renew(false);
        let drained = try_join_all(
            self.readers
                .slot_keys()
                .iter()
                .map(|key| self.locker.acquire(key, &drain)),
        )
        .await;
        match drained {
            Ok(slots) => {
                for slot in slots {
                    release(slot).await;
                }
                Ok(gate)
            }
            Err(e) => {
                release(gate).await;
                Err(e)
            }
        }
    }

    /// One attempt at the write lock: `None` when a writer holds it or a reader reads.
    ///
    /// # Cancel safety
    ///
    /// As [`Locker::try_acquire`].
    pub async fn try_write(&self, opts: &LockOptions) -> Result<Option<Guard>> {
        let Some(gate) = self.locker.try_acquire(&self.gate, opts).await? else {
            return Ok(None);
        };
        let drain = opts.clone().renew(false);
        let slots = futures_util::future::join_all(
            self.readers
                .slot_keys()
                .iter()
                .map(|key| self.locker.try_acquire(key, &drain)),
        )
        .await;
        let mut free = true;
        for slot in slots {
            match slot {
                Ok(Some(guard)) => release(guard).await,
                Ok(None) => free = false,
                Err(e) => {
                    release(gate).await;
                    return Err(e);
                }
            }
        }
        if free {
            Ok(Some(gate))
        } else {
            release(gate).await;
            Ok(None)
        }
    }
}

/// `opts` with what is left of its wait since `start`.
fn within(opts: &LockOptions, start: Instant) -> LockOptions {
    match opts.wait {
        Some(wait) => opts.clone().wait(
            wait.saturating_sub(start.elapsed())
                .max(Duration::from_millis(1)),
        ),
        None => opts.clone(),
    }
}

/// Gives a lock back; a failure is left to its TTL (the lock was only a pass).
async fn release(guard: Guard) {
    if let Err(error) = guard.release().await {
        tracing::warn!(%error, "releasing a read-write lock's pass failed; its TTL ends it");
    }
}

impl ReadGuard {
    /// The reader slot this read lock holds.
    pub fn slot(&self) -> u32 {
        self.permit.slot()
    }

    /// The slot's guard, to keep on its own (still released when dropped).
    pub fn into_guard(self) -> Guard {
        self.permit.into_guard()
    }

    /// Gives the read lock back: `true` if it was still held.
    ///
    /// # Errors
    ///
    /// As [`Guard::release`].
    pub async fn release(self) -> Result<bool> {
        self.permit.release().await
    }
}

impl std::ops::Deref for ReadGuard {
    type Target = Guard;

    fn deref(&self) -> &Guard {
        &self.permit
    }
}
