//! The reaper: rescues expired leases, looks after the store and keeps the history's
//! retention.

use std::time::Duration;

use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use super::streak::Streak;
use crate::metrics;
use crate::queue::{JobState, Queue};

/// What a worker prunes, and how long it keeps it ([`Worker::retention`](super::Worker::retention)).
#[derive(Debug)]
pub(super) struct Retention {
    pub(super) queues: Vec<String>,
    pub(super) keep: Duration,
}

/// How often a worker with a retention prunes.
const RETENTION_EVERY: Duration = Duration::from_secs(1);

impl Retention {
    /// Prunes the done and cancelled jobs of every queue past the window.
    async fn prune(&self, queue: &Queue) -> crate::Result<()> {
        for name in &self.queues {
            let queue = queue.named(name);
            for state in [JobState::Done, JobState::Cancelled] {
                queue.prune(state, self.keep).await?;
            }
        }
        Ok(())
    }
}

/// Rescues expired leases every half lease (one reaper at a time across processes), and
/// looks after the store ten times a second (on PostgreSQL: truncates the drained segments
/// of its rings, which must keep up with a ring filling in a couple of seconds). A round
/// that takes long (the truncations, on a busy server) shortens the wait for the next one.
/// With a retention, prunes the history once a second.
pub(super) async fn reaper(
    queue: Queue,
    (queues, depth_every): (Vec<String>, Option<Duration>),
    lease: Duration,
    retention: Option<Retention>,
    stop: CancellationToken,
) {
    let every = Duration::from_millis(100).min(lease / 2);
    let mut rounds = tokio::time::interval_at(Instant::now() + every, every);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_reap = Instant::now() + lease / 2;
    let mut maintenance = Streak::new("table maintenance");
    let mut reaping = Streak::new("reaping");
    let mut next_prune = Instant::now() + RETENTION_EVERY;
    let mut pruning = Streak::new("retention");
    let mut next_sample = Instant::now();
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
        if let Some(retention) = retention.as_ref().filter(|_| Instant::now() >= next_prune) {
            next_prune = Instant::now() + RETENTION_EVERY;
            match timeout(lease, retention.prune(&queue)).await {
                Ok(Ok(())) => pruning.succeeded(),
                Ok(Err(error)) => pruning.failed(&error),
                Err(_) => pruning.failed(&"no answer in time"),
            }
            if stop.is_cancelled() {
                return;
            }
        }
        if Instant::now() >= next_reap {
            next_reap = Instant::now() + lease / 2;
            match timeout(lease, queue.protocol().reap()).await {
                Ok(Ok(reaped)) => {
                    metrics::reaped(reaped);
                    reaping.succeeded();
                }
                Ok(Err(error)) => reaping.failed(&error),
                Err(_) => reaping.failed(&"no answer in time"),
            }
        }
        if let Some(every) = depth_every.filter(|_| Instant::now() >= next_sample) {
            next_sample = Instant::now() + every;
            sample_depth(&queue, &queues, lease).await;
        }
    }
}

/// Sets `lockwise_queue_depth` for each of `queues` from their cheap counts
/// ([`Queue::stats`]); a failure only leaves the last sample.
async fn sample_depth(queue: &Queue, queues: &[String], lease: Duration) {
    for name in queues {
        let Ok(Ok(stats)) = timeout(lease, queue.named(name.as_str()).stats()).await else {
            continue;
        };
        for (state, n) in [
            ("ready", stats.ready),
            ("scheduled", stats.scheduled),
            ("running", stats.running),
            ("done", stats.done),
            ("dead", stats.dead),
            ("cancelled", stats.cancelled),
        ] {
            metrics::depth(name, state, n);
        }
        metrics::oldest_ready(name, stats.oldest_ready.unwrap_or_default());
    }
}
