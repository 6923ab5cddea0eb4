//! The finished history is a ring (v11.sql): pruning hides jobs at once and gives their space
//! back by truncating whole segments, never by DELETE; counts and keys follow exactly.

use super::*;

/// Jobs finished, through the protocol (no worker, so no maintenance runs meanwhile).
async fn finish(q: &Queue, n: usize, key: Option<&str>) -> Vec<JobId> {
    let jobs = (0..n).map(|i| {
        let job = Job::new(json!({ "i": i }));
        match key {
            Some(key) => job.key(format!("{key}-{i}")),
            None => job,
        }
    });
    q.enqueue_many(jobs).await.unwrap();
    let claimed = q
        .protocol()
        .claim("w", n, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), n);
    let finished: Vec<(JobId, i32)> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    assert_eq!(q.protocol().complete(&finished).await.unwrap(), n as u64);
    finished.into_iter().map(|(id, _)| id).collect()
}

/// `(rows on disk in done, dead tuples of done's segments)`: what the ring leaves behind.
async fn on_disk(pool: &PgPool, schema: &str) -> (i64, i64) {
    // Each backend flushes its statistics at most once a second.
    sleep(Duration::from_millis(1_100)).await;
    let rows = scalar_i64(
        pool,
        format!("SELECT count(*)::bigint FROM \"{schema}\".done"),
    )
    .await
    .unwrap();
    let dead: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables \
          WHERE schemaname = $1 AND relname ~ '^done_[0-9]+$'",
    )
    .bind(schema)
    .fetch_one(pool)
    .await
    .unwrap();
    (rows, dead)
}

/// Dates the opening of the ring's current segment `secs` seconds from now (negative: in the
/// past), so that a test says when the clock moves on instead of racing a machine's speed:
/// a prune moves it once the segment is older than its span (a second here).
async fn open_current_segment_at(pool: &PgPool, schema: &str, secs: i32) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE \"{schema}\".done_segments SET opened_at = now() + make_interval(secs => $1) \
          WHERE seg = (SELECT (last_value % 16)::smallint FROM \"{schema}\".done_clock)"
    )))
    .bind(f64::from(secs))
    .execute(pool)
    .await
    .unwrap();
}

/// Pruning hides the jobs at once (show, list, stats, keys), and once the ring's clock has
/// moved on, truncates the segment they were in: nothing is deleted, so no dead tuple is
/// left, and the counts stay exact.
#[tokio::test]
pub(super) async fn pruned_history_leaves_by_truncation_with_exact_counts_and_keys() {
    let (schema, q) = open("history_ring").await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    // The current segment stays current however long the first part takes.
    open_current_segment_at(&pool, schema.name(), 3_600).await;
    let first = finish(&q, 30, Some("k")).await;
    assert_eq!(q.stats().await.unwrap().done, 30);

    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 30);
    assert!(q.job(first[0]).await.unwrap().is_none());
    assert!(q.list(JobState::Done, 10).await.unwrap().is_empty());
    assert_eq!(q.stats().await.unwrap().done, 0);
    // The key is free again: the same key makes a new job.
    let again = q.enqueue(Job::new(json!({})).key("k-0")).await.unwrap();
    assert_ne!(again, first[0]);
    assert!(q.cancel(again).await.unwrap());
    // Pruned but still on disk: the segment is still the ring's current one.
    let (rows, _) = on_disk(&pool, schema.name()).await;
    assert_eq!(rows, 31, "30 pruned jobs and the cancelled one, on disk");

    // Once the segment is older than its span, the next prune moves the clock on and
    // truncates the old segment.
    open_current_segment_at(&pool, schema.name(), -3_600).await;
    let second = finish(&q, 5, None).await;
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 5);
    assert_eq!(
        q.prune(JobState::Cancelled, Duration::ZERO).await.unwrap(),
        1
    );
    let (rows, dead) = on_disk(&pool, schema.name()).await;
    assert_eq!(
        (rows, dead),
        (0, 0),
        "the segment was truncated, nothing deleted"
    );
    assert!(q.job(second[0]).await.unwrap().is_none());

    // What finishes after the prune is counted and listed as before.
    let third = finish(&q, 3, None).await;
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, stats.cancelled), (3, 0), "{stats:?}");
    assert_eq!(q.list(JobState::Done, 10).await.unwrap().len(), 3);
    assert!(q.job(third[0]).await.unwrap().is_some());
}

