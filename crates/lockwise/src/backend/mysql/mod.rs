//! MariaDB/MySQL `GET_LOCK`, on a few sessions that every lock of the backend shares (see
//! `backend/session`; a session holds any number of locks since MySQL 5.7 and MariaDB
//! 10.0.2). Calls that come together go in one request: the `GET_LOCK`s, `RELEASE_LOCK`s and
//! checks in one `SET`, then the counters of the keys granted in one upsert; a lone call is
//! one prepared statement (see `sql/mysql/grant.sql`).
//!
//! - **Lock names** are case-insensitive and at most 64 characters, so every name is the
//!   lowercase hex SHA-256 of the key (of `namespace:key` with a namespace) — fixed forever.
//! - **Fencing tokens** come from a counter row per key in `lockwise_fence` (keyed on the
//!   key's bytes as `VARBINARY`), advanced in the same session right after the grant, in
//!   autocommit so no rollback can reissue a token. A token is one above the key's last and
//!   never below the server's clock in Unix milliseconds × 1024, so a crash that loses the
//!   counter's last updates (`innodb_flush_log_at_trx_commit` ≠ 1, a failover to a replica
//!   that missed them) never makes a token repeat, as long as the server's clock does not go
//!   back (see `sql/mysql/grant.sql`: the grants, their tokens and the lease go in one
//!   round trip). So the counter needs no flush per grant: on MariaDB its table is Aria
//!   without transactions (an InnoDB table left by an earlier version is converted at
//!   connect, where the user may `ALTER` it), unless [`MysqlBuilder::durable_tokens`] asks
//!   for InnoDB.
//! - **Server-side lease**: the session's `wait_timeout` is the latest deadline of its locks —
//!   rounded *up* to whole seconds, the server's unit — so a holder frozen past its TTL loses
//!   its session and its lock. (The holder's local deadline still uses the exact TTL, so it
//!   gives up before the server does.) A request sets it only when it changes; a session that
//!   holds nothing keeps its last lease until it rests (see `SessionSql::RESTS`).
//! - **Waiters** are woken by a probe that waits in `GET_LOCK(name, 1)` on its own connection
//!   and gives the lock back in the same statement; it sees releases, dead holders and expired
//!   sessions alike.

use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Row};

mod request;

use self::request::{Conn, ONE_STATEMENT_GRANTS};
use super::HeldLock;
use super::inspect::mysql as inspect;
use super::session::{Lease, Op, SessionLocks, SessionSql, session_backend};
use crate::error::{Error, Result};
use crate::lease::OwnerToken;
use crate::url::redact_url;

/// How long connecting may take before it is reported as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// The server's default `wait_timeout` (8 hours), restored on connections kept for reuse.
pub(super) const IDLE_WAIT_TIMEOUT: u64 = 28_800;

const SCHEMA: &str = include_str!("../../../sql/mysql/fence.sql");

/// A fencing token's floor: the server's clock in Unix milliseconds × 1024 (see
/// `sql/mysql/grant.sql`).
pub(super) const CLOCK_FLOOR: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024";

/// `GET_LOCK` locks. Clones share the sessions.
#[derive(Clone)]
pub struct MysqlBackend {
    locks: SessionLocks<GetLock>,
}

/// The `GET_LOCK` statements.
struct GetLock {
    options: MySqlConnectOptions,
}

/// Configures a [`MysqlBackend`].
#[derive(Clone)]
pub struct MysqlBuilder {
    url: String,
    namespace: Option<String>,
    durable_tokens: bool,
}

impl std::fmt::Debug for MysqlBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBuilder")
            .field("url", &redact_url(&self.url))
            .field("namespace", &self.namespace)
            .field("durable_tokens", &self.durable_tokens)
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

    /// Keeps the fencing counters in InnoDB, flushed to the redo log on every grant
    /// (`innodb_flush_log_at_trx_commit = 1`), instead of MariaDB's Aria without
    /// transactions. Tokens strictly increase either way while the server runs, and after a
    /// crash as long as its clock has not gone back (the clock floor in
    /// `sql/mysql/grant.sql`); durable counters also keep their order across a crash *and* a
    /// clock set back, for ~200 µs more per grant. It decides the engine of a table this
    /// backend creates, and that an InnoDB table is left as it is: set it on every process
    /// that shares the database. Default: `false`. MySQL, which has no Aria, always uses
    /// InnoDB.
    pub fn durable_tokens(mut self, durable: bool) -> Self {
        self.durable_tokens = durable;
        self
    }

    /// Connects (within 4 s) and creates the counter table if it is missing (on MariaDB,
    /// converts an InnoDB one; see [`MysqlBuilder::durable_tokens`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes the connection it opened. Dropped while creating the
    /// table, it may leave the server's `lockwise:migrate` lock to that connection until the
    /// server notices it closed; the table is created by one statement, entirely or not at all.
    pub async fn connect(self) -> Result<MysqlBackend> {
        let options: MySqlConnectOptions = self
            .url
            .parse::<MySqlConnectOptions>()
            .map_err(|_| Error::config(format!("malformed MySQL URL {}", redact_url(&self.url))))?
            // A waiter's probe sits in GET_LOCK for up to a second: a wait, not a slow
            // statement, so sqlx's statement log stays off on these connections.
            .disable_statement_logging();
        let shown = redact_url(&self.url);
        let sql = GetLock { options };
        let mut first = sql.connect(&shown).await?;
        migrate(&mut first.conn, self.durable_tokens)
            .await
            .map_err(|e| {
                Error::backend(
                    "mysql",
                    format!("creating lockwise_fence on {shown} failed: {e}"),
                    e,
                )
            })?;
        Ok(MysqlBackend {
            locks: SessionLocks::new(sql, shown, self.namespace, first).await?,
        })
    }
}

