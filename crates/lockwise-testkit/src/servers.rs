//! Private PostgreSQL and MariaDB servers on spare ports, for the fault tests that crash a
//! server: [`PgServer`] and [`MariaDbServer`]; and [`EtcdCluster`], several etcd members. Each lives in a temporary data directory, is
//! killed on drop, and can be crashed (no clean shutdown, no checkpoint) and started again on
//! the same port with the same data, as after a power cut of the database machine. The
//! binaries are the ones `scripts/services` installs.

use std::ffi::OsString;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, User, chown};

use crate::free_port;

/// A private `postgres` cluster (trust auth for `postgres` on 127.0.0.1), run as the
/// `postgres` user because PostgreSQL refuses to run as root.
#[derive(Debug)]
pub struct PgServer {
    process: ServerProcess,
    port: u16,
    dir: tempfile::TempDir,
    user: User,
    settings: Vec<String>,
}

impl PgServer {
    /// `initdb` and start, with extra `name=value` server settings (e.g.
    /// `synchronous_commit=off`).
    pub fn start(settings: &[&str]) -> Self {
        let user = User::from_name("postgres")
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no postgres user: run scripts/services"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        chown(dir.path(), Some(user.uid), Some(user.gid)).unwrap_or_else(|e| panic!("chown: {e}"));
        let data = dir.path().join("data");
        let status = Command::new(pg_bin("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .uid(user.uid.as_raw())
            .gid(user.gid.as_raw())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("initdb: {e}; run scripts/services"));
        assert!(status.success(), "initdb failed");
        let mut server = PgServer {
            process: ServerProcess::new(Signal::SIGQUIT),
            port: free_port(),
            dir,
            user,
            settings: settings.iter().map(|s| (*s).to_owned()).collect(),
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let mut cmd = Command::new(pg_bin("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ));
        for setting in &self.settings {
            cmd.args(["-c", setting]);
        }
        let child = cmd
            .uid(self.user.uid.as_raw())
            .gid(self.user.gid.as_raw())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("postgres: {e}"));
        self.process.child = Some(child);
        let pg_isready = pg_bin("pg_isready");
        let port = self.port.to_string();
        wait_ready("postgres", self.port, || {
            Command::new(&pg_isready)
                .args(["-h", "127.0.0.1", "-p", &port, "-q"])
                .status()
                .is_ok_and(|s| s.success())
        });
    }

    /// Crashes the server as `pg_ctl stop -m immediate` does (SIGQUIT to the postmaster: every
    /// backend exits at once, no checkpoint), then starts it again on the same data, which
    /// runs crash recovery from the WAL.
    pub fn crash_and_restart(&mut self) {
        self.crash();
        self.restart();
    }

    /// The first half of [`crash_and_restart`](Self::crash_and_restart): the server is down
    /// when this returns.
    pub fn crash(&mut self) {
        self.process.stop();
    }

    /// Starts a crashed server again (crash recovery runs first); no-op if it runs.
    pub fn restart(&mut self) {
        if self.process.child.is_none() {
            self.launch();
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

/// The newest installed PostgreSQL's binary `name`.
fn pg_bin(name: &str) -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/services", root.display()))
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path()))
        })
        .collect();
    versions.sort();
    let (_, newest) = versions
        .pop()
        .unwrap_or_else(|| panic!("no PostgreSQL under {}", root.display()));
    newest.join("bin").join(name)
}

/// A private `mariadbd` (root, empty password, on 127.0.0.1), crashed with SIGKILL.
#[derive(Debug)]
pub struct MariaDbServer {
    process: ServerProcess,
    port: u16,
    dir: tempfile::TempDir,
    settings: Vec<OsString>,
}

impl MariaDbServer {
    /// `mariadb-install-db` and start, with extra `--name=value` server options.
    pub fn start(settings: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let data = dir.path().join("data");
        let status = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal"])
            .args(["--skip-test-db", "--skip-name-resolve"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("mariadb-install-db: {e}; run scripts/services"));
        assert!(status.success(), "mariadb-install-db failed");
        let mut server = MariaDbServer {
            process: ServerProcess::new(Signal::SIGKILL),
            port: free_port(),
            dir,
            settings: settings.iter().map(OsString::from).collect(),
        };
        server.launch();
        let created = Command::new("mariadb")
            .args(["-h127.0.0.1", "-uroot", "-e", "CREATE DATABASE crash"])
            .arg(format!("-P{}", server.port))
            .status()
            .is_ok_and(|s| s.success());
        assert!(created, "CREATE DATABASE on the private mariadbd failed");
        server
    }

    fn launch(&mut self) {
        let dir = self.dir.path();
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
            ])
            .args(["--skip-log-bin", "--innodb-buffer-pool-size=16M"])
            .args(&self.settings)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("mariadbd: {e}; run scripts/services"));
        self.process.child = Some(child);
        let port = self.port;
        wait_ready("mariadbd", port, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                && Command::new("mariadb")
                    .args(["-h127.0.0.1", "-uroot", "-e", "SELECT 1"])
                    .arg(format!("-P{port}"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
        });
    }

    /// Kills the server with SIGKILL and starts it again on the same data (InnoDB recovers
    /// from its redo log).
    pub fn crash_and_restart(&mut self) {
        self.crash();
        self.restart();
    }

    /// The first half of [`crash_and_restart`](Self::crash_and_restart): the server is down
    /// when this returns.
    pub fn crash(&mut self) {
        self.process.stop();
    }

