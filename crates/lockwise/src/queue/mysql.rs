//! The same queue on MariaDB 10.6+ / MySQL 8: `SELECT … FOR UPDATE SKIP LOCKED` inside a READ
//! COMMITTED transaction, then `UPDATE` (under REPEATABLE READ, next-key locks would block
//! concurrent enqueues). No notifications: workers poll.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::mysql::{MySqlConnection, MySqlPool};
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::sync::OnceCell;

use super::{Claimed, DeadJob, Job, JobId, JobStore, Stats};
use crate::error::{Error, Result};

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A queue in MariaDB/MySQL. Tables `<prefix>_jobs` and `<prefix>_queue_migrations` (prefix
/// `lockwise` by default) in the URL's database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MysqlQueue {
    pool: MySqlPool,
    name: String,
    table: Arc<String>,
    migrated: Arc<OnceCell<()>>,
}

/// `(?,?),(?,?),…` for `n` (id, attempt) pairs.
fn pairs(n: usize) -> String {
    vec!["(?,?)"; n].join(",")
}

fn list(n: usize) -> String {
    vec!["?"; n].join(",")
}

type MyQuery<'q> = sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>;

/// Binds `(id, attempt)` pairs for a `(id, attempt) IN (…)` made by [`pairs`].
fn bind_pairs<'q>(mut q: MyQuery<'q>, jobs: &[(JobId, i32)]) -> MyQuery<'q> {
    for (id, attempt) in jobs {
        q = q.bind(id.0).bind(*attempt);
    }
    q
}

impl MysqlQueue {
    /// The queue `name` in tables prefixed `lockwise`.
    pub fn new(pool: MySqlPool, name: impl Into<String>) -> Self {
        MysqlQueue {
            pool,
            name: name.into(),
            table: Arc::new("lockwise_jobs".to_owned()),
            migrated: Arc::default(),
        }
    }

