//! Bulk enqueue against its floor: one producer enqueues `jobs` no-op jobs with
//! [`Queue::enqueue_many`] in calls of `batch`, and the same rows are inserted raw, one
//! statement per `batch` (`INSERT … SELECT FROM unnest` on PostgreSQL, a multi-row `INSERT`
//! on MariaDB/MySQL) through sqlx, side by side in one run, alternating sides round by round,
//! into the same table emptied before each side. The floor sets only the queue and the
//! payload; lockwise also sends each job's priority, delay, attempts and key, and answers
//! every job's id in input order.
//!
//! The store is a schema (PostgreSQL) or a table prefix (MariaDB/MySQL, in the URL's
//! database) of the bench's own, dropped at the end.

use serde_json::json;
use sqlx::AssertSqlSafe;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::{Entry, Plan};
use lockwise::queue::{Job, Queue};
use lockwise::url::BackendUrl;

/// The queue's name in the bench's store.
const QUEUE: &str = "bench";

/// One side of the bench, on one database.
enum Store {
    Postgres {
        pool: sqlx::PgPool,
        schema: crate::conn::Schema,
    },
    Mysql {
        pool: sqlx::MySqlPool,
        table: String,
    },
}

/// Enqueues `jobs` no-op jobs in calls of `batch`, `plan.rounds` times per side, lockwise
/// and the floor alternating; unit jobs/s. `url` is a `postgres://` or `mysql://` URL.
pub async fn enqueue(
    url: &str,
    jobs: u64,
    batch: usize,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let batch = batch.max(1);
    let name = format!(
        "lockwise_bench_e_{}_{:04x}",
        std::process::id(),
        rand::random::<u16>()
    );
    let (store, queue, backend) = match BackendUrl::parse(url)? {
        BackendUrl::Postgres(url) => {
            let pool = crate::conn::pg_pool(&url, 2).await?;
            let schema = crate::conn::Schema::new(&name)?;
            let queue = Queue::with_schema(pool.clone(), &name, QUEUE)?;
            (Store::Postgres { pool, schema }, queue, "postgres")
        }
        BackendUrl::Mysql(url) => {
            let pool = crate::conn::mysql_pool(&url, 2).await?;
            let queue = Queue::mysql_with_prefix(pool.clone(), &name, QUEUE)?;
            let table = format!("{name}_jobs");
            (Store::Mysql { pool, table }, queue, "mysql")
        }
        _ => {
            return Err(Error::config(
                "the enqueue bench needs a postgres:// or mysql:// URL",
            ));
        }
    };
    let outcome = async {
        queue.migrate().await?;
        store.create_floor().await?;
        rounds(&store, &queue, backend, jobs, batch, plan, tick).await
    }
    .await;
    let dropped = store.drop_all().await;
    let entry = outcome?;
    dropped?;
    Ok(entry)
}

async fn rounds(
    store: &Store,
    queue: &Queue,
    backend: &str,
    jobs: u64,
    batch: usize,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let jobs = jobs.max(1);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for round in 0..plan.rounds {
        let order = if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for lockwise in order {
            store.truncate().await?;
            let started = Instant::now();
            let mut left = jobs;
            while left > 0 {
                let n = left.min(batch as u64) as usize;
                let done = if lockwise {
                    let ids = queue
                        .enqueue_many((0..n).map(|_| Job::new(json!({}))))
                        .await?;
                    ids.len()
                } else {
                    store.insert_raw(n).await?
                };
                if done != n {
                    return Err(Error::config(format!(
                        "the enqueue bench stored {done} of {n} jobs"
                    )));
                }
                left -= n as u64;
            }
            let rate = jobs as f64 / started.elapsed().as_secs_f64();
            if lockwise { &mut ours } else { &mut raw }.push(rate);
            tick();
        }
    }
    let mut entry = Entry::compare("enqueue", backend, "jobs/s", &ours, &raw)?;
    entry.tasks = Some(1);
    entry.jobs = Some(jobs);
    entry.batch = Some(batch);
    Ok(entry)
}

impl Store {
    /// Creates the floor's table beside lockwise's (PostgreSQL; on MariaDB/MySQL the floor
    /// inserts into lockwise's own jobs table, whose layout is the floor's).
    async fn create_floor(&self) -> Result<()> {
        if let Store::Postgres { pool, schema } = self {
            let sql = schema.sql(include_str!("../sql/postgres/floor_schema.sql"));
            sqlx::raw_sql(sql).execute(pool).await?;
        }
        Ok(())
    }

    /// Empties the jobs tables.
    async fn truncate(&self) -> Result<()> {
        match self {
            Store::Postgres { pool, schema } => {
                let sql = schema.sql(include_str!("../sql/postgres/queue_truncate.sql"));
                sqlx::raw_sql(sql).execute(pool).await?;
            }
            Store::Mysql { pool, table } => {
                let sql = include_str!("../sql/mysql/enqueue_truncate.sql");
                sqlx::raw_sql(AssertSqlSafe(sql.replace("{jobs}", table)))
                    .execute(pool)
                    .await?;
            }
        }
        Ok(())
    }

    /// The floor: `n` no-op jobs in one raw statement; returns the rows inserted.
    async fn insert_raw(&self, n: usize) -> Result<usize> {
        let payloads = vec![json!({}).to_string(); n];
        let done = match self {
            Store::Postgres { pool, schema } => {
                let sql = schema.sql(include_str!("../sql/postgres/enqueue_floor.sql"));
                sqlx::query(AssertSqlSafe(sql.0))
                    .bind(QUEUE)
                    .bind(&payloads)
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            Store::Mysql { pool, table } => {
                let text = include_str!("../sql/mysql/enqueue_floor.sql");
                let (head, row) = text
                    .rsplit_once("VALUES")
                    .ok_or_else(|| Error::config("enqueue_floor.sql has no VALUES"))?;
                let rows = vec![row.trim(); n].join(",");
                let sql = format!("{head}VALUES {rows}").replace("{jobs}", table);
                let mut insert = sqlx::query(AssertSqlSafe(sql));
                for payload in &payloads {
                    insert = insert.bind(QUEUE).bind(payload);
                }
                insert.execute(pool).await?.rows_affected()
            }
        };
        Ok(usize::try_from(done).unwrap_or(usize::MAX))
    }

    /// Drops the bench's schema or table and closes the pool.
    async fn drop_all(&self) -> Result<()> {
        let dropped = match self {
            Store::Postgres { pool, schema } => {
                let sql = schema.sql(include_str!("../sql/postgres/scaling_drop.sql"));
                let done = sqlx::raw_sql(sql).execute(pool).await.map(|_| ());
                pool.close().await;
                done
            }
            Store::Mysql { pool, table } => {
                let sql = include_str!("../sql/mysql/enqueue_drop.sql");
                let done = sqlx::raw_sql(AssertSqlSafe(sql.replace("{jobs}", table)))
                    .execute(pool)
                    .await
                    .map(|_| ());
                pool.close().await;
                done
            }
        };
        dropped.map_err(Error::from)
    }
}
