//! The internal driver interface between [`Queue`](super::Queue) and a database: **not for
//! user code**. Each database implements it in a folder of its own (`queue/pg_driver/`,
//! `queue/mysql_driver/`) that holds its statements (SQL under `sql/<database>/queue/`); the public
//! API and the worker runtime call only this trait, so they know no database. How jobs are
//! enqueued in bulk is written once, in [`super::bulk`]: a driver supplies its statements.
//!
//! Every method mirrors the [`Queue`](super::Queue) method of the same name, which documents
//! its meaning and its cancel safety; `queue` is the queue's name where the statement is per
//! queue.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Claimed, Enqueued, Executor, Job, JobId, JobInfo, JobState, Stats, WorkerInfo};
use crate::error::Result;

/// One claim: acknowledge `finished` (id, attempt) as done, then claim up to `limit` ready
/// jobs of the `queues` (one or more, in priority order across them) for `worker`, leased for
/// `lease`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimRequest<'a> {
    pub(crate) queues: &'a [&'a str],
    pub(crate) worker: &'a str,
    pub(crate) limit: usize,
    pub(crate) lease: Duration,
    pub(crate) finished: &'a [(JobId, i32)],
}

/// One failed attempt: retried after `retry_in`, or dead when the attempts are used up or
/// `final_failure` is set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedAttempt<'a> {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
    pub(crate) error: &'a str,
    pub(crate) retry_in: Duration,
    pub(crate) final_failure: bool,
}

/// What one tick of a periodic schedule decides while it holds the schedule's row: given the
/// database's clock (µs since the Unix epoch) and the newest period recorded (a Unix second),
/// the period to record and the jobs to enqueue with it; `None` when nothing is due.
pub(crate) type PeriodicPlan<'a> =
    dyn Fn(i64, Option<i64>) -> Option<(i64, Vec<Job>)> + Send + Sync + 'a;

/// What one tick did: the database's clock it read, and the jobs it enqueued.
#[derive(Debug)]
pub(crate) struct Tick {
    pub(crate) now_micros: i64,
    pub(crate) enqueued: Vec<Enqueued>,
}

/// A queue store on one database. Internal: its methods may change in any release.
/// What a running worker says about itself in its row (see [`Driver::worker_seen`]).
#[derive(Debug)]
pub(crate) struct Presence<'a> {
    pub(crate) id: &'a str,
    pub(crate) host: &'a str,
    pub(crate) pid: i32,
    pub(crate) queues: &'a [String],
    pub(crate) concurrency: i32,
    pub(crate) running: i32,
}

