//! The lesson's exercise 3: a queue guarded by a distributed lock against `FOR UPDATE SKIP
//! LOCKED`, as the number of workers grows. Both drain the same PostgreSQL table of jobs, each
//! job 5 ms of simulated I/O by default.
//!
//! - **Lock-guarded**, exactly as the lesson writes it: each worker (a locker of its own on
//!   Redis, like a process of its own) tries the one queue lock; taken elsewhere, it sleeps
//!   50 ms and tries again; held, it selects the oldest pending job, marks it running,
//!   processes it, and only then releases the lock.
//! - **SKIP LOCKED**: each worker claims up to 10 pending jobs no other worker has locked, in
//!   one `UPDATE … RETURNING`, and processes them.
//! - **Partitioned**: worker `i` of `n` claims up to 10 of its own pending jobs (`id % n = i`,
//!   the lesson's `hash(id) % total_workers == worker_index`) in one `UPDATE … RETURNING`,
//!   without SKIP LOCKED: no two workers ever select one row, so there is nothing to contend
//!   for. (The static form: a worker that dies leaves its jobs waiting; `partition::Group`
//!   is the live one.)
//!
//! Counted, not assumed: round trips per job (every lock attempt, refused ones included, every
//! statement, every release, over the jobs done), jobs per claim, the most workers seen inside
//! a job at once, and for SKIP LOCKED the WAL bytes and dead tuples each job leaves behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio::time::{Instant, sleep};

use crate::conn::Schema;
use crate::error::{Error, Result};
use crate::{Entry, Plan};
use lockwise::url::redact_url;
use lockwise::{LockOptions, Locker};

/// How a worker gets its next job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// A distributed lock around select-then-update, one job per turn.
    LockGuarded,
    /// `FOR UPDATE SKIP LOCKED`, 10 jobs per claim.
    SkipLocked,
    /// Each worker claims only its own keys (`id % workers = index`), 10 jobs per claim.
    Partitioned,
}

impl Strategy {
    /// `lock-guarded`, `skip-locked` or `partitioned`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::LockGuarded => "lock-guarded",
            Strategy::SkipLocked => "skip-locked",
            Strategy::Partitioned => "partitioned",
        }
    }
}

/// What a scaling run is made of.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Scaling {
    /// Where the jobs live.
    pub postgres_url: String,
    /// Where the lock-guarded queue's lock lives.
    pub redis_url: String,
    /// The worker counts to measure (the lesson: 1, 2, 4, 8).
    pub workers: Vec<usize>,
    /// Simulated I/O per job (the lesson's processing).
    pub io: Duration,
}

impl Scaling {
    /// The lesson's experiment: 1, 2, 4 and 8 workers, 5 ms of I/O per job.
    pub fn new(postgres_url: impl Into<String>, redis_url: impl Into<String>) -> Self {
        Scaling {
            postgres_url: postgres_url.into(),
            redis_url: redis_url.into(),
            workers: vec![1, 2, 4, 8],
            io: Duration::from_millis(5),
        }
    }
}

/// The lock-guarded queue's sleep when the lock is taken, as in the lesson.
const LOCK_TAKEN_SLEEP: Duration = Duration::from_millis(50);
/// The SKIP LOCKED claim's batch, as in the lesson.
const BATCH: i64 = 10;

/// Counters shared by a run's workers.
#[derive(Default)]
struct Counters {
    jobs: AtomicU64,
    round_trips: AtomicU64,
    claims: AtomicU64,
    inside: AtomicUsize,
    most_inside: AtomicUsize,
}

impl Counters {
    fn trip(&self) {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// Simulates processing one job, counting the workers inside a job at once.
    async fn process(&self, io: Duration) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_inside.fetch_max(now, Ordering::SeqCst);
        sleep(io).await;
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.jobs.fetch_add(1, Ordering::Relaxed);
    }
}

