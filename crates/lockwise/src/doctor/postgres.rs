//! The checks of a PostgreSQL deployment.

use std::time::{Duration, SystemTime};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Row};

use super::timing::{PROBES, Probe, timing};
use super::{Finding, Options};
use crate::db::pg_conn::connect;
use crate::db::pg_pooler;
use crate::error::{Error, Result};
use crate::url::redact_url;

pub(super) async fn examine(url: &str, options: &Options) -> Result<Vec<Finding>> {
    let shown = redact_url(url);
    // The server's and the role's own settings: not the ones lockwise sets on its sessions.
    let connect_options: PgConnectOptions = url
        .parse::<PgConnectOptions>()
        .map_err(|_| Error::config(format!("malformed PostgreSQL URL {shown}")))?
        .application_name("lockwise doctor")
        .disable_statement_logging();
    let mut conn = connect(&connect_options, &shown).await?;
    let fail = |e: sqlx::Error| Error::backend("postgres", format!("doctor on {shown}: {e}"), e);
    let mut probes = Vec::new();
    for _ in 0..PROBES {
        probes.push(Probe::take(server_time(&mut conn, &fail)).await?);
    }
    let mut findings = Vec::new();
    let version: i32 = scalar(
        &mut conn,
        "SELECT current_setting('server_version_num')::int4",
    )
    .await
    .map_err(fail)?;
    findings.push(server_version(version));
    let commit: String = scalar(&mut conn, "SELECT current_setting('synchronous_commit')")
        .await
        .map_err(fail)?;
    findings.push(synchronous_commit(&commit));
    findings.push(match pg_pooler::pooled(&mut conn, &connect_options).await {
        Ok(false) => Finding::ok("pooling proxy", "no transaction-pooling proxy in between"),
        Ok(true) => Finding::warn(
            "pooling proxy",
            "a transaction-pooling proxy (PgBouncer pool_mode = transaction) lends server \
             connections per transaction: session advisory locks are refused",
            "lock inside a transaction (lockwise::postgres::Store::lock_xact), or connect \
             directly or through a session-mode pool; the queue works either way",
        ),
        Err(e) => Finding::warn("pooling proxy", format!("cannot tell: {e}"), ""),
    });
    let stale = options.stale_after.as_secs_f64();
    findings.push(idle_holders(&mut conn, stale).await.map_err(fail)?);
    findings.push(long_transactions(&mut conn, stale).await.map_err(fail)?);
    findings.push(grants(&mut conn, &options.namespace).await.map_err(fail)?);
    findings.push(
        jobs_past_lease(&mut conn, &options.namespace, stale)
            .await
            .map_err(fail)?,
    );
    findings.push(
        dead_tuples(&mut conn, &options.namespace)
            .await
            .map_err(fail)?,
    );
    findings.extend(timing(&probes, options.ttl));
    let _ = sqlx::Connection::close(conn).await;
    Ok(findings)
}

async fn scalar<T>(conn: &mut PgConnection, sql: &'static str) -> sqlx::Result<T>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres> + Send + Unpin,
{
    sqlx::query_scalar(sql).fetch_one(conn).await
}

async fn server_time(
    conn: &mut PgConnection,
    fail: &impl Fn(sqlx::Error) -> Error,
) -> Result<SystemTime> {
    let micros: i64 = scalar(
        conn,
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
    )
    .await
    .map_err(fail)?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_micros(micros.max(0).unsigned_abs()))
}

fn server_version(num: i32) -> Finding {
    let shown = format!("PostgreSQL {}.{}", num / 10_000, num % 10_000);
    if num < 140_000 {
        Finding::warn(
            "version",
            format!(
                "{shown}: before 14 there is no idle_session_timeout, so the session of a \
                 frozen or forgotten holder keeps its advisory locks until TCP gives up"
            ),
            "upgrade to PostgreSQL 14 or later",
        )
    } else {
        Finding::ok("version", shown)
    }
}

