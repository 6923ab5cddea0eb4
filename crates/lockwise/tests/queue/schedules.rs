//! Pausing a queue, and periodic jobs: one job per period whatever the number of schedulers.

use super::*;

use lockwise::queue::{Periodic, Schedule};

/// The periods (Unix seconds) of the jobs of schedule `name` in the queue, from their keys,
/// in order; panics on a job of another key.
async fn periods(q: &Queue, name: &str) -> Vec<i64> {
    let prefix = format!("periodic:{name}:");
    let mut found: Vec<i64> = q
        .list(JobState::Ready, 1_000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|job| job.key)
        .filter_map(|key| key.strip_prefix(&prefix).map(|p| p.parse().unwrap()))
        .collect();
    found.sort_unstable();
    found
}

/// A paused queue keeps its jobs and is not claimed, by a worker started before or after the
/// pause, while the worker's other queue is; resumed, it is claimed within a poll or two.
pub(super) async fn a_paused_queue_is_not_claimed_until_resumed(q: Queue) {
    let other = q.named("other");
    assert!(q.pause().await.unwrap());
    assert!(!q.pause().await.unwrap(), "paused already");
    assert!(q.is_paused().await.unwrap());
    assert!(!other.is_paused().await.unwrap());
    assert_eq!(q.paused().await.unwrap(), ["q"]);
    for n in 0..3 {
        q.enqueue(Job::new(json!({ "n": n }))).await.unwrap();
        other.enqueue(Job::new(json!({ "n": n }))).await.unwrap();
    }
    let stop = CancellationToken::new();
    let worker = fast(&q).queues(["q", "other"]);
    let task = tokio::spawn(worker.run(|_job| async { Ok::<_, String>(()) }, stop.clone()));
    let give_up = Instant::now() + Duration::from_secs(10);
    while other.stats().await.unwrap().done < 3 && Instant::now() < give_up {
        sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        other.stats().await.unwrap().done,
        3,
        "the other queue is worked"
    );
    sleep(Duration::from_millis(300)).await; // six polls
    let s = q.stats().await.unwrap();
    assert_eq!(
        (s.ready, s.running, s.done),
        (3, 0, 0),
        "the paused queue is not"
    );

    let resumed = Instant::now();
    assert!(q.resume().await.unwrap());
    assert!(!q.resume().await.unwrap(), "not paused any more");
    while q.stats().await.unwrap().done < 3 && Instant::now() < give_up {
        sleep(Duration::from_millis(10)).await;
    }
    let took = resumed.elapsed();
    assert_eq!(q.stats().await.unwrap().done, 3);
    assert!(
        took < Duration::from_secs(2),
        "claimed {took:?} after the resumption"
    );

    // Paused while the worker runs: within a poll (50 ms) it claims no more of it.
    assert!(q.pause().await.unwrap());
    sleep(Duration::from_millis(200)).await;
    for n in 0..3 {
        q.enqueue(Job::new(json!({ "late": n }))).await.unwrap();
    }
    sleep(Duration::from_millis(400)).await;
    assert_eq!(
        q.stats().await.unwrap().ready,
        3,
        "claimed from a paused queue"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
    // A worker that drains and exits (until_idle) finds nothing to do in a paused queue.
    let report = tokio::time::timeout(
        Duration::from_secs(5),
        fast(&q).until_idle(true).run(
            |_job| async { Ok::<_, String>(()) },
            CancellationToken::new(),
        ),
    )
    .await
    .expect("until_idle returns while its queue is paused")
    .unwrap();
    assert_eq!(report.done, 0);
    assert!(q.resume().await.unwrap());
    let err = q.named("").pause().await.unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err:?}"
    );
}

/// Four schedulers of one schedule tick every second for 3.5 s: each period has exactly one
/// job, the periods follow each other without a gap, and a tick with nothing due enqueues
/// nothing. A new schedule starts with its next period.
pub(super) async fn racing_schedulers_enqueue_one_job_per_period(q: Queue) {
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let make = || {
        q.periodic("beat", every.clone(), Job::new(json!({"report": "beat"})))
            .unwrap()
    };
    let first = make();
    assert!(
        first.tick().await.unwrap().is_empty(),
        "a new schedule waits for its next period"
    );
    let stop = CancellationToken::new();
    let schedulers: Vec<Periodic> = (0..4).map(|_| make()).collect();
    let tasks: Vec<_> = schedulers
        .into_iter()
        .map(|s| {
            let stop = stop.clone();
            tokio::spawn(async move { s.run(stop).await })
        })
        .collect();
    sleep(Duration::from_millis(3_500)).await;
    stop.cancel();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let found = periods(&q, "beat").await;
    assert!(found.len() >= 3, "{found:?}");
    assert!(
        found.windows(2).all(|w| w[1] == w[0] + 1),
        "one job per period, no gap: {found:?}"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        stats.ready,
        i64::try_from(found.len()).unwrap(),
        "only the schedule's jobs"
    );
}

