//! Enqueueing many jobs, written once for every database: split the jobs into runs without a
//! uniqueness window and single jobs with one, chunk each run by rows and bytes, insert a key
//! repeated in a chunk once, and look again for keys a concurrent enqueue committed after the
//! statement's snapshot. A database supplies only its statements ([`Insert`]).

use async_trait::async_trait;

use super::{Enqueued, Job};
use crate::error::Result;

/// The steps of enqueueing that differ between databases: the INSERT of one job (or the
/// lookup of the job with the same idempotency key), and the one statement that inserts a run
/// of jobs, on a connection of its database.
#[async_trait]
pub(super) trait Insert: Sync {
    /// The database.
    type Db: sqlx::Database;

    /// The most jobs one bulk statement carries.
    const MAX_ROWS: usize;

    /// The most payload bytes one bulk statement carries (a single larger payload still goes,
    /// alone).
    const MAX_BYTES: usize;

    /// The store's pool.
    fn pool(&self) -> &sqlx::Pool<Self::Db>;

    /// Readies a pooled connection for the transaction of [`insert_all`] (MySQL: READ
    /// COMMITTED, so that looking for keys takes no gap locks).
    async fn before_transaction(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
    ) -> Result<()> {
        let _ = conn;
        Ok(())
    }

    /// The largest payload, in bytes, that one statement of this server can carry (`None`: no
    /// limit below the protocol's). A job with a larger payload is an
    /// [`Error::InvalidJob`](crate::Error::InvalidJob) before anything is sent.
    async fn max_payload(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
    ) -> Result<Option<usize>> {
        let _ = conn;
        Ok(None)
    }

    /// Inserts `job` into `queue` through `conn`.
    async fn insert(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        queue: &str,
        job: &Job,
    ) -> Result<Enqueued>;

    /// Inserts `jobs` (no key twice, no uniqueness window; `payloads` their payloads as JSON
    /// text) into `queue` through `conn` in one statement, or finds the jobs holding their
    /// keys: one answer per job, in their order, `None` where the job holding its key
    /// committed too late for this statement to see it (the caller asks again).
    async fn insert_many(
        &self,
        conn: &mut <Self::Db as sqlx::Database>::Connection,
        queue: &str,
        jobs: &[&Job],
        payloads: &[&str],
    ) -> Result<Vec<Option<Enqueued>>>;
}

/// Enqueues `jobs` with `store`: one job on a pooled connection (one round trip), several in
/// one transaction ([`insert_in`]: all or none, and on PostgreSQL one NOTIFY).
pub(super) async fn insert_all<S: Insert>(
    store: &S,
    queue: &str,
    jobs: &[Job],
) -> Result<Vec<Enqueued>> {
    let mut conn = store.pool().acquire().await?;
    if let [job] = jobs {
        return Ok(vec![store.insert(&mut conn, queue, job).await?]);
    }
    store.before_transaction(&mut conn).await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let ids = insert_in(store, &mut tx, queue, jobs).await?;
    tx.commit().await?;
    Ok(ids)
}

