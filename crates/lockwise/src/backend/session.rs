//! The skeleton shared by the backends whose locks live in a database session (PostgreSQL
//! advisory locks, MySQL `GET_LOCK`): each grant owns a dedicated connection, found by owner
//! token behind the same five trait calls; a few idle connections are kept for later attempts;
//! and waiters learn of releases from a probe. Each database's SQL stays in its own file,
//! behind [`SessionSql`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::{Attempt, HeldLock, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};

/// One database's statements for session locks. Every `full` key already carries the
/// backend's namespace; `Err` from a statement means the session is unusable.
#[async_trait]
pub(crate) trait SessionSql: Send + Sync + 'static {
    /// A connection; one per held lock.
    type Conn: Send + 'static;

    /// The backend's name in errors (`"postgres"`, `"mysql"`).
    const NAME: &'static str;

    /// A new connection, within the connect timeout.
    async fn connect(&self, shown: &str) -> Result<Self::Conn>;

    /// Takes the lock without waiting, with its lease of `ttl`, and issues its fencing token:
    /// `Ok(None)` when it is held elsewhere.
    async fn grant(
        &self,
        conn: &mut Self::Conn,
        full: &str,
        ttl: Duration,
    ) -> sqlx::Result<Option<Granted>>;

    /// Readies a connection whose grant was refused for reuse; `false` if it cannot be kept.
    async fn refused(&self, conn: &mut Self::Conn) -> bool;

    /// Resets the session's lease to `ttl`; whether it still holds the lock.
    async fn renew(&self, conn: &mut Self::Conn, full: &str, ttl: Duration) -> sqlx::Result<bool>;

    /// Whether the session holds the lock.
    async fn check(&self, conn: &mut Self::Conn, full: &str) -> sqlx::Result<bool>;

    /// For each `(lock, session)`, whether that session holds that lock, asked on another
    /// connection in one statement.
    async fn held_by(
        &self,
        conn: &mut Self::Conn,
        locks: &[(String, i64)],
    ) -> sqlx::Result<Vec<bool>>;

    /// Gives the lock back: (whether it was held, whether the connection can be kept).
    async fn unlock(&self, conn: &mut Self::Conn, full: &str) -> sqlx::Result<(bool, bool)>;

    /// Which probe watches the lock: keys that share a server-side lock share a probe.
    fn probe_id(&self, full: &str) -> String;

    /// A connection for a probe.
    async fn probe_connection(&self, shown: &str) -> Result<Self::Conn> {
        self.connect(shown).await
    }

    /// Waits a bounded time for the lock to be free and gives it back in the same statement:
    /// `Ok(true)` when it was free, `Ok(false)` when still held, `Err` when disconnected.
    async fn wait_free(&self, conn: &mut Self::Conn, full: &str) -> sqlx::Result<bool>;

    /// The locks held now whose full key starts with `prefix` (keys with their namespace);
    /// with `unnamed`, also those the server holds without telling their key.
    async fn held(
        &self,
        conn: &mut Self::Conn,
        prefix: &str,
        unnamed: bool,
    ) -> sqlx::Result<Vec<HeldLock>>;

    /// Writes who holds these locks, for [`held`](Self::held), on the loss check's connection:
    /// each lock once, at its second loss check, so that a grant pays nothing for it and a lock
    /// held for less than one check's interval costs no write (it is listed without its key).
    /// Default: nothing.
    async fn record(&self, conn: &mut Self::Conn, rows: &[HolderRow]) -> sqlx::Result<()> {
        let _ = (conn, rows);
        Ok(())
    }

    /// Ends the session holding `full`'s lock, and with it the lock: what it held, `None` when
    /// nothing held it.
    async fn break_lock(&self, conn: &mut Self::Conn, full: &str)
    -> sqlx::Result<Option<HeldLock>>;
}

/// Who holds a lock, as [`SessionSql::record`] writes it.
#[derive(Debug, Clone)]
pub(crate) struct HolderRow {
    /// The lock's key, with the namespace.
    pub(crate) full: String,
    pub(crate) session: i64,
    pub(crate) token: u64,
    /// When it was granted (this machine's clock).
    pub(crate) since: std::time::SystemTime,
    pub(crate) ttl: Duration,
}

