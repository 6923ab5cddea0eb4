//! The raw Redis connection of the floor: one server, the primary its sentinels name, or a
//! cluster (each command to the master of its key's slot).

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::{Error, Result};

/// A connection that sends each command where its key lives.
#[derive(Clone)]
pub(crate) enum RedisConn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Single(conn) => conn.req_packed_command(cmd),
            RedisConn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Single(conn) => conn.get_db(),
            RedisConn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Connects to what `url` names; lockwise's own settings (`replicas=`, `protocol=plain`)
/// change nothing for the floor, which always holds the bare key and waits for no replica.
pub(crate) async fn connect(url: &str, shown: &str) -> Result<RedisConn> {
    let url = without_lockwise_settings(url);
    let failed = |e: redis::RedisError| Error::redis(format!("cannot connect to {shown}"), e);
    if url.starts_with("redis+cluster://") {
        let nodes = lockwise::url::cluster_nodes(&url)?;
        let conn = redis::cluster::ClusterClient::new(nodes)
            .map_err(failed)?
            .get_async_connection()
            .await
            .map_err(failed)?;
        return Ok(RedisConn::Cluster(conn));
    }
    let client = if url.starts_with("redis+sentinel://") {
        let sentinel = lockwise::url::SentinelUrl::parse(&url)?;
        let sentinels: Vec<String> = sentinel
            .sentinels
            .iter()
            .map(|(host, port)| format!("redis://{host}:{port}"))
            .collect();
        let mut info = redis::RedisConnectionInfo::default().set_db(sentinel.db);
        if let Some(user) = &sentinel.username {
            info = info.set_username(user);
        }
        if let Some(password) = &sentinel.password {
            info = info.set_password(password);
        }
        let node =
            redis::sentinel::SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        redis::sentinel::SentinelClient::build(
            sentinels,
            sentinel.master.as_str(),
            Some(node),
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(failed)?
        .async_get_client()
        .await
        .map_err(failed)?
    } else {
        redis::Client::open(url.as_str())
            .map_err(|e| Error::redis(format!("bad URL {shown}"), e))?
    };
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(failed)?;
    Ok(RedisConn::Single(conn))
}

/// A connection to one server of what `url` names (a cluster's first node), for commands
/// that describe a server (`INFO`).
pub(crate) async fn connect_one(url: &str, shown: &str) -> Result<RedisConn> {
    let url = without_lockwise_settings(url);
    if url.starts_with("redis+cluster://") {
        let nodes = lockwise::url::cluster_nodes(&url)?;
        let first = nodes.first().cloned().unwrap_or_default();
        return Box::pin(connect(&first, shown)).await;
    }
    connect(&url, shown).await
}

/// `url` without `replicas=` and `protocol=plain`.
fn without_lockwise_settings(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            !pair.is_empty() && !pair.starts_with("replicas=") && *pair != "protocol=plain"
        })
        .collect();
    if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    }
}
