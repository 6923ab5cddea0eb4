//! The queue's PostgreSQL storage layout (docs/design/queue-layout-v4.md): a version-3 store
//! with jobs in every state migrates to the latest version with each job carried over,
//! sustained load keeps the dead row versions of every queue table bounded without any
//! VACUUM, the statements of a batch touch only their jobs' lease segment, and a drained
//! segment's truncation never queues behind the claims.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobContext, JobId, JobState, Queue, Worker};
use lockwise_testkit::PgSchema;
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// One job of the version-3 store: its name (also its payload), the columns it is inserted
/// with, and what the new layout must report.
struct OldJob {
    name: &'static str,
    /// `state, attempt, max_attempts, run_at, started, lease_until, worker, finished_at,
    /// idempotency_key, released_key, last_error` as SQL expressions.
    columns: &'static str,
    state: JobState,
    attempt: i32,
}

const OLD_JOBS: &[OldJob] = &[
    OldJob {
        name: "ready",
        columns: "'available', 0, 5, now() - interval '1 minute', true, NULL, NULL, NULL, \
                  NULL, NULL, NULL",
        state: JobState::Ready,
        attempt: 0,
    },
    OldJob {
        name: "delayed",
        columns: "'available', 0, 5, now() + interval '1 hour', true, NULL, NULL, NULL, \
                  NULL, NULL, NULL",
        state: JobState::Scheduled,
        attempt: 0,
    },
    OldJob {
        name: "backoff",
        columns: "'available', 2, 5, now() + interval '1 hour', true, NULL, 'old', NULL, \
                  NULL, NULL, 'boom'",
        state: JobState::Scheduled,
        attempt: 2,
    },
    OldJob {
        name: "live",
        columns: "'running', 1, 5, now() - interval '1 minute', true, \
                  now() + interval '30 seconds', 'old', NULL, NULL, NULL, NULL",
        state: JobState::Running,
        attempt: 1,
    },
    OldJob {
        name: "unconfirmed",
        columns: "'running', 1, 5, now() - interval '1 minute', false, \
                  now() - interval '1 minute', 'old', NULL, NULL, NULL, NULL",
        state: JobState::Running,
        attempt: 1,
    },
    OldJob {
        name: "expired",
        columns: "'running', 2, 5, now() - interval '1 minute', true, \
                  now() - interval '1 minute', 'old', NULL, NULL, NULL, 'boom'",
        state: JobState::Running,
        attempt: 2,
    },
    OldJob {
        name: "done",
        columns: "'done', 1, 5, now() - interval '1 hour', true, NULL, 'old', \
                  now() - interval '1 minute', NULL, NULL, NULL",
        state: JobState::Done,
        attempt: 1,
    },
    OldJob {
        name: "cancelled",
        columns: "'cancelled', 0, 5, now() - interval '1 hour', true, NULL, NULL, \
                  now() - interval '1 minute', NULL, NULL, NULL",
        state: JobState::Cancelled,
        attempt: 0,
    },
    OldJob {
        name: "dead",
        columns: "'dead', 5, 5, now() - interval '1 hour', true, NULL, 'old', \
                  now() - interval '1 minute', NULL, NULL, 'gave up'",
        state: JobState::Dead,
        attempt: 5,
    },
    OldJob {
        name: "keyed",
        columns: "'available', 0, 5, now() - interval '1 minute', true, NULL, NULL, NULL, \
                  'k1', NULL, NULL",
        state: JobState::Ready,
        attempt: 0,
    },
    OldJob {
        name: "released",
        columns: "'done', 1, 5, now() - interval '2 hours', true, NULL, 'old', \
                  now() - interval '1 hour', NULL, 'k2', NULL",
        state: JobState::Done,
        attempt: 1,
    },
];

/// A queue `q` in a fresh schema of its own, opened (migrated) with `connect`.
async fn open(label: &str) -> (PgSchema, Queue) {
    let schema = PgSchema::new(label);
    let q = reopen(&schema).await;
    (schema, q)
}

/// The queue `q` of `schema`, opened as a new process would: `connect` migrates it.
async fn reopen(schema: &PgSchema) -> Queue {
    lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default().queue("q").schema(schema.name()),
    )
    .await
    .expect("PostgreSQL is not reachable; run scripts/services")
}

/// The latest migration applied to the schema `quoted`.
async fn version(pool: &PgPool, quoted: &str) -> Option<i64> {
    scalar_i64(
        pool,
        format!("SELECT max(version)::bigint FROM {quoted}.queue_migrations"),
    )
    .await
}

