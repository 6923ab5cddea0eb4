//! PostgreSQL: the tools that work *inside the caller's own transaction* — transaction-scoped
//! locks, fenced writes, and effects that run once. The fixed derivation of advisory-lock keys
//! ([`advisory_key`]) is shared with the session-scoped lock backend
//! ([`crate::backend::postgres`]).
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
//! let mut tx = pool.begin().await?;
//! store.fence(&mut tx, "report-42", token).await?;
//! // … the write itself, in the same transaction …
//! tx.commit().await?;
//!
//! // An effect that runs once per (scope, key), whatever the number of callers.
//! let outcome = store
//!     .run_once("monthly-report", "2026-11", |tx| {
//!         Box::pin(async move {
//!             sqlx::query("INSERT INTO reports (month) VALUES ('2026-11')")
//!                 .execute(&mut **tx)
//!                 .await?;
//!             Ok::<_, lockwise::Error>(())
//!         })
//!     })
//!     .await?;
//! if let Once::AlreadyDone = outcome { /* another instance did it */ }
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::postgres::{PgConnection, PgDatabaseError, PgPool, PgQueryResult};
use sqlx::{AssertSqlSafe, Postgres, Transaction};
use tokio::sync::OnceCell;

use crate::db::pg_conn::{Schema, token_from_db};
use crate::db::pg_pooler::PgDb;
use crate::error::{Error, Result};
use crate::lease::{FencingToken, validate_key};
use crate::options::Retry;

/// The SQLSTATE the fence function raises for a stale token.
const STALE_TOKEN_SQLSTATE: &str = "LW409";

pub use crate::db::pg_conn::{ADVISORY_CLASS, DEFAULT_SCHEMA, advisory_key};

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
    db: PgDb,
    schema: Arc<Schema>,
    namespace: Option<Arc<str>>,
    ready: Arc<OnceCell<()>>,
}

