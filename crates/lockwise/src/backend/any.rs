//! The one place a URL becomes a lock backend: [`AnyBackend`].

#[cfg(feature = "etcd")]
use super::etcd::EtcdBackend;
#[cfg(feature = "mysql")]
use super::mysql::MysqlBackend;
#[cfg(feature = "postgres")]
use super::postgres::PostgresBackend;
#[cfg(feature = "redis")]
use super::redis::RedisBackend;
use super::{file::FileBackend, memory::MemoryBackend};
use crate::Locker;
use crate::error::{Error, Result};
use crate::url::BackendUrl;

/// The lock backend a URL names, opened, with its concrete type kept for callers that build
/// more on it (a partition group's roster beside its member locks, a command's kernel lock on
/// a file lease).
///
/// [`Locker::connect`](crate::Locker::connect) and
/// [`Group::connect`](crate::partition::Group::connect) open their backends here.
///
/// ```
/// # async fn demo() -> lockwise::Result<()> {
/// use lockwise::backend::AnyBackend;
/// let backend = AnyBackend::connect("memory:").await?;
/// assert!(matches!(backend, AnyBackend::Memory(_)));
/// let locker = backend.into_locker();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyBackend {
    /// `memory:`.
    Memory(MemoryBackend),
    /// `file:///dir`.
    File(FileBackend),
    /// `redis://…`, `rediss://…`.
    #[cfg(feature = "redis")]
    Redis(RedisBackend),
    /// `postgres://…`: the backend and the URL it was opened from.
    #[cfg(feature = "postgres")]
    Postgres(PostgresBackend, String),
    /// `mysql://…`, `mariadb://…`: the backend and the URL it was opened from.
    #[cfg(feature = "mysql")]
    Mysql(MysqlBackend, String),
    /// `etcd://…`.
    #[cfg(feature = "etcd")]
    Etcd(EtcdBackend),
}

impl AnyBackend {
    /// Parses `url` ([`BackendUrl::parse`]) and opens its backend.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a malformed URL or one whose cargo feature this build lacks;
    /// [`Error::Backend`] when the server does not answer.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future closes whatever it opened.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(BackendUrl::parse(url)?).await
    }

    /// Opens the backend of an already parsed URL.
    ///
    /// # Cancel safety
    ///
    /// As [`connect`](Self::connect).
    pub async fn open(url: BackendUrl) -> Result<Self> {
        Ok(match url {
            BackendUrl::Memory => AnyBackend::Memory(MemoryBackend::new()),
            BackendUrl::File(dir) => AnyBackend::File(FileBackend::open(dir)?),
            #[cfg(feature = "redis")]
            BackendUrl::Redis(url) => AnyBackend::Redis(RedisBackend::connect(&url).await?),
            #[cfg(feature = "postgres")]
            BackendUrl::Postgres(url) => {
                AnyBackend::Postgres(PostgresBackend::connect(&url).await?, url)
            }
            #[cfg(feature = "mysql")]
            BackendUrl::Mysql(url) => AnyBackend::Mysql(MysqlBackend::connect(&url).await?, url),
            #[cfg(feature = "etcd")]
            BackendUrl::Etcd(url) => AnyBackend::Etcd(EtcdBackend::connect(&url).await?),
            #[allow(unreachable_patterns)]
            other => {
                return Err(Error::config(format!(
                    "this build of lockwise lacks the cargo feature for {other:?}"
                )));
            }
        })
    }

    /// A [`Locker`] on this backend.
    pub fn into_locker(self) -> Locker {
        match self {
            AnyBackend::Memory(b) => Locker::new(b),
            AnyBackend::File(b) => Locker::new(b),
            #[cfg(feature = "redis")]
            AnyBackend::Redis(b) => Locker::new(b),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b, _) => Locker::new(b),
            #[cfg(feature = "mysql")]
            AnyBackend::Mysql(b, _) => Locker::new(b),
            #[cfg(feature = "etcd")]
            AnyBackend::Etcd(b) => Locker::new(b),
        }
    }
}
