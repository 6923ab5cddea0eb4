//! Inspecting and controlling jobs: show, list, cancel, prune; keys; several queues.

use super::*;

/// `list_page` pages through a state in `list`'s order: ready jobs in the order they will
/// run, finished ones newest first; a negative offset or limit counts as 0.
pub(super) async fn a_state_is_listed_a_page_at_a_time(q: Queue) {
    let mut ready = Vec::new();
    for n in 0..5 {
        ready.push(q.enqueue(Job::new(json!({ "n": n }))).await.unwrap());
    }
    let page = |offset, limit| {
        let q = q.clone();
        async move {
            q.list_page(JobState::Ready, offset, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|j| j.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(0, 2).await, ready[0..2]);
    assert_eq!(page(2, 2).await, ready[2..4]);
    assert_eq!(page(4, 2).await, ready[4..]);
    assert!(page(5, 2).await.is_empty());
    assert_eq!(page(-3, 1).await, ready[0..1]);
    assert!(page(0, -1).await.is_empty());
    for id in &ready[..3] {
        assert!(q.cancel(*id).await.unwrap());
    }
    let cancelled: Vec<JobId> = q
        .list_page(JobState::Cancelled, 1, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        cancelled,
        [ready[1], ready[0]],
        "newest first, the newest skipped"
    );
    assert_eq!(
        q.list(JobState::Cancelled, 10).await.unwrap().len(),
        3,
        "list is list_page from 0"
    );
}

/// `job`, `list`, `cancel` and `prune`: what a user inspecting or cleaning a queue relies on.
pub(super) async fn jobs_can_be_shown_listed_cancelled_and_pruned(q: Queue) {
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
pub(super) async fn cancelling_a_running_job_stops_its_handler_and_keeps_it_cancelled(q: Queue) {
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
pub(super) async fn an_idempotency_key_can_be_unique_for_a_window(q: Queue) {
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
pub(super) async fn one_worker_claims_from_several_queues(q: Queue) {
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
pub(super) async fn keys_and_queue_names_differing_in_case_accent_or_space_are_distinct(q: Queue) {
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
