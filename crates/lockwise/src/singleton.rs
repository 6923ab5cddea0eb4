//! A periodic job that runs at most once per period across every instance, with both layers
//! from the lesson: a lock so that usually only one instance does the work (efficiency), and
//! [`Store::run_once`] on `(job, period)` so that even when the lock fails — a paused holder,
//! a lost counter — the effect commits once (correctness).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;
use sqlx::{Postgres, Transaction};

use crate::error::{Error, Result};
use crate::locker::Locker;
use crate::options::LockOptions;
use crate::postgres::{Once, Store};

/// A job that runs once per period of wall-clock time (periods are counted from the Unix
/// epoch, so every instance agrees on which period it is).
///
/// ```no_run
/// # async fn demo(locker: lockwise::Locker, store: lockwise::postgres::Store) -> lockwise::Result<()> {
/// use std::time::Duration;
/// use lockwise::Singleton;
///
/// let nightly = Singleton::new(locker, store, "nightly-report", Duration::from_secs(24 * 3600));
/// nightly
///     .run_forever(|tx, period| {
///         Box::pin(async move {
///             sqlx::query("INSERT INTO reports (period) VALUES ($1)")
///                 .bind(period as i64)
///                 .execute(&mut **tx)
///                 .await
///?;
///             Ok::<_, lockwise::Error>(())
///         })
///     })
///     .await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Singleton {
    locker: Locker,
    store: Store,
    job: String,
    period: Duration,
}

impl Singleton {
    /// The job `job`, once per `period` (at least one second).
    pub fn new(locker: Locker, store: Store, job: impl Into<String>, period: Duration) -> Self {
        Singleton {
            locker,
            store,
            job: job.into(),
            period: period.max(Duration::from_secs(1)),
        }
    }

    /// The number of the period containing `at`.
    pub fn period_of(&self, at: SystemTime) -> u64 {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis() / self.period.as_millis().max(1)).unwrap_or(u64::MAX)
    }

    /// One attempt for the period containing `at`: `Ok(None)` when another instance holds the
    /// job's lock; otherwise the outcome of running `task(tx, period)` once for that period.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future rolls the task's transaction back (its marker too, so the period is
    /// not counted as done) and releases the job's lock on the runtime, as a dropped
    /// [`Guard`](crate::Guard) does; the TTL is the backstop.
    pub async fn tick<T, E, F>(&self, at: SystemTime, task: F) -> Result<Option<Once<T>>, E>
    where
        F: for<'t> FnOnce(
            &'t mut Transaction<'static, Postgres>,
            u64,
        ) -> BoxFuture<'t, Result<T, E>>,
        E: From<Error>,
    {
        let period = self.period_of(at);
        // The lock only saves duplicate work. A short TTL, renewed while the task runs, so
        // that an instance that dies mid-run does not keep the others off for the period.
        let opts = LockOptions::ttl(self.period.min(Duration::from_secs(30)));
        let Some(guard) = self.locker.try_acquire(&self.job, &opts).await? else {
            return Ok(None);
        };
        let outcome = self
            .store
            .run_once(&self.job, &period.to_string(), |tx| task(tx, period))
            .await;
        if let Err(error) = guard.release().await {
            tracing::warn!(job = %self.job, %error, "releasing the job lock failed; its TTL will");
        }
        outcome.map(Some)
    }

    /// Ticks at the start of every period, forever; errors are logged and the next period
    /// tried.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops it; a tick in progress is dropped as [`tick`](Self::tick)
    /// describes.
    pub async fn run_forever<T, E, F>(&self, mut task: F) -> Result<()>
    where
        F: for<'t> FnMut(
            &'t mut Transaction<'static, Postgres>,
            u64,
        ) -> BoxFuture<'t, Result<T, E>>,
        E: From<Error> + std::fmt::Display,
    {
        loop {
            let now = SystemTime::now();
            match self.tick(now, &mut task).await {
                Ok(Some(Once::Done(_))) => tracing::info!(job = %self.job, "ran"),
                Ok(_) => tracing::debug!(job = %self.job, "done elsewhere"),
                Err(error) => tracing::warn!(job = %self.job, %error, "run failed"),
            }
            let next = (self.period_of(now) + 1) as u128 * self.period.as_millis();
            let next = UNIX_EPOCH + Duration::from_millis(u64::try_from(next).unwrap_or(u64::MAX));
            let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(wait).await;
        }
    }
}
