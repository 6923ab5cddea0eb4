//! Sustained load on MariaDB/MySQL, the figures of [`sustained`](crate::sustained) where
//! InnoDB keeps them: a producer holds the queue near a depth while jobs of a fixed length
//! run, lockwise's [`Worker`](lockwise::queue::Worker) against the naive SKIP LOCKED claim-10 + complete loop on a
//! one-table queue of its own, alternating, each in tables of their own. InnoDB has no dead
//! tuple count: what shows the cost of claims, completions and pruning there is the history
//! list length (the undo its purge thread has not removed yet, a server-wide figure), sampled
//! every 500 ms, beside the rows each side's table holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, MySqlPool};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::load::{CEILING_RUN, Load, ceiling, hold_depth, lockwise_worker};
use crate::{Entry, Plan};
use lockwise::queue::{Job, Queue};

/// The queue's name in the bench's tables.
const QUEUE: &str = "bench";

/// `plan.rounds` runs of `plan.round` per side under `load` on the MariaDB/MySQL database of
/// `url`, lockwise and the floor alternating; unit jobs/s. The entry's `history_list_peak` and
/// `floor_history_list_peak` are the most undo records InnoDB's purge had left while each
/// side ran, `rows_peak` and `floor_rows_peak` the most rows each side's table held. Each run
/// uses tables of its own, dropped after it.
pub async fn sustained_mysql(
    url: &str,
    load: Load,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let pool = crate::conn::mysql_pool(url, (load.workers + 8) as u32).await?;
    let outcome = rounds(&pool, load, plan, tick).await;
    pool.close().await;
    outcome
}

/// What one run saw: jobs/s, the peak history list length and the peak rows.
struct Seen {
    rate: f64,
    history: i64,
    rows: i64,
}

async fn rounds(
    pool: &MySqlPool,
    load: Load,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let (mut history, mut floor_history, mut rows, mut floor_rows) = (0i64, 0i64, 0i64, 0i64);
    for round in 0..plan.rounds {
        let order = if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for lockwise in order {
            let run = Run::create(pool).await?;
            let outcome = run.load(lockwise, load, plan.round).await;
            let dropped = run.drop_tables().await;
            let seen = outcome?;
            dropped?;
            if lockwise {
                ours.push(seen.rate);
                history = history.max(seen.history);
                rows = rows.max(seen.rows);
            } else {
                raw.push(seen.rate);
                floor_history = floor_history.max(seen.history);
                floor_rows = floor_rows.max(seen.rows);
            }
            tick();
        }
    }
    let mut entry = Entry::compare("sustained", "mysql", "jobs/s", &ours, &raw)?;
    entry.tasks = Some(load.workers);
    entry.backlog = Some(load.depth);
    entry.job_ms = Some(load.job.as_secs_f64() * 1e3);
    entry.retention_ms = load.retention.map(|keep| keep.as_secs_f64() * 1e3);
    entry.history_list_peak = Some(history);
    entry.floor_history_list_peak = Some(floor_history);
    entry.rows_peak = Some(rows);
    entry.floor_rows_peak = Some(floor_rows);
    entry.ceiling = Some(ceiling(load, plan.round.min(CEILING_RUN)).await);
    Ok(entry)
}

/// One side's run, in tables of its own.
struct Run {
    pool: MySqlPool,
    queue: Queue,
    /// lockwise's table.
    jobs: String,
    /// The floor's table.
    floor: String,
}

/// `sql` for the table `table` (a name the bench made).
fn for_table(sql: &str, table: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(sql.replace("{jobs}", table))
}

/// `sql` for the table `table`, with `{ids}` one placeholder for each of `n` ids.
fn for_ids(sql: &str, table: &str, n: usize) -> AssertSqlSafe<String> {
    for_table(&sql.replace("{ids}", &vec!["?"; n].join(", ")), table)
}

/// `sql` (whose last line is the row of its list) with that row repeated `n` times.
fn repeated(sql: &str, table: &str, n: usize) -> Result<AssertSqlSafe<String>> {
    let (head, row) = sql
        .trim_end()
        .rsplit_once('\n')
        .ok_or_else(|| Error::config("a bench statement has no row to repeat"))?;
    let rows = vec![row.trim(); n].join(",");
    Ok(for_table(&format!("{head} {rows}"), table))
}

impl Run {
    async fn create(pool: &MySqlPool) -> Result<Self> {
        let name = format!(
            "lockwise_bench_m_{}_{:04x}",
            std::process::id(),
            rand::random::<u16>()
        );
        let queue = Queue::mysql_with_prefix(pool.clone(), &name, QUEUE)?;
        let run = Run {
            pool: pool.clone(),
            queue,
            jobs: format!("{name}_jobs"),
            floor: format!("{name}_floor"),
        };
        run.queue.migrate().await?;
        sqlx::raw_sql(for_table(
            include_str!("../sql/mysql/sustained_floor_schema.sql"),
            &run.floor,
        ))
        .execute(pool)
        .await?;
        Ok(run)
    }

