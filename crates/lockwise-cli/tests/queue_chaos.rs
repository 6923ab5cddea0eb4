//! Reliability catalogue R7 and R10: `lockwise queue work` processes draining a backlog while
//! a random worker is SIGKILLed and restarted every 2 s (R7, PostgreSQL and MariaDB), and while
//! a private PostgreSQL crashes (`-m immediate`) and comes back (R10). After the drain every
//! job is done and its effect happened: lost 0, unexpected 0, and — the handler being
//! idempotent, as handlers of an at-least-once queue must be — no duplicate effect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockwise::queue::{ConnectOptions, Job, Queue};
use lockwise_testkit::{MysqlDatabase, PgSchema, PgServer};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");
const JOBS: usize = 2_000;
const WORKERS: usize = 4;
const KILL_EVERY: Duration = Duration::from_secs(2);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

/// Opens the queue on `rt`, the runtime that then uses it: a pool opened on a runtime that is
/// gone fails its next call ("the Tokio context is being shut down").
fn open(rt: &tokio::runtime::Runtime, url: &str, schema: &str) -> Queue {
    rt.block_on(async {
        lockwise::queue::connect(url, ConnectOptions::default().queue("q").schema(schema))
            .await
            .unwrap()
    })
}

fn worker(url: &str, schema: &str, effects: &std::path::Path) -> Child {
    // The effect is idempotent (a directory per job id); every execution is also logged.
    let script = format!(
        "mkdir -p {dir}/$LOCKWISE_JOB_ID; echo $LOCKWISE_JOB_ID >> {dir}.runs",
        dir = effects.display()
    );
    Command::new(BIN)
        .args([
            "queue", "work", "--url", url, "--schema", schema, "--queue", "q",
        ])
        .args(["--lease", "2s", "--concurrency", "4", "--batch", "10", "--"])
        .args(["sh", "-c", &script])
        .env_remove("LOCKWISE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Drains `JOBS` jobs with `WORKERS` workers, killing one every `KILL_EVERY`, and calling
/// `midway` once when a third is done.
fn drain_under_kills(url: &str, schema: &str, mut midway: impl FnMut()) {
    let rt = runtime();
    let queue = open(&rt, url, schema);
    let ids: BTreeSet<i64> = rt
        .block_on(queue.enqueue_many((0..JOBS).map(|n| Job::new(serde_json::json!({ "n": n })))))
        .unwrap()
        .into_iter()
        .map(|id| id.0)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let effects = dir.path().join("effects");
    std::fs::create_dir(&effects).unwrap();
    let mut workers: Vec<Child> = (0..WORKERS)
        .map(|_| worker(url, schema, &effects))
        .collect();
    let started = Instant::now();
    let mut next_kill = started + KILL_EVERY;
    let (mut kills, mut midway_done) = (0, false);
    loop {
        let stats = rt.block_on(queue.stats());
        let done = stats.as_ref().map_or(0, |s| s.done);
        if done as usize == JOBS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "not drained: {stats:?}"
        );
        if !midway_done && done as usize >= JOBS / 3 {
            midway();
            midway_done = true;
        }
        if Instant::now() >= next_kill {
            let victim = kills % WORKERS;
            workers[victim].kill().unwrap();
            workers[victim].wait().unwrap();
            workers[victim] = worker(url, schema, &effects);
            kills += 1;
            next_kill += KILL_EVERY;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let drained = started.elapsed();
    for mut w in workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let stats = rt.block_on(queue.stats()).unwrap();
    let done: BTreeSet<i64> = std::fs::read_dir(&effects)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    let runs = std::fs::read_to_string(dir.path().join("effects.runs")).unwrap();
    let executions = runs.lines().count();
    let lost = ids.difference(&done).count();
    let unexpected = done.difference(&ids).count();
    println!(
        "{JOBS} jobs, {WORKERS} workers, {kills} SIGKILLs{}: drained in {:.1} s; lost {lost}, \
         unexpected {unexpected}, duplicate effects 0 (idempotent), {} executions ({} re-run \
         after a kill); stats {stats:?}",
        if midway_done { " + 1 server crash" } else { "" },
        drained.as_secs_f64(),
        executions,
        executions.saturating_sub(JOBS),
    );
    assert!(kills >= 3, "too few kills injected ({kills})");
    assert_eq!(lost, 0);
    assert_eq!(unexpected, 0);
    assert_eq!(stats.dead, 0);
    assert_eq!(stats.running, 0);
}

#[test]
fn postgres_workers_killed_every_2s_lose_no_job() {
    let schema = PgSchema::new("chaos");
    drain_under_kills(schema.url(), schema.name(), || {});
}

#[test]
fn mariadb_workers_killed_every_2s_lose_no_job() {
    let db = MysqlDatabase::mysql("chaos");
    drain_under_kills(&db.url(), "lockwise", || {});
}

#[test]
fn a_postgres_crash_under_load_loses_no_job() {
    let mut server = PgServer::start(&[]);
    let url = server.url();
    let mut crashed = 0;
    drain_under_kills(&url, "lockwise", || {
        server.crash_and_restart();
        crashed += 1;
    });
    assert_eq!(crashed, 1, "the server crash was not injected");
}
