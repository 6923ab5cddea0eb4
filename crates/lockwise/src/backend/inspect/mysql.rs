//! Who holds what on MariaDB/MySQL: the keys of `lockwise_fence` whose `GET_LOCK` name a
//! session holds (`sql/mysql/held.sql`). Breaking a lock kills its holder's connection.
//!
//! The time a lock was granted is read from its token: a grant's token is the server's clock
//! in Unix milliseconds × 1024 unless the key was granted earlier in the same millisecond
//! (`sql/mysql/grant.sql`), so the token over 1024 is the grant's millisecond.

use std::time::Duration;

use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::{AssertSqlSafe, Row};

use super::{HeldLock, Holder};
use crate::lease::FencingToken;

const HELD: &str = include_str!("../../../sql/mysql/held.sql");

/// How long a broken holder's connection may take to end.
const KILLED_WITHIN: Duration = Duration::from_secs(5);

/// The locks held now whose full key starts with `prefix`.
pub(crate) async fn held(conn: &mut MySqlConnection, prefix: &str) -> sqlx::Result<Vec<HeldLock>> {
    let rows = sqlx::query(AssertSqlSafe(HELD))
        .bind(u32::try_from(prefix.len()).unwrap_or(u32::MAX))
        .bind(prefix.as_bytes())
        .fetch_all(conn)
        .await?;
    rows.iter().map(row).collect()
}

/// Kills the connection holding `full`'s lock (`name` is its `GET_LOCK` name) and waits until
/// the lock is free: what it held, or `None` when nothing held it.
pub(crate) async fn break_lock(
    conn: &mut MySqlConnection,
    full: &str,
    name: &str,
) -> sqlx::Result<Option<HeldLock>> {
    let held = held(&mut *conn, full).await?;
    let Some(lock) = held.into_iter().find(|lock| lock.key == full) else {
        return Ok(None);
    };
    let Some(session) = lock.holder.session else {
        return Ok(None);
    };
    // A number from the server: safe to inline (KILL takes no placeholder).
    sqlx::raw_sql(AssertSqlSafe(format!("KILL CONNECTION {session}")))
        .execute(&mut *conn)
        .await?;
    let give_up = tokio::time::Instant::now() + KILLED_WITHIN;
    loop {
        let holder: Option<i64> = sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(name)
            .fetch_one(&mut *conn)
            .await?;
        if holder != Some(session) || tokio::time::Instant::now() >= give_up {
            return Ok(Some(lock));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn row(row: &MySqlRow) -> sqlx::Result<HeldLock> {
    let key: Vec<u8> = row.try_get("lock_key")?;
    let token: u64 = row.try_get("token")?;
    let now_ms: i64 = row.try_get("now_ms")?;
    let granted_ms = i64::try_from(token / 1024).unwrap_or(i64::MAX);
    let held_for = u64::try_from(now_ms - granted_ms)
        .ok()
        .map(Duration::from_millis);
    let waiters: i64 = row.try_get("waiters")?;
    Ok(HeldLock {
        key: String::from_utf8_lossy(&key).into_owned(),
        token: Some(FencingToken::new(token)),
        holder: Holder {
            host: row.try_get("client")?,
            session: row.try_get("session")?,
            ..Holder::default()
        },
        held_for,
        ttl_left: None,
        waiters: u64::try_from(waiters).ok(),
    })
}