/// All schedulers down for three periods: the next tick enqueues the newest period once, or
/// with `catch_up(1)` the newest two.
pub(super) async fn a_missed_period_is_enqueued_once_and_catch_up_bounds_the_rest(q: Queue) {
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let plain = q
        .periodic("plain", every.clone(), Job::new(json!(1)))
        .unwrap();
    let caught = q
        .periodic("caught", every.clone(), Job::new(json!(2)))
        .unwrap()
        .catch_up(1);
    assert!(plain.tick().await.unwrap().is_empty());
    assert!(caught.tick().await.unwrap().is_empty());
    sleep(Duration::from_millis(3_300)).await;
    let one = plain.tick().await.unwrap();
    let two = caught.tick().await.unwrap();
    assert_eq!((one.len(), two.len()), (1, 2));
    let p = periods(&q, "plain").await;
    let c = periods(&q, "caught").await;
    assert_eq!(c.len(), 2);
    assert_eq!(c[1], c[0] + 1);
    assert!(p[0] >= c[0], "{p:?} {c:?}");
    // The job runs like any other, with the schedule's payload and its period's key.
    let job = q.job(one[0]).await.unwrap().unwrap();
    assert_eq!(job.payload, json!(1));
    let key = format!("periodic:plain:{}", p[0]);
    assert_eq!(job.key.as_deref(), Some(key.as_str()));
    // The schedule's row, not the key, makes a period once: its job cancelled and pruned (the
    // key freed), the period is not enqueued again (a later one may be).
    assert!(q.cancel(one[0]).await.unwrap());
    q.prune(JobState::Cancelled, Duration::ZERO).await.unwrap();
    assert!(q.job(one[0]).await.unwrap().is_none(), "pruned");
    for id in plain.tick().await.unwrap() {
        let again = q.job(id).await.unwrap().unwrap();
        assert_ne!(
            again.key.as_deref(),
            Some(key.as_str()),
            "a period enqueued twice"
        );
    }
}

/// Bad schedules and names are refused before anything is stored.
pub(super) async fn bad_schedules_are_refused(q: Queue) {
    for pattern in ["", "61 * * * *", "* * *"] {
        let err = Schedule::cron(pattern).unwrap_err();
        assert!(
            matches!(err, lockwise::Error::InvalidConfig { .. }),
            "{err:?}"
        );
    }
    let err = Schedule::every(Duration::from_millis(500)).unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err:?}"
    );
    let hourly = Schedule::cron("@hourly").unwrap();
    for name in [String::new(), "n".repeat(201), "a\0b".to_owned()] {
        let err = q
            .periodic(name, hourly.clone(), Job::new(json!(1)))
            .unwrap_err();
        assert!(
            matches!(err, lockwise::Error::InvalidConfig { .. }),
            "{err:?}"
        );
    }
    let hourly_job = q.periodic("h", hourly, Job::new(json!(1))).unwrap();
    assert!(hourly_job.tick().await.unwrap().is_empty());
    // A catch-up beyond the bound is held to it; a new schedule looks at its newest period
    // only, whatever the catch-up.
    let every = Schedule::every(Duration::from_secs(1)).unwrap();
    let eager = q
        .periodic("eager", every, Job::new(json!(1)))
        .unwrap()
        .catch_up(u32::MAX);
    let started = Instant::now();
    assert!(eager.tick().await.unwrap().is_empty());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(q.stats().await.unwrap().ready, 0);
}

/// `cancel_all` cancels the queue's jobs in the states asked, and only those: ready ones,
/// then delayed ones, then a running one (whose late completion changes nothing); other
/// queues' jobs stay; a finished state is refused.
pub(super) async fn a_queue_s_jobs_are_cancelled_at_once_by_state(q: Queue) {
    let other = q.named("other");
    for n in 0..3 {
        q.enqueue(Job::new(json!({ "ready": n }))).await.unwrap();
        q.enqueue(Job::new(json!({ "later": n })).delay(Duration::from_secs(600)))
            .await
            .unwrap();
        other
            .enqueue(Job::new(json!({ "other": n })))
            .await
            .unwrap();
    }
    let running = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let claimed: Vec<(JobId, i32)> = running.iter().map(|j| (j.id, j.attempt)).collect();
    q.protocol().confirm_started(&claimed).await.unwrap();
    assert_eq!(q.cancel_all(&[JobState::Ready]).await.unwrap(), 2);
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.scheduled, s.running, s.cancelled), (0, 3, 1, 2));
    assert_eq!(q.cancel_all(&[JobState::Scheduled]).await.unwrap(), 3);
    assert_eq!(
        q.cancel_all(&[JobState::Ready, JobState::Scheduled])
            .await
            .unwrap(),
        0
    );
    assert_eq!(q.cancel_all(&[JobState::Running]).await.unwrap(), 1);
    assert_eq!(
        q.protocol().complete(&claimed).await.unwrap(),
        0,
        "a late completion"
    );
    let s = q.stats().await.unwrap();
    assert_eq!(
        (s.ready, s.scheduled, s.running, s.done, s.cancelled),
        (0, 0, 0, 0, 6)
    );
    assert_eq!(
        other.stats().await.unwrap().ready,
        3,
        "another queue's jobs stay"
    );
    for bad in [
        &[][..],
        &[JobState::Done],
        &[JobState::Ready, JobState::Dead],
    ] {
        let err = q.cancel_all(bad).await.unwrap_err();
        assert!(
            matches!(err, lockwise::Error::InvalidConfig { .. }),
            "{err:?}"
        );
    }
}

/// A cancelled job is retried as a dead one is: the same job, ready again with a fresh budget,
/// and it runs; a job neither dead nor cancelled is not retried.
pub(super) async fn a_cancelled_job_can_be_retried(q: Queue) {
    let id = q
        .enqueue(Job::new(json!("again")).key("once").max_attempts(2))
        .await
        .unwrap();
    assert!(!q.retry(id).await.unwrap(), "a ready job is not retried");
    assert!(q.cancel(id).await.unwrap());
    assert_eq!(q.stats().await.unwrap().cancelled, 1);
    assert!(q.retry(id).await.unwrap());
    assert!(!q.retry(id).await.unwrap(), "ready again, not cancelled");
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready, s.cancelled), (1, 0), "{s:?}");
    let claimed = q
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);
    let done: Vec<(JobId, i32)> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
    q.protocol().confirm_started(&done).await.unwrap();
    assert_eq!(q.protocol().complete(&done).await.unwrap(), 1);
    assert_eq!(q.job(id).await.unwrap().unwrap().state, JobState::Done);
}
