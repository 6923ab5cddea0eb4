//! `lockwise doctor` as a user runs it: its lines, its JSON and its exit codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use lockwise_testkit::{RedisServer, closed_port};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

#[test]
fn a_redis_that_evicts_fails_with_the_fix() {
    let server = RedisServer::start(&["--maxmemory-policy", "volatile-lru", "--maxmemory", "64mb"]);
    let out = Command::new(BIN)
        .args(["doctor", "--url", &server.url()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout.contains("fail  maxmemory-policy: volatile-lru"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix: CONFIG SET maxmemory-policy noeviction"),
        "{stdout}"
    );
    assert!(stdout.contains("ok    version: Redis"), "{stdout}");
    let json = Command::new(BIN)
        .args(["doctor", "--json", "--url", &server.url()])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(1), "{json:?}");
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let policy = findings
        .iter()
        .find(|f| f["check"] == "maxmemory-policy")
        .unwrap();
    assert_eq!(policy["status"], "fail", "{doc}");
}

#[test]
fn a_sound_server_exits_0_and_an_unreachable_one_69() {
    let server = RedisServer::start(&["--appendonly", "yes"]);
    let out = Command::new(BIN)
        .args(["doctor", "--url", &server.url()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("7 ok, 0 warn, 0 fail"),
        "{out:?}"
    );
    let closed = format!("redis://127.0.0.1:{}/", closed_port());
    let out = Command::new(BIN)
        .args(["doctor", "--url", &closed])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let out = Command::new(BIN)
        .args(["doctor", "--url", "nonsense://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}
