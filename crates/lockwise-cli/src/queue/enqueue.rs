//! `lockwise queue enqueue`: its arguments, and the jobs it reads (a payload, or JSON lines).

use std::time::Duration;

use lockwise::queue::Job;
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
    /// {"payload": JSON, "key": "K", "unique_for": "1h", "priority": P, "delay": "5s",
    /// "max_attempts": N} with only "payload" required; durations are written as for the
    /// flags, other fields are refused, blank lines skipped. --priority, --delay and
    /// --max-attempts give the defaults of the lines that leave them out. Prints one id per
    /// line, in input order (with --json one object per line). A line that is not a valid
    /// job exits 65, naming it, before anything is stored
    #[arg(long, conflicts_with_all = ["payload", "key", "unique_for"])]
    pub(super) jsonl: bool,
    /// The jobs read with --jsonl.
    #[arg(skip)]
    pub(super) jobs: Vec<Job>,
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
    pub(super) key: Option<String>,
    pub(super) unique_for: Option<String>,
    pub(super) priority: Option<i16>,
    pub(super) delay: Option<String>,
    pub(super) max_attempts: Option<u16>,
}

/// Reads stdin whole and makes a job of each line that is not blank, checked as the
/// database would; the first bad line is a data error (exit 65) naming it.
pub(super) async fn read_jsonl(a: &EnqueueArgs) -> Result<Vec<Job>, Failure> {
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
