//! `--metrics-addr` on the long-running commands: a scrape while each runs sees the metric
//! families of its work move (locks under `run`, jobs under `queue work`, the group under
//! `partition`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::{PgSchema, RedisNamespace};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// A loopback address nobody listens on now.
fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The scrape page at `addr`, or `None` while nothing answers there.
fn scrape(addr: &str) -> Option<String> {
    let mut conn = TcpStream::connect(addr).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: lockwise\r\n\r\n")
        .ok()?;
    let mut page = String::new();
    conn.read_to_string(&mut page).ok()?;
    Some(page)
}

/// The value of the sample `series` (name and labels as printed) on `page`.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Scrapes `addr` until every series of `want` has a value that `ok` accepts, within 20 s;
/// panics with the last page otherwise. `child` must still be running meanwhile.
/// A series as printed, and what its value must be.
type Want<'a> = (&'a str, fn(f64) -> bool);

fn wait_for(addr: &str, child: &mut Child, want: &[Want<'_>]) -> String {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(20) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the command ended ({status}) before its metrics showed; last page:\n{last}");
        }
        if let Some(page) = scrape(addr) {
            if want
                .iter()
                .all(|(series, ok)| sample(&page, series).is_some_and(ok))
            {
                return page;
            }
            last = page;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "metrics did not show within 20 s; want {want:?}; last page:\n{last}",
        want = want.iter().map(|w| w.0).collect::<Vec<_>>()
    );
}

fn positive(v: f64) -> bool {
    v > 0.0
}

fn stop(mut child: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}

#[test]
fn run_serves_the_lock_metrics_while_it_holds_the_lock() {
    let ns = RedisNamespace::new("metrics-run");
    let (addr, key) = (free_addr(), format!("{}-k", ns.prefix()));
    let mut child = Command::new(BIN)
        .args(["run", "--url", ns.url(), "--key", &key, "--ttl", "300ms"])
        .args(["--metrics-addr", &addr, "--", "sleep", "30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let page = wait_for(
        &addr,
        &mut child,
        &[
            (
                r#"lockwise_lock_acquisitions_total{backend="redis",result="granted"}"#,
                |v| v == 1.0,
            ),
            (r#"lockwise_lock_renewals_total{backend="redis"}"#, |v| {
                v >= 2.0
            }),
            (
                r#"lockwise_lock_renewal_round_trip_seconds_count{backend="redis"}"#,
                |v| v >= 2.0,
            ),
        ],
    );
    assert!(
        page.contains("# HELP lockwise_lock_renewals_total"),
        "no help text:\n{page}"
    );
    stop(child);
}

#[test]
fn queue_work_serves_the_job_metrics_while_it_works() {
    let schema = PgSchema::new("metrics_work");
    let store = ["--url", schema.url(), "--schema", schema.name()];
    let enqueue = |payload: &str, attempts: &str| {
        let done = Command::new(BIN)
            .args(["queue", "enqueue"])
            .args(store)
            .args([
                "--queue",
                "mq",
                "--payload",
                payload,
                "--max-attempts",
                attempts,
            ])
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
    };
    for _ in 0..3 {
        enqueue(r#"{"ok":true}"#, "5");
    }
    enqueue(r#"{"fail":true}"#, "2");
    let addr = free_addr();
    let mut child = Command::new(BIN)
        .args(["queue", "work"])
        .args(store)
        .args(["--queue", "mq", "--concurrency", "1"])
        .args(["--metrics-addr", &addr])
        .args(["--", "sh", "-c", "if grep -q fail; then exit 3; fi"])
        .env("LOCKWISE_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        &addr,
        &mut child,
        &[
            (r#"lockwise_queue_jobs_claimed_total{queue="mq"}"#, |v| {
                v >= 5.0
            }),
            (r#"lockwise_queue_jobs_completed_total{queue="mq"}"#, |v| {
                v == 3.0
            }),
            (r#"lockwise_queue_jobs_failed_total{queue="mq"}"#, |v| {
                v == 2.0
            }),
            (r#"lockwise_queue_jobs_retried_total{queue="mq"}"#, |v| {
                v == 1.0
            }),
            (r#"lockwise_queue_jobs_dead_total{queue="mq"}"#, |v| {
                v == 1.0
            }),
            (r#"lockwise_queue_job_run_seconds_count{queue="mq"}"#, |v| {
                v >= 5.0
            }),
            (
                r#"lockwise_queue_job_wait_seconds_count{queue="mq"}"#,
                |v| v >= 5.0,
            ),
            (
                r#"lockwise_queue_job_wait_seconds_sum{queue="mq"}"#,
                positive,
            ),
            ("lockwise_queue_claim_round_trip_seconds_count", positive),
            (r#"lockwise_queue_depth{queue="mq",state="done"}"#, |v| {
                v == 3.0
            }),
            (r#"lockwise_queue_depth{queue="mq",state="dead"}"#, |v| {
                v == 1.0
            }),
            (r#"lockwise_queue_depth{queue="mq",state="ready"}"#, |v| {
                v == 0.0
            }),
        ],
    );
    stop(child);
}

#[test]
fn queue_work_reports_the_oldest_ready_age() {
    let schema = PgSchema::new("metrics_age");
    let store = ["--url", schema.url(), "--schema", schema.name()];
    // The busy queue's job first: the worker claims by id across its queues, runs it for
    // 30 s on its one slot and claims nothing ahead, so the waiting job stays ready.
    for queue in ["busy", "waiting"] {
        let done = Command::new(BIN)
            .args(["queue", "enqueue"])
            .args(store)
            .args(["--queue", queue, "--payload", "{}"])
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
    }
    std::thread::sleep(Duration::from_millis(1500));
    let addr = free_addr();
    let mut child = Command::new(BIN)
        .args(["queue", "work"])
        .args(store)
        .args([
            "--queue",
            "busy",
            "--queue",
            "waiting",
            "--concurrency",
            "1",
        ])
        .args([
            "--metrics-addr",
            &addr,
            "--prefetch",
            "0",
            "--grace",
            "100ms",
        ])
        .args(["--", "sh", "-c", "cat >/dev/null; sleep 30"])
        .env("LOCKWISE_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        &addr,
        &mut child,
        &[(
            r#"lockwise_queue_oldest_ready_age_seconds{queue="waiting"}"#,
            |v| v >= 1.0,
        )],
    );
    stop(child);
}

#[test]
fn partition_serves_the_group_metrics() {
    let ns = RedisNamespace::new("metrics-part");
    let group = ns.prefix().to_owned();
    let addr = free_addr();
    let mut child = Command::new(BIN)
        .args([
            "partition",
            "--url",
            ns.url(),
            "--group",
            &group,
            "--keys",
            "4",
        ])
        .args(["--ttl", "1s", "--metrics-addr", &addr, "--", "sleep", "30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let generation = format!(r#"lockwise_partition_generation{{group="{group}"}}"#);
    let members = format!(r#"lockwise_partition_members{{group="{group}"}}"#);
    let owned = format!(r#"lockwise_partition_keys_owned{{group="{group}"}}"#);
    let handoff = format!(r#"lockwise_partition_handoff_seconds_count{{group="{group}"}}"#);
    wait_for(
        &addr,
        &mut child,
        &[
            (&generation, positive),
            (&members, |v| v == 1.0),
            (&owned, |v| v == 4.0),
            (&handoff, |v| v >= 1.0),
        ],
    );
    stop(child);
}
