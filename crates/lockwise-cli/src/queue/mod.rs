//! `lockwise queue`: the job queue (PostgreSQL or MariaDB/MySQL) from the command line. All
//! database work is the library's ([`lockwise::queue`]); this module parses, prints and
//! runs handler commands.

use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobContext, JobId, JobState, Queue, Worker};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::child::{DECIDE_AHEAD, DeadlineFeed};
use crate::exit::Failure;
use crate::{duration, exit};

mod inspect;

const EXIT_CODES: &str = "\
Exit codes:
  0         done (work: stopped by SIGTERM/SIGINT, or the queue drained with --once)
  64        usage error: arguments, duration, URL, --payload not JSON or unreadable, an invalid
            job (NUL, queue name or key length); stats/dead/show/list/retry/cancel/purge/prune
            on a store that was never migrated (they create nothing)
  65        enqueue --jsonl: a line that is not a valid job (the message names it); nothing
            from the input is stored
  66        retry: no dead job with that id; show: no job with that id; cancel: no job
            with that id that has not finished
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
    /// List dead letters, oldest first (creates nothing)
    Dead(DeadArgs),
    /// Show everything stored about one job, of any queue (creates nothing)
    Show(ShowArgs),
    /// List one queue's jobs in a state: ready and scheduled in the order they will run, the
    /// others newest first (creates nothing)
    List(ListArgs),
    /// Send a dead job back to ready with a fresh budget of attempts
    Retry(RetryArgs),
    /// Cancel a job that has not finished: a ready or scheduled job will not run; a running
    /// one's handler is stopped at its worker's next heartbeat (within a third of its lease)
    Cancel(CancelArgs),
    /// Delete dead letters older than a duration
    Purge(PurgeArgs),
    /// Delete done (and/or cancelled) jobs older than a duration
    Prune(PruneArgs),
}

#[derive(Debug, clap::Args)]
struct Conn {
    /// postgres://user@host/db, or mysql://user@host/db for MariaDB/MySQL
    #[arg(long, env = "LOCKWISE_URL", hide_env_values = true, value_name = "URL")]
    url: String,
    /// The schema of the queue's tables (on MariaDB/MySQL: their name prefix)
    #[arg(
        long,
        env = "LOCKWISE_SCHEMA",
        default_value = "lockwise",
        value_name = "NAME"
    )]
    schema: String,
}

#[derive(Debug, clap::Args)]
struct EnqueueArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name
    #[arg(long, value_name = "Q")]
    queue: String,
    /// The job's payload, JSON; `-` reads it from stdin, `@FILE` from a file (for payloads
    /// too large for the command line)
    #[arg(long, value_name = "JSON|-|@FILE", required_unless_present = "jsonl")]
    payload: Option<String>,
    /// The payload's text once read (from the argument, stdin or the file).
    #[arg(skip)]
    payload_text: Vec<u8>,
    /// Read jobs from stdin, one JSON object per line, and enqueue them all in one
    /// transaction (bulk statements of up to 10,000 jobs): all or none. Each line is
    /// {"payload": JSON, "key": "K", "unique_for": "1h", "priority": P, "delay": "5s",
    /// "max_attempts": N} with only "payload" required; durations are written as for the
    /// flags, other fields are refused, blank lines skipped. --priority, --delay and
    /// --max-attempts give the defaults of the lines that leave them out. Prints one id per
    /// line, in input order (with --json one object per line). A line that is not a valid
    /// job exits 65, naming it, before anything is stored
    #[arg(long, conflicts_with_all = ["payload", "key", "unique_for"])]
    jsonl: bool,
    /// The jobs read with --jsonl.
    #[arg(skip)]
    jobs: Vec<Job>,
    /// Idempotency key: a second enqueue with the same key in the same queue prints the first
    /// job's id and adds nothing
    #[arg(long, value_name = "K")]
    key: Option<String>,
    /// The --key names its job only for this long after it was enqueued; an enqueue after
    /// that makes a new job [default: for as long as the job exists]
    #[arg(long, requires = "key", value_parser = duration::parse, value_name = "DURATION")]
    unique_for: Option<Duration>,
    /// Lower runs first
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        value_name = "P"
    )]
    priority: i16,
    /// Run no earlier than this from now
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    delay: Option<Duration>,
    /// Print `{"id": N, "duplicate": BOOL}` instead of the bare id (`duplicate`: the --key
    /// named a job already there, whose id it is)
    #[arg(long)]
    json: bool,
    /// Attempts before the job is dead
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    max_attempts: u16,
}

