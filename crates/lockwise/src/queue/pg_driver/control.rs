//! Queue control beyond the worker's path on PostgreSQL: paused queues, periodic schedules
//! (`v15.sql`), cancelling a queue's jobs at once, retrying a cancelled job.

use sqlx::Row;

use super::PgDriver;
use super::statements::q;
use crate::error::Result;
use crate::queue::Enqueued;
use crate::queue::bulk::insert_in;
use crate::queue::driver::{Driver, PeriodicPlan, Tick};

impl PgDriver {
    pub(super) async fn pause_or_resume(&self, queue: &str, paused: bool) -> Result<bool> {
        self.migrate().await?;
        let sql = if paused {
            &self.sql.pause
        } else {
            &self.sql.resume
        };
        let changed: i64 = sqlx::query_scalar(q(sql))
            .bind(queue)
            .fetch_one(&self.db)
            .await?;
        Ok(changed > 0)
    }

    pub(super) async fn paused_queues(&self) -> Result<Vec<String>> {
        self.migrate().await?;
        Ok(sqlx::query_scalar(q(&self.sql.paused))
            .fetch_all(&self.db)
            .await?)
    }

    pub(super) async fn tick(
        &self,
        name: &str,
        queue: &str,
        plan: &PeriodicPlan<'_>,
    ) -> Result<Tick> {
        self.migrate().await?;
        let mut tx = self.db.begin().await?;
        sqlx::query(q(&self.sql.periodic_ensure))
            .bind(name)
            .bind(queue)
            .execute(&mut tx)
            .await?;
        let row = sqlx::query(q(&self.sql.periodic_lock))
            .bind(name)
            .fetch_one(&mut tx)
            .await?;
        let last: Option<i64> = row.try_get("last_period")?;
        let now_micros: i64 = row.try_get("now_micros")?;
        let mut enqueued: Vec<Enqueued> = Vec::new();
        if let Some((period, jobs)) = plan(now_micros, last) {
            sqlx::query(q(&self.sql.periodic_advance))
                .bind(name)
                .bind(period)
                .bind(queue)
                .execute(&mut tx)
                .await?;
            if !jobs.is_empty() {
                enqueued = insert_in(self, &mut **tx.transaction(), queue, &jobs).await?;
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
        let cancelled: i64 = sqlx::query_scalar(q(&self.sql.cancel_all))
            .bind(queue)
            .bind(ready)
            .bind(scheduled)
            .bind(running)
            .fetch_one(&self.db)
            .await?;
        Ok(u64::try_from(cancelled).unwrap_or(0))
    }

    pub(super) async fn retry_a_cancelled(&self, id: i64) -> Result<bool> {
        self.migrate().await?;
        let mut tx = self.db.begin().await?;
        sqlx::query(q(&self.sql.prune_lock))
            .execute(&mut tx)
            .await?;
        let moved: i64 = sqlx::query_scalar(q(&self.sql.retry_cancelled))
            .bind(id)
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(moved == 1)
    }
}
