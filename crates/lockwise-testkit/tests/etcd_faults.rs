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

/// The member a holder reaches through the testkit's proxy is cut off (a black hole: nothing
/// passes, nothing is refused) for 6 s, twice the TTL: the holder either keeps its lock
/// through the other members or its lost signal fires before any other client is granted,
/// and a contender that talks to the other members is refused while the holder holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_its_member_moves_to_another_or_stops() {
    use lockwise_testkit::proxy::TcpProxy;
    let cluster = EtcdCluster::start(3);
    let prefix = unique("cut");
    let port = |i: usize| -> u16 {
        cluster
            .endpoint(i)
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port")
    };
    let proxy = TcpProxy::start(port(0));
    let through_proxy = format!(
        "etcd://127.0.0.1:{},{},{}/{prefix}",
        proxy.port(),
        cluster.endpoint(1),
        cluster.endpoint(2)
    );
    let holder_locker = Locker::connect(&through_proxy).await.unwrap();
    let other = Locker::connect(&format!(
        "etcd://{},{}/{prefix}",
        cluster.endpoint(1),
        cluster.endpoint(2)
    ))
    .await
    .unwrap();
    let ttl = Duration::from_secs(3);
    let held = holder_locker
        .try_acquire("k", &LockOptions::ttl(ttl))
        .await
        .unwrap()
        .expect("free");
    let token = held.token();
    proxy.cut();
    let cut_at = Instant::now();
    let mut lost_after = None;
    let mut refused = 0;
    while cut_at.elapsed() < 2 * ttl {
        if held.is_lost() {
            lost_after.get_or_insert(cut_at.elapsed());
        }
        let contender = other.try_acquire("k", &LockOptions::ttl(ttl)).await;
        match contender {
            Ok(Some(g)) => {
                assert!(
                    held.is_lost(),
                    "a second holder (token {}) while the first was not lost",
                    g.token()
                );
                assert!(g.token() > token);
                g.release().await.unwrap();
                break;
            }
            Ok(None) => refused += 1,
            Err(e) => panic!("the other members answer: {e}"),
        }
        sleep(Duration::from_millis(100)).await;
    }
    let kept = !held.is_lost() && held.is_held().await.unwrap_or(false);
    eprintln!(
        "member cut off for {:?}: the holder kept its lock: {kept}; lost after {lost_after:?}; \
         a contender was refused {refused} times",
        cut_at.elapsed()
    );
    proxy.heal();
    if kept {
        assert!(held.release().await.unwrap());
    }
    assert!(kept, "the holder did not move to another member");
}
