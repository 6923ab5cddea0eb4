//! `lockwise lab` end to end: every scenario on the file backend, on Redis and (where it
//! applies) on PostgreSQL and etcd, judged from the JSON it prints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::{closed_port, postgres_url, redis_url};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

enum Backend {
    File(tempfile::TempDir),
    Redis,
    Postgres,
    /// The shared etcd, under a prefix of the test's own.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    Etcd(String),
}

impl Backend {
    fn file() -> Self {
        Backend::File(tempfile::tempdir().unwrap())
    }

    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    fn etcd() -> Self {
        Backend::Etcd(format!(
            "{}/{}/",
            lockwise_testkit::etcd_url().trim_end_matches('/'),
            lockwise_testkit::unique("lab")
        ))
    }

    fn url(&self) -> String {
        match self {
            Backend::File(dir) => format!("file://{}", dir.path().display()),
            Backend::Redis => redis_url(),
            Backend::Postgres => postgres_url(),
            Backend::Etcd(url) => url.clone(),
        }
    }
}

/// Runs `lockwise lab <args> --json`; returns the exit code and the document.
fn lab(backend: &Backend, args: &[&str]) -> (i32, Value) {
    let out = Command::new(BIN)
        .arg("lab")
        .args(args)
        .args(["--json", "--url", &backend.url()])
        .args(["--queue-url", &postgres_url()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout must hold one JSON document ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

fn variant<'a>(doc: &'a Value, name_starts: &str) -> &'a Value {
    doc["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str().unwrap().starts_with(name_starts))
        .unwrap_or_else(|| panic!("no variant {name_starts:?} in {doc:#}"))
}

fn verdict(v: &Value, field: &str) -> u64 {
    v["verdict"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("verdict has no integer {field}: {v:#}"))
}

fn did(v: &Value, process: &str, kind: &str) -> bool {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["process"] == process && e["what"]["kind"] == kind)
}

fn together(v: &Value, a: &str, b: &str) -> bool {
    v["verdict"]["overlaps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| {
            let ps = o["processes"].as_array().unwrap();
            ps.iter().any(|p| p == a) && ps.iter().any(|p| p == b)
        })
}

/// Every event of an actor comes from that actor's own process, never from the lab.
fn events_come_from_the_actors(doc: &Value) {
    for v in doc["variants"].as_array().unwrap() {
        // The pid in each actor's events is the pid of the process the lab started for it.
        let started = v["actors"].as_object().unwrap();
        assert!(!started.is_empty(), "{v:#}");
        for e in v["events"].as_array().unwrap() {
            if e["process"] != "lab" {
                let process = e["process"].as_str().unwrap();
                assert_eq!(
                    e["pid"], started[process],
                    "{process}'s event came from elsewhere"
                );
            }
        }
        let mut pids = std::collections::HashMap::new();
        for e in v["events"].as_array().unwrap() {
            let (process, pid) = (e["process"].as_str().unwrap(), e["pid"].as_u64().unwrap());
            assert_ne!(pid, 0);
            if let Some(seen) = pids.insert(process.to_owned(), pid) {
                assert_eq!(seen, pid, "{process} changed pid");
            }
        }
        let lab = pids.remove("lab");
        let mut actors: Vec<u64> = pids.values().copied().collect();
        let n = actors.len();
        actors.sort_unstable();
        actors.dedup();
        assert_eq!(actors.len(), n, "every actor is its own process");
        assert!(lab.is_none_or(|lab| !actors.contains(&lab)));
    }
}

fn assert_predicted(code: i32, doc: &Value) {
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["as_predicted"], true, "{doc:#}");
    events_come_from_the_actors(doc);
}

/// The lesson's exercise 1. At half its timeline (TTL 500 ms, pause 1 s) but on etcd, whose
/// leases are whole seconds; the default timeline runs in `all_scenarios_in_one_document`.
fn expiry(backend: Backend) {
    let fast: &[&str] = match backend {
        Backend::Etcd(..) => &[],
        _ => &["--ttl", "500ms", "--pause", "1s"],
    };
    let (code, doc) = lab(&backend, &[&["expiry"], fast].concat());
    assert_predicted(code, &doc);
    let plain = variant(&doc, "no renewal");
    assert_eq!(verdict(plain, "max_inside_at_once"), 2);
    assert_eq!(verdict(plain, "entered"), 2);
    assert!(together(plain, "A", "B"));
    let short = variant(&doc, "renewal: work twice");
    assert_eq!(verdict(short, "max_inside_at_once"), 1);
    let long = variant(&doc, "renewal: a pause longer");
    assert_eq!(verdict(long, "max_inside_at_once"), 2);
    let recheck = variant(&doc, "re-check ownership");
    assert!(did(recheck, "A", "aborted"), "A aborted: {recheck:#}");
    assert!(!did(recheck, "A", "enter"));
    assert_eq!(verdict(recheck, "max_inside_at_once"), 1);
    let after = variant(&doc, "re-check, then a pause");
    assert_eq!(verdict(after, "max_inside_at_once"), 2);
}

