//! A version-3 store migrates to the ring layout with jobs in every state.

use super::*;

/// A schema at version 3 (as lockwise 0.x with the single `jobs` table left it) with jobs in
/// every state migrates to version 5 (the layout of version 4): each job keeps its state, attempt (its fencing token)
/// and payload, the running ones stay owned by their old execution and reapable, keys and
/// dead letters carry over, finished history stays readable, and new ids follow the old ones.
#[tokio::test]
pub(super) async fn a_version_3_schema_migrates_to_the_ring_layout_with_jobs_in_every_state() {
    let schema = PgSchema::new("v3");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", schema.name());
    // The channel version 3 used for this schema (the payload is the queue name).
    let channel = format!("{}_jobs", schema.name());
    let fill = |sql: &str| {
        sql.replace("{schema}", &quoted)
            .replace("{channel}", &channel)
    };
    let old = format!(
        "{}\n{}\n{}\nCREATE TABLE {quoted}.queue_migrations (version integer PRIMARY KEY);\n\
         INSERT INTO {quoted}.queue_migrations VALUES (1), (2), (3);",
        fill(include_str!("../../sql/postgres/queue/v1.sql")),
        fill(include_str!("../../sql/postgres/queue/v2.sql")),
        fill(include_str!("../../sql/postgres/queue/v3.sql")),
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let mut ids: HashMap<&str, JobId> = HashMap::new();
    for job in OLD_JOBS {
        let id = scalar_i64(
            &pool,
            format!(
                "INSERT INTO {quoted}.jobs (queue, payload, state, attempt, max_attempts, run_at, \
                 started, lease_until, worker, finished_at, idempotency_key, released_key, \
                 last_error, errors, created_at) \
                 VALUES ('q', jsonb_build_object('n', '{name}'), {columns}, \
                 CASE WHEN {attempt} > 0 AND '{name}' IN ('backoff', 'expired', 'dead') \
                      THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), \
                                                                'error', 'boom')) \
                      ELSE '[]'::jsonb END, \
                 now() - interval '3 hours') RETURNING id",
                name = job.name,
                columns = job.columns,
                attempt = job.attempt,
            ),
        )
        .await
        .unwrap();
        ids.insert(job.name, JobId(id));
    }
    // A job version 3 drew an id for and that was pruned since: its id is never reused.
    let pruned = scalar_i64(
        &pool,
        format!(
            "WITH j AS (INSERT INTO {quoted}.jobs (queue, payload) VALUES ('q', '{{}}')              RETURNING id) SELECT id FROM j"
        ),
    )
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {quoted}.jobs WHERE id = {pruned}"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let max_old = ids.values().map(|id| id.0).max().unwrap().max(pruned);

    let q = reopen(&schema).await;

    assert_eq!(
        version(&pool, &quoted).await,
        Some(LATEST),
        "the store is at the current version once opened"
    );
    let old_table: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT to_regclass('{quoted}.jobs')::text"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(old_table, None, "the version-3 table `jobs` is gone");

    // Every job kept its state, attempt and payload.
    for job in OLD_JOBS {
        let info = q
            .job(ids[job.name])
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {} is lost", job.name));
        assert_eq!(
            (info.state, info.attempt, &info.payload, info.queue.as_str()),
            (job.state, job.attempt, &json!({ "n": job.name }), "q"),
            "job {}",
            job.name
        );
    }
    assert_eq!(
        q.job(ids["backoff"])
            .await
            .unwrap()
            .unwrap()
            .last_error
            .as_deref(),
        Some("boom")
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead,
            stats.cancelled
        ),
        (2, 2, 3, 2, 1, 1),
        "{stats:?}"
    );

    // The old execution of the live job still owns it: heartbeat and complete with its
    // attempt succeed; a stale attempt does nothing.
    let live = ids["live"];
    assert_eq!(
        q.protocol()
            .heartbeat(&[(live, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![live]
    );
    assert_eq!(
        q.protocol().complete(&[(live, 0)]).await.unwrap(),
        0,
        "stale attempt"
    );
    assert_eq!(
        q.protocol().complete(&[(ids["expired"], 1)]).await.unwrap(),
        0,
        "stale attempt"
    );
    assert_eq!(q.protocol().complete(&[(live, 1)]).await.unwrap(), 1);
    assert_eq!(
        q.protocol().complete(&[(live, 1)]).await.unwrap(),
        0,
        "already done"
    );
    assert_eq!(q.job(live).await.unwrap().unwrap().state, JobState::Done);

    // The reaper gives back the two expired leases: the unconfirmed one without counting its
    // attempt (one more in its budget), the started one with it counted.
    assert_eq!(q.protocol().reap().await.unwrap(), 2);
    let unconfirmed = q.job(ids["unconfirmed"]).await.unwrap().unwrap();
    assert_eq!(
        (
            unconfirmed.state,
            unconfirmed.attempt,
            unconfirmed.max_attempts
        ),
        (JobState::Ready, 1, 6),
        "{unconfirmed:?}"
    );
    let expired = q.job(ids["expired"]).await.unwrap().unwrap();
    assert_eq!(
        (expired.state, expired.attempt, expired.max_attempts),
        (JobState::Ready, 2, 5),
        "{expired:?}"
    );
    assert_eq!(q.protocol().reap().await.unwrap(), 0);

    // Keys: the held one still names its job; the released one is kept for inspection only.
    let same = q
        .enqueue_with_status(Job::new(json!({ "n": "again" })).key("k1"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (ids["keyed"], true));
    assert_eq!(
        q.job(ids["released"])
            .await
            .unwrap()
            .unwrap()
            .key
            .as_deref(),
        Some("k2")
    );
    let fresh = q
        .enqueue_with_status(Job::new(json!({ "n": "k2 again" })).key("k2"))
        .await
        .unwrap();
    assert!(!fresh.duplicate, "the released key makes a new job");
    assert!(fresh.id.0 > max_old, "{:?} after {max_old}", fresh.id);

    // The dead letter is listed and can be retried.
    let dead = q.dead(100).await.unwrap();
    assert_eq!(
        dead.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![ids["dead"]]
    );
    assert_eq!(
        (
            dead[0].attempt,
            dead[0].last_error.as_deref(),
            &dead[0].payload
        ),
        (5, Some("gave up"), &json!({ "n": "dead" }))
    );
    assert!(q.retry(ids["dead"]).await.unwrap());
    assert!(!q.retry(ids["dead"]).await.unwrap());
    assert_eq!(
        q.job(ids["dead"]).await.unwrap().unwrap().state,
        JobState::Ready
    );

    // New ids follow every old one.
    let new = q.enqueue(Job::new(json!({ "n": "new" }))).await.unwrap();
    assert!(new.0 > max_old, "{new:?} after {max_old}");
    assert_ne!(new, fresh.id);

    // Finished history stays readable.
    let done: Vec<JobId> = q
        .list(JobState::Done, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    for name in ["done", "released", "live"] {
        assert!(done.contains(&ids[name]), "{name} in {done:?}");
    }
    let cancelled: Vec<JobId> = q
        .list(JobState::Cancelled, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(cancelled, vec![ids["cancelled"]]);

    // A claim takes every ready job, with the next attempt, and leaves the scheduled ones.
    let claimed = q
        .protocol()
        .claim("new", 100, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let attempts: HashMap<JobId, i32> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    let expected = [
        (ids["ready"], 1),
        (ids["keyed"], 1),
        (ids["unconfirmed"], 2),
        (ids["expired"], 3),
        (ids["dead"], 6),
        (fresh.id, 1),
        (new, 1),
    ];
    assert_eq!(
        attempts,
        expected.into_iter().collect::<HashMap<_, _>>(),
        "{claimed:?}"
    );
    for name in ["delayed", "backoff"] {
        let info = q.job(ids[name]).await.unwrap().unwrap();
        assert_eq!(info.state, JobState::Scheduled, "{name}");
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.running, stats.dead),
        (0, 2, 7, 0),
        "{stats:?}"
    );
}

/// The most dead row versions seen per table of the schema.
#[derive(Default)]
pub(super) struct DeadTuplePeaks(pub(super) HashMap<String, i64>);

impl DeadTuplePeaks {
    pub(super) async fn sample(&mut self, pool: &PgPool, schema: &str) {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1",
        )
        .bind(schema)
        .fetch_all(pool)
        .await
        .unwrap();
        for (table, dead) in rows {
            let peak = self.0.entry(table).or_insert(0);
            *peak = (*peak).max(dead);
        }
    }

    /// The table with the most dead tuples at any sample, and that figure.
    pub(super) fn worst(&self) -> (String, i64) {
        self.0
            .iter()
            .max_by_key(|(_, dead)| **dead)
            .map(|(table, dead)| (table.clone(), *dead))
            .unwrap_or_default()
    }
}
