//! `etcds://` on a private one-member cluster that requires client certificates: `lockwise
//! run` gets in with the CA and a client certificate, and every incomplete or wrong setting
//! exits 69 (or 64 for the URL itself) with the reason.

#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use lockwise_testkit::EtcdCluster;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

fn run(url: &str) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["run", "--url", url, "--key", "tls", "--", "true"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
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
    let (code, stderr, took) = run(&full);
    eprintln!("CA and client certificate: exit {code:?} in {took:?}");
    assert_eq!(code, Some(0), "{stderr}");

    for (what, url, expected) in [
        (
            "no client certificate",
            format!("etcds://{member}/tls?ca={}", tls.ca.display()),
            69,
        ),
        (
            "the system's roots, which do not know the test CA",
            format!(
                "etcds://{member}/tls?cert={}&key={}",
                tls.cert.display(),
                tls.key.display()
            ),
            69,
        ),
        (
            "plain text to a TLS member",
            format!("etcd://{member}/tls"),
            69,
        ),
        (
            "a CA file that does not exist",
            format!("etcds://{member}/tls?ca=/nonexistent/ca.pem"),
            64,
        ),
        (
            "a certificate without its key",
            format!("etcds://{member}/tls?cert={}", tls.cert.display()),
            64,
        ),
    ] {
        let (code, stderr, took) = run(&url);
        eprintln!("{what}: exit {code:?} in {took:?}: {}", stderr.trim());
        assert_eq!(code, Some(expected), "{what}: {stderr}");
        assert!(took < Duration::from_secs(5), "{what}: {took:?}");
    }
}
