//! Who holds what on PostgreSQL: `pg_locks` in lockwise's advisory class, joined with the
//! `holder` rows the loss checks write and with `pg_stat_activity` (`sql/postgres/locks/held.sql`).
//! Breaking a lock terminates its holder's session, which frees the lock at once.

use std::time::Duration;

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Row};

use super::{HeldLock, Holder};
use crate::db::pg_conn::{ADVISORY_CLASS, Schema, advisory_key};
use crate::lease::FencingToken;

/// The locks held now whose full key starts with `prefix`. Locks no `holder` row names
/// (transaction-scoped ones, grants of an older lockwise) are listed only when `unnamed`, with
/// their advisory key for a name.
pub(crate) async fn held(
    conn: &mut PgConnection,
    schema: &Holders<'_>,
    prefix: &str,
    unnamed: bool,
) -> sqlx::Result<Vec<HeldLock>> {
    let rows = read(conn, schema, None, false).await?;
    Ok(rows
        .into_iter()
        .filter(|lock| {
            if lock.named {
                lock.lock.key.starts_with(prefix)
            } else {
                unnamed
            }
        })
        .map(|lock| lock.lock)
        .collect())
}

/// Terminates the session holding `full`'s lock: what it held, or `None` when nothing held it.
pub(crate) async fn break_lock(
    conn: &mut PgConnection,
    schema: &Holders<'_>,
    full: &str,
) -> sqlx::Result<Option<HeldLock>> {
    let (_, half) = advisory_key(full);
    let mut rows = read(conn, schema, Some(half), true).await?;
    let Some(mut lock) = rows.pop() else {
        return Ok(None);
    };
    // Another key sharing the 32-bit half holds it: that lock excludes `full`'s too.
    if !lock.named {
        lock.lock.key = full.to_owned();
    }
    Ok(Some(lock.lock))
}

/// A row of `held.sql`, and whether its `holder` row names it.
struct Read {
    lock: HeldLock,
    named: bool,
}

/// Where the rows of who holds what are: the schema, and whether its `holder` table exists.
pub(crate) struct Holders<'a> {
    pub(crate) schema: &'a Schema,
    pub(crate) table: bool,
}

async fn read(
    conn: &mut PgConnection,
    holders: &Holders<'_>,
    half: Option<i32>,
    terminate: bool,
) -> sqlx::Result<Vec<Read>> {
    let mut template = include_str!("../../../sql/postgres/locks/held.sql").to_owned();
    if !holders.table {
        // A schema without the table (see sql/postgres/holder.sql): every lock unnamed.
        template = template.replace(
            "LEFT JOIN {schema}.lock_holder h ON h.pid = l.pid AND h.half::oid = l.objid",
            "LEFT JOIN (SELECT NULL::int AS pid, NULL::text AS key, NULL::bigint AS token, \
             NULL::timestamptz AS since, NULL::interval AS lease, NULL::text AS holder) h \
             ON false",
        );
    }
    let sql = holders.schema.sql(&template);
    let rows = sqlx::query(AssertSqlSafe(sql.0))
        .bind(ADVISORY_CLASS)
        .bind(half)
        .bind(terminate)
        .fetch_all(conn)
        .await?;
    rows.iter().map(row).collect()
}

fn row(row: &sqlx::postgres::PgRow) -> sqlx::Result<Read> {
    let pid: i32 = row.try_get("pid")?;
    let objid: i64 = row.try_get("objid")?;
    let key: Option<String> = row.try_get("key")?;
    // The object half as an oid: the int4's bits, unsigned.
    let named = key.as_deref().is_some_and(|key| {
        let (_, half) = advisory_key(key);
        i64::from(u32::from_ne_bytes(half.to_ne_bytes())) == objid
    });
    let secs = |name: &str| -> sqlx::Result<Option<Duration>> {
        Ok(row
            .try_get::<Option<f64>, _>(name)?
            .filter(|s| s.is_finite())
            .map(|s| Duration::from_secs_f64(s.max(0.0))))
    };
    let client: Option<String> = row.try_get("client")?;
    let (key, token, held_for, ttl_left, holder) = if named {
        let token: Option<i64> = row.try_get("token")?;
        let record: Option<String> = row.try_get("holder")?;
        let mut holder = record.as_deref().map(Holder::decode).unwrap_or_default();
        holder.host = holder.host.or_else(|| client.clone());
        (
            key.unwrap_or_default(),
            token
                .and_then(|t| u64::try_from(t).ok())
                .map(FencingToken::new),
            secs("held_secs")?,
            secs("ttl_secs")?,
            holder,
        )
    } else {
        let holder = Holder {
            host: client,
            name: row.try_get("application_name")?,
            ..Holder::default()
        };
        let half = i32::from_ne_bytes(u32::try_from(objid).unwrap_or(0).to_ne_bytes());
        (
            format!("<advisory lock {ADVISORY_CLASS}, {half}>"),
            None,
            None,
            None,
            holder,
        )
    };
    let waiters: i64 = row.try_get("waiters")?;
    Ok(Read {
        lock: HeldLock {
            key,
            token,
            holder: Holder {
                session: Some(i64::from(pid)),
                ..holder
            },
            held_for,
            ttl_left,
            waiters: u64::try_from(waiters).ok(),
        },
        named,
    })
}
