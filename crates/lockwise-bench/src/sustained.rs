//! Sustained load: a producer holds the queue near a depth while jobs of a fixed length run,
//! for a fixed time — lockwise's [`Worker`](lockwise::queue::Worker) on one side, the naive SKIP LOCKED claim-10 +
//! complete loop issued raw on the other, each in a fresh store of its own, alternating.
//! What it shows is whether the table rots: the most dead row versions of any table of the
//! store, sampled every 200 ms, beside the throughput. The store never gets a VACUUM from
//! the bench; autovacuum runs as the server is configured.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::{AssertSqlSafe, PgPool};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use crate::conn::Schema;
use crate::dead_tuples::{DeadTuples, Peaks};
use crate::error::{Error, Result};
use crate::load::{CEILING_RUN, ceiling, hold_depth, lockwise_worker};
use crate::{Entry, Plan};
use lockwise::queue::{Job, Queue};

pub use crate::load::Load;

/// The queue's name in the bench's store.
const QUEUE: &str = "bench";

/// `plan.rounds` runs of `plan.round` per side under `load`, lockwise and the floor
/// alternating; unit jobs/s (jobs finished during the run over its length). The entry's
/// `dead_tuples_peak`/`dead_tuples_end` are the most dead row versions of any table of
/// lockwise's store (peak over the runs, and at the end of the last),
/// `dead_tuples_by_table` the peak of each of its tables (the highest first), and
/// `floor_dead_tuples_peak` the floor's peak. Each run uses a schema of its own on `url`,
/// dropped after it.
pub async fn sustained(
    url: &str,
    load: Load,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let workers = load.workers.max(1);
    let pool = crate::conn::pg_pool(url, (workers + 8) as u32).await?;
    let outcome = rounds(&pool, Load { workers, ..load }, plan, tick).await;
    pool.close().await;
    outcome
}

async fn rounds(pool: &PgPool, load: Load, plan: Plan, tick: &(dyn Fn() + Sync)) -> Result<Entry> {
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let (mut peak, mut end, mut floor_peak) = (0i64, 0i64, 0i64);
    let mut by_table: std::collections::BTreeMap<String, i64> = Default::default();
    for round in 0..plan.rounds {
        let order = if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for lockwise in order {
            let run = Run::create(pool).await?;
            let outcome = run.load(lockwise, load, plan.round).await;
            let dropped = run.drop_store().await;
            let (rate, peaks) = outcome?;
            dropped?;
            if lockwise {
                ours.push(rate);
                peak = peak.max(peaks.most());
                end = peaks.last();
                for (table, dead) in peaks.by_table {
                    // Segments of a ring by their ring: one figure per ring.
                    let table = ring_of(&table);
                    let most = by_table.entry(table).or_insert(0);
                    *most = (*most).max(dead);
                }
            } else {
                raw.push(rate);
                floor_peak = floor_peak.max(peaks.most());
            }
            tick();
        }
    }
    let mut entry = Entry::compare("sustained", "postgres", "jobs/s", &ours, &raw)?;
    entry.tasks = Some(load.workers);
    entry.backlog = Some(load.depth);
    entry.dead_tuples_peak = Some(peak);
    entry.dead_tuples_end = Some(end);
    entry.floor_dead_tuples_peak = Some(floor_peak);
    let mut tables: Vec<(String, i64)> = by_table.into_iter().collect();
    tables.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    entry.dead_tuples_by_table = Some(tables);
    entry.retention_ms = load.retention.map(|keep| keep.as_secs_f64() * 1e3);
    entry.job_ms = Some(load.job.as_secs_f64() * 1e3);
    entry.ceiling = Some(ceiling(load, plan.round.min(CEILING_RUN)).await);
    Ok(entry)
}

/// The table a per-table figure is reported under: a ring's segments (`ready_3`,
/// `leases_17`, `done_5`) under their ring, written `ready_*`.
fn ring_of(table: &str) -> String {
    match table.rsplit_once('_') {
        Some((ring, seg))
            if !seg.is_empty()
                && seg.bytes().all(|b| b.is_ascii_digit())
                && ["ready", "leases", "done"].contains(&ring) =>
        {
            format!("{ring}_*")
        }
        _ => table.to_owned(),
    }
}

/// One side's run, in a store of its own.
struct Run {
    pool: PgPool,
    name: String,
    schema: Schema,
    queue: Queue,
}

