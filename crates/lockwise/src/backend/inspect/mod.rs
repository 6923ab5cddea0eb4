//! Who holds what: the locks held now ([`Backend::held`](super::Backend::held)) and breaking
//! one as an operator ([`Backend::break_lock`](super::Backend::break_lock)), which
//! `lockwise locks` and `lockwise unlock --force` call.

use std::sync::OnceLock;
use std::time::Duration;

use crate::lease::FencingToken;

#[cfg(feature = "mysql")]
pub(crate) mod mysql;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;

/// A lock held now, as an operator sees it. Fields a backend cannot tell are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLock {
    /// The lock's key (without the backend's namespace).
    pub key: String,
    /// The fencing token of the current grant.
    pub token: Option<FencingToken>,
    /// Who holds it.
    pub holder: Holder,
    /// How long it has been held (since its grant, renewals included).
    pub held_for: Option<Duration>,
    /// How long until the lease runs out unless renewed.
    pub ttl_left: Option<Duration>,
    /// How many wait for it: waiting tasks (Redis), or waiting processes (PostgreSQL,
    /// MariaDB, where one probe per process waits for all of its tasks).
    pub waiters: Option<u64>,
}

/// The holder of a lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's host: its name, or the client address the server saw.
    pub host: Option<String>,
    /// The holder's process id on its host.
    pub pid: Option<u32>,
    /// The holder's name: the program, or what it set with [`name_this_process`] (`lockwise
    /// run` sets its command).
    pub name: Option<String>,
    /// The holder's session on the server: a PostgreSQL backend pid, a MariaDB connection id.
    pub session: Option<i64>,
}

impl Holder {
    /// This process: its host name, pid and name.
    pub fn this_process() -> Holder {
        Holder {
            host: Some(hostname()),
            pid: Some(std::process::id()),
            name: Some(process_name().to_owned()),
            session: None,
        }
    }

    /// `host pid name` on one line, as the backends that store it keep it (tabs and line
    /// breaks in the name become spaces).
    pub(crate) fn encode(&self) -> String {
        let clean =
            |s: &Option<String>| s.as_deref().unwrap_or("").replace(['\t', '\n', '\r'], " ");
        format!(
            "{}\t{}\t{}",
            clean(&self.host),
            self.pid.map(|p| p.to_string()).unwrap_or_default(),
            clean(&self.name)
        )
    }

    /// The reverse of [`encode`](Self::encode); fields that do not parse stay `None`.
    pub(crate) fn decode(text: &str) -> Holder {
        let mut parts = text.splitn(3, '\t');
        let mut next = || parts.next().filter(|s| !s.is_empty()).map(str::to_owned);
        Holder {
            host: next(),
            pid: next().and_then(|p| p.parse().ok()),
            name: next(),
            session: None,
        }
    }
}

/// The most bytes of a holder's name kept.
const MAX_NAME: usize = 200;

static NAME: OnceLock<String> = OnceLock::new();

/// Names this process as a lock holder in `lockwise locks` listings (default: the program's
/// file name). Only the first call counts, and only before this process's first grant.
///
/// ```
/// lockwise::backend::name_this_process("nightly-report");
/// ```
pub fn name_this_process(name: &str) {
    let mut name = name.to_owned();
    if name.len() > MAX_NAME {
        let mut end = MAX_NAME;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    let _ = NAME.set(name);
}

/// This process's holder name.
pub(crate) fn process_name() -> &'static str {
    NAME.get_or_init(|| {
        std::env::args_os()
            .next()
            .map(std::path::PathBuf::from)
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default()
    })
}

/// This process's holder record, encoded once.
pub(crate) fn this_process_encoded() -> &'static str {
    static ENCODED: OnceLock<String> = OnceLock::new();
    ENCODED.get_or_init(|| Holder::this_process().encode())
}

/// This machine's host name, read once.
pub(crate) fn hostname() -> String {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "host".to_owned())
    })
    .clone()
}

/// The error of a backend that cannot list or break locks.
pub(crate) fn unsupported(what: &str, kind: &str) -> crate::Error {
    crate::Error::config(format!("the {kind} backend cannot {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_survives_its_encoding_and_a_name_cannot_break_it() {
        let h = Holder {
            host: Some("web-1".into()),
            pid: Some(42),
            name: Some("report\tnightly\nrun".into()),
            session: None,
        };
        let back = Holder::decode(&h.encode());
        assert_eq!(back.host.as_deref(), Some("web-1"));
        assert_eq!(back.pid, Some(42));
        assert_eq!(back.name.as_deref(), Some("report nightly run"));
        assert_eq!(Holder::decode(""), Holder::default());
        assert_eq!(Holder::decode("h\tnot-a-pid").pid, None);
    }
}
