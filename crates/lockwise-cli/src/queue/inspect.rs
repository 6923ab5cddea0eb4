//! `lockwise queue show | list | cancel | prune`, and how `stats` and `dead` print: looking at
//! jobs and cleaning up after them. Text output is for people (control characters escaped, so
//! a job's payload or error can never drive the terminal); `--json` output is for programs.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use lockwise::queue::{JobId, JobInfo, JobState, QueueOverview, Stats, WorkerInfo};
use serde_json::{Value, json};

use super::conn::{Conn, Store, open};
use crate::exit::{self, Failure};

/// `s` on one line, every control character written as an escape (`\n`, `\t`, `\u{1b}`…), so
/// that stored text cannot move the cursor, clear the screen or forge lines of output.
pub(super) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// A time as RFC 3339 in UTC with microseconds, as `--json` prints it.
fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

/// A time as people read it: RFC 3339 in UTC, to the millisecond.
fn readable(t: Option<SystemTime>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| humantime::format_rfc3339_millis(t).to_string(),
    )
}

/// `stats --json`: counts that do not overlap.
pub(super) fn stats_json(queue: &str, s: &Stats) -> Value {
    json!({
        "queue": queue, "ready": s.ready, "scheduled": s.scheduled, "running": s.running,
        "done": s.done, "dead": s.dead, "cancelled": s.cancelled,
    })
}

/// `stats` without `--queue`: a line per queue (a JSON object each with `json`), under a
/// header.
pub(super) fn overview(all: &[QueueOverview], json: bool) -> String {
    let age = |s: &Stats| s.oldest_ready.map(|d| d.as_secs_f64());
    if json {
        return all
            .iter()
            .map(|q| {
                let mut line = stats_json(&q.queue, &q.stats);
                line["oldest_ready_secs"] = json!(age(&q.stats));
                line["done_last_minute"] = json!(q.done_last_minute);
                line.to_string() + "\n"
            })
            .collect();
    }
    let mut out = format!(
        "{:<24} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9}\n",
        "QUEUE",
        "READY",
        "SCHEDULED",
        "RUNNING",
        "DONE",
        "DEAD",
        "CANCELLED",
        "OLDEST READY",
        "DONE/MIN"
    );
    for q in all {
        let s = &q.stats;
        let oldest = age(s).map_or_else(|| "-".to_owned(), |secs| format!("{secs:.1}s"));
        out.push_str(&format!(
            "{:<24} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:>9}\n",
            q.queue,
            s.ready,
            s.scheduled,
            s.running,
            s.done,
            s.dead,
            s.cancelled,
            oldest,
            q.done_last_minute
        ));
    }
    out
}

/// `workers`: a line per live worker (a JSON object each with `json`), under a header.
pub(super) fn workers(all: &[WorkerInfo], json: bool) -> String {
    if json {
        return all
            .iter()
            .map(|w| {
                json!({
                    "id": w.id, "host": w.host, "pid": w.pid, "queues": w.queues,
                    "concurrency": w.concurrency, "running": w.running,
                    "started_at": rfc3339(w.started_at),
                    "last_heartbeat": rfc3339(w.last_heartbeat),
                })
                .to_string()
                    + "\n"
            })
            .collect();
    }
    let mut out = format!(
        "{:<32} {:<16} {:>8} {:>7} {:>11}  {:<24} QUEUES\n",
        "ID", "HOST", "PID", "RUNNING", "CONCURRENCY", "LAST HEARTBEAT"
    );
    for w in all {
        out.push_str(&format!(
            "{:<32} {:<16} {:>8} {:>7} {:>11}  {:<24} {}\n",
            w.id,
            w.host,
            w.pid,
            w.running,
            w.concurrency,
            rfc3339(w.last_heartbeat),
            w.queues.join(",")
        ));
    }
    out
}

/// `stats` as text: one state per line.
pub(super) fn stats_text(s: &Stats) -> String {
    format!(
        "ready     {}\nscheduled {}\nrunning   {}\ndone      {}\ndead      {}\ncancelled {}",
        s.ready, s.scheduled, s.running, s.done, s.dead, s.cancelled
    )
}

/// Everything about a job as one JSON object (`show --json`, a line of `list --json` and of
/// `dead --json`): one shape wherever a job is printed.
pub(super) fn job_json(job: &JobInfo) -> Value {
    json!({
        "id": job.id.0,
        "queue": job.queue,
        "state": job.state.as_str(),
        "priority": job.priority,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "key": job.key,
        "payload": job.payload,
        "worker": job.worker,
        "created_at": rfc3339(job.created_at),
        "run_at": rfc3339(job.run_at),
        "lease_until": job.lease_until.map(rfc3339),
        "finished_at": job.finished_at.map(rfc3339),
        "last_error": job.last_error,
        "errors": job.errors,
    })
}

