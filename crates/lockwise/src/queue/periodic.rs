//! Periodic jobs: the lesson's singleton periodic job, done as a queue feature. A schedule
//! enqueues **exactly one job per period**, whatever the number of schedulers running it, and
//! the queue's workers run it like any other job (leases, retries, dead letters).
//!
//! Each schedule has a row in the store holding the newest period it enqueued. A tick locks
//! the row, enqueues the periods due since, moves the row forward and commits, all in one
//! transaction: a racing scheduler waits for the row, then finds the period taken; one killed
//! mid-tick leaves nothing behind (its transaction rolls back) and the next tick, anyone's,
//! does the work. Periods are read on the database's clock, so schedulers on machines whose
//! clocks disagree still agree on which periods are due. Unlike an idempotency key alone, the
//! row keeps working after retention has removed a period's job and freed its key.
//!
//! A period missed while no scheduler ran is enqueued once at the next tick (the newest one;
//! [`Periodic::catch_up`] adds older ones). A new schedule starts with the next period, not
//! one that began before it existed.
//!
//! ```no_run
//! # async fn demo(queue: lockwise::queue::Queue) -> lockwise::Result<()> {
//! use lockwise::queue::{Job, Schedule};
//! use serde_json::json;
//!
//! let report = queue.periodic(
//!     "hourly-report",
//!     Schedule::cron("0 * * * *")?, // UTC; a sixth field first for seconds
//!     Job::new(json!({"report": "sales"})),
//! )?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! report.run(shutdown).await?; // on every instance: one job per hour in all
//! # Ok(()) }
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use tokio_util::sync::CancellationToken;

use super::{Job, JobId, Queue};
use crate::error::{Error, Result};

/// The longest schedule name, in bytes: the job key it makes (`periodic:<name>:<period>`) fits
/// in [`MAX_JOB_KEY_LEN`](super::MAX_JOB_KEY_LEN).
pub const MAX_SCHEDULE_NAME_LEN: usize = 200;

/// Checks a schedule name: 1 to [`MAX_SCHEDULE_NAME_LEN`] bytes, no NUL.
///
/// # Errors
///
/// [`Error::InvalidConfig`] naming what is wrong.
pub fn check_schedule_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_SCHEDULE_NAME_LEN || name.contains('\0') {
        return Err(Error::config(format!(
            "invalid schedule name {:?}: use 1 to {MAX_SCHEDULE_NAME_LEN} bytes without NUL",
            name.chars().take(40).collect::<String>()
        )));
    }
    Ok(())
}

/// The most missed periods one tick enqueues besides the newest ([`Periodic::catch_up`]).
pub const MAX_CATCH_UP: u32 = 10_000;

/// The longest a scheduler sleeps between two ticks, however far the next period is: a tick
/// is cheap, and a long sleep would hide a schedule edited or a clock that moved.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// When a periodic job is due: a cron pattern or a fixed interval, on UTC.
#[derive(Debug, Clone)]
pub struct Schedule(Kind);

#[derive(Debug, Clone)]
enum Kind {
    Cron(Box<Cron>),
    /// Every this many seconds, from the Unix epoch.
    Every(i64),
}

