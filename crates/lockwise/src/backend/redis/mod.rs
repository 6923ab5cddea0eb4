//! Redis: `SET NX PX` plus Lua scripts for fencing, compare-and-delete and compare-and-pexpire.
//!
//! # Stored names (fixed: two versions of lockwise must exclude each other)
//!
//! For key `K` under namespace prefix `P` (default `lockwise`):
//!
//! | name | type | content |
//! |---|---|---|
//! | `P:{K}` (`K` itself with [`RedisBuilder::plain_protocol`]) | string with PX expiry | the owner token, 32 lowercase hex characters |
//! | `P:{K}:fence` | integer, no expiry | the last fencing token issued (`INCR`); a partition member lock's is deleted when the member leaves its group |
//! | `P:{K}:holder` | string with the lock's expiry | the grant's fencing token, time (Unix ms) and holder (host, pid, name), tab-separated, for [`Backend::held`]; written by the holder's loss check (`inspect.rs`) |
//! | `P:{K}:released` | pub/sub channel (sharded on a cluster) | the owner token, published on release when someone listens |
//!
//! The braces make `K` (up to its first `}`) the hash tag, so the lock and its counter live in
//! one cluster slot: the prefix may not contain braces, so the first `{` is always ours, and a
//! key may not start with `}` (the tag would be empty and Redis would hash the whole name).
//!
//! Waiters subscribe to the release channel on a pub/sub connection of their own *before* they
//! try, then wait at most the PTTL that their failed attempt returned (expiry publishes
//! nothing); after a reconnect the subscriptions are renewed and every waiter retries at once.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use redis::{Client, ProtocolVersion, Script};

pub(crate) use conn::Conn;
use conn::Primary;

use super::coalesce::Coalescer;
use super::{Attempt, Backend, ReleaseWatch};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};
use crate::url::redact_url;
use batch::{Grant, Grants, Release, Releases};
use events::{Events, EventsState};

mod batch;
mod conn;
mod events;
mod fenced;
mod inspect;
#[cfg(feature = "lab")]
mod lab;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/release.lua")));
static FENCED_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/fenced_set.lua")));
static RESEED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/reseed.lua")));
static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/extend.lua")));
static FORGET_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/forget_fence.lua")));

/// The namespace prefix used unless [`RedisBuilder::prefix`] says otherwise.
pub const DEFAULT_PREFIX: &str = "lockwise";

/// How long connecting (including authentication) may take before it is reported as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Leases in Redis. Clones share one multiplexed connection, which reconnects after a drop.
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    prefix: String,
    /// Replicas that must acknowledge a grant or a renewal (`WAIT`), 0 for none.
    replicas: u32,
    /// The lock is the bare key, as plain Redis lock clients hold it.
    plain: bool,
    redacted_url: String,
    /// The pub/sub connection for waiters, opened on first use.
    events: tokio::sync::Mutex<EventsState>,
    /// Grants and releases of concurrent tasks, sent together.
    grants: Coalescer<Grants>,
    releases: Coalescer<Releases>,
    /// Grants whose holder record the loss check has not written yet.
    unrecorded: inspect::Unrecorded,
}

/// Where commands go: one server, the primary a group of sentinels names, or a cluster.
enum Target {
    Direct {
        conn: ConnectionManager,
        /// For the waiters' pub/sub connection (RESP3).
        events: Box<Client>,
    },
    Sentinel(Arc<Primary>),
    Cluster {
        conn: redis::cluster_async::ClusterConnection,
        /// The nodes as `redis://` URLs, for the waiters' sharded pub/sub connection.
        nodes: Vec<String>,
    },
}

/// What a URL names, before connecting.
enum Server {
    /// The client for commands and the one for the waiters' pub/sub (RESP3).
    Direct(Box<(Client, Client)>),
    Sentinel(crate::url::SentinelUrl),
    Cluster(Vec<String>),
}

