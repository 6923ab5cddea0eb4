//! Queue throughput against its floor: a backlog of no-op jobs drained by lockwise's
//! [`Worker`] (8 handlers, its own batching unless a batch is given), and by the naive SKIP
//! LOCKED claim-10 + complete loop issued raw by 8 tasks on the same table, side by side in
//! one run. pgbench is not
//! required: the floor is a raw loop of the same two statements.
//!
//! Through a proxy that lends server connections per transaction (PgBouncer in transaction
//! mode, found with [`lockwise::postgres::behind_a_transaction_pooler`]) the floor sends its two
//! statements in the simple protocol with their values written in (one round trip each, and
//! nothing a proxy below PgBouncer 1.21 cannot carry), and the store's setup runs unnamed in
//! transactions; lockwise adapts by itself.
//!
//! The dead row versions of the table are sampled every 200 ms while each side drains, counted
//! from their value when the drain starts: their peak and their value at the end are reported
//! with lockwise's figure (PostgreSQL publishes the statistics with a delay of up to a
//! second, so they are estimates).

use std::time::Duration;

use sqlx::postgres::PgArguments;
use sqlx::{AssertSqlSafe, PgPool, Postgres, Row};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::conn::Schema;
use crate::dead_tuples::DeadTuples;
use crate::error::{Error, Result};
use crate::{Entry, Plan};
use lockwise::queue::{Queue, Worker};

/// The queue's name in the bench's store.
const QUEUE: &str = "bench";
/// Handlers at once, and tasks of the floor.
const WORKERS: usize = 8;
/// Jobs per claim of the floor.
const BATCH: i64 = 10;

struct Statements {
    truncate: String,
    fill: String,
    fill_floor: String,
    analyze: String,
    claim: String,
    complete: String,
    /// Behind a transaction-pooling proxy.
    pooled: bool,
}

