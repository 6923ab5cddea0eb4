//! The paused queues among a worker's ([`Queue::pause`]): read at start and again every poll
//! interval, so that a worker stops claiming from a queue within one poll of its pause and
//! claims again within one poll of its resumption (at once when the worker is woken).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::{sleep, timeout};
use tokio_util::sync::CancellationToken;

use super::streak::Streak;
use crate::queue::Queue;

/// The worker's queues that are paused now, as last read.
pub(super) async fn read(queue: &Queue, mine: &[String], limit: Duration) -> Option<Vec<String>> {
    let paused = timeout(limit, queue.driver.paused()).await.ok()?.ok()?;
    Some(
        mine.iter()
            .filter(|q| paused.contains(q))
            .cloned()
            .collect(),
    )
}

/// Reads the paused queues among `mine` every `every` until `stop`, publishing each change;
/// a queue resumed wakes the worker. A failed read keeps the last answer.
pub(super) async fn watch_paused(
    queue: Queue,
    mine: Vec<String>,
    every: Duration,
    paused: watch::Sender<Vec<String>>,
    wake: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut reads = Streak::new("the paused queues");
    let limit = every.max(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = sleep(every) => {}
        }
        let Some(now) = read(&queue, &mine, limit).await else {
            reads.failed(&"no answer in time, or an error");
            continue;
        };
        reads.succeeded();
        let resumed = paused.borrow().iter().any(|q| !now.contains(q));
        paused.send_if_modified(|was| {
            let changed = *was != now;
            *was = now;
            changed
        });
        if resumed {
            wake.notify_one();
        }
    }
}
