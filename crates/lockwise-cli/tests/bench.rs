//! `lockwise bench lock --smoke` on the local servers: every bench runs and reports lockwise
//! beside its floor. (Figures are the bench's business, never a test's: only their shape and
//! sanity are checked here.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

#[test]
fn bench_lock_smoke_measures_every_server_beside_its_floor() {
    let out = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--json"])
        .args(["--url", "redis://127.0.0.1:6379/"])
        .args(["--url", "postgres://postgres@127.0.0.1:5432/postgres"])
        .args(["--url", "mysql://root@127.0.0.1:3306/mysql"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = report["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 3, "{report}");
    for server in servers {
        assert!(!server["version"].as_str().unwrap().is_empty(), "{server}");
    }
    let results = report["results"].as_array().unwrap();
    let mut seen = Vec::new();
    for r in results {
        let (bench, backend) = (r["bench"].as_str().unwrap(), r["backend"].as_str().unwrap());
        seen.push(format!("{bench}/{backend}"));
        assert_eq!(r["rounds"], 2, "{r}");
        assert!(r["lockwise"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(!r["unit"].as_str().unwrap().is_empty(), "{r}");
        if bench == "handoff" {
            assert!(r["floor"].is_null() && r["ratio"].is_null(), "{r}");
            let fairness = r["fairness"].as_f64().unwrap();
            assert!(fairness >= 1.0, "{r}");
            let acquired: u64 = r["per_waiter"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .sum();
            assert!(acquired > 0, "{r}");
            assert!(r["p99_us"].as_f64().unwrap() >= r["p50_us"].as_f64().unwrap());
        } else {
            let ratio = r["ratio"]["median"].as_f64().unwrap();
            assert!(ratio > 0.0 && ratio.is_finite(), "{r}");
            assert!(r["floor"]["median"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    for backend in ["redis", "postgres", "mysql"] {
        for bench in ["sequential", "concurrent", "handoff", "run"] {
            assert!(seen.contains(&format!("{bench}/{backend}")), "{seen:?}");
        }
    }
}

#[test]
fn a_url_without_a_floor_or_a_server_is_refused() {
    let memory = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--url", "memory:"])
        .output()
        .unwrap();
    assert_eq!(memory.status.code(), Some(64), "{memory:?}");
    let port = lockwise_testkit::closed_port();
    let refused = Command::new(BIN)
        .args(["bench", "lock", "--smoke", "--url"])
        .arg(format!("redis://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(69), "{refused:?}");
}
