//! The queue on PostgreSQL. The SQL is in `sql/postgres/queue/`; the storage layout is
//! migration 4 (`v4.sql`), designed and measured in `docs/design/queue-layout-v4.md`, and
//! migration 5 (`v5.sql`) addresses the lease segments one by one; migration 6 (`v6.sql`)
//! lets the truncation of a drained segment give up at once instead of waiting for its lock;
//! migration 7 (`v7.sql`) makes a batch's statements cheaper (each lease probed by its id
//! alone, each claimed job deleted from its own ready segment) and has acknowledgements lock
//! leases in the (segment, id) order of heartbeats and hand-backs, so they never deadlock;
//! migration 8 (`v8.sql`) has a truncation let go at once of a segment it finds in use;
//! migration 9 (`v9.sql`) has an acknowledgement look up the segments it was not told before
//! it locks anything, so that it keeps the heartbeat's (segment, id) order; migration 10
//! (`v10.sql`) has a confirmation do the same and lock each segment's rows in id order;
//! migration 11 (`v11.sql`) makes the finished history a ring that retention truncates;
//! migration 15 (`v15.sql`) adds paused queues and periodic schedules (`control.rs`).
//!
//! # Storage: one table per stage, rings reset by TRUNCATE
//!
//! A job lives in exactly one table at a time and moves between them in one statement each
//! (`DELETE … RETURNING` feeding an `INSERT`): `ready` (due), `scheduled` (delayed, or
//! waiting out a retry's backoff), `leases` (claimed; the attempt number is the fencing token
//! every later statement compares), `done` (finished history, done and cancelled), `dead`
//! (dead letters). Idempotency keys sit in `keys`, across every stage.
//!
//! Why: a queue that updates one row per job in place leaves a dead row version per claim
//! and per completion, and only VACUUM removes them. Under sustained load they pile up faster
//! than autovacuum (one visit a minute by default) clears them, and every claim's index scan
//! wades through them, slower as the backlog grows. Here the per-job deletes happen in `ready` and `leases`, which are
//! LIST-partitioned **rings** (16 segments of 500 ready rows, 32 of 100 leases): a row's
//! segment is a function of a ticket drawn from a sequence by the column's DEFAULT, so
//! enqueueing stays a plain `INSERT` (inside the caller's transaction too). Once the claims
//! have drained a segment the ring's clock has passed, the maintenance (every worker, ten
//! times a second, one at a time) `TRUNCATE`s it: its dead versions go with its files, and
//! its `n_dead_tup` drops to 0, without VACUUM.
//! The confirmation and heartbeats are HOT updates of a lease (no indexed column changes).
//! `done` is insert-only, and a ring too (migration 11, `v11.sql`): pruning moves a cutoff
//! that hides the jobs before it, and a segment is truncated once every job in it is pruned,
//! so retention leaves no dead versions either; `stats` counts it from sealed counts (by
//! segment and 10-second bucket) plus the newest rows, never the whole history.
//! `scheduled`, `dead` and `keys` are written at the rate of delays, failures and keys, not
//! at the job rate. So dead tuples stay bounded under sustained load (`lockwise bench
//! dead-tuples`, figures in `docs/performance.md`); at many handlers the rings wrap in under a
//! second, faster than the statistics and the truncations follow, and the bound is higher.
//!
//! The price, and the limits:
//! - every job is written three times (ready, leases, done) instead of once and updated
//!   twice or thrice; the WAL volume is alike, and no dead index entries pile up;
//! - a `TRUNCATE` takes an exclusive lock on its segment for a few milliseconds: a ready
//!   segment's makes the claims wait behind it and replan; a lease segment's, of the
//!   statements of a batch, only those on that segment (see below), and the rarer ones
//!   (heartbeat, failure, hand-back, reap, cancel, which go through the ring's parent). A
//!   lock request that *waits* is queued ahead of every later claim, so the lock is asked
//!   for with NOWAIT, and only after five rounds in a row that left a drained segment does
//!   a round wait (20 ms at most), which drains a backlog faster than waiting every round;
//!   or at once when, at its clock's pace, the ring comes back to a drained segment within
//!   three rounds (at 32 handlers claims are always in flight, and the ready ring wraps in
//!   0.7 s). Lease segments are truncated one per statement, so that
//!   the clock does not come round to a segment that a long truncation of many still holds;
//! - the statements of the worker's path and the truncations report their table statistics
//!   as they end (`flush_stats`, v12.sql), not up to a second later: otherwise deletions made
//!   just before a truncation reach the statistics after its reset, and an empty segment
//!   reports them as dead versions;
//! - a ring holds 8,000 ready rows (16 × 500) and 16,000 leases (32 × 500) before its clock
//!   comes back to a segment. A backlog deeper than that, a job waiting in a queue nobody
//!   works, or a lease held for many minutes keeps its segment from being truncated: that
//!   segment then gathers dead versions until autovacuum visits it, as any table would;
//! - a transaction kept open after it enqueued holds its segment's lock, and with it that
//!   segment's truncation, until it ends;
//! - finished history is kept until pruned (`delete_finished`, `Worker::retention`,
//!   `lockwise queue prune`), and its space comes back a whole segment at a time: up to
//!   about a twelfth of the retention window (at least a second) beyond it; a queue of the
//!   schema that is never pruned keeps the segments its jobs are in.
//!
//! One statement per claim: it acknowledges the finished jobs (leases → done) and moves at
//! most `n` due jobs into leases, locked with `FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE
//! over the claim index of every segment (merged, so the order stays global). LISTEN/NOTIFY
//! wakes idle workers.
//!
//! The statements of every batch name their lease segment: the claim returns each job's
//! segment, which this process remembers by (id, attempt), and the acknowledgement (in the
//! next claim, or `complete`) and the confirmation go to `leases_<k>`, through one branch per
//! segment of v5.sql's functions. PostgreSQL 15 does not prune partitions at run time for
//! an `UPDATE` or `DELETE` with parameters, so through the ring's parent each of them locked
//! and opened every segment, and a truncation waited for every claim in flight. A job whose
//! segment this process does not know (claimed by another process, or before a restart)
//! is first looked up through the parent (v9.sql), so that the acknowledgement still locks
//! segment by segment in ascending order; the rarer statements on a lease (heartbeat,
//! failure, hand-back, reap, cancel) go through the parent.

