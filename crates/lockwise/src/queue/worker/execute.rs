//! One execution: runs a handler under its limits and books how it ended.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::running::RunningJob;
use super::{JobContext, Worker, WorkerReport, log_job};
use crate::metrics::{self, JobEvent};
use crate::queue::JobId;

/// How one execution ended.
pub(super) enum Outcome {
    Done,
    Failed(String),
    /// Stopped at the execution timeout: a failed attempt.
    TimedOut(Duration),
    /// Cancelled at the job's local deadline: neither done nor failed.
    LeaseLost,
    /// Stopped at the end of a shutdown's grace period: given back, not failed.
    HandedBack,
}

pub(super) struct Finished {
    pub(super) id: JobId,
    pub(super) attempt: i32,
    pub(super) max_attempts: i32,
    pub(super) queue: String,
    /// How long the handler ran.
    pub(super) took: Duration,
    pub(super) outcome: Outcome,
}

impl Worker {
    /// Books one finished execution: success is acknowledged with the next claim; a failure
    /// is recorded now; a handler cancelled at its deadline is only counted.
    pub(super) async fn settle(
        &self,
        f: Finished,
        running: &Mutex<HashMap<JobId, RunningJob>>,
        acks: &mut Vec<(JobId, i32)>,
        give_back: &mut Vec<(JobId, i32)>,
        report: &mut WorkerReport,
    ) {
        {
            let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
            if running.get(&f.id).is_some_and(|j| j.attempt == f.attempt) {
                running.remove(&f.id);
            }
        }
        let log = |outcome: &str| log_job(f.id, &f.queue, f.attempt, outcome, f.took);
        metrics::job_ran(&f.queue, f.took);
        let (outcome, error) = match f.outcome {
            Outcome::LeaseLost => {
                log("lease lost");
                report.lease_lost += 1;
                return;
            }
            Outcome::Done => {
                log("done");
                metrics::jobs(&f.queue, JobEvent::Completed, 1);
                acks.push((f.id, f.attempt));
                report.done += 1;
                return;
            }
            Outcome::HandedBack => {
                log("handed back");
                give_back.push((f.id, f.attempt));
                return;
            }
            Outcome::TimedOut(limit) => ("timed out", format!("timed out after {limit:?}")),
            Outcome::Failed(error) => ("failed", error),
        };
        let ms = u64::try_from(f.took.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(id = %f.id, queue = %f.queue, attempt = f.attempt, %outcome, ms, %error, "job ended");
        report.failed += 1;
        metrics::jobs(&f.queue, JobEvent::Failed, 1);
        let next = if f.attempt < f.max_attempts {
            JobEvent::Retried
        } else {
            JobEvent::Dead
        };
        let delay = self.retry_delay(f.attempt);
        match self
            .queue
            .protocol()
            .fail(f.id, f.attempt, &error, delay, false)
            .await
        {
            Ok(true) => metrics::jobs(&f.queue, next, 1),
            Ok(false) => {
                tracing::warn!(id = %f.id, attempt = f.attempt, "failure not recorded: the job was rescued meanwhile")
            }
            Err(e) => {
                tracing::warn!(id = %f.id, error = %e, "recording a failure failed; the reaper will retry the job")
            }
        }
    }
}

/// Why a handler was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The execution timeout passed.
    Timeout,
    /// The grace period of a shutdown ended.
    Shutdown,
    /// The job's local deadline is near and no heartbeat moved it.
    Lease,
}

/// When an execution asks its handler to stop, and when it drops it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The execution timeout.
    pub(super) timeout: Option<Duration>,
    /// From a stop request at the timeout or at the end of the grace period to the drop.
    pub(super) kill_after: Duration,
    /// How long before the job's local deadline the handler is asked to stop:
    /// `min(kill_after, lease / 3)` (zero: not asked, only dropped at the deadline).
    pub(super) lease_warning: Duration,
}

/// How an execution ended, from its handler's result and why it was asked to stop; `None`
/// for a handler aborted from outside (handed back at shutdown, or its job lost).
fn outcome<E: Display>(
    joined: std::result::Result<std::result::Result<(), E>, tokio::task::JoinError>,
    asked: Option<Stop>,
    limit: Option<Duration>,
) -> Option<Outcome> {
    Some(match (joined, asked) {
        // Whatever the handler returned once told to stop: the attempt took too long.
        (_, Some(Stop::Timeout)) => Outcome::TimedOut(limit.unwrap_or_default()),
        (Ok(Ok(())), _) => Outcome::Done,
        // Stopped for reasons that are not the job's fault: not a failed attempt.
        (_, Some(Stop::Shutdown)) => Outcome::HandedBack,
        (_, Some(Stop::Lease)) => Outcome::LeaseLost,
        (Ok(Err(e)), None) => Outcome::Failed(e.to_string()),
        (Err(join), None) if join.is_panic() => {
            Outcome::Failed(format!("handler panicked: {}", panic_message(join)))
        }
        (Err(_), None) => return None,
    })
}

