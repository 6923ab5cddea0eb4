//! Test-only helpers shared by lockwise's test suites: server URLs, per-test namespaces that
//! clean up after themselves, private server instances for fault tests, the conformance suite
//! every backend runs ([`conformance`], with a harness per lockwise backend in [`harness`]),
//! and a fault-injecting backend wrapper ([`flaky`]).
//!
//! A test that needs a shared server calls [`redis_url`]; when the server is not there the test
//! fails with a message naming `scripts/services`. It never skips.

pub mod conformance;
pub mod etcd_cluster;
pub mod flaky;
pub mod harness;
pub mod pgbouncer;
pub mod proxy;
pub mod redis_cluster;
pub mod sentinel_group;
pub mod servers;

pub use etcd_cluster::{EtcdCluster, EtcdTlsFiles};
pub use pgbouncer::{PgBouncer, PoolMode};
pub use redis_cluster::RedisCluster;
pub use sentinel_group::SentinelGroup;
pub use servers::{MariaDbServer, PgServer};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The shared Redis: `LOCKWISE_REDIS_URL`, default `redis://127.0.0.1:6379/`. Panics with a
/// clear message when it does not answer.
pub fn redis_url() -> String {
    let url =
        std::env::var("LOCKWISE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let ping = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
    if let Err(e) = ping {
        panic!("Redis is not reachable at {url} ({e}); run scripts/services to start it");
    }
    url
}

/// A name no other test run uses: `<label>-<16 hex chars>`.
pub fn unique(label: &str) -> String {
    format!("{label}-{:016x}", rand::random::<u64>())
}

/// A Redis key prefix private to one test; every key under it is deleted on drop.
#[derive(Debug)]
pub struct RedisNamespace {
    url: String,
    prefix: String,
}

impl RedisNamespace {
    /// A fresh namespace on the shared Redis.
    pub fn new(label: &str) -> Self {
        RedisNamespace {
            url: redis_url(),
            prefix: unique(&format!("lockwise-test-{label}")),
        }
    }

    /// The shared Redis URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A synchronous connection, for inspecting and faulting the stored keys.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("Redis connection failed: {e}"))
    }

    /// Deletes the keys whose names start with `start` (a prefix of the Redis key names).
    pub fn delete_matching(&self, start: &str) {
        let mut conn = self.conn();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{start}*"))
            .query(&mut conn)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(keys).query(&mut conn);
        }
    }
}

impl Drop for RedisNamespace {
    fn drop(&mut self) {
        let prefix = format!("{}:", self.prefix);
        self.delete_matching(&prefix);
    }
}

/// The shared Redis Cluster: `LOCKWISE_REDIS_CLUSTER_URL`, default
/// `redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003` (three masters that
/// `scripts/services` starts).
pub fn redis_cluster_url() -> String {
    std::env::var("LOCKWISE_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003".into())
}

