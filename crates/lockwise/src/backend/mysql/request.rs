//! The statements of one request on a lock session: what a request of grants, releases and
//! checks sends (one prepared statement for a lone call, else one text request), and how its
//! answers come back (see `sql/mysql/grant.sql`).

use sqlx::mysql::MySqlConnection;
use sqlx::{AssertSqlSafe, Row};

use std::sync::LazyLock;

use super::{CLOCK_FLOOR, IDLE_WAIT_TIMEOUT, lease_secs, lock_name};
use crate::backend::session::{Kind, Lease, Op};

/// Whether a session may take a lone lock in one statement, `GET_LOCK` inside the counter's
/// upsert (`INSERT … SELECT … WHERE GET_LOCK(…) = 1`), asked at connect on MariaDB only (where
/// the tests show the DUAL row's condition evaluated exactly once), unless the session writes a
/// statement-based binary log, where a replica would replay the `GET_LOCK` in its applier
/// (MariaDB's default `MIXED` logs such a statement as rows). Elsewhere the grant takes two
/// statements, its answer kept in a variable in between.
pub(super) const ONE_STATEMENT_GRANTS: &str =
    "CAST(@@log_bin = 0 OR @@SESSION.binlog_format <> 'STATEMENT' AS SIGNED)";

/// A lock session: its connection, and the `wait_timeout` this backend last set on it (`None`
/// until it sets one), so that a request sets it only when it changes.
pub(super) struct Conn {
    pub(super) conn: MySqlConnection,
    /// Its `CONNECTION_ID()`.
    pub(super) id: i64,
    wait_timeout: Option<u64>,
    /// Whether a lone grant may call `GET_LOCK` inside the counter's upsert (one statement
    /// instead of two; see [`ONE_STATEMENT_GRANTS`]).
    one_statement: bool,
}

impl Conn {
    /// A new session: `id` its `CONNECTION_ID()`, `one_statement` the answer to
    /// [`ONE_STATEMENT_GRANTS`].
    pub(super) fn new(conn: MySqlConnection, id: i64, one_statement: bool) -> Self {
        Conn {
            conn,
            id,
            wait_timeout: None,
            one_statement,
        }
    }

    /// Runs `ops` in one request (see `SessionSql::exchange`).
    pub(super) async fn exchange(
        &mut self,
        ops: &[Op<'_>],
        lease: Lease,
    ) -> sqlx::Result<Vec<Option<u64>>> {
        if let [op] = ops
            && wait_timeout_after(ops, lease, self.wait_timeout) == self.wait_timeout
            && (op.kind != Kind::Grant || self.one_statement)
        {
            return Ok(vec![lone(&mut self.conn, *op).await?]);
        }
        let request = request(ops, lease, self.wait_timeout, self.one_statement);
        let answers = run_request(&mut self.conn, ops, &request).await?;
        self.wait_timeout = request.wait_timeout;
        Ok(answers)
    }
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

/// The `wait_timeout` a request leaves on a session whose last one was `current` (see
/// [`Lease::after`]).
fn wait_timeout_after(ops: &[Op<'_>], lease: Lease, current: Option<u64>) -> Option<u64> {
    lease.after(ops, current, lease_secs, IDLE_WAIT_TIMEOUT)
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
        sql.push_str(&upsert_one(&format!("X'{key}'"), &expr(op)));
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
        sql.push_str(&upsert_one(&format!("X'{key}'"), &format!("@lw{i}")));
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
            let done = sqlx::query(LONE_GRANT.as_str())
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

/// One key's counter advanced if `granted` (an SQL expression) is 1, its token returned through
/// `LAST_INSERT_ID()` in the statement's answer; `key` is the key's bytes as SQL.
fn upsert_one(key: &str, granted: &str) -> String {
    format!(
        "INSERT INTO lockwise_fence (lock_key, token) \
         SELECT {key}, LAST_INSERT_ID({CLOCK_FLOOR}) FROM DUAL WHERE {granted} = 1 \
         ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {CLOCK_FLOOR}))"
    )
}

/// A lone grant and its token, prepared: binds the key's bytes and the lock name.
static LONE_GRANT: LazyLock<String> = LazyLock::new(|| upsert_one("?", "GET_LOCK(?, 0)"));

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
    fn the_prepared_grant_is_the_one_statement_grant_with_parameters() {
        let text = request(&[op(Kind::Grant, "k")], lease(false), Some(30), true).sql;
        let name = lock_name("k");
        let key = hex::encode("k");
        assert_eq!(
            text.replace(&format!("X'{key}'"), "?")
                .replace(&format!("'{name}'"), "?"),
            *LONE_GRANT
        );
        assert_eq!(LONE_GRANT.matches(CLOCK_FLOOR).count(), 2);
    }
}
