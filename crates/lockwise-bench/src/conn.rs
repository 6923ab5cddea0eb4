//! The tooling's own connections to PostgreSQL and MariaDB/MySQL, opened with sqlx directly
//! and set up as lockwise sets up its own, and the scratch schemas the benches create.

use std::time::Duration;

use lockwise::url::redact_url;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::pool::{Pool, PoolOptions};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Database};

use crate::error::{Error, Result, sql_reason};

/// How long connecting may take before it is reported as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// How long opening a pool (its first connection) may take in all.
const POOL_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection of a pool may take to be handed out.
const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Connection options for a PostgreSQL `url`, with lockwise's session settings: tagged in
/// `application_name` (`lockwise-bench`, or the URL's own name with ` (lockwise)` appended),
/// committing synchronously, and without notices.
pub(crate) fn pg_options(url: &str) -> Result<PgConnectOptions> {
    let options: PgConnectOptions = url
        .parse()
        .map_err(|_| Error::config(format!("malformed PostgreSQL URL {}", redact_url(url))))?;
    let name = match options.get_application_name() {
        Some(own) if !own.is_empty() => format!("{own} (lockwise)"),
        _ => "lockwise-bench".to_owned(),
    };
    Ok(options.application_name(&name).options([
        ("synchronous_commit", "on"),
        ("client_min_messages", "warning"),
    ]))
}

/// Opens one PostgreSQL connection within [`CONNECT_TIMEOUT`]; `shown` is the redacted URL.
pub(crate) async fn pg_connect(options: &PgConnectOptions, shown: &str) -> Result<PgConnection> {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(Error::backend(
            "postgres",
            format!(
                "cannot connect to {shown}: {}",
                sql_reason(&e, "PostgreSQL")
            ),
            e,
        )),
        Err(_) => Err(Error::no_answer(
            "postgres",
            format!("no answer from {shown} within {CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// A pool of at most `max_connections` to the PostgreSQL `url`, answering within 5 s.
pub(crate) async fn pg_pool(url: &str, max_connections: u32) -> Result<PgPool> {
    let options = pg_options(url)?;
    open_pool(options, max_connections, &redact_url(url), "postgres").await
}

/// Connection options for a `mysql://` URL (`mariadb://` already rewritten by
/// [`BackendUrl`](lockwise::url::BackendUrl)).
pub(crate) fn mysql_options(url: &str) -> Result<MySqlConnectOptions> {
    url.parse()
        .map_err(|_| Error::config(format!("malformed MySQL URL {}", redact_url(url))))
}

/// A pool of at most `max_connections` to the MariaDB/MySQL `url`, answering within 5 s.
pub(crate) async fn mysql_pool(url: &str, max_connections: u32) -> Result<MySqlPool> {
    let options = mysql_options(url)?;
    open_pool(options, max_connections, &redact_url(url), "mysql").await
}

/// Opens a pool that answers within [`POOL_CONNECT_TIMEOUT`]: one plain connection first, so
/// that a refused port or a wrong password fails at once with its own reason.
async fn open_pool<DB: Database>(
    options: <DB::Connection as Connection>::Options,
    max_connections: u32,
    shown: &str,
    backend: &'static str,
) -> Result<Pool<DB>>
where
    <DB::Connection as Connection>::Options: ConnectOptions<Connection = DB::Connection>,
{
    let server = if backend == "mysql" {
        "MySQL/MariaDB"
    } else {
        "PostgreSQL"
    };
    let connect = async {
        options.connect().await?.close().await?;
        PoolOptions::<DB>::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(POOL_ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
    };
    match tokio::time::timeout(POOL_CONNECT_TIMEOUT, connect).await {
        Ok(Ok(pool)) => Ok(pool),
        Ok(Err(e)) => Err(Error::backend(
            backend,
            format!("cannot connect to {shown}: {}", sql_reason(&e, server)),
            e,
        )),
        Err(_) => Err(Error::no_answer(
            backend,
            format!("no answer from {shown} within {POOL_CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// A validated schema name and the SQL that uses it.
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    name: String,
    quoted: String,
}

impl Schema {
    /// A schema of 1 to 63 lowercase letters, digits and `_`, not starting with a digit.
    pub(crate) fn new(name: &str) -> Result<Self> {
        let valid = !name.is_empty()
            && name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::config(format!(
                "invalid schema name {name:?}: use 1 to 63 lowercase letters, digits and _"
            )));
        }
        Ok(Schema {
            name: name.to_owned(),
            quoted: format!("\"{name}\""),
        })
    }

    /// The name, unquoted.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `template` with `{schema}` replaced by the quoted name (never user input otherwise).
    pub(crate) fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(template.replace("{schema}", &self.quoted))
    }
}

#[cfg(test)]
mod tests {
    use super::{Schema, pg_options};

    #[test]
    fn a_schema_is_checked_and_quoted() {
        let schema = Schema::new("lockwise_lab_1").unwrap();
        assert_eq!(schema.name(), "lockwise_lab_1");
        assert_eq!(
            schema.sql("DROP SCHEMA {schema}").0,
            "DROP SCHEMA \"lockwise_lab_1\""
        );
        for bad in ["", "Upper", "1st", "a-b", "a\"b", &"x".repeat(64)] {
            assert!(Schema::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn connections_are_tagged_as_lockwise_s() {
        let plain = pg_options("postgres://u:secret@127.0.0.1/db").unwrap();
        assert_eq!(plain.get_application_name(), Some("lockwise-bench"));
        let named = pg_options("postgres://127.0.0.1/db?application_name=ops").unwrap();
        assert_eq!(named.get_application_name(), Some("ops (lockwise)"));
        let bad = pg_options("postgres://u:secret@[::1/db").unwrap_err();
        assert!(!bad.to_string().contains("secret"), "{bad}");
    }
}