fn synchronous_commit(value: &str) -> Finding {
    let reason = format!("synchronous_commit = {value} for this role and database");
    match value {
        "off" | "local" => Finding::warn(
            "synchronous_commit",
            format!(
                "{reason}: a commit returns before it is durable{}, so a crash or failover can \
                 undo fenced writes and queue changes made outside lockwise's own sessions \
                 (those set it on)",
                if value == "local" {
                    " on the standby"
                } else {
                    ""
                }
            ),
            "ALTER ROLE … SET synchronous_commit = on (or remote_apply with a synchronous standby)",
        ),
        _ => Finding::ok("synchronous_commit", reason),
    }
}

/// Sessions idle in a transaction for longer than `stale` seconds while they hold advisory
/// locks: a client that stopped in the middle, whose locks nobody else can take.
async fn idle_holders(conn: &mut PgConnection, stale: f64) -> sqlx::Result<Finding> {
    let rows = sqlx::query(
        "SELECT a.pid, coalesce(a.application_name, ''), \
                extract(epoch FROM now() - a.state_change)::float8 \
           FROM pg_stat_activity a \
          WHERE a.state LIKE 'idle in transaction%' \
            AND a.state_change < now() - make_interval(secs => $1) \
            AND EXISTS (SELECT 1 FROM pg_locks l \
                         WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) \
          ORDER BY a.state_change LIMIT 5",
    )
    .bind(stale)
    .fetch_all(conn)
    .await?;
    if rows.is_empty() {
        return Ok(Finding::ok(
            "idle holders",
            "no session idle in a transaction holds an advisory lock",
        ));
    }
    let shown: Vec<String> = rows
        .iter()
        .map(|r| {
            let (pid, app, secs): (i32, String, f64) = (r.get(0), r.get(1), r.get(2));
            format!("pid {pid} ({app}) idle for {secs:.0} s")
        })
        .collect();
    Ok(Finding::warn(
        "idle holders",
        format!(
            "sessions idle in a transaction hold advisory locks: {}",
            shown.join(", ")
        ),
        "end those transactions (pg_terminate_backend(pid) frees the locks), and set \
         idle_in_transaction_session_timeout",
    ))
}

/// Transactions open longer than `stale` seconds that hold back the xmin horizon: vacuum
/// cannot remove the queue's dead rows while they run.
async fn long_transactions(conn: &mut PgConnection, stale: f64) -> sqlx::Result<Finding> {
    let rows = sqlx::query(
        "SELECT pid, coalesce(state, ''), extract(epoch FROM now() - xact_start)::float8 \
           FROM pg_stat_activity \
          WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() \
            AND xact_start < now() - make_interval(secs => $1) \
          ORDER BY xact_start LIMIT 5",
    )
    .bind(stale)
    .fetch_all(conn)
    .await?;
    if rows.is_empty() {
        return Ok(Finding::ok(
            "xmin horizon",
            "no transaction holds back the xmin horizon",
        ));
    }
    let shown: Vec<String> = rows
        .iter()
        .map(|r| {
            let (pid, state, secs): (i32, String, f64) = (r.get(0), r.get(1), r.get(2));
            format!("pid {pid} ({state}) open for {secs:.0} s")
        })
        .collect();
    Ok(Finding::warn(
        "xmin horizon",
        format!(
            "long transactions hold back the xmin horizon, so the queue's dead rows cannot be \
             vacuumed: {}",
            shown.join(", ")
        ),
        "end them; keep transactions short (idle_in_transaction_session_timeout, \
         statement_timeout)",
    ))
}

