//! `lockwise partition` and `lockwise members`: two members split the keys; the command gets
//! its assignment in its environment and is restarted with every key when the other member
//! leaves; `members --json` shows the group; bad input exits 64. On file, Redis, PostgreSQL
//! and MariaDB: a live member's id is refused at once (75), the key space is the group's,
//! `--keys 0` is refused, and a frozen member's command dies by its lease's deadline (R19).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::io::BufReader;

use lockwise_testkit::{MysqlDatabase, PgDatabase, RedisNamespace, wait_for_line};
use lockwise_testkit::{stamps, wall_nanos};
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

#[cfg(feature = "etcd")]
#[test]
fn partition_and_members_on_etcd() {
    let url = format!(
        "{}/{}/",
        lockwise_testkit::etcd_url().trim_end_matches('/'),
        lockwise_testkit::unique("partition-cli")
    );
    scenario(&url, "reports");
}

#[test]
fn partition_and_members_on_a_redis_cluster() {
    let cluster = lockwise_testkit::RedisCluster::start();
    scenario(&cluster.url(), "reports");
}

/// A member over named keys (`--key`, or `--keys-file` with the same set) whose command
/// writes "<id> <generation> <keys>" to `out`.
fn named_member(url: &str, id: &str, keys: &[&str], out: &std::path::Path) -> Child {
    let script = format!(
        "echo \"$LOCKWISE_MEMBER $LOCKWISE_GENERATION $LOCKWISE_KEYS\" >> {}; exec sleep 60",
        out.display()
    );
    Command::new(BIN)
        .args(["partition", "--url", url, "--group", "regions", "--id", id])
        .args(keys)
        .args([
            "--ttl",
            "1s",
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

/// The lines `id`'s command wrote: (generation, keys).
fn starts(out: &std::path::Path, id: &str) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{id} ")))
        .map(|rest| {
            let (generation, keys) = rest.split_once(' ').unwrap_or((rest, ""));
            (generation.parse().unwrap(), keys.to_owned())
        })
        .collect()
}

/// Named keys: the command sees their names. A member whose keys a new generation leaves as
/// they were runs on (not restarted); one whose keys change starts again with the new ones.
/// Another key set, and a key with a comma, are refused (64).
#[test]
fn named_keys_and_members_whose_keys_stay_run_on() {
    use lockwise::partition::rendezvous_owner;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("locks").display());
    let out = dir.path().join("starts");
    let file = dir.path().join("keys");
    std::fs::write(&file, "eu\n\nus\n").unwrap();
    let by_file = ["--keys-file", file.to_str().unwrap()];
    // b takes none of a's keys; c takes one of them.
    let owner = |key: &str, ids: &[&str]| rendezvous_owner(key, ids).unwrap().to_owned();
    let ids: Vec<String> = (0..200).map(|n| format!("m{n}")).collect();
    let b = ids
        .iter()
        .find(|b| ["eu", "us"].iter().all(|k| owner(k, &["a", b]) == "a"))
        .unwrap()
        .clone();
    let c = ids
        .iter()
        .find(|c| {
            **c != b
                && ["eu", "us"]
                    .iter()
                    .filter(|k| owner(k, &["a", &b, c]) == c.as_str())
                    .count()
                    == 1
        })
        .unwrap()
        .clone();
    let mut a_member = named_member(&url, "a", &["--key", "eu", "--key", "us"], &out);
    wait_for("a with both keys", || {
        starts(&out, "a")
            .last()
            .filter(|(_, k)| k == "eu,us")
            .map(|_| ())
    });
    let mut b_member = named_member(&url, &b, &by_file, &out);
    wait_for("b started without keys", || {
        starts(&out, &b)
            .last()
            .filter(|(_, k)| k.is_empty())
            .map(|_| ())
    });
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(
        starts(&out, "a").len(),
        1,
        "a's keys did not change: not restarted"
    );
    let mut c_member = named_member(&url, &c, &by_file, &out);
    let (_, kept) = wait_for("a restarted with one key", || {
        let all = starts(&out, "a");
        (all.len() == 2).then(|| all[1].clone())
    });
    let (_, taken) = wait_for("c with one key", || starts(&out, &c).last().cloned());
    assert_eq!(kept.split(',').count(), 1, "{kept}");
    assert_ne!(kept, taken);
    assert_eq!(starts(&out, &b).len(), 1, "b's keys (none) did not change");
    for (args, why) in [
        (vec!["--key", "eu"], "another key set"),
        (vec!["--key", "eu,us"], "a comma"),
    ] {
        let refused = Command::new(BIN)
            .args([
                "partition",
                "--url",
                &url,
                "--group",
                "regions",
                "--ttl",
                "1s",
            ])
            .args(&args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(64), "{why}: {refused:?}");
    }
    for member in [&mut a_member, &mut b_member, &mut c_member] {
        kill(Pid::from_raw(member.id() as i32), Signal::SIGTERM).unwrap();
        assert_eq!(member.wait().unwrap().code(), Some(128 + 15));
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

/// A group's server for one test: its URL, a unique group name, and what to clean up.
struct Server {
    name: &'static str,
    url: String,
    group: String,
    redis: Option<RedisNamespace>,
    _keep: Box<dyn std::any::Any>,
}

impl Server {
    fn file() -> Self {
        let dir = tempfile::tempdir().unwrap();
        Server {
            name: "file",
            url: format!("file://{}", dir.path().display()),
            group: lockwise_testkit::unique("g"),
            redis: None,
            _keep: Box::new(dir),
        }
    }

    fn redis() -> Self {
        let ns = RedisNamespace::new("partition-cli");
        Server {
            name: "redis",
            url: ns.url().to_owned(),
            group: ns.prefix().to_owned(),
            redis: Some(ns),
            _keep: Box::new(()),
        }
    }

    fn postgres() -> Self {
        let db = PgDatabase::postgres("partition_cli");
        Server {
            name: "postgres",
            url: db.url(),
            group: lockwise_testkit::unique("g"),
            redis: None,
            _keep: Box::new(db),
        }
    }

    fn mysql() -> Self {
        let db = MysqlDatabase::mysql("partition_cli");
        Server {
            name: "mysql",
            url: db.url(),
            group: lockwise_testkit::unique("g"),
            redis: None,
            _keep: Box::new(db),
        }
    }

    /// `lockwise partition` in this server's group.
    fn partition(&self, extra: &[&str], cmd: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(["partition", "--url", &self.url, "--group", &self.group])
            .args(extra)
            .arg("--")
            .args(cmd)
            .env_remove("LOCKWISE_URL");
        c
    }

    /// `lockwise members --json` in this server's group, with `extra` arguments.
    fn members(&self, extra: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .args([
                "members",
                "--url",
                &self.url,
                "--group",
                &self.group,
                "--json",
            ])
            .args(extra)
            .env_remove("LOCKWISE_URL")
            .output()
            .unwrap()
    }

    /// Whether the Redis key `name` exists.
    fn redis_has(&self, name: &str) -> bool {
        let ns = self.redis.as_ref().unwrap();
        ::redis::cmd("EXISTS")
            .arg(name)
            .query::<i64>(&mut ns.conn())
            .unwrap()
            == 1
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(ns) = &self.redis {
            for start in ["lockwise:{", "lockwise:partition:{"] {
                ns.delete_matching(&format!("{start}{}", self.group));
            }
        }
    }
}

/// Kills `child` unless it exits within `limit`; its exit code, `None` when it had to be killed.
fn exit_within(child: &mut Child, limit: Duration) -> Option<i32> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
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

/// A child process killed on drop, so that a failing test leaves no member behind (MariaDB's
/// named locks are server-wide).
struct Running(Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// A member whose command says "<id> started" on stdout (its lockwise's) and sleeps.
fn sleeper(s: &Server, id: &str, keys: &str) -> (Running, BufReader<std::process::ChildStdout>) {
    let mut child = s
        .partition(
            &[
                "--id",
                id,
                "--keys",
                keys,
                "--ttl",
                "1s",
                "--kill-after",
                "200ms",
            ],
            &[
                "sh",
                "-c",
                "echo \"$LOCKWISE_MEMBER started\"; exec sleep 60",
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let started = format!("{id} started");
    wait_for_line(&mut out, Duration::from_secs(15), |l| l == started)
        .unwrap_or_else(|| panic!("[{}] member {id} did not start", s.name));
    (Running(child), out)
}

fn stop(child: &mut Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    assert_eq!(exit_within(child, Duration::from_secs(10)), Some(128 + 15));
}

/// A second `lockwise partition` with the id of a live member is refused at once with exit 75
/// and a message naming the id and the group; the live member runs on.
fn a_duplicate_id_is_refused_promptly(s: Server) {
    let (mut first, _out) = sleeper(&s, "a", "50");
    let started = Instant::now();
    let mut second = s
        .partition(&["--id", "a", "--keys", "50", "--ttl", "1s"], &["true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = exit_within(&mut second, Duration::from_secs(10));
    let took = started.elapsed();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    println!("[{}] duplicate id refused after {took:?}: {stderr}", s.name);
    assert_eq!(code, Some(75), "[{}] {stderr}", s.name);
    assert!(
        stderr.contains("member id \"a\" is in use") && stderr.contains(&s.group),
        "[{}] {stderr}",
        s.name
    );
    // The renewals of a live member show within TTL/3; the old wait was 2 × TTL + 1 s.
    assert!(took < Duration::from_millis(1_500), "[{}] {took:?}", s.name);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the live member must run on"
    );
    stop(&mut first);
}

/// The group stores its key space: a member with another `--keys` is refused with exit 64
/// naming the group's, and `members` counts the group's keys without `--keys` (and refuses
/// a `--keys` that differs).
fn the_key_space_belongs_to_the_group(s: Server) {
    let (mut first, _out) = sleeper(&s, "a", "100");
    let mut other = s
        .partition(&["--id", "b", "--keys", "50", "--ttl", "1s"], &["true"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = exit_within(&mut other, Duration::from_secs(5));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut other.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, Some(64), "[{}] {stderr}", s.name);
    assert!(
        stderr.contains("100 keys") && stderr.contains("--keys 50"),
        "[{}] {stderr}",
        s.name
    );
    let out = s.members(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = doc["members"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "[{}] {doc}", s.name);
    assert_eq!(listed[0]["keys"].as_u64(), Some(100), "[{}] {doc}", s.name);
    assert_eq!(doc["keys"].as_u64(), Some(100), "[{}] {doc}", s.name);
    let out = s.members(&["--keys", "50"]);
    assert_eq!(out.status.code(), Some(64), "[{}] {out:?}", s.name);
    stop(&mut first);
}

/// `--keys 0` is a usage error, refused before anything is stored.
fn zero_keys_are_refused(s: Server) {
    let out = s
        .partition(&["--keys", "0", "--ttl", "1s"], &["true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "[{}] {out:?}", s.name);
    let out = s.members(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["members"].as_array().map(Vec::len), Some(0), "{doc}");
    assert_eq!(doc["generation"].as_u64(), Some(0), "{doc}");
}

macro_rules! on_every_backend {
    ($($case:ident),*) => {
        mod file { $(#[test] fn $case() { super::$case(super::Server::file()) })* }
        mod redis { $(#[test] fn $case() { super::$case(super::Server::redis()) })* }
        mod postgres { $(#[test] fn $case() { super::$case(super::Server::postgres()) })* }
        mod mysql { $(#[test] fn $case() { super::$case(super::Server::mysql()) })* }
    };
}

on_every_backend!(
    a_duplicate_id_is_refused_promptly,
    the_key_space_belongs_to_the_group,
    zero_keys_are_refused,
    a_frozen_member_does_not_outlive_its_lease,
    renewals_keep_a_members_command_alive
);

/// Redis: the fencing counter of a member's lock (`<prefix>:{<group>/member/<id>}:fence`) is
/// removed with the member's record, whether it left (SIGTERM) or died (SIGKILL) and was
/// dropped by a rebalance; the generation lock's counter, which the generations come from,
/// stays.
#[test]
fn member_fence_keys_go_with_their_members_on_redis() {
    let s = Server::redis();
    let fence = |id: &str| format!("lockwise:{{{}/member/{id}}}:fence", s.group);
    let (mut a, _a) = sleeper(&s, "a", "10");
    let (mut b, _b) = sleeper(&s, "b", "10");
    assert!(s.redis_has(&fence("a")) && s.redis_has(&fence("b")));
    b.kill().unwrap();
    b.wait().unwrap();
    wait_for("b's fence key removed", || {
        (!s.redis_has(&fence("b"))).then_some(())
    });
    stop(&mut a);
    assert!(!s.redis_has(&fence("a")), "a's fence key outlived a");
    assert!(s.redis_has(&format!("lockwise:{{{}/generation}}:fence", s.group)));
}

/// R19: only the first member's `lockwise partition` is frozen (SIGSTOP), not its command
/// (which ignores SIGTERM). Its supervisor holds the membership's deadline, so the command is
/// dead by it; the second member, which takes the same keys once the lease runs out, never
/// runs its command at the same time; the resumed member exits 70 saying the lease ran out.
fn a_frozen_member_does_not_outlive_its_lease(s: Server) {
    let ttl = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    // Each member's command appends a stamp every 50 ms to a file named after the member.
    let script = format!(
        "trap '' TERM; echo \"shell $$\"; while :; do date +%s%N >> {}/$LOCKWISE_MEMBER; sleep 0.05; done",
        dir.path().display()
    );
    let spawn = |id: &str| {
        s.partition(
            &[
                "--id",
                id,
                "--keys",
                "8",
                "--ttl",
                "2s",
                "--kill-after",
                "200ms",
            ],
            &["sh", "-c", &script],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let mut first = Running(spawn("a"));
    let mut out = BufReader::new(first.stdout.take().unwrap());
    let mut err = first.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
        text
    });
    let line = wait_for_line(&mut out, Duration::from_secs(15), |l| {
        l.starts_with("shell ")
    })
    .expect("the first member's command started");
    let shell: i32 = line["shell ".len()..].trim().parse().unwrap();
    // Let a renewal or two go by, so that the deadline fed to the supervisor has moved.
    std::thread::sleep(Duration::from_millis(1_500));
    let pid = Pid::from_raw(first.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let frozen = Instant::now();
    let frozen_wall = wall_nanos();
    // The last renewal was sent before the freeze: the local deadline is no later than this.
    let latest_deadline = ttl - (ttl / 100 + Duration::from_millis(2));
    let mut second = Running(spawn("b"));
    let mut second_out = BufReader::new(second.stdout.take().unwrap());
    while alive(shell) && frozen.elapsed() < latest_deadline + Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let gone = frozen.elapsed();
    let started = wait_for_line(&mut second_out, Duration::from_secs(15), |l| {
        l.starts_with("shell ")
    });
    // Let the second member's command write for a while.
    std::thread::sleep(Duration::from_millis(300));
    kill(pid, Signal::SIGCONT).unwrap();
    let exited = exit_within(&mut first, Duration::from_secs(10));
    let _ = kill(Pid::from_raw(shell), Signal::SIGKILL);
    let stderr = stderr.join().unwrap();
    stop(&mut second);
    let margin_ms = (latest_deadline.as_secs_f64() - gone.as_secs_f64()) * 1e3;
    let ours = stamps(&dir.path().join("a"));
    let theirs = stamps(&dir.path().join("b"));
    let last_of_first = *ours.iter().max().expect("the first command ran");
    let start_of_second = *theirs.iter().min().expect("the second command ran");
    println!(
        "[{}] frozen member: its command was gone {:.1} ms after the freeze, {margin_ms:.1} ms \
         before the latest possible deadline; its last write {:.1} ms after the freeze, \
         {:.1} ms before the second member's first",
        s.name,
        gone.as_secs_f64() * 1e3,
        (last_of_first - frozen_wall) as f64 / 1e6,
        (start_of_second - last_of_first) as f64 / 1e6,
    );
    assert!(
        started.is_some(),
        "[{}] the second member never started",
        s.name
    );
    assert!(
        margin_ms > -100.0,
        "[{}] the command of a frozen member lived {:.1} ms past the lease's deadline",
        s.name,
        -margin_ms
    );
    assert!(
        last_of_first < start_of_second,
        "[{}] the frozen member's command wrote {:.1} ms after the second member's started",
        s.name,
        (last_of_first - start_of_second) as f64 / 1e6
    );
    assert_eq!(exited, Some(70), "[{}] {stderr}", s.name);
    assert!(
        stderr.contains("ran out") && !stderr.contains("runs out in"),
        "[{}] the resumed member must say the lease ran out: {stderr}",
        s.name
    );
}

/// The supervisor's deadline is fed by the renewals: a command that lives several TTLs is not
/// stopped, and its exit code passes through.
fn renewals_keep_a_members_command_alive(s: Server) {
    let started = Instant::now();
    let out = s
        .partition(
            &["--keys", "4", "--ttl", "500ms", "--kill-after", "100ms"],
            &["sh", "-c", "sleep 2.5; exit 3"],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "[{}] {out:?}", s.name);
    assert!(started.elapsed() >= Duration::from_millis(2_500));
}