async fn scalar_i64(pool: &PgPool, sql: String) -> Option<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A schema at version 3 (as lockwise 0.x with the single `jobs` table left it) with jobs in
/// every state migrates to version 5 (the layout of version 4): each job keeps its state, attempt (its fencing token)
/// and payload, the running ones stay owned by their old execution and reapable, keys and
/// dead letters carry over, finished history stays readable, and new ids follow the old ones.
#[tokio::test]
async fn a_version_3_schema_migrates_to_the_ring_layout_with_jobs_in_every_state() {
    let schema = PgSchema::new("v3");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", schema.name());
    // The channel version 3 used for this schema (the payload is the queue name).
    let channel = format!("{}_jobs", schema.name());
    let fill = |sql: &str| {
        sql.replace("{schema}", &quoted)
            .replace("{channel}", &channel)
    };
    let old = format!(
        "{}\n{}\n{}\nCREATE TABLE {quoted}.queue_migrations (version integer PRIMARY KEY);\n\
         INSERT INTO {quoted}.queue_migrations VALUES (1), (2), (3);",
        fill(include_str!("../sql/postgres/queue/v1.sql")),
        fill(include_str!("../sql/postgres/queue/v2.sql")),
        fill(include_str!("../sql/postgres/queue/v3.sql")),
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let mut ids: HashMap<&str, JobId> = HashMap::new();
    for job in OLD_JOBS {
        let id = scalar_i64(
            &pool,
            format!(
                "INSERT INTO {quoted}.jobs (queue, payload, state, attempt, max_attempts, run_at, \
                 started, lease_until, worker, finished_at, idempotency_key, released_key, \
                 last_error, errors, created_at) \
                 VALUES ('q', jsonb_build_object('n', '{name}'), {columns}, \
                 CASE WHEN {attempt} > 0 AND '{name}' IN ('backoff', 'expired', 'dead') \
                      THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), \
                                                                'error', 'boom')) \
                      ELSE '[]'::jsonb END, \
                 now() - interval '3 hours') RETURNING id",
                name = job.name,
                columns = job.columns,
                attempt = job.attempt,
            ),
        )
        .await
        .unwrap();
        ids.insert(job.name, JobId(id));
    }
    // A job version 3 drew an id for and that was pruned since: its id is never reused.
    let pruned = scalar_i64(
        &pool,
        format!(
            "WITH j AS (INSERT INTO {quoted}.jobs (queue, payload) VALUES ('q', '{{}}')              RETURNING id) SELECT id FROM j"
        ),
    )
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {quoted}.jobs WHERE id = {pruned}"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let max_old = ids.values().map(|id| id.0).max().unwrap().max(pruned);

    let q = reopen(&schema).await;

    assert_eq!(
        version(&pool, &quoted).await,
        Some(10),
        "the store is at the current version once opened"
    );
    let old_table: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT to_regclass('{quoted}.jobs')::text"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(old_table, None, "the version-3 table `jobs` is gone");

    // Every job kept its state, attempt and payload.
    for job in OLD_JOBS {
        let info = q
            .job(ids[job.name])
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {} is lost", job.name));
        assert_eq!(
            (info.state, info.attempt, &info.payload, info.queue.as_str()),
            (job.state, job.attempt, &json!({ "n": job.name }), "q"),
            "job {}",
            job.name
        );
    }
    assert_eq!(
        q.job(ids["backoff"])
            .await
            .unwrap()
            .unwrap()
            .last_error
            .as_deref(),
        Some("boom")
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead,
            stats.cancelled
        ),
        (2, 2, 3, 2, 1, 1),
        "{stats:?}"
    );

    // The old execution of the live job still owns it: heartbeat and complete with its
    // attempt succeed; a stale attempt does nothing.
    let live = ids["live"];
    assert_eq!(
        q.protocol()
            .heartbeat(&[(live, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![live]
    );
    assert_eq!(
        q.protocol().complete(&[(live, 0)]).await.unwrap(),
        0,
        "stale attempt"
    );
    assert_eq!(
        q.protocol().complete(&[(ids["expired"], 1)]).await.unwrap(),
        0,
        "stale attempt"
    );
    assert_eq!(q.protocol().complete(&[(live, 1)]).await.unwrap(), 1);
    assert_eq!(
        q.protocol().complete(&[(live, 1)]).await.unwrap(),
        0,
        "already done"
    );
    assert_eq!(q.job(live).await.unwrap().unwrap().state, JobState::Done);

    // The reaper gives back the two expired leases: the unconfirmed one without counting its
    // attempt (one more in its budget), the started one with it counted.
    assert_eq!(q.protocol().reap().await.unwrap(), 2);
    let unconfirmed = q.job(ids["unconfirmed"]).await.unwrap().unwrap();
    assert_eq!(
        (
            unconfirmed.state,
            unconfirmed.attempt,
            unconfirmed.max_attempts
        ),
        (JobState::Ready, 1, 6),
        "{unconfirmed:?}"
    );
    let expired = q.job(ids["expired"]).await.unwrap().unwrap();
    assert_eq!(
        (expired.state, expired.attempt, expired.max_attempts),
        (JobState::Ready, 2, 5),
        "{expired:?}"
    );
    assert_eq!(q.protocol().reap().await.unwrap(), 0);

    // Keys: the held one still names its job; the released one is kept for inspection only.
    let same = q
        .enqueue_with_status(Job::new(json!({ "n": "again" })).key("k1"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (ids["keyed"], true));
    assert_eq!(
        q.job(ids["released"])
            .await
            .unwrap()
            .unwrap()
            .key
            .as_deref(),
        Some("k2")
    );
    let fresh = q
        .enqueue_with_status(Job::new(json!({ "n": "k2 again" })).key("k2"))
        .await
        .unwrap();
    assert!(!fresh.duplicate, "the released key makes a new job");
    assert!(fresh.id.0 > max_old, "{:?} after {max_old}", fresh.id);

    // The dead letter is listed and can be retried.
    let dead = q.dead(100).await.unwrap();
    assert_eq!(
        dead.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![ids["dead"]]
    );
    assert_eq!(
        (
            dead[0].attempt,
            dead[0].last_error.as_deref(),
            &dead[0].payload
        ),
        (5, Some("gave up"), &json!({ "n": "dead" }))
    );
    assert!(q.retry(ids["dead"]).await.unwrap());
    assert!(!q.retry(ids["dead"]).await.unwrap());
    assert_eq!(
        q.job(ids["dead"]).await.unwrap().unwrap().state,
        JobState::Ready
    );

    // New ids follow every old one.
    let new = q.enqueue(Job::new(json!({ "n": "new" }))).await.unwrap();
    assert!(new.0 > max_old, "{new:?} after {max_old}");
    assert_ne!(new, fresh.id);

    // Finished history stays readable.
    let done: Vec<JobId> = q
        .list(JobState::Done, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    for name in ["done", "released", "live"] {
        assert!(done.contains(&ids[name]), "{name} in {done:?}");
    }
    let cancelled: Vec<JobId> = q
        .list(JobState::Cancelled, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(cancelled, vec![ids["cancelled"]]);

    // A claim takes every ready job, with the next attempt, and leaves the scheduled ones.
    let claimed = q
        .protocol()
        .claim("new", 100, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let attempts: HashMap<JobId, i32> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    let expected = [
        (ids["ready"], 1),
        (ids["keyed"], 1),
        (ids["unconfirmed"], 2),
        (ids["expired"], 3),
        (ids["dead"], 6),
        (fresh.id, 1),
        (new, 1),
    ];
    assert_eq!(
        attempts,
        expected.into_iter().collect::<HashMap<_, _>>(),
        "{claimed:?}"
    );
    for name in ["delayed", "backoff"] {
        let info = q.job(ids[name]).await.unwrap().unwrap();
        assert_eq!(info.state, JobState::Scheduled, "{name}");
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.running, stats.dead),
        (0, 2, 7, 0),
        "{stats:?}"
    );
}

/// The most dead row versions seen per table of the schema.
#[derive(Default)]
struct DeadTuplePeaks(HashMap<String, i64>);

impl DeadTuplePeaks {
    async fn sample(&mut self, pool: &PgPool, schema: &str) {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1",
        )
        .bind(schema)
        .fetch_all(pool)
        .await
        .unwrap();
        for (table, dead) in rows {
            let peak = self.0.entry(table).or_insert(0);
            *peak = (*peak).max(dead);
        }
    }

    /// The table with the most dead tuples at any sample, and that figure.
    fn worst(&self) -> (String, i64) {
        self.0
            .iter()
            .max_by_key(|(_, dead)| **dead)
            .map(|(table, dead)| (table.clone(), *dead))
            .unwrap_or_default()
    }
}

/// Under sustained load (one worker of 8, a backlog held near 4,000 ready jobs) no table of
/// the queue ever holds more than 2,000 dead row versions, with no VACUUM from the test.
/// `LOCKWISE_SUSTAINED_SECS` sets the load's length (default 45 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sustained_load_keeps_dead_tuples_of_every_queue_table_under_2000() {
    let secs: u64 = std::env::var("LOCKWISE_SUSTAINED_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let schema = PgSchema::new("sustained");
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema.name(), "q").unwrap();
    q.migrate().await.unwrap();
    let stats_pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();

    let stop = CancellationToken::new();
    let worker = Worker::new(q.clone()).concurrency(8);
    let handler = |_job: JobContext| async {
        sleep(Duration::from_millis(1)).await;
        Ok::<(), String>(())
    };
    let started = Instant::now();
    let worker = tokio::spawn(worker.run(handler, stop.clone()));

    let producing = Arc::new(AtomicBool::new(true));
    let producer = tokio::spawn({
        let (q, producing) = (q.clone(), producing.clone());
        async move {
            let mut enqueued = 0u64;
            while producing.load(Ordering::Relaxed) {
                if q.stats().await.unwrap().ready < 4_000 {
                    let jobs = (0..500).map(|i| Job::new(json!({ "n": enqueued + i })));
                    q.enqueue_many(jobs).await.unwrap();
                    enqueued += 500;
                } else {
                    sleep(Duration::from_millis(5)).await;
                }
            }
            enqueued
        }
    });

    let mut peaks = DeadTuplePeaks::default();
    let end = started + Duration::from_secs(secs);
    while Instant::now() < end {
        sleep(Duration::from_millis(500)).await;
        peaks.sample(&stats_pool, schema.name()).await;
    }
    producing.store(false, Ordering::Relaxed);
    let enqueued = producer.await.unwrap();
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    let elapsed = started.elapsed();
    // Each backend flushes its statistics at most once a second.
    sleep(Duration::from_millis(1_500)).await;
    peaks.sample(&stats_pool, schema.name()).await;

    let (table, peak) = peaks.worst();
    let rate = report.done as f64 / elapsed.as_secs_f64();
    eprintln!(
        "sustained load for {:.1} s: peak n_dead_tup {peak} in table {table}; {} jobs done \
         ({rate:.0} jobs/s), {enqueued} enqueued; every table's peak: {:?}",
        elapsed.as_secs_f64(),
        report.done,
        {
            let mut all: Vec<_> = peaks.0.iter().collect();
            all.sort();
            all
        }
    );
    assert!(
        report.done >= 2_000,
        "only {} jobs done in {elapsed:?}: the load did not run",
        report.done
    );
    let over: Vec<(&String, &i64)> = peaks.0.iter().filter(|(_, d)| **d > 2_000).collect();
    assert!(
        over.is_empty(),
        "dead tuples over 2,000 (peak {peak} in {table}): {over:?}"
    );
}

/// The finished counts of `stats` stay exact across sealing (the maintenance folds finished
/// jobs into per-bucket counts) and pruning (which takes the sealed ones out again).
#[tokio::test]
async fn stats_count_finished_jobs_exactly_across_sealing_and_pruning() {
    let schema = PgSchema::new("seal");
    let options = ConnectOptions::default().queue("q").schema(schema.name());
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", schema.name());
    let sealed = || {
        scalar_i64(
            &pool,
            format!("SELECT coalesce(sum(n), 0)::bigint FROM {quoted}.done_counts"),
        )
    };
    let drain = |q: Queue, idle_for: Duration| async move {
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        let ran = tokio::spawn(Worker::new(q).run(|_job| async { Ok::<_, String>(()) }, stop));
        sleep(idle_for).await;
        stopper.cancel();
        ran.await.unwrap().unwrap().done
    };
    let q = lockwise::queue::connect(schema.url(), options.clone())
        .await
        .unwrap();
    q.enqueue_many((0..20).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    assert_eq!(drain(q.clone(), Duration::from_millis(800)).await, 20);
    // A new process seals at its worker's first maintenance.
    let fresh = lockwise::queue::connect(schema.url(), options.clone())
        .await
        .unwrap();
    assert_eq!(drain(fresh.clone(), Duration::from_millis(600)).await, 0);
    assert_eq!(sealed().await, Some(20), "the 20 finished jobs were sealed");
    // Five more, finished after the seal, and two cancelled.
    fresh
        .enqueue_many((0..7).map(|n| Job::new(json!({ "m": n }))))
        .await
        .unwrap();
    let waiting = fresh.list(JobState::Ready, 10).await.unwrap();
    assert!(fresh.cancel(waiting[0].id).await.unwrap());
    assert!(fresh.cancel(waiting[1].id).await.unwrap());
    let claimed = fresh
        .protocol()
        .claim("w", 10, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let finished: Vec<(JobId, i32)> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    assert_eq!(fresh.protocol().complete(&finished).await.unwrap(), 5);
    let stats = fresh.stats().await.unwrap();
    assert_eq!((stats.done, stats.cancelled), (25, 2), "{stats:?}");
    assert_eq!(
        fresh.prune(JobState::Done, Duration::ZERO).await.unwrap(),
        25
    );
    let stats = fresh.stats().await.unwrap();
    assert_eq!((stats.done, stats.cancelled), (0, 2), "{stats:?}");
    assert_eq!(sealed().await, Some(0), "no count is left for pruned jobs");
    let rows = scalar_i64(
        &pool,
        format!("SELECT count(*)::bigint FROM {quoted}.done_counts"),
    )
    .await;
    assert_eq!(rows, Some(0), "emptied buckets are deleted");
}

/// Delayed jobs that came due are claimed by priority, then by when they came due, as ready
/// ones are.
#[tokio::test]
async fn delayed_jobs_that_came_due_are_claimed_by_priority() {
    let (_schema, q) = open("due").await;
    let low = q
        .enqueue(
            Job::new(json!("low"))
                .priority(5)
                .delay(Duration::from_millis(100)),
        )
        .await
        .unwrap();
    let high = q
        .enqueue(
            Job::new(json!("high"))
                .priority(0)
                .delay(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    sleep(Duration::from_millis(400)).await;
    let first = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(first.iter().map(|c| c.id).collect::<Vec<_>>(), vec![high]);
    let second = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(second.iter().map(|c| c.id).collect::<Vec<_>>(), vec![low]);
}

/// The statements of a batch name the lease segment of their jobs: while another process
/// holds a lease segment locked (as a truncation does), a job in another segment is claimed,
/// confirmed and acknowledged, in the next claim or by `complete`, without waiting for it. A
/// process that did not claim the job (it does not know its segment) completes it too,
/// through the whole ring, with the same compare-and-set on the attempt.
#[tokio::test]
async fn a_batch_touches_only_the_lease_segment_of_its_jobs() {
    let schema = PgSchema::new("segments");
    let options = ConnectOptions::default().queue("q").schema(schema.name());
    let q = lockwise::queue::connect(schema.url(), options.clone())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let pool = q.postgres_pool().unwrap().clone();
    let quoted = format!("\"{}\"", schema.name());
    q.enqueue_many((0..4).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    let lease = Duration::from_secs(30);
    let first = q.protocol().claim("w", 1, lease, &[]).await.unwrap();
    assert_eq!(first.len(), 1);
    let job = (first[0].id, first[0].attempt);
    let seg = scalar_i64(
        &pool,
        format!(
            "SELECT seg::bigint FROM {quoted}.leases WHERE id = {}",
            job.0.0
        ),
    )
    .await
    .expect("the claimed job holds a lease");
    // Another process locks the segment half a ring away, as a truncation would.
    let far = (seg + 16) % 32;
    let mut holder = pool.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "LOCK TABLE {quoted}.leases_{far} IN ACCESS EXCLUSIVE MODE"
    )))
    .execute(&mut *holder)
    .await
    .unwrap();
    let batch = async {
        let confirmed = q.protocol().confirm_started(&[job]).await.unwrap();
        let second = q.protocol().claim("w", 1, lease, &[job]).await.unwrap();
        let next = (second[0].id, second[0].attempt);
        let completed = q.protocol().complete(&[next]).await.unwrap();
        (confirmed, second.len(), completed)
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), batch).await;
    // Released first, so that a failure below leaves nothing waiting.
    holder.rollback().await.unwrap();
    let (confirmed, claimed, completed) =
        answer.expect("the batch waited for another lease segment's lock");
    assert_eq!(confirmed, vec![job.0]);
    assert_eq!((claimed, completed), (1, 1));
    assert_eq!(q.stats().await.unwrap().done, 2);

    // Another process, which does not know the segment: the same compare-and-set.
    let third = q.protocol().claim("w", 1, lease, &[]).await.unwrap();
    let stranger = lockwise::queue::connect(schema.url(), options)
        .await
        .unwrap();
    let (id, attempt) = (third[0].id, third[0].attempt);
    assert_eq!(
        stranger
            .protocol()
            .confirm_started(&[(id, attempt)])
            .await
            .unwrap(),
        vec![id]
    );
    assert_eq!(
        stranger
            .protocol()
            .complete(&[(id, attempt + 1)])
            .await
            .unwrap(),
        0,
        "stale attempt"
    );
    assert_eq!(
        stranger
            .protocol()
            .complete(&[(id, attempt)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        q.protocol().complete(&[(id, attempt)]).await.unwrap(),
        0,
        "already done"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.done, stats.running, stats.ready),
        (3, 0, 1),
        "{stats:?}"
    );
}

/// The truncation of drained segments (v6.sql) gives up at once on a segment another session
/// holds locked when asked for NOWAIT (`wait_ms` 0), waits no longer than asked otherwise,
/// refuses a wait outside 0..=1000 ms without touching anything, and empties the segment once
/// the lock is free.
#[tokio::test]
async fn truncation_gives_up_at_once_on_a_locked_segment_and_checks_its_wait() {
    let (schema, q) = open("nowait").await;
    let pool = q.postgres_pool().unwrap().clone();
    let quoted = format!("\"{}\"", schema.name());
    q.enqueue(Job::new(json!({ "n": 0 }))).await.unwrap();
    let claimed = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(
        q.protocol()
            .complete(&[(claimed[0].id, claimed[0].attempt)])
            .await
            .unwrap(),
        1
    );
    let size = |segment: &'static str| {
        scalar_i64(
            &pool,
            format!("SELECT pg_relation_size('{quoted}.{segment}')"),
        )
    };
    assert!(
        size("ready_0").await.unwrap() > 0,
        "the job was in segment 0"
    );
    let truncate = |segs: Vec<i32>, wait_ms: Option<i32>| {
        let (pool, sql) = (
            pool.clone(),
            format!("SELECT {quoted}.truncate_drained('ready', $1, 7, $2)"),
        );
        async move {
            let started = Instant::now();
            let call = sqlx::query_scalar::<_, i32>(sqlx::AssertSqlSafe(sql))
                .bind(segs)
                .bind(wait_ms)
                .fetch_one(&pool);
            let done = tokio::time::timeout(Duration::from_secs(5), call)
                .await
                .expect("the truncation waited for the lock without end");
            (done, started.elapsed())
        }
    };

    for wait_ms in [Some(-1), Some(1001), None] {
        let (refused, _) = truncate(vec![0], wait_ms).await;
        assert!(refused.is_err(), "wait_ms {wait_ms:?}: {refused:?}");
        assert!(size("ready_0").await.unwrap() > 0, "wait_ms {wait_ms:?}");
    }

    let mut holder = pool.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "LOCK TABLE {quoted}.ready_0 IN ACCESS SHARE MODE"
    )))
    .execute(&mut *holder)
    .await
    .unwrap();
    let (nowait, quick) = truncate(vec![0], Some(0)).await;
    let (waited, slow) = truncate(vec![0], Some(300)).await;
    holder.rollback().await.unwrap();
    assert_eq!(nowait.unwrap(), 0, "the segment was locked");
    assert_eq!(waited.unwrap(), 0, "the segment was locked");
    assert!(slow >= Duration::from_millis(300), "{slow:?}");
    assert!(
        quick < slow,
        "NOWAIT took {quick:?}, a 300 ms wait {slow:?}"
    );
    assert!(size("ready_0").await.unwrap() > 0);

    let (done, _) = truncate(vec![0], Some(0)).await;
    assert_eq!(done.unwrap(), 1);
    assert_eq!(size("ready_0").await, Some(0));
}

/// A truncation (v8.sql) gives back at once the lock of a segment it finds in use: while the
/// transaction that called it is still open, another session writes to that segment without
/// waiting, and only the segment it truncated stays locked. Before migration 8 the segment in
/// use stayed locked ACCESS EXCLUSIVE to the end of the truncation's transaction, and every
/// statement on it waited.
#[tokio::test]
async fn a_truncation_releases_at_once_a_segment_it_finds_in_use() {
    let (schema, q) = open("busy_release").await;
    let pool = q.postgres_pool().unwrap().clone();
    let quoted = format!("\"{}\"", schema.name());
    q.enqueue(Job::new(json!({ "n": 0 }))).await.unwrap();

    let mut maintenance = pool.begin().await.unwrap();
    let truncated: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {quoted}.truncate_drained('ready', ARRAY[0, 1], 7, 0)"
    )))
    .fetch_one(&mut *maintenance)
    .await
    .unwrap();
    let lock = |segment: &str, mode: &str| {
        let (pool, sql) = (
            pool.clone(),
            format!("LOCK TABLE {quoted}.{segment} IN {mode} MODE NOWAIT"),
        );
        async move {
            let mut other = pool.begin().await.unwrap();
            let locked = sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *other)
                .await
                .map(drop);
            other.rollback().await.unwrap();
            locked
        }
    };
    let in_use = lock("ready_0", "ROW EXCLUSIVE").await;
    let truncated_one = lock("ready_1", "ACCESS SHARE").await;
    // Ended before any assertion, so that a failure leaves no lock behind for the clean-up.
    maintenance.commit().await.unwrap();

    assert_eq!(truncated, 1, "segment 1 was empty, segment 0 holds the job");
    assert!(
        in_use.is_ok(),
        "the segment in use stayed locked by the truncation: {in_use:?}"
    );
    assert!(
        truncated_one.is_err(),
        "the truncated segment is locked until the truncation commits"
    );
    let claimed = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "the job in use is still there");
}