impl Schedule {
    /// A cron pattern, on UTC: five fields (`minute hour day-of-month month day-of-week`, as
    /// crontab), or six with seconds first. `@hourly`, `@daily` and the like work too.
    ///
    /// ```
    /// use lockwise::queue::Schedule;
    /// assert!(Schedule::cron("*/15 * * * *").is_ok()); // every quarter of an hour
    /// assert!(Schedule::cron("30 0 3 * * MON").is_ok()); // Mondays at 03:00:30
    /// assert!(Schedule::cron("61 * * * *").is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a pattern that does not parse, naming why.
    pub fn cron(pattern: &str) -> Result<Self> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(pattern.trim())
            .map_err(|e| Error::config(format!("invalid cron pattern {pattern:?}: {e}")))?;
        Ok(Schedule(Kind::Cron(Box::new(cron))))
    }

    /// Every `period` (whole seconds, at least one), aligned on the Unix epoch: `every(1 h)`
    /// is due on every hour.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for less than a second or a fraction of one.
    pub fn every(period: Duration) -> Result<Self> {
        if period < Duration::from_secs(1) || period.subsec_nanos() != 0 {
            return Err(Error::config(format!(
                "a periodic interval is whole seconds, at least 1 s, not {period:?}"
            )));
        }
        let secs = i64::try_from(period.as_secs())
            .map_err(|_| Error::config(format!("the interval {period:?} is too long")))?;
        Ok(Schedule(Kind::Every(secs)))
    }

    /// The periods (Unix seconds) at or before `now`, newest first, after `after`, at most
    /// `most`.
    fn due(&self, now: i64, after: Option<i64>, most: usize) -> Vec<i64> {
        let later = |t: &i64| after.is_none_or(|a| *t > a);
        match &self.0 {
            Kind::Every(p) => {
                let newest = now - now.rem_euclid(*p);
                (0..most as i64)
                    .map(|i| newest - i * p)
                    .take_while(later)
                    .collect()
            }
            Kind::Cron(cron) => {
                let Some(now) = DateTime::<Utc>::from_timestamp(now, 0) else {
                    return Vec::new();
                };
                cron.iter_from(now, croner::Direction::Backward)
                    .map(|t| t.timestamp())
                    .take_while(later)
                    .take(most)
                    .collect()
            }
        }
    }

    /// The first period after `now` (Unix seconds), if any.
    fn next_after(&self, now: i64) -> Option<i64> {
        match &self.0 {
            Kind::Every(p) => Some(now - now.rem_euclid(*p) + p),
            Kind::Cron(cron) => {
                let now = DateTime::<Utc>::from_timestamp(now, 0)?;
                cron.find_next_occurrence(&now, false)
                    .ok()
                    .map(|t| t.timestamp())
            }
        }
    }
}

/// A periodic schedule of one queue: [`Queue::periodic`] makes it; [`run`](Self::run) it on
/// as many instances as you like.
#[derive(Debug, Clone)]
pub struct Periodic {
    queue: Queue,
    name: String,
    schedule: Schedule,
    job: Job,
    catch_up: u32,
}

impl Queue {
    /// The periodic schedule `name` of this queue: each period of `schedule` enqueues one
    /// `job` (with the key `periodic:<name>:<period>`, which replaces any key of its own).
    /// Names are per store, across its queues.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for an empty name, one over [`MAX_SCHEDULE_NAME_LEN`] bytes or
    /// holding NUL, a bad queue name, or a job [`Job::check`] refuses.
    pub fn periodic(
        &self,
        name: impl Into<String>,
        schedule: Schedule,
        job: Job,
    ) -> Result<Periodic> {
        let name = name.into();
        check_schedule_name(&name)?;
        super::check_queue_name(&self.name)?;
        let job = job.key(format!("periodic:{name}:0"));
        job.check()?;
        Ok(Periodic {
            queue: self.clone(),
            name,
            schedule,
            job,
            catch_up: 0,
        })
    }
}

