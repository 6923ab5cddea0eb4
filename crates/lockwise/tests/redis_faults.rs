//! Redis-specific faults, each on a private `redis-server` so the shared one is never touched:
//! TLS, authentication, a server of another kind, dropped connections, lost subscriptions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::{Error, LockOptions, Locker, Retry};
use lockwise_testkit::{NotRedis, RedisServer, closed_port};
use tokio::time::{Instant, sleep, timeout};

const MS: Duration = Duration::from_millis(1);

fn opts(ms: u64) -> LockOptions {
    LockOptions::ttl(Duration::from_millis(ms))
}

fn kill_clients(server: &RedisServer, kind: &str) -> i64 {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .query(&mut conn)
        .unwrap()
}

#[tokio::test]
async fn rediss_with_a_trusted_root_certificate() {
    let (server, ca) = RedisServer::start_tls();
    let pem = std::fs::read(&ca).unwrap();
    let backend = RedisBackend::builder(server.url())
        .tls_root_cert(pem)
        .connect()
        .await
        .unwrap();
    let locker = Locker::new(backend);
    let guard = locker
        .try_acquire("tls", &opts(5_000))
        .await
        .unwrap()
        .unwrap();
    // A fresh server's first token: its clock in Unix ms × 1024 (lua/acquire.lua).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let token = guard.token().get();
    assert!(
        token > (now_ms - 60_000) * 1024 && token <= (now_ms + 1_000) * 1024,
        "{token}"
    );
    assert!(guard.release().await.unwrap());

    // The same server without trusting its CA: a typed backend error, not a hang.
    let start = Instant::now();
    let err = RedisBackend::connect(&server.url()).await.unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    assert!(start.elapsed() < 5_000 * MS);
}

#[tokio::test]
async fn wrong_password_is_a_backend_error_that_never_shows_the_password() {
    let server = RedisServer::start(&["--requirepass", "the-right-one"]);
    let url = format!("redis://:wrong-secret-123@127.0.0.1:{}/", server.port());
    let err = RedisBackend::connect(&url).await.unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err:?}");
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("wrong-secret-123"), "{shown}");
    }
    let builder = RedisBackend::builder(url);
    assert!(!format!("{builder:?}").contains("wrong-secret-123"));

    let good = format!("redis://:the-right-one@127.0.0.1:{}/", server.port());
    let backend = RedisBackend::connect(&good).await.unwrap();
    assert!(!format!("{backend:?}").contains("the-right-one"));
    let locker = Locker::new(backend);
    assert!(
        locker
            .try_acquire("k", &opts(1_000))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn unreachable_or_foreign_servers_fail_within_5s() {
    let not_redis = NotRedis::start();
    let silent = NotRedis::silent();
    for url in [
        format!("redis://127.0.0.1:{}/", silent.port()),
        format!("redis://127.0.0.1:{}/", closed_port()),
        format!("redis://127.0.0.1:{}/", not_redis.port()),
        format!("rediss://127.0.0.1:{}/", not_redis.port()),
    ] {
        let start = Instant::now();
        let err = Locker::connect(&url).await.unwrap_err();
        assert!(err.is_transient(), "{url}: {err:?}");
        assert!(start.elapsed() < 5_000 * MS, "{url}: {:?}", start.elapsed());
    }
}

#[tokio::test]
async fn the_shared_connection_reconnects_after_a_drop() {
    let server = RedisServer::start(&[]);
    let locker = Locker::connect(&server.url()).await.unwrap();
    let first = locker
        .try_acquire("k", &opts(5_000))
        .await
        .unwrap()
        .unwrap();
    assert!(kill_clients(&server, "normal") >= 1);
    // The next call may see the drop; within a second the connection is back.
    let deadline = Instant::now() + 2_000 * MS;
    let second = loop {
        match locker.try_acquire("other", &opts(5_000)).await {
            Ok(Some(g)) => break g,
            Ok(None) => panic!("'other' is free"),
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_transient(), "{e:?}");
                sleep(50 * MS).await;
            }
            Err(e) => panic!("no reconnect: {e:?}"),
        }
    };
    assert!(
        first.is_held().await.unwrap(),
        "the lock survived the client's reconnect"
    );
    let first_token = first.token();
    assert!(first.release().await.unwrap());
    let again = locker
        .try_acquire("k", &opts(5_000))
        .await
        .unwrap()
        .unwrap();
    assert!(again.token() > first_token);
    assert!(second.release().await.unwrap() && again.release().await.unwrap());
}

#[tokio::test]
async fn waiters_resubscribe_after_their_pubsub_connection_drops() {
    let server = RedisServer::start(&[]);
    let holder = Locker::connect(&server.url()).await.unwrap();
    let waiter = Locker::connect(&server.url()).await.unwrap();
    let held = holder
        .try_acquire("k", &opts(30_000))
        .await
        .unwrap()
        .unwrap();
    let wait = opts(5_000)
        .retry(Retry::linear(10_000 * MS))
        .wait(20_000 * MS);
    let task = tokio::spawn(async move {
        let g = waiter.acquire("k", &wait).await;
        (Instant::now(), g)
    });
    sleep(300 * MS).await;
    assert!(
        kill_clients(&server, "pubsub") >= 1,
        "the waiter had a pub/sub connection"
    );
    sleep(700 * MS).await; // reconnect and resubscribe
    let released_at = Instant::now();
    assert!(held.release().await.unwrap());
    let (at, guard) = timeout(5_000 * MS, task).await.expect("woken").unwrap();
    let latency = at - released_at;
    assert!(
        latency < 150 * MS,
        "woke {latency:?} after the release: the subscription was lost"
    );
    assert!(guard.unwrap().release().await.unwrap());
}