/// Runs a setup statement: unnamed in a transaction of its own behind a pooling proxy.
async fn setup(
    pool: &PgPool,
    pooled: bool,
    query: sqlx::query::Query<'_, Postgres, PgArguments>,
) -> Result<()> {
    if !pooled {
        query.execute(pool).await?;
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    query.persistent(false).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Drains a backlog of `backlog` no-op jobs, `plan.rounds` times per side, lockwise and the
/// floor alternating; unit jobs/s. Lockwise's 8 handlers are split among `split` [`Worker`]s
/// (1: one worker with 8 handlers; 8: eight with one each; the entry's `workers`), each
/// claiming at most `batch` jobs at a time (`None`: [`Worker`]'s default). The store
/// is a schema of the bench's own on `url`, dropped at the end.
pub async fn throughput(
    url: &str,
    backlog: u64,
    split: usize,
    batch: Option<usize>,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let pool = crate::conn::pg_pool(url, (WORKERS + 6) as u32).await?;
    let name = format!(
        "lockwise_bench_q_{}_{:04x}",
        std::process::id(),
        rand::random::<u16>()
    );
    let schema = Schema::new(&name)?;
    let queue = Queue::with_schema(pool.clone(), &name, QUEUE)?;
    queue.migrate().await?;
    sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/floor_schema.sql")))
        .execute(&pool)
        .await?;
    let sql = |text: &str| schema.sql(text).0;
    let statements = Statements {
        truncate: sql(include_str!("../sql/postgres/queue_truncate.sql")),
        fill: sql(include_str!("../sql/postgres/queue_fill.sql")),
        fill_floor: sql(include_str!("../sql/postgres/floor_fill.sql")),
        analyze: sql(include_str!("../sql/postgres/queue_analyze.sql")),
        claim: sql(include_str!("../sql/postgres/queue_floor_claim.sql")),
        complete: sql(include_str!("../sql/postgres/queue_floor_complete.sql")),
        pooled: lockwise::postgres::behind_a_transaction_pooler(&pool).await?,
    };
    let split = split.clamp(1, WORKERS);
    let outcome = rounds(
        &queue,
        &pool,
        &statements,
        &name,
        backlog,
        split,
        batch,
        plan,
        tick,
    )
    .await;
    let dropped = sqlx::raw_sql(schema.sql(include_str!("../sql/postgres/scaling_drop.sql")))
        .execute(&pool)
        .await;
    pool.close().await;
    let entry = outcome?;
    dropped?;
    Ok(entry)
}

#[allow(clippy::too_many_arguments)]
async fn rounds(
    queue: &Queue,
    pool: &PgPool,
    sql: &Statements,
    schema_name: &str,
    backlog: u64,
    split: usize,
    batch: Option<usize>,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let backlog = i64::try_from(backlog.max(1)).unwrap_or(i64::MAX);
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let (mut peak, mut end) = (0i64, 0i64);
    for round in 0..plan.rounds {
        let order = if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for lockwise in order {
            let query = |text: &String| sqlx::query(AssertSqlSafe(text.clone()));
            setup(pool, sql.pooled, query(&sql.truncate)).await?;
            let fill = if lockwise { &sql.fill } else { &sql.fill_floor };
            setup(pool, sql.pooled, query(fill).bind(QUEUE).bind(backlog)).await?;
            setup(pool, sql.pooled, query(&sql.analyze)).await?;
            // lockwise's tables only: the floor's table shares the schema, and its dead rows
            // of the previous round were counted here when their statistics arrived late.
            let sampler =
                DeadTuples::start(pool.clone(), schema_name.to_owned(), &["floor_jobs"]).await;
            let started = Instant::now();
            let done = if lockwise {
                drain_with_workers(queue, split, batch).await?
            } else {
                drain_raw(pool, sql).await?
            };
            let took = started.elapsed();
            let peaks = sampler.stop().await;
            let (most, last) = (peaks.most(), peaks.last());
            if done < backlog as u64 {
                return Err(Error::config(format!(
                    "the throughput bench drained {done} of {backlog} jobs"
                )));
            }
            let rate = done as f64 / took.as_secs_f64();
            if lockwise {
                ours.push(rate);
                peak = peak.max(most);
                end = last;
            } else {
                raw.push(rate);
            }
            tick();
        }
    }
    let backend = if sql.pooled {
        "postgres (transaction pooling)"
    } else {
        "postgres"
    };
    let mut entry = Entry::compare("throughput", backend, "jobs/s", &ours, &raw)?;
    entry.tasks = Some(WORKERS);
    entry.workers = Some(split);
    entry.backlog = Some(backlog as u64);
    entry.dead_tuples_peak = Some(peak);
    entry.dead_tuples_end = Some(end);
    Ok(entry)
}

/// lockwise's side: 8 handlers split among `split` workers (the rest of 8 / `split` to the
/// first ones), at most `batch` jobs per claim, no-op handler, until drained.
async fn drain_with_workers(queue: &Queue, split: usize, batch: Option<usize>) -> Result<u64> {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..split {
        let handlers = WORKERS / split + usize::from(i < WORKERS % split);
        let mut worker = Worker::new(queue.clone())
            .concurrency(handlers)
            .poll_interval(Duration::from_millis(20))
            .until_idle(true);
        if let Some(batch) = batch {
            worker = worker.batch(batch);
        }
        set.spawn(worker.run(
            |_job| async { Ok::<_, String>(()) },
            CancellationToken::new(),
        ));
    }
    let mut done = 0;
    while let Some(joined) = set.join_next().await {
        done += joined
            .map_err(|e| Error::config(format!("a bench worker failed: {e}")))??
            .done;
    }
    Ok(done)
}

/// The floor: 8 tasks, each claiming 10 with the naive statement and completing them, until
/// a claim finds nothing.
async fn drain_raw(pool: &PgPool, sql: &Statements) -> Result<u64> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let (pool, claim, complete) = (pool.clone(), sql.claim.clone(), sql.complete.clone());
        let pooled = sql.pooled;
        set.spawn(async move {
            let mut done = 0u64;
            loop {
                let ids = if pooled {
                    claim_written_in(&pool, &claim).await?
                } else {
                    sqlx::query_scalar(AssertSqlSafe(claim.clone()))
                        .bind(QUEUE)
                        .bind(BATCH)
                        .fetch_all(&pool)
                        .await?
                };
                if ids.is_empty() {
                    return Ok::<_, Error>(done);
                }
                if pooled {
                    complete_written_in(&pool, &complete, &ids).await?;
                } else {
                    sqlx::query(AssertSqlSafe(complete.clone()))
                        .bind(&ids)
                        .execute(&pool)
                        .await?;
                }
                done += ids.len() as u64;
            }
        });
    }
    let mut done = 0;
    while let Some(joined) = set.join_next().await {
        done += joined.map_err(|e| Error::config(format!("a bench task failed: {e}")))??;
    }
    Ok(done)
}

/// The floor's claim with its values written in (the queue's name is the constant [`QUEUE`]),
/// in the simple protocol.
async fn claim_written_in(pool: &PgPool, claim: &str) -> Result<Vec<i64>> {
    let text = claim
        .replace("$1", &format!("'{QUEUE}'"))
        .replace("$2", &BATCH.to_string());
    let rows = sqlx::raw_sql(AssertSqlSafe(text)).fetch_all(pool).await?;
    Ok(rows
        .iter()
        .map(|row| row.try_get::<i64, _>(0))
        .collect::<Result<_, _>>()?)
}

/// The floor's completion with the ids written in, in the simple protocol.
async fn complete_written_in(pool: &PgPool, complete: &str, ids: &[i64]) -> Result<()> {
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let text = complete.replace("$1", &format!("ARRAY[{}]::bigint[]", list.join(",")));
    sqlx::raw_sql(AssertSqlSafe(text)).execute(pool).await?;
    Ok(())
}
