//! The waiters' release events: one pub/sub connection per backend, a channel per key with
//! waiters, and the subscription dropped with its last waiter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Client, PushInfo, PushKind, Value};
use tokio::sync::watch;

use super::super::ReleaseWatch;

pub(super) enum EventsState {
    NotYet,
    /// Open on the primary of this generation (always 0 without sentinels).
    Open(Events, u64),
    Failed(std::time::Instant),
}

/// The waiters' pub/sub connection (RESP3, so that messages arrive as pushes on a connection
/// manager that reconnects and resubscribes by itself).
#[derive(Clone)]
pub(super) struct Events {
    conn: Subscriber,
    channels: Channels,
    /// SUBSCRIBE and UNSUBSCRIBE run one at a time, so an unsubscribe decided on a channel
    /// that has no waiter can never overtake the subscribe of a waiter that just arrived.
    ordering: Arc<tokio::sync::Mutex<()>>,
    handle: tokio::runtime::Handle,
}

struct Channel {
    released: watch::Sender<u64>,
    waiters: usize,
}

type Channels = Arc<Mutex<HashMap<String, Channel>>>;

/// The connection subscriptions go through: one server (`SUBSCRIBE`), or a cluster
/// (`SSUBSCRIBE`, to the master of each channel's slot).
#[derive(Clone)]
enum Subscriber {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Subscriber {
    async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Subscriber::Single(conn) => conn.clone().subscribe(channel).await,
            Subscriber::Cluster(conn) => conn.clone().ssubscribe(channel).await,
        }
    }

    async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Subscriber::Single(conn) => conn.clone().unsubscribe(channel).await,
            Subscriber::Cluster(conn) => conn.clone().sunsubscribe(channel).await,
        }
    }
}

impl Events {
    /// Sharded pub/sub on a cluster whose nodes (`redis://` URLs) are given.
    pub(super) async fn connect_cluster(nodes: Vec<String>) -> redis::RedisResult<Self> {
        let channels: Channels = Arc::default();
        let dispatch = channels.clone();
        let conn = redis::cluster::ClusterClient::builder(nodes)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(2))
            .retries(3)
            .push_sender(move |push: PushInfo| {
                on_push(&dispatch, push);
                Ok::<(), std::convert::Infallible>(())
            })
            .build()?
            .get_async_connection()
            .await?;
        Ok(Events {
            conn: Subscriber::Cluster(conn),
            channels,
            ordering: Arc::default(),
            handle: tokio::runtime::Handle::current(),
        })
    }

    pub(super) async fn connect(client: Client) -> redis::RedisResult<Self> {
        let channels: Channels = Arc::default();
        let dispatch = channels.clone();
        let config = super::conn::manager_config()
            .set_automatic_resubscription()
            .set_push_sender(move |push: PushInfo| {
                on_push(&dispatch, push);
                Ok::<(), std::convert::Infallible>(())
            });
        let conn = ConnectionManager::new_with_config(client, config).await?;
        Ok(Events {
            conn: Subscriber::Single(conn),
            channels,
            ordering: Arc::default(),
            handle: tokio::runtime::Handle::current(),
        })
    }

    pub(super) async fn subscribe(&self, channel: &str) -> redis::RedisResult<ReleaseWatch> {
        let rx = {
            let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = channels
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    released: watch::channel(0).0,
                    waiters: 0,
                });
            entry.waiters += 1;
            entry.released.subscribe()
        };
        let unsubscribe = Unsubscribe {
            events: self.clone(),
            channel: channel.to_owned(),
        };
        // SUBSCRIBE is idempotent; every waiter sends it so none waits before it is confirmed.
        let _ordered = self.ordering.lock().await;
        self.conn.subscribe(channel).await?;
        Ok(ReleaseWatch::new(rx, Some(Box::new(unsubscribe))))
    }
}

fn on_push(channels: &Channels, push: PushInfo) {
    let channels = channels.lock().unwrap_or_else(PoisonError::into_inner);
    match push.kind {
        PushKind::Message | PushKind::SMessage => {
            if let Some(Value::BulkString(name)) = push.data.first() {
                let name = String::from_utf8_lossy(name);
                if let Some(channel) = channels.get(name.as_ref()) {
                    channel.released.send_modify(|n| *n += 1);
                }
            }
        }
        // A release may have been missed while disconnected: let every waiter retry.
        PushKind::Disconnection => {
            for channel in channels.values() {
                channel.released.send_modify(|n| *n += 1);
            }
        }
        _ => {}
    }
}

/// Drops a waiter's interest in a channel; the last one out unsubscribes.
struct Unsubscribe {
    events: Events,
    channel: String,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let last = {
            let mut channels = self
                .events
                .channels
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match channels.get_mut(&self.channel) {
                Some(entry) if entry.waiters <= 1 => {
                    channels.remove(&self.channel);
                    true
                }
                Some(entry) => {
                    entry.waiters -= 1;
                    false
                }
                None => false,
            }
        };
        if !last {
            return;
        }
        let events = self.events.clone();
        let channel = std::mem::take(&mut self.channel);
        self.events.handle.spawn(async move {
            let _ordered = events.ordering.lock().await;
            let unused = !events
                .channels
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&channel);
            if unused {
                let _ = events.conn.unsubscribe(&channel).await;
            }
        });
    }
}
