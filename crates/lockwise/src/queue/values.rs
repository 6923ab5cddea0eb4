//! What the queue reports: enqueue statuses, claimed jobs, statistics, job states and
//! job details.

use std::time::SystemTime;

use serde_json::Value;

use super::JobId;
#[cfg(doc)]
use super::{Job, Queue, Worker};
use crate::error::{Error, Result};

/// What [`Queue::enqueue_with_status`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enqueued {
    /// The job's id: the new job's, or for a duplicate key the existing job's.
    pub id: JobId,
    /// `true` when the idempotency key named a job already there and nothing was inserted.
    pub duplicate: bool,
}

/// A job claimed by a worker.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Claimed {
    /// The job.
    pub id: JobId,
    /// Its attempt number, starting at 1: the fencing token of this execution.
    pub attempt: i32,
    /// Attempts allowed in all.
    pub max_attempts: i32,
    /// What was enqueued.
    pub payload: Value,
    /// The job's queue.
    pub queue: String,
    /// How long the job waited for this claim: from when it became due (its enqueue, or the
    /// time its delay or retry came) to the claim, by the database server's clock.
    pub waited: std::time::Duration,
}

/// Job counts of one queue, by state: every job is in exactly one count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Waiting for a worker, and due now.
    pub ready: i64,
    /// Waiting, but not due yet: delayed, or waiting to retry after a failed attempt.
    pub scheduled: i64,
    /// Claimed by a worker.
    pub running: i64,
    /// Finished.
    pub done: i64,
    /// Attempts used up, or failed for good (dead letters).
    pub dead: i64,
    /// Cancelled before they finished ([`Queue::cancel`]).
    pub cancelled: i64,
    /// How long the oldest ready job has been due (`None`: no job is ready).
    pub oldest_ready: Option<std::time::Duration>,
}

/// A live worker ([`Queue::workers`](crate::queue::Queue::workers)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The worker's id (host, process id and a random suffix unless set).
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its process id there.
    pub pid: i32,
    /// The queues it claims from.
    pub queues: Vec<String>,
    /// How many jobs it runs at once.
    pub concurrency: i32,
    /// How many it ran at its last heartbeat.
    pub running: i32,
    /// When it started.
    pub started_at: std::time::SystemTime,
    /// Its last heartbeat.
    pub last_heartbeat: std::time::SystemTime,
}

/// One queue at a glance ([`Queue::overview`](crate::queue::Queue::overview)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueOverview {
    /// The queue's name.
    pub queue: String,
    /// Its jobs by state, and the oldest ready job's age.
    pub stats: Stats,
    /// Jobs that finished done in the last minute: how fast it drains.
    pub done_last_minute: i64,
}

impl Stats {
    /// Jobs not finished yet: ready, scheduled or running.
    pub fn unfinished(&self) -> i64 {
        self.ready + self.scheduled + self.running
    }
}

/// Where a job stands. `Ready` and `Scheduled` are one stored state (waiting), told apart by
/// whether the job is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for a worker, and due now.
    Ready,
    /// Waiting, not due yet (delayed, or waiting to retry).
    Scheduled,
    /// Claimed by a worker, under a lease.
    Running,
    /// Finished.
    Done,
    /// Attempts used up, or failed for good: a dead letter.
    Dead,
    /// Cancelled before it finished.
    Cancelled,
}

impl JobState {
    /// Every state, in a job's life order.
    pub const ALL: [JobState; 6] = [
        JobState::Ready,
        JobState::Scheduled,
        JobState::Running,
        JobState::Done,
        JobState::Dead,
        JobState::Cancelled,
    ];

    /// The state's name: `ready`, `scheduled`, `running`, `done`, `dead` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Ready => "ready",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether a job in this state has finished (done, dead or cancelled).
    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Done | JobState::Dead | JobState::Cancelled)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for JobState {
    type Err = Error;

    /// Parses a state's name ([`JobState::as_str`]); anything else is an
    /// [`Error::InvalidConfig`].
    ///
    /// ```
    /// use lockwise::queue::JobState;
    /// assert_eq!("dead".parse::<JobState>().unwrap(), JobState::Dead);
    /// assert!("pending".parse::<JobState>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                Error::config(format!(
                    "unknown job state {:?}: use ready, scheduled, running, done, dead or cancelled",
                    s.chars().take(40).collect::<String>()
                ))
            })
    }
}

/// Everything stored about one job ([`Queue::job`], [`Queue::list`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobInfo {
    /// The job.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// Where it stands.
    pub state: JobState,
    /// Lower runs first.
    pub priority: i16,
    /// Attempts made so far (the running one included): the last attempt's fencing token.
    pub attempt: i32,
    /// Attempts allowed in all.
    pub max_attempts: i32,
    /// Its idempotency key.
    pub key: Option<String>,
    /// What was enqueued.
    pub payload: Value,
    /// The worker that claimed it last.
    pub worker: Option<String>,
    /// When it was enqueued.
    pub created_at: SystemTime,
    /// When it is due (or was, for a job that ran).
    pub run_at: SystemTime,
    /// When it finished (done, dead or cancelled).
    pub finished_at: Option<SystemTime>,
    /// When the running attempt's lease ends, by the database's clock.
    pub lease_until: Option<SystemTime>,
    /// The last failed attempt's error.
    pub last_error: Option<String>,
    /// Every failed attempt's error, oldest first: `[{"attempt": 1, "at":
    /// "2026-12-04T15:28:45.123456Z", "error": "…"}, …]`, `at` in RFC 3339 UTC with
    /// microseconds on every database.
    pub errors: Value,
}
