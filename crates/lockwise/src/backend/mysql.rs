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

use super::HeldLock;
use super::inspect::mysql as inspect;
use super::session::{Kind, Lease, Op, SessionLocks, SessionSql, session_backend};
use crate::error::{Error, Result};
use crate::lease::OwnerToken;
use crate::url::redact_url;

/// How long connecting may take before it is reported as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// The server's default `wait_timeout` (8 hours), restored on connections kept for reuse.
const IDLE_WAIT_TIMEOUT: u64 = 28_800;

const SCHEMA: &str = include_str!("../../sql/mysql/fence.sql");

/// A fencing token's floor: the server's clock in Unix milliseconds × 1024 (see
/// `sql/mysql/grant.sql`).
const CLOCK_FLOOR: &str = clock_floor!();

macro_rules! clock_floor {
    () => {
        "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024"
    };
}
use clock_floor;

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
fn lease_secs(ttl: Duration) -> u64 {
    (ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).max(1)
}

/// Whether a session may take a lone lock in one statement, `GET_LOCK` inside the counter's
/// upsert (`INSERT … SELECT … WHERE GET_LOCK(…) = 1`), asked at connect on MariaDB only (where
/// the tests show the DUAL row's condition evaluated exactly once), unless the session writes a
/// statement-based binary log, where a replica would replay the `GET_LOCK` in its applier
/// (MariaDB's default `MIXED` logs such a statement as rows). Elsewhere the grant takes two
/// statements, its answer kept in a variable in between.
const ONE_STATEMENT_GRANTS: &str =
    "CAST(@@log_bin = 0 OR @@SESSION.binlog_format <> 'STATEMENT' AS SIGNED)";

/// A lock session: its connection, and the `wait_timeout` this backend last set on it (`None`
/// until it sets one), so that a request sets it only when it changes.
struct Conn {
    conn: MySqlConnection,
    /// Its `CONNECTION_ID()`.
    id: i64,
    wait_timeout: Option<u64>,
    /// Whether a lone grant may call `GET_LOCK` inside the counter's upsert (one statement
    /// instead of two; see [`ONE_STATEMENT_GRANTS`]).
    one_statement: bool,
}

/// One request of `ops` (see `sql/mysql/grant.sql`), as text: one or more statements in one
/// round trip, run in order on the session. Every inlined value is ours or hex: a number of
/// seconds, hex lock names, the keys' bytes as hex literals.
#[derive(Debug, PartialEq)]
struct Request {
    sql: String,
    /// The session's `wait_timeout` once it has run.
    wait_timeout: Option<u64>,
    /// How its answers come back.
    answers: Answers,
}

#[derive(Debug, PartialEq)]
enum Answers {
    /// A row of one column per op, and a second one (the token) per grant.
    Row,
    /// A lone grant: the counter's upsert says it all: a row changed when granted, and the
    /// token is its `LAST_INSERT_ID()`.
    Upsert,
}