/// A segment is truncated only once every job in it is pruned: another queue's history in it
/// keeps it, and stays visible, until that queue is pruned too.
#[tokio::test]
pub(super) async fn a_segment_waits_for_every_queue_in_it() {
    let (schema, q) = open("history_shared").await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    let other = q.named("other");
    finish(&q, 4, None).await;
    let kept = finish(&other, 2, None).await;
    sleep(Duration::from_millis(1_100)).await;
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 4);
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 0);
    let (rows, _) = on_disk(&pool, schema.name()).await;
    assert_eq!(rows, 6, "the other queue's jobs hold the segment");
    assert!(other.job(kept[0]).await.unwrap().is_some());
    assert_eq!(other.stats().await.unwrap().done, 2);

    assert_eq!(
        other
            .prune_everywhere(JobState::Done, Duration::ZERO)
            .await
            .unwrap(),
        2
    );
    let (rows, dead) = on_disk(&pool, schema.name()).await;
    assert_eq!((rows, dead), (0, 0));
}

/// A worker with a retention keeps the window and gives the rest back by truncation: under a
/// steady trickle of jobs, the history on disk stays a few seconds deep, and `done` never
/// holds a dead tuple.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
pub(super) async fn a_worker_s_retention_keeps_the_history_a_few_seconds_deep() {
    let (schema, q) = open("history_worker").await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::new(q.clone())
            .retention(Duration::from_secs(1))
            .run(|_job| async { Ok::<_, String>(()) }, stop.clone()),
    );
    let mut enqueued = 0u64;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        q.enqueue_many((0..100).map(|n| Job::new(json!({ "n": n }))))
            .await
            .unwrap();
        enqueued += 100;
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_millis(2_500)).await;
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.done, enqueued);
    let (rows, dead) = on_disk(&pool, schema.name()).await;
    eprintln!("{enqueued} jobs done in 6 s; {rows} rows of history left on disk, {dead} dead");
    assert_eq!(dead, 0, "retention deleted rows from done");
    assert!(
        rows < enqueued as i64 / 2,
        "{rows} of {enqueued} finished jobs still on disk: the ring was not truncated"
    );
    let visible = q.list(JobState::Done, 100_000).await.unwrap();
    assert!(
        visible
            .iter()
            .all(|j| j.finished_at.unwrap().elapsed().unwrap() < Duration::from_secs(5)),
        "a job older than the window is still listed"
    );
}

