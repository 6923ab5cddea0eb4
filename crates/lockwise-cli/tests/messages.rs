//! What a user types and reads: backend URLs as typed, error texts, log output (issue 11).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// `file:relative` and `file:./dir` name directories under the working directory, not under `/`.
#[test]
fn relative_file_urls_resolve_against_the_working_directory() {
    for (url, dir) in [
        ("file:relative-locks", "relative-locks"),
        ("file:./dot/locks", "dot/locks"),
    ] {
        let cwd = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .current_dir(cwd.path())
            .args(["run", "--url", url, "--key", "k", "--", "true"])
            .env_remove("LOCKWISE_URL")
            .output()
            .unwrap();
        assert!(out.status.success(), "{url}: {out:?}");
        assert!(
            cwd.path().join(dir).is_dir(),
            "{url} did not create {dir} under the working directory"
        );
        assert!(
            !std::path::Path::new("/").join(dir).exists(),
            "{url} created /{dir}"
        );
    }
}

/// Runs `lockwise ARGS` and returns (exit code, stderr, seconds).
fn fails(args: &[&str]) -> (i32, String, f64) {
    let started = std::time::Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .env_remove("LOCKWISE_URL")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed().as_secs_f64(),
    )
}

fn run_on(url: &str) -> (i32, String, f64) {
    fails(&["run", "--url", url, "--key", "k", "--", "true"])
}

#[test]
fn a_server_of_another_kind_is_named_as_such() {
    let (code, err, _) = run_on("postgres://postgres@127.0.0.1:3306/x");
    assert_eq!(code, 69);
    assert!(err.contains("not a PostgreSQL server"), "{err}");
    assert!(!err.contains("SSLRequest"), "{err}");
    let (code, err, _) = run_on("redis://127.0.0.1:3306/");
    assert_eq!(code, 69);
    assert!(err.contains("not a Redis server"), "{err}");
    assert!(!err.contains("Unexpected"), "{err}");
}

#[test]
fn server_errors_carry_no_source_positions() {
    let (code, err, _) = run_on("postgres://no_such_role@127.0.0.1:5432/postgres");
    assert_eq!(code, 69);
    assert!(
        err.contains("role \"no_such_role\" does not exist"),
        "{err}"
    );
    assert!(!err.contains("at line"), "{err}");
}

#[test]
fn a_refused_port_is_reported_at_once_by_every_command() {
    let port = lockwise_testkit::closed_port();
    for url in [
        format!("postgres://postgres@127.0.0.1:{port}/x"),
        format!("mysql://root@127.0.0.1:{port}/x"),
    ] {
        for args in [
            vec!["run", "--url", &url, "--key", "k", "--", "true"],
            vec!["queue", "stats", "--url", &url, "--queue", "q"],
        ] {
            let (code, err, secs) = fails(&args);
            assert_eq!(code, 69, "{args:?}: {err}");
            assert!(err.contains("Connection refused"), "{args:?}: {err}");
            assert!(secs < 1.0, "{args:?} took {secs:.2} s");
        }
    }
}

/// Unreachable Sentinel and Cluster URLs, and a Redis server that is no sentinel: one line
/// each, exit 69, no library warnings before it.
#[test]
fn sentinel_and_cluster_urls_fail_in_one_line() {
    let port = lockwise_testkit::closed_port();
    for (url, says) in [
        (
            format!("redis+cluster://127.0.0.1:{port}"),
            "Connection refused",
        ),
        (
            format!("redis+sentinel://127.0.0.1:{port}/lw"),
            "Connection refused",
        ),
        (
            "redis+sentinel://127.0.0.1:6379/lw".to_owned(),
            "does not point to a sentinel",
        ),
    ] {
        let (code, err, secs) = run_on(&url);
        assert_eq!(code, 69, "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{url}: {err}");
        assert!(secs < 4.0, "{url} took {secs:.2} s");
    }
    let (code, err, _) = run_on("redis+sentinel://127.0.0.1:1");
    assert_eq!(code, 64, "no master name: {err}");
}

#[test]
fn file_errors_say_why() {
    let (code, err, _) = run_on("file:///proc/no-such-dir");
    assert_eq!(code, 69);
    assert!(err.contains("os error"), "{err}");
}

/// Diagnostics written to a pipe or a file carry no ANSI colour codes.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let out = Command::new(BIN)
        .args(["run", "--url", &url, "--key", "k", "--", "true"])
        .env("LOCKWISE_LOG", "debug")
        .env_remove("LOCKWISE_URL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        err.contains("acquired"),
        "debug logging printed no event: {err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "escape codes in piped logs: {err:?}"
    );
}

/// PostgreSQL's notices ("… already exists, skipping") never reach the user, even at info.
#[test]
fn postgres_notices_are_not_logged() {
    let schema = lockwise_testkit::PgSchema::new("notices");
    let migrate = || {
        Command::new(BIN)
            .args([
                "queue",
                "migrate",
                "--url",
                schema.url(),
                "--schema",
                schema.name(),
            ])
            .env("LOCKWISE_LOG", "info")
            .env_remove("LOCKWISE_URL")
            .output()
            .unwrap()
    };
    assert!(migrate().status.success());
    let again = migrate();
    assert!(again.status.success(), "{again:?}");
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!err.contains("already exists"), "{err}");
}

