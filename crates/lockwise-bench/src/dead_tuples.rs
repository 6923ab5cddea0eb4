//! The dead row versions of a bench's queue store, sampled while a side runs: what shows
//! whether a layout rots. Figures count from the value when sampling starts (the statistics
//! of a truncated table may lag behind) and are estimates (PostgreSQL publishes them with a
//! delay of up to a second).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::PgPool;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// Each table's dead row versions, by name.
type ByTable = BTreeMap<String, i64>;

/// What sampling saw: the peak of each table, and the values when it stopped.
#[derive(Debug, Default)]
pub(super) struct Peaks {
    /// The most dead row versions of each table at any sample.
    pub(super) by_table: ByTable,
    /// The values at the end.
    pub(super) last: ByTable,
}

impl Peaks {
    /// The most dead row versions of any table at any sample.
    pub(super) fn most(&self) -> i64 {
        self.by_table.values().copied().max().unwrap_or(0)
    }

    /// The most dead row versions of any table at the end.
    pub(super) fn last(&self) -> i64 {
        self.last.values().copied().max().unwrap_or(0)
    }

    fn record(&mut self, now: &ByTable, base: &ByTable) {
        for (table, dead) in now {
            let n = (dead - base.get(table).copied().unwrap_or(0)).max(0);
            let peak = self.by_table.entry(table.clone()).or_insert(0);
            *peak = (*peak).max(n);
        }
    }
}

/// Samples the dead row versions of every table of a schema (but those left out) every
/// 200 ms until stopped.
pub(super) struct DeadTuples {
    stop: CancellationToken,
    peaks: Arc<Mutex<Peaks>>,
    task: tokio::task::JoinHandle<()>,
    pool: PgPool,
    schema: String,
    left_out: Vec<String>,
    base: Arc<ByTable>,
}

impl DeadTuples {
    /// Starts sampling the tables of `schema` but `left_out`; figures count from the value
    /// now (the statistics of a truncated table may lag behind).
    pub(super) async fn start(pool: PgPool, schema: String, left_out: &[&str]) -> Self {
        let left_out: Vec<String> = left_out.iter().map(|&t| t.to_owned()).collect();
        let base = Arc::new(
            dead_tuples(&pool, &schema, &left_out)
                .await
                .unwrap_or_default(),
        );
        let stop = CancellationToken::new();
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let task = tokio::spawn({
            let (stop, peaks, pool, schema, left_out, base) = (
                stop.clone(),
                peaks.clone(),
                pool.clone(),
                schema.clone(),
                left_out.clone(),
                base.clone(),
            );
            async move {
                while !stop.is_cancelled() {
                    if let Ok(now) = dead_tuples(&pool, &schema, &left_out).await {
                        peaks
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .record(&now, &base);
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
            peaks,
            task,
            pool,
            schema,
            left_out,
            base,
        }
    }

    /// The peaks seen and the values now.
    pub(super) async fn stop(self) -> Peaks {
        self.stop.cancel();
        let _ = self.task.await;
        let now = dead_tuples(&self.pool, &self.schema, &self.left_out)
            .await
            .unwrap_or_default();
        let mut peaks =
            std::mem::take(&mut *self.peaks.lock().unwrap_or_else(PoisonError::into_inner));
        peaks.record(&now, &self.base);
        peaks.last = now
            .iter()
            .map(|(t, d)| {
                let base = self.base.get(t).copied().unwrap_or(0);
                (t.clone(), (d - base).max(0))
            })
            .collect();
        peaks
    }
}

/// Unnamed, in a transaction of its own: it works through PgBouncer in transaction mode too.
async fn dead_tuples(pool: &PgPool, schema: &str, left_out: &[String]) -> Result<ByTable> {
    let mut tx = pool.begin().await?;
    let rows: Vec<(String, i64)> =
        sqlx::query_as(include_str!("../sql/postgres/dead_tuples_by_table.sql"))
            .persistent(false)
            .bind(schema)
            .bind(left_out)
            .fetch_all(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_count_from_the_base_and_rank_the_tables() {
        let table = |pairs: &[(&str, i64)]| -> ByTable {
            pairs.iter().map(|(t, d)| ((*t).to_owned(), *d)).collect()
        };
        let base = table(&[("done", 100)]);
        let mut peaks = Peaks::default();
        peaks.record(&table(&[("done", 150), ("ready_0", 40)]), &base);
        peaks.record(&table(&[("done", 120), ("ready_0", 900)]), &base);
        assert_eq!(peaks.most(), 900);
        assert_eq!(peaks.last(), 0, "nothing recorded at the end yet");
        assert_eq!(peaks.by_table["done"], 50, "counted from the base");
    }
}
