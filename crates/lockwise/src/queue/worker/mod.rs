//! The worker runtime: claims batches, confirms their start, runs handlers with bounded
//! concurrency, heartbeats their leases and cancels a handler whose lease may be gone,
//! acknowledges completions in the next claim, retries failures with backoff, reaps expired
//! leases, and shuts down gracefully.

mod claim;
mod context;
mod dispatch;
mod execute;
mod heartbeat;
mod maintenance;
mod pace;
mod paused;
mod presence;
mod running;
mod streak;
mod waiting;

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

// (`JobInfo` and `JobState` also serve the `super::` paths of `heartbeat::why_gone`.)
use super::{Claimed, JobId, JobInfo, JobState, Queue};
use crate::error::{Error, Result};
use crate::options::Retry;
use dispatch::Dispatcher;
use execute::{Finished, Limits, execute};
use heartbeat::{TakenAway, heartbeat};
use maintenance::{Retention, reaper};
use pace::SHORT_JOBS_BATCH;
use presence::{Identity, presence};
use running::{AbortHandlers, Running};
use waiting::{hand_back_waiting, start_waiting};

pub use context::JobContext;

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
    /// How long finished jobs are kept; `None`: until pruned by someone else.
    retention: Option<Duration>,
    /// How often the queues' depth is sampled for the metrics; `None`: never.
    depth_every: Option<Duration>,
    /// How many jobs to start before returning; `None`: no limit.
    max_jobs: Option<u64>,
}

