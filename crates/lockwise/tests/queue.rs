//! The job queue on PostgreSQL and on MariaDB: every case runs on both, each in a schema or
//! database of its own; the PostgreSQL-only ones (the claim's plan, LISTEN) are plain tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use lockwise::queue::{
    ConnectOptions, Executor, Job, JobContext, JobId, JobState, Queue, Stats, Worker,
};
use lockwise_testkit::{MysqlDatabase, PgSchema};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

async fn my_queue(label: &str) -> (MysqlDatabase, Queue) {
    let db = MysqlDatabase::mysql(label);
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(20)
        .connect(&db.url())
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    let q = Queue::mysql(pool, "q");
    q.migrate().await.unwrap();
    (db, q)
}

async fn queue(label: &str) -> (PgSchema, Queue) {
    let schema = PgSchema::new(label);
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema.name(), "q").unwrap();
    q.migrate().await.unwrap();
    (schema, q)
}

/// Jobs waiting to run: ready or scheduled.
fn waiting(stats: Stats) -> i64 {
    stats.ready + stats.scheduled
}

/// Runs `worker` until `until` holds (checked every 20 ms) or `limit` passes; then shuts down.
async fn run_until<H, Fut>(
    worker: Worker,
    handler: H,
    limit: Duration,
    until: impl AsyncCheck,
) -> lockwise::queue::WorkerReport
where
    H: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run(handler, stop.clone()));
    let give_up = Instant::now() + limit;
    while Instant::now() < give_up && !until.check().await {
        sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    task.await.unwrap().unwrap()
}

trait AsyncCheck {
    fn check(&self) -> impl std::future::Future<Output = bool>;
}

struct StatsAre<F: Fn(lockwise::queue::Stats) -> bool>(Queue, F);

impl<F: Fn(lockwise::queue::Stats) -> bool> AsyncCheck for StatsAre<F> {
    async fn check(&self) -> bool {
        (self.1)(self.0.stats().await.unwrap())
    }
}

fn fast(q: &Queue) -> Worker {
    Worker::new(q.clone())
        .poll_interval(Duration::from_millis(50))
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .grace(Duration::from_secs(2))
}

/// On ANALYZEd segments holding 10k rows the claim takes the claim index's order across the
/// ready ring (a Merge Append of the segments' index scans), with the LIMIT applied (under
/// LockRows) before anything moves, and deletes the chosen rows without scanning a segment.
#[tokio::test]
async fn the_claim_plan_uses_the_index_and_limits_before_updating() {
    let (s, q) = queue("plan").await;
    q.enqueue_many((0..10_000).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let schema = s.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {schema}.ready")))
        .execute(q.postgres_pool().unwrap())
        .await
        .unwrap();
    let claim = claim_statement(&q, schema, "claim").await;
    let mut tx = q.postgres_pool().unwrap().begin().await.unwrap();
    // The claim functions' own setting (v5.sql).
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {claim}"
    )))
    .bind("q")
    .bind(10i64)
    .bind(30.0f64)
    .bind("w")
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let text = plan.to_string();
    // The CTE `next` is a Limit over LockRows over the merged index scans: rows are locked
    // one by one as the limit pulls them, and it stops after n.
    let ctes: Vec<&serde_json::Value> = find(&plan, &|n| n["Subplan Name"] == "CTE next");
    assert_eq!(ctes.len(), 1, "{text}");
    assert_eq!(ctes[0]["Node Type"], "Limit", "{text}");
    let lock_rows = &ctes[0]["Plans"][0];
    assert_eq!(lock_rows["Node Type"], "LockRows", "{text}");
    assert_claim_index_scans(&lock_rows["Plans"][0], &text);
    assert_deletes_by_address(&plan, &text);
}

/// The claim statement of the schema's function `function` (claim or claim_any) as
/// migrated: what follows its `RETURN QUERY`.
async fn claim_statement(q: &Queue, schema: &str, function: &str) -> String {
    let def: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p \
         WHERE p.pronamespace = '\"{schema}\"'::regnamespace AND p.proname = '{function}'"
    )))
    .fetch_one(q.postgres_pool().unwrap())
    .await
    .unwrap();
    let start = def.find("RETURN QUERY").expect("the claim's RETURN QUERY") + 12;
    let end = def[start..].find(";\nEND").expect("the claim's end") + start;
    def[start..end].to_owned()
}

/// `node` reads every ready segment through its claim index, merged in the claim's order.
fn assert_claim_index_scans(node: &serde_json::Value, text: &str) {
    assert_eq!(node["Node Type"], "Merge Append", "{text}");
    let members = node["Plans"].as_array().unwrap();
    assert_eq!(members.len(), 16, "{text}");
    for member in members {
        let index = member["Index Name"].as_str().unwrap_or_default();
        assert!(
            index.starts_with("ready_") && index.ends_with("_queue_priority_run_at_id_idx"),
            "{text}"
        );
    }
}

/// The claim deletes from each ready segment by address (one TID scan of that segment, in a
/// `moved_<k>` CTE of its own), never by scanning a segment or its id index, nor by looking
/// an address up in another segment.
fn assert_deletes_by_address(plan: &serde_json::Value, text: &str) {
    for k in 0..16 {
        let moved = find(plan, &|n| n["Subplan Name"] == format!("CTE moved_{k}"));
        assert_eq!(moved.len(), 1, "moved_{k}: {text}");
        let scans = find(moved[0], &|n| {
            n["Node Type"].is_string()
                && n["Relation Name"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("ready"))
                && n["Operation"].is_null()
        });
        assert_eq!(scans.len(), 1, "moved_{k}: {text}");
        assert_eq!(scans[0]["Node Type"], "Tid Scan", "moved_{k}: {text}");
        assert_eq!(scans[0]["Relation Name"], format!("ready_{k}"), "{text}");
    }
}

/// A worker of several queues claims, per queue, at most n jobs from the claim index (a
/// Limit over LockRows over it), then the n first of them all.
#[tokio::test]
async fn the_claim_plan_of_several_queues_limits_each_queue_from_the_index() {
    let (s, q) = queue("plan_any").await;
    for name in ["a", "b", "c"] {
        q.named(name)
            .enqueue_many((0..3_000).map(|i| Job::new(json!({ "n": i }))))
            .await
            .unwrap();
    }
    let schema = s.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {schema}.ready")))
        .execute(q.postgres_pool().unwrap())
        .await
        .unwrap();
    let claim = claim_statement(&q, schema, "claim_any").await;
    let mut tx = q.postgres_pool().unwrap().begin().await.unwrap();
    // The claim functions' own setting (v5.sql).
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {claim}"
    )))
    .bind(vec!["a", "b"])
    .bind(10i64)
    .bind(30.0f64)
    .bind("w")
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let text = plan.to_string();
    let ctes: Vec<&serde_json::Value> = find(&plan, &|n| n["Subplan Name"] == "CTE next");
    assert_eq!(ctes.len(), 1, "{text}");
    let per_queue = find(ctes[0], &|n| {
        n["Node Type"] == "Limit" && n["Plans"][0]["Node Type"] == "LockRows"
    });
    assert_eq!(per_queue.len(), 1, "each queue's scan is limited: {text}");
    assert_claim_index_scans(&per_queue[0]["Plans"][0]["Plans"][0], &text);
    let chosen = find(&plan, &|n| n["Subplan Name"] == "CTE chosen");
    assert_eq!(chosen.len(), 1, "{text}");
    assert_eq!(
        chosen[0]["Node Type"], "Limit",
        "the n first of them all: {text}"
    );
    assert_deletes_by_address(&plan, &text);
}

fn find<'a>(
    v: &'a serde_json::Value,
    pred: &dyn Fn(&serde_json::Value) -> bool,
) -> Vec<&'a serde_json::Value> {
    let mut out = Vec::new();
    if pred(v) {
        out.push(v);
    }
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| out.extend(find(i, pred))),
        serde_json::Value::Object(map) => map.values().for_each(|i| out.extend(find(i, pred))),
        _ => {}
    }
    out
}

/// NOTIFY wakes an idle worker long before its (30 s) poll.
#[tokio::test]
async fn a_notification_wakes_an_idle_worker() {
    let (_s, q) = queue("notify").await;
    let stop = CancellationToken::new();
    let handled = Arc::new(tokio::sync::Notify::new());
    let h2 = handled.clone();
    let worker = tokio::spawn(
        Worker::new(q.clone())
            .poll_interval(Duration::from_secs(30))
            .run(
                move |_job| {
                    let handled = h2.clone();
                    async move {
                        handled.notify_one();
                        Ok::<_, String>(())
                    }
                },
                stop.clone(),
            ),
    );
    sleep(Duration::from_millis(500)).await; // the worker is idle, listening
    let enqueued = Instant::now();
    q.enqueue(Job::new(json!({}))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), handled.notified())
        .await
        .expect("woken by NOTIFY, not by the 30 s poll");
    assert!(enqueued.elapsed() < Duration::from_secs(5));
    stop.cancel();
    worker.await.unwrap().unwrap();
}