#[test]
fn expiry_on_file() {
    expiry(Backend::file());
}

#[test]
fn expiry_on_redis() {
    expiry(Backend::Redis);
}

#[test]
fn expiry_on_postgres() {
    expiry(Backend::Postgres);
}

#[cfg(feature = "etcd")]
#[test]
fn expiry_on_etcd() {
    expiry(Backend::etcd());
}

#[test]
fn expiry_variant_flags_select_variants() {
    let (code, doc) = lab(&Backend::file(), &["expiry", "--recheck"]);
    assert_predicted(code, &doc);
    let names: Vec<&str> = doc["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("re-check")), "{names:?}");
}

fn unsafe_release(backend: Backend) {
    let (code, doc) = lab(&backend, &["unsafe-release"]);
    assert_predicted(code, &doc);
    let naive = variant(&doc, "release by plain DEL");
    assert_eq!(verdict(naive, "wrong_deletions"), 1);
    assert!(together(naive, "B", "C"), "B and C together: {naive:#}");
    assert_eq!(verdict(naive, "entered"), 3);
    let token = variant(&doc, "release with the owner token");
    assert_eq!(verdict(token, "wrong_deletions"), 0);
    assert!(did(token, "C", "refused"));
    assert!(!did(token, "C", "enter"));
}

#[test]
fn unsafe_release_on_file() {
    unsafe_release(Backend::file());
}

#[test]
fn unsafe_release_on_redis() {
    unsafe_release(Backend::Redis);
}

#[cfg(feature = "etcd")]
#[test]
fn unsafe_release_on_etcd() {
    unsafe_release(Backend::etcd());
}

fn check_then_delete(backend: Backend, iterations: &str) {
    let (code, doc) = lab(&backend, &["check-then-delete", "--iterations", iterations]);
    assert_predicted(code, &doc);
    assert!(verdict(variant(&doc, "GET, compare, then DEL"), "wrong_deletions") >= 1);
    assert_eq!(
        verdict(variant(&doc, "compare-and-delete"), "wrong_deletions"),
        0
    );
}

#[test]
fn check_then_delete_on_file() {
    check_then_delete(Backend::file(), "20");
}

#[test]
fn check_then_delete_on_redis() {
    check_then_delete(Backend::Redis, "20");
}

/// On etcd the delay covers the window in which the server ends the lease (about 1.5 s), so
/// every iteration takes that long: 3 of them.
#[cfg(feature = "etcd")]
#[test]
fn check_then_delete_on_etcd() {
    check_then_delete(Backend::etcd(), "3");
}

/// A window too narrow to hit the race says so, once, and how to hit it.
#[test]
fn a_race_not_hit_says_how_to_hit_it() {
    let (_, doc) = lab(
        &Backend::file(),
        &["check-then-delete", "--gap", "100us", "--iterations", "2"],
    );
    let v = variant(&doc, "GET, compare, then DEL");
    let outcome = v["outcome"].to_string();
    if verdict(v, "wrong_deletions") == 0 {
        assert!(outcome.contains("not hit"), "{outcome}");
        assert!(outcome.contains("--gap 5ms"), "{outcome}");
    }
    assert!(
        !outcome.to_lowercase().contains("not as predicted"),
        "the outcome repeats the verdict: {outcome}"
    );
}

fn fencing(backend: Backend) {
    let (code, doc) = lab(&backend, &["fencing"]);
    assert_predicted(code, &doc);
    let v = variant(&doc, "a fencing token");
    assert_eq!(verdict(v, "stale_writes_rejected"), 1);
    assert_eq!(verdict(v, "stale_writes_accepted"), 0);
    assert_eq!(verdict(v, "max_inside_at_once"), 2);
}

#[test]
fn fencing_on_file() {
    fencing(Backend::file());
}

#[test]
fn fencing_on_redis() {
    fencing(Backend::Redis);
}

#[test]
fn fencing_on_postgres() {
    fencing(Backend::Postgres);
}

/// A holder frozen past its etcd lease: its late write through the fence is refused.
#[cfg(feature = "etcd")]
#[test]
fn fencing_on_etcd() {
    fencing(Backend::etcd());
}

/// R1/R2 of the reliability catalogue, shortened for CI (`scripts/soak` runs 500 rounds):
/// rounds of a holder frozen 1-3 TTLs, token releases and fenced writes.
fn pauses(backend: Backend, ttl: &str, rounds: u64) {
    let (code, doc) = lab(
        &backend,
        &["pauses", "--ttl", ttl, "--iterations", &rounds.to_string()],
    );
    assert_predicted(code, &doc);
    let v = variant(&doc, &format!("{rounds} rounds"));
    let froze = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["what"]["kind"] == "note"
                && e["what"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("frozen"))
        })
        .count() as u64;
    assert_eq!(froze, rounds, "one freeze per round");
    assert_eq!(verdict(v, "wrong_deletions"), 0);
    assert_eq!(verdict(v, "stale_writes_accepted"), 0);
    assert_eq!(verdict(v, "stale_writes_rejected"), rounds);
    println!(
        "pauses: {froze} freezes injected, 0 wrong deletions, 0 stale writes accepted, {} rejected",
        verdict(v, "stale_writes_rejected")
    );
}

