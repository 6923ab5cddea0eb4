//! Key partitioning, a member frozen during a rebalance: A and B split the keys; C joins and
//! B freezes (SIGSTOP) before it can acknowledge the new generation. Nobody starts B's keys
//! while B may still work on them: the rebalance waits until B's lease runs out, then a newer
//! generation gives B's keys to A and C, who write with it. Thawed, B finds its membership
//! lost and makes the writes it had in flight: the generation fence rejects every one.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockwise_bench::history::{Event, What};
use lockwise::lease::boottime_nanos;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{Backends, Scenario};
use crate::lab::backend::LabBackend;
use crate::lab::children;
use crate::lab::engine::Lab;
use crate::lab::error::{LabError, LabResult};
use crate::lab::fenced_file::FencedFile;
use crate::lab::judge::expect;
use crate::lab::report::{Report, Variant};
use crate::partition_actor::fenced_file;

pub(super) static SCENARIO: Scenario = Scenario {
    name: "partition",
    title: "key partitioning: a member frozen during a rebalance, fenced by the generation",
    exercise: None,
    about: "partitioned keys, a member frozen mid-rebalance: its late writes are fenced",
    backends: Backends::All,
    on_demand: false,
    run: |lab, report| Box::pin(run(lab, report)),
};

const KEYS: u32 = 12;
const TTL: Duration = Duration::from_secs(1);

/// The latest assignment each member printed: (generation, settled, members).
type Latest = Arc<Mutex<HashMap<String, (u64, bool, usize)>>>;

struct Member {
    child: Child,
    pid: i32,
}

impl Member {
    fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid), sig);
    }
}

async fn run(lab: &Lab, report: &mut Report) -> LabResult<()> {
    if matches!(lab.backend, LabBackend::Mysql | LabBackend::Etcd(_)) {
        report.not_run = Some(format!(
            "not run on {}: the lab's partition members write through a fence on file, Redis or \
             PostgreSQL",
            lab.backend.name()
        ));
        return Ok(());
    }
    let group = format!("lab-partition-{}", lab.run_id);
    for key in group_keys(&group) {
        lab.remember_key(key);
    }
    let latest: Latest = Arc::default();
    // Every member is killed when its `Child` is dropped (kill_on_drop), whatever happens.
    let result = frozen_during_rebalance(lab, &group, &latest).await;
    // The group's roster stays on the server otherwise (its keys are wiped with the run's).
    if let Ok(group) = lockwise::partition::Group::connect(&lab.url, &group).await {
        let _ = group.remove().await;
    }
    report.variants.push(result?);
    Ok(())
}

/// The lease keys of the group's members: their memberships, the generation, the work keys.
fn group_keys(group: &str) -> Vec<String> {
    ["A", "B", "C"]
        .iter()
        .map(|m| format!("{group}/member/{m}"))
        .chain([format!("{group}/generation")])
        .chain((0..KEYS).map(|k| format!("{group}/key/{k}")))
        .collect()
}

fn spawn(lab: &Lab, group: &str, name: &str, latest: &Latest) -> LabResult<Member> {
    let mut cmd = Command::new(&lab.exe);
    // The URL goes through the environment: a password on a command line shows in `ps`.
    cmd.args(["partition-actor", "--group", group, "--id", name])
        .env("LOCKWISE_PARTITION_ACTOR_URL", &lab.url)
        .args(["--keys", &KEYS.to_string(), "--ttl", "1s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if let Some(schema) = lab.pg_schema() {
        cmd.args(["--schema", &schema]);
    }
    crate::child::stop_with_parent(&mut cmd, Signal::SIGKILL);
    let mut child = cmd
        .spawn()
        .map_err(|e| LabError(format!("cannot start member {name}: {e}")))?;
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| LabError(format!("member {name} exited at once")))?;
    children::register(pid);
    lab.started(name, pid.unsigned_abs());
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| LabError("no stdout".into()))?;
    let (log, latest, me) = (lab.log(), latest.clone(), name.to_owned());
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(json) = line.strip_prefix("E ") {
                if let Ok(event) = serde_json::from_str::<Event>(json)
                    && let Ok(mut log) = log.lock()
                {
                    log.push(event);
                }
            } else if let Some(json) = line.strip_prefix("A ")
                && let Ok(a) = serde_json::from_str::<serde_json::Value>(json)
            {
                let generation = a["generation"].as_u64().unwrap_or(0);
                let settled = a["settled"].as_bool().unwrap_or(false);
                let lost = a["lost"].as_bool().unwrap_or(false);
                let members = a["members"].as_u64().unwrap_or(0) as usize;
                let owned = a["owned"].as_array().map_or(0, Vec::len);
                if let Ok(mut latest) = latest.lock() {
                    latest.insert(me.clone(), (generation, settled && !lost, members));
                }
                let text = if lost {
                    "membership lost: owns nothing".to_owned()
                } else {
                    format!(
                        "generation {generation} of {members} member(s){}: owns {owned} key(s)",
                        if settled { ", settled" } else { ", waiting for every live member to acknowledge" }
                    )
                };
                let event = Event::new(
                    me.clone(),
                    pid.unsigned_abs(),
                    boottime_nanos().unwrap_or(0),
                    What::Note { text },
                );
                if let Ok(mut log) = log.lock() {
                    log.push(event);
                }
            }
        }
    });
    Ok(Member {
        child,
        pid,
    })
}

