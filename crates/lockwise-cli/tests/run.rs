//! `lockwise run` across real processes, on the file backend and on Redis.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::io::BufReader;
use std::os::unix::ffi::OsStringExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use lockwise_testkit::{
    MysqlDatabase, NotRedis, PgDatabase, RedisNamespace, RedisServer, closed_port, unique,
    wait_for_line,
};
use lockwise_testkit::{stamps, wall_nanos};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// Where a test's locks live, and how to delete one behind its holder.
enum Backend {
    File(tempfile::TempDir),
    Redis(RedisNamespace),
    Postgres(PgDatabase),
    Mysql(MysqlDatabase),
}

impl Backend {
    fn file() -> Self {
        Backend::File(tempfile::tempdir().expect("tempdir"))
    }

    fn redis() -> Self {
        Backend::Redis(RedisNamespace::new("cli"))
    }

    fn postgres() -> Self {
        Backend::Postgres(PgDatabase::postgres("cli"))
    }

    fn mysql() -> Self {
        Backend::Mysql(MysqlDatabase::mysql("cli"))
    }

    fn url(&self) -> String {
        match self {
            Backend::File(dir) => format!("file://{}", dir.path().display()),
            Backend::Redis(ns) => ns.url().to_owned(),
            Backend::Postgres(db) => db.url(),
            Backend::Mysql(db) => db.url(),
        }
    }

    /// A key unique to this test (the CLI uses the default `lockwise` prefix on Redis).
    fn key(&self) -> String {
        match self {
            Backend::Redis(ns) => format!("{}-job", ns.prefix()),
            // Advisory locks and GET_LOCK names are server-wide: make the key unique.
            Backend::Postgres(db) => format!("{}-job", db.name()),
            Backend::Mysql(db) => format!("{}-job", db.name()),
            Backend::File(_) => "job".to_owned(),
        }
    }

    fn delete_lock(&self, key: &str) {
        match self {
            Backend::File(dir) => {
                let stem = lockwise::backend::file::FileBackend::file_stem(key);
                std::fs::remove_file(dir.path().join(format!("{stem}.lease"))).expect("rm lease");
            }
            Backend::Redis(ns) => {
                let n: i64 = redis::cmd("DEL")
                    .arg(format!("lockwise:{{{key}}}"))
                    .query(&mut ns.conn())
                    .expect("DEL");
                assert_eq!(n, 1, "the lock key existed");
            }
            Backend::Postgres(db) => {
                let (class, half) = lockwise::postgres::advisory_key(key);
                let killed = psql(
                    &db.url(),
                    &format!(
                        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
                         AND granted AND classid = ({class})::int4::oid AND objid = ({half})::int4::oid"
                    ),
                );
                assert_eq!(killed.trim(), "t", "exactly the holder was terminated");
            }
            Backend::Mysql(db) => {
                let name = lockwise::backend::mysql::lock_name(key);
                let holder = mariadb(&db.url(), &format!("SELECT IS_USED_LOCK('{name}')"));
                mariadb(&db.url(), &format!("KILL {}", holder.trim()));
            }
        }
    }
}

/// Runs one statement with psql and returns its unaligned output.
fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-tAc", sql])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs one statement with the mariadb client (root over TCP, the test database's server).
fn mariadb(url: &str, sql: &str) -> String {
    let db = url.rsplit('/').next().unwrap_or("test");
    let out = Command::new("mariadb")
        .args(["-h127.0.0.1", "-uroot", "-N", "-B", db, "-e", sql])
        .output()
        .expect("mariadb client");
    assert!(
        out.status.success(),
        "mariadb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Backend::Redis(ns) = self {
            ns.delete_matching(&format!("lockwise:{{{}-job}}", ns.prefix()));
        }
    }
}

fn lockwise(url: &str, key: &str, extra: &[&str], cmd: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["run", "--url", url, "--key", key])
        .args(extra)
        .arg("--")
        .args(cmd);
    c.env_remove("LOCKWISE_URL");
    c
}

fn spawn_holder(
    b: &Backend,
    key: &str,
    extra: &[&str],
    script: &str,
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = lockwise(&b.url(), key, extra, &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn lockwise");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("holder started");
    (child, out)
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn two_runs_exclude_each_other(b: Backend) {
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 1.5");
    let start = Instant::now();
    let refused = lockwise(&b.url(), &key, &[], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&refused), 75, "{refused:?}");
    assert!(
        refused.stdout.is_empty(),
        "the refused run printed to stdout"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "--wait unset answers at once"
    );
    let custom = lockwise(&b.url(), &key, &["--conflict-exit-code", "9"], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&custom), 9);
    let waited = lockwise(&b.url(), &key, &["--wait", "10s"], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&waited), 0, "{waited:?}");
    assert_eq!(String::from_utf8_lossy(&waited.stdout), "second\n");
    assert!(
        holder.wait().expect("holder").success(),
        "the first run finished before the second"
    );
}

