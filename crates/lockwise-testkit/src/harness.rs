//! A conformance [`Harness`] for each of lockwise's backends, each on a store private to one
//! test (an in-memory store, a temporary directory, a Redis key prefix, a PostgreSQL schema, a
//! MariaDB database) that is removed on drop.

use std::time::Duration;

use async_trait::async_trait;
use lockwise::Locker;
use lockwise::backend::file::FileBackend;
use lockwise::backend::memory::MemoryBackend;
use lockwise::backend::mysql::MysqlBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::backend::redis::RedisBackend;
use sqlx::Connection;

use crate::conformance::Harness;
use crate::{MysqlDatabase, PgSchema, RedisNamespace};

/// The in-process store; "deleting" a lock is [`MemoryBackend::force_delete`].
#[derive(Debug, Default)]
pub struct MemoryHarness(MemoryBackend);

impl MemoryHarness {
    /// A fresh store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    async fn locker(&self) -> Locker {
        Locker::new(self.0.clone())
    }

    async fn delete_lock(&self, key: &str) {
        self.0.force_delete(key);
    }
}

/// Lock files in a temporary directory; "deleting" a lock removes its lease file.
#[derive(Debug)]
pub struct FileHarness(tempfile::TempDir);

impl FileHarness {
    /// A fresh temporary directory.
    pub fn new() -> Self {
        FileHarness(tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")))
    }
}

impl Default for FileHarness {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Harness for FileHarness {
    async fn locker(&self) -> Locker {
        Locker::new(FileBackend::open(self.0.path()).unwrap_or_else(|e| panic!("open dir: {e}")))
    }

    async fn delete_lock(&self, key: &str) {
        let lease = self
            .0
            .path()
            .join(format!("{}.lease", FileBackend::file_stem(key)));
        std::fs::remove_file(lease).unwrap_or_else(|e| panic!("remove lease file: {e}"));
    }
}

/// A key prefix on the shared Redis; "deleting" a lock is a `DEL` of its key.
#[derive(Debug)]
pub struct RedisHarness(RedisNamespace);

impl RedisHarness {
    /// A fresh prefix.
    pub fn new() -> Self {
        RedisHarness(RedisNamespace::new("conformance"))
    }
}

impl Default for RedisHarness {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Harness for RedisHarness {
    async fn locker(&self) -> Locker {
        let backend = RedisBackend::builder(self.0.url())
            .prefix(self.0.prefix())
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to Redis: {e}"));
        Locker::new(backend)
    }

    async fn delete_lock(&self, key: &str) {
        let name = format!("{}:{{{key}}}", self.0.prefix());
        let n: i64 = redis::cmd("DEL")
            .arg(&name)
            .query(&mut self.0.conn())
            .unwrap_or_else(|e| panic!("DEL: {e}"));
        assert_eq!(n, 1, "{name} should have existed");
    }

    fn tokens_may_skip(&self) -> bool {
        true
    }
}

/// Session-scoped advisory locks under a schema (and namespace) of the shared PostgreSQL;
/// "deleting" a lock terminates its holder's session.
#[derive(Debug)]
pub struct PostgresHarness(PgSchema);

impl PostgresHarness {
    /// A fresh schema.
    pub fn new() -> Self {
        PostgresHarness(PgSchema::new("conformance"))
    }

    async fn backend(&self) -> PostgresBackend {
        PostgresBackend::builder(self.0.url())
            .schema(self.0.name())
            .namespace(self.0.name())
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to PostgreSQL: {e}"))
    }
}

impl Default for PostgresHarness {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Harness for PostgresHarness {
    async fn locker(&self) -> Locker {
        Locker::new(self.backend().await)
    }

    async fn delete_lock(&self, key: &str) {
        // Only this test's own holder: the server is shared.
        let (class, half) = self.backend().await.advisory_key(key);
        let mut conn = sqlx::PgConnection::connect(self.0.url())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
             AND granted AND classid = $1::int4::oid AND objid = $2::int4::oid",
        )
        .bind(class)
        .bind(half)
        .fetch_all(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("terminate: {e}"));
        assert_eq!(
            killed,
            [true],
            "exactly the holder's session was terminated"
        );
    }
}

/// `GET_LOCK` locks under a database (and namespace) of the shared MariaDB; "deleting" a lock
/// kills its holder's session.
#[derive(Debug)]
pub struct MysqlHarness(MysqlDatabase);

impl MysqlHarness {
    /// A fresh database.
    pub fn new() -> Self {
        MysqlHarness(MysqlDatabase::mysql("conformance"))
    }

    async fn backend(&self) -> MysqlBackend {
        MysqlBackend::builder(self.0.url())
            .namespace(self.0.name())
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to MariaDB: {e}"))
    }
}

impl Default for MysqlHarness {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Harness for MysqlHarness {
    async fn locker(&self) -> Locker {
        Locker::new(self.backend().await)
    }

