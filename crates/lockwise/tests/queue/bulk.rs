//! Enqueueing many jobs at once, and statements of one batch that never deadlock.

use super::*;

/// `enqueue_many`: ids in input order, new ones ascending; a key already held returns its
/// job, a key repeated in the call the first job's id, both as duplicates.
pub(super) async fn enqueue_many_returns_ids_in_input_order(q: Queue) {
    let held = q
        .enqueue(Job::new(json!({"n": "held"})).key("held"))
        .await
        .unwrap();
    let jobs = vec![
        Job::new(json!({"n": 0})),
        Job::new(json!({"n": 1})).key("a"),
        Job::new(json!({"n": 2})).key("held"),
        Job::new(json!({"n": 3})).priority(-1).max_attempts(2),
        Job::new(json!({"n": 4})).key("a"),
        Job::new(json!({"n": 5})).delay(Duration::from_secs(3600)),
    ];
    let done = q.enqueue_many_with_status(jobs).await.unwrap();
    assert_eq!(done.len(), 6);
    let dup: Vec<bool> = done.iter().map(|e| e.duplicate).collect();
    assert_eq!(dup, [false, false, true, false, true, false]);
    assert_eq!(done[2].id, held);
    assert_eq!(done[4].id, done[1].id);
    let new: Vec<JobId> = [0, 1, 3, 5].iter().map(|&i| done[i].id).collect();
    assert!(new.windows(2).all(|w| w[0] < w[1]), "{new:?}");
    assert!(new[0] > held);
    for i in [0, 1, 3, 5] {
        let job = q.job(done[i].id).await.unwrap().unwrap();
        assert_eq!(job.payload, json!({ "n": i }), "job {i}");
    }
    let three = q.job(done[3].id).await.unwrap().unwrap();
    assert_eq!((three.priority, three.max_attempts), (-1, 2));
    assert_eq!(
        q.job(done[1].id).await.unwrap().unwrap().key.as_deref(),
        Some("a")
    );
    assert_eq!(
        q.job(done[5].id).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.scheduled), (4, 1));
    // Again, the same keys: all duplicates now; the keyless job is new.
    let again = q
        .enqueue_many_with_status([
            Job::new(json!({})).key("a"),
            Job::new(json!({})),
            Job::new(json!({})).key("held"),
        ])
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|e| (e.id, e.duplicate))
            .collect::<Vec<_>>()[..],
        [(done[1].id, true), (again[1].id, false), (held, true)]
    );
    assert!(q.enqueue_many(Vec::new()).await.unwrap().is_empty());
    // Every job with the same priority, attempts and delay: each keeps them.
    let same = q
        .enqueue_many((0..3).map(|_| {
            Job::new(json!({}))
                .priority(4)
                .max_attempts(3)
                .delay(Duration::from_secs(60))
        }))
        .await
        .unwrap();
    for id in same {
        let job = q.job(id).await.unwrap().unwrap();
        assert_eq!(
            (job.priority, job.max_attempts, job.state),
            (4, 3, JobState::Scheduled)
        );
    }
}

/// A bad job anywhere in the call stores nothing, and the error names it.
pub(super) async fn a_bad_job_in_enqueue_many_stores_nothing(q: Queue) {
    let mut jobs: Vec<Job> = (0..2_000).map(|n| Job::new(json!({ "n": n }))).collect();
    jobs.push(Job::new(json!({"bad": "nul\u{0}"})));
    let err = q.enqueue_many(jobs).await.unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err}");
    assert!(err.to_string().contains("job 2000 of 2001"), "{err}");
    let err = q
        .enqueue_many([Job::new(json!({})), Job::new(json!({})).key("")])
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err}");
    assert_eq!(q.stats().await.unwrap(), Stats::default());
}