#[derive(Debug, clap::Args)]
struct WorkArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name; repeat it to work on several queues of the store, which share
    /// --concurrency (ready jobs are claimed by priority across them)
    #[arg(long, value_name = "Q", required = true)]
    queue: Vec<String>,
    /// Jobs run at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    concurrency: u16,
    /// Most jobs claimed per statement [default: the concurrency]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    batch: Option<u16>,
    /// Most claimed jobs waiting for a free slot, claimed ahead while short jobs run (0: claim
    /// only for free slots) [default: a batch per claim in flight but one, at most 1000]
    #[arg(long, value_name = "N")]
    prefetch: Option<u16>,
    /// Lease of a claimed job, renewed while it runs (at least 1s)
    #[arg(long, default_value = "30s", value_parser = duration::parse_lease, value_name = "DURATION")]
    lease: Duration,
    /// Fail a job that runs longer than this: its CMD gets SIGTERM then, and SIGKILL
    /// --kill-after later
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// After SIGTERM/SIGINT, how long running jobs may finish; then their CMDs get SIGTERM,
    /// and those that do not exit 0 within --kill-after are handed back (not failed)
    #[arg(long, default_value = "30s", value_parser = duration::parse, value_name = "DURATION")]
    grace: Duration,
    /// A job asked to stop (at --timeout, at the end of --grace, or when its lease is about
    /// to run out unrenewed) gets SIGTERM, then SIGKILL this much later if still running (at
    /// its lease's end at the latest)
    #[arg(long, default_value = "5s", value_parser = duration::parse, value_name = "DURATION")]
    kill_after: Duration,
    /// How often an idle worker looks for jobs; on MariaDB/MySQL (no notifications), how soon
    /// it sees a new one
    #[arg(long, default_value = "1s", value_parser = duration::parse_positive, value_name = "DURATION")]
    poll_interval: Duration,
    /// Drain the queue, then exit 0: stop claiming once a claim finds no ready job while no
    /// handler runs (jobs not ready yet, delayed or waiting to retry, do not keep it running)
    #[arg(long)]
    once: bool,
    /// Exit 69 when no claim has succeeded for this long (the database down, unreachable or
    /// refusing; a claim that gets no answer fails when its lease would run out), or `never`
    /// to wait for the database. Failures are logged when they start and when they end
    #[arg(long, default_value = "30s", value_parser = parse_give_up, value_name = "DURATION|never")]
    give_up_after: GiveUp,
    /// The handler and its arguments
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
struct StatsArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue's name
    #[arg(long, value_name = "Q")]
    queue: String,
    /// One JSON object on stdout
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
    #[arg(value_name = "JOB_ID")]
    id: i64,
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

/// `--give-up-after`: a duration, or never.
#[derive(Debug, Clone, Copy)]
struct GiveUp(Option<Duration>);

fn parse_give_up(text: &str) -> Result<GiveUp, String> {
    if text == "never" {
        return Ok(GiveUp(None));
    }
    duration::parse_positive(text).map(|d| GiveUp(Some(d)))
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

/// One line of `queue enqueue --jsonl`: the flags of one job.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JobLine {
    payload: serde_json::Value,
    key: Option<String>,
    unique_for: Option<String>,
    priority: Option<i16>,
    delay: Option<String>,
    max_attempts: Option<u16>,
}

/// Reads stdin whole and makes a job of each line that is not blank, checked as the
/// database would; the first bad line is a data error (exit 65) naming it.
async fn read_jsonl(a: &EnqueueArgs) -> Result<Vec<Job>, Failure> {
    let mut text = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut text)
        .await
        .map_err(|e| Failure::usage(format!("--jsonl: cannot read stdin: {e}")))?;
    let bad = |number: usize, why: String| Failure {
        code: exit::DATA,
        message: format!("--jsonl: line {number}: {why}; nothing was enqueued"),
    };
    let mut jobs = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line: JobLine = serde_json::from_slice(line).map_err(|e| {
            // serde's own position counts lines of this line only: keep its column.
            let at = format!(" at line {} column {}", e.line(), e.column());
            let why = e.to_string();
            let why = why.strip_suffix(&at).unwrap_or(&why);
            bad(number, format!("column {}: {why}", e.column()))
        })?;
        let duration = |field: &str, text: Option<String>| {
            text.map(|t| duration::parse(&t).map_err(|e| bad(number, format!("{field}: {e}"))))
                .transpose()
        };
        let delay = duration("delay", line.delay)?.or(a.delay);
        let unique_for = duration("unique_for", line.unique_for)?;
        let max_attempts = line.max_attempts.unwrap_or(a.max_attempts);
        if max_attempts == 0 {
            return Err(bad(number, "max_attempts must be at least 1".to_owned()));
        }
        let mut job = Job::new(line.payload)
            .priority(line.priority.unwrap_or(a.priority))
            .max_attempts(max_attempts);
        if let Some(key) = line.key {
            job = job.key(key);
        }
        if let Some(delay) = delay {
            job = job.delay(delay);
        }
        if let Some(window) = unique_for {
            job = job.unique_for(window);
        }
        job.check().map_err(|e| bad(number, e.to_string()))?;
        jobs.push(job);
    }
    Ok(jobs)
}

