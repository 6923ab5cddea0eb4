//! A quick measure of the queue: N no-op jobs drained by 8 workers (batch 10), jobs/s, and
//! the table's dead tuples afterwards. `lockwise bench` will measure against the raw floor.
//!
//! ```sh
//! cargo run --release -p lockwise --example queue_throughput [JOBS]   # default 20000
//! ```
//! Works in a schema of its own (`lockwise_qbench_<pid>`) and drops it at the end.

use std::time::{Duration, Instant};

use lockwise::queue::{Job, Queue, Worker};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test?sslmode=disable".into());
    let jobs: usize = std::env::args().nth(1).map_or(Ok(20_000), |n| n.parse())?;
    let schema = format!("lockwise_qbench_{}", std::process::id());
    let pool = PgPoolOptions::new()
        .max_connections(40)
        .connect(&url)
        .await?;
    let queue = Queue::with_schema(pool.clone(), &schema, "bench")?;
    queue.migrate().await?;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1_000) {
        queue
            .enqueue_many(chunk.iter().map(|i| Job::new(json!({ "n": i }))))
            .await?;
    }

    let stop = CancellationToken::new();
    let start = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let worker = Worker::new(queue.clone())
                .concurrency(10)
                .batch(10)
                .poll_interval(Duration::from_millis(100));
            tokio::spawn(worker.run(|_job| async { Ok::<_, String>(()) }, stop.clone()))
        })
        .collect();
    // Sample the table's dead tuples while it drains: autovacuum must keep them bounded.
    let dead_tuples = |pool: sqlx::PgPool, schema: String| async move {
        sqlx::query_scalar::<_, i64>(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'",
        )
        .bind(schema)
        .fetch_one(&pool)
        .await
    };
    let mut most_dead = 0;
    loop {
        let stats = queue.stats().await?;
        most_dead = most_dead.max(dead_tuples(pool.clone(), schema.clone()).await?);
        if stats.done as usize >= jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = start.elapsed();
    stop.cancel();
    for w in workers {
        w.await??;
    }
    let vacuums: i64 = sqlx::query_scalar(
        "SELECT vacuum_count + autovacuum_count FROM pg_stat_user_tables \
          WHERE schemaname = $1 AND relname = 'jobs'",
    )
    .bind(&schema)
    .fetch_one(&pool)
    .await?;
    println!("vacuums during the run: {vacuums}");
    println!(
        "{jobs} jobs, 8 workers × batch 10: {:.2} s, {:.0} jobs/s; n_dead_tup at most {most_dead} while draining",
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64()
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await?;
    Ok(())
}