/// The `wait_timeout` a request leaves on a session whose last one was `current`: the lease
/// while it holds or may be granted a lock; the server's idle default when it rests; else
/// unchanged (a session that holds nothing keeps the last lease until it rests, so that a
/// lock taken and given back again and again sets nothing).
fn wait_timeout_after(ops: &[Op<'_>], lease: Lease, current: Option<u64>) -> Option<u64> {
    if lease.kept || ops.iter().any(|op| op.kind == Kind::Grant) {
        Some(lease_secs(lease.ttl))
    } else if ops.is_empty() {
        // A rest.
        Some(IDLE_WAIT_TIMEOUT)
    } else {
        current
    }
}

fn request(ops: &[Op<'_>], lease: Lease, current: Option<u64>, one_statement: bool) -> Request {
    use std::fmt::Write;
    let wait_timeout = wait_timeout_after(ops, lease, current);
    // Set first, so that a holder frozen right after its grant still loses its session (and
    // the lock) when the lease runs out.
    let set_timeout = (wait_timeout != current)
        .then_some(wait_timeout)
        .flatten()
        .map(|secs| format!("SESSION wait_timeout = {secs}"));
    let granted: Vec<(usize, String)> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| op.kind == Kind::Grant)
        .map(|(i, op)| (i, hex::encode(op.full.as_bytes())))
        .collect();
    let expr = |op: &Op<'_>| {
        let name = lock_name(op.full);
        match op.kind {
            Kind::Grant => format!("GET_LOCK('{name}', 0)"),
            Kind::Unlock => format!("RELEASE_LOCK('{name}')"),
            Kind::Check => format!("(IS_USED_LOCK('{name}') = CONNECTION_ID())"),
        }
    };
    let mut sql = String::new();
    if granted.is_empty() {
        // Releases and checks: one SELECT (after the lease, if it changes).
        if let Some(set) = &set_timeout {
            let _ = write!(sql, "SET {set}");
        }
        if !ops.is_empty() {
            if !sql.is_empty() {
                sql.push_str(";\n");
            }
            let columns: Vec<String> = ops
                .iter()
                .map(|op| format!("CAST({} AS SIGNED)", expr(op)))
                .collect();
            let _ = write!(sql, "SELECT {}", columns.join(", "));
        }
        return Request {
            sql,
            wait_timeout,
            answers: Answers::Row,
        };
    }
    if let ([op], [(_, key)], true) = (ops, granted.as_slice(), one_statement) {
        // A lone grant in one statement: the upsert runs only if GET_LOCK grants (a DUAL row
        // is read once), and its token comes back with the statement's answer.
        if let Some(set) = &set_timeout {
            let _ = writeln!(sql, "SET {set};");
        }
        let _ = write!(
            sql,
            "INSERT INTO lockwise_fence (lock_key, token) \
             SELECT X'{key}', LAST_INSERT_ID({CLOCK_FLOOR}) FROM DUAL WHERE {} = 1 \
             ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {CLOCK_FLOOR}))",
            expr(op)
        );
        return Request {
            sql,
            wait_timeout,
            answers: Answers::Upsert,
        };
    }
    // The locks first, each answer in a variable (so that the counters' upsert, written to
    // the binary log, carries values rather than GET_LOCK calls), then the tokens.
    let mut sets: Vec<String> = set_timeout.into_iter().collect();
    sets.extend(
        ops.iter()
            .enumerate()
            .map(|(i, op)| format!("@lw{i} = {}", expr(op))),
    );
    let _ = writeln!(sql, "SET {};", sets.join(", "));
    if let [(i, key)] = granted.as_slice() {
        // One grant: its token comes back through LAST_INSERT_ID(), without reading the row.
        let _ = write!(
            sql,
            "INSERT INTO lockwise_fence (lock_key, token) \
             SELECT X'{key}', LAST_INSERT_ID({CLOCK_FLOOR}) FROM DUAL WHERE @lw{i} = 1 \
             ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {CLOCK_FLOOR}))"
        );
        if ops.len() == 1 {
            return Request {
                sql,
                wait_timeout,
                answers: Answers::Upsert,
            };
        }
    } else {
        let rows: Vec<String> = granted
            .iter()
            .map(|(i, key)| format!("SELECT X'{key}' AS k, @lw{i} AS got"))
            .collect();
        let _ = write!(
            sql,
            "INSERT INTO lockwise_fence (lock_key, token) \
             SELECT g.k, {CLOCK_FLOOR} FROM ({}) g WHERE g.got = 1 \
             ON DUPLICATE KEY UPDATE token = GREATEST(token + 1, {CLOCK_FLOOR})",
            rows.join(" UNION ALL ")
        );
    }
    sql.push_str(";\nSELECT ");
    let one = granted.len() == 1;
    for (i, op) in ops.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(sql, "{sep}CAST(@lw{i} AS SIGNED)");
        if op.kind == Kind::Grant {
            if one {
                let _ = write!(
                    sql,
                    ", IF(@lw{i} = 1, CAST(LAST_INSERT_ID() AS UNSIGNED), NULL)"
                );
            } else {
                let key = hex::encode(op.full.as_bytes());
                let _ = write!(
                    sql,
                    ", IF(@lw{i} = 1, (SELECT token FROM lockwise_fence WHERE lock_key = X'{key}'), NULL)"
                );
            }
        }
    }
    Request {
        sql,
        wait_timeout,
        answers: Answers::Row,
    }
}

