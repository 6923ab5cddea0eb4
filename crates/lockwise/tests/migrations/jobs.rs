//! Jobs of a version-1 store, and carrying them on after the migration.

use super::*;

/// The INSERT of [`OLD_JOBS`] into `table`, one row each, with times written `past` (a minute
/// ago) and `future` (an hour ahead) in the server's dialect.
pub(super) fn insert_old_jobs(table: &str, past: &str, future: &str) -> String {
    let time = |when: When| match when {
        When::Past => past,
        When::Future => future,
    };
    let text = |value: Option<&str>| value.map_or("NULL".to_owned(), |v| format!("'{v}'"));
    let rows: Vec<String> = OLD_JOBS
        .iter()
        .map(|job| {
            format!(
                "('q', '{}', {}, {}, '{{\"n\": \"{}\"}}', {}, 5, {}, {}, {}, {}, {})",
                job.state,
                job.priority,
                time(job.run_at),
                job.name,
                job.attempt,
                text(job.key),
                job.lease_until.map_or("NULL", time),
                text(job.worker),
                text(job.last_error),
                if job.finished { past } else { "NULL" },
            )
        })
        .collect();
    format!(
        "INSERT INTO {table} ({OLD_COLUMNS}) VALUES {}",
        rows.join(", ")
    )
}

/// The ids of [`OLD_JOBS`] by name, from `(id, name)` rows read back from the store.
pub(super) fn old_ids(rows: Vec<(i64, String)>) -> HashMap<&'static str, JobId> {
    let ids: HashMap<&'static str, JobId> = rows
        .into_iter()
        .map(|(id, name)| {
            let job = OLD_JOBS.iter().find(|j| j.name == name).unwrap();
            (job.name, JobId(id))
        })
        .collect();
    assert_eq!(ids.len(), OLD_JOBS.len());
    ids
}

/// Every job of [`OLD_JOBS`] (ids `ids`) is where it should be in the migrated queue `q`,
/// and each can go on: the live execution still owns its job, the expired lease is reaped,
/// the key still names its job, the dead letter is retried, and the ready jobs are claimed
/// and completed; new ids follow the old ones.
pub(super) async fn old_jobs_go_on(q: &Queue, ids: &HashMap<&str, JobId>) {
    for job in OLD_JOBS {
        let info = q
            .job(ids[job.name])
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {} is lost", job.name));
        assert_eq!(
            (info.state, info.attempt, &info.payload, info.queue.as_str()),
            (job.now, job.attempt, &json!({ "n": job.name }), "q"),
            "job {}",
            job.name
        );
        assert_eq!(
            info.last_error.as_deref(),
            job.last_error,
            "job {}",
            job.name
        );
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead
        ),
        (2, 2, 2, 1, 1),
        "{stats:?}"
    );

    let live = ids["live"];
    assert_eq!(
        q.protocol()
            .heartbeat(&[(live, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![live]
    );
    assert_eq!(q.protocol().complete(&[(live, 1)]).await.unwrap(), 1);
    assert_eq!(q.protocol().reap().await.unwrap(), 1, "the expired lease");
    assert_eq!(
        q.job(ids["expired"]).await.unwrap().unwrap().state,
        JobState::Ready
    );
    let same = q
        .enqueue_with_status(Job::new(json!({ "n": "again" })).key("k1"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (ids["keyed"], true));
    assert!(q.retry(ids["dead"]).await.unwrap());

    let claimed = q
        .protocol()
        .claim("new", 100, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let attempts: BTreeMap<JobId, i32> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    assert_eq!(
        attempts.keys().copied().collect::<BTreeSet<_>>(),
        ["ready", "keyed", "expired", "dead"]
            .map(|name| ids[name])
            .into_iter()
            .collect(),
        "{claimed:?}"
    );
    assert_eq!(
        [ids["ready"], ids["keyed"], ids["expired"]].map(|id| attempts[&id]),
        [1, 1, 2]
    );
    assert!(attempts[&ids["dead"]] > 5, "{claimed:?}");
    let running: Vec<(JobId, i32)> = attempts.into_iter().collect();
    let mut confirmed = q.protocol().confirm_started(&running).await.unwrap();
    confirmed.sort();
    assert_eq!(
        confirmed,
        running.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
    assert_eq!(q.protocol().complete(&running).await.unwrap(), 4);

    let new = q.enqueue(Job::new(json!({ "n": "new" }))).await.unwrap();
    assert!(
        ids.values().all(|old| new.0 > old.0),
        "{new:?} after {ids:?}"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead
        ),
        (1, 2, 0, 6, 0),
        "{stats:?}"
    );
}

/// A store's schema, kind by kind (`relation`, `column`, …): each object by name, with its
/// definition. Names of the store's own schema or table are written `<store>`.
pub(super) type Catalog = BTreeMap<&'static str, BTreeMap<String, String>>;
