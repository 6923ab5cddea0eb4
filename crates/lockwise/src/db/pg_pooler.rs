//! PostgreSQL behind a transaction-pooling proxy (PgBouncer in `transaction` or `statement`
//! mode): found at first use, and then every statement is one the proxy can carry.
//!
//! Such a proxy lends a server connection for one transaction, or for one statement outside a
//! transaction. Two things that sqlx does by default break there:
//!
//! - **Named prepared statements** (`sqlx_s_1`) live on the server connection that parsed them.
//!   The next transaction may run on another one, where the name is unknown, or names another
//!   client's statement. PgBouncer below 1.21 cannot track them.
//! - **An unnamed statement outside a transaction** is parsed in one round trip and executed in
//!   the next, and the proxy may hand the server to someone else in between.
//!
//! So, behind such a proxy, [`PgDb`] runs each statement unnamed inside its own transaction
//! (`BEGIN` … `COMMIT`), and [`PgTx`] runs a transaction's statements unnamed. The session
//! settings that lockwise sets at connect time (`synchronous_commit = on`, on which the fencing
//! tokens' durability rests) do not survive the proxy either: each transaction sets them with
//! `SET LOCAL`, in the round trip of its `BEGIN`. Without a proxy both are the plain pool and
//! transaction, with their cached statements.
//!
//! One rule follows for lockwise's SQL: a statement returns only types sqlx knows. For a
//! column of another type (`xid8`, say) sqlx looks the type up between the parse and the
//! execution, and the lookup replaces the unnamed statement.
//!
//! # Finding the proxy
//!
//! Two client connections, the pool's and a fresh one, ask in turn for their server's process
//! id, a few rounds. Without pooling each client keeps its own server: each always gets the
//! same answer, and never the other's. A transaction-pooling proxy lends the server a client
//! just gave back to the next statement (PgBouncer reuses the last one released), so the two
//! clients get the same process id, or one client gets another one. Any such answer proves
//! pooling; a session-pooling proxy shows none, and needs nothing. Before that, one question
//! spares the second connection where it cannot find anything: the server's address and port
//! on the first connection are the ones the client dialled, so nothing stands between
//! ([`direct`]).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};
use sqlx::Either;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{
    PgConnectOptions, PgConnection, PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo,
};
use sqlx::{Connection, Execute, Executor, Postgres, Row, SqlStr, Transaction};
use tokio::sync::OnceCell;

/// The `BEGIN` of every transaction behind a pooling proxy: the session settings of
/// [`connect_options`](super::pg_conn::connect_options), for this transaction only.
const BEGIN_POOLED: &str = "BEGIN; SET LOCAL synchronous_commit TO on; \
                            SET LOCAL client_min_messages TO warning";

/// A pool that knows whether a transaction-pooling proxy stands between it and the server.
#[derive(Debug, Clone)]
pub(crate) struct PgDb {
    pool: PgPool,
    pooled: Arc<OnceCell<bool>>,
}

impl PgDb {
    pub(crate) fn new(pool: PgPool) -> Self {
        PgDb {
            pool,
            pooled: Arc::default(),
        }
    }

    /// The pool itself, for what only a direct connection can do (LISTEN).
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether a transaction-pooling proxy lends the server connections (found at first call).
    pub(crate) async fn pooled(&self) -> Result<bool, sqlx::Error> {
        self.pooled
            .get_or_try_init(|| async {
                let pooled = behind_a_pooler(&self.pool).await?;
                if pooled {
                    tracing::info!(
                        "PostgreSQL is behind a transaction-pooling proxy: lockwise runs every \
                         statement unnamed in a transaction of its own, and does not LISTEN"
                    );
                }
                Ok(pooled)
            })
            .await
            .copied()
    }

