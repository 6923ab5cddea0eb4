//! The conformance suite on etcd (the shared member scripts/services starts), one test per
//! case, and the session leases that etcd's locks share. Sub-second TTLs: nextest runs them one
//! at a time (`.config/nextest.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::etcd::{EtcdBackend, lock_name};
use lockwise::url::EtcdUrl;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::harness::EtcdHarness;

lockwise_testkit::conformance_tests!(EtcdHarness::new());

/// A raw client on the harness's etcd, and the stored name of `key`.
async fn raw(h: &EtcdHarness, key: &str) -> (etcd_client::Client, String) {
    let url = EtcdUrl::parse(h.url()).unwrap();
    let client = etcd_client::Client::connect(url.endpoints.clone(), None)
        .await
        .unwrap();
    (client, lock_name(&url.prefix, key))
}

/// The lease of `name`, and its remaining TTL in seconds.
async fn lease_of(client: &mut etcd_client::Client, name: &str) -> (i64, i64) {
    let got = client.get(name, None).await.unwrap();
    let lease = got.kvs().first().expect("the key exists").lease();
    let ttl = client.lease_time_to_live(lease, None).await.unwrap().ttl();
    (lease, ttl)
}

/// Two locks of one TTL class share a lease; a lock extended to another class moves to that
/// class's lease, keeping its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_one_ttl_share_a_lease_and_an_extend_moves_between_them() {
    let h = EtcdHarness::new();
    let locker = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let opts = LockOptions::ttl(Duration::from_secs(5));
    let a = locker.try_acquire("a", &opts).await.unwrap().unwrap();
    let b = locker.try_acquire("b", &opts).await.unwrap().unwrap();
    let (mut client, name_a) = raw(&h, "a").await;
    let (_, name_b) = raw(&h, "b").await;
    let (lease_a, ttl_a) = lease_of(&mut client, &name_a).await;
    let (lease_b, _) = lease_of(&mut client, &name_b).await;
    assert_eq!(lease_a, lease_b, "one session lease per TTL class");
    assert!(
        (5..=6).contains(&ttl_a),
        "a 5 s lock on a 6 s lease: {ttl_a}"
    );
    let token = a.token();
    a.extend(Duration::from_secs(60)).await.unwrap();
    let (moved, ttl) = lease_of(&mut client, &name_a).await;
    assert_ne!(moved, lease_b, "extended to 60 s: another lease");
    assert!(ttl >= 59, "{ttl}");
    assert!(a.is_held().await.unwrap());
    assert_eq!(a.token(), token);
    assert!(a.release().await.unwrap());
    assert!(b.release().await.unwrap());
    assert_eq!(client.get(name_a, None).await.unwrap().count(), 0);
}

/// The session lease revoked behind the backend's back (an operator, a lost lease): its locks
/// are lost at once, and the next acquire is granted on a new lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lease_revoked_loses_its_locks_and_the_next_grant_takes_a_new_one() {
    let h = EtcdHarness::new();
    let locker = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let opts = LockOptions::ttl(Duration::from_secs(5));
    let held = locker.try_acquire("k", &opts).await.unwrap().unwrap();
    let (mut client, name) = raw(&h, "k").await;
    let (lease, _) = lease_of(&mut client, &name).await;
    client.lease_revoke(lease).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), held.lost())
        .await
        .expect("the lost signal within 2 s");
    drop(held);
    let again = locker.try_acquire("k", &opts).await.unwrap().expect("free");
    let (renewed, _) = lease_of(&mut client, &name).await;
    assert_ne!(renewed, lease);
    assert!(again.release().await.unwrap());
}

/// A lock that nobody renews ends with its session lease: within the lease's whole seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lock_ends_with_its_session() {
    let h = EtcdHarness::new();
    let a = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let b = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let opts = LockOptions::ttl(Duration::from_millis(400)).renew(false);
    let held = a.try_acquire("k", &opts).await.unwrap().unwrap();
    let started = std::time::Instant::now();
    let wait = LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_secs(5));
    let next = b.acquire("k", &wait).await.unwrap();
    let took = started.elapsed();
    eprintln!("a 400 ms lock without renewal was taken over after {took:?}");
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_millis(2_000), "{took:?}");
    assert!(next.token() > held.token());
    assert!(next.release().await.unwrap());
}

/// The number of waiter keys in the line of lock `key`.
async fn waiters(h: &EtcdHarness, key: &str) -> i64 {
    let url = EtcdUrl::parse(h.url()).unwrap();
    let mut client = etcd_client::Client::connect(url.endpoints.clone(), None)
        .await
        .unwrap();
    let mut prefix = format!("{}wait/{key}", url.prefix).into_bytes();
    prefix.push(0);
    let options = etcd_client::GetOptions::new()
        .with_prefix()
        .with_count_only();
    client.get(prefix, Some(options)).await.unwrap().count()
}

