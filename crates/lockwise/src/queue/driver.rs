//! The internal driver interface between [`Queue`](super::Queue) and a database: **not for
//! user code**. Each database implements it in a file of its own (`queue/postgres.rs`,
//! `queue/mysql.rs`) that holds its SQL (under `sql/<database>/queue/`); the public API and
//! the worker runtime call only this trait, so they know no database.
//!
//! Every method mirrors the [`Queue`](super::Queue) method of the same name, which documents
//! its meaning and its cancel safety; `queue` is the queue's name where the statement is per
//! queue.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Claimed, Enqueued, Executor, Job, JobId, JobInfo, JobState, Stats};
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

/// A queue store on one database. Internal: its methods may change in any release.
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

    /// The dead letters of one queue, oldest first.
    async fn dead(&self, queue: &str, limit: i64) -> Result<Vec<JobInfo>>;

    /// Sends a dead job back to available with a fresh budget.
    async fn retry(&self, id: JobId) -> Result<bool>;

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
    async fn list(&self, queue: &str, state: JobState, limit: i64) -> Result<Vec<JobInfo>>;

    /// Cancels a job of any queue in the store that has not finished.
    async fn cancel(&self, id: JobId) -> Result<bool>;

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

/// The steps of enqueueing that differ between databases: the INSERT of one job (or the
/// lookup of the job with the same idempotency key), and the one statement that inserts a run
/// of jobs, on a connection of its database.
#[async_trait]
pub(super) trait Insert: Sync {
    /// The database.
    type Db: sqlx::Database;

    /// The most jobs one bulk statement carries.
    const MAX_ROWS: usize;

    /// The most payload bytes one bulk statement carries (a single larger payload still goes,
    /// alone).
    const MAX_BYTES: usize;

    /// The store's pool.
    fn pool(&self) -> &sqlx::Pool<Self::Db>;

    /// Readies a pooled connection for the transaction of [`insert_all`] (MySQL: READ
    /// COMMITTED, so that looking for keys takes no gap locks).
    async fn before_transaction(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
    ) -> Result<()> {
        let _ = conn;
        Ok(())
    }

    /// The largest payload, in bytes, that one statement of this server can carry (`None`: no
    /// limit below the protocol's). A job with a larger payload is an
    /// [`Error::InvalidJob`](crate::Error::InvalidJob) before anything is sent.
    async fn max_payload(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
    ) -> Result<Option<usize>> {
        let _ = conn;
        Ok(None)
    }

    /// Inserts `job` into `queue` through `conn`.
    async fn insert(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        queue: &str,
        job: &Job,
    ) -> Result<Enqueued>;

    /// Inserts `jobs` (no key twice, no uniqueness window; `payloads` their payloads as JSON
    /// text) into `queue` through `conn` in one statement, or finds the jobs holding their
    /// keys: one answer per job, in their order, `None` where the job holding its key
    /// committed too late for this statement to see it (the caller asks again).
    async fn insert_many(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        queue: &str,
        jobs: &[&Job],
        payloads: &[&str],
    ) -> Result<Vec<Option<Enqueued>>>;
}

/// Enqueues `jobs` with `store`: one job on a pooled connection (one round trip), several in
/// one transaction ([`insert_in`]: all or none, and on PostgreSQL one NOTIFY).
pub(super) async fn insert_all<S: Insert>(
    store: &S,
    queue: &str,
    jobs: &[Job],
) -> Result<Vec<Enqueued>> {
    let mut conn = store.pool().acquire().await?;
    if let [job] = jobs {
        return Ok(vec![store.insert(&mut conn, queue, job).await?]);
    }
    store.before_transaction(&mut conn).await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let ids = insert_in(store, &mut tx, queue, jobs).await?;
    tx.commit().await?;
    Ok(ids)
}

