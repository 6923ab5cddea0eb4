//! `Queue::overview`: every queue of the store at a glance.

use super::*;

pub(super) async fn the_overview_lists_every_queue_with_its_counts_age_and_pace(q: Queue) {
    assert!(q.overview().await.unwrap().is_empty(), "a fresh store");
    let (emails, reports) = (q.named("emails"), q.named("reports"));
    emails.enqueue(Job::new(json!({}))).await.unwrap();
    emails.enqueue(Job::new(json!({}))).await.unwrap();
    reports.enqueue(Job::new(json!({}))).await.unwrap();
    reports
        .enqueue(Job::new(json!({})).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    sleep(Duration::from_millis(300)).await;
    run_until(
        fast(&reports),
        |_| async { Ok(()) },
        Duration::from_secs(10),
        StatsAre(reports.clone(), |s| s.done == 1),
    )
    .await;
    let all = q.overview().await.unwrap();
    let names: Vec<&str> = all.iter().map(|o| o.queue.as_str()).collect();
    assert_eq!(names, ["emails", "reports"], "{all:#?}");
    let (e, r) = (&all[0], &all[1]);
    assert_eq!((e.stats.ready, e.stats.done, e.done_last_minute), (2, 0, 0));
    let age = e.stats.oldest_ready.expect("emails has ready jobs");
    assert!(age >= Duration::from_millis(300), "{age:?}");
    assert!(age < Duration::from_secs(60), "{age:?}");
    assert_eq!((r.stats.ready, r.stats.scheduled, r.stats.done), (0, 1, 1));
    assert_eq!(r.done_last_minute, 1);
    assert_eq!(r.stats.oldest_ready, None, "only a scheduled job waits");
    // A handle of any name sees the same queues and counts (the age moves on).
    let counts = |all: &[lockwise::queue::QueueOverview]| -> Vec<(String, i64, i64, i64)> {
        all.iter()
            .map(|o| {
                (
                    o.queue.clone(),
                    o.stats.ready,
                    o.stats.done,
                    o.done_last_minute,
                )
            })
            .collect()
    };
    assert_eq!(
        counts(&q.named("other").overview().await.unwrap()),
        counts(&all)
    );
}

pub(super) async fn workers_are_listed_while_they_run_and_drop_out_when_they_stop(q: Queue) {
    assert!(q.workers().await.unwrap().is_empty());
    q.enqueue(Job::new(json!({}))).await.unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let lease = Duration::from_millis(900);
    let worker = fast(&q)
        .queues(["q", "other"])
        .concurrency(3)
        .lease(lease)
        .grace(Duration::from_millis(200));
    let id = worker.id().to_owned();
    let stop = CancellationToken::new();
    let handler = {
        let release = release.clone();
        move |_| {
            let release = release.clone();
            async move {
                release.notified().await;
                Ok::<_, String>(())
            }
        }
    };
    let run = tokio::spawn(worker.run(handler, stop.clone()));
    // Refreshed every third of the lease, with the job running.
    let until = Instant::now() + Duration::from_secs(10);
    let seen = loop {
        let all = q.workers().await.unwrap();
        if all.first().is_some_and(|w| w.running == 1) {
            break all;
        }
        assert!(Instant::now() < until, "{all:?}");
        sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(seen.len(), 1, "{seen:?}");
    let w = &seen[0];
    assert_eq!(w.id, id);
    assert_eq!(w.pid, i32::try_from(std::process::id()).unwrap());
    assert_eq!(w.queues, ["q", "other"]);
    assert_eq!(w.concurrency, 3);
    assert!(w.last_heartbeat >= w.started_at, "{w:?}");
    // A worker that stops removes its row.
    release.notify_waiters();
    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(q.workers().await.unwrap().is_empty());
    // One that dies (its future dropped: nothing runs its goodbye) drops out with its lease.
    let run = tokio::spawn(
        fast(&q)
            .lease(lease)
            .run(|_| async { Ok::<_, String>(()) }, CancellationToken::new()),
    );
    let until = Instant::now() + Duration::from_secs(10);
    while q.workers().await.unwrap().is_empty() {
        assert!(Instant::now() < until, "the second worker never showed");
        sleep(Duration::from_millis(20)).await;
    }
    run.abort();
    let _ = run.await;
    assert_eq!(
        q.workers().await.unwrap().len(),
        1,
        "the row outlives its worker"
    );
    sleep(lease + Duration::from_millis(200)).await;
    assert!(q.workers().await.unwrap().is_empty());
}
