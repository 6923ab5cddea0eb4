//! A PostgreSQL job queue: the database hands each worker different rows with
//! `FOR UPDATE SKIP LOCKED`, so many workers drain one queue without a lock and without
//! waiting for each other — the lesson's answer to "many workers, one queue".
//!
//! - **Claim** is one statement per batch (a materialized CTE that locks at most `n` rows,
//!   then an `UPDATE … FROM` it), and it also acknowledges the jobs the worker finished since
//!   its last claim: one round trip per batch.
//! - **Lease and attempt fencing**: a claimed job has a lease, extended by heartbeats while
//!   its handler runs; the attempt number is the job's fencing token, and complete/fail are
//!   compare-and-set on `(id, attempt)`, so a worker whose job was rescued cannot finish it
//!   late.
//! - **Reaper**: jobs whose lease expired go back to available (attempt counted) or to dead.
//! - **Retries** with exponential backoff and jitter, the error history kept; **dead letters**
//!   listed, retried or purged; **idempotency keys**; enqueue inside the caller's transaction;
//!   LISTEN/NOTIFY wake-up with polling as the fallback.
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool) -> lockwise::Result<()> {
//! use lockwise::queue::{Job, Queue, Worker};
//! use serde_json::json;
//!
//! let queue = Queue::new(pool, "emails");
//! queue.migrate().await?;
//! queue.enqueue(Job::new(json!({"to": "a@example.com"})).key("welcome-42")).await?;
//!
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! Worker::new(queue)
//!     .concurrency(8)
//!     .batch(10)
//!     .run(|job| async move { println!("sending {}", job.payload); Ok::<_, String>(()) }, shutdown)
//!     .await?;
//! # Ok(()) }
//! ```

#[cfg(feature = "mysql")]
mod mysql;
mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::sync::OnceCell;

#[cfg(feature = "mysql")]
pub use mysql::MysqlQueue;
pub use worker::{JobContext, Worker, WorkerReport};

/// What a [`Worker`] needs from a queue: implemented by [`Queue`] (PostgreSQL) and
/// `MysqlQueue` (MariaDB/MySQL), which also share the rest of their API.
pub trait JobStore: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// The queue's name.
    fn name(&self) -> &str;
    /// Creates the tables if missing.
    fn migrate(&self) -> impl Future<Output = Result<()>> + Send;
    /// Claims up to `limit` jobs after acknowledging `finished` ones as done.
    fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> impl Future<Output = Result<Vec<Claimed>>> + Send;
    /// Marks jobs done (compare-and-set on id and attempt).
    fn complete(&self, finished: &[(JobId, i32)]) -> impl Future<Output = Result<u64>> + Send;
    /// Records a failed attempt (compare-and-set); `false` when the attempt lost the job.
    fn fail(
        &self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Extends leases; returns the jobs still owned.
    fn heartbeat(
        &self,
        running: &[(JobId, i32)],
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<JobId>>> + Send;
    /// Gives unfinished jobs back (graceful shutdown).
    fn hand_back(&self, running: &[(JobId, i32)]) -> impl Future<Output = Result<u64>> + Send;
    /// Rescues expired leases (one reaper at a time).
    fn reap(&self) -> impl Future<Output = Result<u64>> + Send;
    /// Job counts by state.
    fn stats(&self) -> impl Future<Output = Result<Stats>> + Send;
    /// Keeps the table healthy under sustained load (PostgreSQL: vacuums the jobs table when
    /// its dead tuples pile up faster than autovacuum clears them); one worker at a time.
    fn maintain(&self) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }
    /// Calls `wake` whenever a job may have been enqueued, until `stop`; stores without
    /// notifications never call it (the worker polls).
    fn wake_ups(
        &self,
        wake: std::sync::Arc<tokio::sync::Notify>,
        stop: tokio_util::sync::CancellationToken,
    ) -> impl Future<Output = ()> + Send;
}

impl JobStore for Queue {
    fn name(&self) -> &str {
        Queue::name(self)
    }
    async fn migrate(&self) -> Result<()> {
        Queue::migrate(self).await
    }
    async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        Queue::claim(self, worker, limit, lease, finished).await
    }
    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        Queue::complete(self, finished).await
    }
    async fn fail(
        &self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> Result<bool> {
        Queue::fail(self, id, attempt, error, retry_in, final_failure).await
    }
    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        Queue::heartbeat(self, running, lease).await
    }
    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        Queue::hand_back(self, running).await
    }
    async fn reap(&self) -> Result<u64> {
        Queue::reap(self).await
    }
    async fn stats(&self) -> Result<Stats> {
        Queue::stats(self).await
    }
    async fn maintain(&self) -> Result<()> {
        Queue::vacuum_if_needed(self, 10_000).await.map(|_| ())
    }
    async fn wake_ups(
        &self,
        wake: std::sync::Arc<tokio::sync::Notify>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        worker::listen(self.clone(), wake, stop).await;
    }
}

