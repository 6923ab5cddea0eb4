//! The line of claimed jobs waiting for a free handler (prefetched, see
//! [`Worker::prefetch`](super::Worker::prefetch)).

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::running::{Running, RunningJob};
use super::{WorkerReport, log_job};
use crate::queue::{Claimed, JobId};

/// Puts freshly confirmed jobs in line for a handler, under their claim's `deadline`.
pub(super) fn admit(
    jobs: Vec<Claimed>,
    deadline: Instant,
    running: &Running,
    waiting: &mut VecDeque<Claimed>,
) {
    let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
    for job in jobs {
        let (deadline_tx, _) = watch::channel(deadline);
        running.insert(
            job.id,
            RunningJob {
                attempt: job.attempt,
                queue: job.queue.clone(),
                started: Instant::now(),
                task: None,
                deadline: deadline_tx,
            },
        );
        waiting.push_back(job);
    }
}

/// Takes the jobs still waiting for a handler out of the line, to be handed back unrun.
pub(super) fn hand_back_waiting(
    waiting: &mut VecDeque<Claimed>,
    running: &Running,
    give_back: &mut Vec<(JobId, i32)>,
) {
    let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
    for job in waiting.drain(..) {
        if running
            .get(&job.id)
            .is_some_and(|r| r.attempt == job.attempt && r.task.is_none())
        {
            running.remove(&job.id);
            log_job(
                job.id,
                &job.queue,
                job.attempt,
                "handed back",
                Duration::ZERO,
            );
            give_back.push((job.id, job.attempt));
        }
    }
}

/// Starts waiting jobs while handlers are free, in claim order. A job whose lease was lost
/// while it waited (a heartbeat found it rescued, or its deadline passed) is dropped from the
/// line: the reaper gives it back.
pub(super) fn start_waiting(
    waiting: &mut VecDeque<Claimed>,
    slots: &Arc<Semaphore>,
    running: &Running,
    report: &mut WorkerReport,
    mut spawn: impl FnMut(
        Claimed,
        tokio::sync::OwnedSemaphorePermit,
        watch::Receiver<Instant>,
    ) -> AbortHandle,
) {
    while !waiting.is_empty() {
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            return;
        };
        let Some(job) = waiting.pop_front() else {
            return;
        };
        let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = running
            .get_mut(&job.id)
            .filter(|r| r.attempt == job.attempt && r.task.is_none())
        else {
            continue; // its lease was lost while it waited (already logged)
        };
        if *entry.deadline.borrow() <= Instant::now() {
            running.remove(&job.id);
            log_job(
                job.id,
                &job.queue,
                job.attempt,
                "lease lost",
                Duration::ZERO,
            );
            report.lease_lost += 1;
            continue;
        }
        let deadline_rx = entry.deadline.subscribe();
        entry.started = Instant::now();
        let (id, attempt) = (job.id, job.attempt);
        // Spawning needs no lock, but keeps the entry and its task together.
        let task = spawn(job, permit, deadline_rx);
        if let Some(entry) = running.get_mut(&id).filter(|r| r.attempt == attempt) {
            entry.task = Some(task);
        }
    }
}
