//! Group commit for a backend's calls: while a few requests are on their way to the server,
//! the calls that come meanwhile wait in a queue and go as one request when one of those
//! returns. A lone caller sends its own call at once (no added latency); under load, each
//! round trip carries every call that arrived during the one before, so the server and the
//! client do one request's fixed work per batch instead of per call.
//!
//! The queue is drained by a spawned task, so a caller that goes away (its future dropped)
//! never strands the calls behind it; an answer whose caller went away is handed to
//! [`Batch::orphaned`] (a grant is given back).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// How one kind of call goes to the server as a batch.
#[async_trait]
pub(crate) trait Batch: Clone + Send + Sync + 'static {
    /// One call.
    type Call: Send + 'static;
    /// Its answer.
    type Answer: Send + 'static;

    /// Sends `calls` in one request; one answer per call, in order.
    async fn send(&self, calls: &[Self::Call]) -> Result<Vec<Self::Answer>>;

    /// An answer whose caller went away while its batch was on its way.
    async fn orphaned(&self, call: Self::Call, answer: Self::Answer) {
        let _ = (call, answer);
    }
}

type Waiting<B> = (
    <B as Batch>::Call,
    oneshot::Sender<Result<<B as Batch>::Answer>>,
);

/// The requests in flight and the calls waiting for one of them to return.
pub(crate) struct Coalescer<B: Batch> {
    state: Arc<Mutex<State<B>>>,
    /// The most calls in one request.
    most: usize,
    /// The most requests in flight at once.
    lanes: usize,
}

struct State<B: Batch> {
    /// Requests in flight.
    busy: usize,
    queue: Vec<Waiting<B>>,
}

impl<B: Batch> Coalescer<B> {
    /// At most `lanes` requests in flight at once, each of at most `most` calls.
    pub(crate) fn new(lanes: usize, most: usize) -> Self {
        Coalescer {
            state: Arc::new(Mutex::new(State {
                busy: 0,
                queue: Vec::new(),
            })),
            most: most.max(1),
            lanes: lanes.max(1),
        }
    }

    /// Sends `call` through `batch`: at once while fewer than `lanes` requests are in flight,
    /// otherwise with the calls that arrived meanwhile, when one of those has returned.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future never loses another caller's call. Its own call may still be sent;
    /// its answer then goes to [`Batch::orphaned`] (or, when it was sent alone, is dropped
    /// with the request, as for any call cut off in flight).
    pub(crate) async fn call(&self, batch: &B, call: B::Call) -> Result<B::Answer> {
        let rx = match self.enqueue(call) {
            Ok(rx) => rx,
            Err(call) => {
                // Alone: send it ourselves. The turn passes on when this future ends or is
                // dropped.
                let _turn = Turn {
                    state: self.state.clone(),
                    batch: batch.clone(),
                    most: self.most,
                };
                let mut answers = batch.send(std::slice::from_ref(&call)).await?;
                return match (answers.pop(), answers.is_empty()) {
                    (Some(answer), true) => Ok(answer),
                    _ => Err(missing_answer()),
                };
            }
        };
        match rx.await {
            Ok(answer) => answer,
            // The drainer was dropped with its runtime.
            Err(_) => Err(Error::backend_msg(
                "lockwise",
                "the runtime shut down while the call was queued",
            )),
        }
    }

    /// Queues `call` behind the requests in flight, or gives it back with a lane taken for it.
    fn enqueue(&self, call: B::Call) -> Result<oneshot::Receiver<Result<B::Answer>>, B::Call> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.busy < self.lanes {
            state.busy += 1;
            return Err(call);
        }
        let (tx, rx) = oneshot::channel();
        state.queue.push((call, tx));
        Ok(rx)
    }
}

fn missing_answer() -> Error {
    Error::backend_msg(
        "lockwise",
        "a batched request returned another number of answers than calls",
    )
}

/// The right to send: given back when its holder is done, or handed to a task that sends
/// what queued up meanwhile.
struct Turn<B: Batch> {
    state: Arc<Mutex<State<B>>>,
    batch: B,
    most: usize,
}

impl<B: Batch> Drop for Turn<B> {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.queue.is_empty() {
            state.busy -= 1;
            return;
        }
        drop(state);
        let (state, batch, most) = (self.state.clone(), self.batch.clone(), self.most);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(drain(state, batch, most));
            }
            // No runtime to send from: the waiting callers are told so by their dropped
            // senders.
            Err(_) => {
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                state.queue.clear();
                state.busy -= 1;
            }
        }
    }
}

/// Sends what is queued, a request at a time, until the queue is empty.
async fn drain<B: Batch>(state: Arc<Mutex<State<B>>>, batch: B, most: usize) {
    loop {
        let taken: Vec<Waiting<B>> = {
            let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
            if guard.queue.is_empty() {
                guard.busy -= 1;
                return;
            }
            let n = guard.queue.len().min(most);
            guard.queue.drain(..n).collect()
        };
        let (calls, senders): (Vec<B::Call>, Vec<_>) = taken.into_iter().unzip();
        match batch.send(&calls).await {
            Ok(answers) if answers.len() == calls.len() => {
                for ((call, tx), answer) in calls.into_iter().zip(senders).zip(answers) {
                    if let Err(Ok(answer)) = tx.send(Ok(answer)) {
                        let batch = batch.clone();
                        tokio::spawn(async move { batch.orphaned(call, answer).await });
                    }
                }
            }
            Ok(_) => {
                for tx in senders {
                    let _ = tx.send(Err(missing_answer()));
                }
            }
            Err(e) => {
                for tx in senders {
                    let _ = tx.send(Err(e.duplicate()));
                }
            }
        }
    }
}
