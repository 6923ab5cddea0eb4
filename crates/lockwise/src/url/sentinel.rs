//! `redis+sentinel://` URLs: the sentinels of a Redis primary, the name they know it by, and
//! the database and credentials of the primary.

use super::redact_url;
use crate::error::{Error, Result};

/// The port of a sentinel named without one.
const DEFAULT_PORT: u16 = 26379;

/// A parsed `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<master>[/db]` URL.
/// The credentials are the primary's; the sentinels are asked without any.
///
/// ```
/// use lockwise::url::SentinelUrl;
/// let url = SentinelUrl::parse("redis+sentinel://:pw@10.0.0.1,10.0.0.2:26380/orders/2").unwrap();
/// assert_eq!(url.sentinels, [("10.0.0.1".to_owned(), 26379), ("10.0.0.2".to_owned(), 26380)]);
/// assert_eq!(url.master, "orders");
/// assert_eq!(url.db, 2);
/// assert_eq!(url.password.as_deref(), Some("pw"));
/// assert!(SentinelUrl::parse("redis+sentinel://10.0.0.1").is_err(), "no master name");
/// assert!(SentinelUrl::parse("redis+sentinel://10.0.0.1/m/x").is_err(), "a bad db");
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentinelUrl {
    /// Host (an IPv6 address in brackets) and port of each sentinel, in the URL's order.
    pub sentinels: Vec<(String, u16)>,
    /// The name the sentinels monitor the primary by (`sentinel monitor <name> …`).
    pub master: String,
    /// The database number on the primary (default 0).
    pub db: i64,
    /// The primary's ACL user, if any.
    pub username: Option<String>,
    /// The primary's password, percent-decoded.
    pub password: Option<String>,
    raw: String,
}

impl std::fmt::Debug for SentinelUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelUrl")
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl SentinelUrl {
    /// Parses a `redis+sentinel://` URL; errors never contain the password.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for another scheme, no sentinel, a bad port, no master name or
    /// a database that is not a number.
    pub fn parse(raw: &str) -> Result<Self> {
        let shown = redact_url(raw);
        let rest = raw
            .strip_prefix("redis+sentinel://")
            .ok_or_else(|| Error::config(format!("{shown} is not a redis+sentinel:// URL")))?;
        // Settings after `?` (`replicas=`) are the backend's.
        let rest = rest.split('?').next().unwrap_or(rest);
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| Error::config(format!("{shown}: user info is not UTF-8")))
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                let user = Some(decode(user)?).filter(|u| !u.is_empty());
                let password = Some(decode(password)?).filter(|p| !p.is_empty());
                (user, password)
            }
        };
        let sentinels = hosts
            .split(',')
            .map(|host| sentinel(host, &shown))
            .collect::<Result<Vec<_>>>()?;
        let mut parts = path.trim_end_matches('/').splitn(2, '/');
        let master = parts.next().unwrap_or("").to_owned();
        if master.is_empty() || master.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(Error::config(format!(
                "{shown}: name the primary as the sentinels know it: redis+sentinel://host:26379/<master>[/db]"
            )));
        }
        let db = match parts.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| {
                    Error::config(format!("{shown}: database {db:?} is not a number"))
                })?,
        };
        Ok(SentinelUrl {
            sentinels,
            master,
            db,
            username,
            password,
            raw: raw.to_owned(),
        })
    }

    /// The URL with its password replaced by `***`.
    pub fn shown(&self) -> String {
        redact_url(&self.raw)
    }
}

/// `url` (`redis+sentinel://`) with the primary's password set to `password` (the user, if
/// any, kept).
pub(crate) fn with_password(url: &str, password: &str) -> Result<String> {
    let shown = redact_url(url);
    let rest = url
        .strip_prefix("redis+sentinel://")
        .ok_or_else(|| Error::config(format!("{shown} is not a redis+sentinel:// URL")))?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (user, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (userinfo.split_once(':').map_or(userinfo, |(u, _)| u), hosts),
        None => ("", authority),
    };
    let password = super::encode_password(password);
    Ok(format!("redis+sentinel://{user}:{password}@{hosts}{path}"))
}

/// Host (`[v6]` in brackets) and port of one sentinel (`host`, `host:port`).
fn sentinel(member: &str, shown: &str) -> Result<(String, u16)> {
    if member.is_empty() {
        return Err(Error::config(format!("URL {shown} has no sentinel")));
    }
    let bad = |why: &str| Error::config(format!("{shown}: sentinel {member:?} {why}"));
    super::host_port(member, DEFAULT_PORT, bad)
}

/// The nodes of a `redis+cluster://[[user]:password@]host:port[,host:port…]` URL as
/// `redis://` URLs with the credentials, for redis-rs's cluster client.
///
/// ```
/// let nodes = lockwise::url::cluster_nodes("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001").unwrap();
/// assert_eq!(nodes, ["redis://:pw@10.0.0.1:7000", "redis://:pw@10.0.0.2:7001"]);
/// assert!(lockwise::url::cluster_nodes("redis+cluster://10.0.0.1:7000/3").is_err(), "db 0 only");
/// ```
///
/// # Errors
///
/// [`Error::InvalidConfig`] for another scheme, no node, a node without a valid port, or a
/// path (a cluster has database 0 only).
pub fn cluster_nodes(raw: &str) -> Result<Vec<String>> {
    let shown = redact_url(raw);
    let rest = raw
        .strip_prefix("redis+cluster://")
        .ok_or_else(|| Error::config(format!("{shown} is not a redis+cluster:// URL")))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.trim_matches('/').is_empty() && path != "0" {
        return Err(Error::config(format!(
            "{shown}: a Redis cluster has database 0 only; leave the path out"
        )));
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    hosts
        .split(',')
        .map(|node| {
            let valid = node.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if valid {
                Ok(format!("redis://{userinfo}{node}"))
            } else {
                Err(Error::config(format!(
                    "{shown}: node {node:?} needs host:port"
                )))
            }
        })
        .collect()
}
