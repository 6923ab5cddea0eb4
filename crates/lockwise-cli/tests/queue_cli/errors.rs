//! Exit codes and messages: usage, backend, unrunnable handlers, missing stores, limits.

use super::*;

#[test]
pub(super) fn usage_and_backend_errors_have_their_exit_codes() {
    let s = Db::pg("qerr");
    let bad_json = queue(&s, "enqueue", &["--queue", "q", "--payload", "{nope"])
        .output()
        .unwrap();
    assert_eq!(bad_json.status.code(), Some(64));
    for url in ["redis://127.0.0.1/", "file:///tmp/x", "not a url"] {
        let out = Command::new(BIN)
            .args(["queue", "stats", "--url", url, "--queue", "q"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{url}");
    }
    let start = Instant::now();
    let down = Command::new(BIN)
        .args(["queue", "stats", "--queue", "q", "--url"])
        .arg(format!(
            "postgres://postgres:pw-secret@127.0.0.1:{}/test",
            closed_port()
        ))
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(69));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(!String::from_utf8_lossy(&down.stderr).contains("pw-secret"));
    let missing = Command::new(BIN)
        .args(["queue", "work", "--url", &s.url(), "--queue", "q"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(64), "work needs -- CMD");
}

/// Waits up to `limit` for `child` to exit; kills it and returns `None` if it does not.
pub(super) fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<Output> {
    let until = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= until {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
    }
    let status = child.wait().unwrap();
    Some(Output {
        status,
        stdout: Vec::new(),
        stderr: stderr.into_bytes(),
    })
}

/// A handler that cannot run stops `work` at start-up with 127 (not found) or 126 (not
/// executable), before it claims anything: the queued job keeps its attempts.
pub(super) fn a_handler_that_cannot_run_stops_work_before_any_claim(s: Db) {
    ok(queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\nexit 0\n").unwrap();
    let plain = plain.to_str().unwrap().to_owned();
    let cases: [(&str, i32); 4] = [
        ("/no/such/handler", 127),
        ("no-such-handler-in-path", 127),
        (&plain, 126),
        (dir.path().to_str().unwrap(), 126),
    ];
    for (handler, code) in cases {
        let mut worker = queue(&s, "work", &["--queue", "q", "--", handler])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = exit_within(&mut worker, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("work -- {handler} kept running"));
        assert_eq!(out.status.code(), Some(code), "{handler}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(handler), "{handler}: {stderr}");
    }
    let st = stats(&s);
    assert_eq!(
        (
            st["ready"].as_i64(),
            st["running"].as_i64(),
            st["dead"].as_i64()
        ),
        (Some(1), Some(0), Some(0)),
        "nothing was claimed"
    );
    let dead = ok(queue(&s, "dead", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    assert_eq!(dead, "", "no attempt was spent");
}

/// `stats`, `dead`, `show`, `list`, `retry`, `run-now`, `cancel`, `purge` and `prune` never create the
/// queue's tables: on a store that was never migrated they exit 64 with a message that says
/// so, and leave it as it was.
pub(super) fn read_and_admin_commands_do_not_create_the_store(s: Db) {
    let commands: [(&str, &[&str]); 12] = [
        ("stats", &["--queue", "q"]),
        ("dead", &["--queue", "q", "--json"]),
        ("show", &["1"]),
        ("list", &["--queue", "q", "--state", "ready"]),
        ("retry", &["1"]),
        ("retry", &["--all", "--queue", "q"]),
        ("run-now", &["1"]),
        ("cancel", &["1"]),
        ("purge", &["--older-than", "1s"]),
        ("prune", &["--done", "--older-than", "1s"]),
        ("pause", &["q"]),
        ("resume", &["q"]),
    ];
    // Twice: had the first round created anything, the second would succeed.
    for round in 0..2 {
        for (sub, args) in commands {
            let out = queue(&s, sub, args).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(64),
                "{sub} (round {round}): {out:?}"
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("does not exist")
                    && stderr.contains("lockwise queue migrate")
                    && !stderr.contains("Queue::"),
                "{sub}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{sub} printed: {out:?}");
        }
    }
    let created = queue(&s, "migrate", &[]).output().unwrap();
    assert!(created.status.success(), "{created:?}");
    assert_eq!(stats(&s)["ready"], 0, "stats works once migrated");
}

/// A store that `work` or `enqueue` creates is said on stderr (a mistyped --schema shows at
/// once), and `stats` of a queue without a single job says so (a mistyped --queue).
pub(super) fn a_created_store_and_an_empty_queue_are_pointed_out(s: Db) {
    let work = queue(&s, "work", &["--queue", "q", "--once", "--", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&work.stderr);
    assert!(work.status.success(), "{said}");
    assert!(said.contains("created the queue's"), "{said}");
    let enqueue = queue(&s, "enqueue", &["--queue", "q", "--payload", "{}"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&enqueue.stderr);
    assert!(enqueue.status.success() && said.is_empty(), "{said}");
    for (name, empty) in [("q", false), ("Q", true), ("typo", true)] {
        let out = queue(&s, "stats", &["--queue", name, "--json"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert_eq!(
            said.contains("has no job in any state"),
            empty,
            "{name}: {said}"
        );
    }
}

/// `work` cut off from its database gives up with exit 69 after --give-up-after (counted from
/// the first failed claim; one with no answer fails at its lease), saying why, and logs each
/// failing task once, not at every retry.
pub(super) fn work_cut_off_from_its_database_gives_up_after_the_documented_bound(s: Db) {
    ok(queue(&s, "migrate", &[]).output().unwrap());
    let url = s.url();
    let port = s.port();
    let proxy = lockwise_testkit::proxy::TcpProxy::start(port);
    let through = url.replace(&format!(":{port}/"), &format!(":{}/", proxy.port()));
    let worker = Command::new(BIN)
        .args(["queue", "work", "--url", &through, "--schema", s.schema()])
        .args(["--queue", "q", "--lease", "1s", "--give-up-after", "2s"])
        .args(["--poll-interval", "100ms", "--", "true"])
        .env_remove("LOCKWISE_URL")
        .env_remove("LOCKWISE_SCHEMA")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    proxy.cut();
    let cut = Instant::now();
    let out = worker.wait_with_output().unwrap();
    let took = cut.elapsed();
    let said = String::from_utf8_lossy(&out.stderr);
    println!("gave up {took:?} after the cut:\n{said}");
    assert_eq!(out.status.code(), Some(69), "{said}");
    assert!(
        said.contains("gave up: no claim succeeded for 2s"),
        "{said}"
    );
    // Lease (1 s) + 2 s, and the stop: no handler runs, so no grace is spent.
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}: {said}"
    );
    assert_eq!(said.matches("claim failed").count(), 1, "{said}");
    assert!(
        !said.contains("succeeds again"),
        "nothing succeeded: {said}"
    );
    for task in ["heartbeat", "table maintenance", "reaping"] {
        let failed = format!("{task} failed");
        assert!(said.matches(failed.as_str()).count() <= 1, "{said}");
    }
}

/// `--payload -` reads the payload from stdin and `--payload @FILE` from a file: a 10 MB
/// payload (more than argv can carry) reaches the handler intact.
pub(super) fn a_large_payload_comes_from_stdin_or_a_file(s: Db) {
    let big = serde_json::json!({"blob": "x".repeat(10 * 1024 * 1024), "n": 1});
    let mut enqueue = queue(&s, "enqueue", &["--queue", "q", "--payload", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = big.to_string();
    let mut stdin = enqueue.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        std::io::Write::write_all(&mut stdin, text.as_bytes()).unwrap();
    });
    let first = ok(enqueue.wait_with_output().unwrap());
    writer.join().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload.json");
    std::fs::write(&file, r#"{"from": "a file"}"#).unwrap();
    let at_file = format!("@{}", file.display());
    let second = ok(
        queue(&s, "enqueue", &["--queue", "q", "--payload", &at_file])
            .output()
            .unwrap(),
    );

    let script = format!("cat > {}/$LOCKWISE_JOB_ID", dir.path().display());
    let mut worker = queue(&s, "work", &["--queue", "q", "--", "sh", "-c", &script])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("both jobs to be done", Duration::from_secs(30), || {
        stats(&s)["done"] == 2
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    let seen = |id: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(dir.path().join(id.trim())).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    assert!(seen(&first) == big, "the 10 MB payload arrived intact");
    assert_eq!(seen(&second), serde_json::json!({"from": "a file"}));

    for (payload, input) in [("-", "{nope"), ("@/no/such/file", "")] {
        let mut bad = queue(&s, "enqueue", &["--queue", "q", "--payload", payload])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // (lockwise may exit before it reads a byte)
        let _ = std::io::Write::write_all(&mut bad.stdin.take().unwrap(), input.as_bytes());
        let out = bad.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{payload}: {out:?}");
    }
}

/// A payload over MariaDB's `max_allowed_packet` is an input error that names the limit (exit
/// 64, nothing stored, no driver warning), not a backend failure (69).
#[test]
pub(super) fn a_payload_over_max_allowed_packet_is_an_input_error_on_mariadb() {
    let s = Db::my("qcli");
    ok(queue(&s, "migrate", &[]).output().unwrap());
    let file = tempfile::NamedTempFile::new().unwrap();
    let big = serde_json::json!({"blob": "x".repeat(17 * 1024 * 1024)});
    std::fs::write(file.path(), big.to_string()).unwrap();
    let at_file = format!("@{}", file.path().display());
    let out = queue(&s, "enqueue", &["--queue", "q", "--payload", &at_file])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("max_allowed_packet") && stderr.contains("16760832 bytes"),
        "{stderr}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(stats(&s)["ready"], 0);
}
