//! [`FlakyBackend`]: faults injected by wrapping the small [`Backend`] trait, so that every
//! backend can be tested against a server that fails, hangs or answers late.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockwise::backend::{Attempt, Backend, ReleaseWatch};
use lockwise::{Error, OwnerToken, Result};

/// One of the five calls of [`Backend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`Backend::try_acquire`].
    TryAcquire,
    /// [`Backend::extend`].
    Extend,
    /// [`Backend::release`].
    Release,
    /// [`Backend::holds`].
    Holds,
    /// [`Backend::watch`].
    Watch,
}

/// The faults planned for one operation.
#[derive(Debug, Default, Clone, Copy)]
struct Plan {
    /// How many of the next calls fail with a transient error, before reaching the backend.
    fail: u32,
    /// How many of the next calls never answer.
    hang: u32,
    /// How long each reply is held after the backend answered.
    delay: Duration,
}

#[derive(Debug, Default)]
struct Faults {
    plans: Mutex<HashMap<Op, Plan>>,
    granted: AtomicBool,
}

/// Wraps any [`Backend`] and injects faults into its calls, after bsm/redislock's
/// `flakyScripter`: fail the next N calls of an operation (a restarting server), hang the next
/// N calls (a server that never answers), or hold every reply for a while (replies that arrive
/// after the server acted). Clones share the plan, so a test keeps one to steer the wrapper
/// after handing another to [`Locker::new`](lockwise::Locker::new).
///
/// ```
/// # #[tokio::main] async fn main() {
/// use std::time::Duration;
/// use lockwise::backend::memory::MemoryBackend;
/// use lockwise::{LockOptions, Locker};
/// use lockwise_testkit::flaky::{FlakyBackend, Op};
///
/// let flaky = FlakyBackend::new(MemoryBackend::new());
/// flaky.fail_next(Op::TryAcquire, 1);
/// let locker = Locker::new(flaky.clone());
/// let opts = LockOptions::ttl(Duration::from_secs(5));
/// assert!(locker.try_acquire("k", &opts).await.unwrap_err().is_transient());
/// assert!(locker.try_acquire("k", &opts).await.unwrap().is_some());
/// assert!(flaky.granted());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FlakyBackend {
    inner: Arc<dyn Backend>,
    faults: Arc<Faults>,
}

enum Action {
    Fail,
    Hang,
    Pass(Duration),
}

impl FlakyBackend {
    /// Wraps `inner`, with no faults planned yet.
    pub fn new(inner: impl Backend) -> Self {
        Self::wrap(Arc::new(inner))
    }

    /// Wraps a shared backend, e.g. [`Locker::backend`](lockwise::Locker::backend).
    pub fn wrap(inner: Arc<dyn Backend>) -> Self {
        FlakyBackend {
            inner,
            faults: Arc::default(),
        }
    }

    fn plan(&self, op: Op, change: impl FnOnce(&mut Plan)) {
        let mut plans = self
            .faults
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        change(plans.entry(op).or_default());
    }

    /// The next `n` calls of `op` fail with a transient [`Error::Backend`] without reaching
    /// the backend.
    pub fn fail_next(&self, op: Op, n: u32) {
        self.plan(op, |p| p.fail = n);
    }

    /// The next `n` calls of `op` never answer (`u32::MAX`: none ever does again).
    pub fn hang_next(&self, op: Op, n: u32) {
        self.plan(op, |p| p.hang = n);
    }

    /// Every reply of `op` is held for `delay` after the backend answered (the call took
    /// effect on the server; its answer arrives late).
    pub fn delay_replies(&self, op: Op, delay: Duration) {
        self.plan(op, |p| p.delay = delay);
    }

    /// Whether the backend granted the last [`Op::TryAcquire`] that reached it, whatever
    /// happened to the reply.
    pub fn granted(&self) -> bool {
        self.faults.granted.load(Ordering::SeqCst)
    }

    fn next(&self, op: Op) -> Action {
        let mut action = Action::Pass(Duration::ZERO);
        self.plan(op, |p| {
            action = if p.hang > 0 {
                p.hang -= 1;
                Action::Hang
            } else if p.fail > 0 {
                p.fail -= 1;
                Action::Fail
            } else {
                Action::Pass(p.delay)
            };
        });
        action
    }

    /// Runs `call` on the backend under the faults planned for `op`.
    async fn call<T>(&self, op: Op, call: impl Future<Output = Result<T>>) -> Result<T> {
        let delay = match self.next(op) {
            Action::Hang => std::future::pending().await,
            Action::Fail => {
                return Err(Error::Backend {
                    backend: "flaky",
                    message: format!("injected failure of {op:?}"),
                    source: None,
                });
            }
            Action::Pass(delay) => delay,
        };
        let reply = call.await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        reply
    }
}

#[async_trait]
impl Backend for FlakyBackend {
    async fn try_acquire(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<Attempt> {
        let attempt = async {
            let attempt = self.inner.try_acquire(key, owner, ttl).await?;
            let granted = matches!(attempt, Attempt::Granted(_));
            self.faults.granted.store(granted, Ordering::SeqCst);
            Ok(attempt)
        };
        self.call(Op::TryAcquire, attempt).await
    }

    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> Result<bool> {
        self.call(Op::Extend, self.inner.extend(key, owner, ttl))
            .await
    }

    async fn release(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        self.call(Op::Release, self.inner.release(key, owner)).await
    }

    async fn holds(&self, key: &str, owner: OwnerToken) -> Result<bool> {
        self.call(Op::Holds, self.inner.holds(key, owner)).await
    }

    async fn watch(&self, key: &str) -> Result<ReleaseWatch> {
        self.call(Op::Watch, self.inner.watch(key)).await
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}
