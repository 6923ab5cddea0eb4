//! The queue on MariaDB 10.6+ / MySQL 8: `SELECT … FOR UPDATE SKIP LOCKED` inside a READ
//! COMMITTED transaction, then `UPDATE` (under REPEATABLE READ, next-key locks would block
//! concurrent enqueues). No notifications: workers poll. The SQL is in `sql/mysql/queue/`;
//! tables `<prefix>_jobs` (prefix `lockwise` by default) in the URL's database.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::sync::OnceCell;

use super::bulk::{Insert, insert_all, insert_in};
use super::driver::{ClaimRequest, Driver, FailedAttempt, PeriodicPlan, Presence, Tick};
use super::{
    Claimed, Enqueued, Executor, Job, JobId, JobInfo, JobState, Stats, WorkerInfo, from_micros,
    reported_state, utc_errors,
};
use crate::error::{Error, Result};

/// The default table prefix.
pub(super) const DEFAULT_PREFIX: &str = "lockwise";

macro_rules! sql {
    ($file:literal) => {
        include_str!(concat!("../../../sql/mysql/queue/", $file))
    };
}

// After `sql!`, which they use.
mod control;
mod insert;
mod migrations;

use self::migrations::{MIGRATE_LOCK, RELEASE_LOCK};

const RELEASE_REAPER: &str = sql!("release_reaper.sql");
const READ_COMMITTED: &str = sql!("read_committed.sql");
const CLAIM_LOCK: &str = sql!("claim_lock.sql");
const CLAIM_UPDATE: &str = sql!("claim_update.sql");
const CLAIM_FETCH: &str = sql!("claim_fetch.sql");
const CONFIRM_STARTED: &str = sql!("confirm_started.sql");
const CONFIRM_STARTED_OWNED: &str = sql!("confirm_started_owned.sql");
const COMPLETE: &str = sql!("complete.sql");
const FAIL: &str = sql!("fail.sql");
const HEARTBEAT: &str = sql!("heartbeat.sql");
const HEARTBEAT_OWNED: &str = sql!("heartbeat_owned.sql");
const HAND_BACK: &str = sql!("hand_back.sql");
const REAP: &str = sql!("reap.sql");
const STATS: &str = sql!("stats.sql");
const QUEUES: &str = sql!("queues.sql");
const WORKER_SEEN: &str = sql!("worker_seen.sql");
const WORKERS_DEAD: &str = sql!("workers_dead.sql");
const WORKER_GONE: &str = sql!("worker_gone.sql");
const WORKERS: &str = sql!("workers.sql");
const DONE_SINCE: &str = sql!("done_since.sql");
const RETRY: &str = sql!("retry.sql");
const DELETE_DEAD: &str = sql!("delete_dead.sql");
const RETRY_ALL: &str = sql!("retry_all.sql");
const RUN_NOW: &str = sql!("run_now.sql");
const DELETE_FINISHED: &str = sql!("delete_finished.sql");
const DELETE_FINISHED_EVERYWHERE: &str = sql!("delete_finished_everywhere.sql");
/// The columns of a job (`job_select.sql`), then the WHERE clause of each lookup.
const JOB: &str = concat!(sql!("job_select.sql"), sql!("job.sql"));
const LIST_WAITING: &str = concat!(sql!("job_select.sql"), sql!("list_waiting.sql"));
const LIST_STATE: &str = concat!(sql!("job_select.sql"), sql!("list_state.sql"));
const DEAD: &str = concat!(sql!("job_select.sql"), sql!("dead.sql"));
const CANCEL: &str = sql!("cancel.sql");

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `(?,?),(?,?),…` for `n` (id, attempt) pairs: placeholders only, never values.
fn pairs(n: usize) -> String {
    vec!["(?,?)"; n].join(",")
}

/// `?,?,…` for `n` ids or queue names: placeholders only, never values.
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

/// A payload stored as JSON text; text that is not JSON (written by hand) stays a string.
fn json(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// Checks a table prefix: 1 to 48 lowercase letters, digits and `_`.
pub(super) fn check_prefix(prefix: &str) -> Result<()> {
    let valid = !prefix.is_empty()
        && prefix.len() <= 48
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(Error::config(format!(
            "invalid table prefix {prefix:?}: use 1 to 48 lowercase letters, digits and _"
        )))
    }
}

