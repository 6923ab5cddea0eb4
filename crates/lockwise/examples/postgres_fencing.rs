//! Locks for efficiency, the database for correctness, on PostgreSQL: a session lock with a
//! fencing token, a fenced write that refuses an older holder, a transaction-scoped lock, and
//! an effect that runs once.
//!
//! ```sh
//! cargo run -p lockwise --example postgres_fencing   # LOCKWISE_POSTGRES_URL or the local server
//! ```
//! It works in a schema of its own (`lockwise_example_<pid>`) and drops it at the end.

use std::time::Duration;

use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::{Once, Store};
use lockwise::{Error, LockOptions, Locker};
use sqlx::postgres::PgPoolOptions;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = &format!("lockwise_example_{}", std::process::id());
    let pool = PgPoolOptions::new().connect(&url).await?;
    let store = Store::with_schema(pool.clone(), schema)?;
    let locker = Locker::new(
        PostgresBackend::builder(&url)
            .schema(schema)
            .connect()
            .await?,
    );
    let opts = LockOptions::ttl(Duration::from_secs(10));

    // Two grants of one lock, one after the other: the second has the larger token.
    let first = locker
        .try_acquire("report-42", &opts)
        .await?
        .ok_or("held elsewhere")?;
    let older = first.token();
    first.release().await?;
    let second = locker
        .try_acquire("report-42", &opts)
        .await?
        .ok_or("held elsewhere")?;
    let newer = second.token();

    // The newer holder writes first …
    let mut tx = pool.begin().await?;
    store.fence(&mut tx, "report-42", newer).await?;
    tx.commit().await?;
    // … then the older one, which paused and still believes it holds the lock: refused.
    let mut tx = pool.begin().await?;
    match store.fence(&mut tx, "report-42", older).await {
        Err(Error::StaleToken {
            presented, current, ..
        }) => {
            println!("stale write refused: token {presented}, resource at {current:?}")
        }
        other => return Err(format!("expected StaleToken, got {other:?}").into()),
    }
    drop(tx); // aborted by the server anyway
    second.release().await?;

    // A transaction-scoped lock, released by the commit.
    let mut tx = pool.begin().await?;
    let lock = store
        .lock_xact(&mut tx, "invoice-7", Duration::from_secs(1))
        .await?;
    println!("transaction lock: {:?}", lock.map(|l| l.token()));
    tx.commit().await?;

    // An effect that runs once, however many instances try.
    for attempt in 1..=2 {
        let outcome = store
            .run_once("welcome-email", "user-42", |_tx| {
                Box::pin(async { Ok::<_, Error>("sent") })
            })
            .await?;
        match outcome {
            Once::Done(what) => println!("attempt {attempt}: {what}"),
            Once::AlreadyDone => println!("attempt {attempt}: already done"),
        }
    }

    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await?;
    Ok(())
}