impl Target {
    fn conn(&self) -> Conn {
        match self {
            Target::Direct { conn, .. } => Conn::Direct(conn.clone()),
            Target::Sentinel(primary) => primary.conn(),
            Target::Cluster { conn, .. } => Conn::Cluster(conn.clone()),
        }
    }
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("url", &self.inner.redacted_url)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// Configures a [`RedisBackend`].
///
/// ```no_run
/// # async fn demo() -> lockwise::Result<()> {
/// use lockwise::backend::redis::RedisBackend;
/// let backend = RedisBackend::builder("redis://127.0.0.1:6379/0")
///     .prefix("billing-locks")
///     .connect()
///     .await?;
/// let locker = lockwise::Locker::new(backend);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisBuilder {
    url: String,
    prefix: String,
    root_cert: Option<Vec<u8>>,
    replicas: Option<u32>,
    plain: bool,
}

impl std::fmt::Debug for RedisBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBuilder")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisBuilder {
    /// The namespace prefix of every key (default [`DEFAULT_PREFIX`]). No braces, not empty.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Makes each grant and each renewal wait (`WAIT`) until `n` replicas have it, for up to a
    /// quarter of the TTL (at most 1 s). A grant that fewer replicas acknowledged is released
    /// and reported as a backend failure (waiters try again); a renewal that fewer replicas
    /// acknowledged fails (the renewal loop tries again, and the lock is lost at its deadline
    /// if none succeeds). It shrinks what a failover can lose to what `n` replicas all missed,
    /// at the cost of a replication round trip per grant and renewal. The URL's
    /// `?replicas=n` does the same.
    pub fn replicas(mut self, n: u32) -> Self {
        self.replicas = Some(n);
        self
    }

    /// Holds the lock on the bare key (`SET key token NX PX`, released by compare-and-delete),
    /// as redis-py's `Lock`, redsync, node-redlock and rslock do, so that their clients and
    /// lockwise exclude each other on the same key. The fencing counter and the release
    /// channel keep their prefixed names (`<prefix>:{key}:fence`). The URL's
    /// `?protocol=plain` does the same. Not on a cluster (the bare key and its counter may
    /// hash to different slots).
    pub fn plain_protocol(mut self) -> Self {
        self.plain = true;
        self
    }

    /// Trust this PEM root certificate for `rediss://` instead of the system's store (which
    /// honours `SSL_CERT_FILE`).
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_cert = Some(pem.into());
        self
    }

    /// Connects and checks the server with a `PING`, within 3 seconds.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes whatever connection it opened; nothing is stored.
    pub async fn connect(self) -> Result<RedisBackend> {
        let (url, settings) = take_settings(&self.url)?;
        let replicas = self.replicas.or(settings.replicas).unwrap_or(0);
        let plain = self.plain || settings.plain;
        let this = RedisBuilder { url, ..self };
        let redacted_url = redact_url(&this.url);
        if this.prefix.is_empty()
            || this.prefix.contains(['{', '}'])
            || this.prefix.chars().any(char::is_control)
        {
            return Err(Error::config(format!(
                "invalid Redis key prefix {:?}: it must be non-empty, without braces or control characters",
                this.prefix
            )));
        }
        let config = conn::manager_config();
        let server = if this.url.starts_with("redis+sentinel://") {
            Server::Sentinel(crate::url::SentinelUrl::parse(&this.url)?)
        } else if this.url.starts_with("redis+cluster://") {
            if replicas > 0 || plain {
                // WAIT would go to every master, not to the one that took the write; a bare
                // key and its prefixed counter may live on different masters.
                return Err(Error::config(format!(
                    "{redacted_url}: replicas= and the plain protocol are not supported on a \
                     Redis cluster yet"
                )));
            }
            Server::Cluster(crate::url::cluster_nodes(&this.url)?)
        } else {
            Server::Direct(Box::new((
                this.client(ProtocolVersion::RESP2)?,
                this.client(ProtocolVersion::RESP3)?,
            )))
        };
        let connect = async {
            let target = match server {
                Server::Direct(clients) => {
                    let (client, events) = *clients;
                    Target::Direct {
                        conn: ConnectionManager::new_with_config(client, config).await?,
                        events: Box::new(events),
                    }
                }
                Server::Sentinel(sentinels) => Target::Sentinel(
                    Primary::connect(&sentinels, ProtocolVersion::RESP2, config).await?,
                ),
                Server::Cluster(nodes) => Target::Cluster {
                    conn: redis::cluster::ClusterClient::builder(nodes.clone())
                        .connection_timeout(Duration::from_secs(2))
                        .response_timeout(Duration::from_secs(2))
                        .retries(3)
                        .build()?
                        .get_async_connection()
                        .await?,
                    nodes,
                },
            };
            let mut conn = target.conn();
            redis::cmd("PING").query_async::<String>(&mut conn).await?;
            Ok::<_, redis::RedisError>(target)
        };
        let target = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(target)) => target,
            Ok(Err(e)) => {
                return Err(Error::backend(
                    "redis",
                    format!("cannot connect to {redacted_url}: {}", redis_reason(&e)),
                    e,
                ));
            }
            Err(_) => {
                return Err(Error::backend_msg(
                    "redis",
                    format!("no answer from {redacted_url} within {CONNECT_TIMEOUT:?}"),
                ));
            }
        };
        // On a cluster the locks of one batch could live on different masters: every call
        // has a lane of its own there, so none ever waits for company.
        let lanes = match target {
            Target::Cluster { .. } => usize::MAX,
            _ => batch::LANES,
        };
        Ok(RedisBackend {
            inner: Arc::new(Inner {
                target,
                prefix: this.prefix,
                replicas,
                plain,
                redacted_url,
                events: tokio::sync::Mutex::new(EventsState::NotYet),
                grants: Coalescer::new(lanes, batch::MOST),
                releases: Coalescer::new(lanes, batch::MOST),
                unrecorded: inspect::Unrecorded::default(),
            }),
        })
    }

    fn client(&self, protocol: ProtocolVersion) -> Result<Client> {
        let bad_url = |e: redis::RedisError| {
            Error::config(format!(
                "malformed Redis URL {}: {:?}",
                redact_url(&self.url),
                e.kind()
            ))
        };
        let info = redis::parse_redis_url(&self.url)
            .ok_or_else(|| Error::config(format!("malformed Redis URL {}", redact_url(&self.url))))
            .and_then(|url| {
                redis::IntoConnectionInfo::into_connection_info(url).map_err(bad_url)
            })?;
        let settings = info.redis_settings().clone().set_protocol(protocol);
        let info = info.set_redis_settings(settings);
        let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        if tls {
            // rustls needs a process-wide crypto provider; installing it twice is harmless.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        match (&self.root_cert, tls) {
            (Some(pem), true) => Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            )
            .map_err(bad_url),
            _ => Client::open(info).map_err(bad_url),
        }
    }
}

