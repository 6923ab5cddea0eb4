//! The worker's row among the live workers ([`Queue::workers`]): written at start, refreshed
//! every third of the lease with the jobs running, removed when the worker stops.

use std::sync::PoisonError;
use std::time::Duration;

use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::running::Running;
use super::streak::Streak;
use crate::queue::Queue;
use crate::queue::driver::Presence;

/// Who the worker is, for its row.
pub(super) struct Identity {
    pub(super) id: String,
    pub(super) host: String,
    pub(super) queues: Vec<String>,
    pub(super) concurrency: usize,
}

/// Keeps the worker's row until `stop`, then removes it (bounded by the lease: a server that
/// stopped answering lets the row expire instead).
pub(super) async fn presence(
    queue: Queue,
    me: Identity,
    running: Running,
    lease: Duration,
    stop: CancellationToken,
) {
    let every = lease / 3;
    let mut seen = Streak::new("the worker's row among the live workers");
    let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let concurrency = i32::try_from(me.concurrency).unwrap_or(i32::MAX);
    loop {
        let next = Instant::now() + every;
        let jobs = running.lock().unwrap_or_else(PoisonError::into_inner).len();
        let row = Presence {
            id: &me.id,
            host: &me.host,
            pid,
            queues: &me.queues,
            concurrency,
            running: i32::try_from(jobs).unwrap_or(i32::MAX),
        };
        let written = tokio::select! {
            () = stop.cancelled() => break,
            written = timeout(every, queue.driver.worker_seen(&row, lease)) => written,
        };
        match written {
            Ok(Ok(())) => seen.succeeded(),
            Ok(Err(error)) => seen.failed(&error),
            Err(_) => seen.failed(&"no answer in time"),
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = sleep_until(next) => {}
        }
    }
    let _ = timeout(lease, queue.driver.worker_gone(&me.id)).await;
}
