//! The database side of `lockwise lab`: the scratch schema a run creates on PostgreSQL, the
//! fenced data its actors write, the effects its queue workers record, and the fence a
//! partition member writes through. The scenarios, their timelines and their processes are
//! the CLI's; only the SQL is here (`sql/postgres/lab/`).
//!
//! ```no_run
//! # async fn demo() -> lockwise_bench::Result<()> {
//! use std::time::Duration;
//! use lockwise_bench::lab::Database;
//! let db = Database::connect(
//!     "postgres://postgres@127.0.0.1/postgres",
//!     "lockwise_lab_demo",
//!     2,
//!     Duration::from_secs(5),
//! )
//! .await?;
//! db.queue("lab")?.migrate().await?;
//! db.create_effects().await?;
//! assert!(db.effects().record(1, "W1").await?);
//! assert!(!db.effects().record(1, "W2").await?); // the unique key: once
//! db.drop_schema().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use lockwise::FencingToken;
use lockwise::postgres::Store;
use lockwise::queue::Queue;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::conn::{Schema, pg_options};
use crate::error::{Error, Result};

/// A pool on the lab run's scratch schema of a PostgreSQL database (`lockwise_lab_…`): its
/// fence, its queue, its data and effects tables. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Database {
    pool: PgPool,
    schema: Schema,
}

impl Database {
    /// Opens a pool of at most `max_connections` to `url` for the schema `schema` (1 to 63
    /// lowercase letters, digits and `_`), each connection handed out within
    /// `acquire_timeout`. Creates nothing.
    pub async fn connect(
        url: &str,
        schema: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Database> {
        let schema = Schema::new(schema)?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(acquire_timeout)
            .connect_with(pg_options(url)?)
            .await?;
        Ok(Database { pool, schema })
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        self.schema.name()
    }

    /// The queue `name` in the schema (not migrated).
    pub fn queue(&self, name: &str) -> Result<Queue> {
        Ok(Queue::with_schema(self.pool.clone(), self.schema(), name)?)
    }

    /// Creates the fence's tables and the lab's own data table (the resource the token
    /// protects) if missing.
    pub async fn prepare_fence(&self) -> Result<()> {
        self.store()?.migrate().await?;
        sqlx::query(
            self.schema
                .sql(include_str!("../sql/postgres/lab/data_table.sql")),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The fenced data of the schema, as an actor writes and reads it.
    pub fn fenced_data(&self) -> Result<FencedData> {
        Ok(FencedData {
            store: self.store()?,
            db: self.clone(),
        })
    }

    /// Creates the effects table of the queue's jobs (one row per job id).
    pub async fn create_effects(&self) -> Result<()> {
        sqlx::query(
            self.schema
                .sql(include_str!("../sql/postgres/lab/effects_table.sql")),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The effects table of the queue's jobs.
    pub fn effects(&self) -> Effects {
        Effects { db: self.clone() }
    }

    /// Drops the schema and everything in it (fence, queue, data, effects), and closes the
    /// pool. Refuses the default schema, `lockwise`: other users share it.
    pub async fn drop_schema(self) -> Result<()> {
        let dropped = self.store()?.drop_schema().await;
        self.pool.close().await;
        Ok(dropped?)
    }

    fn store(&self) -> Result<Store> {
        Ok(Store::with_schema(self.pool.clone(), self.schema())?)
    }
}

/// The lab's data table behind a fence: a write lands only with a token the fence accepts,
/// in the same transaction.
#[derive(Debug, Clone)]
pub struct FencedData {
    store: Store,
    db: Database,
}

impl FencedData {
    /// Writes `value` to `resource` with `token`: `true` when the fence accepted the token
    /// and the value was stored, `false` when a newer token had written (nothing stored).
    pub async fn write(&self, resource: &str, value: &str, token: FencingToken) -> Result<bool> {
        let stored = i64::try_from(token.get()).map_err(|_| {
            Error::config(format!("fencing token {token} exceeds PostgreSQL bigint"))
        })?;
        let mut tx = self.db.pool.begin().await?;
        match self.store.fence(&mut tx, resource, token).await {
            Ok(()) => {}
            Err(lockwise::Error::StaleToken { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        sqlx::query(
            self.db
                .schema
                .sql(include_str!("../sql/postgres/lab/data_write.sql")),
        )
        .bind(resource)
        .bind(value)
        .bind(stored)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The value of `resource` and the token that wrote it, if any.
    pub async fn read(&self, resource: &str) -> Result<Option<(String, u64)>> {
        let row: Option<(String, i64)> = sqlx::query_as(
            self.db
                .schema
                .sql(include_str!("../sql/postgres/lab/data_read.sql")),
        )
        .bind(resource)
        .fetch_optional(&self.db.pool)
        .await?;
        Ok(row.map(|(v, t)| (v, u64::try_from(t).unwrap_or(0))))
    }
}

/// The effects the lab's queue jobs leave: one row per job id, so that an effect lands once
/// however often its job runs.
#[derive(Debug, Clone)]
pub struct Effects {
    db: Database,
}

impl Effects {
    /// Records job `job_id`'s effect by `worker`: `true` when it landed, `false` when it was
    /// already there.
    pub async fn record(&self, job_id: i64, worker: &str) -> Result<bool> {
        let done = sqlx::query(
            self.db
                .schema
                .sql(include_str!("../sql/postgres/lab/effect_record.sql")),
        )
        .bind(job_id)
        .bind(worker)
        .execute(&self.db.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many effects landed.
    pub async fn count(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(
            self.db
                .schema
                .sql(include_str!("../sql/postgres/lab/effects_count.sql")),
        )
        .fetch_one(&self.db.pool)
        .await?)
    }
}

/// The PostgreSQL fence alone, each write checked in a transaction of its own: what a
/// partition member writes through. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence {
    pool: PgPool,
    store: Store,
}

impl Fence {
    /// Opens a pool of at most `max_connections` to `url` and the fence of `schema` (`None`:
    /// lockwise's default schema), creating its tables if missing.
    pub async fn open(url: &str, schema: Option<&str>, max_connections: u32) -> Result<Fence> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .connect_with(pg_options(url)?)
            .await?;
        let store = match schema {
            Some(schema) => Store::with_schema(pool.clone(), schema)?,
            None => Store::new(pool.clone()),
        };
        store.migrate().await?;
        Ok(Fence { pool, store })
    }

    /// Presents `token` for `resource`: `true` when accepted, `false` when a newer token
    /// had been presented.
    pub async fn write(&self, resource: &str, token: FencingToken) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        match self.store.fence(&mut tx, resource, token).await {
            Ok(()) => {
                tx.commit().await?;
                Ok(true)
            }
            Err(lockwise::Error::StaleToken { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
