//! A job queue on PostgreSQL or MariaDB/MySQL: the database hands each worker different rows
//! with `FOR UPDATE SKIP LOCKED`, so many workers drain one queue without a lock and without
//! waiting for each other — the lesson's answer to "many workers, one queue".
//!
//! - **Claim** acknowledges the jobs the worker finished since its last claim and claims the
//!   next batch: one round trip per batch (one statement on PostgreSQL, one transaction on
//!   MySQL).
//! - **Lease and attempt fencing**: a claimed job has a lease, extended by heartbeats while
//!   its handler runs; the attempt number is the job's fencing token, and complete/fail are
//!   compare-and-set on `(id, attempt)`, so a worker whose job was rescued cannot finish it
//!   late.
//! - **Confirmed start**: a claimed job counts as started only once its worker, having received
//!   the claim's answer, confirms it (one statement per batch); a claim whose answer was lost
//!   costs no attempt.
//! - **Local deadline**: a worker cancels a handler whose lease it can no longer vouch for,
//!   before the database could give the job to another worker (see [`Worker`]).
//! - **Reaper**: jobs whose lease expired go back to available (attempt counted if the start
//!   was confirmed) or to dead.
//! - **Retries** with exponential backoff and jitter, the error history kept; **dead letters**
//!   listed, retried or purged; **idempotency keys**; enqueue inside the caller's transaction;
//!   LISTEN/NOTIFY wake-up on PostgreSQL, with polling as the fallback (and the only way on
//!   MySQL).
//! - **Periodic jobs** ([`Queue::periodic`]): one job per period of a cron pattern or an
//!   interval, whatever the number of schedulers; **pausing** a queue ([`Queue::pause`]).
//! - **Bulk enqueue**: [`Queue::enqueue_many`] stores many jobs in one transaction with bulk
//!   statements (`unnest` arrays on PostgreSQL, multi-row `INSERT` on MySQL), ids in input
//!   order, with the semantics of enqueueing them one by one.
//!
//! One [`Queue`] type serves both databases; [`connect`] picks the database from a URL.
//!
//! ```no_run
//! # async fn demo() -> lockwise::Result<()> {
//! use lockwise::queue::{ConnectOptions, Job, Worker};
//! use serde_json::json;
//!
//! let queue = lockwise::queue::connect(
//!     "postgres://postgres@127.0.0.1/app",
//!     ConnectOptions::default().queue("emails"),
//! )
//! .await?;
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

mod attempt_errors;
mod bulk;
mod connect;
mod control;
mod driver;
mod executor;
mod job;
#[cfg(feature = "mysql")]
mod mysql_driver;
mod periodic;
#[cfg(feature = "postgres")]
mod pg_driver;
mod protocol;
mod values;
mod worker;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use connect::ConnectOptions;
pub use executor::Executor;
pub use job::{Job, JobId, MAX_JOB_KEY_LEN, MAX_QUEUE_NAME_LEN, check_queue_name};
pub use periodic::{MAX_CATCH_UP, MAX_SCHEDULE_NAME_LEN, Periodic, Schedule, check_schedule_name};
pub use protocol::Protocol;
pub use values::{Claimed, Enqueued, JobInfo, JobState, QueueOverview, Stats, WorkerInfo};
pub use worker::{JobContext, Worker, WorkerReport};

use crate::error::{Error, Result};
use crate::metrics::{self, JobEvent};
use crate::url::BackendUrl;
use attempt_errors::utc_errors;
use driver::Driver;

/// One named queue in a PostgreSQL schema (default `lockwise`) or in MariaDB/MySQL tables
/// with a name prefix (default `lockwise`). Cheap to clone: clones share the pool and the
/// store.
///
/// Enqueueing, claiming and inspecting apply the missing migrations first (once per process
/// and store), except on a queue opened by [`connect`] with
/// [`ConnectOptions::migrate`]`(false)`, which never migrates; `heartbeat` and `hand_back`
/// only run for jobs already claimed.
#[derive(Clone)]
pub struct Queue {
    driver: Arc<dyn Driver>,
    name: Arc<str>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.name)
            .field("store", &self.driver)
            .finish()
    }
}

