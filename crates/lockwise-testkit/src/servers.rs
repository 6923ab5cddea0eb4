//! Private PostgreSQL and MariaDB servers on spare ports, for the fault tests that crash a
//! server: [`PgServer`] and [`MariaDbServer`] (and, in `etcd_cluster`, several etcd members).
//! Each lives in a temporary data directory, is
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
pub(crate) struct ServerProcess {
    pub(crate) child: Option<Child>,
    signal: Signal,
}

impl ServerProcess {
    pub(crate) fn new(signal: Signal) -> Self {
        ServerProcess {
            child: None,
            signal,
        }
    }

    /// Sends the signal and waits for the process to exit.
    pub(crate) fn stop(&mut self) {
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
pub(crate) fn wait_ready(what: &str, port: u16, ready: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if ready() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("private {what} on port {port} did not start");
}

/// `redis-cli -h 127.0.0.1 -p port args…`: its output, trimmed, or `None` when it fails or
/// the server answers an error.
pub(crate) fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.starts_with("ERR")).then_some(text)
}
