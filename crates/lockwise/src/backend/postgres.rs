//! PostgreSQL session-scoped advisory locks, each on a dedicated connection owned by its guard.
//!
//! - **Grant**: `pg_try_advisory_lock(ADVISORY_CLASS, hash)` (see
//!   [`crate::postgres::advisory_key`]) and, in the same statement, the fencing
//!   token from the schema's sequence (shared with transaction-scoped locks, never reissued).
//! - **Process death**: the connection closes and the server releases the lock at once.
//! - **A frozen process** keeps its TCP connection alive (its kernel still answers), so each
//!   session gets a *server-side lease*: `idle_session_timeout` is set to the TTL and every
//!   renewal (a liveness query) resets it. A holder frozen past its TTL loses its session and
//!   the lock, exactly as a Redis lease expires.
//! - **A dropped or terminated connection** makes the next renewal fail, which fires the
//!   guard's lost signal.
//! - **Waiters** are woken by a probe: one connection per contended key and process that waits
//!   in `pg_advisory_lock_shared` (bounded by `lock_timeout`) and gives the lock back *in the
//!   same statement*, then wakes them. It sees releases, dead holders and expired server-side
//!   leases alike.
//!
//! Connections carry `application_name = 'lockwise'`. Connections of failed attempts and
//! released locks are kept (a few) for the next attempt.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::watch;

use super::session::{Probes, Sessions, wake};
use super::{Attempt, Backend, ReleaseWatch};
use crate::db::postgres::{
    DEFAULT_SCHEMA, Schema, advisory_key, connect, connect_options, token_from_db,
};
use crate::error::{Error, Result};
use crate::lease::OwnerToken;
use crate::url::redact_url;

/// Session-scoped advisory locks. Clones share the sessions.
#[derive(Clone)]
pub struct PostgresBackend {
    inner: Arc<Inner>,
}

struct Inner {
    options: PgConnectOptions,
    namespace: Option<String>,
    shown: String,
    grant_sql: String,
    sessions: Sessions<PgConnection>,
    probes: Probes,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("url", &self.inner.shown)
            .finish_non_exhaustive()
    }
}

/// Configures a [`PostgresBackend`].
#[derive(Clone)]
pub struct PostgresBuilder {
    url: String,
    schema: String,
    namespace: Option<String>,
}

impl std::fmt::Debug for PostgresBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBuilder")
            .field("url", &redact_url(&self.url))
            .field("schema", &self.schema)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl PostgresBuilder {
    /// The schema of lockwise's objects (default `lockwise`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Puts every lock under `namespace`: the advisory key is derived from `namespace:key`
    /// instead of `key`, so that applications sharing a database do not collide (advisory locks
    /// are database-wide, not per schema). Default: none.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Connects (within 4 s) and creates the schema's objects if they are missing.
    pub async fn connect(self) -> Result<PostgresBackend> {
        let schema = Schema::new(&self.schema)?;
        let options = connect_options(&self.url)?;
        let shown = redact_url(&self.url);
        let mut first = connect(&options, &shown).await?;
        schema.migrate(&mut first).await?;
        let grant_sql = schema.sql(
            "SELECT set_config('idle_session_timeout', $3, false), \
             CASE WHEN pg_try_advisory_lock($1, $2) THEN nextval('{schema}.fence_seq') END",
        );
        let backend = PostgresBackend {
            inner: Arc::new(Inner {
                options,
                namespace: self.namespace,
                shown,
                grant_sql: grant_sql.0,
                sessions: Sessions::default(),
                probes: Probes::default(),
            }),
        };
        backend.inner.sessions.keep(first);
        Ok(backend)
    }
}

impl PostgresBackend {
    /// Starts configuring a backend for `url` (`postgres://user[:password]@host[:port]/db`).
    pub fn builder(url: impl Into<String>) -> PostgresBuilder {
        PostgresBuilder {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            namespace: None,
        }
    }

    /// Connects with the default settings.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// The server process id of the session holding `owner`'s lock, if any (for tests and
    /// diagnostics, e.g. `pg_terminate_backend`).
    pub async fn session_pid(&self, key: &str, owner: OwnerToken) -> Option<i32> {
        let conn = self.inner.sessions.get(owner, key)?;
        let mut conn = conn.lock().await;
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .ok()
    }

    /// The advisory-lock key of `key` under this backend's namespace (see
    /// [`crate::postgres::advisory_key`]).
    pub fn advisory_key(&self, key: &str) -> (i32, i32) {
        advisory_key(&self.lock_name(key))
    }

