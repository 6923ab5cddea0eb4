//! `lockwise queue` across real processes. Every test works in a schema of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::stamps;
use lockwise_testkit::{MysqlDatabase, PgSchema, closed_port};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// Where a test's queue lives: its own PostgreSQL schema or MariaDB database.
enum Db {
    Pg(PgSchema),
    My(MysqlDatabase),
}

impl Db {
    fn pg(label: &str) -> Self {
        Db::Pg(PgSchema::new(label))
    }

    fn my(label: &str) -> Self {
        Db::My(MysqlDatabase::mysql(label))
    }

    fn url(&self) -> String {
        match self {
            Db::Pg(s) => s.url().to_owned(),
            Db::My(d) => d.url(),
        }
    }

    fn schema(&self) -> &str {
        match self {
            Db::Pg(s) => s.name(),
            Db::My(_) => "lockwise",
        }
    }
}

fn queue(db: &Db, sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["queue", sub, "--url", &db.url(), "--schema", db.schema()])
        .args(args)
        .env_remove("LOCKWISE_URL")
        .env_remove("LOCKWISE_SCHEMA");
    c
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn stats(schema: &Db) -> serde_json::Value {
    let out = ok(queue(schema, "stats", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    serde_json::from_str(out.trim()).unwrap()
}

fn wait_for(what: &str, limit: Duration, mut pred: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !pred() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn enqueue_prints_the_id_the_handler_sees(s: Db) {
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

fn a_failing_handler_stores_its_stderr_and_dies_after_max_attempts(s: Db) {
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
            stderr.contains("no dead job") && stderr.contains(id),
            "{stderr}"
        );
    }
    assert_eq!(stats(&s)["ready"], 1, "the pending job is untouched");
}

/// A worker process killed with SIGKILL mid-job: its handler's tree dies with it, the reaper
/// of another worker rescues the job after the lease, and the job is done once in effect.
fn a_killed_worker_s_job_is_rescued_and_done_once(s: Db) {
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
fn a_frozen_worker_s_handler_dies_by_the_job_s_deadline(s: Db) {
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

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `show`, `list`, `cancel` and `prune`, with their JSON and their exit codes; `stats --json`
/// has counts that do not overlap.
fn jobs_are_shown_listed_cancelled_and_pruned(s: Db) {
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
fn a_cancelled_running_job_is_logged_and_counted_as_cancelled(s: Db) {
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

/// `enqueue --key K --unique-for D`: a duplicate within the window, a new job after it.
fn a_key_can_be_unique_for_a_window(s: Db) {
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
                "300ms",
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
    std::thread::sleep(Duration::from_millis(400));
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
fn text_output_escapes_control_characters(s: Db) {
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

/// Runs `queue enqueue` with `args`, `input` on its stdin.
fn enqueue_with_stdin(s: &Db, args: &[&str], input: String) -> Output {
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
fn enqueue_jsonl_adds_every_line_or_none(s: Db) {
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

/// A reader that goes away before the ids are printed (`| head -0`) ends `enqueue --jsonl`
/// and `list` with exit 74 and a message, not a panic: the jobs stay enqueued.
fn a_closed_stdout_is_exit_74_not_a_panic(s: Db) {
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

macro_rules! on_databases {
    ($($case:ident),*) => {
        mod postgres { use super::*; $(#[test] fn $case() { super::$case(Db::pg("qcli")) })* }
        mod mariadb { use super::*; $(#[test] fn $case() { super::$case(Db::my("qcli")) })* }
    };
}

on_databases!(
    enqueue_prints_the_id_the_handler_sees,
    work_cut_off_from_its_database_gives_up_after_the_documented_bound,
    a_created_store_and_an_empty_queue_are_pointed_out,
    a_cancelled_running_job_is_logged_and_counted_as_cancelled,
    a_failing_handler_stores_its_stderr_and_dies_after_max_attempts,
    a_killed_worker_s_job_is_rescued_and_done_once,
    a_frozen_worker_s_handler_dies_by_the_job_s_deadline,
    a_handler_that_cannot_run_stops_work_before_any_claim,
    read_and_admin_commands_do_not_create_the_store,
    a_large_payload_comes_from_stdin_or_a_file,
    a_handler_error_with_nul_and_invalid_utf8_is_stored,
    a_handler_reads_a_line_and_enqueues_a_follow_up,
    both_databases_refuse_the_same_bad_jobs_with_64,
    messages_say_what_happened,
    enqueue_json_says_whether_the_key_was_a_duplicate,
    jobs_are_shown_listed_cancelled_and_pruned,
    a_key_can_be_unique_for_a_window,
    text_output_escapes_control_characters,
    work_once_drains_the_queue_and_exits_0,
    work_logs_one_line_per_job,
    poll_interval_bounds_how_soon_an_idle_worker_sees_a_job,
    a_timed_out_handler_gets_sigterm_and_its_attempt_fails,
    a_handler_that_ignores_sigterm_is_killed_after_kill_after,
    at_the_end_of_the_grace_a_handler_gets_sigterm_and_its_job_is_handed_back,
    one_worker_works_on_several_queues,
    enqueue_jsonl_adds_every_line_or_none,
    a_closed_stdout_is_exit_74_not_a_panic
);

#[test]
fn usage_and_backend_errors_have_their_exit_codes() {
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
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<Output> {
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
fn a_handler_that_cannot_run_stops_work_before_any_claim(s: Db) {
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

/// `stats`, `dead`, `show`, `list`, `retry`, `cancel`, `purge` and `prune` never create the
/// queue's tables: on a store that was never migrated they exit 64 with a message that says
/// so, and leave it as it was.
fn read_and_admin_commands_do_not_create_the_store(s: Db) {
    let commands: [(&str, &[&str]); 8] = [
        ("stats", &["--queue", "q"]),
        ("dead", &["--queue", "q", "--json"]),
        ("show", &["1"]),
        ("list", &["--queue", "q", "--state", "ready"]),
        ("retry", &["1"]),
        ("cancel", &["1"]),
        ("purge", &["--older-than", "1s"]),
        ("prune", &["--done", "--older-than", "1s"]),
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
fn a_created_store_and_an_empty_queue_are_pointed_out(s: Db) {
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
fn work_cut_off_from_its_database_gives_up_after_the_documented_bound(s: Db) {
    ok(queue(&s, "migrate", &[]).output().unwrap());
    let url = s.url();
    let port = if url.contains(":5432/") { 5432 } else { 3306 };
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
fn a_large_payload_comes_from_stdin_or_a_file(s: Db) {
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
fn a_payload_over_max_allowed_packet_is_an_input_error_on_mariadb() {
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

/// A handler whose stderr holds a NUL byte and invalid UTF-8 still has its failure recorded at
/// once (not "lease expired" a lease later): the dead letter carries the real error, escaped.
fn a_handler_error_with_nul_and_invalid_utf8_is_stored(s: Db) {
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
fn a_handler_reads_a_line_and_enqueues_a_follow_up(s: Db) {
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
fn both_databases_refuse_the_same_bad_jobs_with_64(s: Db) {
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
fn messages_say_what_happened(s: Db) {
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
fn enqueue_json_says_whether_the_key_was_a_duplicate(s: Db) {
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
fn job_lines(stderr: &str) -> Vec<(String, String)> {
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

/// `work --once` drains the queue and exits 0 by itself: the three ready jobs are done, and a
/// delayed job (not ready) neither runs nor keeps the worker waiting.
fn work_once_drains_the_queue_and_exits_0(s: Db) {
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
fn work_logs_one_line_per_job(s: Db) {
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
fn poll_interval_bounds_how_soon_an_idle_worker_sees_a_job(s: Db) {
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
fn job_ms(stderr: &str) -> u64 {
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("job ended")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    lines[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ms="))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no ms= in {stderr}"))
}

/// How long after `from` the file `path` was last written.
fn written_after(path: &std::path::Path, from: std::time::SystemTime) -> Duration {
    let at = std::fs::metadata(path).unwrap().modified().unwrap();
    at.duration_since(from).unwrap_or_default()
}

/// `--timeout 1s --kill-after 5s`: at the limit the handler's process group gets SIGTERM
/// (through `lockwise supervise`, which leaves it to the command), the command's trap runs,
/// and the attempt is recorded as timed out whatever the command then exits with.
fn a_timed_out_handler_gets_sigterm_and_its_attempt_fails(s: Db) {
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
    assert!(
        term >= Duration::from_millis(900) && term < Duration::from_millis(1500),
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
fn a_handler_that_ignores_sigterm_is_killed_after_kill_after(s: Db) {
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
fn at_the_end_of_the_grace_a_handler_gets_sigterm_and_its_job_is_handed_back(s: Db) {
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
fn one_worker_works_on_several_queues(s: Db) {
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
