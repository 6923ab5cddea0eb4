//! What the Redis backend sends, counted by a private `redis-server` (`INFO commandstats`, which
//! no other test shares): a release announces itself only when someone listens, a lone caller
//! sends one script call per grant and per release, and the grants and releases of concurrent
//! tasks share script calls while each lock keeps its own owner and fencing token.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::{LockOptions, Locker, Retry};
use lockwise_testkit::RedisServer;
use tokio::time::{Instant, sleep, timeout};

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(30))
}

/// How many times the server ran `command` (from scripts too).
fn calls(server: &RedisServer, command: &str) -> u64 {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    let field = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&field))
        .map_or(0, |rest| {
            rest.split(',').next().unwrap().parse::<u64>().unwrap()
        })
}

fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut conn)
        .unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_publishes_only_when_someone_waits() {
    let server = RedisServer::start(&[]);
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locker = Locker::new(backend.clone());

    let alone = locker.try_acquire("alone", &opts()).await.unwrap().unwrap();
    assert!(alone.release().await.unwrap());
    assert_eq!(calls(&server, "publish"), 0, "a release nobody waits for");

    let held = locker
        .try_acquire("wanted", &opts())
        .await
        .unwrap()
        .unwrap();
    // A waiter of another process (its own connection) that does not poll: its retries come
    // after a minute and the holder's TTL is 30 s, so only the announcement can wake it
    // within its 5 s wait.
    let other = Locker::connect(&server.url()).await.unwrap();
    let waiter = tokio::spawn(async move {
        let opts = opts()
            .wait(Duration::from_secs(5))
            .retry(Retry::linear(Duration::from_secs(60)));
        let guard = other.acquire("wanted", &opts).await;
        (guard, Instant::now())
    });
    let channel = backend.channel_name("wanted");
    let listening = Instant::now();
    while subscribers(&server, &channel) == 0 {
        assert!(
            listening.elapsed() < Duration::from_secs(5),
            "no waiter listens"
        );
        sleep(Duration::from_millis(10)).await;
    }
    // Let the waiter's attempt after its subscription come back refused.
    sleep(Duration::from_millis(100)).await;
    let first = held.token();
    let released = Instant::now();
    assert!(held.release().await.unwrap());
    let (granted, at) = waiter.await.unwrap();
    let guard = granted.expect("the waiter was woken by the release");
    println!(
        "the waiter was granted {:?} after the release",
        at - released
    );
    assert!(at - released < Duration::from_secs(1));
    assert!(guard.token() > first);
    assert_eq!(calls(&server, "publish"), 1, "one release, one waiter");
    // Once the waiter has stopped listening, its own release is announced to nobody.
    let stopped = Instant::now();
    while subscribers(&server, &channel) > 0 {
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "still subscribed"
        );
        sleep(Duration::from_millis(10)).await;
    }
    assert!(guard.release().await.unwrap());
    assert_eq!(calls(&server, "publish"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_caller_sends_one_script_call_per_grant_and_release() {
    let server = RedisServer::start(&[]);
    let locker = Locker::connect(&server.url()).await.unwrap();
    // Load the scripts first (a first call may miss the script cache and be sent again).
    let warm = locker.try_acquire("k", &opts()).await.unwrap().unwrap();
    warm.release().await.unwrap();
    let before = calls(&server, "evalsha");
    for _ in 0..100 {
        let guard = locker.try_acquire("k", &opts()).await.unwrap().unwrap();
        assert!(guard.release().await.unwrap());
    }
    assert_eq!(calls(&server, "evalsha") - before, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_grants_share_script_calls_and_keep_their_own_tokens() {
    const TASKS: usize = 64;
    const CYCLES: usize = 50;
    let server = RedisServer::start(&[]);
    let locker = Locker::connect(&server.url()).await.unwrap();
    let warm = locker.try_acquire("k", &opts()).await.unwrap().unwrap();
    warm.release().await.unwrap();
    let before = calls(&server, "evalsha");
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let locker = locker.clone();
        tasks.spawn(async move {
            // Two tasks per key, so that a batch can carry two grants of one key.
            let key = format!("k{}", task / 2);
            let mut tokens = Vec::new();
            while tokens.len() < CYCLES {
                let opts = opts().fair(false);
                if let Some(guard) = locker.try_acquire(&key, &opts).await.unwrap() {
                    tokens.push(guard.token().get());
                    assert!(guard.release().await.unwrap());
                }
            }
            (key, tokens)
        });
    }
    let mut by_key: HashMap<String, Vec<u64>> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (key, tokens) = joined.unwrap();
        by_key.entry(key).or_default().extend(tokens);
    }
    let sent = calls(&server, "evalsha") - before;
    let grants = TASKS * CYCLES;
    println!("{grants} grants and as many releases in {sent} script calls");
    for (key, mut tokens) in by_key {
        let n = tokens.len();
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), n, "a token of {key} was issued twice");
    }
    // Refused attempts add calls; shared calls must still be far fewer than one per call.
    assert!(
        (sent as usize) < grants * 2,
        "{sent} script calls for {grants} grants and releases"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_while_queued_or_in_flight_leave_no_lock_behind() {
    const TASKS: usize = 64;
    let server = RedisServer::start(&[]);
    let locker = Locker::connect(&server.url()).await.unwrap();
    let mut dropped = 0;
    for round in 0..20u64 {
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..TASKS as u64 {
            let locker = locker.clone();
            // Cut off at 0 to ~600 µs: before, while and after its batch is sent.
            let cut = Duration::from_micros((task * 37 + round * 11) % 600);
            tasks.spawn(async move {
                let key = format!("d{task}");
                // A grant dropped in the round before may still be on its way back.
                match timeout(cut, locker.try_acquire(&key, &opts())).await {
                    Ok(Ok(Some(guard))) => {
                        assert!(guard.release().await.unwrap());
                        false
                    }
                    Ok(Ok(None)) => false,
                    Ok(Err(e)) => panic!("{e}"),
                    Err(_) => true,
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            dropped += usize::from(joined.unwrap());
        }
    }
    // The give-backs of dropped grants run in the background.
    sleep(Duration::from_millis(300)).await;
    let fresh = Locker::connect(&server.url()).await.unwrap();
    let mut left = Vec::new();
    for task in 0..TASKS {
        let key = format!("d{task}");
        match fresh.try_acquire(&key, &opts()).await.unwrap() {
            Some(guard) => drop(guard.release().await.unwrap()),
            None => left.push(key),
        }
    }
    println!("{dropped} of {} acquires dropped mid-way", 20 * TASKS);
    assert!(
        dropped > 0,
        "no acquire was cut off: the test proves nothing"
    );
    assert!(
        left.is_empty(),
        "locks left held by dropped acquires: {left:?}"
    );
}