/// The SQL of the bench's own schema.
struct Statements {
    fill: String,
    lock_fetch: String,
    lock_take: String,
    skip_claim: String,
    partition_claim: String,
}

/// Runs the experiment: `plan.rounds` rounds of `plan.round` per strategy and worker count,
/// strategies alternating. One entry per strategy and worker count, unit jobs/s, with the
/// scaling fields set; the jobs live in a schema of the bench's own, dropped at the end.
pub async fn scaling(setup: &Scaling, plan: Plan, tick: &(dyn Fn() + Sync)) -> Result<Vec<Entry>> {
    let shown = redact_url(&setup.postgres_url);
    let options = crate::conn::pg_options(&setup.postgres_url)?;
    let mut control = crate::conn::pg_connect(&options, &shown).await?;
    let name = format!(
        "lockwise_bench_{}_{:04x}",
        std::process::id(),
        rand::random::<u16>()
    );
    let schema = Schema::new(&name)?;
    sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/scaling_schema.sql")))
        .execute(&mut control)
        .await?;
    let sql = Statements {
        fill: schema
            .sql(include_str!("../sql/postgres/scaling_fill.sql"))
            .0,
        lock_fetch: schema
            .sql(include_str!("../sql/postgres/scaling_lock_fetch.sql"))
            .0,
        lock_take: schema
            .sql(include_str!("../sql/postgres/scaling_lock_take.sql"))
            .0,
        skip_claim: schema
            .sql(include_str!("../sql/postgres/scaling_skip_claim.sql"))
            .0,
        partition_claim: schema
            .sql(include_str!("../sql/postgres/scaling_partition_claim.sql"))
            .0,
    };
    let outcome = measure(setup, plan, tick, &mut control, &sql, &name).await;
    let dropped = sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/scaling_drop.sql")))
        .execute(&mut control)
        .await;
    let _ = control.close().await;
    let entries = outcome?;
    dropped?;
    Ok(entries)
}

/// One run's figures.
struct Run {
    jobs_per_s: f64,
    most_inside: usize,
    round_trips_per_job: f64,
    jobs_per_claim: f64,
    wal_bytes_per_job: Option<f64>,
    dead_tuples_per_job: Option<f64>,
}

