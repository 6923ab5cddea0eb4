//! The PostgreSQL tools that work inside the caller's transaction: transaction-scoped locks,
//! fenced writes, run-once effects. Each test works in a schema of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::{Once, Store, check_fenced};
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::PgSchema;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

async fn setup() -> (PgSchema, PgPool, Store) {
    let schema = PgSchema::new("store");
    let pool = PgPoolOptions::new()
        .max_connections(12)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let store = Store::with_schema(pool.clone(), schema.name()).unwrap();
    store.migrate().await.unwrap();
    (schema, pool, store)
}

fn key(schema: &PgSchema, k: &str) -> String {
    format!("{}:{k}", schema.name())
}

#[tokio::test]
async fn a_transaction_lock_is_released_by_commit_and_by_rollback() {
    let (schema, pool, store) = setup().await;
    let k = key(&schema, "invoice");
    let mut tx1 = pool.begin().await.unwrap();
    let lock = store
        .lock_xact(&mut tx1, &k, Duration::ZERO)
        .await
        .unwrap()
        .expect("free");
    let mut tx2 = pool.begin().await.unwrap();
    let start = std::time::Instant::now();
    let none = store
        .lock_xact(&mut tx2, &k, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(none.is_none(), "held by tx1");
    assert!(start.elapsed() >= Duration::from_millis(290));
    // Not obtaining it did not abort tx2.
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut *tx2)
        .await
        .unwrap();
    assert_eq!(one, 1);

    tx1.rollback().await.unwrap();
    let second = store
        .lock_xact(&mut tx2, &k, Duration::ZERO)
        .await
        .unwrap()
        .expect("rollback released it");
    assert!(
        second.token() > lock.token(),
        "a rollback never reissues a token"
    );
    tx2.commit().await.unwrap();

    let mut tx3 = pool.begin().await.unwrap();
    let third = store
        .lock_xact(&mut tx3, &k, Duration::ZERO)
        .await
        .unwrap()
        .expect("commit released it");
    assert!(third.token() > second.token());
    tx3.commit().await.unwrap();
}

