//! The memory backend on paused Tokio time: expiry and the lost signal happen exactly at the
//! TTL, with no real waiting.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::memory::MemoryBackend;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::flaky::{FlakyBackend, Op};
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

#[tokio::test(start_paused = true)]
async fn acquire_waits_out_a_restarting_backend() {
    // Fails the first 3 acquire attempts with a transport error, like a restarting server.
    let restarting = FlakyBackend::new(MemoryBackend::new());
    restarting.fail_next(Op::TryAcquire, 3);
    let locker = Locker::new(restarting);
    let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(30));
    let guard = locker
        .acquire("k", &opts)
        .await
        .expect("acquired after 3 failures");
    assert_eq!(guard.token().get(), 1);

    // When the wait ends on a failure, that failure is reported, not a timeout.
    let down = FlakyBackend::new(MemoryBackend::new());
    down.fail_next(Op::TryAcquire, u32::MAX);
    let down = Locker::new(down);
    let err = down.acquire("k", &opts).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(
        down.try_acquire("k", &opts)
            .await
            .unwrap_err()
            .is_transient()
    );
}

/// RELIABILITY R18: every renewal's reply takes 2/5 of the TTL (a one-way delay of TTL/5 each
/// way). Each reply still arrives well before the deadline, so the lease must be kept: a
/// renewal stays in flight until the deadline instead of being abandoned before its answer.
#[tokio::test(start_paused = true)]
async fn renewal_keeps_the_lease_when_replies_take_two_fifths_of_the_ttl() {
    let flaky = FlakyBackend::new(MemoryBackend::new());
    let locker = Locker::new(flaky.clone());
    let guard = locker
        .try_acquire("k", &LockOptions::ttl(Duration::from_secs(1)))
        .await
        .unwrap()
        .unwrap();
    flaky.delay_replies(Op::Extend, Duration::from_millis(400));
    guard
        .run(tokio::time::sleep(Duration::from_secs(60)))
        .await
        .expect("the lease is kept: every reply arrived before the deadline");
    assert!(guard.is_held().await.unwrap());
    assert!(guard.release().await.unwrap());
}