/// The shared PostgreSQL: `LOCKWISE_POSTGRES_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`.
pub fn postgres_url() -> String {
    std::env::var("LOCKWISE_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The shared etcd: `LOCKWISE_ETCD_URL`, default `etcd://127.0.0.1:2379`.
pub fn etcd_url() -> String {
    std::env::var("LOCKWISE_ETCD_URL").unwrap_or_else(|_| "etcd://127.0.0.1:2379".into())
}

/// The shared MariaDB/MySQL: `LOCKWISE_MYSQL_URL`, default `mysql://root@127.0.0.1:3306/test`.
pub fn mysql_url() -> String {
    std::env::var("LOCKWISE_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// Runs `sql` statements on a fresh connection to `url` from a thread of its own (usable from
/// `Drop`, inside or outside a runtime). Panics with a message naming `scripts/services` when
/// the server does not answer.
pub fn sql_now(url: &str, sql: &[String]) {
    let shown = url.to_owned();
    let url = url.to_owned();
    let sql = sql.to_vec();
    let done = thread::spawn(move || -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            use sqlx::Connection;
            if url.starts_with("mysql:") {
                let mut conn = sqlx::MySqlConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                for stmt in sql {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(stmt))
                        .execute(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            } else {
                let mut conn = sqlx::PgConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                for stmt in sql {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(stmt))
                        .execute(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the SQL thread panicked".into()));
    if let Err(e) = done {
        panic!("SQL on {shown} failed ({e}); is the server up? run scripts/services");
    }
}

/// A PostgreSQL schema private to one test (also a namespace for advisory-lock keys); dropped
/// with everything in it on drop.
#[derive(Debug)]
pub struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    /// A fresh schema name on the shared PostgreSQL (created by whoever uses it first).
    pub fn new(label: &str) -> Self {
        let url = postgres_url();
        let name = format!("lockwise_test_{label}_{:016x}", rand::random::<u64>());
        sql_now(&url, &["SELECT 1".to_owned()]);
        PgSchema { url, name }
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema name, also usable as a lock namespace.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let stmt = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        let url = self.url.clone();
        // Never panic in drop (a test may already be failing).
        let _ = std::panic::catch_unwind(move || sql_now(&url, &[stmt]));
    }
}

/// A database private to one test on the shared PostgreSQL ([`PgDatabase`]) or MariaDB
/// ([`MysqlDatabase`]), dropped on drop.
#[derive(Debug)]
pub struct TestDatabase {
    server: String,
    name: String,
    drop_sql: String,
}

/// A PostgreSQL database private to one test (for code that uses the default schema).
pub type PgDatabase = TestDatabase;
/// A MariaDB/MySQL database private to one test.
pub type MysqlDatabase = TestDatabase;

impl TestDatabase {
    fn create(server: String, label: &str, create: &str, drop: &str) -> Self {
        let name = format!("lockwise_test_{label}_{:016x}", rand::random::<u64>());
        sql_now(&server, &[create.replace("{name}", &name)]);
        TestDatabase {
            drop_sql: drop.replace("{name}", &name),
            server,
            name,
        }
    }

    /// The URL of the database.
    pub fn url(&self) -> String {
        match self.server.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{}", self.name),
            None => format!("{}/{}", self.server, self.name),
        }
    }

    /// Its name, also usable as a lock namespace.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PgDatabase {
    /// Creates a fresh PostgreSQL database on the shared server.
    pub fn postgres(label: &str) -> Self {
        Self::create(
            postgres_url(),
            label,
            "CREATE DATABASE \"{name}\"",
            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)",
        )
    }

    /// Creates a fresh MariaDB/MySQL database on the shared server.
    pub fn mysql(label: &str) -> Self {
        Self::create(
            mysql_url(),
            label,
            "CREATE DATABASE `{name}`",
            "DROP DATABASE IF EXISTS `{name}`",
        )
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (url, stmt) = (self.server.clone(), self.drop_sql.clone());
        // Never panic in drop (a test may already be failing).
        let _ = std::panic::catch_unwind(move || sql_now(&url, &[stmt]));
    }
}

/// Runs `command` with its standard output (and, with `stderr_too`, its standard error)
/// closed before it writes anything, as `command | head -0` (or `command 2>&1 | head -0`):
/// the reader is gone.
pub fn output_to_a_closed_pipe(command: &mut Command, stderr_too: bool) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    drop(child.stdout.take());
    if stderr_too {
        drop(child.stderr.take());
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("cannot wait for {command:?}: {e}"))
}

/// A TCP port that nothing listens on (bound and closed again).
pub fn closed_port() -> u16 {
    free_port()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// A server of another kind: answers every connection with an HTTP response and closes it
/// ([`NotRedis::start`]), or accepts and never answers at all ([`NotRedis::silent`]).
#[derive(Debug)]
pub struct NotRedis {
    port: u16,
}

impl NotRedis {
    /// An HTTP server on a free port.
    pub fn start() -> Self {
        Self::serve(answer_http)
    }

    /// A black hole on a free port: connections are accepted, read, and never answered.
    pub fn silent() -> Self {
        Self::serve(|mut stream| {
            let mut buf = [0u8; 512];
            while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
        })
    }

    fn serve(handle: fn(TcpStream)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || handle(stream));
            }
        });
        NotRedis { port }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn answer_http(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 512];
    let _ = stream.read(&mut buf);
    let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
}

/// A private `redis-server` on a spare port, killed on drop: for fault tests that must not
/// touch the shared server.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    tls: bool,
    dir: tempfile::TempDir,
    /// The whole command line, to start it again after a crash.
    command: Vec<std::ffi::OsString>,
}

/// TLS material for a private server: a CA and a server certificate for 127.0.0.1.
#[derive(Debug)]
pub struct TlsFiles {
    /// The CA certificate (PEM) that clients must trust.
    pub ca_cert: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl RedisServer {
    /// Starts a plain instance with extra `redis-server` arguments (e.g. `--requirepass x`).
    pub fn start(args: &[&str]) -> Self {
        Self::launch(args, None)
    }

    /// Starts an instance that only speaks TLS, with a fresh CA made by `openssl`.
    pub fn start_tls() -> (Self, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let files = make_tls_files(dir.path());
        let ca = files.ca_cert.clone();
        (Self::launch(&[], Some((dir, files))), ca)
    }

    fn launch(args: &[&str], tls: Option<(tempfile::TempDir, TlsFiles)>) -> Self {
        let port = free_port();
        let port_s = port.to_string();
        let (dir, files) = match tls {
            Some((dir, files)) => (dir, Some(files)),
            None => (
                tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
                None,
            ),
        };
        let mut cmd = Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        cmd.arg("--dir").arg(dir.path());
        match &files {
            Some(f) => {
                cmd.args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port_s,
                    "--tls-auth-clients",
                    "no",
                ]);
                cmd.arg("--tls-cert-file").arg(&f.cert);
                cmd.arg("--tls-key-file").arg(&f.key);
                cmd.arg("--tls-ca-cert-file").arg(&f.ca_cert);
            }
            None => {
                cmd.args(["--port", &port_s]);
            }
        }
        cmd.args(args);
        let command: Vec<std::ffi::OsString> = cmd.get_args().map(ToOwned::to_owned).collect();
        let server = RedisServer {
            child: spawn_redis(&command),
            port,
            tls: files.is_some(),
            dir,
            command,
        };
        server.wait_listening();
        server
    }

    /// Kills the server with SIGKILL and starts it again on the same port with the same
    /// arguments. Without persistence (the default here) it comes back empty: every lease and
    /// fencing counter is gone, as after a crash of a cache-only Redis.
    pub fn crash_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn_redis(&self.command);
        self.wait_listening();
    }

    fn wait_listening(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        panic!("private redis-server on port {} did not start", self.port);
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/` (or `rediss://` for a TLS instance).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// Its data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn spawn_redis(args: &[std::ffi::OsString]) -> Child {
    Command::new("redis-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}); run scripts/services to install it")
        })
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn make_tls_files(dir: &Path) -> TlsFiles {
    let files = TlsFiles {
        ca_cert: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    };
    let ca_key = dir.join("ca.key");
    let csr = dir.join("server.csr");
    let ext = dir.join("ext.cnf");
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        .unwrap_or_else(|e| panic!("write {}: {e}", ext.display()));
    let p = |path: &PathBuf| path.display().to_string();
    let steps: [Vec<String>; 3] = [
        vec![
            "req".into(),
            "-x509".into(),
            "-newkey".into(),
            "rsa:2048".into(),
            "-nodes".into(),
            "-days".into(),
            "2".into(),
            "-subj".into(),
            "/CN=lockwise-test-ca".into(),
            "-keyout".into(),
            p(&ca_key),
            "-out".into(),
            p(&files.ca_cert),
        ],
        vec![
            "req".into(),
            "-newkey".into(),
            "rsa:2048".into(),
            "-nodes".into(),
            "-subj".into(),
            "/CN=127.0.0.1".into(),
            "-keyout".into(),
            p(&files.key),
            "-out".into(),
            p(&csr),
        ],
        vec![
            "x509".into(),
            "-req".into(),
            "-days".into(),
            "2".into(),
            "-in".into(),
            p(&csr),
            "-CA".into(),
            p(&files.ca_cert),
            "-CAkey".into(),
            p(&ca_key),
            "-CAcreateserial".into(),
            "-out".into(),
            p(&files.cert),
            "-extfile".into(),
            p(&ext),
        ],
    ];
    for step in steps {
        let out = Command::new("openssl")
            .args(&step)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap_or_else(|e| panic!("cannot run openssl ({e}); run scripts/services"));
        assert!(
            out.status.success(),
            "openssl {step:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    files
}

/// Reads lines from a child's stdout until `pred` matches one, or `timeout` passes.
pub fn wait_for_line(
    reader: &mut BufReader<impl Read>,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
) -> Option<String> {
    let until = Instant::now() + timeout;
    let mut line = String::new();
    while Instant::now() < until {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) if pred(line.trim_end()) => return Some(line.trim_end().to_owned()),
            Ok(_) => {}
        }
    }
    None
}

/// Nanosecond timestamps (`date +%s%N`), one per line, that a test's command wrote to `path`;
/// none when the file is missing.
pub fn stamps(path: &std::path::Path) -> Vec<i128> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Now on the clock `date +%s%N` uses, to compare with [`stamps`].
pub fn wall_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128)
}
