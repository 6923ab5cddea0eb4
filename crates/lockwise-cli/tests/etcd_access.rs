//! Getting into etcd (private one-member clusters). With authentication on, `lockwise run` gets
//! in with the user in the URL and the password from `--password-file`; a wrong password, or
//! none, exits 69 within the call timeout with an error that names the cause and never the
//! password. Over TLS with client certificates required, it gets in with the CA and a client
//! certificate, and every incomplete or wrong setting exits 69 (64 for the URL itself) with
//! the reason.

#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use lockwise_testkit::EtcdCluster;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// `lockwise run --url URL -- true`, with the password in a file if given.
fn run(url: &str, password: Option<&str>) -> (Option<i32>, String, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    if let Some(password) = password {
        let file = dir.path().join("password");
        std::fs::write(&file, format!("{password}\n")).unwrap();
        command.arg("--password-file").arg(file);
    }
    let started = Instant::now();
    let out = command
        .args(["run", "--url", url, "--key", "auth", "--", "true"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn run_with_a_password_file_and_refusals_without_one() {
    let cluster = EtcdCluster::start(1);
    cluster.enable_auth("s3cret#1");
    let url = format!("etcd://root@{}/auth", cluster.endpoint(0));

    let (code, stderr, took) = run(&url, Some("s3cret#1"));
    eprintln!("the right password: exit {code:?} in {took:?}");
    assert_eq!(code, Some(0), "{stderr}");

    let (code, stderr, took) = run(&url, Some("wrong-password"));
    eprintln!("a wrong password: exit {code:?} in {took:?}: {stderr}");
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("auth"), "names the cause: {stderr}");
    assert!(!stderr.contains("wrong-password"), "{stderr}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    let anonymous = format!("etcd://{}/auth", cluster.endpoint(0));
    let (code, stderr, took) = run(&anonymous, None);
    eprintln!("no credentials: exit {code:?} in {took:?}: {stderr}");
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains("requires authentication"), "{stderr}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A locker idle past the server's auth token TTL (1 s here, 5 minutes by default) logs in
/// again by itself.
#[test]
fn an_expired_auth_token_is_renewed() {
    use lockwise::{LockOptions, Locker};
    let cluster = EtcdCluster::start_with(1, &["--auth-token-ttl", "1"]);
    cluster.enable_auth("pw");
    let url = format!("etcd://root:pw@{}/token", cluster.endpoint(0));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let locker = Locker::connect(&url).await.unwrap();
        let opts = LockOptions::ttl(Duration::from_secs(5));
        let first = locker.try_acquire("k", &opts).await.unwrap().unwrap();
        assert!(first.release().await.unwrap());
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let again = locker.try_acquire("k", &opts).await.unwrap().expect("free");
        assert!(again.release().await.unwrap());
    });
}

#[test]
fn run_over_tls_with_a_client_certificate() {
    let cluster = EtcdCluster::start_tls(1, true);
    let tls = cluster.tls().unwrap();
    let member = cluster.endpoint(0);
    let full = format!(
        "etcds://{member}/tls?ca={}&cert={}&key={}",
        tls.ca.display(),
        tls.cert.display(),
        tls.key.display()
    );
    let (code, stderr, took) = run(&full, None);
    eprintln!("CA and client certificate: exit {code:?} in {took:?}");
    assert_eq!(code, Some(0), "{stderr}");

    for (what, url, expected, named) in [
        (
            "no client certificate",
            format!("etcds://{member}/tls?ca={}", tls.ca.display()),
            69,
            "cert=PATH&key=PATH",
        ),
        (
            "the system's roots, which do not know the test CA",
            format!(
                "etcds://{member}/tls?cert={}&key={}",
                tls.cert.display(),
                tls.key.display()
            ),
            69,
            "give it with ca=PATH",
        ),
        (
            "plain text to a TLS member",
            format!("etcd://{member}/tls"),
            69,
            "use etcds://",
        ),
        (
            "a CA file that does not exist",
            format!("etcds://{member}/tls?ca=/nonexistent/ca.pem"),
            64,
            "cannot read /nonexistent/ca.pem",
        ),
        (
            "a certificate without its key",
            format!("etcds://{member}/tls?cert={}", tls.cert.display()),
            64,
            "needs both cert= and key=",
        ),
    ] {
        let (code, stderr, took) = run(&url, None);
        eprintln!("{what}: exit {code:?} in {took:?}: {}", stderr.trim());
        assert_eq!(code, Some(expected), "{what}: {stderr}");
        assert!(stderr.contains(named), "{what}: {stderr}");
        assert!(took < Duration::from_secs(5), "{what}: {took:?}");
    }
}
