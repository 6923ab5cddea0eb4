//! Inspecting and controlling jobs: show, list, cancel, prune; keys; text output.

use super::*;

pub(super) fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `show`, `list`, `cancel` and `prune`, with their JSON and their exit codes; `stats --json`
/// has counts that do not overlap.
pub(super) fn jobs_are_shown_listed_cancelled_and_pruned(s: Db) {
    let enqueue = |args: &[&str]| {
        let mut all = vec!["--queue", "q", "--payload", r#"{"n":1}"#];
        all.extend_from_slice(args);
        ok(queue(&s, "enqueue", &all).output().unwrap())
            .trim()
            .parse::<i64>()
            .unwrap()
    };
    let a = enqueue(&["--key", "k-a"]);
    let b = enqueue(&["--priority", "-1"]);
    let later = enqueue(&["--delay", "1h"]);

    let shown = ok(queue(&s, "show", &[&a.to_string(), "--json"])
        .output()
        .unwrap());
    let shown: serde_json::Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(
        (
            &shown["id"],
            &shown["queue"],
            &shown["state"],
            &shown["key"]
        ),
        (
            &serde_json::json!(a),
            &serde_json::json!("q"),
            &serde_json::json!("ready"),
            &serde_json::json!("k-a")
        ),
        "{shown}"
    );
    assert_eq!(shown["payload"], serde_json::json!({"n": 1}));
    let created = shown["created_at"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(created).is_ok(), "{created}");
    assert!(shown["finished_at"].is_null());
    let text = ok(queue(&s, "show", &[&a.to_string()]).output().unwrap());
    assert!(
        text.contains("state       ready") && text.contains("k-a"),
        "{text}"
    );
    let missing = queue(&s, "show", &["999999999"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(66), "{missing:?}");

    let listed = ok(
        queue(&s, "list", &["--queue", "q", "--state", "ready", "--json"])
            .output()
            .unwrap(),
    );
    let ids: Vec<i64> = json_lines(&listed)
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![b, a], "ready jobs in the order they will run");
    let scheduled = ok(queue(&s, "list", &["--queue", "q", "--state", "scheduled"])
        .output()
        .unwrap());
    let mut lines = scheduled.lines();
    assert_eq!(
        lines.next(),
        Some("id\tstate\tattempt\twhen\tkey\tlast_error"),
        "a header names the columns: {scheduled}"
    );
    assert!(
        lines
            .next()
            .is_some_and(|line| line.starts_with(&format!("{later}\tscheduled\t"))),
        "{scheduled}"
    );
    let bad = queue(&s, "list", &["--queue", "q", "--state", "pending"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");

    ok(queue(&s, "cancel", &[&later.to_string()]).output().unwrap());
    let again = queue(&s, "cancel", &[&later.to_string()]).output().unwrap();
    assert_eq!(again.status.code(), Some(66), "{again:?}");
    let st = stats(&s);
    let mut keys: Vec<&str> = st.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cancelled",
            "dead",
            "done",
            "queue",
            "ready",
            "running",
            "scheduled"
        ]
    );
    assert_eq!(
        (&st["ready"], &st["scheduled"], &st["cancelled"]),
        (
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!(1)
        )
    );

    let no_state = queue(&s, "prune", &["--older-than", "0s"])
        .output()
        .unwrap();
    assert_eq!(no_state.status.code(), Some(64), "{no_state:?}");
    std::thread::sleep(Duration::from_millis(20));
    let pruned = queue(
        &s,
        "prune",
        &["--cancelled", "--done", "--older-than", "1ms"],
    )
    .output()
    .unwrap();
    assert!(pruned.status.success(), "{pruned:?}");
    let said = String::from_utf8_lossy(&pruned.stderr);
    assert!(
        said.contains("pruned 1 cancelled job") && said.contains("pruned 0 done jobs"),
        "{said}"
    );
    let gone = queue(&s, "show", &[&later.to_string()]).output().unwrap();
    assert_eq!(gone.status.code(), Some(66), "{gone:?}");
}

/// Cancelling a running job kills its command at the next heartbeat; the worker logs the job
/// as cancelled (not as a lost lease) and its summary counts it.
pub(super) fn a_cancelled_running_job_is_logged_and_counted_as_cancelled(s: Db) {
    let id = ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; exec sleep 30", started.display());
    let worker = queue(
        &s,
        "work",
        &["--queue", "q", "--lease", "1s", "--", "sh", "-c", &script],
    )
    .env("RUST_LOG", "info")
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for("the job to start", Duration::from_secs(20), || {
        started.exists()
    });
    ok(queue(&s, "cancel", &[id.trim()]).output().unwrap());
    wait_for(
        "the job's command to be killed",
        Duration::from_secs(5),
        || stats(&s)["running"] == 0,
    );
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = worker.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("outcome=cancelled"), "{said}");
    assert!(!said.contains("outcome=lease lost"), "{said}");
    assert!(
        said.contains("0 done, 0 failed, 1 cancelled, 0 lease lost"),
        "{said}"
    );
    assert_eq!(stats(&s)["cancelled"], 1);
}