/// A store of version 10 with jobs in flight and a history (done and cancelled, sealed and
/// not, keyed) migrates to the ring: every count and key is kept, the running job finishes,
/// and the old history is pruned and then truncated like the new.
#[tokio::test]
pub(super) async fn a_version_10_store_with_history_and_jobs_in_flight_migrates_to_the_ring() {
    let schema = store_at("history_v10", 10).await;
    let quoted = format!("\"{}\"", schema.name());
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    let sql = |text: String| {
        let pool = pool.clone();
        async move {
            sqlx::raw_sql(sqlx::AssertSqlSafe(text))
                .execute(&pool)
                .await
                .unwrap();
        }
    };
    // A process of version 10: records of migrations 11 and on while it opens, so that it
    // never migrates the store.
    sql(format!(
        "INSERT INTO {quoted}.queue_migrations (version) SELECT generate_series(11, {LATEST}); {}",
        with_shim(&quoted)
    ))
    .await;
    let old = lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default()
            .queue("q")
            .schema(schema.name())
            .migrate(false),
    )
    .await
    .unwrap();
    sql(format!(
        "DELETE FROM {quoted}.queue_migrations WHERE version >= 11"
    ))
    .await;
    let finished = finish(&old, 6, Some("old")).await;
    // Sealed as version 10 sealed: these six are in done_counts (those of them below the oldest
    // transaction still running, which a test beside this one may hold back), the rest are
    // counted live.
    sql(format!(
        "BEGIN; SELECT until FROM {quoted}.done_sealed FOR UPDATE; \
         WITH upto AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS x), \
         moved AS (UPDATE {quoted}.done_sealed SET until = (SELECT x FROM upto) RETURNING 1) \
         INSERT INTO {quoted}.done_counts (queue, state, bucket, n) \
         SELECT queue, state, to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10), \
                count(*) FROM {quoted}.done \
          WHERE EXISTS (SELECT 1 FROM moved) AND xid < (SELECT x FROM upto) GROUP BY 1, 2, 3; \
         COMMIT"
    ))
    .await;
    finish(&old, 2, None).await;
    let waiting = old.enqueue(Job::new(json!("cancel me"))).await.unwrap();
    assert!(old.cancel(waiting).await.unwrap());
    let running = old.enqueue(Job::new(json!("running"))).await.unwrap();
    let claimed = old
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, running);
    let ready = old.enqueue(Job::new(json!("ready"))).await.unwrap();

    sql(without_shim(&quoted)).await;
    let q = reopen(&schema).await;
    assert_eq!(version(&pool, &quoted).await, Some(LATEST));
    let after = q.stats().await.unwrap();
    assert_eq!(
        (after.done, after.cancelled, after.running, after.ready),
        (8, 1, 1, 1),
        "counts kept across the migration: {after:?}"
    );
    assert_eq!(
        q.job(finished[0]).await.unwrap().unwrap().state,
        JobState::Done
    );
    // The key of an old job still holds.
    let again = q.enqueue(Job::new(json!({})).key("old-0")).await.unwrap();
    assert_eq!(again, finished[0]);
    // The job in flight finishes; the ready one runs.
    assert_eq!(
        q.protocol()
            .complete(&[(running, claimed[0].attempt)])
            .await
            .unwrap(),
        1
    );
    let report = Worker::new(q.clone())
        .until_idle(true)
        .run(
            |_job| async { Ok::<_, String>(()) },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(report.done, 1);
    assert_eq!(q.job(ready).await.unwrap().unwrap().state, JobState::Done);
    assert_eq!(q.stats().await.unwrap().done, 10);

    // The old history goes like the new: pruned at once, truncated once the clock moved on.
    sleep(Duration::from_millis(1_100)).await;
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 10);
    assert_eq!(
        q.prune(JobState::Cancelled, Duration::ZERO).await.unwrap(),
        1
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, stats.cancelled), (0, 0), "{stats:?}");
    assert_ne!(
        q.enqueue(Job::new(json!({})).key("old-0")).await.unwrap(),
        finished[0],
        "the pruned job's key is free"
    );
    let (rows, dead) = on_disk(&pool, schema.name()).await;
    assert_eq!((rows, dead), (0, 0));
}

