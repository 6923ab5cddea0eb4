//! What a bench reports about the server it ran against: its version and the settings that
//! decide what a commit or a write costs.

use serde::Serialize;
use sqlx::{Connection, Row};

use crate::error::{Error, Result};
use lockwise::url::{BackendUrl, redact_url};

/// A server's version and durability settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ServerInfo {
    /// `redis`, `postgres` or `mysql`.
    pub backend: String,
    /// The server's version string.
    pub version: String,
    /// Durability settings by name (`appendonly`, `appendfsync`; `fsync`,
    /// `synchronous_commit`; `innodb_flush_log_at_trx_commit`, `sync_binlog`): what the
    /// server reports, or `unknown` when it would not say.
    pub settings: Vec<(String, String)>,
}

/// Asks the server `url` names for its version and durability settings.
pub async fn describe(url: &str) -> Result<ServerInfo> {
    let shown = redact_url(url);
    match BackendUrl::parse(url)? {
        BackendUrl::Redis(url) => {
            let mut conn = crate::floor::redis_conn::connect_one(&url, &shown).await?;
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query_async(&mut conn)
                .await
                .map_err(|e| Error::redis("INFO failed", e))?;
            let version = info
                .lines()
                .find_map(|line| line.strip_prefix("redis_version:"))
                .unwrap_or("unknown")
                .trim()
                .to_owned();
            let mut settings = Vec::new();
            for name in ["appendonly", "appendfsync", "save"] {
                // CONFIG may be renamed or forbidden on a managed server.
                let value: Option<Vec<String>> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg(name)
                    .query_async(&mut conn)
                    .await
                    .ok();
                let value = value
                    .and_then(|pair| pair.get(1).cloned())
                    .unwrap_or_else(|| "unknown".to_owned());
                settings.push((name.to_owned(), value));
            }
            Ok(ServerInfo {
                backend: "redis".to_owned(),
                version,
                settings,
            })
        }
        BackendUrl::Postgres(url) => {
            let options = crate::conn::pg_options(&url)?;
            let mut conn = crate::conn::pg_connect(&options, &shown).await?;
            // The simple protocol: a transaction-pooling proxy carries it whole.
            let row = sqlx::raw_sql(include_str!("../sql/postgres/server.sql"))
                .fetch_one(&mut conn)
                .await?;
            let info = from_row("postgres", &row, &["fsync", "synchronous_commit"]);
            let _ = conn.close().await;
            info
        }
        BackendUrl::Mysql(url) => {
            let options = crate::conn::mysql_options(&url)?;
            let mut conn = sqlx::MySqlConnection::connect_with(&options)
                .await
                .map_err(|e| Error::backend("mysql", format!("cannot connect to {shown}"), e))?;
            let row = sqlx::query(include_str!("../sql/mysql/server.sql"))
                .fetch_one(&mut conn)
                .await?;
            let info = from_row(
                "mysql",
                &row,
                &["innodb_flush_log_at_trx_commit", "sync_binlog"],
            );
            let _ = conn.close().await;
            info
        }
        #[cfg(feature = "etcd")]
        BackendUrl::Etcd(url) => describe_etcd(&url, &shown).await,
        _ => Err(Error::config(format!(
            "{shown} names no server to describe"
        ))),
    }
}

/// etcd's version (the member that answered) and the cluster's size; etcd syncs its log on
/// every commit unless started with `--unsafe-no-fsync`, which it does not report.
#[cfg(feature = "etcd")]
async fn describe_etcd(url: &str, shown: &str) -> Result<ServerInfo> {
    let url = lockwise::url::EtcdUrl::parse(url)?;
    let mut options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(std::time::Duration::from_secs(3))
        .with_timeout(std::time::Duration::from_secs(3));
    if let Some((user, password)) = &url.credentials {
        options = options.with_user(user.clone(), password.clone());
    }
    let mut client = etcd_client::Client::connect(url.endpoints.clone(), Some(options))
        .await
        .map_err(|e| Error::etcd(format!("cannot connect to {shown}"), e))?;
    let status = client
        .status()
        .await
        .map_err(|e| Error::etcd("status failed", e))?;
    let members = client
        .member_list()
        .await
        .map_err(|e| Error::etcd("member list failed", e))?;
    Ok(ServerInfo {
        backend: "etcd".to_owned(),
        version: status.version().to_owned(),
        settings: vec![("members".to_owned(), members.members().len().to_string())],
    })
}

/// A database's answer to its `server.sql`: the `version` column and the named settings.
fn from_row<R>(backend: &str, row: &R, names: &[&str]) -> Result<ServerInfo>
where
    R: Row,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'n> &'n str: sqlx::ColumnIndex<R>,
{
    let settings = names
        .iter()
        .map(|name| Ok(((*name).to_owned(), row.try_get::<String, _>(*name)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(ServerInfo {
        backend: backend.to_owned(),
        version: row.try_get("version")?,
        settings,
    })
}