mod control;
mod insert;
mod listen;
mod migrations;
mod rings;
mod segments;
mod statements;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgPool;
use tokio::sync::{Notify, OnceCell};
use tokio_util::sync::CancellationToken;

use self::listen::listen;
use self::migrations::LATEST;
use self::statements::{Statements, q};
use crate::db::pg_conn::{ADVISORY_CLASS, Schema};
use crate::db::pg_pooler::PgDb;
use crate::error::{Error, Result};
use crate::queue::bulk::{Insert, insert_all, insert_in};
use crate::queue::driver::{ClaimRequest, Driver, FailedAttempt, PeriodicPlan, Presence, Tick};
use crate::queue::{
    Claimed, Enqueued, Executor, Job, JobId, JobInfo, JobState, Stats, WorkerInfo, from_micros,
    reported_state, utc_errors,
};

/// The rings, as baked into their segment DEFAULTs (v4.sql, and v12.sql for leases) and, for
/// leases, into the functions of v5.sql, v7.sql, v9.sql and v10.sql, which name each segment:
/// `(ring, segments, rows per segment)`.
pub(super) const RINGS: [(&str, i64, i64); 2] = [("ready", 16, 500), ("leases", 32, 500)];

/// How often the finished history's counts are sealed (its buckets are 10 s).
const SEAL_EVERY: Duration = Duration::from_secs(5);

/// The shortest time a segment of the finished history's ring is written to: its clock
/// moves at most once a second, however short the retention.
const MIN_HISTORY_SPAN: Duration = Duration::from_secs(1);

/// How long retention waits for a history segment's lock before it leaves the segment to the
/// next prune: only readers of the history hold it, never the statements that finish jobs.
const HISTORY_LOCK_WAIT_MS: i32 = 20;

