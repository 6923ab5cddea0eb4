//! Stopping handlers (timeout, grace) and claiming ahead of them (prefetch).

use super::*;

/// With `kill_after`, a handler is asked to stop at the timeout and may return: the attempt
/// is still a failure, "timed out", even though it returned `Ok`; and nothing waits for the
/// `kill_after` to run out.
pub(super) async fn a_handler_asked_to_stop_at_the_timeout_still_times_out(q: Queue) {
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
pub(super) async fn at_the_end_of_the_grace_handlers_are_asked_to_stop(q: Queue) {
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
pub(super) async fn long_jobs_are_not_prefetched_away_from_an_idle_worker(q: Queue) {
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
pub(super) async fn prefetched_short_jobs_each_run_once(q: Queue) {
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
pub(super) async fn short_jobs_are_claimed_beyond_the_concurrency_by_default(q: Queue) {
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
