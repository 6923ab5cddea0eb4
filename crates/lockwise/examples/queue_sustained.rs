//! Sustained load on the queue: a producer keeps about 5,000 jobs pending while 8 workers
//! (batch 10) drain them and finished jobs are pruned every few seconds, for a fixed time.
//! Prints throughput and the jobs table's dead tuples every 5 s, to show they stay bounded.
//!
//! ```sh
//! cargo run --release -p lockwise --example queue_sustained [SECONDS]   # default 60
//! ```
//! Works in a schema of its own (`lockwise_qsustained_<pid>`) and drops it at the end.

use std::time::{Duration, Instant};

use lockwise::queue::{Job, Queue, Worker};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test?sslmode=disable".into());
    let seconds: u64 = std::env::args().nth(1).map_or(Ok(60), |n| n.parse())?;
    let schema = format!("lockwise_qsustained_{}", std::process::id());
    let pool = PgPoolOptions::new()
        .max_connections(40)
        .connect(&url)
        .await?;
    let queue = Queue::with_schema(pool.clone(), &schema, "sustained")?;
    queue.migrate().await?;

    let stop = CancellationToken::new();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let worker = Worker::new(queue.clone())
                .concurrency(10)
                .batch(10)
                .poll_interval(Duration::from_millis(100));
            tokio::spawn(worker.run(|_job| async { Ok::<_, String>(()) }, stop.clone()))
        })
        .collect();

    let start = Instant::now();
    let mut last = (start, 0i64);
    let mut next_report = start + Duration::from_secs(5);
    let mut pruned = 0u64;
    println!(
        "{:>5} {:>10} {:>10} {:>12}",
        "s", "jobs/s", "ready", "n_dead_tup"
    );
    while start.elapsed() < Duration::from_secs(seconds) {
        let stats = queue.stats().await?;
        if stats.ready < 5_000 {
            queue
                .enqueue_many((0..1_000).map(|i| Job::new(json!({ "n": i }))))
                .await?;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(5);
            pruned += queue.prune_done(Duration::ZERO).await?;
            let done = stats.done + i64::try_from(pruned).unwrap_or(0);
            let dead: i64 = sqlx::query_scalar(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'",
            )
            .bind(&schema)
            .fetch_one(&pool)
            .await?;
            let rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
            println!(
                "{:>5} {:>10.0} {:>10} {:>12}",
                start.elapsed().as_secs(),
                rate,
                stats.ready,
                dead
            );
            last = (Instant::now(), done);
        }
    }
    stop.cancel();
    for w in workers {
        w.await??;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await?;
    Ok(())
}