/// Migration 7 replaces the batch functions of a version-6 store, whose acknowledgement and
/// confirmation also named the whole batch in each lease's probe (`l.id = ANY(…)`): a job
/// claimed under version 6 is confirmed and acknowledged under version 7, and the grants of
/// the functions stand.
#[tokio::test]
async fn a_version_6_store_gets_the_batch_functions_of_version_7_with_a_job_in_flight() {
    let (schema, q) = open("v7").await;
    let pool = q.postgres_pool().unwrap().clone();
    let quoted = format!("\"{}\"", schema.name());
    let functions = "'ack', 'claim', 'claim_any', 'confirm_started'";
    let defs = format!(
        "SELECT string_agg(pg_get_functiondef(p.oid), E'\\n') FROM pg_proc p \
         WHERE p.pronamespace = '{quoted}'::regnamespace AND p.proname IN ({functions})"
    );
    let probe = "l.id = f.id AND l.attempt = f.attempt";
    let old_probe = "l.id = ANY(ARRAY[f.id]) AND l.id = f.id AND l.attempt = f.attempt";
    let text = |sql: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let current = text(defs.clone()).await;
    // Four functions, each with a branch per lease segment and one for the whole ring.
    assert!(current.matches(probe).count() >= 4 * 33, "{current}");
    assert!(!current.contains("l.id = ANY("), "{current}");

    // The store as version 6 left it: the same functions with the old probe, a grant on one,
    // and a job claimed but not yet confirmed.
    let exec = |sql: String| {
        let pool = pool.clone();
        async move {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
        }
    };
    exec(format!(
        "DO $$ DECLARE f oid; BEGIN \
           FOR f IN SELECT p.oid FROM pg_proc p \
                     WHERE p.pronamespace = '{quoted}'::regnamespace \
                       AND p.proname IN ({functions}) LOOP \
             EXECUTE replace(pg_get_functiondef(f), '{probe}', '{old_probe}'); \
           END LOOP; END $$"
    ))
    .await;
    exec(format!(
        "DELETE FROM {quoted}.queue_migrations WHERE version >= 7"
    ))
    .await;
    exec(format!(
        "GRANT EXECUTE ON FUNCTION {quoted}.confirm_started(bigint[], integer[], smallint[]) \
         TO pg_monitor"
    ))
    .await;
    assert!(text(defs.clone()).await.contains(old_probe));
    let id = q.enqueue(Job::new(json!({ "n": 1 }))).await.unwrap();
    let claimed = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, id);

    // A new process opens the store: migration 7 runs.
    let reopened = reopen(&schema).await;
    assert_eq!(version(&pool, &quoted).await, Some(10));
    let migrated = text(defs).await;
    assert!(!migrated.contains("l.id = ANY("), "{migrated}");
    // Migrations 9 and 10 followed: the acknowledging functions (9) and the confirmation (10)
    // look up unknown segments first.
    assert_eq!(
        migrated
            .matches("WITH ORDINALITY AS u(id, attempt, seg, n)")
            .count(),
        4,
        "{migrated}"
    );
    assert_eq!(
        migrated.matches(probe).count(),
        current.matches(probe).count()
    );
    let granted = text(format!(
        "SELECT has_function_privilege('pg_monitor', \
         '{quoted}.confirm_started(bigint[], integer[], smallint[])', 'EXECUTE')::text"
    ))
    .await;
    assert_eq!(granted, "true", "the grant on a replaced function stands");

    // The job claimed under version 6 is confirmed and acknowledged under version 7.
    assert_eq!(
        reopened
            .protocol()
            .confirm_started(&[(claimed[0].id, claimed[0].attempt)])
            .await
            .unwrap(),
        vec![id]
    );
    assert_eq!(
        reopened
            .protocol()
            .complete(&[(claimed[0].id, claimed[0].attempt)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        reopened.job(id).await.unwrap().unwrap().state,
        JobState::Done
    );
    // And a worker drains new jobs through the replaced claim.
    reopened
        .enqueue_many((0..50).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    let report = Worker::new(reopened.clone())
        .concurrency(4)
        .until_idle(true)
        .run(
            |_ctx: JobContext| async { Ok::<(), String>(()) },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, 50);
    assert_eq!(reopened.stats().await.unwrap().ready, 0);
}

/// The reaper never waits for a worker's statement on a lease: an expired lease that a
/// heartbeat in flight holds (here a transaction that locks it as a heartbeat does) is left to
/// that statement, the other expired leases are rescued at once, and the one left is rescued
/// at the next round. Before, the reaper waited for as long as the lease was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_skips_a_lease_a_worker_holds_and_rescues_the_rest() {
    let (schema, q) = open("reapskip").await;
    q.enqueue_many((0..2).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    let claimed = q
        .protocol()
        .claim("w", 2, Duration::from_secs(1), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let (held_id, free_id) = (claimed[0].id, claimed[1].id);
    sleep(Duration::from_millis(1_200)).await;
    let pool = PgPool::connect(schema.url()).await.unwrap();
    let mut heartbeat = pool.begin().await.unwrap();
    let locked: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM \"{}\".leases WHERE id = $1 FOR NO KEY UPDATE",
        schema.name()
    )))
    .bind(held_id.0)
    .fetch_all(&mut *heartbeat)
    .await
    .unwrap();
    assert_eq!(locked, vec![held_id.0], "the lease is there, expired");
    let reaped = tokio::time::timeout(Duration::from_secs(5), q.protocol().reap())
        .await
        .expect("the reaper waited for the lease a heartbeat holds")
        .unwrap();
    assert_eq!(reaped, 1, "the lease nobody holds is rescued");
    let state = |id| {
        let q = q.clone();
        async move { q.job(id).await.unwrap().unwrap().state }
    };
    assert_eq!(state(free_id).await, JobState::Ready);
    assert_eq!(state(held_id).await, JobState::Running);
    heartbeat.rollback().await.unwrap();
    assert_eq!(
        q.protocol().reap().await.unwrap(),
        1,
        "rescued at the next round"
    );
    assert_eq!(state(held_id).await, JobState::Ready);
    pool.close().await;
}

