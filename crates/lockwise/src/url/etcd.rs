//! `etcd://` and `etcds://` URLs: several members, a key prefix, credentials, TLS files.

use std::path::PathBuf;

use super::redact_url;
use crate::error::{Error, Result};

/// The port of a member named without one.
const DEFAULT_PORT: u16 = 2379;

/// The key prefix of a URL without a path.
pub(crate) const DEFAULT_PREFIX: &str = "lockwise/";

/// A parsed `etcd://[user:password@]host[:port][,host[:port]…][/prefix]` URL, or its TLS form
/// `etcds://…[?ca=PATH][&cert=PATH&key=PATH]` (the members' CA, the system's roots without
/// one; a client certificate and key for etcd's `--client-cert-auth`).
///
/// ```
/// use lockwise::url::EtcdUrl;
/// let url = EtcdUrl::parse("etcds://10.0.0.1/billing?ca=/etc/etcd/ca.pem").unwrap();
/// assert_eq!(url.endpoints, ["https://10.0.0.1:2379"]);
/// let tls = url.tls.unwrap();
/// assert_eq!(tls.ca.unwrap().to_str(), Some("/etc/etcd/ca.pem"));
/// assert!(EtcdUrl::parse("etcds://h?cert=/c.pem").is_err(), "a certificate needs its key");
/// assert!(EtcdUrl::parse("etcd://h?ca=/ca.pem").is_err(), "TLS files need etcds://");
/// ```
///
/// ```
/// use lockwise::url::EtcdUrl;
/// let url = EtcdUrl::parse("etcd://app:s3cret@10.0.0.1,10.0.0.2:2380/billing").unwrap();
/// assert_eq!(url.endpoints, ["http://10.0.0.1:2379", "http://10.0.0.2:2380"]);
/// assert_eq!(url.prefix, "billing/");
/// assert_eq!(url.credentials, Some(("app".into(), "s3cret".into())));
/// assert_eq!(url.shown(), "etcd://app:***@10.0.0.1,10.0.0.2:2380/billing");
/// assert_eq!(EtcdUrl::parse("etcd://127.0.0.1:2379").unwrap().prefix, "lockwise/");
/// assert!(EtcdUrl::parse("etcd://").is_err());
/// assert!(EtcdUrl::parse("etcd://h:99999").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdUrl {
    /// `http://host:port` (`https://` with TLS) for each member, in the URL's order.
    pub endpoints: Vec<String>,
    /// The prefix of every key, ending in `/` (default `lockwise/`).
    pub prefix: String,
    /// User and password, percent-decoded.
    pub credentials: Option<(String, String)>,
    /// TLS (`etcds://`), and its files.
    pub tls: Option<EtcdTls>,
    raw: String,
}

/// The files of an `etcds://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdTls {
    /// The CA that signed the members' certificates (`ca=`); the system's roots without one.
    pub ca: Option<PathBuf>,
    /// A client certificate and its key (`cert=`, `key=`), both PEM.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl std::fmt::Debug for EtcdUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdUrl")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl EtcdUrl {
    /// Parses an `etcd://` URL; errors never contain the password.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for another scheme, no member, a bad port, a user without a
    /// password, a prefix with control characters, an unknown setting, TLS files on
    /// `etcd://`, or a client certificate without its key.
    pub fn parse(raw: &str) -> Result<Self> {
        let shown = redact_url(raw);
        let (rest, tls) = if let Some(rest) = raw.strip_prefix("etcd://") {
            (rest, false)
        } else if let Some(rest) = raw.strip_prefix("etcds://") {
            (rest, true)
        } else {
            return Err(Error::config(format!("{shown} is not an etcd:// URL")));
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let files = query.map(|q| tls_files(q, &shown)).transpose()?;
        let tls = match (tls, files) {
            (true, files) => Some(files.unwrap_or_default()),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(Error::config(format!(
                    "{shown}: ca=, cert= and key= are TLS files; use etcds://"
                )));
            }
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (userinfo, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let credentials = match userinfo {
            None => None,
            Some(info) => {
                let (user, password) = info.split_once(':').ok_or_else(|| {
                    Error::config(format!("{shown}: a user needs a password (user:password@)"))
                })?;
                let decode = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8()
                        .map(|s| s.into_owned())
                        .map_err(|_| Error::config(format!("{shown}: user info is not UTF-8")))
                };
                Some((decode(user)?, decode(password)?))
            }
        };
        let (hosts, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash + 1..]),
            None => (rest, ""),
        };
        let endpoints = hosts
            .split(',')
            .map(|member| endpoint(scheme, member, &shown))
            .collect::<Result<Vec<_>>>()?;
        let path = path.trim_matches('/');
        if path.chars().any(char::is_control) {
            return Err(Error::config(format!(
                "{shown}: the key prefix may not contain control characters"
            )));
        }
        let prefix = if path.is_empty() {
            DEFAULT_PREFIX.to_owned()
        } else {
            format!("{path}/")
        };
        Ok(EtcdUrl {
            endpoints,
            prefix,
            credentials,
            tls,
            raw: raw.to_owned(),
        })
    }

    /// The URL with its password replaced by `***`.
    pub fn shown(&self) -> String {
        redact_url(&self.raw)
    }
}

/// `url` (`etcd://` or `etcds://`) with its user's password set to `password`.
pub(crate) fn with_password(url: &str, password: &str) -> Result<String> {
    let shown = redact_url(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(Error::config(format!("{shown} is not an etcd:// URL")));
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, hosts)) = authority.rsplit_once('@') else {
        return Err(Error::config(format!(
            "{shown}: a password for etcd needs a user in the URL (etcd://user@host)"
        )));
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    let password = super::encode_password(password);
    Ok(format!("{scheme}://{user}:{password}@{hosts}{path}"))
}

/// The TLS files of an `etcds://` URL's query (`ca=`, `cert=`, `key=`).
fn tls_files(query: &str, shown: &str) -> Result<EtcdTls> {
    let (mut ca, mut cert, mut key) = (None, None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map_err(|_| Error::config(format!("{shown}: {name}= is not UTF-8")))?;
        if value.is_empty() {
            return Err(Error::config(format!("{shown}: {name}= needs a path")));
        }
        let slot = match name {
            "ca" => &mut ca,
            "cert" => &mut cert,
            "key" => &mut key,
            other => {
                return Err(Error::config(format!(
                    "{shown}: unknown setting {other:?}; an etcd URL takes ca=, cert= and key="
                )));
            }
        };
        *slot = Some(PathBuf::from(value.as_ref()));
    }
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => {
            return Err(Error::config(format!(
                "{shown}: a client certificate needs both cert= and key="
            )));
        }
    };
    Ok(EtcdTls { ca, identity })
}

/// `scheme://host:port` for one member of the URL (`host`, `host:port`, `[v6]`, `[v6]:port`).
fn endpoint(scheme: &str, member: &str, shown: &str) -> Result<String> {
    if member.is_empty() {
        return Err(Error::config(format!("URL {shown} has no host")));
    }
    let bad = |why: &str| Error::config(format!("{shown}: member {member:?} {why}"));
    let (host, port) = super::host_port(member, DEFAULT_PORT, bad)?;
    Ok(format!("{scheme}://{host}:{port}"))
}
