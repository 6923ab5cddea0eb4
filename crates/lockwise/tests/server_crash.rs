//! A database that crashes and comes back (PostgreSQL stopped `-m immediate`, MariaDB killed
//! with SIGKILL), on private servers on spare ports:
//!
//! - fencing tokens issued after the crash are above every token issued before it, even when
//!   the server is configured to lose its last commits in a crash (PostgreSQL
//!   `synchronous_commit = off`, MariaDB `innodb_flush_log_at_trx_commit = 0`);
//! - a fenced write with a token from before the crash is refused after a newer one;
//! - a holder learns at once that the crash took its lock (its session died with the server).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::mysql::MysqlBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::Store;
use lockwise::{FencingToken, LockOptions, Locker};
use lockwise_testkit::{MariaDbServer, PgServer};
use tokio::time::Instant;

const CRASHES: usize = 3;
/// Tokens issued between two crashes: more than PostgreSQL's sequence prefetch (32), so the
/// WAL record of a later prefetch is what a lost commit would lose.
const GRANTS: usize = 40;

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(30))
}

/// Issues `GRANTS` tokens for one key on `locker` and returns the highest.
async fn grant_many(locker: &Locker) -> FencingToken {
    let mut highest = None;
    for _ in 0..GRANTS {
        let guard = locker
            .try_acquire("crash", &opts())
            .await
            .unwrap()
            .expect("free");
        highest = highest.max(Some(guard.token()));
        guard.release().await.unwrap();
    }
    highest.unwrap()
}

/// After each crash, the first grant's token is above every earlier one.
async fn tokens_survive(connect: impl AsyncFn() -> Locker, mut crash: impl FnMut()) {
    let mut crashes = 0;
    let mut report = Vec::new();
    for _ in 0..CRASHES {
        let locker = connect().await;
        let before = grant_many(&locker).await;
        crash();
        crashes += 1;
        let locker = connect().await;
        let after = locker
            .try_acquire("crash", &opts())
            .await
            .unwrap()
            .expect("free");
        report.push(format!("{before} -> {}", after.token()));
        assert!(
            after.token() > before,
            "token {} after the crash, {before} before it",
            after.token()
        );
        after.release().await.unwrap();
    }
    assert_eq!(crashes, CRASHES, "too few crashes injected");
    println!("{crashes} crashes injected; highest token before -> first after: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_tokens_stay_above_every_earlier_token_after_a_crash() {
    let mut server = PgServer::start(&["synchronous_commit=off"]);
    let url = server.url();
    tokens_survive(
        async || Locker::new(PostgresBackend::connect(&url).await.unwrap()),
        || server.crash_and_restart(),
    )
    .await;
}

/// The default counter table, Aria without transactions, loses its unflushed updates (or is
/// repaired) in a crash: the clock floor keeps the tokens above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_tokens_stay_above_every_earlier_token_after_a_crash() {
    let mut server = MariaDbServer::start(&[]);
    let url = server.url();
    tokens_survive(
        async || Locker::new(MysqlBackend::connect(&url).await.unwrap()),
        || server.crash_and_restart(),
    )
    .await;
}

/// Durable counters in InnoDB, on a server that flushes its redo log once a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_durable_tokens_stay_above_every_earlier_token_after_a_crash() {
    let mut server = MariaDbServer::start(&["--innodb-flush-log-at-trx-commit=0"]);
    let url = server.url();
    let connect = || {
        MysqlBackend::builder(url.clone())
            .durable_tokens(true)
            .connect()
    };
    tokens_survive(
        async || Locker::new(connect().await.unwrap()),
        || server.crash_and_restart(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_from_before_a_postgres_crash_is_refused() {
    let mut server = PgServer::start(&["synchronous_commit=off"]);
    let url = server.url();
    let locker = Locker::new(PostgresBackend::connect(&url).await.unwrap());
    let old = locker
        .try_acquire("resource", &opts())
        .await
        .unwrap()
        .unwrap();
    let stale = old.token();
    drop(old);
    server.crash_and_restart();
    let locker = Locker::new(PostgresBackend::connect(&url).await.unwrap());
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let store = Store::new(pool.clone());
    let new = locker
        .try_acquire("resource", &opts())
        .await
        .unwrap()
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut tx, "resource", new.token()).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let refused = store.fence(&mut tx, "resource", stale).await;
    assert!(refused.is_err(), "the pre-crash token {stale} was accepted");
    println!(
        "pre-crash token {stale} refused after {} was accepted",
        new.token()
    );
}

/// The holder's session dies with the server: its lost signal fires at once, while the server
/// is still down (the loss check cannot reach it, the guard renews, the renewal finds its
/// session gone).
async fn crash_is_noticed<S>(
    server: &mut S,
    connect: impl AsyncFn(&S) -> Locker,
    crash: impl Fn(&mut S),
    restart: impl Fn(&mut S),
) {
    let holder = connect(server).await;
    let mut detections = Vec::new();
    for round in 0..CRASHES {
        let guard = holder
            .try_acquire(&format!("held-{round}"), &opts())
            .await
            .unwrap()
            .unwrap();
        crash(server);
        let crashed = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .expect("the holder never learned that the crash took its lock");
        let detection = crashed.elapsed();
        restart(server);
        let rival = connect(server).await;
        let granted = rival
            .try_acquire(&format!("held-{round}"), &opts())
            .await
            .unwrap()
            .expect("the lock is free after the crash");
        assert!(granted.token() > guard.token());
        detections.push(detection);
        assert!(
            detection < Duration::from_millis(100),
            "the holder learned of the crash {detection:?} after it"
        );
    }
    let ms: Vec<String> = detections
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect();
    println!(
        "{CRASHES} crashes injected; lost signal ms after the server died: [{}]",
        ms.join(", ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_crash_is_noticed_at_once() {
    let mut server = PgServer::start(&[]);
    crash_is_noticed(
        &mut server,
        async |s| Locker::new(PostgresBackend::connect(&s.url()).await.unwrap()),
        PgServer::crash,
        PgServer::restart,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mariadb_crash_is_noticed_at_once() {
    let mut server = MariaDbServer::start(&[]);
    crash_is_noticed(
        &mut server,
        async |s| Locker::new(MysqlBackend::connect(&s.url()).await.unwrap()),
        MariaDbServer::crash,
        MariaDbServer::restart,
    )
    .await;
}
