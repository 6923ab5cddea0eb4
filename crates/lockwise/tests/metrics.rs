//! The metrics (see `lockwise::metrics`) move with what happens to locks and jobs: each
//! family is driven by the event it counts, on a real Redis, and read back from a recorder.
//! One test, as the recorder is global to the process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::queue::{Job, Queue};
use lockwise::{Error, FencingToken, LockOptions, Locker};
use lockwise_testkit::{PgSchema, RedisNamespace};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::Commands;

/// A series: its name and labels.
type Series = (String, Vec<(String, String)>);

/// What the recorder saw so far: each snapshot drains it, so counts are kept here.
struct Seen {
    snapshotter: Snapshotter,
    /// (name, labels) and the count (counters, histograms' samples) or the last value (gauges).
    totals: Vec<(Series, f64)>,
}

impl Seen {
    /// The total of every series named `name` whose labels include `labels`: a counter's
    /// count, a gauge's value, a histogram's number of samples.
    fn read(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        for (key, .., value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            let series: Series = (
                key.name().to_owned(),
                key.labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect::<Vec<_>>(),
            );
            let (add, value) = match value {
                DebugValue::Counter(n) => (true, n as f64),
                DebugValue::Gauge(v) => (false, v.into_inner()),
                DebugValue::Histogram(samples) => (true, samples.len() as f64),
            };
            match self.totals.iter_mut().find(|(s, _)| *s == series) {
                Some((_, total)) if add => *total += value,
                Some((_, total)) => *total = value,
                None => self.totals.push((series, value)),
            }
        }
        self.totals
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, total)| total)
            .sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_metric_moves_with_its_event() {
    let recorder = DebuggingRecorder::new();
    let mut seen = Seen {
        snapshotter: recorder.snapshotter(),
        totals: Vec::new(),
    };
    recorder.install().unwrap();
    lockwise::metrics::describe();

    let ns = RedisNamespace::new("metrics");
    let backend = || async {
        RedisBackend::builder(ns.url())
            .prefix(ns.prefix())
            .connect()
            .await
            .unwrap()
    };
    let (a, b) = (Locker::new(backend().await), Locker::new(backend().await));
    let redis = [("backend", "redis")];
    let with = |result: &'static str| [("backend", "redis"), ("result", result)];

    // Granted, busy, timeout; a wait, a hold.
    let held = a
        .acquire("k1", &LockOptions::ttl(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        b.try_acquire("k1", &LockOptions::ttl(Duration::from_secs(5)))
            .await
            .unwrap()
            .is_none()
    );
    let waited = b
        .acquire(
            "k1",
            &LockOptions::ttl(Duration::from_secs(5)).wait(Duration::from_millis(100)),
        )
        .await;
    assert!(
        matches!(waited, Err(Error::WaitTimeout { .. })),
        "{waited:?}"
    );
    held.release().await.unwrap();
    let acquisitions = "lockwise_lock_acquisitions_total";
    assert_eq!(seen.read(acquisitions, &with("granted")), 1.0);
    assert_eq!(seen.read(acquisitions, &with("busy")), 1.0);
    assert_eq!(seen.read(acquisitions, &with("timeout")), 1.0);
    assert_eq!(seen.read("lockwise_lock_wait_seconds", &redis), 1.0);
    assert_eq!(seen.read("lockwise_lock_hold_seconds", &redis), 1.0);

    // Renewals, then one refused: the server forgot the lease (deleted behind its back).
    let renewed = a
        .acquire("k2", &LockOptions::ttl(Duration::from_millis(300)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(seen.read("lockwise_lock_renewals_total", &redis) >= 2.0);
    assert!(seen.read("lockwise_lock_renewal_round_trip_seconds", &redis) >= 2.0);
    let mut conn = ns.conn();
    let _: i64 = conn.del(format!("{}:{{k2}}", ns.prefix())).unwrap();
    tokio::time::timeout(Duration::from_secs(2), renewed.lost())
        .await
        .expect("no lost signal after the lease was deleted");
    let refused = [("backend", "redis"), ("cause", "refused")];
    assert_eq!(
        seen.read("lockwise_lock_renewal_failures_total", &refused),
        1.0
    );
    assert_eq!(seen.read("lockwise_lock_losses_total", &refused), 1.0);
    drop(renewed);

    // Without renewals, a hold past the TTL: lost at the deadline, and a headroom warning.
    let unrenewed = a
        .acquire(
            "k3",
            &LockOptions::ttl(Duration::from_millis(200)).renew(false),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(unrenewed.is_lost());
    drop(unrenewed);
    let deadline = [("backend", "redis"), ("cause", "deadline")];
    assert_eq!(seen.read("lockwise_lock_losses_total", &deadline), 1.0);
    let hold = [("backend", "redis"), ("what", "hold")];
    assert_eq!(
        seen.read("lockwise_lock_ttl_headroom_warnings_total", &hold),
        1.0
    );
    // A hold well inside its TTL warns about nothing.
    let short = a
        .acquire("k4", &LockOptions::ttl(Duration::from_secs(5)).renew(false))
        .await
        .unwrap();
    short.release().await.unwrap();
    assert_eq!(
        seen.read("lockwise_lock_ttl_headroom_warnings_total", &hold),
        1.0
    );

    // A fenced write with a token below the resource's.
    let store = backend().await;
    store
        .fenced_set("res", b"new", FencingToken::new(10))
        .await
        .unwrap();
    let stale = store.fenced_set("res", b"old", FencingToken::new(9)).await;
    assert!(matches!(stale, Err(Error::StaleToken { .. })), "{stale:?}");
    assert_eq!(
        seen.read(
            "lockwise_fenced_writes_refused_total",
            &[("store", "redis")]
        ),
        1.0
    );
    ns.delete_matching(ns.prefix());

    // A queue's enqueues (not the duplicates) and its cancellations.
    let schema = PgSchema::new("metrics");
    let pool = sqlx::PgPool::connect(schema.url()).await.unwrap();
    let queue = Queue::with_schema(pool, schema.name(), "mq").unwrap();
    queue.migrate().await.unwrap();
    let job = || Job::new(serde_json::json!({}));
    let first = queue.enqueue(job().key("once")).await.unwrap();
    queue.enqueue(job().key("once")).await.unwrap();
    queue.enqueue_many([job(), job()]).await.unwrap();
    assert!(queue.cancel(first).await.unwrap());
    let mq = [("queue", "mq")];
    assert_eq!(seen.read("lockwise_queue_jobs_enqueued_total", &mq), 3.0);
    assert_eq!(seen.read("lockwise_queue_jobs_cancelled_total", &mq), 1.0);
}