/// A waiter on a database lock logs nothing at the warn level: its probe's lock call is a
/// wait, not a slow statement.
#[test]
fn waiting_on_a_database_lock_prints_no_warnings() {
    let pg = lockwise_testkit::PgDatabase::postgres("quietwait");
    let my = lockwise_testkit::MysqlDatabase::mysql("quietwait");
    for (url, key) in [
        (pg.url(), format!("{}-k", pg.name())),
        (my.url(), format!("{}-k", my.name())),
    ] {
        let mut holder = Command::new(BIN)
            .args(["run", "--url", &url, "--key", &key, "--", "sleep", "2.5"])
            .env_remove("LOCKWISE_URL")
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let waiter = Command::new(BIN)
            .args([
                "run", "--url", &url, "--key", &key, "--wait", "10s", "--", "true",
            ])
            .env("LOCKWISE_LOG", "warn")
            .env_remove("LOCKWISE_URL")
            .output()
            .unwrap();
        assert!(holder.wait().unwrap().success());
        assert!(waiter.status.success(), "{waiter:?}");
        let err = String::from_utf8_lossy(&waiter.stderr);
        assert!(err.trim().is_empty(), "{url}: a normal wait printed: {err}");
    }
}

/// A password with `#` (or `@`, `/`, `?`) typed as is in the URL is the password, not the
/// start of a fragment.
#[test]
fn a_password_with_a_hash_works_as_typed() {
    let server = lockwise_testkit::RedisServer::start(&["--requirepass", "p#ss@w/rd?"]);
    let url = format!("redis://:p#ss@w/rd?@127.0.0.1:{}/", server.port());
    let out = Command::new(BIN)
        .args(["run", "--url", &url, "--key", "k", "--", "true"])
        .env_remove("LOCKWISE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let wrong = format!("redis://:p#ss@127.0.0.1:{}/", server.port());
    let (code, err, _) = run_on(&wrong);
    assert_eq!(code, 69, "{err}");
    assert!(
        err.contains(&format!("redis://:***@127.0.0.1:{}/", server.port())),
        "{err}"
    );
    assert!(!err.contains("p#ss"), "{err}");
}

/// The lab's actors get the backend URL through the environment: its password never shows on
/// a command line (`ps`).
#[test]
fn lab_actors_carry_no_password_in_argv() {
    let server = lockwise_testkit::RedisServer::start(&["--requirepass", "s3cret-pw"]);
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}/", server.port());
    for scenario in ["fencing", "partition"] {
        let mut lab = Command::new(BIN)
            .args(["lab", scenario, "--json", "--url", &url])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut actors_seen = 0;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while lab.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                    continue;
                };
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains("lab-actor") || cmdline.contains("partition-actor") {
                    actors_seen += 1;
                    assert!(
                        !cmdline.contains("s3cret-pw"),
                        "password in argv: {cmdline}"
                    );
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let status = lab.wait().unwrap();
        assert!(status.success(), "{scenario}: {status:?}");
        assert!(actors_seen > 0, "{scenario}: no actor was seen running");
    }
}

/// A lost lock is reported once.
#[test]
fn a_lost_lock_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let child = Command::new(BIN)
        .args([
            "run", "--url", &url, "--key", "k", "--ttl", "600ms", "--", "sleep", "5",
        ])
        .env_remove("LOCKWISE_URL")
        .env_remove("LOCKWISE_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "lease") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(70));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("lost"), "{err}");
}