/// A lock taken by [`SessionSql::grant`].
pub(crate) struct Granted {
    /// Its fencing token (an error if the counter's value is out of range).
    pub(crate) token: Result<FencingToken>,
    /// The server's id of the session that holds it (`pg_backend_pid()`, `CONNECTION_ID()`).
    pub(crate) session: i64,
}

/// Implements [`Backend`](super::Backend) and `Debug` for a public backend type whose field
/// `locks` is a [`SessionLocks`]: every call is the shared session logic.
macro_rules! session_backend {
    ($backend:ident, $kind:literal) => {
        impl std::fmt::Debug for $backend {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($backend))
                    .field("url", &self.locks.shown())
                    .finish_non_exhaustive()
            }
        }

        #[async_trait::async_trait]
        impl $crate::backend::Backend for $backend {
            async fn try_acquire(
                &self,
                key: &str,
                owner: $crate::OwnerToken,
                ttl: std::time::Duration,
            ) -> $crate::Result<$crate::backend::Attempt> {
                self.locks.try_acquire(key, owner, ttl).await
            }

            async fn extend(
                &self,
                key: &str,
                owner: $crate::OwnerToken,
                ttl: std::time::Duration,
            ) -> $crate::Result<bool> {
                self.locks.extend(key, owner, ttl).await
            }

            async fn release(&self, key: &str, owner: $crate::OwnerToken) -> $crate::Result<bool> {
                self.locks.release(key, owner).await
            }

            async fn holds(&self, key: &str, owner: $crate::OwnerToken) -> $crate::Result<bool> {
                self.locks.holds(key, owner).await
            }

            async fn still_held(
                &self,
                leases: &[(&str, $crate::OwnerToken)],
            ) -> $crate::Result<Vec<bool>> {
                self.locks.still_held(leases).await
            }

            fn loss_check_every(&self) -> Option<std::time::Duration> {
                Some($crate::backend::LOSS_CHECK_EVERY)
            }

            async fn watch(&self, key: &str) -> $crate::Result<$crate::backend::ReleaseWatch> {
                Ok(self.locks.watch(key))
            }

            fn kind(&self) -> &'static str {
                $kind
            }

            async fn held(&self, prefix: &str) -> $crate::Result<Vec<$crate::backend::HeldLock>> {
                self.locks.held(prefix).await
            }

            async fn break_lock(
                &self,
                key: &str,
            ) -> $crate::Result<Option<$crate::backend::HeldLock>> {
                self.locks.break_lock(key).await
            }
        }
    };
}
pub(crate) use session_backend;

/// Session locks on one database: the lease logic of the [`Backend`](super::Backend) calls,
/// written once. Clones share the sessions.
pub(crate) struct SessionLocks<D: SessionSql> {
    inner: Arc<Inner<D>>,
}

struct Inner<D: SessionSql> {
    sql: D,
    shown: String,
    namespace: Option<String>,
    sessions: Sessions<D::Conn>,
    probes: Probes,
    /// The connection that checks, for the locker's loss check, which sessions still hold
    /// their locks; opened on first use, dropped after a failure.
    checker: tokio::sync::Mutex<Option<D::Conn>>,
}

impl<D: SessionSql> Clone for SessionLocks<D> {
    fn clone(&self) -> Self {
        SessionLocks {
            inner: self.inner.clone(),
        }
    }
}

impl<D: SessionSql> SessionLocks<D> {
    /// Session locks on `sql`, keeping `first` for the first attempt.
    pub(crate) fn new(sql: D, shown: String, namespace: Option<String>, first: D::Conn) -> Self {
        let locks = SessionLocks {
            inner: Arc::new(Inner {
                sql,
                shown,
                namespace,
                sessions: Sessions::default(),
                probes: Probes::default(),
                checker: tokio::sync::Mutex::new(None),
            }),
        };
        locks.inner.sessions.keep(first);
        locks
    }

