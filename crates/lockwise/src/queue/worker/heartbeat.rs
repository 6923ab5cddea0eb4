//! Heartbeats: extend the leases of running jobs, move their local deadlines, and stop
//! the handlers of jobs no longer this worker's.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::log_job;
use super::running::{Running, RunningJob};
use super::streak::Streak;
use crate::error::Result;
use crate::lease_clock::LeaseClock;
use crate::queue::{JobId, Queue};

/// The answer to one heartbeat, with what it was sent for.
struct Beat {
    sent: LeaseClock,
    jobs: Vec<(JobId, i32)>,
    /// `None`: no answer while it could still have moved a deadline.
    answer: Option<Result<Vec<JobId>>>,
}

/// Extends the leases of running jobs every third of the lease, and moves the local deadline
/// of each job a heartbeat extended. Each heartbeat stays in flight until its answer could no
/// longer move a deadline (`sent + lease − drift`); the next one starts on schedule anyway.
pub(super) async fn heartbeat(
    queue: Queue,
    running: Running,
    lease: Duration,
    taken: Arc<TakenAway>,
    stop: CancellationToken,
) {
    let every = lease / 3;
    let mut next = Instant::now() + every;
    let mut in_flight = FuturesUnordered::new();
    let mut beats = Streak::new("heartbeat (handlers run on until their jobs' deadlines)");
    let mut classifying = FuturesUnordered::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                // The look-ups under way are counted in the report (each is bounded).
                while classifying.next().await.is_some() {}
                return;
            }
            () = sleep_until(next) => {
                next = Instant::now() + every;
                let now = Instant::now();
                let jobs: Vec<(JobId, i32)> = running
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    // A job past its deadline is being cancelled: extending its lease would
                    // only delay its rescue.
                    .filter(|(_, job)| *job.deadline.borrow() > now)
                    .map(|(id, job)| (*id, job.attempt))
                    .collect();
                if jobs.is_empty() {
                    continue;
                }
                let queue = queue.clone();
                let sent = LeaseClock::start();
                in_flight.push(async move {
                    let answer = sent.in_flight(lease, queue.protocol().heartbeat(&jobs, lease)).await;
                    Beat { sent, jobs, answer }
                });
            }
            Some(()) = classifying.next(), if !classifying.is_empty() => {}
            Some(beat) = in_flight.next(), if !in_flight.is_empty() => {
                let beat: Beat = beat;
                match beat.answer {
                    Some(Ok(owned)) => {
                        beats.succeeded();
                        let gone = extended(&running, &beat.jobs, &owned, beat.sent.deadline(lease).at);
                        if !gone.is_empty() {
                            // Looked up beside the heartbeats, never holding them up.
                            classifying.push(why_gone(queue.clone(), gone, every, taken.clone()));
                        }
                    }
                    Some(Err(error)) => beats.failed(&error),
                    None => beats.failed(&"no answer in time"),
                }
            }
        }
    }
}

/// Books a heartbeat's answer: the jobs it extended trust their lease until `until`; those it
/// no longer owns (cancelled, or rescued elsewhere) stop at once, and are returned.
fn extended(
    running: &Running,
    sent_for: &[(JobId, i32)],
    owned: &[JobId],
    until: Instant,
) -> Vec<(JobId, RunningJob)> {
    let owned: HashSet<JobId> = owned.iter().copied().collect();
    let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
    let mut gone = Vec::new();
    for (id, attempt) in sent_for {
        let Some(job) = running.get(id).filter(|job| job.attempt == *attempt) else {
            continue; // finished meanwhile
        };
        if owned.contains(id) {
            job.deadline.send_if_modified(|deadline| {
                let later = until > *deadline;
                if later {
                    *deadline = until;
                }
                later
            });
        } else if let Some(job) = running.remove(id) {
            if let Some(task) = &job.task {
                task.abort();
            }
            gone.push((*id, job));
        }
    }
    gone
}

/// Handlers stopped from outside their execution (which then reports nothing), by why.
#[derive(Debug, Default)]
pub(super) struct TakenAway {
    pub(super) cancelled: AtomicU64,
    pub(super) lease_lost: AtomicU64,
}

/// Logs and counts the jobs a heartbeat found no longer this worker's: cancelled by
/// [`Queue::cancel`], or rescued (their lease lost). One look-up each, bounded by `limit`; a
/// job that cannot be looked up counts as lost.
async fn why_gone(
    queue: Queue,
    gone: Vec<(JobId, RunningJob)>,
    limit: Duration,
    taken: Arc<TakenAway>,
) {
    for (id, job) in gone {
        let state = timeout(limit, queue.job(id)).await;
        let cancelled = matches!(
            state,
            Ok(Ok(Some(super::JobInfo { state: super::JobState::Cancelled, attempt, .. })))
                if attempt == job.attempt
        );
        let outcome = if cancelled {
            tracing::info!(%id, "cancelled; handler stopped");
            taken.cancelled.fetch_add(1, Relaxed);
            "cancelled"
        } else {
            tracing::warn!(%id, "lease lost; handler stopped");
            taken.lease_lost.fetch_add(1, Relaxed);
            "lease lost"
        };
        // A prefetched job whose handler had not started ran for no time.
        let took = job.task.map_or(Duration::ZERO, |_| job.started.elapsed());
        log_job(id, &job.queue, job.attempt, outcome, took);
    }
}
