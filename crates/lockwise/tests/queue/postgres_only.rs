//! PostgreSQL only: the claim's plan, and LISTEN/NOTIFY waking workers.

use super::*;

/// On ANALYZEd segments holding 10k rows the claim takes the claim index's order across the
/// ready ring (a Merge Append of the segments' index scans), with the LIMIT applied (under
/// LockRows) before anything moves, and deletes the chosen rows without scanning a segment.
#[tokio::test]
async fn the_claim_plan_uses_the_index_and_limits_before_updating() {
    let (s, q) = queue("plan").await;
    q.enqueue_many((0..10_000).map(|i| Job::new(json!({ "n": i }))))
        .await
        .unwrap();
    let schema = s.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {schema}.ready")))
        .execute(q.postgres_pool().unwrap())
        .await
        .unwrap();
    let claim = claim_statement(&q, schema, "claim").await;
    let mut tx = q.postgres_pool().unwrap().begin().await.unwrap();
    // The claim functions' own setting (v5.sql).
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {claim}"
    )))
    .bind("q")
    .bind(10i64)
    .bind(30.0f64)
    .bind("w")
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let text = plan.to_string();
    // The CTE `next` is a Limit over LockRows over the merged index scans: rows are locked
    // one by one as the limit pulls them, and it stops after n.
    let ctes: Vec<&serde_json::Value> = find(&plan, &|n| n["Subplan Name"] == "CTE next");
    assert_eq!(ctes.len(), 1, "{text}");
    assert_eq!(ctes[0]["Node Type"], "Limit", "{text}");
    let lock_rows = &ctes[0]["Plans"][0];
    assert_eq!(lock_rows["Node Type"], "LockRows", "{text}");
    assert_claim_index_scans(&lock_rows["Plans"][0], &text);
    assert_deletes_by_address(&plan, &text);
}

/// The claim statement of the schema's function `function` (claim or claim_any) as
/// migrated: what follows its `RETURN QUERY`.
pub(super) async fn claim_statement(q: &Queue, schema: &str, function: &str) -> String {
    let def: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p \
         WHERE p.pronamespace = '\"{schema}\"'::regnamespace AND p.proname = '{function}'"
    )))
    .fetch_one(q.postgres_pool().unwrap())
    .await
    .unwrap();
    let start = def.find("RETURN QUERY").expect("the claim's RETURN QUERY") + 12;
    let end = def[start..].find(";\nEND").expect("the claim's end") + start;
    def[start..end].to_owned()
}

/// `node` reads every ready segment through its claim index, merged in the claim's order.
fn assert_claim_index_scans(node: &serde_json::Value, text: &str) {
    assert_eq!(node["Node Type"], "Merge Append", "{text}");
    let members = node["Plans"].as_array().unwrap();
    assert_eq!(members.len(), 16, "{text}");
    for member in members {
        let index = member["Index Name"].as_str().unwrap_or_default();
        assert!(
            index.starts_with("ready_") && index.ends_with("_queue_priority_run_at_id_idx"),
            "{text}"
        );
    }
}

/// The claim deletes from each ready segment by address (one TID scan of that segment, in a
/// `moved_<k>` CTE of its own), never by scanning a segment or its id index, nor by looking
/// an address up in another segment.
fn assert_deletes_by_address(plan: &serde_json::Value, text: &str) {
    for k in 0..16 {
        let moved = find(plan, &|n| n["Subplan Name"] == format!("CTE moved_{k}"));
        assert_eq!(moved.len(), 1, "moved_{k}: {text}");
        let scans = find(moved[0], &|n| {
            n["Node Type"].is_string()
                && n["Relation Name"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("ready"))
                && n["Operation"].is_null()
        });
        assert_eq!(scans.len(), 1, "moved_{k}: {text}");
        assert_eq!(scans[0]["Node Type"], "Tid Scan", "moved_{k}: {text}");
        assert_eq!(scans[0]["Relation Name"], format!("ready_{k}"), "{text}");
    }
}