#[test]
fn pauses_on_redis() {
    pauses(Backend::Redis, "300ms", 12);
}

#[test]
fn pauses_on_postgres() {
    pauses(Backend::Postgres, "300ms", 12);
}

/// On etcd, with its whole-second leases: 4 rounds of a 1 s TTL.
#[cfg(feature = "etcd")]
#[test]
fn pauses_on_etcd() {
    pauses(Backend::etcd(), "1s", 4);
}

#[test]
fn queue_crash_on_postgres() {
    let (code, doc) = lab(&Backend::file(), &["queue-crash"]);
    assert_predicted(code, &doc);
    let v = &doc["variants"][0];
    assert_eq!(verdict(v, "jobs_lost"), 0);
    assert_eq!(verdict(v, "jobs_done_twice"), 0);
    assert_eq!(verdict(v, "attempts_over_max"), 0);
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["what"]["kind"] == "job_attempt" && e["what"]["attempt"] == 2),
        "a job of the killed worker ran again"
    );
}

#[test]
fn session_backends_say_the_wrong_release_does_not_apply() {
    let (code, doc) = lab(&Backend::Postgres, &["unsafe-release"]);
    assert_eq!(code, 69, "{doc:#}");
    assert!(doc["not_run"].as_str().unwrap().contains("not applicable"));
    assert_eq!(doc["as_predicted"], false);
}