/// A queue `q` in a fresh schema with 150 jobs claimed by one claim (150 consecutive lease
/// tickets: at least two segments of 100), a pool of its own, and the leases as
/// (id, attempt, segment) in (segment, id) order, the first and last in different segments.
async fn leases_of_150_claimed(label: &str) -> (PgSchema, Queue, PgPool, Vec<(i64, i32, i16)>) {
    let (schema, q) = open(label).await;
    let quoted = format!("\"{}\"", schema.name());
    q.enqueue_many((0..150).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    assert_eq!(
        q.protocol()
            .claim("w", 150, Duration::from_secs(60), &[])
            .await
            .unwrap()
            .len(),
        150
    );
    let pool = PgPool::connect(schema.url()).await.unwrap();
    let leases: Vec<(i64, i32, i16)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, attempt, seg FROM {quoted}.leases ORDER BY seg, id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let (low, high) = (leases[0], leases[leases.len() - 1]);
    assert!(low.2 < high.2, "two segments: {low:?} {high:?}");
    (schema, q, pool, leases)
}

/// A heartbeat of the leases `first` and `second` (ids) of the schema `quoted` around
/// `call`: a transaction locks `first` as a heartbeat does, `call` is sent, and 300 ms later
/// the transaction locks `second`. Returns how long that second lock waited and `call`'s
/// answer. The transaction ends before the caller asserts anything, so that a failure leaves
/// no lock behind for the clean-up; the second lock failing (a deadlock's victim) panics.
async fn heartbeat_around<T: Send + 'static>(
    pool: &PgPool,
    quoted: &str,
    (first, second): (i64, i64),
    call: impl std::future::Future<Output = T> + Send + 'static,
) -> (Duration, T) {
    let lock = |id: i64| {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM {quoted}.leases WHERE id = $1 FOR NO KEY UPDATE"
        )))
        .bind(id)
    };
    let mut heartbeat = pool.begin().await.unwrap();
    lock(first).execute(&mut *heartbeat).await.unwrap();
    let call = tokio::spawn(call);
    sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let locked = lock(second).execute(&mut *heartbeat).await;
    let waited = started.elapsed();
    heartbeat.commit().await.unwrap();
    let answer = call.await.unwrap();
    locked.unwrap_or_else(|e| panic!("the heartbeat's lock of {second}: {e}"));
    (waited, answer)
}

