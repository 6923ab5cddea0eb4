//! etcd under faults, on a private three-member cluster per test ([`EtcdCluster`]): the
//! leader killed under a holder and under waiters, a whole-cluster restart. Each test prints
//! its figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockwise::{LockOptions, Locker};
use lockwise_testkit::{EtcdCluster, unique};
use tokio::time::sleep;

async fn locker(cluster: &EtcdCluster, prefix: &str) -> Locker {
    Locker::connect(&cluster.url(prefix))
        .await
        .expect("a member of the private cluster answers")
}

/// The leader is killed while a holder holds (TTL 3 s, renewed every second): the holder
/// keeps its lock through the election (or its lost signal fires first), a contender is
/// refused meanwhile, and the next grant's token is above the holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_keeps_its_lock_through_the_leader_s_death() {
    let mut cluster = EtcdCluster::start(3);
    let prefix = unique("leader");
    let (a, b) = (
        locker(&cluster, &prefix).await,
        locker(&cluster, &prefix).await,
    );
    let held = a
        .try_acquire("k", &LockOptions::ttl(Duration::from_secs(3)))
        .await
        .unwrap()
        .expect("free");
    let leader = cluster.leader();
    let killed_at = Instant::now();
    cluster.kill(leader);
    let new_leader = cluster.leader();
    let elected = killed_at.elapsed();
    assert_ne!(new_leader, leader);
    // Through two renewals after the election.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if !held.is_lost() {
            let other = b
                .try_acquire("k", &LockOptions::ttl(Duration::from_secs(3)))
                .await;
            if let Ok(Some(g)) = other {
                panic!(
                    "a second holder (token {}) while the first was not lost",
                    g.token()
                );
            }
        }
        sleep(Duration::from_millis(100)).await;
    }
    let kept = !held.is_lost() && held.is_held().await.unwrap_or(false);
    let token = held.token();
    assert!(held.release().await.is_ok() || !kept);
    let next = b
        .acquire(
            "k",
            &LockOptions::ttl(Duration::from_secs(3)).wait(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert!(next.token() > token, "{} after {token}", next.token());
    eprintln!(
        "leader killed: a new leader in {elected:?}; the holder kept its lock: {kept}; \
         tokens {token} then {}",
        next.token()
    );
    assert!(kept, "the holder lost its lock to a leader's death");
}

/// The leader is killed while 8 waiters wait for a held lock: every waiter is granted in turn,
/// none twice, never two at once, with tokens that only grow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_each_granted_once_through_the_leader_s_death() {
    let mut cluster = EtcdCluster::start(3);
    let prefix = unique("waiters");
    let first = locker(&cluster, &prefix).await;
    let holder = first
        .try_acquire("k", &LockOptions::ttl(Duration::from_secs(3)))
        .await
        .unwrap()
        .expect("free");
    let inside = Arc::new(Mutex::new(0usize));
    let mut waiters = Vec::new();
    for n in 0..8 {
        let locker = locker(&cluster, &prefix).await;
        let inside = inside.clone();
        waiters.push(tokio::spawn(async move {
            let opts = LockOptions::ttl(Duration::from_secs(3)).wait(Duration::from_secs(60));
            let guard = locker.acquire("k", &opts).await.expect("granted in turn");
            {
                let mut now = inside.lock().unwrap();
                *now += 1;
                assert_eq!(*now, 1, "two holders at once");
            }
            sleep(Duration::from_millis(50)).await;
            *inside.lock().unwrap() -= 1;
            let token = guard.token().get();
            guard.release().await.unwrap();
            (n, token)
        }));
    }
    sleep(Duration::from_millis(500)).await;
    let leader = cluster.leader();
    let started = Instant::now();
    cluster.kill(leader);
    holder.release().await.ok();
    let mut tokens = Vec::new();
    let mut granted = HashSet::new();
    for waiter in waiters {
        let (n, token) = waiter.await.unwrap();
        assert!(granted.insert(n), "waiter {n} granted twice");
        tokens.push(token);
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 8, "every grant has a token of its own");
    eprintln!(
        "leader killed under 8 waiters: all 8 granted once in {:?}",
        started.elapsed()
    );
}

/// The whole cluster restarts: the tokens after it are above every token before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_keep_growing_across_a_whole_cluster_restart() {
    let mut cluster = EtcdCluster::start(3);
    let prefix = unique("restart");
    let before = {
        let a = locker(&cluster, &prefix).await;
        let mut last = 0;
        for _ in 0..5 {
            let g = a
                .try_acquire("k", &LockOptions::ttl(Duration::from_secs(2)))
                .await
                .unwrap()
                .expect("free");
            last = g.token().get();
            g.release().await.unwrap();
        }
        last
    };
    let restarting = Instant::now();
    cluster.restart_all();
    let back = restarting.elapsed();
    let a = locker(&cluster, &prefix).await;
    let g = a
        .acquire(
            "k",
            &LockOptions::ttl(Duration::from_secs(2)).wait(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert!(g.token().get() > before, "{} after {before}", g.token());
    eprintln!(
        "whole-cluster restart in {back:?}: token {before} before, {} after",
        g.token()
    );
}