impl RedisBackend {
    /// Starts configuring a backend for `url`: `redis://[:password@]host[:port][/db]`,
    /// `rediss://…`, `redis+sentinel://host:26379[,host…]/<master>[/db]` or
    /// `redis+cluster://host:port[,host:port…]`; `?replicas=n` and `?protocol=plain` set
    /// [`RedisBuilder::replicas`] and [`RedisBuilder::plain_protocol`].
    pub fn builder(url: impl Into<String>) -> RedisBuilder {
        RedisBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            root_cert: None,
            replicas: None,
            plain: false,
        }
    }

    /// Connects with the default settings.
    ///
    /// # Cancel safety
    ///
    /// As for [`RedisBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder(url).connect().await
    }

    /// The Redis name of the lock for `key` (`<prefix>:{<key>}`, or `key` itself with the
    /// plain protocol).
    pub fn lock_name(&self, key: &str) -> String {
        if self.inner.plain {
            return key.to_owned();
        }
        lock_name(&self.inner.prefix, key)
    }

    /// The Redis name of the fencing counter for `key` (`<prefix>:{<key>}:fence`).
    pub fn fence_name(&self, key: &str) -> String {
        format!("{}:fence", lock_name(&self.inner.prefix, key))
    }

    /// The pub/sub channel on which releases of `key` are announced (`<prefix>:{<key>}:released`).
    pub fn channel_name(&self, key: &str) -> String {
        format!("{}:released", lock_name(&self.inner.prefix, key))
    }

    /// Deletes the fencing counter of `key` unless a holder other than `owner` has the lock
    /// (`lua/forget_fence.lua`); `false` when one does. Only for locks whose tokens fence
    /// nothing once their user is gone: partition member locks, whose counters would otherwise
    /// pile up, one per member id ever seen.
    pub(crate) async fn forget_fence(&self, key: &str, owner: Option<OwnerToken>) -> Result<bool> {
        let deleted: i64 = FORGET_FENCE
            .key(self.lock_name(key))
            .key(self.fence_name(key))
            .arg(owner.map(|o| o.to_hex()).unwrap_or_default())
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("fencing counter removal", e))?;
        Ok(deleted == 1)
    }

    /// The Redis name of a partition group's roster (`<prefix>:partition:{<group>}`).
    pub(crate) fn roster_name(&self, group: &str) -> String {
        format!("{}:partition:{{{group}}}", self.inner.prefix)
    }

    pub(crate) fn conn(&self) -> Conn {
        self.inner.target.conn()
    }

    pub(crate) fn fail(&self, what: &str, e: redis::RedisError) -> Error {
        Error::backend(
            "redis",
            format!("{what} on {} failed: {e}", self.inner.redacted_url),
            e,
        )
    }

    /// With [`RedisBuilder::replicas`]: waits until that many replicas have every write sent
    /// so far on the connection (`WAIT`), for up to a quarter of `ttl` (at most 1 s).
    async fn replicated(&self, ttl: Duration) -> Result<()> {
        let wanted = self.inner.replicas;
        if wanted == 0 {
            return Ok(());
        }
        let within = ttl_millis(ttl / 4).min(1_000);
        let acknowledged: i64 = redis::cmd("WAIT")
            .arg(wanted)
            .arg(within)
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("wait for replicas", e))?;
        if acknowledged >= i64::from(wanted) {
            return Ok(());
        }
        Err(Error::backend_msg(
            "redis",
            format!(
                "{}: {acknowledged} of {wanted} replicas acknowledged within {within} ms",
                self.inner.redacted_url
            ),
        ))
    }

    /// The waiters' pub/sub connection; after a failure to open it, waiters poll and the next
    /// attempt to open it is made no sooner than 5 s later. Behind sentinels it is opened
    /// again on the new primary after a failover.
    async fn events(&self) -> Option<Events> {
        let primary = match &self.inner.target {
            Target::Sentinel(primary) => primary.generation(),
            _ => 0,
        };
        let mut state = self.inner.events.lock().await;
        match &*state {
            EventsState::Open(events, of) if *of == primary => return Some(events.clone()),
            EventsState::Failed(at) if at.elapsed() < Duration::from_secs(5) => return None,
            _ => {}
        }
        let connect = async move {
            match &self.inner.target {
                Target::Direct { events, .. } => Events::connect(Client::clone(events)).await,
                Target::Sentinel(primary) => Events::connect(primary.events_client()?).await,
                Target::Cluster { nodes, .. } => Events::connect_cluster(nodes.clone()).await,
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(events)) => {
                *state = EventsState::Open(events.clone(), primary);
                Some(events)
            }
            failed => {
                let error = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_owned(),
                };
                tracing::warn!(%error, "no pub/sub connection; waiters poll");
                *state = EventsState::Failed(std::time::Instant::now());
                None
            }
        }
    }
}

