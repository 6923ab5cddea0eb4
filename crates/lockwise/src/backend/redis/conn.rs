//! The connection every command goes through: one Redis server, the primary that a group of
//! sentinels names (found again after a failover), or a cluster.
//!
//! redis-rs's `ConnectionManager` reconnects to the address it was built with. After a
//! failover that address is a replica (writes refused with `READONLY`) or a dead server, so a
//! sentinel-backed connection asks the sentinels for the primary again when a command fails
//! that way, and the next command goes to the new primary. The failed command is not sent
//! again: an acquire that failed is an error its caller retries, never a guess.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Client, Cmd, Pipeline, ProtocolVersion, RedisFuture, RedisResult, Value};

use crate::url::SentinelUrl;

/// How every connection manager of the backend connects and reconnects.
///
/// redis-rs waits 100–200 ms before its first reconnect attempt by default. A holder learns
/// that a restarted server forgot its lease only once its connection is back, while a rival
/// may be granted the key as soon as the server listens: the one retry comes after 5–10 ms, and
/// a command that still finds no server fails (the next one, a loss check at most 20 ms later,
/// starts over).
pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_min_delay(Duration::from_millis(5))
        .set_number_of_retries(1)
}

/// A connection: cloned per command, cheap (a handle on a multiplexed connection).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server, at one address.
    Direct(ConnectionManager),
    /// The primary the sentinels name, as of the generation given.
    Sentinel(Arc<Primary>, u64, ConnectionManager),
    /// A cluster: each command goes to the master of its first key's slot.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Direct(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
            Conn::Sentinel(primary, generation, conn) => Box::pin(async move {
                let answer = conn.req_packed_command(cmd).await;
                if let Err(e) = &answer {
                    primary.failed(*generation, e).await;
                }
                answer
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Direct(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(primary, generation, conn) => Box::pin(async move {
                let answer = conn.req_packed_commands(pipeline, offset, count).await;
                if let Err(e) = &answer {
                    primary.failed(*generation, e).await;
                }
                answer
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Direct(conn) | Conn::Sentinel(_, _, conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// The primary of a sentinel group: the sentinels' client and the connection to the primary
/// they named last.
pub(crate) struct Primary {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    current: RwLock<(u64, Client, ConnectionManager)>,
    config: ConnectionManagerConfig,
}

impl Primary {
    /// Asks the sentinels of `url` for the primary and connects to it (`protocol` for its
    /// connections).
    pub(crate) async fn connect(
        url: &SentinelUrl,
        protocol: ProtocolVersion,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Arc<Primary>> {
        let sentinels: Vec<String> = url
            .sentinels
            .iter()
            .map(|(host, port)| format!("redis://{host}:{port}"))
            .collect();
        let mut info = redis::RedisConnectionInfo::default()
            .set_db(url.db)
            .set_protocol(protocol);
        if let Some(user) = &url.username {
            info = info.set_username(user);
        }
        if let Some(password) = &url.password {
            info = info.set_password(password);
        }
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
        let mut client = SentinelClient::build(
            sentinels,
            url.master.as_str(),
            Some(node),
            SentinelServerType::Master,
        )?;
        let primary = client.async_get_client().await?;
        let conn = ConnectionManager::new_with_config(primary.clone(), config.clone()).await?;
        Ok(Arc::new(Primary {
            sentinels: tokio::sync::Mutex::new(client),
            current: RwLock::new((0, primary, conn)),
            config,
        }))
    }

    /// The connection to the primary as last named.
    pub(crate) fn conn(self: &Arc<Self>) -> Conn {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        Conn::Sentinel(self.clone(), current.0, current.2.clone())
    }

    /// How many times the primary was found again since connecting.
    pub(crate) fn generation(&self) -> u64 {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// A client for the primary as last named.
    pub(crate) fn client(&self) -> Client {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        current.1.clone()
    }

    /// A RESP3 client for the primary as last named (for the waiters' pub/sub connection).
    pub(crate) fn events_client(&self) -> RedisResult<Client> {
        let info = self.client().get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        Client::open(info.set_redis_settings(settings))
    }

    /// A command on the connection of `generation` failed with `e`: if the failure says the
    /// server is gone or no longer the primary, ask the sentinels again (once for all the
    /// commands that failed on that generation).
    async fn failed(&self, generation: u64, e: &redis::RedisError) {
        if !primary_may_have_moved(e) {
            return;
        }
        let mut sentinels = self.sentinels.lock().await;
        let now = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        if now != generation {
            return; // another command's failure already moved on
        }
        let found = tokio::time::timeout(Duration::from_secs(2), async {
            let client = sentinels.async_get_client().await?;
            let conn =
                ConnectionManager::new_with_config(client.clone(), self.config.clone()).await?;
            Ok::<_, redis::RedisError>((client, conn))
        })
        .await;
        match found {
            Ok(Ok((client, conn))) => {
                tracing::info!(
                    address = ?client.get_connection_info().addr(),
                    "redis sentinel: connected to the primary"
                );
                let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                *current = (generation + 1, client, conn);
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "redis sentinel: no primary yet");
            }
            Err(_) => tracing::warn!("redis sentinel: no primary named within 2 s"),
        }
    }
}

/// Whether a failure may mean that the primary is elsewhere now: the server is unreachable,
/// or answers as a replica (`READONLY`) or as a primary without its replicas' consent.
fn primary_may_have_moved(e: &redis::RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout() {
        return true;
    }
    let text = e.to_string();
    text.contains("READONLY") || text.contains("MASTERDOWN") || text.contains("NOREPLICAS")
}