#[tokio::test]
async fn a_waiting_transaction_lock_gets_it_when_the_holder_commits() {
    let (schema, pool, store) = setup().await;
    let k = key(&schema, "w");
    let mut tx1 = pool.begin().await.unwrap();
    let _held = store
        .lock_xact(&mut tx1, &k, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let waiter = {
        let (pool, store, k) = (pool.clone(), store.clone(), k.clone());
        tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            let got = store
                .lock_xact(&mut tx, &k, Duration::from_secs(5))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            got.is_some()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    tx1.commit().await.unwrap();
    assert!(
        waiter.await.unwrap(),
        "the waiter got the lock after the commit"
    );
}

#[tokio::test]
async fn transaction_and_session_locks_on_one_key_exclude_each_other() {
    let (schema, pool, store) = setup().await;
    let backend = PostgresBackend::builder(schema.url())
        .schema(schema.name())
        .namespace("tenant")
        .connect()
        .await
        .unwrap();
    let store = store.namespace("tenant");
    let locker = Locker::new(backend);
    let k = key(&schema, "both");
    let session = locker
        .try_acquire(&k, &LockOptions::ttl(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    assert!(
        store
            .lock_xact(&mut tx, &k, Duration::ZERO)
            .await
            .unwrap()
            .is_none()
    );
    let session_token = session.token();
    assert!(session.release().await.unwrap());
    let xact = store
        .lock_xact(&mut tx, &k, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(xact.token() > session_token, "one sequence for both scopes");
    assert!(
        locker
            .try_acquire(&k, &LockOptions::ttl(Duration::from_secs(10)))
            .await
            .unwrap()
            .is_none()
    );
    tx.commit().await.unwrap();
}

/// Two holders, the older writes last: rejected in the server, and the data is the newer's.
#[tokio::test]
async fn a_stale_fenced_write_is_rejected_and_aborts_the_transaction() {
    let (_schema, pool, store) = setup().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {}.report (id int PRIMARY KEY, body text)",
        _schema.name()
    )))
    .execute(&pool)
    .await
    .unwrap();
    let table = format!("{}.report", _schema.name());
    let (older, newer) = (FencingToken::new(41), FencingToken::new(42));

    // The newer holder writes first.
    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut tx, "report-1", newer).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} VALUES (1, 'B')"
    )))
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    // The older holder wakes up and writes: rejected.
    let mut tx = pool.begin().await.unwrap();
    let err = store.fence(&mut tx, "report-1", older).await.unwrap_err();
    match err {
        Error::StaleToken {
            presented, current, ..
        } => {
            assert_eq!(presented, older);
            assert_eq!(current, Some(newer));
        }
        other => panic!("{other:?}"),
    }
    // Even a caller that ignores the error cannot write: the transaction is aborted.
    let ignored = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET body = 'A' WHERE id = 1"
    )))
    .execute(&mut *tx)
    .await;
    assert!(
        ignored.is_err(),
        "the aborted transaction refused the write"
    );
    drop(tx); // rolled back

    let body: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT body FROM {table} WHERE id = 1"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(body, "B", "the stored data is the newer holder's");
    assert_eq!(store.fenced_token("report-1").await.unwrap(), Some(newer));

    // The same token may write again (one grant, many writes).
    let mut tx = pool.begin().await.unwrap();
    store.fence(&mut tx, "report-1", newer).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn the_column_pattern_rejects_an_older_token() {
    let (schema, pool, _store) = setup().await;
    let table = format!("{}.doc", schema.name());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (id int PRIMARY KEY, body text, fencing_token bigint NOT NULL DEFAULT 0)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} (id, body) VALUES (1, '')"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let update = format!(
        "UPDATE {table} SET body = $1, fencing_token = $2 WHERE id = 1 AND fencing_token <= $2"
    );
    for (body, token, accepted) in [("B", 42u64, true), ("B2", 42, true), ("A", 41, false)] {
        let done = sqlx::query(sqlx::AssertSqlSafe(update.clone()))
            .bind(body)
            .bind(token as i64)
            .execute(&pool)
            .await
            .unwrap();
        let checked = check_fenced(&done, "doc/1", FencingToken::new(token));
        assert_eq!(checked.is_ok(), accepted, "{body} with {token}");
    }
    let body: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT body FROM {table}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(body, "B2");
}

/// Eight concurrent duplicates: exactly one effect.
#[tokio::test]
async fn run_once_runs_eight_concurrent_duplicates_exactly_once() {
    let (schema, pool, store) = setup().await;
    let table = format!("{}.effect", schema.name());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (n serial, what text)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let runs = (0..8).map(|_| {
        let (store, table, calls) = (store.clone(), table.clone(), calls.clone());
        tokio::spawn(async move {
            store
                .run_once("monthly-report", "2026-11", move |tx| {
                    Box::pin(async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "INSERT INTO {table} (what) VALUES ('report')"
                        )))
                        .execute(&mut **tx)
                        .await?;
                        Ok::<_, Error>("sent")
                    })
                })
                .await
                .unwrap()
        })
    });
    let outcomes: Vec<Once<&str>> = futures_util::future::join_all(runs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == Once::Done("sent"))
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| **o == Once::AlreadyDone).count(),
        7
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the effect ran once");
    let rows: i64 =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn a_failed_effect_leaves_no_marker_and_runs_again() {
    let (_schema, _pool, store) = setup().await;
    let failed: Result<Once<()>, Error> = store
        .run_once("job", "k", |_tx| {
            Box::pin(async {
                Err(Error::LockLost {
                    key: "simulated failure".into(),
                })
            })
        })
        .await;
    assert!(failed.is_err());
    let again: Once<u8> = store
        .run_once("job", "k", |_tx| Box::pin(async { Ok::<_, Error>(7) }))
        .await
        .unwrap();
    assert_eq!(again, Once::Done(7), "the failure left no marker");
    let dup: Once<u8> = store
        .run_once("job", "k", |_tx| Box::pin(async { Ok::<_, Error>(8) }))
        .await
        .unwrap();
    assert_eq!(dup, Once::AlreadyDone);
}

