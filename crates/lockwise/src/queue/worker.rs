//! The worker runtime: claims batches, confirms their start, runs handlers with bounded
//! concurrency, heartbeats their leases and cancels a handler whose lease may be gone,
//! acknowledges completions in the next claim, retries failures with backoff, reaps expired
//! leases, and shuts down gracefully.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::{Claimed, JobId, Queue};
use crate::error::{Error, Result};
use crate::lease::drift;
use crate::options::Retry;

/// One handler in flight.
struct RunningJob {
    attempt: i32,
    /// The job's queue, and when its handler started: for the log line of a job handed back.
    queue: String,
    started: Instant,
    /// `None` while the job waits for a free handler (prefetched, see
    /// [`Worker::prefetch`]).
    task: Option<AbortHandle>,
    /// The job's local deadline (see [`Worker`]): moved forward by successful heartbeats,
    /// watched by the execution, which cancels the handler when it passes.
    deadline: watch::Sender<Instant>,
}

/// The handlers in flight, by job.
type Running = Arc<Mutex<HashMap<JobId, RunningJob>>>;

/// How long this process may trust a lease of `lease` counted from the moment its request
/// left: the database counts from when *it* ran the statement, which is later, and clocks
/// drift a little (the same margin as a lock's, [`crate::lease`]).
fn trusted(sent: Instant, lease: Duration) -> Instant {
    sent + lease.saturating_sub(drift(lease))
}

/// Aborts every handler still in flight when dropped: with it, dropping [`Worker::run`]'s
/// future stops its handlers instead of leaving them running unsupervised.
struct AbortHandlers(Running);

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
    deadline: watch::Receiver<Instant>,
    stop: CancellationToken,
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
    /// Handlers cancelled because their job's local deadline passed without a successful
    /// heartbeat (the lease may have gone to another worker). Neither done nor failed: the
    /// reaper gives the job back.
    pub lease_lost: u64,
    /// Running jobs stopped because they were [cancelled](Queue::cancel) (seen at a
    /// heartbeat): neither done, failed nor lost; the job stays cancelled.
    pub cancelled: u64,
    /// Claimed jobs never started because the start could not be confirmed before their
    /// deadline (a claim whose reply came too late counts nowhere: it never arrived). The
    /// reaper gives them back without counting the attempt.
    pub not_started: u64,
}

/// Runs handlers for one [`Queue`], on either database. See the [module docs](super).
///
/// # A job's lease is a lease
///
/// The database rescues a job once its lease expired on *its* clock, and then another worker
/// may run it; this worker cannot see that happen while its link to the database is down. So
/// it keeps a **local deadline** per job, the lock's rule ([`crate::lease`]):
///
/// ```text
/// deadline = claim sent + lease − drift(lease)
/// ```
///
/// counted from the instant the claim left this process, which is earlier than the instant
/// the database started counting. Only a heartbeat that *succeeded* for the job moves it, to
/// `heartbeat sent + lease − drift`. Heartbeats start every third of the lease and each stays
/// in flight until its answer could no longer move the deadline, so a slow answer still
/// counts and the next heartbeat does not wait for it. When the deadline passes, the handler
/// is **cancelled** (its future dropped; `lockwise queue work` kills the command's process
/// group then) before any other worker can have the job, and the execution is neither
/// completed nor failed: the reaper gives the job back, with the attempt fencing that keeps a
/// late completion out.
///
/// # An attempt that never started is not a failed attempt
///
/// A claim marks its jobs running but not *started*. As soon as the claim's answer arrives,
/// the worker confirms the start of those jobs in one statement (compare-and-set on id and
/// attempt) and starts only the handlers confirmed before their deadline. A claim whose answer
/// is lost therefore leaves unconfirmed jobs, which the reaper gives back without counting the
/// attempt: a job is not dead-lettered with zero executions because a reply went missing.
/// The claim, the confirmation, the reaper and the table upkeep are all bounded by a timeout,
/// so a lost answer never hangs the worker.
///
/// # Asking a handler to stop before stopping it
///
/// With [`kill_after`](Self::kill_after) set, a handler is first *asked* to stop
/// ([`JobContext::stop_requested`]) and dropped only later: at the execution timeout (dropped
/// `kill_after` after the limit, the attempt failed "timed out"), at the end of a shutdown's
/// grace period (dropped `kill_after` later; not finished by then, it is handed back), and
/// `min(kill_after, lease / 3)` before the job's local deadline when no heartbeat moved it —
/// the drop then still happens *at* the deadline, never later. Without it (the default), a
/// handler is dropped at each of these moments without warning.
#[derive(Debug, Clone)]
pub struct Worker {
    queue: Queue,
    id: String,
    concurrency: usize,
    /// `None`: as many as the concurrency, and while short jobs are prefetched the prefetch
    /// shared among a few claims (see [`ahead_batch`]).
    batch: Option<usize>,
    /// `None`: from the pace of the handlers and the claims (see [`Worker::prefetch`]).
    prefetch: Option<usize>,
    lease: Duration,
    timeout: Option<Duration>,
    poll: Duration,
    grace: Duration,
    retry: Retry,
    until_idle: bool,
    kill_after: Duration,
    /// The queues claimed from; `None`: the queue's own name.
    queues: Option<Vec<String>>,
    /// How long claims may fail in a row before `run` gives up; `None`: never.
    give_up: Option<Duration>,
}

