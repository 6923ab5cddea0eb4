//! When lockwise dies, freezes or loses its lease, the command goes first.

use super::*;

/// If lockwise is killed, the command is told to stop (its lock is no longer renewed); on
/// PostgreSQL and MariaDB, whose session lock went with lockwise's connection, it is killed
/// at once: it has no lock left to finish under.
pub(super) fn the_command_stops_when_lockwise_dies(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    child.kill().expect("SIGKILL lockwise");
    let killed = Instant::now();
    let _ = child.wait();
    let term = wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term");
    if matches!(b, Backend::Postgres(_) | Backend::Mysql(_)) {
        assert!(
            term.is_none(),
            "a SIGTERM let the command work on without the lock"
        );
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the command lived {:?} past lockwise",
            killed.elapsed()
        );
    } else {
        assert!(term.is_some(), "the orphaned command got SIGTERM");
    }
}

/// A holder frozen with SIGSTOP past its TTL loses the lock (on the databases through the
/// server-side session lease), another process acquires it, and the resumed holder finds its
/// lock lost, stops its command and exits 70.
pub(super) fn a_frozen_holder_loses_the_lock_after_its_ttl(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    let key = b.key();
    let script = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.05; done";
    let (mut frozen, mut out) = spawn_holder(&b, &key, &["--ttl", "1s"], script);
    let pid = nix::unistd::Pid::from_raw(frozen.id() as i32);
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let start = Instant::now();
    let second = lockwise(&b.url(), &key, &["--wait", "10s"], &["echo", "second"])
        .output()
        .expect("run");
    let waited = start.elapsed();
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    assert_eq!(code(&second), 0, "{second:?}");
    assert!(
        waited < Duration::from_secs(4),
        "acquired {waited:?} after the freeze"
    );
    assert!(
        wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term").is_some(),
        "the resumed holder stopped its command"
    );
    assert_eq!(frozen.wait().expect("wait").code(), Some(70));
}

/// A SIGKILL of `lockwise run` itself: the command's whole process tree gets SIGTERM at once
/// and SIGKILL after the grace (here TTL/4 = 500 ms), long before the lease could run out,
/// even a command that ignores SIGTERM and a grandchild it left in the background.
pub(super) fn no_process_outlives_a_killed_lockwise(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term' TERM; sleep 600 & echo \"grandchild $!\"; \
                  echo \"shell $$\"; echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(&b.url(), &key, &["--ttl", "2s"], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A database session's lock dies with lockwise's connection: the tree gets SIGKILL at
    // once, no grace. Elsewhere the lease outlives lockwise: SIGTERM first, then the grace.
    let session = matches!(b, Backend::Postgres(_) | Backend::Mysql(_));
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let pid_of = |out: &mut BufReader<std::process::ChildStdout>, what: &str| -> i32 {
        let line =
            wait_for_line(out, Duration::from_secs(10), |l| l.starts_with(what)).expect("pid line");
        line[what.len()..].trim().parse().expect("pid")
    };
    let grandchild = pid_of(&mut out, "grandchild ");
    let shell = pid_of(&mut out, "shell ");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let killed = Instant::now();
    child.kill().expect("SIGKILL lockwise");
    let _ = child.wait();
    assert!(
        session || wait_for_line(&mut out, Duration::from_secs(2), |l| l == "got-term").is_some(),
        "the command got SIGTERM first"
    );
    while (alive(shell) || alive(grandchild)) && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let gone = killed.elapsed();
    eprintln!("the command's tree was gone {gone:?} after the SIGKILL of lockwise");
    assert!(
        !alive(shell),
        "the command ignored SIGTERM and outlived lockwise"
    );
    assert!(!alive(grandchild), "the grandchild outlived lockwise");
    assert!(
        gone < Duration::from_millis(1_500),
        "the tree took {gone:?} to die: the lease (2 s) may have run out first"
    );
    assert!(
        !session || gone < Duration::from_millis(300),
        "the tree took {gone:?} to die, though the session's lock went with lockwise"
    );
}

/// The command exits at once but leaves a process in its group: lockwise keeps the lock for
/// it, and a SIGKILL of lockwise then still ends it within the grace.
pub(super) fn leftovers_die_with_a_killed_lockwise(b: Backend) {
    let key = b.key();
    let script = "sleep 600 & echo \"grandchild $!\"; echo started; exit 0";
    let mut child = lockwise(&b.url(), &key, &["--ttl", "2s"], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let line = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("grandchild ")
    })
    .expect("pid line");
    let grandchild: i32 = line["grandchild ".len()..].trim().parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    std::thread::sleep(Duration::from_millis(300)); // the shell is gone, the sleep is not
    assert!(alive(grandchild));
    let killed = Instant::now();
    child.kill().expect("SIGKILL lockwise");
    let _ = child.wait();
    while alive(grandchild) && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !alive(grandchild),
        "the leftover of the command outlived a killed lockwise"
    );
    assert!(
        killed.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        killed.elapsed()
    );
}

/// A lease that is not renewed (here `--no-renew`, as when every renewal fails): the command
/// gets SIGTERM a grace before the deadline and SIGKILL at it, so a waiter that gets the lock
/// when the lease runs out never works at the same time as the command, even one that ignores
/// SIGTERM.
pub(super) fn the_command_is_gone_before_the_lease_runs_out(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "trap '' TERM; echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "1s", "--no-renew"], &script);
    let waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .output()
    .expect("run");
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    assert_eq!(holder.wait().expect("wait").code(), Some(70));
    let last_of_first = stamps(&first)
        .into_iter()
        .max()
        .expect("the first command ran");
    let start_of_second = *stamps(&second).first().expect("the second command ran");
    eprintln!(
        "the first command's last write came {} µs before the second started",
        start_of_second.saturating_sub(last_of_first) / 1_000
    );
    assert!(
        last_of_first < start_of_second,
        "the first command still worked {} µs after the second started",
        (last_of_first - start_of_second) / 1_000
    );
}