/// The queues in the tables of one prefix.
#[derive(Debug)]
pub(super) struct MysqlDriver {
    pool: MySqlPool,
    /// `<prefix>_jobs`, validated.
    table: String,
    /// `<prefix>_workers`: the live workers.
    workers: String,
    /// `<prefix>_paused` and `<prefix>_periodic` (version 6).
    paused: String,
    periodic: String,
    migrated: OnceCell<()>,
    /// `@@auto_increment_increment`, read once.
    id_step: OnceCell<i64>,
    /// `@@max_allowed_packet`, read once.
    max_packet: OnceCell<u64>,
}

impl MysqlDriver {
    /// The store in tables prefixed `prefix`, checked by [`check_prefix`].
    pub(super) fn new(pool: MySqlPool, prefix: &str) -> Self {
        MysqlDriver {
            pool,
            table: format!("{prefix}_jobs"),
            workers: format!("{prefix}_workers"),
            paused: format!("{prefix}_paused"),
            periodic: format!("{prefix}_periodic"),
            migrated: OnceCell::new(),
            id_step: OnceCell::new(),
            max_packet: OnceCell::new(),
        }
    }

    /// `template` with the table name filled in.
    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(
            template
                .replace("{jobs}", &self.table)
                .replace("{workers}", &self.workers)
                .replace("{paused}", &self.paused)
                .replace("{periodic}", &self.periodic),
        )
    }

    /// `template` with the table name and a list of placeholders (`{ids}` or `{pairs}`).
    fn sql_list(&self, template: &str, slot: &str, placeholders: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(
            template
                .replace("{jobs}", &self.table)
                .replace(slot, placeholders),
        )
    }

    /// The compare-and-set completion shared by `claim` and `complete`.
    async fn mark_done<'e, E>(&self, executor: E, finished: &[(JobId, i32)]) -> Result<u64>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        if finished.is_empty() {
            return Ok(0);
        }
        let sql = self.sql_list(COMPLETE, "{pairs}", &pairs(finished.len()));
        let done = bind_pairs(sqlx::query(sql), finished)
            .execute(executor)
            .await?;
        Ok(done.rows_affected())
    }
}

#[async_trait]
impl Driver for MysqlDriver {
    async fn migrate(&self) -> Result<()> {
        self.migrated
            .get_or_try_init(|| async {
                let mut conn = self.pool.acquire().await?;
                let lock = format!("{}:migrate", self.table);
                // Another process may be migrating, and version 4 copies the table, which can
                // take longer than one wait: wait on (up to 10 minutes), never migrate beside it.
                let mut waits = 0;
                loop {
                    let got: Option<i64> = sqlx::query_scalar(MIGRATE_LOCK)
                        .bind(&lock)
                        .fetch_one(&mut *conn)
                        .await?;
                    if got == Some(1) {
                        break;
                    }
                    waits += 1;
                    if waits == 20 {
                        return Err(Error::backend_msg(
                            "mysql",
                            format!(
                                "another process has been migrating table {:?} for 10 minutes",
                                self.table
                            ),
                        ));
                    }
                    tracing::info!(table = %self.table, "waiting for another process's migration");
                }
                let created = self.apply_migrations(&mut conn).await;
                sqlx::query(RELEASE_LOCK)
                    .bind(&lock)
                    .execute(&mut *conn)
                    .await?;
                created.map(|_| ())
            })
            .await
            .map(|_| ())
    }