    async fn delete_lock(&self, key: &str) {
        let name = self.backend().await.lock_name_of(key);
        let mut conn = sqlx::MySqlConnection::connect(&self.0.url())
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let holder: Option<i64> = sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
            .bind(&name)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("IS_USED_LOCK: {e}"));
        let Some(holder) = holder else {
            panic!("the lock {name} is not held by anyone");
        };
        sqlx::query(sqlx::AssertSqlSafe(format!("KILL {holder}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("KILL: {e}"));
    }

    /// MySQL's `wait_timeout` counts whole seconds, so its leases last up to a second longer.
    fn server_lease(&self, ttl: Duration) -> Duration {
        Duration::from_secs(ttl.as_millis().div_ceil(1_000) as u64)
    }

    /// Tokens never go below the server's clock × 1024, so they jump as time passes.
    fn tokens_may_skip(&self) -> bool {
        true
    }
}

/// A key prefix on the shared etcd; "deleting" a lock is a delete of its key. Every key has
/// a lease, so nothing outlives the test by more than its TTL.
#[cfg(feature = "etcd")]
#[derive(Debug)]
pub struct EtcdHarness {
    url: String,
}

#[cfg(feature = "etcd")]
impl EtcdHarness {
    /// A fresh prefix.
    pub fn new() -> Self {
        let base = crate::etcd_url();
        let base = base.trim_end_matches('/');
        EtcdHarness {
            url: format!("{base}/{}", crate::unique("conformance")),
        }
    }

    /// The harness's URL: the shared etcd, under its own prefix.
    pub fn url(&self) -> &str {
        &self.url
    }
}

#[cfg(feature = "etcd")]
impl Default for EtcdHarness {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "etcd")]
#[async_trait]
impl Harness for EtcdHarness {
    async fn locker(&self) -> Locker {
        let backend = lockwise::backend::etcd::EtcdBackend::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect to etcd ({e}); run scripts/services to start it"));
        Locker::new(backend)
    }

    async fn delete_lock(&self, key: &str) {
        let url = lockwise::url::EtcdUrl::parse(&self.url)
            .unwrap_or_else(|e| panic!("the harness's own URL: {e}"));
        let mut client = etcd_client::Client::connect(url.endpoints.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("connect to etcd: {e}"));
        let name = lockwise::backend::etcd::lock_name(&url.prefix, key);
        let deleted = client
            .delete(name.as_bytes(), None)
            .await
            .unwrap_or_else(|e| panic!("delete {name}: {e}"))
            .deleted();
        assert_eq!(deleted, 1, "{name} should have existed");
    }

    /// etcd's leases are whole seconds, rounded up, and its leader looks for expired ones
    /// twice a second.
    fn server_lease(&self, ttl: Duration) -> Duration {
        Duration::from_secs(lockwise::backend::etcd::lease_seconds(ttl).unsigned_abs())
            + Duration::from_millis(500)
    }

    /// A token is the key's create revision, and every write of the cluster (another key, a
    /// delete) moves the revision.
    fn tokens_may_skip(&self) -> bool {
        true
    }
}

/// A key prefix on the shared Redis Cluster ([`crate::redis_cluster_url`], started by
/// `scripts/services`); "deleting" a lock is a `DEL` on the master of its slot, and every key
/// under the prefix is deleted on drop.
#[derive(Debug)]
pub struct RedisClusterHarness {
    url: String,
    /// The masters, as `redis://` URLs.
    nodes: Vec<String>,
    prefix: String,
}

impl RedisClusterHarness {
    /// A fresh prefix on the shared cluster. Panics, naming `scripts/services`, when a master
    /// does not answer.
    pub fn new() -> Self {
        let url = crate::redis_cluster_url();
        let nodes = lockwise::url::cluster_nodes(&url)
            .unwrap_or_else(|e| panic!("LOCKWISE_REDIS_CLUSTER_URL: {e}"));
        for node in &nodes {
            let _: String = node_conn(node)
                .and_then(|mut conn| redis::cmd("PING").query(&mut conn))
                .unwrap_or_else(|e| panic!("Redis Cluster node {node}: {e}; run scripts/services"));
        }
        RedisClusterHarness {
            url,
            nodes,
            prefix: crate::unique("lockwise-test-cluster"),
        }
    }
}

fn node_conn(node: &str) -> redis::RedisResult<redis::Connection> {
    redis::Client::open(node).and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
}

impl Default for RedisClusterHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RedisClusterHarness {
    fn drop(&mut self) {
        // Never panic in drop (a test may already be failing): a node that is gone keeps
        // its few keys, which have TTLs.
        for node in &self.nodes {
            let Ok(mut conn) = node_conn(node) else {
                continue;
            };
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}:*", self.prefix))
                .query(&mut conn)
                .unwrap_or_default();
            for key in keys {
                // One key per DEL: the keys of one master may be in several slots.
                let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(key).query(&mut conn);
            }
        }
    }
}

#[async_trait]
impl Harness for RedisClusterHarness {
    async fn locker(&self) -> Locker {
        let backend = RedisBackend::builder(&self.url)
            .prefix(&self.prefix)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to the cluster: {e}; run scripts/services"));
        Locker::new(backend)
    }

    async fn delete_lock(&self, key: &str) {
        let name = format!("{}:{{{key}}}", self.prefix);
        // Only the master of the key's slot has it; the others answer MOVED.
        let deleted: i64 = self
            .nodes
            .iter()
            .filter_map(|node| {
                let mut conn = node_conn(node).unwrap_or_else(|e| {
                    panic!("Redis Cluster node {node}: {e}; run scripts/services")
                });
                redis::cmd("DEL").arg(&name).query::<i64>(&mut conn).ok()
            })
            .sum();
        assert_eq!(deleted, 1, "{name} should have existed");
    }

    fn tokens_may_skip(&self) -> bool {
        true
    }
}