    /// Starts a crashed server again; no-op if it runs.
    pub fn restart(&mut self) {
        if self.process.child.is_none() {
            self.launch();
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://root@127.0.0.1:PORT/crash`.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/crash", self.port)
    }
}

/// A server's process, stopped on drop with `signal` (SIGQUIT is PostgreSQL's immediate
/// shutdown; SIGKILL a crash).
#[derive(Debug)]
struct ServerProcess {
    child: Option<Child>,
    signal: Signal,
}

impl ServerProcess {
    fn new(signal: Signal) -> Self {
        ServerProcess {
            child: None,
            signal,
        }
    }

    /// Sends the signal and waits for the process to exit.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
            let _ = kill(pid, self.signal);
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits up to 30 s for `ready`, polling every 20 ms.
fn wait_ready(what: &str, port: u16, ready: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if ready() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("private {what} on port {port} did not start");
}

/// A private etcd cluster of `n` members on spare loopback ports, each with its own data
/// directory, for the fault tests: kill and restart a member or all, find the leader. A 50 ms
/// heartbeat and a 500 ms election timeout (a new leader within about a second; the shortest
/// lease 1 s). Killed on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<EtcdMember>,
    initial: String,
    settings: Vec<String>,
    dir: tempfile::TempDir,
}

#[derive(Debug)]
struct EtcdMember {
    name: String,
    client: u16,
    peer: u16,
    process: ServerProcess,
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one answers.
    pub fn start(n: usize) -> Self {
        Self::start_with(n, &[])
    }

    /// [`start`](Self::start), with more command-line `settings` for every member.
    pub fn start_with(n: usize, settings: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let members: Vec<EtcdMember> = (0..n)
            .map(|i| EtcdMember {
                name: format!("m{i}"),
                client: free_port(),
                peer: free_port(),
                process: ServerProcess::new(Signal::SIGKILL),
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            members,
            initial,
            settings: settings.iter().map(|s| (*s).to_owned()).collect(),
            dir,
        };
        for i in 0..n {
            cluster.launch(i);
        }
        for i in 0..n {
            cluster.wait_healthy(i);
        }
        cluster
    }

    fn launch(&mut self, i: usize) {
        let member = &self.members[i];
        let data = self.dir.path().join(&member.name);
        let client = format!("http://127.0.0.1:{}", member.client);
        let peer = format!("http://127.0.0.1:{}", member.peer);
        let child = Command::new("etcd")
            .args(["--name", &member.name, "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &self.initial])
            .args(["--initial-cluster-token", "lockwise-test"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(&self.settings)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("etcd: {e}; run scripts/services"));
        self.members[i].process.child = Some(child);
    }

    fn wait_healthy(&self, i: usize) {
        let endpoint = self.endpoint(i);
        wait_ready("etcd", self.members[i].client, || {
            Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args([
                    &format!("--endpoints={endpoint}"),
                    "--dial-timeout=1s",
                    "endpoint",
                    "health",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    }

    /// `127.0.0.1:PORT` of member `i`.
    pub fn endpoint(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client)
    }

    /// `etcd://` with every member, under `prefix`.
    pub fn url(&self, prefix: &str) -> String {
        let members: Vec<String> = (0..self.members.len()).map(|i| self.endpoint(i)).collect();
        format!("etcd://{}/{prefix}", members.join(","))
    }

    /// The member that leads, as the members that answer see it (up to 10 s for an election).
    pub fn leader(&self) -> usize {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            for i in 0..self.members.len() {
                if self.members[i].process.child.is_none() {
                    continue;
                }
                let out = Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .args([
                        &format!("--endpoints={}", self.endpoint(i)),
                        "--dial-timeout=1s",
                        "--command-timeout=1s",
                        "endpoint",
                        "status",
                        "-w",
                        "simple",
                    ])
                    .output();
                // "127.0.0.1:PORT, ID, VERSION, SIZE, IS_LEADER, IS_LEARNER, …"
                if let Ok(out) = out
                    && String::from_utf8_lossy(&out.stdout)
                        .split(", ")
                        .nth(4)
                        .is_some_and(|leader| leader.trim() == "true")
                {
                    return i;
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        panic!("no etcd member leads");
    }

    /// Turns on authentication: user `root` (etcd's superuser role) with `password`, and no
    /// access for anyone else.
    pub fn enable_auth(&self, password: &str) {
        let endpoint = self.endpoint(0);
        let run = |args: &[&str]| {
            let out = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints={endpoint}"))
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("etcdctl: {e}; run scripts/services"));
            assert!(
                out.status.success(),
                "etcdctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "user",
            "add",
            &format!("root:{password}"),
            "--interactive=false",
        ]);
        run(&["user", "grant-role", "root", "root"]);
        run(&["auth", "enable"]);
    }

    /// Kills member `i` (SIGKILL: no goodbye to its peers).
    pub fn kill(&mut self, i: usize) {
        self.members[i].process.stop();
    }

    /// Starts a killed member again on its data (it rejoins the cluster); no-op if it runs.
    pub fn restart(&mut self, i: usize) {
        if self.members[i].process.child.is_none() {
            self.launch(i);
            self.wait_healthy(i);
        }
    }

    /// Kills every member, then starts them all again on their data: a whole-cluster restart
    /// (a member's health needs a quorum, so they start together).
    pub fn restart_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        for i in 0..self.members.len() {
            self.launch(i);
        }
        for i in 0..self.members.len() {
            self.wait_healthy(i);
        }
    }
}