/// How long a stopping worker waits for its background tasks' statements in flight.
const BACKGROUND_STOP: Duration = Duration::from_secs(2);

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
            crate::backend::inspect::hostname(),
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
            retention: None,
            depth_every: None,
            max_jobs: None,
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
    /// its retry is due before the worker runs out of work; with every queue of the worker
    /// [paused](super::Queue::pause) it returns once its jobs are done. `shutdown` still
    /// stops it earlier. Default `false`: run until `shutdown`.
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

    /// With `Some(n)`, [`run`](Self::run) starts at most `n` jobs, lets them finish, and
    /// returns (as a worker process recycled after `n` jobs): it never claims beyond what is
    /// left of `n`, so no job is claimed only to be handed back. Jobs claimed whose start
    /// could not be confirmed do not count. `shutdown` still stops it earlier; with
    /// [`until_idle`](Self::until_idle) it also returns once the queue is drained. Default
    /// `None`: no limit.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use lockwise::queue::Worker;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let report = Worker::new(queue)
    ///     .max_jobs(Some(100))
    ///     .run(|job| async move { println!("{}", job.payload); Ok::<_, String>(()) }, CancellationToken::new())
    ///     .await?;
    /// assert!(report.done + report.failed <= 100);
    /// # Ok(()) }
    /// ```
    pub fn max_jobs(mut self, n: Option<u64>) -> Self {
        self.max_jobs = n;
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

    /// Retention: keeps the jobs of this worker's queues that finished done or cancelled for
    /// `keep`, then prunes them ([`Queue::prune`]), once a second in the worker's maintenance
    /// (several workers take turns). Default: none, the history is kept until pruned.
    ///
    /// On PostgreSQL a pruned job is gone for every reader at once, and its row leaves the
    /// disk with its segment of the history's ring, truncated once every job in it is
    /// pruned: no `DELETE`, so no dead tuples. The disk therefore holds up to about a
    /// twelfth of `keep` (and at least a second) of history beyond the window. On
    /// MariaDB/MySQL pruning deletes the rows. Dead letters are not pruned by retention.
    ///
    /// ```no_run
    /// # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
    /// use std::time::Duration;
    /// use lockwise::queue::Worker;
    /// use tokio_util::sync::CancellationToken;
    /// Worker::new(queue)
    ///     .retention(Duration::from_secs(24 * 3600)) // a day of history
    ///     .run(|_job| async move { Ok::<_, String>(()) }, CancellationToken::new())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn retention(mut self, keep: Duration) -> Self {
        self.retention = Some(keep);
        self
    }

    /// Samples the depth of the worker's queues (their counts by state, from
    /// [`Queue::stats`]) every `every` into the `lockwise_queue_depth` gauge (see
    /// [`metrics`](crate::metrics)). Off by default: each sample is a query per queue.
    pub fn depth_metrics(mut self, every: Duration) -> Self {
        self.depth_every = Some(every);
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
        let every = self.poll.max(Duration::from_secs(1));
        let paused = paused::read(&self.queue, &queues, every).await;
        let (paused_tx, paused_rx) = watch::channel(paused.unwrap_or_default());
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
        tasks.spawn(paused::watch_paused(
            self.queue.clone(),
            queues.clone(),
            self.poll,
            paused_tx,
            wake.clone(),
            background.clone(),
        ));
        let taken = Arc::new(TakenAway::default());
        let me = Identity {
            id: self.id.clone(),
            host: crate::backend::inspect::hostname(),
            queues: queues.clone(),
            concurrency: self.concurrency,
        };
        tasks.spawn(presence(
            self.queue.clone(),
            me,
            running.clone(),
            self.lease,
            background.clone(),
        ));
        tasks.spawn(heartbeat(
            self.queue.clone(),
            running.clone(),
            self.lease,
            taken.clone(),
            background.clone(),
        ));
        let retention = self.retention.map(|keep| Retention {
            queues: queues.clone(),
            keep,
        });
        tasks.spawn(reaper(
            self.queue.clone(),
            (queues.clone(), self.depth_every),
            self.lease,
            retention,
            background.clone(),
        ));
        // Cancelled when the grace period of a shutdown ends: running handlers are asked to
        // stop then.
        let grace_over = CancellationToken::new();
        let limits = Limits {
            timeout: self.timeout,
            kill_after: self.kill_after,
            lease_warning: self.kill_after.min(self.lease / 3),
        };

        let mut d = Dispatcher::new(&self, queues, running.clone(), paused_rx);
        let mut gave_up: Option<String> = None;
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
                d.settle(&self, f).await;
            }
            start_waiting(
                &mut d.waiting,
                &slots,
                &running,
                &mut d.report,
                &mut spawn_job,
            );
            if shutdown.is_cancelled() || d.spent() || d.idle_while_paused(&self) {
                break;
            }
            let idle_full = d.send_claims(&self);
            // The clock of failures runs only while the worker tries to claim: with every
            // place taken and nothing to acknowledge, it sends no claim that could succeed.
            if idle_full && let Some((since, _)) = &mut d.failing {
                *since = Instant::now();
            }
            let give_up_at = match (&d.failing, self.give_up) {
                // None for a limit too far to count (Duration::MAX: never).
                (Some((since, _)), Some(limit)) => since.checked_add(limit),
                _ => None,
            };
            tokio::select! {
                Some(done) = d.claims.next(), if !d.claims.is_empty() => {
                    if d.claimed(&self, done) {
                        break; // drained
                    }
                }
                Some(f) = finished_rx.recv() => d.settle(&self, f).await,
                _ = wake.notified() => d.want_claim = true,
                () = sleep_until(d.not_before.unwrap_or_else(|| Instant::now() + self.poll)) => d.want_claim = true,
                () = sleep_until(give_up_at.unwrap_or_else(Instant::now)), if give_up_at.is_some() => {
                    gave_up = d.failing.take().map(|(_, error)| error);
                    break;
                }
                _ = shutdown.cancelled() => {}
            }
        }

        // Graceful shutdown: no more claims. A claim in flight is waited for (it is bounded
        // by its jobs' deadline). Claimed jobs get the grace period, then are asked to stop
        // and get `kill_after` more; those still waiting for a handler when the grace ends
        // are handed back without having run.
        d.drain_claims().await;
        let mut until = Instant::now() + self.grace;
        let mut asked_to_stop = false;
        loop {
            if !asked_to_stop {
                start_waiting(
                    &mut d.waiting,
                    &slots,
                    &running,
                    &mut d.report,
                    &mut spawn_job,
                );
            }
            if running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
            {
                break;
            }
            match tokio::time::timeout_at(until, finished_rx.recv()).await {
                Ok(Some(f)) => d.settle_only(&self, f).await,
                Err(_) if !asked_to_stop => {
                    asked_to_stop = true;
                    hand_back_waiting(&mut d.waiting, &running, &mut d.give_back);
                    grace_over.cancel();
                    until = Instant::now() + self.kill_after;
                }
                _ => break,
            }
        }
        // Executions that ended as the grace ran out: booked, not handed back.
        while let Ok(f) = finished_rx.try_recv() {
            d.settle_only(&self, f).await;
        }
        if !d.acks.is_empty()
            && let Err(error) = self.queue.protocol().complete(&d.acks).await
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
        d.give_back.extend(unfinished);
        if !d.give_back.is_empty() {
            match self.queue.protocol().hand_back(&d.give_back).await {
                Ok(handed_back) => d.report.handed_back = handed_back,
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
        let mut report = d.report;
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
}