    async fn verify_migrated(&self) -> Result<()> {
        let exists = self.has_column(&self.pool, "id").await?;
        if !exists || !self.is_latest(&self.pool).await? {
            return Err(Error::NotMigrated {
                store: format!("table {:?}", self.table),
                outdated: exists,
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
        let conn = conn.mysql()?;
        self.migrate().await?;
        self.insert(conn, queue, job).await
    }

    async fn enqueue_many_in(
        &self,
        conn: Executor<'_>,
        queue: &str,
        jobs: &[Job],
    ) -> Result<Vec<Enqueued>> {
        let conn = conn.mysql()?;
        self.migrate().await?;
        insert_in(self, conn, queue, jobs).await
    }

    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        sqlx::query(READ_COMMITTED).execute(&mut *conn).await?;
        let mut tx = conn.begin().await?;
        self.mark_done(&mut *tx, request.finished).await?;
        if request.limit == 0 {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let lock = self.sql_list(CLAIM_LOCK, "{queues}", &list(request.queues.len()));
        let mut lock = sqlx::query_scalar(lock);
        for queue in request.queues {
            lock = lock.bind(*queue);
        }
        let ids: Vec<i64> = lock
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let placeholders = list(ids.len());
        let mut update = sqlx::query(self.sql_list(CLAIM_UPDATE, "{ids}", &placeholders))
            .bind(micros(request.lease))
            .bind(request.worker);
        for id in &ids {
            update = update.bind(id);
        }
        update.execute(&mut *tx).await?;
        let mut fetch = sqlx::query(self.sql_list(CLAIM_FETCH, "{ids}", &placeholders));
        for id in &ids {
            fetch = fetch.bind(id);
        }
        let rows = fetch.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| {
                Ok(Claimed {
                    id: JobId(row.try_get("id")?),
                    attempt: row.try_get("attempt")?,
                    max_attempts: row.try_get("max_attempts")?,
                    payload: json(row.try_get("payload")?),
                    queue: row.try_get("queue")?,
                    waited: Duration::from_micros(
                        u64::try_from(row.try_get::<i64, _>("waited_us")?).unwrap_or(0),
                    ),
                })
            })
            .collect()
    }

    async fn confirm_started(&self, claimed: &[(JobId, i32)]) -> Result<Vec<JobId>> {
        let placeholders = pairs(claimed.len());
        let update = self.sql_list(CONFIRM_STARTED, "{pairs}", &placeholders);
        let matched = bind_pairs(sqlx::query(update), claimed)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if matched == claimed.len() as u64 {
            return Ok(claimed.iter().map(|(id, _)| *id).collect());
        }
        let owned = self.sql_list(CONFIRM_STARTED_OWNED, "{pairs}", &placeholders);
        let mut owned = sqlx::query_scalar(owned);
        for (id, attempt) in claimed {
            owned = owned.bind(id.0).bind(attempt);
        }
        let owned: Vec<i64> = owned.fetch_all(&self.pool).await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        if finished.is_empty() {
            return Ok(0);
        }
        self.migrate().await?;
        self.mark_done(&self.pool, finished).await
    }

    async fn fail(&self, failed: FailedAttempt<'_>) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(FAIL))
            .bind(failed.error)
            .bind(failed.error)
            .bind(failed.final_failure)
            .bind(micros(failed.retry_in))
            .bind(failed.final_failure)
            .bind(failed.final_failure)
            .bind(failed.id.0)
            .bind(failed.attempt)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        if running.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = pairs(running.len());
        let update = self.sql_list(HEARTBEAT, "{pairs}", &placeholders);
        bind_pairs(sqlx::query(update).bind(micros(lease)), running)
            .execute(&self.pool)
            .await?;
        let mut owned =
            sqlx::query_scalar(self.sql_list(HEARTBEAT_OWNED, "{pairs}", &placeholders));
        for (id, attempt) in running {
            owned = owned.bind(id.0).bind(attempt);
        }
        let owned: Vec<i64> = owned.fetch_all(&self.pool).await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        if running.is_empty() {
            return Ok(0);
        }
        let sql = self.sql_list(HAND_BACK, "{pairs}", &pairs(running.len()));
        let back = bind_pairs(sqlx::query(sql), running)
            .execute(&self.pool)
            .await?;
        Ok(back.rows_affected())
    }

    async fn reap(&self) -> Result<u64> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        let lock = format!("{}:reaper", self.table);
        let reap = AssertSqlSafe(REAP.replace("{jobs}", &self.table).replace("{lock}", &lock));
        match sqlx::raw_sql(reap).fetch_all(&mut *conn).await {
            Ok(rows) => {
                let rescued: Option<i64> = match rows.last() {
                    Some(row) => row.try_get("rescued")?,
                    None => None,
                };
                Ok(rescued.map_or(0, i64::unsigned_abs))
            }
            Err(error) => {
                // The statements stop at an error, perhaps with the lock taken and not
                // released: release it (a no-op when this session does not hold it).
                let _ = sqlx::raw_sql(RELEASE_REAPER).execute(&mut *conn).await;
                Err(error.into())
            }
        }
    }

    async fn stats(&self, queue: &str) -> Result<Stats> {
        self.migrate().await?;
        let row = sqlx::query(self.sql(STATS))
            .bind(queue)
            .fetch_one(&self.pool)
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
                .try_get::<Option<i64>, _>("oldest_ready_us")?
                .map(|us| std::time::Duration::from_micros(us.max(0).unsigned_abs())),
        })
    }

    async fn worker_seen(&self, w: &Presence<'_>, lease: Duration) -> Result<()> {
        let micros = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
        sqlx::query(self.sql(WORKERS_DEAD))
            .execute(&self.pool)
            .await?;
        sqlx::query(self.sql(WORKER_SEEN))
            .bind(w.id)
            .bind(w.host)
            .bind(w.pid)
            .bind(Value::from(w.queues.to_vec()).to_string())
            .bind(w.concurrency)
            .bind(w.running)
            .bind(micros)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn worker_gone(&self, id: &str) -> Result<()> {
        sqlx::query(self.sql(WORKER_GONE))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        self.migrate().await?;
        let rows = sqlx::query(self.sql(WORKERS)).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|row| {
                let queues: String = row.try_get("queues")?;
                Ok(WorkerInfo {
                    id: row.try_get("id")?,
                    host: row.try_get("host")?,
                    pid: row.try_get("pid")?,
                    queues: serde_json::from_str(&queues).unwrap_or_default(),
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
        Ok(sqlx::query_scalar(self.sql(QUEUES))
            .fetch_all(&self.pool)
            .await?)
    }

    async fn done_since(&self, queue: &str, since: Duration) -> Result<i64> {
        self.migrate().await?;
        let micros = i64::try_from(since.as_micros()).unwrap_or(i64::MAX);
        Ok(sqlx::query_scalar(self.sql(DONE_SINCE))
            .bind(queue)
            .bind(micros)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn dead(&self, queue: &str, limit: i64) -> Result<Vec<JobInfo>> {
        self.migrate().await?;
        let rows = sqlx::query(self.sql(DEAD))
            .bind(queue)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_info).collect()
    }

    async fn retry(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(RETRY))
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn retry_cancelled(&self, id: JobId) -> Result<bool> {
        self.retry_a_cancelled(id.0).await
    }

    async fn delete_dead(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(DELETE_DEAD))
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn retry_all(&self, queue: &str) -> Result<u64> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(RETRY_ALL))
            .bind(queue)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn run_now(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(RUN_NOW))
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_finished(
        &self,
        queue: Option<&str>,
        state: &'static str,
        older_than: Duration,
    ) -> Result<u64> {
        self.migrate().await?;
        let deleted = match queue {
            Some(queue) => {
                sqlx::query(self.sql(DELETE_FINISHED))
                    .bind(queue)
                    .bind(state)
                    .bind(micros(older_than))
                    .execute(&self.pool)
                    .await?
            }
            None => {
                sqlx::query(self.sql(DELETE_FINISHED_EVERYWHERE))
                    .bind(state)
                    .bind(micros(older_than))
                    .execute(&self.pool)
                    .await?
            }
        };
        Ok(deleted.rows_affected())
    }

    async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        self.migrate().await?;
        let row = sqlx::query(self.sql(JOB))
            .bind(id.0)
            .fetch_optional(&self.pool)
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
                sqlx::query(self.sql(LIST_WAITING))
                    .bind(queue)
                    .bind(state == JobState::Ready)
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(&self.pool)
                    .await?
            }
            _ => {
                sqlx::query(self.sql(LIST_STATE))
                    .bind(queue)
                    .bind(state.as_str())
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(job_info).collect()
    }

    async fn cancel(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(CANCEL))
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    fn mysql_pool(&self) -> Option<&MySqlPool> {
        Some(&self.pool)
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
}

/// A row of `job.sql` or `list_*.sql`.
fn job_info(row: &sqlx::mysql::MySqlRow) -> Result<JobInfo> {
    let state: String = row.try_get("state")?;
    let errors: String = row.try_get("errors")?;
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
        payload: json(row.try_get("payload")?),
        worker: row.try_get("worker")?,
        created_at: time("created_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        run_at: time("run_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        finished_at: time("finished_us")?,
        lease_until: time("lease_us")?,
        last_error: row.try_get("last_error")?,
        errors: utc_errors(serde_json::from_str(&errors).unwrap_or(Value::Null)),
    })
}
