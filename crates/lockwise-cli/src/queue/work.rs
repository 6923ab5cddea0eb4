//! `lockwise queue work`: a worker that runs a command per job, under `lockwise supervise`,
//! with the job's deadline fed to the supervisor.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lockwise::queue::{JobContext, Worker};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::conn::{Conn, Store, open};
use crate::child::{DECIDE_AHEAD, DeadlineFeed};
use crate::exit::Failure;
use crate::metrics::MetricsArgs;

/// How often `queue work --metrics-addr` samples its queues' depth.
const DEPTH_EVERY: Duration = Duration::from_secs(5);
use crate::duration;

#[derive(Debug, clap::Args)]
pub(super) struct WorkArgs {
    #[command(flatten)]
    pub(super) conn: Conn,
    /// The queue's name; repeat it to work on several queues of the store, which share
    /// --concurrency (ready jobs are claimed by priority across them)
    #[arg(long, value_name = "Q", required = true)]
    pub(super) queue: Vec<String>,
    /// Jobs run at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    pub(super) concurrency: u16,
    /// Most jobs claimed per statement [default: the concurrency]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    pub(super) batch: Option<u16>,
    /// Most claimed jobs waiting for a free slot, claimed ahead while short jobs run (0: claim
    /// only for free slots) [default: a batch per claim in flight but one, at most 1000]
    #[arg(long, value_name = "N")]
    pub(super) prefetch: Option<u16>,
    /// Lease of a claimed job, renewed while it runs (at least 1s)
    #[arg(long, default_value = "30s", value_parser = duration::parse_lease, value_name = "DURATION")]
    pub(super) lease: Duration,
    /// Fail a job that runs longer than this: its CMD gets SIGTERM then, and SIGKILL
    /// --kill-after later
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    pub(super) timeout: Option<Duration>,
    /// After SIGTERM/SIGINT, how long running jobs may finish; then their CMDs get SIGTERM,
    /// and those that do not exit 0 within --kill-after are handed back (not failed)
    #[arg(long, default_value = "30s", value_parser = duration::parse, value_name = "DURATION")]
    pub(super) grace: Duration,
    /// A job asked to stop (at --timeout, at the end of --grace, or when its lease is about
    /// to run out unrenewed) gets SIGTERM, then SIGKILL this much later if still running (at
    /// its lease's end at the latest)
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    pub(super) kill_after: Duration,
    /// How often an idle worker looks for jobs; on MariaDB/MySQL (no notifications), how soon
    /// it sees a new one
    #[arg(long, default_value = "1s", value_parser = duration::parse_positive, value_name = "DURATION")]
    pub(super) poll_interval: Duration,
    /// Drain the queue, then exit 0: stop claiming once a claim finds no ready job while no
    /// handler runs (jobs not ready yet, delayed or waiting to retry, do not keep it running)
    #[arg(long)]
    pub(super) once: bool,
    /// Start at most N jobs, let them finish, then exit 0 (a worker recycled after N jobs;
    /// with --once, also when the queue drains first)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub(super) max_jobs: Option<u64>,
    /// Exit 69 when no claim has succeeded for this long (the database down, unreachable or
    /// refusing; a claim that gets no answer fails when its lease would run out), or `never`
    /// to wait for the database. Failures are logged when they start and when they end
    #[arg(long, default_value = "30s", value_parser = parse_give_up, value_name = "DURATION|never")]
    pub(super) give_up_after: GiveUp,
    /// Keep the queues' done and cancelled jobs this long, then prune them, once a second
    /// (on PostgreSQL by truncating whole segments of the history, never by DELETE)
    /// [default: keep them until `queue prune`]
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    pub(super) retention: Option<Duration>,
    /// The handler and its arguments
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(super) command: Vec<OsString>,
    #[command(flatten)]
    pub(super) metrics: MetricsArgs,
}

/// `--give-up-after`: a duration, or never.
#[derive(Debug, Clone, Copy)]
pub(super) struct GiveUp(Option<Duration>);

fn parse_give_up(text: &str) -> Result<GiveUp, String> {
    if text == "never" {
        return Ok(GiveUp(None));
    }
    duration::parse_positive(text).map(|d| GiveUp(Some(d)))
}

pub(super) async fn work(a: WorkArgs) -> Result<u8, Failure> {
    // A handler that cannot start would fail every job it is given and dead-letter the
    // queue: refuse it before connecting, like a shell (127 not found, 126 not executable).
    if let Some(program) = a.command.first() {
        crate::child::resolve(program).map_err(|e| Failure {
            code: e.code(),
            message: format!("cannot run the handler {e}; no job was claimed"),
        })?;
    }
    for name in &a.queue {
        lockwise::queue::check_queue_name(name)?;
    }
    a.metrics.install()?;
    let first = a.queue.first().map_or("", String::as_str);
    let queue = open(&a.conn, first, u32::from(a.concurrency) + 4, Store::Migrate).await?;
    let mut worker = Worker::new(queue)
        .queues(a.queue)
        .concurrency(usize::from(a.concurrency))
        .lease(a.lease)
        .grace(a.grace)
        .poll_interval(a.poll_interval)
        .kill_after(a.kill_after)
        .until_idle(a.once)
        .max_jobs(a.max_jobs);
    if let Some(limit) = a.timeout {
        worker = worker.timeout(limit);
    }
    if let GiveUp(Some(limit)) = a.give_up_after {
        worker = worker.give_up_after(limit);
    }
    if let Some(batch) = a.batch {
        worker = worker.batch(usize::from(batch));
    }
    if let Some(keep) = a.retention {
        worker = worker.retention(keep);
    }
    if let Some(prefetch) = a.prefetch {
        worker = worker.prefetch(usize::from(prefetch));
    }
    if a.metrics.enabled() {
        worker = worker.depth_metrics(DEPTH_EVERY);
    }
    let shutdown = crate::child::graceful_stop(Some(
        "lockwise: shutting down: no new jobs, running ones get the grace period",
    ))?;
    let handler = Arc::new(Handler {
        command: a.command,
        url: a.conn.url,
        schema: a.conn.schema,
        lease: a.lease,
        // The worker asks a handler to stop this long before the job's deadline.
        stop_ahead: a.kill_after.min(a.lease / 3),
    });
    let report = worker
        .run(
            move |job| {
                let handler = handler.clone();
                async move { handle(&handler, job).await }
            },
            shutdown,
        )
        .await?;
    eprintln!(
        "lockwise: worker stopped: {} done, {} failed, {} cancelled, {} lease lost, {} handed back",
        report.done, report.failed, report.cancelled, report.lease_lost, report.handed_back
    );
    Ok(0)
}

