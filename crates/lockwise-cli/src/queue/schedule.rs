//! `lockwise queue schedule` (periodic jobs) and `queue pause|resume`.

use std::time::Duration;

use lockwise::queue::{Job, Schedule};

use super::conn::{Conn, Store, open};
use crate::duration;
use crate::exit::{self, Failure};

/// Enqueue one job per period of a cron pattern or an interval, whatever the number of
/// schedulers: run it on several machines, and each period still gets exactly one job.
///
/// Without --once it runs until SIGINT or SIGTERM (exit 0), logging each period's job on
/// stderr; with --once it enqueues what is due now, prints the new jobs' ids and exits. A
/// period missed while no scheduler ran is enqueued once at the next start (--catch-up adds
/// older ones); a new schedule starts with its next period.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("when").required(true))]
pub(super) struct ScheduleArgs {
    #[command(flatten)]
    pub(super) conn: Conn,
    /// The queue the jobs go to
    #[arg(long, value_name = "Q")]
    queue: String,
    /// The schedule's name, unique in the store (1 to 200 bytes); its jobs' key is
    /// periodic:NAME:PERIOD (PERIOD in Unix seconds)
    #[arg(long, value_name = "NAME")]
    name: String,
    /// A cron pattern on UTC: five fields (minute hour day month weekday), or six with
    /// seconds first; @hourly, @daily and the like
    #[arg(long, group = "when", value_name = "PATTERN")]
    cron: Option<String>,
    /// A fixed interval in whole seconds (30s, 5m, 1h), aligned on the Unix epoch
    #[arg(long, group = "when", value_parser = duration::parse, value_name = "DURATION")]
    every: Option<Duration>,
    /// The jobs' payload, JSON
    #[arg(long, default_value = "{}", value_name = "JSON")]
    payload: String,
    /// Lower runs first
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        value_name = "P"
    )]
    priority: i16,
    /// Attempts before a job is dead
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    max_attempts: u16,
    /// Besides the newest period due, enqueue up to N older ones that no scheduler enqueued
    /// (at most 10,000)
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u32).range(..=i64::from(lockwise::queue::MAX_CATCH_UP)))]
    catch_up: u32,
    /// One tick: enqueue what is due now, print the new jobs' ids (one a line) and exit
    #[arg(long)]
    once: bool,
}

/// `lockwise queue pause|resume QUEUE`.
#[derive(Debug, clap::Args)]
pub(super) struct PauseArgs {
    #[command(flatten)]
    pub(super) conn: Conn,
    /// The queue's name
    #[arg(value_name = "QUEUE")]
    queue: String,
}

pub(super) async fn schedule(a: ScheduleArgs) -> Result<u8, Failure> {
    let when = match (&a.cron, a.every) {
        (Some(pattern), _) => Schedule::cron(pattern)?,
        (None, Some(every)) => Schedule::every(every)?,
        (None, None) => return Err(Failure::usage("give --cron or --every")),
    };
    let payload: serde_json::Value = serde_json::from_str(&a.payload)
        .map_err(|e| Failure::usage(format!("--payload is not JSON: {e}")))?;
    let job = Job::new(payload)
        .priority(a.priority)
        .max_attempts(a.max_attempts);
    // Judged before connecting: a bad name or job creates no store.
    lockwise::queue::check_queue_name(&a.queue)?;
    lockwise::queue::check_schedule_name(&a.name)?;
    job.check()?;
    let queue = open(&a.conn, &a.queue, 2, Store::Migrate).await?;
    let periodic = queue.periodic(a.name, when, job)?.catch_up(a.catch_up);
    if a.once {
        let ids = tokio::time::timeout(super::ONE_SHOT_BOUND, periodic.tick())
            .await
            .map_err(|_| Failure {
                code: exit::BACKEND,
                message: format!(
                    "no answer from the database within {:?}",
                    super::ONE_SHOT_BOUND
                ),
            })??;
        let lines: Vec<String> = ids.iter().map(ToString::to_string).collect();
        if !lines.is_empty() {
            exit::print_line(&lines.join("\n"), "the jobs were enqueued")?;
        }
        return Ok(0);
    }
    let shutdown = crate::child::graceful_stop(None)?;
    eprintln!(
        "lockwise: scheduling {:?} on queue {:?}",
        periodic.name(),
        a.queue
    );
    periodic.run(shutdown).await?;
    Ok(0)
}

pub(super) async fn pause(a: PauseArgs, paused: bool) -> Result<u8, Failure> {
    lockwise::queue::check_queue_name(&a.queue)?;
    let queue = open(&a.conn, &a.queue, 1, Store::Existing).await?;
    let changed = if paused {
        queue.pause().await?
    } else {
        queue.resume().await?
    };
    let said = match (paused, changed) {
        (true, true) => "paused: workers claim none of its jobs until it is resumed",
        (true, false) => "was paused already",
        (false, true) => "resumed: workers claim its jobs again within a poll interval",
        (false, false) => "was not paused",
    };
    eprintln!("lockwise: queue {:?} {said}", a.queue);
    Ok(0)
}
