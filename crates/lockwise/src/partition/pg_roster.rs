//! Rosters in PostgreSQL: a row per group in `<schema>.partition_roster`, replaced by a
//! compare-and-swap on its version (`sql/postgres/partition/`).

use async_trait::async_trait;
use sqlx::PgPool;

use super::roster::RosterStore;
use crate::db::pg_conn::{ADVISORY_CLASS, Schema};
use crate::error::Result;

/// Rosters in one schema of a database, on a small pool of their own.
#[derive(Debug, Clone)]
pub(crate) struct PgRosters {
    pool: PgPool,
    schema: std::sync::Arc<Schema>,
}

impl PgRosters {
    /// Opens a pool to `url` and creates the roster table if it is missing.
    pub(crate) async fn connect(url: &str) -> Result<Self> {
        let pool = crate::db::pg_conn::pool(url, 2).await?;
        let rosters = PgRosters {
            pool,
            schema: std::sync::Arc::new(Schema::default_schema()),
        };
        let mut tx = rosters.pool.begin().await?;
        // Concurrent CREATE … IF NOT EXISTS can still collide: one at a time.
        sqlx::query("SELECT pg_advisory_xact_lock($1, 1)")
            .bind(ADVISORY_CLASS)
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(
            rosters
                .schema
                .sql(include_str!("../../sql/postgres/partition/roster.sql")),
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(rosters)
    }
}

#[async_trait]
impl RosterStore for PgRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        let row: Option<(i64, String)> = sqlx::query_as(
            self.schema
                .sql(include_str!("../../sql/postgres/partition/load.sql")),
        )
        .bind(group)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some((version, roster)) => (u64::try_from(version).unwrap_or(0), Some(roster)),
            None => (0, None),
        })
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        let expected = i64::try_from(expected).unwrap_or(i64::MAX);
        let sql = if expected == 0 {
            include_str!("../../sql/postgres/partition/swap.sql")
        } else {
            include_str!("../../sql/postgres/partition/update.sql")
        };
        let stored: Option<i64> = sqlx::query_scalar(self.schema.sql(sql))
            .bind(group)
            .bind(expected)
            .bind(roster)
            .fetch_optional(&self.pool)
            .await?;
        Ok(stored.is_some())
    }

    async fn remove(&self, group: &str) -> Result<()> {
        sqlx::query(
            self.schema
                .sql(include_str!("../../sql/postgres/partition/remove.sql")),
        )
        .bind(group)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
