//! The versioned migrations of the queue schema, and applying them.

use crate::db::pg_pooler::PgConn;
use sqlx::AssertSqlSafe;

use super::PgDriver;
use super::statements::q;
use crate::db::pg_conn::{ADVISORY_CLASS, Schema};
use crate::error::{Error, Result};

/// The versioned migrations of the queue schema. Each file is the literal SQL the migration
/// runs, history rather than a template: its only placeholders are `{schema}` and `{channel}`
/// ([`migration_sql`]), so that no later edit of another file changes what an old migration
/// does. A change to the schema or to a function is a new migration, never an edit of one
/// that databases may have applied.
///
/// The function bodies of v5.sql, v7.sql, v9.sql and v10.sql were once assembled at run time
/// from templates (ack.sql, claim.sql, claim_any.sql, claim_moved.sql, confirm_started.sql,
/// confirm_locked.sql, lease_segments.sql), which their comments still name: those files are
/// in the repository's history, and each function's text is now in the migration that last
/// replaced it.
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../../sql/postgres/queue/v1.sql")),
    (2, include_str!("../../../sql/postgres/queue/v2.sql")),
    (3, include_str!("../../../sql/postgres/queue/v3.sql")),
    (4, include_str!("../../../sql/postgres/queue/v4.sql")),
    (5, include_str!("../../../sql/postgres/queue/v5.sql")),
    (6, include_str!("../../../sql/postgres/queue/v6.sql")),
    (7, include_str!("../../../sql/postgres/queue/v7.sql")),
    (8, include_str!("../../../sql/postgres/queue/v8.sql")),
    (9, include_str!("../../../sql/postgres/queue/v9.sql")),
    (10, include_str!("../../../sql/postgres/queue/v10.sql")),
    (11, include_str!("../../../sql/postgres/queue/v11.sql")),
    (12, include_str!("../../../sql/postgres/queue/v12.sql")),
    (13, include_str!("../../../sql/postgres/queue/v13.sql")),
    (14, include_str!("../../../sql/postgres/queue/v14.sql")),
    (15, include_str!("../../../sql/postgres/queue/v15.sql")),
];

/// The newest migration in [`MIGRATIONS`].
pub(super) const LATEST: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// `text`, a migration of [`MIGRATIONS`], for one schema: its NOTIFY channel, then its quoted
/// name, filled in.
pub(super) fn migration_sql(text: &str, schema: &Schema, channel: &str) -> AssertSqlSafe<String> {
    schema.sql(&text.replace("{channel}", channel))
}

impl PgDriver {
    /// The newest queue migration applied to the schema, `None` when its migrations table is
    /// missing: catalog reads only, no privilege needed and nothing created.
    pub(super) async fn applied_version(&self, conn: &mut PgConn) -> Result<Option<i32>> {
        let table = self.schema.sql("{schema}.queue_migrations").0;
        let exists: bool = sqlx::query_scalar(q(&self.sql.migrations_exist))
            .bind(&table)
            .fetch_one(&mut *conn)
            .await?;
        if !exists {
            return Ok(None);
        }
        Ok(sqlx::query_scalar(q(&self.sql.migration_version))
            .fetch_one(&mut *conn)
            .await?)
    }

    pub(super) async fn apply_migrations(&self, conn: &mut PgConn) -> Result<()> {
        // Up to date (the usual case): two reads and no DDL, so that a user without CREATE
        // privileges can open a queue an administrator migrated.
        if self.applied_version(conn).await? >= Some(LATEST) {
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        sqlx::query(q(&self.sql.migrate_lock))
            .bind(ADVISORY_CLASS)
            .execute(&mut tx)
            .await?;
        sqlx::raw_sql(q(&self.sql.migrations_table))
            .execute(&mut tx)
            .await?;
        let current: Option<i32> = sqlx::query_scalar(q(&self.sql.migration_version))
            .fetch_one(&mut tx)
            .await?;
        for (version, text) in MIGRATIONS {
            if current.is_some_and(|c| c >= *version) {
                continue;
            }
            sqlx::raw_sql(migration_sql(text, &self.schema, &self.channel))
                .execute(&mut tx)
                .await?;
            sqlx::query(q(&self.sql.migration_applied))
                .bind(version)
                .execute(&mut tx)
                .await?;
            tracing::info!(version, "queue schema migrated");
        }
        tx.commit().await.map_err(Error::from)
    }
}
