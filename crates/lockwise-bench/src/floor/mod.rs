//! The floor of a lock bench: the fewest round trips a safe lock cycle can take on each
//! server, issued raw on one connection, with no fencing token, renewal or loss check —
//! `SET k v NX PX` and a compare-and-delete script on Redis, `pg_try_advisory_lock` and
//! `pg_advisory_unlock` on PostgreSQL, `GET_LOCK` and `RELEASE_LOCK` on MariaDB/MySQL, a
//! put-if-absent transaction and a compare-and-delete on etcd (feature `etcd`). The SQL and Lua
//! are in this crate's `sql/` and `lua/`.

use crate::error::{Error, Result};
use lockwise::url::{BackendUrl, redact_url};

#[cfg(feature = "etcd")]
mod etcd;
pub(crate) mod redis_conn;

static FLOOR_RELEASE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("../../lua/floor_release.lua")));

/// One raw connection that takes and releases locks the floor's way.
pub struct Floor {
    conn: Conn,
    /// The value a Redis lock holds (an owner token of this connection).
    owner: String,
}

impl std::fmt::Debug for Floor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Floor").finish_non_exhaustive()
    }
}

enum Conn {
    Redis(redis_conn::RedisConn),
    Postgres(sqlx::PgConnection),
    Mysql(sqlx::MySqlConnection),
    #[cfg(feature = "etcd")]
    Etcd(Box<etcd::EtcdFloor>),
}

impl Floor {
    /// A raw connection to the server `url` names (Redis, PostgreSQL or MariaDB/MySQL, with
    /// the same connection options lockwise uses). Memory and file URLs have no floor: an
    /// [`Error::Config`].
    pub async fn connect(url: &str) -> Result<Floor> {
        let owner = format!("floor-{:016x}", rand::random::<u64>());
        let shown = redact_url(url);
        let conn = match BackendUrl::parse(url)? {
            BackendUrl::Redis(url) => Conn::Redis(redis_conn::connect(&url, &shown).await?),
            BackendUrl::Postgres(url) => {
                let options = crate::conn::pg_options(&url)?;
                Conn::Postgres(crate::conn::pg_connect(&options, &shown).await?)
            }
            BackendUrl::Mysql(url) => {
                use sqlx::Connection;
                let options = crate::conn::mysql_options(&url)?;
                let conn = sqlx::MySqlConnection::connect_with(&options)
                    .await
                    .map_err(|e| {
                        Error::backend("mysql", format!("cannot connect to {shown}"), e)
                    })?;
                Conn::Mysql(conn)
            }
            #[cfg(feature = "etcd")]
            BackendUrl::Etcd(url) => {
                Conn::Etcd(Box::new(etcd::EtcdFloor::connect(&url, &shown).await?))
            }
            _ => {
                return Err(Error::config(format!(
                    "{shown} has no raw floor to compare with: use a redis://, postgres:// or \
                     mysql:// URL (or etcd:// with the feature etcd)"
                )));
            }
        };
        Ok(Floor { conn, owner })
    }

    /// Another handle on the same multiplexed connection (Redis, etcd), for concurrent tasks;
    /// `None` for the databases, whose session locks need a connection per task.
    pub fn share(&self) -> Option<Floor> {
        match &self.conn {
            Conn::Redis(conn) => Some(Floor {
                conn: Conn::Redis(conn.clone()),
                owner: self.owner.clone(),
            }),
            #[cfg(feature = "etcd")]
            Conn::Etcd(floor) => Some(Floor {
                conn: Conn::Etcd(Box::new((**floor).clone())),
                owner: self.owner.clone(),
            }),
            _ => None,
        }
    }

    /// Tries to take `key` (one round trip): `true` when taken.
    pub async fn try_acquire(&mut self, key: &str) -> Result<bool> {
        match &mut self.conn {
            Conn::Redis(conn) => {
                let set: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(&self.owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(30_000)
                    .query_async(conn)
                    .await
                    .map_err(|e| Error::redis("SET NX PX failed", e))?;
                Ok(set.is_some())
            }
            Conn::Postgres(conn) => {
                let (a, b) = lockwise::postgres::advisory_key(key);
                Ok(
                    sqlx::query_scalar(include_str!("../../sql/postgres/floor_acquire.sql"))
                        .bind(a)
                        .bind(b)
                        .fetch_one(conn)
                        .await?,
                )
            }
            Conn::Mysql(conn) => {
                let got: Option<i64> =
                    sqlx::query_scalar(include_str!("../../sql/mysql/floor_acquire.sql"))
                        .bind(key)
                        .fetch_one(conn)
                        .await?;
                Ok(got == Some(1))
            }
            #[cfg(feature = "etcd")]
            Conn::Etcd(floor) => floor.try_acquire(key, &self.owner).await,
        }
    }

    /// Releases `key` if this connection holds it (one round trip): `true` when released.
    pub async fn release(&mut self, key: &str) -> Result<bool> {
        match &mut self.conn {
            Conn::Redis(conn) => {
                let deleted: i64 = FLOOR_RELEASE
                    .key(key)
                    .arg(&self.owner)
                    .invoke_async(conn)
                    .await
                    .map_err(|e| Error::redis("compare-and-delete failed", e))?;
                Ok(deleted == 1)
            }
            Conn::Postgres(conn) => {
                let (a, b) = lockwise::postgres::advisory_key(key);
                Ok(
                    sqlx::query_scalar(include_str!("../../sql/postgres/floor_release.sql"))
                        .bind(a)
                        .bind(b)
                        .fetch_one(conn)
                        .await?,
                )
            }
            Conn::Mysql(conn) => {
                let released: Option<i64> =
                    sqlx::query_scalar(include_str!("../../sql/mysql/floor_release.sql"))
                        .bind(key)
                        .fetch_one(conn)
                        .await?;
                Ok(released == Some(1))
            }
            #[cfg(feature = "etcd")]
            Conn::Etcd(floor) => floor.release(key, &self.owner).await,
        }
    }
}
