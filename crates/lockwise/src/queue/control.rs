//! Controlling jobs one at a time or a queue at once: retry, run now, cancel, delete, purge,
//! prune, pause and resume; and reading them back (`job`, `list`).

use std::time::Duration;

use super::{JobId, JobInfo, JobState, Queue, check_queue_name, finished_state};
use crate::error::Result;
use crate::metrics::{self, JobEvent};

impl Queue {
    /// Sends a dead or cancelled job back to ready with a fresh budget of attempts (the job,
    /// its id and key, not a copy). `false` if it is neither dead nor cancelled, or was pruned.
    ///
    /// # Cancel safety
    ///
    /// One statement (a transaction on PostgreSQL for a cancelled job), applied or not; after a
    /// dropped call that applied it, retrying again returns `false`.
    pub async fn retry(&self, id: JobId) -> Result<bool> {
        Ok(self.driver.retry(id).await? || self.driver.retry_cancelled(id).await?)
    }

    /// Sends every dead letter of this queue back to ready now, each with a fresh budget of
    /// attempts, as [`retry`](Self::retry) does for one; returns how many. In one statement:
    /// a letter that dies meanwhile waits for the next call.
    ///
    /// ```no_run
    /// # async fn demo(q: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// let retried = q.retry_all().await?;
    /// println!("{retried} dead letters of {} are ready again", q.name());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not; after a dropped call that applied it, the letters are
    /// ready and retrying again returns 0.
    pub async fn retry_all(&self) -> Result<u64> {
        self.driver.retry_all(&self.name).await
    }

    /// Makes job `id`, of any queue in the store, due now if it waits for a later time
    /// (enqueued with a delay, or waiting out a retry's backoff): the next claim may take
    /// it, in its priority's order. `false` when it is not a job due later (due already,
    /// running, finished, or no such job). Workers waiting on an empty queue see it at their
    /// next poll.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not; after a dropped call that applied it, the job is due
    /// and calling again returns `false`.
    pub async fn run_now(&self, id: JobId) -> Result<bool> {
        self.driver.run_now(id).await
    }

    /// Deletes dead letter `id`, of any queue in the store, and frees its idempotency key;
    /// `false` when it is not a dead letter (no such job, or not dead). A job in another state
    /// leaves by [`cancel`](Self::cancel) and [`prune`](Self::prune).
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not; after a dropped call that applied it, deleting again
    /// returns `false`.
    pub async fn delete_dead(&self, id: JobId) -> Result<bool> {
        self.driver.delete_dead(id).await
    }

    /// Deletes dead letters of this queue that died more than `older_than` ago: the same as
    /// [`prune`](Self::prune)`(JobState::Dead, older_than)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement deletes all or none, and purging again is harmless.
    pub async fn purge_dead(&self, older_than: Duration) -> Result<u64> {
        self.prune(JobState::Dead, older_than).await
    }

    /// Deletes dead letters of *every* queue in the store that died more than `older_than`
    /// ago: the same as [`prune_everywhere`](Self::prune_everywhere)`(JobState::Dead, …)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement deletes all or none, and purging again is harmless.
    pub async fn purge_dead_everywhere(&self, older_than: Duration) -> Result<u64> {
        self.prune_everywhere(JobState::Dead, older_than).await
    }

    /// Retention: deletes jobs of this queue done more than `older_than` ago: the same as
    /// [`prune`](Self::prune)`(JobState::Done, older_than)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement deletes all or none, and pruning again is harmless.
    pub async fn prune_done(&self, older_than: Duration) -> Result<u64> {
        self.prune(JobState::Done, older_than).await
    }

