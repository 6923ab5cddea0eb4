//! The lock backend the lab runs on: chosen from --url, and wiped of what the run left there.

use std::path::PathBuf;

use lockwise::backend::file::FileBackend;
use lockwise::backend::redis::RedisBackend;
use lockwise::url::{BackendUrl, redact_url};
use lockwise_bench::lab::Database;

use super::scratch;

/// How long the clean-up waits for its one connection.
const WIPE_ACQUIRE: std::time::Duration = std::time::Duration::from_secs(30);

/// The lock backend the lab runs on.
#[derive(Debug, Clone)]
pub(super) enum LabBackend {
    File(PathBuf),
    Redis(String),
    Postgres(String),
    Mysql,
    /// etcd (the CLI's feature `etcd`): keys any client can delete, like Redis.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    Etcd(String),
}

impl LabBackend {
    /// The backend `url` names (with it, the URL the actors get); none: a fresh scratch
    /// directory for the file backend.
    pub(super) fn resolve(url: Option<&str>) -> Result<(String, LabBackend), String> {
        let Some(url) = url else {
            let dir = scratch::create()?;
            return Ok((format!("file://{}", dir.display()), LabBackend::File(dir)));
        };
        let backend = match BackendUrl::parse(url).map_err(|e| e.to_string())? {
            BackendUrl::File(dir) => LabBackend::File(dir),
            BackendUrl::Redis(u) => LabBackend::Redis(u),
            BackendUrl::Postgres(u) => LabBackend::Postgres(u),
            BackendUrl::Mysql(_) => LabBackend::Mysql,
            #[cfg(feature = "etcd")]
            BackendUrl::Etcd(u) => LabBackend::Etcd(u),
            BackendUrl::Memory => {
                return Err(
                    "memory: locks live inside one process, and the lab needs several: use \
                     file:// (the default), redis://, postgres:// or mysql://"
                        .into(),
                );
            }
            _ => return Err(format!("the lab cannot use {}", redact_url(url))),
        };
        Ok((url.to_owned(), backend))
    }

    pub(super) fn name(&self) -> &'static str {
        match self {
            LabBackend::File(_) => "file",
            LabBackend::Redis(_) => "redis",
            LabBackend::Postgres(_) => "postgres",
            LabBackend::Mysql => "mysql",
            LabBackend::Etcd(_) => "etcd",
        }
    }

    /// How long after a lease's TTL the server may still hold it when nobody renews it: on
    /// etcd, whose leases are whole seconds, shared by the locks of one TTL class and ended by
    /// a sweep twice a second, up to the lease's seconds plus that sweep (and a margin); none
    /// elsewhere.
    pub(super) fn expiry_slack(&self, ttl: std::time::Duration) -> std::time::Duration {
        match self {
            #[cfg(feature = "etcd")]
            LabBackend::Etcd(_) => {
                let lease = lockwise::backend::etcd::lease_seconds(ttl).unsigned_abs();
                std::time::Duration::from_secs(lease).saturating_sub(ttl)
                    + std::time::Duration::from_millis(600)
            }
            _ => {
                let _ = ttl;
                std::time::Duration::ZERO
            }
        }
    }

    /// Whether its locks belong to a database session, which alone can release them.
    pub(super) fn session_locks(&self) -> bool {
        matches!(self, LabBackend::Postgres(_) | LabBackend::Mysql)
    }

    /// The file backend's view of the lock directory, when this is the file backend.
    pub(super) fn files(&self) -> Option<FileBackend> {
        match self {
            LabBackend::File(dir) => FileBackend::open(dir).ok(),
            _ => None,
        }
    }

    /// Removes what the run left: every trace of `keys`, and on PostgreSQL the run's
    /// `schema`. Best effort: a failure only leaves keys named `lab:*` (or the schema) behind.
    pub(super) async fn wipe(&self, keys: &[String], schema: Option<&str>) {
        match self {
            LabBackend::Redis(url) => {
                if let Ok(backend) = RedisBackend::connect(url).await {
                    let _ = backend.purge(keys).await;
                }
            }
            LabBackend::Postgres(url) => {
                let Some(schema) = schema else { return };
                if let Ok(db) = Database::connect(url, schema, 1, WIPE_ACQUIRE).await {
                    let _ = db.drop_schema().await;
                }
            }
            LabBackend::File(_) => {
                if let Some(files) = self.files() {
                    let _ = files.purge(keys);
                }
            }
            LabBackend::Mysql => {}
            #[cfg(feature = "etcd")]
            LabBackend::Etcd(url) => {
                if let Ok(backend) = lockwise::backend::etcd::EtcdBackend::connect(url).await {
                    let _ = backend.purge(keys).await;
                }
            }
            #[cfg(not(feature = "etcd"))]
            LabBackend::Etcd(_) => {}
        }
    }
}
