//! `lockwise queue`: the job queue (PostgreSQL or MariaDB/MySQL) from the command line. All
//! database work is the library's ([`lockwise::queue`]); this module parses, prints and
//! runs handler commands.

use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobId, JobState};

use crate::exit::Failure;
use crate::{duration, exit};

mod conn;
mod enqueue;
mod inspect;
mod schedule;
mod work;

use conn::{Conn, Store, open};
use enqueue::{EnqueueArgs, read_jsonl, read_payload};
use schedule::{PauseArgs, ScheduleArgs};
use work::{WorkArgs, work};

const EXIT_CODES: &str = "\
Exit codes:
  0         done (work: stopped by SIGTERM/SIGINT, or the queue drained with --once)
  64        usage error: arguments, duration, URL, --payload not JSON or unreadable, an invalid
            job (NUL, queue name or key length); stats/dead/show/list/retry/run-now/cancel/purge/prune
            on a store that was never migrated (they create nothing)
  65        enqueue --jsonl: a line that is not a valid job (the message names it); nothing
            from the input is stored
  66        retry: no dead or cancelled job with that id; show: no job with that id; cancel: no job
            with that id that has not finished; run-now: no job with that id due later
  69        backend failure: refused, authentication, TLS, protocol; no answer within 10 s
            (every command but work); work: no claim succeeded for --give-up-after (a claim
            with no answer fails at its lease), then running jobs got the grace period
  126, 127  work: the handler is not executable / not found (checked before any claim)";

/// Work with a job queue on PostgreSQL or MariaDB/MySQL (FOR UPDATE SKIP LOCKED)
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct QueueArgs {
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, clap::Subcommand)]
enum QueueCommand {
    /// Create or upgrade the queue's tables
    Migrate(Conn),
    /// Add a job; prints its id (an existing job's id for a duplicate --key). With --jsonl,
    /// add one job per line of stdin, all or none, and print their ids in order
    Enqueue(EnqueueArgs),
    /// Run CMD once per job: exit 0 = done, anything else = failed
    ///
    /// CMD gets the payload on stdin as one line of JSON (newline-terminated) and
    /// LOCKWISE_JOB_ID, LOCKWISE_JOB_ATTEMPT, LOCKWISE_QUEUE (the job's), LOCKWISE_URL and
    /// LOCKWISE_SCHEMA in its environment, so `lockwise queue enqueue` in CMD adds follow-up jobs to the same
    /// store. The tail of a failed CMD's stderr is stored as the attempt's error. A CMD that is
    /// not found (exit 127) or not executable (126) stops work before any claim. One line per
    /// job goes to stderr (id, queue, attempt, outcome, duration); LOCKWISE_LOG=warn hides it.
    Work(WorkArgs),
    /// Count jobs by state: ready, scheduled, running, done, dead, cancelled (creates nothing)
    Stats(StatsArgs),
    /// List the live workers of the store: host, pid, queues, concurrency, jobs running, last
    /// heartbeat (creates nothing)
    Workers(WorkersArgs),
    /// List dead letters, oldest first (creates nothing)
    Dead(DeadArgs),
    /// Show everything stored about one job, of any queue (creates nothing)
    Show(ShowArgs),
    /// List one queue's jobs in a state: ready and scheduled in the order they will run, the
    /// others newest first (creates nothing)
    List(ListArgs),
    /// Send a dead or cancelled job back to ready with a fresh budget of attempts, or with --all --queue Q
    /// every dead letter of Q
    Retry(RetryArgs),
    /// Make a job due later (delayed, or waiting to retry) due now
    RunNow(RunNowArgs),
    /// Cancel a job that has not finished: a ready or scheduled job will not run; a running
    /// one's handler is stopped at its worker's next heartbeat (within a third of its lease).
    /// With --all --queue Q, every waiting job of Q (or those in --state)
    Cancel(CancelArgs),
    /// Delete dead letters older than a duration
    Purge(PurgeArgs),
    /// Delete done (and/or cancelled) jobs older than a duration
    Prune(PruneArgs),
    /// Pause a queue: workers claim none of its jobs until it is resumed (running workers
    /// within one poll interval); its jobs stay and enqueueing goes on
    Pause(PauseArgs),
    /// Resume a paused queue
    Resume(PauseArgs),
    Schedule(ScheduleArgs),
}

