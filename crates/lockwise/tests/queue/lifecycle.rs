//! A job's life: enqueue, claim, run, complete or fail, retries, dead letters, rescue.

use super::*;

/// Pruning one queue's history leaves the other queues' history alone, and pruning
/// everywhere takes every queue's (the two are separate statements on PostgreSQL, so that
/// one queue's uses its index with a generic plan).
pub(super) async fn pruning_one_queue_leaves_the_other_queues_history(q: Queue) {
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

pub(super) async fn lifecycle_enqueue_work_done(q: Queue) {
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

pub(super) async fn a_failing_job_dies_after_exactly_max_attempts(q: Queue) {
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

pub(super) async fn dead_letters_can_be_purged(q: Queue) {
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

/// `max_jobs` starts that many jobs, lets them finish and returns by itself, claiming none
/// beyond them (none handed back); `Some(0)` returns at once.
pub(super) async fn a_worker_with_max_jobs_runs_that_many_and_returns(q: Queue) {
    for n in 0..20 {
        q.enqueue(Job::new(json!({ "n": n }))).await.unwrap();
    }
    let ran = Arc::new(AtomicU32::new(0));
    let handler = {
        let ran = ran.clone();
        move |_job: JobContext| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                sleep(Duration::from_millis(20)).await;
                Ok::<_, String>(())
            }
        }
    };
    for concurrency in [1, 4] {
        ran.store(0, Ordering::SeqCst);
        let report = tokio::time::timeout(
            Duration::from_secs(20),
            fast(&q)
                .concurrency(concurrency)
                .max_jobs(Some(7))
                .run(handler.clone(), CancellationToken::new()),
        )
        .await
        .expect("a worker with max_jobs returns by itself")
        .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 7, "concurrency {concurrency}");
        assert_eq!((report.done, report.handed_back), (7, 0), "{report:?}");
    }
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.done, stats.ready, stats.running), (14, 6, 0));
    let report = tokio::time::timeout(
        Duration::from_secs(5),
        fast(&q)
            .max_jobs(Some(0))
            .run(handler, CancellationToken::new()),
    )
    .await
    .expect("max_jobs(Some(0)) returns at once")
    .unwrap();
    assert_eq!(report.done, 0);
    assert_eq!(q.stats().await.unwrap().ready, 6);
}

/// One dead letter can be deleted, its key freed; a job in another state cannot, nor can a
/// dead letter twice.
pub(super) async fn one_dead_letter_can_be_deleted_and_its_key_freed(q: Queue) {
    let keyed = q
        .enqueue(Job::new(json!("keyed")).key("invoice-7").max_attempts(1))
        .await
        .unwrap();
    let kept = q
        .enqueue(Job::new(json!("kept")).max_attempts(1))
        .await
        .unwrap();
    let claimed = q
        .protocol()
        .claim("t", 2, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    for job in &claimed {
        assert!(
            q.protocol()
                .fail(job.id, 1, "no", Duration::ZERO, false)
                .await
                .unwrap()
        );
    }
    let waiting = q.enqueue(Job::new(json!("waiting"))).await.unwrap();
    assert!(!q.delete_dead(waiting).await.unwrap(), "not a dead letter");
    assert!(!q.delete_dead(JobId(i64::MAX)).await.unwrap());
    assert!(q.delete_dead(keyed).await.unwrap());
    assert!(!q.delete_dead(keyed).await.unwrap(), "already gone");
    assert!(q.job(keyed).await.unwrap().is_none());
    assert_eq!(q.job(kept).await.unwrap().unwrap().state, JobState::Dead);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.dead, stats.ready), (1, 1));
    let again = q
        .enqueue_with_status(Job::new(json!("again")).key("invoice-7"))
        .await
        .unwrap();
    assert!(!again.duplicate, "the key was freed");
}

