//! The checks of a MariaDB or MySQL deployment.

use std::time::{Duration, SystemTime};

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection};

use super::timing::{PROBES, Probe, timing};
use super::{Finding, Options};
use crate::db::mysql_conn::connect_options;
use crate::error::{Error, Result};
use crate::url::redact_url;

/// The collations the queue's text columns must have: binary, without padding (see the
/// queue's migration 4).
const BINARY_COLLATIONS: [&str; 2] = ["utf8mb4_nopad_bin", "utf8mb4_0900_bin"];

pub(super) async fn examine(url: &str, options: &Options) -> Result<Vec<Finding>> {
    let shown = redact_url(url);
    let connect: MySqlConnectOptions = connect_options(url)?.disable_statement_logging();
    let mut conn = tokio::time::timeout(Duration::from_secs(4), connect.connect())
        .await
        .map_err(|_| Error::backend_msg("mysql", format!("no answer from {shown} within 4s")))?
        .map_err(|e| Error::backend("mysql", format!("cannot connect to {shown}: {e}"), e))?;
    let fail = |e: sqlx::Error| Error::backend("mysql", format!("doctor on {shown}: {e}"), e);
    let mut probes = Vec::new();
    for _ in 0..PROBES {
        probes.push(Probe::take(server_time(&mut conn, &fail)).await?);
    }
    let (version, wait_timeout, flush, packet): (String, i64, i64, i64) = sqlx::query_as(
        "SELECT VERSION(), CAST(@@session.wait_timeout AS SIGNED), \
                CAST(@@innodb_flush_log_at_trx_commit AS SIGNED), \
                CAST(@@max_allowed_packet AS SIGNED)",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(fail)?;
    let mut findings = vec![
        server_version(&version),
        idle_timeout(wait_timeout, options.ttl),
        flush_at_commit(flush),
        max_packet(packet),
    ];
    let table = format!("{}_jobs", options.namespace);
    findings.push(collation(&mut conn, &table).await.map_err(fail)?);
    findings.extend(timing(&probes, options.ttl));
    let _ = conn.close().await;
    Ok(findings)
}

async fn server_time(
    conn: &mut MySqlConnection,
    fail: &impl Fn(sqlx::Error) -> Error,
) -> Result<SystemTime> {
    let micros: i64 = sqlx::query_scalar("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)")
        .fetch_one(conn)
        .await
        .map_err(fail)?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_micros(micros.max(0).unsigned_abs()))
}

/// `SKIP LOCKED`, which the queue's claims use, came with MariaDB 10.6 and MySQL 8.0.1.
fn server_version(version: &str) -> Finding {
    let mariadb = version.to_ascii_lowercase().contains("mariadb");
    let mut numbers = version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let (major, minor, patch) = (
        numbers.next().unwrap_or(0),
        numbers.next().unwrap_or(0),
        numbers.next().unwrap_or(0),
    );
    let (name, has_skip_locked) = if mariadb {
        ("MariaDB", (major, minor) >= (10, 6))
    } else {
        ("MySQL", (major, minor, patch) >= (8, 0, 1))
    };
    let shown = format!("{name} {major}.{minor}.{patch}");
    if has_skip_locked {
        Finding::ok("version", format!("{shown}, with SKIP LOCKED"))
    } else {
        Finding::fail(
            "version",
            format!("{shown}: no SKIP LOCKED, which the queue's claims need"),
            "upgrade to MariaDB 10.6 or MySQL 8.0 or later",
        )
    }
}

/// A lock lives in its session: a server that closes sessions idle for less than the TTL
/// ends a paused holder's lock before its TTL would have.
fn idle_timeout(seconds: i64, ttl: Duration) -> Finding {
    let reason = format!("wait_timeout = {seconds} s against a lock TTL of {ttl:?}");
    if u64::try_from(seconds).is_ok_and(|s| Duration::from_secs(s) < ttl) {
        Finding::warn(
            "wait_timeout",
            format!(
                "{reason}: the server closes a lock's session idle that long, so a holder \
                 paused for less than the TTL loses its lock"
            ),
            "SET GLOBAL wait_timeout above the longest TTL (and in the server's config)",
        )
    } else {
        Finding::ok("wait_timeout", reason)
    }
}

fn flush_at_commit(value: i64) -> Finding {
    if value == 1 {
        return Finding::ok(
            "innodb_flush_log_at_trx_commit",
            "1: every commit is on disk when it returns",
        );
    }
    Finding::warn(
        "innodb_flush_log_at_trx_commit",
        format!(
            "{value}: up to a second of commits is lost in a crash, among them the queue's \
             claims, completions and enqueues, and durable fencing tokens"
        ),
        "SET GLOBAL innodb_flush_log_at_trx_commit = 1",
    )
}

/// The bulk enqueue's statements and a large payload must fit in one packet.
fn max_packet(bytes: i64) -> Finding {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    let reason = format!("max_allowed_packet = {mib:.1} MiB");
    if bytes < 16 << 20 {
        Finding::warn(
            "max_allowed_packet",
            format!("{reason}: a job payload or a bulk enqueue statement above it is refused"),
            "SET GLOBAL max_allowed_packet = 64*1024*1024",
        )
    } else {
        Finding::ok("max_allowed_packet", reason)
    }
}

/// The queue table's text columns compare byte for byte (the queue's migration 4): under a
/// case- or accent-insensitive collation, `Abc` and `abc` are one queue and one key.
async fn collation(conn: &mut MySqlConnection, table: &str) -> sqlx::Result<Finding> {
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(column_name AS CHAR), CAST(collation_name AS CHAR) \
           FROM information_schema.columns \
          WHERE table_schema = DATABASE() AND table_name = ? AND collation_name IS NOT NULL \
          ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(conn)
    .await?;
    if columns.is_empty() {
        return Ok(Finding::ok(
            "collation",
            format!("no queue table {table} in this database"),
        ));
    }
    let wrong: Vec<String> = columns
        .iter()
        .filter(|(_, c)| !BINARY_COLLATIONS.contains(&c.as_str()))
        .map(|(name, c)| format!("{name} ({c})"))
        .collect();
    if wrong.is_empty() {
        return Ok(Finding::ok(
            "collation",
            format!("{table}'s text columns compare byte for byte"),
        ));
    }
    Ok(Finding::fail(
        "collation",
        format!(
            "{table} has text columns that do not compare byte for byte: {}; queue names \
             and idempotency keys that differ in case, accents or trailing spaces are one",
            wrong.join(", ")
        ),
        "run `lockwise queue migrate` with this version (it converts the table, keeping \
         every row)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn a_server_without_skip_locked_fails() {
        let status = |v: &str| server_version(v).status;
        assert_eq!(status("10.11.19-MariaDB-0+deb12u1"), Status::Ok);
        assert_eq!(status("10.6.0-MariaDB"), Status::Ok);
        assert_eq!(
            status("10.5.23-MariaDB-1:10.5.23+maria~ubu2004"),
            Status::Fail
        );
        assert_eq!(status("8.0.36"), Status::Ok);
        assert_eq!(status("8.0.0-dmr"), Status::Fail);
        assert_eq!(status("5.7.44-log"), Status::Fail);
    }
}
