//! Dead tuples under sustained load, exact counts across sealing and pruning, due jobs by priority.

use super::*;

/// Under sustained load (one worker of 8, a backlog held near 4,000 ready jobs, a retention
/// of 1 s pruning the history as it goes) no table of the queue ever holds more than 2,000
/// dead row versions, with no VACUUM from the test, and the history on disk stays a few
/// seconds deep. `LOCKWISE_SUSTAINED_SECS` sets the load's length (default 45 s),
/// `LOCKWISE_SUSTAINED_HANDLERS` the worker's concurrency (default 8).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
pub(super) async fn sustained_load_keeps_dead_tuples_of_every_queue_table_under_2000() {
    let secs: u64 = std::env::var("LOCKWISE_SUSTAINED_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let handlers: usize = std::env::var("LOCKWISE_SUSTAINED_HANDLERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let schema = PgSchema::new("sustained");
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(handlers).unwrap() + 12)
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
    let worker = Worker::new(q.clone())
        .concurrency(handlers)
        .retention(Duration::from_secs(1));
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
    let history = scalar_i64(
        &stats_pool,
        format!("SELECT count(*)::bigint FROM \"{}\".done", schema.name()),
    )
    .await
    .unwrap();
    eprintln!(
        "sustained load for {:.1} s, {handlers} handlers: peak n_dead_tup {peak} in table {table}; {} jobs done \
         ({rate:.0} jobs/s), {enqueued} enqueued, {history} left in the history on disk; \
         every table's peak: {:?}",
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
    assert!(
        history < (rate * 10.0) as i64,
        "{history} finished jobs on disk at {rate:.0} jobs/s: retention did not truncate"
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
pub(super) async fn stats_count_finished_jobs_exactly_across_sealing_and_pruning() {
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
pub(super) async fn delayed_jobs_that_came_due_are_claimed_by_priority() {
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