/// Waits until every one of `names` reports one settled generation of `n` members.
async fn settled(latest: &Latest, names: &[&str], n: usize) -> LabResult<u64> {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<(u64, bool, usize)>> = {
            let latest = latest.lock().map_err(|_| LabError("poisoned".into()))?;
            names.iter().map(|m| latest.get(*m).copied()).collect()
        };
        let first = seen[0].map(|s| s.0);
        if seen
            .iter()
            .all(|s| s.is_some_and(|(g, settled, m)| settled && m == n && Some(g) == first))
        {
            return Ok(first.unwrap_or(0));
        }
        if start.elapsed() > Duration::from_secs(20) {
            return Err(LabError(format!(
                "no settled generation of {n} members among {names:?}: {seen:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn frozen_during_rebalance(lab: &Lab, group: &str, latest: &Latest) -> LabResult<Variant> {
    let a = spawn(lab, group, "A", latest)?;
    let mut b = spawn(lab, group, "B", latest)?;
    let g1 = settled(latest, &["A", "B"], 2).await?;
    lab.note(format!(
        "A and B split {KEYS} keys in generation {g1}; each wrote its keys with {g1} as the fencing token"
    ));
    let c = spawn(lab, group, "C", latest)?;
    // Freeze B as soon as the generation with C exists: B cannot acknowledge it.
    let start = Instant::now();
    while latest
        .lock()
        .map(|l| l.get("A").is_none_or(|s| s.2 < 3))
        .unwrap_or(false)
    {
        if start.elapsed() > Duration::from_secs(10) {
            return Err(LabError("C's generation did not come".into()));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // On files, never inside one of its flocks (its roster, membership, generation, keys or
    // fenced writes): there a frozen B would stall A and C too, as no lease on a server can.
    let mut flocks = group_keys(group);
    flocks.push(format!("{group}/roster"));
    let fenced: Vec<FencedFile> = match &lab.backend {
        LabBackend::File(dir) => (0..KEYS)
            .map(|k| fenced_file(dir, &format!("{group}/key/{k}")))
            .collect(),
        _ => Vec::new(),
    };
    lab.stop_outside(b.pid, || {
        lab.in_operation(&flocks) || fenced.iter().any(FencedFile::in_write)
    });
    lab.note(format!(
        "C joined: a new generation; B frozen with SIGSTOP before acknowledging it (its {} lease renewal freezes too)",
        humantime::format_duration(TTL)
    ));
    let frozen_at = Instant::now();
    let g2 = settled(latest, &["A", "C"], 2).await?;
    lab.note(format!(
        "B's lease ran out: generation {g2} gives B's keys to A and C after {} frozen",
        humantime::format_duration(Duration::from_millis(frozen_at.elapsed().as_millis() as u64))
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    lab.note("B resumed with SIGCONT: it makes the writes it had in flight, with its old generation");
    b.signal(Signal::SIGCONT);
    let exited = tokio::time::timeout(Duration::from_secs(10), b.child.wait()).await;
    children::forget(b.pid);
    let b_code = exited.ok().and_then(Result::ok).and_then(|s| s.code());
    for m in [&a, &c] {
        m.signal(Signal::SIGKILL);
    }
    for mut m in [a, c] {
        let _ = m.child.wait().await;
        children::forget(m.pid);
    }
    Ok(lab
        .conclude(
            Vec::new(),
            "a member frozen during a rebalance, its late writes fenced by the generation",
            "B's keys move only after its lease; its late writes are rejected by the generation fence",
            move |events, v| {
                let late_rejected = events
                    .iter()
                    .filter(|e| {
                        e.process == "B" && matches!(e.what, What::Write { accepted: false, token, .. } if token < g2)
                    })
                    .count();
                let others_overlap = v
                    .overlaps
                    .iter()
                    .any(|o| !o.processes.iter().any(|p| p == "B"));
                let outcome = expect(
                    &format!(
                        "generation {g1} → {g2}: B's {late_rejected} late write(s) rejected, 0 stale writes \
                         accepted; A and C never worked on one key together"
                    ),
                    &[
                        (late_rejected >= 1, "B made late writes and the fence rejected them"),
                        (v.stale_writes_accepted == 0, "no stale write accepted"),
                        (!others_overlap, "no two live members on one key at once"),
                        (b_code == Some(70), "B stopped with its membership lost (exit 70)"),
                        (g2 > g1, "the generation increased"),
                    ],
                );
                let remarks = vec![format!(
                    "a frozen member cannot stop its own work: while B was frozen the checker sees it \
                     'inside' its keys next to their new owners ({} overlap(s), all B's); only the fence \
                     keeps its late writes out",
                    v.overlaps.len()
                )];
                (outcome, remarks)
            },
        )
        .await)
}