/// Pruning one queue's history leaves the other queues' history alone, and pruning
/// everywhere takes every queue's (the two are separate statements on PostgreSQL, so that
/// one queue's uses its index with a generic plan).
async fn pruning_one_queue_leaves_the_other_queues_history(q: Queue) {
    let other = q.named("other");
    let finish = |queue: Queue| async move {
        queue.enqueue(Job::new(json!({}))).await.unwrap();
        let claimed = queue
            .protocol()
            .claim("w", 1, Duration::from_secs(30), &[])
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        let done = [(claimed[0].id, claimed[0].attempt)];
        assert_eq!(queue.protocol().complete(&done).await.unwrap(), 1);
    };
    for queue in [&q, &other, &q] {
        finish(queue.clone()).await;
    }
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 2);
    assert_eq!(q.stats().await.unwrap().done, 0);
    assert_eq!(other.stats().await.unwrap().done, 1, "the other queue's");
    finish(q.clone()).await;
    assert_eq!(
        other
            .prune_everywhere(JobState::Done, Duration::ZERO)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        (
            q.stats().await.unwrap().done,
            other.stats().await.unwrap().done
        ),
        (0, 0)
    );
}

async fn lifecycle_enqueue_work_done(q: Queue) {
    let ids: Vec<JobId> = q
        .enqueue_many((0..20).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    assert_eq!(ids.len(), 20);
    assert_eq!(waiting(q.stats().await.unwrap()), 20);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let report = run_until(
        fast(&q).concurrency(4).batch(5),
        move |job| {
            let seen = s2.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(job.payload["n"].as_i64().unwrap());
                Ok(())
            }
        },
        Duration::from_secs(20),
        StatsAre(q.clone(), |s| s.done == 20),
    )
    .await;
    assert_eq!(report.done, 20);
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (waiting(stats), stats.running, stats.done, stats.dead),
        (0, 0, 20, 0)
    );
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        (0..20).collect::<Vec<_>>(),
        "every job ran exactly once"
    );
}

async fn a_failing_job_dies_after_exactly_max_attempts(q: Queue) {
    let id = q
        .enqueue(Job::new(json!({})).max_attempts(3))
        .await
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let c2 = calls.clone();
    run_until(
        fast(&q),
        move |job| {
            let calls = c2.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(format!("boom on attempt {}", job.attempt))
            }
        },
        Duration::from_secs(20),
        StatsAre(q.clone(), |s| s.dead == 1),
    )
    .await;
    sleep(Duration::from_millis(200)).await; // would a 4th attempt sneak in?
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "exactly max_attempts, never one more"
    );
    let dead = q.dead(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].attempt, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom on attempt 3"));
    assert_eq!(
        dead[0].errors.as_array().unwrap().len(),
        3,
        "the history of every attempt"
    );

    // Retried with a fresh budget, it runs again; purged, it is gone.
    assert!(q.retry(id).await.unwrap());
    assert_eq!(waiting(q.stats().await.unwrap()), 1);
    assert!(!q.retry(JobId(id.0 + 1_000_000)).await.unwrap());
}

async fn dead_letters_can_be_purged(q: Queue) {
    q.enqueue(Job::new(json!({})).max_attempts(1))
        .await
        .unwrap();
    let claimed = q
        .protocol()
        .claim("t", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert!(
        q.protocol()
            .fail(claimed[0].id, 1, "no", Duration::ZERO, false)
            .await
            .unwrap()
    );
    assert_eq!(q.stats().await.unwrap().dead, 1);
    assert_eq!(
        q.purge_dead(Duration::from_secs(3600)).await.unwrap(),
        0,
        "too recent"
    );
    assert_eq!(q.purge_dead(Duration::ZERO).await.unwrap(), 1);
    assert_eq!(q.stats().await.unwrap().dead, 0);
}

async fn an_idempotency_key_returns_the_existing_job(q: Queue) {
    let a = q
        .enqueue(Job::new(json!({"v": 1})).key("welcome-42"))
        .await
        .unwrap();
    let b = q
        .enqueue(Job::new(json!({"v": 2})).key("welcome-42"))
        .await
        .unwrap();
    assert_eq!(a, b);
    let other = q
        .named("other")
        .enqueue(Job::new(json!({})).key("welcome-42"))
        .await
        .unwrap();
    assert_ne!(other, a, "keys are per queue");
    // Concurrent duplicates: one job.
    let tasks = (0..8).map(|_| {
        let q = q.clone();
        tokio::spawn(async move { q.enqueue(Job::new(json!({})).key("race")).await.unwrap() })
    });
    let ids: HashSet<JobId> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(waiting(q.stats().await.unwrap()), 2);
    // enqueue_with_status: of concurrent duplicates exactly one inserted, all the same id.
    let tasks = (0..8).map(|_| {
        let q = q.clone();
        tokio::spawn(async move {
            q.enqueue_with_status(Job::new(json!({})).key("race-2"))
                .await
                .unwrap()
        })
    });
    let done: Vec<_> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(done.iter().filter(|e| !e.duplicate).count(), 1, "{done:?}");
    assert!(done.iter().all(|e| e.id == done[0].id), "{done:?}");
    // A key repeated within one enqueue_many: one job.
    let many = q
        .enqueue_many([
            Job::new(json!({})).key("twice"),
            Job::new(json!({})).key("twice"),
        ])
        .await
        .unwrap();
    assert_eq!(many[0], many[1]);
    assert_eq!(waiting(q.stats().await.unwrap()), 4);
}

async fn an_enqueue_in_a_rolled_back_transaction_leaves_no_job(q: Queue) {
    match (q.postgres_pool().cloned(), q.mysql_pool().cloned()) {
        (Some(pool), _) => enqueue_in_transactions(&q, &pool).await,
        (_, Some(pool)) => enqueue_in_transactions(&q, &pool).await,
        (None, None) => panic!("a queue on neither database"),
    }
}

/// The case above, in transactions of the queue's own pool (either database).
async fn enqueue_in_transactions<DB: sqlx::Database>(q: &Queue, pool: &sqlx::Pool<DB>)
where
    for<'c> &'c mut sqlx::Transaction<'static, DB>: Into<Executor<'c>>,
{
    let mut tx = pool.begin().await.unwrap();
    q.enqueue_in(&mut tx, Job::new(json!({}))).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 0);
    let mut tx = pool.begin().await.unwrap();
    q.enqueue_in(&mut tx, Job::new(json!({}))).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 1);
}

/// A worker whose job was rescued and claimed again cannot complete (or fail) it late.
async fn a_late_completion_after_a_rescue_is_rejected(q: Queue) {
    let id = q.enqueue(Job::new(json!({}))).await.unwrap();
    let first = q
        .protocol()
        .claim("w1", 1, Duration::from_secs(1), &[])
        .await
        .unwrap();
    assert_eq!((first[0].id, first[0].attempt), (id, 1));
    sleep(Duration::from_millis(1_200)).await;
    assert_eq!(
        q.protocol().reap().await.unwrap(),
        1,
        "the expired lease was rescued"
    );
    let second = q
        .protocol()
        .claim("w2", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(second[0].attempt, 2);
    assert_eq!(
        q.protocol().complete(&[(id, 1)]).await.unwrap(),
        0,
        "w1's late completion is rejected"
    );
    assert!(
        !q.protocol()
            .fail(id, 1, "late", Duration::ZERO, false)
            .await
            .unwrap()
    );
    assert_eq!(q.protocol().complete(&[(id, 2)]).await.unwrap(), 1);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, stats.running), (1, 0));
}

/// Eight concurrent claimers never get more than n rows each nor the same row twice.
async fn concurrent_claimers_get_disjoint_batches_of_at_most_n(q: Queue) {
    q.enqueue_many((0..400).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let claimers = (0..8).map(|w| {
        let q = q.clone();
        tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = q
                    .protocol()
                    .claim(&format!("w{w}"), 7, Duration::from_secs(60), &[])
                    .await
                    .unwrap();
                assert!(batch.len() <= 7, "a batch of {}", batch.len());
                if batch.is_empty() {
                    return mine;
                }
                mine.extend(batch.into_iter().map(|j| j.id));
            }
        })
    });
    let all: Vec<JobId> = futures_util::future::join_all(claimers)
        .await
        .into_iter()
        .flat_map(Result::unwrap)
        .collect();
    let unique: HashSet<JobId> = all.iter().copied().collect();
    assert_eq!(all.len(), 400, "every job claimed");
    assert_eq!(unique.len(), 400, "no job claimed twice");
}

