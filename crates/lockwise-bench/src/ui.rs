//! The dashboard's pages on a large queue: each page fetched over HTTP from a dashboard
//! (`lockwise-ui`) on loopback, against its floor, the library reads that page makes, timed
//! alone in the same run, the two alternating sample by sample.
//!
//! The store is a PostgreSQL schema of the bench's own with `jobs` ready jobs in one queue,
//! 1,000 done and 100 dead letters, dropped at the end.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::percentile_us;
use lockwise::queue::{Job, JobId, JobState, Queue};
use lockwise::url::BackendUrl;

/// The queue's name in the bench's store.
const QUEUE: &str = "bench";

/// One page's timings.
#[derive(Debug, Clone, Serialize)]
pub struct PageTiming {
    /// The page's path.
    pub page: String,
    /// The page over HTTP, p50 and p99, ms.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// The library reads the page makes, alone, p50, ms.
    pub floor_p50_ms: f64,
    /// The floor's p50 over the page's (1.0: rendering and HTTP cost nothing).
    pub ratio: f64,
    /// Samples of each.
    pub samples: usize,
}

/// Times each page `samples` times (and its floor as often) on a store of `jobs` ready jobs;
/// `url` is a `postgres://` URL. `tick` is called after each sample.
pub async fn pages(
    url: &str,
    jobs: u64,
    samples: usize,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<PageTiming>> {
    let BackendUrl::Postgres(url) = BackendUrl::parse(url)? else {
        return Err(Error::config("the dashboard bench needs a postgres:// URL"));
    };
    let name = format!(
        "lockwise_bench_ui_{}_{:04x}",
        std::process::id(),
        rand::random::<u16>()
    );
    let pool = crate::conn::pg_pool(&url, 8).await?;
    let schema = crate::conn::Schema::new(&name)?;
    let queue = Queue::with_schema(pool.clone(), &name, QUEUE)?;
    let outcome = async {
        queue.migrate().await?;
        let dead = fill(&queue, jobs).await?;
        measure(&queue, dead, jobs, samples.max(1), tick).await
    }
    .await;
    let dropped = sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/scaling_drop.sql")))
        .execute(&pool)
        .await;
    pool.close().await;
    let timings = outcome?;
    dropped?;
    Ok(timings)
}

/// 1,000 done jobs, 100 dead letters and `jobs` ready ones; returns a dead letter's id.
async fn fill(queue: &Queue, jobs: u64) -> Result<JobId> {
    let finished = queue
        .enqueue_many((0..1_100).map(|n| Job::new(json!({ "n": n })).max_attempts(1)))
        .await?;
    let claimed = queue
        .protocol()
        .claim("bench", 1_100, Duration::from_secs(300), &[])
        .await?;
    let all: Vec<(JobId, i32)> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
    queue.protocol().confirm_started(&all).await?;
    queue.protocol().complete(&all[..1_000]).await?;
    for &(id, attempt) in &all[1_000..] {
        queue
            .protocol()
            .fail(id, attempt, "the bench's failure", Duration::ZERO, true)
            .await?;
    }
    let mut left = jobs;
    while left > 0 {
        let n = left.min(1_000);
        queue
            .enqueue_many((0..n).map(|n| Job::new(json!({ "to": "someone", "n": n }))))
            .await?;
        left -= n;
    }
    Ok(finished[1_050])
}

async fn measure(
    queue: &Queue,
    dead: JobId,
    jobs: u64,
    samples: usize,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<PageTiming>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let stop = CancellationToken::new();
    let dashboard = lockwise_ui::Dashboard::new().queues(queue.clone());
    let server = tokio::spawn(lockwise_ui::serve(listener, dashboard, {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    }));
    let last_page = jobs.saturating_sub(1) / 50;
    let q = queue.named(QUEUE);
    let mut timings = Vec::new();
    let pages: [(String, Floor); 5] = [
        ("/queues".to_owned(), Floor::Overview),
        (format!("/jobs?queue={QUEUE}&state=ready"), Floor::List(0)),
        (
            format!("/jobs?queue={QUEUE}&state=ready&page={last_page}"),
            Floor::List(last_page as i64 * 50),
        ),
        (format!("/jobs/{dead}"), Floor::Job(dead)),
        (format!("/dead?queue={QUEUE}"), Floor::Dead),
    ];
    for (path, floor) in &pages {
        let mut page_times = Vec::with_capacity(samples);
        let mut floor_times = Vec::with_capacity(samples);
        for _ in 0..samples {
            page_times.push(timed(get(addr, path)).await?);
            floor_times.push(timed(floor.read(queue, &q)).await?);
            tick();
        }
        let ms = |times: &[Duration], p| percentile_us(times, p).unwrap_or(0.0) / 1000.0;
        let (p50, floor_p50) = (ms(&page_times, 0.5), ms(&floor_times, 0.5));
        timings.push(PageTiming {
            page: path.clone(),
            p50_ms: p50,
            p99_ms: ms(&page_times, 0.99),
            floor_p50_ms: floor_p50,
            ratio: if p50 > 0.0 { floor_p50 / p50 } else { 0.0 },
            samples,
        });
    }
    stop.cancel();
    server
        .await
        .map_err(|e| Error::config(format!("the dashboard's task failed: {e}")))?
        .map_err(io)?;
    Ok(timings)
}

/// The reads a page makes, without rendering or HTTP.
enum Floor {
    Overview,
    List(i64),
    Job(JobId),
    Dead,
}

impl Floor {
    async fn read(&self, store: &Queue, queue: &Queue) -> Result<()> {
        match self {
            Floor::Overview => {
                store.overview().await?;
            }
            Floor::List(offset) => {
                store.overview().await?;
                queue.list_page(JobState::Ready, *offset, 51).await?;
            }
            Floor::Job(id) => {
                store.job(*id).await?;
            }
            Floor::Dead => {
                store.overview().await?;
                queue.dead(100).await?;
            }
        }
        Ok(())
    }
}

async fn timed<T>(work: impl Future<Output = Result<T>>) -> Result<Duration> {
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

/// One GET over a fresh connection, read to the end; anything but 200 is an error.
async fn get(addr: std::net::SocketAddr, path: &str) -> Result<()> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.map_err(io)?;
    if !answer.starts_with(b"HTTP/1.1 200") {
        let head = String::from_utf8_lossy(&answer[..answer.len().min(200)]).into_owned();
        return Err(Error::config(format!("{path} answered {head}")));
    }
    Ok(())
}

/// The dashboard's socket failed: the bench cannot go on.
fn io(e: std::io::Error) -> Error {
    Error::config(format!("the dashboard bench's socket: {e}"))
}
