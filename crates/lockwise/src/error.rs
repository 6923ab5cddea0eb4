//! The one error type of this crate.

use std::time::Duration;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in lockwise.
///
/// A lock that someone else holds is *not* an error: [`Locker::try_acquire`](crate::Locker::try_acquire)
/// returns `Ok(None)` for it. Messages never contain a password: URLs are redacted before they
/// reach an error, a log line or a `Debug` string.
///
/// Which errors are worth retrying: [`Error::Backend`] (see [`Error::is_transient`]). The input
/// errors never succeed on retry; [`Error::LockLost`] means the protected work must stop;
/// [`Error::StaleToken`] means a newer holder has written and this one must give up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key is empty, longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes, or otherwise unusable.
    #[error("invalid lock key: {reason}")]
    InvalidKey {
        /// Why the key was refused.
        reason: String,
    },
    /// The TTL is outside [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL).
    #[error("invalid TTL {}: {reason}", shown(*ttl))]
    InvalidTtl {
        /// The TTL that was refused.
        ttl: Duration,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A job that the queue databases would not store the same way: a NUL character in its
    /// payload or key, or a key that is empty or longer than `queue::MAX_JOB_KEY_LEN` bytes.
    /// Nothing was enqueued.
    #[error("invalid job: {reason}")]
    InvalidJob {
        /// Why the job was refused.
        reason: String,
    },
    /// The backend URL or another option cannot be used.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, with any password redacted.
        reason: String,
    },
    /// The backend could not be reached or answered with an error: connection refused, timeout,
    /// authentication, TLS, a server of another kind on the port, or a local I/O failure.
    #[error("backend failure ({backend}): {message}")]
    Backend {
        /// Which backend failed (`"redis"`, `"file"`, …).
        backend: &'static str,
        /// What failed, with any password redacted.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The lock is no longer held by this owner: its lease expired, it was taken over, or it was
    /// deleted. Work protected by it must stop.
    #[error("lock {key:?} was lost")]
    LockLost {
        /// The lock's key.
        key: String,
    },
    /// A fenced resource refused a token lower than the highest it has accepted: the holder
    /// of that token lost its lock and someone newer has written since. Nothing was written.
    #[error("stale fencing token {presented} for {resource:?} (highest accepted: {})", current.map_or_else(|| "unknown".to_owned(), |c| c.to_string()))]
    StaleToken {
        /// The fenced resource.
        resource: String,
        /// The token that was refused.
        presented: crate::FencingToken,
        /// The highest token the resource had accepted, when known.
        current: Option<crate::FencingToken>,
    },
    /// The queue's tables are missing, or older than this version of lockwise, and the queue
    /// was opened without migrating (`queue::ConnectOptions::migrate(false)`): nothing was
    /// created. Run `queue::Queue::migrate` or `lockwise queue migrate` first.
    #[error("the queue's {store} {}: run `lockwise queue migrate` (or Queue::migrate) first", if *outdated { "needs a migration" } else { "does not exist" })]
    NotMigrated {
        /// Where the queue should be: `schema "…"` (PostgreSQL) or `table "…"` (MySQL).
        store: String,
        /// `true` when the tables exist at an older version, `false` when they are missing.
        outdated: bool,
    },
    /// A partition member's id is taken: its member lock is held by a live member of the
    /// group (one that renews it). Nothing was registered; choose another id, or stop the
    /// other member first.
    #[error("member id {id:?} is in use in group {group:?}: a live member holds it")]
    MemberIdInUse {
        /// The group.
        group: String,
        /// The id asked for.
        id: String,
    },
    /// A partition member was given another key space than the one its group stores (set by
    /// the group's first member). Nothing was registered.
    #[error("group {group:?} partitions {stored} keys, not {requested}")]
    KeySpaceMismatch {
        /// The group.
        group: String,
        /// The number of keys the group partitions.
        stored: u64,
        /// The number of keys asked for.
        requested: u64,
    },
    /// [`Locker::acquire`](crate::Locker::acquire) gave up after waiting this long.
    #[error("timed out after {} waiting for lock {key:?}", shown(*waited))]
    WaitTimeout {
        /// The lock's key.
        key: String,
        /// How long the caller waited.
        waited: Duration,
    },
}

