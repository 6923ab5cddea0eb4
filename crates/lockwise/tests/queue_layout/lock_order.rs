//! Upgrades with jobs in flight, and statements that lock in heartbeat order.

use super::*;

/// Migration 7 replaces the batch functions of a version-6 store, whose acknowledgement and
/// confirmation also named the whole batch in each lease's probe (`l.id = ANY(…)`): a job
/// claimed under version 6 is confirmed and acknowledged under version 7, and the grants of
/// the functions stand.
#[tokio::test]
pub(super) async fn a_version_6_store_gets_the_batch_functions_of_version_7_with_a_job_in_flight() {
    // A store of version 10, opened by a process that takes it for up to date (a record of
    // migrations 11 and on for the time it opens), so that it never migrates it.
    let schema = store_at("v7", 10).await;
    let quoted = format!("\"{}\"", schema.name());
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {quoted}.queue_migrations (version) SELECT generate_series(11, {LATEST}); {}",
        with_shim(&quoted)
    )))
    .execute(&pool)
    .await
    .unwrap();
    let q = lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default()
            .queue("q")
            .schema(schema.name())
            .migrate(false),
    )
    .await
    .unwrap();
    // The claims by their names while the shim wraps them (with_shim), then by their own.
    let functions = "'ack', 'claim', 'claim_any', 'confirm_started', \
                     'claim_unshimmed', 'claim_any_unshimmed'";
    let defs = format!(
        "SELECT string_agg(pg_get_functiondef(p.oid), E'\\n') FROM pg_proc p \
         WHERE p.pronamespace = '{quoted}'::regnamespace AND p.proname IN ({functions}) \
           AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')"
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
                       AND p.proname IN ({functions}) \
                       AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql') LOOP \
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

    // A new process opens the store: migration 7 runs (and the ones after it).
    sqlx::raw_sql(sqlx::AssertSqlSafe(without_shim(&quoted)))
        .execute(&pool)
        .await
        .unwrap();
    let reopened = reopen(&schema).await;
    assert_eq!(version(&pool, &quoted).await, Some(LATEST));
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
pub(super) async fn the_reaper_skips_a_lease_a_worker_holds_and_rescues_the_rest() {
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
/// tickets from 450: the last 50 of segment 0 and the first 100 of segment 1), a pool of its
/// own, and the leases as (id, attempt, segment) in (segment, id) order, the first and last
/// in different segments.
pub(super) async fn leases_of_150_claimed(
    label: &str,
) -> (PgSchema, Queue, PgPool, Vec<(i64, i32, i16)>) {
    let (schema, q) = open(label).await;
    let quoted = format!("\"{}\"", schema.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SELECT setval('{quoted}.claim_ticket', 449)"
    )))
    .execute(&PgPool::connect(schema.url()).await.unwrap())
    .await
    .unwrap();
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
pub(super) async fn heartbeat_around<T: Send + 'static>(
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
pub(super) async fn an_acknowledgement_of_known_and_unknown_segments_locks_in_heartbeat_order() {
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
pub(super) async fn a_stopping_worker_does_not_wait_for_the_rest_of_a_maintenance_round() {
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

    // 16,000 leases: every segment of the ring (32 of 500) written, then drained, and none of
    // them truncated while the holder holds them.
    q.enqueue_many((0..16_000).map(|n| Job::new(json!({ "n": n }))))
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
    assert_eq!(report.done, 16_000);

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
pub(super) async fn a_confirmation_locks_in_heartbeat_order() {
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
