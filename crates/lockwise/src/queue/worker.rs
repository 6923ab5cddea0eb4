//! The worker runtime: claims batches, runs handlers with bounded concurrency, heartbeats
//! their leases, acknowledges completions in the next claim, retries failures with backoff,
//! reaps expired leases, and shuts down gracefully.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

use super::{JobId, Queue};
use crate::error::Result;
use crate::options::Retry;

/// The handlers in flight: attempt and task of each job.
type Running = Arc<Mutex<HashMap<JobId, (i32, AbortHandle)>>>;

/// Aborts every handler still in flight when dropped: with it, dropping [`Worker::run`]'s
/// future stops its handlers instead of leaving them running unsupervised.
struct AbortHandlers(Running);

impl Drop for AbortHandlers {
    fn drop(&mut self) {
        let mut running = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, (_, task)) in running.drain() {
            task.abort();
        }
    }
}

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
    /// The queue.
    pub queue: String,
    /// What was enqueued.
    pub payload: Value,
}

/// What a worker did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Jobs completed.
    pub done: u64,
    /// Attempts that failed (retried or dead).
    pub failed: u64,
    /// Jobs given back unfinished at shutdown.
    pub handed_back: u64,
}

/// Runs handlers for one [`Queue`], on either database. See the [module docs](super).
#[derive(Debug, Clone)]
pub struct Worker {
    queue: Queue,
    id: String,
    concurrency: usize,
    batch: usize,
    lease: Duration,
    timeout: Option<Duration>,
    poll: Duration,
    grace: Duration,
    retry: Retry,
}

/// How one execution ended.
enum Outcome {
    Done,
    Failed(String),
}

struct Finished {
    id: JobId,
    attempt: i32,
    outcome: Outcome,
}

impl Worker {
    /// A worker for `queue`: concurrency 8, batches of 10, 30 s leases, no execution timeout,
    /// a 1 s fallback poll, 30 s of grace at shutdown, retries after 1 s doubling to 1 h.
    pub fn new(queue: Queue) -> Self {
        let id = format!(
            "{}-{}-{:04x}",
            hostname(),
            std::process::id(),
            rand::random::<u16>()
        );
        Worker {
            queue,
            id,
            concurrency: 8,
            batch: 10,
            lease: Duration::from_secs(30),
            timeout: None,
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            retry: Retry::exponential(Duration::from_secs(1), Duration::from_secs(3600)),
        }
    }

