//! Enqueueing on MariaDB / MySQL: the [`Insert`] impl of [`MysqlDriver`] (bulk and single
//! inserts, and the payload limit).

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnection, MySqlPool};

use super::{MysqlDriver, READ_COMMITTED, list, micros};
use crate::error::{Error, Result};
use crate::queue::bulk::{Insert, check_payload};
use crate::queue::{Enqueued, Job, JobId};

const ENQUEUE: &str = sql!("enqueue.sql");
const ENQUEUE_EXISTING: &str = sql!("enqueue_existing.sql");
const ENQUEUE_MANY: &str = sql!("enqueue_many.sql");
const ENQUEUE_MANY_EXISTING: &str = sql!("enqueue_many_existing.sql");
const AUTO_INCREMENT_INCREMENT: &str = sql!("auto_increment_increment.sql");
const MAX_ALLOWED_PACKET: &str = sql!("max_allowed_packet.sql");
const RELEASE_KEY: &str = sql!("release_key.sql");

#[async_trait]
impl Insert for MysqlDriver {
    type Db = sqlx::MySql;

    /// Six placeholders a job, under the protocol's 65,535.
    const MAX_ROWS: usize = 10_000;
    /// Well under `max_allowed_packet` (16 MiB by default on MariaDB, 64 MiB on MySQL 8).
    const MAX_BYTES: usize = 4 << 20;

    fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    async fn before_transaction(&self, conn: &mut MySqlConnection) -> Result<()> {
        sqlx::query(READ_COMMITTED).execute(&mut *conn).await?;
        Ok(())
    }

    /// Looks for the keys' holders first, then inserts the other jobs in one statement. If
    /// that statement meets a key anyway (a concurrent enqueue, or keys the column's collation
    /// takes for equal, such as `K` and `k`), it inserted nothing, and the jobs go one at a
    /// time, with exactly the per-job semantics.
    async fn insert_many(
        &self,
        conn: &mut MySqlConnection,
        queue: &str,
        jobs: &[&Job],
        payloads: &[&str],
    ) -> Result<Vec<Option<Enqueued>>> {
        let mut answers: Vec<Option<Enqueued>> = vec![None; jobs.len()];
        let keys: Vec<&str> = jobs.iter().filter_map(|job| job.key.as_deref()).collect();
        if !keys.is_empty() {
            let sql = self.sql_list(ENQUEUE_MANY_EXISTING, "{keys}", &list(keys.len()));
            let mut lookup = sqlx::query_as::<_, (i64, String)>(sql).bind(queue);
            for key in &keys {
                lookup = lookup.bind(*key);
            }
            let held: std::collections::HashMap<String, i64> = lookup
                .fetch_all(&mut *conn)
                .await?
                .into_iter()
                .map(|(id, key)| (key, id))
                .collect();
            for (answer, job) in answers.iter_mut().zip(jobs) {
                if let Some(&id) = job.key.as_deref().and_then(|key| held.get(key)) {
                    *answer = Some(Enqueued {
                        id: JobId(id),
                        duplicate: true,
                    });
                }
            }
        }
        let new: Vec<usize> = (0..jobs.len()).filter(|&i| answers[i].is_none()).collect();
        if new.is_empty() {
            return Ok(answers);
        }
        let (head, row) = ENQUEUE_MANY
            .rsplit_once("VALUES")
            .ok_or_else(|| Error::config("enqueue_many.sql has no VALUES (a build bug)"))?;
        let rows = vec![row.trim(); new.len()].join(",");
        let mut insert = sqlx::query(self.sql(&format!("{head}VALUES {rows}")));
        for &i in &new {
            let job = jobs[i];
            insert = insert
                .bind(queue)
                .bind(payloads[i])
                .bind(job.priority)
                .bind(micros(job.delay))
                .bind(job.max_attempts)
                .bind(job.key.as_deref());
        }
        match insert.execute(&mut *conn).await {
            Ok(done) => {
                let step = *self
                    .id_step
                    .get_or_try_init(|| async {
                        sqlx::query_scalar::<_, i64>(AUTO_INCREMENT_INCREMENT)
                            .fetch_one(&mut *conn)
                            .await
                    })
                    .await?;
                let first = i64::try_from(done.last_insert_id())
                    .map_err(|_| Error::backend_msg("mysql", "job id out of range"))?;
                if done.rows_affected() != new.len() as u64 {
                    return Err(Error::backend_msg(
                        "mysql",
                        format!(
                            "an insert of {} jobs inserted {}",
                            new.len(),
                            done.rows_affected()
                        ),
                    ));
                }
                for (n, &i) in new.iter().enumerate() {
                    answers[i] = Some(Enqueued {
                        id: JobId(first + step.max(1) * n as i64),
                        duplicate: false,
                    });
                }
            }
            // Only the idempotency key is unique besides the generated id.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                for &i in &new {
                    answers[i] = Some(self.insert(&mut *conn, queue, jobs[i]).await?);
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(answers)
    }

    /// `max_allowed_packet` less 16 KiB for the statement and the job's other values: a larger
    /// statement is refused by the server, which then closes the connection.
    async fn max_payload(&self, conn: &mut MySqlConnection) -> Result<Option<usize>> {
        let packet = *self
            .max_packet
            .get_or_try_init(|| async {
                sqlx::query_scalar::<_, u64>(MAX_ALLOWED_PACKET)
                    .fetch_one(&mut *conn)
                    .await
            })
            .await?;
        let limit = usize::try_from(packet).unwrap_or(usize::MAX);
        Ok(Some(limit.saturating_sub(16 << 10)))
    }

    async fn insert(&self, conn: &mut MySqlConnection, queue: &str, job: &Job) -> Result<Enqueued> {
        let payload = job.payload.to_string();
        if let Some(limit) = self.max_payload(&mut *conn).await? {
            check_payload(payload.len(), limit)?;
        }
        if let Some((key, window)) = job.windowed_key() {
            sqlx::query(self.sql(RELEASE_KEY))
                .bind(queue)
                .bind(key)
                .bind(micros(window))
                .execute(&mut *conn)
                .await?;
        }
        for _ in 0..3 {
            let inserted = sqlx::query(self.sql(ENQUEUE))
                .bind(queue)
                .bind(&payload)
                .bind(job.priority)
                .bind(micros(job.delay))
                .bind(job.max_attempts)
                .bind(job.key.as_deref())
                .execute(&mut *conn)
                .await;
            match inserted {
                Ok(done) => {
                    let id = i64::try_from(done.last_insert_id())
                        .map_err(|_| Error::backend_msg("mysql", "job id out of range"))?;
                    return Ok(Enqueued {
                        id: JobId(id),
                        duplicate: false,
                    });
                }
                // Only the idempotency key is unique besides the generated id.
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    let existing: Option<i64> = sqlx::query_scalar(self.sql(ENQUEUE_EXISTING))
                        .bind(queue)
                        .bind(job.key.as_deref())
                        .fetch_optional(&mut *conn)
                        .await?;
                    if let Some(id) = existing {
                        return Ok(Enqueued {
                            id: JobId(id),
                            duplicate: true,
                        });
                    }
                    // The job that held the key was deleted meanwhile: insert again.
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::backend_msg(
            "mysql",
            "enqueue found neither a new nor an existing job",
        ))
    }
}