    /// Retention: deletes this queue's jobs that finished in `state` (done, dead or
    /// cancelled) more than `older_than` ago, and returns how many. Any other state is an
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig): only finished jobs are pruned.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::queue::JobState;
    /// let day = Duration::from_secs(24 * 3600);
    /// let pruned = queue.prune(JobState::Done, 7 * day).await?;
    /// println!("{pruned} jobs done more than a week ago deleted");
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement deletes all or none, and pruning again is harmless.
    pub async fn prune(&self, state: JobState, older_than: Duration) -> Result<u64> {
        let state = finished_state(state)?;
        self.driver
            .delete_finished(Some(&self.name), state, older_than)
            .await
    }

    /// [`prune`](Self::prune) for *every* queue in the store.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one statement deletes all or none, and pruning again is harmless.
    pub async fn prune_everywhere(&self, state: JobState, older_than: Duration) -> Result<u64> {
        let state = finished_state(state)?;
        self.driver.delete_finished(None, state, older_than).await
    }

    /// Everything stored about job `id`, of any queue in the store; `None` if there is no
    /// such job.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::JobId;
    /// if let Some(job) = queue.job(JobId(42)).await? {
    ///     println!("job 42 is {} after {} attempts", job.state, job.attempt);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        self.driver.job(id).await
    }

    /// This queue's jobs in `state`, at most `limit` (at least 0): ready and scheduled jobs
    /// in the order they will run, the others newest first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn list(&self, state: JobState, limit: i64) -> Result<Vec<JobInfo>> {
        self.list_page(state, 0, limit).await
    }

    /// [`list`](Self::list) from the `offset`-th job on (at least 0), in the same order: a
    /// page of a long list. Jobs that change state between two calls move between pages.
    ///
    /// ```no_run
    /// # async fn demo(q: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::JobState;
    /// let second_page = q.list_page(JobState::Dead, 50, 50).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn list_page(
        &self,
        state: JobState,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<JobInfo>> {
        self.driver
            .list(&self.name, state, offset.max(0), limit.max(0))
            .await
    }

    /// Cancels job `id`, of any queue in the store, if it has not finished: a ready or
    /// scheduled job will not run, and a running one's worker stops its handler at its next
    /// heartbeat (within a third of the lease: `lockwise queue work` kills the command then)
    /// and can no longer complete or fail it. The job stays, in state
    /// [`Cancelled`](JobState::Cancelled), until [pruned](Self::prune). `false` when there
    /// is no such job or it had finished.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not; after a dropped call that applied it, cancelling
    /// again returns `false`.
    pub async fn cancel(&self, id: JobId) -> Result<bool> {
        let cancelled = self.driver.cancel(id).await?;
        if cancelled {
            metrics::jobs(&self.name, JobEvent::Cancelled, 1);
        }
        Ok(cancelled)
    }

    /// Cancels this queue's unfinished jobs in `states` (any of [`Ready`](JobState::Ready),
    /// [`Scheduled`](JobState::Scheduled) and [`Running`](JobState::Running)) in one statement,
    /// as [`cancel`](Self::cancel) does one job; returns how many. A running job's handler is
    /// stopped at its worker's next heartbeat.
    ///
    /// ```no_run
    /// # async fn demo(q: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::JobState;
    /// let n = q.cancel_all(&[JobState::Ready, JobState::Scheduled]).await?; // what waits
    /// # let _ = n; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a finished state (done, dead,
    /// cancelled) or no state at all, before anything changes.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not.
    pub async fn cancel_all(&self, states: &[JobState]) -> Result<u64> {
        check_queue_name(&self.name)?;
        if states.is_empty() || states.iter().any(|s| s.is_finished()) {
            return Err(crate::Error::config(format!(
                "cancel_all takes ready, scheduled and running, not {states:?}"
            )));
        }
        let has = |state| states.contains(&state);
        let cancelled = self
            .driver
            .cancel_all(
                &self.name,
                has(JobState::Ready),
                has(JobState::Scheduled),
                has(JobState::Running),
            )
            .await?;
        metrics::jobs(&self.name, JobEvent::Cancelled, cancelled);
        Ok(cancelled)
    }

    /// Pauses this queue: its jobs stay, enqueueing goes on, but workers claim none of it
    /// until [`resume`](Self::resume). A running worker stops claiming from it within one of
    /// its poll intervals ([`Worker::poll_interval`](super::Worker::poll_interval), 1 s by
    /// default); the jobs it already claimed run to their end. `false` when it was paused
    /// already. Workers of lockwise versions before pausing ignore it.
    ///
    /// ```no_run
    /// # async fn demo(q: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// q.pause().await?; // e.g. while the mail provider is down
    /// assert!(q.is_paused().await?);
    /// q.resume().await?; // workers claim again within a poll interval
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not.
    pub async fn pause(&self) -> Result<bool> {
        check_queue_name(&self.name)?;
        self.driver.set_paused(&self.name, true).await
    }

    /// Resumes this queue after [`pause`](Self::pause); `false` when it was not paused.
    ///
    /// # Cancel safety
    ///
    /// One statement, applied or not.
    pub async fn resume(&self) -> Result<bool> {
        check_queue_name(&self.name)?;
        self.driver.set_paused(&self.name, false).await
    }

    /// Whether this queue is paused.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn is_paused(&self) -> Result<bool> {
        Ok(self.paused().await?.iter().any(|q| **q == *self.name))
    }

    /// Every paused queue of the store, by name.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn paused(&self) -> Result<Vec<String>> {
        self.driver.paused().await
    }
}