/// The server forgets a live holder's lease (the key deleted, the session killed) while a
/// waiter stands by: the waiter gets the lock at once, and the holder's command must stop at
/// once too, not at the next renewal a third of the TTL later.
pub(super) fn a_forgotten_lease_stops_the_command_at_once(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "9s"], &script);
    let mut waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "20s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .spawn()
    .expect("run");
    // Let the waiter start waiting, then make the server forget the holder.
    std::thread::sleep(Duration::from_millis(300));
    let forgotten = Instant::now();
    b.delete_lock(&key);
    assert_eq!(holder.wait().expect("wait").code(), Some(70));
    let stopped = forgotten.elapsed();
    assert!(waiter.wait().expect("wait").success());
    let last_of_first: i128 = std::fs::read_to_string(&first)
        .expect("first")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .expect("the first command ran");
    let start_of_second: i128 = std::fs::read_to_string(&second)
        .expect("second")
        .trim()
        .parse()
        .expect("a time");
    let overlap_ms = (last_of_first - start_of_second) as f64 / 1e6;
    println!(
        "forgotten lease: holder's command stopped {:.1} ms after the fault; its last write \
         {overlap_ms:.1} ms after the waiter's command started (negative: before)",
        stopped.as_secs_f64() * 1e3
    );
    assert!(
        overlap_ms < 100.0,
        "the first command still worked {overlap_ms:.1} ms after the second started"
    );
}

/// R19: only `lockwise run` is frozen (SIGSTOP), not its command. The supervisor holds the
/// lease's deadline itself, so the command (which ignores SIGTERM) is dead by that deadline,
/// a rival that gets the lock after the TTL never works at the same time, and the resumed
/// lockwise exits 70 saying the lease ran out (not that it "runs out in" some time).
pub(super) fn a_frozen_lockwise_does_not_outlive_its_lease(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    use std::io::Read;
    let key = b.key();
    let ttl = Duration::from_secs(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "trap '' TERM; echo \"shell $$\"; echo started; \
         while :; do date +%s%N >> {}; sleep 0.05; done",
        first.display()
    );
    let mut holder = lockwise(
        &b.url(),
        &key,
        &["--ttl", "2s", "--kill-after", "200ms"],
        &["sh", "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn lockwise");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
    let mut err = holder.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let line = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("shell ")
    })
    .expect("shell pid");
    let shell: i32 = line["shell ".len()..].trim().parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    // Let a renewal or two go by, so that the deadline fed to the supervisor has moved.
    std::thread::sleep(Duration::from_millis(1_500));
    let pid = Pid::from_raw(holder.id() as i32);
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let frozen = Instant::now();
    let frozen_wall = wall_nanos();
    // The last renewal was sent before the freeze: the local deadline is no later than this.
    let latest_deadline = ttl - (ttl / 100 + Duration::from_millis(2));
    let rival = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &[
            "sh",
            "-c",
            &format!(
                "for i in 1 2 3 4 5 6; do date +%s%N >> {}; sleep 0.05; done",
                second.display()
            ),
        ],
    )
    .spawn()
    .expect("spawn the rival");
    while alive(shell) && frozen.elapsed() < latest_deadline + Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = frozen.elapsed();
    let rival = rival.wait_with_output().expect("rival");
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    let exited = exit_within(&mut holder, Duration::from_secs(10), &[shell]);
    let _ = kill(Pid::from_raw(shell), Signal::SIGKILL);
    let stderr = stderr.join().expect("stderr reader");
    let late_ms = (gone.as_secs_f64() - latest_deadline.as_secs_f64()) * 1e3;
    let ours = stamps(&first);
    let theirs = stamps(&second);
    let last_of_first = *ours.iter().max().expect("the command ran");
    let start_of_second = *theirs.iter().min().expect("the rival ran");
    println!(
        "frozen lockwise: its command was gone {:.1} ms after the freeze, {late_ms:.1} ms \
         after the latest possible deadline (negative: before); its last write {:.1} ms after \
         the freeze, {:.1} ms before the rival's first",
        gone.as_secs_f64() * 1e3,
        (last_of_first - frozen_wall) as f64 / 1e6,
        (start_of_second - last_of_first) as f64 / 1e6,
    );
    assert!(
        late_ms < 100.0,
        "the command of a frozen lockwise lived {late_ms:.1} ms past the lease's deadline"
    );
    assert_eq!(code(&rival), 0, "{rival:?}");
    assert!(
        last_of_first < start_of_second,
        "the frozen holder's command wrote {:.1} ms after the rival's command started",
        (last_of_first - start_of_second) as f64 / 1e6
    );
    assert_eq!(exited, Some(70), "{stderr}");
    assert!(
        stderr.contains("ran out") && !stderr.contains("runs out in"),
        "the resumed lockwise must say the lease ran out: {stderr}"
    );
}

/// The supervisor's deadline is fed by the renewals: a command that lives several TTLs is not
/// stopped, and its exit code passes through.
pub(super) fn renewals_keep_the_command_alive(b: Backend) {
    let key = b.key();
    let out = lockwise(
        &b.url(),
        &key,
        &["--ttl", "500ms", "--kill-after", "100ms"],
        &["sh", "-c", "sleep 2.5; exit 3"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 3, "{out:?}");
}