#[async_trait]
pub(crate) trait Driver: std::fmt::Debug + Send + Sync + 'static {
    /// Applies the missing migrations, once per process and store.
    async fn migrate(&self) -> Result<()>;

    /// Checks, creating nothing, that the store's migrations are all applied
    /// ([`Error::NotMigrated`](crate::Error::NotMigrated) if not); from then on the store
    /// counts as migrated and never migrates.
    async fn verify_migrated(&self) -> Result<()>;

    /// Inserts jobs (or finds the jobs with the same idempotency keys): one job on a pooled
    /// connection, several in one transaction, in bulk statements ([`insert_all`]).
    async fn enqueue_many(&self, queue: &str, jobs: &[Job]) -> Result<Vec<Enqueued>>;

    /// Inserts one job through the caller's connection; a connection of another database is
    /// an [`Error::InvalidConfig`](crate::Error::InvalidConfig).
    async fn enqueue_in(&self, conn: Executor<'_>, queue: &str, job: &Job) -> Result<Enqueued>;

    /// Inserts jobs through the caller's connection ([`insert_in`]), in its transaction.
    async fn enqueue_many_in(
        &self,
        conn: Executor<'_>,
        queue: &str,
        jobs: &[Job],
    ) -> Result<Vec<Enqueued>>;

    /// Acknowledges the request's finished jobs as done, then claims up to its limit.
    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Vec<Claimed>>;

    /// Marks claimed jobs started (compare-and-set on id and attempt); returns the ids
    /// confirmed.
    async fn confirm_started(&self, claimed: &[(JobId, i32)]) -> Result<Vec<JobId>>;

    /// Marks jobs done (compare-and-set on id and attempt).
    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64>;

    /// Records a failed attempt (compare-and-set); `false` when the attempt lost the job.
    async fn fail(&self, failed: FailedAttempt<'_>) -> Result<bool>;

    /// Extends leases; returns the jobs still owned.
    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>>;

    /// Gives unfinished jobs back (graceful shutdown).
    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64>;

    /// Rescues expired leases of every queue in the store (one reaper at a time).
    async fn reap(&self) -> Result<u64>;

    /// Job counts of one queue by state.
    async fn stats(&self, queue: &str) -> Result<Stats>;

    /// Every queue of the store with a job in any state (or finished counts kept), by name.
    async fn queues(&self) -> Result<Vec<String>>;

    /// How many jobs of one queue finished done within `since`.
    async fn done_since(&self, queue: &str, since: Duration) -> Result<i64>;

    /// Creates or refreshes a running worker's row, alive for `lease` from now.
    async fn worker_seen(&self, worker: &Presence<'_>, lease: Duration) -> Result<()>;

    /// Removes a stopping worker's row.
    async fn worker_gone(&self, id: &str) -> Result<()>;

    /// The live workers, longest running first.
    async fn workers(&self) -> Result<Vec<WorkerInfo>>;

    /// The dead letters of one queue, oldest first.
    async fn dead(&self, queue: &str, limit: i64) -> Result<Vec<JobInfo>>;

    /// Sends a dead job back to available with a fresh budget.
    async fn retry(&self, id: JobId) -> Result<bool>;

    /// Sends a cancelled job back to available with a fresh budget.
    async fn retry_cancelled(&self, id: JobId) -> Result<bool>;

    /// Deletes one dead letter and frees its key.
    async fn delete_dead(&self, id: JobId) -> Result<bool>;

    /// Sends every dead letter of `queue` back to available with a fresh budget.
    async fn retry_all(&self, queue: &str) -> Result<u64>;

    /// Makes a job due later due now.
    async fn run_now(&self, id: JobId) -> Result<bool>;

    /// Deletes the jobs of `queue` (every queue for `None`) finished in `state` (`done`,
    /// `dead` or `cancelled`) more than `older_than` ago.
    async fn delete_finished(
        &self,
        queue: Option<&str>,
        state: &'static str,
        older_than: Duration,
    ) -> Result<u64>;

    /// One job of any queue in the store.
    async fn job(&self, id: JobId) -> Result<Option<JobInfo>>;

    /// One queue's jobs in `state`, at most `limit`.
    async fn list(
        &self,
        queue: &str,
        state: JobState,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<JobInfo>>;

    /// Cancels a job of any queue in the store that has not finished.
    async fn cancel(&self, id: JobId) -> Result<bool>;

    /// Cancels the unfinished jobs of `queue` that are ready, scheduled or running, as asked;
    /// how many.
    async fn cancel_all(
        &self,
        queue: &str,
        ready: bool,
        scheduled: bool,
        running: bool,
    ) -> Result<u64>;

    /// Pauses (`true`) or resumes (`false`) a queue; whether that changed anything.
    async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool>;

    /// The paused queues of the store, by name.
    async fn paused(&self) -> Result<Vec<String>>;

    /// One tick of the periodic schedule `name` of `queue`, in one transaction: its row
    /// (created if new) locked, `plan` asked, the period it names recorded and its jobs
    /// enqueued, then committed.
    async fn periodic_tick(&self, name: &str, queue: &str, plan: &PeriodicPlan<'_>)
    -> Result<Tick>;

    /// Keeps the store healthy under sustained load, called by every worker ten times a second
    /// (PostgreSQL truncates the drained segments of its rings and seals the counts of its
    /// finished history); cheap when there is nothing to do. Once `stop` is cancelled it
    /// sends no further statement, so a stopping worker waits for one statement at most.
    async fn maintain(&self, stop: &CancellationToken) -> Result<()> {
        let _ = stop;
        Ok(())
    }

    /// Calls `wake` whenever a job of one of `queues` may have been enqueued, until `stop`.
    /// Stores without notifications never call it: the worker polls.
    async fn wake_ups(&self, queues: &[&str], wake: Arc<Notify>, stop: CancellationToken) {
        let _ = (queues, wake);
        stop.cancelled().await;
    }

    /// The PostgreSQL pool, for a store on PostgreSQL.
    #[cfg(feature = "postgres")]
    fn postgres_pool(&self) -> Option<&sqlx::PgPool> {
        None
    }

    /// The MySQL pool, for a store on MariaDB/MySQL.
    #[cfg(feature = "mysql")]
    fn mysql_pool(&self) -> Option<&sqlx::MySqlPool> {
        None
    }
}
