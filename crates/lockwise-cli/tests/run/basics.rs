//! Exclusion, tokens, exit codes, signals, and the lock held for the whole process group.

use super::*;

pub(super) fn two_runs_exclude_each_other(b: Backend) {
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 1.5");
    let start = Instant::now();
    let refused = lockwise(&b.url(), &key, &[], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&refused), 75, "{refused:?}");
    assert!(
        refused.stdout.is_empty(),
        "the refused run printed to stdout"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "--wait unset answers at once"
    );
    let custom = lockwise(&b.url(), &key, &["--conflict-exit-code", "9"], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&custom), 9);
    let waited = lockwise(&b.url(), &key, &["--wait", "10s"], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&waited), 0, "{waited:?}");
    assert_eq!(String::from_utf8_lossy(&waited.stdout), "second\n");
    assert!(
        holder.wait().expect("holder").success(),
        "the first run finished before the second"
    );
}

/// A run that never starts its command (refused, failing after its supervisor was prepared,
/// or killed while it waits for the lock) leaves no process behind, and nothing of the
/// command runs, not even once the lock is free.
pub(super) fn a_run_that_starts_nothing_leaves_nothing_behind(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    // The holder keeps the lock until told, however slow the machine.
    let go = dir.path().join("go");
    let script = format!(
        "echo started; while [ ! -e '{}' ]; do sleep 0.02; done",
        go.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &[], &script);
    let ran = dir.path().join(unique("never-run"));
    let marker = ran.to_str().expect("UTF-8 path");
    let command = ["sh", "-c", "touch \"$0\"", marker];
    let refused = lockwise(&b.url(), &key, &[], &command)
        .stdout(Stdio::null())
        .status()
        .expect("run");
    assert_eq!(refused.code(), Some(75));
    // A backend that refuses the connection fails after the supervisor was forked.
    let closed = format!("redis://127.0.0.1:{}", closed_port());
    let failed = lockwise(&closed, &key, &[], &command)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run");
    assert_eq!(failed.code(), Some(69));
    let mut waiting = lockwise(&b.url(), &key, &["--wait", "30s"], &command)
        .spawn()
        .expect("run");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        waiting.try_wait().expect("try_wait").is_none(),
        "it waits for the lock"
    );
    waiting.kill().expect("SIGKILL");
    waiting.wait().expect("wait");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = running_with(marker);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "still running: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&go, b"").expect("tell the holder to go");
    assert!(holder.wait().expect("holder").success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ran.exists(), "the command ran");
    assert!(running_with(marker).is_empty());
}

/// The command lines of the processes whose command line contains `text`.
fn running_with(text: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(text))
        .collect()
}

pub(super) fn children_see_increasing_tokens(b: Backend) {
    let key = b.key();
    let mut last = 0u64;
    for _ in 0..4 {
        let out = lockwise(
            &b.url(),
            &key,
            &[],
            &[
                "sh",
                "-c",
                "echo $LOCKWISE_FENCING_TOKEN $LOCKWISE_LOCK_KEY",
            ],
        )
        .output()
        .expect("run");
        assert_eq!(code(&out), 0, "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let (token, seen_key) = text.trim().split_once(' ').expect("two words");
        let token: u64 = token.parse().expect("a number");
        assert!(token > last, "token {token} after {last}");
        assert_eq!(seen_key, key);
        last = token;
    }
}

pub(super) fn the_childs_exit_code_passes_through(b: Backend) {
    let key = b.key();
    let out = lockwise(
        &b.url(),
        &key,
        &[],
        &["sh", "-c", "echo out; echo err >&2; exit 7"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 7);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "out\n",
        "only the child writes stdout"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("err"));
    let killed = lockwise(&b.url(), &key, &[], &["sh", "-c", "kill -9 $$"])
        .output()
        .expect("run");
    assert_eq!(code(&killed), 128 + 9);
    let missing = lockwise(&b.url(), &key, &[], &["/nonexistent/cmd"])
        .output()
        .expect("run");
    assert_eq!(code(&missing), 127);
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "data").expect("write");
    let plain = plain.to_str().expect("utf-8 path");
    let not_exec = lockwise(&b.url(), &key, &[], &[plain])
        .output()
        .expect("run");
    assert_eq!(code(&not_exec), 126);
    // Each of those released the lock.
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0, "{again:?}");
}

/// Deleting the lock behind a running holder: its whole process tree gets SIGTERM, and
/// `lockwise run` exits 70 only once the tree is gone.
pub(super) fn a_lost_lock_stops_the_whole_tree(b: Backend) {
    let key = b.key();
    let script = "sleep 600 & echo \"grandchild $!\"; trap 'echo got-term; exit 0' TERM; \
                  echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(
        &b.url(),
        &key,
        &["--ttl", "600ms", "--kill-after", "2s"],
        &["sh", "-c", script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let grandchild = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("grandchild ")
    })
    .expect("grandchild pid");
    let grandchild: i32 = grandchild["grandchild ".len()..].parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let deleted = Instant::now();
    b.delete_lock(&key);
    let got_term = wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term");
    assert!(got_term.is_some(), "the command got SIGTERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(70));
    assert!(
        deleted.elapsed() < Duration::from_secs(3),
        "{:?}",
        deleted.elapsed()
    );
    assert!(
        !alive(grandchild),
        "the grandchild {grandchild} outlived lockwise run"
    );
}

pub(super) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

pub(super) fn signals_are_forwarded(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term; exit 3' TERM; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill");
    assert!(wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term").is_some());
    assert_eq!(child.wait().expect("wait").code(), Some(3));
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&again),
        0,
        "the lock was released after the child exited: {again:?}"
    );
}

/// SIGHUP and SIGQUIT are forwarded like SIGTERM: lockwise never dies and leaves the command
/// running without the lock.
pub(super) fn hangup_is_forwarded_not_fatal(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-hup; exit 5' HUP; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("kill");
    assert!(wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-hup").is_some());
    assert_eq!(child.wait().expect("wait").code(), Some(5));
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&again),
        0,
        "released after the command exited: {again:?}"
    );
}

/// A process the command started that left its group (`setsid`) does not hold the lock,
/// though it is still a descendant of the supervisor, to which orphans now come back.
pub(super) fn a_process_that_left_the_group_does_not_hold_the_lock(b: Backend) {
    let key = b.key();
    let start = Instant::now();
    let done = lockwise(
        &b.url(),
        &key,
        &[],
        &[
            "sh",
            "-c",
            "setsid sleep 3 >/dev/null 2>&1 </dev/null & exit 0",
        ],
    )
    .output()
    .expect("run");
    assert_eq!(code(&done), 0, "{done:?}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "run waited for a process outside the group: {:?}",
        start.elapsed()
    );
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0, "{again:?}");
}

/// Processes the command leaves behind in its group keep the lock until they exit.
pub(super) fn the_lock_is_held_until_the_whole_group_exits(b: Backend) {
    let key = b.key();
    let start = Instant::now();
    let mut holder = lockwise(&b.url(), &key, &[], &["sh", "-c", "sleep 1 & exit 0"])
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(400));
    let refused = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&refused),
        75,
        "the background sleep still holds the lock"
    );
    assert_eq!(holder.wait().expect("wait").code(), Some(0));
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "{:?}",
        start.elapsed()
    );
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0);
}
