//! Leader election with three candidate processes: a killed leader is replaced by one with a
//! larger term within the TTL plus the wake-up latency; a leader frozen past its TTL is
//! replaced, and when resumed finds its task cancelled and its term stale.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lockwise::{Election, LockOptions, Locker, Role};
use lockwise_testkit::RedisNamespace;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const TTL: Duration = Duration::from_millis(600);

/// The candidate process: prints every role change as `ROLE <leader TERM | follower>`.
#[tokio::test]
async fn candidate() {
    let Ok(url) = std::env::var("LOCKWISE_ELECTION_URL") else {
        return; // run as a normal test: nothing to do
    };
    let locker = match std::env::var("LOCKWISE_ELECTION_PREFIX") {
        Ok(prefix) => Locker::new(
            lockwise::backend::redis::RedisBackend::builder(&url)
                .prefix(prefix)
                .connect()
                .await
                .unwrap(),
        ),
        Err(_) => Locker::connect(&url).await.unwrap(),
    };
    let election = Election::new(locker, "leader", LockOptions::ttl(TTL));
    let mut role = election.role();
    tokio::spawn(async move {
        while role.changed().await.is_ok() {
            let line = match *role.borrow_and_update() {
                Role::Leader { term } => format!("ROLE leader {term}"),
                Role::Follower => "ROLE follower".to_owned(),
            };
            println!("{line}");
        }
    });
    election
        .run(|_term| std::future::pending::<()>())
        .await
        .unwrap();
}

struct Candidates {
    children: Vec<Child>,
    lines: mpsc::Receiver<(usize, String, Instant)>,
}

impl Candidates {
    fn start(url: &str, prefix: Option<&str>) -> Self {
        let (tx, lines) = mpsc::channel();
        let children = (0..3)
            .map(|i| {
                let mut cmd = Command::new(std::env::current_exe().unwrap());
                cmd.args(["--exact", "candidate", "--nocapture", "--test-threads=1"])
                    .env("LOCKWISE_ELECTION_URL", url)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                if let Some(p) = prefix {
                    cmd.env("LOCKWISE_ELECTION_PREFIX", p);
                }
                let mut child = cmd.spawn().unwrap();
                let out = BufReader::new(child.stdout.take().unwrap());
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for line in out.lines().map_while(Result::ok) {
                        if let Some((_, role)) = line.split_once("ROLE ") {
                            let _ = tx.send((i, role.to_owned(), Instant::now()));
                        }
                    }
                });
                child
            })
            .collect();
        Candidates { children, lines }
    }

    /// The next role change, from any candidate.
    fn next(&self, within: Duration) -> (usize, String, Instant) {
        self.lines.recv_timeout(within).expect("a role change")
    }

    /// The next election, skipping other changes: (candidate, term, when).
    fn next_leader(&self, within: Duration) -> (usize, u64, Instant) {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let (i, role, at) = self.next(left);
            if let Some(term) = role.strip_prefix("leader ") {
                return (i, term.parse().unwrap(), at);
            }
        }
    }

    fn pid(&self, i: usize) -> Pid {
        Pid::from_raw(self.children[i].id() as i32)
    }
}

impl Drop for Candidates {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `server_lease`: how long the store keeps a lease of [`TTL`] after its holder died.
fn three_candidates(url: &str, prefix: Option<&str>, server_lease: Duration) {
    let c = Candidates::start(url, prefix);
    let (first, t1, _) = c.next_leader(Duration::from_secs(20));

    // Kill the leader: another takes over with a larger term within TTL + wake-up latency.
    let killed_at = Instant::now();
    kill(c.pid(first), Signal::SIGKILL).unwrap();
    let (second, t2, at) = c.next_leader(Duration::from_secs(10));
    assert_ne!(second, first);
    assert!(t2 > t1, "term {t2} after {t1}");
    let handoff = at - killed_at;
    eprintln!("leader killed: the next elected after {handoff:?}");
    assert!(
        handoff < server_lease + Duration::from_millis(700),
        "handoff took {handoff:?}"
    );

    // Freeze the new leader past its TTL: the third candidate is elected.
    kill(c.pid(second), Signal::SIGSTOP).unwrap();
    let (third, t3, _) = c.next_leader(Duration::from_secs(10));
    assert_ne!(third, second);
    assert!(t3 > t2);
    std::thread::sleep(TTL);

    // Resumed, the frozen leader finds its task cancelled: its term t2 is stale.
    kill(c.pid(second), Signal::SIGCONT).unwrap();
    let (who, role, _) = c.next(Duration::from_secs(5));
    assert_eq!(
        (who, role.as_str()),
        (second, "follower"),
        "the resumed leader stepped down"
    );
}

#[test]
fn three_candidates_on_the_file_backend() {
    let dir = tempfile::tempdir().unwrap();
    three_candidates(&format!("file://{}", dir.path().display()), None, TTL);
}

#[test]
fn three_candidates_on_redis() {
    let ns = RedisNamespace::new("election");
    three_candidates(ns.url(), Some(ns.prefix()), TTL);
}

/// On etcd, whose lease of a 600 ms lock is 1 s, ended up to 0.5 s late.
#[cfg(feature = "etcd")]
#[test]
fn three_candidates_on_etcd() {
    let url = format!(
        "{}/{}",
        lockwise_testkit::etcd_url().trim_end_matches('/'),
        lockwise_testkit::unique("election")
    );
    let lease = Duration::from_secs(lockwise::backend::etcd::lease_seconds(TTL).unsigned_abs());
    three_candidates(&url, None, lease + Duration::from_millis(500));
}

/// Dropping a leader's `run` future steps it down: its role says Follower again.
#[tokio::test]
async fn a_dropped_campaign_reports_follower() {
    let election = std::sync::Arc::new(Election::new(
        Locker::connect("memory:").await.unwrap(),
        "leader",
        LockOptions::ttl(Duration::from_secs(5)),
    ));
    let mut role = election.role();
    let e2 = election.clone();
    let task = tokio::spawn(async move { e2.run(|_| std::future::pending::<()>()).await });
    role.wait_for(|r| matches!(r, Role::Leader { .. }))
        .await
        .unwrap();
    task.abort();
    let _ = task.await;
    assert_eq!(*election.role().borrow(), Role::Follower);
}
