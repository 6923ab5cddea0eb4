//! The PostgreSQL job queue. Every test works in a schema of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lockwise::queue::{Job, JobContext, JobId, JobStore, MysqlQueue, Queue, Worker};
use lockwise_testkit::{MysqlDatabase, PgSchema};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

async fn my_queue(label: &str) -> (MysqlDatabase, MysqlQueue) {
    let db = MysqlDatabase::mysql(label);
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(20)
        .connect(&db.url())
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    let q = MysqlQueue::new(pool, "q");
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

/// Runs `worker` until `until` holds (checked every 20 ms) or `limit` passes; then shuts down.
async fn run_until<Q: JobStore, H, Fut>(
    worker: Worker<Q>,
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

struct StatsAre<Q: JobStore, F: Fn(lockwise::queue::Stats) -> bool>(Q, F);

impl<Q: JobStore, F: Fn(lockwise::queue::Stats) -> bool> AsyncCheck for StatsAre<Q, F> {
    async fn check(&self) -> bool {
        (self.1)(self.0.stats().await.unwrap())
    }
}

fn fast<Q: JobStore>(q: &Q) -> Worker<Q> {
    Worker::new(q.clone())
        .poll_interval(Duration::from_millis(50))
        .backoff(Duration::from_millis(10), Duration::from_millis(20))
        .grace(Duration::from_secs(2))
}

/// On an ANALYZEd table of 10k rows the claim uses the claim index, with the LIMIT applied
/// (under LockRows) before the update.
#[tokio::test]
async fn the_claim_plan_uses_the_index_and_limits_before_updating() {
    let (s, q) = queue("plan").await;
    q.enqueue_many((0..10_000).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let schema = s.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {schema}.jobs")))
        .execute(q.pool())
        .await
        .unwrap();
    let claim =
        include_str!("../sql/postgres/queue/claim.sql").replace("{schema}", &format!("\"{schema}\""));
    let mut tx = q.pool().begin().await.unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {claim}"
    )))
    .bind("q")
    .bind(10i64)
    .bind(30.0f64)
    .bind("w")
    .bind(Vec::<i64>::new())
    .bind(Vec::<i32>::new())
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let text = plan.to_string();
    assert!(text.contains("\"Index Name\":\"jobs_claim\""), "{text}");
    // The CTE `next` is a Limit over LockRows over the index scan: rows are locked one by
    // one as the limit pulls them, and it stops after n — then the update joins those.
    let ctes: Vec<&serde_json::Value> = find(&plan, &|n| n["Subplan Name"] == "CTE next");
    assert_eq!(ctes.len(), 1, "{text}");
    assert_eq!(ctes[0]["Node Type"], "Limit", "{text}");
    let lock_rows = &ctes[0]["Plans"][0];
    assert_eq!(lock_rows["Node Type"], "LockRows", "{text}");
    assert_eq!(lock_rows["Plans"][0]["Index Name"], "jobs_claim", "{text}");
    assert!(text.find("\"Node Type\":\"ModifyTable\"").is_some());
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

/// The suite both stores pass: the same API on PostgreSQL and on MariaDB.
macro_rules! suite {
    ($module:ident, $setup:ident) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn lifecycle_enqueue_work_done() {
                let (_s, q) = $setup("life").await;
                let ids: Vec<JobId> = q
                    .enqueue_many((0..20).map(|i| Job::new(json!({ "n": i }))))
                    .await
                    .unwrap();
                assert_eq!(ids.len(), 20);
                assert_eq!(q.stats().await.unwrap().pending, 20);
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
                    (stats.pending, stats.running, stats.done, stats.dead),
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

            #[tokio::test]
            async fn a_failing_job_dies_after_exactly_max_attempts() {
                let (_s, q) = $setup("retry").await;
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
                assert_eq!(dead[0].attempts, 3);
                assert_eq!(dead[0].last_error.as_deref(), Some("boom on attempt 3"));
                assert_eq!(
                    dead[0].errors.as_array().unwrap().len(),
                    3,
                    "the history of every attempt"
                );

                // Retried with a fresh budget, it runs again; purged, it is gone.
                assert!(q.retry(id).await.unwrap());
                assert_eq!(q.stats().await.unwrap().pending, 1);
                assert!(!q.retry(JobId(id.0 + 1_000_000)).await.unwrap());
            }

            #[tokio::test]
            async fn dead_letters_can_be_purged() {
                let (_s, q) = $setup("purge").await;
                q.enqueue(Job::new(json!({})).max_attempts(1))
                    .await
                    .unwrap();
                let claimed = q.claim("t", 1, Duration::from_secs(30), &[]).await.unwrap();
                assert!(
                    q.fail(claimed[0].id, 1, "no", Duration::ZERO, false)
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

            #[tokio::test]
            async fn an_idempotency_key_returns_the_existing_job() {
                let (_s, q) = $setup("dedupe").await;
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
                assert_eq!(q.stats().await.unwrap().pending, 2);
            }

            #[tokio::test]
            async fn an_enqueue_in_a_rolled_back_transaction_leaves_no_job() {
                let (_s, q) = $setup("tx").await;
                let mut tx = q.pool().begin().await.unwrap();
                q.enqueue_in(&mut tx, Job::new(json!({}))).await.unwrap();
                tx.rollback().await.unwrap();
                assert_eq!(q.stats().await.unwrap().pending, 0);
                let mut tx = q.pool().begin().await.unwrap();
                q.enqueue_in(&mut tx, Job::new(json!({}))).await.unwrap();
                tx.commit().await.unwrap();
                assert_eq!(q.stats().await.unwrap().pending, 1);
            }

            /// A worker whose job was rescued and claimed again cannot complete (or fail) it late.
            #[tokio::test]
            async fn a_late_completion_after_a_rescue_is_rejected() {
                let (_s, q) = $setup("late").await;
                let id = q.enqueue(Job::new(json!({}))).await.unwrap();
                let first = q.claim("w1", 1, Duration::from_secs(1), &[]).await.unwrap();
                assert_eq!((first[0].id, first[0].attempt), (id, 1));
                sleep(Duration::from_millis(1_200)).await;
                assert_eq!(q.reap().await.unwrap(), 1, "the expired lease was rescued");
                let second = q
                    .claim("w2", 1, Duration::from_secs(30), &[])
                    .await
                    .unwrap();
                assert_eq!(second[0].attempt, 2);
                assert_eq!(
                    q.complete(&[(id, 1)]).await.unwrap(),
                    0,
                    "w1's late completion is rejected"
                );
                assert!(!q.fail(id, 1, "late", Duration::ZERO, false).await.unwrap());
                assert_eq!(q.complete(&[(id, 2)]).await.unwrap(), 1);
                let stats = q.stats().await.unwrap();
                assert_eq!((stats.done, stats.running), (1, 0));
            }

            /// Eight concurrent claimers never get more than n rows each nor the same row twice.
            #[tokio::test]
            async fn concurrent_claimers_get_disjoint_batches_of_at_most_n() {
                let (_s, q) = $setup("claimers").await;
                q.enqueue_many((0..400).map(|i| Job::new(json!({ "n": i }))))
                    .await
                    .unwrap();
                let claimers = (0..8).map(|w| {
                    let q = q.clone();
                    tokio::spawn(async move {
                        let mut mine = Vec::new();
                        loop {
                            let batch = q
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

            /// A job that runs three times its lease while its worker lives is done once, never rescued.
            #[tokio::test]
            async fn a_long_job_is_kept_by_heartbeats_not_rescued() {
                let (_s, q) = $setup("long").await;
                q.enqueue(Job::new(json!({}))).await.unwrap();
                let calls = Arc::new(AtomicU32::new(0));
                let c2 = calls.clone();
                let long = tokio::spawn(run_until(
                    fast(&q).lease(Duration::from_secs(1)),
                    move |_job| {
                        let calls = c2.clone();
                        async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            sleep(Duration::from_secs(3)).await;
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
                let other = tokio::spawn(fast(&q).lease(Duration::from_secs(1)).run(
                    |_job| async { Err::<(), _>("the rescuer must never get this job".to_owned()) },
                    stop.clone(),
                ));
                long.await.unwrap();
                stop.cancel();
                let report = other.await.unwrap().unwrap();
                assert_eq!(report.failed, 0, "the other worker never got the job");
                assert_eq!(calls.load(Ordering::SeqCst), 1);
            }

            #[tokio::test]
            async fn a_hung_handler_is_failed_by_the_execution_timeout() {
                let (_s, q) = $setup("hung").await;
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

            #[tokio::test]
            async fn a_panicking_handler_is_recorded_as_a_failure() {
                let (_s, q) = $setup("panic").await;
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

            #[tokio::test]
            async fn graceful_shutdown_finishes_in_flight_jobs_and_hands_back_the_rest() {
                let (_s, q) = $setup("shutdown").await;
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
                assert_eq!((stats.done, stats.pending, stats.running), (1, 1, 0));
                // The handed-back job keeps its budget: it can still run once more.
                let again = q.claim("w", 1, Duration::from_secs(30), &[]).await.unwrap();
                assert_eq!(again.len(), 1);
                assert!(again[0].attempt <= again[0].max_attempts);
            }

            #[tokio::test]
            async fn priorities_and_delays_order_the_claims() {
                let (_s, q) = $setup("order").await;
                let low = q.enqueue(Job::new(json!({})).priority(5)).await.unwrap();
                let high = q.enqueue(Job::new(json!({})).priority(-1)).await.unwrap();
                let later = q
                    .enqueue(Job::new(json!({})).delay(Duration::from_secs(3600)))
                    .await
                    .unwrap();
                let normal = q.enqueue(Job::new(json!({}))).await.unwrap();
                let claimed: Vec<JobId> = q
                    .claim("w", 10, Duration::from_secs(30), &[])
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|j| j.id)
                    .collect();
                assert_eq!(claimed, vec![high, normal, low]);
                assert!(!claimed.contains(&later));
                let stats = q.stats().await.unwrap();
                assert_eq!((stats.pending, stats.scheduled, stats.running), (1, 1, 3));
                // Acknowledged through the next claim, in the same statement.
                let acks: Vec<(JobId, i32)> = claimed.iter().map(|id| (*id, 1)).collect();
                assert!(
                    q.claim("w", 10, Duration::from_secs(30), &acks)
                        .await
                        .unwrap()
                        .is_empty()
                );
                assert_eq!(q.stats().await.unwrap().done, 3);
                assert_eq!(q.prune_done(Duration::ZERO).await.unwrap(), 3);
            }

        }
    };
}

suite!(postgres, queue);
suite!(mariadb, my_queue);
