//! PostgreSQL session-scoped advisory locks, on a few sessions that every lock of the backend
//! shares (see `backend/session`).
//!
//! - **Grant**: `pg_try_advisory_lock(ADVISORY_CLASS, hash)` (see
//!   [`crate::postgres::advisory_key`]) and, in the same statement, the fencing
//!   token from the schema's sequence (shared with transaction-scoped locks). Calls that come
//!   together go in one statement (`sql/postgres/locks/exchange.sql`), whose grants share one
//!   token drawn after the last of them: each key's tokens still rise from grant to grant.
//! - **Process death**: the connection closes and the server releases the lock at once.
//! - **A frozen process** keeps its TCP connection alive (its kernel still answers), so each
//!   session gets a *server-side lease*: `idle_session_timeout` is the latest deadline of the
//!   session's locks, set in the statement that grants, renews or releases when it changes
//!   (an idle timeout counts from each statement's end, so the same value needs no setting
//!   again). A holder frozen past its TTL loses its session and the lock (once the session's
//!   other leases have run out too). A session that holds nothing keeps its last lease until
//!   it rests (see `SessionSql::RESTS`), so that a lock taken and given back again and again
//!   sets nothing.
//! - **A dropped or terminated connection** makes the next renewal fail, which fires the
//!   guard's lost signal.
//! - **Waiters** are woken by a probe: one connection per contended key and process that waits
//!   in `pg_advisory_lock_shared` (bounded by `lock_timeout`) and gives the lock back *in the
//!   same statement*, then wakes them. It sees releases, dead holders and expired server-side
//!   leases alike.
//!
//! Connections carry `application_name = 'lockwise'`.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{AssertSqlSafe, ConnectOptions, Row};

use super::HeldLock;
use super::inspect::postgres as inspect;
use super::session::{HolderRow, Kind, Lease, Op, SessionLocks, SessionSql, session_backend};
use crate::db::pg_conn::{
    CONNECT_TIMEOUT, DEFAULT_SCHEMA, Schema, advisory_key, connect, connect_options,
};
use crate::db::pg_pooler;
use crate::error::{Error, Result};
use crate::lease::OwnerToken;
use crate::url::redact_url;

/// Session-scoped advisory locks. Clones share the sessions.
#[derive(Clone)]
pub struct PostgresBackend {
    locks: SessionLocks<Advisory>,
}

/// A lock session: its connection, and the `idle_session_timeout` this backend last set on it
/// (`None` until it sets one), so that a statement sets it only when it changes.
pub(crate) struct Session {
    conn: PgConnection,
    idle_timeout: Option<String>,
}

impl From<PgConnection> for Session {
    fn from(conn: PgConnection) -> Self {
        Session {
            conn,
            idle_timeout: None,
        }
    }
}

