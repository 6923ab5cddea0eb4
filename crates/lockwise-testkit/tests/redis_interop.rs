//! `RedisBuilder::plain_protocol`: lockwise, redis-py's `Lock` (a Python process, from the
//! virtual environment `scripts/services` makes) and rslock contend for one bare key on the
//! shared Redis, many rounds each; a counter entered under the lock must never be above 1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockwise::backend::redis::RedisBackend;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::RedisNamespace;
use redis::AsyncCommands;

const ROUNDS: usize = 150;

const PYTHON_CLIENT: &str = r#"
import sys, time, redis
url, key, inside, violations, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
r = redis.Redis.from_url(url)
for _ in range(rounds):
    lock = r.lock(key, timeout=5, sleep=0.001, blocking_timeout=60)
    if not lock.acquire():
        sys.exit("redis-py: no lock within 60 s")
    if r.incr(inside) != 1:
        r.incr(violations)
    time.sleep(0.001)
    r.decr(inside)
    lock.release()
print(rounds)
"#;

fn python() -> String {
    let venv =
        std::env::var("LOCKWISE_PY_VENV").unwrap_or_else(|_| "/var/lib/lockwise/venv".into());
    let python = format!("{venv}/bin/python");
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} is missing: run scripts/services (it installs redis-py there)"
    );
    python
}

/// Enters the section guarded by the lock: the counter must go from 0 to 1.
async fn enter(conn: &mut redis::aio::MultiplexedConnection, inside: &str, violations: &str) {
    let n: i64 = conn.incr(inside, 1).await.unwrap();
    if n != 1 {
        let _: i64 = conn.incr(violations, 1).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let _: i64 = conn.decr(inside, 1).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockwise_redis_py_and_rslock_exclude_each_other_on_one_key() {
    let ns = RedisNamespace::new("interop");
    let key = format!("{}:shared", ns.prefix());
    let inside = format!("{}:inside", ns.prefix());
    let violations = format!("{}:violations", ns.prefix());
    let started = Instant::now();

    let py = Command::new(python())
        .args(["-c", PYTHON_CLIENT, ns.url(), &key, &inside, &violations])
        .arg(ROUNDS.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    let lockwise_side = {
        let (url, prefix) = (ns.url().to_owned(), ns.prefix().to_owned());
        let (key, inside, violations) = (key.clone(), inside.clone(), violations.clone());
        tokio::spawn(async move {
            let backend = RedisBackend::builder(&url)
                .prefix(prefix)
                .plain_protocol()
                .connect()
                .await
                .unwrap();
            let locker = Locker::new(backend);
            let mut conn = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let opts = LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_secs(60));
            for _ in 0..ROUNDS {
                let guard = locker.acquire(&key, &opts).await.unwrap();
                enter(&mut conn, &inside, &violations).await;
                assert!(guard.release().await.unwrap());
            }
        })
    };

    let rslock_side = {
        let url = ns.url().to_owned();
        let (key, inside, violations) = (key.clone(), inside.clone(), violations.clone());
        tokio::spawn(async move {
            let manager = rslock::LockManager::new(vec![url.clone()]);
            let mut conn = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            for _ in 0..ROUNDS {
                let until = Instant::now() + Duration::from_secs(60);
                let lock = loop {
                    match manager.lock(key.as_bytes(), Duration::from_secs(5)).await {
                        Ok(lock) => break lock,
                        Err(_) if Instant::now() < until => {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        Err(e) => panic!("rslock: no lock within 60 s: {e:?}"),
                    }
                };
                enter(&mut conn, &inside, &violations).await;
                manager.unlock(&lock).await;
            }
        })
    };

    lockwise_side.await.unwrap();
    rslock_side.await.unwrap();
    let python_done = tokio::task::spawn_blocking(move || py.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(python_done.status.success(), "redis-py's side failed");
    let mut conn = ns.conn();
    let broken: Option<i64> = redis::cmd("GET").arg(&violations).query(&mut conn).unwrap();
    eprintln!(
        "{} rounds each of lockwise (plain protocol), redis-py's Lock and rslock on one key in \
         {:?}: {} times two were inside at once",
        ROUNDS,
        started.elapsed(),
        broken.unwrap_or(0)
    );
    assert_eq!(broken.unwrap_or(0), 0, "mutual exclusion broke");
}