    /// Begins a transaction; behind a proxy, with lockwise's session settings set locally.
    pub(crate) async fn begin(&self) -> Result<PgTx<'static>, sqlx::Error> {
        let pooled = self.pooled().await?;
        let tx = if pooled {
            self.pool.begin_with(BEGIN_POOLED).await?
        } else {
            self.pool.begin().await?
        };
        Ok(PgTx {
            tx,
            persistent: !pooled,
        })
    }

    /// One connection of the pool, for several statements in a row; behind a proxy each runs
    /// as [`PgDb`]'s do.
    pub(crate) async fn acquire(&self) -> Result<PgConn, sqlx::Error> {
        let pooled = self.pooled().await?;
        Ok(PgConn {
            conn: self.pool.acquire().await?,
            pooled,
        })
    }
}

/// A connection of a [`PgDb`].
#[derive(Debug)]
pub(crate) struct PgConn {
    conn: PoolConnection<Postgres>,
    pooled: bool,
}

impl PgConn {
    /// Begins a transaction on this connection (see [`PgDb::begin`]).
    pub(crate) async fn begin(&mut self) -> Result<PgTx<'_>, sqlx::Error> {
        let tx = if self.pooled {
            (*self.conn).begin_with(BEGIN_POOLED).await?
        } else {
            (*self.conn).begin().await?
        };
        Ok(PgTx {
            tx,
            persistent: !self.pooled,
        })
    }
}

/// Whether the server connections behind `pool` are lent per transaction (see the module).
pub(crate) async fn behind_a_pooler(pool: &PgPool) -> Result<bool, sqlx::Error> {
    let mut mine = pool.acquire().await?;
    pooled(&mut mine, &pool.connect_options()).await
}

/// Whether the server connection behind `conn`, made with `options`, is lent per transaction
/// (see the module): not when `conn` reaches the server [`direct`]ly, and otherwise what the
/// probe with a second connection finds.
pub(crate) async fn pooled(
    conn: &mut PgConnection,
    options: &PgConnectOptions,
) -> Result<bool, sqlx::Error> {
    if direct(conn, options).await? {
        return Ok(false);
    }
    let mut other = PgConnection::connect_with(options).await?;
    let pooled = lends_servers(conn, &mut other).await;
    let _ = other.close().await;
    pooled
}

/// Whether `conn` reaches the server with nothing between: the server's own address and port
/// on this connection (`inet_server_addr()`, `inet_server_port()`) are the ones `options`
/// dialled. A proxy listens on an address or a port of its own (PgBouncer's 6432, another
/// host), and its server connection is the one the server sees, so a proxy never passes for
/// direct, and the check saves the probe's second connection only where none is needed. A
/// Unix socket, a NAT or a container's port mapping do not pass either: the probe decides.
async fn direct(conn: &mut PgConnection, options: &PgConnectOptions) -> Result<bool, sqlx::Error> {
    let (host, port) = (options.get_host(), options.get_port());
    if host.starts_with('/') {
        return Ok(false);
    }
    // Text and int4, which any proxy carries and sqlx decodes without a lookup.
    let row = sqlx::raw_sql("SELECT host(inet_server_addr()), inet_server_port()")
        .fetch_one(&mut *conn)
        .await?;
    let (addr, server_port): (Option<String>, Option<i32>) = (row.try_get(0)?, row.try_get(1)?);
    let Some(addr) = addr.and_then(|a| a.parse::<std::net::IpAddr>().ok()) else {
        return Ok(false);
    };
    if server_port != Some(i32::from(port)) {
        return Ok(false);
    }
    let Ok(dialled) = tokio::net::lookup_host((host, port)).await else {
        return Ok(false);
    };
    Ok(dialled
        .map(|a| a.ip().to_canonical())
        .any(|ip| ip == addr.to_canonical()))
}