/// The `idle_session_timeout` a request leaves on a session whose last one was `current` (see
/// [`Lease::after`]; `0` is none, the server's default).
fn idle_timeout_after(ops: &[Op<'_>], lease: Lease, current: Option<&str>) -> Option<String> {
    lease.after(
        ops,
        current.map(str::to_owned),
        idle_timeout,
        "0".to_owned(),
    )
}

/// The advisory-lock statements.
struct Advisory {
    options: PgConnectOptions,
    exchange_sql: String,
    /// A lone grant, and the same setting the session's lease.
    grant_sql: String,
    grant_and_lease_sql: String,
    record_sql: String,
    /// Whether the table of who holds what exists (see `sql/postgres/holder.sql`).
    named: bool,
    schema: Schema,
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
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes the connection it opened; the schema's objects are created
    /// in one transaction, so they exist entirely or not at all.
    pub async fn connect(self) -> Result<PostgresBackend> {
        let schema = Schema::new(&self.schema)?;
        // A statement the client gave up on (its call timed out) ends on the server too.
        // A waiter's probe sits in a lock call for up to a second at a time: that is a wait,
        // not a slow statement, so sqlx's statement log stays off on these connections.
        // The lock statements are prepared once per session and planned once: a custom plan
        // for each call's arrays would cost more than running the statement (~0.1 ms).
        let options = connect_options(&self.url)?
            .options([
                ("statement_timeout", "10s"),
                ("plan_cache_mode", "force_generic_plan"),
            ])
            .disable_statement_logging();
        let shown = redact_url(&self.url);
        let mut first = connect(&options, &shown).await?;
        // A session advisory lock lives as long as its server session, which a
        // transaction-pooling proxy lends to another client after each statement.
        let pooled = tokio::time::timeout(CONNECT_TIMEOUT, pg_pooler::pooled(&mut first, &options))
            .await
            .map_err(|_| Error::no_answer("a check for a pooling proxy", CONNECT_TIMEOUT))?
            .map_err(|e| Error::backend("postgres", format!("cannot check {shown}: {e}"), e))?;
        if pooled {
            return Err(Error::config(format!(
                "{shown} lends each server connection per transaction (PgBouncer pool_mode = \
                 transaction or statement), so a session advisory lock could pass to another \
                 client: lock inside a transaction with lockwise::postgres::Store::lock_xact, or \
                 connect to PostgreSQL directly or through a session-mode pool"
            )));
        }
        let named = schema.migrate(&mut first, true).await? || schema.add_holder(&mut first).await;
        let exchange_sql = schema.sql(include_str!("../../sql/postgres/locks/exchange.sql"));
        let grant_sql = schema.sql(
            "SELECT CASE WHEN pg_try_advisory_lock($1, $2) \
                         THEN nextval('{schema}.fence_seq') END",
        );
        let grant_and_lease_sql = schema.sql(
            "SELECT CASE WHEN got THEN nextval('{schema}.fence_seq') END, \
                    set_config('idle_session_timeout', $3, false) \
               FROM (SELECT pg_try_advisory_lock($1, $2) AS got OFFSET 0) g",
        );
        let record_sql = schema.sql(include_str!("../../sql/postgres/locks/record.sql"));
        let sql = Advisory {
            options,
            exchange_sql: exchange_sql.0,
            grant_sql: grant_sql.0,
            grant_and_lease_sql: grant_and_lease_sql.0,
            record_sql: record_sql.0,
            named,
            schema,
        };
        Ok(PostgresBackend {
            locks: SessionLocks::new(sql, shown, self.namespace, first.into()).await?,
        })
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
    ///
    /// # Cancel safety
    ///
    /// As for [`PostgresBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// The server process id of the session holding `owner`'s lock, if any (for tests and
    /// diagnostics, e.g. `pg_terminate_backend`).
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing.
    pub async fn session_pid(&self, key: &str, owner: OwnerToken) -> Option<i32> {
        let pid = self.locks.session_id(owner, key)?;
        i32::try_from(pid).ok()
    }

    /// The advisory-lock key of `key` under this backend's namespace (see
    /// [`crate::postgres::advisory_key`]).
    pub fn advisory_key(&self, key: &str) -> (i32, i32) {
        advisory_key(&self.locks.full_key(key))
    }
}

/// A lease for `idle_session_timeout`, in milliseconds (at least one: zero turns it off).
fn idle_timeout(ttl: Duration) -> String {
    format!("{}ms", ttl.as_millis().max(1))
}

impl Advisory {
    /// A request of one call or none (a rest): what `exchange.sql` does, in a statement
    /// without its arrays, common table expressions and sort, which cost more than the call
    /// itself; the lease is set in it only when it changes (`set_config` is a tenth of a
    /// lone grant's cycle).
    async fn one(
        &self,
        session: &mut Session,
        op: Option<Op<'_>>,
        lease: Lease,
    ) -> sqlx::Result<Option<u64>> {
        let ops = op.as_slice();
        let after = idle_timeout_after(ops, lease, session.idle_timeout.as_deref());
        let set = after
            .as_deref()
            .filter(|&after| session.idle_timeout.as_deref() != Some(after));
        let sql = match (op.map(|op| op.kind), set.is_some()) {
            (Some(Kind::Grant), false) => self.grant_sql.as_str(),
            (Some(Kind::Grant), true) => self.grant_and_lease_sql.as_str(),
            (Some(Kind::Unlock), false) => "SELECT pg_advisory_unlock($1, $2)::int::int8",
            (Some(Kind::Unlock), true) => {
                "SELECT pg_advisory_unlock($1, $2)::int::int8, \
                        set_config('idle_session_timeout', $3, false)"
            }
            (Some(Kind::Check), false) => {
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                        AND pid = pg_backend_pid() AND granted AND mode = 'ExclusiveLock' \
                        AND objsubid = 2 AND classid = $1::int4::oid \
                        AND objid = $2::int4::oid)::int::int8"
            }
            (Some(Kind::Check), true) => {
                "SELECT held::int::int8, set_config('idle_session_timeout', $3, false) \
                   FROM (SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                           AND pid = pg_backend_pid() AND granted AND mode = 'ExclusiveLock' \
                           AND objsubid = 2 AND classid = $1::int4::oid \
                           AND objid = $2::int4::oid) AS held OFFSET 0) h"
            }
            // A rest: nothing to run but the lease, if it changes.
            (None, true) => "SELECT NULL::int8, set_config('idle_session_timeout', $1, false)",
            (None, false) => return Ok(None),
        };
        let mut query = sqlx::query_scalar(AssertSqlSafe(sql));
        if let Some(op) = op {
            let (class, half) = advisory_key(op.full);
            query = query.bind(class).bind(half);
        }
        if let Some(set) = set {
            query = query.bind(set.to_owned());
        }
        let answer: Option<i64> = query.fetch_one(&mut session.conn).await?;
        session.idle_timeout = after;
        answer
            .map(|n| u64::try_from(n).map_err(|e| sqlx::Error::Decode(Box::new(e))))
            .transpose()
    }

    fn holders(&self) -> inspect::Holders<'_> {
        inspect::Holders {
            schema: &self.schema,
            table: self.named,
        }
    }
}

