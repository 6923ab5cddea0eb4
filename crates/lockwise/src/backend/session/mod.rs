//! The skeleton shared by the backends whose locks live in a database session (PostgreSQL
//! advisory locks, MySQL `GET_LOCK`): a few sessions shared by every lock of a backend, each
//! carrying its calls in groups ([`pool`]), a book of what each session holds
//! ([`book`]), a sweeper that lets locks go at their deadline, and probes that wake waiters
//! on a release ([`probe`]). Each database's SQL stays in its own file, behind
//! [`SessionSql`].
//!
//! **The server-side lease.** A session's idle lifetime (`idle_session_timeout`,
//! `wait_timeout`) is set by every request to the latest deadline of the locks it holds,
//! counted from the request's sending: a frozen or partitioned process stops sending, and the
//! server ends its sessions, and their locks, once the last of their leases has run out
//! (never before any of them: a lock whose holder still trusts it is never let go early).
//! While the process runs, a lock whose deadline passes without a renewal is given back by
//! the sweeper.

mod book;
mod pool;
mod probe;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{Notify, watch};

use super::{Attempt, HeldLock, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::OwnerToken;
use book::Book;
pub(crate) use book::Lease;
use pool::{Call, Pool, Reply};
pub(crate) use pool::{Kind, Op};
use probe::{Probes, wake};

/// One database's statements for session locks. Every `full` key already carries the
/// backend's namespace; `Err` from a statement means the session is unusable.
#[async_trait]
pub(crate) trait SessionSql: Send + Sync + 'static {
    /// A connection: a session that holds any number of locks.
    type Conn: Send + 'static;

    /// The backend's name in errors (`"postgres"`, `"mysql"`).
    const NAME: &'static str;

    /// Whether setting a session's idle lifetime is a statement of its own, worth sparing:
    /// then a request that leaves its session holding nothing leaves the lease as it was,
    /// and a session that stays so for [`REST_AFTER`](pool::REST_AFTER) gets a request of
    /// no op (a rest), which gives it the server's idle lifetime back. Otherwise every request
    /// sets it.
    const RESTS: bool = false;

    /// A new connection, within the connect timeout.
    async fn connect(&self, shown: &str) -> Result<Self::Conn>;

    /// The server's id of the session (`pg_backend_pid()`, `CONNECTION_ID()`).
    async fn session_id(&self, conn: &mut Self::Conn) -> sqlx::Result<i64>;

    /// Runs `ops` in order in one round trip, and sets the session's idle lifetime to
    /// `lease.ttl` if it holds any lock afterwards (`lease.kept`, or a grant of `ops`
    /// succeeded), else back to the server's default (with [`RESTS`](Self::RESTS): only in a
    /// rest, whose `ops` is empty). One answer per op: a grant's fencing
    /// token (`None`: held elsewhere); `Some(1)` when an unlock released the lock or a check
    /// found it held by this session. No op's key is held by this session unless the op is
    /// an unlock or a check of it.
    async fn exchange(
        &self,
        conn: &mut Self::Conn,
        ops: &[Op<'_>],
        lease: Lease,
    ) -> sqlx::Result<Vec<Option<u64>>>;

    /// For each `(lock, session)`, whether that session holds that lock, asked on another
    /// connection in one statement.
    async fn held_by(
        &self,
        conn: &mut Self::Conn,
        locks: &[(String, i64)],
    ) -> sqlx::Result<Vec<bool>>;

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

/// Who holds a lock, as [`SessionSql::record`] writes it (only PostgreSQL keeps such rows:
/// MariaDB names a lock's holder with `IS_USED_LOCK`).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct HolderRow {
    /// The lock's key, with the namespace.
    pub(crate) full: String,
    pub(crate) session: i64,
    pub(crate) token: u64,
    /// When it was granted (this machine's clock).
    pub(crate) since: std::time::SystemTime,
    pub(crate) ttl: Duration,
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
    pool: Mutex<Pool<D::Conn>>,
    book: Mutex<Book>,
    /// Serials of sessions.
    serial: AtomicU64,
    /// Wakes the sweeper when a deadline comes before the one it sleeps until, or when the
    /// backend is dropped.
    sweeper: Arc<Notify>,
    sweeping: AtomicBool,
    /// Whether the sweeper knows of sessions waiting to rest (see [`SessionSql::RESTS`]).
    resting: AtomicBool,
    probes: Probes,
    /// The connection that checks, for the locker's loss check, which sessions still hold
    /// their locks; opened on first use, dropped after a failure.
    checker: tokio::sync::Mutex<Option<D::Conn>>,
}

impl<D: SessionSql> Inner<D> {
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool<D::Conn>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<D: SessionSql> Drop for Inner<D> {
    fn drop(&mut self) {
        // The sweeper ends when it finds the backend gone.
        self.sweeper.notify_one();
    }
}

impl<D: SessionSql> Clone for SessionLocks<D> {
    fn clone(&self) -> Self {
        SessionLocks {
            inner: self.inner.clone(),
        }
    }
}

impl<D: SessionSql> SessionLocks<D> {
    /// Session locks on `sql`, with `first` as their first session.
    pub(crate) async fn new(
        sql: D,
        shown: String,
        namespace: Option<String>,
        first: D::Conn,
    ) -> Result<Self> {
        let locks = SessionLocks {
            inner: Arc::new(Inner {
                sql,
                shown,
                namespace,
                pool: Mutex::default(),
                book: Mutex::default(),
                serial: AtomicU64::new(0),
                sweeper: Arc::new(Notify::new()),
                sweeping: AtomicBool::new(false),
                resting: AtomicBool::new(false),
                probes: Probes::default(),
                checker: tokio::sync::Mutex::new(None),
            }),
        };
        locks.adopt(first).await?;
        Ok(locks)
    }

    /// The server's URL, password redacted.
    pub(crate) fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// `key` under the backend's namespace.
    pub(crate) fn full_key(&self, key: &str) -> String {
        crate::lease::namespaced(self.inner.namespace.as_deref(), key).into_owned()
    }

    /// The server's id of the session holding `key` for `owner`, if any.
    pub(crate) fn session_id(&self, owner: OwnerToken, key: &str) -> Option<i64> {
        self.inner.book().session_id(owner, key)
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

    fn call_for(&self, kind: Kind, key: &str, owner: OwnerToken, ttl: Option<Duration>) -> Call {
        Call {
            kind,
            full: self.full_key(key),
            owner,
            key: key.to_owned(),
            ttl,
            reply: None,
        }
    }

    pub(crate) async fn try_acquire(
        &self,
        key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Attempt> {
        if !self.inner.sweeping.swap(true, Ordering::Relaxed) {
            tokio::spawn(pool::sweep(Arc::downgrade(&self.inner)));
        }
        let mut fresh = false;
        loop {
            let session = if fresh {
                self.open().await?
            } else {
                self.pick(ttl).await?
            };
            let call = self.call_for(Kind::Grant, key, owner, Some(ttl));
            return match self.call(&session, call).await {
                Reply::Granted(token) => Ok(Attempt::Granted(token)),
                Reply::Refused => Ok(Attempt::Held { expires_in: None }),
                // A kept session may have been closed by the server meanwhile: try a new one.
                Reply::Broken(_) if !fresh => {
                    fresh = true;
                    continue;
                }
                Reply::Broken(e) => Err(e),
                Reply::Answer(_) => Err(Error::backend_msg(D::NAME, "a grant answered a check")),
            };
        }
    }

    /// Asks `owner`'s lock's session whether it still holds it, renewing its lease to `ttl`
    /// when given. A lock past its deadline is given back instead.
    async fn check(&self, key: &str, owner: OwnerToken, ttl: Option<Duration>) -> bool {
        let now = Instant::now();
        let (serial, live) = match self.inner.book().held(owner, key) {
            Some(held) => (held.session, held.deadline > now),
            None => return false,
        };
        if !live {
            self.expire(key, owner, now);
            return false;
        }
        let Some(session) = self.find(serial) else {
            return false;
        };
        let call = self.call_for(Kind::Check, key, owner, ttl);
        matches!(self.call(&session, call).await, Reply::Answer(true))
    }

    /// Gives back `owner`'s lock on `key`, whose deadline has passed, in the background.
    fn expire(&self, key: &str, owner: OwnerToken, now: Instant) {
        let unlocking = self.inner.book().unlocking(owner, key, now);
        if let Some((full, session, _)) = unlocking {
            self.unlock_later(session, full);
        }
    }

    pub(crate) async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        Ok(self.check(key, owner, Some(ttl)).await)
    }

    pub(crate) async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        Ok(self.check(key, owner, None).await)
    }

    pub(crate) async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let unlocking = self.inner.book().unlocking(owner, key, Instant::now());
        let Some((full, serial, live)) = unlocking else {
            return Ok(false);
        };
        let Some(session) = self.find(serial) else {
            // Its session broke, and the lock went with it.
            self.inner.book().end(&full);
            return Ok(false);
        };
        let mut call = self.call_for(Kind::Unlock, key, owner, None);
        call.full = full;
        // A lock past its deadline is given back too, but was no longer the caller's.
        Ok(matches!(self.call(&session, call).await, Reply::Answer(true)) && live)
    }

    /// Asks, on a connection of its own and in one statement, whether each lease's session
    /// still holds its lock: a session killed on the server, or a server that restarted, shows
    /// here without waiting for the holder's next renewal.
    pub(crate) async fn still_held(&self, leases: &[(&str, OwnerToken)]) -> Result<Vec<bool>> {
        let mut asked = Vec::with_capacity(leases.len());
        let mut index = Vec::with_capacity(leases.len());
        for (key, owner) in leases {
            index.push(self.inner.book().session_id(*owner, key).map(|session| {
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
                .book()
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
