//! Locks for efficiency, the database for correctness, on PostgreSQL: a session lock with a
//! fencing token, fenced writes that refuse an older holder (the fence row and the column
//! pattern), a transaction-scoped lock, an effect that runs once, and a singleton job.
//!
//! ```sh
//! cargo run -p lockwise --example postgres_fencing   # LOCKWISE_POSTGRES_URL or the local server
//! ```
//! It works in a schema of its own (`lockwise_example_<pid>`) and drops it at the end. The
//! README's PostgreSQL examples are the regions between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::time::{Duration, SystemTime};

use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::{Once, Store};
use lockwise::{Error, FencingToken, LockOptions, Locker, Singleton};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = &format!("lockwise_example_{}", std::process::id());
    // The example's tables live in its schema: put it first on the search path.
    let options: PgConnectOptions = url.parse()?;
    let pool = PgPoolOptions::new()
        .connect_with(options.options([("search_path", schema.as_str())]))
        .await?;
    let outcome = demo(&url, &pool, schema).await;
    sqlx::query(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&pool)
    .await?;
    outcome
}

async fn demo(url: &str, pool: &PgPool, schema: &str) -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::with_schema(pool.clone(), schema)?;
    let locker = Locker::new(
        PostgresBackend::builder(url)
            .schema(schema)
            .connect()
            .await?,
    );
    let opts = LockOptions::ttl(Duration::from_secs(10));
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS {schema}; CREATE TABLE {schema}.reports (id int PRIMARY KEY, body text, fencing_token bigint NOT NULL DEFAULT 0); \
         INSERT INTO {schema}.reports (id) VALUES (42)"
    )))
    .execute(pool)
    .await?;

    // Two grants of one lock, one after the other: the second has the larger token.
    let first = locker
        .try_acquire("report-42", &opts)
        .await?
        .ok_or("held elsewhere")?;
    let older = first.token();
    first.release().await?;
    let guard = locker
        .try_acquire("report-42", &opts)
        .await?
        .ok_or("held elsewhere")?;
    let body = "the newer report";

    // ANCHOR: fence
    // PostgreSQL, inside your own transaction: a stale token raises an error *in the server*,
    // so the transaction is aborted even if the caller ignores the error.
    let mut tx = pool.begin().await?;
    store.fence(&mut tx, "report-42", guard.token()).await?; // Err(StaleToken) → nothing written
    sqlx::query("UPDATE reports SET body = $1 WHERE id = 42")
        .bind(body)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    // ANCHOR_END: fence

    // The older holder, which paused and still believes it holds the lock: refused.
    let mut tx = pool.begin().await?;
    match store.fence(&mut tx, "report-42", older).await {
        Err(Error::StaleToken {
            presented, current, ..
        }) => println!("stale write refused: token {presented}, resource at {current:?}"),
        other => return Err(format!("expected StaleToken, got {other:?}").into()),
    }
    drop(tx); // aborted by the server anyway

    column_pattern(pool, guard.token(), body).await?;
    match column_pattern(pool, older, "the older report").await {
        Err(Error::StaleToken { .. }) => println!("column pattern: the older token is refused"),
        other => return Err(format!("expected StaleToken, got {other:?}").into()),
    }
    guard.release().await?;

    // ANCHOR: xact
    let mut tx = pool.begin().await?;
    if let Some(lock) = store
        .lock_xact(&mut tx, "invoice-7", Duration::from_secs(2))
        .await?
    {
        // … work under the lock, fenced with lock.token() if it writes elsewhere …
        println!("transaction lock, token {}", lock.token());
    }
    tx.commit().await?; // releases it
    // ANCHOR_END: xact

    for attempt in 1..=2 {
        // ANCHOR: once
        let outcome = store
            .run_once("welcome-email", "user-42", |tx| {
                Box::pin(async move {
                    sqlx::query("INSERT INTO reports (id, body) VALUES (7, 'welcome')")
                        .execute(&mut **tx)
                        .await?;
                    Ok::<_, Error>("sent")
                })
            })
            .await?;
        match outcome {
            Once::Done(what) => println!("ran now: {what}"), // effect and marker committed together
            Once::AlreadyDone => println!("ran before, or a concurrent duplicate won"),
        }
        // ANCHOR_END: once
        println!("(attempt {attempt})");
    }

    // ANCHOR: singleton
    // At most once per period across instances: the lock avoids duplicate work, run_once on
    // (job, period) guarantees it even when the lock fails.
    let nightly = Singleton::new(locker, store, "nightly-report", Duration::from_secs(86_400));
    let ran = nightly
        .tick(SystemTime::now(), |tx, period| {
            Box::pin(async move {
                sqlx::query("UPDATE reports SET body = $1 WHERE id = 42")
                    .bind(format!("nightly report {period}"))
                    .execute(&mut **tx)
                    .await?;
                Ok::<_, Error>(())
            })
        })
        .await?; // nightly.run_forever(…) ticks at every period
    // ANCHOR_END: singleton
    println!("singleton tick: {ran:?}");
    Ok(())
}

/// The fenced write in your own table's columns.
async fn column_pattern(pool: &PgPool, token: FencingToken, body: &str) -> lockwise::Result<()> {
    // ANCHOR: column
    // The column pattern in your own table, checked with `check_fenced` (a FencingToken binds
    // as a BIGINT):
    let done = sqlx::query(
        "UPDATE reports SET body = $1, fencing_token = $2 WHERE id = $3 AND fencing_token <= $2",
    )
    .bind(body)
    .bind(token)
    .bind(42)
    .execute(pool)
    .await?;
    lockwise::postgres::check_fenced(&done, "reports/42", token)?; // Err(StaleToken) if 0 rows
    // ANCHOR_END: column
    Ok(())
}
