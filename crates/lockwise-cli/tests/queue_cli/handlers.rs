//! What handlers store and do: errors, follow-up jobs, bad jobs, messages.

use super::*;

/// A handler whose stderr holds a NUL byte and invalid UTF-8 still has its failure recorded at
/// once (not "lease expired" a lease later): the dead letter carries the real error, escaped.
pub(super) fn a_handler_error_with_nul_and_invalid_utf8_is_stored(s: Db) {
    ok(queue(
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
            r"printf 'bad\000byte \377 end\n' >&2; exit 1",
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // Well within the default 30 s lease: the failure itself was stored.
    wait_for("the job to die", Duration::from_secs(15), || {
        stats(&s)["dead"] == 1
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    let dead = ok(queue(&s, "dead", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    let dead: serde_json::Value = serde_json::from_str(dead.lines().next().unwrap()).unwrap();
    let error = dead["last_error"].as_str().unwrap();
    assert!(
        error.contains("exited with 1") && error.contains(r"bad\0byte") && error.contains("end"),
        "{error}"
    );
    assert!(!error.contains('\0'), "{error:?}");
    assert_eq!(dead["errors"][0]["error"], error, "the history has it too");
}

/// A handler gets the payload as one line (`read` works) and `LOCKWISE_URL` and
/// `LOCKWISE_SCHEMA`, so a plain `lockwise queue enqueue` in it adds a follow-up job.
pub(super) fn a_handler_reads_a_line_and_enqueues_a_follow_up(s: Db) {
    ok(queue(
        &s,
        "enqueue",
        &[
            "--queue",
            "q",
            "--payload",
            r#"{"step":1}"#,
            "--max-attempts",
            "1",
        ],
    )
    .output()
    .unwrap());
    let dir = tempfile::tempdir().unwrap();
    let line = dir.path().join("line");
    let script = format!(
        "read -r x || exit 9; printf '%s' \"$x\" > {line}; \
         lockwise queue enqueue --queue next --payload \"$x\" --key from-$LOCKWISE_JOB_ID",
        line = line.display()
    );
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut worker = queue(&s, "work", &["--queue", "q", "--", "sh", "-c", &script])
        .env("PATH", path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the job to finish", Duration::from_secs(20), || {
        let st = stats(&s);
        st["done"] == 1 || st["dead"] == 1
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    assert_eq!(stats(&s)["done"], 1, "the handler succeeded");
    assert_eq!(std::fs::read_to_string(&line).unwrap(), r#"{"step":1}"#);
    let next = ok(queue(&s, "stats", &["--queue", "next", "--json"])
        .output()
        .unwrap());
    let next: serde_json::Value = serde_json::from_str(next.trim()).unwrap();
    assert_eq!(next["ready"], 1, "the follow-up job was enqueued");
}

/// The library judges a job before either database sees it: a NUL in the payload, a queue
/// name that is empty or over 255 bytes, a key over 255 bytes exit 64 on both, and nothing is
/// stored; the limits themselves are accepted on both.
pub(super) fn both_databases_refuse_the_same_bad_jobs_with_64(s: Db) {
    let long_queue = "q".repeat(1000);
    let long_key = "k".repeat(5000);
    let bad: [&[&str]; 5] = [
        &["--queue", "q", "--payload", r#"{"a":"x\u0000y"}"#],
        &["--queue", "q", "--payload", r#"{"x\u0000":1}"#],
        &["--queue", "", "--payload", "{}"],
        &["--queue", &long_queue, "--payload", "{}"],
        &["--queue", "q", "--payload", "{}", "--key", &long_key],
    ];
    for args in bad {
        let out = queue(&s, "enqueue", args).output().unwrap();
        let shown: Vec<String> = args.iter().map(|a| a.chars().take(40).collect()).collect();
        assert_eq!(out.status.code(), Some(64), "{shown:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{shown:?}");
    }
    // Refused before connecting: not even the store was created.
    let nothing = queue(&s, "stats", &["--queue", "q"]).output().unwrap();
    assert_eq!(nothing.status.code(), Some(64), "{nothing:?}");
    let at_limit_queue = "q".repeat(255);
    let at_limit_key = "k".repeat(255);
    ok(queue(
        &s,
        "enqueue",
        &[
            "--queue",
            &at_limit_queue,
            "--payload",
            "{}",
            "--key",
            &at_limit_key,
        ],
    )
    .output()
    .unwrap());
    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", r#"{"a":"\\u0000 is text"}"#],
    )
    .output()
    .unwrap());
    assert_eq!(stats(&s)["ready"], 1);
}

/// `migrate` says whether it created the store or found it up to date, `purge` counts in
/// good English, a lease under 1 s is refused (64) instead of silently raised, and the help
/// names both databases.
pub(super) fn messages_say_what_happened(s: Db) {
    let stderr = |out: Output| {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let first = stderr(queue(&s, "migrate", &[]).output().unwrap());
    assert!(first.contains("created"), "{first}");
    let again = stderr(queue(&s, "migrate", &[]).output().unwrap());
    assert!(again.contains("up to date"), "{again}");

    ok(queue(
        &s,
        "enqueue",
        &["--queue", "q", "--payload", "{}", "--max-attempts", "1"],
    )
    .output()
    .unwrap());
    let mut worker = queue(&s, "work", &["--queue", "q", "--", "sh", "-c", "exit 1"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the job to die", Duration::from_secs(20), || {
        stats(&s)["dead"] == 1
    });
    worker.kill().unwrap();
    worker.wait().unwrap();
    let purged = stderr(
        queue(&s, "purge", &["--queue", "q", "--older-than", "0s"])
            .output()
            .unwrap(),
    );
    assert_eq!(purged, "lockwise: purged 1 dead job\n");
    let none = stderr(
        queue(&s, "purge", &["--older-than", "0s"])
            .output()
            .unwrap(),
    );
    assert_eq!(none, "lockwise: purged 0 dead jobs\n");

    for lease in ["0s", "999ms"] {
        let mut worker = queue(
            &s,
            "work",
            &["--queue", "q", "--lease", lease, "--", "true"],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let out = exit_within(&mut worker, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("work --lease {lease} kept running"));
        assert_eq!(out.status.code(), Some(64), "--lease {lease}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("at least 1s"),
            "{out:?}"
        );
    }

    let help = ok(Command::new(BIN)
        .args(["queue", "--help"])
        .output()
        .unwrap());
    assert!(
        help.contains("MariaDB") && help.contains("PostgreSQL"),
        "{help}"
    );
}

/// `enqueue --json` prints `{"id": N, "duplicate": bool}`: `true` only when the key named a
/// job already there (whose id it is).
pub(super) fn enqueue_json_says_whether_the_key_was_a_duplicate(s: Db) {
    let enqueue = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--queue", "q", "--payload", "{}", "--json"];
        all.extend_from_slice(args);
        let out = ok(queue(&s, "enqueue", &all).output().unwrap());
        assert_eq!(out.lines().count(), 1, "{out}");
        serde_json::from_str(out.trim()).unwrap()
    };
    let first = enqueue(&["--key", "k"]);
    assert_eq!(first["duplicate"], false, "{first}");
    assert!(first["id"].as_i64().is_some(), "{first}");
    let again = enqueue(&["--key", "k"]);
    assert_eq!(
        again,
        serde_json::json!({"id": first["id"], "duplicate": true})
    );
    let other = enqueue(&["--key", "other"]);
    assert_eq!(other["duplicate"], false);
    assert_ne!(other["id"], first["id"]);
    let keyless = enqueue(&[]);
    assert_eq!(keyless["duplicate"], false);
    assert_eq!(stats(&s)["ready"], 3);
}

/// The `job ended` lines of a worker's stderr, as `(id, outcome)`.
pub(super) fn job_lines(stderr: &str) -> Vec<(String, String)> {
    let field = |line: &str, name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    stderr
        .lines()
        .filter(|l| l.contains("job ended"))
        .map(|l| (field(l, "id"), field(l, "outcome")))
        .collect()
}