fn children_see_increasing_tokens(b: Backend) {
    let key = b.key();
    let mut last = 0u64;
    for _ in 0..4 {
        let out = lockwise(
            &b.url(),
            &key,
            &[],
            &[
                "sh",
                "-c",
                "echo $LOCKWISE_FENCING_TOKEN $LOCKWISE_LOCK_KEY",
            ],
        )
        .output()
        .expect("run");
        assert_eq!(code(&out), 0, "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let (token, seen_key) = text.trim().split_once(' ').expect("two words");
        let token: u64 = token.parse().expect("a number");
        assert!(token > last, "token {token} after {last}");
        assert_eq!(seen_key, key);
        last = token;
    }
}

fn the_childs_exit_code_passes_through(b: Backend) {
    let key = b.key();
    let out = lockwise(
        &b.url(),
        &key,
        &[],
        &["sh", "-c", "echo out; echo err >&2; exit 7"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 7);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "out\n",
        "only the child writes stdout"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("err"));
    let killed = lockwise(&b.url(), &key, &[], &["sh", "-c", "kill -9 $$"])
        .output()
        .expect("run");
    assert_eq!(code(&killed), 128 + 9);
    let missing = lockwise(&b.url(), &key, &[], &["/nonexistent/cmd"])
        .output()
        .expect("run");
    assert_eq!(code(&missing), 127);
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "data").expect("write");
    let plain = plain.to_str().expect("utf-8 path");
    let not_exec = lockwise(&b.url(), &key, &[], &[plain])
        .output()
        .expect("run");
    assert_eq!(code(&not_exec), 126);
    // Each of those released the lock.
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0, "{again:?}");
}

/// Deleting the lock behind a running holder: its whole process tree gets SIGTERM, and
/// `lockwise run` exits 70 only once the tree is gone.
fn a_lost_lock_stops_the_whole_tree(b: Backend) {
    let key = b.key();
    let script = "sleep 600 & echo \"grandchild $!\"; trap 'echo got-term; exit 0' TERM; \
                  echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(
        &b.url(),
        &key,
        &["--ttl", "600ms", "--kill-after", "2s"],
        &["sh", "-c", script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let grandchild = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("grandchild ")
    })
    .expect("grandchild pid");
    let grandchild: i32 = grandchild["grandchild ".len()..].parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let deleted = Instant::now();
    b.delete_lock(&key);
    let got_term = wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term");
    assert!(got_term.is_some(), "the command got SIGTERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(70));
    assert!(
        deleted.elapsed() < Duration::from_secs(3),
        "{:?}",
        deleted.elapsed()
    );
    assert!(
        !alive(grandchild),
        "the grandchild {grandchild} outlived lockwise run"
    );
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn signals_are_forwarded(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term; exit 3' TERM; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill");
    assert!(wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term").is_some());
    assert_eq!(child.wait().expect("wait").code(), Some(3));
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&again),
        0,
        "the lock was released after the child exited: {again:?}"
    );
}

/// SIGHUP and SIGQUIT are forwarded like SIGTERM: lockwise never dies and leaves the command
/// running without the lock.
fn hangup_is_forwarded_not_fatal(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-hup; exit 5' HUP; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("kill");
    assert!(wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-hup").is_some());
    assert_eq!(child.wait().expect("wait").code(), Some(5));
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&again),
        0,
        "released after the command exited: {again:?}"
    );
}

/// Processes the command leaves behind in its group keep the lock until they exit.
fn the_lock_is_held_until_the_whole_group_exits(b: Backend) {
    let key = b.key();
    let start = Instant::now();
    let mut holder = lockwise(&b.url(), &key, &[], &["sh", "-c", "sleep 1 & exit 0"])
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(400));
    let refused = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(
        code(&refused),
        75,
        "the background sleep still holds the lock"
    );
    assert_eq!(holder.wait().expect("wait").code(), Some(0));
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "{:?}",
        start.elapsed()
    );
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0);
}

/// If lockwise is killed, the command is told to stop (its lock is no longer renewed); on
/// PostgreSQL and MariaDB, whose session lock went with lockwise's connection, it is killed
/// at once: it has no lock left to finish under.
fn the_command_stops_when_lockwise_dies(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.05; done";
    let (mut child, mut out) = spawn_holder(&b, &key, &[], script);
    child.kill().expect("SIGKILL lockwise");
    let killed = Instant::now();
    let _ = child.wait();
    let term = wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term");
    if matches!(b, Backend::Postgres(_) | Backend::Mysql(_)) {
        assert!(
            term.is_none(),
            "a SIGTERM let the command work on without the lock"
        );
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the command lived {:?} past lockwise",
            killed.elapsed()
        );
    } else {
        assert!(term.is_some(), "the orphaned command got SIGTERM");
    }
}

/// A holder frozen with SIGSTOP past its TTL loses the lock (on the databases through the
/// server-side session lease), another process acquires it, and the resumed holder finds its
/// lock lost, stops its command and exits 70.
fn a_frozen_holder_loses_the_lock_after_its_ttl(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    let key = b.key();
    let script = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.05; done";
    let (mut frozen, mut out) = spawn_holder(&b, &key, &["--ttl", "1s"], script);
    let pid = nix::unistd::Pid::from_raw(frozen.id() as i32);
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let start = Instant::now();
    let second = lockwise(&b.url(), &key, &["--wait", "10s"], &["echo", "second"])
        .output()
        .expect("run");
    let waited = start.elapsed();
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    assert_eq!(code(&second), 0, "{second:?}");
    assert!(
        waited < Duration::from_secs(4),
        "acquired {waited:?} after the freeze"
    );
    assert!(
        wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-term").is_some(),
        "the resumed holder stopped its command"
    );
    assert_eq!(frozen.wait().expect("wait").code(), Some(70));
}

