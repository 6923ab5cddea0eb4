//! The dead row versions of a bench's queue store, sampled while a side runs: what shows
//! whether a layout rots. Figures count from the value when sampling starts (the statistics
//! of a truncated table may lag behind) and are estimates (PostgreSQL publishes them with a
//! delay of up to a second).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// Samples the most dead row versions of any table of a schema (but those left out) every
/// 200 ms until stopped.
pub(super) struct DeadTuples {
    stop: CancellationToken,
    most: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
    pool: PgPool,
    schema: String,
    left_out: Vec<String>,
    base: i64,
}

impl DeadTuples {
    /// Starts sampling the tables of `schema` but `left_out`; figures count from the value
    /// now (the statistics of a truncated table may lag behind).
    pub(super) async fn start(pool: PgPool, schema: String, left_out: &[&str]) -> Self {
        let left_out: Vec<String> = left_out.iter().map(|&t| t.to_owned()).collect();
        let base = dead_tuples(&pool, &schema, &left_out).await.unwrap_or(0);
        let stop = CancellationToken::new();
        let most = Arc::new(AtomicI64::new(0));
        let task = tokio::spawn({
            let (stop, most, pool, schema, left_out) = (
                stop.clone(),
                most.clone(),
                pool.clone(),
                schema.clone(),
                left_out.clone(),
            );
            async move {
                while !stop.is_cancelled() {
                    if let Ok(n) = dead_tuples(&pool, &schema, &left_out).await {
                        most.fetch_max(n - base, Ordering::Relaxed);
                    }
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = sleep(Duration::from_millis(200)) => {}
                    }
                }
            }
        });
        DeadTuples {
            stop,
            most,
            task,
            pool,
            schema,
            left_out,
            base,
        }
    }

    /// The peak seen and the value now.
    pub(super) async fn stop(self) -> (i64, i64) {
        self.stop.cancel();
        let _ = self.task.await;
        let last = (dead_tuples(&self.pool, &self.schema, &self.left_out)
            .await
            .unwrap_or(0)
            - self.base)
            .max(0);
        let most = self.most.load(Ordering::Relaxed).max(last);
        (most, last)
    }
}

async fn dead_tuples(pool: &PgPool, schema: &str, left_out: &[String]) -> Result<i64> {
    Ok(
        sqlx::query_scalar(include_str!("../sql/postgres/dead_tuples_max.sql"))
            .bind(schema)
            .bind(left_out)
            .fetch_one(pool)
            .await?,
    )
}
