//! Queue control beyond the worker's path on MariaDB/MySQL: paused queues, periodic
//! schedules (`v6.sql`), cancelling a queue's jobs at once, retrying a cancelled job.

use sqlx::{Connection, Row};

use super::{MysqlDriver, READ_COMMITTED};
use crate::error::Result;
use crate::queue::Enqueued;
use crate::queue::bulk::insert_in;
use crate::queue::driver::{Driver, PeriodicPlan, Tick};

const PAUSE: &str = sql!("pause.sql");
const RESUME: &str = sql!("resume.sql");
const PAUSED: &str = sql!("paused.sql");
const PERIODIC_ENSURE: &str = sql!("periodic_ensure.sql");
const PERIODIC_LOCK: &str = sql!("periodic_lock.sql");
const PERIODIC_ADVANCE: &str = sql!("periodic_advance.sql");
const CANCEL_ALL: &str = sql!("cancel_all.sql");
const RETRY_CANCELLED: &str = sql!("retry_cancelled.sql");

impl MysqlDriver {
    pub(super) async fn pause_or_resume(&self, queue: &str, paused: bool) -> Result<bool> {
        self.migrate().await?;
        let sql = if paused { PAUSE } else { RESUME };
        let done = sqlx::query(self.sql(sql))
            .bind(queue)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn paused_queues(&self) -> Result<Vec<String>> {
        self.migrate().await?;
        Ok(sqlx::query_scalar(self.sql(PAUSED))
            .fetch_all(&self.pool)
            .await?)
    }

    /// One tick in a READ COMMITTED transaction (as `enqueue_many`'s own: looking for the
    /// holders of the jobs' keys takes no gap locks).
    pub(super) async fn tick(
        &self,
        name: &str,
        queue: &str,
        plan: &PeriodicPlan<'_>,
    ) -> Result<Tick> {
        self.migrate().await?;
        let mut conn = self.pool.acquire().await?;
        sqlx::query(READ_COMMITTED).execute(&mut *conn).await?;
        let mut tx = conn.begin().await?;
        sqlx::query(self.sql(PERIODIC_ENSURE))
            .bind(name)
            .bind(queue)
            .execute(&mut *tx)
            .await?;
        let row = sqlx::query(self.sql(PERIODIC_LOCK))
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
        let last: Option<i64> = row.try_get("last_period")?;
        let now_micros: i64 = row.try_get("now_micros")?;
        let mut enqueued: Vec<Enqueued> = Vec::new();
        if let Some((period, jobs)) = plan(now_micros, last) {
            sqlx::query(self.sql(PERIODIC_ADVANCE))
                .bind(period)
                .bind(queue)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            if !jobs.is_empty() {
                enqueued = insert_in(self, &mut tx, queue, &jobs).await?;
            }
        }
        tx.commit().await?;
        Ok(Tick {
            now_micros,
            enqueued,
        })
    }

    pub(super) async fn cancel_states(
        &self,
        queue: &str,
        (ready, scheduled, running): (bool, bool, bool),
    ) -> Result<u64> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(CANCEL_ALL))
            .bind(queue)
            .bind(ready)
            .bind(scheduled)
            .bind(running)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    pub(super) async fn retry_a_cancelled(&self, id: i64) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(self.sql(RETRY_CANCELLED))
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