    /// The server's URL, password redacted.
    pub(crate) fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// `key` under the backend's namespace.
    pub(crate) fn full_key(&self, key: &str) -> String {
        crate::lease::namespaced(self.inner.namespace.as_deref(), key).into_owned()
    }

    /// The connection holding `key` for `owner`, if any.
    pub(crate) fn session(&self, owner: OwnerToken, key: &str) -> Option<Shared<D::Conn>> {
        self.inner.sessions.get(owner, key)
    }

    fn fail(&self, what: &str, e: sqlx::Error) -> Error {
        Error::backend(
            D::NAME,
            format!("{what} on {} failed: {e}", self.inner.shown),
            e,
        )
    }

    async fn fresh(&self) -> Result<D::Conn> {
        self.inner.sql.connect(&self.inner.shown).await
    }

    /// The locks held now whose key starts with `prefix`, asked on a connection of its own.
    pub(crate) async fn held(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        let mut conn = self.fresh().await?;
        let namespace = self.inner.namespace.as_deref();
        let unnamed = namespace.is_none() && prefix.is_empty();
        let mut held = self
            .inner
            .sql
            .held(&mut conn, &self.full_key(prefix), unnamed)
            .await
            .map_err(|e| self.fail("listing the locks held", e))?;
        if let Some(ns) = namespace {
            let ours = format!("{ns}:");
            for lock in &mut held {
                if let Some(key) = lock.key.strip_prefix(&ours) {
                    lock.key = key.to_owned();
                }
            }
        }
        Ok(held)
    }

    /// Breaks `key`'s lock by ending its holder's session, on a connection of its own.
    pub(crate) async fn break_lock(&self, key: &str) -> Result<Option<HeldLock>> {
        let mut conn = self.fresh().await?;
        let broken = self
            .inner
            .sql
            .break_lock(&mut conn, &self.full_key(key))
            .await
            .map_err(|e| self.fail("breaking a lock", e))?;
        Ok(broken.map(|lock| HeldLock {
            key: key.to_owned(),
            ..lock
        }))
    }

    pub(crate) async fn try_acquire(
        &self,
        key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Attempt> {
        let (sql, full) = (&self.inner.sql, self.full_key(key));
        let mut conn = match self.inner.sessions.spare() {
            Some(conn) => conn,
            None => self.fresh().await?,
        };
        let token = match sql.grant(&mut conn, &full, ttl).await {
            Ok(token) => token,
            // A kept connection may have been closed by the server meanwhile: use a new one.
            Err(_) => {
                conn = self.fresh().await?;
                sql.grant(&mut conn, &full, ttl)
                    .await
                    .map_err(|e| self.fail("acquire", e))?
            }
        };
        let Some(granted) = token else {
            if sql.refused(&mut conn).await {
                self.inner.sessions.keep(conn);
            }
            return Ok(Attempt::Held { expires_in: None });
        };
        // An unusable token drops the connection: its session ends, and the lock with it.
        let token = granted.token?;
        let row = HolderRow {
            full,
            session: granted.session,
            token: token.get(),
            since: std::time::SystemTime::now(),
            ttl,
        };
        self.inner.sessions.hold(owner, key, row, conn);
        Ok(Attempt::Granted(token))
    }

    pub(crate) async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let full = self.full_key(key);
        let alive = self
            .inner
            .sql
            .renew(&mut *conn.lock().await, &full, ttl)
            .await;
        if matches!(alive, Ok(true)) {
            return Ok(true);
        }
        // The session is gone (terminated, idle timeout, network): so is its lock.
        self.inner.sessions.end(owner);
        Ok(false)
    }

    pub(crate) async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        if self.inner.sessions.get(owner, key).is_none() {
            return Ok(false);
        }
        let Some(conn) = self.inner.sessions.end(owner) else {
            return Ok(false);
        };
        let full = self.full_key(key);
        let unlocked = self.inner.sql.unlock(&mut *conn.lock().await, &full).await;
        match unlocked {
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

    pub(crate) async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let Some(conn) = self.inner.sessions.get(owner, key) else {
            return Ok(false);
        };
        let full = self.full_key(key);
        let held = self.inner.sql.check(&mut *conn.lock().await, &full).await;
        Ok(held.unwrap_or(false))
    }