/// A lone op whose session's lease stays as it is: one prepared statement (the server
/// parses it once per session; a text statement of the same work costs it more than running
/// it, measured in docs/performance.md).
async fn lone(conn: &mut MySqlConnection, op: Op<'_>) -> sqlx::Result<Option<u64>> {
    let name = lock_name(op.full);
    match op.kind {
        Kind::Grant => {
            // As the one-statement grant of `request`: the upsert runs only if granted.
            let done = sqlx::query(LONE_GRANT)
                .bind(op.full.as_bytes())
                .bind(name)
                .execute(&mut *conn)
                .await?;
            Ok((done.rows_affected() > 0).then(|| done.last_insert_id()))
        }
        Kind::Unlock | Kind::Check => {
            let sql = if op.kind == Kind::Unlock {
                "SELECT CAST(RELEASE_LOCK(?) AS SIGNED)"
            } else {
                "SELECT CAST(IS_USED_LOCK(?) = CONNECTION_ID() AS SIGNED)"
            };
            let yes: Option<i64> = sqlx::query_scalar(sql)
                .bind(name)
                .fetch_one(&mut *conn)
                .await?;
            Ok(Some(u64::from(yes == Some(1))))
        }
    }
}

/// A lone grant and its token, prepared: binds the key's bytes and the lock name.
const LONE_GRANT: &str = concat!(
    "INSERT INTO lockwise_fence (lock_key, token) SELECT ?, LAST_INSERT_ID(",
    clock_floor!(),
    ") FROM DUAL WHERE GET_LOCK(?, 0) = 1 ",
    "ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, ",
    clock_floor!(),
    "))"
);

