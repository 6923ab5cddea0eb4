//! R20 on the file backend, with a real holder process: a SIGKILLed holder's lock is free at
//! once (the kernel drops a dead process's `flock`), a waiter is woken by the death, and a
//! SIGSTOPped holder still keeps its lease until its TTL runs out, exactly as before.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use lockwise::{LockOptions, Locker, Retry};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The holder process: takes `k` for `LOCKWISE_HOLDER_TTL_MS`, prints `HELD <token>`, then
/// waits for the lost signal, prints `LOST`, releases and prints `RELEASED <bool>`.
#[tokio::test]
async fn holder() {
    let Ok(dir) = std::env::var("LOCKWISE_HOLDER_DIR") else {
        return; // run as a normal test: nothing to do
    };
    let ttl: u64 = std::env::var("LOCKWISE_HOLDER_TTL_MS")
        .unwrap()
        .parse()
        .unwrap();
    let locker = Locker::connect(&format!("file://{dir}")).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_millis(ttl));
    let guard = locker.try_acquire("k", &opts).await.unwrap().expect("free");
    println!("HELD {}", guard.token());
    guard.lost().await;
    println!("LOST");
    let released = guard.release().await.unwrap();
    println!("RELEASED {released}");
    std::future::pending::<()>().await;
}

/// A holder process of `k` in `dir`; killed (after a SIGCONT) when dropped.
struct Holder {
    child: Child,
    out: BufReader<ChildStdout>,
    token: u64,
}

impl Holder {
    fn start(dir: &std::path::Path, ttl: Duration) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "holder", "--nocapture", "--test-threads=1"])
            .env("LOCKWISE_HOLDER_DIR", dir)
            .env("LOCKWISE_HOLDER_TTL_MS", ttl.as_millis().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut holder = Holder {
            child,
            out,
            token: 0,
        };
        let held = holder.line("HELD ");
        holder.token = held.parse().unwrap();
        holder
    }

    /// What follows `marker` on the next line that has it (libtest prints text of its own,
    /// some of it on the same line).
    fn line(&mut self, marker: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "the holder exited before printing {marker:?}");
            if let Some((_, rest)) = line.trim_end().split_once(marker) {
                return rest.to_owned();
            }
        }
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn url(dir: &tempfile::TempDir) -> String {
    format!("file://{}", dir.path().display())
}

#[tokio::test]
async fn file_lock_of_a_killed_holder_is_free_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let holder = Holder::start(dir.path(), Duration::from_secs(10));
    let rival = Locker::connect(&url(&dir)).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(10));
    assert!(
        rival.try_acquire("k", &opts).await.unwrap().is_none(),
        "a live holder in another process keeps the lock"
    );

    holder.signal(Signal::SIGKILL);
    let killed_at = Instant::now();
    let guard = loop {
        if let Some(guard) = rival.try_acquire("k", &opts).await.unwrap() {
            break guard;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(5),
            "the killed holder's lock is still held (its TTL is 10 s)"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let latency = killed_at.elapsed();
    println!("rival acquired {latency:?} after the SIGKILL");
    assert!(latency < Duration::from_millis(500), "took {latency:?}");
    assert!(
        guard.token().get() > holder.token,
        "token {} after the dead holder's {}",
        guard.token(),
        holder.token
    );
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn file_waiter_wakes_when_the_holder_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let holder = Holder::start(dir.path(), Duration::from_secs(10));
    let waiter = Locker::connect(&url(&dir)).await.unwrap();
    // Polls every 60 s: only an event (or the holder's TTL, 10 s) can wake it sooner.
    let opts = LockOptions::ttl(Duration::from_secs(10))
        .retry(Retry::linear(Duration::from_secs(60)))
        .wait(Duration::from_secs(20));
    let waiting = tokio::spawn(async move {
        let guard = waiter.acquire("k", &opts).await;
        (Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_millis(400)).await; // it has tried and is asleep
    assert!(
        !waiting.is_finished(),
        "the waiter must wait for the live holder"
    );

    holder.signal(Signal::SIGKILL);
    let killed_at = Instant::now();
    let (acquired_at, guard) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiter returned")
        .unwrap();
    let guard = guard.expect("the waiter acquired");
    let latency = acquired_at - killed_at;
    println!("waiter woke and acquired {latency:?} after the SIGKILL");
    assert!(latency < Duration::from_millis(500), "took {latency:?}");
    assert!(guard.token().get() > holder.token);
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn file_frozen_holder_keeps_its_lease_until_its_ttl() {
    const TTL: Duration = Duration::from_millis(1500);
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Holder::start(dir.path(), TTL);
    let rival = Locker::connect(&url(&dir)).await.unwrap();
    let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(10));

    holder.signal(Signal::SIGSTOP);
    let frozen_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        rival.try_acquire("k", &opts).await.unwrap().is_none(),
        "a frozen holder keeps its lease"
    );
    let guard = rival.acquire("k", &opts).await.unwrap();
    let after = frozen_at.elapsed();
    println!("the frozen holder lost the lock {after:?} after the SIGSTOP");
    // Its last renewal was at most TTL/3 before the freeze.
    assert!(after >= TTL * 2 / 3, "granted {after:?} after the freeze");
    assert!(
        after < TTL + Duration::from_secs(1),
        "granted {after:?} after the freeze"
    );
    assert!(guard.token().get() > holder.token);

    holder.signal(Signal::SIGCONT);
    assert_eq!(holder.line("LOST"), "");
    assert_eq!(
        holder.line("RELEASED "),
        "false",
        "the late release removes nothing"
    );
    assert!(
        guard.is_held().await.unwrap(),
        "the new holder keeps the lock"
    );
    assert!(guard.release().await.unwrap());
}
