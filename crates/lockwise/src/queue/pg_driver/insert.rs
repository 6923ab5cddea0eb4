//! Enqueueing on PostgreSQL: the [`Insert`] impl of [`PgDriver`].

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgPool};

use super::statements::q;
use super::{PgDriver, secs};
use crate::error::{Error, Result};
use crate::queue::bulk::Insert;
use crate::queue::{Enqueued, Job, JobId};

/// `values` as an array for `enqueue_many.sql`: all of them, or only the first when they are
/// all equal.
pub(super) fn shared<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut all: Vec<T> = values.collect();
    if all.windows(2).all(|w| w[0] == w[1]) {
        all.truncate(1);
    }
    all
}

#[async_trait]
impl Insert for PgDriver {
    type Db = sqlx::Postgres;

    /// Arrays are one parameter each: no placeholder limit, only the statement's size.
    const MAX_ROWS: usize = 10_000;
    const MAX_BYTES: usize = 16 << 20;

    fn pool(&self) -> &PgPool {
        self.db.pool()
    }

    async fn insert_many(
        &self,
        conn: &mut PgConnection,
        queue: &str,
        jobs: &[&Job],
        payloads: &[&str],
    ) -> Result<Vec<Option<Enqueued>>> {
        // A column every job shares goes as one element, and keys not at all when no job has
        // one: fewer bytes on the wire (a statement of 1,000 small jobs stays in one TCP
        // write).
        let priorities = shared(jobs.iter().map(|job| job.priority));
        let delays = shared(jobs.iter().map(|job| secs(job.delay)));
        let attempts = shared(jobs.iter().map(|job| job.max_attempts));
        let mut keys: Vec<Option<&str>> = jobs.iter().map(|job| job.key.as_deref()).collect();
        let present: Vec<&str> = keys.iter().flatten().copied().collect();
        if present.is_empty() {
            keys.clear();
        }
        type Answer = (
            Option<Vec<i64>>,
            Option<Vec<i64>>,
            Option<Vec<String>>,
            Option<Vec<i64>>,
        );
        // Called in a transaction: behind a pooling proxy only the statement's name matters.
        let persistent = !self.db.pooled().await?;
        let (ids, inserted, held_keys, held_ids): Answer =
            sqlx::query_as(q(&self.sql.enqueue_many))
                .persistent(persistent)
                .bind(queue)
                .bind(payloads)
                .bind(&priorities)
                .bind(&delays)
                .bind(&attempts)
                .bind(&keys)
                .bind(&present)
                .fetch_one(&mut *conn)
                .await?;
        let ids = ids.unwrap_or_default();
        if ids.len() != jobs.len() {
            return Err(Error::backend_msg(
                "postgres",
                format!("enqueue of {} jobs drew {} ids", jobs.len(), ids.len()),
            ));
        }
        let inserted: std::collections::HashSet<i64> =
            inserted.unwrap_or_default().into_iter().collect();
        let held: std::collections::HashMap<String, i64> = held_keys
            .unwrap_or_default()
            .into_iter()
            .zip(held_ids.unwrap_or_default())
            .collect();
        Ok(ids
            .into_iter()
            .zip(jobs)
            .map(|(id, job)| {
                if inserted.contains(&id) {
                    return Some(Enqueued {
                        id: JobId(id),
                        duplicate: false,
                    });
                }
                let holder = held.get(job.key.as_deref()?)?;
                Some(Enqueued {
                    id: JobId(*holder),
                    duplicate: true,
                })
            })
            .collect())
    }

    async fn insert(&self, conn: &mut PgConnection, queue: &str, job: &Job) -> Result<Enqueued> {
        if self.db.pooled().await? {
            // Behind a pooling proxy: unnamed, in a transaction (or a savepoint of the
            // caller's) that keeps one server from parse to execute.
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let enqueued = self.insert_one(&mut tx, queue, job, false).await?;
            tx.commit().await?;
            return Ok(enqueued);
        }
        self.insert_one(conn, queue, job, true).await
    }
}

impl PgDriver {
    async fn insert_one(
        &self,
        conn: &mut PgConnection,
        queue: &str,
        job: &Job,
        persistent: bool,
    ) -> Result<Enqueued> {
        let window = job.windowed_key().map(|(_, window)| secs(window));
        for _ in 0..3 {
            let row: Option<(i64, bool)> = sqlx::query_as(q(&self.sql.enqueue))
                .persistent(persistent)
                .bind(queue)
                .bind(&job.payload)
                .bind(job.priority)
                .bind(secs(job.delay))
                .bind(job.max_attempts)
                .bind(job.key.as_deref())
                .bind(window)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some((id, inserted)) = row {
                return Ok(Enqueued {
                    id: JobId(id),
                    duplicate: !inserted,
                });
            }
            // A concurrent enqueue with the same key committed after this statement's
            // snapshot: look again.
        }
        Err(Error::backend_msg(
            "postgres",
            "enqueue found neither a new nor an existing job",
        ))
    }
}
