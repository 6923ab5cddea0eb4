//! `lockwise ui`: the dashboard served by the command, over plain HTTP, and its refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::PgSchema;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// The command, stopped with the test.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `lockwise ui ARGS --listen 127.0.0.1:0` and returns it with the address it printed.
fn serve(args: &[&str]) -> (Served, String) {
    let mut child = Command::new(BIN)
        .arg("ui")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("lockwise: dashboard on http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    (Served(child), addr)
}

/// One HTTP/1.1 request; the status and the body.
fn request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn ui_serves_the_store_s_queues_and_refuses_actions_unless_allowed() {
    let schema = PgSchema::new("ui_cli");
    let store = ["--url", schema.url(), "--schema", schema.name()];
    let enqueued = Command::new(BIN)
        .args(["queue", "enqueue"])
        .args(store)
        .args(["--queue", "invoices", "--payload", r#"{"n":1}"#])
        .output()
        .unwrap();
    assert!(enqueued.status.success(), "{enqueued:?}");

    let (_served, addr) = serve(&store);
    let (status, page) = request(&addr, "GET", "/queues", "");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("invoices") && page.contains("read-only"),
        "{page}"
    );
    let (status, page) = request(&addr, "GET", "/locks", "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("postgres://"), "{page}");
    let (status, _) = request(&addr, "POST", "/jobs/1/cancel", "csrf=x");
    assert_eq!(status, 403);
    // Another host name (DNS rebinding) is not answered.
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /queues HTTP/1.1\r\nHost: rebound.example\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");

    let (_acting, addr) = serve(&[&store[..], &["--allow-actions"]].concat());
    let (_, page) = request(&addr, "GET", "/jobs?queue=invoices", "");
    assert!(page.contains("invoices"), "{page}");
    let (status, _) = request(&addr, "POST", "/jobs/1/cancel", "");
    assert_eq!(status, 403, "an action without the CSRF token");
}

#[test]
fn ui_with_a_token_file_lets_in_only_with_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef-token\n").unwrap();
    let (_served, addr) = serve(&[
        "--locks-url",
        &format!("file://{}", dir.path().display()),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    let (status, _) = request(&addr, "GET", "/locks", "");
    assert_eq!(status, 303);
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /locks HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Authorization: Bearer 0123456789abcdef-token\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("No lock held"), "{answer}");
}

#[test]
fn ui_usage_errors_exit_64_and_an_open_address_without_a_token_warns() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "short\n").unwrap();
    let file_url = format!("file://{}", dir.path().display());
    for args in [
        vec!["ui"],
        vec![
            "ui",
            "--locks-url",
            &file_url,
            "--allow-actions",
            "--read-only",
        ],
        vec![
            "ui",
            "--locks-url",
            &file_url,
            "--token-file",
            "/nonexistent/token",
        ],
        vec![
            "ui",
            "--locks-url",
            &file_url,
            "--token-file",
            short.to_str().unwrap(),
        ],
    ] {
        let done = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(done.status.code(), Some(64), "{args:?}: {done:?}");
    }

    let mut child = Command::new(BIN)
        .args(["ui", "--locks-url", &file_url, "--listen", "0.0.0.0:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let started = Instant::now();
    let mut warned = false;
    let mut line = String::new();
    while started.elapsed() < Duration::from_secs(10) && stderr.read_line(&mut line).unwrap() > 0 {
        if line.contains("warning: serving on 0.0.0.0:0 without --token-file") {
            warned = true;
            break;
        }
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned, "no warning");
}