/// What lockwise needs in its schema `namespace`: to create it (CREATE on the database) if it
/// is missing, otherwise USAGE on it and on its fencing sequence.
async fn grants(conn: &mut PgConnection, namespace: &str) -> sqlx::Result<Finding> {
    let row = sqlx::query(
        "SELECT to_regnamespace($1) IS NOT NULL, \
                has_database_privilege(current_database(), 'CREATE'), \
                CASE WHEN to_regnamespace($1) IS NOT NULL \
                     THEN has_schema_privilege($1, 'USAGE') END, \
                CASE WHEN to_regclass(quote_ident($1) || '.fence_seq') IS NOT NULL \
                     THEN has_sequence_privilege(quote_ident($1) || '.fence_seq', 'USAGE') END, \
                current_user::text",
    )
    .bind(namespace)
    .fetch_one(conn)
    .await?;
    let (exists, create, usage, sequence, user): (bool, bool, Option<bool>, Option<bool>, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    let mut missing = Vec::new();
    if !exists && !create {
        missing.push(format!(
            "CREATE on the database, to create the schema {namespace}"
        ));
    }
    if usage == Some(false) {
        missing.push(format!("USAGE on the schema {namespace}"));
    }
    if sequence == Some(false) {
        missing.push(format!("USAGE on the sequence {namespace}.fence_seq"));
    }
    if missing.is_empty() {
        return Ok(Finding::ok(
            "grants",
            format!("{user} has what lockwise needs in the schema {namespace}"),
        ));
    }
    Ok(Finding::fail(
        "grants",
        format!("{user} lacks {}", missing.join(", ")),
        "grant them, or run `lockwise queue migrate` once as the schema's owner (docs/cli.md \
         lists every grant)",
    ))
}

/// Dead rows in one table of the schema beyond which the check warns (and beyond a fifth of
/// its live rows).
const DEAD_TUPLES: i64 = 10_000;

/// Jobs whose lease ran out more than `stale` seconds ago and that no worker has reaped: every
/// worker reaps expired leases as it polls, so none runs.
async fn jobs_past_lease(
    conn: &mut PgConnection,
    namespace: &str,
    stale: f64,
) -> sqlx::Result<Finding> {
    let present: bool =
        sqlx::query_scalar("SELECT to_regclass(quote_ident($1) || '.leases') IS NOT NULL")
            .bind(namespace)
            .fetch_one(&mut *conn)
            .await?;
    if !present {
        return Ok(Finding::ok(
            "jobs past their lease",
            format!("no queue in the schema {namespace}"),
        ));
    }
    let schema = crate::db::pg_conn::Schema::new(namespace)
        .map_err(|e| sqlx::Error::Configuration(e.to_string().into()))?;
    let row = sqlx::query(schema.sql(
        "SELECT count(*), extract(epoch FROM now() - min(lease_until))::float8 \
           FROM {schema}.leases WHERE lease_until < now() - make_interval(secs => $1)",
    ))
    .bind(stale)
    .fetch_one(conn)
    .await?;
    let (count, oldest): (i64, Option<f64>) = (row.get(0), row.get(1));
    if count == 0 {
        return Ok(Finding::ok(
            "jobs past their lease",
            "every running job's lease is live, or ran out only lately",
        ));
    }
    Ok(Finding::warn(
        "jobs past their lease",
        format!(
            "{count} job(s) still count as running {:.0}s or more after their lease ran out: \
             no worker has reaped them, so none runs them again",
            oldest.unwrap_or(0.0)
        ),
        "start a worker (`lockwise queue work`): each reaps expired leases as it polls",
    ))
}

/// The table of the schema with the most dead rows: a queue whose vacuum falls behind
/// claims and scans slower and slower.
async fn dead_tuples(conn: &mut PgConnection, namespace: &str) -> sqlx::Result<Finding> {
    let row = sqlx::query(
        "SELECT relname::text, n_dead_tup, n_live_tup FROM pg_stat_user_tables \
          WHERE schemaname = $1 ORDER BY n_dead_tup DESC LIMIT 1",
    )
    .bind(namespace)
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else {
        return Ok(Finding::ok(
            "dead tuples",
            format!("no table in the schema {namespace}"),
        ));
    };
    let (table, dead, live): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
    if dead > DEAD_TUPLES && dead > live / 5 {
        return Ok(Finding::warn(
            "dead tuples",
            format!(
                "{namespace}.{table} has {dead} dead rows beside {live} live ones: vacuum falls \
                 behind, and every scan of it reads them"
            ),
            format!(
                "look for long transactions (see xmin horizon), then let autovacuum run more \
                 often on it: ALTER TABLE {namespace}.{table} SET \
                 (autovacuum_vacuum_scale_factor = 0.01)"
            ),
        ));
    }
    Ok(Finding::ok(
        "dead tuples",
        format!("at most {dead} dead rows in a table of the schema {namespace} ({table})"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn a_server_before_14_warns() {
        assert_eq!(server_version(130_011).status, Status::Warn);
        assert_eq!(server_version(150_018).status, Status::Ok);
        assert_eq!(server_version(150_018).reason, "PostgreSQL 15.18");
    }
}
