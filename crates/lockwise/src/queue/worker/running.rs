//! The handlers in flight, by job.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::queue::JobId;

/// One handler in flight.
pub(super) struct RunningJob {
    pub(super) attempt: i32,
    /// The job's queue, and when its handler started: for the log line of a job handed back.
    pub(super) queue: String,
    pub(super) started: Instant,
    /// `None` while the job waits for a free handler (prefetched, see
    /// [`Worker::prefetch`]).
    pub(super) task: Option<AbortHandle>,
    /// The job's local deadline (see [`Worker`]): moved forward by successful heartbeats,
    /// watched by the execution, which cancels the handler when it passes.
    pub(super) deadline: watch::Sender<Instant>,
}

/// The handlers in flight, by job.
pub(super) type Running = Arc<Mutex<HashMap<JobId, RunningJob>>>;

/// Aborts every handler still in flight when dropped: with it, dropping [`Worker::run`]'s
/// future stops its handlers instead of leaving them running unsupervised.
pub(super) struct AbortHandlers(pub(super) Running);

impl Drop for AbortHandlers {
    fn drop(&mut self) {
        let mut running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, job) in running.drain() {
            if let Some(task) = job.task {
                task.abort();
            }
        }
    }
}