/// 10k jobs in one call (more than one statement's worth) are all stored and claimable, each
/// once.
pub(super) async fn ten_thousand_jobs_in_one_call_are_all_claimable(q: Queue) {
    let n = 10_050;
    let ids = q
        .enqueue_many((0..n).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    assert_eq!(ids.len(), n);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let mut claimed = HashSet::new();
    loop {
        let batch = q
            .protocol()
            .claim("w", 1_000, Duration::from_secs(60), &[])
            .await
            .unwrap();
        if batch.is_empty() {
            break;
        }
        for job in batch {
            let i = job.payload["n"].as_u64().unwrap() as usize;
            assert_eq!(job.id, ids[i], "job {i}");
            assert!(claimed.insert(job.id));
        }
    }
    assert_eq!(claimed.len(), n);
}

/// Keys with a uniqueness window keep the per-job semantics in a bulk call, in order: a plain
/// key finds the holder, a window that ran out makes a new job, which the next plain key
/// finds.
pub(super) async fn enqueue_many_keeps_uniqueness_windows(q: Queue) {
    let window = Duration::from_millis(200);
    let old = q
        .enqueue(Job::new(json!({})).key("w").unique_for(window))
        .await
        .unwrap();
    sleep(window + Duration::from_millis(100)).await;
    let done = q
        .enqueue_many_with_status([
            Job::new(json!({"n": 0})).key("w"),
            Job::new(json!({"n": 1})),
            Job::new(json!({"n": 2})).key("w").unique_for(window),
            Job::new(json!({"n": 3})).key("w"),
            Job::new(json!({"n": 4})).key("w").unique_for(window),
            Job::new(json!({"n": 5})),
        ])
        .await
        .unwrap();
    let got: Vec<(JobId, bool)> = done.iter().map(|e| (e.id, e.duplicate)).collect();
    assert_eq!(
        got[0],
        (old, true),
        "the old job holds the key until released"
    );
    assert!(
        !got[2].1 && got[2].0 != old,
        "the window ran out: a new job"
    );
    assert_eq!(got[3], (got[2].0, true));
    assert_eq!(got[4], (got[2].0, true), "within the new job's window");
    assert!(got[1].0 < got[2].0 && got[2].0 < got[5].0, "{got:?}");
    assert_eq!(q.stats().await.unwrap().ready, 4);
}

/// `enqueue_many_in`: in the caller's transaction, gone if it rolls back.
pub(super) async fn enqueue_many_in_follows_the_caller_s_transaction(q: Queue) {
    match (q.postgres_pool().cloned(), q.mysql_pool().cloned()) {
        (Some(pool), _) => enqueue_many_in_transactions(&q, &pool).await,
        (_, Some(pool)) => enqueue_many_in_transactions(&q, &pool).await,
        (None, None) => panic!("a queue on neither database"),
    }
}

async fn enqueue_many_in_transactions<DB: sqlx::Database>(q: &Queue, pool: &sqlx::Pool<DB>)
where
    for<'c> &'c mut sqlx::Transaction<'static, DB>: Into<Executor<'c>>,
{
    let jobs = || (0..50).map(|n| Job::new(json!({ "n": n })).key(format!("k{n}")));
    let mut tx = pool.begin().await.unwrap();
    q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 0);
    let mut tx = pool.begin().await.unwrap();
    let first = q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    let again = q.enqueue_many_in(&mut tx, jobs()).await.unwrap();
    tx.commit().await.unwrap();
    assert!(first.iter().all(|e| !e.duplicate));
    assert!(
        again
            .iter()
            .zip(&first)
            .all(|(a, f)| a.duplicate && a.id == f.id)
    );
    assert_eq!(waiting(q.stats().await.unwrap()), 50);
}

/// Concurrent bulk enqueues of the same keys: one job per key, and every call gets its id.
pub(super) async fn concurrent_bulk_enqueues_of_the_same_keys_make_one_job_each(q: Queue) {
    let tasks = (0..4).map(|_| {
        let q = q.clone();
        tokio::spawn(async move {
            q.enqueue_many((0..300).map(|n| Job::new(json!({})).key(format!("k{n}"))))
                .await
                .unwrap()
        })
    });
    let all: Vec<Vec<JobId>> = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(all.iter().all(|ids| ids == &all[0]));
    assert_eq!(all[0].iter().collect::<HashSet<_>>().len(), 300);
    assert_eq!(q.stats().await.unwrap().ready, 300);
}

/// An acknowledgement, or a hand-back, and a heartbeat of the same leases, sent at once from
/// two connections, never deadlock, and neither waits long for the other. PostgreSQL would
/// break a cycle after `deadlock_timeout` (1 s), failing one of them: there all lock the
/// leases in (segment, id) order, and the jobs of each round span three lease segments.
/// MariaDB detects a cycle at once and fails one: there each statement finds and locks its
/// rows through the primary key, in id order (it deadlocked in 6 runs of 10 when the
/// acknowledgement went through the lease index). The two statements name the jobs in
/// opposite orders.
pub(super) async fn an_acknowledgement_or_a_hand_back_and_a_heartbeat_of_the_same_jobs_never_deadlock(
    q: Queue,
) {
    let lease = Duration::from_secs(30);
    for round in 0..40 {
        q.enqueue_many((0..250).map(|n| Job::new(json!({ "n": n }))))
            .await
            .unwrap();
        let claimed = q.protocol().claim("w", 250, lease, &[]).await.unwrap();
        assert_eq!(claimed.len(), 250);
        let mut jobs: Vec<(JobId, i32)> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
        assert_eq!(
            q.protocol().confirm_started(&jobs).await.unwrap().len(),
            250
        );
        // The ending statement names the jobs newest first, the heartbeat oldest first; which
        // statement comes first alternates, and so does the ending one.
        jobs.sort();
        let beat = jobs.clone();
        jobs.reverse();
        let (ending, hand_back) = if round % 4 < 2 {
            ("acknowledgement", false)
        } else {
            ("hand-back", true)
        };
        let end = || async {
            if hand_back {
                q.protocol().hand_back(&jobs).await
            } else {
                q.protocol().complete(&jobs).await
            }
        };
        let started = Instant::now();
        let (beaten, ended) = if round % 2 == 0 {
            tokio::join!(q.protocol().heartbeat(&beat, lease), end())
        } else {
            let (ended, beaten) = tokio::join!(end(), q.protocol().heartbeat(&beat, lease));
            (beaten, ended)
        };
        let beaten = beaten.unwrap_or_else(|e| panic!("round {round}: heartbeat: {e}"));
        let ended = ended.unwrap_or_else(|e| panic!("round {round}: {ending}: {e}"));
        assert_eq!(ended, 250, "round {round}: {ending}");
        // Whichever came first, the heartbeat extended only jobs it named.
        assert!(
            beaten
                .iter()
                .all(|id| beat.iter().any(|(job, _)| job == id)),
            "round {round}: {beaten:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "round {round}: the {ending} and the heartbeat waited {:?}",
            started.elapsed()
        );
    }
    assert_eq!(q.stats().await.unwrap().running, 0);
}
