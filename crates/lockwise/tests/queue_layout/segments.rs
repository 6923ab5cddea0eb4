//! Lease segments: what a batch touches, and truncations that never wait on a segment in use.

use super::*;

/// The statements of a batch name the lease segment of their jobs: while another process
/// holds a lease segment locked (as a truncation does), a job in another segment is claimed,
/// confirmed and acknowledged, in the next claim or by `complete`, without waiting for it. A
/// process that did not claim the job (it does not know its segment) completes it too,
/// through the whole ring, with the same compare-and-set on the attempt.
#[tokio::test]
pub(super) async fn a_batch_touches_only_the_lease_segment_of_its_jobs() {
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
pub(super) async fn truncation_gives_up_at_once_on_a_locked_segment_and_checks_its_wait() {
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
pub(super) async fn a_truncation_releases_at_once_a_segment_it_finds_in_use() {
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

/// A claim, a confirmation and an acknowledgement report their table statistics as they end
/// (`flush_stats`, v12.sql), where a backend otherwise reports at most once a second: a
/// truncation's reset of a segment's counts is not followed, up to a second later, by the
/// deletions made there before it. Through one connection that reported a moment before, the
/// deletions show in `pg_stat_user_tables` within 400 ms (a second later without the flush).
#[tokio::test]
pub(super) async fn the_worker_s_statements_report_their_statistics_as_they_end() {
    let schema = PgSchema::new("flush");
    let one = PgPoolOptions::new()
        .max_connections(1)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let q = Queue::with_schema(one, schema.name(), "q").unwrap();
    q.migrate().await.unwrap();
    let watcher = PgPool::connect(schema.url()).await.unwrap();
    let quoted = format!("\"{}\"", schema.name());
    let deleted = |table: &'static str| {
        let (watcher, quoted) = (watcher.clone(), quoted.clone());
        async move {
            scalar_i64(
                &watcher,
                format!(
                    "SELECT n_tup_del FROM pg_stat_user_tables \
                      WHERE relid = '{quoted}.{table}'::regclass"
                ),
            )
            .await
            .unwrap_or(0)
        }
    };
    q.enqueue_many((0..20).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    // Let the connection report once (a backend's first report is at once), then work.
    sleep(Duration::from_millis(50)).await;
    let lease = Duration::from_secs(30);
    let claimed = q.protocol().claim("w", 20, lease, &[]).await.unwrap();
    let jobs: Vec<_> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
    assert_eq!(q.protocol().confirm_started(&jobs).await.unwrap().len(), 20);
    assert_eq!(q.protocol().complete(&jobs).await.unwrap(), 20);
    let worked = Instant::now();
    while deleted("ready_0").await < 20 || deleted("leases_0").await < 20 {
        assert!(
            worked.elapsed() < Duration::from_millis(400),
            "the deletions were not reported within 400 ms: ready_0 {}, leases_0 {}",
            deleted("ready_0").await,
            deleted("leases_0").await
        );
        sleep(Duration::from_millis(10)).await;
    }
}
