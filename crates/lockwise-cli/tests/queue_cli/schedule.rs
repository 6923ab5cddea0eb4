//! `queue schedule` across real processes, and `queue pause|resume`.

use super::*;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The periods (Unix seconds) of schedule `name`'s jobs in queue `q`, sorted.
fn periods(db: &Db, name: &str) -> Vec<i64> {
    let out = ok(queue(
        db,
        "list",
        &[
            "--queue", "q", "--state", "ready", "--json", "--limit", "1000",
        ],
    )
    .output()
    .unwrap());
    let prefix = format!("periodic:{name}:");
    let mut found: Vec<i64> = out
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter_map(|job| job["key"].as_str().map(str::to_owned))
        .filter_map(|key| key.strip_prefix(&prefix).map(|p| p.parse().unwrap()))
        .collect();
    found.sort_unstable();
    found
}

/// RELIABILITY (issue 36): three scheduler processes of one schedule, every second; one is
/// killed (SIGKILL) 1.5 s in, another 1 s later and started again. Each period has exactly one
/// job and none is missing from the first to the last; SIGTERM stops a scheduler with exit 0.
pub(super) fn racing_schedulers_one_killed_enqueue_one_job_per_period(db: Db) {
    let scheduler = || {
        queue(
            &db,
            "schedule",
            &[
                "--queue",
                "q",
                "--name",
                "beat",
                "--every",
                "1s",
                "--payload",
                "{\"beat\":1}",
            ],
        )
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
    };
    let mut running: Vec<std::process::Child> = (0..3).map(|_| scheduler()).collect();
    std::thread::sleep(Duration::from_millis(1_500));
    let mut first = running.remove(0);
    first.kill().unwrap();
    let _ = first.wait();
    std::thread::sleep(Duration::from_millis(1_000));
    let mut second = running.remove(0);
    second.kill().unwrap();
    let _ = second.wait();
    running.push(scheduler());
    std::thread::sleep(Duration::from_millis(2_500));
    for child in &running {
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    }
    for mut child in running {
        assert_eq!(
            child.wait().unwrap().code(),
            Some(0),
            "SIGTERM stops a scheduler"
        );
    }
    let found = periods(&db, "beat");
    // 5 s of 1 s periods, less the schedulers' start (three processes at once) on a loaded
    // machine: 3 were seen.
    assert!(found.len() >= 3, "{found:?}");
    assert!(
        found.windows(2).all(|w| w[1] == w[0] + 1),
        "exactly one job per period, none missing: {found:?}"
    );
    assert_eq!(stats(&db)["ready"], found.len(), "no other job");
    // --once: nothing more is due within this second, or one job for a new one.
    let out = ok(queue(
        &db,
        "schedule",
        &["--queue", "q", "--name", "beat", "--every", "1s", "--once"],
    )
    .output()
    .unwrap());
    assert!(out.lines().count() <= 1, "{out:?}");
    for bad in [
        &["--cron", "61 * * * *"][..],
        &["--every", "500ms"],
        &["--every", "1s", "--payload", "{"],
        &["--every", "1s", "--cron", "* * * * *"],
        &["--every", "1s", "--catch-up", "10001"],
        &[],
    ] {
        let out = queue(
            &db,
            "schedule",
            &[&["--queue", "q", "--name", "x"][..], bad].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(64), "{bad:?}: {out:?}");
    }
}

/// `queue pause` stops a running `queue work` from claiming the queue; `queue resume` lets it
/// claim again.
pub(super) fn pause_and_resume_a_queue_under_a_worker(db: Db) {
    let said = |sub: &str| {
        let out = queue(&db, sub, &["q"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    ok(queue(&db, "migrate", &[]).output().unwrap());
    assert!(said("pause").contains("paused:"));
    assert!(said("pause").contains("paused already"));
    for n in 0..3 {
        ok(queue(
            &db,
            "enqueue",
            &["--queue", "q", "--payload", &format!("{n}")],
        )
        .output()
        .unwrap());
    }
    let mut worker = queue(
        &db,
        "work",
        &["--queue", "q", "--poll-interval", "100ms", "--", "true"],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(stats(&db)["ready"], 3, "a paused queue is not claimed");
    assert!(said("resume").contains("resumed"));
    wait_for("the jobs done", Duration::from_secs(10), || {
        stats(&db)["done"] == 3
    });
    assert!(said("resume").contains("was not paused"));
    kill(Pid::from_raw(worker.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(worker.wait().unwrap().code(), Some(0));
}

/// `queue cancel --all --queue Q` cancels Q's waiting jobs (or those of --state), says how
/// many, and refuses a finished state (64).
pub(super) fn cancel_all_cancels_a_queue_s_waiting_jobs(db: Db) {
    for n in 0..3 {
        ok(queue(
            &db,
            "enqueue",
            &["--queue", "q", "--payload", &format!("{n}")],
        )
        .output()
        .unwrap());
    }
    ok(queue(
        &db,
        "enqueue",
        &["--queue", "q", "--payload", "9", "--delay", "10m"],
    )
    .output()
    .unwrap());
    let out = queue(
        &db,
        "cancel",
        &["--all", "--queue", "q", "--state", "scheduled"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cancelled 1 job"),
        "{out:?}"
    );
    let out = queue(&db, "cancel", &["--all", "--queue", "q"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cancelled 3 jobs"),
        "{out:?}"
    );
    let s = stats(&db);
    assert_eq!(
        (s["ready"].as_i64(), s["cancelled"].as_i64()),
        (Some(0), Some(4))
    );
    for bad in [
        &["--all", "--queue", "q", "--state", "done"][..],
        &["--all"],
        &["1", "--all"],
    ] {
        let out = queue(&db, "cancel", bad).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{bad:?}: {out:?}");
    }
}
