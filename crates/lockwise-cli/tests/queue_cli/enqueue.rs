//! Enqueueing from stdin: JSON lines, and a closed stdout.

use super::*;

/// Runs `queue enqueue` with `args`, `input` on its stdin.
pub(super) fn enqueue_with_stdin(s: &Db, args: &[&str], input: String) -> Output {
    let mut all = vec!["--queue", "q"];
    all.extend_from_slice(args);
    let mut child = queue(s, "enqueue", &all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // (lockwise may exit before it reads everything)
        let _ = std::io::Write::write_all(&mut stdin, input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `enqueue --jsonl`: one job per line, ids printed in input order, flags as the lines'
/// defaults, keys as for single enqueues; a bad line anywhere exits 65 naming it, and
/// nothing of that input is stored.
pub(super) fn enqueue_jsonl_adds_every_line_or_none(s: Db) {
    let mut input: String = (0..2_500)
        .map(|n| format!("{{\"payload\": {{\"n\": {n}}}}}\n"))
        .collect();
    input.push('\n'); // blank lines are skipped
    input.push_str(
        r#"{"payload": "keyed", "key": "k", "priority": -2, "delay": "1h", "max_attempts": 2}"#,
    );
    input.push('\n');
    input.push_str(r#"{"payload": "again", "key": "k"}"#);
    let out = ok(enqueue_with_stdin(
        &s,
        &["--jsonl", "--priority", "7"],
        input,
    ));
    let ids: Vec<i64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 2_502);
    assert!(ids[..2_501].windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        ids[2_501], ids[2_500],
        "the repeated key names the first job"
    );
    let show = |id: i64| -> serde_json::Value {
        let out = ok(queue(&s, "show", &[&id.to_string(), "--json"])
            .output()
            .unwrap());
        serde_json::from_str(out.trim()).unwrap()
    };
    let first = show(ids[0]);
    assert_eq!(
        (
            &first["payload"],
            &first["priority"],
            &first["max_attempts"]
        ),
        (
            &serde_json::json!({"n": 0}),
            &serde_json::json!(7),
            &serde_json::json!(5)
        )
    );
    let keyed = show(ids[2_500]);
    assert_eq!(
        (
            &keyed["payload"],
            &keyed["priority"],
            &keyed["max_attempts"],
            &keyed["state"]
        ),
        (
            &serde_json::json!("keyed"),
            &serde_json::json!(-2),
            &serde_json::json!(2),
            &serde_json::json!("scheduled")
        )
    );
    assert_eq!(
        (stats(&s)["ready"].clone(), stats(&s)["scheduled"].clone()),
        (2_500.into(), 1.into())
    );

    // --json: one object per line; the key is a duplicate now.
    let out = ok(enqueue_with_stdin(
        &s,
        &["--jsonl", "--json"],
        "{\"payload\": 1, \"key\": \"k\"}\n{\"payload\": 2}\n".to_owned(),
    ));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        serde_json::json!({"id": ids[2_500], "duplicate": true})
    );
    assert_eq!(lines[1]["duplicate"], false);

    // A bad line, last of 3,001: exit 65 naming it, and none of the 3,000 good ones stored.
    for (bad, why) in [
        (r#"{"payload": 1, "priority": "high"}"#, "invalid type"),
        (r#"{"payload": 1, "dealy": "5s"}"#, "unknown field"),
        (r#"{"key": "k"}"#, "missing field `payload`"),
        (r#"{"payload": "nul\u0000"}"#, "NUL"),
        (r#"{"payload": 1, "delay": "5"}"#, "delay"),
        (r#"{"payload": 1, "max_attempts": 0}"#, "max_attempts"),
        ("not json", "line 3001"),
    ] {
        let mut input: String = (0..3_000)
            .map(|n| format!("{{\"payload\": {n}, \"key\": \"new-{n}\"}}\n"))
            .collect();
        input.push_str(bad);
        input.push('\n');
        let out = enqueue_with_stdin(&s, &["--jsonl"], input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(65), "{bad}: {out:?}");
        assert!(
            stderr.contains("line 3001") && stderr.contains(why),
            "{bad}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{bad}: {out:?}");
    }
    let after = stats(&s);
    assert_eq!(
        (after["ready"].clone(), after["scheduled"].clone()),
        (2_501.into(), 1.into())
    );
}

/// `enqueue --jsonl` lines that name their own queue go to it, in one transaction with the
/// others; the ids come back in input order, keys are per queue, and a bad queue name exits
/// 65 naming the line.
pub(super) fn enqueue_jsonl_lines_name_their_own_queues(s: Db) {
    let input = [
        r#"{"payload": 1, "queue": "mail"}"#,
        r#"{"payload": 2}"#,
        r#"{"payload": 3, "queue": "reports", "key": "k"}"#,
        r#"{"payload": 4, "queue": "mail", "key": "k"}"#,
        r#"{"payload": 5, "queue": "reports", "key": "k"}"#,
    ]
    .join("\n");
    let out = ok(enqueue_with_stdin(&s, &["--jsonl", "--json"], input));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 5);
    let duplicates: Vec<bool> = lines
        .iter()
        .map(|l| l["duplicate"].as_bool().unwrap())
        .collect();
    assert_eq!(duplicates, [false, false, false, false, true]);
    assert_eq!(
        lines[4]["id"], lines[2]["id"],
        "the key of reports names its job"
    );
    for (line, (queue, payload)) in
        lines
            .iter()
            .zip([("mail", 1), ("q", 2), ("reports", 3), ("mail", 4)])
    {
        let shown = ok(queue_cmd_show(&s, line["id"].as_i64().unwrap()));
        let shown: serde_json::Value = serde_json::from_str(shown.trim()).unwrap();
        assert_eq!(
            (&shown["queue"], &shown["payload"]),
            (&serde_json::json!(queue), &serde_json::json!(payload))
        );
    }
    let bad = enqueue_with_stdin(
        &s,
        &["--jsonl"],
        format!(
            "{{\"payload\": 1, \"queue\": \"a\"}}\n{{\"payload\": 2, \"queue\": \"{}\"}}\n",
            "x".repeat(300)
        ),
    );
    assert_eq!(bad.status.code(), Some(65), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("line 2"),
        "{bad:?}"
    );
    let overview = ok(queue(&s, "stats", &["--json"]).output().unwrap());
    assert!(
        !overview.contains("\"queue\":\"a\""),
        "nothing of the bad input: {overview}"
    );
}

fn queue_cmd_show(s: &Db, id: i64) -> Output {
    queue(s, "show", &[&id.to_string(), "--json"])
        .output()
        .unwrap()
}

/// A reader that goes away before the ids are printed (`| head -0`) ends `enqueue --jsonl`
/// and `list` with exit 74 and a message, not a panic: the jobs stay enqueued.
pub(super) fn a_closed_stdout_is_exit_74_not_a_panic(s: Db) {
    let closed = |sub: &str, args: &[&str]| {
        let mut child = queue(&s, sub, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before anything is written
        let mut stdin = child.stdin.take().unwrap();
        let input: String = (0..3)
            .map(|n| format!("{{\"payload\": {{\"n\": {n}}}}}\n"))
            .collect();
        let _ = std::io::Write::write_all(&mut stdin, input.as_bytes());
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let out = closed("enqueue", &["--queue", "q", "--jsonl"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{out:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("the jobs were enqueued"), "{stderr}");
    assert_eq!(stats(&s)["ready"], 3);
    let out = closed("list", &["--queue", "q", "--state", "ready"]);
    assert_eq!(out.status.code(), Some(74), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
}
