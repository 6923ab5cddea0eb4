//! Rosters in MariaDB/MySQL: a row per group in `lockwise_partition_roster`, replaced by a
//! compare-and-swap on its version (`sql/mysql/partition/`).

use async_trait::async_trait;
use sqlx::MySqlPool;

use super::roster::RosterStore;
use crate::error::Result;

/// Rosters in one database, on a small pool of their own.
#[derive(Debug, Clone)]
pub(crate) struct MysqlRosters {
    pool: MySqlPool,
}

impl MysqlRosters {
    /// Opens a pool to `url` and creates the roster table if it is missing.
    pub(crate) async fn connect(url: &str) -> Result<Self> {
        let pool = crate::db::mysql_conn::pool(url, 2).await?;
        sqlx::raw_sql(include_str!("../../sql/mysql/partition/roster.sql"))
            .execute(&pool)
            .await?;
        Ok(MysqlRosters { pool })
    }
}

#[async_trait]
impl RosterStore for MysqlRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        let row: Option<(i64, String)> =
            sqlx::query_as(include_str!("../../sql/mysql/partition/load.sql"))
                .bind(group.as_bytes())
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some((version, roster)) => (u64::try_from(version).unwrap_or(0), Some(roster)),
            None => (0, None),
        })
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        let done = if expected == 0 {
            sqlx::query(include_str!("../../sql/mysql/partition/insert.sql"))
                .bind(group.as_bytes())
                .bind(roster)
                .execute(&self.pool)
                .await?
        } else {
            sqlx::query(include_str!("../../sql/mysql/partition/update.sql"))
                .bind(roster)
                .bind(group.as_bytes())
                .bind(i64::try_from(expected).unwrap_or(i64::MAX))
                .execute(&self.pool)
                .await?
        };
        Ok(done.rows_affected() == 1)
    }

    async fn remove(&self, group: &str) -> Result<()> {
        sqlx::query(include_str!("../../sql/mysql/partition/remove.sql"))
            .bind(group.as_bytes())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