#[test]
fn queue_crash_without_postgres_is_not_run_never_passed() {
    let out = Command::new(BIN)
        .args(["lab", "queue-crash", "--json", "--queue-url"])
        .arg(format!("postgres://postgres@127.0.0.1:{}/x", closed_port()))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(69), "{doc:#}");
    assert!(doc["not_run"].as_str().unwrap().starts_with("NOT RUN"));
    assert_eq!(doc["as_predicted"], false);
    assert!(doc["variants"].as_array().unwrap().is_empty());
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["lab", "--ttl", "2s", "--pause", "1s"][..],
        &["lab", "--url", "memory:"],
        &["lab", "--ttl", "10ms"],
        &["lab", "nonsense"],
        &["lab", "--iterations", "0"],
        &["lab", "fencing", "--renew"],
        &["lab", "check-then-delete", "--recheck"],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn text_report_shows_the_timeline_and_the_verdict() {
    let backend = Backend::file();
    let out = Command::new(BIN)
        .args(["lab", "fencing", "--url", &backend.url()])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    for needle in [
        "acquired: true (token 1)",
        "A frozen with SIGSTOP",
        "writes with token 1: REJECTED",
        "verdict: 2 inside at once",
        "AS PREDICTED",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

/// SIGTERM while an actor is frozen: the lab resumes and kills every child, none stays stopped.
#[test]
fn sigterm_leaves_no_child_behind() {
    let backend = Backend::file();
    let url = backend.url();
    let mut child = Command::new(BIN)
        .args([
            "lab", "expiry", "--ttl", "1s", "--pause", "30s", "--url", &url,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The report is printed per scenario; wait until an actor exists and has been frozen.
    let started = Instant::now();
    let actors = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                // An actor gets its URL in its environment (never on its command line).
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("lab-actor"));
                cmdline
                    && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| {
                        String::from_utf8_lossy(&e)
                            .split('\0')
                            .any(|v| v == format!("LOCKWISE_LAB_ACTOR_URL={url}"))
                    })
            })
            .collect()
    };
    let stopped = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('T')
        })
    };
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no frozen actor appeared"
        );
        if actors().into_iter().any(stopped) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    drop(stdout);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !actors().is_empty() {
        assert!(
            Instant::now() < deadline,
            "actors left behind: {:?}",
            actors()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With no scenario every one runs; one that cannot run is listed as not run, never as passed,
/// and does not fail the others.
#[test]
fn all_scenarios_in_one_document() {
    let backend = Backend::file();
    let out = Command::new(BIN)
        .args([
            "lab",
            "--json",
            "--iterations",
            "5",
            // The document's shape is what is checked here (each scenario at the lesson's
            // defaults has a test of its own): short leases keep it to ~11 s (22 s at the defaults).
            "--ttl",
            "300ms",
            "--pause",
            "600ms",
            "--url",
            &backend.url(),
        ])
        .arg("--queue-url")
        .arg(format!("postgres://postgres@127.0.0.1:{}/x", closed_port()))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    let scenarios = doc["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "expiry",
            "unsafe-release",
            "check-then-delete",
            "fencing",
            "partition",
            "queue-crash"
        ]
    );
    for s in &scenarios[..5] {
        assert_eq!(s["as_predicted"], true, "{s:#}");
    }
    assert_eq!(scenarios[5]["as_predicted"], false);
    assert!(
        scenarios[5]["not_run"]
            .as_str()
            .unwrap()
            .starts_with("NOT RUN")
    );
}

#[test]
fn an_unreachable_lock_server_stops_the_lab_with_69_and_a_json_error() {
    let out = Command::new(BIN)
        .args(["lab", "expiry", "--json", "--url"])
        .arg(format!("redis://127.0.0.1:{}", closed_port()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    // With --json, every failure is one JSON document on stdout too.
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exit_code"], 69, "{doc}");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("cannot use redis://")
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot use redis://"));
    let out = Command::new(BIN)
        .args(["lab", "--json", "--ttl", "10ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["exit_code"], 64, "{doc}");
}

#[test]
fn the_queue_server_is_named_when_the_lock_backend_is_not_postgres() {
    let backend = Backend::file();
    let out = Command::new(BIN)
        .args(["lab", "queue-crash", "--url", &backend.url(), "--queue-url"])
        .arg(postgres_url())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("queue-crash runs on postgres://")),
        "{text}"
    );
}

#[test]
fn a_user_directory_is_left_as_it_was() {
    let backend = Backend::file();
    let (code, doc) = lab(&backend, &["fencing"]);
    assert_predicted(code, &doc);
    let Backend::File(dir) = &backend else {
        unreachable!()
    };
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `lockwise lab scaling` (on demand): the lesson's exercise 3 measured, the three strategies
/// with their table. The lock-guarded queue's prediction is structural (one worker inside at a
/// time, no gain from more workers) and is checked; SKIP LOCKED's speed-up is the bench's
/// business and only reported here.
#[test]
fn scaling_reports_both_strategies_and_the_lock_serializes() {
    let (_code, doc) = lab(&Backend::file(), &["scaling", "--round", "300ms"]);
    assert_eq!(doc["scenario"], "scaling", "{doc}");
    // Measured on PostgreSQL and Redis whatever the lock backend (file here): said so.
    assert_eq!(doc["backend"], "postgres + redis", "{doc}");
    let lock = variant(&doc, "lock-guarded");
    assert_eq!(lock["as_predicted"], true, "{lock}");
    let skip = variant(&doc, "skip-locked");
    let remarks: Vec<&str> = skip["remarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        remarks[0].contains("jobs/s") && remarks.len() >= 5,
        "{remarks:?}"
    );
    assert!(
        remarks.iter().any(|r| r.contains("by structure")),
        "{remarks:?}"
    );
    println!("scaling: {}", skip["outcome"]);
    // The partitioned strategy is measured beside them, every worker on its own rows.
    let part = variant(&doc, "partitioned");
    assert!(part["remarks"].as_array().unwrap().len() >= 5, "{part}");
    println!("scaling, partitioned: {}", part["outcome"]);
}

/// Key partitioning: a member frozen during a rebalance; the generation fence rejects its
/// late writes, and the live members never work on one key together.
fn partition(backend: Backend) {
    let (code, doc) = lab(&backend, &["partition"]);
    assert_predicted(code, &doc);
    let v = variant(&doc, "a member frozen during a rebalance");
    assert!(verdict(v, "stale_writes_rejected") >= 1);
    assert_eq!(verdict(v, "stale_writes_accepted"), 0);
    assert!(!together(v, "A", "C"));
    assert!(did(v, "B", "write"));
}

#[test]
fn partition_on_redis() {
    partition(Backend::Redis);
}

#[test]
fn partition_on_postgres() {
    partition(Backend::Postgres);
}

#[test]
fn partition_on_file() {
    partition(Backend::file());
}

/// `lockwise lab | head -1`: the reader goes away, the lab stops with exit 74 after the
/// scenario it was printing, cleans up, and does not panic.
#[test]
fn a_closed_stdout_stops_the_lab_with_exit_74() {
    let backend = Backend::file();
    let lab = || {
        let mut command = Command::new(BIN);
        command.args(["lab", "fencing", "--url", &backend.url()]);
        command
    };
    let out = lockwise_testkit::output_to_a_closed_pipe(&mut lab(), false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    // `lockwise lab 2>&1 | head`: stderr is gone too; the exit code still tells.
    let out = lockwise_testkit::output_to_a_closed_pipe(&mut lab(), true);
    assert_eq!(out.status.code(), Some(74));
}
