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
