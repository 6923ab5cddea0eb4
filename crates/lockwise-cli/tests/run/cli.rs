//! The command line: environment, usage errors, help, backend failures, TLS.

use super::*;

#[test]
pub(super) fn the_command_does_not_inherit_the_backend_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", dir.path().display());
    let out = Command::new(BIN)
        .args([
            "run",
            "--key",
            "k",
            "--",
            "sh",
            "-c",
            "echo ${LOCKWISE_URL:-unset}",
        ])
        .env("LOCKWISE_URL", &url)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "unset\n");
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").count() > 0,
        "LOCKWISE_URL was used"
    );
}

/// Runs `lockwise` with raw arguments; returns (exit code, stderr, seconds taken).
pub(super) fn raw(args: Vec<OsString>) -> (i32, String, f64) {
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .env_remove("LOCKWISE_URL")
        .output()
        .expect("run");
    if !out.status.success() {
        assert!(out.stdout.is_empty(), "lockwise wrote to stdout: {out:?}");
    }
    (
        code(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed().as_secs_f64(),
    )
}

pub(super) fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

#[test]
pub(super) fn usage_errors_exit_64() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", dir.path().display());
    let long_key = "k".repeat(513);
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--url", &url, "--key", "", "--", "true"],
        vec!["run", "--url", &url, "--key", &long_key, "--", "true"],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "0s", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "-1s", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "50ms", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "3d", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "10", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--wait", "never", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--wait", "99999y", "--", "true",
        ],
        vec!["run", "--url", "redis://", "--key", "k", "--", "true"],
        vec!["run", "--url", "ftp://host/x", "--key", "k", "--", "true"],
        vec!["run", "--url", "memory:", "--key", "k", "--", "true"],
        vec!["run", "--url", "not a url", "--key", "k", "--", "true"],
        vec!["run", "--url", "file://", "--key", "k", "--", "true"],
        vec!["run", "--url", &url, "--", "true"],
        vec!["run", "--bogus"],
        vec!["nonsense"],
        vec![],
    ];
    for case in cases {
        let (code, stderr, _) = raw(args(&case));
        assert_eq!(code, 64, "{case:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{case:?}: {stderr}");
    }
    let mut non_utf8 = args(&["run", "--url", &url, "--key"]);
    non_utf8.push(OsString::from_vec(vec![b'k', 0xff, 0xfe]));
    non_utf8.extend(args(&["--", "true"]));
    let (code, stderr, _) = raw(non_utf8);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("UTF-8"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "nothing was stored"
    );
    assert_eq!(raw(args(&["--help"])).0, 0);
    assert_eq!(raw(args(&["run", "--help"])).0, 0);
    assert_eq!(raw(args(&["--version"])).0, 0);
}

#[test]
pub(super) fn help_documents_the_exit_codes_and_the_decision_table() {
    let help = Command::new(BIN)
        .args(["run", "--help"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "64",
        "69",
        "70",
        "75",
        "126",
        "127",
        "LOCKWISE_FENCING_TOKEN",
    ] {
        assert!(text.contains(needle), "run --help lacks {needle}");
    }
    let top = Command::new(BIN).arg("--help").output().expect("run");
    assert!(String::from_utf8_lossy(&top.stdout).contains("SKIP LOCKED"));
}

#[test]
pub(super) fn backend_failures_exit_69_within_5s_without_the_password() {
    let secret = "hunter2-secret";
    let auth = RedisServer::start(&["--requirepass", "right-password"]);
    let not_redis = NotRedis::start();
    let silent = NotRedis::silent();
    let urls = [
        format!("redis://:{secret}@127.0.0.1:{}/", silent.port()),
        format!("redis://:{secret}@127.0.0.1:{}/", closed_port()),
        format!("redis://:{secret}@127.0.0.1:{}/", auth.port()),
        format!("redis://127.0.0.1:{}/", auth.port()), // no password at all
        format!("redis://:{secret}@127.0.0.1:{}/", not_redis.port()),
        format!("rediss://:{secret}@127.0.0.1:{}/", not_redis.port()),
        format!("rediss://:{secret}@127.0.0.1:{}/", auth.port()), // TLS to a plain server
        "file:///proc/lockwise-cannot-create-this".to_owned(),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            closed_port()
        ),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            not_redis.port()
        ),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            silent.port()
        ),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", closed_port()),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", not_redis.port()),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", silent.port()),
        format!("mysql://nobody:{secret}@127.0.0.1:3306/test"), // refused login
        format!("postgres://postgres:{secret}@127.0.0.1:5432/no_such_database"),
    ];
    #[cfg(feature = "etcd")]
    let urls = urls.into_iter().chain([
        format!("etcd://root:{secret}@127.0.0.1:{}", closed_port()),
        format!("etcd://root:{secret}@127.0.0.1:{}", not_redis.port()),
        format!("etcd://root:{secret}@127.0.0.1:{}", silent.port()),
        // The shared etcd has no users: credentials are refused.
        format!("etcd://root:{secret}@127.0.0.1:2379"),
        format!(
            "etcd://127.0.0.1:{},127.0.0.1:{}",
            closed_port(),
            closed_port()
        ),
    ]);
    // All at once: most of them wait out a connect timeout, none needs the CPU.
    let runs: Vec<(String, (i32, String, f64))> = std::thread::scope(|scope| {
        let started: Vec<_> = urls
            .into_iter()
            .map(|url| {
                scope.spawn(move || {
                    let run = raw(args(&["run", "--url", &url, "--key", "k", "--", "true"]));
                    (url, run)
                })
            })
            .collect();
        started
            .into_iter()
            .map(|run| run.join().expect("a run thread panicked"))
            .collect()
    });
    for (url, (code, stderr, secs)) in runs {
        assert_eq!(code, 69, "{url}: {stderr}");
        assert!(secs < 5.0, "{url}: took {secs}s");
        assert!(
            !stderr.contains(secret),
            "{url}: the password leaked: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
pub(super) fn rediss_works_with_a_trusted_ca() {
    let (server, ca) = RedisServer::start_tls();
    let key = unique("tls");
    let out = Command::new(BIN)
        .args([
            "run",
            "--url",
            &server.url(),
            "--key",
            &key,
            "--",
            "sh",
            "-c",
            "echo $LOCKWISE_FENCING_TOKEN",
        ])
        .env("SSL_CERT_FILE", &ca)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    let token: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the command printed its fencing token");
    // A fresh server's first token: its clock in Unix ms × 1024 (lua/acquire.lua).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        token > (now_ms - 60_000) * 1024 && token <= (now_ms + 1_000) * 1024,
        "{out:?}"
    );
}