/// An acknowledgement naming some jobs by their lease segment and others without one (a
/// process that did not claim them, or one past its memory of segments) locks them all in the
/// (segment, id) order of a heartbeat, so the two never wait for each other in a cycle. Here a
/// transaction locks two leases as a heartbeat does, the one of the lower segment first; the
/// acknowledgement, sent in between, knows only the higher segment's job. Before migration 9
/// it locked that job first (the jobs of no known segment came last) and then waited for the
/// other: the heartbeat's second lock closed a cycle that PostgreSQL broke after
/// `deadlock_timeout` (1 s), failing one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_of_known_and_unknown_segments_locks_in_heartbeat_order() {
    let (schema, q, pool, leases) = leases_of_150_claimed("ackorder").await;
    let quoted = format!("\"{}\"", schema.name());
    let (low, high) = (leases[0], leases[leases.len() - 1]);
    let ack = {
        let (pool, quoted) = (pool.clone(), quoted.clone());
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT {quoted}.ack($1, $2, $3)"
            )))
            .bind(vec![high.0, low.0])
            .bind(vec![high.1, low.1])
            .bind(vec![Some(high.2), None])
            .fetch_one(&pool)
            .await
        }
    };
    let (waited, acked) = heartbeat_around(&pool, &quoted, (low.0, high.0), ack).await;
    assert!(
        waited < Duration::from_millis(500),
        "the heartbeat waited {waited:?} for the acknowledgement"
    );
    assert_eq!(
        acked.unwrap(),
        2,
        "both jobs acknowledged after the heartbeat"
    );

    // The other 148 named every way a segment can be unknown: no hint, a hint outside the
    // ring, a process that never claimed them; and one job twice, the second time by an
    // attempt it never had, which acknowledges nothing.
    let rest = &leases[1..leases.len() - 1];
    let hints: Vec<Option<i16>> = (0..rest.len())
        .map(|n| match n % 3 {
            0 => None,
            1 => Some(99),
            _ => Some(rest[n].2),
        })
        .collect();
    let mut ids: Vec<i64> = rest.iter().map(|l| l.0).collect();
    let mut attempts: Vec<i32> = rest.iter().map(|l| l.1).collect();
    let mut hints = hints;
    ids.push(rest[0].0);
    attempts.push(rest[0].1 + 1);
    hints.push(None);
    let acked: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {quoted}.ack($1, $2, $3)"
    )))
    .bind(ids)
    .bind(attempts)
    .bind(hints)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(acked, 148);
    assert_eq!(q.stats().await.unwrap().running, 0);
    assert_eq!(q.stats().await.unwrap().done, 150);
    pool.close().await;
}