use crate::db::postgres::{ADVISORY_CLASS, DEFAULT_SCHEMA, Schema};
use crate::error::{Error, Result};

/// The SQL of one queue schema, with the schema name filled in once.
#[derive(Debug)]
struct Statements {
    schema: Schema,
    channel: String,
    enqueue: String,
    claim: String,
    fail: String,
    heartbeat: String,
    reap: String,
    hand_back: String,
    migrated: OnceCell<()>,
}

impl Statements {
    fn new(schema_name: &str) -> Result<Self> {
        Ok(Self::with(Schema::new(schema_name)?, schema_name))
    }

    fn with(schema: Schema, schema_name: &str) -> Self {
        let channel = format!("{schema_name}_jobs");
        let fill = |template: &str| schema.sql(&template.replace("{channel}", &channel)).0;
        Statements {
            enqueue: fill(include_str!("../../sql/postgres/queue/enqueue.sql")),
            claim: fill(include_str!("../../sql/postgres/queue/claim.sql")),
            fail: fill(include_str!("../../sql/postgres/queue/fail.sql")),
            heartbeat: fill(include_str!("../../sql/postgres/queue/heartbeat.sql")),
            reap: fill(include_str!("../../sql/postgres/queue/reap.sql")),
            hand_back: fill(include_str!("../../sql/postgres/queue/hand_back.sql")),
            schema,
            channel,
            migrated: OnceCell::new(),
        }
    }

    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        self.schema.sql(template)
    }
}

/// The id of a job, as stored (and as `lockwise queue` prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub i64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for JobId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        s.trim().parse().map(JobId)
    }
}

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct Job {
    payload: Value,
    priority: i16,
    delay: Duration,
    max_attempts: i32,
    key: Option<String>,
}

impl Job {
    /// A job carrying `payload`: priority 0, ready now, at most 5 attempts.
    pub fn new(payload: Value) -> Self {
        Job {
            payload,
            priority: 0,
            delay: Duration::ZERO,
            max_attempts: 5,
            key: None,
        }
    }

    /// An idempotency key: enqueueing a second job with the same key in the same queue
    /// returns the first job's id instead.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Lower runs first (default 0).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Runs no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// At most this many attempts before the job is dead (at least 1).
    pub fn max_attempts(mut self, attempts: u16) -> Self {
        self.max_attempts = i32::from(attempts.max(1));
        self
    }
}

/// A job claimed by a worker.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The job.
    pub id: JobId,
    /// Its attempt number, starting at 1: the fencing token of this execution.
    pub attempt: i32,
    /// Attempts allowed in all.
    pub max_attempts: i32,
    /// What was enqueued.
    pub payload: Value,
}

/// Job counts of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Every job not finished and not running: ready, scheduled, and waiting to retry.
    pub pending: i64,
    /// Of `pending`, those whose time has not come yet (scheduled or waiting to retry).
    pub scheduled: i64,
    /// Claimed by a worker.
    pub running: i64,
    /// Finished.
    pub done: i64,
    /// Attempts used up (dead letters).
    pub dead: i64,
}

