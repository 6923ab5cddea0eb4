//! The reaper: rescues expired leases and looks after the store.

use std::time::Duration;

use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use super::streak::Streak;
use crate::queue::Queue;

/// Rescues expired leases every half lease (one reaper at a time across processes), and
/// looks after the store ten times a second (on PostgreSQL: truncates the drained segments
/// of its rings, which must keep up with a ring filling in a couple of seconds). A round
/// that takes long (the truncations, on a busy server) shortens the wait for the next one.
pub(super) async fn reaper(queue: Queue, lease: Duration, stop: CancellationToken) {
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
            match timeout(lease, queue.protocol().reap()).await {
                Ok(Ok(_)) => reaping.succeeded(),
                Ok(Err(error)) => reaping.failed(&error),
                Err(_) => reaping.failed(&"no answer in time"),
            }
        }
    }
}