impl Queue {
    /// The queue `name` in the default PostgreSQL schema, `lockwise`.
    #[cfg(feature = "postgres")]
    pub fn new(pool: sqlx::PgPool, name: impl Into<String>) -> Self {
        use crate::db::pg_conn::{DEFAULT_SCHEMA, Schema};
        let driver = pg_driver::PgDriver::new(pool, Schema::default_schema(), DEFAULT_SCHEMA);
        Queue::from_driver(Arc::new(driver), name)
    }

    /// The queue `name` in PostgreSQL schema `schema` (lowercase letters, digits and `_`).
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool) -> lockwise::Result<()> {
    /// let queue = lockwise::queue::Queue::with_schema(pool, "billing", "invoices")?;
    /// queue.migrate().await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "postgres")]
    pub fn with_schema(pool: sqlx::PgPool, schema: &str, name: impl Into<String>) -> Result<Self> {
        let checked = crate::db::pg_conn::Schema::new(schema)?;
        let driver = pg_driver::PgDriver::new(pool, checked, schema);
        Ok(Queue::from_driver(Arc::new(driver), name))
    }

    /// The queue `name` on MariaDB/MySQL, in tables prefixed `lockwise` in the pool's database.
    #[cfg(feature = "mysql")]
    pub fn mysql(pool: sqlx::MySqlPool, name: impl Into<String>) -> Self {
        let driver = mysql_driver::MysqlDriver::new(pool, mysql_driver::DEFAULT_PREFIX);
        Queue::from_driver(Arc::new(driver), name)
    }

    /// The queue `name` on MariaDB/MySQL, in tables prefixed `prefix` (1 to 48 lowercase
    /// letters, digits and `_`): `<prefix>_jobs`.
    #[cfg(feature = "mysql")]
    pub fn mysql_with_prefix(
        pool: sqlx::MySqlPool,
        prefix: &str,
        name: impl Into<String>,
    ) -> Result<Self> {
        mysql_driver::check_prefix(prefix)?;
        let driver = mysql_driver::MysqlDriver::new(pool, prefix);
        Ok(Queue::from_driver(Arc::new(driver), name))
    }

    fn from_driver(driver: Arc<dyn Driver>, name: impl Into<String>) -> Self {
        Queue {
            driver,
            name: Arc::from(name.into()),
        }
    }

    /// The same store and pool, another queue name.
    pub fn named(&self, name: impl Into<String>) -> Self {
        Queue::from_driver(self.driver.clone(), name)
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pool, when the queue is on PostgreSQL.
    #[cfg(feature = "postgres")]
    pub fn postgres_pool(&self) -> Option<&sqlx::PgPool> {
        self.driver.postgres_pool()
    }

    /// The pool, when the queue is on MariaDB/MySQL.
    #[cfg(feature = "mysql")]
    pub fn mysql_pool(&self) -> Option<&sqlx::MySqlPool> {
        self.driver.mysql_pool()
    }

    /// Applies the store's versioned migrations that are missing, once per process; safe when
    /// several processes migrate at once (under an advisory lock, or `GET_LOCK` on MySQL).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: on PostgreSQL the migration is one transaction, on MySQL idempotent DDL,
    /// so a dropped call applies each version whole or not at all, and the next call goes on.
    pub async fn migrate(&self) -> Result<()> {
        self.driver.migrate().await
    }

    /// Enqueues a job and returns its id (the existing job's id for a duplicate key). A queue
    /// name or job that [`check_queue_name`] or [`Job::check`] refuses is an error before the
    /// database is asked, the same on both databases.
    ///
    /// # Cancel safety
    ///
    /// If the future is dropped after the insert reached the server, the job may exist
    /// without its id being known. Give jobs an idempotency [`key`](Job::key): enqueueing
    /// again then returns the same job instead of a second one.
    pub async fn enqueue(&self, job: Job) -> Result<JobId> {
        Ok(self.enqueue_with_status(job).await?.id)
    }

    /// Enqueues a job like [`enqueue`](Self::enqueue), and also says whether its idempotency
    /// key named a job already there (`duplicate`: nothing inserted, the existing job's id).
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::Job;
    /// let job = Job::new(serde_json::json!({"order": 42})).key("order-42");
    /// let enqueued = queue.enqueue_with_status(job).await?;
    /// if enqueued.duplicate {
    ///     println!("order 42 was already queued as job {}", enqueued.id);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// As for [`enqueue`](Self::enqueue).
    pub async fn enqueue_with_status(&self, job: Job) -> Result<Enqueued> {
        check_queue_name(&self.name)?;
        job.check()?;
        let done = self
            .driver
            .enqueue_many(&self.name, std::slice::from_ref(&job))
            .await?;
        self.count_enqueued(&done);
        done.into_iter().next().ok_or_else(|| {
            Error::config("the store returned no id for an enqueued job (a driver bug)")
        })
    }

    /// Enqueues many jobs in one transaction, all or none, and returns their ids in input
    /// order, with the same semantics as enqueueing them one by one: a job whose idempotency
    /// key names a job already there gets that job's id, and a key repeated in the call gets
    /// the first job's id. The jobs go in bulk statements (on PostgreSQL one
    /// `INSERT … SELECT FROM unnest(…)` per 10,000 jobs, on MariaDB/MySQL one multi-row
    /// `INSERT` per 10,000 jobs or 4 MiB of payload), and on PostgreSQL with one NOTIFY for
    /// all of them. A job whose key is unique for a window only ([`Job::unique_for`]) goes
    /// alone, in its place among the others, with the per-job statements.
    ///
    /// A queue name or a job that [`check_queue_name`] or [`Job::check`] refuses is an error
    /// (naming the job's position, from 0) before the database is asked: nothing is stored.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::Job;
    /// let jobs = (0..1_000).map(|n| Job::new(serde_json::json!({ "n": n })));
    /// let ids = queue.enqueue_many(jobs).await?;
    /// assert_eq!(ids.len(), 1_000);
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropped before the commit, the transaction rolls back and no job exists; dropped
    /// while the commit is under way, all of them may exist. Idempotency keys make a
    /// second attempt safe.
    pub async fn enqueue_many(&self, jobs: impl IntoIterator<Item = Job>) -> Result<Vec<JobId>> {
        let done = self.enqueue_many_with_status(jobs).await?;
        Ok(done.into_iter().map(|e| e.id).collect())
    }

    /// [`enqueue_many`](Self::enqueue_many), saying for each job whether its idempotency key
    /// named a job already there (`duplicate`), in this call too.
    ///
    /// # Cancel safety
    ///
    /// As for [`enqueue_many`](Self::enqueue_many).
    pub async fn enqueue_many_with_status(
        &self,
        jobs: impl IntoIterator<Item = Job>,
    ) -> Result<Vec<Enqueued>> {
        let jobs: Vec<Job> = jobs.into_iter().collect();
        check_queue_name(&self.name)?;
        check_jobs(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let done = self.driver.enqueue_many(&self.name, &jobs).await?;
        self.count_enqueued(&done);
        Ok(done)
    }

    /// [`enqueue_many`](Self::enqueue_many) inside the caller's transaction (as
    /// [`enqueue_in`](Self::enqueue_in)): the jobs exist only if it commits. On
    /// MariaDB/MySQL, in a REPEATABLE READ transaction, looking for the holders of the keys
    /// takes gap locks: concurrent enqueues with keys may then deadlock, and one of them fail
    /// (enqueue_many's own transactions are READ COMMITTED).
    ///
    /// # Cancel safety
    ///
    /// As for [`enqueue_in`](Self::enqueue_in).
    pub async fn enqueue_many_in<'c>(
        &self,
        conn: impl Into<Executor<'c>>,
        jobs: impl IntoIterator<Item = Job>,
    ) -> Result<Vec<Enqueued>> {
        let jobs: Vec<Job> = jobs.into_iter().collect();
        check_queue_name(&self.name)?;
        check_jobs(&jobs)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let done = self
            .driver
            .enqueue_many_in(conn.into(), &self.name, &jobs)
            .await?;
        self.count_enqueued(&done);
        Ok(done)
    }

    /// Enqueues inside the caller's transaction: if it rolls back, there is no job. Takes a
    /// `&mut` transaction, connection or pooled connection of the queue's database; one of
    /// the other database is an [`Error::InvalidConfig`].
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue, pool: sqlx::PgPool) -> lockwise::Result<()> {
    /// use lockwise::queue::Job;
    ///
    /// let mut tx = pool.begin().await?;
    /// // … the caller's own writes in `tx` …
    /// queue.enqueue_in(&mut tx, Job::new(serde_json::json!({"order": 42}))).await?;
    /// tx.commit().await?; // the job exists only if the order does
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// The insert belongs to the caller's transaction, which decides: a dropped call may
    /// have inserted the job in it or not, and the caller's commit or rollback settles it.
    pub async fn enqueue_in<'c>(&self, conn: impl Into<Executor<'c>>, job: Job) -> Result<JobId> {
        check_queue_name(&self.name)?;
        job.check()?;
        let done = self
            .driver
            .enqueue_in(conn.into(), &self.name, &job)
            .await?;
        self.count_enqueued(std::slice::from_ref(&done));
        Ok(done.id)
    }

    /// Counts the jobs inserted (not the duplicates) in `lockwise_queue_jobs_enqueued_total`.
    fn count_enqueued(&self, done: &[Enqueued]) {
        let inserted = done.iter().filter(|e| !e.duplicate).count();
        metrics::jobs(&self.name, JobEvent::Enqueued, inserted as u64);
    }

    /// Job counts by state. On PostgreSQL it reads the unfinished jobs and the counts of the
    /// finished ones (sealed by the workers' maintenance), plus the jobs finished since the
    /// last seal: never the whole history, so it stays cheap however much history is kept.
    /// On MariaDB/MySQL it counts the queue's rows.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn stats(&self) -> Result<Stats> {
        self.driver.stats(&self.name).await
    }

    /// The live workers of this store (of every queue), longest running first: each running
    /// [`Worker`] keeps a row, refreshed every third of its lease and removed when it stops;
    /// one that died drops out when its lease runs out.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.driver.workers().await
    }

    /// Every queue of this store (whatever this handle's name), by name: its jobs by state
    /// (as [`stats`](Self::stats)), the oldest ready job's age and the jobs done in the last
    /// minute. A queue appears while it has a job in any state.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// for q in queue.overview().await? {
    ///     println!("{}: {} ready, {} done in the last minute", q.queue, q.stats.ready, q.done_last_minute);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn overview(&self) -> Result<Vec<QueueOverview>> {
        let mut all = Vec::new();
        for queue in self.driver.queues().await? {
            let stats = self.driver.stats(&queue).await?;
            let done_last_minute = self
                .driver
                .done_since(&queue, Duration::from_secs(60))
                .await?;
            all.push(QueueOverview {
                queue,
                stats,
                done_last_minute,
            });
        }
        Ok(all)
    }

    /// The dead letters, oldest first (by when they died), at most `limit`: the same
    /// [`JobInfo`] as [`job`](Self::job) and [`list`](Self::list) give.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn dead(&self, limit: i64) -> Result<Vec<JobInfo>> {
        self.driver.dead(&self.name, limit).await
    }

    /// The store's upkeep under sustained load (PostgreSQL: truncates drained ring segments
    /// and seals the finished counts); the worker calls it ten times a second. No further
    /// statement once `stop` is cancelled.
    async fn maintain(&self, stop: &CancellationToken) -> Result<()> {
        self.driver.maintain(stop).await
    }

    /// Calls `wake` whenever a job of one of `queues` may have been enqueued, until `stop`.
    async fn wake_ups(&self, queues: &[&str], wake: Arc<Notify>, stop: CancellationToken) {
        self.driver.wake_ups(queues, wake, stop).await;
    }
}