#[derive(Debug, clap::Args)]
struct WorkersArgs {
    #[command(flatten)]
    conn: Conn,
    /// One JSON object per worker, a line each
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct StatsArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name [default: every queue of the store, one line each, with the oldest
    /// ready job's age and the jobs done in the last minute]
    #[arg(long, value_name = "Q")]
    queue: Option<String>,
    /// One JSON object on stdout (without --queue: one per queue, a line each)
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct DeadArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name
    #[arg(long, value_name = "Q")]
    queue: String,
    /// At most this many
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(0..), value_name = "N")]
    limit: i64,
    /// JSON lines on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id
    #[arg(value_name = "JOB_ID")]
    id: i64,
    /// One JSON object on stdout (times in RFC 3339, UTC)
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name
    #[arg(long, value_name = "Q")]
    queue: String,
    /// ready, scheduled, running, done, dead or cancelled
    #[arg(long, value_parser = state_parser(), value_name = "STATE")]
    state: lockwise::queue::JobState,
    /// At most this many
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(0..), value_name = "N")]
    limit: i64,
    /// JSON lines on stdout, one job per line (as `show --json` prints it)
    #[arg(long)]
    json: bool,
}

/// The states by name: listed for `--help` and shell completion, which would otherwise offer
/// file names.
fn state_parser() -> impl clap::builder::TypedValueParser<Value = lockwise::queue::JobState> {
    use lockwise::queue::JobState;
    let names = JobState::ALL.map(JobState::as_str);
    clap::builder::TypedValueParser::try_map(
        clap::builder::PossibleValuesParser::new(names),
        |name| name.parse::<JobState>().map_err(|e| e.to_string()),
    )
}

#[derive(Debug, clap::Args)]
struct CancelArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id
    #[arg(
        value_name = "JOB_ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    id: Option<i64>,
    /// Cancel every unfinished job of --queue in the --state given (default: ready and
    /// scheduled, the jobs waiting), in one statement; prints how many on stderr
    #[arg(long, requires = "queue")]
    all: bool,
    /// The queue, with --all
    #[arg(long, value_name = "Q", requires = "all")]
    queue: Option<String>,
    /// With --all: ready, scheduled or running (repeat it for several)
    #[arg(long = "state", value_parser = state_parser(), value_name = "STATE", requires = "all")]
    states: Vec<JobState>,
}

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("states").required(true).multiple(true))]
struct PruneArgs {
    #[command(flatten)]
    conn: Conn,
    /// Only this queue [default: every queue of the schema]
    #[arg(long, value_name = "Q")]
    queue: Option<String>,
    /// Delete done jobs
    #[arg(long, group = "states")]
    done: bool,
    /// Delete cancelled jobs
    #[arg(long, group = "states")]
    cancelled: bool,
    /// Delete jobs that finished longer ago than this
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    older_than: Duration,
}

#[derive(Debug, clap::Args)]
struct RetryArgs {
    #[command(flatten)]
    conn: Conn,
    /// The dead job's id
    #[arg(
        value_name = "JOB_ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    id: Option<i64>,
    /// Every dead letter of --queue
    #[arg(long, requires = "queue")]
    all: bool,
    /// The queue of --all
    #[arg(long, value_name = "Q", requires = "all")]
    queue: Option<String>,
}

#[derive(Debug, clap::Args)]
struct RunNowArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id
    #[arg(value_name = "JOB_ID")]
    id: i64,
}

