//! MariaDB/MySQL `GET_LOCK` on a dedicated connection per guard (`GET_LOCK` is re-entrant per
//! connection, so connections are never shared between grants).
//!
//! - **Lock names** are case-insensitive and at most 64 characters, so every name is the
//!   lowercase hex SHA-256 of the key (of `namespace:key` with a namespace) — fixed forever.
//! - **Fencing tokens** come from a counter row per key in `lockwise_fence` (keyed on the
//!   key's bytes as `VARBINARY`), advanced in the same session right after the grant, in
//!   autocommit so no rollback can reissue a token.
//! - **Server-side lease**: the session's `wait_timeout` is set to the TTL — rounded *up* to
//!   whole seconds, the server's unit — and reset by each renewal, so a holder frozen past its
//!   TTL loses its session and its lock. (The holder's local deadline still uses the exact TTL,
//!   so it gives up before the server does.)
//! - **Waiters** are woken by a probe that waits in `GET_LOCK(name, 1)` on its own connection
//!   and gives the lock back in the same statement; it sees releases, dead holders and expired
//!   sessions alike.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{Connection, Executor};
use tokio::sync::watch;

use super::session::{Probes, Sessions, wake};
use super::{Attempt, Backend, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};
use crate::url::redact_url;

/// How long connecting may take before it is reported as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// The server's default `wait_timeout` (8 hours), restored on connections kept for reuse.
const IDLE_WAIT_TIMEOUT: u64 = 28_800;

const SCHEMA: &str = include_str!("../../sql/mysql/fence.sql");

/// `GET_LOCK` locks. Clones share the sessions.
#[derive(Clone)]
pub struct MysqlBackend {
    inner: Arc<Inner>,
}

struct Inner {
    options: MySqlConnectOptions,
    shown: String,
    namespace: Option<String>,
    sessions: Sessions<MySqlConnection>,
    probes: Probes,
}

impl std::fmt::Debug for MysqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBackend")
            .field("url", &self.inner.shown)
            .finish_non_exhaustive()
    }
}

/// Configures a [`MysqlBackend`].
#[derive(Clone)]
pub struct MysqlBuilder {
    url: String,
    namespace: Option<String>,
}

impl std::fmt::Debug for MysqlBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBuilder")
            .field("url", &redact_url(&self.url))
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl MysqlBuilder {
    /// Puts every lock under `namespace`: lock names and counter rows derive from
    /// `namespace:key` (`GET_LOCK` names are server-wide). Default: none.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Connects (within 4 s) and creates the counter table if it is missing.
    pub async fn connect(self) -> Result<MysqlBackend> {
        let options: MySqlConnectOptions = self
            .url
            .parse()
            .map_err(|_| Error::config(format!("malformed MySQL URL {}", redact_url(&self.url))))?;
        let backend = MysqlBackend {
            inner: Arc::new(Inner {
                options,
                shown: redact_url(&self.url),
                namespace: self.namespace,
                sessions: Sessions::default(),
                probes: Probes::default(),
            }),
        };
        let mut first = backend.fresh().await?;
        migrate(&mut first)
            .await
            .map_err(|e| backend.fail("creating lockwise_fence", e))?;
        backend.inner.sessions.keep(first);
        Ok(backend)
    }
}

/// Creates the counter table, one process at a time.
async fn migrate(conn: &mut MySqlConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT GET_LOCK('lockwise:migrate', 10)")
        .execute(&mut *conn)
        .await?;
    let created = conn.execute(SCHEMA).await;
    sqlx::query("SELECT RELEASE_LOCK('lockwise:migrate')")
        .execute(&mut *conn)
        .await?;
    created.map(|_| ())
}

impl MysqlBackend {
    /// Starts configuring a backend for `url` (`mysql://user[:password]@host[:port]/db`).
    pub fn builder(url: impl Into<String>) -> MysqlBuilder {
        MysqlBuilder {
            url: url.into(),
            namespace: None,
        }
    }

    /// Connects with the default settings.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// The `GET_LOCK` name of `key` under this backend's namespace; see [`lock_name`].
    pub fn lock_name_of(&self, key: &str) -> String {
        lock_name(&self.full_key(key))
    }

