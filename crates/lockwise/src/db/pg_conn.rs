//! PostgreSQL plumbing shared by the session lock backend, the transaction tools
//! ([`crate::postgres`]) and the queue: connecting, the schema and its objects, and the fixed
//! derivation of advisory-lock keys.

use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{AssertSqlSafe, Connection, Row};

use crate::error::{Error, Result};
use crate::lease::FencingToken;
use crate::url::redact_url;

/// The first half of every lockwise advisory-lock key (`'lwk1'` in ASCII), so that other users
/// of advisory locks in the same database do not collide with lockwise.
pub const ADVISORY_CLASS: i32 = 0x6C77_6B31;

/// The schema used unless another is named.
pub const DEFAULT_SCHEMA: &str = "lockwise";

/// The advisory-lock key of a lock: `(ADVISORY_CLASS, first 4 bytes of SHA-256(key) as a
/// big-endian i32)`, for `pg_try_advisory_lock(int4, int4)`.
///
/// **Fixed forever**: two versions of lockwise must derive the same key. Distinct keys may
/// share the 32-bit half (one in ~4 billion pairs): they then exclude each other, which costs
/// concurrency, never safety; fencing tokens are per key and unaffected.
///
/// ```
/// assert_eq!(lockwise::postgres::advisory_key("orders:42"), (0x6C77_6B31, -1_973_476_995));
/// ```
pub fn advisory_key(key: &str) -> (i32, i32) {
    let digest = Sha256::digest(key.as_bytes());
    let half = i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    (ADVISORY_CLASS, half)
}

/// A validated schema name and the SQL that uses it.
#[derive(Debug)]
pub(crate) struct Schema {
    quoted: String,
}

impl Schema {
    /// The default schema, `lockwise`.
    pub(crate) fn default_schema() -> Self {
        Schema {
            quoted: format!("\"{DEFAULT_SCHEMA}\""),
        }
    }

    pub(crate) fn new(name: &str) -> Result<Self> {
        let valid = !name.is_empty()
            && name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::config(format!(
                "invalid schema name {name:?}: use 1 to 63 lowercase letters, digits and _"
            )));
        }
        Ok(Schema {
            quoted: format!("\"{name}\""),
        })
    }

    /// Whether this is the default schema, `lockwise`, which other users of the database share.
    #[cfg(feature = "lab")]
    pub(crate) fn is_default(&self) -> bool {
        self.quoted == Self::default_schema().quoted
    }

    /// `template` with `{schema}` replaced by the quoted name (never user input otherwise).
    pub(crate) fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{schema}", &self.quoted))
    }

    /// Creates the schema's objects if missing; safe when several processes do it at once.
    /// When they all exist already (the usual case) this is one read-only query. With
    /// `persistent` false (behind a transaction-pooling proxy, see
    /// [`pg_pooler`](super::pg_pooler)) the statements are unnamed, and the read is in the
    /// transaction too.
    ///
    /// Returns whether the table of who holds what (`holder.sql`) exists too: it is not one of
    /// these objects, and only session locks use it ([`add_holder`](Self::add_holder)).
    pub(crate) async fn migrate(&self, conn: &mut PgConnection, persistent: bool) -> Result<bool> {
        let present_sql = self.sql(
            "SELECT to_regclass('{schema}.once') IS NOT NULL \
               AND to_regclass('{schema}.fence_seq') IS NOT NULL \
               AND to_regprocedure('{schema}.fence(text, bigint)') IS NOT NULL, \
             to_regclass('{schema}.lock_holder') IS NOT NULL",
        );
        if persistent {
            // The simple protocol: one round trip, where a statement prepared for a single
            // use costs two (a `lockwise run` opens a session for one lock).
            let row = sqlx::raw_sql(AssertSqlSafe(present_sql.0.clone()))
                .fetch_one(&mut *conn)
                .await?;
            let (present, holder): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
            if present {
                return Ok(holder);
            }
        }
        let mut tx = conn.begin().await?;
        if !persistent {
            let (present, holder): (bool, bool) = sqlx::query_as(present_sql)
                .persistent(false)
                .fetch_one(&mut *tx)
                .await?;
            if present {
                tx.commit().await?;
                return Ok(holder);
            }
        }
        self.apply(
            &mut tx,
            persistent,
            include_str!("../../sql/postgres/schema.sql"),
        )
        .await?;
        tx.commit().await?;
        Ok(false)
    }

    /// Creates the table of who holds what, in a transaction of its own: whether it exists. A
    /// role that may not create it still takes locks, without their holders' rows.
    pub(crate) async fn add_holder(&self, conn: &mut PgConnection) -> bool {
        let created = async {
            let mut tx = conn.begin().await?;
            self.apply(&mut tx, true, include_str!("../../sql/postgres/holder.sql"))
                .await?;
            tx.commit().await
        };
        match created.await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(
                    %error,
                    "cannot create the table of who holds what ({}.lock_holder): locks are taken \
                     without it, and `lockwise locks` cannot name their keys; connect once as \
                     a role that may create tables in the schema",
                    self.quoted
                );
                false
            }
        }
    }

    /// Runs `template` in `tx` under the migration lock (a transaction-scoped advisory lock
    /// that processes starting together queue on).
    async fn apply(
        &self,
        tx: &mut sqlx::PgTransaction<'_>,
        persistent: bool,
        template: &str,
    ) -> sqlx::Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
            .persistent(persistent)
            .bind(ADVISORY_CLASS)
            .execute(&mut **tx)
            .await?;
        sqlx::raw_sql(self.sql(template)).execute(&mut **tx).await?;
        Ok(())
    }
}

/// Connection options for `url`, tagged in `application_name`: `lockwise`, or the URL's own
/// name with ` (lockwise)` appended, so a DBA sees both.
pub(crate) fn connect_options(url: &str) -> Result<PgConnectOptions> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(|_| Error::config(format!("malformed PostgreSQL URL {}", redact_url(url))))?;
    let name = match options.get_application_name() {
        Some(own) if !own.is_empty() => format!("{own} (lockwise)"),
        _ => "lockwise".to_owned(),
    };
    // Fencing tokens come from a sequence: a commit that returned before its WAL was flushed
    // (synchronous_commit = off, set on the server or the role) could be lost in a crash, and
    // the sequence would issue the same tokens again. Every lockwise connection commits
    // synchronously, whatever the server's default.
    // Notices ("schema … already exists, skipping") are noise to lockwise's users: the server
    // sends none to lockwise's connections.
    Ok(options.application_name(&name).options([
        ("synchronous_commit", "on"),
        ("client_min_messages", "warning"),
    ]))
}

/// How long connecting may take before it is reported as failed.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// Opens one connection within [`CONNECT_TIMEOUT`].
pub(crate) async fn connect(options: &PgConnectOptions, shown: &str) -> Result<PgConnection> {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(Error::backend(
            "postgres",
            format!(
                "cannot connect to {shown}: {}",
                crate::error::sql_reason(&e, "PostgreSQL")
            ),
            e,
        )),
        Err(_) => Err(Error::backend_msg(
            "postgres",
            format!("no answer from {shown} within {CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// A pool of at most `max_connections` to `url`, answering within 5 s (the queue's).
pub(crate) async fn pool(url: &str, max_connections: u32) -> Result<PgPool> {
    let options = connect_options(url)?;
    super::open_pool(options, max_connections, &redact_url(url), "postgres").await
}

pub(crate) fn token_from_db(token: i64) -> Result<FencingToken> {
    u64::try_from(token)
        .map(FencingToken::new)
        .map_err(|_| Error::backend_msg("postgres", format!("negative fencing token {token}")))
}
