//! The job queue on PostgreSQL: enqueue (with an idempotency key, and inside your own
//! transaction), then drain it with a worker whose handlers run concurrently; a periodic
//! schedule, and pausing a queue.
//!
//! ```sh
//! cargo run -p lockwise --example queue   # LOCKWISE_POSTGRES_URL or the local server
//! ```
//! It works in a schema of its own (`lockwise_example_queue_<pid>`) and drops it at the end.
//! The README's queue examples are the regions between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lockwise::queue::{Job, Queue, Schedule, Worker};
use serde_json::json;
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("lockwise_example_queue_{}", std::process::id());
    let pool = PgPoolOptions::new().connect(&url).await?;
    let outcome = demo(&pool, &schema).await;
    sqlx::query(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&pool)
    .await?;
    outcome
}

async fn demo(pool: &PgPool, schema: &str) -> Result<(), Box<dyn std::error::Error>> {
    let sent = Arc::new(AtomicUsize::new(0));
    let shutdown = CancellationToken::new(); // cancel it on SIGTERM in a real worker
    let all_sent = shutdown.clone();
    // ANCHOR: queue
    let queue = Queue::with_schema(pool.clone(), schema, "emails")?; // or Queue::new: schema "lockwise"
    for user in 1..=3 {
        let job = Job::new(json!({"to": format!("user-{user}@example.com")}))
            .key(format!("welcome-{user}")) // a duplicate key returns the existing job
            .max_attempts(5);
        queue.enqueue(job).await?;
    }
    let mut tx = pool.begin().await?; // your own transaction: no commit, no job
    queue
        .enqueue_in(
            &mut tx,
            Job::new(json!({"to": "ops@example.com"})).delay(Duration::from_millis(100)),
        )
        .await?;
    tx.commit().await?;

    let report = Worker::new(queue)
        .concurrency(8) // the batch follows: the free handlers, or 100 per claim for short jobs
        .lease(Duration::from_secs(30))
        .timeout(Duration::from_secs(300))
        .retention(Duration::from_secs(7 * 24 * 3600)) // a week of history, then pruned
        .run(
            move |job| {
                let (sent, all_sent) = (sent.clone(), all_sent.clone());
                async move {
                    println!(
                        "job {} (attempt {}): sending {}",
                        job.id, job.attempt, job.payload
                    );
                    if sent.fetch_add(1, Ordering::SeqCst) + 1 == 4 {
                        all_sent.cancel(); // all sent: stop claiming, finish in-flight jobs
                    }
                    Ok::<_, String>(()) // an Err or a panic is a failed attempt, retried later
                }
            },
            shutdown,
        )
        .await?;
    // ANCHOR_END: queue
    println!("done: {}, failed: {}", report.done, report.failed);
    let stop = CancellationToken::new();
    // ANCHOR: periodic
    let reports = Queue::with_schema(pool.clone(), schema, "reports")?;
    // One job per period however many instances run it (cron on UTC, or Schedule::every).
    let nightly = reports.periodic(
        "nightly-sales",
        Schedule::cron("0 3 * * *")?,
        Job::new(json!({"report": "sales"})),
    )?;
    let scheduler = tokio::spawn({
        let stop = stop.clone();
        async move { nightly.run(stop).await }
    });
    reports.pause().await?; // workers claim none of its jobs (within a poll) until resumed
    reports.resume().await?;
    // ANCHOR_END: periodic
    stop.cancel();
    scheduler.await??;
    Ok(())
}