/// Golden vectors: the advisory-lock and GET_LOCK key derivations never change.
#[test]
fn lock_key_derivations_are_fixed() {
    assert_eq!(
        lockwise::postgres::advisory_key("orders:42"),
        (0x6C77_6B31, -1_973_476_995)
    );
    assert_eq!(
        lockwise::postgres::advisory_key("héllo wörld"),
        (0x6C77_6B31, -1_593_819_267)
    );
    assert_eq!(
        lockwise::backend::mysql::lock_name("orders:42"),
        "8a5f217ddb0c9f03d16c0db38f2ba1c3afba56ca9be31a6bbb468b7d2e03746c"
    );
}

/// Schema creation is safe when many processes do it at once.
#[tokio::test]
async fn concurrent_first_use_creates_the_schema_once() {
    let schema = PgSchema::new("migrate");
    let tasks = (0..6).map(|_| {
        let url = schema.url().to_owned();
        let name = schema.name().to_owned();
        tokio::spawn(async move {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await
                .unwrap();
            Store::with_schema(pool, &name).unwrap().migrate().await
        })
    });
    for t in futures_util::future::join_all(tasks).await {
        t.unwrap().expect("migration under an advisory lock");
    }
}

/// A singleton periodic job: at most once per period across instances — thanks to the lock
/// usually, and to run_once even when the lock fails to exclude (here: every instance has a
/// lock service of its own, as after a split brain).
#[tokio::test]
async fn a_singleton_job_runs_once_per_period_even_when_the_lock_fails() {
    use lockwise::Singleton;
    let (schema, pool, store) = setup().await;
    let table = format!("{}.runs", schema.name());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (period bigint)"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let period = Duration::from_secs(60);
    let shared = Locker::connect("memory:").await.unwrap();
    let at = std::time::SystemTime::now();
    for (round, separate_locks) in [(0, false), (1, true)] {
        let at = at + period * round;
        let ticks = (0..4).map(|_| {
            let locker = if separate_locks {
                Locker::new(lockwise::backend::memory::MemoryBackend::new()) // no exclusion at all
            } else {
                shared.clone()
            };
            let job = Singleton::new(locker, store.clone(), "nightly", period);
            let table = table.clone();
            tokio::spawn(async move {
                job.tick(at, move |tx, p| {
                    Box::pin(async move {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "INSERT INTO {table} VALUES ($1)"
                        )))
                        .bind(p as i64)
                        .execute(&mut **tx)
                        .await
                        .map_err(Error::from)
                    })
                })
                .await
                .unwrap()
                .map(|once| matches!(once, Once::Done(_)))
            })
        });
        let results: Vec<Option<bool>> = futures_util::future::join_all(ticks)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            results.iter().filter(|r| **r == Some(true)).count(),
            1,
            "{results:?}"
        );
        if separate_locks {
            assert!(
                results.iter().all(Option::is_some),
                "every instance got a lock"
            );
        }
    }
    let runs: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT period FROM {table} ORDER BY period"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(runs.len(), 2, "one run in each of two periods: {runs:?}");
    assert_eq!(runs[1] - runs[0], 1);
}

/// The lab's clean-up drops its own schema and nothing else; the shared default is refused.
#[cfg(feature = "lab")]
#[tokio::test]
async fn drop_schema_removes_its_own_schema_and_refuses_the_default() {
    let (schema, pool, store) = setup().await;
    let refused = Store::new(pool.clone()).drop_schema().await;
    assert!(
        matches!(refused, Err(Error::InvalidConfig { .. })),
        "{refused:?}"
    );
    store.drop_schema().await.unwrap();
    let left: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(schema.name())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!left, "the schema is gone");
}