    async fn drop_tables(&self) -> Result<()> {
        for table in [&self.jobs, &self.floor] {
            sqlx::raw_sql(for_table(
                include_str!("../sql/mysql/enqueue_drop.sql"),
                table,
            ))
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    /// Runs one side for `length`.
    async fn load(&self, lockwise: bool, load: Load, length: Duration) -> Result<Seen> {
        let finished = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let enqueued = self.produce(lockwise, load.depth, 0).await?;
        let table = if lockwise { &self.jobs } else { &self.floor };
        let (history, rows) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
        let sampler = self.sample(table, history.clone(), rows.clone(), stop.clone());
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
        let _ = sampler.await;
        let rate = rate?;
        Ok(Seen {
            rate,
            history: history.load(Ordering::Relaxed),
            rows: rows.load(Ordering::Relaxed),
        })
    }

    /// Samples the history list length and `table`'s rows every 500 ms until `stop`.
    fn sample(
        &self,
        table: &str,
        history: Arc<AtomicI64>,
        rows: Arc<AtomicI64>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let pool = self.pool.clone();
        let count = for_table(include_str!("../sql/mysql/table_rows.sql"), table);
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let undo: std::result::Result<i64, _> =
                    sqlx::query_scalar(include_str!("../sql/mysql/history_list.sql"))
                        .fetch_one(&pool)
                        .await;
                if let Ok(n) = undo {
                    history.fetch_max(n, Ordering::Relaxed);
                }
                let held: std::result::Result<i64, _> =
                    sqlx::query_scalar(AssertSqlSafe(count.0.clone()))
                        .fetch_one(&pool)
                        .await;
                if let Ok(n) = held {
                    rows.fetch_max(n, Ordering::Relaxed);
                }
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = sleep(Duration::from_millis(500)) => {}
                }
            }
        })
    }

    /// Enqueues `n` no-op jobs, with lockwise or into the floor's table (one multi-row
    /// INSERT); returns how many.
    async fn produce(&self, lockwise: bool, n: u64, from: u64) -> Result<u64> {
        if lockwise {
            let jobs = (from..from + n).map(|i| Job::new(json!({ "n": i })));
            return Ok(self.queue.enqueue_many(jobs).await?.len() as u64);
        }
        let sql = repeated(
            include_str!("../sql/mysql/enqueue_floor.sql"),
            &self.floor,
            usize::try_from(n).unwrap_or(usize::MAX),
        )?;
        let mut insert = sqlx::query(sql);
        for i in from..from + n {
            insert = insert.bind(QUEUE).bind(json!({ "n": i }).to_string());
        }
        Ok(insert.execute(&self.pool).await?.rows_affected())
    }

    /// The floor: `load.workers` tasks, each on a connection of its own in READ COMMITTED,
    /// claiming 10 with the naive statement, running them one after the other and completing
    /// them; with a retention, one more task deleting the done jobs past it once a second.
    fn floor(
        &self,
        load: Load,
        finished: Arc<AtomicU64>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let (pool, table) = (self.pool.clone(), self.floor.clone());
        tokio::spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            if let Some(keep) = load.retention {
                let (pool, stop) = (pool.clone(), stop.clone());
                let prune = for_table(
                    include_str!("../sql/mysql/sustained_floor_prune.sql"),
                    &table,
                );
                set.spawn(async move {
                    while !stop.is_cancelled() {
                        tokio::select! {
                            () = stop.cancelled() => break,
                            () = sleep(Duration::from_secs(1)) => {}
                        }
                        sqlx::query(AssertSqlSafe(prune.0.clone()))
                            .bind(keep.as_secs_f64())
                            .execute(&pool)
                            .await?;
                    }
                    Ok::<_, Error>(())
                });
            }
            for _ in 0..load.workers {
                let (pool, table) = (pool.clone(), table.clone());
                let (finished, stop) = (finished.clone(), stop.clone());
                set.spawn(async move {
                    let mut conn = pool.acquire().await?;
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(&mut *conn)
                        .await?;
                    let claim = for_table(
                        include_str!("../sql/mysql/sustained_floor_claim.sql"),
                        &table,
                    );
                    while !stop.is_cancelled() {
                        let mut tx = conn.begin().await?;
                        let ids: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(claim.0.clone()))
                            .bind(QUEUE)
                            .fetch_all(&mut *tx)
                            .await?;
                        if ids.is_empty() {
                            tx.commit().await?;
                            tokio::select! {
                                () = stop.cancelled() => {}
                                () = sleep(Duration::from_millis(20)) => {}
                            }
                            continue;
                        }
                        let start = for_ids(
                            include_str!("../sql/mysql/sustained_floor_start.sql"),
                            &table,
                            ids.len(),
                        );
                        ids.iter()
                            .fold(sqlx::query(start), |q, id| q.bind(id))
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        for _ in &ids {
                            sleep(load.job).await;
                        }
                        let complete = for_ids(
                            include_str!("../sql/mysql/sustained_floor_complete.sql"),
                            &table,
                            ids.len(),
                        );
                        ids.iter()
                            .fold(sqlx::query(complete), |q, id| q.bind(id))
                            .execute(&mut *conn)
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
