//! Key partitioning with real processes: 4 member processes (`lockwise partition-actor`), 1,000
//! keys, 1 s leases, on Redis, PostgreSQL and etcd. Each key has exactly one owner per
//! generation; a fifth member takes about 1/5 of the keys; SIGKILL of a member moves only its
//! keys, within its lease; SIGSTOP of a member past its lease moves its keys, and after SIGCONT
//! its late writes are rejected by the fence; the history checker finds no key worked on by
//! two members at once; the load per member is within ±20 % of even. The figures are printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockwise_bench::history::{Event, What, check};
use lockwise_testkit::{PgDatabase, RedisNamespace};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");
const KEYS: usize = 1000;
const TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct Assigned {
    generation: u64,
    settled: bool,
    members: usize,
    owned: Vec<u32>,
}

struct Actor {
    id: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Actor {
    fn start(url: &str, group: &str, id: &str, fence_dir: Option<&std::path::Path>) -> Actor {
        let mut command = Command::new(BIN);
        command
            .args([
                "partition-actor",
                "--url",
                url,
                "--group",
                group,
                "--id",
                id,
            ])
            .args(["--keys", &KEYS.to_string(), "--ttl", "1s"]);
        if let Some(dir) = fence_dir {
            command.arg("--fence-dir").arg(dir);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Actor {
            id: id.to_owned(),
            child,
            lines,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    fn assigned(&self) -> Option<Assigned> {
        let lines = self.lines.lock().unwrap();
        let last = lines.iter().rev().find_map(|l| l.strip_prefix("A "))?;
        let v: serde_json::Value = serde_json::from_str(last).unwrap();
        Some(Assigned {
            generation: v["generation"].as_u64().unwrap(),
            settled: v["settled"].as_bool().unwrap() && !v["lost"].as_bool().unwrap(),
            members: v["members"].as_u64().unwrap() as usize,
            owned: v["owned"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_u64().unwrap() as u32)
                .collect(),
        })
    }

    /// The fenced writes with when each was issued and answered (`W` lines).
    fn timed_writes(&self) -> Vec<TimedWrite> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("W "))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                TimedWrite {
                    process: self.id.clone(),
                    resource: v["resource"].as_str().unwrap().to_owned(),
                    token: v["token"].as_u64().unwrap(),
                    accepted: v["accepted"].as_bool().unwrap(),
                    issued: v["issued"].as_u64().unwrap(),
                    answered: v["answered"].as_u64().unwrap(),
                }
            })
            .collect()
    }

    fn events(&self) -> Vec<Event> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("E "))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn boottime() -> u64 {
    lockwise::lease::boottime_nanos().unwrap()
}

