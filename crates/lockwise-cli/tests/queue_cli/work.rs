//! `queue work`: draining, logging, polling, timeouts, the grace, several queues.

use super::*;

/// `work --once` drains the queue and exits 0 by itself: the three ready jobs are done, and a
/// delayed job (not ready) neither runs nor keeps the worker waiting.
/// `work --max-jobs N` runs N jobs, each once, and exits 0 with the rest left ready: none
/// was claimed only to be handed back.
pub(super) fn work_max_jobs_runs_that_many_and_exits_0(s: Db) {
    for _ in 0..7 {
        ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
            .output()
            .unwrap());
    }
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--max-jobs",
            "3",
            "--concurrency",
            "2",
            "--",
            "true",
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out =
        exit_within(&mut worker, Duration::from_secs(20)).expect("work --max-jobs kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let st = stats(&s);
    assert_eq!(
        (
            st["done"].as_i64(),
            st["ready"].as_i64(),
            st["running"].as_i64()
        ),
        (Some(3), Some(4), Some(0)),
        "{st}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("3 done, 0 failed") && stderr.contains("0 handed back"),
        "{out:?}"
    );
    let zero = queue(
        &s,
        "work",
        &["--queue", "q", "--max-jobs", "0", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(zero.status.code(), Some(64), "{zero:?}");
}

pub(super) fn work_once_drains_the_queue_and_exits_0(s: Db) {
    for _ in 0..3 {
        ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
            .output()
            .unwrap());
    }
    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--delay", "1h"],
    )
    .output()
    .unwrap());
    let started = Instant::now();
    let mut worker = queue(
        &s,
        "work",
        &["--queue", "q", "--once", "--concurrency", "2", "--", "true"],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(20)).expect("work --once kept running");
    println!(
        "work --once drained 3 jobs in {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let st = stats(&s);
    assert_eq!(
        (
            st["done"].as_i64(),
            st["ready"].as_i64(),
            st["scheduled"].as_i64(),
            st["running"].as_i64()
        ),
        (Some(3), Some(0), Some(1), Some(0)),
        "{st}"
    );
    // An empty queue: exits at once.
    let mut idle = queue(&s, "work", &["--queue", "empty", "--once", "--", "true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = exit_within(&mut idle, Duration::from_secs(10)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A worker writes exactly one `job ended` line per job to stderr by default, with its id,
/// queue, attempt, outcome and duration, and nothing else at info level.
pub(super) fn work_logs_one_line_per_job(s: Db) {
    let mut ids = Vec::new();
    for payload in [r#"{"fail":false}"#, r#"{"fail":true}"#, r#"{"fail":false}"#] {
        let id = ok(queue(
            &s,
            "enqueue",
            &["--queue", "q", "--payload", payload, "--max-attempts", "1"],
        )
        .output()
        .unwrap());
        ids.push(id.trim().to_owned());
    }
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--once",
            "--",
            "sh",
            "-c",
            r#"read -r x; case "$x" in *true*) exit 1;; esac"#,
        ],
    )
    .env_remove("LOCKWISE_LOG")
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(20)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut lines = job_lines(&stderr);
    lines.sort();
    let mut expected = vec![
        (ids[0].clone(), "done".to_owned()),
        (ids[1].clone(), "failed".to_owned()),
        (ids[2].clone(), "done".to_owned()),
    ];
    expected.sort();
    assert_eq!(lines, expected, "{stderr}");
    for line in stderr.lines().filter(|l| l.contains("job ended")) {
        assert!(
            line.contains("queue=q") && line.contains("attempt=1") && line.contains(" ms="),
            "{line}"
        );
    }
    let info = stderr.lines().filter(|l| l.contains(" INFO ")).count();
    assert_eq!(info, 3, "no other info line: {stderr}");
}

/// `--poll-interval 100ms`: a job enqueued while the worker idles starts within 400 ms, also
/// on MariaDB, which has no notifications (the default poll is 1 s).
pub(super) fn poll_interval_bounds_how_soon_an_idle_worker_sees_a_job(s: Db) {
    ok(queue(&s, "migrate", &[]).output().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("mark");
    let script = format!("touch {}", mark.display());
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--poll-interval",
            "100ms",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500)); // connected, migrated, idle
    ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap());
    let enqueued = Instant::now();
    while !mark.exists() && enqueued.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = enqueued.elapsed();
    worker.kill().unwrap();
    worker.wait().unwrap();
    println!(
        "the handler started {} ms after the enqueue",
        took.as_millis()
    );
    assert!(mark.exists(), "the job never ran");
    assert!(took < Duration::from_millis(400), "{took:?}");
}

