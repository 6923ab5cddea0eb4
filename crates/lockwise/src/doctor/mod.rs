//! The lesson's review checklist (19.8.6) as checks against a live server: is this Redis,
//! PostgreSQL or MariaDB/MySQL configured so that lockwise's guarantees hold?
//!
//! [`examine`] connects, asks, changes nothing, and returns one [`Finding`] per check: its
//! [`Status`], the reason, and what to do. `lockwise doctor --url …` prints them.
//!
//! ```no_run
//! # async fn demo() -> lockwise::Result<()> {
//! use lockwise::doctor::{Options, Status, examine};
//! let findings = examine("redis://127.0.0.1:6379/", &Options::default()).await?;
//! for f in findings.iter().filter(|f| f.status != Status::Ok) {
//!     println!("{:?} {}: {} ({})", f.status, f.check, f.reason, f.fix);
//! }
//! # Ok(()) }
//! ```

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod timing;

use std::time::Duration;

use crate::error::{Error, Result};
use crate::url::BackendUrl;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// A guarantee is weaker than it could be, or a risk to know about.
    Warn,
    /// A guarantee does not hold as configured.
    Fail,
}

impl Status {
    /// `ok`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The check's name (`maxmemory-policy`, `synchronous_commit`, …).
    pub check: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was found, with the figures.
    pub reason: String,
    /// What to do about it (empty when nothing is to be done).
    pub fix: String,
}

impl Finding {
    fn new(check: &'static str, status: Status, reason: impl Into<String>) -> Self {
        Finding {
            check,
            status,
            reason: reason.into(),
            fix: String::new(),
        }
    }

    fn ok(check: &'static str, reason: impl Into<String>) -> Self {
        Finding::new(check, Status::Ok, reason)
    }
}

/// What [`examine`] looks at beyond the server itself.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Where lockwise's data lives: the key prefix on Redis, the queue's schema on
    /// PostgreSQL, its table prefix on MariaDB/MySQL. Default `lockwise`.
    pub namespace: String,
    /// The lock TTL the round trip is weighed against. Default 30 s.
    pub ttl: Duration,
    /// How long a transaction may stay open (or idle in one) before it is reported.
    /// Default 60 s.
    pub stale_after: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespace: "lockwise".to_owned(),
            ttl: Duration::from_secs(30),
            stale_after: Duration::from_secs(60),
        }
    }
}

impl Options {
    /// The Redis key prefix, or the queue's schema or table prefix.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The lock TTL the round trip is weighed against.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long a transaction may stay open before it is reported.
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }
}

/// Runs every check that applies to the server `url` names. An error only when the server
/// cannot be reached or the URL is bad; a check that cannot ask (a managed Redis without
/// `CONFIG`) is a warning.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn examine(url: &str, options: &Options) -> Result<Vec<Finding>> {
    #[cfg(not(any(feature = "redis", feature = "postgres", feature = "mysql")))]
    let _ = options; // only the servers' checks read it
    match BackendUrl::parse(url)? {
        #[cfg(feature = "redis")]
        BackendUrl::Redis(url) => redis::examine(&url, options).await,
        #[cfg(feature = "postgres")]
        BackendUrl::Postgres(url) => postgres::examine(&url, options).await,
        #[cfg(feature = "mysql")]
        BackendUrl::Mysql(url) => mysql::examine(&url, options).await,
        BackendUrl::Memory | BackendUrl::File(_) => Ok(vec![Finding::ok(
            "backend",
            "an embedded backend: one process (memory) or one machine (file), no server to check",
        )]),
        BackendUrl::Etcd(_) => Err(Error::config(
            "doctor has no checks for etcd yet (a consensus store keeps its guarantees without \
             the settings it checks elsewhere)",
        )),
        // Reached only in a build without one of the features above.
        #[allow(unreachable_patterns)]
        other => Err(Error::config(format!(
            "doctor has no checks for {other:?}: this build lacks its cargo feature"
        ))),
    }
}
