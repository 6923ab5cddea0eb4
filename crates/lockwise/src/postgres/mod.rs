//! PostgreSQL: the tools that work *inside the caller's own transaction* — transaction-scoped
//! locks, fenced writes, and effects that run once — plus the fixed derivation of advisory-lock
//! keys shared with the session-scoped lock backend ([`crate::backend::postgres`]).
//!
//! Everything lives in one schema (default `lockwise`), created on first use, idempotently,
//! under an advisory lock so that processes starting together do not collide.
//!
//! ```no_run
//! # async fn demo(pool: sqlx::PgPool, token: lockwise::FencingToken) -> lockwise::Result<()> {
//! use lockwise::postgres::{Once, Store};
//!
//! let store = Store::new(pool.clone());
//!
//! // A fenced write: rejected (and the transaction aborted) if a newer token already wrote.
//! let mut tx = pool.begin().await.map_err(lockwise::Error::from_sqlx)?;
//! store.fence(&mut tx, "report-42", token).await?;
//! // … the write itself, in the same transaction …
//! tx.commit().await.map_err(lockwise::Error::from_sqlx)?;
//!
//! // An effect that runs once per (scope, key), whatever the number of callers.
//! let outcome = store
//!     .run_once("monthly-report", "2026-11", |tx| {
//!         Box::pin(async move {
//!             sqlx::query("INSERT INTO reports (month) VALUES ('2026-11')")
//!                 .execute(&mut **tx)
//!                 .await
//!                 .map_err(lockwise::Error::from_sqlx)
//!         })
//!     })
//!     .await?;
//! if let Once::AlreadyDone = outcome { /* another instance did it */ }
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgDatabaseError, PgPool, PgQueryResult};
use sqlx::{AssertSqlSafe, Connection, Postgres, Transaction};
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::lease::{FencingToken, validate_key};
use crate::url::redact_url;

mod singleton;
pub use singleton::Singleton;

/// The first half of every lockwise advisory-lock key (`'lwk1'` in ASCII), so that other users
/// of advisory locks in the same database do not collide with lockwise.
pub const ADVISORY_CLASS: i32 = 0x6C77_6B31;

/// The schema used unless another is named.
pub const DEFAULT_SCHEMA: &str = "lockwise";

/// The SQLSTATE the fence function raises for a stale token.
const STALE_TOKEN_SQLSTATE: &str = "LW409";

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

    /// `template` with `{schema}` replaced by the quoted name (never user input otherwise).
    pub(crate) fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{schema}", &self.quoted))
    }

    /// Creates the schema's objects if missing; safe when several processes do it at once.
    /// When they all exist already (the usual case) this is one read-only query.
    pub(crate) async fn migrate(&self, conn: &mut PgConnection) -> Result<()> {
        let present: bool = sqlx::query_scalar(self.sql(
            "SELECT to_regclass('{schema}.once') IS NOT NULL \
               AND to_regclass('{schema}.fence_seq') IS NOT NULL \
               AND to_regprocedure('{schema}.fence(text, bigint)') IS NOT NULL",
        ))
        .fetch_one(&mut *conn)
        .await
        .map_err(Error::from_sqlx)?;
        if present {
            return Ok(());
        }
        let mut tx = conn.begin().await.map_err(Error::from_sqlx)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, 0)")
            .bind(ADVISORY_CLASS)
            .execute(&mut *tx)
            .await
            .map_err(Error::from_sqlx)?;
        sqlx::raw_sql(self.sql(include_str!("../../sql/postgres_schema.sql")))
            .execute(&mut *tx)
            .await
            .map_err(Error::from_sqlx)?;
        tx.commit().await.map_err(Error::from_sqlx)
    }
}

/// Connection options for `url`, tagged `application_name = 'lockwise'`.
pub(crate) fn connect_options(url: &str) -> Result<PgConnectOptions> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(|_| Error::config(format!("malformed PostgreSQL URL {}", redact_url(url))))?;
    Ok(options.application_name("lockwise"))
}