/// A dead letter.
#[derive(Debug, Clone)]
pub struct DeadJob {
    /// The job.
    pub id: JobId,
    /// What was enqueued.
    pub payload: Value,
    /// Attempts made.
    pub attempts: i32,
    /// The last error.
    pub last_error: Option<String>,
    /// Every attempt's error: `[{attempt, at, error}, …]`.
    pub errors: Value,
}

/// One named queue in a schema (default `lockwise`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Queue {
    pool: PgPool,
    name: String,
    sql: Arc<Statements>,
}

/// `(id, attempt)` pairs as the two arrays the statements `unnest`.
fn columns(jobs: &[(JobId, i32)]) -> (Vec<i64>, Vec<i32>) {
    jobs.iter().map(|(id, attempt)| (id.0, *attempt)).unzip()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Queue {
    /// The queue `name` in the default schema.
    pub fn new(pool: PgPool, name: impl Into<String>) -> Self {
        Queue {
            pool,
            name: name.into(),
            sql: Arc::new(Statements::with(Schema::default_schema(), DEFAULT_SCHEMA)),
        }
    }

    /// The queue `name` in schema `schema` (lowercase letters, digits and `_`).
    pub fn with_schema(pool: PgPool, schema: &str, name: impl Into<String>) -> Result<Self> {
        Ok(Queue {
            pool,
            name: name.into(),
            sql: Arc::new(Statements::new(schema)?),
        })
    }

    /// The same schema and pool, another queue name.
    pub fn named(&self, name: impl Into<String>) -> Self {
        Queue {
            name: name.into(),
            ..self.clone()
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The NOTIFY channel of this schema's queues (the payload is the queue name).
    pub fn channel(&self) -> &str {
        &self.sql.channel
    }

    /// Applies the schema's versioned migrations that are missing, once per process; safe when
    /// several processes migrate at once (under an advisory lock).
    pub async fn migrate(&self) -> Result<()> {
        self.sql
            .migrated
            .get_or_try_init(|| async {
                let mut conn = self.pool.acquire().await?;
                self.apply_migrations(&mut conn).await
            })
            .await
            .map(|_| ())
    }

    async fn apply_migrations(&self, conn: &mut PgConnection) -> Result<()> {
        const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("../../sql/postgres/queue/v1.sql"))];
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, 1)")
            .bind(ADVISORY_CLASS)
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(self.sql.sql(
            "CREATE SCHEMA IF NOT EXISTS {schema}; \
             CREATE TABLE IF NOT EXISTS {schema}.queue_migrations \
               (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        ))
        .execute(&mut *tx)
        .await?;
        let current: Option<i32> = sqlx::query_scalar(
            self.sql
                .sql("SELECT max(version) FROM {schema}.queue_migrations"),
        )
        .fetch_one(&mut *tx)
        .await?;
        for (version, text) in MIGRATIONS {
            if current.is_some_and(|c| c >= *version) {
                continue;
            }
            let text = text.replace("{channel}", &self.sql.channel);
            sqlx::raw_sql(self.sql.sql(&text)).execute(&mut *tx).await?;
            sqlx::query(
                self.sql
                    .sql("INSERT INTO {schema}.queue_migrations (version) VALUES ($1)"),
            )
            .bind(version)
            .execute(&mut *tx)
            .await?;
            tracing::info!(version, "queue schema migrated");
        }
        tx.commit().await.map_err(Error::from)
    }

    /// Enqueues a job and returns its id (the existing job's id for a duplicate key).
    pub async fn enqueue(&self, job: Job) -> Result<JobId> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        self.insert(&mut conn, &job).await
    }

    /// Enqueues inside the caller's transaction: if it rolls back, there is no job.
    pub async fn enqueue_in(&self, conn: &mut PgConnection, job: Job) -> Result<JobId> {
        self.migrate().await?;
        self.insert(conn, &job).await
    }

    /// Enqueues many jobs in one transaction (one NOTIFY for all of them).
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

    async fn insert(&self, conn: &mut PgConnection, job: &Job) -> Result<JobId> {
        for _ in 0..3 {
            let id: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.enqueue.clone()))
                .bind(&self.name)
                .bind(&job.payload)
                .bind(job.priority)
                .bind(secs(job.delay))
                .bind(job.max_attempts)
                .bind(job.key.as_deref())
                .fetch_optional(&mut *conn)
                .await?;
            if let Some(id) = id {
                return Ok(JobId(id));
            }
            // A concurrent enqueue with the same key committed after this statement's
            // snapshot: look again.
        }
        Err(Error::backend_msg(
            "postgres",
            "enqueue found neither a new nor an existing job",
        ))
    }

    /// Claims up to `limit` ready jobs for `worker` with a lease, after acknowledging the
    /// `finished` jobs as done (compare-and-set on id and attempt). One statement.
    pub async fn claim(
        &self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        self.migrate().await?;
        let (ids, attempts) = columns(finished);
        let rows = sqlx::query(AssertSqlSafe(self.sql.claim.clone()))
            .bind(&self.name)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(secs(lease))
            .bind(worker)
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Claimed {
                    id: JobId(row.try_get("id")?),
                    attempt: row.try_get("attempt")?,
                    max_attempts: row.try_get("max_attempts")?,
                    payload: row.try_get("payload")?,
                })
            })
            .collect()
    }

    /// Marks jobs done (compare-and-set on id and attempt); returns how many were.
    pub async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        self.migrate().await?;
        let (ids, attempts) = columns(finished);
        let done = sqlx::query(self.sql.sql(
            "UPDATE {schema}.jobs j SET state = 'done', finished_at = now(), lease_until = NULL \
               FROM unnest($1::bigint[], $2::int[]) AS f(id, attempt) \
              WHERE j.id = f.id AND j.attempt = f.attempt AND j.state = 'running'",
        ))
        .bind(&ids)
        .bind(&attempts)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Records a failed attempt: retried after `retry_in`, or dead when the attempts are used
    /// up or `final_failure` is set. `false` when this attempt no longer owns the job.
    pub async fn fail(
        &self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> Result<bool> {
        self.migrate().await?;
        let state: Option<String> = sqlx::query_scalar(AssertSqlSafe(self.sql.fail.clone()))
            .bind(id.0)
            .bind(attempt)
            .bind(error)
            .bind(secs(retry_in))
            .bind(final_failure)
            .fetch_optional(&self.pool)
            .await?;
        Ok(state.is_some())
    }

    /// Extends the leases of running jobs (compare-and-set); returns the ids still owned.
    pub async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        let (ids, attempts) = columns(running);
        let owned: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.heartbeat.clone()))
            .bind(&ids)
            .bind(&attempts)
            .bind(secs(lease))
            .fetch_all(&self.pool)
            .await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    /// Gives unfinished jobs back at once (graceful shutdown); their budget grows by one.
    pub async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        let (ids, attempts) = columns(running);
        let back: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.hand_back.clone()))
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(&self.pool)
            .await?;
        Ok(back.len() as u64)
    }

    /// Rescues jobs of every queue in the schema whose lease expired, unless another reaper is
    /// at work (one at a time, under an advisory lock). Returns how many were rescued.
    pub async fn reap(&self) -> Result<u64> {
        self.migrate().await?;
        let mut tx = self.pool.begin().await?;
        let alone: bool = sqlx::query_scalar(
            self.sql
                .sql("SELECT pg_try_advisory_xact_lock($1, hashtext('{schema}.reaper'))"),
        )
        .bind(ADVISORY_CLASS)
        .fetch_one(&mut *tx)
        .await?;
        if !alone {
            return Ok(0);
        }
        let rescued = sqlx::query(AssertSqlSafe(self.sql.reap.clone()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if rescued.rows_affected() > 0 {
            tracing::warn!(
                jobs = rescued.rows_affected(),
                "rescued jobs whose lease expired"
            );
        }
        Ok(rescued.rows_affected())
    }

    /// Vacuums the jobs table if it has more than `dead_tuples` dead row versions and no other
    /// process is vacuuming it through lockwise. Every claim and completion leaves a dead
    /// version behind, and the claim's index scan starts among the oldest entries, so a queue
    /// under sustained load slows down as they pile up; autovacuum alone wakes up too rarely
    /// (once a minute by default). Returns whether it vacuumed.
    pub async fn vacuum_if_needed(&self, dead_tuples: i64) -> Result<bool> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        let dead: Option<i64> = sqlx::query_scalar(self.sql.sql(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.jobs'::regclass",
        ))
        .fetch_optional(&mut *conn)
        .await?;
        if dead.unwrap_or(0) < dead_tuples {
            return Ok(false);
        }
        let alone: bool = sqlx::query_scalar(
            self.sql
                .sql("SELECT pg_try_advisory_lock($1, hashtext('{schema}.vacuum'))"),
        )
        .bind(ADVISORY_CLASS)
        .fetch_one(&mut *conn)
        .await?;
        if !alone {
            return Ok(false);
        }
        let vacuumed = sqlx::query(self.sql.sql("VACUUM (ANALYZE) {schema}.jobs"))
            .execute(&mut *conn)
            .await
            .map_err(Error::from);
        sqlx::query(
            self.sql
                .sql("SELECT pg_advisory_unlock($1, hashtext('{schema}.vacuum'))"),
        )
        .bind(ADVISORY_CLASS)
        .execute(&mut *conn)
        .await?;
        vacuumed.map(|_| true)
    }

    /// Job counts by state.
    pub async fn stats(&self) -> Result<Stats> {
        self.migrate().await?;
        let row = sqlx::query(self.sql.sql(
            "SELECT count(*) FILTER (WHERE state = 'available') AS pending, \
                    count(*) FILTER (WHERE state = 'available' AND run_at > now()) AS scheduled, \
                    count(*) FILTER (WHERE state = 'running') AS running, \
                    count(*) FILTER (WHERE state = 'done') AS done, \
                    count(*) FILTER (WHERE state = 'dead') AS dead \
               FROM {schema}.jobs WHERE queue = $1",
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
        let rows = sqlx::query(self.sql.sql(
            "SELECT id, payload, attempt, last_error, errors FROM {schema}.jobs \
              WHERE queue = $1 AND state = 'dead' ORDER BY finished_at, id LIMIT $2",
        ))
        .bind(&self.name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DeadJob {
                    id: JobId(r.try_get("id")?),
                    payload: r.try_get("payload")?,
                    attempts: r.try_get("attempt")?,
                    last_error: r.try_get("last_error")?,
                    errors: r.try_get("errors")?,
                })
            })
            .collect()
    }

    /// Sends a dead job back to available with a fresh budget of attempts. `false` if it is
    /// not a dead job of this schema.
    pub async fn retry(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql.sql(
            "UPDATE {schema}.jobs SET state = 'available', run_at = now(), finished_at = NULL, \
                    max_attempts = attempt + max_attempts \
              WHERE id = $1 AND state = 'dead'",
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

    /// Deletes dead letters of *every* queue in the schema that died more than `older_than` ago.
    pub async fn purge_dead_everywhere(&self, older_than: Duration) -> Result<u64> {
        self.migrate().await?;
        let deleted = sqlx::query(self.sql.sql(
            "DELETE FROM {schema}.jobs WHERE state = 'dead' \
               AND finished_at < now() - make_interval(secs => $1)",
        ))
        .bind(secs(older_than))
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
        let deleted = sqlx::query(self.sql.sql(
            "DELETE FROM {schema}.jobs WHERE queue = $1 AND state = $2 \
               AND finished_at < now() - make_interval(secs => $3)",
        ))
        .bind(&self.name)
        .bind(state)
        .bind(secs(older_than))
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}
