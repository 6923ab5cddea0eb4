//! A private etcd cluster for the fault tests, with TLS and authentication when asked.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::free_port;
use crate::servers::{ServerProcess, wait_ready};

/// A private etcd cluster of `n` members on spare loopback ports, each with its own data
/// directory, for the fault tests: kill and restart a member or all, find the leader. A 50 ms
/// heartbeat and a 500 ms election timeout (a new leader within about a second; the shortest
/// lease 1 s). Killed on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<EtcdMember>,
    initial: String,
    settings: Vec<String>,
    tls: Option<EtcdTlsFiles>,
    dir: tempfile::TempDir,
}

#[derive(Debug)]
struct EtcdMember {
    name: String,
    client: u16,
    peer: u16,
    process: ServerProcess,
}

/// The files of a TLS cluster: its CA and a client certificate it signed (for user `root`).
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    /// The CA that signed the members' and the client's certificates (PEM).
    pub ca: PathBuf,
    /// A client certificate (PEM), common name `root`.
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_certs: bool,
}

impl EtcdTlsFiles {
    /// A new CA in `dir`, a server certificate for 127.0.0.1 and a client certificate, made
    /// with the `openssl` command.
    fn make(dir: &Path, client_certs: bool) -> Self {
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .current_dir(dir)
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("openssl: {e}"));
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &key[..],
                &[
                    "-keyout",
                    "ca-key.pem",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=lockwise test CA",
                ][..],
            ]
            .concat(),
        );
        for (name, cn, usage) in [
            ("server", "127.0.0.1", "serverAuth"),
            ("client", "root", "clientAuth"),
        ] {
            let ext = format!("{name}.ext");
            std::fs::write(
                dir.join(&ext),
                format!("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n"),
            )
            .unwrap_or_else(|e| panic!("{ext}: {e}"));
            let (key_file, csr, pem) = (
                format!("{name}-key.pem"),
                format!("{name}.csr"),
                format!("{name}.pem"),
            );
            let subject = format!("/CN={cn}");
            openssl(
                &[
                    &["req"][..],
                    &key[..],
                    &["-keyout", &key_file, "-out", &csr, "-subj", &subject][..],
                ]
                .concat(),
            );
            openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &ext,
            ]);
        }
        EtcdTlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("client.pem"),
            key: dir.join("client-key.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server-key.pem"),
            client_certs,
        }
    }
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one answers.
    pub fn start(n: usize) -> Self {
        Self::start_with(n, &[])
    }

    /// [`start`](Self::start), with more command-line `settings` for every member.
    pub fn start_with(n: usize, settings: &[&str]) -> Self {
        Self::start_inner(n, settings, None)
    }

    /// [`start`](Self::start) with TLS for clients, from a CA made for the test (see
    /// [`tls`](Self::tls)); with `client_certs`, members require a client certificate signed
    /// by it (etcd's `--client-cert-auth`).
    pub fn start_tls(n: usize, client_certs: bool) -> Self {
        Self::start_inner(n, &[], Some(client_certs))
    }

    fn start_inner(n: usize, settings: &[&str], tls: Option<bool>) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let tls = tls.map(|client_certs| EtcdTlsFiles::make(dir.path(), client_certs));
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
            tls,
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

    /// The CA and client certificate of a cluster started with [`start_tls`](Self::start_tls).
    pub fn tls(&self) -> Option<&EtcdTlsFiles> {
        self.tls.as_ref()
    }

    fn launch(&mut self, i: usize) {
        let member = &self.members[i];
        let data = self.dir.path().join(&member.name);
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", member.client);
        let peer = format!("http://127.0.0.1:{}", member.peer);
        let mut command = Command::new("etcd");
        command
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
            .args(&self.settings);
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key);
            if tls.client_certs {
                command
                    .arg("--client-cert-auth")
                    .arg("--trusted-ca-file")
                    .arg(&tls.ca);
            }
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("etcd: {e}; run scripts/services"));
        self.members[i].process.child = Some(child);
    }

    /// `etcdctl` for member `i`, with the cluster's TLS files.
    fn etcdctl(&self, i: usize) -> Command {
        let mut command = Command::new("etcdctl");
        command.env("ETCDCTL_API", "3");
        match &self.tls {
            Some(tls) => {
                command
                    .arg(format!("--endpoints=https://{}", self.endpoint(i)))
                    .arg("--cacert")
                    .arg(&tls.ca)
                    .arg("--cert")
                    .arg(&tls.cert)
                    .arg("--key")
                    .arg(&tls.key);
            }
            None => {
                command.arg(format!("--endpoints={}", self.endpoint(i)));
            }
        }
        command
    }

    fn wait_healthy(&self, i: usize) {
        wait_ready("etcd", self.members[i].client, || {
            self.etcdctl(i)
                .args(["--dial-timeout=1s", "endpoint", "health"])
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

    /// `etcd://` with every member, under `prefix` (`etcds://…?ca=` with TLS, without the
    /// client certificate).
    pub fn url(&self, prefix: &str) -> String {
        let members: Vec<String> = (0..self.members.len()).map(|i| self.endpoint(i)).collect();
        match &self.tls {
            Some(tls) => format!(
                "etcds://{}/{prefix}?ca={}",
                members.join(","),
                tls.ca.display()
            ),
            None => format!("etcd://{}/{prefix}", members.join(",")),
        }
    }

    /// The member that leads, as the members that answer see it (up to 10 s for an election).
    pub fn leader(&self) -> usize {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            for i in 0..self.members.len() {
                if self.members[i].process.child.is_none() {
                    continue;
                }
                let out = self
                    .etcdctl(i)
                    .args([
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
        let run = |args: &[&str]| {
            let out = self
                .etcdctl(0)
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