/// A stopping worker waits for the maintenance's statement in flight, not for the rest of its
/// round. Every lease segment is held ROW EXCLUSIVE (as a transaction that writes there holds
/// it), so that each drained one costs the maintenance's waiting round its whole 20 ms wait.
/// The worker is stopped as soon as the round's first waiting truncation shows in
/// `pg_stat_activity`. Before, the stop waited for the round's end and the reap after it:
/// 1.9 s here (18 ms since), and up to 190 ms added to the run of a worker that drained 10k
/// jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_worker_does_not_wait_for_the_rest_of_a_maintenance_round() {
    let (schema, q) = open("stopmaint").await;
    let quoted = format!("\"{}\"", schema.name());
    let pool = PgPool::connect(schema.url()).await.unwrap();
    let mut holder = pool.begin().await.unwrap();
    let segments: Vec<String> = (0..32).map(|k| format!("{quoted}.leases_{k}")).collect();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "LOCK TABLE {} IN ROW EXCLUSIVE MODE",
        segments.join(", ")
    )))
    .execute(&mut *holder)
    .await
    .unwrap();

    // 3,200 leases: every segment of the ring (32 of 100) written, then drained, and none of
    // them truncated while the holder holds them.
    q.enqueue_many((0..3_200).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    let report = Worker::new(q.clone())
        .concurrency(8)
        .until_idle(true)
        .run(
            |_job: JobContext| async { Ok::<(), String>(()) },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, 3_200);

    let stop = CancellationToken::new();
    let worker = tokio::spawn(Worker::new(q.clone()).concurrency(1).run(
        |_job: JobContext| async { Ok::<(), String>(()) },
        stop.clone(),
    ));
    // A truncation of this schema waiting for a lock: the maintenance is in a waiting round.
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
           AND wait_event_type = 'Lock' AND query LIKE '%{quoted}.truncate_drained(%'"
    );
    let looking = Instant::now();
    while scalar_i64(&pool, waiting.clone()).await != Some(1) {
        assert!(
            looking.elapsed() < Duration::from_secs(10),
            "the maintenance never waited for a held segment"
        );
        sleep(Duration::from_millis(2)).await;
    }
    let stopping = Instant::now();
    stop.cancel();
    worker.await.unwrap().unwrap();
    let took = stopping.elapsed();
    holder.rollback().await.unwrap();
    let drained = scalar_i64(
        &pool,
        format!(
            "SELECT count(*) FROM ({}) s WHERE bytes > 0",
            segments
                .iter()
                .map(|s| format!("SELECT pg_relation_size('{s}') AS bytes"))
                .collect::<Vec<_>>()
                .join(" UNION ALL ")
        ),
    )
    .await
    .unwrap();
    assert!(
        drained >= 20,
        "{drained} lease segments held rows: too few for a round of waits"
    );
    assert!(
        took < Duration::from_millis(250),
        "the worker took {took:?} to stop, with {drained} segments for the round to wait for"
    );
}