/// The queues of one PostgreSQL schema.
#[derive(Debug)]
pub(super) struct PgDriver {
    db: PgDb,
    schema: Schema,
    /// The schema's plain name, for messages.
    schema_name: String,
    /// The NOTIFY channel of the schema's queues (the payload is the queue name).
    channel: String,
    sql: Statements,
    migrated: OnceCell<()>,
    /// When this process last sealed the finished history's counts.
    sealed: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The lease segment of each job this process claimed and has not finished, by id and
    /// attempt: its confirmation and acknowledgement name that segment's table (v5.sql). A
    /// hint only: a job missing here (claimed by another process, or forgotten past
    /// [`MAX_KNOWN_LEASES`]) goes through the ring's parent, with the same compare-and-set.
    lease_segments: std::sync::Mutex<HashMap<(i64, i32), i16>>,
    /// For each ring of [`RINGS`], the maintenance rounds in a row that left a drained
    /// segment untruncated (see [`PgDriver::truncate_drained_segments`]).
    truncation_misses: [AtomicU32; 2],
    /// For each ring of [`RINGS`], its clock as the last maintenance round read it (the
    /// clock's pace decides whether a round waits for a segment's lock).
    last_clocks: [AtomicI64; 2],
}

/// `(id, attempt)` pairs as the two arrays the statements `unnest`.
fn columns(jobs: &[(JobId, i32)]) -> (Vec<i64>, Vec<i32>) {
    jobs.iter().map(|(id, attempt)| (id.0, *attempt)).unzip()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PgDriver {
    /// The store in `schema`, whose plain name is `schema_name`.
    pub(super) fn new(pool: PgPool, schema: Schema, schema_name: &str) -> Self {
        let channel = format!("{schema_name}_jobs");
        PgDriver {
            sql: Statements::new(&schema, &channel),
            db: PgDb::new(pool),
            schema,
            schema_name: schema_name.to_owned(),
            channel,
            migrated: OnceCell::new(),
            sealed: std::sync::Mutex::new(None),
            lease_segments: std::sync::Mutex::new(HashMap::new()),
            truncation_misses: Default::default(),
            last_clocks: Default::default(),
        }
    }
    /// The upkeep of the finished history's ring after a prune (v11.sql's `retire_history`):
    /// moves its clock on once the current segment is older than a twelfth of the retention
    /// window `kept` (at least [`MIN_HISTORY_SPAN`]), so that the ring's 16 segments cover
    /// the window with room to spare, and truncates the segments whose every job is pruned.
    async fn retire_history(&self, kept: Duration) -> Result<()> {
        let span = (kept / 12).max(MIN_HISTORY_SPAN);
        sqlx::query(q(&self.sql.retire_history))
            .bind(secs(span))
            .bind(ADVISORY_CLASS)
            .bind(HISTORY_LOCK_WAIT_MS)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    /// Seals the finished history's counts every [`SEAL_EVERY`] (`seal_done.sql`).
    async fn seal_if_due(&self) -> Result<()> {
        let now = tokio::time::Instant::now();
        {
            let mut last = self.sealed.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| now.duration_since(at) < SEAL_EVERY) {
                return Ok(());
            }
            *last = Some(now);
        }
        let mut tx = self.db.begin().await?;
        sqlx::query(q(&self.sql.seal_lock)).execute(&mut tx).await?;
        sqlx::query(q(&self.sql.seal_done)).execute(&mut tx).await?;
        tx.commit().await.map_err(Error::from)
    }
}

#[async_trait]
impl Driver for PgDriver {
    async fn migrate(&self) -> Result<()> {
        self.migrated
            .get_or_try_init(|| async {
                let mut conn = self.db.acquire().await?;
                self.apply_migrations(&mut conn).await
            })
            .await
            .map(|_| ())
    }

    async fn verify_migrated(&self) -> Result<()> {
        let mut conn = self.db.acquire().await?;
        let current = self.applied_version(&mut conn).await?;
        if current.is_none_or(|c| c < LATEST) {
            return Err(Error::NotMigrated {
                store: format!("schema {:?}", self.schema_name),
                outdated: current.is_some(),
            });
        }
        let _ = self.migrated.set(());
        Ok(())
    }

    async fn enqueue_many(&self, queue: &str, jobs: &[Job]) -> Result<Vec<Enqueued>> {
        self.migrate().await?;
        insert_all(self, queue, jobs).await
    }

    async fn enqueue_in(&self, conn: Executor<'_>, queue: &str, job: &Job) -> Result<Enqueued> {
        let conn = conn.postgres()?;
        self.migrate().await?;
        self.insert(conn, queue, job).await
    }

    async fn enqueue_many_in(
        &self,
        conn: Executor<'_>,
        queue: &str,
        jobs: &[Job],
    ) -> Result<Vec<Enqueued>> {
        let conn = conn.postgres()?;
        self.migrate().await?;
        insert_in(self, conn, queue, jobs).await
    }

    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        self.migrate().await?;
        let (ids, attempts) = columns(request.finished);
        let segments = self.forget_segments(request.finished);
        // One queue (the usual case): the claim index's order is the claim's; several: the
        // first ones of each, merged.
        let claim = match request.queues {
            [queue] => sqlx::query(q(&self.sql.claim)).bind(*queue),
            queues => sqlx::query(q(&self.sql.claim_any)).bind(queues),
        };
        let rows = claim
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .bind(secs(request.lease))
            .bind(request.worker)
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_all(&self.db)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => {
                // The acknowledgements go out again: keep their segments.
                self.remember_segments(
                    request
                        .finished
                        .iter()
                        .zip(&segments)
                        .filter_map(|((id, attempt), seg)| Some(((id.0, *attempt), (*seg)?))),
                );
                return Err(error.into());
            }
        };
        let claimed = rows
            .iter()
            .map(|row| {
                let job = Claimed {
                    id: JobId(row.try_get("id")?),
                    attempt: row.try_get("attempt")?,
                    max_attempts: row.try_get("max_attempts")?,
                    payload: row.try_get("payload")?,
                    queue: row.try_get("queue")?,
                    waited: Duration::try_from_secs_f64(row.try_get("waited")?).unwrap_or_default(),
                };
                let seg: i16 = row.try_get("seg")?;
                Ok((job, seg))
            })
            .collect::<Result<Vec<_>>>()?;
        self.remember_segments(
            claimed
                .iter()
                .map(|(job, seg)| ((job.id.0, job.attempt), *seg)),
        );
        Ok(claimed.into_iter().map(|(job, _)| job).collect())
    }

    async fn confirm_started(&self, claimed: &[(JobId, i32)]) -> Result<Vec<JobId>> {
        let (ids, attempts) = columns(claimed);
        let segments = self.segments_of(claimed);
        let started: Vec<i64> = sqlx::query_scalar(q(&self.sql.confirm_started))
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_all(&self.db)
            .await?;
        Ok(started.into_iter().map(JobId).collect())
    }

    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        self.migrate().await?;
        let (ids, attempts) = columns(finished);
        let segments = self.segments_of(finished);
        let done: i64 = sqlx::query_scalar(q(&self.sql.complete))
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_one(&self.db)
            .await?;
        self.forget_segments(finished);
        Ok(u64::try_from(done).unwrap_or(0))
    }

    async fn fail(&self, failed: FailedAttempt<'_>) -> Result<bool> {
        self.migrate().await?;
        let state: Option<String> = sqlx::query_scalar(q(&self.sql.fail))
            .bind(failed.id.0)
            .bind(failed.attempt)
            .bind(failed.error)
            .bind(secs(failed.retry_in))
            .bind(failed.final_failure)
            .fetch_optional(&self.db)
            .await?;
        self.forget_segments(&[(failed.id, failed.attempt)]);
        Ok(state.is_some())
    }

    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        let (ids, attempts) = columns(running);
        let owned: Vec<i64> = sqlx::query_scalar(q(&self.sql.heartbeat))
            .bind(&ids)
            .bind(&attempts)
            .bind(secs(lease))
            .fetch_all(&self.db)
            .await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        let (ids, attempts) = columns(running);
        let back: Vec<i64> = sqlx::query_scalar(q(&self.sql.hand_back))
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(&self.db)
            .await?;
        self.forget_segments(running);
        Ok(back.len() as u64)
    }

    async fn reap(&self) -> Result<u64> {
        self.migrate().await?;
        let rescued: i64 = sqlx::query_scalar(q(&self.sql.reap))
            .bind(ADVISORY_CLASS)
            .fetch_one(&self.db)
            .await?;
        if rescued > 0 {
            tracing::warn!(jobs = rescued, "rescued jobs whose lease expired");
        }
        Ok(u64::try_from(rescued).unwrap_or(0))
    }

    async fn stats(&self, queue: &str) -> Result<Stats> {
        self.migrate().await?;
        let row = sqlx::query(q(&self.sql.stats))
            .bind(queue)
            .fetch_one(&self.db)
            .await?;
        let get = |c: &str| row.try_get::<i64, _>(c).map_err(Error::from);
        Ok(Stats {
            ready: get("ready")?,
            scheduled: get("scheduled")?,
            running: get("running")?,
            done: get("done")?,
            dead: get("dead")?,
            cancelled: get("cancelled")?,
            oldest_ready: row
                .try_get::<Option<f64>, _>("oldest_ready_secs")?
                .map(|s| std::time::Duration::from_secs_f64(s.max(0.0))),
        })
    }

    async fn worker_seen(&self, w: &Presence<'_>, lease: Duration) -> Result<()> {
        sqlx::query(q(&self.sql.worker_seen))
            .bind(w.id)
            .bind(w.host)
            .bind(w.pid)
            .bind(w.queues)
            .bind(w.concurrency)
            .bind(w.running)
            .bind(lease.as_secs_f64())
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn worker_gone(&self, id: &str) -> Result<()> {
        sqlx::query(q(&self.sql.worker_gone))
            .bind(id)
            .execute(&self.db)
            .await?;
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.migrate().await?;
        let rows = sqlx::query(q(&self.sql.workers))
            .fetch_all(&self.db)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(WorkerInfo {
                    id: row.try_get("id")?,
                    host: row.try_get("host")?,
                    pid: row.try_get("pid")?,
                    queues: row.try_get("queues")?,
                    concurrency: row.try_get("concurrency")?,
                    running: row.try_get("running")?,
                    started_at: from_micros(row.try_get("started_us")?),
                    last_heartbeat: from_micros(row.try_get("seen_us")?),
                })
            })
            .collect()
    }

    async fn queues(&self) -> Result<Vec<String>> {
        self.migrate().await?;
        Ok(sqlx::query_scalar(q(&self.sql.queues))
            .fetch_all(&self.db)
            .await?)
    }

    async fn done_since(&self, queue: &str, since: Duration) -> Result<i64> {
        self.migrate().await?;
        Ok(sqlx::query_scalar(q(&self.sql.done_since))
            .bind(queue)
            .bind(since.as_secs_f64())
            .fetch_one(&self.db)
            .await?)
    }

    async fn dead(&self, queue: &str, limit: i64) -> Result<Vec<JobInfo>> {
        self.migrate().await?;
        let rows = sqlx::query(q(&self.sql.dead))
            .bind(queue)
            .bind(limit)
            .fetch_all(&self.db)
            .await?;
        rows.iter().map(job_info).collect()
    }

    async fn retry(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(q(&self.sql.retry))
            .bind(id.0)
            .execute(&self.db)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn retry_cancelled(&self, id: JobId) -> Result<bool> {
        self.retry_a_cancelled(id.0).await
    }

    async fn delete_dead(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let deleted: i64 = sqlx::query_scalar(q(&self.sql.delete_dead))
            .bind(id.0)
            .fetch_one(&self.db)
            .await?;
        Ok(deleted == 1)
    }

    async fn retry_all(&self, queue: &str) -> Result<u64> {
        self.migrate().await?;
        let done = sqlx::query(q(&self.sql.retry_all))
            .bind(queue)
            .execute(&self.db)
            .await?;
        Ok(done.rows_affected())
    }

    async fn run_now(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let moved: i64 = sqlx::query_scalar(q(&self.sql.run_now))
            .bind(id.0)
            .fetch_one(&self.db)
            .await?;
        Ok(moved == 1)
    }

    async fn delete_finished(
        &self,
        queue: Option<&str>,
        state: &'static str,
        older_than: Duration,
    ) -> Result<u64> {
        self.migrate().await?;
        // After the seal's row is taken, so that the counts it subtracts are exactly those
        // of the sealed rows it deletes.
        let mut tx = self.db.begin().await?;
        sqlx::query(q(&self.sql.prune_lock))
            .execute(&mut tx)
            .await?;
        let sql = match queue {
            Some(_) => &self.sql.delete_finished,
            None => &self.sql.delete_finished_everywhere,
        };
        let deleted: i64 = sqlx::query_scalar(q(sql))
            .bind(queue)
            .bind(state)
            .bind(secs(older_than))
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        if state != "dead" {
            self.retire_history(older_than).await?;
        }
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        self.migrate().await?;
        let row = sqlx::query(q(&self.sql.job))
            .bind(id.0)
            .fetch_optional(&self.db)
            .await?;
        row.as_ref().map(job_info).transpose()
    }

    async fn list(
        &self,
        queue: &str,
        state: JobState,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<JobInfo>> {
        self.migrate().await?;
        let rows = match state {
            JobState::Ready | JobState::Scheduled => {
                sqlx::query(q(&self.sql.list_waiting))
                    .bind(queue)
                    .bind(state == JobState::Ready)
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(&self.db)
                    .await?
            }
            _ => {
                sqlx::query(q(&self.sql.list_state))
                    .bind(queue)
                    .bind(state.as_str())
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(&self.db)
                    .await?
            }
        };
        rows.iter().map(job_info).collect()
    }

    async fn cancel(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        // A job that moved stage while the statement ran (claimed, failed into its backoff,
        // reaped) is not in the snapshot's view of its new table: look where it is now, and
        // cancel it there.
        for _ in 0..4 {
            let done = sqlx::query(q(&self.sql.cancel))
                .bind(id.0)
                .execute(&self.db)
                .await?;
            if done.rows_affected() == 1 {
                return Ok(true);
            }
            let unfinished = self.job(id).await?.is_some_and(|job| {
                matches!(
                    job.state,
                    JobState::Ready | JobState::Scheduled | JobState::Running
                )
            });
            if !unfinished {
                return Ok(false);
            }
        }
        Ok(false)
    }

    async fn cancel_all(
        &self,
        queue: &str,
        ready: bool,
        scheduled: bool,
        running: bool,
    ) -> Result<u64> {
        self.cancel_states(queue, (ready, scheduled, running)).await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool> {
        self.pause_or_resume(queue, paused).await
    }

    async fn paused(&self) -> Result<Vec<String>> {
        self.paused_queues().await
    }

    async fn periodic_tick(
        &self,
        name: &str,
        queue: &str,
        plan: &PeriodicPlan<'_>,
    ) -> Result<Tick> {
        self.tick(name, queue, plan).await
    }

    async fn maintain(&self, stop: &CancellationToken) -> Result<()> {
        self.migrate().await?;
        self.truncate_drained_segments(stop).await?;
        if stop.is_cancelled() {
            return Ok(());
        }
        self.seal_if_due().await
    }

    async fn wake_ups(&self, queues: &[&str], wake: Arc<Notify>, stop: CancellationToken) {
        match self.db.pooled().await {
            // A pooling proxy carries no LISTEN: the worker polls.
            Ok(true) => stop.cancelled().await,
            Ok(false) | Err(_) => listen(self.db.pool(), &self.channel, queues, &wake, &stop).await,
        }
    }

    fn postgres_pool(&self) -> Option<&PgPool> {
        Some(self.db.pool())
    }
}

/// A row of `job.sql` or `list_*.sql`.
fn job_info(row: &sqlx::postgres::PgRow) -> Result<JobInfo> {
    let state: String = row.try_get("state")?;
    let time = |column: &str| -> Result<Option<SystemTime>> {
        Ok(row.try_get::<Option<i64>, _>(column)?.map(from_micros))
    };
    Ok(JobInfo {
        id: JobId(row.try_get("id")?),
        queue: row.try_get("queue")?,
        state: reported_state(&state)?,
        priority: row.try_get("priority")?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        key: row.try_get("idempotency_key")?,
        payload: row.try_get("payload")?,
        worker: row.try_get("worker")?,
        created_at: time("created_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        run_at: time("run_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        finished_at: time("finished_us")?,
        lease_until: time("lease_us")?,
        last_error: row.try_get("last_error")?,
        errors: utc_errors(row.try_get("errors")?),
    })
}