/// Kills a handler's whole process group when dropped (the handler finished, timed out or
/// was stopped at shutdown).
struct Group(Option<Pid>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// What `work` runs per job, and the store it hands on to it.
struct Handler {
    command: Vec<OsString>,
    url: String,
    schema: String,
    lease: Duration,
    stop_ahead: Duration,
}

/// Runs the handler command for one job, through `lockwise supervise` so that its whole
/// process tree dies with this worker, and by the job's deadline even while this worker is
/// frozen: the supervisor holds that deadline, fed after each heartbeat (see
/// [`crate::child`]). It asks the handler to stop (SIGTERM) only when this worker did not
/// first, a little after the worker would have ([`DECIDE_AHEAD`]).
async fn handle(handler: &Handler, job: JobContext) -> Result<(), String> {
    const TAIL: usize = 4096;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find lockwise: {e}"))?;
    let mut deadlines =
        DeadlineFeed::new(job.deadline()).map_err(|e| format!("cannot start the handler: {e}"))?;
    let grace = handler.stop_ahead.saturating_sub(DECIDE_AHEAD);
    let mut cmd = Command::new(exe);
    cmd.arg("supervise")
        .arg("--kill-after")
        .arg(format!("{}us", grace.as_micros()));
    deadlines.attach(&mut cmd);
    cmd.arg("--")
        .args(&handler.command)
        .env("LOCKWISE_JOB_ID", job.id.to_string())
        .env("LOCKWISE_JOB_ATTEMPT", job.attempt.to_string())
        .env("LOCKWISE_QUEUE", &job.queue)
        // The worker's own store, so that `lockwise queue enqueue` in the handler adds
        // follow-up jobs to it.
        .env("LOCKWISE_URL", &handler.url)
        .env("LOCKWISE_SCHEMA", &handler.schema)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    crate::child::stop_with_parent(&mut cmd, nix::sys::signal::Signal::SIGTERM);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the handler: {e}"))?;
    deadlines.started();
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let _group = Group(group);
    let stdin = child.stdin.take();
    // One line of JSON (JSON Lines): `read` in a shell handler needs the newline.
    let payload = format!("{}\n", job.payload);
    // Written while stderr is read: a handler that writes much to stderr before it reads a
    // large payload must not block both sides.
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A handler that does not read its stdin is fine.
            let _ = stdin.write_all(payload.as_bytes()).await;
        }
    };
    let mut tail = Vec::new();
    let stderr = child.stderr.take();
    let drain = async {
        let Some(mut stderr) = stderr else {
            return;
        };
        let mut buf = [0u8; 4096];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let _ = tokio::io::stderr().write_all(&buf[..n]).await;
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > TAIL {
                        tail.drain(..tail.len() - TAIL);
                    }
                }
            }
        }
    };
    let status = {
        let run = async {
            tokio::join!(feed, drain);
            child.wait().await
        };
        tokio::pin!(run);
        let mut feeding = tokio::time::interval(
            (handler.lease / 12).clamp(Duration::from_millis(1), Duration::from_secs(1)),
        );
        feeding.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The deadline whose last look was taken: none again until a heartbeat moves it.
        let mut looked: Option<tokio::time::Instant> = None;
        loop {
            // A heartbeat that lands just before the supervisor would act is fed then.
            let last_look = deadlines
                .fed()
                .checked_sub(grace + DECIDE_AHEAD)
                .unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                status = &mut run => break status,
                () = job.stop_requested() => {
                    // Asked to stop: SIGTERM to the whole group (the command, and `lockwise
                    // supervise`, which leaves it to the command and sends no SIGTERM of its
                    // own), then wait on; dropping this future SIGKILLs the group (`Group`).
                    if let Some(group) = group {
                        let _ = killpg(group, Signal::SIGTERM);
                    }
                    break run.await;
                }
                _ = feeding.tick() => {
                    let _ = deadlines.renew(job.deadline(), grace);
                }
                () = tokio::time::sleep_until(last_look), if looked != Some(deadlines.fed()) => {
                    looked = Some(deadlines.fed());
                    let _ = deadlines.renew(job.deadline(), grace);
                }
            }
        }
    }
    .map_err(|e| format!("lost the handler: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let tail = String::from_utf8_lossy(&tail);
    Err(format!(
        "handler exited with {}: {}",
        status
            .code()
            .map_or_else(|| "a signal".to_owned(), |c| c.to_string()),
        tail.trim()
    ))
}
