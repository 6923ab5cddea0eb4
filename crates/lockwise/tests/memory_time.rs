//! The memory backend on paused Tokio time: expiry and the lost signal happen exactly at the
//! TTL, with no real waiting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::memory::MemoryBackend;
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