/// A prune sees what its snapshot sees: a transaction left open elsewhere does not hold it
/// back, and a job whose transaction commits after the prune looked is kept, counted and
/// listed, and pruned (and counted) by the next prune.
#[tokio::test]
pub(super) async fn a_prune_takes_what_it_sees_and_leaves_what_commits_later() {
    let (schema, q) = open("history_snapshot").await;
    let quoted = format!("\"{}\"", schema.name());
    let pool = PgPoolOptions::new()
        .max_connections(3)
        .connect(schema.url())
        .await
        .unwrap();
    // A transaction with an id, open through the whole test (another application's).
    let mut idle = pool.begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut *idle)
        .await
        .unwrap();
    let done = finish(&q, 3, None).await;
    // A job finishing in a transaction that commits only after the prune.
    let late = q.enqueue(Job::new(json!("late"))).await.unwrap();
    let mut finishing = pool.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "WITH r AS (DELETE FROM {quoted}.ready WHERE id = $1 \
           RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, \
                     idempotency_key, created_at, last_error, errors) \
         INSERT INTO {quoted}.done (id, queue, state, priority, run_at, payload, attempt, \
                                    max_attempts, idempotency_key, worker, created_at, \
                                    last_error, errors) \
         SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, \
                idempotency_key, 'w', created_at, last_error, errors FROM r"
    )))
    .bind(late.0)
    .execute(&mut *finishing)
    .await
    .unwrap();
    sleep(Duration::from_millis(20)).await;

    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 3);
    assert!(q.job(done[0]).await.unwrap().is_none());
    finishing.commit().await.unwrap();
    assert_eq!(
        q.stats().await.unwrap().done,
        1,
        "the late job is kept and counted"
    );
    assert_eq!(q.job(late).await.unwrap().unwrap().state, JobState::Done);
    assert_eq!(q.prune(JobState::Done, Duration::ZERO).await.unwrap(), 1);
    assert_eq!(q.stats().await.unwrap().done, 0);
    assert!(q.job(late).await.unwrap().is_none());
    idle.rollback().await.unwrap();
}

/// Seals the finished history's counts as a worker's maintenance does (seal_lock.sql, then
/// seal_done.sql, in one transaction).
async fn seal(pool: &PgPool, schema: &str) {
    let quoted = format!("\"{schema}\"");
    let fill = |sql: &str| sql.replace("{schema}", &quoted);
    let mut tx = pool.begin().await.unwrap();
    for sql in [
        include_str!("../../sql/postgres/queue/seal_lock.sql"),
        include_str!("../../sql/postgres/queue/seal_done.sql"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(fill(sql)))
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
}

/// A cancelled job retried leaves the history with its count, sealed or not: the counts stay
/// exact through later seals and prunes; it keeps its id and key; a pruned one is gone.
#[tokio::test]
pub(super) async fn a_retried_cancelled_job_leaves_exact_counts_sealed_or_not() {
    let (schema, q) = open("retry_cancelled").await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let id = q
            .enqueue(Job::new(json!({ "i": i })).key(format!("c-{i}")))
            .await
            .unwrap();
        assert!(q.cancel(id).await.unwrap());
        ids.push(id);
    }
    // Sealed: the three are in done_counts now (this test's transactions are the oldest only
    // if no other runs; the counts are exact either way).
    sleep(Duration::from_millis(50)).await;
    seal(&pool, schema.name()).await;
    assert_eq!(q.stats().await.unwrap().cancelled, 3);
    assert!(q.retry(ids[0]).await.unwrap());
    assert!(!q.retry(ids[0]).await.unwrap(), "not cancelled any more");
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.cancelled), (1, 2), "{s:?}");
    let job = q.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.key.as_deref()),
        (JobState::Ready, Some("c-0"))
    );
    assert_eq!(
        q.enqueue(Job::new(json!({})).key("c-0")).await.unwrap(),
        ids[0],
        "its key still names it"
    );
    // Not sealed yet: cancelled and retried between two seals.
    let fresh = q.enqueue(Job::new(json!("fresh"))).await.unwrap();
    assert!(q.cancel(fresh).await.unwrap());
    assert!(q.retry(fresh).await.unwrap());
    seal(&pool, schema.name()).await;
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.cancelled), (2, 2), "{s:?}");
    // Pruned: gone, not retried.
    assert_eq!(
        q.prune(JobState::Cancelled, Duration::ZERO).await.unwrap(),
        2
    );
    assert!(!q.retry(ids[1]).await.unwrap(), "a pruned job");
    seal(&pool, schema.name()).await;
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.cancelled), (2, 0), "{s:?}");
}