    fn lock_name(&self, key: &str) -> String {
        crate::lease::namespaced(self.inner.namespace.as_deref(), key).into_owned()
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> Error {
        Error::backend(
            "postgres",
            format!("{what} on {} failed: {e}", self.inner.shown),
            e,
        )
    }

    async fn fresh(&self) -> Result<PgConnection> {
        connect(&self.inner.options, &self.inner.shown).await
    }

    /// Waits for the lock to be free with a blocking `pg_advisory_lock` (in chunks bounded by
    /// `lock_timeout`), gives it back at once and wakes the waiters; runs until aborted.
    async fn probe(&self, class: i32, half: i32, released: watch::Sender<u64>) {
        loop {
            let conn = match self.fresh().await {
                Ok(mut conn) => sqlx::query("SET lock_timeout = '1s'")
                    .execute(&mut conn)
                    .await
                    .map(|_| conn),
                Err(_) => Err(sqlx::Error::PoolClosed),
            };
            let Ok(mut conn) = conn else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            loop {
                // Waits in the lock's queue and gives the lock back in the same statement:
                // a shared request, so every probe waiting on the key is granted at once
                // and none holds it beyond the statement (no hand-over chain between probes,
                // nothing held if this process freezes).
                let waited = sqlx::query(
                    "SELECT pg_advisory_lock_shared($1, $2), pg_advisory_unlock_shared($1, $2)",
                )
                .bind(class)
                .bind(half)
                .execute(&mut conn)
                .await;
                match waited {
                    Ok(_) => {
                        wake(&released);
                        // Let the waiters try before looking again.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {}
                    Err(_) => {
                        wake(&released); // disconnected: a release may have been missed
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break;
                    }
                }
            }
        }
    }

    /// One grant attempt on `conn`: `Ok(Some(token))`, `Ok(None)` when held elsewhere.
    async fn grant(
        &self,
        conn: &mut PgConnection,
        key: &str,
        ttl: Duration,
    ) -> sqlx::Result<Option<i64>> {
        let (class, half) = self.advisory_key(key);
        let (_, token): (String, Option<i64>) =
            sqlx::query_as(AssertSqlSafe(self.inner.grant_sql.clone()))
                .bind(class)
                .bind(half)
                .bind(format!("{}ms", ttl.as_millis().max(1)))
                .fetch_one(conn)
                .await?;
        Ok(token)
    }

    /// Whether the session on `conn` holds the advisory lock of `key`; resets its lease to
    /// `ttl` when given.
    async fn check(
        &self,
        conn: &mut PgConnection,
        key: &str,
        ttl: Option<Duration>,
    ) -> sqlx::Result<bool> {
        let (class, half) = self.advisory_key(key);
        let lease = ttl.map(|t| format!("{}ms", t.as_millis().max(1)));
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
               AND pid = pg_backend_pid() AND granted AND objsubid = 2 \
               AND classid = $1::int4::oid AND objid = $2::int4::oid) \
             FROM (SELECT CASE WHEN $3::text IS NULL THEN NULL \
                   ELSE set_config('idle_session_timeout', $3, false) END) lease",
        )
        .bind(class)
        .bind(half)
        .bind(lease)
        .fetch_one(conn)
        .await
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        // A kept connection may have been closed by the server meanwhile: then use a new one.
        let mut conn = match self.inner.sessions.spare() {
            Some(conn) => conn,
            None => self.fresh().await?,
        };
        let token = match self.grant(&mut conn, key, ttl).await {
            Ok(token) => token,
            Err(_) => {
                conn = self.fresh().await?;
                self.grant(&mut conn, key, ttl)
                    .await
                    .map_err(|e| self.fail("acquire", e))?
            }
        };
        let Some(token) = token else {
            // Not ours: keep the connection, without a lease that would close it.
            if sqlx::query("SELECT set_config('idle_session_timeout', '0', false)")
                .execute(&mut conn)
                .await
                .is_ok()
            {
                self.inner.sessions.keep(conn);
            }
            return Ok(Attempt::Held { expires_in: None });
        };
        let token = token_from_db(token)?;
        self.inner.sessions.hold(owner, key, conn);
        Ok(Attempt::Granted(token))
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let alive = self.check(&mut *conn.lock().await, key, Some(ttl)).await;
        if matches!(alive, Ok(true)) {
            return Ok(true);
        }
        // The session is gone (terminated, idle timeout, network): so is its lock.
        self.inner.sessions.end(owner);
        Ok(false)
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        if self.inner.sessions.get(owner, key).is_none() {
            return Ok(false);
        }
        let Some(conn) = self.inner.sessions.end(owner) else {
            return Ok(false);
        };
        let (class, half) = self.advisory_key(key);
        let unlocked: sqlx::Result<bool> = sqlx::query_scalar(
            "SELECT pg_advisory_unlock($1, $2), set_config('idle_session_timeout', '0', false)",
        )
        .bind(class)
        .bind(half)
        .fetch_one(&mut *conn.lock().await)
        .await;
        match unlocked {
            Ok(unlocked) => {
                self.inner.sessions.keep_shared(conn);
                Ok(unlocked)
            }
            // A dead session holds nothing.
            Err(_) => Ok(false),
        }
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let held = self.check(&mut *conn.lock().await, key, None).await;
        Ok(held.unwrap_or(false))
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        let (class, half) = self.advisory_key(key);
        let backend = self.clone();
        Ok(self
            .inner
            .probes
            .watch(format!("{class}:{half}"), move |released| async move {
                backend.probe(class, half, released).await;
            }))
    }
}