/// The text of `--payload`: the argument itself, stdin for `-`, a file's content for `@FILE`.
async fn read_payload(arg: &str) -> Result<Vec<u8>, Failure> {
    if arg == "-" {
        let mut text = Vec::new();
        tokio::io::stdin()
            .read_to_end(&mut text)
            .await
            .map_err(|e| Failure::usage(format!("--payload -: cannot read stdin: {e}")))?;
        return Ok(text);
    }
    if let Some(file) = arg.strip_prefix('@') {
        return tokio::fs::read(file)
            .await
            .map_err(|e| Failure::usage(format!("--payload @{file}: cannot read it: {e}")));
    }
    Ok(arg.as_bytes().to_vec())
}

/// Whether a command may create or upgrade the queue's tables: only `migrate`, `enqueue` and
/// `work` do; the others need no CREATE privilege and fail (exit 64) on a store not migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Migrate,
    Existing,
}

/// Connects to the queue `queue` with a pool of `connections`, migrating it or only checking
/// that it is migrated. A store that `Store::Migrate` creates is said on stderr: a mistyped
/// `--schema` then shows at once, not as a worker that waits on an empty store.
async fn open(conn: &Conn, queue: &str, connections: u32, store: Store) -> Result<Queue, Failure> {
    let options = ConnectOptions::default()
        .queue(queue)
        .schema(&conn.schema)
        .max_connections(connections);
    let checked = lockwise::queue::connect(&conn.url, options.clone().migrate(false)).await;
    match (checked, store) {
        (Ok(queue), _) => Ok(queue),
        (Err(lockwise::Error::NotMigrated { store, outdated }), Store::Migrate) => {
            let queue = lockwise::queue::connect(&conn.url, options).await?;
            if !outdated {
                eprintln!("lockwise: created the queue's {store} (it did not exist)");
            }
            Ok(queue)
        }
        (Err(e), _) => Err(e.into()),
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
            let done = queue.enqueue_many_with_status(a.jobs).await?;
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
        QueueCommand::Stats(a) => {
            let queue = open(&a.conn, &a.queue, 1, Store::Existing).await?;
            let s = queue.stats().await?;
            let total = s.ready + s.scheduled + s.running + s.done + s.dead + s.cancelled;
            if total == 0 {
                eprintln!(
                    "lockwise: queue {:?} has no job in any state: it never had one, or all \
                     were pruned (queue names are exact: check --queue)",
                    a.queue
                );
            }
            let text = if a.json {
                inspect::stats_json(&a.queue, &s).to_string()
            } else {
                inspect::stats_text(&s)
            };
            exit::print_line(&text, "nothing was changed")?;
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
        QueueCommand::Retry(a) => {
            let queue = open(&a.conn, "", 1, Store::Existing).await?;
            if !queue.retry(JobId(a.id)).await? {
                return Err(Failure {
                    code: exit::NO_SUCH_JOB,
                    message: format!(
                        "no dead job {} in this store (no such job, or it is not dead)",
                        a.id
                    ),
                });
            }
            eprintln!(
                "lockwise: job {} is ready again, with a fresh budget of attempts",
                a.id
            );
        }
        QueueCommand::Show(a) => inspect::show(&a.conn, a.id, a.json).await?,
        QueueCommand::List(a) => {
            lockwise::queue::check_queue_name(&a.queue)?;
            inspect::list(&a.conn, &a.queue, a.state, a.limit, a.json).await?;
        }
        QueueCommand::Cancel(a) => inspect::cancel(&a.conn, a.id).await?,
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
        QueueCommand::Work(a) => return work(a).await, // (not bounded: it runs until stopped)
    }
    Ok(0)
}

async fn work(a: WorkArgs) -> Result<u8, Failure> {
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
    let first = a.queue.first().map_or("", String::as_str);
    let queue = open(&a.conn, first, u32::from(a.concurrency) + 4, Store::Migrate).await?;
    let mut worker = Worker::new(queue)
        .queues(a.queue)
        .concurrency(usize::from(a.concurrency))
        .lease(a.lease)
        .grace(a.grace)
        .poll_interval(a.poll_interval)
        .kill_after(a.kill_after)
        .until_idle(a.once);
    if let Some(limit) = a.timeout {
        worker = worker.timeout(limit);
    }
    if let GiveUp(Some(limit)) = a.give_up_after {
        worker = worker.give_up_after(limit);
    }
    if let Some(batch) = a.batch {
        worker = worker.batch(usize::from(batch));
    }
    if let Some(prefetch) = a.prefetch {
        worker = worker.prefetch(usize::from(prefetch));
    }
    let shutdown = CancellationToken::new();
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        (Err(e), _) | (_, Err(e)) => {
            return Err(Failure {
                code: exit::BACKEND,
                message: format!("cannot install signal handlers: {e}"),
            });
        }
    };
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("lockwise: shutting down: no new jobs, running ones get the grace period");
        stop.cancel();
    });
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
            QueueCommand::Dead(a) => &mut a.conn,
            QueueCommand::Show(a) => &mut a.conn,
            QueueCommand::List(a) => &mut a.conn,
            QueueCommand::Retry(a) => &mut a.conn,
            QueueCommand::Cancel(a) => &mut a.conn,
            QueueCommand::Purge(a) => &mut a.conn,
            QueueCommand::Prune(a) => &mut a.conn,
        };
        vec![&mut conn.url]
    }
}