    /// How many handlers run at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The most jobs claimed in one statement.
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }

    /// The lease of a claimed job (at least 1 s), renewed every third of it while the handler
    /// runs; a job whose worker stops renewing is rescued by the reaper after it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// Fails a handler that runs longer than this, even while its lease is renewed.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// How often to look for jobs when no notification arrives.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }

    /// How long in-flight jobs may finish after shutdown is requested.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Retry delays: `min · 2^(attempt−1)` with jitter, at most `max` (the crate's
    /// [`Retry::exponential`]).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.retry = Retry::exponential(min, max.max(min));
        self
    }

    /// This worker's id, stored with the jobs it claims.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The delay before retrying after attempt `attempt` (1 for the first) failed.
    fn retry_delay(&self, attempt: i32) -> Duration {
        let failures = u32::try_from(attempt.saturating_sub(1)).unwrap_or(0);
        self.retry.backoff(failures).unwrap_or(Duration::ZERO)
    }

    /// Runs until `shutdown` is cancelled: then stops claiming, lets in-flight jobs finish
    /// within the grace period, and gives the rest back. Handler errors *and panics* are
    /// recorded as failed attempts.
    ///
    /// # Cancel safety
    ///
    /// Cancel `shutdown` to stop gracefully. Dropping the future instead stops at once: every
    /// handler still running is aborted, and so are the heartbeat, the reaper and the
    /// wake-ups. Nothing is handed back and nothing is acknowledged: the jobs it had claimed
    /// keep their leases until they run out, then a reaper gives them back with the attempt
    /// counted — including jobs that finished after the last claim, which will run again.
    pub async fn run<H, Fut, E>(
        self,
        handler: H,
        shutdown: CancellationToken,
    ) -> Result<WorkerReport>
    where
        H: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        self.queue.migrate().await?;
        let handler = Arc::new(handler);
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let running: Running = Arc::default();
        // This guard and `tasks` below stop the handlers and the background tasks whenever
        // `run` ends, also when its future is dropped.
        let _handlers = AbortHandlers(running.clone());
        let (finished_tx, mut finished_rx) = mpsc::unbounded_channel::<Finished>();
        let wake = Arc::new(Notify::new());
        let background = CancellationToken::new();
        let _stop_background = background.clone().drop_guard();
        let mut tasks = JoinSet::new();
        let store = self.queue.clone();
        let (w, b) = (wake.clone(), background.clone());
        tasks.spawn(async move { store.wake_ups(w, b).await });
        tasks.spawn(heartbeat(
            self.queue.clone(),
            running.clone(),
            self.lease,
            background.clone(),
        ));
        tasks.spawn(reaper(self.queue.clone(), self.lease, background.clone()));

        let mut report = WorkerReport::default();
        let mut acks: Vec<(JobId, i32)> = Vec::new();
        loop {
            while let Ok(f) = finished_rx.try_recv() {
                self.settle(f, &running, &mut acks, &mut report).await;
            }
            if shutdown.is_cancelled() {
                break;
            }
            let free = slots.available_permits().min(self.batch);
            let mut claimed_full = false;
            if free > 0 || !acks.is_empty() {
                let jobs = match self.queue.claim(&self.id, free, self.lease, &acks).await {
                    Ok(jobs) => {
                        acks.clear();
                        jobs
                    }
                    Err(error) => {
                        tracing::warn!(%error, "claim failed; retrying");
                        sleep(self.poll.min(Duration::from_secs(1))).await;
                        continue;
                    }
                };
                claimed_full = free > 0 && jobs.len() == free;
                for job in jobs {
                    let Ok(permit) = slots.clone().try_acquire_owned() else {
                        break; // cannot happen: we claimed at most the free slots
                    };
                    let ctx = JobContext {
                        id: job.id,
                        attempt: job.attempt,
                        max_attempts: job.max_attempts,
                        queue: self.queue.name().to_owned(),
                        payload: job.payload,
                    };
                    let task = execute(
                        handler.clone(),
                        ctx,
                        self.timeout,
                        finished_tx.clone(),
                        permit,
                    );
                    running
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(job.id, (job.attempt, task));
                }
            }
            if claimed_full {
                continue; // more work is likely waiting
            }
            tokio::select! {
                Some(f) = finished_rx.recv() => self.settle(f, &running, &mut acks, &mut report).await,
                _ = wake.notified() => {}
                _ = sleep(self.poll) => {}
                _ = shutdown.cancelled() => {}
            }
        }

        // Graceful shutdown: no more claims; in-flight jobs get the grace period.
        let deadline = Instant::now() + self.grace;
        while !running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            match tokio::time::timeout_at(deadline, finished_rx.recv()).await {
                Ok(Some(f)) => self.settle(f, &running, &mut acks, &mut report).await,
                _ => break,
            }
        }
        if !acks.is_empty()
            && let Err(error) = self.queue.complete(&acks).await
        {
            tracing::warn!(%error, "acknowledging finished jobs failed; the reaper will retry them");
        }
        let unfinished: Vec<(JobId, i32)> = {
            let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
            running
                .drain()
                .map(|(id, (attempt, task))| {
                    task.abort();
                    (id, attempt)
                })
                .collect()
        };
        if !unfinished.is_empty() {
            report.handed_back = self.queue.hand_back(&unfinished).await?;
        }
        Ok(report)
    }

    /// Books one finished execution: success is acknowledged with the next claim; a failure
    /// is recorded now.
    async fn settle(
        &self,
        f: Finished,
        running: &Mutex<HashMap<JobId, (i32, AbortHandle)>>,
        acks: &mut Vec<(JobId, i32)>,
        report: &mut WorkerReport,
    ) {
        running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&f.id);
        match f.outcome {
            Outcome::Done => {
                acks.push((f.id, f.attempt));
                report.done += 1;
            }
            Outcome::Failed(error) => {
                report.failed += 1;
                let delay = self.retry_delay(f.attempt);
                match self.queue.fail(f.id, f.attempt, &error, delay, false).await {
                    Ok(true) => {
                        tracing::info!(id = %f.id, attempt = f.attempt, %error, "job failed")
                    }
                    Ok(false) => {
                        tracing::warn!(id = %f.id, attempt = f.attempt, "failure not recorded: the job was rescued meanwhile")
                    }
                    Err(e) => {
                        tracing::warn!(id = %f.id, error = %e, "recording a failure failed; the reaper will retry the job")
                    }
                }
            }
        }
    }
}

