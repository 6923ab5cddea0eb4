//! What the sustained benches share, on PostgreSQL ([`sustained`](crate::sustained)) and on
//! MariaDB/MySQL ([`sustained_mysql`](crate::sustained_mysql)): the load, the handlers'
//! ceiling, lockwise's side, and the producer that holds the queue near its depth.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use lockwise::queue::{Queue, Worker};

/// Jobs per enqueue of the producer.
pub(crate) const CHUNK: u64 = 500;

/// What the sustained bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Load {
    /// Handlers of lockwise's worker, and tasks of the floor: at most this many jobs run at
    /// once on either side.
    pub workers: usize,
    /// The depth the producer holds the queue near (jobs enqueued and not finished).
    pub depth: u64,
    /// How long one job runs (a sleep).
    pub job: Duration,
    /// How long finished jobs are kept, pruned once a second: lockwise's
    /// [`Worker::retention`], and on the floor's side a `DELETE` of its done rows. `None`:
    /// kept for the run.
    pub retention: Option<Duration>,
}

impl Load {
    /// `workers` (at least 1) running jobs of `job` each, with the queue held near `depth`.
    pub fn new(workers: usize, depth: u64, job: Duration) -> Self {
        Load {
            workers: workers.max(1),
            depth: depth.max(1),
            job,
            retention: None,
        }
    }

    /// The same load, with finished jobs kept for `keep` and pruned once a second.
    pub fn retention(self, keep: Duration) -> Self {
        Load {
            retention: Some(keep),
            ..self
        }
    }
}

impl Default for Load {
    /// 8 workers, a depth of 4,000, 1 ms jobs (issue 13's load).
    fn default() -> Self {
        Load {
            workers: 8,
            depth: 4_000,
            job: Duration::from_millis(1),
            retention: None,
        }
    }
}

/// How long the ceiling is measured at most.
pub(crate) const CEILING_RUN: Duration = Duration::from_secs(10);

/// The handlers alone: `load.workers` tasks each running `load.job` back to back for
/// `length`, with no queue at all; jobs/s. A 1 ms sleep takes longer than 1 ms (the timer
/// ticks by the millisecond), so this, not `workers / job`, is what bounds either side.
pub(crate) async fn ceiling(load: Load, length: Duration) -> f64 {
    let ran = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + length;
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..load.workers {
        let ran = ran.clone();
        set.spawn(async move {
            while Instant::now() < until {
                sleep(load.job).await;
                ran.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while set.join_next().await.is_some() {}
    ran.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// lockwise's side: one worker on `queue`, `load.workers` handlers, its default batch and
/// prefetch, and the load's retention; each job sleeps `load.job` and counts in `finished`.
pub(crate) fn lockwise_worker(
    queue: Queue,
    load: Load,
    finished: Arc<AtomicU64>,
    stop: CancellationToken,
) -> JoinHandle<Result<()>> {
    let mut worker = Worker::new(queue)
        .concurrency(load.workers)
        .poll_interval(Duration::from_millis(20))
        .grace(Duration::from_secs(5));
    if let Some(keep) = load.retention {
        worker = worker.retention(keep);
    }
    tokio::spawn(async move {
        worker
            .run(
                move |_job| {
                    let finished = finished.clone();
                    async move {
                        sleep(load.job).await;
                        finished.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, String>(())
                    }
                },
                stop,
            )
            .await
            .map(|_| ())
            .map_err(Error::from)
    })
}

/// Holds the queue near `load.depth` for `length` while `consumers` run, with
/// `produce(n, from)` enqueueing `n` jobs numbered from `from` (`enqueued` are in already);
/// then stops the consumers and returns the jobs finished per second.
pub(crate) async fn hold_depth<P, F>(
    load: Load,
    length: Duration,
    mut enqueued: u64,
    finished: &AtomicU64,
    consumers: JoinHandle<Result<()>>,
    stop: &CancellationToken,
    mut produce: P,
) -> Result<f64>
where
    P: FnMut(u64, u64) -> F,
    F: Future<Output = Result<u64>>,
{
    let started = Instant::now();
    let until = started + length;
    let mut failure = None;
    while Instant::now() < until && !consumers.is_finished() {
        let depth = enqueued.saturating_sub(finished.load(Ordering::Relaxed));
        if depth + CHUNK <= load.depth {
            match produce(CHUNK, enqueued).await {
                Ok(n) => enqueued += n,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        } else {
            sleep(Duration::from_millis(2)).await;
        }
    }
    let done = finished.load(Ordering::Relaxed);
    let took = started.elapsed();
    stop.cancel();
    let joined = consumers.await;
    if let Some(e) = failure {
        return Err(e);
    }
    joined.map_err(|e| Error::config(format!("a bench task failed: {e}")))??;
    if done == 0 {
        return Err(Error::config("the sustained bench finished no job"));
    }
    Ok(done as f64 / took.as_secs_f64())
}