/// `show` as text: one field per line.
fn job_text(job: &JobInfo) -> String {
    let or_dash = |s: Option<&str>| printable(s.unwrap_or("-")).into_owned();
    format!(
        "id          {}\nqueue       {}\nstate       {}\nattempt     {} of {}\npriority    {}\n\
         key         {}\nworker      {}\ncreated_at  {}\nrun_at      {}\nlease_until {}\n\
         finished_at {}\npayload     {}\nlast_error  {}",
        job.id,
        printable(&job.queue),
        job.state,
        job.attempt,
        job.max_attempts,
        job.priority,
        or_dash(job.key.as_deref()),
        or_dash(job.worker.as_deref()),
        readable(Some(job.created_at)),
        readable(Some(job.run_at)),
        readable(job.lease_until),
        readable(job.finished_at),
        printable(&job.payload.to_string()),
        or_dash(job.last_error.as_deref()),
    )
}

/// The header of the lines of `list` and `dead`, as [`job_line`] fills them.
pub(super) const JOB_LINE_HEADER: &str = "id\tstate\tattempt\twhen\tkey\tlast_error";

/// A line of `list` and `dead`: id, state, attempts, when (due, or finished), key, last error.
pub(super) fn job_line(job: &JobInfo) -> String {
    let when = if job.state.is_finished() {
        job.finished_at
    } else {
        Some(job.run_at)
    };
    format!(
        "{}\t{}\tattempt {}/{}\t{}\t{}\t{}",
        job.id,
        job.state,
        job.attempt,
        job.max_attempts,
        readable(when),
        printable(job.key.as_deref().unwrap_or("-")),
        printable(job.last_error.as_deref().unwrap_or("")),
    )
}

fn no_such(message: String) -> Failure {
    Failure {
        code: exit::NO_SUCH_JOB,
        message,
    }
}

/// `queue show JOB`.
pub(super) async fn show(conn: &Conn, id: i64, as_json: bool) -> Result<(), Failure> {
    let queue = open(conn, "", 1, Store::Existing).await?;
    let job = queue
        .job(JobId(id))
        .await?
        .ok_or_else(|| no_such(format!("no job {id} in this store")))?;
    let text = if as_json {
        job_json(&job).to_string()
    } else {
        job_text(&job)
    };
    exit::print_line(&text, "nothing was changed")
}

/// `queue list --state S`.
pub(super) async fn list(
    conn: &Conn,
    queue: &str,
    state: JobState,
    limit: i64,
    as_json: bool,
) -> Result<(), Failure> {
    let queue = open(conn, queue, 1, Store::Existing).await?;
    let jobs = queue.list(state, limit).await?;
    if !as_json && !jobs.is_empty() {
        exit::print_line(JOB_LINE_HEADER, "nothing was changed")?;
    }
    for job in jobs {
        let line = if as_json {
            job_json(&job).to_string()
        } else {
            job_line(&job)
        };
        exit::print_line(&line, "nothing was changed")?;
    }
    Ok(())
}

/// `queue cancel JOB`.
pub(super) async fn cancel(conn: &Conn, id: i64) -> Result<(), Failure> {
    let queue = open(conn, "", 1, Store::Existing).await?;
    if !queue.cancel(JobId(id)).await? {
        return Err(no_such(format!(
            "no job {id} to cancel in this store (no such job, or it has finished)"
        )));
    }
    eprintln!("lockwise: cancelled job {id}");
    Ok(())
}

/// `queue cancel --all --queue Q [--state S]…` (default: ready and scheduled).
pub(super) async fn cancel_all(
    conn: &Conn,
    queue: &str,
    mut states: Vec<JobState>,
) -> Result<(), Failure> {
    lockwise::queue::check_queue_name(queue)?;
    if states.is_empty() {
        states = vec![JobState::Ready, JobState::Scheduled];
    }
    if let Some(finished) = states.iter().find(|s| s.is_finished()) {
        return Err(Failure::usage(format!(
            "--state {finished}: only ready, scheduled and running jobs can be cancelled"
        )));
    }
    let store = open(conn, queue, 1, Store::Existing).await?;
    let cancelled = store.cancel_all(&states).await?;
    let jobs = if cancelled == 1 { "job" } else { "jobs" };
    eprintln!("lockwise: cancelled {cancelled} {jobs} of queue {queue:?}");
    Ok(())
}

/// `queue prune --done/--cancelled --older-than D [--queue Q]`.
pub(super) async fn prune(
    conn: &Conn,
    queue: Option<&str>,
    states: &[JobState],
    older_than: Duration,
) -> Result<(), Failure> {
    let store = open(conn, queue.unwrap_or(""), 1, Store::Existing).await?;
    for state in states {
        let pruned = match queue {
            Some(_) => store.prune(*state, older_than).await?,
            None => store.prune_everywhere(*state, older_than).await?,
        };
        let jobs = if pruned == 1 { "job" } else { "jobs" };
        eprintln!("lockwise: pruned {pruned} {state} {jobs}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped_and_text_stays_on_one_line() {
        assert_eq!(printable("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(
            printable("a\nb\tc\u{1b}[2Jd\0e\u{7f}"),
            "a\\nb\\tc\\u{1b}[2Jd\\u{0}e\\u{7f}"
        );
        assert!(!printable("x\r\ny").contains(['\r', '\n']));
    }
}
