//! Backend URLs: which backend a URL names, and how to print one without its password.

use std::path::PathBuf;

use crate::error::{Error, Result};

pub use etcd::{EtcdTls, EtcdUrl};
pub use sentinel::{SentinelUrl, cluster_nodes};

pub(crate) mod etcd;
mod sentinel;

/// The backend a URL names. Its `Debug` form hides passwords.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendUrl {
    /// `memory:` — one process only.
    Memory,
    /// `file:///absolute/dir` — processes on one machine.
    File(PathBuf),
    /// `redis://…`, `rediss://…`, `redis+sentinel://…` or `redis+cluster://…`.
    Redis(String),
    /// `postgres://…` or `postgresql://…`: session-scoped advisory locks.
    Postgres(String),
    /// `mysql://…` or `mariadb://…`: `GET_LOCK`.
    Mysql(String),
    /// `etcd://host:2379[,host2:2379…][/prefix]`: keys on session leases in a consensus store.
    Etcd(String),
}

impl std::fmt::Debug for BackendUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendUrl::Memory => f.write_str("Memory"),
            BackendUrl::File(dir) => f.debug_tuple("File").field(dir).finish(),
            BackendUrl::Redis(u) => f.debug_tuple("Redis").field(&redact_url(u)).finish(),
            BackendUrl::Postgres(u) => f.debug_tuple("Postgres").field(&redact_url(u)).finish(),
            BackendUrl::Mysql(u) => f.debug_tuple("Mysql").field(&redact_url(u)).finish(),
            BackendUrl::Etcd(u) => f.debug_tuple("Etcd").field(&redact_url(u)).finish(),
        }
    }
}

impl BackendUrl {
    /// Whether this backend's locks are held by a server session (PostgreSQL advisory locks,
    /// `GET_LOCK`): the server frees them as soon as the holding connection closes, so a
    /// holder's death frees its lock at once instead of at the end of its TTL.
    ///
    /// ```
    /// use lockwise::url::BackendUrl;
    /// assert!(BackendUrl::parse("postgres://127.0.0.1/app").unwrap().held_by_session());
    /// assert!(!BackendUrl::parse("redis://127.0.0.1").unwrap().held_by_session());
    /// ```
    pub fn held_by_session(&self) -> bool {
        matches!(self, BackendUrl::Postgres(_) | BackendUrl::Mysql(_))
    }

