//! A background task's failures, logged once a streak.

use std::fmt::Display;

use tokio::time::Instant;

/// A background task's failures, logged once a streak: at the first failure, and when the
/// task succeeds again (a database that is down made every task warn at every round).
pub(super) struct Streak {
    what: &'static str,
    since: Option<Instant>,
}

impl Streak {
    pub(super) fn new(what: &'static str) -> Self {
        Streak { what, since: None }
    }

    pub(super) fn failed(&mut self, error: &dyn Display) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
            tracing::warn!(%error, "{} failed; logged again when it succeeds", self.what);
        } else {
            tracing::debug!(%error, "{} failed again", self.what);
        }
    }

    pub(super) fn succeeded(&mut self) {
        if let Some(since) = self.since.take() {
            let failing_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::warn!(failing_ms, "{} succeeds again", self.what);
        }
    }
}