/// A job that runs two and a half times its lease while its worker lives is done once, never
/// rescued. The lease is 2 s, not 1 s: with heartbeats every third of it, a 1 s lease was
/// rescued once in a full test run on the two-core machine (a stall of the worker or the
/// server beyond 670 ms, never reproduced alone or beside the heaviest neighbours); a
/// rescue now needs one beyond 1.3 s. Without heartbeats the job would still be rescued.
async fn a_long_job_is_kept_by_heartbeats_not_rescued(q: Queue) {
    q.enqueue(Job::new(json!({}))).await.unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let c2 = calls.clone();
    let lease = Duration::from_secs(2);
    let long = tokio::spawn(run_until(
        fast(&q).lease(lease),
        move |_job| {
            let calls = c2.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                sleep(Duration::from_secs(5)).await;
                Ok(())
            }
        },
        Duration::from_secs(20),
        StatsAre(q.clone(), |s| s.done == 1),
    ));
    while q.stats().await.unwrap().running == 0 {
        sleep(Duration::from_millis(20)).await;
    }
    // A second worker, started once the job is claimed, runs the reaper too and would take a
    // rescued job.
    let stop = CancellationToken::new();
    let other = tokio::spawn(fast(&q).lease(lease).run(
        |_job| async { Err::<(), _>("the rescuer must never get this job".to_owned()) },
        stop.clone(),
    ));
    long.await.unwrap();
    stop.cancel();
    let report = other.await.unwrap().unwrap();
    assert_eq!(report.failed, 0, "the other worker never got the job");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

async fn a_hung_handler_is_failed_by_the_execution_timeout(q: Queue) {
    q.enqueue(Job::new(json!({})).max_attempts(1))
        .await
        .unwrap();
    run_until(
        fast(&q).timeout(Duration::from_millis(300)),
        |_job| async {
            std::future::pending::<()>().await;
            Ok(())
        },
        Duration::from_secs(10),
        StatsAre(q.clone(), |s| s.dead == 1),
    )
    .await;
    let dead = q.dead(1).await.unwrap();
    assert_eq!(dead[0].last_error.as_deref(), Some("timed out after 300ms"));
}

async fn a_panicking_handler_is_recorded_as_a_failure(q: Queue) {
    q.enqueue(Job::new(json!({})).max_attempts(1))
        .await
        .unwrap();
    run_until(
        fast(&q),
        |_job| async { panic!("the handler broke") },
        Duration::from_secs(10),
        StatsAre(q.clone(), |s| s.dead == 1),
    )
    .await;
    let dead = q.dead(1).await.unwrap();
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("handler panicked: the handler broke")
    );
}

async fn graceful_shutdown_finishes_in_flight_jobs_and_hands_back_the_rest(q: Queue) {
    q.enqueue(Job::new(json!({ "ms": 200 }))).await.unwrap();
    q.enqueue(Job::new(json!({ "ms": 60_000 })).max_attempts(1))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(fast(&q).grace(Duration::from_millis(800)).run(
        |job| async move {
            sleep(Duration::from_millis(job.payload["ms"].as_u64().unwrap())).await;
            Ok::<_, String>(())
        },
        stop.clone(),
    ));
    while q.stats().await.unwrap().running < 2 {
        sleep(Duration::from_millis(20)).await;
    }
    let asked = Instant::now();
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!((report.done, report.handed_back), (1, 1));
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, waiting(stats), stats.running), (1, 1, 0));
    // The handed-back job keeps its budget: it can still run once more.
    let again = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert!(again[0].attempt <= again[0].max_attempts);
}

async fn priorities_and_delays_order_the_claims(q: Queue) {
    let low = q.enqueue(Job::new(json!({})).priority(5)).await.unwrap();
    let high = q.enqueue(Job::new(json!({})).priority(-1)).await.unwrap();
    let later = q
        .enqueue(Job::new(json!({})).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let normal = q.enqueue(Job::new(json!({}))).await.unwrap();
    let claimed: Vec<JobId> = q
        .protocol()
        .claim("w", 10, Duration::from_secs(30), &[])
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(claimed, vec![high, normal, low]);
    assert!(!claimed.contains(&later));
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.scheduled, stats.running), (0, 1, 3));
    // Acknowledged through the next claim, in the same statement.
    let acks: Vec<(JobId, i32)> = claimed.iter().map(|id| (*id, 1)).collect();
    assert!(
        q.protocol()
            .claim("w", 10, Duration::from_secs(30), &acks)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(q.stats().await.unwrap().done, 3);
    assert_eq!(q.prune_done(Duration::ZERO).await.unwrap(), 3);
}

/// Dropping `Worker::run`'s future (here by a timeout) aborts the handlers it started: a
/// handler asleep at that moment never wakes up to finish, and what it owned is dropped.
async fn dropping_the_run_future_stops_its_handlers(q: Queue) {
    q.enqueue(Job::new(json!({}))).await.unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let witness = Arc::new(());
    let (s2, f2, w2) = (started.clone(), finished.clone(), witness.clone());
    let run = fast(&q).run(
        move |_job| {
            let (started, finished, owned) = (s2.clone(), f2.clone(), w2.clone());
            async move {
                let _owned = owned;
                started.notify_one();
                sleep(Duration::from_millis(600)).await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, String>(())
            }
        },
        CancellationToken::new(),
    );
    tokio::select! {
        result = run => panic!("run ended by itself: {result:?}"),
        _ = started.notified() => {} // the handler sleeps; `run` is dropped here
    }
    sleep(Duration::from_millis(1_200)).await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the handler ran on after run was dropped"
    );
    assert_eq!(
        Arc::strong_count(&witness),
        1,
        "the handler and its worker let go of what they owned"
    );
    // Nothing was handed back: the job stays running until its lease runs out.
    assert_eq!(q.stats().await.unwrap().running, 1);
}

/// `job`, `list`, `cancel` and `prune`: what a user inspecting or cleaning a queue relies on.
async fn jobs_can_be_shown_listed_cancelled_and_pruned(q: Queue) {
    let before = std::time::SystemTime::now() - Duration::from_secs(60);
    let a = q
        .enqueue(Job::new(json!({"n": "a"})).key("key-a"))
        .await
        .unwrap();
    let later = Duration::from_secs(3600);
    let b = q.enqueue(Job::new(json!({})).delay(later)).await.unwrap();
    let c = q.enqueue(Job::new(json!({})).priority(-1)).await.unwrap();
    let other = q.named("other").enqueue(Job::new(json!({}))).await.unwrap();

    let shown = q.job(a).await.unwrap().expect("job a exists");
    assert_eq!((shown.id, shown.state), (a, JobState::Ready));
    assert_eq!(
        (shown.queue.as_str(), shown.key.as_deref()),
        ("q", Some("key-a"))
    );
    assert_eq!((shown.attempt, shown.max_attempts), (0, 5));
    assert_eq!(shown.payload, json!({"n": "a"}));
    assert!(shown.created_at > before && shown.finished_at.is_none());
    let scheduled = q.job(b).await.unwrap().unwrap();
    assert_eq!(scheduled.state, JobState::Scheduled);
    assert!(scheduled.run_at > std::time::SystemTime::now() + later / 2);
    // Any queue of the store, by id; a missing id is None, not an error.
    assert_eq!(q.job(other).await.unwrap().unwrap().queue, "other");
    assert!(q.job(JobId(i64::MAX)).await.unwrap().is_none());

    let ids =
        |jobs: Vec<lockwise::queue::JobInfo>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(q.list(JobState::Ready, 10).await.unwrap()), vec![c, a]);
    assert_eq!(ids(q.list(JobState::Ready, 1).await.unwrap()), vec![c]);
    assert_eq!(ids(q.list(JobState::Scheduled, 10).await.unwrap()), vec![b]);

    let claimed = q
        .protocol()
        .claim("w1", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, c);
    let running = q.list(JobState::Running, 10).await.unwrap();
    assert_eq!(ids(running.clone()), vec![c]);
    assert_eq!(running[0].worker.as_deref(), Some("w1"));
    assert!(running[0].lease_until.unwrap() > std::time::SystemTime::now());

    // Cancel a scheduled job and a running one; a finished or missing job is not cancelled.
    assert!(q.cancel(b).await.unwrap());
    assert!(q.cancel(c).await.unwrap());
    assert!(!q.cancel(b).await.unwrap(), "already cancelled");
    assert!(!q.cancel(JobId(i64::MAX)).await.unwrap());
    // The cancelled execution can neither renew, complete nor fail the job.
    assert!(
        q.protocol()
            .heartbeat(&[(c, 1)], Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(q.protocol().complete(&[(c, 1)]).await.unwrap(), 0);
    assert!(
        !q.protocol()
            .fail(c, 1, "late", Duration::ZERO, false)
            .await
            .unwrap()
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.running, stats.cancelled),
        (1, 0, 0, 2)
    );
    let cancelled = q.list(JobState::Cancelled, 10).await.unwrap();
    assert_eq!(ids(cancelled.clone()), vec![c, b], "newest first");
    assert!(cancelled.iter().all(|j| j.finished_at.is_some()));

    // Only finished states are pruned; pruning leaves other queues alone.
    let err = q.prune(JobState::Ready, Duration::ZERO).await.unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );
    assert_eq!(
        q.prune(JobState::Cancelled, Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    sleep(Duration::from_millis(20)).await;
    assert_eq!(
        q.prune(JobState::Cancelled, Duration::from_millis(1))
            .await
            .unwrap(),
        2
    );
    assert!(q.job(b).await.unwrap().is_none());
    assert!(q.job(a).await.unwrap().is_some() && q.job(other).await.unwrap().is_some());
}

/// A job cancelled while its handler runs: the worker stops the handler at its next
/// heartbeat, and neither completes nor fails the job.
async fn cancelling_a_running_job_stops_its_handler_and_keeps_it_cancelled(q: Queue) {
    let id = q.enqueue(Job::new(json!({}))).await.unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = CancellationToken::new();
    let (flag, running) = (dropped.clone(), started.clone());
    let worker = tokio::spawn(fast(&q).lease(Duration::from_secs(1)).run(
        move |_job| {
            let guard = SetOnDrop(flag.clone());
            running.store(true, Ordering::SeqCst);
            async move {
                let _guard = guard;
                sleep(Duration::from_secs(30)).await;
                Ok::<(), String>(())
            }
        },
        stop.clone(),
    ));
    let until = Instant::now() + Duration::from_secs(10);
    // Started, not only claimed: a job cancelled between its claim and the confirmation of
    // its start never runs at all.
    while !started.load(Ordering::SeqCst) {
        assert!(Instant::now() < until, "the job never started");
        sleep(Duration::from_millis(10)).await;
    }
    assert!(q.cancel(id).await.unwrap());
    let cancelled = Instant::now();
    while !dropped.load(Ordering::SeqCst) {
        // The next heartbeat (every third of the 1 s lease) stops it; were heartbeats to
        // fail, the local deadline would, within the lease. The slack is for a loaded machine.
        assert!(
            cancelled.elapsed() < Duration::from_secs(4),
            "the handler still runs {:?} after the cancel",
            cancelled.elapsed()
        );
        sleep(Duration::from_millis(10)).await;
    }
    println!("handler stopped {:?} after the cancel", cancelled.elapsed());
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(
        (
            report.done,
            report.failed,
            report.cancelled,
            report.lease_lost
        ),
        (0, 0, 1, 0),
        "a cancelled job is counted as cancelled, not as a lost lease"
    );
    assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Cancelled);
}

