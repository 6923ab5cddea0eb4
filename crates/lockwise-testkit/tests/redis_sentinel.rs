//! Redis behind Sentinel (a private group: primary, replica, three sentinels): locks and
//! fenced writes through `redis+sentinel://`, and a failover while a holder holds and waiters
//! wait: the lock follows the primary, every waiter is granted once, no stale fenced write is
//! accepted, and the overlap (two holders believing they hold) is measured and printed; and the
//! window a lagging replica opens, with and without `replicas(1)`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockwise::backend::redis::RedisBackend;
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::SentinelGroup;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_fenced_writes_through_the_sentinels() {
    let group = SentinelGroup::start();
    let backend = RedisBackend::connect(&group.url()).await.unwrap();
    let locker = Locker::new(backend.clone());
    let other = Locker::connect(&group.url()).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(5));
    let held = locker.try_acquire("k", &opts).await.unwrap().expect("free");
    assert!(other.try_acquire("k", &opts).await.unwrap().is_none());
    backend
        .fenced_set("res", b"one", held.token())
        .await
        .unwrap();
    held.extend(Duration::from_secs(10)).await.unwrap();
    let first = held.token();
    assert!(held.release().await.unwrap());
    let next = other.try_acquire("k", &opts).await.unwrap().expect("free");
    assert!(next.token() > first);
    assert!(matches!(
        backend.fenced_set("res", b"late", first).await,
        Ok(())
    ));
    backend
        .fenced_set("res", b"two", next.token())
        .await
        .unwrap();
    assert!(matches!(
        backend.fenced_set("res", b"stale", first).await,
        Err(Error::StaleToken { .. })
    ));
    assert!(next.release().await.unwrap());
}

/// A fenced write: when it was sent and answered, with which token, and whether it was taken.
#[derive(Debug, Clone, Copy)]
struct Write {
    sent: Instant,
    answered: Instant,
    token: FencingToken,
    accepted: bool,
}

/// One fenced write of `value` to the resource `res`, recorded when the resource answered.
async fn fenced_write(
    backend: &RedisBackend,
    writes: &Mutex<Vec<Write>>,
    value: &[u8],
    token: FencingToken,
) {
    let sent = Instant::now();
    let answer = backend.fenced_set("res", value, token).await;
    if let Ok(()) | Err(Error::StaleToken { .. }) = answer {
        writes.lock().unwrap().push(Write {
            sent,
            answered: Instant::now(),
            token,
            accepted: answer.is_ok(),
        });
    }
}