/// Why a connection failed, in the words a user needs: a server of another kind on the port
/// says "this is not a Redis server" instead of a parser's complaint.
fn redis_reason(e: &redis::RedisError) -> String {
    use redis::ErrorKind;
    match e.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            "this is not a Redis server (its answer is not Redis's protocol)".to_owned()
        }
        ErrorKind::Io
            if e.to_string().contains("broken pipe")
                || e.to_string().contains("reset by peer")
                || e.to_string().contains("unexpected end") =>
        {
            format!("the server closed the connection at once ({e}); is this a Redis server?")
        }
        _ => e.to_string(),
    }
}

/// The settings of a Redis URL that are lockwise's, not redis-rs's.
#[derive(Default)]
struct Settings {
    /// `replicas=n`
    replicas: Option<u32>,
    /// `protocol=plain`
    plain: bool,
}

/// `url` without lockwise's own settings (`replicas=n`, `protocol=plain`), and those.
fn take_settings(url: &str) -> Result<(String, Settings)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Settings::default()));
    };
    let mut settings = Settings::default();
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("replicas", n)) => {
                settings.replicas = Some(n.parse::<u32>().map_err(|_| {
                    Error::config(format!(
                        "{}: replicas={n:?} is not a number of replicas",
                        redact_url(url)
                    ))
                })?);
            }
            Some(("protocol", "plain")) => settings.plain = true,
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, settings))
}

fn lock_name(prefix: &str, key: &str) -> String {
    format!("{prefix}:{{{key}}}")
}