/// Enqueues `jobs` through `conn`, in input order: each run of jobs without a uniqueness
/// window in bulk statements of at most [`Insert::MAX_ROWS`] jobs and
/// [`Insert::MAX_BYTES`] of payload, and each job whose key has a window
/// ([`Job::unique_for`]) with the per-job statements, in its place. Releasing an expired key
/// and inserting after it depends on every job before it with the same key, in this call
/// too: done one job at a time, it keeps exactly the semantics of enqueueing the jobs one by
/// one, at the cost of a round trip or two for each such job.
pub(super) async fn insert_in<S: Insert>(
    store: &S,
    conn: &mut <S::Db as sqlx::Database>::Connection,
    queue: &str,
    jobs: &[Job],
) -> Result<Vec<Enqueued>> {
    let payloads: Vec<String> = jobs.iter().map(|job| job.payload.to_string()).collect();
    // Every payload is checked before the first statement: a job too large stores nothing.
    let max_payload = store.max_payload(&mut *conn).await?;
    if let Some(limit) = max_payload {
        for payload in &payloads {
            check_payload(payload.len(), limit)?;
        }
    }
    let max_bytes = max_payload.map_or(S::MAX_BYTES, |limit| limit.min(S::MAX_BYTES));
    let mut done = Vec::with_capacity(jobs.len());
    let mut rest = jobs;
    let mut offset = 0;
    while let Some(first) = rest.first() {
        if first.windowed_key().is_some() {
            done.push(store.insert(&mut *conn, queue, first).await?);
            rest = &rest[1..];
            offset += 1;
            continue;
        }
        let end = rest
            .iter()
            .position(|job| job.windowed_key().is_some())
            .unwrap_or(rest.len());
        let (run, after) = rest.split_at(end);
        let payloads = &payloads[offset..offset + run.len()];
        // With a server limit, a statement's size counts each row's other values too.
        let row_bytes = |i: usize| match max_payload {
            Some(_) => {
                let key = run[i].key.as_deref().map_or(0, str::len);
                payloads[i].len() + queue.len() + key + ROW_OVERHEAD
            }
            None => payloads[i].len(),
        };
        let mut start = 0;
        while start < run.len() {
            let mut stop = start;
            let mut bytes = 0;
            while stop < run.len()
                && stop - start < S::MAX_ROWS
                && (stop == start || bytes + row_bytes(stop) <= max_bytes)
            {
                bytes += row_bytes(stop);
                stop += 1;
            }
            let chunk = insert_run(
                store,
                conn,
                queue,
                &run[start..stop],
                &payloads[start..stop],
            );
            done.extend(chunk.await?);
            start = stop;
        }
        offset += run.len();
        rest = after;
    }
    Ok(done)
}

/// What a bulk statement carries for a row besides its payload, queue name and key (its
/// other values and their framing), counted where the server limits a statement's size.
const ROW_OVERHEAD: usize = 64;

/// A payload of `len` bytes fits a server that carries payloads of up to `limit` bytes.
pub(super) fn check_payload(len: usize, limit: usize) -> Result<()> {
    if len <= limit {
        return Ok(());
    }
    Err(crate::error::Error::InvalidJob {
        reason: format!(
            "its payload is {len} bytes, over the {limit} bytes one statement can carry on \
             this server (MariaDB/MySQL max_allowed_packet, less room for the statement): \
             raise max_allowed_packet, or store the payload elsewhere and enqueue a reference"
        ),
    })
}

/// Enqueues one chunk of jobs without a uniqueness window, in bulk: a key repeated in the
/// chunk is inserted (or found) once, and the later jobs with it get the same id, as
/// duplicates.
async fn insert_run<S: Insert>(
    store: &S,
    conn: &mut <S::Db as sqlx::Database>::Connection,
    queue: &str,
    jobs: &[Job],
    payloads: &[String],
) -> Result<Vec<Enqueued>> {
    // For each job, the index of the first job of the chunk with its key (itself if none).
    let mut first_with_key: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::new();
    let origin: Vec<usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| match job.key.as_deref() {
            Some(key) => *first_with_key.entry(key).or_insert(i),
            None => i,
        })
        .collect();
    let mut answers: Vec<Option<Enqueued>> = vec![None; jobs.len()];
    let mut pending: Vec<usize> = (0..jobs.len()).filter(|&i| origin[i] == i).collect();
    for _ in 0..3 {
        let batch: Vec<&Job> = pending.iter().map(|&i| &jobs[i]).collect();
        let texts: Vec<&str> = pending.iter().map(|&i| payloads[i].as_str()).collect();
        let got = store.insert_many(&mut *conn, queue, &batch, &texts).await?;
        let mut again = Vec::new();
        for (i, answer) in pending.into_iter().zip(got) {
            match answer {
                Some(enqueued) => answers[i] = Some(enqueued),
                // A concurrent enqueue with the same key committed after the statement's
                // snapshot: look again.
                None => again.push(i),
            }
        }
        pending = again;
        if pending.is_empty() {
            break;
        }
    }
    origin
        .iter()
        .enumerate()
        .map(|(i, &from)| match answers[from] {
            Some(enqueued) if from == i => Ok(enqueued),
            Some(enqueued) => Ok(Enqueued {
                id: enqueued.id,
                duplicate: true,
            }),
            None => Err(crate::error::Error::backend_msg(
                "queue",
                "enqueue found neither a new nor an existing job",
            )),
        })
        .collect()
}
