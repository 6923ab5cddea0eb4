//! The memory backend on paused Tokio time: expiry and the lost signal happen exactly at the
//! TTL, with no real waiting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::OwnerToken;
use lockwise::backend::memory::MemoryBackend;
use lockwise::backend::{Attempt, Backend, ReleaseWatch};
use lockwise::{LockOptions, Locker};
use tokio::time::{Instant, advance};

#[tokio::test(start_paused = true)]
async fn expiry_is_exact_on_paused_time() {
    let store = MemoryBackend::new();
    let (a, b) = (Locker::new(store.clone()), Locker::new(store));
    let opts = LockOptions::ttl(Duration::from_secs(60)).renew(false);
    let start = Instant::now();
    let ga = a.try_acquire("k", &opts).await.unwrap().unwrap();
    // drift(60 s) = 602 ms: the holder gives up before the store expires the lease.
    assert_eq!(ga.deadline(), start + Duration::from_millis(60_000 - 602));

    advance(Duration::from_millis(59_397)).await;
    assert!(!ga.is_lost());
    advance(Duration::from_millis(2)).await;
    tokio::task::yield_now().await;
    assert!(ga.is_lost(), "the lost signal fires at the local deadline");
    assert!(
        b.try_acquire("k", &opts).await.unwrap().is_none(),
        "the store still has it"
    );

    advance(Duration::from_millis(600)).await;
    assert!(
        b.try_acquire("k", &opts).await.unwrap().is_none(),
        "1 ms before the TTL"
    );
    advance(Duration::from_millis(1)).await;
    let gb = b
        .try_acquire("k", &opts)
        .await
        .unwrap()
        .expect("expired at exactly 60 s");
    assert_eq!(gb.token().get(), 2);
}

#[tokio::test(start_paused = true)]
async fn renewal_on_paused_time_keeps_the_lock_for_an_hour() {
    let locker = Locker::connect("memory:").await.unwrap();
    let ga = locker
        .try_acquire("k", &LockOptions::ttl(Duration::from_secs(3)))
        .await
        .unwrap()
        .unwrap();
    // Auto-advancing paused time runs the watchdog through 1200 renewals.
    ga.run(tokio::time::sleep(Duration::from_secs(3600)))
        .await
        .expect("never lost");
    assert!(ga.release().await.unwrap());
}

/// A user extend that shortens the lease is honoured at once by the watchdog: the lost signal
/// fires at the new, earlier deadline.
#[tokio::test(start_paused = true)]
async fn a_shorter_extend_moves_the_deadline_in() {
    let locker = Locker::connect("memory:").await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(30)).renew(false);
    let guard = locker.try_acquire("k", &opts).await.unwrap().unwrap();
    let start = Instant::now();
    guard.extend(Duration::from_secs(1)).await.unwrap();
    assert_eq!(guard.deadline(), start + Duration::from_millis(1_000 - 12));
    let out = guard.run(tokio::time::sleep(Duration::from_secs(20))).await;
    assert!(out.is_err(), "lost at the new deadline");
    assert_eq!(Instant::now(), start + Duration::from_millis(988));
}

/// With renewal on, the renewal pace follows the new TTL (a third of it).
#[tokio::test(start_paused = true)]
async fn renewal_follows_the_ttl_of_the_last_extend() {
    let locker = Locker::connect("memory:").await.unwrap();
    let guard = locker
        .try_acquire("k", &LockOptions::ttl(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();
    guard.extend(Duration::from_secs(1)).await.unwrap();
    guard
        .run(tokio::time::sleep(Duration::from_secs(60)))
        .await
        .expect("renewed every 333 ms, never lost");
    assert!(guard.deadline() <= Instant::now() + Duration::from_secs(1));
}

/// Fails the first `failures` acquire attempts with a transport error, like a restarting server.
#[derive(Debug)]
struct Restarting {
    inner: MemoryBackend,
    failures: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl Backend for Restarting {
    async fn try_acquire(
        &self,
        key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> lockwise::Result<Attempt> {
        use std::sync::atomic::Ordering::SeqCst;
        if self
            .failures
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            // Any transient (backend) error; only its kind matters here.
            return Locker::connect("file:///proc/lockwise-no-such-dir")
                .await
                .map(|_| unreachable!());
        }
        self.inner.try_acquire(key, owner, ttl).await
    }
    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> lockwise::Result<bool> {
        self.inner.extend(key, owner, ttl).await
    }
    async fn release(&self, key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn holds(&self, key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.inner.holds(key, owner).await
    }
    async fn watch(&self, key: &str) -> lockwise::Result<ReleaseWatch> {
        self.inner.watch(key).await
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_waits_out_a_restarting_backend() {
    let locker = Locker::new(Restarting {
        inner: MemoryBackend::new(),
        failures: 3.into(),
    });
    let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(30));
    let guard = locker
        .acquire("k", &opts)
        .await
        .expect("acquired after 3 failures");
    assert_eq!(guard.token().get(), 1);

    // When the wait ends on a failure, that failure is reported, not a timeout.
    let down = Locker::new(Restarting {
        inner: MemoryBackend::new(),
        failures: u32::MAX.into(),
    });
    let err = down.acquire("k", &opts).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        down.try_acquire("k", &opts)
            .await
            .unwrap_err()
            .is_transient()
    );
}