/// A database error from sqlx is a backend failure, so `?` works on sqlx calls inside a
/// function that returns [`lockwise::Result`](crate::Result).
#[cfg(any(feature = "postgres", feature = "mysql"))]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::backend(
            "sql",
            format!("database error: {}", sql_reason(&e, "SQL")),
            e,
        )
    }
}

/// What went wrong with a database call, in the words a user needs: the server's message
/// without its source-code position, "not a PostgreSQL server" rather than a protocol dump,
/// the OS reason of a failed connection. `server` names the database (`"PostgreSQL"`).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn sql_reason(e: &sqlx::Error, server: &str) -> String {
    match e {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (code {code})", db.message()),
            None => db.message().to_owned(),
        },
        sqlx::Error::Protocol(_) | sqlx::Error::Decode(_) => {
            format!("this is not a {server} server (it does not speak the {server} protocol)")
        }
        sqlx::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe => format!(
                "the server closed the connection at once ({io}); is this a {server} server?"
            ),
            _ => io.to_string(),
        },
        other => other.to_string(),
    }
}

impl Error {
    /// Whether trying again later may succeed: true for backend failures only.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Backend { .. })
    }

    /// Whether this is a usage error (bad key, TTL, configuration, job or key space) that no
    /// retry can fix.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidKey { .. }
                | Error::InvalidTtl { .. }
                | Error::InvalidConfig { .. }
                | Error::InvalidJob { .. }
                | Error::KeySpaceMismatch { .. }
        )
    }

    /// Wraps a database error from sqlx as a backend failure; the same as `Error::from(e)`,
    /// so in your own code `?` does it.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub fn from_sqlx(e: sqlx::Error) -> Self {
        e.into()
    }

    pub(crate) fn backend(
        backend: &'static str,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    #[cfg(any(
        feature = "redis",
        feature = "postgres",
        feature = "mysql",
        feature = "etcd"
    ))]
    pub(crate) fn backend_msg(backend: &'static str, message: impl Into<String>) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: None,
        }
    }

    /// The same error for another caller of one failed request: a backend failure keeps its
    /// message (which carries its source's), anything else becomes one with its text.
    #[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            Error::Backend {
                backend, message, ..
            } => Error::backend_msg(backend, message.clone()),
            other => Error::backend_msg("lockwise", other.to_string()),
        }
    }

    /// A call that got no answer within `limit` (a partition, a hung server): transient.
    pub(crate) fn no_answer(what: &str, limit: Duration) -> Self {
        Error::Backend {
            backend: "lock server",
            message: format!("no answer to {what} within {limit:?}"),
            source: None,
        }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            reason: reason.into(),
        }
    }
}

/// A duration as it is written on the command line: in the largest unit that states it
/// exactly (`25h`, `90m`, `1500ms`), not as `Debug` does (`90000s`, `1.5s`).
pub(crate) fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) || ms == 0 {
        return format!("{d:?}");
    }
    match ms {
        ms if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        ms if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        ms if ms.is_multiple_of(1_000) => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Error, shown};

    #[test]
    fn durations_in_messages_read_as_they_are_written() {
        let cases = [
            (Duration::from_secs(90_000), "25h"),
            (Duration::from_secs(5_400), "90m"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_millis(1_500), "1500ms"),
            (Duration::from_micros(1_500), "1.5ms"),
            (Duration::ZERO, "0ns"),
        ];
        for (d, text) in cases {
            assert_eq!(shown(d), text);
        }
        let err = Error::InvalidTtl {
            ttl: Duration::from_secs(90_000),
            reason: "longer than the maximum of 24h",
        };
        assert_eq!(
            err.to_string(),
            "invalid TTL 25h: longer than the maximum of 24h"
        );
    }
}