/// A SIGKILL of `lockwise run` itself: the command's whole process tree gets SIGTERM at once
/// and SIGKILL after the grace (here TTL/4 = 500 ms), long before the lease could run out,
/// even a command that ignores SIGTERM and a grandchild it left in the background.
fn no_process_outlives_a_killed_lockwise(b: Backend) {
    let key = b.key();
    let script = "trap 'echo got-term' TERM; sleep 600 & echo \"grandchild $!\"; \
                  echo \"shell $$\"; echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(&b.url(), &key, &["--ttl", "2s"], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    // A database session's lock dies with lockwise's connection: the tree gets SIGKILL at
    // once, no grace. Elsewhere the lease outlives lockwise: SIGTERM first, then the grace.
    let session = matches!(b, Backend::Postgres(_) | Backend::Mysql(_));
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let pid_of = |out: &mut BufReader<std::process::ChildStdout>, what: &str| -> i32 {
        let line =
            wait_for_line(out, Duration::from_secs(10), |l| l.starts_with(what)).expect("pid line");
        line[what.len()..].trim().parse().expect("pid")
    };
    let grandchild = pid_of(&mut out, "grandchild ");
    let shell = pid_of(&mut out, "shell ");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let killed = Instant::now();
    child.kill().expect("SIGKILL lockwise");
    let _ = child.wait();
    assert!(
        session || wait_for_line(&mut out, Duration::from_secs(2), |l| l == "got-term").is_some(),
        "the command got SIGTERM first"
    );
    while (alive(shell) || alive(grandchild)) && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let gone = killed.elapsed();
    eprintln!("the command's tree was gone {gone:?} after the SIGKILL of lockwise");
    assert!(
        !alive(shell),
        "the command ignored SIGTERM and outlived lockwise"
    );
    assert!(!alive(grandchild), "the grandchild outlived lockwise");
    assert!(
        gone < Duration::from_millis(1_500),
        "the tree took {gone:?} to die: the lease (2 s) may have run out first"
    );
    assert!(
        !session || gone < Duration::from_millis(300),
        "the tree took {gone:?} to die, though the session's lock went with lockwise"
    );
}

/// The command exits at once but leaves a process in its group: lockwise keeps the lock for
/// it, and a SIGKILL of lockwise then still ends it within the grace.
fn leftovers_die_with_a_killed_lockwise(b: Backend) {
    let key = b.key();
    let script = "sleep 600 & echo \"grandchild $!\"; echo started; exit 0";
    let mut child = lockwise(&b.url(), &key, &["--ttl", "2s"], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let line = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("grandchild ")
    })
    .expect("pid line");
    let grandchild: i32 = line["grandchild ".len()..].trim().parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    std::thread::sleep(Duration::from_millis(300)); // the shell is gone, the sleep is not
    assert!(alive(grandchild));
    let killed = Instant::now();
    child.kill().expect("SIGKILL lockwise");
    let _ = child.wait();
    while alive(grandchild) && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !alive(grandchild),
        "the leftover of the command outlived a killed lockwise"
    );
    assert!(
        killed.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        killed.elapsed()
    );
}

/// A lease that is not renewed (here `--no-renew`, as when every renewal fails): the command
/// gets SIGTERM a grace before the deadline and SIGKILL at it, so a waiter that gets the lock
/// when the lease runs out never works at the same time as the command, even one that ignores
/// SIGTERM.
fn the_command_is_gone_before_the_lease_runs_out(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "trap '' TERM; echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "1s", "--no-renew"], &script);
    let waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .output()
    .expect("run");
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    assert_eq!(holder.wait().expect("wait").code(), Some(70));
    let last_of_first = stamps(&first)
        .into_iter()
        .max()
        .expect("the first command ran");
    let start_of_second = *stamps(&second).first().expect("the second command ran");
    eprintln!(
        "the first command's last write came {} µs before the second started",
        start_of_second.saturating_sub(last_of_first) / 1_000
    );
    assert!(
        last_of_first < start_of_second,
        "the first command still worked {} µs after the second started",
        (last_of_first - start_of_second) / 1_000
    );
}

/// The server forgets a live holder's lease (the key deleted, the session killed) while a
/// waiter stands by: the waiter gets the lock at once, and the holder's command must stop at
/// once too, not at the next renewal a third of the TTL later.
fn a_forgotten_lease_stops_the_command_at_once(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "9s"], &script);
    let mut waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "20s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .spawn()
    .expect("run");
    // Let the waiter start waiting, then make the server forget the holder.
    std::thread::sleep(Duration::from_millis(300));
    let forgotten = Instant::now();
    b.delete_lock(&key);
    assert_eq!(holder.wait().expect("wait").code(), Some(70));
    let stopped = forgotten.elapsed();
    assert!(waiter.wait().expect("wait").success());
    let last_of_first: i128 = std::fs::read_to_string(&first)
        .expect("first")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .expect("the first command ran");
    let start_of_second: i128 = std::fs::read_to_string(&second)
        .expect("second")
        .trim()
        .parse()
        .expect("a time");
    let overlap_ms = (last_of_first - start_of_second) as f64 / 1e6;
    println!(
        "forgotten lease: holder's command stopped {:.1} ms after the fault; its last write \
         {overlap_ms:.1} ms after the waiter's command started (negative: before)",
        stopped.as_secs_f64() * 1e3
    );
    assert!(
        overlap_ms < 100.0,
        "the first command still worked {overlap_ms:.1} ms after the second started"
    );
}

