//! The one error type of the tooling: what lockwise itself said, or what failed in the
//! tooling's own connections and statements. Messages read as lockwise's do (`backend
//! failure (…): …`, `invalid configuration: …`) and never contain a password.

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a bench or in the lab's database code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Lockwise itself failed (a lock, a queue, a URL it refused).
    #[error(transparent)]
    Lockwise(#[from] lockwise::Error),
    /// A statement of the tooling's own failed.
    #[error("backend failure (sql): database error: {}", sql_reason(.0, "SQL"))]
    Sql(#[from] sqlx::Error),
    /// A raw Redis command of the tooling's own failed.
    #[error("backend failure (redis): {context}")]
    Redis {
        /// What failed (`cannot connect to redis://…`, `INFO failed`).
        context: String,
        /// The client's error.
        #[source]
        source: redis::RedisError,
    },
    /// A raw etcd call of the tooling's own failed.
    #[cfg(feature = "etcd")]
    #[error("backend failure (etcd): {context}")]
    Etcd {
        /// What failed (`cannot connect to etcd://…`, `lease grant failed`).
        context: String,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// A server could not be reached or did not answer in time.
    #[error("backend failure ({backend}): {message}")]
    Backend {
        /// `postgres` or `mysql`.
        backend: &'static str,
        /// What failed, with any password redacted.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<sqlx::Error>,
    },
    /// A local I/O failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A URL, a name or another input that cannot be used; no retry fixes it.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// Whether this is a usage error (a bad URL, name or option) that no retry can fix.
    ///
    /// ```
    /// use lockwise_bench::Error;
    /// assert!(Error::Config("no server".into()).is_invalid_input());
    /// assert!(!Error::Io(std::io::Error::other("disk full")).is_invalid_input());
    /// ```
    pub fn is_invalid_input(&self) -> bool {
        match self {
            Error::Config(_) => true,
            Error::Lockwise(e) => e.is_invalid_input(),
            _ => false,
        }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Self {
        Error::Config(reason.into())
    }

    pub(crate) fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        Error::Redis {
            context: context.into(),
            source,
        }
    }

    #[cfg(feature = "etcd")]
    pub(crate) fn etcd(context: impl Into<String>, source: etcd_client::Error) -> Self {
        Error::Etcd {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn backend(
        backend: &'static str,
        message: impl Into<String>,
        source: sqlx::Error,
    ) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: Some(source),
        }
    }

    pub(crate) fn no_answer(backend: &'static str, message: impl Into<String>) -> Self {
        Error::Backend {
            backend,
            message: message.into(),
            source: None,
        }
    }
}

/// What went wrong with a database call, in the words a user needs (as lockwise words it):
/// the server's message with its code, "not a PostgreSQL server" rather than a protocol dump,
/// the OS reason of a failed connection. `server` names the database (`"PostgreSQL"`).
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

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn messages_read_as_lockwise_s() {
        assert_eq!(
            Error::config("no floor").to_string(),
            "invalid configuration: no floor"
        );
        let wrapped = Error::from(lockwise::url::BackendUrl::parse("ftp://x").unwrap_err());
        assert!(wrapped.is_invalid_input());
        assert!(
            wrapped.to_string().starts_with("invalid configuration"),
            "{wrapped}"
        );
        let sql = Error::from(sqlx::Error::RowNotFound);
        assert!(
            sql.to_string()
                .starts_with("backend failure (sql): database error: "),
            "{sql}"
        );
        assert!(!sql.is_invalid_input());
    }
}