/// `unique_for`: a key names its job within the window, and a new job after it; the old job
/// keeps its key for inspection; a job without a window still finds the current holder.
async fn an_idempotency_key_can_be_unique_for_a_window(q: Queue) {
    let window = Duration::from_millis(300);
    let job = || Job::new(json!({})).key("digest-7").unique_for(window);
    let first = q.enqueue_with_status(job()).await.unwrap();
    assert!(!first.duplicate);
    let again = q.enqueue_with_status(job()).await.unwrap();
    assert_eq!(
        (again.id, again.duplicate),
        (first.id, true),
        "within the window"
    );
    sleep(window + Duration::from_millis(100)).await;
    let after = q.enqueue_with_status(job()).await.unwrap();
    assert!(
        !after.duplicate && after.id != first.id,
        "after the window: a new job"
    );
    let plain = q
        .enqueue_with_status(Job::new(json!({})).key("digest-7"))
        .await
        .unwrap();
    assert_eq!(
        (plain.id, plain.duplicate),
        (after.id, true),
        "the new job holds the key"
    );
    let old = q.job(first.id).await.unwrap().unwrap();
    assert_eq!(old.key.as_deref(), Some("digest-7"), "kept for inspection");
    // Another queue's key is another key; a window without a key is refused.
    let other = q.named("other").enqueue_with_status(job()).await.unwrap();
    assert!(!other.duplicate);
    let err = q
        .enqueue(Job::new(json!({})).unique_for(window))
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err}");
    assert_eq!(q.stats().await.unwrap().ready, 2);
}

/// `Worker::queues`: one worker runs the jobs of several queues of its store, each handler
/// seeing its job's own queue, and leaves the others alone; an empty list or a bad name is a
/// configuration error.
async fn one_worker_claims_from_several_queues(q: Queue) {
    let mut expected = Vec::new();
    for name in ["a", "b", "a"] {
        let id = q.named(name).enqueue(Job::new(json!({}))).await.unwrap();
        expected.push((id, name.to_owned()));
    }
    q.named("c").enqueue(Job::new(json!({}))).await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let report = fast(&q)
        .queues(["a", "b"])
        .until_idle(true)
        .run(
            move |job| {
                seen2.lock().unwrap().push((job.id, job.queue.clone()));
                async { Ok::<_, String>(()) }
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, 3);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    assert_eq!(q.named("c").stats().await.unwrap().ready, 1);
    for bad in [vec![], vec!["a", ""]] {
        let refused = fast(&q)
            .queues(bad.clone())
            .run(
                |_job| async { Ok::<_, String>(()) },
                CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(refused, Err(lockwise::Error::InvalidConfig { .. })),
            "{bad:?}: {refused:?}"
        );
    }
}

/// Idempotency keys and queue names that differ only in case, accents, Unicode normalisation
/// or a trailing space are different keys and different queues, through `enqueue`,
/// `enqueue_many` and a worker. (MariaDB's default collations compare them as equal: the
/// second job was silently dropped as a duplicate, and a worker of `KEYS` ran `keys`'s jobs.)
async fn keys_and_queue_names_differing_in_case_accent_or_space_are_distinct(q: Queue) {
    let keys = [
        "Abc",
        "abc",
        "Abc ",
        "r\u{e9}sum\u{e9}",
        "resume",
        "re\u{301}sume\u{301}",
        "stra\u{df}e",
        "strasse",
    ];
    let mut ids = HashSet::new();
    for key in keys {
        let e = q
            .enqueue_with_status(Job::new(json!({ "key": key })).key(key))
            .await
            .unwrap();
        assert!(!e.duplicate, "{key:?} was taken for an earlier key");
        ids.insert(e.id);
    }
    assert_eq!(ids.len(), keys.len());
    // The bulk path, which looks the keys up first: each key finds only its own job.
    let many = q
        .enqueue_many(keys.iter().map(|key| Job::new(json!({})).key(*key)))
        .await
        .unwrap();
    assert_eq!(many.iter().copied().collect::<HashSet<_>>(), ids);
    for (id, key) in many.iter().zip(keys) {
        let job = q.job(*id).await.unwrap().unwrap();
        assert_eq!(job.payload, json!({ "key": key }));
    }
    let fresh = q
        .named("bulk")
        .enqueue_many(keys.iter().map(|key| Job::new(json!({})).key(*key)))
        .await
        .unwrap();
    assert_eq!(fresh.iter().collect::<HashSet<_>>().len(), keys.len());

    // Queues: each name has its own jobs, its own stats, its own worker.
    let names = ["KEYS", "keys", "keys ", "Keys"];
    for (n, name) in names.iter().enumerate() {
        for _ in 0..=n {
            q.named(*name).enqueue(Job::new(json!({}))).await.unwrap();
        }
    }
    for (n, name) in names.iter().enumerate() {
        let ready = q.named(*name).stats().await.unwrap().ready;
        assert_eq!(ready, n as i64 + 1, "queue {name:?}");
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let report = fast(&q.named("KEYS"))
        .until_idle(true)
        .run(
            move |job| {
                seen2.lock().unwrap().push(job.queue.clone());
                async { Ok::<_, String>(()) }
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, 1);
    assert_eq!(*seen.lock().unwrap(), vec!["KEYS".to_owned()]);
    for (n, name) in names.iter().enumerate().skip(1) {
        let ready = q.named(*name).stats().await.unwrap().ready;
        assert_eq!(ready, n as i64 + 1, "queue {name:?} after KEYS was drained");
    }
}

/// NOTIFY for any of a worker's queues wakes it.
#[tokio::test]
async fn a_notification_for_any_of_its_queues_wakes_a_worker() {
    let (_s, q) = queue("notify_any").await;
    let stop = CancellationToken::new();
    let handled = Arc::new(tokio::sync::Notify::new());
    let h2 = handled.clone();
    let worker = tokio::spawn(
        Worker::new(q.clone())
            .queues(["a", "b"])
            .poll_interval(Duration::from_secs(30))
            .run(
                move |job| {
                    assert_eq!(job.queue, "b");
                    let handled = h2.clone();
                    async move {
                        handled.notify_one();
                        Ok::<_, String>(())
                    }
                },
                stop.clone(),
            ),
    );
    sleep(Duration::from_millis(500)).await; // the worker is idle, listening
    q.named("b").enqueue(Job::new(json!({}))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), handled.notified())
        .await
        .expect("woken by NOTIFY, not by the 30 s poll");
    stop.cancel();
    worker.await.unwrap().unwrap();
}

/// With `kill_after`, a handler is asked to stop at the timeout and may return: the attempt
/// is still a failure, "timed out", even though it returned `Ok`; and nothing waits for the
/// `kill_after` to run out.
async fn a_handler_asked_to_stop_at_the_timeout_still_times_out(q: Queue) {
    q.enqueue(Job::new(json!({})).max_attempts(1))
        .await
        .unwrap();
    let asked_after = Arc::new(std::sync::Mutex::new(None));
    let a2 = asked_after.clone();
    let started = Instant::now();
    run_until(
        fast(&q)
            .timeout(Duration::from_millis(300))
            .kill_after(Duration::from_secs(10)),
        move |job| {
            let asked_after = a2.clone();
            async move {
                let begun = Instant::now();
                assert!(!job.is_stop_requested());
                job.stop_requested().await;
                *asked_after.lock().unwrap() = Some(begun.elapsed());
                Ok(())
            }
        },
        Duration::from_secs(10),
        StatsAre(q.clone(), |s| s.dead == 1),
    )
    .await;
    let asked = asked_after.lock().unwrap().expect("asked to stop");
    assert!(
        // (the limit counts from just before the handler's task starts)
        asked >= Duration::from_millis(250) && asked < Duration::from_secs(2),
        "{asked:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "not kill_after");
    let dead = q.dead(1).await.unwrap();
    assert_eq!(dead[0].last_error.as_deref(), Some("timed out after 300ms"));
}

/// At the end of the grace period every running handler is asked to stop: one that then
/// returns `Ok` is done, one that returns an error is handed back (not failed, its attempt
/// not spent).
async fn at_the_end_of_the_grace_handlers_are_asked_to_stop(q: Queue) {
    let finishes = q
        .enqueue(Job::new(json!({ "ok": true })).max_attempts(1))
        .await
        .unwrap();
    q.enqueue(Job::new(json!({ "ok": false })).max_attempts(1))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        fast(&q)
            .grace(Duration::from_millis(300))
            .kill_after(Duration::from_secs(10))
            .run(
                |job| async move {
                    job.stop_requested().await;
                    if job.payload["ok"] == true {
                        Ok(())
                    } else {
                        Err("stopped".to_owned())
                    }
                },
                stop.clone(),
            ),
    );
    while q.stats().await.unwrap().running < 2 {
        sleep(Duration::from_millis(20)).await;
    }
    let asked = Instant::now();
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!((report.done, report.failed, report.handed_back), (1, 0, 1));
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, waiting(stats), stats.dead), (1, 1, 0));
    let again = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].id, finishes);
    assert!(
        again[0].attempt <= again[0].max_attempts,
        "attempt not spent"
    );
}