/// Waits until every actor in `live` reports one settled generation of `n` members; returns
/// the generation and each key's owner, after checking that every key has exactly one.
fn settled(live: &[&Actor], n: usize) -> (u64, BTreeMap<u32, String>) {
    let start = Instant::now();
    loop {
        let views: Vec<Option<Assigned>> = live.iter().map(|a| a.assigned()).collect();
        let generation = views[0].as_ref().map(|a| a.generation);
        if views.iter().all(|v| {
            v.as_ref()
                .is_some_and(|a| a.settled && a.members == n && Some(a.generation) == generation)
        }) {
            let mut owner = BTreeMap::new();
            for (actor, view) in live.iter().zip(&views) {
                for key in &view.as_ref().unwrap().owned {
                    let before = owner.insert(*key, actor.id.clone());
                    assert!(
                        before.is_none(),
                        "key {key} owned by {before:?} and {}",
                        actor.id
                    );
                }
            }
            assert_eq!(owner.len(), KEYS, "every key has an owner");
            return (generation.unwrap(), owner);
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no settled generation of {n} members: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn moved(before: &BTreeMap<u32, String>, after: &BTreeMap<u32, String>) -> Vec<u32> {
    before
        .iter()
        .filter(|(k, o)| after.get(*k) != Some(*o))
        .map(|(k, _)| *k)
        .collect()
}

/// `lease`: how long the server keeps a dead member's lock of TTL [`TTL`] at most.
fn scenario(
    server: &str,
    url: &str,
    group: &str,
    fence_dir: Option<&std::path::Path>,
    lease: Duration,
) {
    let mut actors: Vec<Actor> = (0..4)
        .map(|i| Actor::start(url, group, &format!("m{i}"), fence_dir))
        .collect();
    let started = Instant::now();
    let live: Vec<&Actor> = actors.iter().collect();
    let (g1, owners1) = settled(&live, 4);
    let first_settle = started.elapsed();
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for o in owners1.values() {
        *load.entry(o.as_str()).or_default() += 1;
    }
    let even = KEYS / 4;
    let spread = load
        .values()
        .map(|n| (*n as f64 - even as f64).abs() / even as f64 * 100.0)
        .fold(0.0, f64::max);
    assert!(spread <= 20.0, "load {load:?}");
    println!(
        "[{server}] 4 members settled generation {g1} in {first_settle:?}; load {load:?} (max {spread:.1} % off even)"
    );

    // A fifth member takes about 1/5 of the keys, all of them to itself.
    let joined = Instant::now();
    actors.push(Actor::start(url, group, "m4", fence_dir));
    let live: Vec<&Actor> = actors.iter().collect();
    let (g2, owners2) = settled(&live, 5);
    let join_time = joined.elapsed();
    let moved_join = moved(&owners1, &owners2);
    assert!(g2 > g1);
    assert!(moved_join.iter().all(|k| owners2[k] == "m4"));
    assert!(
        (150..=250).contains(&moved_join.len()),
        "{} keys moved",
        moved_join.len()
    );
    println!(
        "[{server}] join of m4: {} keys moved ({:.1} %), settled in {join_time:?}",
        moved_join.len(),
        moved_join.len() as f64 / 10.0
    );

    // SIGKILL of m1 moves only m1's keys, within its lease.
    let killed_at = boottime();
    let kill_clock = Instant::now();
    kill(actors[1].pid(), Signal::SIGKILL).unwrap();
    let live: Vec<&Actor> = [0, 2, 3, 4].iter().map(|i| &actors[*i]).collect();
    let (g3, owners3) = settled(&live, 4);
    let kill_time = kill_clock.elapsed();
    let moved_kill = moved(&owners2, &owners3);
    let m1_keys: Vec<u32> = owners2
        .iter()
        .filter(|(_, o)| *o == "m1")
        .map(|(k, _)| *k)
        .collect();
    assert!(g3 > g2);
    assert_eq!(moved_kill, m1_keys, "only the killed member's keys move");
    assert!(
        kill_time < lease + Duration::from_millis(1500),
        "{kill_time:?}"
    );
    println!(
        "[{server}] SIGKILL of m1: {} keys moved (its own), settled in {kill_time:?} (lease {lease:?})",
        moved_kill.len()
    );

    // SIGSTOP of m2 past its lease: its keys move; after SIGCONT its late writes are fenced.
    let stop_clock = Instant::now();
    kill(actors[2].pid(), Signal::SIGSTOP).unwrap();
    let live: Vec<&Actor> = [0, 3, 4].iter().map(|i| &actors[*i]).collect();
    let (g4, owners4) = settled(&live, 3);
    let stop_time = stop_clock.elapsed();
    let moved_stop = moved(&owners3, &owners4);
    let m2_keys: Vec<u32> = owners3
        .iter()
        .filter(|(_, o)| *o == "m2")
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(moved_stop, m2_keys, "only the frozen member's keys move");
    println!(
        "[{server}] SIGSTOP of m2: {} keys moved (its own), settled in {stop_time:?}",
        moved_stop.len()
    );
    // Let the new owners write first, then wake m2: it must find its membership lost.
    std::thread::sleep(Duration::from_millis(300));
    kill(actors[2].pid(), Signal::SIGCONT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = actors[2].child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the woken member did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(70),
        "a member that lost its membership exits 70"
    );

    // The history: no key worked on by two members at once; no stale write accepted.
    let mut events = Vec::new();
    for actor in &actors {
        let mine = actor.events();
        match actor.id.as_str() {
            "m1" => {
                // Killed: its work ended at the kill.
                let mut open = BTreeSet::new();
                for e in &mine {
                    match &e.what {
                        What::Enter { resource } => {
                            open.insert(resource.clone());
                        }
                        What::Exit { resource } => {
                            open.remove(resource);
                        }
                        _ => {}
                    }
                }
                events.extend(mine.iter().cloned());
                for resource in open {
                    events.push(Event::new("m1", 0, killed_at, What::Exit { resource }));
                }
            }
            // Frozen: a stopped process cannot stop its work; the fence is what protects the
            // data, so only its writes are checked.
            "m2" => events.extend(
                mine.into_iter()
                    .filter(|e| matches!(e.what, What::Write { .. })),
            ),
            _ => events.extend(mine),
        }
    }
    let late: Vec<&Event> = actors[2]
        .events()
        .iter()
        .filter(|e| matches!(e.what, What::Write { token, .. } if token < g4))
        .cloned()
        .collect::<Vec<_>>()
        .leak()
        .iter()
        .collect();
    let late_rejected = late
        .iter()
        .filter(|e| {
            matches!(
                e.what,
                What::Write {
                    accepted: false,
                    ..
                }
            )
        })
        .count();
    let verdict = check(&events);
    println!(
        "[{server}] history: {} entries, at most {} member(s) on a key at once, {} stale writes accepted, {} rejected (m2's late writes: {late_rejected})",
        verdict.entered,
        verdict.max_inside_at_once,
        verdict.stale_writes_accepted,
        verdict.stale_writes_rejected
    );
    assert_eq!(
        verdict.max_inside_at_once,
        1,
        "{:?}",
        verdict.overlaps.first()
    );
    // The history checker orders writes by when they were issued, which counts a write whose
    // higher-token rival was still in flight (waiting for a pooled connection under load) as
    // stale; the fence's promise is about writes issued after a higher one was answered.
    let writes: Vec<TimedWrite> = actors.iter().flat_map(Actor::timed_writes).collect();
    let stale = stale_accepted(&writes);
    println!(
        "[{server}] fenced writes: {} timed, {} accepted although a higher token's write had been answered before they were issued",
        writes.len(),
        stale.len()
    );
    assert!(stale.is_empty(), "{}", stale.join("\n"));
    assert!(late_rejected >= 1, "the woken member made no late write");
    assert!(verdict.stale_writes_rejected as usize >= late_rejected);
    assert!(g4 > g3);
}

/// The writes of each resource where an accepted write follows a higher accepted token.
/// A fenced write and the moments it was issued and answered (boot-time ns).
#[derive(Debug, Clone)]
struct TimedWrite {
    process: String,
    resource: String,
    token: u64,
    accepted: bool,
    issued: u64,
    answered: u64,
}

/// The stale writes the resource accepted: a write accepted although a write with a higher
/// token had been *answered* (so had reached the resource) before it was issued. Two writes
/// that overlap in time may reach the resource in either order, and the fence orders them by
/// token only from then on, so they are no violation.
fn stale_accepted(writes: &[TimedWrite]) -> Vec<String> {
    let mut out = Vec::new();
    for b in writes.iter().filter(|w| w.accepted) {
        if let Some(a) = writes.iter().find(|a| {
            a.accepted && a.resource == b.resource && a.token > b.token && a.answered < b.issued
        }) {
            out.push(format!(
                "{}: {} wrote {} issued at {} after {} wrote {} answered at {}",
                b.resource, b.process, b.token, b.issued, a.process, a.token, a.answered
            ));
        }
    }
    out
}

#[test]
fn partition_members_on_redis() {
    let ns = RedisNamespace::new("partition-members");
    let group = ns.prefix().to_owned();
    scenario("redis", ns.url(), &group, None, TTL);
    for start in ["lockwise:{", "lockwise:partition:{", "lockwise:fenced:{"] {
        ns.delete_matching(&format!("{start}{group}"));
    }
}

#[test]
fn partition_members_on_postgres() {
    let db = PgDatabase::postgres("partition_members");
    scenario("postgres", &db.url(), "orders", None, TTL);
}

/// On etcd, the fenced writes go to fenced files (etcd holds no fenced value of its own).
#[cfg(feature = "etcd")]
#[test]
fn partition_members_on_etcd() {
    let fences = tempfile::tempdir().unwrap();
    let group = lockwise_testkit::unique("partition-members");
    let url = format!(
        "{}/{group}/",
        lockwise_testkit::etcd_url().trim_end_matches('/')
    );
    // etcd's leases are whole seconds: a 1 s lock lives on a 2 s lease.
    let lease = Duration::from_secs(lockwise::backend::etcd::lease_seconds(TTL).unsigned_abs());
    scenario("etcd", &url, "orders", Some(fences.path()), lease);
}
