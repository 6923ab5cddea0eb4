//! A private Redis Sentinel group for the fault tests: a primary, one replica and three
//! sentinels on spare loopback ports (Debian's `redis-server`, the sentinels run as
//! `redis-server --sentinel`), each in a temporary directory, killed on drop. The replica
//! replicates through a [`TcpProxy`], so that a test can cut the replication link and let the
//! replica fall behind.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::free_port;
use crate::proxy::TcpProxy;
use crate::servers::{ServerProcess, redis_cli as cli, wait_ready};

/// The name the sentinels know the primary by.
pub const MASTER_NAME: &str = "lw";

/// A primary, a replica and three sentinels (quorum 2, a server is down after 1 s).
#[derive(Debug)]
pub struct SentinelGroup {
    /// The two data servers: `(port, process)`; either may be the primary.
    servers: Vec<(u16, ServerProcess)>,
    sentinels: Vec<(u16, ServerProcess)>,
    /// The replica's link to the first primary.
    link: TcpProxy,
    dir: tempfile::TempDir,
}

impl SentinelGroup {
    /// Starts the group and waits until the sentinels know the primary, its replica and each
    /// other.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let primary = free_port();
        let replica = free_port();
        let mut group = SentinelGroup {
            servers: Vec::new(),
            sentinels: Vec::new(),
            link: TcpProxy::start(primary),
            dir,
        };
        group
            .servers
            .push((primary, server(group.dir.path(), primary, None)));
        wait_ready("redis", primary, || {
            cli(primary, &["PING"]).as_deref() == Some("PONG")
        });
        group.servers.push((
            replica,
            server(group.dir.path(), replica, Some(group.link.port())),
        ));
        wait_ready("redis replica", replica, || {
            cli(replica, &["INFO", "replication"])
                .is_some_and(|info| info.contains("master_link_status:up"))
        });
        for i in 0..3 {
            let port = free_port();
            let conf = group.dir.path().join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 5000\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = group.dir.path().display()
                ),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", conf.display()));
            let mut process = ServerProcess::new(Signal::SIGKILL);
            process.child = Some(
                Command::new("redis-server")
                    .arg(&conf)
                    .arg("--sentinel")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap_or_else(|e| {
                        panic!("redis-server --sentinel: {e}; run scripts/services")
                    }),
            );
            group.sentinels.push((port, process));
        }
        for (port, _) in &group.sentinels {
            let port = *port;
            wait_ready("redis sentinel", port, || {
                let peers = cli(port, &["SENTINEL", "sentinels", MASTER_NAME])
                    .map_or(0, |out| out.matches("runid").count());
                let replicas = cli(port, &["SENTINEL", "replicas", MASTER_NAME])
                    .map_or(0, |out| out.matches("runid").count());
                peers >= 2 && replicas >= 1
            });
        }
        group
    }

    /// `redis+sentinel://` with the three sentinels and the primary's name.
    pub fn url(&self) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", sentinels.join(","))
    }

    /// The port of the primary as the first sentinel that answers names it.
    pub fn primary_port(&self) -> u16 {
        for (port, process) in &self.sentinels {
            if process.child.is_none() {
                continue;
            }
            if let Some(answer) = cli(*port, &["SENTINEL", "get-master-addr-by-name", MASTER_NAME])
                && let Some(primary) = answer.lines().nth(1).and_then(|p| p.trim().parse().ok())
            {
                return primary;
            }
        }
        panic!("no sentinel names a primary");
    }

    /// Kills the primary (SIGKILL) and waits up to 20 s until the sentinels have promoted the
    /// replica and it answers as a primary; returns how long the promotion took.
    pub fn kill_primary(&mut self) -> Duration {
        let old = self.primary_port();
        let killed = Instant::now();
        if let Some((_, process)) = self.servers.iter_mut().find(|(port, _)| *port == old) {
            process.stop();
        }
        self.wait_for_new_primary(old, killed)
    }

    /// A graceful failover (`SENTINEL FAILOVER`): the replica is promoted once it has caught
    /// up, and the old primary becomes its replica; returns how long it took.
    pub fn failover(&mut self) -> Duration {
        let old = self.primary_port();
        let started = Instant::now();
        let port = self.sentinels[0].0;
        let answer = cli(port, &["SENTINEL", "failover", MASTER_NAME]);
        assert_eq!(answer.as_deref(), Some("OK"), "SENTINEL FAILOVER");
        self.wait_for_new_primary(old, started)
    }

    /// The replica's replication link to the first primary: [`TcpProxy::cut`] holds what the
    /// primary sends, so the replica falls behind (and, promoted, never gets it).
    pub fn replication_link(&self) -> &TcpProxy {
        &self.link
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server that is not the primary.
    pub fn freeze_replica(&self, frozen: bool) {
        let primary = self.primary_port();
        for (port, process) in &self.servers {
            if *port != primary
                && let Some(child) = &process.child
            {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
                let signal = if frozen {
                    Signal::SIGSTOP
                } else {
                    Signal::SIGCONT
                };
                let _ = nix::sys::signal::kill(pid, signal);
            }
        }
    }

    fn wait_for_new_primary(&self, old: u16, since: Instant) -> Duration {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            let now = self.primary_port();
            if now != old
                && cli(now, &["ROLE"]).is_some_and(|role| role.lines().next() == Some("master"))
            {
                return since.elapsed();
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("the sentinels promoted no replica within 20 s");
    }
}

/// A data server on `port`, without persistence, replicating `primary` if given.
fn server(dir: &Path, port: u16, primary: Option<u16>) -> ServerProcess {
    let mut command = Command::new("redis-server");
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(["--dbfilename", &format!("dump-{port}.rdb")]);
    if let Some(primary) = primary {
        command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
    }
    let mut process = ServerProcess::new(Signal::SIGKILL);
    process.child = Some(
        command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server: {e}; run scripts/services")),
    );
    process
}