/// Runs one handler in a task of its own (so a panic is caught) under the execution timeout;
/// asks it to stop (its [`JobContext::stop_requested`]) at the timeout, at the end of the
/// shutdown's grace (`grace_over`) and shortly before the job's local deadline, drops it
/// `kill_after` after the first two, and cancels it when the deadline passes.
pub(super) fn execute<H, Fut, E>(
    handler: Arc<H>,
    ctx: JobContext,
    limits: Limits,
    mut deadline: watch::Receiver<Instant>,
    grace_over: CancellationToken,
    finished: mpsc::UnboundedSender<Finished>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> AbortHandle
where
    H: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let (id, attempt, max_attempts, queue) =
        (ctx.id, ctx.attempt, ctx.max_attempts, ctx.queue.clone());
    let ask = ctx.stop.clone();
    let started = Instant::now();
    // The handler's span carries the job, for a subscriber that exports spans.
    let span = tracing::info_span!("job", %id, %queue, attempt);
    let mut inner = tokio::spawn(tracing::Instrument::instrument(handler(ctx), span));
    let abort = inner.abort_handle();
    let stop = inner.abort_handle();
    tokio::spawn(async move {
        let limit_at = limits.timeout.map(|limit| started + limit);
        // Whether the deadline can still move (its sender lives in the running map).
        let mut renewable = true;
        let mut asked: Option<Stop> = None;
        // Once asked at the timeout or at the end of the grace: when the handler is dropped.
        let mut kill_at: Option<Instant> = None;
        // A timeout or the end of the grace (which set `kill_at`) overrides an earlier
        // warning of the lease, which alone never drops the handler before the deadline.
        let request = |why: Stop, asked: &mut Option<Stop>| {
            *asked = Some(why);
            ask.cancel();
        };
        let outcome = loop {
            let lease_ends = *deadline.borrow_and_update();
            let warn_at = lease_ends
                .checked_sub(limits.lease_warning)
                .unwrap_or(lease_ends);
            tokio::select! {
                joined = &mut inner => match outcome(joined, asked, limits.timeout) {
                    Some(outcome) => break outcome,
                    None => return,
                },
                () = sleep_until(limit_at.unwrap_or(lease_ends)), if kill_at.is_none() && limit_at.is_some_and(|at| at < lease_ends) => {
                    request(Stop::Timeout, &mut asked);
                    kill_at = Some(Instant::now() + limits.kill_after);
                }
                () = sleep_until(kill_at.unwrap_or(lease_ends)), if kill_at.is_some_and(|at| at < lease_ends) => {
                    stop.abort();
                    let joined = (&mut inner).await;
                    break outcome(joined, asked, limits.timeout).unwrap_or(Outcome::HandedBack);
                }
                () = sleep_until(warn_at), if asked.is_none() && warn_at < lease_ends => {
                    if *deadline.borrow() > lease_ends {
                        continue; // renewed just now
                    }
                    request(Stop::Lease, &mut asked);
                }
                () = sleep_until(lease_ends) => {
                    if *deadline.borrow() > Instant::now() {
                        continue; // renewed just now
                    }
                    stop.abort();
                    // Wait until the handler's future is dropped: only then is it stopped.
                    let _ = (&mut inner).await;
                    tracing::warn!(
                        %id,
                        attempt,
                        late_ms = lease_ends.elapsed().as_millis(),
                        "no successful heartbeat before the job's deadline: handler cancelled"
                    );
                    break Outcome::LeaseLost;
                }
                () = grace_over.cancelled(), if kill_at.is_none() => {
                    request(Stop::Shutdown, &mut asked);
                    kill_at = Some(Instant::now() + limits.kill_after);
                }
                changed = deadline.changed(), if renewable => {
                    renewable = changed.is_ok();
                }
            }
        };
        drop(permit);
        let _ = finished.send(Finished {
            id,
            attempt,
            max_attempts,
            queue,
            took: started.elapsed(),
            outcome,
        });
    });
    abort
}

fn panic_message(join: tokio::task::JoinError) -> String {
    let panic = join.into_panic();
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}
