//! RELIABILITY R17: `lockwise run` answers within its documented bounds while its link to the
//! lock server is cut (a partition through the testkit's TCP proxy, which holds every byte):
//! `--wait` is a deadline, and a release gives up after the call timeout (5 s).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufReader;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::proxy::TcpProxy;
use lockwise_testkit::{MysqlDatabase, PgDatabase, RedisNamespace, wait_for_line};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// A lock server for one test: its URL, the same URL through a proxy, and a unique key.
struct Server {
    url: String,
    port: u16,
    key: String,
    _keep: Box<dyn std::any::Any>,
}

impl Server {
    fn redis() -> Self {
        let ns = RedisNamespace::new("partition");
        Server {
            url: ns.url().to_owned(),
            port: 6379,
            key: format!("{}-job", ns.prefix()),
            _keep: Box::new(ns),
        }
    }

    fn postgres() -> Self {
        let db = PgDatabase::postgres("partition");
        Server {
            url: db.url(),
            port: 5432,
            key: format!("{}-job", db.name()),
            _keep: Box::new(db),
        }
    }

    fn mysql() -> Self {
        let db = MysqlDatabase::mysql("partition");
        Server {
            url: db.url(),
            port: 3306,
            key: format!("{}-job", db.name()),
            _keep: Box::new(db),
        }
    }

    /// The URL through `proxy`.
    fn through(&self, proxy: &TcpProxy) -> String {
        let direct = format!(":{}/", self.port);
        assert!(self.url.contains(&direct), "{}", self.url);
        self.url.replace(&direct, &format!(":{}/", proxy.port()))
    }
}

fn run(url: &str, key: &str, extra: &[&str], cmd: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--url", url, "--key", key])
        .args(extra)
        .arg("--")
        .args(cmd)
        .env_remove("LOCKWISE_URL");
    c
}

