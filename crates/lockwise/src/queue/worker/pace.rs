//! How many claims to keep in flight and how many jobs to claim ahead of the handlers.

use std::time::Duration;

use super::execute::{Finished, Outcome};

/// The most claims a worker of `concurrency` handlers has in flight at once — as many as
/// its handlers, from 4 to 16 —: the first whenever there is room, the others only while
/// claims come back full and there is room for a whole batch. A claim's answer waits for the
/// commit's WAL flush, so claims in flight side by side share the flushes (group commit), as
/// the same handlers split among several workers would.
pub(super) fn claims_in_flight(concurrency: usize) -> usize {
    concurrency.clamp(4, MAX_CLAIMS)
}

/// The most claims in flight at once, and always while short jobs are prefetched.
pub(super) const MAX_CLAIMS: usize = 16;

/// The most jobs a worker claims ahead by default: enough that one worker of many handlers
/// drains short jobs as fast as as many workers of one handler each (the measurements are in
/// `docs/performance.md`), and well below the 16,000 leases of the PostgreSQL lease ring, so
/// that the prefetch of a few workers does not fill it.
pub(super) const MAX_PREFETCH: usize = 3_000;

/// Claim round trips: a job is short (worth prefetching) when it runs no longer than this
/// many, and the default prefetch holds this many round trips of work ahead of the handlers.
const ROUND_TRIPS: u32 = 4;

/// The least batch while short jobs are prefetched: the claim's own cost is then shared by
/// at least 100 jobs.
pub(super) const SHORT_JOBS_BATCH: usize = 100;

/// While short jobs are prefetched, each claim asks for this fraction of the jobs held ahead,
/// from [`SHORT_JOBS_BATCH`] to [`MAX_AHEAD_BATCH`] jobs (see [`ahead_batch`]): four claims,
/// or more of 500 for a prefetch above 2,000.
const CLAIMS_AHEAD: usize = 4;

/// The largest default claim while short jobs are prefetched: larger claims drain short jobs
/// slower, not faster (`docs/performance.md`; why is not known).
const MAX_AHEAD_BATCH: usize = 500;

/// The size of each claim while short jobs are prefetched, `ahead` jobs held ahead of the
/// handlers: the batch the caller set, or the prefetch shared among [`CLAIMS_AHEAD`] claims,
/// from `least` (a batch) to [`MAX_AHEAD_BATCH`].
///
/// A claim costs about as much again as the jobs it moves (on PostgreSQL its plan spans
/// every ready segment, and is planned again in each connection after a segment's
/// truncation or an ANALYZE), and claims in flight side by side skip each other's locked
/// rows: a few large claims cost the server less than many small ones holding as many jobs.
/// With jobs of a few milliseconds the prefetch is about a batch, and the claims stay at
/// [`SHORT_JOBS_BATCH`] (fewer leases held, sooner truncated).
pub(super) fn ahead_batch(set: Option<usize>, least: usize, ahead: usize) -> usize {
    match set {
        Some(n) => n,
        None => (ahead / CLAIMS_AHEAD).clamp(least, MAX_AHEAD_BATCH.max(least)),
    }
}

/// Recent handler run times and claim round trips, to decide whether prefetching pays
/// (see [`Worker::prefetch`]).
#[derive(Debug, Default)]
pub(super) struct Pace {
    handler: Option<Duration>,
    claim: Option<Duration>,
}

impl Pace {
    /// An average that follows the recent values (weight 1/8 for the newest).
    fn blend(average: &mut Option<Duration>, value: Duration) {
        *average = Some(average.map_or(value, |a| (a * 7 + value) / 8));
    }

    pub(super) fn handler(&mut self, finished: &Finished) {
        if matches!(finished.outcome, Outcome::Done | Outcome::Failed(_)) {
            Self::blend(&mut self.handler, finished.took);
        }
    }

    pub(super) fn claim(&mut self, took: Duration) {
        Self::blend(&mut self.claim, took);
    }

    /// Whether jobs are short enough to prefetch: handlers run no longer than four claim
    /// round trips — on average lately, and the longest running one so far —; not before
    /// both are known.
    pub(super) fn short_jobs(&self, longest_running: Duration) -> bool {
        matches!((self.handler, self.claim),
            (Some(handler), Some(claim))
                if handler <= claim * ROUND_TRIPS && longest_running <= claim * ROUND_TRIPS)
    }

    /// How many jobs to hold ahead of `concurrency` busy handlers (Little's law): what they
    /// finish in [`ROUND_TRIPS`] claim round trips, at least `least` (a batch), at
    /// most `most`. No-op jobs get `most`, which keeps many claims in flight; 1 ms jobs on
    /// 8 handlers, with 2 ms claims, a batch: few jobs wait, few leases are held, and the
    /// lease ring's segments drain soon after its clock passes them.
    pub(super) fn ahead(&self, concurrency: usize, least: usize, most: usize) -> usize {
        let (Some(handler), Some(claim)) = (self.handler, self.claim) else {
            return least.min(most);
        };
        let per_handler = (claim * ROUND_TRIPS).as_secs_f64() / handler.as_secs_f64();
        let needed = (concurrency as f64 * per_handler).ceil();
        if needed.is_finite() && needed < most as f64 {
            (needed as usize).clamp(least.min(most), most)
        } else {
            most
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefetch_is_claimed_in_a_few_claims_of_100_to_500() {
        // No-op jobs: the default prefetch of 3,000 goes in claims of 500.
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, MAX_PREFETCH), 500);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 2_000), 500);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 1_500), 375);
        // 1 ms jobs hold about a batch ahead: claims stay at 100 (fewer leases held).
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 64), 100);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 400), 100);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 10_000), MAX_AHEAD_BATCH);
        // More handlers than the largest claim: a claim still fills them all.
        assert_eq!(ahead_batch(None, 800, 1_500), 800);
        // A batch the caller set caps every claim, whatever the prefetch.
        assert_eq!(ahead_batch(Some(10), 10, 1_500), 10);
        assert_eq!(ahead_batch(Some(1_000), 1_000, 1_500), 1_000);
    }
}
