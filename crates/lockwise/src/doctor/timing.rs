//! What every server's checks share: the round trip and the clock offset ([`timing`]), and
//! the findings that carry a fix.

use std::time::{Duration, SystemTime};

use super::{Finding, Status};
use crate::error::Result;

impl Finding {
    pub(super) fn warn(
        check: &'static str,
        reason: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding::new(check, Status::Warn, reason).fixed_by(fix)
    }

    pub(super) fn fail(
        check: &'static str,
        reason: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding::new(check, Status::Fail, reason).fixed_by(fix)
    }

    pub(super) fn fixed_by(mut self, fix: impl Into<String>) -> Self {
        self.fix = fix.into();
        self
    }
}

/// A round trip and the server's clock at it: what [`timing`] weighs.
pub(super) struct Probe {
    round_trip: Duration,
    /// The server's clock, and the local clock halfway through the round trip.
    server: SystemTime,
    local: SystemTime,
}

impl Probe {
    /// Times `ask`, which returns the server's clock.
    pub(super) async fn take<F: std::future::Future<Output = Result<SystemTime>>>(
        ask: F,
    ) -> Result<Probe> {
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
pub(super) fn timing(probes: &[Probe], ttl: Duration) -> [Finding; 2] {
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
pub(super) const PROBES: usize = 5;

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