/// A worker prefetches only short jobs: two workers of one handler each share long jobs
/// instead of the first claiming them all while the second idles.
async fn long_jobs_are_not_prefetched_away_from_an_idle_worker(q: Queue) {
    let hold = Duration::from_millis(400);
    for i in 0..4 {
        q.enqueue(Job::new(json!({ "n": i }))).await.unwrap();
    }
    let ran: Arc<std::sync::Mutex<Vec<&'static str>>> = Arc::default();
    let stop = CancellationToken::new();
    let started = Instant::now();
    let mut workers = Vec::new();
    for name in ["a", "b"] {
        let ran = ran.clone();
        workers.push(tokio::spawn(fast(&q).concurrency(1).until_idle(true).run(
            move |_job| {
                let ran = ran.clone();
                async move {
                    ran.lock().unwrap().push(name);
                    sleep(hold).await;
                    Ok::<_, String>(())
                }
            },
            stop.clone(),
        )));
        // The first claims before the second starts.
        sleep(Duration::from_millis(100)).await;
    }
    for worker in workers {
        worker.await.unwrap().unwrap();
    }
    let ran = ran.lock().unwrap().clone();
    let by_b = ran.iter().filter(|w| **w == "b").count();
    assert_eq!(ran.len(), 4, "{ran:?}");
    assert!(by_b >= 1, "the second worker ran nothing: {ran:?}");
    assert!(started.elapsed() < hold * 4, "{:?}", started.elapsed());
}

/// Short jobs are claimed ahead of free handlers (several claims in flight, jobs waiting for
/// a handler): every job still runs exactly once and ends done.
async fn prefetched_short_jobs_each_run_once(q: Queue) {
    let n = 3_000;
    q.enqueue_many((0..n).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let seen: Arc<std::sync::Mutex<HashMap<i64, u32>>> = Arc::default();
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (s, r, m) = (seen.clone(), running.clone(), most.clone());
    let report = fast(&q)
        .concurrency(4)
        .batch(8)
        .until_idle(true)
        .run(
            move |job| {
                let (s, r, m) = (s.clone(), r.clone(), m.clone());
                async move {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = r.fetch_add(1, SeqCst) + 1;
                    m.fetch_max(now, SeqCst);
                    *s.lock()
                        .unwrap()
                        .entry(job.payload["n"].as_i64().unwrap())
                        .or_default() += 1;
                    tokio::task::yield_now().await;
                    r.fetch_sub(1, SeqCst);
                    Ok::<_, String>(())
                }
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, n);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), usize::try_from(n).unwrap());
        assert!(seen.values().all(|&times| times == 1));
    }
    assert!(
        most.load(std::sync::atomic::Ordering::SeqCst) <= 4,
        "more handlers than the concurrency"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.done, stats.unfinished()),
        (i64::try_from(n).unwrap(), 0)
    );
}

/// A default worker claims short jobs in batches larger than its concurrency: one handler
/// holds more than a hundred claimed jobs at a time (a claim of one per free handler, as
/// before, would hold at most four), and each still runs once.
async fn short_jobs_are_claimed_beyond_the_concurrency_by_default(q: Queue) {
    let n = 3_000;
    q.enqueue_many((0..n).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(fast(&q).concurrency(1).until_idle(true).run(
        |_job| async move {
            tokio::task::yield_now().await;
            Ok::<_, String>(())
        },
        stop.clone(),
    ));
    let mut most = 0;
    while !worker.is_finished() {
        most = most.max(q.stats().await.unwrap().running);
        sleep(Duration::from_millis(5)).await;
    }
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.done, n);
    assert!(most > 100, "at most {most} jobs claimed at once");
    assert_eq!(q.stats().await.unwrap().unfinished(), 0);
}

/// `enqueue_many`: ids in input order, new ones ascending; a key already held returns its
/// job, a key repeated in the call the first job's id, both as duplicates.
async fn enqueue_many_returns_ids_in_input_order(q: Queue) {
    let held = q
        .enqueue(Job::new(json!({"n": "held"})).key("held"))
        .await
        .unwrap();
    let jobs = vec![
        Job::new(json!({"n": 0})),
        Job::new(json!({"n": 1})).key("a"),
        Job::new(json!({"n": 2})).key("held"),
        Job::new(json!({"n": 3})).priority(-1).max_attempts(2),
        Job::new(json!({"n": 4})).key("a"),
        Job::new(json!({"n": 5})).delay(Duration::from_secs(3600)),
    ];
    let done = q.enqueue_many_with_status(jobs).await.unwrap();
    assert_eq!(done.len(), 6);
    let dup: Vec<bool> = done.iter().map(|e| e.duplicate).collect();
    assert_eq!(dup, [false, false, true, false, true, false]);
    assert_eq!(done[2].id, held);
    assert_eq!(done[4].id, done[1].id);
    let new: Vec<JobId> = [0, 1, 3, 5].iter().map(|&i| done[i].id).collect();
    assert!(new.windows(2).all(|w| w[0] < w[1]), "{new:?}");
    assert!(new[0] > held);
    for i in [0, 1, 3, 5] {
        let job = q.job(done[i].id).await.unwrap().unwrap();
        assert_eq!(job.payload, json!({ "n": i }), "job {i}");
    }
    let three = q.job(done[3].id).await.unwrap().unwrap();
    assert_eq!((three.priority, three.max_attempts), (-1, 2));
    assert_eq!(
        q.job(done[1].id).await.unwrap().unwrap().key.as_deref(),
        Some("a")
    );
    assert_eq!(
        q.job(done[5].id).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.scheduled), (4, 1));
    // Again, the same keys: all duplicates now; the keyless job is new.
    let again = q
        .enqueue_many_with_status([
            Job::new(json!({})).key("a"),
            Job::new(json!({})),
            Job::new(json!({})).key("held"),
        ])
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|e| (e.id, e.duplicate))
            .collect::<Vec<_>>()[..],
        [(done[1].id, true), (again[1].id, false), (held, true)]
    );
    assert!(q.enqueue_many(Vec::new()).await.unwrap().is_empty());
    // Every job with the same priority, attempts and delay: each keeps them.
    let same = q
        .enqueue_many((0..3).map(|_| {
            Job::new(json!({}))
                .priority(4)
                .max_attempts(3)
                .delay(Duration::from_secs(60))
        }))
        .await
        .unwrap();
    for id in same {
        let job = q.job(id).await.unwrap().unwrap();
        assert_eq!(
            (job.priority, job.max_attempts, job.state),
            (4, 3, JobState::Scheduled)
        );
    }
}

/// A bad job anywhere in the call stores nothing, and the error names it.
async fn a_bad_job_in_enqueue_many_stores_nothing(q: Queue) {
    let mut jobs: Vec<Job> = (0..2_000).map(|n| Job::new(json!({ "n": n }))).collect();
    jobs.push(Job::new(json!({"bad": "nul\u{0}"})));
    let err = q.enqueue_many(jobs).await.unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err}");
    assert!(err.to_string().contains("job 2000 of 2001"), "{err}");
    let err = q
        .enqueue_many([Job::new(json!({})), Job::new(json!({})).key("")])
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err}");
    assert_eq!(q.stats().await.unwrap(), Stats::default());
}