    /// Parses and checks a URL; errors never contain the password.
    ///
    /// ```
    /// use lockwise::url::BackendUrl;
    /// assert_eq!(BackendUrl::parse("memory:").unwrap(), BackendUrl::Memory);
    /// assert!(BackendUrl::parse("redis://127.0.0.1:6379/0").is_ok());
    /// assert!(BackendUrl::parse("redis://").is_err()); // no host
    /// assert!(BackendUrl::parse("ftp://x").is_err());  // unknown scheme
    /// assert!(BackendUrl::parse("/var/lock/app").is_err()); // a path: "write file:///var/lock/app"
    /// // Relative file URLs resolve against the working directory:
    /// let here = std::env::current_dir().unwrap();
    /// assert_eq!(BackendUrl::parse("file:./locks").unwrap(), BackendUrl::File(here.join("locks")));
    /// ```
    pub fn parse(raw: &str) -> Result<Self> {
        let encoded = encode_userinfo(raw);
        let raw = encoded.as_str();
        let shown = redact_url(raw);
        // `file:locks` and `file:./locks` name a directory relative to the working directory
        // (a URL parser would take them from `/`).
        if let Some(rest) = raw.strip_prefix("file:")
            && !rest.starts_with('/')
            && !rest.is_empty()
        {
            let cwd = std::env::current_dir().map_err(|e| {
                Error::config(format!(
                    "file URL {shown} is relative, and the working directory is unknown: {e}"
                ))
            })?;
            let path: std::path::PathBuf = cwd
                .join(rest)
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect();
            return Ok(BackendUrl::File(path));
        }
        // A bare path is no URL; say which one was meant rather than "relative URL without a
        // base".
        if !raw.contains("://") && !raw.contains(':') {
            return Err(Error::config(format!(
                "{shown} is not a URL: for a lock directory write file://{}{}, for a server \
                 redis://, postgres:// or mysql://host/…",
                if raw.starts_with('/') { "" } else { "/" },
                raw
            )));
        }
        // Several members in one authority (`h1:2379,h2:2379`) are no URL to a URL parser.
        if raw.starts_with("etcd://") || raw.starts_with("etcds://") {
            EtcdUrl::parse(raw)?;
            return Ok(BackendUrl::Etcd(raw.to_owned()));
        }
        if raw.starts_with("redis+sentinel://") {
            SentinelUrl::parse(raw)?;
            return Ok(BackendUrl::Redis(raw.to_owned()));
        }
        if raw.starts_with("redis+cluster://") {
            cluster_nodes(raw.split('?').next().unwrap_or(raw))?;
            return Ok(BackendUrl::Redis(raw.to_owned()));
        }
        let url = url::Url::parse(raw)
            .map_err(|e| Error::config(format!("malformed URL {shown}: {e}")))?;
        match url.scheme() {
            "memory" => Ok(BackendUrl::Memory),
            "file" => {
                if url
                    .host_str()
                    .is_some_and(|h| !h.is_empty() && h != "localhost")
                {
                    return Err(Error::config(format!(
                        "file URL {shown} names a remote host; use file:///absolute/dir"
                    )));
                }
                let path = url
                    .to_file_path()
                    .map_err(|()| Error::config(format!("file URL {shown} has no usable path")))?;
                if path.as_os_str().len() <= 1 {
                    return Err(Error::config(format!(
                        "file URL {shown} names no directory; use file:///absolute/dir"
                    )));
                }
                Ok(BackendUrl::File(path))
            }
            scheme @ ("redis" | "rediss" | "postgres" | "postgresql" | "mysql" | "mariadb") => {
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(Error::config(format!("URL {shown} has no host")));
                }
                Ok(match scheme {
                    "redis" | "rediss" => BackendUrl::Redis(raw.to_owned()),
                    "postgres" | "postgresql" => BackendUrl::Postgres(raw.to_owned()),
                    // sqlx knows the scheme as mysql://.
                    _ => BackendUrl::Mysql(raw.replacen("mariadb://", "mysql://", 1)),
                })
            }
            other => Err(Error::config(format!(
                "unknown URL scheme {other:?} in {shown}; expected file://, redis://, rediss://, \
                 postgres://, mysql://, etcd:// or memory:"
            ))),
        }
    }
}

/// `url` with `password` set as its password (percent-encoded as needed), for a password kept
/// out of the URL, e.g. in a file (`lockwise --password-file`). Only server URLs take one.
///
/// ```
/// let url = lockwise::url::with_password("postgres://app@db.internal/orders", "p#ss word").unwrap();
/// assert_eq!(url, "postgres://app:p%23ss%20word@db.internal/orders");
/// assert!(lockwise::url::with_password("file:///tmp/locks", "x").is_err());
/// let etcd = lockwise::url::with_password("etcd://app@10.0.0.1,10.0.0.2/billing", "p@ss").unwrap();
/// assert_eq!(etcd, "etcd://app:p%40ss@10.0.0.1,10.0.0.2/billing");
/// let sentinel = lockwise::url::with_password("redis+sentinel://h1,h2/orders", "pw").unwrap();
/// assert_eq!(sentinel, "redis+sentinel://:pw@h1,h2/orders");
/// ```
pub fn with_password(url: &str, password: &str) -> Result<String> {
    if url.starts_with("etcd://") || url.starts_with("etcds://") {
        // Several hosts, which no URL parser takes.
        return etcd::with_password(url, password);
    }
    if url.starts_with("redis+sentinel://") {
        return sentinel::with_password(url, password);
    }
    let shown = redact_url(url);
    let mut parsed = url::Url::parse(&encode_userinfo(url))
        .map_err(|e| Error::config(format!("malformed URL {shown}: {e}")))?;
    let server = matches!(
        parsed.scheme(),
        "redis" | "rediss" | "postgres" | "postgresql" | "mysql" | "mariadb"
    );
    if !server || parsed.set_password(Some(password)).is_err() {
        return Err(Error::config(format!(
            "a password applies to redis://, postgres://, mysql:// and etcd:// URLs, not to {shown}"
        )));
    }
    Ok(parsed.to_string())
}