impl Periodic {
    /// Besides the newest period due, enqueue up to `periods` older ones that no scheduler
    /// enqueued (all schedulers down across several periods), at most [`MAX_CATCH_UP`].
    /// Default 0: a tick after a gap enqueues one job, for the newest period.
    #[must_use]
    pub fn catch_up(mut self, periods: u32) -> Self {
        self.catch_up = periods.min(MAX_CATCH_UP);
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One tick: enqueues the jobs of the periods due and not yet enqueued by anyone, and
    /// returns their ids (oldest period first; none when another scheduler was first).
    ///
    /// # Errors
    ///
    /// A backend failure; nothing is enqueued then and the next tick does the work.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the tick is one transaction, and a dropped call rolls it back.
    pub async fn tick(&self) -> Result<Vec<JobId>> {
        Ok(self.tick_at().await?.1)
    }

    /// Ticks at each period until `shutdown`: run it on every instance of the application,
    /// and one job is enqueued per period in all. Backend failures are logged and the tick
    /// tried again a second later.
    ///
    /// # Errors
    ///
    /// [`Error::NotMigrated`] and the other errors that retrying cannot cure; `Ok` at
    /// shutdown.
    ///
    /// # Cancel safety
    ///
    /// As [`tick`](Self::tick): dropping the future leaves no half-done tick.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        loop {
            let sleep = match self.tick_at().await {
                Ok((now_micros, _)) => self.until_next(now_micros),
                Err(e) if e.is_transient() => {
                    tracing::warn!(schedule = %self.name, error = %e, "periodic tick failed; retrying");
                    Duration::from_secs(1)
                }
                Err(e) => return Err(e),
            };
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// How long from `now_micros` (the database's clock) until just after the next period.
    fn until_next(&self, now_micros: i64) -> Duration {
        let now = now_micros.div_euclid(1_000_000);
        let Some(next) = self.schedule.next_after(now) else {
            return MAX_SLEEP;
        };
        let left = next.saturating_mul(1_000_000).saturating_sub(now_micros);
        // A few ms past the period, so that the database's clock has reached it too.
        Duration::from_micros(u64::try_from(left).unwrap_or(0)).min(MAX_SLEEP)
            + Duration::from_millis(5)
    }

    async fn tick_at(&self) -> Result<(i64, Vec<JobId>)> {
        let most = usize::try_from(self.catch_up)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let plan = |now_micros: i64, last: Option<i64>| {
            let now = now_micros.div_euclid(1_000_000);
            // A new schedule needs only its newest period.
            let most = if last.is_none() { 1 } else { most };
            let mut due = self.schedule.due(now, last, most);
            let newest = *due.first()?;
            if last.is_none() {
                // A new schedule starts with its next period.
                due.clear();
            }
            due.reverse();
            let jobs = due
                .iter()
                .map(|period| {
                    self.job
                        .clone()
                        .key(format!("periodic:{}:{period}", self.name))
                })
                .collect();
            Some((newest, jobs))
        };
        let tick = self
            .queue
            .driver
            .periodic_tick(&self.name, &self.queue.name, &plan)
            .await?;
        self.queue.count_enqueued(&tick.enqueued);
        if !tick.enqueued.is_empty() {
            tracing::info!(schedule = %self.name, jobs = tick.enqueued.len(), "periodic jobs enqueued");
        }
        let ids = tick
            .enqueued
            .iter()
            .filter(|e| !e.duplicate)
            .map(|e| e.id)
            .collect();
        Ok((tick.now_micros, ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_due_on_their_multiples() {
        let s = Schedule::every(Duration::from_secs(10)).unwrap();
        assert_eq!(s.due(1_005, None, 3), [1_000, 990, 980]);
        assert_eq!(s.due(1_005, Some(990), 3), [1_000]);
        assert_eq!(s.due(1_005, Some(1_000), 3), Vec::<i64>::new());
        assert_eq!(s.due(1_000, Some(990), 1), [1_000]);
        assert_eq!(s.next_after(1_000), Some(1_010));
        assert_eq!(s.next_after(1_009), Some(1_010));
        for bad in [Duration::ZERO, Duration::from_millis(1_500)] {
            assert!(matches!(
                Schedule::every(bad),
                Err(Error::InvalidConfig { .. })
            ));
        }
    }

    #[test]
    fn cron_patterns_are_due_at_their_times_on_utc() {
        let hourly = Schedule::cron("0 * * * *").unwrap();
        // 2026-12-07 10:00:00 UTC, and 20 minutes later
        let ten = 1_796_637_600;
        let now = ten + 20 * 60;
        assert_eq!(hourly.due(now, None, 2), [ten, ten - 3_600]);
        assert_eq!(hourly.due(now, Some(ten - 3_600), 5), [ten]);
        assert_eq!(
            hourly.due(ten, Some(ten - 3_600), 5),
            [ten],
            "at the period itself"
        );
        assert_eq!(hourly.next_after(now), Some(ten + 3_600));
        let seconds = Schedule::cron("*/2 * * * * *").unwrap();
        assert_eq!(seconds.due(101, None, 2), [100, 98]);
        assert_eq!(seconds.next_after(100), Some(102));
        for bad in ["", "61 * * * *", "* * *", "nonsense"] {
            let err = Schedule::cron(bad).unwrap_err();
            assert!(
                matches!(err, Error::InvalidConfig { .. }),
                "{bad:?}: {err:?}"
            );
        }
    }
}
