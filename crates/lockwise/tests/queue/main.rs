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
use lockwise_testkit::{MysqlDatabase, PgBouncer, PgSchema, PoolMode};
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

/// A queue whose pool goes through a private PgBouncer in transaction pooling mode.
async fn bounced_queue(label: &str) -> (PgBouncer, PgSchema, Queue) {
    let bouncer = PgBouncer::start(PoolMode::Transaction);
    let schema = PgSchema::new(label);
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect(&bouncer.url_of(schema.url()))
        .await
        .expect("PgBouncer is not reachable; run scripts/services");
    let q = Queue::with_schema(pool, schema.name(), "q").unwrap();
    q.migrate().await.unwrap();
    (bouncer, schema, q)
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

mod admin;
mod bulk;
mod connect;
mod lifecycle;
mod overview;
mod postgres_only;
mod schedules;
mod stopping;

/// Declares each case twice, as a test on PostgreSQL and one on MariaDB, each with a fresh
/// queue (a schema or database of its own): they run in parallel, and a failure names its
/// database.
macro_rules! on_both_databases {
    ($($module:ident::$case:ident),* $(,)?) => {
        mod postgres {
            $(#[tokio::test]
            async fn $case() {
                let (_schema, q) = super::queue("q").await;
                super::$module::$case(q).await;
            })*
        }
        mod mariadb {
            $(#[tokio::test]
            async fn $case() {
                let (_database, q) = super::my_queue("q").await;
                super::$module::$case(q).await;
            })*
        }
        /// PostgreSQL behind PgBouncer in transaction pooling mode.
        mod pgbouncer {
            $(#[tokio::test]
            async fn $case() {
                let (_bouncer, _schema, q) = super::bounced_queue("q").await;
                super::$module::$case(q).await;
            })*
        }
    };
}

on_both_databases!(
    lifecycle::lifecycle_enqueue_work_done,
    lifecycle::pruning_one_queue_leaves_the_other_queues_history,
    lifecycle::a_failing_job_dies_after_exactly_max_attempts,
    lifecycle::dead_letters_can_be_purged,
    lifecycle::one_dead_letter_can_be_deleted_and_its_key_freed,
    lifecycle::dead_letters_retried_at_once_and_scheduled_jobs_run_now,
    lifecycle::a_worker_with_max_jobs_runs_that_many_and_returns,
    schedules::a_paused_queue_is_not_claimed_until_resumed,
    schedules::racing_schedulers_enqueue_one_job_per_period,
    schedules::a_missed_period_is_enqueued_once_and_catch_up_bounds_the_rest,
    schedules::bad_schedules_are_refused,
    schedules::a_queue_s_jobs_are_cancelled_at_once_by_state,
    schedules::a_cancelled_job_can_be_retried,
    lifecycle::an_idempotency_key_returns_the_existing_job,
    lifecycle::an_enqueue_in_a_rolled_back_transaction_leaves_no_job,
    lifecycle::a_late_completion_after_a_rescue_is_rejected,
    lifecycle::concurrent_claimers_get_disjoint_batches_of_at_most_n,
    lifecycle::a_long_job_is_kept_by_heartbeats_not_rescued,
    lifecycle::a_hung_handler_is_failed_by_the_execution_timeout,
    lifecycle::a_panicking_handler_is_recorded_as_a_failure,
    lifecycle::graceful_shutdown_finishes_in_flight_jobs_and_hands_back_the_rest,
    lifecycle::priorities_and_delays_order_the_claims,
    lifecycle::a_claimed_job_says_how_long_it_waited_once_due,
    lifecycle::dropping_the_run_future_stops_its_handlers,
    admin::jobs_can_be_shown_listed_cancelled_and_pruned,
    admin::a_state_is_listed_a_page_at_a_time,
    admin::cancelling_a_running_job_stops_its_handler_and_keeps_it_cancelled,
    admin::an_idempotency_key_can_be_unique_for_a_window,
    admin::one_worker_claims_from_several_queues,
    stopping::a_handler_asked_to_stop_at_the_timeout_still_times_out,
    stopping::at_the_end_of_the_grace_handlers_are_asked_to_stop,
    stopping::long_jobs_are_not_prefetched_away_from_an_idle_worker,
    stopping::prefetched_short_jobs_each_run_once,
    stopping::short_jobs_are_claimed_beyond_the_concurrency_by_default,
    bulk::enqueue_many_returns_ids_in_input_order,
    bulk::a_bad_job_in_enqueue_many_stores_nothing,
    bulk::ten_thousand_jobs_in_one_call_are_all_claimable,
    bulk::enqueue_many_keeps_uniqueness_windows,
    bulk::enqueue_many_in_follows_the_caller_s_transaction,
    bulk::concurrent_bulk_enqueues_of_the_same_keys_make_one_job_each,
    bulk::an_acknowledgement_or_a_hand_back_and_a_heartbeat_of_the_same_jobs_never_deadlock,
    admin::keys_and_queue_names_differing_in_case_accent_or_space_are_distinct,
    overview::the_overview_lists_every_queue_with_its_counts_age_and_pace,
    overview::workers_are_listed_while_they_run_and_drop_out_when_they_stop,
);
