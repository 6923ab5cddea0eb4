//! Fenced writes on Redis, and fencing tokens that stay above every earlier token when Redis
//! loses its counters (a crash and restart without persistence of a private server).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockwise::backend::redis::RedisBackend;
use lockwise::postgres::Store;
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::{PgSchema, RedisNamespace, RedisServer};

const RESOURCE: &str = "report";
const KEY: &str = "report-lock";

async fn backend(url: &str, prefix: &str) -> RedisBackend {
    RedisBackend::builder(url)
        .prefix(prefix)
        .connect()
        .await
        .unwrap()
}

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(10))
}

#[tokio::test]
async fn fenced_set_rejects_older_tokens_and_accepts_equal_ones() {
    let ns = RedisNamespace::new("fence");
    let b = backend(ns.url(), ns.prefix()).await;
    b.fenced_set(RESOURCE, b"B", FencingToken::new(42))
        .await
        .unwrap();
    b.fenced_set(RESOURCE, b"B2", FencingToken::new(42))
        .await
        .unwrap();
    let err = b
        .fenced_set(RESOURCE, b"A", FencingToken::new(41))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::StaleToken { current: Some(c), .. } if c.get() == 42),
        "{err:?}"
    );
    // Compared as numbers, not as text: 100 > 99 although "100" < "99".
    b.fenced_set(RESOURCE, b"C", FencingToken::new(100))
        .await
        .unwrap();
    assert!(
        b.fenced_set(RESOURCE, b"D", FencingToken::new(99))
            .await
            .is_err()
    );
    let huge = FencingToken::new(u64::MAX);
    b.fenced_set(RESOURCE, b"E", huge).await.unwrap();
    assert!(
        b.fenced_set(RESOURCE, b"F", FencingToken::new(u64::MAX - 1))
            .await
            .is_err()
    );
    assert_eq!(
        b.fenced_get(RESOURCE).await.unwrap(),
        Some((b"E".to_vec(), huge))
    );
}

/// RELIABILITY R3/R14: holder A got token 4 and froze; Redis crashed and came back empty. The
/// next holders' tokens must still be above 4, so A's late writes are refused by both fences:
/// the PostgreSQL fence row (which survived) and the Redis fenced value (rewritten by B after
/// the restart).
#[tokio::test]
async fn after_a_restart_without_persistence_tokens_stay_above_every_earlier_token() {
    let mut server = RedisServer::start(&[]);
    let schema = PgSchema::new("redis_restart");
    let pool = sqlx::PgPool::connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let store = Store::with_schema(pool.clone(), schema.name()).unwrap();
    let b = backend(&server.url(), "lockwise").await;
    let locker = Locker::new(b.clone());
    let wait = opts().wait(Duration::from_secs(10));

    let mut before = Vec::new();
    for _ in 0..4 {
        let g = locker.acquire(KEY, &wait).await.unwrap();
        before.push(g.token());
        g.release().await.unwrap();
    }
    assert!(before.windows(2).all(|w| w[0] < w[1]), "{before:?}");
    let stale = *before.last().unwrap(); // A's token: A is frozen from here on

    let mut restarts = 0;
    let mut after = Vec::new();
    for _ in 0..3 {
        server.crash_and_restart();
        restarts += 1;
        // The restarted server is empty: every counter is gone.
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(
                &mut redis::Client::open(server.url())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap(),
            )
            .await
            .unwrap();
        assert!(keys.is_empty(), "{keys:?}");
        // B: the lock again, on the same client (it reconnects), and a fenced write.
        let g = locker.acquire(KEY, &wait).await.unwrap();
        after.push(g.token());
        fence(&pool, &store, g.token()).await.unwrap();
        b.fenced_set(RESOURCE, b"B", g.token()).await.unwrap();
        g.release().await.unwrap();

        // A wakes and writes with its old token: refused by both fences.
        let err = fence(&pool, &store, stale).await.unwrap_err();
        assert!(matches!(err, Error::StaleToken { .. }), "{err:?}");
        let err = b.fenced_set(RESOURCE, b"A", stale).await.unwrap_err();
        assert!(matches!(err, Error::StaleToken { .. }), "{err:?}");
    }
    assert_eq!(restarts, 3, "faults injected");
    let highest_before = before.iter().max().unwrap();
    assert!(
        after.iter().all(|t| t > highest_before),
        "a token after a restart is not above every earlier one: before {before:?}, after {after:?}"
    );
    assert!(after.windows(2).all(|w| w[0] < w[1]), "{after:?}");
    assert_eq!(
        b.fenced_get(RESOURCE).await.unwrap().unwrap().0,
        b"B".to_vec()
    );
}

/// A fenced write in its own transaction, committed when accepted; never left open, so that a
/// failing assertion cannot leave a lock that blocks the schema's clean-up.
async fn fence(pool: &sqlx::PgPool, store: &Store, token: FencingToken) -> lockwise::Result<()> {
    let mut tx = pool.begin().await?;
    let accepted = store.fence(&mut tx, RESOURCE, token).await;
    match accepted {
        Ok(()) => tx.commit().await?,
        Err(_) => tx.rollback().await?,
    }
    accepted
}

/// The documented floor: a missing counter starts at the server's clock in ms × 1024.
#[tokio::test]
async fn a_missing_counter_starts_at_the_server_clock_floor() {
    let ns = RedisNamespace::new("fence-floor");
    let b = backend(ns.url(), ns.prefix()).await;
    let locker = Locker::new(b.clone());
    let now_ms = || {
        u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap()
    };
    let start = now_ms();
    let g = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
    let first = g.token().get();
    g.release().await.unwrap();
    let end = now_ms();
    // Same machine, so the server's clock is ours (within a second of slack).
    assert!(
        first >= (start - 1_000) * 1024 && first <= (end + 1_000) * 1024,
        "{first} not within [{start}, {end}] ms × 1024"
    );
    let g = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
    assert!(g.token().get() > first);
    g.release().await.unwrap();
    // A counter above the clock (re-seeded, or from a fast key) counts up by one.
    let high = FencingToken::new((end + 3_600_000) * 1024);
    assert_eq!(b.reseed(KEY, high).await.unwrap(), high);
    let g = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
    assert_eq!(g.token().get(), high.get() + 1);
    g.release().await.unwrap();
    // Re-seeding never lowers the counter.
    assert_eq!(
        b.reseed(KEY, FencingToken::new(1)).await.unwrap().get(),
        high.get() + 1
    );
}
