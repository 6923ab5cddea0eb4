//! `lockwise bench lock --smoke` on the local servers: every bench runs and reports lockwise
//! beside its floor. (Figures are the bench's business, never a test's: only their shape and
//! sanity are checked here.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

#[test]
fn bench_lock_smoke_measures_every_server_beside_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("lock.svg");
    let out = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--json", "--svg"])
        .arg(&svg)
        .args(["--url", "redis://127.0.0.1:6379/"])
        .args(["--url", "postgres://postgres@127.0.0.1:5432/postgres"])
        .args(["--url", "mysql://root@127.0.0.1:3306/mysql"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = report["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{report}");
    for server in servers {
        assert!(!server["version"].as_str().unwrap().is_empty(), "{server}");
    }
    let results = report["results"].as_array().unwrap();
    let mut seen = Vec::new();
    for r in results {
        let (bench, backend) = (r["bench"].as_str().unwrap(), r["backend"].as_str().unwrap());
        seen.push(format!("{bench}/{backend}"));
        assert_eq!(r["rounds"], 2, "{r}");
        assert!(r["lockwise"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(!r["unit"].as_str().unwrap().is_empty(), "{r}");
        if bench == "handoff" {
            assert!(r["floor"].is_null() && r["ratio"].is_null(), "{r}");
            let fairness = r["fairness"].as_f64().unwrap();
            assert!(fairness >= 1.0, "{r}");
            let acquired: u64 = r["per_waiter"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .sum();
            assert!(acquired > 0, "{r}");
            assert!(r["p99_us"].as_f64().unwrap() >= r["p50_us"].as_f64().unwrap());
        } else {
            let ratio = r["ratio"]["median"].as_f64().unwrap();
            assert!(ratio > 0.0 && ratio.is_finite(), "{r}");
            assert!(r["floor"]["median"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    for backend in ["redis", "postgres", "mysql"] {
        for bench in ["sequential", "concurrent", "handoff", "run"] {
            assert!(seen.contains(&format!("{bench}/{backend}")), "{seen:?}");
        }
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(
        chart.starts_with("<svg") && chart.contains("</svg>"),
        "{chart}"
    );
    for label in ["redis", "postgres", "mysql", "sequential", "concurrent"] {
        assert!(chart.contains(label), "{label} missing from the chart");
    }
}

/// On etcd: the put-if-absent transaction and the compare-and-delete as the floor, and every
/// bench beside it.
#[cfg(feature = "etcd")]
#[test]
fn bench_lock_smoke_on_etcd() {
    let out = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--json"])
        .args(["--url", "etcd://127.0.0.1:2379"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &report["servers"][0];
    assert_eq!(server["backend"], "etcd", "{report}");
    assert!(
        server["version"].as_str().unwrap().starts_with('3'),
        "{server}"
    );
    let results = report["results"].as_array().unwrap();
    for bench in ["sequential", "concurrent", "handoff", "run"] {
        let r = results
            .iter()
            .find(|r| r["bench"] == bench && r["backend"] == "etcd")
            .unwrap_or_else(|| panic!("no {bench} on etcd: {report}"));
        assert!(r["lockwise"]["median"].as_f64().unwrap() > 0.0, "{r}");
        if bench != "handoff" {
            assert!(r["floor"]["median"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
}

/// `lockwise bench lock | head -1`: the report is lost, not a panic (exit 74).
#[test]
fn a_closed_stdout_is_exit_74_not_a_panic() {
    let out = lockwise_testkit::output_to_a_closed_pipe(
        Command::new(BIN).args([
            "bench",
            "lock",
            "--smoke",
            "--url",
            "redis://127.0.0.1:6379/",
        ]),
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("their report is lost"), "{stderr}");
}

#[test]
fn a_url_without_a_floor_or_a_server_is_refused() {
    let memory = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--url", "memory:"])
        .output()
        .unwrap();
    assert_eq!(memory.status.code(), Some(64), "{memory:?}");
    let port = lockwise_testkit::closed_port();
    let refused = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--url"])
        .arg(format!("redis://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(69), "{refused:?}");
}

/// `bench queue --smoke`: the throughput bench beside its raw floor, then exercise 3: both
/// strategies at each worker count, with what is counted. The lock
/// serializes: never more than one lock-guarded worker inside a job, one job per claim; SKIP
/// LOCKED claims batches and reports the WAL and dead tuples its jobs leave.
#[test]
fn bench_queue_smoke_runs_the_lesson_s_exercise_3() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("queue.svg");
    let out = Command::new(BIN)
        .args([
            "bench",
            "queue",
            "--smoke",
            "--json",
            "--workers",
            "1,4",
            "--svg",
        ])
        .arg(&svg)
        .args(["--url", "postgres://postgres@127.0.0.1:5432/postgres"])
        .args(["--redis-url", "redis://127.0.0.1:6379/"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = report["results"].as_array().unwrap();
    // The enqueue rows come last: PostgreSQL's, then MariaDB's if it answers.
    let (enqueued, results): (Vec<_>, Vec<_>) = all.iter().partition(|r| r["bench"] == "enqueue");
    assert_eq!(results.len(), 7, "{report}");
    assert!(!enqueued.is_empty(), "{report}");
    assert_eq!(enqueued[0]["backend"], "postgres", "{report}");
    for e in &enqueued {
        assert_eq!(
            (&e["jobs"], &e["batch"]),
            (&serde_json::json!(2_000), &serde_json::json!(1_000)),
            "{e}"
        );
        assert!(e["lockwise"]["median"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["floor"]["median"].as_f64().unwrap() > 0.0, "{e}");
    }
    let drained = results[0];
    assert_eq!(
        (&drained["bench"], &drained["backlog"]),
        (&serde_json::json!("throughput"), &serde_json::json!(500)),
        "{drained}"
    );
    assert!(
        drained["ratio"]["median"].as_f64().unwrap() > 0.0,
        "{drained}"
    );
    assert!(
        drained["floor"]["median"].as_f64().unwrap() > 0.0,
        "{drained}"
    );
    // No table of lockwise's layout gets more dead row versions than two per job of the
    // backlog of 500: a ready segment (500 jobs) one per job, a lease segment (500 leases since
    // migration 12) two per lease (the confirmation and the delete). The floor's table beside
    // it, in the same schema, is not counted in lockwise's figure.
    let peak = drained["dead_tuples_peak"].as_i64().unwrap();
    assert!((0..=1_000).contains(&peak), "{drained}");
    for r in results[1..].iter().copied() {
        assert_eq!(r["bench"], "scaling", "{r}");
        assert!(r["jobs_per_s"].as_f64().unwrap() > 0.0, "{r}");
        let trips = r["round_trips_per_job"].as_f64().unwrap();
        match r["strategy"].as_str().unwrap() {
            "lock-guarded" => {
                assert_eq!(r["max_parallel"], 1, "the lock lets one worker in: {r}");
                assert_eq!(r["jobs_per_claim"], 1.0, "{r}");
                assert!(trips >= 4.0, "lock, select, update, release at least: {r}");
                assert!(r["wal_bytes_per_job"].is_null(), "{r}");
            }
            "skip-locked" => {
                assert!(r["jobs_per_claim"].as_f64().unwrap() > 1.0, "batches: {r}");
                assert!(trips < 1.0, "{r}");
                assert!(r["wal_bytes_per_job"].as_f64().unwrap() > 0.0, "{r}");
                assert!(r["dead_tuples_per_job"].as_f64().unwrap() >= 0.0, "{r}");
            }
            "partitioned" => {
                // Each worker claims only its own rows: every worker inside at once, batches.
                assert_eq!(r["max_parallel"], r["workers"], "{r}");
                assert!(r["jobs_per_claim"].as_f64().unwrap() > 1.0, "batches: {r}");
                assert!(trips < 1.0, "{r}");
            }
            other => panic!("unknown strategy {other}"),
        }
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(
        chart.starts_with("<svg") && chart.contains("skip-locked"),
        "{chart}"
    );
    let bad = Command::new(BIN)
        .args(["bench", "queue", "--smoke", "--workers", "300"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
}

/// `bench queue --sustained`: a producer holds the queue near the depth while lockwise's
/// worker, then the naive loop, run 1 ms jobs; both finish jobs, and the dead row versions of
/// the stores and the handlers' own ceiling are reported.
#[test]
fn bench_queue_sustained_smoke_reports_both_sides_and_dead_tuples() {
    let out = Command::new(BIN)
        .args(["bench", "queue", "--smoke", "--json"])
        .args([
            "--backlogs",
            "0",
            "--workers",
            "0",
            "--enqueue",
            "0",
            "--sustained",
            "1s",
        ])
        .args(["--depth", "300"])
        .args(["--url", "postgres://postgres@127.0.0.1:5432/postgres"])
        .args(["--redis-url", "redis://127.0.0.1:6379/"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{report}");
    let e = &results[0];
    assert_eq!(e["bench"], "sustained", "{e}");
    assert_eq!(
        (&e["backlog"], &e["tasks"]),
        (&serde_json::json!(300), &serde_json::json!(8)),
        "{e}"
    );
    assert_eq!(e["job_ms"], 1.0, "{e}");
    assert!(e["lockwise"]["median"].as_f64().unwrap() > 0.0, "{e}");
    assert!(e["floor"]["median"].as_f64().unwrap() > 0.0, "{e}");
    assert!(
        e["dead_tuples_peak"].as_i64().unwrap() >= e["dead_tuples_end"].as_i64().unwrap(),
        "{e}"
    );
    assert!(e["floor_dead_tuples_peak"].as_i64().unwrap() >= 0, "{e}");
    // The handlers alone: 8 tasks of 1 ms sleeps finish at most 8,000 jobs/s.
    let ceiling = e["ceiling"].as_f64().unwrap();
    assert!(ceiling > 0.0 && ceiling <= 8_000.0, "{e}");
}

/// `bench queue --sustained --retention D --mysql-url …`: the sustained load on both
/// databases, with the history pruned on both sides; PostgreSQL reports the dead tuples of
/// each table (the history's ring among them), MariaDB InnoDB's history list and the rows each
/// side's table held.
#[test]
fn bench_queue_sustained_with_retention_runs_on_both_databases() {
    let out = Command::new(BIN)
        .args(["bench", "queue", "--smoke", "--json"])
        .args([
            "--backlogs",
            "0",
            "--workers",
            "0",
            "--enqueue",
            "0",
            "--sustained",
            "2s",
            "--retention",
            "200ms",
        ])
        .args(["--depth", "300"])
        .args(["--url", "postgres://postgres@127.0.0.1:5432/postgres"])
        .args(["--redis-url", "redis://127.0.0.1:6379/"])
        .args(["--mysql-url", "mysql://root@127.0.0.1:3306/test"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{report}");
    let (pg, my) = (&results[0], &results[1]);
    for e in [pg, my] {
        assert_eq!(e["bench"], "sustained", "{e}");
        assert_eq!(e["retention_ms"], 200.0, "{e}");
        assert!(e["lockwise"]["median"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["floor"]["median"].as_f64().unwrap() > 0.0, "{e}");
    }
    assert_eq!(pg["backend"], "postgres", "{pg}");
    let tables = pg["dead_tuples_by_table"].as_array().unwrap();
    assert!(
        tables.iter().any(|t| t[0] == "done_*"),
        "the history's ring is reported: {pg}"
    );
    assert_eq!(my["backend"], "mysql", "{my}");
    assert!(my["history_list_peak"].as_i64().unwrap() >= 0, "{my}");
    // The producer holds 300 jobs, and done ones stay until pruned: the table never holds
    // fewer.
    assert!(my["rows_peak"].as_i64().unwrap() >= 300, "{my}");
}

/// `bench queue --smoke` through PgBouncer in transaction mode: the throughput bench runs on
/// both sides (the floor in the simple protocol, lockwise adapting by itself) and says so.
#[test]
fn bench_queue_throughput_smoke_through_pgbouncer() {
    let bouncer = lockwise_testkit::PgBouncer::start(lockwise_testkit::PoolMode::Transaction);
    let url = bouncer.url_of("postgres://postgres@127.0.0.1:5432/postgres");
    let out = Command::new(BIN)
        .args(["bench", "queue", "--smoke", "--json"])
        .args(["--workers", "0", "--enqueue", "0", "--url", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let drained = &report["results"][0];
    assert_eq!(drained["bench"], "throughput", "{report}");
    assert_eq!(
        drained["backend"], "postgres (transaction pooling)",
        "{drained}"
    );
    assert!(
        drained["lockwise"]["median"].as_f64().unwrap() > 0.0,
        "{drained}"
    );
    assert!(
        drained["floor"]["median"].as_f64().unwrap() > 0.0,
        "{drained}"
    );
}

/// `bench ui`: every page of the dashboard answers over HTTP on a queue of its own, each
/// beside the reads it makes; the bench's schema is dropped at the end.
#[test]
fn bench_ui_times_each_page_beside_its_reads() {
    let done = Command::new(env!("CARGO_BIN_EXE_lockwise"))
        .args(["bench", "ui", "--jobs", "300", "--samples", "2", "--json"])
        .output()
        .unwrap();
    assert!(done.status.success(), "{done:?}");
    let pages: Vec<serde_json::Value> = String::from_utf8(done.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let paths: Vec<&str> = pages.iter().map(|p| p["page"].as_str().unwrap()).collect();
    assert_eq!(
        (paths[0], paths[1], paths[2], paths[4]),
        (
            "/queues",
            "/jobs?queue=bench&state=ready",
            "/jobs?queue=bench&state=ready&page=5",
            "/dead?queue=bench"
        ),
        "{paths:?}"
    );
    assert!(paths[3].starts_with("/jobs/"), "{paths:?}");
    for page in &pages {
        for field in ["p50_ms", "p99_ms", "floor_p50_ms", "ratio"] {
            assert!(page[field].as_f64().unwrap() > 0.0, "{page}");
        }
        assert_eq!(page["samples"], 2);
    }
}
