//! The conformance suite on a Redis Cluster (the shared one `scripts/services` starts, a key
//! prefix per test), and on a private three-master cluster a lock whose slot moves to another
//! master mid-hold: the holder keeps it or gets its lost signal, and never are two holders
//! granted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::{Error, LockOptions, Locker};
use lockwise_testkit::RedisCluster;
use lockwise_testkit::harness::RedisClusterHarness;

lockwise_testkit::conformance_tests!(RedisClusterHarness::new());

/// Fenced writes and the partition roster's names live in one slot each; a fenced write
/// works across masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_on_a_cluster() {
    let cluster = RedisCluster::start();
    let backend = RedisBackend::connect(&cluster.url()).await.unwrap();
    let locker = Locker::new(backend.clone());
    let opts = LockOptions::ttl(Duration::from_secs(5));
    for key in ["a", "b", "c", "d", "e", "f"] {
        let guard = locker.try_acquire(key, &opts).await.unwrap().expect("free");
        let first = guard.token();
        backend.fenced_set(key, b"v", first).await.unwrap();
        assert!(guard.release().await.unwrap());
        let next = locker.try_acquire(key, &opts).await.unwrap().expect("free");
        assert!(next.token() > first);
        backend.fenced_set(key, b"w", next.token()).await.unwrap();
        assert!(matches!(
            backend.fenced_set(key, b"late", first).await,
            Err(Error::StaleToken { .. })
        ));
        assert!(next.release().await.unwrap());
    }
}

/// The slot of a held lock is moved to another master (`SETSLOT … MIGRATING/IMPORTING`,
/// `MIGRATE`, `SETSLOT … NODE`): the holder keeps its lock through its renewals on the new
/// master (or gets its lost signal), a contender is refused, and the key's token keeps rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_whose_slot_moves_mid_hold_is_kept_or_lost_never_doubled() {
    let cluster = RedisCluster::start();
    let url = cluster.url();
    let holder = Locker::connect(&url).await.unwrap();
    let other = Locker::connect(&url).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(2));
    let held = holder
        .try_acquire("moving", &opts)
        .await
        .unwrap()
        .expect("free");
    let slot = cluster.slot("lockwise:{moving}");
    let from = cluster.owner(slot);
    let to = *cluster.ports().iter().find(|p| **p != from).unwrap();
    let moving = tokio::task::spawn_blocking(move || {
        cluster.move_slot(slot, from, to);
        cluster
    });
    let mut refused = 0;
    let mut second = None;
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < until {
        match other.try_acquire("moving", &opts).await {
            Ok(Some(guard)) => {
                second = Some(guard);
                break;
            }
            Ok(None) => refused += 1,
            Err(e) => eprintln!("during the move: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cluster = moving.await.unwrap();
    assert_eq!(cluster.owner(slot), to);
    let kept = !held.is_lost() && held.is_held().await.unwrap();
    eprintln!(
        "slot {slot} moved from {from} to {to} mid-hold: the holder kept its lock: {kept}; a \
         contender was refused {refused} times"
    );
    match second {
        Some(guard) => {
            assert!(held.is_lost(), "two holders at once");
            assert!(guard.token() > held.token());
        }
        None => assert!(kept || held.is_lost()),
    }
    assert!(kept, "the lock did not survive the slot's move");
}
