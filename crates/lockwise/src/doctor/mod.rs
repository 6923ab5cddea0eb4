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

use std::time::{Duration, SystemTime};

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

    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    fn warn(check: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding::new(check, Status::Warn, reason).fixed_by(fix)
    }

    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    fn fail(check: &'static str, reason: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding::new(check, Status::Fail, reason).fixed_by(fix)
    }

    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )]
    fn fixed_by(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
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

/// A round trip and the server's clock at it: what [`timing`] weighs.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
struct Probe {
    round_trip: Duration,
    /// The server's clock, and the local clock halfway through the round trip.
    server: SystemTime,
    local: SystemTime,
}

#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
impl Probe {
    /// Times `ask`, which returns the server's clock.
    async fn take<F: std::future::Future<Output = Result<SystemTime>>>(ask: F) -> Result<Probe> {
        let (start, sent) = (std::time::Instant::now(), SystemTime::now());
        let server = ask.await?;
        let round_trip = start.elapsed();
        Ok(Probe {
            round_trip,
            server,
            local: sent + round_trip / 2,
        })
    }
}

/// The checks every server gets: the round trip against the TTL (a renewal every TTL/3 must
/// come back well within it) and the clock offset between client and server (the TTLs run on
/// the server's clock, and so does the fencing tokens' clock floor).
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
fn timing(probes: &[Probe], ttl: Duration) -> [Finding; 2] {
    let mut trips: Vec<Duration> = probes.iter().map(|p| p.round_trip).collect();
    trips.sort();
    let median = trips.get(trips.len() / 2).copied().unwrap_or_default();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    let trip = format!("median round trip {} against a TTL of {ttl:?}", ms(median));
    let round_trip = if median * 10 >= ttl {
        Finding::fail(
            "round trip",
            trip,
            "a renewal every TTL/3 cannot be trusted to come back in time: raise the TTL or \
             move the client closer to the server",
        )
    } else if median * 50 >= ttl {
        Finding::warn(
            "round trip",
            trip,
            "a slow moment loses the lock; raise the TTL",
        )
    } else {
        Finding::ok("round trip", trip)
    };
    let best = probes.iter().min_by_key(|p| p.round_trip);
    let clock = match best {
        None => Finding::warn("clock", "no answer to time", ""),
        Some(p) => {
            let (ahead, offset) = match p.server.duration_since(p.local) {
                Ok(d) => ("ahead of", d),
                Err(e) => ("behind", e.duration()),
            };
            let reason = format!(
                "the server's clock is {} {ahead} this machine's (± {})",
                ms(offset),
                ms(p.round_trip / 2)
            );
            if offset.saturating_sub(p.round_trip / 2) > Duration::from_secs(1) {
                Finding::warn(
                    "clock",
                    reason,
                    "run NTP (chrony, systemd-timesyncd) on both: a server clock set back \
                     weakens the fencing tokens' clock floor after a lost counter, and logs \
                     disagree",
                )
            } else {
                Finding::ok("clock", reason)
            }
        }
    };
    [round_trip, clock]
}

/// How many probes [`timing`] takes.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
const PROBES: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(ms: u64, offset_ms: i64) -> Probe {
        let local = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let server = if offset_ms >= 0 {
            local + Duration::from_millis(offset_ms.unsigned_abs())
        } else {
            local - Duration::from_millis(offset_ms.unsigned_abs())
        };
        Probe {
            round_trip: Duration::from_millis(ms),
            server,
            local,
        }
    }

    #[test]
    fn a_round_trip_near_the_ttl_fails_and_a_drifting_clock_warns() {
        let ttl = Duration::from_secs(30);
        let [trip, clock] = timing(&[probe(1, 0), probe(2, 0), probe(1, 0)], ttl);
        assert_eq!((trip.status, clock.status), (Status::Ok, Status::Ok));
        let [trip, _] = timing(&[probe(700, 0)], ttl);
        assert_eq!(trip.status, Status::Warn, "{trip:?}");
        let [trip, _] = timing(&[probe(3_000, 0)], ttl);
        assert_eq!(trip.status, Status::Fail, "{trip:?}");
        let [_, clock] = timing(&[probe(2, -5_000)], ttl);
        assert_eq!(clock.status, Status::Warn, "{clock:?}");
        assert!(clock.reason.contains("behind"), "{clock:?}");
    }
}