/// The `ms=` of a worker's one `job ended` line.
pub(super) fn job_ms(stderr: &str) -> u64 {
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("job ended")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    lines[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ms="))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no ms= in {stderr}"))
}

/// How long after `from` the file `path` was last written.
pub(super) fn written_after(path: &std::path::Path, from: std::time::SystemTime) -> Duration {
    let at = std::fs::metadata(path).unwrap().modified().unwrap();
    at.duration_since(from).unwrap_or_default()
}

/// `--timeout 1s --kill-after 5s`: at the limit the handler's process group gets SIGTERM
/// (through `lockwise supervise`, which leaves it to the command), the command's trap runs,
/// and the attempt is recorded as timed out whatever the command then exits with.
pub(super) fn a_timed_out_handler_gets_sigterm_and_its_attempt_fails(s: Db) {
    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (started, mark) = (dir.path().join("started"), dir.path().join("term"));
    let script = format!(
        "touch {started}; trap 'echo term > {mark}; exit 3' TERM; sleep 30 & wait",
        started = started.display(),
        mark = mark.display()
    );
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--once",
            "--timeout",
            "1s",
            "--kill-after",
            "5s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(20)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let start = std::fs::metadata(&started).unwrap().modified().unwrap();
    let term = written_after(&mark, start);
    let ms = job_ms(&stderr);
    println!(
        "timeout 1s: SIGTERM handled {} ms after the start; job ended after {ms} ms",
        term.as_millis()
    );
    // The job's 1 s runs from its start, a little before the handler's shell has run its
    // first command (`touch`), which takes ~10 ms, and ~160 ms was seen on a loaded machine.
    assert!(
        term >= Duration::from_millis(700) && term < Duration::from_millis(1500),
        "{term:?}"
    );
    assert!((1000..1500).contains(&ms), "{stderr}");
    assert!(stderr.contains("outcome=timed out"), "{stderr}");
    let dead = ok(queue(&s, "dead", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    let dead: serde_json::Value = serde_json::from_str(dead.lines().next().unwrap()).unwrap();
    assert_eq!(dead["last_error"], "timed out after 1s", "{dead}");
}

/// A handler that ignores SIGTERM is killed (SIGKILL to its process group) `--kill-after`
/// after the timeout: its whole tree is gone, and not before.
pub(super) fn a_handler_that_ignores_sigterm_is_killed_after_kill_after(s: Db) {
    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("pid");
    let script = format!(
        "trap '' TERM; sleep 30 & echo $! > {pid}; wait",
        pid = pid.display()
    );
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--once",
            "--timeout",
            "1s",
            "--kill-after",
            "2s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(20)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ms = job_ms(&stderr);
    println!("timeout 1s, kill-after 2s: handler killed, job ended after {ms} ms");
    assert!((3000..4500).contains(&ms), "{stderr}");
    assert!(stderr.contains("outcome=timed out"), "{stderr}");
    let sleeper = std::fs::read_to_string(&pid).unwrap();
    let stat = format!("/proc/{}/stat", sleeper.trim());
    wait_for(
        "the handler's tree to be gone",
        Duration::from_secs(2),
        || std::fs::read_to_string(&stat).map_or(true, |st| st.contains(") Z")),
    );
    assert_eq!(stats(&s)["dead"], 1);
}

/// SIGTERM to the worker with `--grace 1s`: the running handler is asked to stop (SIGTERM)
/// when the grace ends, exits, and its job is handed back, its attempt not spent.
pub(super) fn at_the_end_of_the_grace_a_handler_gets_sigterm_and_its_job_is_handed_back(s: Db) {
    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (started, mark) = (dir.path().join("started"), dir.path().join("term"));
    let script = format!(
        "trap 'echo term > {mark}; exit 3' TERM; touch {started}; sleep 30 & wait",
        started = started.display(),
        mark = mark.display()
    );
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--grace",
            "1s",
            "--kill-after",
            "5s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for("the handler to start", Duration::from_secs(20), || {
        started.exists()
    });
    std::thread::sleep(Duration::from_millis(100));
    let asked = std::time::SystemTime::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(10)).expect("work kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let term = written_after(&mark, asked);
    println!(
        "grace 1s: SIGTERM handled {} ms after the worker's SIGTERM",
        term.as_millis()
    );
    assert!(
        term >= Duration::from_millis(900) && term < Duration::from_millis(2000),
        "{term:?}"
    );
    assert!(stderr.contains("outcome=handed back"), "{stderr}");
    let st = stats(&s);
    assert_eq!(
        (
            st["ready"].as_i64(),
            st["running"].as_i64(),
            st["dead"].as_i64()
        ),
        (Some(1), Some(0), Some(0)),
        "{st}"
    );
    // Its attempt was not spent: with --max-attempts 1 it still runs, and is done.
    let mut again = queue(&s, "work", &["--queue", "q", "--once", "--", "true"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = exit_within(&mut again, Duration::from_secs(20)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stats(&s)["done"], 1);
}

/// `--queue a --queue b`: one worker does the jobs of both queues, each handler seeing its
/// own job's queue in LOCKWISE_QUEUE; a third queue is left alone, and a bad name among the
/// queues is refused (64) before anything is claimed.
pub(super) fn one_worker_works_on_several_queues(s: Db) {
    let mut expected = Vec::new();
    for q in ["a", "b", "a", "b"] {
        let id = ok(queue(&s, "enqueue", &["--queue", q, "--payload", "{}"])
            .output()
            .unwrap());
        expected.push(format!("{} {q}", id.trim()));
    }
    ok(queue(&s, "enqueue", &["--queue", "c", "--payload", "{}"])
        .output()
        .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let script = format!(
        "echo \"$LOCKWISE_JOB_ID $LOCKWISE_QUEUE\" >> {}",
        seen.display()
    );
    let bad = queue(
        &s,
        "work",
        &["--queue", "a", "--queue", "", "--once", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue", "a", "--queue", "b", "--once", "--", "sh", "-c", &script,
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let out = exit_within(&mut worker, Duration::from_secs(20)).expect("work --once kept running");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut lines: Vec<String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    expected.sort();
    assert_eq!(lines, expected);
    let count = |q: &str| -> serde_json::Value {
        let out = ok(queue(&s, "stats", &["--queue", q, "--json"])
            .output()
            .unwrap());
        serde_json::from_str(out.trim()).unwrap()
    };
    assert_eq!(
        (count("a")["done"].as_i64(), count("b")["done"].as_i64()),
        (Some(2), Some(2))
    );
    assert_eq!(count("c")["ready"], 1, "queue c is not this worker's");
}

/// `work --retention D` keeps the done jobs for D, then prunes them while it runs: on both
/// databases the history empties, the jobs ran, and the worker still exits 0.
pub(super) fn work_retention_prunes_the_history_while_it_runs(s: Db) {
    let jobs: String = (0..20)
        .map(|n| format!("{{\"payload\":{{\"n\":{n}}}}}\n"))
        .collect();
    let mut feed = queue(&s, "enqueue", &["--queue", "q", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(feed.stdin.as_mut().unwrap(), jobs.as_bytes()).unwrap();
    drop(feed.stdin.take());
    assert!(feed.wait().unwrap().success());
    let worker = queue(
        &s,
        "work",
        &["--queue", "q", "--retention", "200ms", "--", "true"],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for("the jobs to run", Duration::from_secs(20), || {
        stats(&s)["ready"] == 0 && stats(&s)["running"] == 0
    });
    wait_for("retention to prune them", Duration::from_secs(10), || {
        stats(&s)["done"] == 0
    });
    let listed = ok(
        queue(&s, "list", &["--queue", "q", "--state", "done", "--json"])
            .output()
            .unwrap(),
    );
    assert!(listed.trim().is_empty(), "no done job is listed: {listed}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = worker.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("20 done"), "{said}");
}