/// Waiters of separate backends (separate processes, as far as etcd can tell) are granted in
/// the order they started waiting, and leave no waiter key behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_separate_backends_are_granted_in_the_order_they_came() {
    let h = EtcdHarness::new();
    let opts = LockOptions::ttl(Duration::from_secs(5));
    let holder = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let held = holder.try_acquire("line", &opts).await.unwrap().unwrap();
    let granted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    for i in 0..6 {
        let locker = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
        let granted = granted.clone();
        let opts = opts.clone().wait(Duration::from_secs(20));
        waiting.push(tokio::spawn(async move {
            let guard = locker.acquire("line", &opts).await.unwrap();
            granted.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(guard.release().await.unwrap());
        }));
        // Each waiter joins the line before the next one comes.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(waiters(&h, "line").await, 6);
    let released = std::time::Instant::now();
    assert!(held.release().await.unwrap());
    for waiter in waiting {
        waiter.await.unwrap();
    }
    let order = granted.lock().unwrap().clone();
    eprintln!(
        "6 waiters of 6 backends granted in the order {order:?} within {:?}",
        released.elapsed()
    );
    assert_eq!(
        order,
        (0..6).collect::<Vec<_>>(),
        "first come, first served"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(waiters(&h, "line").await, 0, "no waiter key left");
}

/// A waiter that gives up leaves the line at once, and one whose process dies (its runtime
/// gone, nothing sent) leaves it when its waiter lease ends: the next waiter is not stuck
/// behind either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_or_die_leave_the_line() {
    let h = EtcdHarness::new();
    let opts = LockOptions::ttl(Duration::from_secs(10));
    let holder = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let held = holder.try_acquire("left", &opts).await.unwrap().unwrap();
    let quitter = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let gave_up = quitter
        .acquire("left", &opts.clone().wait(Duration::from_millis(500)))
        .await;
    assert!(matches!(gave_up, Err(lockwise::Error::WaitTimeout { .. })));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(waiters(&h, "left").await, 0, "the quitter's key is gone");

    // A waiter on its own runtime, which is then shut down: its task dies without a word.
    let url = h.url().to_owned();
    let waiting_opts = opts.clone().wait(Duration::from_secs(60));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let locker = Locker::new(EtcdBackend::connect(&url).await.unwrap());
            let acquiring = locker.acquire("left", &waiting_opts);
            let _ = tokio::time::timeout(Duration::from_millis(500), acquiring).await;
        });
        runtime.shutdown_background();
    });
    let dead_at = std::time::Instant::now();
    let next = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let mut gone = None;
    while dead_at.elapsed() < Duration::from_secs(6) {
        if waiters(&h, "left").await == 0 && dead_at.elapsed() > Duration::from_millis(600) {
            gone = Some(dead_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("a dead waiter's key was gone after {gone:?}");
    assert!(gone.is_some(), "the dead waiter's key outlived its lease");
    let taking = tokio::spawn(async move {
        next.acquire(
            "left",
            &LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_secs(5)),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(held.release().await.unwrap());
    let next = taking.await.unwrap().expect("the next waiter is not stuck");
    assert!(next.release().await.unwrap());
}

/// Acquires dropped at every point of joining the line (before, during and after the waiter
/// key's put) leave no waiter key behind for longer than a waiter lease, even while their
/// process lives on and keeps its locks' lease alive: nobody waits behind a waiter that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_while_joining_the_line_leave_no_waiter_behind() {
    let h = EtcdHarness::new();
    let holder = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let held = holder
        .try_acquire("dropped", &LockOptions::ttl(Duration::from_secs(20)))
        .await
        .unwrap()
        .unwrap();
    let locker = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    // A lock of the waiters' TTL class, renewed throughout: the process lives on.
    let keeper = locker
        .try_acquire("keeper", &LockOptions::ttl(Duration::from_secs(2)))
        .await
        .unwrap()
        .unwrap();
    let kept = tokio::spawn(async move {
        keeper
            .run(tokio::time::sleep(Duration::from_secs(30)))
            .await
            .unwrap();
    });
    let opts = LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_secs(20));
    for i in 0..80u64 {
        let dropped = tokio::time::timeout(
            Duration::from_micros(i * 75),
            locker.acquire("dropped", &opts),
        )
        .await;
        assert!(dropped.is_err(), "the lock is held");
    }
    let dropped_at = std::time::Instant::now();
    let mut left = waiters(&h, "dropped").await;
    while left > 0 && dropped_at.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = waiters(&h, "dropped").await;
    }
    eprintln!(
        "80 dropped acquires: {left} waiter keys left after {:?}",
        dropped_at.elapsed()
    );
    assert_eq!(left, 0, "a dropped acquire's waiter key outlived its lease");
    // The next waiter is granted at the release, not stuck behind a ghost.
    let next = Locker::new(EtcdBackend::connect(h.url()).await.unwrap());
    let taking = tokio::spawn(async move {
        next.acquire(
            "dropped",
            &LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_secs(5)),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(held.release().await.unwrap());
    let next = taking.await.unwrap().expect("the next waiter is not stuck");
    assert!(next.release().await.unwrap());
    kept.abort();
}