impl Store {
    /// The tools in the default schema, `lockwise`.
    pub fn new(pool: PgPool) -> Self {
        Store {
            db: PgDb::new(pool),
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
    ///
    /// # Cancel safety
    ///
    /// The objects are created in one transaction: dropping the future rolls it back (nothing
    /// half-created) and a later call tries again.
    pub async fn migrate(&self) -> Result<()> {
        self.ready
            .get_or_try_init(|| async {
                let pooled = self.db.pooled().await?;
                let mut conn = self.db.pool().acquire().await?;
                self.schema.migrate(&mut conn, !pooled).await.map(|_| ())
            })
            .await
            .map(|_| ())
    }

    /// **For the lab's clean-up only**: drops this store's schema and everything in it
    /// (`DROP SCHEMA … CASCADE`: fences, fencing sequence, run-once records, and any table the
    /// caller or the queue put there). Refuses the default schema, `lockwise`, with
    /// [`Error::InvalidConfig`]: other users of the database share it.
    ///
    /// **Warning**: this resets fencing tokens. A later holder starts again from token 1,
    /// below what a fenced resource may have seen, and the run-once records are forgotten.
    /// Call it only for a schema that no process will ever use again.
    #[cfg(feature = "lab")]
    pub async fn drop_schema(self) -> Result<()> {
        if self.schema.is_default() {
            return Err(Error::config(format!(
                "refusing to drop the default schema {DEFAULT_SCHEMA:?}: other users share it"
            )));
        }
        sqlx::query(self.schema.sql("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .execute(&self.db)
            .await?;
        Ok(())
    }

    /// Takes the advisory lock of `key` inside the caller's transaction
    /// (`pg_try_advisory_xact_lock`, the analogue of SQL Server's `sp_getapplock` with
    /// `@LockOwner = 'Transaction'`); commit or rollback releases it.
    ///
    /// Waits up to `wait` by trying again, never by a blocking lock call, so "not obtained" is
    /// `Ok(None)` and never aborts the transaction. It excludes session-scoped locks on the same
    /// key ([`crate::backend::postgres`], with the same namespace), and its fencing token comes
    /// from the same sequence (of the same schema). It sets `synchronous_commit = on` for the
    /// rest of the transaction, so that a token the caller may have used is never issued again
    /// after a crash of the server.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future between attempts leaves the transaction as it was. Dropped while a
    /// statement is in flight, the transaction may hold the lock (and a fencing token was
    /// consumed) without the caller knowing, or the connection may be mid-statement: roll the
    /// transaction back. Either way the lock ends with the transaction.
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
            "SELECT CASE WHEN pg_try_advisory_xact_lock($1, $2) THEN nextval('{schema}.fence_seq') END \
             FROM (SELECT set_config('synchronous_commit', 'on', true)) durable",
        );
        let persistent = !self.db.pooled().await?;
        let give_up = tokio::time::Instant::now() + wait;
        let mut retry = Retry::exponential(Duration::from_millis(5), Duration::from_millis(200));
        loop {
            let token: Option<i64> = sqlx::query_scalar(AssertSqlSafe(sql.0.clone()))
                .persistent(persistent)
                .bind(class)
                .bind(half)
                .fetch_one(&mut *conn)
                .await?;
            if let Some(token) = token {
                return Ok(Some(XactLock {
                    key: key.to_owned(),
                    token: token_from_db(token)?,
                }));
            }
            let now = tokio::time::Instant::now();
            let Some(pause) = retry.next_backoff().filter(|_| now < give_up) else {
                return Ok(None);
            };
            tokio::time::sleep(pause.min(give_up - now)).await;
        }
    }

    /// Checks `token` against the highest token `resource` has accepted and records it, inside
    /// the caller's transaction. A token lower than the highest is rejected *in the server*:
    /// the transaction is aborted even if the caller ignores the error, and this returns
    /// [`Error::StaleToken`]. Equal tokens pass (one grant may write many times).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while the check is in flight leaves the caller's transaction
    /// unusable (it may or may not have recorded the token, and the connection may be
    /// mid-statement): roll it back; nothing it did is committed.
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
        let persistent = !self.db.pooled().await?;
        let result = sqlx::query(self.schema.sql("SELECT {schema}.fence($1, $2)"))
            .persistent(persistent)
            .bind(resource)
            .bind(presented)
            .execute(&mut *conn)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db)) => {
                let refused = db
                    .try_downcast_ref::<PgDatabaseError>()
                    .filter(|pg| pg.code() == STALE_TOKEN_SQLSTATE)
                    .map(|pg| pg.detail().and_then(|d| d.parse::<u64>().ok()));
                match refused {
                    Some(current) => Err(stale(resource, token, current.map(FencingToken::new))),
                    None => Err(sqlx::Error::Database(db).into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The highest token `resource` has accepted, if any.
    ///
    /// # Cancel safety
    ///
    /// A read on a pooled connection: dropping the future changes nothing.
    pub async fn fenced_token(&self, resource: &str) -> Result<Option<FencingToken>> {
        self.migrate().await?;
        let token: Option<i64> = sqlx::query_scalar(
            self.schema
                .sql("SELECT token FROM {schema}.fence WHERE resource = $1"),
        )
        .bind(resource)
        .fetch_optional(&self.db)
        .await?;
        token.map(token_from_db).transpose()
    }

    /// Runs `effect` at most once per `(scope, key)`: a marker row under a unique constraint
    /// and the effect's own writes commit in one transaction. A duplicate (even a concurrent
    /// one, which waits for the first to commit) returns [`Once::AlreadyDone`]. An effect that
    /// fails rolls back its marker too, so the next attempt runs it.
    ///
    /// Meant for READ COMMITTED (PostgreSQL's default): under REPEATABLE READ or SERIALIZABLE
    /// a concurrent duplicate fails with a serialization error instead (still at most once).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the commit drops the transaction, which rolls back the
    /// marker and the effect's writes: the next call runs the effect. Dropped while the commit
    /// is in flight, the commit may or may not have happened; the marker tells the next call.
    pub async fn run_once<T, E, F>(&self, scope: &str, key: &str, effect: F) -> Result<Once<T>, E>
    where
        F: for<'t> FnOnce(&'t mut Transaction<'static, Postgres>) -> BoxFuture<'t, Result<T, E>>,
        E: From<Error>,
    {
        self.migrate().await?;
        let mut tx = self.db.begin().await.map_err(Error::from)?;
        let marked =
            sqlx::query(self.schema.sql(
                "INSERT INTO {schema}.once (scope, key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            ))
            .bind(scope)
            .bind(key)
            .execute(&mut tx)
            .await
            .map_err(Error::from)?;
        if marked.rows_affected() == 0 {
            tx.rollback().await.map_err(Error::from)?;
            return Ok(Once::AlreadyDone);
        }
        // An error drops `tx`: marker and effect roll back.
        let value = effect(tx.transaction()).await?;
        tx.commit().await.map_err(Error::from)?;
        Ok(Once::Done(value))
    }
}

/// Whether `pool` reaches PostgreSQL through a proxy that lends server connections per
/// transaction (PgBouncer in `transaction` or `statement` mode), asked with a pool connection
/// and a second, short-lived one. lockwise's own statements adapt by themselves; yours, through
/// such a proxy below PgBouncer 1.21, must be unnamed (`sqlx::query(…).persistent(false)`) and
/// inside a transaction.
///
/// # Cancel safety
///
/// Only reads: dropping the future changes nothing.
pub async fn behind_a_transaction_pooler(pool: &PgPool) -> Result<bool> {
    Ok(crate::db::pg_pooler::behind_a_pooler(pool).await?)
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
///?;
/// lockwise::postgres::check_fenced(&done, "reports/42", token)?;
/// # Ok(()) }
/// ```
pub fn check_fenced(done: &PgQueryResult, resource: &str, token: FencingToken) -> Result<()> {
    if done.rows_affected() == 0 {
        return Err(stale(resource, token, None));
    }
    Ok(())
}

/// A fenced write refused, counted (`lockwise_fenced_writes_refused_total`).
fn stale(resource: &str, presented: FencingToken, current: Option<FencingToken>) -> Error {
    crate::metrics::fenced_write_refused("postgres");
    Error::StaleToken {
        resource: resource.to_owned(),
        presented,
        current,
    }
}