/// How long connecting may take before it is reported as failed.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// Opens one connection within [`CONNECT_TIMEOUT`].
pub(crate) async fn connect(options: &PgConnectOptions, shown: &str) -> Result<PgConnection> {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(Error::backend(
            "postgres",
            format!("cannot connect to {shown}: {e}"),
            e,
        )),
        Err(_) => Err(Error::backend_msg(
            "postgres",
            format!("no answer from {shown} within {CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// A lock taken with [`Store::lock_xact`]: held until the transaction commits or rolls back.
#[derive(Debug, Clone)]
#[must_use = "the lock is held until the transaction ends; use its token"]
pub struct XactLock {
    key: String,
    token: FencingToken,
}

impl XactLock {
    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its fencing token (from the schema's sequence: a rollback cannot reissue it).
    pub fn token(&self) -> FencingToken {
        self.token
    }
}

/// The outcome of [`Store::run_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Once<T> {
    /// The effect ran now and committed, returning this.
    Done(T),
    /// It had already run (or another caller ran it concurrently and committed).
    AlreadyDone,
}

/// The lockwise tables in one schema of a PostgreSQL database, used inside callers'
/// transactions. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    schema: Arc<Schema>,
    namespace: Option<Arc<str>>,
    ready: Arc<OnceCell<()>>,
}

impl Store {
    /// The tools in the default schema, `lockwise`.
    pub fn new(pool: PgPool) -> Self {
        Store {
            pool,
            schema: Arc::new(Schema::default_schema()),
            namespace: None,
            ready: Arc::default(),
        }
    }

    /// The tools in schema `name` (lowercase letters, digits and `_`).
    pub fn with_schema(pool: PgPool, name: &str) -> Result<Self> {
        Ok(Store {
            schema: Arc::new(Schema::new(name)?),
            ..Store::new(pool)
        })
    }

    /// Puts transaction-scoped locks under `namespace`, as
    /// [`PostgresBuilder::namespace`](crate::backend::postgres::PostgresBuilder::namespace)
    /// does for session locks (the advisory key derives from `namespace:key`), so that both
    /// kinds keep excluding each other on a key.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(Arc::from(namespace.into()));
        self
    }

    /// Creates the schema's tables if they are missing (done on first use anyway), on a
    /// connection of the pool — never inside a caller's transaction.
    pub async fn migrate(&self) -> Result<()> {
        self.ready
            .get_or_try_init(|| async {
                let mut conn = self.pool.acquire().await.map_err(Error::from_sqlx)?;
                self.schema.migrate(&mut conn).await
            })
            .await
            .map(|_| ())
    }

    /// Takes the advisory lock of `key` inside the caller's transaction
    /// (`pg_try_advisory_xact_lock`, the analogue of SQL Server's `sp_getapplock` with
    /// `@LockOwner = 'Transaction'`); commit or rollback releases it.
    ///
    /// Waits up to `wait` by trying again, never by a blocking lock call, so "not obtained" is
    /// `Ok(None)` and never aborts the transaction. It excludes session-scoped locks on the same
    /// key ([`crate::backend::postgres`], with the same namespace), and its fencing token comes
    /// from the same sequence (of the same schema).
    pub async fn lock_xact(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        key: &str,
        wait: Duration,
    ) -> Result<Option<XactLock>> {
        let conn: &mut PgConnection = tx;
        validate_key(key)?;
        self.migrate().await?;
        let (class, half) = advisory_key(&crate::lease::namespaced(self.namespace.as_deref(), key));
        let sql = self.schema.sql(
            "SELECT CASE WHEN pg_try_advisory_xact_lock($1, $2) THEN nextval('{schema}.fence_seq') END",
        );
        let give_up = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        loop {
            let token: Option<i64> = sqlx::query_scalar(AssertSqlSafe(sql.0.clone()))
                .bind(class)
                .bind(half)
                .fetch_one(&mut *conn)
                .await
                .map_err(Error::from_sqlx)?;
            if let Some(token) = token {
                return Ok(Some(XactLock {
                    key: key.to_owned(),
                    token: token_from_db(token)?,
                }));
            }
            let now = tokio::time::Instant::now();
            if now >= give_up {
                return Ok(None);
            }
            tokio::time::sleep(pause.min(give_up - now)).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// Checks `token` against the highest token `resource` has accepted and records it, inside
    /// the caller's transaction. A token lower than the highest is rejected *in the server*:
    /// the transaction is aborted even if the caller ignores the error, and this returns
    /// [`Error::StaleToken`]. Equal tokens pass (one grant may write many times).
    pub async fn fence(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        resource: &str,
        token: FencingToken,
    ) -> Result<()> {
        let conn: &mut PgConnection = tx;
        self.migrate().await?;
        let presented = i64::try_from(token.get()).map_err(|_| {
            Error::config(format!("fencing token {token} exceeds PostgreSQL bigint"))
        })?;
        let result = sqlx::query(self.schema.sql("SELECT {schema}.fence($1, $2)"))
            .bind(resource)
            .bind(presented)
            .execute(&mut *conn)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db)) => {
                let stale = db
                    .try_downcast_ref::<PgDatabaseError>()
                    .filter(|pg| pg.code() == STALE_TOKEN_SQLSTATE)
                    .map(|pg| pg.detail().and_then(|d| d.parse::<u64>().ok()));
                match stale {
                    Some(current) => Err(Error::StaleToken {
                        resource: resource.to_owned(),
                        presented: token,
                        current: current.map(FencingToken::new),
                    }),
                    None => Err(Error::from_sqlx(sqlx::Error::Database(db))),
                }
            }
            Err(e) => Err(Error::from_sqlx(e)),
        }
    }

    /// The highest token `resource` has accepted, if any.
    pub async fn fenced_token(&self, resource: &str) -> Result<Option<FencingToken>> {
        self.migrate().await?;
        let token: Option<i64> = sqlx::query_scalar(
            self.schema
                .sql("SELECT token FROM {schema}.fence WHERE resource = $1"),
        )
        .bind(resource)
        .fetch_optional(&self.pool)
        .await
        .map_err(Error::from_sqlx)?;
        token.map(token_from_db).transpose()
    }

    /// Runs `effect` at most once per `(scope, key)`: a marker row under a unique constraint
    /// and the effect's own writes commit in one transaction. A duplicate (even a concurrent
    /// one, which waits for the first to commit) returns [`Once::AlreadyDone`]. An effect that
    /// fails rolls back its marker too, so the next attempt runs it.
    ///
    /// Meant for READ COMMITTED (PostgreSQL's default): under REPEATABLE READ or SERIALIZABLE
    /// a concurrent duplicate fails with a serialization error instead (still at most once).
    pub async fn run_once<T, E, F>(&self, scope: &str, key: &str, effect: F) -> Result<Once<T>, E>
    where
        F: for<'t> FnOnce(&'t mut Transaction<'static, Postgres>) -> BoxFuture<'t, Result<T, E>>,
        E: From<Error>,
    {
        self.migrate().await?;
        let mut tx = self.pool.begin().await.map_err(Error::from_sqlx)?;
        let marked =
            sqlx::query(self.schema.sql(
                "INSERT INTO {schema}.once (scope, key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            ))
            .bind(scope)
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(Error::from_sqlx)?;
        if marked.rows_affected() == 0 {
            tx.rollback().await.map_err(Error::from_sqlx)?;
            return Ok(Once::AlreadyDone);
        }
        let value = effect(&mut tx).await?; // an error drops `tx`: marker and effect roll back
        tx.commit().await.map_err(Error::from_sqlx)?;
        Ok(Once::Done(value))
    }
}

/// Checks the outcome of a fenced write to your own table, written in the column pattern:
///
/// ```sql
/// UPDATE reports SET body = $1, fencing_token = $2 WHERE id = $3 AND fencing_token <= $2
/// ```
///
/// No row updated means a newer token already wrote (or the row is missing):
/// [`Error::StaleToken`]. (The lesson's stricter `fencing_token < $2` allows one write per
/// grant.)
///
/// ```no_run
/// # async fn demo(pool: sqlx::PgPool, token: lockwise::FencingToken) -> lockwise::Result<()> {
/// let t = token.get() as i64;
/// let done = sqlx::query(
///     "UPDATE reports SET body = $1, fencing_token = $2 WHERE id = $3 AND fencing_token <= $2",
/// )
/// .bind("…").bind(t).bind(42)
/// .execute(&pool)
/// .await
/// .map_err(lockwise::Error::from_sqlx)?;
/// lockwise::postgres::check_fenced(&done, "reports/42", token)?;
/// # Ok(()) }
/// ```
pub fn check_fenced(done: &PgQueryResult, resource: &str, token: FencingToken) -> Result<()> {
    if done.rows_affected() == 0 {
        return Err(Error::StaleToken {
            resource: resource.to_owned(),
            presented: token,
            current: None,
        });
    }
    Ok(())
}

pub(crate) fn token_from_db(token: i64) -> Result<FencingToken> {
    u64::try_from(token)
        .map(FencingToken::new)
        .map_err(|_| Error::backend_msg("postgres", format!("negative fencing token {token}")))
}
