//! `lockwise run` across real processes, on every backend.

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
    /// The shared etcd under a prefix of the test's own (every key has a lease: nothing
    /// outlives the test by more than its TTL).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    Etcd(String),
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

    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    fn etcd() -> Self {
        Backend::Etcd(format!(
            "{}/{}",
            lockwise_testkit::etcd_url(),
            unique("cli")
        ))
    }

    fn url(&self) -> String {
        match self {
            Backend::File(dir) => format!("file://{}", dir.path().display()),
            Backend::Redis(ns) => ns.url().to_owned(),
            Backend::Postgres(db) => db.url(),
            Backend::Mysql(db) => db.url(),
            Backend::Etcd(url) => url.clone(),
        }
    }

    /// A key unique to this test (the CLI uses the default `lockwise` prefix on Redis).
    fn key(&self) -> String {
        match self {
            Backend::Redis(ns) => format!("{}-job", ns.prefix()),
            // Advisory locks and GET_LOCK names are server-wide: make the key unique.
            Backend::Postgres(db) => format!("{}-job", db.name()),
            Backend::Mysql(db) => format!("{}-job", db.name()),
            Backend::File(_) | Backend::Etcd(_) => "job".to_owned(),
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
            #[cfg(not(feature = "etcd"))]
            Backend::Etcd(_) => unreachable!("etcd cases need the feature etcd"),
            #[cfg(feature = "etcd")]
            Backend::Etcd(url) => {
                let url = lockwise::url::EtcdUrl::parse(url).expect("the test's own URL");
                let endpoint = url.endpoints[0].trim_start_matches("http://");
                let out = Command::new("etcdctl")
                    .args([&format!("--endpoints={endpoint}"), "del"])
                    .arg(lockwise::backend::etcd::lock_name(&url.prefix, key))
                    .env("ETCDCTL_API", "3")
                    .output()
                    .expect("etcdctl");
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout).trim(),
                    "1",
                    "the lock key existed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
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
            // The lock, its counter, and a semaphore's permits (`…-job#permit-N`).
            ns.delete_matching(&format!("lockwise:{{{}-job", ns.prefix()));
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

mod basics;
mod cli;
mod deaths;
mod holding;
mod meta;
mod operator;
mod semaphore;
mod terminal;
#[allow(unused_imports)]
use basics::*;
#[allow(unused_imports)]
use cli::*;
#[allow(unused_imports)]
use deaths::*;
#[allow(unused_imports)]
use holding::*;
#[allow(unused_imports)]
use meta::*;
#[allow(unused_imports)]
use operator::*;
#[allow(unused_imports)]
use semaphore::*;
#[allow(unused_imports)]
use terminal::*;

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
        #[cfg(feature = "etcd")]
        mod server_etcd { use super::*; $(#[test] fn $case() { super::$case(Backend::etcd()) })* }
    };
}

on_servers!(a_forgotten_lease_stops_the_command_at_once);

macro_rules! on_backends {
    ($($case:ident),*) => {
        mod file { use super::*; $(#[test] fn $case() { super::$case(Backend::file()) })* }
        mod redis_backend { use super::*; $(#[test] fn $case() { super::$case(Backend::redis()) })* }
        mod postgres { use super::*; $(#[test] fn $case() { super::$case(Backend::postgres()) })* }
        mod mysql { use super::*; $(#[test] fn $case() { super::$case(Backend::mysql()) })* }
        #[cfg(feature = "etcd")]
        mod etcd { use super::*; $(#[test] fn $case() { super::$case(Backend::etcd()) })* }
    };
}

on_backends!(
    locks_lists_the_holder_and_unlock_force_breaks_it,
    a_lock_is_held_without_a_command,
    two_runs_exclude_each_other,
    a_run_that_starts_nothing_leaves_nothing_behind,
    children_see_increasing_tokens,
    the_childs_exit_code_passes_through,
    a_lost_lock_stops_the_whole_tree,
    signals_are_forwarded,
    hangup_is_forwarded_not_fatal,
    the_lock_is_held_until_the_whole_group_exits,
    a_process_that_left_the_group_does_not_hold_the_lock,
    the_command_stops_when_lockwise_dies,
    no_process_outlives_a_killed_lockwise,
    leftovers_die_with_a_killed_lockwise,
    the_command_is_gone_before_the_lease_runs_out,
    a_frozen_holder_loses_the_lock_after_its_ttl,
    a_frozen_lockwise_does_not_outlive_its_lease,
    renewals_keep_the_command_alive,
    limit_runs_at_most_n_commands_at_once,
    a_frozen_permit_holder_is_fenced,
    shared_readers_and_an_exclusive_writer
);
