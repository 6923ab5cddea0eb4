//! Claims: one claim with the acknowledgements it carries, the confirmation of its jobs'
//! start, and the booking of a failed claim.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::{Instant, sleep, timeout_at};
use tokio_util::task::AbortOnDropHandle;

use super::Worker;
use crate::lease_clock::LeaseClock;
use crate::metrics::{self, JobEvent};
use crate::queue::{Claimed, JobId, Queue};

impl Worker {
    /// Books a failed claim: logged when claims start failing (not at every retry, which
    /// `failing` remembers with the last failure).
    pub(super) fn claim_failed(&self, failing: &mut Option<(Instant, String)>, error: String) {
        if failing.is_none() {
            let then = match self.give_up {
                Some(limit) => format!("gives up after {limit:?} of failures"),
                None => "waits for the database".to_owned(),
            };
            tracing::warn!(
                %error,
                "claim failed: the database is down, unreachable or refusing; retrying every \
                 {:?}; the worker {then} (logged again when claims succeed)",
                self.poll.min(Duration::from_secs(1))
            );
            *failing = Some((Instant::now(), error));
        } else if let Some((_, last)) = failing {
            tracing::debug!(%error, "claim failed again");
            *last = error;
        }
    }
}

/// One claim (with the acknowledgements it carries) and the confirmation of its jobs' start,
/// run beside the handlers.
pub(super) struct ClaimRequest {
    pub(super) queue: Queue,
    pub(super) names: Vec<String>,
    pub(super) worker: String,
    pub(super) limit: usize,
    pub(super) lease: Duration,
    pub(super) acks: Vec<(JobId, i32)>,
    /// Whether no job was running or waiting as the claim left (for `until_idle`).
    pub(super) idle: bool,
}

pub(super) struct ClaimDone {
    pub(super) answer: ClaimAnswer,
    /// How many jobs the claim asked for.
    pub(super) asked: usize,
    /// The claimed jobs' local deadline (see [`Worker`]).
    pub(super) deadline: Instant,
    pub(super) idle: bool,
    /// The claim and confirmation round trips.
    pub(super) took: Duration,
}

pub(super) enum ClaimAnswer {
    /// The jobs confirmed started before their deadline, and how
    /// many were claimed but could not be confirmed in time (the reaper gives them back,
    /// attempt not counted).
    Claimed {
        jobs: Vec<Claimed>,
        not_started: u64,
    },
    /// The claim failed; the acknowledgements it carried are to be sent again.
    Failed(crate::Error, Vec<(JobId, i32)>),
    /// No answer before the jobs' deadline; the acknowledgements are to be sent again.
    NoAnswer(Vec<(JobId, i32)>),
}

impl ClaimRequest {
    /// [`send`](Self::send) on a task of its own: decoding the claim's rows and confirming
    /// its jobs then use a core beside the worker's loop, which starts and books every job
    /// and is otherwise the bottleneck of short jobs. The task is aborted if the worker's
    /// future is dropped, as the claim was before.
    pub(super) async fn send_on_own_task(self) -> ClaimDone {
        let task = AbortOnDropHandle::new(tokio::spawn(self.send()));
        match task.await {
            Ok(done) => done,
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        }
    }

    async fn send(self) -> ClaimDone {
        // The jobs' deadline counts from this instant, before the request leaves.
        let sent = LeaseClock::start();
        let deadline = sent.deadline(self.lease).at;
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        // Bounded: past the deadline the answer is useless (the jobs must not start), and a
        // lost answer must not hang the worker.
        let claimed = sent
            .in_flight(
                self.lease,
                self.queue
                    .claim_from(&names, &self.worker, self.limit, self.lease, &self.acks),
            )
            .await;
        let answer = match claimed {
            Some(Ok(jobs)) => {
                let claimed = jobs.len();
                let jobs = confirm_start(&self.queue, jobs, deadline).await;
                metrics::claimed_in(sent.sent().elapsed());
                for job in &jobs {
                    metrics::jobs(&job.queue, JobEvent::Claimed, 1);
                    metrics::job_waited(&job.queue, job.waited);
                }
                ClaimAnswer::Claimed {
                    not_started: (claimed - jobs.len()) as u64,
                    jobs,
                }
            }
            Some(Err(error)) => ClaimAnswer::Failed(error, self.acks),
            None => ClaimAnswer::NoAnswer(self.acks),
        };
        ClaimDone {
            answer,
            asked: self.limit,
            deadline,
            idle: self.idle,
            took: sent.sent().elapsed(),
        }
    }
}

/// Confirms the start of freshly claimed jobs and returns those confirmed before
/// `deadline`: only they may run. The statement is idempotent, so it is retried until the
/// deadline when it fails; jobs left unconfirmed come back through the reaper without
/// their attempt counted.
async fn confirm_start(queue: &Queue, jobs: Vec<Claimed>, deadline: Instant) -> Vec<Claimed> {
    if jobs.is_empty() {
        return jobs;
    }
    let claimed: Vec<(JobId, i32)> = jobs.iter().map(|j| (j.id, j.attempt)).collect();
    let confirmed: HashSet<JobId> = loop {
        match timeout_at(deadline, queue.protocol().confirm_started(&claimed)).await {
            Ok(Ok(ids)) => break ids.into_iter().collect(),
            Ok(Err(error)) if Instant::now() < deadline => {
                tracing::warn!(%error, "confirming the start of claimed jobs failed; retrying");
                sleep(Duration::from_millis(50)).await;
            }
            _ => {
                tracing::warn!(
                    jobs = claimed.len(),
                    "could not confirm the start of claimed jobs before their deadline; \
                     they come back through the reaper, attempt not counted"
                );
                break HashSet::new();
            }
        }
    };
    jobs.into_iter()
        .filter(|j| confirmed.contains(&j.id))
        .collect()
}
