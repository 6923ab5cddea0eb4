//! What lockwise records, through the [`metrics`](https://docs.rs/metrics) facade: nothing is
//! kept unless the application installs a recorder (the `lockwise` command's
//! `--metrics-addr` installs a Prometheus exporter). Names carry their unit; labels are few
//! and bounded (a backend's kind, a queue's name, a cause), never a key or a job id.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `lockwise_lock_acquisitions_total` | counter | `backend`, `result` | acquire and try_acquire calls by result: `granted`, `busy` (held elsewhere, try_acquire), `timeout` (the wait ran out), `error` |
//! | `lockwise_lock_wait_seconds` | histogram | `backend` | how long [`Locker::acquire`](crate::Locker::acquire) waited for a grant |
//! | `lockwise_lock_hold_seconds` | histogram | `backend` | from a grant's request to its guard's end (release or drop) |
//! | `lockwise_lock_renewals_total` | counter | `backend` | renewals the server agreed to |
//! | `lockwise_lock_renewal_failures_total` | counter | `backend`, `cause` | renewals refused (`refused`) or failed (`error`) |
//! | `lockwise_lock_renewal_round_trip_seconds` | histogram | `backend` | a successful renewal's round trip |
//! | `lockwise_lock_losses_total` | counter | `backend`, `cause` | lost signals fired: `refused` (a renewal or extend refused), `deadline` (no renewal in time), `server_forgot` (the server no longer has the lease), `stopped` (the renewals' runtime shut down) |
//! | `lockwise_lock_ttl_headroom_warnings_total` | counter | `backend`, `what` | a renewal's round trip (`renewal`) or, without renewals, a hold (`hold`) within 20 % of the TTL; each also logs a warning with the key and the figures |
//! | `lockwise_fenced_writes_refused_total` | counter | `store` | fenced writes refused for a stale token |
//! | `lockwise_queue_jobs_enqueued_total` | counter | `queue` | jobs inserted (not duplicates) |
//! | `lockwise_queue_jobs_claimed_total` | counter | `queue` | jobs a worker claimed and started |
//! | `lockwise_queue_jobs_completed_total` | counter | `queue` | handlers that succeeded |
//! | `lockwise_queue_jobs_failed_total` | counter | `queue` | failed attempts (errors, panics, timeouts) |
//! | `lockwise_queue_jobs_retried_total` | counter | `queue` | failed attempts with attempts left |
//! | `lockwise_queue_jobs_dead_total` | counter | `queue` | failed attempts that were the last: dead letters |
//! | `lockwise_queue_jobs_cancelled_total` | counter | `queue` | jobs cancelled |
//! | `lockwise_queue_job_run_seconds` | histogram | `queue` | how long a handler ran |
//! | `lockwise_queue_job_wait_seconds` | histogram | `queue` | how long a started job waited for its claim: from when it became due (enqueued, or its delay or retry came), by the database's clock |
//! | `lockwise_queue_claim_round_trip_seconds` | histogram | | a claim and the confirmation of its jobs' start |
//! | `lockwise_queue_leases_reaped_total` | counter | | expired job leases the reaper gave back |
//! | `lockwise_queue_depth` | gauge | `queue`, `state` | jobs by state, sampled by a running worker with [`Worker::depth_metrics`](crate::queue::Worker::depth_metrics) |
//! | `lockwise_queue_oldest_ready_age_seconds` | gauge | `queue` | how long the oldest ready job has been due (0: none is), sampled likewise |
//! | `lockwise_partition_generation` | gauge | `group` | the membership generation a member last saw |
//! | `lockwise_partition_members` | gauge | `group` | members in that generation |
//! | `lockwise_partition_keys_owned` | gauge | `group` | keys this member holds |
//! | `lockwise_partition_handoff_seconds` | histogram | `group` | from a new generation to holding every key assigned in it |

use std::time::Duration;

use ::metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

