//! A private PgBouncer (Debian's `pgbouncer`, 1.18) in front of the shared PostgreSQL, on a
//! spare loopback port, in transaction or session pooling mode; killed on drop.
//!
//! PgBouncer refuses to run as root, so it runs as the `postgres` user (`-u postgres`) when the
//! tests do; its directory is readable and writable by that user.

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;

use crate::free_port;
use crate::servers::{ServerProcess, wait_ready};

/// How PgBouncer hands server connections to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client for the client's whole session.
    Session,
    /// A server connection per transaction (or per statement outside one).
    Transaction,
}

/// A PgBouncer process.
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    _process: ServerProcess,
    _dir: tempfile::TempDir,
}

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of the shared PostgreSQL (127.0.0.1:5432, user
    /// `postgres`), forwarding every database name, with room for 10 server connections per
    /// database and 500 clients.
    pub fn start(mode: PoolMode) -> Self {
        let target = url::Url::parse(&crate::postgres_url())
            .unwrap_or_else(|e| panic!("LOCKWISE_POSTGRES_URL: {e}"));
        let host = target.host_str().unwrap_or("127.0.0.1").to_owned();
        let pg_port = target.port().unwrap_or(5432);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777));
        let port = free_port();
        let mode = match mode {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        };
        let users = dir.path().join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n")
            .unwrap_or_else(|e| panic!("{}: {e}", users.display()));
        let ini = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={pg_port}\n\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
                 unix_socket_dir =\nauth_type = trust\nauth_file = {users}\n\
                 pool_mode = {mode}\ndefault_pool_size = 10\nmax_client_conn = 500\n\
                 ignore_startup_parameters = extra_float_digits,options\n\
                 logfile = {log}\npidfile = {pid}\n",
                users = users.display(),
                log = dir.path().join("pgbouncer.log").display(),
                pid = dir.path().join("pgbouncer.pid").display(),
            ),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", ini.display()));
        for file in [&users, &ini] {
            let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644));
        }
        let mut command = Command::new("pgbouncer");
        if nix::unistd::geteuid().is_root() {
            command.args(["-u", "postgres"]);
        }
        let mut process = ServerProcess::new(Signal::SIGKILL);
        process.child = Some(
            command
                .arg(&ini)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("pgbouncer: {e}; run scripts/services")),
        );
        wait_ready("pgbouncer", port, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        PgBouncer {
            port,
            _process: process,
            _dir: dir,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `url` (a PostgreSQL URL of the shared server) pointed at this PgBouncer instead.
    pub fn url_of(&self, url: &str) -> String {
        let mut url = url::Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        let _ = url.set_host(Some("127.0.0.1"));
        let _ = url.set_port(Some(self.port));
        url.to_string()
    }
}