#[derive(Debug, clap::Args)]
struct PurgeArgs {
    #[command(flatten)]
    conn: Conn,
    /// Only this queue [default: every queue of the schema]
    #[arg(long, value_name = "Q")]
    queue: Option<String>,
    /// Delete dead letters that died longer ago than this
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    older_than: Duration,
}

/// How long a one-shot queue command (everything but `work`) may take, connecting included,
/// before it gives up with exit 69: a database that does not answer (a partition, a stalled
/// server) never hangs it.
const ONE_SHOT_BOUND: Duration = Duration::from_secs(10);

pub(crate) async fn run(args: QueueArgs) -> u8 {
    let command = match args.command {
        // Read before the 10 s bound starts: a large payload may be slow to arrive on stdin.
        QueueCommand::Enqueue(mut a) if a.jsonl => match read_jsonl(&a).await {
            Ok(jobs) => {
                a.jobs = jobs;
                QueueCommand::Enqueue(a)
            }
            Err(failure) => return failure.report(),
        },
        QueueCommand::Enqueue(mut a) => {
            match read_payload(a.payload.as_deref().unwrap_or("-")).await {
                Ok(text) => {
                    a.payload_text = text;
                    QueueCommand::Enqueue(a)
                }
                Err(failure) => return failure.report(),
            }
        }
        command => command,
    };
    // Bulk input gets one more second per 10,000 jobs.
    let bound = match &command {
        QueueCommand::Enqueue(a) => {
            ONE_SHOT_BOUND + Duration::from_secs(a.jobs.len() as u64 / 10_000)
        }
        _ => ONE_SHOT_BOUND,
    };
    let outcome = match command {
        QueueCommand::Work(a) => work(a).await,
        QueueCommand::Schedule(a) => schedule::schedule(a).await,
        command => tokio::time::timeout(bound, dispatch(command))
            .await
            .unwrap_or_else(|_| {
                Err(Failure {
                    code: exit::BACKEND,
                    message: format!("no answer from the database within {bound:?}"),
                })
            }),
    };
    match outcome {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

async fn dispatch(command: QueueCommand) -> Result<u8, Failure> {
    match command {
        QueueCommand::Migrate(conn) => {
            // Look first, so that the message says what this call did.
            let options = ConnectOptions::default()
                .schema(&conn.schema)
                .max_connections(1);
            let before = lockwise::queue::connect(&conn.url, options.clone().migrate(false)).await;
            let done = match before {
                Ok(_) => format!("the queue's store {:?} is up to date", conn.schema),
                Err(lockwise::Error::NotMigrated { store, outdated }) => {
                    lockwise::queue::connect(&conn.url, options).await?;
                    let verb = if outdated { "migrated" } else { "created" };
                    format!("{verb} the queue's {store}")
                }
                Err(e) => return Err(e.into()),
            };
            eprintln!("lockwise: {done}");
        }
        QueueCommand::Enqueue(a) if a.jsonl => {
            lockwise::queue::check_queue_name(&a.queue)?;
            if a.jobs.is_empty() {
                return Ok(0);
            }
            let queue = open(&a.conn, &a.queue, 1, Store::Migrate).await?;
            let done = enqueue::enqueue_lines(&queue, a.jobs).await?;
            let mut out = String::with_capacity(done.len() * 12);
            for enqueued in done {
                if a.json {
                    out.push_str(
                        &serde_json::json!({"id": enqueued.id.0, "duplicate": enqueued.duplicate})
                            .to_string(),
                    );
                } else {
                    out.push_str(&enqueued.id.to_string());
                }
                out.push('\n');
            }
            if out.pop().is_some() {
                exit::print_line(&out, "the jobs were enqueued")?;
            }
        }
        QueueCommand::Enqueue(a) => {
            let payload: serde_json::Value = serde_json::from_slice(&a.payload_text)
                .map_err(|e| Failure::usage(format!("--payload is not JSON: {e}")))?;
            let mut job = Job::new(payload)
                .priority(a.priority)
                .max_attempts(a.max_attempts);
            if let Some(key) = a.key {
                job = job.key(key);
            }
            if let Some(delay) = a.delay {
                job = job.delay(delay);
            }
            if let Some(window) = a.unique_for {
                job = job.unique_for(window);
            }
            // Judged before connecting, so a refused job creates no store either.
            lockwise::queue::check_queue_name(&a.queue)?;
            job.check()?;
            let queue = open(&a.conn, &a.queue, 1, Store::Migrate).await?;
            let enqueued = queue.enqueue_with_status(job).await?;
            let line = if a.json {
                serde_json::json!({"id": enqueued.id.0, "duplicate": enqueued.duplicate})
                    .to_string()
            } else {
                enqueued.id.to_string()
            };
            exit::print_line(&line, "the job was enqueued")?;
        }
        QueueCommand::Stats(StatsArgs {
            conn,
            queue: None,
            json,
        }) => {
            let queue = open(&conn, "overview", 1, Store::Existing).await?;
            let all = queue.overview().await?;
            let text = inspect::overview(&all, json);
            if !text.is_empty() {
                exit::print_line(text.trim_end(), "nothing was changed")?;
            }
        }
        QueueCommand::Stats(a) => {
            let name = a.queue.as_deref().unwrap_or_default();
            let queue = open(&a.conn, name, 1, Store::Existing).await?;
            let s = queue.stats().await?;
            let total = s.ready + s.scheduled + s.running + s.done + s.dead + s.cancelled;
            if total == 0 {
                eprintln!(
                    "lockwise: queue {:?} has no job in any state: it never had one, or all \
                     were pruned (queue names are exact: check --queue)",
                    name
                );
            }
            let text = if a.json {
                inspect::stats_json(name, &s).to_string()
            } else {
                inspect::stats_text(&s)
            };
            exit::print_line(&text, "nothing was changed")?;
        }
        QueueCommand::Workers(a) => {
            let queue = open(&a.conn, "workers", 1, Store::Existing).await?;
            let workers = queue.workers().await?;
            let text = inspect::workers(&workers, a.json);
            if !text.is_empty() {
                exit::print_line(text.trim_end(), "nothing was changed")?;
            }
        }
        QueueCommand::Dead(a) => {
            let queue = open(&a.conn, &a.queue, 1, Store::Existing).await?;
            let jobs = queue.dead(a.limit).await?;
            if !a.json && !jobs.is_empty() {
                exit::print_line(inspect::JOB_LINE_HEADER, "nothing was changed")?;
            }
            for job in jobs {
                let line = if a.json {
                    inspect::job_json(&job).to_string()
                } else {
                    inspect::job_line(&job)
                };
                exit::print_line(&line, "nothing was changed")?;
            }
        }
        QueueCommand::Retry(a) => match (a.id, &a.queue) {
            (Some(id), _) => {
                let queue = open(&a.conn, "", 1, Store::Existing).await?;
                if !queue.retry(JobId(id)).await? {
                    return Err(Failure {
                        code: exit::NO_SUCH_JOB,
                        message: format!(
                            "no dead or cancelled job {id} in this store (no such job, or it is neither)"
                        ),
                    });
                }
                eprintln!("lockwise: job {id} is ready again, with a fresh budget of attempts");
            }
            (None, Some(name)) => {
                lockwise::queue::check_queue_name(name)?;
                let queue = open(&a.conn, name, 1, Store::Existing).await?;
                let retried = queue.retry_all().await?;
                let jobs = if retried == 1 { "job" } else { "jobs" };
                eprintln!(
                    "lockwise: {retried} dead {jobs} of {name} ready again, each with a fresh \
                     budget of attempts"
                );
            }
            (None, None) => return Err(Failure::usage("retry needs a JOB_ID, or --all --queue Q")),
        },
        QueueCommand::RunNow(a) => {
            let queue = open(&a.conn, "", 1, Store::Existing).await?;
            if !queue.run_now(JobId(a.id)).await? {
                return Err(Failure {
                    code: exit::NO_SUCH_JOB,
                    message: format!(
                        "no job {} due later in this store (no such job, or it is due already, \
                         running or finished)",
                        a.id
                    ),
                });
            }
            eprintln!("lockwise: job {} is due now", a.id);
        }
        QueueCommand::Show(a) => inspect::show(&a.conn, a.id, a.json).await?,
        QueueCommand::List(a) => {
            lockwise::queue::check_queue_name(&a.queue)?;
            inspect::list(&a.conn, &a.queue, a.state, a.limit, a.json).await?;
        }
        QueueCommand::Cancel(a) => match (a.id, a.queue) {
            (Some(id), _) => inspect::cancel(&a.conn, id).await?,
            (None, Some(queue)) => inspect::cancel_all(&a.conn, &queue, a.states).await?,
            (None, None) => return Err(Failure::usage("give a JOB_ID, or --all --queue Q")),
        },
        QueueCommand::Prune(a) => {
            if let Some(queue) = &a.queue {
                lockwise::queue::check_queue_name(queue)?;
            }
            let states: Vec<JobState> =
                [(a.done, JobState::Done), (a.cancelled, JobState::Cancelled)]
                    .into_iter()
                    .filter_map(|(asked, state)| asked.then_some(state))
                    .collect();
            inspect::prune(&a.conn, a.queue.as_deref(), &states, a.older_than).await?;
        }
        QueueCommand::Purge(a) => {
            let queue = open(
                &a.conn,
                a.queue.as_deref().unwrap_or(""),
                1,
                Store::Existing,
            )
            .await?;
            let purged = match a.queue {
                Some(_) => queue.purge_dead(a.older_than).await?,
                None => queue.purge_dead_everywhere(a.older_than).await?,
            };
            let jobs = if purged == 1 { "job" } else { "jobs" };
            eprintln!("lockwise: purged {purged} dead {jobs}");
        }
        QueueCommand::Pause(a) => return schedule::pause(a, true).await,
        QueueCommand::Resume(a) => return schedule::pause(a, false).await,
        QueueCommand::Work(a) => return work(a).await, // (not bounded: it runs until stopped)
        QueueCommand::Schedule(a) => return schedule::schedule(a).await,
    }
    Ok(0)
}

impl QueueArgs {
    /// Whether this is `queue work`, the one command that logs a line per job.
    pub(crate) fn is_work(&self) -> bool {
        matches!(self.command, QueueCommand::Work(_))
    }

    /// The database URL, for `--password-file`.
    pub(crate) fn urls_mut(&mut self) -> Vec<&mut String> {
        let conn = match &mut self.command {
            QueueCommand::Migrate(conn) => conn,
            QueueCommand::Enqueue(a) => &mut a.conn,
            QueueCommand::Work(a) => &mut a.conn,
            QueueCommand::Stats(a) => &mut a.conn,
            QueueCommand::Workers(a) => &mut a.conn,
            QueueCommand::Dead(a) => &mut a.conn,
            QueueCommand::Show(a) => &mut a.conn,
            QueueCommand::List(a) => &mut a.conn,
            QueueCommand::Retry(a) => &mut a.conn,
            QueueCommand::RunNow(a) => &mut a.conn,
            QueueCommand::Cancel(a) => &mut a.conn,
            QueueCommand::Purge(a) => &mut a.conn,
            QueueCommand::Prune(a) => &mut a.conn,
            QueueCommand::Pause(a) | QueueCommand::Resume(a) => &mut a.conn,
            QueueCommand::Schedule(a) => &mut a.conn,
        };
        vec![&mut conn.url]
    }
}