/// A confirmation locks its leases in a heartbeat's (segment, id) order (v10.sql), as an
/// acknowledgement does: a program that heartbeats the jobs of a claim while it confirms them
/// never deadlocks. A transaction locks the first lease, as a heartbeat of both jobs does, the
/// confirmation is sent, then the transaction locks the second. Two cases: the jobs in two
/// segments, the later one with its segment and the earlier one without (a process that did
/// not claim it); and two jobs of one segment named in descending id order. On version 9 the
/// confirmation locked the named segment first, then went through the ring's parent, and in a
/// segment locked in the order named: a deadlock, one side failed after `deadlock_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_locks_in_heartbeat_order() {
    let (schema, _q, pool, leases) = leases_of_150_claimed("confirmorder").await;
    let quoted = format!("\"{}\"", schema.name());
    let (low, high) = (leases[0], leases[leases.len() - 1]);
    let (first, second) = (leases[1], leases[2]);
    assert_eq!(first.2, second.2, "one segment: {first:?} {second:?}");
    // (the lease the heartbeat locks first, the one it locks second, the confirmation's
    // hints for [second, first])
    let cases = [
        (first, second, [Some(second.2), Some(first.2)]),
        (low, high, [Some(high.2), None]),
    ];
    for (one, two, hints) in cases {
        let confirm = {
            let (pool, quoted) = (pool.clone(), quoted.clone());
            async move {
                sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                    "SELECT {quoted}.confirm_started($1, $2, $3)"
                )))
                .bind(vec![two.0, one.0])
                .bind(vec![two.1, one.1])
                .bind(hints.to_vec())
                .fetch_all(&pool)
                .await
            }
        };
        let (waited, confirmed) = heartbeat_around(&pool, &quoted, (one.0, two.0), confirm).await;
        assert!(
            waited < Duration::from_millis(500),
            "{one:?} {two:?}: the heartbeat waited {waited:?} for the confirmation"
        );
        let mut confirmed = confirmed.unwrap();
        confirmed.sort_unstable();
        assert_eq!(
            confirmed,
            [one.0, two.0],
            "both confirmed after the heartbeat"
        );
    }
    let started: i64 = scalar_i64(
        &pool,
        format!("SELECT count(*) FROM {quoted}.leases WHERE started"),
    )
    .await
    .unwrap();
    assert_eq!(started, 4, "the four confirmed jobs and no other");
    pool.close().await;
}