/// `--password-file` (or `LOCKWISE_PASSWORD_FILE`) supplies the password, so it never has to
/// appear in a URL on a command line.
#[test]
fn a_password_file_keeps_the_password_off_the_command_line() {
    let server = lockwise_testkit::RedisServer::start(&["--requirepass", "s3cret #1"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "s3cret #1\n").unwrap();
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let file_arg = file.to_str().unwrap();
    let (code, err, _) = fails(&["run", "--url", &url, "--key", "k", "--", "true"]);
    assert_eq!(code, 69, "without the password the server refuses: {err}");
    let (code, err, _) = fails(&[
        "run",
        "--url",
        &url,
        "--password-file",
        file_arg,
        "--key",
        "k",
        "--",
        "true",
    ]);
    assert_eq!(code, 0, "{err}");
    let out = Command::new(BIN)
        .args(["run", "--url", &url, "--key", "k", "--", "true"])
        .env("LOCKWISE_PASSWORD_FILE", &file)
        .env_remove("LOCKWISE_URL")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (code, err, _) = fails(&[
        "run",
        "--url",
        &url,
        "--password-file",
        "/no/such/file",
        "--key",
        "k",
        "--",
        "true",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("/no/such/file"), "{err}");
    let file_url = format!("file://{}", dir.path().display());
    let (code, err, _) = fails(&[
        "run",
        "--url",
        &file_url,
        "--password-file",
        file_arg,
        "--key",
        "k",
        "--",
        "true",
    ]);
    assert_eq!(code, 64, "{err}");
}

/// Runs `lockwise ARGS` with stdout to `stdout` and returns (exit code, stdout, stderr).
fn output(args: &[&str], stdout: std::process::Stdio) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("LOCKWISE_URL")
        .stdout(stdout)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--no-renew` ends the lease one TTL after the grant and stops the command, and the messages
/// say that it was not renewed, not that a renewal failed.
#[test]
fn a_lease_without_renewal_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let args = [
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--ttl",
        "1s",
        "--no-renew",
    ];
    let started = std::time::Instant::now();
    let (code, _, err) = output(
        &[&args[..], &["--kill-after", "200ms", "--", "sleep", "5"]].concat(),
        std::process::Stdio::null(),
    );
    assert_eq!(code, 70, "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{err}"
    );
    assert!(err.contains("--no-renew"), "{err}");
    assert!(!err.contains("could not be renewed"), "{err}");
}

/// Values are echoed as the user wrote them, and a path where a URL belongs says which URL.
#[test]
fn bad_values_are_echoed_as_written() {
    let (code, err, _) = fails(&["run", "--key", "k", "--ttl", "25h", "--", "true"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("invalid TTL 25h"), "{err}");
    assert!(!err.contains("90000"), "{err}");
    let (code, err, _) = fails(&["run", "--url", "/var/lock/app", "--key", "k", "--", "true"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("file:///var/lock/app"), "{err}");
    assert!(!err.contains("relative URL without a base"), "{err}");
}

/// `man` renders any subcommand's page, nested ones too, each with ENVIRONMENT and EXAMPLES.
#[test]
fn man_pages_cover_nested_commands_with_environment_and_examples() {
    for path in [
        &[][..],
        &["run"],
        &["queue"],
        &["queue", "work"],
        &["members"],
    ] {
        let args: Vec<&str> = std::iter::once("man").chain(path.iter().copied()).collect();
        let (code, page, err) = output(&args, std::process::Stdio::piped());
        assert_eq!(code, 0, "{path:?}: {err}");
        let title = std::iter::once("lockwise")
            .chain(path.iter().copied())
            .collect::<Vec<_>>()
            .join("-");
        assert!(
            page.lines()
                .any(|l| l.starts_with(&format!(".TH {title} "))),
            "{path:?}: {page}"
        );
        for section in [".SH ENVIRONMENT", ".SH EXAMPLES", "LOCKWISE_LOG"] {
            assert!(page.contains(section), "{path:?} lacks {section}");
        }
    }
    let (_, work, _) = output(&["man", "queue", "work"], std::process::Stdio::piped());
    assert!(work.contains("LOCKWISE_URL") && work.contains("./send.sh"));
    let (code, _, err) = output(&["man", "queue", "nope"], std::process::Stdio::piped());
    assert_eq!(code, 64, "{err}");
}

/// Shell completion offers the states for `queue list --state`, not file names.
#[test]
fn completion_offers_the_job_states() {
    let (code, script, _) = output(&["completions", "bash"], std::process::Stdio::piped());
    assert_eq!(code, 0);
    assert!(
        script.contains("\"ready scheduled running done dead cancelled\""),
        "no state values in the bash completion"
    );
}

/// A full disk is exit 74 (the output code) for every command that prints, not 69 (a backend
/// failure) for some.
#[test]
fn a_full_disk_is_an_output_error_for_every_printing_command() {
    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["man", "queue", "work"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let (code, _, err) = output(args, std::process::Stdio::from(full));
        assert_eq!(code, 74, "{args:?}: {err}");
        assert!(err.contains("cannot write to stdout"), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (code, _, err) = output(
        &["members", "--url", &url, "--group", "g"],
        std::process::Stdio::from(full),
    );
    assert_eq!(code, 74, "members: {err}");
}

/// `run` behind PgBouncer in transaction pooling mode is refused before anything runs (a
/// session lock could pass to another client), in one line that names the ways out; through a
/// session-mode pool it runs.
#[test]
fn run_behind_transaction_pooling_names_lock_xact_and_a_session_pool() {
    use lockwise_testkit::{PgBouncer, PoolMode};
    let transaction = PgBouncer::start(PoolMode::Transaction);
    let url = transaction.url_of(&lockwise_testkit::postgres_url());
    let (code, err, _) = run_on(&url);
    assert_eq!(code, 64, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for named in ["per transaction", "lock_xact", "session-mode pool"] {
        assert!(err.contains(named), "{named:?} missing from: {err}");
    }
    let session = PgBouncer::start(PoolMode::Session);
    let url = session.url_of(&lockwise_testkit::postgres_url());
    let (code, err, _) = run_on(&url);
    assert_eq!(code, 0, "{err}");
}
