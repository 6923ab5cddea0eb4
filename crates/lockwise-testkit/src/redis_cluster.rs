//! A private Redis Cluster for the tests: three masters on spare loopback ports
//! (`redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create`), no
//! persistence, each in a temporary directory, killed on drop.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::free_port;
use crate::servers::{ServerProcess, redis_cli as cli, wait_ready};

/// Three masters that share the 16384 slots.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<(u16, ServerProcess)>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts three masters, creates the cluster and waits until every node says it is ok.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let mut process = ServerProcess::new(Signal::SIGKILL);
            process.child = Some(
                Command::new("redis-server")
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--cluster-enabled", "yes"])
                    .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                    .args(["--cluster-node-timeout", "2000"])
                    .args(["--save", "", "--appendonly", "no"])
                    .arg("--dir")
                    .arg(dir.path())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| panic!("redis-server: {e}; run scripts/services")),
            );
            wait_ready("redis cluster node", port, || {
                cli(port, &["PING"]).as_deref() == Some("PONG")
            });
            nodes.push((port, process));
        }
        let addresses: Vec<String> = nodes
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("redis-cli: {e}; run scripts/services"));
        assert!(created.success(), "redis-cli --cluster create failed");
        let until = Instant::now() + Duration::from_secs(30);
        for (port, _) in &nodes {
            while !cli(*port, &["CLUSTER", "INFO"])
                .is_some_and(|info| info.contains("cluster_state:ok"))
            {
                assert!(Instant::now() < until, "the cluster did not become ok");
                thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes, _dir: dir }
    }

    /// `redis+cluster://` with every node.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// The ports of the masters.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|(port, _)| *port).collect()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> u16 {
        cli(self.nodes[0].0, &["CLUSTER", "KEYSLOT", key])
            .and_then(|slot| slot.parse().ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}"))
    }

    /// The port of the master that serves `slot`, as the first node sees it.
    pub fn owner(&self, slot: u16) -> u16 {
        let nodes = cli(self.nodes[0].0, &["CLUSTER", "NODES"]).unwrap_or_default();
        for line in nodes.lines() {
            // <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot ranges…>
            let fields: Vec<&str> = line.split_whitespace().collect();
            let serves = fields.iter().skip(8).any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                matches!(
                    (from.parse::<u16>(), to.parse::<u16>()),
                    (Ok(from), Ok(to)) if from <= slot && slot <= to
                )
            });
            let port = fields
                .get(1)
                .and_then(|addr| addr.split('@').next())
                .and_then(|addr| addr.rsplit(':').next())
                .and_then(|port| port.parse().ok());
            if let (true, Some(port)) = (serves, port) {
                return port;
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// Moves `slot` and its keys from the master on `from` to the master on `to`
    /// (`CLUSTER SETSLOT … IMPORTING/MIGRATING`, `MIGRATE`, then `NODE`), as a resharding does.
    pub fn move_slot(&self, slot: u16, from: u16, to: u16) {
        let id = |port: u16| cli(port, &["CLUSTER", "MYID"]).unwrap_or_else(|| panic!("MYID"));
        let (from_id, to_id) = (id(from), id(to));
        let slot_text = slot.to_string();
        let ok = |port: u16, args: &[&str]| {
            let answer = cli(port, args);
            assert_eq!(answer.as_deref(), Some("OK"), "{args:?} on {port}");
        };
        ok(
            to,
            &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id],
        );
        ok(
            from,
            &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id],
        );
        loop {
            let keys =
                cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot_text, "100"]).unwrap_or_default();
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let mut args = vec![
                "MIGRATE".to_owned(),
                "127.0.0.1".to_owned(),
                to.to_string(),
                String::new(),
                "0".to_owned(),
                "5000".to_owned(),
                "KEYS".to_owned(),
            ];
            args.extend(keys.iter().map(|k| (*k).to_owned()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = Command::new("redis-cli")
                .args(["-h", "127.0.0.1", "-p", &from.to_string()])
                .args(&args)
                .output()
                .unwrap_or_else(|e| panic!("redis-cli: {e}"));
            assert!(out.status.success(), "MIGRATE");
        }
        for (port, _) in &self.nodes {
            ok(*port, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]);
        }
    }
}