/// `url` with the characters that would end its user info early (`#`, `?`, `/`, and every
/// `@` but the last) percent-encoded there, so that a password typed as is (`p#ss`) means
/// what it says instead of cutting the URL at a fragment.
fn encode_userinfo(url: &str) -> String {
    map_userinfo(url, |raw| {
        let mut userinfo = String::with_capacity(raw.len() + 8);
        for c in raw.chars() {
            match c {
                '#' => userinfo.push_str("%23"),
                '?' => userinfo.push_str("%3F"),
                '/' => userinfo.push_str("%2F"),
                '@' => userinfo.push_str("%40"),
                c => userinfo.push(c),
            }
        }
        userinfo
    })
}

/// `url` with its user info (everything between `scheme://` and the *last* `@`) replaced by
/// `f(user info)`; unchanged when it has none.
fn map_userinfo(url: &str, f: impl FnOnce(&str) -> String) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    format!("{}{}{}", &url[..rest_start], f(&rest[..at]), &rest[at..])
}

/// `url` with any password replaced by `***`, for messages and logs. Works on malformed URLs
/// too: everything between `scheme://` and the *last* `@` counts as user info (a password may
/// contain `/`, `?` or `#`; redacting too much is harmless, too little is not).
///
/// ```
/// use lockwise::url::redact_url;
/// assert_eq!(redact_url("redis://:hunter2@host:6379/0"), "redis://:***@host:6379/0");
/// assert_eq!(redact_url("redis://user:p@ss@host"), "redis://user:***@host");
/// assert_eq!(redact_url("redis://:s3cr/et@host"), "redis://:***@host");
/// assert_eq!(redact_url("redis://us#er:pw@host"), "redis://us#er:***@host");
/// assert_eq!(redact_url("redis://host"), "redis://host");
/// assert_eq!(
///     redact_url("postgres://u@h/db?sslmode=disable&password=pw"),
///     "postgres://***@h/db?sslmode=disable&password=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    map_userinfo(&redact_password_parameter(url), |userinfo| {
        match userinfo.find(':') {
            Some(colon) => format!("{}:***", &userinfo[..colon]),
            None => "***".to_owned(),
        }
    })
}

/// Masks the value of any `password=` query parameter (PostgreSQL URLs accept one).
fn redact_password_parameter(url: &str) -> String {
    let Some(query_start) = url.find('?') else {
        return url.to_owned();
    };
    let (base, query) = url.split_at(query_start + 1);
    let masked: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}{}", masked.join("&"))
}

/// `host` (`[v6]` kept in brackets) and port of one member of a multi-host URL (`host`,
/// `host:port`, `[v6]`, `[v6]:port`), `default` when it has none; `bad` words the error.
fn host_port(member: &str, default: u16, bad: impl Fn(&str) -> Error) -> Result<(String, u16)> {
    let (host, port) = if let Some(v6) = member.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("has an unclosed '['"))?;
        (format!("[{host}]"), after.strip_prefix(':'))
    } else {
        match member.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (member.to_owned(), None),
        }
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err(bad("has no usable host"));
    }
    let port = match port {
        None => default,
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad("has no valid port"))?,
    };
    Ok((host, port))
}

/// `password` percent-encoded for the user info of a URL.
fn encode_password(password: &str) -> String {
    const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(password, USERINFO).to_string()
}