/// How one execution ended.
enum Outcome {
    Done,
    Failed(String),
    /// Stopped at the execution timeout: a failed attempt.
    TimedOut(Duration),
    /// Cancelled at the job's local deadline: neither done nor failed.
    LeaseLost,
    /// Stopped at the end of a shutdown's grace period: given back, not failed.
    HandedBack,
}

struct Finished {
    id: JobId,
    attempt: i32,
    queue: String,
    /// How long the handler ran.
    took: Duration,
    outcome: Outcome,
}

/// The one log line per job (at info level, target `lockwise::queue::worker`): its id,
/// queue, attempt, how it ended and how long its handler ran.
fn log_job(id: JobId, queue: &str, attempt: i32, outcome: &str, took: Duration) {
    let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    tracing::info!(%id, %queue, attempt, %outcome, ms, "job ended");
}

impl Worker {
    /// A worker for `queue`: concurrency 8, batches as large as the concurrency (100 while it
    /// claims ahead for short jobs), 30 s leases, no execution timeout,
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
            batch: None,
            prefetch: None,
            lease: Duration::from_secs(30),
            timeout: None,
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            retry: Retry::exponential(Duration::from_secs(1), Duration::from_secs(3600)),
            until_idle: false,
            kill_after: Duration::ZERO,
            queues: None,
            give_up: None,
        }
    }

    /// The queues to claim jobs from, all in the store of the worker's [`Queue`] (default:
    /// that queue's own name). One worker shares its [`concurrency`](Self::concurrency)
    /// across them and claims the ready jobs of all of them in priority order; each handler
    /// sees its job's queue in [`JobContext::queue`]. [`run`](Self::run) refuses an empty list
    /// or a name [`check_queue_name`](super::check_queue_name) refuses
    /// ([`Error::InvalidConfig`](crate::Error::InvalidConfig)); a name given twice counts
    /// once.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::Worker;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// Worker::new(queue)
    ///     .queues(["emails", "sms"])
    ///     .run(|job| async move { println!("{}: {}", job.queue, job.payload); Ok::<_, String>(()) }, CancellationToken::new())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn queues<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut queues: Vec<String> = Vec::new();
        for name in names {
            let name = name.into();
            if !queues.contains(&name) {
                queues.push(name);
            }
        }
        self.queues = Some(queues);
        self
    }

    /// How many handlers run at once.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// The most jobs claimed in one statement (default: the
    /// [`concurrency`](Self::concurrency), and while short jobs are
    /// [prefetched](Self::prefetch) a quarter of the prefetch, from 100 to 500). A claim asks
    /// for as many jobs as there are free places — free handlers, plus the prefetch — up to
    /// this.
    ///
    /// Each claim is one statement with a cost of its own beside the cost of each job it
    /// moves, so short jobs go several times faster in claims of 100 than in claims of 10,
    /// and faster again in a few claims of 500 than in many of 100 (`lockwise bench queue`);
    /// long ones are claimed only for free handlers, so that a worker does not take jobs
    /// another worker's idle handlers could run.
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = Some(n.max(1));
        self
    }

    /// How many claimed jobs may wait for a free handler, so that the next batches are claimed
    /// while the current one runs (default: what the handlers finish in four claim round
    /// trips, at least one [`batch`](Self::batch) and at most 3,000, in claims of a quarter of
    /// it, from 100 to 500 jobs; with a batch set, at most 15 batches; `0`: claim only for
    /// free handlers). While short jobs come back full, further claims go out beside those in
    /// flight, up to 16.
    ///
    /// A waiting job is held in memory with its payload: with payloads of many kilobytes,
    /// set a lower prefetch to bound the worker's memory.
    ///
    /// A waiting job is confirmed started and its lease is heartbeated like a running one's;
    /// it starts as soon as a handler is free. Prefetching only pays when a job is short next
    /// to a claim's round trip, and it makes a long job wait behind another while a different
    /// worker may be idle, so the worker prefetches only while its handlers run no longer
    /// than four claim round trips — on average over the recent jobs, and the longest one
    /// running now —; otherwise it claims for free handlers only.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = Some(n);
        self
    }

    /// The most jobs per claim: for free handlers, and while short jobs are prefetched.
    fn batch_sizes(&self) -> (usize, usize) {
        match self.batch {
            Some(n) => (n, n),
            None => (self.concurrency, self.concurrency.max(SHORT_JOBS_BATCH)),
        }
    }

    /// The lease of a claimed job (at least 1 s), renewed every third of it while the handler
    /// runs; a job whose worker stops renewing is rescued by the reaper after it, and its
    /// handler is cancelled at the job's local deadline, before that (see [`Worker`]).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// Fails a handler that runs longer than this, even while its lease is renewed.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// How often to look for jobs when no notification arrives (at least 1 ms). On
    /// MariaDB/MySQL, which has no notifications, it is how soon an idle worker sees a new
    /// job.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// Gives up when no claim has succeeded for `limit` (the database down, unreachable or
    /// refusing): [`run`](Self::run) then stops as at a shutdown (running handlers get the
    /// grace period, bounded by their leases) and returns
    /// [`Error::Backend`](crate::Error::Backend) with the last failure. Default: never, the
    /// worker waits for the database, logging once when claims start failing and once when
    /// they succeed again. `lockwise queue work` gives up after 30 s.
    pub fn give_up_after(mut self, limit: Duration) -> Self {
        self.give_up = Some(limit);
        self
    }

    /// With `true`, [`run`](Self::run) drains the queue and returns by itself (as
    /// graphile-worker's `--once`): once a claim made while no handler runs finds no ready
    /// job, it stops claiming and returns, as after a shutdown. Jobs not ready yet (delayed,
    /// or waiting for a retry) do not keep it running; a failed attempt is retried only if
    /// its retry is due before the worker runs out of work. `shutdown` still stops it
    /// earlier. Default `false`: run until `shutdown`.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::Worker;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let report = Worker::new(queue)
    ///     .until_idle(true)
    ///     .run(|job| async move { println!("{}", job.payload); Ok::<_, String>(()) }, CancellationToken::new())
    ///     .await?;
    /// println!("drained: {} done, {} failed", report.done, report.failed);
    /// # Ok(()) }
    /// ```
    pub fn until_idle(mut self, until_idle: bool) -> Self {
        self.until_idle = until_idle;
        self
    }

    /// How long in-flight jobs may finish after shutdown is requested.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long a handler has between being asked to stop
    /// ([`JobContext::stop_requested`]) and having its future dropped; default zero: dropped
    /// at once, without being asked. The moments:
    ///
    /// - **Execution timeout** ([`timeout`](Self::timeout)): asked at the limit, dropped
    ///   `kill_after` later if still running. The attempt is a failure, "timed out after …",
    ///   whatever the handler then returns.
    /// - **End of the grace period** at shutdown: every handler still running is asked and
    ///   gets `kill_after` more. One that then returns `Ok` is done; one that returns an error
    ///   or is dropped is handed back, its attempt not counted against it (a shutdown is not
    ///   the job's fault).
    /// - **The job's local deadline** (see [`Worker`]): asked at
    ///   `deadline − min(kill_after, lease / 3)` unless a heartbeat moved the deadline by
    ///   then, and dropped *at* the deadline as without `kill_after`: this never moves later,
    ///   for it is what keeps a job from running on two workers. A handler that returns `Ok`
    ///   meanwhile is done (its completion is compare-and-set, so a late one is refused);
    ///   one that returns an error counts as lease lost, not failed.
    ///
    /// Whatever the moment, the drop is a cancellation: code after an `.await` does not run,
    /// and what the handler started outside its future (a process, a request in flight) goes
    /// on unless its drop stops it, as `lockwise queue work`'s does (SIGTERM when asked,
    /// SIGKILL of the process group when dropped). A request to stop is never taken back.
    pub fn kill_after(mut self, kill_after: Duration) -> Self {
        self.kill_after = kill_after;
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

    /// Runs until `shutdown` is cancelled (or, with [`until_idle`](Self::until_idle), until
    /// the queue is drained): then stops claiming, lets in-flight jobs finish within the
    /// grace period, asks those still running to stop and gives them
    /// [`kill_after`](Self::kill_after) more, and gives the rest back. Handler errors *and panics* are
    /// recorded as failed attempts; a handler cancelled at its job's local deadline is not
    /// (see [`Worker`]).
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
        let queues: Vec<String> = match &self.queues {
            Some(queues) => queues.clone(),
            None => vec![self.queue.name().to_owned()],
        };
        queues
            .iter()
            .try_for_each(|name| super::check_queue_name(name))?;
        if queues.is_empty() {
            return Err(crate::Error::config("a worker needs at least one queue"));
        }
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
        let listened = queues.clone();
        tasks.spawn(async move {
            let names: Vec<&str> = listened.iter().map(String::as_str).collect();
            store.wake_ups(&names, w, b).await;
        });
        let taken = Arc::new(TakenAway::default());
        tasks.spawn(heartbeat(
            self.queue.clone(),
            running.clone(),
            self.lease,
            taken.clone(),
            background.clone(),
        ));
        tasks.spawn(reaper(self.queue.clone(), self.lease, background.clone()));
        // Cancelled when the grace period of a shutdown ends: running handlers are asked to
        // stop then.
        let grace_over = CancellationToken::new();
        let limits = Limits {
            timeout: self.timeout,
            kill_after: self.kill_after,
            lease_warning: self.kill_after.min(self.lease / 3),
        };

        let mut report = WorkerReport::default();
        let mut acks: Vec<(JobId, i32)> = Vec::new();
        // Handlers stopped at the end of the grace period that did not finish: handed back.
        let mut give_back: Vec<(JobId, i32)> = Vec::new();
        let (batch_for_free, batch_ahead) = self.batch_sizes();
        let max_claims = claims_in_flight(self.concurrency);
        // An explicit prefetch is held to; the default follows the pace, up to this. With a
        // batch the caller set, claims do not grow with the prefetch, so it stays at 15 of
        // them (the cap before claims ahead grew).
        let most_ahead = self.prefetch.unwrap_or(match self.batch {
            Some(_) => (batch_ahead * (MAX_CLAIMS - 1)).min(MAX_PREFETCH),
            None => MAX_PREFETCH,
        });
        // Confirmed jobs waiting for a free handler, in claim order (also in `running`).
        let mut waiting: VecDeque<Claimed> = VecDeque::new();
        // Claims (each with its confirmation) in flight while handlers run, and how many jobs
        // they asked for in all.
        let mut claims: FuturesUnordered<Pin<Box<dyn Future<Output = ClaimDone> + Send>>> =
            FuturesUnordered::new();
        let mut reserved = 0usize;
        // Whether something may have changed since the last claim that found less than it
        // asked for: a job finished, a notification, the poll interval.
        let mut want_claim = true;
        // Whether the last claim got all it asked for: more work is likely waiting, and
        // further claims may go out beside one in flight.
        let mut busy = false;
        let mut not_before: Option<Instant> = None;
        // Since when claims fail, and the last failure: logged once when claims start failing
        // and once when they succeed again, not at every retry.
        let mut failing: Option<(Instant, String)> = None;
        let mut gave_up: Option<String> = None;
        let mut pace = Pace::default();
        let mut spawn_job = |job: Claimed, permit, deadline_rx: watch::Receiver<Instant>| {
            let ctx = JobContext {
                id: job.id,
                attempt: job.attempt,
                max_attempts: job.max_attempts,
                queue: job.queue,
                payload: job.payload,
                deadline: deadline_rx.clone(),
                stop: CancellationToken::new(),
            };
            execute(
                handler.clone(),
                ctx,
                limits,
                deadline_rx,
                grace_over.clone(),
                finished_tx.clone(),
                permit,
            )
        };
        loop {
            while let Ok(f) = finished_rx.try_recv() {
                pace.handler(&f);
                self.settle(f, &running, &mut acks, &mut give_back, &mut report)
                    .await;
                want_claim = true;
            }
            start_waiting(&mut waiting, &slots, &running, &mut report, &mut spawn_job);
            if shutdown.is_cancelled() {
                break;
            }
            // Set below when every place is taken and no claim is in flight or due.
            let mut idle_full = false;
            if not_before.is_none_or(|at| Instant::now() >= at) {
                not_before = None;
                let (held, idle, longest) = {
                    let running = running.lock().unwrap_or_else(PoisonError::into_inner);
                    let longest = running
                        .values()
                        .filter(|job| job.task.is_some())
                        .map(|job| job.started.elapsed())
                        .max()
                        .unwrap_or_default();
                    (running.len(), running.is_empty(), longest)
                };
                let (places, batch, most_claims) = if pace.short_jobs(longest) {
                    let ahead = match self.prefetch {
                        Some(n) => n,
                        None => pace.ahead(self.concurrency, batch_ahead, most_ahead),
                    };
                    (
                        self.concurrency + ahead,
                        ahead_batch(self.batch, batch_ahead, ahead),
                        MAX_CLAIMS,
                    )
                } else {
                    (self.concurrency, batch_for_free, max_claims)
                };
                idle_full = claims.is_empty()
                    && places.saturating_sub(held + reserved) == 0
                    && acks.is_empty();
                loop {
                    let free = places.saturating_sub(held + reserved).min(batch);
                    let launch = if claims.is_empty() {
                        (want_claim || busy) && (free > 0 || !acks.is_empty())
                    } else {
                        busy && free == batch && claims.len() < most_claims
                    };
                    if !launch {
                        break;
                    }
                    want_claim = false;
                    reserved += free;
                    let request = ClaimRequest {
                        queue: self.queue.clone(),
                        names: queues.clone(),
                        worker: self.id.clone(),
                        limit: free,
                        lease: self.lease,
                        acks: std::mem::take(&mut acks),
                        idle: idle && claims.is_empty(),
                    };
                    claims.push(Box::pin(request.send_on_own_task()));
                }
            }
            // The clock of failures runs only while the worker tries to claim: with every
            // place taken and nothing to acknowledge, it sends no claim that could succeed.
            if idle_full && let Some((since, _)) = &mut failing {
                *since = Instant::now();
            }
            let give_up_at = match (&failing, self.give_up) {
                // None for a limit too far to count (Duration::MAX: never).
                (Some((since, _)), Some(limit)) => since.checked_add(limit),
                _ => None,
            };
            tokio::select! {
                Some(done) = claims.next(), if !claims.is_empty() => {
                    reserved = reserved.saturating_sub(done.asked);
                    pace.claim(done.took);
                    match done.answer {
                        ClaimAnswer::Claimed { jobs, not_started } => {
                            if let Some((since, _)) = failing.take() {
                                let ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
                                tracing::warn!(failing_ms = ms, "claims succeed again");
                            }
                            let asked = done.asked;
                            report.not_started += not_started;
                            if self.until_idle && done.idle && asked > 0 && jobs.is_empty() && not_started == 0 {
                                if claims.is_empty() {
                                    break; // drained
                                }
                                // Another claim still in flight may hold the jobs this one
                                // skipped (SKIP LOCKED): the next idle claim decides.
                                want_claim = true;
                            }
                            // More work is likely waiting when the claim got all it asked for.
                            busy = asked > 0 && jobs.len() + usize::try_from(not_started).unwrap_or(0) == asked;
                            admit(jobs, done.deadline, &running, &mut waiting);
                        }
                        ClaimAnswer::Failed(error, sent) => {
                            self.claim_failed(&mut failing, error.to_string());
                            busy = false;
                            acks.splice(0..0, sent);
                            not_before = Some(Instant::now() + self.poll.min(Duration::from_secs(1)));
                            want_claim = true;
                        }
                        ClaimAnswer::NoAnswer(sent) => {
                            self.claim_failed(
                                &mut failing,
                                "no answer before the claim's lease would have run out (jobs it \
                                 may have claimed come back through the reaper, attempt not \
                                 counted)"
                                    .to_owned(),
                            );
                            acks.splice(0..0, sent);
                            want_claim = true;
                        }
                    }
                }
                Some(f) = finished_rx.recv() => {
                    pace.handler(&f);
                    self.settle(f, &running, &mut acks, &mut give_back, &mut report).await;
                    want_claim = true;
                }
                _ = wake.notified() => want_claim = true,
                () = sleep_until(not_before.unwrap_or_else(|| Instant::now() + self.poll)) => want_claim = true,
                () = sleep_until(give_up_at.unwrap_or_else(Instant::now)), if give_up_at.is_some() => {
                    gave_up = failing.take().map(|(_, error)| error);
                    break;
                }
                _ = shutdown.cancelled() => {}
            }
        }

        // Graceful shutdown: no more claims. A claim in flight is waited for (it is bounded
        // by its jobs' deadline). Claimed jobs get the grace period, then are asked to stop
        // and get `kill_after` more; those still waiting for a handler when the grace ends
        // are handed back without having run.
        while let Some(done) = claims.next().await {
            match done.answer {
                ClaimAnswer::Claimed {
                    jobs, not_started, ..
                } => {
                    report.not_started += not_started;
                    admit(jobs, done.deadline, &running, &mut waiting);
                }
                ClaimAnswer::Failed(_, sent) | ClaimAnswer::NoAnswer(sent) => acks.extend(sent),
            }
        }
        let mut until = Instant::now() + self.grace;
        let mut asked_to_stop = false;
        loop {
            if !asked_to_stop {
                start_waiting(&mut waiting, &slots, &running, &mut report, &mut spawn_job);
            }
            if running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
            {
                break;
            }
            match tokio::time::timeout_at(until, finished_rx.recv()).await {
                Ok(Some(f)) => {
                    self.settle(f, &running, &mut acks, &mut give_back, &mut report)
                        .await
                }
                Err(_) if !asked_to_stop => {
                    asked_to_stop = true;
                    hand_back_waiting(&mut waiting, &running, &mut give_back);
                    grace_over.cancel();
                    until = Instant::now() + self.kill_after;
                }
                _ => break,
            }
        }
        // Executions that ended as the grace ran out: booked, not handed back.
        while let Ok(f) = finished_rx.try_recv() {
            self.settle(f, &running, &mut acks, &mut give_back, &mut report)
                .await;
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
                .map(|(id, job)| {
                    if let Some(task) = job.task {
                        task.abort();
                    }
                    log_job(
                        id,
                        &job.queue,
                        job.attempt,
                        "handed back",
                        job.started.elapsed(),
                    );
                    (id, job.attempt)
                })
                .collect()
        };
        give_back.extend(unfinished);
        if !give_back.is_empty() {
            match self.queue.hand_back(&give_back).await {
                Ok(handed_back) => report.handed_back = handed_back,
                Err(e) if gave_up.is_none() => return Err(e),
                Err(_) => {} // the reaper rescues them; the reason to report is the one below
            }
        }
        // The background tasks are stopped and waited for: the maintenance stops only between
        // two statements, since a statement dropped half way would go on running on the
        // server after `run` returned (and, say, hold locks that a DROP SCHEMA right after
        // needs). Bounded, for a server that stopped answering.
        background.cancel();
        let _ = timeout(BACKGROUND_STOP, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        report.cancelled += taken.cancelled.load(Relaxed);
        report.lease_lost += taken.lease_lost.load(Relaxed);
        if let (Some(error), Some(limit)) = (gave_up, self.give_up) {
            return Err(Error::backend_msg(
                "queue",
                format!("gave up: no claim succeeded for {limit:?}; the last failure: {error}"),
            ));
        }
        Ok(report)
    }

    /// Books a failed claim: logged when claims start failing (not at every retry, which
    /// `failing` remembers with the last failure).
    fn claim_failed(&self, failing: &mut Option<(Instant, String)>, error: String) {
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

    /// Books one finished execution: success is acknowledged with the next claim; a failure
    /// is recorded now; a handler cancelled at its deadline is only counted.
    async fn settle(
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
        let (outcome, error) = match f.outcome {
            Outcome::LeaseLost => {
                log("lease lost");
                report.lease_lost += 1;
                return;
            }
            Outcome::Done => {
                log("done");
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
        let delay = self.retry_delay(f.attempt);
        match self.queue.fail(f.id, f.attempt, &error, delay, false).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(id = %f.id, attempt = f.attempt, "failure not recorded: the job was rescued meanwhile")
            }
            Err(e) => {
                tracing::warn!(id = %f.id, error = %e, "recording a failure failed; the reaper will retry the job")
            }
        }
    }
}

/// The most claims a worker of `concurrency` handlers has in flight at once — as many as
/// its handlers, from 4 to 16 —: the first whenever there is room, the others only while
/// claims come back full and there is room for a whole batch. A claim's answer waits for the
/// commit's WAL flush, so claims in flight side by side share the flushes (group commit), as
/// the same handlers split among several workers would.
fn claims_in_flight(concurrency: usize) -> usize {
    concurrency.clamp(4, MAX_CLAIMS)
}

/// The most claims in flight at once, and always while short jobs are prefetched.
const MAX_CLAIMS: usize = 16;

/// How long a stopping worker waits for its background tasks' statements in flight.
const BACKGROUND_STOP: Duration = Duration::from_secs(2);

/// The most jobs a worker claims ahead by default. Draining 100k no-op jobs with one Worker
/// of 8 handlers: 45.9k jobs/s with 2,000 (one bench run), 48.8–51.4k with 3,000 (two),
/// where 8 Workers of one handler ran at 46.9k and 50.2–50.3k. It stays below the 3,200
/// leases of the PostgreSQL lease ring, so that one worker's prefetch alone does not fill it.
const MAX_PREFETCH: usize = 3_000;

/// Claim round trips: a job is short (worth prefetching) when it runs no longer than this
/// many, and the default prefetch holds this many round trips of work ahead of the handlers.
const ROUND_TRIPS: u32 = 4;

/// The least batch while short jobs are prefetched: the claim's own cost is then shared by
/// at least 100 jobs.
const SHORT_JOBS_BATCH: usize = 100;

/// While short jobs are prefetched, each claim asks for this fraction of the jobs held ahead,
/// from [`SHORT_JOBS_BATCH`] to [`MAX_AHEAD_BATCH`] jobs (see [`ahead_batch`]): four claims,
/// or more of 500 for a prefetch above 2,000.
const CLAIMS_AHEAD: usize = 4;

/// The largest default claim while short jobs are prefetched. Larger is not faster: draining
/// 100k no-op jobs, two claims of 1,000 in flight ran at 15k jobs/s where four of 500 ran at
/// 41–43k, and eight of 250 at 36–42k (the cause of the drop at 1,000 is not known; a
/// statement over ~16 KB is one suspect, see the README's bulk enqueue figures).
const MAX_AHEAD_BATCH: usize = 500;

/// The size of each claim while short jobs are prefetched, `ahead` jobs held ahead of the
/// handlers: the batch the caller set, or the prefetch shared among [`CLAIMS_AHEAD`] claims,
/// from `least` (a batch) to [`MAX_AHEAD_BATCH`].
///
/// A claim costs about as much again as the jobs it moves (on PostgreSQL its plan spans
/// every ready segment, and is planned again in each connection after a segment's
/// truncation or an ANALYZE), and claims in flight side by side skip each other's locked
/// rows. Draining 10k no-op jobs, four claims of 375–500 took 20–30 % less server CPU and
/// time than sixteen of 100 holding as many jobs; with 1 ms jobs the prefetch is about a
/// batch, and the claims stay at 100 (fewer leases held, sooner truncated).
fn ahead_batch(set: Option<usize>, least: usize, ahead: usize) -> usize {
    match set {
        Some(n) => n,
        None => (ahead / CLAIMS_AHEAD).clamp(least, MAX_AHEAD_BATCH.max(least)),
    }
}

/// One claim (with the acknowledgements it carries) and the confirmation of its jobs' start,
/// run beside the handlers.
struct ClaimRequest {
    queue: Queue,
    names: Vec<String>,
    worker: String,
    limit: usize,
    lease: Duration,
    acks: Vec<(JobId, i32)>,
    /// Whether no job was running or waiting as the claim left (for `until_idle`).
    idle: bool,
}

struct ClaimDone {
    answer: ClaimAnswer,
    /// How many jobs the claim asked for.
    asked: usize,
    /// The claimed jobs' local deadline (see [`Worker`]).
    deadline: Instant,
    idle: bool,
    /// The claim and confirmation round trips.
    took: Duration,
}

enum ClaimAnswer {
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
    /// (with no-op jobs, one worker's loop on one core was the bottleneck: 30k jobs/s where
    /// eight workers of one handler reached 36k). The task is aborted if the worker's future
    /// is dropped, as the claim was before.
    async fn send_on_own_task(self) -> ClaimDone {
        let task = AbortOnDropHandle::new(tokio::spawn(self.send()));
        match task.await {
            Ok(done) => done,
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        }
    }

    async fn send(self) -> ClaimDone {
        // The jobs' deadline counts from this instant, before the request leaves.
        let sent = Instant::now();
        let deadline = trusted(sent, self.lease);
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        // Bounded: past the deadline the answer is useless (the jobs must not start), and a
        // lost answer must not hang the worker.
        let claimed = timeout_at(
            deadline,
            self.queue
                .claim_from(&names, &self.worker, self.limit, self.lease, &self.acks),
        )
        .await;
        let answer = match claimed {
            Ok(Ok(jobs)) => {
                let claimed = jobs.len();
                let jobs = confirm_start(&self.queue, jobs, deadline).await;
                ClaimAnswer::Claimed {
                    not_started: (claimed - jobs.len()) as u64,
                    jobs,
                }
            }
            Ok(Err(error)) => ClaimAnswer::Failed(error, self.acks),
            Err(_) => ClaimAnswer::NoAnswer(self.acks),
        };
        ClaimDone {
            answer,
            asked: self.limit,
            deadline,
            idle: self.idle,
            took: sent.elapsed(),
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
        match timeout_at(deadline, queue.confirm_started(&claimed)).await {
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

/// Recent handler run times and claim round trips, to decide whether prefetching pays
/// (see [`Worker::prefetch`]).
#[derive(Debug, Default)]
struct Pace {
    handler: Option<Duration>,
    claim: Option<Duration>,
}

impl Pace {
    /// An average that follows the recent values (weight 1/8 for the newest).
    fn blend(average: &mut Option<Duration>, value: Duration) {
        *average = Some(average.map_or(value, |a| (a * 7 + value) / 8));
    }

    fn handler(&mut self, finished: &Finished) {
        if matches!(finished.outcome, Outcome::Done | Outcome::Failed(_)) {
            Self::blend(&mut self.handler, finished.took);
        }
    }

    fn claim(&mut self, took: Duration) {
        Self::blend(&mut self.claim, took);
    }

    /// Whether jobs are short enough to prefetch: handlers run no longer than four claim
    /// round trips — on average lately, and the longest running one so far —; not before
    /// both are known.
    fn short_jobs(&self, longest_running: Duration) -> bool {
        matches!((self.handler, self.claim),
            (Some(handler), Some(claim))
                if handler <= claim * ROUND_TRIPS && longest_running <= claim * ROUND_TRIPS)
    }

    /// How many jobs to hold ahead of `concurrency` busy handlers (Little's law): what they
    /// finish in [`ROUND_TRIPS`] claim round trips, at least `least` (a batch), at
    /// most `most`. No-op jobs get `most`, which keeps many claims in flight; 1 ms jobs on
    /// 8 handlers, with 2 ms claims, a batch: few jobs wait, few leases are held, and the
    /// lease ring's segments drain soon after its clock passes them.
    fn ahead(&self, concurrency: usize, least: usize, most: usize) -> usize {
        let (Some(handler), Some(claim)) = (self.handler, self.claim) else {
            return least.min(most);
        };
        let per_handler = (claim * ROUND_TRIPS).as_secs_f64() / handler.as_secs_f64();
        let needed = (concurrency as f64 * per_handler).ceil();
        if needed.is_finite() && needed < most as f64 {
            (needed as usize).clamp(least.min(most), most)
        } else {
            most
        }
    }
}

/// Puts freshly confirmed jobs in line for a handler, under their claim's `deadline`.
fn admit(
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
fn hand_back_waiting(
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
fn start_waiting(
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
struct Limits {
    /// The execution timeout.
    timeout: Option<Duration>,
    /// From a stop request at the timeout or at the end of the grace period to the drop.
    kill_after: Duration,
    /// How long before the job's local deadline the handler is asked to stop:
    /// `min(kill_after, lease / 3)` (zero: not asked, only dropped at the deadline).
    lease_warning: Duration,
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
fn execute<H, Fut, E>(
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
    let (id, attempt, queue) = (ctx.id, ctx.attempt, ctx.queue.clone());
    let ask = ctx.stop.clone();
    let started = Instant::now();
    let mut inner = tokio::spawn(handler(ctx));
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

/// The answer to one heartbeat, with what it was sent for.
struct Beat {
    sent: Instant,
    jobs: Vec<(JobId, i32)>,
    /// `None`: no answer while it could still have moved a deadline.
    answer: Option<Result<Vec<JobId>>>,
}

/// Extends the leases of running jobs every third of the lease, and moves the local deadline
/// of each job a heartbeat extended. Each heartbeat stays in flight until its answer could no
/// longer move a deadline (`sent + lease − drift`); the next one starts on schedule anyway.
async fn heartbeat(
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
                let sent = Instant::now();
                in_flight.push(async move {
                    let answer = timeout_at(trusted(sent, lease), queue.heartbeat(&jobs, lease))
                        .await
                        .ok();
                    Beat { sent, jobs, answer }
                });
            }
            Some(()) = classifying.next(), if !classifying.is_empty() => {}
            Some(beat) = in_flight.next(), if !in_flight.is_empty() => {
                let beat: Beat = beat;
                match beat.answer {
                    Some(Ok(owned)) => {
                        beats.succeeded();
                        let gone = extended(&running, &beat.jobs, &owned, trusted(beat.sent, lease));
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
struct TakenAway {
    cancelled: AtomicU64,
    lease_lost: AtomicU64,
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

/// Rescues expired leases every half lease (one reaper at a time across processes), and
/// looks after the store ten times a second (on PostgreSQL: truncates the drained segments
/// of its rings, which must keep up with a ring filling in a couple of seconds). A round
/// that takes long (the truncations, on a busy server) shortens the wait for the next one.
async fn reaper(queue: Queue, lease: Duration, stop: CancellationToken) {
    let every = Duration::from_millis(100).min(lease / 2);
    let mut rounds = tokio::time::interval_at(Instant::now() + every, every);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_reap = Instant::now() + lease / 2;
    let mut maintenance = Streak::new("table maintenance");
    let mut reaping = Streak::new("reaping");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = rounds.tick() => {}
        }
        // Bounded, so that a lost answer does not stop this worker's reaping for good.
        match timeout(lease, queue.maintain(&stop)).await {
            // (A maintenance stopped with the worker returns at once: no success to book.)
            Ok(Ok(())) if !stop.is_cancelled() => maintenance.succeeded(),
            Ok(Ok(())) => {}
            Ok(Err(error)) => maintenance.failed(&error),
            Err(_) => maintenance.failed(&"no answer in time"),
        }
        if stop.is_cancelled() {
            return;
        }
        if Instant::now() >= next_reap {
            next_reap = Instant::now() + lease / 2;
            match timeout(lease, queue.reap()).await {
                Ok(Ok(_)) => reaping.succeeded(),
                Ok(Err(error)) => reaping.failed(&error),
                Err(_) => reaping.failed(&"no answer in time"),
            }
        }
    }
}

/// A background task's failures, logged once a streak: at the first failure, and when the
/// task succeeds again (a database that is down made every task warn at every round).
struct Streak {
    what: &'static str,
    since: Option<Instant>,
}

impl Streak {
    fn new(what: &'static str) -> Self {
        Streak { what, since: None }
    }

    fn failed(&mut self, error: &dyn Display) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
            tracing::warn!(%error, "{} failed; logged again when it succeeds", self.what);
        } else {
            tracing::debug!(%error, "{} failed again", self.what);
        }
    }

    fn succeeded(&mut self) {
        if let Some(since) = self.since.take() {
            let failing_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
            tracing::warn!(failing_ms, "{} succeeds again", self.what);
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefetch_is_claimed_in_a_few_claims_of_100_to_500() {
        // No-op jobs: the default prefetch of 3,000 goes in claims of 500.
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, MAX_PREFETCH), 500);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 2_000), 500);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 1_500), 375);
        // 1 ms jobs hold about a batch ahead: claims stay at 100 (fewer leases held).
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 64), 100);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 400), 100);
        assert_eq!(ahead_batch(None, SHORT_JOBS_BATCH, 10_000), MAX_AHEAD_BATCH);
        // More handlers than the largest claim: a claim still fills them all.
        assert_eq!(ahead_batch(None, 800, 1_500), 800);
        // A batch the caller set caps every claim, whatever the prefetch.
        assert_eq!(ahead_batch(Some(10), 10, 1_500), 10);
        assert_eq!(ahead_batch(Some(1_000), 1_000, 1_500), 1_000);
    }
}