/// [`Job::check`] for every job; the error names the first bad job's position.
fn check_jobs(jobs: &[Job]) -> Result<()> {
    for (i, job) in jobs.iter().enumerate() {
        job.check().map_err(|e| match e {
            Error::InvalidJob { reason } => Error::InvalidJob {
                reason: format!("job {i} of {}: {reason}", jobs.len()),
            },
            other => other,
        })?;
    }
    Ok(())
}

/// A time the statements return as µs since the Unix epoch (negative before it).
fn from_micros(us: i64) -> SystemTime {
    let magnitude = Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        SystemTime::UNIX_EPOCH + magnitude
    } else {
        SystemTime::UNIX_EPOCH - magnitude
    }
}

/// The state a statement reports (`ready`, `scheduled` or a stored state).
fn reported_state(name: &str) -> Result<JobState> {
    name.parse().map_err(|_| {
        Error::config(format!(
            "the store holds a job in an unknown state {name:?}"
        ))
    })
}

/// The stored name of a finished state, or a typed error for the others.
pub(super) fn finished_state(state: JobState) -> Result<&'static str> {
    if state.is_finished() {
        Ok(state.as_str())
    } else {
        Err(Error::config(format!(
            "only finished jobs are pruned (done, dead or cancelled), not {state} ones"
        )))
    }
}