    /// The connection id of the session holding `owner`'s lock (for tests and diagnostics,
    /// e.g. `KILL`).
    pub async fn session_id(&self, key: &str, owner: OwnerToken) -> Option<i64> {
        let conn = self.inner.sessions.get(owner, key)?;
        let mut conn = conn.lock().await;
        sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)")
            .fetch_one(&mut *conn)
            .await
            .ok()
    }

    fn full_key(&self, key: &str) -> String {
        crate::lease::namespaced(self.inner.namespace.as_deref(), key).into_owned()
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> Error {
        Error::backend(
            "mysql",
            format!("{what} on {} failed: {e}", self.inner.shown),
            e,
        )
    }

    async fn fresh(&self) -> Result<MySqlConnection> {
        let connect = async {
            let mut conn = MySqlConnection::connect_with(&self.inner.options).await?;
            // Fencing counters rely on autocommit, whatever the server's default.
            sqlx::query("SET SESSION autocommit = 1")
                .execute(&mut conn)
                .await?;
            Ok::<_, sqlx::Error>(conn)
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(Error::backend(
                "mysql",
                format!("cannot connect to {}: {e}", self.inner.shown),
                e,
            )),
            Err(_) => Err(Error::backend_msg(
                "mysql",
                format!(
                    "no answer from {} within {CONNECT_TIMEOUT:?}",
                    self.inner.shown
                ),
            )),
        }
    }

    /// `GET_LOCK` without waiting; then the lease and the token. `None` when held elsewhere.
    async fn grant(
        &self,
        conn: &mut MySqlConnection,
        key: &str,
        ttl: Duration,
    ) -> sqlx::Result<Option<u64>> {
        let full = self.full_key(key);
        // The lease first: a holder frozen right after the grant must still lose it.
        set_lease(conn, ttl).await?;
        let got: Option<i64> = sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 0) AS SIGNED)")
            .bind(lock_name(&full))
            .fetch_one(&mut *conn)
            .await?;
        if got != Some(1) {
            sqlx::query("SET SESSION wait_timeout = ?")
                .bind(IDLE_WAIT_TIMEOUT)
                .execute(&mut *conn)
                .await?;
            return Ok(None);
        }
        let advanced = sqlx::query(
            "INSERT INTO lockwise_fence (lock_key, token) VALUES (?, LAST_INSERT_ID(1)) \
             ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)",
        )
        .bind(full.as_bytes())
        .execute(&mut *conn)
        .await?;
        Ok(Some(advanced.last_insert_id()))
    }

    /// Whether the session on `conn` holds the lock of `key`.
    async fn check(&self, conn: &mut MySqlConnection, key: &str) -> sqlx::Result<bool> {
        let mine: Option<i64> =
            sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)")
                .bind(self.lock_name_of(key))
                .fetch_one(conn)
                .await?;
        Ok(mine == Some(1))
    }

    /// Waits for the lock to be free in `GET_LOCK(name, 1)` rounds, gives it back at once and
    /// wakes the waiters; runs until aborted.
    async fn probe(&self, name: String, released: watch::Sender<u64>) {
        loop {
            let Ok(mut conn) = self.fresh().await else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            loop {
                // Waits up to 1 s and gives the lock back in the same statement, so a probe
                // never holds it beyond the statement (no hand-over chain between probes).
                let got: sqlx::Result<Option<i64>> =
                    sqlx::query_scalar("SELECT CAST(GET_LOCK(?, 1) AS SIGNED), RELEASE_LOCK(?)")
                        .bind(&name)
                        .bind(&name)
                        .fetch_one(&mut conn)
                        .await;
                match got {
                    Ok(Some(1)) => {
                        wake(&released);
                        // Let the waiters try before looking again.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Ok(_) => {} // still held after 1 s: wait again
                    Err(_) => {
                        wake(&released); // disconnected: a release may have been missed
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        break;
                    }
                }
            }
        }
    }
}

/// The `GET_LOCK` name of a key (with any namespace already applied): lowercase hex SHA-256,
/// exactly 64 characters. Fixed forever.
///
/// ```
/// assert_eq!(
///     lockwise::backend::mysql::lock_name("orders:42"),
///     "8a5f217ddb0c9f03d16c0db38f2ba1c3afba56ca9be31a6bbb468b7d2e03746c"
/// );
/// ```
pub fn lock_name(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Sets the session's idle lifetime to `ttl`, rounded up to whole seconds.
async fn set_lease(conn: &mut MySqlConnection, ttl: Duration) -> sqlx::Result<()> {
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    sqlx::query("SET SESSION wait_timeout = ?")
        .bind(secs.max(1))
        .execute(conn)
        .await
        .map(|_| ())
}

#[async_trait]
impl Backend for MysqlBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        let mut conn = match self.inner.sessions.spare() {
            Some(conn) => conn,
            None => self.fresh().await?,
        };
        let token = match self.grant(&mut conn, key, ttl).await {
            Ok(token) => token,
            // A kept connection may have been closed by the server meanwhile.
            Err(_) => {
                conn = self.fresh().await?;
                self.grant(&mut conn, key, ttl)
                    .await
                    .map_err(|e| self.fail("acquire", e))?
            }
        };
        match token {
            Some(token) => {
                self.inner.sessions.hold(owner, key, conn);
                Ok(Attempt::Granted(FencingToken::new(token)))
            }
            None => {
                self.inner.sessions.keep(conn);
                Ok(Attempt::Held { expires_in: None })
            }
        }
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let alive = {
            let mut conn = conn.lock().await;
            match set_lease(&mut conn, ttl).await {
                Ok(()) => self.check(&mut conn, key).await,
                Err(e) => Err(e),
            }
        };
        if matches!(alive, Ok(true)) {
            return Ok(true);
        }
        // The session is gone (killed, wait_timeout, network): so is its lock.
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
        let released = {
            let mut conn = conn.lock().await;
            let released: sqlx::Result<Option<i64>> =
                sqlx::query_scalar("SELECT CAST(RELEASE_LOCK(?) AS SIGNED)")
                    .bind(self.lock_name_of(key))
                    .fetch_one(&mut *conn)
                    .await;
            let restored = sqlx::query("SET SESSION wait_timeout = ?")
                .bind(IDLE_WAIT_TIMEOUT)
                .execute(&mut *conn)
                .await;
            released.map(|r| (r == Some(1), restored.is_ok()))
        };
        match released {
            Ok((released, reusable)) => {
                if reusable {
                    self.inner.sessions.keep_shared(conn);
                }
                Ok(released)
            }
            // A dead session holds nothing.
            Err(_) => Ok(false),
        }
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let held = self.check(&mut *conn.lock().await, key).await;
        Ok(held.unwrap_or(false))
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        let name = self.lock_name_of(key);
        let backend = self.clone();
        Ok(self
            .inner
            .probes
            .watch(name.clone(), move |released| async move {
                backend.probe(name, released).await;
            }))
    }
}