    /// Asks, on a connection of its own and in one statement, whether each lease's session
    /// still holds its lock: a session killed on the server, or a server that restarted, shows
    /// here without waiting for the holder's next renewal.
    pub(crate) async fn still_held(&self, leases: &[(&str, OwnerToken)]) -> Result<Vec<bool>> {
        let mut asked = Vec::with_capacity(leases.len());
        let mut index = Vec::with_capacity(leases.len());
        for (key, owner) in leases {
            index.push(self.inner.sessions.session_id(*owner, key).map(|session| {
                asked.push((self.full_key(key), session));
                asked.len() - 1
            }));
        }
        let answers = if asked.is_empty() {
            Vec::new()
        } else {
            let mut checker = self.inner.checker.lock().await;
            // Taken out while in use: if this future is dropped mid-statement, the connection
            // goes with it instead of being reused in an unknown state.
            let mut conn = match checker.take() {
                Some(conn) => conn,
                None => self.fresh().await?,
            };
            let answers = self
                .inner
                .sql
                .held_by(&mut conn, &asked)
                .await
                .map_err(|e| self.fail("ownership check", e))?;
            let rows = self
                .inner
                .sessions
                .unrecorded(leases.iter().map(|(_, owner)| *owner));
            let recorded = rows.is_empty() || {
                let written = self.inner.sql.record(&mut conn, &rows).await;
                if let Err(error) = &written {
                    tracing::debug!(%error, "writing who holds the locks failed");
                }
                written.is_ok()
            };
            if recorded {
                *checker = Some(conn);
            }
            answers
        };
        // A lease without a session here was released or lost already.
        Ok(index
            .into_iter()
            .map(|i| i.is_some_and(|i| answers.get(i).copied().unwrap_or(false)))
            .collect())
    }

    pub(crate) fn watch(&self, key: &str) -> ReleaseWatch {
        let full = self.full_key(key);
        let locks = self.clone();
        self.inner
            .probes
            .watch(self.inner.sql.probe_id(&full), move |released| async move {
                locks.probe(full, released).await;
            })
    }