/// The engine of counter tables without a flush per grant, where the server has it.
const FAST_ENGINE: &str = "Aria TRANSACTIONAL = 0";

/// What the counter table is now.
#[derive(Debug, PartialEq)]
enum Table {
    Missing,
    /// InnoDB: converted to [`FAST_ENGINE`] unless durable tokens are asked for.
    InnoDb,
    /// Anything else ([`FAST_ENGINE`], or an engine its administrator chose): left alone.
    Other,
}

async fn table(conn: &mut MySqlConnection) -> sqlx::Result<Table> {
    // The text protocol: one round trip (prepared for one use, it would take two).
    let row = sqlx::raw_sql(
        "SELECT ENGINE FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'lockwise_fence'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    let engine: Option<Option<String>> = row.map(|row| row.try_get(0)).transpose()?;
    Ok(match engine {
        None => Table::Missing,
        Some(Some(engine)) if engine.eq_ignore_ascii_case("InnoDB") => Table::InnoDb,
        Some(_) => Table::Other,
    })
}

/// Creates the counter table, or converts an InnoDB one to [`FAST_ENGINE`], one process at a
/// time. A conversion refused (no `ALTER` grant, a busy table) leaves the table as it is.
async fn migrate(conn: &mut MySqlConnection, durable: bool) -> sqlx::Result<()> {
    // The usual case, no DDL: a user without CREATE or ALTER can take locks, and a table
    // already converted costs one query.
    let found = table(conn).await?;
    if found == Table::Other || (found == Table::InnoDb && durable) {
        return Ok(());
    }
    let fast = !durable && {
        let aria: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.engines \
             WHERE engine = 'Aria' AND support IN ('YES', 'DEFAULT')",
        )
        .fetch_one(&mut *conn)
        .await?;
        aria > 0
    };
    if found == Table::InnoDb && !fast {
        return Ok(());
    }
    sqlx::query("SELECT GET_LOCK('lockwise:migrate', 10)")
        .execute(&mut *conn)
        .await?;
    let migrated = async {
        match table(conn).await? {
            Table::Missing => {
                let engine = if fast { FAST_ENGINE } else { "InnoDB" };
                sqlx::raw_sql(AssertSqlSafe(SCHEMA.replace("{engine}", engine)))
                    .execute(&mut *conn)
                    .await?;
            }
            Table::InnoDb if fast => {
                // Waits at most 5 s for the grants in flight to leave the table; they wait
                // for the copy, which takes ~1 s per 100,000 keys.
                let altered = sqlx::raw_sql(AssertSqlSafe(format!(
                    "SET SESSION lock_wait_timeout = 5; \
                     ALTER TABLE lockwise_fence ENGINE = {FAST_ENGINE}"
                )))
                .execute(&mut *conn)
                .await;
                if let Err(e) = altered {
                    tracing::info!(
                        error = %e,
                        "lockwise_fence stays InnoDB (a flush per grant): converting it failed"
                    );
                }
            }
            Table::InnoDb | Table::Other => {}
        }
        Ok::<_, sqlx::Error>(())
    }
    .await;
    sqlx::query("SELECT RELEASE_LOCK('lockwise:migrate')")
        .execute(&mut *conn)
        .await?;
    migrated
}

impl MysqlBackend {
    /// Starts configuring a backend for `url` (`mysql://user[:password]@host[:port]/db`).
    pub fn builder(url: impl Into<String>) -> MysqlBuilder {
        MysqlBuilder {
            url: url.into(),
            namespace: None,
            durable_tokens: false,
        }
    }

    /// Connects with the default settings.
    ///
    /// # Cancel safety
    ///
    /// As for [`MysqlBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// The `GET_LOCK` name of `key` under this backend's namespace; see [`lock_name`].
    pub fn lock_name_of(&self, key: &str) -> String {
        lock_name(&self.locks.full_key(key))
    }