#[async_trait]
impl SessionSql for Advisory {
    type Conn = Session;
    const NAME: &'static str = "postgres";
    // Setting the lease is a tenth of a lone grant's cycle.
    const RESTS: bool = true;

    async fn connect(&self, shown: &str) -> Result<Session> {
        connect(&self.options, shown).await.map(Session::from)
    }

    async fn session_id(&self, session: &mut Session) -> sqlx::Result<i64> {
        // The simple protocol: one round trip once per session, not a prepare and a run.
        let pid: i32 = sqlx::raw_sql("SELECT pg_backend_pid()")
            .fetch_one(&mut session.conn)
            .await?
            .try_get(0)?;
        Ok(i64::from(pid))
    }

    async fn exchange(
        &self,
        session: &mut Session,
        ops: &[Op<'_>],
        lease: Lease,
    ) -> sqlx::Result<Vec<Option<u64>>> {
        match ops {
            [] => return self.one(session, None, lease).await.map(|_| Vec::new()),
            [op] => return self.one(session, Some(*op), lease).await.map(|a| vec![a]),
            _ => {}
        }
        let (mut kinds, mut classes, mut halves) = (
            Vec::with_capacity(ops.len()),
            Vec::with_capacity(ops.len()),
            Vec::with_capacity(ops.len()),
        );
        for op in ops {
            let (class, half) = advisory_key(op.full);
            kinds.push(match op.kind {
                Kind::Grant => 0_i16,
                Kind::Unlock => 1,
                Kind::Check => 2,
            });
            classes.push(class);
            halves.push(half);
        }
        let answers: Vec<Option<i64>> =
            sqlx::query_scalar(AssertSqlSafe(self.exchange_sql.clone()))
                .bind(kinds)
                .bind(classes)
                .bind(halves)
                .bind(lease.kept)
                .bind(idle_timeout(lease.ttl))
                .fetch_all(&mut session.conn)
                .await?;
        // What exchange.sql set: the lease while the session holds a lock, else none.
        let granted = ops
            .iter()
            .zip(&answers)
            .any(|(op, answer)| op.kind == Kind::Grant && answer.is_some());
        session.idle_timeout = Some(if lease.kept || granted {
            idle_timeout(lease.ttl)
        } else {
            "0".to_owned()
        });
        answers
            .into_iter()
            .map(|answer| match answer {
                // Every token and answer is positive or zero; a negative one is a broken
                // session's.
                Some(n) => u64::try_from(n)
                    .map(Some)
                    .map_err(|e| sqlx::Error::Decode(Box::new(e))),
                None => Ok(None),
            })
            .collect()
    }

    async fn held_by(
        &self,
        session: &mut Session,
        locks: &[(String, i64)],
    ) -> sqlx::Result<Vec<bool>> {
        let (mut classes, mut halves, mut pids) = (Vec::new(), Vec::new(), Vec::new());
        for (full, session) in locks {
            let (class, half) = advisory_key(full);
            classes.push(class);
            halves.push(half);
            // Every id came from pg_backend_pid(), an int4.
            pids.push(i32::try_from(*session).unwrap_or(0));
        }
        sqlx::query_scalar(include_str!("../../sql/postgres/locks/held_by.sql"))
            .bind(classes)
            .bind(halves)
            .bind(pids)
            .fetch_all(&mut session.conn)
            .await
    }

    fn probe_id(&self, full: &str) -> String {
        let (class, half) = advisory_key(full);
        format!("{class}:{half}")
    }

    async fn probe_connection(&self, shown: &str) -> Result<Session> {
        let mut session = self.connect(shown).await?;
        // Each wait is bounded, so an aborted probe's statement ends soon.
        sqlx::query("SET lock_timeout = '1s'")
            .execute(&mut session.conn)
            .await?;
        Ok(session)
    }

    async fn wait_free(&self, session: &mut Session, full: &str) -> sqlx::Result<bool> {
        let (class, half) = advisory_key(full);
        // Waits in the lock's queue and gives the lock back in the same statement: a shared
        // request, so every probe waiting on the key is granted at once and none holds it
        // beyond the statement (no hand-over chain between probes, nothing held if this
        // process freezes).
        let waited = sqlx::query(
            "SELECT pg_advisory_lock_shared($1, $2), pg_advisory_unlock_shared($1, $2)",
        )
        .bind(class)
        .bind(half)
        .execute(&mut session.conn)
        .await;
        match waited {
            Ok(_) => Ok(true),
            // lock_timeout: still held.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn record(&self, session: &mut Session, rows: &[HolderRow]) -> sqlx::Result<()> {
        if !self.named {
            return Ok(());
        }
        let secs = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        sqlx::query(AssertSqlSafe(self.record_sql.clone()))
            .bind(
                rows.iter()
                    .map(|r| i32::try_from(r.session).unwrap_or(0))
                    .collect::<Vec<_>>(),
            )
            .bind(rows.iter().map(|r| r.full.as_str()).collect::<Vec<_>>())
            .bind(
                rows.iter()
                    .map(|r| i64::try_from(r.token).unwrap_or(i64::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(rows.iter().map(|r| secs(r.since)).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.ttl.as_secs_f64()).collect::<Vec<_>>())
            .bind(crate::backend::inspect::this_process_encoded())
            .bind(
                rows.iter()
                    .map(|r| advisory_key(&r.full).1)
                    .collect::<Vec<_>>(),
            )
            .execute(&mut session.conn)
            .await?;
        Ok(())
    }

    async fn held(
        &self,
        session: &mut Session,
        prefix: &str,
        unnamed: bool,
    ) -> sqlx::Result<Vec<HeldLock>> {
        inspect::held(&mut session.conn, &self.holders(), prefix, unnamed).await
    }

    async fn break_lock(
        &self,
        session: &mut Session,
        full: &str,
    ) -> sqlx::Result<Option<HeldLock>> {
        inspect::break_lock(&mut session.conn, &self.holders(), full).await
    }
}

session_backend!(PostgresBackend, "postgres");

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(kept: bool) -> Lease {
        Lease {
            ttl: Duration::from_millis(30_000),
            kept,
        }
    }

    /// The lease a request leaves: set by a grant or while locks are kept, the server's
    /// default by a rest, and left as it was by a release that leaves the session free.
    #[test]
    fn the_lease_changes_only_where_a_lock_may_be_held_or_the_session_rests() {
        let grant = [Op {
            kind: Kind::Grant,
            full: "k",
        }];
        let unlock = [Op {
            kind: Kind::Unlock,
            full: "k",
        }];
        let check = [Op {
            kind: Kind::Check,
            full: "k",
        }];
        let lease_ms = Some("30000ms".to_owned());
        assert_eq!(idle_timeout_after(&grant, lease(false), None), lease_ms);
        assert_eq!(
            idle_timeout_after(&grant, lease(false), Some("0")),
            lease_ms
        );
        assert_eq!(idle_timeout_after(&check, lease(true), Some("0")), lease_ms);
        assert_eq!(idle_timeout_after(&unlock, lease(true), None), lease_ms);
        // A free session keeps its last lease until it rests.
        assert_eq!(
            idle_timeout_after(&unlock, lease(false), Some("30000ms")),
            lease_ms
        );
        assert_eq!(idle_timeout_after(&unlock, lease(false), None), None);
        assert_eq!(
            idle_timeout_after(&[], lease(false), Some("30000ms")),
            Some("0".to_owned())
        );
    }
}