/// Writes that were accepted although a write with a higher token had been answered before
/// they were sent.
fn stale_accepted(writes: &[Write]) -> Vec<Write> {
    writes
        .iter()
        .filter(|w| w.accepted)
        .filter(|w| {
            writes
                .iter()
                .any(|o| o.accepted && o.token > w.token && o.answered < w.sent)
        })
        .copied()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_and_waiters_through_the_primary_s_death() {
    let mut group = SentinelGroup::start();
    let url = group.url();
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    // Who believed to hold, from when to when.
    let held: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
    let opts = LockOptions::ttl(Duration::from_secs(2));

    let backend = RedisBackend::connect(&url).await.unwrap();
    let holder = Locker::new(backend.clone());
    let guard = holder.try_acquire("k", &opts).await.unwrap().expect("free");
    let first_token = guard.token();
    let holding = {
        let (writes, held, backend) = (writes.clone(), held.clone(), backend.clone());
        tokio::spawn(async move {
            let since = Instant::now();
            let stop = since + Duration::from_secs(5);
            while Instant::now() < stop && !guard.is_lost() {
                fenced_write(&backend, &writes, b"holder", guard.token()).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let lost = guard.is_lost();
            held.lock()
                .unwrap()
                .push(("holder".into(), since, Instant::now()));
            let _ = guard.release().await;
            lost
        })
    };
    let mut waiting = Vec::new();
    for i in 0..4 {
        let backend = RedisBackend::connect(&url).await.unwrap();
        let (writes, held) = (writes.clone(), held.clone());
        let opts = opts.clone().wait(Duration::from_secs(40));
        waiting.push(tokio::spawn(async move {
            let locker = Locker::new(backend.clone());
            let guard = locker.acquire("k", &opts).await.unwrap();
            let since = Instant::now();
            fenced_write(&backend, &writes, b"waiter", guard.token()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            held.lock()
                .unwrap()
                .push((format!("waiter {i}"), since, Instant::now()));
            let token = guard.token();
            let _ = guard.release().await;
            token
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let promoted = tokio::task::spawn_blocking(move || {
        let took = group.kill_primary();
        (group, took)
    });
    let (group, took) = promoted.await.unwrap();
    let holder_lost = holding.await.unwrap();
    let mut tokens = Vec::new();
    for waiter in waiting {
        tokens.push(
            tokio::time::timeout(Duration::from_secs(60), waiter)
                .await
                .expect("every waiter is granted")
                .unwrap(),
        );
    }
    tokens.sort();
    tokens.dedup();
    assert_eq!(
        tokens.len(),
        4,
        "each waiter granted once, with its own token"
    );
    assert!(tokens.iter().all(|t| *t > first_token));

    let held = held.lock().unwrap().clone();
    let mut overlap = Duration::ZERO;
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            let from = a.1.max(b.1);
            let to = a.2.min(b.2);
            if to > from {
                overlap += to - from;
            }
        }
    }
    let writes = writes.lock().unwrap().clone();
    let stale = stale_accepted(&writes);
    let refused = writes.iter().filter(|w| !w.accepted).count();
    eprintln!(
        "primary killed; the sentinels promoted the replica in {took:?}; the holder {}; 4 \
         waiters granted; overlap of holders {overlap:?}; {} fenced writes, {refused} refused, \
         {} stale accepted",
        if holder_lost {
            "lost its lock"
        } else {
            "kept its lock"
        },
        writes.len(),
        stale.len()
    );
    assert!(stale.is_empty(), "stale writes accepted: {stale:?}");
    drop(group);
}

/// A graceful failover (`SENTINEL FAILOVER`, the replica caught up): the lock follows the
/// primary, and the holder keeps it through its renewals on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_follows_the_primary_through_a_graceful_failover() {
    let mut group = SentinelGroup::start();
    let url = group.url();
    let locker = Locker::connect(&url).await.unwrap();
    let other = Locker::connect(&url).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(3));
    let held = locker.try_acquire("k", &opts).await.unwrap().expect("free");
    let old = group.primary_port();
    let (group, took) = tokio::task::spawn_blocking(move || {
        let took = group.failover();
        (group, took)
    })
    .await
    .unwrap();
    assert_ne!(group.primary_port(), old);
    // Through at least one renewal on the new primary.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = !held.is_lost() && held.is_held().await.unwrap();
    let refused = other.try_acquire("k", &opts).await.unwrap().is_none();
    eprintln!(
        "graceful failover in {took:?}: the holder kept its lock: {kept}; a contender refused: {refused}"
    );
    assert!(kept, "the lock did not follow the primary");
    assert!(refused);
    held.extend(Duration::from_secs(5)).await.unwrap();
    assert!(held.release().await.unwrap());
}

/// `?replicas=1`: a grant waits for the replica. With the replica frozen, the grant is given
/// back and reported as a failure, and the lock is free; the cost of the wait is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_one_waits_for_the_replica_or_gives_the_grant_back() {
    let group = SentinelGroup::start();
    let plain = Locker::connect(&group.url()).await.unwrap();
    let waiting = Locker::connect(&format!("{}?replicas=1", group.url()))
        .await
        .unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(2));
    let mut rates = Vec::new();
    for locker in [&plain, &waiting] {
        let started = Instant::now();
        let mut cycles = 0u32;
        while started.elapsed() < Duration::from_millis(1_000) {
            let guard = locker.try_acquire("cost", &opts).await.unwrap().unwrap();
            assert!(guard.release().await.unwrap());
            cycles += 1;
        }
        rates.push(f64::from(cycles) / started.elapsed().as_secs_f64());
    }
    eprintln!(
        "acquire+release: {:.0}/s without replicas, {:.0}/s with replicas(1) ({:.2}x)",
        rates[0],
        rates[1],
        rates[1] / rates[0]
    );

    group.freeze_replica(true);
    let refused = waiting.try_acquire("k", &opts).await;
    group.freeze_replica(false);
    let Err(e) = refused else {
        panic!("granted without the replica: {refused:?}");
    };
    eprintln!("with the replica frozen: {e}");
    assert!(e.to_string().contains("0 of 1 replicas"), "{e}");
    let free = plain.try_acquire("k", &opts).await.unwrap();
    assert!(free.is_some(), "the unreplicated grant was given back");
}

/// The failover window, measured: with the replication link cut, a grant on the primary alone
/// is lost when the sentinels promote the replica. Another client is granted the lock at once,
/// with a higher token (the clock floor), while the first still believes it holds until its
/// next renewal finds the lock gone; its late fenced write is refused. With `replicas(1)` the
/// same grant is never given: the primary cannot get it to the replica, so it is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_loses_the_grants_the_replica_missed_unless_replicas_waits() {
    let mut group = SentinelGroup::start();
    let url = group.url();
    let ttl = Duration::from_secs(3);
    let opts = LockOptions::ttl(ttl);
    let a_backend = RedisBackend::connect(&url).await.unwrap();
    let a = Locker::new(a_backend.clone());
    let b_backend = RedisBackend::connect(&url).await.unwrap();
    let b = Locker::new(b_backend.clone());
    let waiting = Locker::connect(&format!("{url}?replicas=1")).await.unwrap();
    // A replicated history first: the replica knows a token of "k".
    let before = a.try_acquire("k", &opts).await.unwrap().expect("free");
    let replicated = before.token();
    assert!(before.release().await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;

    group.replication_link().cut();
    let refused = waiting.try_acquire("w", &opts).await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("0 of 1 replicas")),
        "replicas(1) granted without the replica: {refused:?}"
    );
    let held = a.try_acquire("k", &opts).await.unwrap().expect("free");
    let lost_token = held.token();
    a_backend.fenced_set("res", b"a", lost_token).await.unwrap();
    let killed = Instant::now();
    let promotion = tokio::task::block_in_place(|| group.kill_primary());

    // B: granted at once on the promoted replica, which never saw A's grant.
    let b_guard = loop {
        match b.try_acquire("k", &opts).await {
            Ok(Some(guard)) => break guard,
            Ok(None) => panic!("the promoted replica has A's unreplicated grant"),
            Err(_) if killed.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no grant after the failover: {e}"),
        }
    };
    let granted = Instant::now();
    assert!(
        b_guard.token() > lost_token && lost_token > replicated,
        "tokens {replicated} < {lost_token} < {}",
        b_guard.token()
    );
    b_backend
        .fenced_set("res", b"b", b_guard.token())
        .await
        .unwrap();
    // A finds out at its next renewal; until then two holders believe they hold.
    tokio::time::timeout(ttl * 2, held.lost())
        .await
        .expect("A's lost signal fires");
    let overlap = granted.elapsed();
    assert!(
        matches!(
            a_backend.fenced_set("res", b"a-late", lost_token).await,
            Err(Error::StaleToken { .. })
        ),
        "A's late write is refused"
    );
    eprintln!(
        "replication cut, primary killed: 1 of 1 unreplicated grant lost (0 of 1 with \
         replicas(1), refused up front); promotion {promotion:?}; B granted {:?} after the \
         kill with token {} > {lost_token}; overlap {overlap:?} until A's lost signal \
         (TTL {ttl:?}, renewals every TTL/3); A's late fenced write refused",
        granted - killed,
        b_guard.token()
    );
    assert!(overlap <= ttl, "the overlap is bounded by A's renewal");
    assert!(b_guard.release().await.unwrap());
}