/// Runs `request` on `conn`: one answer per op.
async fn run_request(
    conn: &mut MySqlConnection,
    ops: &[Op<'_>],
    request: &Request,
) -> sqlx::Result<Vec<Option<u64>>> {
    use futures_util::TryStreamExt;
    if request.sql.is_empty() {
        return Ok(Vec::new());
    }
    let mut results = sqlx::raw_sql(AssertSqlSafe(request.sql.clone())).fetch_many(&mut *conn);
    let (mut last, mut row) = (None, None);
    while let Some(result) = results.try_next().await? {
        match result {
            sqlx::Either::Left(done) => last = Some(done),
            sqlx::Either::Right(r) => row = Some(r),
        }
    }
    if request.answers == Answers::Upsert {
        let done = last.ok_or(sqlx::Error::RowNotFound)?;
        // No row changed: GET_LOCK refused (0) or failed (NULL), and nothing was written.
        let granted = done.rows_affected() > 0;
        return Ok(vec![granted.then(|| done.last_insert_id())]);
    }
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let row = row.ok_or(sqlx::Error::RowNotFound)?;
    let mut column = 0;
    let mut answers = Vec::with_capacity(ops.len());
    for op in ops {
        let yes = row.try_get::<Option<i64>, _>(column)? == Some(1);
        column += 1;
        answers.push(match op.kind {
            Kind::Grant => {
                let token: Option<u64> = row.try_get(column)?;
                column += 1;
                token.filter(|_| yes)
            }
            Kind::Unlock | Kind::Check => Some(u64::from(yes)),
        });
    }
    Ok(answers)
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
            Ok::<_, sqlx::Error>(Conn {
                id: row.try_get(0)?,
                one_statement: row.try_get::<Option<i64>, _>(1)? == Some(1),
                conn,
                wait_timeout: None,
            })
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
        if let [op] = ops
            && wait_timeout_after(ops, lease, conn.wait_timeout) == conn.wait_timeout
            && (op.kind != Kind::Grant || conn.one_statement)
        {
            return Ok(vec![lone(&mut conn.conn, *op).await?]);
        }
        let request = request(ops, lease, conn.wait_timeout, conn.one_statement);
        let answers = run_request(&mut conn.conn, ops, &request).await?;
        conn.wait_timeout = request.wait_timeout;
        Ok(answers)
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

#[cfg(test)]
mod tests {
    use super::*;

    const SECS: Duration = Duration::from_secs(30);

    fn op(kind: Kind, full: &str) -> Op<'_> {
        Op { kind, full }
    }

    fn lease(kept: bool) -> Lease {
        Lease { ttl: SECS, kept }
    }

    #[test]
    fn a_lone_grant_sets_the_lease_only_when_it_changes() {
        let grant = [op(Kind::Grant, "k")];
        let name = lock_name("k");
        let first = request(&grant, lease(false), None, true);
        assert_eq!(first.wait_timeout, Some(30));
        assert_eq!(first.answers, Answers::Upsert);
        assert!(
            first
                .sql
                .starts_with("SET SESSION wait_timeout = 30;\nINSERT")
        );
        assert!(
            first
                .sql
                .contains(&format!("WHERE GET_LOCK('{name}', 0) = 1"))
        );
        let again = request(&grant, lease(false), Some(30), true);
        assert!(again.sql.starts_with("INSERT"), "{}", again.sql);
        // Where GET_LOCK may not sit in the upsert: two statements, the answer in between.
        let two = request(&grant, lease(false), Some(30), false);
        assert_eq!(two.answers, Answers::Upsert);
        assert!(
            two.sql
                .starts_with(&format!("SET @lw0 = GET_LOCK('{name}', 0);\nINSERT"))
        );
        assert!(two.sql.contains("WHERE @lw0 = 1"));
        let two_first = request(&grant, lease(false), None, false);
        assert!(
            two_first
                .sql
                .starts_with("SET SESSION wait_timeout = 30, @lw0 = GET_LOCK")
        );
    }

    #[test]
    fn a_free_session_keeps_its_lease_until_it_rests() {
        let unlock = [op(Kind::Unlock, "k")];
        let released = request(&unlock, lease(false), Some(30), true);
        assert_eq!(released.wait_timeout, Some(30));
        assert_eq!(
            released.sql,
            format!("SELECT CAST(RELEASE_LOCK('{}') AS SIGNED)", lock_name("k"))
        );
        // A release that leaves another lock sets the lease that one needs.
        let kept = request(&unlock, lease(true), Some(28_800), true);
        assert_eq!(kept.wait_timeout, Some(30));
        assert!(
            kept.sql
                .starts_with("SET SESSION wait_timeout = 30;\nSELECT")
        );
        let rest = request(&[], lease(false), Some(30), true);
        assert_eq!(rest.sql, "SET SESSION wait_timeout = 28800");
        assert_eq!(rest.wait_timeout, Some(IDLE_WAIT_TIMEOUT));
        // Rested already: nothing to send.
        assert!(
            request(&[], lease(false), Some(28_800), true)
                .sql
                .is_empty()
        );
        // A rest never takes the lease from a session that holds a lock.
        let held = request(&[], lease(true), Some(30), true);
        assert!(held.sql.is_empty() && held.wait_timeout == Some(30));
    }

    #[test]
    fn a_request_of_many_ops_answers_each_in_one_row() {
        let ops = [
            op(Kind::Grant, "a"),
            op(Kind::Unlock, "b"),
            op(Kind::Grant, "c"),
        ];
        let many = request(&ops, lease(true), Some(30), true);
        assert_eq!(many.answers, Answers::Row);
        assert!(many.sql.starts_with("SET @lw0 = GET_LOCK"), "{}", many.sql);
        assert!(many.sql.contains("UNION ALL"));
        assert!(
            many.sql
                .contains("\nSELECT CAST(@lw0 AS SIGNED), IF(@lw0 = 1, (SELECT token")
        );
    }

    #[test]
    fn the_prepared_grant_uses_the_clock_floor() {
        assert_eq!(LONE_GRANT.matches(CLOCK_FLOOR).count(), 2);
    }
}