    /// Waits for the lock to be free on a connection of its own, in bounded rounds, and wakes
    /// the waiters each time it was; runs until aborted.
    async fn probe(&self, full: String, released: watch::Sender<u64>) {
        let sql = &self.inner.sql;
        loop {
            let Ok(mut conn) = sql.probe_connection(&self.inner.shown).await else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            loop {
                match sql.wait_free(&mut conn, &full).await {
                    Ok(true) => {
                        wake(&released);
                        // Let the waiters try before looking again.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Ok(false) => {} // still held: wait again
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

/// How many idle connections are kept.
const SPARES: usize = 4;

/// A held lock's connection, locked while a call uses it.
pub(crate) type Shared<C> = Arc<tokio::sync::Mutex<C>>;

#[derive(Debug)]
pub(crate) struct Sessions<C> {
    held: Mutex<HashMap<OwnerToken, Held<C>>>,
    spares: Mutex<Vec<C>>,
}

/// A held lock's session.
#[derive(Debug)]
struct Held<C> {
    key: String,
    /// The server's id of the session.
    session: i64,
    conn: Shared<C>,
    /// Who holds it, until the loss check has written it; whether a check has seen it.
    unrecorded: Option<(HolderRow, bool)>,
}

impl<C> Default for Sessions<C> {
    fn default() -> Self {
        Sessions {
            held: Mutex::default(),
            spares: Mutex::default(),
        }
    }
}

impl<C> Sessions<C> {
    /// Records the connection (server session `row.session`) that holds `key` for `owner`.
    pub(crate) fn hold(&self, owner: OwnerToken, key: &str, row: HolderRow, conn: C) {
        let conn = Arc::new(tokio::sync::Mutex::new(conn));
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                owner,
                Held {
                    key: key.to_owned(),
                    session: row.session,
                    conn,
                    unrecorded: Some((row, false)),
                },
            );
    }

    /// Who holds the locks of `owners` that a loss check saw before and none has written yet
    /// (taken: a failed write leaves them unnamed); the others are marked seen. So a lock held
    /// for less than one check's interval costs no write.
    pub(crate) fn unrecorded(&self, owners: impl Iterator<Item = OwnerToken>) -> Vec<HolderRow> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        owners
            .filter_map(|owner| {
                let pending = &mut held.get_mut(&owner)?.unrecorded;
                match pending {
                    Some((_, seen)) if !*seen => {
                        *seen = true;
                        None
                    }
                    _ => pending.take().map(|(row, _)| row),
                }
            })
            .collect()
    }

    /// The connection holding `key` for `owner`, if any.
    pub(crate) fn get(&self, owner: OwnerToken, key: &str) -> Option<Shared<C>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&owner)
            .filter(|h| h.key == key)
            .map(|h| h.conn.clone())
    }

    /// The server's id of the session holding `key` for `owner`, if any.
    pub(crate) fn session_id(&self, owner: OwnerToken, key: &str) -> Option<i64> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(&owner).filter(|h| h.key == key).map(|h| h.session)
    }

    /// Forgets `owner`'s session (its lock is released or lost) and returns its connection.
    pub(crate) fn end(&self, owner: OwnerToken) -> Option<Shared<C>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&owner)
            .map(|h| h.conn)
    }

    /// An idle connection, if one is kept.
    pub(crate) fn spare(&self) -> Option<C> {
        self.spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// Keeps an idle connection for a later attempt (up to a few).
    pub(crate) fn keep(&self, conn: C) {
        let mut spares = self.spares.lock().unwrap_or_else(PoisonError::into_inner);
        if spares.len() < SPARES {
            spares.push(conn);
        }
    }

    /// Keeps a connection that sessions no longer share.
    pub(crate) fn keep_shared(&self, conn: Shared<C>) {
        if let Ok(conn) = Arc::try_unwrap(conn) {
            self.keep(conn.into_inner());
        }
    }
}

/// Release detection for session locks: a *probe* per watched key and process waits for the
/// lock with a blocking, time-limited lock call on a connection of its own, gives it back at
/// once, and wakes the waiters. Unlike a notification sent by the releaser, this also fires
/// when a holder's session dies or its server-side lease runs out.
#[derive(Debug, Default)]
pub(crate) struct Probes {
    keys: Arc<Mutex<HashMap<String, Probe>>>,
}

#[derive(Debug)]
struct Probe {
    released: watch::Sender<u64>,
    waiters: usize,
    task: tokio::task::AbortHandle,
}

impl Probes {
    /// A watch on lock `id`; the first waiter starts `probe`, the last one out stops it.
    pub(crate) fn watch<F, Fut>(&self, id: String, probe: F) -> ReleaseWatch
    where
        F: FnOnce(watch::Sender<u64>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = keys.entry(id.clone()).or_insert_with(|| {
            let released = watch::Sender::new(0);
            let task = tokio::spawn(probe(released.clone())).abort_handle();
            Probe {
                released,
                waiters: 0,
                task,
            }
        });
        entry.waiters += 1;
        let rx = entry.released.subscribe();
        let unwatch = Unwatch {
            keys: self.keys.clone(),
            id,
        };
        ReleaseWatch::new(rx, Some(Box::new(unwatch)))
    }
}

struct Unwatch {
    keys: Arc<Mutex<HashMap<String, Probe>>>,
    id: String,
}

impl Drop for Unwatch {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(probe) = keys.get_mut(&self.id) {
            probe.waiters -= 1;
            if probe.waiters == 0 {
                probe.task.abort();
                keys.remove(&self.id);
            }
        }
    }
}

/// Wakes every waiter of a probe.
fn wake(released: &watch::Sender<u64>) {
    released.send_modify(|n| *n = n.wrapping_add(1));
}
