//! The versions of the queue table, and applying them.

use sqlx::AssertSqlSafe;
use sqlx::mysql::MySqlConnection;

use super::MysqlDriver;
use crate::error::{Error, Result};

/// The column version 3 adds.
const V3_COLUMN: &str = "released_key";

/// The binary NO PAD collations version 4 converts the table to (MariaDB's, MySQL 8's): a
/// table whose `queue` column has one is up to date.
const BINARY_COLLATIONS: [&str; 2] = ["utf8mb4_nopad_bin", "utf8mb4_0900_bin"];

const V1: &str = sql!("v1.sql");
const V2: &str = sql!("v2.sql");
const V3: &str = sql!("v3.sql");
const V4: &str = sql!("v4.sql");
const V5: &str = sql!("v5.sql");
const V6: &str = sql!("v6.sql");
const COLUMN_EXISTS: &str = sql!("column_exists.sql");
const COLUMN_COLLATION: &str = sql!("column_collation.sql");
const BINARY_COLLATION: &str = sql!("binary_collation.sql");
pub(super) const MIGRATE_LOCK: &str = sql!("migrate_lock.sql");
pub(super) const RELEASE_LOCK: &str = sql!("release_lock.sql");

impl MysqlDriver {
    /// Applies the versions missing (under the migration lock): version 1 creates the table if
    /// it is not there; versions 2 and 3 are applied when the column each adds is missing, and
    /// version 4 when the table is not in a binary collation, so a migration cut short by a
    /// crash (MySQL DDL is not transactional) is finished next time.
    pub(super) async fn apply_migrations(&self, conn: &mut MySqlConnection) -> Result<()> {
        // Up to date (the usual case): one read and no DDL, so that a user without CREATE
        // privileges can open a queue an administrator migrated.
        if self.is_binary(&mut *conn).await?
            && self.has_workers_table(&mut *conn).await?
            && self.has_table(&mut *conn, &self.periodic, "name").await?
        {
            return Ok(());
        }
        sqlx::raw_sql(self.sql(V1)).execute(&mut *conn).await?;
        for (version, column, ddl) in [(2, "started", V2), (3, V3_COLUMN, V3)] {
            if !self.has_column(&mut *conn, column).await? {
                sqlx::raw_sql(self.sql(ddl)).execute(&mut *conn).await?;
                tracing::info!(version, "queue tables migrated");
            }
        }
        let binary_table = self.is_binary(&mut *conn).await?;
        let workers_table = self.has_workers_table(&mut *conn).await?;
        let schedule_tables = self.has_table(&mut *conn, &self.periodic, "name").await?;
        if !(binary_table && workers_table && schedule_tables) {
            let binary: Option<String> = sqlx::query_scalar(BINARY_COLLATION)
                .fetch_optional(&mut *conn)
                .await?;
            let binary = binary.ok_or_else(|| {
                Error::config(
                    "the server has neither utf8mb4_nopad_bin (MariaDB 10.2+) nor \
                     utf8mb4_0900_bin (MySQL 8): the queue needs one to compare keys and \
                     queue names byte for byte",
                )
            })?;
            if !binary_table {
                let ddl = self.sql(V4).0.replace("{binary}", &binary);
                sqlx::raw_sql(AssertSqlSafe(ddl))
                    .execute(&mut *conn)
                    .await?;
                tracing::info!(version = 4, collation = %binary, "queue tables migrated");
            }
            if !workers_table {
                let ddl = self.sql(V5).0.replace("{binary}", &binary);
                sqlx::raw_sql(AssertSqlSafe(ddl))
                    .execute(&mut *conn)
                    .await?;
                tracing::info!(version = 5, "queue tables migrated");
            }
            if !schedule_tables {
                let ddl = self.sql(V6).0.replace("{binary}", &binary);
                sqlx::raw_sql(AssertSqlSafe(ddl))
                    .execute(&mut *conn)
                    .await?;
                tracing::info!(version = 6, "queue tables migrated");
            }
        }
        Ok(())
    }

    /// Whether every version is applied: the jobs table in a binary collation (version 4,
    /// which comes after the columns of 2 and 3), the workers table (version 5) and the
    /// schedule tables (version 6).
    pub(super) async fn is_latest<'e, E>(&self, executor: E) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql> + Copy,
    {
        Ok(self.is_binary(executor).await?
            && self.has_workers_table(executor).await?
            && self.has_table(executor, &self.periodic, "name").await?)
    }

    /// Whether the workers table of version 5 exists.
    async fn has_workers_table<'e, E>(&self, executor: E) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        self.has_table(executor, &self.workers, "id").await
    }

    /// Whether `table` exists, with its `column`.
    async fn has_table<'e, E>(&self, executor: E, table: &str, column: &str) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        let n: i64 = sqlx::query_scalar(COLUMN_EXISTS)
            .bind(table)
            .bind(column)
            .fetch_one(executor)
            .await?;
        Ok(n > 0)
    }

    /// Whether the jobs table is in a binary collation: its `queue` column is in one of the
    /// [`BINARY_COLLATIONS`] (version 4).
    async fn is_binary<'e, E>(&self, executor: E) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        let collation: Option<Option<String>> = sqlx::query_scalar(COLUMN_COLLATION)
            .bind(&self.table)
            .bind("queue")
            .fetch_optional(executor)
            .await?;
        Ok(collation
            .flatten()
            .is_some_and(|c| BINARY_COLLATIONS.contains(&c.as_str())))
    }

    /// Whether the jobs table has `column`.
    pub(super) async fn has_column<'e, E>(&self, executor: E, column: &str) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = sqlx::MySql>,
    {
        let n: i64 = sqlx::query_scalar(COLUMN_EXISTS)
            .bind(&self.table)
            .bind(column)
            .fetch_one(executor)
            .await?;
        Ok(n > 0)
    }
}