async fn measure(
    setup: &Scaling,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
    control: &mut PgConnection,
    sql: &Statements,
    schema_name: &str,
) -> Result<Vec<Entry>> {
    let strategies = [
        Strategy::LockGuarded,
        Strategy::SkipLocked,
        Strategy::Partitioned,
    ];
    let mut entries = Vec::new();
    for &workers in &setup.workers {
        let mut runs: [Vec<Run>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..plan.rounds {
            // Each strategy goes first in turn.
            let first = round % strategies.len();
            for i in (0..strategies.len()).map(|k| (first + k) % strategies.len()) {
                let run = run_once(
                    setup,
                    plan.round,
                    workers,
                    strategies[i],
                    control,
                    sql,
                    schema_name,
                )
                .await?;
                runs[i].push(run);
                tick();
            }
        }
        for (i, strategy) in strategies.into_iter().enumerate() {
            entries.push(entry(strategy, workers, &runs[i])?);
        }
    }
    Ok(entries)
}

fn entry(strategy: Strategy, workers: usize, runs: &[Run]) -> Result<Entry> {
    let rates: Vec<f64> = runs.iter().map(|r| r.jobs_per_s).collect();
    let mut entry = Entry::measure("scaling", "postgres", "jobs/s", &rates)?;
    let median = |values: Vec<f64>| crate::Spread::of(&values).map(|s| s.median);
    entry.strategy = Some(strategy.as_str().to_owned());
    entry.tasks = Some(workers);
    entry.workers = Some(workers);
    entry.jobs_per_s = Some(entry.lockwise.median);
    entry.max_parallel = runs.iter().map(|r| r.most_inside).max();
    entry.round_trips_per_job = median(runs.iter().map(|r| r.round_trips_per_job).collect());
    entry.jobs_per_claim = median(runs.iter().map(|r| r.jobs_per_claim).collect());
    entry.wal_bytes_per_job = median(runs.iter().filter_map(|r| r.wal_bytes_per_job).collect());
    entry.dead_tuples_per_job = median(runs.iter().filter_map(|r| r.dead_tuples_per_job).collect());
    Ok(entry)
}

#[allow(clippy::too_many_arguments)]
async fn run_once(
    setup: &Scaling,
    length: Duration,
    workers: usize,
    strategy: Strategy,
    control: &mut PgConnection,
    sql: &Statements,
    schema_name: &str,
) -> Result<Run> {
    // Enough jobs that no worker runs dry: every worker busy all the time, and half again.
    let per_worker = (length.as_secs_f64() / setup.io.as_secs_f64().max(1e-4)).ceil() as i64;
    let backlog = (per_worker * workers as i64 * 3 / 2).max(100);
    sqlx::query(sqlx::AssertSqlSafe(sql.fill.clone()))
        .bind(backlog)
        .execute(&mut *control)
        .await?;
    let dead_before = dead_tuples(control, schema_name).await?;
    let wal_before: i64 = sqlx::query_scalar(include_str!("../sql/postgres/scaling_wal.sql"))
        .fetch_one(&mut *control)
        .await?;

    let counters = Arc::new(Counters::default());
    let options = crate::conn::pg_options(&setup.postgres_url)?;
    let shown = redact_url(&setup.postgres_url);
    let mut conns = Vec::with_capacity(workers);
    let mut lockers = Vec::with_capacity(workers);
    for _ in 0..workers {
        conns.push(crate::conn::pg_connect(&options, &shown).await?);
        if strategy == Strategy::LockGuarded {
            // A locker each: the workers are processes of their own in the lesson.
            lockers.push(Locker::connect(&setup.redis_url).await?);
        }
    }
    let key = format!(
        "lockwise-bench-queue-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    );
    let started = Instant::now();
    let until = started + length;
    let mut set = tokio::task::JoinSet::new();
    for (n, mut conn) in conns.into_iter().enumerate() {
        let counters = counters.clone();
        let worker = format!("w{n}");
        let io = setup.io;
        let (fetch, take, claim, own) = (
            sql.lock_fetch.clone(),
            sql.lock_take.clone(),
            sql.skip_claim.clone(),
            sql.partition_claim.clone(),
        );
        let locker = lockers.get(n).cloned();
        let key = key.clone();
        set.spawn(async move {
            match locker {
                Some(locker) => {
                    lock_guarded(
                        &locker, &key, &mut conn, &fetch, &take, &worker, io, until, &counters,
                    )
                    .await?
                }
                None if strategy == Strategy::Partitioned => {
                    let share = (n, workers);
                    partitioned(&mut conn, &own, &worker, share, io, until, &counters).await?
                }
                None => skip_locked(&mut conn, &claim, &worker, io, until, &counters).await?,
            }
            let _ = conn.close().await; // closing publishes the session's statistics
            Ok::<_, Error>(())
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.map_err(|e| Error::config(format!("a bench worker failed: {e}")))??;
    }
    let took = started.elapsed();
    let jobs = counters.jobs.load(Ordering::SeqCst);
    let wal_after: i64 = sqlx::query_scalar(include_str!("../sql/postgres/scaling_wal.sql"))
        .fetch_one(&mut *control)
        .await?;
    let per_job = |total: f64| (jobs > 0).then(|| total / jobs as f64);
    let claims = counters.claims.load(Ordering::SeqCst);
    let (wal, dead) = if strategy != Strategy::LockGuarded {
        // The statistics of the closed worker sessions reach the view shortly after.
        sleep(Duration::from_millis(50)).await;
        let dead_after = dead_tuples(control, schema_name).await?;
        (
            per_job((wal_after - wal_before) as f64),
            per_job((dead_after - dead_before).max(0) as f64),
        )
    } else {
        (None, None)
    };
    Ok(Run {
        jobs_per_s: jobs as f64 / took.as_secs_f64(),
        most_inside: counters.most_inside.load(Ordering::SeqCst),
        round_trips_per_job: per_job(counters.round_trips.load(Ordering::SeqCst) as f64)
            .unwrap_or(f64::NAN),
        jobs_per_claim: if claims > 0 {
            jobs as f64 / claims as f64
        } else {
            0.0
        },
        wal_bytes_per_job: wal,
        dead_tuples_per_job: dead,
    })
}

async fn dead_tuples(control: &mut PgConnection, schema_name: &str) -> Result<i64> {
    sqlx::query(include_str!("../sql/postgres/scaling_flush_stats.sql"))
        .execute(&mut *control)
        .await?;
    Ok(
        sqlx::query_scalar(include_str!("../sql/postgres/dead_tuples.sql"))
            .bind(schema_name)
            .fetch_optional(&mut *control)
            .await?
            .unwrap_or(0),
    )
}

/// The lesson's lock-guarded worker: lock, oldest pending job, mark it running, process it,
/// release; taken elsewhere, sleep 50 ms.
#[allow(clippy::too_many_arguments)]
async fn lock_guarded(
    locker: &Locker,
    key: &str,
    conn: &mut PgConnection,
    fetch: &str,
    take: &str,
    worker: &str,
    io: Duration,
    until: Instant,
    counters: &Counters,
) -> Result<()> {
    let opts = LockOptions::ttl(Duration::from_secs(30));
    while Instant::now() < until {
        counters.trip();
        let Some(guard) = locker.try_acquire(key, &opts).await? else {
            sleep(LOCK_TAKEN_SLEEP).await;
            continue;
        };
        counters.trip();
        let job: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(fetch.to_owned()))
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(id) = job {
            counters.trip();
            counters.claims.fetch_add(1, Ordering::Relaxed);
            sqlx::query(sqlx::AssertSqlSafe(take.to_owned()))
                .bind(id)
                .bind(worker)
                .execute(&mut *conn)
                .await?;
            counters.process(io).await;
        }
        counters.trip();
        guard.release().await?;
    }
    Ok(())
}

/// The SKIP LOCKED worker: claim up to 10, process them, again.
async fn skip_locked(
    conn: &mut PgConnection,
    claim: &str,
    worker: &str,
    io: Duration,
    until: Instant,
    counters: &Counters,
) -> Result<()> {
    while Instant::now() < until {
        counters.trip();
        counters.claims.fetch_add(1, Ordering::Relaxed);
        let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(claim.to_owned()))
            .bind(BATCH)
            .bind(worker)
            .fetch_all(&mut *conn)
            .await?;
        for _ in &ids {
            counters.process(io).await;
        }
        if ids.is_empty() {
            sleep(LOCK_TAKEN_SLEEP).await;
        }
    }
    Ok(())
}

/// The partitioned worker: claim up to 10 of its own jobs (`id % total = index`), process
/// them, again. `share` is (index, total).
async fn partitioned(
    conn: &mut PgConnection,
    claim: &str,
    worker: &str,
    share: (usize, usize),
    io: Duration,
    until: Instant,
    counters: &Counters,
) -> Result<()> {
    let (index, total) = (
        i64::try_from(share.0).unwrap_or(0),
        i64::try_from(share.1).unwrap_or(1),
    );
    while Instant::now() < until {
        counters.trip();
        counters.claims.fetch_add(1, Ordering::Relaxed);
        let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(claim.to_owned()))
            .bind(BATCH)
            .bind(worker)
            .bind(total)
            .bind(index)
            .fetch_all(&mut *conn)
            .await?;
        for _ in &ids {
            counters.process(io).await;
        }
        if ids.is_empty() {
            sleep(LOCK_TAKEN_SLEEP).await;
        }
    }
    Ok(())
}
