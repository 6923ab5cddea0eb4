//! What a handler receives: [`JobContext`].

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

#[cfg(doc)]
use super::Worker;
use crate::queue::JobId;

/// What a handler receives.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobContext {
    /// The job.
    pub id: JobId,
    /// This execution's attempt number (1 for the first): the job's fencing token.
    pub attempt: i32,
    /// Attempts allowed in all.
    pub max_attempts: i32,
    /// The job's queue (one of the worker's [`queues`](Worker::queues)).
    pub queue: String,
    /// What was enqueued.
    pub payload: Value,
    pub(super) deadline: watch::Receiver<Instant>,
    pub(super) stop: CancellationToken,
}

impl JobContext {
    /// The moment this worker stops trusting the job's lease unless a heartbeat renews it:
    /// the handler is cancelled then (see [`Worker`]). A handler with a commit point of its
    /// own can check it before an irreversible step.
    pub fn deadline(&self) -> Instant {
        *self.deadline.borrow()
    }

    /// Resolves when the worker asks this handler to stop: at the execution timeout, at the
    /// end of a shutdown's grace period, or shortly before the job's local deadline if no
    /// heartbeat moved it (see [`Worker::kill_after`]). The handler should then wind up and
    /// return; its future is dropped a little later if it has not. A request is never taken
    /// back, even if a heartbeat later renews the lease.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::queue::Worker;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// Worker::new(queue)
    ///     .timeout(Duration::from_secs(60))
    ///     .kill_after(Duration::from_secs(5))
    ///     .run(
    ///         |job| async move {
    ///             tokio::select! {
    ///                 () = tokio::time::sleep(Duration::from_secs(120)) => Ok(()),
    ///                 () = job.stop_requested() => {
    ///                     // save what can be saved, quickly
    ///                     Err("stopped".to_owned())
    ///                 }
    ///             }
    ///         },
    ///         CancellationToken::new(),
    ///     )
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn stop_requested(&self) {
        self.stop.cancelled().await;
    }

    /// Whether the worker asked this handler to stop (see
    /// [`stop_requested`](Self::stop_requested)).
    pub fn is_stop_requested(&self) -> bool {
        self.stop.is_cancelled()
    }
}
