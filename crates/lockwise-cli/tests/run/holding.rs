//! Holding a lock without a command, waiting for it, and a killed holder's lock.

use super::*;

/// `lockwise run --key K` without a command, as `etcdctl lock K`: prints the fencing token,
/// holds the lock (renewing it past its TTL) until SIGINT or SIGTERM, then releases it and
/// exits 0; a lock lost meanwhile exits 70.
pub(super) fn a_lock_is_held_without_a_command(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    let key = b.key();
    let hold = |extra: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(["run", "--url", &b.url(), "--key", &key])
            .args(extra)
            .env_remove("LOCKWISE_URL")
            .stdout(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let token = wait_for_line(&mut out, Duration::from_secs(10), |_| true).expect("a line");
        let token: u64 = token.trim().parse().expect("the fencing token");
        (child, token)
    };
    let taken = || {
        let out = lockwise(&b.url(), &key, &[], &["true"])
            .output()
            .expect("run");
        code(&out) == 75
    };
    let mut last = 0;
    for stop in [Signal::SIGINT, Signal::SIGTERM] {
        let (mut holder, token) = hold(&["--ttl", "600ms"]);
        assert!(token > last, "token {token} after {last}");
        last = token;
        std::thread::sleep(Duration::from_millis(1_000)); // past the TTL: renewed
        assert!(taken(), "the lock is held");
        kill(Pid::from_raw(holder.id() as i32), stop).expect("signal");
        assert_eq!(
            exit_within(&mut holder, Duration::from_secs(3), &[]),
            Some(0)
        );
        assert!(!taken(), "{stop}: the lock was released");
    }
    let (mut holder, _) = hold(&["--ttl", "600ms"]);
    b.delete_lock(&key);
    assert_eq!(
        exit_within(&mut holder, Duration::from_secs(3), &[]),
        Some(70)
    );
}

/// `--wait forever` waits as long as the holder holds (here 2 s), then gets the lock.
#[test]
pub(super) fn wait_forever_waits_for_the_holder() {
    let b = Backend::file();
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 2");
    let start = Instant::now();
    let waiter = lockwise(&b.url(), &key, &["--wait", "forever"], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    assert_eq!(String::from_utf8_lossy(&waiter.stdout), "second\n");
    assert!(
        start.elapsed() >= Duration::from_millis(1_500),
        "{:?}",
        start.elapsed()
    );
    assert!(holder.wait().expect("holder").success());
}

/// The backends where a holder's death frees its lock at once (file: the kernel drops a dead
/// holder's `flock`; PostgreSQL, MariaDB: the session lock dies with its connection): a
/// SIGKILL of `lockwise run` frees the lock long before its TTL, but never while its command,
/// which ignores SIGTERM and would work through a whole grace (TTL/4 = 1 s), still runs:
/// never two commands at once.
pub(super) fn a_killed_lockwise_s_lock_is_free_once_its_command_is_gone(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let script = format!(
        "trap '' TERM; echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "4s"], &script);
    // Working, not only started: a command killed at once may not have written yet.
    let working = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(&first).map_or(true, |m| m.len() == 0) && Instant::now() < working {
        std::thread::sleep(Duration::from_millis(5));
    }
    holder.kill().expect("SIGKILL lockwise");
    let killed = Instant::now();
    let _ = holder.wait();
    let waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .output()
    .expect("run");
    let waited = killed.elapsed();
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    // Past the grace, the first command is gone: its file holds its last write.
    std::thread::sleep((Duration::from_millis(1_500)).saturating_sub(killed.elapsed()));
    let last_of_first = stamps(&first)
        .into_iter()
        .max()
        .expect("the first command ran");
    let start_of_second = *stamps(&second).first().expect("the second command ran");
    eprintln!(
        "the second command started {waited:?} after the SIGKILL, {} µs after the first's last write",
        start_of_second.saturating_sub(last_of_first) / 1_000
    );
    assert!(
        last_of_first < start_of_second,
        "the first command still worked {} µs after the second started",
        (last_of_first - start_of_second) / 1_000
    );
    assert!(
        waited < Duration::from_millis(2_500),
        "the lock came free {waited:?} after the SIGKILL: the TTL (4 s), not the death, freed it"
    );
}