/// `enqueue --key K --unique-for D`: a duplicate within the window, a new job after it. The
/// window is long beside one `lockwise` process's start and connect (~0.3 s with TLS on a
/// loaded machine), so the second call always lands inside it.
pub(super) fn a_key_can_be_unique_for_a_window(s: Db) {
    let enqueue = || {
        let out = ok(queue(
            &s,
            "enqueue",
            &[
                "--queue",
                "q",
                "--payload",
                "{}",
                "--key",
                "k",
                "--unique-for",
                "2s",
                "--json",
            ],
        )
        .output()
        .unwrap());
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let first = enqueue();
    let again = enqueue();
    assert_eq!(
        (&again["id"], &again["duplicate"]),
        (&first["id"], &serde_json::json!(true))
    );
    std::thread::sleep(Duration::from_millis(2100));
    let after = enqueue();
    assert_ne!(after["id"], first["id"]);
    assert_eq!(after["duplicate"], false);
    let no_key = queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--unique-for", "1s"],
    )
    .output()
    .unwrap();
    assert_eq!(no_key.status.code(), Some(64), "{no_key:?}");
}

/// A handler's error with escape sequences and newlines is printed escaped, on one line, by
/// `dead`, `list` and `show`: stored text never drives the terminal. `--json` keeps it as is.
pub(super) fn text_output_escapes_control_characters(s: Db) {
    let id = ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let id = id.trim();
    let script = r#"printf 'bad\033[2Jthing\nsecond line' >&2; exit 1"#;
    let mut worker = queue(&s, "work", &["--queue", "q", "--", "sh", "-c", script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the job to die", Duration::from_secs(20), || {
        stats(&s)["dead"] == 1
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    let outputs = [
        ok(queue(&s, "dead", &["--queue", "q"]).output().unwrap()),
        ok(queue(&s, "list", &["--queue", "q", "--state", "dead"])
            .output()
            .unwrap()),
        ok(queue(&s, "show", &[id]).output().unwrap()),
    ];
    for text in outputs {
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains(r"bad\u{1b}[2Jthing\nsecond line"), "{text:?}");
    }
    let dead = ok(queue(&s, "dead", &["--queue", "q"]).output().unwrap());
    assert_eq!(dead.lines().count(), 2, "a header and one job: {dead:?}");
    let json = ok(queue(&s, "dead", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    let error = json_lines(&json)[0]["last_error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("bad\u{1b}[2Jthing\nsecond"), "{error:?}");
}

/// `stats` without `--queue`: a line per queue of the store, with the oldest ready job's age
/// and the jobs done in the last minute.
pub(super) fn stats_without_a_queue_lists_every_queue(s: Db) {
    for q in ["emails", "emails", "reports"] {
        ok(queue(&s, "enqueue", &["--queue", q, "--payload", "{}"])
            .output()
            .unwrap());
    }
    ok(
        queue(&s, "work", &["--queue", "reports", "--once", "--", "true"])
            .output()
            .unwrap(),
    );
    let lines = json_lines(&ok(queue(&s, "stats", &["--json"]).output().unwrap()));
    let shown: Vec<(&str, i64, i64, i64, bool)> = lines
        .iter()
        .map(|l| {
            (
                l["queue"].as_str().unwrap(),
                l["ready"].as_i64().unwrap(),
                l["done"].as_i64().unwrap(),
                l["done_last_minute"].as_i64().unwrap(),
                l["oldest_ready_secs"].is_number(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [("emails", 2, 0, 0, true), ("reports", 0, 1, 1, false)],
        "{lines:?}"
    );
    let text = ok(queue(&s, "stats", &[]).output().unwrap());
    let mut rows = text.lines();
    assert!(rows.next().unwrap().starts_with("QUEUE"), "{text}");
    assert!(rows.next().unwrap().starts_with("emails "), "{text}");
    assert!(rows.next().unwrap().starts_with("reports "), "{text}");
}

/// `workers`: a running `queue work` is listed with its host, pid, queues and concurrency, and
/// drops out when it stops.
pub(super) fn workers_lists_a_running_worker_until_it_stops(s: Db) {
    // Like the other read commands, it creates nothing.
    let never = queue(&s, "workers", &[]).output().unwrap();
    assert_eq!(never.status.code(), Some(64), "{never:?}");
    let migrated = Command::new(BIN)
        .args([
            "queue",
            "migrate",
            "--url",
            &s.url(),
            "--schema",
            s.schema(),
        ])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{migrated:?}");
    let header = ok(queue(&s, "workers", &[]).output().unwrap());
    assert_eq!(header.lines().count(), 1, "{header}");
    let mut work = queue(
        &s,
        "work",
        &["--queue", "q", "--queue", "r", "--concurrency", "2"],
    )
    .args(["--", "true"])
    .env("LOCKWISE_LOG", "warn")
    .spawn()
    .unwrap();
    let mut listed = Vec::new();
    wait_for("the worker's row", Duration::from_secs(10), || {
        listed = json_lines(&ok(queue(&s, "workers", &["--json"]).output().unwrap()));
        !listed.is_empty()
    });
    let w = &listed[0];
    assert_eq!(w["pid"], serde_json::json!(work.id()), "{w}");
    assert_eq!(w["queues"], serde_json::json!(["q", "r"]), "{w}");
    assert_eq!(w["concurrency"], serde_json::json!(2), "{w}");
    let text = ok(queue(&s, "workers", &[]).output().unwrap());
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .contains(&work.id().to_string()),
        "{text}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(work.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(work.wait().unwrap().success());
    assert!(json_lines(&ok(queue(&s, "workers", &["--json"]).output().unwrap())).is_empty());
}