/// Whether the server connections behind two client connections to one address are lent per
/// transaction (see the module). Only simple-protocol statements, which any proxy carries
/// whole.
async fn lends_servers(
    mine: &mut PgConnection,
    other: &mut PgConnection,
) -> Result<bool, sqlx::Error> {
    async fn pid(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
        sqlx::raw_sql("SELECT pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)
    }
    // Each client's own server, as first seen.
    let (mine_first, others_first) = (pid(mine).await?, pid(other).await?);
    if mine_first == others_first {
        return Ok(true);
    }
    // Another client of the proxy may take the server just given back; a few rounds in turn
    // make pooling show anyway (without it, no round can show it).
    for _ in 0..PROBE_ROUNDS {
        if pid(mine).await? != mine_first || pid(other).await? != others_first {
            return Ok(true);
        }
    }
    Ok(false)
}

/// How many rounds [`lends_servers`] asks for the pids (each a simple query per connection).
const PROBE_ROUNDS: usize = 8;

/// A query with its `persistent` flag overridden: unnamed and uncached when false.
struct Persist<E>(E, bool);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Persist<E> {
    fn sql(self) -> SqlStr {
        self.0.sql()
    }

    fn statement(&self) -> Option<&PgStatement> {
        self.0.statement()
    }

    fn take_arguments(
        &mut self,
    ) -> Result<Option<sqlx::postgres::PgArguments>, sqlx::error::BoxDynError> {
        self.0.take_arguments()
    }

    fn persistent(&self) -> bool {
        self.1 && self.0.persistent()
    }
}

type Item = Result<Either<PgQueryResult, PgRow>, sqlx::Error>;

impl<'c> Executor<'c> for &'c PgDb {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let mut query = Some(query);
        stream::once(self.pooled())
            .map_ok(move |pooled| -> BoxStream<'e, Item> {
                let Some(query) = query.take() else {
                    return stream::empty().boxed();
                };
                if !pooled {
                    return self.pool.fetch_many(query);
                }
                collected(async move { alone(self.begin().await?, query).await })
            })
            .try_flatten()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        Box::pin(async move {
            if !self.pooled().await? {
                return self.pool.fetch_optional(query).await;
            }
            let mut tx = self.begin().await?;
            let row = (&mut tx).fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }
}

/// Runs `query` alone in `tx` and commits: its results, collected.
async fn alone<'q, E: 'q + Execute<'q, Postgres>>(
    mut tx: PgTx<'_>,
    query: E,
) -> Result<Vec<Either<PgQueryResult, PgRow>>, sqlx::Error> {
    let all = (&mut tx).fetch_many(query).try_collect().await?;
    tx.commit().await?;
    Ok(all)
}

/// The results of [`alone`] as a stream.
fn collected<'e>(
    results: impl std::future::Future<Output = Result<Vec<Either<PgQueryResult, PgRow>>, sqlx::Error>>
    + Send
    + 'e,
) -> BoxStream<'e, Item> {
    stream::once(results)
        .map_ok(|all| stream::iter(all.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
}

impl<'c> Executor<'c> for &'c mut PgConn {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pooled {
            return (&mut *self.conn).fetch_many(query);
        }
        collected(async move { alone(self.begin().await?, query).await })
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if !self.pooled {
            return (&mut *self.conn).fetch_optional(query);
        }
        Box::pin(async move {
            let mut tx = self.begin().await?;
            let row = (&mut tx).fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        (&mut *self.conn).prepare_with(sql, parameters)
    }
}

/// A transaction whose statements are unnamed behind a pooling proxy.
#[derive(Debug)]
pub(crate) struct PgTx<'t> {
    tx: Transaction<'t, Postgres>,
    persistent: bool,
}

impl<'t> PgTx<'t> {
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }

    /// The transaction, for the caller's own statements (named or not is then the caller's
    /// business).
    pub(crate) fn transaction(&mut self) -> &mut Transaction<'t, Postgres> {
        &mut self.tx
    }
}

impl<'c> Executor<'c> for &'c mut PgTx<'_> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let persistent = self.persistent;
        (&mut *self.tx).fetch_many(Persist(query, persistent))
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let persistent = self.persistent;
        (&mut *self.tx).fetch_optional(Persist(query, persistent))
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        (&mut *self.tx).prepare_with(sql, parameters)
    }
}