/// 10k jobs in one call (more than one statement's worth) are all stored and claimable, each
/// once.
async fn ten_thousand_jobs_in_one_call_are_all_claimable(q: Queue) {
    let n = 10_050;
    let ids = q
        .enqueue_many((0..n).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    assert_eq!(ids.len(), n);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let mut claimed = HashSet::new();
    loop {
        let batch = q
            .protocol()
            .claim("w", 1_000, Duration::from_secs(60), &[])
            .await
            .unwrap();
        if batch.is_empty() {
            break;
        }
        for job in batch {
            let i = job.payload["n"].as_u64().unwrap() as usize;
            assert_eq!(job.id, ids[i], "job {i}");
            assert!(claimed.insert(job.id));
        }
    }
    assert_eq!(claimed.len(), n);
}

/// Keys with a uniqueness window keep the per-job semantics in a bulk call, in order: a plain
/// key finds the holder, a window that ran out makes a new job, which the next plain key
/// finds.
async fn enqueue_many_keeps_uniqueness_windows(q: Queue) {
    let window = Duration::from_millis(200);
    let old = q
        .enqueue(Job::new(json!({})).key("w").unique_for(window))
        .await
        .unwrap();
    sleep(window + Duration::from_millis(100)).await;
    let done = q
        .enqueue_many_with_status([
            Job::new(json!({"n": 0})).key("w"),
            Job::new(json!({"n": 1})),
            Job::new(json!({"n": 2})).key("w").unique_for(window),
            Job::new(json!({"n": 3})).key("w"),
            Job::new(json!({"n": 4})).key("w").unique_for(window),
            Job::new(json!({"n": 5})),
        ])
        .await
        .unwrap();
    let got: Vec<(JobId, bool)> = done.iter().map(|e| (e.id, e.duplicate)).collect();
    assert_eq!(
        got[0],
        (old, true),
        "the old job holds the key until released"
    );
    assert!(
        !got[2].1 && got[2].0 != old,
        "the window ran out: a new job"
    );
    assert_eq!(got[3], (got[2].0, true));
    assert_eq!(got[4], (got[2].0, true), "within the new job's window");
    assert!(got[1].0 < got[2].0 && got[2].0 < got[5].0, "{got:?}");
    assert_eq!(q.stats().await.unwrap().ready, 4);
}

/// `enqueue_many_in`: in the caller's transaction, gone if it rolls back.
async fn enqueue_many_in_follows_the_caller_s_transaction(q: Queue) {
    match (q.postgres_pool().cloned(), q.mysql_pool().cloned()) {
        (Some(pool), _) => enqueue_many_in_transactions(&q, &pool).await,
        (_, Some(pool)) => enqueue_many_in_transactions(&q, &pool).await,
        (None, None) => panic!("a queue on neither database"),
    }
}

async fn enqueue_many_in_transactions<DB: sqlx::Database>(q: &Queue, pool: &sqlx::Pool<DB>)
where
    for<'c> &'c mut sqlx::Transaction<'static, DB>: Into<Executor<'c>>,
{
    let jobs = || (0..50).map(|n| Job::new(json!({ "n": n })).key(format!("k{n}")));
    let mut tx = pool.begin().await.unwrap();
    q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 0);
    let mut tx = pool.begin().await.unwrap();
    let first = q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    let again = q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    tx.commit().await.unwrap();
    assert!(first.iter().all(|e| !e.duplicate));
    assert!(
        again
            .iter()
            .zip(&first)
            .all(|(a, f)| a.duplicate && a.id == f.id)
    );
    assert_eq!(waiting(q.stats().await.unwrap()), 50);
}

/// Concurrent bulk enqueues of the same keys: one job per key, and every call gets its id.
async fn concurrent_bulk_enqueues_of_the_same_keys_make_one_job_each(q: Queue) {
    let tasks = (0..4).map(|_| {
        let q = q.clone();
        tokio::spawn(async move {
            q.enqueue_many((0..300).map(|n| Job::new(json!({})).key(format!("k{n}"))))
                .await
                .unwrap()
        })
    });
    let all: Vec<Vec<JobId>> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(all.iter().all(|ids| ids == &all[0]));
    assert_eq!(all[0].iter().collect::<HashSet<_>>().len(), 300);
    assert_eq!(q.stats().await.unwrap().ready, 300);
}

/// An acknowledgement, or a hand-back, and a heartbeat of the same leases, sent at once from
/// two connections, never deadlock, and neither waits long for the other. PostgreSQL would
/// break a cycle after `deadlock_timeout` (1 s), failing one of them: there all lock the
/// leases in (segment, id) order, and the jobs of each round span three lease segments.
/// MariaDB detects a cycle at once and fails one: there each statement finds and locks its
/// rows through the primary key, in id order (it deadlocked in 6 runs of 10 when the
/// acknowledgement went through the lease index). The two statements name the jobs in
/// opposite orders.
async fn an_acknowledgement_or_a_hand_back_and_a_heartbeat_of_the_same_jobs_never_deadlock(
    q: Queue,
) {
    let lease = Duration::from_secs(30);
    for round in 0..40 {
        q.enqueue_many((0..250).map(|n| Job::new(json!({ "n": n }))))
            .await
            .unwrap();
        let claimed = q.protocol().claim("w", 250, lease, &[]).await.unwrap();
        assert_eq!(claimed.len(), 250);
        let mut jobs: Vec<(JobId, i32)> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
        assert_eq!(
            q.protocol().confirm_started(&jobs).await.unwrap().len(),
            250
        );
        // The ending statement names the jobs newest first, the heartbeat oldest first; which
        // statement comes first alternates, and so does the ending one.
        jobs.sort();
        let beat = jobs.clone();
        jobs.reverse();
        let (ending, hand_back) = if round % 4 < 2 {
            ("acknowledgement", false)
        } else {
            ("hand-back", true)
        };
        let end = || async {
            if hand_back {
                q.protocol().hand_back(&jobs).await
            } else {
                q.protocol().complete(&jobs).await
            }
        };
        let started = Instant::now();
        let (beaten, ended) = if round % 2 == 0 {
            tokio::join!(q.protocol().heartbeat(&beat, lease), end())
        } else {
            let (ended, beaten) = tokio::join!(end(), q.protocol().heartbeat(&beat, lease));
            (beaten, ended)
        };
        let beaten = beaten.unwrap_or_else(|e| panic!("round {round}: heartbeat: {e}"));
        let ended = ended.unwrap_or_else(|e| panic!("round {round}: {ending}: {e}"));
        assert_eq!(ended, 250, "round {round}: {ending}");
        // Whichever came first, the heartbeat extended only jobs it named.
        assert!(
            beaten
                .iter()
                .all(|id| beat.iter().any(|(job, _)| job == id)),
            "round {round}: {beaten:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "round {round}: the {ending} and the heartbeat waited {:?}",
            started.elapsed()
        );
    }
    assert_eq!(q.stats().await.unwrap().running, 0);
}

/// Declares each case twice, as a test on PostgreSQL and one on MariaDB, each with a fresh
/// queue (a schema or database of its own): they run in parallel, and a failure names its
/// database.
macro_rules! on_both_databases {
    ($($case:ident),* $(,)?) => {
        mod postgres {
            $(#[tokio::test]
            async fn $case() {
                let (_schema, q) = super::queue("q").await;
                super::$case(q).await;
            })*
        }
        mod mariadb {
            $(#[tokio::test]
            async fn $case() {
                let (_database, q) = super::my_queue("q").await;
                super::$case(q).await;
            })*
        }
    };
}

on_both_databases!(
    lifecycle_enqueue_work_done,
    pruning_one_queue_leaves_the_other_queues_history,
    a_failing_job_dies_after_exactly_max_attempts,
    dead_letters_can_be_purged,
    an_idempotency_key_returns_the_existing_job,
    an_enqueue_in_a_rolled_back_transaction_leaves_no_job,
    a_late_completion_after_a_rescue_is_rejected,
    concurrent_claimers_get_disjoint_batches_of_at_most_n,
    a_long_job_is_kept_by_heartbeats_not_rescued,
    a_hung_handler_is_failed_by_the_execution_timeout,
    a_panicking_handler_is_recorded_as_a_failure,
    graceful_shutdown_finishes_in_flight_jobs_and_hands_back_the_rest,
    priorities_and_delays_order_the_claims,
    dropping_the_run_future_stops_its_handlers,
    jobs_can_be_shown_listed_cancelled_and_pruned,
    cancelling_a_running_job_stops_its_handler_and_keeps_it_cancelled,
    an_idempotency_key_can_be_unique_for_a_window,
    one_worker_claims_from_several_queues,
    a_handler_asked_to_stop_at_the_timeout_still_times_out,
    at_the_end_of_the_grace_handlers_are_asked_to_stop,
    long_jobs_are_not_prefetched_away_from_an_idle_worker,
    prefetched_short_jobs_each_run_once,
    short_jobs_are_claimed_beyond_the_concurrency_by_default,
    enqueue_many_returns_ids_in_input_order,
    a_bad_job_in_enqueue_many_stores_nothing,
    ten_thousand_jobs_in_one_call_are_all_claimable,
    enqueue_many_keeps_uniqueness_windows,
    enqueue_many_in_follows_the_caller_s_transaction,
    concurrent_bulk_enqueues_of_the_same_keys_make_one_job_each,
    an_acknowledgement_or_a_hand_back_and_a_heartbeat_of_the_same_jobs_never_deadlock,
    keys_and_queue_names_differing_in_case_accent_or_space_are_distinct,
);

