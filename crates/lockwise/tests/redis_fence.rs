//! Fenced writes on Redis, and recovery from a lost fencing counter (a Redis restart without
//! persistence), with the stale writer and the recovering writer in separate processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::RedisNamespace;

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

/// The child processes' side: `LOCKWISE_FENCE_ROLE` says which writer this process is.
#[tokio::test]
async fn child_role() {
    let Ok(role) = std::env::var("LOCKWISE_FENCE_ROLE") else {
        return; // run as a normal test: nothing to do
    };
    let url = std::env::var("LOCKWISE_FENCE_URL").unwrap();
    let prefix = std::env::var("LOCKWISE_FENCE_PREFIX").unwrap();
    let b = backend(&url, &prefix).await;
    match role.as_str() {
        // A holder that paused with an old token and now writes.
        "stale" => {
            let token: u64 = std::env::var("LOCKWISE_FENCE_TOKEN")
                .unwrap()
                .parse()
                .unwrap();
            match b
                .fenced_set(RESOURCE, b"stale", FencingToken::new(token))
                .await
            {
                Err(Error::StaleToken { current, .. }) => {
                    println!("RESULT rejected {}", current.unwrap())
                }
                other => println!("RESULT accepted {other:?}"),
            }
        }
        // A fresh holder after the counter was lost: refused, re-seeds, acquires again, writes.
        "recover" => {
            let locker = Locker::new(b.clone());
            let guard = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
            let first = guard.token();
            let current = match b.fenced_set(RESOURCE, b"recovered", first).await {
                Err(Error::StaleToken {
                    current: Some(c), ..
                }) => c,
                other => panic!("a reset counter must be refused first: {other:?}"),
            };
            guard.release().await.unwrap();
            b.reseed(KEY, current).await.unwrap();
            let guard = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
            b.fenced_set(RESOURCE, b"recovered", guard.token())
                .await
                .unwrap();
            println!("RESULT refused {first} then wrote {}", guard.token());
            guard.release().await.unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

fn run_role(ns: &RedisNamespace, role: &str, token: Option<u64>) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("LOCKWISE_FENCE_ROLE", role)
        .env("LOCKWISE_FENCE_URL", ns.url())
        .env("LOCKWISE_FENCE_PREFIX", ns.prefix());
    if let Some(t) = token {
        cmd.env("LOCKWISE_FENCE_TOKEN", t.to_string());
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{role}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.trim().to_owned()))
        .unwrap_or_else(|| panic!("{role} printed no result: {stdout}"))
}

#[tokio::test]
async fn a_lost_counter_never_lets_a_stale_write_through_and_writers_recover() {
    let ns = RedisNamespace::new("fence-reset");
    let b = backend(ns.url(), ns.prefix()).await;
    let locker = Locker::new(b.clone());
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let g = locker.try_acquire(KEY, &opts()).await.unwrap().unwrap();
        b.fenced_set(RESOURCE, format!("v{}", g.token()).as_bytes(), g.token())
            .await
            .unwrap();
        tokens.push(g.token().get());
        g.release().await.unwrap();
    }
    let highest = *tokens.last().unwrap();

    // Redis restarts without persistence: the counter is gone.
    let deleted: i64 = redis::cmd("DEL")
        .arg(b.fence_name(KEY))
        .query(&mut ns.conn())
        .unwrap();
    assert_eq!(deleted, 1);

    // A stale writer (an earlier grant) in another process: rejected.
    let stale = run_role(&ns, "stale", Some(tokens[1]));
    assert_eq!(stale, format!("rejected {highest}"));

    // A new holder in another process: refused with its reset token, re-seeds, writes.
    let recovered = run_role(&ns, "recover", None);
    let wrote: u64 = recovered.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(recovered.starts_with("refused 1 then wrote"), "{recovered}");
    assert!(wrote > highest, "{recovered}");
    assert_eq!(
        b.fenced_get(RESOURCE).await.unwrap(),
        Some((b"recovered".to_vec(), FencingToken::new(wrote)))
    );

    // And the stale writer is still refused after the recovery.
    assert_eq!(
        run_role(&ns, "stale", Some(highest)),
        format!("rejected {wrote}")
    );
    // Re-seeding never lowers the counter.
    assert_eq!(
        b.reseed(KEY, FencingToken::new(1)).await.unwrap().get(),
        wrote
    );
}