    /// The queue `name` in tables prefixed `prefix` (lowercase letters, digits and `_`).
    pub fn with_prefix(pool: MySqlPool, prefix: &str, name: impl Into<String>) -> Result<Self> {
        let valid = !prefix.is_empty()
            && prefix.len() <= 48
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::config(format!(
                "invalid table prefix {prefix:?}: use 1 to 48 lowercase letters, digits and _"
            )));
        }
        Ok(MysqlQueue {
            table: Arc::new(format!("{prefix}_jobs")),
            ..MysqlQueue::new(pool, name)
        })
    }

    /// The same tables and pool, another queue name.
    pub fn named(&self, name: impl Into<String>) -> Self {
        MysqlQueue {
            name: name.into(),
            ..self.clone()
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{jobs}", &self.table))
    }

    /// Creates the tables if missing (version 1), one process at a time.
    pub async fn migrate(&self) -> Result<()> {
        self.migrated
            .get_or_try_init(|| async {
                let mut conn = self.pool.acquire().await?;
                sqlx::query("SELECT GET_LOCK(?, 30)")
                    .bind(format!("{}:migrate", self.table))
                    .execute(&mut *conn)
                    .await?;
                let created = sqlx::raw_sql(self.sql(include_str!("../../sql/mysql/queue/v1.sql")))
                    .execute(&mut *conn)
                    .await
                    .map_err(Error::from);
                sqlx::query("SELECT RELEASE_LOCK(?)")
                    .bind(format!("{}:migrate", self.table))
                    .execute(&mut *conn)
                    .await?;
                created.map(|_| ())
            })
            .await
            .map(|_| ())
    }

    /// Enqueues a job and returns its id (the existing job's id for a duplicate key).
    pub async fn enqueue(&self, job: Job) -> Result<JobId> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        self.insert(&mut conn, &job).await
    }

    /// Enqueues inside the caller's transaction: if it rolls back, there is no job.
    pub async fn enqueue_in(&self, conn: &mut MySqlConnection, job: Job) -> Result<JobId> {
        self.migrate().await?;
        self.insert(conn, &job).await
    }

    /// Enqueues many jobs in one transaction.
    pub async fn enqueue_many(&self, jobs: impl IntoIterator<Item = Job>) -> Result<Vec<JobId>> {
        self.migrate().await?;
        let mut tx = self.pool.begin().await?;
        let mut ids = Vec::new();
        for job in jobs {
            ids.push(self.insert(&mut tx, &job).await?);
        }
        tx.commit().await?;
        Ok(ids)
    }

    async fn insert(&self, conn: &mut MySqlConnection, job: &Job) -> Result<JobId> {
        let done = sqlx::query(self.sql(
            "INSERT INTO {jobs} (queue, payload, priority, run_at, max_attempts, idempotency_key) \
             VALUES (?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND, ?, ?) \
             ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
        ))
        .bind(&self.name)
        .bind(job.payload.to_string())
        .bind(job.priority)
        .bind(micros(job.delay))
        .bind(job.max_attempts)
        .bind(job.key.as_deref())
        .execute(conn)
        .await?;
        i64::try_from(done.last_insert_id())
            .map(JobId)
            .map_err(|_| Error::backend_msg("mysql", "job id out of range"))
    }

    /// Claims up to `limit` ready jobs after acknowledging `finished` ones as done, in one
    /// READ COMMITTED transaction.
    pub async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .execute(&mut *conn)
            .await?;
        let mut tx = conn.begin().await?;
        self.mark_done(&mut *tx, finished).await?;
        if limit == 0 {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = sqlx::query_scalar(self.sql(
            "SELECT CAST(id AS SIGNED) FROM {jobs} \
              WHERE queue = ? AND state = 'available' AND run_at <= NOW(6) \
              ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
        ))
        .bind(&self.name)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?;
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let update = format!(
            "UPDATE {{jobs}} SET state = 'running', attempt = attempt + 1, \
               lease_until = NOW(6) + INTERVAL ? MICROSECOND, worker = ? WHERE id IN ({})",
            list(ids.len())
        );
        let mut q = sqlx::query(self.sql(&update))
            .bind(micros(lease))
            .bind(worker);
        for id in &ids {
            q = q.bind(id);
        }
        q.execute(&mut *tx).await?;
        let select = format!(
            "SELECT CAST(id AS SIGNED) AS id, payload, attempt, max_attempts FROM {{jobs}} \
              WHERE id IN ({}) ORDER BY priority, run_at, id",
            list(ids.len())
        );
        let mut q = sqlx::query(self.sql(&select));
        for id in &ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| {
                let payload: String = row.try_get("payload")?;
                Ok(Claimed {
                    id: JobId(row.try_get("id")?),
                    attempt: row.try_get("attempt")?,
                    max_attempts: row.try_get("max_attempts")?,
                    payload: serde_json::from_str(&payload).unwrap_or(Value::String(payload)),
                })
            })
            .collect()
    }

    /// Marks jobs done (compare-and-set on id and attempt); returns how many were.
    pub async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        if finished.is_empty() {
            return Ok(0);
        }
        self.migrate().await?;
        self.mark_done(&self.pool, finished).await
    }

    /// The compare-and-set completion shared by `claim` and `complete`.
    async fn mark_done<'e, E>(&self, executor: E, finished: &[(JobId, i32)]) -> Result<u64>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        if finished.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE {{jobs}} SET state = 'done', finished_at = NOW(6), lease_until = NULL \
             WHERE state = 'running' AND (id, attempt) IN ({})",
            pairs(finished.len())
        );
        let done = bind_pairs(sqlx::query(self.sql(&sql)), finished)
            .execute(executor)
            .await?;
        Ok(done.rows_affected())
    }

    /// Records a failed attempt; see [`Queue::fail`](super::Queue::fail).
    pub async fn fail(
        &self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> Result<bool> {
        self.migrate().await?;
        // MySQL assigns left to right: only columns not changed here are read.
        let done = sqlx::query(self.sql(
            "UPDATE {jobs} SET \
               errors = JSON_ARRAY_APPEND(COALESCE(errors, '[]'), '$', \
                 JSON_OBJECT('attempt', attempt, 'at', NOW(6), 'error', ?)), \
               last_error = ?, \
               run_at = IF(? OR attempt >= max_attempts, run_at, NOW(6) + INTERVAL ? MICROSECOND), \
               finished_at = IF(? OR attempt >= max_attempts, NOW(6), NULL), \
               lease_until = NULL, \
               state = IF(? OR attempt >= max_attempts, 'dead', 'available') \
             WHERE id = ? AND attempt = ? AND state = 'running'",
        ))
        .bind(error)
        .bind(error)
        .bind(final_failure)
        .bind(micros(retry_in))
        .bind(final_failure)
        .bind(final_failure)
        .bind(id.0)
        .bind(attempt)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Extends leases of running jobs (compare-and-set); returns the ids still owned.
    pub async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        if running.is_empty() {
            return Ok(Vec::new());
        }
        let update = format!(
            "UPDATE {{jobs}} SET lease_until = NOW(6) + INTERVAL ? MICROSECOND \
             WHERE state = 'running' AND (id, attempt) IN ({})",
            pairs(running.len())
        );
        bind_pairs(sqlx::query(self.sql(&update)).bind(micros(lease)), running)
            .execute(&self.pool)
            .await?;
        let select = format!(
            "SELECT CAST(id AS SIGNED) FROM {{jobs}} WHERE state = 'running' AND (id, attempt) IN ({})",
            pairs(running.len())
        );
        let mut q = sqlx::query_scalar(self.sql(&select));
        for (id, attempt) in running {
            q = q.bind(id.0).bind(attempt);
        }
        let owned: Vec<i64> = q.fetch_all(&self.pool).await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    /// Gives unfinished jobs back at once (graceful shutdown); their budget grows by one.
    pub async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        if running.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE {{jobs}} SET state = 'available', run_at = NOW(6), lease_until = NULL, \
               max_attempts = max_attempts + 1 \
             WHERE state = 'running' AND (id, attempt) IN ({})",
            pairs(running.len())
        );
        let back = bind_pairs(sqlx::query(self.sql(&sql)), running)
            .execute(&self.pool)
            .await?;
        Ok(back.rows_affected())
    }

    /// Rescues jobs whose lease expired, unless another reaper is at work (`GET_LOCK`).
    pub async fn reap(&self) -> Result<u64> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        let lock = format!("{}:reaper", self.table);
        let alone: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
            .bind(&lock)
            .fetch_one(&mut *conn)
            .await?;
        if alone != Some(1) {
            return Ok(0);
        }
        let rescued = sqlx::query(self.sql(
            "UPDATE {jobs} SET \
               errors = JSON_ARRAY_APPEND(COALESCE(errors, '[]'), '$', \
                 JSON_OBJECT('attempt', attempt, 'at', NOW(6), 'error', 'lease expired')), \
               last_error = CONCAT('lease expired (worker ', COALESCE(worker, '?'), ')'), \
               finished_at = IF(attempt >= max_attempts, NOW(6), NULL), \
               run_at = NOW(6), lease_until = NULL, \
               state = IF(attempt >= max_attempts, 'dead', 'available') \
             WHERE state = 'running' AND lease_until < NOW(6)",
        ))
        .execute(&mut *conn)
        .await
        .map_err(Error::from);
        sqlx::query("SELECT RELEASE_LOCK(?)")
            .bind(&lock)
            .execute(&mut *conn)
            .await?;
        Ok(rescued?.rows_affected())
    }

    /// Job counts by state.
    pub async fn stats(&self) -> Result<Stats> {
        self.migrate().await?;
        let row = sqlx::query(self.sql(
            "SELECT CAST(COALESCE(SUM(state = 'available'), 0) AS SIGNED) AS pending, \
                    CAST(COALESCE(SUM(state = 'available' AND run_at > NOW(6)), 0) AS SIGNED) AS scheduled, \
                    CAST(COALESCE(SUM(state = 'running'), 0) AS SIGNED) AS running, \
                    CAST(COALESCE(SUM(state = 'done'), 0) AS SIGNED) AS done, \
                    CAST(COALESCE(SUM(state = 'dead'), 0) AS SIGNED) AS dead \
               FROM {jobs} WHERE queue = ?",
        ))
        .bind(&self.name)
        .fetch_one(&self.pool)
        .await?;
        let get = |c: &str| row.try_get::<i64, _>(c).map_err(Error::from);
        Ok(Stats {
            pending: get("pending")?,
            scheduled: get("scheduled")?,
            running: get("running")?,
            done: get("done")?,
            dead: get("dead")?,
        })
    }

    /// The dead letters, oldest first.
    pub async fn dead(&self, limit: i64) -> Result<Vec<DeadJob>> {
        self.migrate().await?;
        let rows = sqlx::query(self.sql(
            "SELECT CAST(id AS SIGNED) AS id, payload, attempt, last_error, \
                    COALESCE(errors, '[]') AS errors \
               FROM {jobs} WHERE queue = ? AND state = 'dead' ORDER BY finished_at, id LIMIT ?",
        ))
        .bind(&self.name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let payload: String = r.try_get("payload")?;
                let errors: String = r.try_get("errors")?;
                Ok(DeadJob {
                    id: JobId(r.try_get("id")?),
                    payload: serde_json::from_str(&payload).unwrap_or(Value::String(payload)),
                    attempts: r.try_get("attempt")?,
                    last_error: r.try_get("last_error")?,
                    errors: serde_json::from_str(&errors).unwrap_or(Value::Null),
                })
            })
            .collect()
    }

    /// Sends a dead job back to available with a fresh budget of attempts.
    pub async fn retry(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(
            "UPDATE {jobs} SET max_attempts = attempt + max_attempts, state = 'available', \
                    run_at = NOW(6), finished_at = NULL WHERE id = ? AND state = 'dead'",
        ))
        .bind(id.0)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes dead letters of this queue that died more than `older_than` ago.
    pub async fn purge_dead(&self, older_than: Duration) -> Result<u64> {
        self.delete_finished("dead", older_than).await
    }

    /// Deletes dead letters of *every* queue in these tables that died more than `older_than`
    /// ago.
    pub async fn purge_dead_everywhere(&self, older_than: Duration) -> Result<u64> {
        self.migrate().await?;
        let deleted = sqlx::query(self.sql(
            "DELETE FROM {jobs} WHERE state = 'dead' AND finished_at <= NOW(6) - INTERVAL ? MICROSECOND",
        ))
        .bind(micros(older_than))
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// Retention: deletes jobs of this queue done more than `older_than` ago.
    pub async fn prune_done(&self, older_than: Duration) -> Result<u64> {
        self.delete_finished("done", older_than).await
    }

    async fn delete_finished(&self, state: &str, older_than: Duration) -> Result<u64> {
        self.migrate().await?;
        let deleted = sqlx::query(self.sql(
            "DELETE FROM {jobs} WHERE queue = ? AND state = ? \
               AND finished_at <= NOW(6) - INTERVAL ? MICROSECOND",
        ))
        .bind(&self.name)
        .bind(state)
        .bind(micros(older_than))
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}

impl JobStore for MysqlQueue {
    fn name(&self) -> &str {
        MysqlQueue::name(self)
    }
    async fn migrate(&self) -> Result<()> {
        MysqlQueue::migrate(self).await
    }
    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        MysqlQueue::claim(self, worker, limit, lease, finished).await
    }
    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        MysqlQueue::complete(self, finished).await
    }
    async fn fail(
        &self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> Result<bool> {
        MysqlQueue::fail(self, id, attempt, error, retry_in, final_failure).await
    }
    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        MysqlQueue::heartbeat(self, running, lease).await
    }
    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        MysqlQueue::hand_back(self, running).await
    }
    async fn reap(&self) -> Result<u64> {
        MysqlQueue::reap(self).await
    }
    async fn stats(&self) -> Result<Stats> {
        MysqlQueue::stats(self).await
    }
    async fn wake_ups(
        &self,
        _wake: Arc<tokio::sync::Notify>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        // No notifications in MySQL: the worker's poll is the only wake-up.
        stop.cancelled().await;
    }
}