/// Gives every metric above its help text and unit, for exporters that show them (the
/// Prometheus exporter's `# HELP` lines). Call it once, after installing the recorder.
///
/// ```
/// // With no recorder installed this does nothing.
/// lockwise::metrics::describe();
/// ```
pub fn describe() {
    use Unit::{Count, Seconds};
    let counters = [
        (
            "lockwise_lock_acquisitions_total",
            "Acquire calls by result",
        ),
        (
            "lockwise_lock_renewals_total",
            "Renewals the server agreed to",
        ),
        (
            "lockwise_lock_renewal_failures_total",
            "Renewals refused or failed",
        ),
        ("lockwise_lock_losses_total", "Lost signals fired, by cause"),
        (
            "lockwise_lock_ttl_headroom_warnings_total",
            "Renewal round trips or holds within 20% of the TTL",
        ),
        (
            "lockwise_fenced_writes_refused_total",
            "Fenced writes refused for a stale token",
        ),
        ("lockwise_queue_jobs_enqueued_total", "Jobs inserted"),
        (
            "lockwise_queue_jobs_claimed_total",
            "Jobs claimed and started",
        ),
        (
            "lockwise_queue_jobs_completed_total",
            "Handlers that succeeded",
        ),
        ("lockwise_queue_jobs_failed_total", "Failed attempts"),
        (
            "lockwise_queue_jobs_retried_total",
            "Failed attempts with attempts left",
        ),
        (
            "lockwise_queue_jobs_dead_total",
            "Failed attempts that were the last",
        ),
        ("lockwise_queue_jobs_cancelled_total", "Jobs cancelled"),
        (
            "lockwise_queue_leases_reaped_total",
            "Expired job leases given back",
        ),
    ];
    for (name, help) in counters {
        describe_counter!(name, Count, help);
    }
    let histograms = [
        (
            "lockwise_lock_wait_seconds",
            "How long acquire waited for a grant",
        ),
        (
            "lockwise_lock_hold_seconds",
            "From a grant's request to its guard's end",
        ),
        (
            "lockwise_lock_renewal_round_trip_seconds",
            "A successful renewal's round trip",
        ),
        ("lockwise_queue_job_run_seconds", "How long a handler ran"),
        (
            "lockwise_queue_job_wait_seconds",
            "How long a started job waited for its claim once due",
        ),
        (
            "lockwise_queue_claim_round_trip_seconds",
            "A claim and the confirmation of its jobs",
        ),
        (
            "lockwise_partition_handoff_seconds",
            "From a new generation to its settling",
        ),
    ];
    for (name, help) in histograms {
        describe_histogram!(name, Seconds, help);
    }
    describe_gauge!("lockwise_queue_depth", Count, "Jobs by state");
    describe_gauge!(
        "lockwise_queue_oldest_ready_age_seconds",
        Seconds,
        "How long the oldest ready job has been due"
    );
    describe_gauge!(
        "lockwise_partition_generation",
        "The membership generation last seen"
    );
    describe_gauge!(
        "lockwise_partition_members",
        Count,
        "Members in that generation"
    );
    describe_gauge!(
        "lockwise_partition_keys_owned",
        Count,
        "Keys this member holds"
    );
}

/// A grant was asked for and answered: `result` is `granted`, `busy`, `timeout` or `error`.
pub(crate) fn acquisition(backend: &'static str, result: &'static str) {
    counter!("lockwise_lock_acquisitions_total", "backend" => backend, "result" => result)
        .increment(1);
}

pub(crate) fn waited(backend: &'static str, waited: Duration) {
    histogram!("lockwise_lock_wait_seconds", "backend" => backend).record(waited);
}

pub(crate) fn held(backend: &'static str, held: Duration) {
    histogram!("lockwise_lock_hold_seconds", "backend" => backend).record(held);
}

pub(crate) fn renewed(backend: &'static str, round_trip: Duration) {
    counter!("lockwise_lock_renewals_total", "backend" => backend).increment(1);
    histogram!("lockwise_lock_renewal_round_trip_seconds", "backend" => backend).record(round_trip);
}

pub(crate) fn renewal_failed(backend: &'static str, cause: &'static str) {
    counter!("lockwise_lock_renewal_failures_total", "backend" => backend, "cause" => cause)
        .increment(1);
}

/// Why a lost signal fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// The server refused a renewal or an extend.
    Refused,
    /// The local deadline passed without a renewal.
    Deadline,
    /// The server no longer has the lease.
    ServerForgot,
    /// Nothing renews the lease any more (its runtime shut down).
    Stopped,
}