/// `retry_all` sends back every dead letter of its queue and no other's, each with a fresh
/// budget; `run_now` makes a delayed job, or one waiting out its backoff, due at once, and
/// nothing else.
pub(super) async fn dead_letters_retried_at_once_and_scheduled_jobs_run_now(q: Queue) {
    let other = q.named("other");
    let mut dead = Vec::new();
    for queue in [&q, &q, &other] {
        let id = queue
            .enqueue(Job::new(json!({})).max_attempts(2))
            .await
            .unwrap();
        for attempt in 1..=2 {
            let claimed = queue
                .protocol()
                .claim("t", 1, Duration::from_secs(30), &[])
                .await
                .unwrap();
            assert_eq!((claimed[0].id, claimed[0].attempt), (id, attempt));
            assert!(
                queue
                    .protocol()
                    .fail(id, attempt, "no", Duration::ZERO, false)
                    .await
                    .unwrap()
            );
        }
        dead.push(id);
    }
    assert_eq!(q.stats().await.unwrap().dead, 2);
    assert_eq!(q.retry_all().await.unwrap(), 2);
    assert_eq!(q.retry_all().await.unwrap(), 0);
    assert_eq!(
        other.stats().await.unwrap().dead,
        1,
        "another queue's letters stay"
    );
    for id in &dead[..2] {
        let job = q.job(*id).await.unwrap().unwrap();
        assert_eq!(
            (job.state, job.attempt, job.max_attempts),
            (JobState::Ready, 2, 4),
            "a fresh budget of two more attempts"
        );
    }

    // A delayed job, and one waiting an hour to retry.
    let delayed = q
        .enqueue(Job::new(json!("delayed")).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let retried = q.named("backoff");
    let backing_off = retried
        .enqueue(Job::new(json!("backoff")).max_attempts(3))
        .await
        .unwrap();
    let claimed = retried
        .protocol()
        .claim("t", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, backing_off);
    assert!(
        retried
            .protocol()
            .fail(backing_off, 1, "later", Duration::from_secs(3600), false)
            .await
            .unwrap()
    );
    assert_eq!(
        q.job(backing_off).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    assert!(
        !q.run_now(dead[0]).await.unwrap(),
        "a ready job is due already"
    );
    assert!(!q.run_now(JobId(i64::MAX)).await.unwrap());
    for id in [delayed, backing_off] {
        assert!(q.run_now(id).await.unwrap());
        assert!(!q.run_now(id).await.unwrap(), "due already");
        assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Ready);
    }
    let claimed = retried
        .protocol()
        .claim("t", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!((claimed[0].id, claimed[0].attempt), (backing_off, 2));
}

pub(super) async fn an_idempotency_key_returns_the_existing_job(q: Queue) {
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

pub(super) async fn an_enqueue_in_a_rolled_back_transaction_leaves_no_job(q: Queue) {
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
pub(super) async fn a_late_completion_after_a_rescue_is_rejected(q: Queue) {
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
pub(super) async fn concurrent_claimers_get_disjoint_batches_of_at_most_n(q: Queue) {
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
pub(super) async fn a_long_job_is_kept_by_heartbeats_not_rescued(q: Queue) {
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

pub(super) async fn a_hung_handler_is_failed_by_the_execution_timeout(q: Queue) {
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

pub(super) async fn a_panicking_handler_is_recorded_as_a_failure(q: Queue) {
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

pub(super) async fn graceful_shutdown_finishes_in_flight_jobs_and_hands_back_the_rest(q: Queue) {
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

pub(super) async fn priorities_and_delays_order_the_claims(q: Queue) {
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

/// A claimed job carries how long it waited once due: from its enqueue, or from when its delay
/// ran out (the server's clock on both ends, so the client's does not count).
pub(super) async fn a_claimed_job_says_how_long_it_waited_once_due(q: Queue) {
    let now = q.enqueue(Job::new(json!("now"))).await.unwrap();
    let delayed = q
        .enqueue(Job::new(json!("delayed")).delay(Duration::from_millis(300)))
        .await
        .unwrap();
    sleep(Duration::from_millis(600)).await;
    let claimed = q
        .protocol()
        .claim("w", 10, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let waited = |id| claimed.iter().find(|j| j.id == id).unwrap().waited;
    let (now, delayed) = (waited(now), waited(delayed));
    assert!(
        now >= Duration::from_millis(600) && now < Duration::from_secs(5),
        "{now:?}"
    );
    assert!(delayed >= Duration::from_millis(290), "{delayed:?}");
    assert!(
        now - delayed >= Duration::from_millis(290),
        "{now:?} {delayed:?}"
    );
}

/// Dropping `Worker::run`'s future (here by a timeout) aborts the handlers it started: a
/// handler asleep at that moment never wakes up to finish, and what it owned is dropped.
pub(super) async fn dropping_the_run_future_stops_its_handlers(q: Queue) {
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