/// Enqueues `jobs` through `conn`, in input order: each run of jobs without a uniqueness
/// window in bulk statements of at most [`Insert::MAX_ROWS`] jobs and
/// [`Insert::MAX_BYTES`] of payload, and each job whose key has a window
/// ([`Job::unique_for`]) with the per-job statements, in its place. Releasing an expired key
/// and inserting after it depends on every job before it with the same key, in this call
/// too: done one job at a time, it keeps exactly the semantics of enqueueing the jobs one by
/// one, at the cost of a round trip or two for each such job.
pub(super) async fn insert_in<S: Insert>(
    store: &S,
    conn: &mut <S::Db as sqlx::Database>::Connection,
    queue: &str,
    jobs: &[Job],
) -> Result<Vec<Enqueued>> {
    let payloads: Vec<String> = jobs.iter().map(|job| job.payload.to_string()).collect();
    // Every payload is checked before the first statement: a job too large stores nothing.
    let max_payload = store.max_payload(&mut *conn).await?;
    if let Some(limit) = max_payload {
        for payload in &payloads {
            check_payload(payload.len(), limit)?;
        }
    }
    let max_bytes = max_payload.map_or(S::MAX_BYTES, |limit| limit.min(S::MAX_BYTES));
    let mut done = Vec::with_capacity(jobs.len());
    let mut rest = jobs;
    let mut offset = 0;
    while let Some(first) = rest.first() {
        if first.windowed_key().is_some() {
            done.push(store.insert(&mut *conn, queue, first).await?);
            rest = &rest[1..];
            offset += 1;
            continue;
        }
        let end = rest
            .iter()
            .position(|job| job.windowed_key().is_some())
            .unwrap_or(rest.len());
        let (run, after) = rest.split_at(end);
        let payloads = &payloads[offset..offset + run.len()];
        // With a server limit, a statement's size counts each row's other values too.
        let row_bytes = |i: usize| match max_payload {
            Some(_) => {
                let key = run[i].key.as_deref().map_or(0, str::len);
                payloads[i].len() + queue.len() + key + ROW_OVERHEAD
            }
            None => payloads[i].len(),
        };
        let mut start = 0;
        while start < run.len() {
            let mut stop = start;
            let mut bytes = 0;
            while stop < run.len()
                && stop - start < S::MAX_ROWS
                && (stop == start || bytes + row_bytes(stop) <= max_bytes)
            {
                bytes += row_bytes(stop);
                stop += 1;
            }
            let chunk = insert_run(
                store,
                conn,
                queue,
                &run[start..stop],
                &payloads[start..stop],
            );
            done.extend(chunk.await?);
            start = stop;
        }
        offset += run.len();
        rest = after;
    }
    Ok(done)
}

/// What a bulk statement carries for a row besides its payload, queue name and key (its
/// other values and their framing), counted where the server limits a statement's size.
const ROW_OVERHEAD: usize = 64;

/// A payload of `len` bytes fits a server that carries payloads of up to `limit` bytes.
pub(super) fn check_payload(len: usize, limit: usize) -> Result<()> {
    if len <= limit {
        return Ok(());
    }
    Err(crate::error::Error::InvalidJob {
        reason: format!(
            "its payload is {len} bytes, over the {limit} bytes one statement can carry on \
             this server (MariaDB/MySQL max_allowed_packet, less room for the statement): \
             raise max_allowed_packet, or store the payload elsewhere and enqueue a reference"
        ),
    })
}

/// Enqueues one chunk of jobs without a uniqueness window, in bulk: a key repeated in the
/// chunk is inserted (or found) once, and the later jobs with it get the same id, as
/// duplicates.
async fn insert_run<S: Insert>(
    store: &S,
    conn: &mut <S::Db as sqlx::Database>::Connection,
    queue: &str,
    jobs: &[Job],
    payloads: &[String],
) -> Result<Vec<Enqueued>> {
    // For each job, the index of the first job of the chunk with its key (itself if none).
    let mut first_with_key: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::new();
    let origin: Vec<usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| match job.key.as_deref() {
            Some(key) => *first_with_key.entry(key).or_insert(i),
            None => i,
        })
        .collect();
    let mut answers: Vec<Option<Enqueued>> = vec![None; jobs.len()];
    let mut pending: Vec<usize> = (0..jobs.len()).filter(|&i| origin[i] == i).collect();
    for _ in 0..3 {
        let batch: Vec<&Job> = pending.iter().map(|&i| &jobs[i]).collect();
        let texts: Vec<&str> = pending.iter().map(|&i| payloads[i].as_str()).collect();
        let got = store.insert_many(&mut *conn, queue, &batch, &texts).await?;
        let mut again = Vec::new();
        for (i, answer) in pending.into_iter().zip(got) {
            match answer {
                Some(enqueued) => answers[i] = Some(enqueued),
                // A concurrent enqueue with the same key committed after the statement's
                // snapshot: look again.
                None => again.push(i),
            }
        }
        pending = again;
        if pending.is_empty() {
            break;
        }
    }
    origin
        .iter()
        .enumerate()
        .map(|(i, &from)| match answers[from] {
            Some(enqueued) if from == i => Ok(enqueued),
            Some(enqueued) => Ok(Enqueued {
                id: enqueued.id,
                duplicate: true,
            }),
            None => Err(crate::error::Error::backend_msg(
                "queue",
                "enqueue found neither a new nor an existing job",
            )),
        })
        .collect()
}