/// A connection of the other database is a typed configuration error, not a panic.
#[tokio::test]
async fn enqueue_in_with_the_other_database_s_connection_is_a_config_error() {
    let (_s, pg) = queue("q").await;
    let (_d, my) = my_queue("q").await;
    let mut my_conn = my.mysql_pool().unwrap().acquire().await.unwrap();
    let err = pg
        .enqueue_in(&mut my_conn, Job::new(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );
    let mut pg_conn = pg.postgres_pool().unwrap().acquire().await.unwrap();
    let err = my
        .enqueue_in(&mut pg_conn, Job::new(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );
}

/// `queue::connect` opens and migrates a queue from a postgres://, mysql:// or mariadb:// URL.
#[tokio::test]
async fn connect_opens_a_migrated_queue_from_a_url_on_both_databases() {
    let schema = PgSchema::new("q");
    let options = ConnectOptions::default().queue("q").max_connections(2);
    let pg = lockwise::queue::connect(schema.url(), options.clone().schema(schema.name()))
        .await
        .unwrap();
    assert!(pg.postgres_pool().is_some());
    let id = pg.enqueue(Job::new(json!({}))).await.unwrap();
    assert_eq!(waiting(pg.stats().await.unwrap()), 1);
    let claimed = pg
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);

    let db = MysqlDatabase::mysql("q");
    for url in [db.url(), db.url().replacen("mysql://", "mariadb://", 1)] {
        let my = lockwise::queue::connect(&url, options.clone())
            .await
            .unwrap();
        assert!(my.mysql_pool().is_some(), "{url}");
        my.enqueue(Job::new(json!({})).key("once")).await.unwrap();
        assert_eq!(waiting(my.stats().await.unwrap()), 1, "{url}");
    }
}

/// A malformed URL, another scheme or a bad schema is a configuration error; a server that
/// does not answer is a backend error within seconds, and no message shows the password.
#[tokio::test]
async fn connect_gives_typed_errors_without_the_password() {
    let options = ConnectOptions::default();
    for url in [
        "not a url",
        "redis://127.0.0.1/",
        "file:///tmp/x",
        "postgres://",
    ] {
        let err = lockwise::queue::connect(url, options.clone())
            .await
            .unwrap_err();
        assert!(
            matches!(err, lockwise::Error::InvalidConfig { .. }),
            "{url}: {err}"
        );
    }
    let err = lockwise::queue::connect(
        &lockwise_testkit::postgres_url(),
        options.clone().schema("Not A Schema"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );

    let port = lockwise_testkit::closed_port();
    for url in [
        format!("postgres://postgres:pw-secret@127.0.0.1:{port}/test"),
        format!("mysql://root:pw-secret@127.0.0.1:{port}/test"),
    ] {
        let start = Instant::now();
        let err = lockwise::queue::connect(&url, options.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, lockwise::Error::Backend { .. }), "{err}");
        assert!(err.is_transient());
        assert!(!format!("{err} {err:?}").contains("pw-secret"), "{err:?}");
        assert!(
            start.elapsed() < Duration::from_secs(6),
            "{:?}",
            start.elapsed()
        );
    }
}

/// `ConnectOptions::migrate(false)` creates nothing: a missing store is `NotMigrated` (and
/// still missing afterwards), an older one is `NotMigrated { outdated: true }`, and a migrated
/// one opens and answers.
#[tokio::test]
async fn connect_without_migrating_creates_nothing_on_both_databases() {
    use lockwise::Error;
    let not_migrated = |r: lockwise::Result<Queue>| match r {
        Err(Error::NotMigrated { outdated, .. }) => outdated,
        other => panic!("expected NotMigrated, got {other:?}"),
    };
    let options = ConnectOptions::default()
        .queue("q")
        .max_connections(2)
        .migrate(false);

    let schema = PgSchema::new("q");
    let pg_options = options.clone().schema(schema.name());
    let pool = PgPoolOptions::new().connect(schema.url()).await.unwrap();
    let schemas = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1";
    for _ in 0..2 {
        let err = lockwise::queue::connect(schema.url(), pg_options.clone()).await;
        assert!(!not_migrated(err));
        let n: i64 = sqlx::query_scalar(schemas)
            .bind(schema.name())
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "the schema was not created");
    }
    let old = format!(
        "CREATE SCHEMA \"{0}\"; CREATE TABLE \"{0}\".queue_migrations (version integer); \
         INSERT INTO \"{0}\".queue_migrations VALUES (1)",
        schema.name()
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let err = lockwise::queue::connect(schema.url(), pg_options.clone()).await;
    assert!(not_migrated(err), "version 1 of 2 is outdated");

    let db = MysqlDatabase::mysql("q");
    let my_pool = sqlx::mysql::MySqlPoolOptions::new()
        .connect(&db.url())
        .await
        .unwrap();
    let tables = "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.tables \
                  WHERE table_schema = DATABASE()";
    for _ in 0..2 {
        let err = lockwise::queue::connect(&db.url(), options.clone()).await;
        assert!(!not_migrated(err));
        let n: i64 = sqlx::query_scalar(tables)
            .fetch_one(&my_pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "no table was created");
    }
    sqlx::raw_sql("CREATE TABLE lockwise_jobs (id BIGINT PRIMARY KEY)")
        .execute(&my_pool)
        .await
        .unwrap();
    let err = lockwise::queue::connect(&db.url(), options.clone()).await;
    assert!(not_migrated(err), "a table without `started` is outdated");
    sqlx::raw_sql("DROP TABLE lockwise_jobs")
        .execute(&my_pool)
        .await
        .unwrap();

    // Once migrated, both open without migrating.
    let migrated = ConnectOptions::default().queue("q").max_connections(2);
    lockwise::queue::connect(&db.url(), migrated.clone())
        .await
        .unwrap();
    let my = lockwise::queue::connect(&db.url(), options.clone())
        .await
        .unwrap();
    assert_eq!(waiting(my.stats().await.unwrap()), 0);
    let other = PgSchema::new("q");
    lockwise::queue::connect(other.url(), migrated.schema(other.name()))
        .await
        .unwrap();
    let pg = lockwise::queue::connect(other.url(), options.schema(other.name()))
        .await
        .unwrap();
    assert_eq!(waiting(pg.stats().await.unwrap()), 0);
}

/// A schema at version 2 (as an older lockwise left it) with jobs in every state migrates to
/// the current version with its jobs carried over: a running job's worker still completes it,
/// and the new states work.
#[tokio::test]
async fn a_version_2_schema_migrates_with_its_jobs_in_flight() {
    let schema = PgSchema::new("q");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(schema.url())
        .await
        .unwrap();
    let quoted = format!("\"{}\"", schema.name());
    let fill = |sql: &str| {
        sql.replace("{schema}", &quoted)
            .replace("{channel}", "x_jobs")
    };
    let old = format!(
        "{}\n{}\nCREATE TABLE {quoted}.queue_migrations (version integer PRIMARY KEY);\n\
         INSERT INTO {quoted}.queue_migrations VALUES (1), (2);\n\
         INSERT INTO {quoted}.jobs (queue, payload, state, attempt, lease_until, worker)\n\
         VALUES ('q', '{{\"n\": 1}}', 'running', 1, now() + interval '30 seconds', 'old'),\n\
                ('q', '{{\"n\": 2}}', 'available', 0, NULL, NULL),\n\
                ('q', '{{\"n\": 3}}', 'dead', 5, NULL, NULL)",
        fill(include_str!("../sql/postgres/queue/v1.sql")),
        fill(include_str!("../sql/postgres/queue/v2.sql")),
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let options = ConnectOptions::default().queue("q").schema(schema.name());
    let outdated = lockwise::queue::connect(schema.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(schema.url(), options)
        .await
        .unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM {quoted}.all_jobs ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let (running, ready, dead) = (JobId(ids[0]), JobId(ids[1]), JobId(ids[2]));
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.running, stats.dead), (1, 1, 1));
    // The old worker's execution still owns its job and completes it.
    assert_eq!(
        q.protocol()
            .heartbeat(&[(running, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![running]
    );
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    // The new state exists, and the dead letter can still be retried.
    assert!(q.cancel(ready).await.unwrap());
    assert_eq!(
        q.job(ready).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(q.retry(dead).await.unwrap());
    let version: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT max(version) FROM {quoted}.queue_migrations"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(version, 10);
}

/// MariaDB tables of version 2 with jobs in flight migrate to the current version: the running
/// job still completes, and the version-3 features (cancel, key windows) work.
#[tokio::test]
async fn mariadb_tables_of_version_2_migrate_with_their_jobs_in_flight() {
    let db = MysqlDatabase::mysql("q");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&db.url())
        .await
        .unwrap();
    let fill = |sql: &str| sql.replace("{jobs}", "lockwise_jobs");
    for sql in [
        fill(include_str!("../sql/mysql/queue/v1.sql")),
        fill(include_str!("../sql/mysql/queue/v2.sql")),
        "INSERT INTO lockwise_jobs (queue, payload, state, attempt, lease_until, worker, \
         idempotency_key) VALUES \
         ('q', '{}', 'running', 1, NOW(6) + INTERVAL 30 SECOND, 'old', NULL), \
         ('q', '{}', 'available', 0, NULL, NULL, 'k')"
            .to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let options = ConnectOptions::default().queue("q");
    let outdated = lockwise::queue::connect(&db.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(&db.url(), options).await.unwrap();
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT CAST(id AS SIGNED) FROM lockwise_jobs ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let (running, keyed) = (JobId(ids[0]), JobId(ids[1]));
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    let same = q
        .enqueue_with_status(Job::new(json!({})).key("k"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (keyed, true));
    let fresh = q
        .enqueue_with_status(Job::new(json!({})).key("k").unique_for(Duration::ZERO))
        .await
        .unwrap();
    assert!(!fresh.duplicate);
    assert!(q.cancel(fresh.id).await.unwrap());
}

/// Tables of version 3, in the server's default case- and accent-insensitive collation, move to
/// the binary collation of version 4 with every job kept: the keyed job still holds its exact
/// key (and only it), a job in flight still completes, and text outside latin1 is unchanged.
#[tokio::test]
async fn mariadb_tables_of_version_3_migrate_to_exact_keys_with_their_jobs() {
    let db = MysqlDatabase::mysql("q");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&db.url())
        .await
        .unwrap();
    let fill = |sql: &str| sql.replace("{jobs}", "lockwise_jobs");
    for sql in [
        fill(include_str!("../sql/mysql/queue/v1.sql")),
        fill(include_str!("../sql/mysql/queue/v2.sql")),
        fill(include_str!("../sql/mysql/queue/v3.sql")),
        "ALTER TABLE lockwise_jobs CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            .to_owned(),
        "INSERT INTO lockwise_jobs (queue, payload, state, attempt, lease_until, worker, \
         idempotency_key) VALUES \
         ('q', '{\"v\": \"r\u{e9}sum\u{e9} \u{65e5}\u{672c} \u{1f512}\"}', 'running', 1, \
          NOW(6) + INTERVAL 30 SECOND, 'old', NULL), \
         ('q', '{}', 'available', 0, NULL, NULL, 'Abc')"
            .to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let options = ConnectOptions::default().queue("q");
    let outdated = lockwise::queue::connect(&db.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(&db.url(), options.clone())
        .await
        .unwrap();
    let collations: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT collation_name FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'lockwise_jobs' \
         AND collation_name IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(collations, vec!["utf8mb4_nopad_bin".to_owned()]);
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT CAST(id AS SIGNED) FROM lockwise_jobs ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let (running, keyed) = (JobId(ids[0]), JobId(ids[1]));
    let job = q.job(running).await.unwrap().unwrap();
    assert_eq!(
        job.payload,
        json!({"v": "r\u{e9}sum\u{e9} \u{65e5}\u{672c} \u{1f512}"})
    );
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    let same = q
        .enqueue_with_status(Job::new(json!({})).key("Abc"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (keyed, true));
    for other in ["abc", "Abc ", "ABC"] {
        let new = q
            .enqueue_with_status(Job::new(json!({})).key(other))
            .await
            .unwrap();
        assert!(!new.duplicate, "{other:?} was taken for Abc");
    }
    // Migrated once: a second connect sees the latest version and changes nothing.
    lockwise::queue::connect(&db.url(), options.migrate(false))
        .await
        .unwrap();
}

/// A payload larger than a statement can carry on the server is refused before anything is
/// sent (`InvalidJob`, naming `max_allowed_packet`), alone or among other jobs, and nothing of
/// the call is stored; the connection stays usable.
#[tokio::test]
async fn a_payload_over_max_allowed_packet_is_refused_before_anything_is_stored() {
    let (_db, q) = my_queue("q").await;
    let packet: u64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS UNSIGNED)")
        .fetch_one(q.mysql_pool().unwrap())
        .await
        .unwrap();
    let huge = json!({"blob": "x".repeat(usize::try_from(packet).unwrap())});
    let err = q.enqueue(Job::new(huge.clone())).await.unwrap_err();
    assert!(
        matches!(&err, lockwise::Error::InvalidJob { reason } if reason.contains("max_allowed_packet")),
        "{err:?}"
    );
    assert!(err.is_invalid_input());
    let err = q
        .enqueue_many([Job::new(json!({"small": 1})), Job::new(huge)])
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err:?}");
    assert_eq!(waiting(q.stats().await.unwrap()), 0, "nothing stored");
    // Just under the limit goes, alone.
    let limit = usize::try_from(packet).unwrap() - (16 << 10);
    let fits = json!({"blob": "x".repeat(limit - 20)});
    assert!(fits.to_string().len() <= limit);
    q.enqueue(Job::new(fits)).await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 1);
}

/// The MariaDB reaper never waits for a worker's statement on a job: an expired lease that a
/// heartbeat or an acknowledgement in flight holds (here a transaction that locks the row as
/// they do) is left to that statement, the other expired leases are rescued at once, and the
/// one left is rescued at the next round. Before, the reaper's UPDATE waited for the row (up
/// to `innodb_lock_wait_timeout`, 50 s) and could deadlock with an acknowledgement, which
/// locks its rows in id order where the reaper went in lease order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_reaper_skips_a_lease_a_worker_holds_and_rescues_the_rest() {
    let (_db, q) = my_queue("reapskip").await;
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
    let pool = q.mysql_pool().unwrap().clone();
    let mut heartbeat = pool.begin().await.unwrap();
    let locked: Vec<u64> =
        sqlx::query_scalar("SELECT id FROM lockwise_jobs WHERE id = ? FOR UPDATE")
            .bind(held_id.0)
            .fetch_all(&mut *heartbeat)
            .await
            .unwrap();
    assert_eq!(locked, vec![held_id.0 as u64], "the job is there");
    let reaped = tokio::time::timeout(Duration::from_secs(5), q.protocol().reap()).await;
    let state = |id| {
        let q = q.clone();
        async move { q.job(id).await.unwrap().unwrap().state }
    };
    let (free, held) = (state(free_id).await, state(held_id).await);
    heartbeat.rollback().await.unwrap();
    let reaped = reaped
        .expect("the reaper waited for the lease a heartbeat holds")
        .unwrap();
    assert_eq!(reaped, 1, "the lease nobody holds is rescued");
    assert_eq!(free, JobState::Ready);
    assert_eq!(held, JobState::Running);
    assert_eq!(
        q.protocol().reap().await.unwrap(),
        1,
        "rescued at the next round"
    );
    assert_eq!(state(held_id).await, JobState::Ready);
}

/// Each MariaDB database's queue has a reaper lock of its own: while another database's
/// reaper holds its lock (mid-round), this one still rescues its expired leases; while this
/// queue's own lock is held, it skips its round. (The lock was once named after the table
/// alone, which every database's `lockwise_jobs` shared.)
#[tokio::test]
async fn mariadb_reapers_of_two_databases_do_not_share_a_lock() {
    let (_a, mine) = my_queue("reap_a").await;
    let (_b, other) = my_queue("reap_b").await;
    let id = mine.enqueue(Job::new(json!({}))).await.unwrap();
    let claimed = mine
        .protocol()
        .claim("w", 1, Duration::from_millis(200), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);
    sleep(Duration::from_millis(400)).await;
    // reap.sql's lock name, on a session of the given queue's database.
    let hold = |q: &Queue| {
        let pool = q.mysql_pool().unwrap().clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            let got: Option<i64> = sqlx::query_scalar(
                "SELECT GET_LOCK(CONCAT('lockwise:', MD5(CONCAT_WS('.', DATABASE(), \
                 'lockwise_jobs:reaper'))), 0)",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            assert_eq!(got, Some(1));
            conn
        }
    };
    let mut own = hold(&mine).await;
    assert_eq!(
        mine.protocol().reap().await.unwrap(),
        0,
        "its own reaper lock is held"
    );
    sqlx::query("DO RELEASE_ALL_LOCKS()")
        .execute(&mut *own)
        .await
        .unwrap();
    let _theirs = hold(&other).await;
    assert_eq!(
        mine.protocol().reap().await.unwrap(),
        1,
        "another database's reaper does not stop this one"
    );
}