impl Loss {
    fn label(self) -> &'static str {
        match self {
            Loss::Refused => "refused",
            Loss::Deadline => "deadline",
            Loss::ServerForgot => "server_forgot",
            Loss::Stopped => "stopped",
        }
    }
}

pub(crate) fn lost(backend: &'static str, cause: Loss) {
    counter!("lockwise_lock_losses_total", "backend" => backend, "cause" => cause.label())
        .increment(1);
}

/// The share of the TTL past which a renewal's round trip or a hold leaves too little room.
const HEADROOM: f64 = 0.8;

/// Warns (once per call) when `took` — a renewal's round trip (`what` = `renewal`) or a hold
/// without renewals (`hold`) — came within 20 % of `ttl`: the lesson's first exercise, a
/// lease that outlives its work only by luck.
pub(crate) fn headroom(
    backend: &'static str,
    what: &'static str,
    key: &str,
    took: Duration,
    ttl: Duration,
) {
    if took.as_secs_f64() < ttl.as_secs_f64() * HEADROOM {
        return;
    }
    tracing::warn!(
        key,
        what,
        took_ms = took.as_millis() as u64,
        ttl_ms = ttl.as_millis() as u64,
        "within 20% of the TTL: a longer pause or a slower server loses the lock; raise the TTL \
         or find what is slow"
    );
    counter!("lockwise_lock_ttl_headroom_warnings_total", "backend" => backend, "what" => what)
        .increment(1);
}

#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn fenced_write_refused(store: &'static str) {
    counter!("lockwise_fenced_writes_refused_total", "store" => store).increment(1);
}

/// What happened to a queue's jobs.
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobEvent {
    Enqueued,
    Claimed,
    Completed,
    Failed,
    Retried,
    Dead,
    Cancelled,
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl JobEvent {
    fn name(self) -> &'static str {
        match self {
            JobEvent::Enqueued => "lockwise_queue_jobs_enqueued_total",
            JobEvent::Claimed => "lockwise_queue_jobs_claimed_total",
            JobEvent::Completed => "lockwise_queue_jobs_completed_total",
            JobEvent::Failed => "lockwise_queue_jobs_failed_total",
            JobEvent::Retried => "lockwise_queue_jobs_retried_total",
            JobEvent::Dead => "lockwise_queue_jobs_dead_total",
            JobEvent::Cancelled => "lockwise_queue_jobs_cancelled_total",
        }
    }
}

/// `n` jobs of `queue` went through `event`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn jobs(queue: &str, event: JobEvent, n: u64) {
    if n > 0 {
        counter!(event.name(), "queue" => queue.to_owned()).increment(n);
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn job_ran(queue: &str, took: Duration) {
    histogram!("lockwise_queue_job_run_seconds", "queue" => queue.to_owned()).record(took);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn job_waited(queue: &str, waited: Duration) {
    histogram!("lockwise_queue_job_wait_seconds", "queue" => queue.to_owned()).record(waited);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn claimed_in(round_trip: Duration) {
    histogram!("lockwise_queue_claim_round_trip_seconds").record(round_trip);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn reaped(n: u64) {
    counter!("lockwise_queue_leases_reaped_total").increment(n);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn depth(queue: &str, state: &'static str, n: i64) {
    gauge!("lockwise_queue_depth", "queue" => queue.to_owned(), "state" => state).set(n as f64);
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn oldest_ready(queue: &str, age: Duration) {
    gauge!("lockwise_queue_oldest_ready_age_seconds", "queue" => queue.to_owned())
        .set(age.as_secs_f64());
}

pub(crate) fn partition(group: &str, generation: u64, members: usize, keys_owned: usize) {
    let group = group.to_owned();
    gauge!("lockwise_partition_generation", "group" => group.clone()).set(generation as f64);
    gauge!("lockwise_partition_members", "group" => group.clone()).set(members as f64);
    gauge!("lockwise_partition_keys_owned", "group" => group).set(keys_owned as f64);
}

pub(crate) fn handoff(group: &str, took: Duration) {
    histogram!("lockwise_partition_handoff_seconds", "group" => group.to_owned()).record(took);
}
