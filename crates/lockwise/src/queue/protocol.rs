//! The worker protocol: claim, confirm the start, heartbeat, complete or fail, hand back, and
//! reap. [`Worker`](super::Worker) speaks it for you; it is public for drivers of their own
//! (a worker in another runtime, a test that stops between two steps), not for everyday use.

use std::time::Duration;

use super::{Claimed, JobId, Queue, driver};
use crate::error::Result;

/// The worker protocol of a [`Queue`], from [`Queue::protocol`]. Each step is one
/// compare-and-set on `(id, attempt)`: a step of an attempt that no longer owns its job
/// changes nothing.
#[derive(Debug, Clone, Copy)]
pub struct Protocol<'q> {
    queue: &'q Queue,
}

impl Queue {
    /// The worker protocol, for drivers of their own and tests: what [`Worker`](super::Worker)
    /// does for you.
    pub fn protocol(&self) -> Protocol<'_> {
        Protocol { queue: self }
    }

    /// [`claim`](Protocol::claim) from one or more queues of this store (the worker's).
    pub(crate) async fn claim_from(
        &self,
        queues: &[&str],
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        let request = driver::ClaimRequest {
            queues,
            worker,
            limit,
            lease,
            finished,
        };
        self.driver.claim(request).await
    }
}

impl Protocol<'_> {
    /// Claims up to `limit` ready jobs for `worker` with a lease, after acknowledging the
    /// `finished` jobs as done (compare-and-set on id and attempt), in one round trip.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a claim whose reply is lost (the future dropped after the server ran
    /// it) leaves its jobs running under `worker`'s name, run by nobody, until their lease
    /// expires and a reaper gives them back. Their start was never
    /// [confirmed](Protocol::confirm_started), so the attempt is not counted. The
    /// acknowledgements may or may not have been applied: pass them again, they are
    /// idempotent.
    ///
    /// Claimed jobs are not *started* yet: call [`confirm_started`](Protocol::confirm_started)
    /// before running them, or the reaper takes an expired one for never started and does not
    /// count the attempt (a handler that kills its process every time would then never die).
    pub async fn claim(
        self,
        worker: &str,
        limit: usize,
        lease: Duration,
        finished: &[(JobId, i32)],
    ) -> Result<Vec<Claimed>> {
        self.queue
            .claim_from(&[&self.queue.name], worker, limit, lease, finished)
            .await
    }

    /// Confirms that the worker received the claim of these `(id, attempt)` jobs and is about
    /// to run them (compare-and-set on id and attempt); returns the ids confirmed, which are
    /// the only ones to run. From then on an expired lease counts the attempt; before, the
    /// reaper gives the job back as never started.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not, and idempotent: after a dropped or failed call,
    /// confirm again. A confirmation applied whose answer is lost counts the attempt if the
    /// job then does not run: keep that window short by confirming right after the claim.
    pub async fn confirm_started(self, claimed: &[(JobId, i32)]) -> Result<Vec<JobId>> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        self.queue.driver.confirm_started(claimed).await
    }

    /// Marks jobs done (compare-and-set on id and attempt); returns how many were.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied whole or not at all, and idempotent: after a dropped call,
    /// complete again (a second call counts only the jobs the first did not mark).
    pub async fn complete(self, finished: &[(JobId, i32)]) -> Result<u64> {
        self.queue.driver.complete(finished).await
    }

    /// Records a failed attempt: retried after `retry_in`, or dead when the attempts are used
    /// up or `final_failure` is set. `false` when this attempt no longer owns the job.
    ///
    /// The error is stored with each NUL character written `\0` (PostgreSQL text and JSON
    /// cannot hold one, and a failure must never be lost to its own message).
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not. A dropped call may have recorded the failure; calling
    /// again then returns `false` (the attempt no longer runs), and if it was not recorded the
    /// lease runs out and the reaper counts the attempt instead.
    pub async fn fail(
        self,
        id: JobId,
        attempt: i32,
        error: &str,
        retry_in: Duration,
        final_failure: bool,
    ) -> Result<bool> {
        let error = storable_error(error);
        let failed = driver::FailedAttempt {
            id,
            attempt,
            error: &error,
            retry_in,
            final_failure,
        };
        self.queue.driver.fail(failed).await
    }

    /// Extends the leases of running jobs (compare-and-set); returns the ids still owned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped heartbeat extended the leases or not; the next one does.
    pub async fn heartbeat(self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        self.queue.driver.heartbeat(running, lease).await
    }

    /// Gives unfinished jobs back at once (graceful shutdown); their budget grows by one.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not: jobs not handed back by a dropped call wait for their
    /// lease to run out, then the reaper gives them back (their attempt counted).
    pub async fn hand_back(self, running: &[(JobId, i32)]) -> Result<u64> {
        self.queue.driver.hand_back(running).await
    }

    /// Rescues jobs of every queue in the store whose lease expired, unless another reaper is
    /// at work (one at a time, under an advisory lock or `GET_LOCK`). A job whose start was
    /// confirmed goes back with its attempt counted (or dies when they are used up); one whose
    /// start never was goes back with one more attempt in its budget, so that the fencing
    /// token still grows. Returns how many were rescued.
    ///
    /// The exclusion lives inside one round trip, released by the server whether or not the
    /// answer reaches this process: a reaper cut off mid-reap never stops the others.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement (in one transaction on PostgreSQL) rescues all its jobs or
    /// none; the next reap finds what a dropped one left.
    pub async fn reap(self) -> Result<u64> {
        self.queue.driver.reap().await
    }
}

/// `error` as both databases can store it: NUL written as `\0`.
fn storable_error(error: &str) -> std::borrow::Cow<'_, str> {
    if error.contains('\0') {
        std::borrow::Cow::Owned(error.replace('\0', "\\0"))
    } else {
        std::borrow::Cow::Borrowed(error)
    }
}