/// A worker of several queues claims, per queue, at most n jobs from the claim index (a
/// Limit over LockRows over it), then the n first of them all.
#[tokio::test]
async fn the_claim_plan_of_several_queues_limits_each_queue_from_the_index() {
    let (s, q) = queue("plan_any").await;
    for name in ["a", "b", "c"] {
        q.named(name)
            .enqueue_many((0..3_000).map(|i| Job::new(json!({ "n": i }))))
            .await
            .unwrap();
    }
    let schema = s.name();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {schema}.ready")))
        .execute(q.postgres_pool().unwrap())
        .await
        .unwrap();
    let claim = claim_statement(&q, schema, "claim_any").await;
    let mut tx = q.postgres_pool().unwrap().begin().await.unwrap();
    // The claim functions' own setting (v5.sql).
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {claim}"
    )))
    .bind(vec!["a", "b"])
    .bind(10i64)
    .bind(30.0f64)
    .bind("w")
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let text = plan.to_string();
    let ctes: Vec<&serde_json::Value> = find(&plan, &|n| n["Subplan Name"] == "CTE next");
    assert_eq!(ctes.len(), 1, "{text}");
    let per_queue = find(ctes[0], &|n| {
        n["Node Type"] == "Limit" && n["Plans"][0]["Node Type"] == "LockRows"
    });
    assert_eq!(per_queue.len(), 1, "each queue's scan is limited: {text}");
    assert_claim_index_scans(&per_queue[0]["Plans"][0]["Plans"][0], &text);
    let chosen = find(&plan, &|n| n["Subplan Name"] == "CTE chosen");
    assert_eq!(chosen.len(), 1, "{text}");
    assert_eq!(
        chosen[0]["Node Type"], "Limit",
        "the n first of them all: {text}"
    );
    assert_deletes_by_address(&plan, &text);
}

fn find<'a>(
    v: &'a serde_json::Value,
    pred: &dyn Fn(&serde_json::Value) -> bool,
) -> Vec<&'a serde_json::Value> {
    let mut out = Vec::new();
    if pred(v) {
        out.push(v);
    }
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| out.extend(find(i, pred))),
        serde_json::Value::Object(map) => map.values().for_each(|i| out.extend(find(i, pred))),
        _ => {}
    }
    out
}

/// NOTIFY wakes an idle worker long before its (30 s) poll.
#[tokio::test]
async fn a_notification_wakes_an_idle_worker() {
    let (_s, q) = queue("notify").await;
    let stop = CancellationToken::new();
    let handled = Arc::new(tokio::sync::Notify::new());
    let h2 = handled.clone();
    let worker = tokio::spawn(
        Worker::new(q.clone())
            .poll_interval(Duration::from_secs(30))
            .run(
                move |_job| {
                    let handled = h2.clone();
                    async move {
                        handled.notify_one();
                        Ok::<_, String>(())
                    }
                },
                stop.clone(),
            ),
    );
    sleep(Duration::from_millis(500)).await; // the worker is idle, listening
    let enqueued = Instant::now();
    q.enqueue(Job::new(json!({}))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), handled.notified())
        .await
        .expect("woken by NOTIFY, not by the 30 s poll");
    assert!(enqueued.elapsed() < Duration::from_secs(5));
    stop.cancel();
    worker.await.unwrap().unwrap();
}

/// NOTIFY for any of a worker's queues wakes it.
#[tokio::test]
async fn a_notification_for_any_of_its_queues_wakes_a_worker() {
    let (_s, q) = queue("notify_any").await;
    let stop = CancellationToken::new();
    let handled = Arc::new(tokio::sync::Notify::new());
    let h2 = handled.clone();
    let worker = tokio::spawn(
        Worker::new(q.clone())
            .queues(["a", "b"])
            .poll_interval(Duration::from_secs(30))
            .run(
                move |job| {
                    assert_eq!(job.queue, "b");
                    let handled = h2.clone();
                    async move {
                        handled.notify_one();
                        Ok::<_, String>(())
                    }
                },
                stop.clone(),
            ),
    );
    sleep(Duration::from_millis(500)).await; // the worker is idle, listening
    q.named("b").enqueue(Job::new(json!({}))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), handled.notified())
        .await
        .expect("woken by NOTIFY, not by the 30 s poll");
    stop.cancel();
    worker.await.unwrap().unwrap();
}
