//! `lockwise partition` and `lockwise members` on PostgreSQL and Redis: two members split the
//! keys; the command gets its assignment in its environment and is restarted with every key
//! when the other member leaves; `members --json` shows the group; bad input exits 64.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::{PgDatabase, RedisNamespace};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

fn member(url: &str, group: &str, id: &str, out: &std::path::Path) -> Child {
    let script = format!(
        "echo \"$LOCKWISE_MEMBER $LOCKWISE_GENERATION $LOCKWISE_KEYS\" >> {}; exec sleep 60",
        out.display()
    );
    Command::new(BIN)
        .args(["partition", "--url", url, "--group", group, "--keys", "50"])
        .args([
            "--ttl",
            "1s",
            "--id",
            id,
            "--kill-after",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn members(url: &str, group: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args([
            "members", "--url", url, "--group", group, "--keys", "50", "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The last line the command wrote for `id`: (generation, keys).
fn last_start(out: &std::path::Path, id: &str) -> Option<(u64, Vec<u32>)> {
    let text = std::fs::read_to_string(out).ok()?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with(&format!("{id} ")))?;
    let mut words = line.split(' ');
    words.next();
    let generation = words.next()?.parse().ok()?;
    let keys = words
        .next()
        .unwrap_or("")
        .split(',')
        .filter(|k| !k.is_empty())
        .map(|k| k.parse().unwrap())
        .collect();
    Some((generation, keys))
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn scenario(url: &str, group: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("starts");
    let mut a = member(url, group, "a", &out);
    let mut b = member(url, group, "b", &out);
    // Both run the command with one generation and disjoint keys that cover 0..50.
    let (ga, ka, kb) = wait_for("two members", || {
        let (ga, ka) = last_start(&out, "a")?;
        let (gb, kb) = last_start(&out, "b")?;
        (ga == gb && ka.len() + kb.len() == 50).then_some((ga, ka, kb))
    });
    assert!(ka.iter().all(|k| !kb.contains(k)));
    let doc = members(url, group);
    assert_eq!(doc["group"], group);
    assert_eq!(doc["generation"].as_u64(), Some(ga));
    let listed = doc["members"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let total: u64 = listed.iter().map(|m| m["keys"].as_u64().unwrap()).sum();
    assert_eq!(total, 50);
    assert!(
        listed
            .iter()
            .all(|m| m["pid"].as_u64().is_some() && m.get("lease_left_ms").is_some())
    );

    // b leaves (SIGTERM): a's command is restarted with every key in a newer generation.
    kill(Pid::from_raw(b.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(b.wait().unwrap().code(), Some(128 + 15));
    let (g2, all) = wait_for("a with every key", || {
        let (g, keys) = last_start(&out, "a")?;
        (keys.len() == 50).then_some((g, keys))
    });
    assert!(g2 > ga);
    assert_eq!(all, (0..50).collect::<Vec<u32>>());
    let doc = members(url, group);
    assert_eq!(doc["members"].as_array().unwrap().len(), 1);
    kill(Pid::from_raw(a.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(a.wait().unwrap().code(), Some(128 + 15));
}

#[test]
fn partition_and_members_on_postgres() {
    let db = PgDatabase::postgres("partition_cli");
    scenario(&db.url(), "reports");
}

#[test]
fn partition_and_members_on_redis() {
    let ns = RedisNamespace::new("partition-cli");
    let group = ns.prefix().to_owned();
    scenario(ns.url(), &group);
    for start in ["lockwise:{", "lockwise:partition:{"] {
        ns.delete_matching(&format!("{start}{group}"));
    }
}

#[test]
fn bad_input_exits_64() {
    for args in [
        vec!["members", "--url", "memory:", "--group", ""],
        vec!["members", "--url", "ftp://x", "--group", "g"],
        vec![
            "partition",
            "--url",
            "memory:",
            "--group",
            "has space",
            "--",
            "true",
        ],
        vec![
            "partition",
            "--url",
            "memory:",
            "--group",
            "g",
            "--ttl",
            "1ms",
            "--",
            "true",
        ],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(64),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
