//! PostgreSQL behind PgBouncer (Debian's 1.18, started privately per test). In transaction
//! pooling mode session advisory locks are refused at connect time with the ways out, while
//! the transaction tools (fences, `lock_xact`, `run_once`) work; in session mode session locks
//! work as they do directly. The queue's own suite runs through it in `tests/queue`.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::{Once, Store};
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::{PgBouncer, PgSchema, PoolMode};
use sqlx::postgres::PgPoolOptions;

#[tokio::test]
async fn session_locks_are_refused_behind_transaction_pooling_with_the_ways_out() {
    let bouncer = PgBouncer::start(PoolMode::Transaction);
    let url = bouncer.url_of(&lockwise_testkit::postgres_url());
    let refused = PostgresBackend::connect(&url).await.map(|_| ());
    let Err(Error::InvalidConfig { reason }) = refused else {
        panic!("a session lock behind transaction pooling must be refused: {refused:?}");
    };
    eprintln!("refused: {reason}");
    for named in ["per transaction", "lock_xact", "session-mode pool"] {
        assert!(reason.contains(named), "{named:?} missing from: {reason}");
    }
}

#[tokio::test]
async fn session_locks_work_behind_session_pooling() {
    let bouncer = PgBouncer::start(PoolMode::Session);
    let schema = PgSchema::new("bouncer_session");
    let url = bouncer.url_of(schema.url());
    let connect = |url: String, ns: String| async move {
        Locker::new(
            PostgresBackend::builder(url)
                .namespace(ns)
                .connect()
                .await
                .unwrap(),
        )
    };
    let a = connect(url.clone(), schema.name().to_owned()).await;
    let b = connect(url, schema.name().to_owned()).await;
    let opts = LockOptions::ttl(Duration::from_secs(5));
    let held = a.try_acquire("k", &opts).await.unwrap().unwrap();
    assert!(b.try_acquire("k", &opts).await.unwrap().is_none());
    assert!(held.release().await.unwrap());
    let next = b.try_acquire("k", &opts).await.unwrap().unwrap();
    assert!(next.token() > FencingToken::new(0));
    assert!(next.release().await.unwrap());
}

/// Fences, `lock_xact` and `run_once` through transaction pooling: several rounds on a pool of
/// 8 client connections over PgBouncer's own, with the caller's statements unnamed
/// (`persistent(false)`), as PgBouncer below 1.21 needs.
#[tokio::test]
async fn the_transaction_tools_work_behind_transaction_pooling() {
    let bouncer = PgBouncer::start(PoolMode::Transaction);
    let schema = PgSchema::new("bouncer_tools");
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&bouncer.url_of(schema.url()))
        .await
        .unwrap();
    let store = Store::with_schema(pool.clone(), schema.name()).unwrap();
    store.migrate().await.unwrap();
    let mut tokens = Vec::new();
    for round in 0..20 {
        let mut tx = pool.begin().await.unwrap();
        let lock = store
            .lock_xact(&mut tx, "report", Duration::from_secs(5))
            .await
            .unwrap()
            .expect("free");
        store.fence(&mut tx, "report", lock.token()).await.unwrap();
        sqlx::query("SELECT $1::int")
            .persistent(false)
            .bind(round)
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        tokens.push(lock.token());
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(
        store.fenced_token("report").await.unwrap(),
        tokens.last().copied()
    );
    // A lower token is refused in the server.
    let mut tx = pool.begin().await.unwrap();
    let stale = store.fence(&mut tx, "report", tokens[0]).await;
    assert!(matches!(stale, Err(Error::StaleToken { .. })), "{stale:?}");
    drop(tx);
    // A lock held in one transaction excludes another.
    let mut first = pool.begin().await.unwrap();
    let mut second = pool.begin().await.unwrap();
    assert!(
        store
            .lock_xact(&mut first, "busy", Duration::ZERO)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .lock_xact(&mut second, "busy", Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    drop((first, second));
    // Run once, then already done.
    for expected_first in [true, false] {
        let outcome = store
            .run_once("mail", "welcome-1", |tx| {
                Box::pin(async move {
                    sqlx::query("SELECT 1")
                        .persistent(false)
                        .execute(&mut **tx)
                        .await
                        .map_err(Error::from)?;
                    Ok::<_, Error>(())
                })
            })
            .await
            .unwrap();
        assert_eq!(matches!(outcome, Once::Done(())), expected_first);
    }
}

/// Pooling is found while other clients keep the proxy's servers busy: 20 connects of 20, under
/// 6 tasks sending statements through the same PgBouncer without a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_pooling_is_found_while_other_clients_are_busy() {
    let bouncer = PgBouncer::start(PoolMode::Transaction);
    let url = bouncer.url_of(&lockwise_testkit::postgres_url());
    let busy = PgPoolOptions::new()
        .max_connections(6)
        .connect(&url)
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let load: Vec<_> = (0..6)
        .map(|_| {
            let (busy, stop) = (busy.clone(), stop.clone());
            tokio::spawn(async move {
                let mut sent = 0u64;
                while !stop.is_cancelled() {
                    sqlx::raw_sql("SELECT pg_backend_pid()")
                        .execute(&busy)
                        .await
                        .unwrap();
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    let mut refused = 0;
    for _ in 0..20 {
        if let Err(Error::InvalidConfig { .. }) = PostgresBackend::connect(&url).await {
            refused += 1;
        }
    }
    stop.cancel();
    let mut sent = 0;
    for task in load {
        sent += task.await.unwrap();
    }
    eprintln!("{refused} of 20 connects found the pooling beside {sent} other statements");
    assert_eq!(refused, 20);
}