impl Run {
    async fn create(pool: &PgPool) -> Result<Self> {
        let name = format!(
            "lockwise_bench_s_{}_{:04x}",
            std::process::id(),
            rand::random::<u16>()
        );
        let schema = Schema::new(&name)?;
        let queue = Queue::with_schema(pool.clone(), &name, QUEUE)?;
        queue.migrate().await?;
        sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/floor_schema.sql")))
            .execute(pool)
            .await?;
        Ok(Run {
            pool: pool.clone(),
            name,
            schema,
            queue,
        })
    }

    async fn drop_store(&self) -> Result<()> {
        sqlx::raw_sql(
            self.schema
                .sql(include_str!("../sql/postgres/scaling_drop.sql")),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Runs one side for `length`: jobs/s, and the dead row versions seen.
    async fn load(&self, lockwise: bool, load: Load, length: Duration) -> Result<(f64, Peaks)> {
        let finished = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        // The first jobs before the consumers start.
        let enqueued = self.produce(lockwise, load.depth, 0).await?;
        let sampler = DeadTuples::start(self.pool.clone(), self.name.clone(), &[]).await;
        let consumers = if lockwise {
            lockwise_worker(self.queue.clone(), load, finished.clone(), stop.clone())
        } else {
            self.floor(load, finished.clone(), stop.clone())
        };
        let rate = hold_depth(
            load,
            length,
            enqueued,
            &finished,
            consumers,
            &stop,
            |n, from| self.produce(lockwise, n, from),
        )
        .await;
        let peaks = sampler.stop().await;
        Ok((rate?, peaks))
    }

    /// Enqueues `n` no-op jobs, with lockwise or into the floor's table (one raw INSERT);
    /// returns how many.
    async fn produce(&self, lockwise: bool, n: u64, from: u64) -> Result<u64> {
        if lockwise {
            let jobs = (from..from + n).map(|i| Job::new(json!({ "n": i })));
            return Ok(self.queue.enqueue_many(jobs).await?.len() as u64);
        }
        let payloads: Vec<String> = (from..from + n)
            .map(|i| json!({ "n": i }).to_string())
            .collect();
        let sql = self
            .schema
            .sql(include_str!("../sql/postgres/enqueue_floor.sql"));
        let done = sqlx::query(sql)
            .bind(QUEUE)
            .bind(&payloads)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// The floor: `load.workers` tasks, each claiming 10 with the naive statement, running
    /// them one after the other, and completing them.
    fn floor(
        &self,
        load: Load,
        finished: Arc<AtomicU64>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let sql = |text: &str| self.schema.sql(text).0;
        let claim = sql(include_str!("../sql/postgres/queue_floor_claim.sql"));
        let complete = sql(include_str!("../sql/postgres/queue_floor_complete.sql"));
        let prune = sql(include_str!("../sql/postgres/floor_prune.sql"));
        let pool = self.pool.clone();
        tokio::spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            if let Some(keep) = load.retention {
                let (pool, stop) = (pool.clone(), stop.clone());
                set.spawn(async move {
                    while !stop.is_cancelled() {
                        tokio::select! {
                            () = stop.cancelled() => break,
                            () = sleep(Duration::from_secs(1)) => {}
                        }
                        sqlx::query(AssertSqlSafe(prune.clone()))
                            .bind(keep.as_secs_f64())
                            .execute(&pool)
                            .await?;
                    }
                    Ok::<_, Error>(())
                });
            }
            for _ in 0..load.workers {
                let (pool, claim, complete) = (pool.clone(), claim.clone(), complete.clone());
                let (finished, stop) = (finished.clone(), stop.clone());
                set.spawn(async move {
                    while !stop.is_cancelled() {
                        let ids: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(claim.clone()))
                            .bind(QUEUE)
                            .bind(10i64)
                            .fetch_all(&pool)
                            .await?;
                        if ids.is_empty() {
                            tokio::select! {
                                () = stop.cancelled() => {}
                                () = sleep(Duration::from_millis(20)) => {}
                            }
                            continue;
                        }
                        for _ in &ids {
                            sleep(load.job).await;
                        }
                        sqlx::query(AssertSqlSafe(complete.clone()))
                            .bind(&ids)
                            .execute(&pool)
                            .await?;
                        finished.fetch_add(ids.len() as u64, Ordering::Relaxed);
                    }
                    Ok::<_, Error>(())
                });
            }
            while let Some(joined) = set.join_next().await {
                joined.map_err(|e| Error::config(format!("a bench task failed: {e}")))??;
            }
            Ok(())
        })
    }
}
