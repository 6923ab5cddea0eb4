//! Turns among the waiters of one key in one [`Locker`](crate::Locker): a FIFO queue per key,
//! in front of the server. Only the first local waiter asks the server; the others wait here,
//! in the order they came, and the holder's pass goes to the next one when its guard is
//! released, dropped or lost. So a releaser that asks again queues behind the waiters already
//! there instead of barging back in, and waiters that cannot win cost no round trips.
//!
//! This orders the tasks of one process (one `Locker` and its clones). Between processes the
//! server decides, as before; a lock is never *granted* here — a pass only allows asking.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The queues of one locker, by key; a key's queue exists while someone holds or waits for it.
#[derive(Debug, Default)]
pub(crate) struct Gates {
    queues: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// The right to ask the server for a key, first in this locker's line; passed on when dropped.
#[derive(Debug)]
pub(crate) struct Pass {
    permit: Option<OwnedSemaphorePermit>,
    gates: Arc<Gates>,
    key: String,
}

impl Gates {
    /// The key's queue, made if there is none.
    fn queue(&self, key: &str) -> Arc<Semaphore> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(1)))
            .clone()
    }

    /// The pass for `key` if nobody in this locker holds or waits for it.
    pub(crate) fn try_enter(self: &Arc<Self>, key: &str) -> Option<Pass> {
        let permit = self.queue(key).try_acquire_owned().ok();
        let pass = self.pass(key, permit);
        pass.permit.is_some().then_some(pass)
    }

    /// Waits in line for the pass of `key` (first come, first served).
    ///
    /// Cancel safe: a dropped call leaves the line without ever holding the pass.
    pub(crate) async fn enter(self: &Arc<Self>, key: &str) -> Pass {
        let queue = self.queue(key);
        // Made before the wait, so that a cancelled wait still forgets an unused queue.
        let mut pass = self.pass(key, None);
        // Never closed: the semaphore lives as long as someone holds a clone of it.
        pass.permit = queue.acquire_owned().await.ok();
        pass
    }

    fn pass(self: &Arc<Self>, key: &str, permit: Option<OwnedSemaphorePermit>) -> Pass {
        Pass {
            permit,
            gates: self.clone(),
            key: key.to_owned(),
        }
    }

    /// Forgets the key's queue once nobody holds or waits for it.
    fn tidy(&self, key: &str) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if queues
            .get(key)
            .is_some_and(|q| Arc::strong_count(q) == 1 && q.available_permits() == 1)
        {
            queues.remove(key);
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        // Passed on first, then the queue forgotten if nobody else is in it.
        drop(self.permit.take());
        self.gates.tidy(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_take_turns_in_order_and_the_queue_is_forgotten_after() {
        let gates = Arc::new(Gates::default());
        let first = gates.try_enter("k").expect("free");
        assert!(gates.try_enter("k").is_none(), "held");
        assert!(gates.try_enter("other").is_some(), "keys are independent");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for n in 0..3 {
            let (gates, order) = (gates.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _pass = gates.enter("k").await;
                order.lock().unwrap().push(n);
            }));
            tokio::task::yield_now().await; // each queues before the next
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert!(gates.queues.lock().unwrap().is_empty());
    }

    /// A waiter cancelled after the holder passed the key on to it, before it woke: the queue
    /// is still forgotten.
    #[tokio::test]
    async fn a_waiter_cancelled_as_it_is_handed_the_pass_leaves_no_queue_behind() {
        let gates = Arc::new(Gates::default());
        let held = gates.try_enter("k").unwrap();
        let waiter = {
            let gates = gates.clone();
            tokio::spawn(async move { gates.enter("k").await })
        };
        tokio::task::yield_now().await; // the waiter is in line
        drop(held); // the pass goes to the waiter, which has not run since
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        assert!(gates.queues.lock().unwrap().is_empty());
        assert!(gates.try_enter("k").is_some(), "free again");
    }
}