/// Opens the queue a URL names — `postgres://` or `postgresql://` for PostgreSQL, `mysql://`
/// or `mariadb://` for MariaDB/MySQL — and migrates it (unless
/// [`ConnectOptions::migrate`]`(false)`). The pool must answer within 5 s.
///
/// Errors: a malformed URL, another scheme, or a bad schema/prefix is an
/// [`Error::InvalidConfig`]; with `migrate(false)`, a store not migrated is an
/// [`Error::NotMigrated`]; a server that refuses or does not answer is an
/// [`Error::Backend`]. Messages never contain the password.
///
/// ```no_run
/// # async fn demo() -> lockwise::Result<()> {
/// use lockwise::queue::{ConnectOptions, connect};
/// let queue = connect("mysql://root@127.0.0.1/app", ConnectOptions::default().queue("emails")).await?;
/// println!("{:?}", queue.stats().await?);
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Cancel safe: a dropped call closes the pool it opened, and its migration, if it began,
/// is applied whole or not at all (see [`Queue::migrate`]).
pub async fn connect(url: &str, options: ConnectOptions) -> Result<Queue> {
    let queue = match BackendUrl::parse(url)? {
        #[cfg(feature = "postgres")]
        BackendUrl::Postgres(url) => {
            let pool = crate::db::pg_conn::pool(&url, options.max_connections).await?;
            Queue::with_schema(pool, &options.schema, options.queue)?
        }
        #[cfg(feature = "mysql")]
        BackendUrl::Mysql(url) => {
            let pool = crate::db::mysql_conn::pool(&url, options.max_connections).await?;
            Queue::mysql_with_prefix(pool, &options.schema, options.queue)?
        }
        _ => {
            return Err(Error::config(
                "the queue needs a postgres:// or mysql:// URL",
            ));
        }
    };
    if options.migrate {
        queue.migrate().await?;
    } else {
        queue.driver.verify_migrated().await?;
    }
    Ok(queue)
}