/// A waiter with `--wait 3s` whose link is cut while it waits ends by its deadline.
fn a_waiter_ends_at_its_wait_deadline(server: Server) {
    let mut holder = run(
        &server.url,
        &server.key,
        &[],
        &["sh", "-c", "echo started; sleep 30"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("holder");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("holder started");

    let proxy = TcpProxy::start(server.port);
    let start = Instant::now();
    let mut waiter = run(
        &server.through(&proxy),
        &server.key,
        &["--wait", "3s"],
        &["true"],
    )
    .stderr(Stdio::piped())
    .spawn()
    .expect("waiter");
    std::thread::sleep(Duration::from_millis(1_000)); // connected, and waiting
    proxy.cut();
    let status = loop {
        if let Some(status) = waiter.try_wait().expect("wait") {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let held = proxy.held();
    proxy.heal();
    let _ = holder.kill();
    let _ = holder.wait();
    let Some(status) = status else {
        let _ = waiter.kill();
        panic!("the waiter with --wait 3s was still waiting 20 s later");
    };
    assert!(
        held > 0,
        "the cut held no traffic: the fault did not happen"
    );
    eprintln!("waiter with --wait 3s ended after {took:?} with {status:?}; {held} chunks held");
    assert!(
        matches!(status.code(), Some(69 | 75)),
        "{status:?}: not obtained (75) or backend failure (69)"
    );
    assert!(
        took < Duration::from_millis(4_500),
        "the waiter ended {took:?} after it started with --wait 3s"
    );
}

/// A holder whose link is cut as its command ends: the release gives up after 5 s and
/// `lockwise run` exits with the command's code (the lease's TTL removes the lock).
fn a_release_ends_within_the_call_timeout(server: Server) {
    let proxy = TcpProxy::start(server.port);
    let mut holder = run(
        &server.through(&proxy),
        &server.key,
        &["--ttl", "60s"],
        &["sh", "-c", "echo started; sleep 1; exit 3"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("holder");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let cut = Instant::now();
    proxy.cut();
    let status = loop {
        if let Some(status) = holder.try_wait().expect("wait") {
            break Some(status);
        }
        if cut.elapsed() > Duration::from_secs(30) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = cut.elapsed();
    let held = proxy.held();
    proxy.heal();
    let Some(status) = status else {
        let _ = holder.kill();
        panic!("lockwise run was still releasing 30 s into the partition");
    };
    assert!(
        held > 0,
        "the cut held no traffic: the fault did not happen"
    );
    eprintln!("holder ended {took:?} after the cut (1 s of command); {held} chunks held");
    assert_eq!(status.code(), Some(3), "the command's own exit code");
    assert!(
        took < Duration::from_millis(7_500),
        "lockwise run ended {took:?} after the cut (1 s of command, 5 s of release)"
    );
}

/// A one-shot queue command whose statement gets no answer (its reply held by the proxy: the
/// link is cut after the request went out) ends with exit 69 at its 10 s bound.
fn a_queue_command_ends_within_its_bound(server: Server) {
    let proxy = TcpProxy::start(server.port);
    let mut url = server.through(&proxy);
    if url.starts_with("postgres") {
        url.push_str("?sslmode=disable"); // plaintext, so the proxy can see the statement
    }
    let command = |sub: &str, args: &[&str]| {
        Command::new(BIN)
            .args(["queue", sub, "--url", &url])
            .args(args)
            .env_remove("LOCKWISE_URL")
            .env_remove("LOCKWISE_SCHEMA")
            .output()
            .unwrap()
    };
    let stats = || command("stats", &["--queue", "q"]);
    // stats creates nothing: the store must exist first.
    let migrated = command("migrate", &[]);
    assert!(migrated.status.success(), "{migrated:?}");
    assert!(stats().status.success(), "stats answers through the proxy");
    proxy.hold_replies_after(b"Job counts of one queue");
    let started = Instant::now();
    let out = stats();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "queue stats whose answer never comes: exit {:?} after {took:?}: {}",
        out.status.code(),
        stderr.trim()
    );
    assert!(proxy.held() > 0, "no reply was held");
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    assert!(stderr.contains("no answer"), "{stderr}");
}

/// A `lockwise queue work` cut off from its database (lease 2 s) kills its handler's process
/// tree at the job's local deadline, before the database can give the job to another worker:
/// the two executions of the job never overlap.
fn a_cut_off_worker_kills_its_handler_before_the_rescue(server: Server) {
    let proxy = TcpProxy::start(server.port);
    let mut url = server.through(&proxy);
    if url.starts_with("postgres") {
        url.push_str("?sslmode=disable");
    }
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    // Attempt 1 writes a timestamp every 5 ms for a long time; attempt 2 records its start.
    let script = format!(
        "if [ \"$LOCKWISE_JOB_ATTEMPT\" = 1 ]; then \
           while true; do date +%s%N >> {first}; sleep 0.005; done; \
         else date +%s%N > {second}; fi",
        first = first.display(),
        second = second.display()
    );
    let work = |url: &str| {
        Command::new(BIN)
            .args([
                "queue", "work", "--url", url, "--queue", "q", "--lease", "2s",
            ])
            .args(["--", "sh", "-c", &script])
            .env_remove("LOCKWISE_URL")
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let enqueue = Command::new(BIN)
        .args(["queue", "enqueue", "--url", &server.url, "--queue", "q"])
        .args(["--payload", "{}", "--max-attempts", "5"])
        .env_remove("LOCKWISE_URL")
        .output()
        .unwrap();
    assert!(enqueue.status.success(), "{enqueue:?}");
    let mut cut_off = work(&url);
    let until = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&first).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < until, "the first attempt never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.cut();
    let cut = Instant::now();
    let mut rescuer = work(&server.url);
    while !second.exists() {
        assert!(
            cut.elapsed() < Duration::from_secs(30),
            "the job was never rescued"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100)); // let the second write land
    let read = |path: &std::path::Path| -> Vec<i128> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let last_of_first = read(&first).into_iter().max().unwrap();
    let start_of_second = read(&second).into_iter().max().unwrap();
    let gap_ms = (start_of_second - last_of_first) as f64 / 1e6;
    println!(
        "queue worker cut off: its handler's last write {gap_ms:.0} ms before the rescued \
         attempt started ({} chunks held by the cut)",
        proxy.held()
    );
    assert!(proxy.held() > 0, "the cut held no traffic");
    assert!(
        gap_ms > 0.0,
        "the cut-off handler still ran {:.0} ms after the rescued attempt started",
        -gap_ms
    );
    for child in [&mut cut_off, &mut rescuer] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

mod queue_cut {
    #[test]
    fn postgres() {
        super::a_cut_off_worker_kills_its_handler_before_the_rescue(super::Server::postgres());
    }

    #[test]
    fn mysql() {
        super::a_cut_off_worker_kills_its_handler_before_the_rescue(super::Server::mysql());
    }
}

mod queue {
    #[test]
    fn postgres() {
        super::a_queue_command_ends_within_its_bound(super::Server::postgres());
    }

    #[test]
    fn mysql() {
        super::a_queue_command_ends_within_its_bound(super::Server::mysql());
    }
}

macro_rules! on_servers {
    ($($case:ident),*) => {
        mod redis { $(#[test] fn $case() { super::$case(super::Server::redis()) })* }
        mod postgres { $(#[test] fn $case() { super::$case(super::Server::postgres()) })* }
        mod mysql { $(#[test] fn $case() { super::$case(super::Server::mysql()) })* }
    };
}

on_servers!(
    a_waiter_ends_at_its_wait_deadline,
    a_release_ends_within_the_call_timeout
);