/// R19: only `lockwise run` is frozen (SIGSTOP), not its command. The supervisor holds the
/// lease's deadline itself, so the command (which ignores SIGTERM) is dead by that deadline,
/// a rival that gets the lock after the TTL never works at the same time, and the resumed
/// lockwise exits 70 saying the lease ran out (not that it "runs out in" some time).
fn a_frozen_lockwise_does_not_outlive_its_lease(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    use std::io::Read;
    let key = b.key();
    let ttl = Duration::from_secs(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let script = format!(
        "trap '' TERM; echo \"shell $$\"; echo started; \
         while :; do date +%s%N >> {}; sleep 0.05; done",
        first.display()
    );
    let mut holder = lockwise(
        &b.url(),
        &key,
        &["--ttl", "2s", "--kill-after", "200ms"],
        &["sh", "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn lockwise");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
    let mut err = holder.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let line = wait_for_line(&mut out, Duration::from_secs(10), |l| {
        l.starts_with("shell ")
    })
    .expect("shell pid");
    let shell: i32 = line["shell ".len()..].trim().parse().expect("pid");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    // Let a renewal or two go by, so that the deadline fed to the supervisor has moved.
    std::thread::sleep(Duration::from_millis(1_500));
    let pid = Pid::from_raw(holder.id() as i32);
    kill(pid, Signal::SIGSTOP).expect("SIGSTOP");
    let frozen = Instant::now();
    let frozen_wall = wall_nanos();
    // The last renewal was sent before the freeze: the local deadline is no later than this.
    let latest_deadline = ttl - (ttl / 100 + Duration::from_millis(2));
    let rival = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &[
            "sh",
            "-c",
            &format!(
                "for i in 1 2 3 4 5 6; do date +%s%N >> {}; sleep 0.05; done",
                second.display()
            ),
        ],
    )
    .spawn()
    .expect("spawn the rival");
    while alive(shell) && frozen.elapsed() < latest_deadline + Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = frozen.elapsed();
    let rival = rival.wait_with_output().expect("rival");
    kill(pid, Signal::SIGCONT).expect("SIGCONT");
    let exited = exit_within(&mut holder, Duration::from_secs(10), &[shell]);
    let _ = kill(Pid::from_raw(shell), Signal::SIGKILL);
    let stderr = stderr.join().expect("stderr reader");
    let late_ms = (gone.as_secs_f64() - latest_deadline.as_secs_f64()) * 1e3;
    let ours = stamps(&first);
    let theirs = stamps(&second);
    let last_of_first = *ours.iter().max().expect("the command ran");
    let start_of_second = *theirs.iter().min().expect("the rival ran");
    println!(
        "frozen lockwise: its command was gone {:.1} ms after the freeze, {late_ms:.1} ms \
         after the latest possible deadline (negative: before); its last write {:.1} ms after \
         the freeze, {:.1} ms before the rival's first",
        gone.as_secs_f64() * 1e3,
        (last_of_first - frozen_wall) as f64 / 1e6,
        (start_of_second - last_of_first) as f64 / 1e6,
    );
    assert!(
        late_ms < 100.0,
        "the command of a frozen lockwise lived {late_ms:.1} ms past the lease's deadline"
    );
    assert_eq!(code(&rival), 0, "{rival:?}");
    assert!(
        last_of_first < start_of_second,
        "the frozen holder's command wrote {:.1} ms after the rival's command started",
        (last_of_first - start_of_second) as f64 / 1e6
    );
    assert_eq!(exited, Some(70), "{stderr}");
    assert!(
        stderr.contains("ran out") && !stderr.contains("runs out in"),
        "the resumed lockwise must say the lease ran out: {stderr}"
    );
}

/// The supervisor's deadline is fed by the renewals: a command that lives several TTLs is not
/// stopped, and its exit code passes through.
fn renewals_keep_the_command_alive(b: Backend) {
    let key = b.key();
    let out = lockwise(
        &b.url(),
        &key,
        &["--ttl", "500ms", "--kill-after", "100ms"],
        &["sh", "-c", "sleep 2.5; exit 3"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 3, "{out:?}");
}

/// `lockwise run --key K` without a command, as `etcdctl lock K`: prints the fencing token,
/// holds the lock (renewing it past its TTL) until SIGINT or SIGTERM, then releases it and
/// exits 0; a lock lost meanwhile exits 70.
fn a_lock_is_held_without_a_command(b: Backend) {
    use nix::sys::signal::{Signal, kill};
    let key = b.key();
    let hold = |extra: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(["run", "--url", &b.url(), "--key", &key])
            .args(extra)
            .env_remove("LOCKWISE_URL")
            .stdout(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let token = wait_for_line(&mut out, Duration::from_secs(10), |_| true).expect("a line");
        let token: u64 = token.trim().parse().expect("the fencing token");
        (child, token)
    };
    let taken = || {
        let out = lockwise(&b.url(), &key, &[], &["true"])
            .output()
            .expect("run");
        code(&out) == 75
    };
    let mut last = 0;
    for stop in [Signal::SIGINT, Signal::SIGTERM] {
        let (mut holder, token) = hold(&["--ttl", "600ms"]);
        assert!(token > last, "token {token} after {last}");
        last = token;
        std::thread::sleep(Duration::from_millis(1_000)); // past the TTL: renewed
        assert!(taken(), "the lock is held");
        kill(Pid::from_raw(holder.id() as i32), stop).expect("signal");
        assert_eq!(
            exit_within(&mut holder, Duration::from_secs(3), &[]),
            Some(0)
        );
        assert!(!taken(), "{stop}: the lock was released");
    }
    let (mut holder, _) = hold(&["--ttl", "600ms"]);
    b.delete_lock(&key);
    assert_eq!(
        exit_within(&mut holder, Duration::from_secs(3), &[]),
        Some(70)
    );
}

/// `--wait forever` waits as long as the holder holds (here 2 s), then gets the lock.
#[test]
fn wait_forever_waits_for_the_holder() {
    let b = Backend::file();
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 2");
    let start = Instant::now();
    let waiter = lockwise(&b.url(), &key, &["--wait", "forever"], &["echo", "second"])
        .output()
        .expect("run");
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    assert_eq!(String::from_utf8_lossy(&waiter.stdout), "second\n");
    assert!(
        start.elapsed() >= Duration::from_millis(1_500),
        "{:?}",
        start.elapsed()
    );
    assert!(holder.wait().expect("holder").success());
}

/// The backends where a holder's death frees its lock at once (file: the kernel drops a dead
/// holder's `flock`; PostgreSQL, MariaDB: the session lock dies with its connection): a
/// SIGKILL of `lockwise run` frees the lock long before its TTL, but never while its command,
/// which ignores SIGTERM and would work through a whole grace (TTL/4 = 1 s), still runs:
/// never two commands at once.
fn a_killed_lockwise_s_lock_is_free_once_its_command_is_gone(b: Backend) {
    let key = b.key();
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let script = format!(
        "trap '' TERM; echo started; while true; do date +%s%N >> {}; sleep 0.005; done",
        first.display()
    );
    let (mut holder, _out) = spawn_holder(&b, &key, &["--ttl", "4s"], &script);
    // Working, not only started: a command killed at once may not have written yet.
    let working = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(&first).map_or(true, |m| m.len() == 0) && Instant::now() < working {
        std::thread::sleep(Duration::from_millis(5));
    }
    holder.kill().expect("SIGKILL lockwise");
    let killed = Instant::now();
    let _ = holder.wait();
    let waiter = lockwise(
        &b.url(),
        &key,
        &["--wait", "10s"],
        &["sh", "-c", &format!("date +%s%N > {}", second.display())],
    )
    .output()
    .expect("run");
    let waited = killed.elapsed();
    assert_eq!(code(&waiter), 0, "{waiter:?}");
    // Past the grace, the first command is gone: its file holds its last write.
    std::thread::sleep((Duration::from_millis(1_500)).saturating_sub(killed.elapsed()));
    let last_of_first = stamps(&first)
        .into_iter()
        .max()
        .expect("the first command ran");
    let start_of_second = *stamps(&second).first().expect("the second command ran");
    eprintln!(
        "the second command started {waited:?} after the SIGKILL, {} µs after the first's last write",
        start_of_second.saturating_sub(last_of_first) / 1_000
    );
    assert!(
        last_of_first < start_of_second,
        "the first command still worked {} µs after the second started",
        (last_of_first - start_of_second) / 1_000
    );
    assert!(
        waited < Duration::from_millis(2_500),
        "the lock came free {waited:?} after the SIGKILL: the TTL (4 s), not the death, freed it"
    );
}

/// Cases for the backends where a holder's death frees its lock at once.
macro_rules! on_death_freeing_backends {
    ($($case:ident),*) => {
        mod death_file { use super::*; $(#[test] fn $case() { super::$case(Backend::file()) })* }
        mod death_postgres { use super::*; $(#[test] fn $case() { super::$case(Backend::postgres()) })* }
        mod death_mysql { use super::*; $(#[test] fn $case() { super::$case(Backend::mysql()) })* }
    };
}

on_death_freeing_backends!(a_killed_lockwise_s_lock_is_free_once_its_command_is_gone);

/// Cases for the backends whose server can forget a lease.
macro_rules! on_servers {
    ($($case:ident),*) => {
        mod server_redis { use super::*; $(#[test] fn $case() { super::$case(Backend::redis()) })* }
        mod server_postgres { use super::*; $(#[test] fn $case() { super::$case(Backend::postgres()) })* }
        mod server_mysql { use super::*; $(#[test] fn $case() { super::$case(Backend::mysql()) })* }
    };
}

on_servers!(a_forgotten_lease_stops_the_command_at_once);

macro_rules! on_backends {
    ($($case:ident),*) => {
        mod file { use super::*; $(#[test] fn $case() { super::$case(Backend::file()) })* }
        mod redis_backend { use super::*; $(#[test] fn $case() { super::$case(Backend::redis()) })* }
        mod postgres { use super::*; $(#[test] fn $case() { super::$case(Backend::postgres()) })* }
        mod mysql { use super::*; $(#[test] fn $case() { super::$case(Backend::mysql()) })* }
    };
}

on_backends!(
    a_lock_is_held_without_a_command,
    two_runs_exclude_each_other,
    children_see_increasing_tokens,
    the_childs_exit_code_passes_through,
    a_lost_lock_stops_the_whole_tree,
    signals_are_forwarded,
    hangup_is_forwarded_not_fatal,
    the_lock_is_held_until_the_whole_group_exits,
    the_command_stops_when_lockwise_dies,
    no_process_outlives_a_killed_lockwise,
    leftovers_die_with_a_killed_lockwise,
    the_command_is_gone_before_the_lease_runs_out,
    a_frozen_holder_loses_the_lock_after_its_ttl,
    a_frozen_lockwise_does_not_outlive_its_lease,
    renewals_keep_the_command_alive
);

#[test]
fn the_command_does_not_inherit_the_backend_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", dir.path().display());
    let out = Command::new(BIN)
        .args([
            "run",
            "--key",
            "k",
            "--",
            "sh",
            "-c",
            "echo ${LOCKWISE_URL:-unset}",
        ])
        .env("LOCKWISE_URL", &url)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "unset\n");
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").count() > 0,
        "LOCKWISE_URL was used"
    );
}

/// Runs `lockwise` with raw arguments; returns (exit code, stderr, seconds taken).
fn raw(args: Vec<OsString>) -> (i32, String, f64) {
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .env_remove("LOCKWISE_URL")
        .output()
        .expect("run");
    if !out.status.success() {
        assert!(out.stdout.is_empty(), "lockwise wrote to stdout: {out:?}");
    }
    (
        code(&out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed().as_secs_f64(),
    )
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

#[test]
fn usage_errors_exit_64() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", dir.path().display());
    let long_key = "k".repeat(513);
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--url", &url, "--key", "", "--", "true"],
        vec!["run", "--url", &url, "--key", &long_key, "--", "true"],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "0s", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "-1s", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "50ms", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "3d", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--ttl", "10", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--wait", "never", "--", "true",
        ],
        vec![
            "run", "--url", &url, "--key", "k", "--wait", "99999y", "--", "true",
        ],
        vec!["run", "--url", "redis://", "--key", "k", "--", "true"],
        vec!["run", "--url", "ftp://host/x", "--key", "k", "--", "true"],
        vec!["run", "--url", "memory:", "--key", "k", "--", "true"],
        vec!["run", "--url", "not a url", "--key", "k", "--", "true"],
        vec!["run", "--url", "file://", "--key", "k", "--", "true"],
        vec!["run", "--url", &url, "--", "true"],
        vec!["run", "--bogus"],
        vec!["nonsense"],
        vec![],
    ];
    for case in cases {
        let (code, stderr, _) = raw(args(&case));
        assert_eq!(code, 64, "{case:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{case:?}: {stderr}");
    }
    let mut non_utf8 = args(&["run", "--url", &url, "--key"]);
    non_utf8.push(OsString::from_vec(vec![b'k', 0xff, 0xfe]));
    non_utf8.extend(args(&["--", "true"]));
    let (code, stderr, _) = raw(non_utf8);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("UTF-8"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "nothing was stored"
    );
    assert_eq!(raw(args(&["--help"])).0, 0);
    assert_eq!(raw(args(&["run", "--help"])).0, 0);
    assert_eq!(raw(args(&["--version"])).0, 0);
}

#[test]
fn help_documents_the_exit_codes_and_the_decision_table() {
    let help = Command::new(BIN)
        .args(["run", "--help"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "64",
        "69",
        "70",
        "75",
        "126",
        "127",
        "LOCKWISE_FENCING_TOKEN",
    ] {
        assert!(text.contains(needle), "run --help lacks {needle}");
    }
    let top = Command::new(BIN).arg("--help").output().expect("run");
    assert!(String::from_utf8_lossy(&top.stdout).contains("SKIP LOCKED"));
}

#[test]
fn backend_failures_exit_69_within_5s_without_the_password() {
    let secret = "hunter2-secret";
    let auth = RedisServer::start(&["--requirepass", "right-password"]);
    let not_redis = NotRedis::start();
    let silent = NotRedis::silent();
    let urls = [
        format!("redis://:{secret}@127.0.0.1:{}/", silent.port()),
        format!("redis://:{secret}@127.0.0.1:{}/", closed_port()),
        format!("redis://:{secret}@127.0.0.1:{}/", auth.port()),
        format!("redis://127.0.0.1:{}/", auth.port()), // no password at all
        format!("redis://:{secret}@127.0.0.1:{}/", not_redis.port()),
        format!("rediss://:{secret}@127.0.0.1:{}/", not_redis.port()),
        format!("rediss://:{secret}@127.0.0.1:{}/", auth.port()), // TLS to a plain server
        "file:///proc/lockwise-cannot-create-this".to_owned(),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            closed_port()
        ),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            not_redis.port()
        ),
        format!(
            "postgres://postgres:{secret}@127.0.0.1:{}/test",
            silent.port()
        ),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", closed_port()),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", not_redis.port()),
        format!("mysql://root:{secret}@127.0.0.1:{}/test", silent.port()),
        format!("mysql://nobody:{secret}@127.0.0.1:3306/test"), // refused login
        format!("postgres://postgres:{secret}@127.0.0.1:5432/no_such_database"),
    ];
    for url in urls {
        let (code, stderr, secs) = raw(args(&["run", "--url", &url, "--key", "k", "--", "true"]));
        assert_eq!(code, 69, "{url}: {stderr}");
        assert!(secs < 5.0, "{url}: took {secs}s");
        assert!(
            !stderr.contains(secret),
            "{url}: the password leaked: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn rediss_works_with_a_trusted_ca() {
    let (server, ca) = RedisServer::start_tls();
    let key = unique("tls");
    let out = Command::new(BIN)
        .args([
            "run",
            "--url",
            &server.url(),
            "--key",
            &key,
            "--",
            "sh",
            "-c",
            "echo $LOCKWISE_FENCING_TOKEN",
        ])
        .env("SSL_CERT_FILE", &ca)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    let token: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the command printed its fencing token");
    // A fresh server's first token: its clock in Unix ms × 1024 (lua/acquire.lua).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        token > (now_ms - 60_000) * 1024 && token <= (now_ms + 1_000) * 1024,
        "{out:?}"
    );
}

/// A `lockwise` on a pseudo-terminal of its own, as in an interactive shell: script(1) makes
/// the pty the controlling terminal of a new session and relays its stdin to it, and the
/// pty's output (echo included) to its stdout. Its exit code is lockwise's.
struct OnTerminal {
    script: Child,
    input: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl OnTerminal {
    fn run(args: &[&str]) -> OnTerminal {
        let quote = |a: &str| format!("'{}'", a.replace('\'', r"'\''"));
        let line: Vec<String> = std::iter::once(BIN)
            .chain(args.iter().copied())
            .map(quote)
            .collect();
        let mut script = Command::new("script")
            .args(["-qec", &line.join(" "), "/dev/null"])
            .env_remove("LOCKWISE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        let input = script.stdin.take().expect("stdin");
        let output = script.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                let _ = tx.send(line.trim_end_matches('\r').to_owned());
            }
        });
        OnTerminal {
            script,
            input,
            lines,
        }
    }

    /// Types `text` on the terminal.
    fn type_in(&mut self, text: &str) {
        use std::io::Write;
        self.input
            .write_all(text.as_bytes())
            .expect("write to the terminal");
        self.input.flush().expect("flush");
    }

    /// Waits up to `limit` for an output line ending with `wanted` (after the echo of a
    /// control character such as `^C`).
    fn expect_line(&self, wanted: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.ends_with(wanted) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// lockwise's exit code, if it exits within `limit` (else its session is killed).
    fn exit_code_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.script.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for OnTerminal {
    /// A hung lockwise: kill every process of the terminal's session (a stopped command
    /// ignores the hangup), then script.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.script.try_wait() {
            return;
        }
        let leader = proc_stats().find(|s| s.ppid == self.script.id() as i32);
        for stat in proc_stats().filter(|s| leader.as_ref().is_some_and(|l| s.session == l.pid)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(stat.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.script.kill();
        let _ = self.script.wait();
    }
}

/// A prompt works under `lockwise run` in a terminal, as under flock(1): the command reads
/// the line typed (it is not stopped by SIGTTIN in a background process group) and lockwise
/// exits with its exit code.
#[test]
fn an_interactive_command_reads_the_terminal() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "echo prompt; read x; echo \"got:$x\"; exit 4",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    term.type_in("hello\n");
    let echoed = term.expect_line("got:hello", Duration::from_secs(5));
    let code = term.exit_code_within(Duration::from_secs(5));
    assert!(echoed, "the command did not read the line typed");
    assert_eq!(
        code,
        Some(4),
        "lockwise did not exit with the command's code"
    );
}

/// Ctrl-C on the terminal ends a command waiting for input (exit 130, SIGINT), and the lock
/// is released.
#[test]
fn ctrl_c_ends_an_interactive_command() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "echo prompt; read x; echo never",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    std::thread::sleep(Duration::from_millis(200)); // let it block in read
    term.type_in("\x03");
    assert_eq!(term.exit_code_within(Duration::from_secs(5)), Some(130));
    let again = lockwise(&url, "k", &[], &["true"]).output().expect("run");
    assert_eq!(code(&again), 0, "the lock was released: {again:?}");
}

/// Fields of /proc/PID/stat.
struct ProcStat {
    pid: i32,
    ppid: i32,
    session: i32,
}

fn proc_stats() -> impl Iterator<Item = ProcStat> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // pid (comm) state ppid pgrp session …
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let ppid = fields.next()?.parse().ok()?;
            let session = fields.nth(1)?.parse().ok()?;
            Some(ProcStat { pid, ppid, session })
        })
}

/// Waits up to `limit` for `child` to exit; kills it (and `pids`) and returns None if not.
fn exit_within(child: &mut Child, limit: Duration, pids: &[i32]) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().chain(&[child.id() as i32]) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait();
    None
}

/// A command that traps SIGINT and SIGTERM and keeps running: the first SIGINT sent to
/// lockwise reaches it, the second kills its whole process group (a background process that
/// ignores SIGINT included); lockwise exits 137 and releases the lock.
#[test]
fn a_second_signal_kills_the_group() {
    use nix::sys::signal::{Signal, kill};
    let b = Backend::file();
    let key = b.key();
    let script = "trap 'echo got-signal' INT TERM; sleep 600 & echo \"grandchild $!\"; \
                  echo \"shell $$\"; echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(&b.url(), &key, &[], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let pid_after = |out: &mut BufReader<_>, prefix: &str| -> i32 {
        let line = wait_for_line(out, Duration::from_secs(10), |l| l.starts_with(prefix))
            .expect("pid line");
        line[prefix.len()..].trim().parse().expect("pid")
    };
    let grandchild = pid_after(&mut out, "grandchild ");
    let shell = pid_after(&mut out, "shell ");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let lockwise_pid = nix::unistd::Pid::from_raw(child.id() as i32);
    kill(lockwise_pid, Signal::SIGINT).expect("SIGINT");
    assert!(
        wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-signal").is_some(),
        "the first SIGINT reached the command"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(shell), "the command lingers after the first SIGINT");
    kill(lockwise_pid, Signal::SIGINT).expect("SIGINT");
    let exited = exit_within(&mut child, Duration::from_secs(3), &[shell, grandchild]);
    assert_eq!(exited, Some(137), "lockwise exits 128 + SIGKILL");
    assert!(!alive(shell), "the command survived the second SIGINT");
    assert!(!alive(grandchild), "the background process survived");
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0, "the lock was released: {again:?}");
}

/// On a terminal, Ctrl-C reaches the command's group without lockwise: the second Ctrl-C
/// kills the group all the same (exit 137).
#[test]
fn a_second_ctrl_c_kills_an_interactive_command() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "trap 'echo got-int' INT; echo prompt; while true; do sleep 0.05; done",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    term.type_in("\x03");
    assert!(
        term.expect_line("got-int", Duration::from_secs(5)),
        "the first Ctrl-C reached it"
    );
    std::thread::sleep(Duration::from_millis(300));
    term.type_in("\x03");
    assert_eq!(term.exit_code_within(Duration::from_secs(5)), Some(137));
}

/// `--verbose` prints to stderr how long lockwise waited (here for a holder of about 1 s) and
/// the fencing token the command gets; without it, lockwise prints nothing.
#[test]
fn verbose_prints_the_wait_and_the_token() {
    let b = Backend::file();
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 1");
    let out = lockwise(
        &b.url(),
        &key,
        &["--verbose", "--wait", "10s"],
        &["sh", "-c", "echo $LOCKWISE_FENCING_TOKEN"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(holder.wait().expect("holder").success());
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("lockwise: acquired lock"))
        .unwrap_or_else(|| panic!("no verbose line in {stderr:?}"));
    assert!(
        line.ends_with(&format!("; fencing token {token}")),
        "{line}"
    );
    let waited: f64 = line
        .split(" after ")
        .nth(1)
        .and_then(|rest| rest.split("s;").next())
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("no time waited in {line:?}"));
    assert!((0.5..10.0).contains(&waited), "{line}");
    let quiet = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&quiet), 0, "{quiet:?}");
    assert!(quiet.stderr.is_empty(), "{quiet:?}");
}

/// `lockwise --version` names the git commit it was built from (`unknown` without git).
#[test]
fn version_names_the_git_commit() {
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let out = Command::new(BIN).arg("--version").output().expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("lockwise {} ({head})\n", env!("CARGO_PKG_VERSION"))
    );
}

/// Runs `lockwise ARGS`; returns (exit code, stdout).
fn stdout_of(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN).args(args).output().expect("run");
    (
        code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `lockwise completions SHELL` prints that shell's completion script, which knows `run` and
/// its options; an unknown shell is a usage error.
#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _lockwise"),
        ("zsh", "#compdef lockwise"),
        ("fish", "complete -c lockwise"),
        ("elvish", "edit:completion:arg-completer[lockwise]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let (code, script) = stdout_of(&["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(
            script.contains(marker),
            "{shell}: no {marker:?} in {script}"
        );
        for word in ["run", "wait", "kill-after", "queue"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
        assert!(
            !script.contains("supervise"),
            "{shell}: internal subcommand listed"
        );
    }
    assert_eq!(stdout_of(&["completions", "tcsh"]).0, 64);
}

/// `lockwise man` prints lockwise(1) in roff, `lockwise man run` lockwise-run(1) with its
/// options and exit codes; hidden and unknown subcommands are usage errors.
#[test]
fn man_pages_are_printed() {
    let (code, page) = stdout_of(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH lockwise 1"), "{page}");
    assert!(page.contains("lockwise\\-run(1)"), "{page}");
    let (code, page) = stdout_of(&["man", "run"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH lockwise-run 1"), "{page}");
    for needle in [
        "\\-\\-wait",
        "forever",
        "\\-\\-kill\\-after",
        "LOCKWISE_FENCING_TOKEN",
        "75",
    ] {
        assert!(
            page.contains(needle),
            "lockwise-run(1) lacks {needle}: {page}"
        );
    }
    assert_eq!(stdout_of(&["man", "supervise"]).0, 64);
    assert_eq!(stdout_of(&["man", "nonsense"]).0, 64);
}