    /// The connection id of the session holding `owner`'s lock (for tests and diagnostics,
    /// e.g. `KILL`).
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing.
    pub async fn session_id(&self, key: &str, owner: OwnerToken) -> Option<i64> {
        self.locks.session_id(owner, key)
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

/// The server-side lease: the TTL rounded up to whole seconds, the server's unit.
pub(super) fn lease_secs(ttl: Duration) -> u64 {
    (ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).max(1)
}

#[async_trait]
impl SessionSql for GetLock {
    type Conn = Conn;
    const NAME: &'static str = "mysql";
    // Setting wait_timeout is a statement of its own (~15 µs of server work a time).
    const RESTS: bool = true;

    async fn connect(&self, shown: &str) -> Result<Conn> {
        let connect = async {
            let mut conn = MySqlConnection::connect_with(&self.options).await?;
            // Fencing counters rely on autocommit, and their clock floor on UTC, whatever the
            // server's defaults; and a statement its client gave up on (the call timed out)
            // ends on the server too: MariaDB bounds every statement, MySQL only reads, under
            // another name (the first SET fails there as a whole, and the second runs).
            // One round trip each (the text protocol; prepared, they would take two).
            let ask = |set: &str, one_statement: &str| {
                format!(
                    "SET SESSION autocommit = 1, time_zone = '+00:00', {set};\n\
                     SELECT CAST(CONNECTION_ID() AS SIGNED), {one_statement}"
                )
            };
            let mariadb = ask("max_statement_time = 10", ONE_STATEMENT_GRANTS);
            let rows = match sqlx::raw_sql(AssertSqlSafe(mariadb))
                .fetch_all(&mut conn)
                .await
            {
                Ok(rows) => rows,
                Err(_) => {
                    sqlx::raw_sql(AssertSqlSafe(ask("max_execution_time = 10000", "0")))
                        .fetch_all(&mut conn)
                        .await?
                }
            };
            let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
            Ok::<_, sqlx::Error>(Conn::new(
                conn,
                row.try_get(0)?,
                row.try_get::<Option<i64>, _>(1)? == Some(1),
            ))
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(Error::backend(
                "mysql",
                format!(
                    "cannot connect to {shown}: {}",
                    crate::error::sql_reason(&e, "MySQL/MariaDB")
                ),
                e,
            )),
            Err(_) => Err(Error::backend_msg(
                "mysql",
                format!("no answer from {shown} within {CONNECT_TIMEOUT:?}"),
            )),
        }
    }

    async fn session_id(&self, conn: &mut Conn) -> sqlx::Result<i64> {
        Ok(conn.id)
    }

    async fn exchange(
        &self,
        conn: &mut Conn,
        ops: &[Op<'_>],
        lease: Lease,
    ) -> sqlx::Result<Vec<Option<u64>>> {
        conn.exchange(ops, lease).await
    }

    async fn held_by(&self, conn: &mut Conn, locks: &[(String, i64)]) -> sqlx::Result<Vec<bool>> {
        let mut held = Vec::with_capacity(locks.len());
        // One row of up to CHUNK columns per statement: IS_USED_LOCK names the holding
        // session, a lookup that touches no table.
        const CHUNK: usize = 100;
        for chunk in locks.chunks(CHUNK) {
            let columns = vec!["CAST(IS_USED_LOCK(?) AS SIGNED)"; chunk.len()].join(", ");
            let sql = format!("SELECT {columns}");
            let mut query = sqlx::query(AssertSqlSafe(sql));
            for (full, _) in chunk {
                query = query.bind(lock_name(full));
            }
            let row = query.fetch_one(&mut conn.conn).await?;
            for (i, (_, session)) in chunk.iter().enumerate() {
                let holder: Option<i64> = row.try_get(i)?;
                held.push(holder == Some(*session));
            }
        }
        Ok(held)
    }

    fn probe_id(&self, full: &str) -> String {
        lock_name(full)
    }

    async fn wait_free(&self, conn: &mut Conn, full: &str) -> sqlx::Result<bool> {
        let name = lock_name(full);
        // Waits up to 1 s and gives the lock back in the same statement, so a probe never
        // holds it beyond the statement (no hand-over chain between probes).
        // The name inlined (it is hex), not bound: the statement's text in the process list
        // then names the lock, which is how `lockwise locks` counts its waiters.
        let sql = format!("SELECT CAST(GET_LOCK('{name}', 1) AS SIGNED), RELEASE_LOCK('{name}')");
        let rows = sqlx::raw_sql(AssertSqlSafe(sql))
            .fetch_all(&mut conn.conn)
            .await?;
        let got: Option<i64> = match rows.first() {
            Some(row) => row.try_get(0)?,
            None => None,
        };
        Ok(got == Some(1))
    }

    async fn held(
        &self,
        conn: &mut Conn,
        prefix: &str,
        _unnamed: bool,
    ) -> sqlx::Result<Vec<HeldLock>> {
        inspect::held(&mut conn.conn, prefix).await
    }

    async fn break_lock(&self, conn: &mut Conn, full: &str) -> sqlx::Result<Option<HeldLock>> {
        inspect::break_lock(&mut conn.conn, full, &lock_name(full)).await
    }
}

session_backend!(MysqlBackend, "mysql");