fn ttl_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl Backend for RedisBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        if key.starts_with('}') && !self.inner.plain {
            return Err(Error::InvalidKey {
                reason: "a Redis lock key may not start with '}' (its hash tag would be empty)"
                    .into(),
            });
        }
        let call = Grant {
            key: key.to_owned(),
            owner,
            ttl,
        };
        let grants = Grants(self.clone());
        let (granted, n) = self.inner.grants.call(&grants, call).await?;
        if granted == 1 {
            if let Err(why) = self.replicated(ttl).await {
                // Not on enough replicas to survive a failover: give the grant back.
                let _ = self.release(key, owner).await;
                return Err(why);
            }
            let fence = u64::try_from(n).map_err(|_| {
                Error::backend_msg(
                    "redis",
                    format!("fencing counter {n} is not a positive integer"),
                )
            })?;
            self.inner.unrecorded.granted(key, owner, fence);
            Ok(Attempt::Granted(FencingToken::new(fence)))
        } else {
            // PTTL: -2 = gone since, -1 = no expiry (someone else's key): retry soon either way.
            let expires_in = u64::try_from(n).ok().map(Duration::from_millis);
            Ok(Attempt::Held { expires_in })
        }
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        let n: i64 = EXTEND
            .key(self.lock_name(key))
            .key(self.holder_name(key))
            .arg(owner.to_hex())
            .arg(ttl_millis(ttl))
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("extend", e))?;
        if n == 1 {
            self.replicated(ttl).await?;
        }
        Ok(n == 1)
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        self.inner.unrecorded.forget(owner);
        let call = Release {
            key: key.to_owned(),
            owner,
        };
        self.inner
            .releases
            .call(&Releases(self.clone()), call)
            .await
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        let current: Option<String> = redis::cmd("GET")
            .arg(self.lock_name(key))
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("ownership check", e))?;
        Ok(current.is_some_and(|c| c == owner.to_hex()))
    }

    async fn still_held(&self, leases: &[(&str, OwnerToken)]) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new()); // an empty pipeline is an error to Redis
        }
        if let Target::Cluster { .. } = self.inner.target {
            // Keys on several masters: one GET each, all at once.
            let reads = leases.iter().map(|(key, owner)| self.holds(key, *owner));
            let held = futures_util::future::try_join_all(reads).await?;
            self.record(leases, &held).await;
            return Ok(held);
        }
        // A pipeline, not MGET: one round trip whatever slot each key hashes to.
        let mut pipe = redis::pipe();
        for (key, _) in leases {
            pipe.cmd("GET").arg(self.lock_name(key));
        }
        let current: Vec<Option<String>> = pipe
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("ownership check", e))?;
        let held: Vec<bool> = leases
            .iter()
            .zip(current)
            .map(|((_, owner), c)| c.is_some_and(|c| c == owner.to_hex()))
            .collect();
        self.record(leases, &held).await;
        Ok(held)
    }

    fn loss_check_every(&self) -> Option<Duration> {
        Some(super::LOSS_CHECK_EVERY)
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        let Some(events) = self.events().await else {
            return Ok(ReleaseWatch::none());
        };
        let channel = self.channel_name(key);
        match events.subscribe(&channel).await {
            Ok(watch) => Ok(watch),
            Err(error) => {
                tracing::warn!(%error, "subscribe failed; this waiter will poll");
                Ok(ReleaseWatch::none())
            }
        }
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn held(&self, prefix: &str) -> Result<Vec<crate::backend::HeldLock>> {
        self.held_locks(prefix).await
    }

    async fn break_lock(&self, key: &str) -> Result<Option<crate::backend::HeldLock>> {
        self.break_now(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden names: changing them breaks exclusion between versions during a rolling deploy.
    #[test]
    fn stored_names_are_fixed() {
        assert_eq!(lock_name("lockwise", "orders:42"), "lockwise:{orders:42}");
        assert_eq!(lock_name("app", "a}b"), "app:{a}b}");
    }

    #[test]
    fn scripts_are_pinned() {
        assert_eq!(ACQUIRE.get_hash().len(), 40);
        assert!(
            include_str!("../../../lua/release.lua")
                .contains("redis.call('GET', KEYS[i]) == owner")
        );
        assert!(include_str!("../../../lua/extend.lua").contains("PEXPIRE"));
    }
}
