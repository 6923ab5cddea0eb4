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
