//! A job through the CLI: enqueue, work, fail, a killed or frozen worker.

use super::*;

pub(super) fn enqueue_prints_the_id_the_handler_sees(s: Db) {
    let id = ok(queue(
        &s,
        "enqueue",
        &[
            "--queue",
            "q",
            "--payload",
            r#"{"to":"a@b.c"}"#,
            "--key",
            "k1",
        ],
    )
    .output()
    .unwrap());
    let id = id.trim().to_owned();
    assert!(id.parse::<i64>().is_ok(), "only the id on stdout: {id:?}");
    let again = ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--key", "k1"],
    )
    .output()
    .unwrap());
    assert_eq!(
        again.trim(),
        id,
        "a duplicate key prints the existing job's id"
    );
    let st = stats(&s);
    assert_eq!(
        (
            st["ready"].as_i64(),
            st["running"].as_i64(),
            st["done"].as_i64(),
            st["dead"].as_i64()
        ),
        (Some(1), Some(0), Some(0), Some(0))
    );

    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let script = format!(
        "echo \"$LOCKWISE_JOB_ID $LOCKWISE_JOB_ATTEMPT $LOCKWISE_QUEUE $(cat)\" > {}",
        seen.display()
    );
    let mut worker = queue(&s, "work", &["--queue", "q", "--", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the job to be done", Duration::from_secs(20), || {
        stats(&s)["done"] == 1
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(
        worker.wait().unwrap().success(),
        "SIGTERM is a graceful shutdown"
    );
    let line = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(line.trim(), format!("{id} 1 q {{\"to\":\"a@b.c\"}}"));
}

pub(super) fn a_failing_handler_stores_its_stderr_and_dies_after_max_attempts(s: Db) {
    let id = ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let mut worker = queue(
        &s,
        "work",
        &[
            "--queue",
            "q",
            "--",
            "sh",
            "-c",
            "echo something broke >&2; exit 3",
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_for("the job to die", Duration::from_secs(20), || {
        stats(&s)["dead"] == 1
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    let dead = ok(queue(&s, "dead", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    let dead: serde_json::Value = serde_json::from_str(dead.lines().next().unwrap()).unwrap();
    assert_eq!(
        dead["id"],
        id.trim().parse::<i64>().unwrap(),
        "a number, as enqueue prints it"
    );
    // One job shape: `dead --json` prints what `show --json` prints, times in RFC 3339 UTC.
    let shown = ok(queue(&s, "show", &[id.trim(), "--json"]).output().unwrap());
    let shown: serde_json::Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(dead, shown);
    assert_eq!(
        (&dead["attempt"], &dead["queue"], &dead["state"]),
        (
            &serde_json::json!(1),
            &serde_json::json!("q"),
            &serde_json::json!("dead")
        )
    );
    let at = dead["errors"][0]["at"].as_str().unwrap();
    assert!(at.ends_with('Z') && at.contains('T'), "{at}");
    for time in [
        at,
        dead["created_at"].as_str().unwrap(),
        dead["finished_at"].as_str().unwrap(),
    ] {
        assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
        assert_eq!(time.len(), "2026-12-04T15:28:45.123456Z".len(), "{time}");
    }
    let error = dead["last_error"].as_str().unwrap();
    assert!(
        error.contains("exited with 3") && error.contains("something broke"),
        "{error}"
    );
    // Retry gives it back with a fresh budget, and says so; purge deletes dead letters.
    let retried = queue(&s, "retry", &[id.trim()]).output().unwrap();
    assert!(retried.status.success(), "{retried:?}");
    assert!(
        String::from_utf8_lossy(&retried.stderr)
            .contains(&format!("job {} is ready again", id.trim())),
        "{retried:?}"
    );
    assert_eq!(stats(&s)["ready"], 1);
    // A job that is not dead, or no job at all: exit 66, said on stderr.
    for id in [id.trim(), "999999999"] {
        let not_dead = queue(&s, "retry", &[id]).output().unwrap();
        assert_eq!(not_dead.status.code(), Some(66), "{not_dead:?}");
        let stderr = String::from_utf8_lossy(&not_dead.stderr);
        assert!(
            stderr.contains("no dead or cancelled job") && stderr.contains(id),
            "{stderr}"
        );
    }
    assert_eq!(stats(&s)["ready"], 1, "the pending job is untouched");

    // A delayed job runs now; asked again, or of a job due already: exit 66.
    let later = ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--delay", "1h"],
    )
    .output()
    .unwrap());
    assert_eq!(stats(&s)["scheduled"], 1);
    let now = queue(&s, "run-now", &[later.trim()]).output().unwrap();
    assert!(now.status.success(), "{now:?}");
    assert!(
        String::from_utf8_lossy(&now.stderr).contains(&format!("job {} is due now", later.trim())),
        "{now:?}"
    );
    let counts = stats(&s);
    assert_eq!(
        (counts["scheduled"].as_i64(), counts["ready"].as_i64()),
        (Some(0), Some(2))
    );
    let again = queue(&s, "run-now", &[later.trim()]).output().unwrap();
    assert_eq!(again.status.code(), Some(66), "{again:?}");
    // `retry --all` without --queue is a usage error; with one, it counts what it retried.
    let usage = queue(&s, "retry", &["--all"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(64), "{usage:?}");
    let none = queue(&s, "retry", &["--all", "--queue", "q"])
        .output()
        .unwrap();
    assert!(none.status.success(), "{none:?}");
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("0 dead jobs of q ready again"),
        "{none:?}"
    );
}

/// A worker process killed with SIGKILL mid-job: its handler's tree dies with it, the reaper
/// of another worker rescues the job after the lease, and the job is done once in effect.
pub(super) fn a_killed_worker_s_job_is_rescued_and_done_once(s: Db) {
    ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let effects = dir.path().join("effects");
    // Attempt 1 hangs (in a grandchild); later attempts do the effect.
    let script = format!(
        "if [ \"$LOCKWISE_JOB_ATTEMPT\" = 1 ]; then sleep 600 & echo $! >> {pids}; wait; fi; \
         echo \"$LOCKWISE_JOB_ID\" >> {effects}",
        pids = pids.display(),
        effects = effects.display()
    );
    let args = ["--queue", "q", "--lease", "1s", "--", "sh", "-c", &script];
    let mut first = queue(&s, "work", &args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The shell creates the file before it writes the pid: wait for a whole line.
    let read_pid = || {
        std::fs::read_to_string(&pids)
            .ok()
            .filter(|text| text.ends_with('\n'))
            .and_then(|text| text.trim().parse::<i32>().ok())
    };
    wait_for(
        "the first worker to start the job",
        Duration::from_secs(20),
        || read_pid().is_some(),
    );
    let sleeper = read_pid().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    wait_for(
        "the handler's tree to die with its worker",
        Duration::from_secs(5),
        || {
            !std::path::Path::new(&format!("/proc/{sleeper}")).exists()
                || std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                    .unwrap_or_default()
                    .contains(") Z")
        },
    );
    let mut second = queue(&s, "work", &args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        "the rescued job to be done",
        Duration::from_secs(20),
        || stats(&s)["done"] == 1,
    );
    second.kill().unwrap();
    second.wait().unwrap();
    let effects = std::fs::read_to_string(&effects).unwrap();
    assert_eq!(
        effects.lines().count(),
        1,
        "done once in effect: {effects:?}"
    );
}

/// R19 for `queue work`: only the worker is frozen (SIGSTOP), its handler (which ignores
/// SIGTERM) runs on. The handler's supervisor holds the job's deadline, so the handler is dead
/// by it, and the worker that rescues the job never runs it at the same time.
pub(super) fn a_frozen_worker_s_handler_dies_by_the_job_s_deadline(s: Db) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "if [ \"$LOCKWISE_JOB_ATTEMPT\" = 1 ]; then trap '' TERM; echo $$ > {pid}.tmp; \
         mv {pid}.tmp {pid}; while :; do date +%s%N >> {first}; sleep 0.05; done; fi; \
         for i in 1 2 3 4 5 6; do date +%s%N >> {second}; sleep 0.05; done",
        pid = pid_file.display(),
        first = first.display(),
        second = second.display()
    );
    let lease = Duration::from_secs(2);
    let args = [
        "--queue",
        "q",
        "--lease",
        "2s",
        "--kill-after",
        "200ms",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let mut frozen = queue(&s, "work", &args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the handler to start", Duration::from_secs(20), || {
        pid_file.exists()
    });
    let handler: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Let a heartbeat or two go by, so that the fed deadline has moved.
    std::thread::sleep(Duration::from_millis(1_500));
    let worker = Pid::from_raw(frozen.id() as i32);
    kill(worker, Signal::SIGSTOP).unwrap();
    let frozen_at = Instant::now();
    let mut rescuer = queue(&s, "work", &args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z"))
    };
    // The last heartbeat was sent before the freeze: the deadline is no later than this.
    let latest_deadline = lease - (lease / 100 + Duration::from_millis(2));
    while alive(handler) && frozen_at.elapsed() < latest_deadline + Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = frozen_at.elapsed();
    let rescued = Instant::now();
    while stamps(&second).len() < 6 && rescued.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = kill(Pid::from_raw(handler), Signal::SIGKILL);
    let _ = kill(worker, Signal::SIGKILL);
    let _ = kill(worker, Signal::SIGCONT);
    frozen.wait().unwrap();
    rescuer.kill().unwrap();
    rescuer.wait().unwrap();
    let late_ms = (gone.as_secs_f64() - latest_deadline.as_secs_f64()) * 1e3;
    let last_of_first = *stamps(&first).iter().max().expect("the handler ran");
    let start_of_second = stamps(&second)
        .into_iter()
        .min()
        .expect("the job was rescued");
    println!(
        "frozen worker: its handler was gone {late_ms:.1} ms after the latest possible \
         deadline (negative: before); its last write {:.1} ms before the rescuer's first",
        (start_of_second - last_of_first) as f64 / 1e6
    );
    assert!(
        late_ms < 100.0,
        "the handler of a frozen worker lived {late_ms:.1} ms past the job's deadline"
    );
    assert!(
        last_of_first < start_of_second,
        "the frozen worker's handler wrote {:.1} ms after the rescuer's started",
        (last_of_first - start_of_second) as f64 / 1e6
    );
}
