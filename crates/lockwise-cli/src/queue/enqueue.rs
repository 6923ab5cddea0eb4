//! `lockwise queue enqueue`: its arguments, and the jobs it reads (a payload, or JSON lines).

use std::collections::BTreeMap;
use std::time::Duration;

use lockwise::queue::{Enqueued, Job, Queue};
use tokio::io::AsyncReadExt;

use super::conn::Conn;
use crate::duration;
use crate::exit::{self, Failure};

#[derive(Debug, clap::Args)]
pub(super) struct EnqueueArgs {
    #[command(flatten)]
    pub(super) conn: Conn,
    /// The queue's name
    #[arg(long, value_name = "Q")]
    pub(super) queue: String,
    /// The job's payload, JSON; `-` reads it from stdin, `@FILE` from a file (for payloads
    /// too large for the command line)
    #[arg(long, value_name = "JSON|-|@FILE", required_unless_present = "jsonl")]
    pub(super) payload: Option<String>,
    /// The payload's text once read (from the argument, stdin or the file).
    #[arg(skip)]
    pub(super) payload_text: Vec<u8>,
    /// Read jobs from stdin, one JSON object per line, and enqueue them all in one
    /// transaction (bulk statements of up to 10,000 jobs): all or none. Each line is
    /// {"payload": JSON, "queue": "Q", "key": "K", "unique_for": "1h", "priority": P, "delay":
    /// "5s", "max_attempts": N} with only "payload" required; durations are written as for the
    /// flags, other fields are refused, blank lines skipped. --queue, --priority, --delay and
    /// --max-attempts give the defaults of the lines that leave them out. Prints one id per
    /// line, in input order (with --json one object per line). A line that is not a valid
    /// job exits 65, naming it, before anything is stored
    #[arg(long, conflicts_with_all = ["payload", "key", "unique_for"])]
    pub(super) jsonl: bool,
    /// The jobs read with --jsonl, each with its queue.
    #[arg(skip)]
    pub(super) jobs: Vec<(String, Job)>,
    /// Idempotency key: a second enqueue with the same key in the same queue prints the first
    /// job's id and adds nothing
    #[arg(long, value_name = "K")]
    pub(super) key: Option<String>,
    /// The --key names its job only for this long after it was enqueued; an enqueue after
    /// that makes a new job [default: for as long as the job exists]
    #[arg(long, requires = "key", value_parser = duration::parse, value_name = "DURATION")]
    pub(super) unique_for: Option<Duration>,
    /// Lower runs first
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        value_name = "P"
    )]
    pub(super) priority: i16,
    /// Run no earlier than this from now
    #[arg(long, value_parser = duration::parse, value_name = "DURATION")]
    pub(super) delay: Option<Duration>,
    /// Print `{"id": N, "duplicate": BOOL}` instead of the bare id (`duplicate`: the --key
    /// named a job already there, whose id it is)
    #[arg(long)]
    pub(super) json: bool,
    /// Attempts before the job is dead
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    pub(super) max_attempts: u16,
}

/// One line of `queue enqueue --jsonl`: the flags of one job.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JobLine {
    pub(super) payload: serde_json::Value,
    pub(super) queue: Option<String>,
    pub(super) key: Option<String>,
    pub(super) unique_for: Option<String>,
    pub(super) priority: Option<i16>,
    pub(super) delay: Option<String>,
    pub(super) max_attempts: Option<u16>,
}

/// Reads stdin whole and makes a job of each line that is not blank, checked as the
/// database would; the first bad line is a data error (exit 65) naming it.
pub(super) async fn read_jsonl(a: &EnqueueArgs) -> Result<Vec<(String, Job)>, Failure> {
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
        let queue = line.queue.unwrap_or_else(|| a.queue.clone());
        lockwise::queue::check_queue_name(&queue).map_err(|e| bad(number, e.to_string()))?;
        jobs.push((queue, job));
    }
    Ok(jobs)
}

/// The text of `--payload`: the argument itself, stdin for `-`, a file's content for `@FILE`.
pub(super) async fn read_payload(arg: &str) -> Result<Vec<u8>, Failure> {
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

/// Enqueues the lines of `--jsonl`, all or none: the jobs of one queue in one call, those of
/// several queues in one transaction, a call per queue; the answers in input order.
pub(super) async fn enqueue_lines(
    queue: &Queue,
    jobs: Vec<(String, Job)>,
) -> lockwise::Result<Vec<Enqueued>> {
    let one_queue = jobs.iter().all(|(name, _)| *name == jobs[0].0);
    if one_queue {
        let name = jobs[0].0.clone();
        return queue
            .named(name)
            .enqueue_many_with_status(jobs.into_iter().map(|(_, job)| job))
            .await;
    }
    // By queue, each job with its place in the input.
    let mut by_queue: BTreeMap<String, Vec<(usize, Job)>> = BTreeMap::new();
    for (i, (name, job)) in jobs.into_iter().enumerate() {
        by_queue.entry(name).or_default().push((i, job));
    }
    let total = by_queue.values().map(Vec::len).sum();
    let mut answers: Vec<Option<Enqueued>> = vec![None; total];
    if let Some(pool) = queue.postgres_pool() {
        let mut tx = pool.begin().await.map_err(lockwise::Error::from)?;
        for (name, jobs) in by_queue {
            let (places, jobs): (Vec<usize>, Vec<Job>) = jobs.into_iter().unzip();
            let done = queue.named(name).enqueue_many_in(&mut tx, jobs).await?;
            for (place, enqueued) in places.into_iter().zip(done) {
                answers[place] = Some(enqueued);
            }
        }
        tx.commit().await.map_err(lockwise::Error::from)?;
    } else if let Some(pool) = queue.mysql_pool() {
        let mut conn = pool.acquire().await.map_err(lockwise::Error::from)?;
        // As enqueue_many's own transactions: no gap locks on the keys' index.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .execute(&mut *conn)
            .await
            .map_err(lockwise::Error::from)?;
        let mut tx = sqlx::Connection::begin(&mut *conn)
            .await
            .map_err(lockwise::Error::from)?;
        for (name, jobs) in by_queue {
            let (places, jobs): (Vec<usize>, Vec<Job>) = jobs.into_iter().unzip();
            let done = queue.named(name).enqueue_many_in(&mut tx, jobs).await?;
            for (place, enqueued) in places.into_iter().zip(done) {
                answers[place] = Some(enqueued);
            }
        }
        tx.commit().await.map_err(lockwise::Error::from)?;
    }
    Ok(answers.into_iter().flatten().collect())
}