/// Runs one handler in a task of its own (so a panic is caught) under the execution timeout.
fn execute<H, Fut, E>(
    handler: Arc<H>,
    ctx: JobContext,
    limit: Option<Duration>,
    finished: mpsc::UnboundedSender<Finished>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> AbortHandle
where
    H: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let (id, attempt) = (ctx.id, ctx.attempt);
    let inner = tokio::spawn(handler(ctx));
    let abort = inner.abort_handle();
    let stop_on_timeout = inner.abort_handle();
    tokio::spawn(async move {
        let outcome = match limit {
            Some(limit) => timeout(limit, inner).await,
            None => Ok(inner.await),
        };
        let outcome = match outcome {
            Ok(Ok(Ok(()))) => Outcome::Done,
            Ok(Ok(Err(e))) => Outcome::Failed(e.to_string()),
            Ok(Err(join)) if join.is_panic() => {
                Outcome::Failed(format!("handler panicked: {}", panic_message(join)))
            }
            Ok(Err(_)) => return, // aborted at shutdown: handed back
            Err(_) => {
                stop_on_timeout.abort();
                Outcome::Failed(format!("timed out after {:?}", limit.unwrap_or_default()))
            }
        };
        drop(permit);
        let _ = finished.send(Finished {
            id,
            attempt,
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

/// Extends the leases of running jobs every third of the lease.
async fn heartbeat(queue: Queue, running: Running, lease: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep(lease / 3) => {}
        }
        let jobs: Vec<(JobId, i32)> = running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, (attempt, _))| (*id, *attempt))
            .collect();
        if jobs.is_empty() {
            continue;
        }
        match queue.heartbeat(&jobs, lease).await {
            Ok(owned) if owned.len() < jobs.len() => {
                // Rescued elsewhere: stop the handlers that no longer own their job.
                let mut running = running.lock().unwrap_or_else(PoisonError::into_inner);
                for (id, _) in &jobs {
                    if !owned.contains(id)
                        && let Some((_, task)) = running.remove(id)
                    {
                        tracing::warn!(%id, "lease lost; stopping the handler");
                        task.abort();
                    }
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "heartbeat failed"),
        }
    }
}

/// Rescues expired leases every half lease (one reaper at a time across processes), and
/// looks after the table every couple of seconds.
async fn reaper(queue: Queue, lease: Duration, stop: CancellationToken) {
    let maintenance = Duration::from_secs(2);
    let mut next_reap = Instant::now() + lease / 2;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep(maintenance.min(lease / 2)) => {}
        }
        if let Err(error) = queue.maintain().await {
            tracing::warn!(%error, "table maintenance failed");
        }
        if Instant::now() >= next_reap {
            next_reap = Instant::now() + lease / 2;
            if let Err(error) = queue.reap().await {
                tracing::warn!(%error, "reaping failed");
            }
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned())
}
