//! The lock benches: a sequential cycle and concurrent cycles on distinct keys, each against
//! the [`Floor`] in the same run, and a contended handoff between waiters of one key.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::stats::percentile_us;
use crate::{Entry, Floor, Plan};
use lockwise::url::BackendUrl;
use lockwise::{LockOptions, Locker};

/// The backend's short name for reports.
fn backend_name(url: &str) -> Result<&'static str> {
    Ok(match BackendUrl::parse(url)? {
        BackendUrl::Memory => "memory",
        BackendUrl::File(_) => "file",
        BackendUrl::Redis(_) => "redis",
        BackendUrl::Postgres(_) => "postgres",
        BackendUrl::Mysql(_) => "mysql",
        #[cfg(feature = "etcd")]
        BackendUrl::Etcd(_) => "etcd",
        // A backend of a newer lockwise, which this bench does not know yet.
        other => {
            return Err(Error::config(format!(
                "the bench knows no backend {other:?}"
            )));
        }
    })
}

/// Keys no other bench or user shares.
fn key_prefix() -> String {
    format!(
        "lockwise-bench-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

fn options() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(30))
}

/// Cycles and acquire latencies of one side in one round.
#[derive(Default)]
struct Round {
    cycles: u64,
    acquires: Vec<Duration>,
}

/// Lockwise's cycles on `key` until `until`: try_acquire, then release.
async fn lockwise_cycles(locker: &Locker, key: &str, until: Instant) -> Result<Round> {
    let opts = options();
    let mut round = Round::default();
    while Instant::now() < until {
        let asked = Instant::now();
        let guard = locker
            .try_acquire(key, &opts)
            .await?
            .ok_or_else(|| held_elsewhere(key))?;
        round.acquires.push(asked.elapsed());
        guard.release().await?;
        round.cycles += 1;
    }
    Ok(round)
}

/// The floor's cycles on `key` until `until`.
async fn floor_cycles(floor: &mut Floor, key: &str, until: Instant) -> Result<Round> {
    let mut round = Round::default();
    while Instant::now() < until {
        let asked = Instant::now();
        if !floor.try_acquire(key).await? {
            return Err(held_elsewhere(key));
        }
        round.acquires.push(asked.elapsed());
        floor.release(key).await?;
        round.cycles += 1;
    }
    Ok(round)
}

fn held_elsewhere(key: &str) -> Error {
    Error::config(format!(
        "bench key {key:?} is held by someone else: is another bench running?"
    ))
}

fn rate(cycles: u64, took: Duration) -> f64 {
    cycles as f64 / took.as_secs_f64().max(1e-9)
}

/// Sequential cycles — try_acquire + release on one key over one connection — against the
/// floor's round trips on one raw connection; `plan.rounds` rounds of `plan.round` each side,
/// alternating which side goes first. `tick` is called after each round of each side.
///
/// The entry's unit is cycles/s; `p50_us`/`p99_us` are lockwise's acquire latencies and
/// `floor_p50_us`/`floor_p99_us` the floor's acquire round trips.
pub async fn sequential(url: &str, plan: Plan, tick: &(dyn Fn() + Sync)) -> Result<Entry> {
    let backend = backend_name(url)?;
    let locker = Locker::connect(url).await?;
    let mut floor = Floor::connect(url).await?;
    let key = format!("{}-seq", key_prefix());
    // Warm up both (connections, prepared statements, script cache).
    let warm = Instant::now() + plan.round / 4;
    lockwise_cycles(&locker, &key, warm).await?;
    floor_cycles(&mut floor, &key, warm + plan.round / 4).await?;
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    let (mut our_acquires, mut raw_acquires) = (Vec::new(), Vec::new());
    for round in 0..plan.rounds {
        for side in sides(round) {
            let started = Instant::now();
            let until = started + plan.round;
            if side == Side::Lockwise {
                let r = lockwise_cycles(&locker, &key, until).await?;
                ours.push(rate(r.cycles, started.elapsed()));
                our_acquires.extend(r.acquires);
            } else {
                let r = floor_cycles(&mut floor, &key, until).await?;
                raw.push(rate(r.cycles, started.elapsed()));
                raw_acquires.extend(r.acquires);
            }
            tick();
        }
    }
    let mut entry = Entry::compare("sequential", backend, "cycles/s", &ours, &raw)?;
    entry.p50_us = percentile_us(&our_acquires, 0.5);
    entry.p99_us = percentile_us(&our_acquires, 0.99);
    entry.floor_p50_us = percentile_us(&raw_acquires, 0.5);
    entry.floor_p99_us = percentile_us(&raw_acquires, 0.99);
    entry.tasks = Some(1);
    Ok(entry)
}

/// `tasks` tasks cycling at once, each on a key of its own: lockwise through one
/// [`Locker`] (as an application would share it), the floor through one multiplexed
/// connection on Redis and one connection per task on the databases. Unit: cycles/s in all.
pub async fn concurrent(
    url: &str,
    tasks: usize,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let backend = backend_name(url)?;
    let tasks = tasks.max(1);
    let locker = Locker::connect(url).await?;
    let first = Floor::connect(url).await?;
    let mut floors = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        floors.push(match first.share() {
            Some(shared) => shared,
            None => Floor::connect(url).await?,
        });
    }
    let prefix = key_prefix();
    let keys: Vec<String> = (0..tasks).map(|i| format!("{prefix}-c{i}")).collect();
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    // A warm-up round of each side first, not counted: lockwise opens its session connections
    // on the databases on demand, the floor's are open already.
    for round in 0..=plan.rounds {
        let warm_up = round == 0;
        for side in sides(round) {
            let started = Instant::now();
            let until = started + plan.round;
            let mut cycles = 0;
            if side == Side::Lockwise {
                let mut set = tokio::task::JoinSet::new();
                for key in keys.clone() {
                    let locker = locker.clone();
                    set.spawn(async move { lockwise_cycles(&locker, &key, until).await });
                }
                while let Some(joined) = set.join_next().await {
                    cycles += joined.map_err(join_error)??.cycles;
                }
                if !warm_up {
                    ours.push(rate(cycles, started.elapsed()));
                }
            } else {
                let mut set = tokio::task::JoinSet::new();
                for (key, mut floor) in keys.iter().cloned().zip(floors.drain(..)) {
                    // Each task gives its connection back with its result.
                    set.spawn(async move {
                        let round = floor_cycles(&mut floor, &key, until).await;
                        round.map(|r| (r, floor))
                    });
                }
                while let Some(joined) = set.join_next().await {
                    let (r, floor) = joined.map_err(join_error)??;
                    cycles += r.cycles;
                    floors.push(floor);
                }
                if !warm_up {
                    raw.push(rate(cycles, started.elapsed()));
                }
            }
            if !warm_up {
                tick();
            }
        }
    }
    let mut entry = Entry::compare("concurrent", backend, "cycles/s", &ours, &raw)?;
    entry.tasks = Some(tasks);
    Ok(entry)
}

fn join_error(e: tokio::task::JoinError) -> Error {
    Error::config(format!("a bench task failed: {e}"))
}

/// One event of a handoff run, in the order they happened.
#[derive(Debug, Clone, Copy)]
enum Event {
    Acquired { waiter: usize, at: Instant },
    Released { waiter: usize, at: Instant },
}

/// `waiters` tasks contend for one key, each holding it `hold` when it has it, for
/// `plan.rounds` rounds of `plan.round`. Reports acquisitions/s (lockwise only: there is no
/// raw floor for waiting), the p50/p99 from a release to the acquisition by a *different*
/// waiter, and the fairness: the most acquisitions of one waiter over the fewest.
pub async fn handoff(
    url: &str,
    waiters: usize,
    hold: Duration,
    plan: Plan,
    tick: &(dyn Fn() + Sync),
) -> Result<Entry> {
    let backend = backend_name(url)?;
    let waiters = waiters.max(2);
    let locker = Locker::connect(url).await?;
    let key = format!("{}-handoff", key_prefix());
    let mut rates = Vec::new();
    let mut handoffs: Vec<Duration> = Vec::new();
    let mut per_waiter = vec![0u64; waiters];
    for _ in 0..plan.rounds {
        let events: Arc<Mutex<Vec<Event>>> = Arc::default();
        let started = Instant::now();
        let until = started + plan.round;
        let mut set = tokio::task::JoinSet::new();
        for waiter in 0..waiters {
            let (locker, key, events) = (locker.clone(), key.clone(), events.clone());
            set.spawn(async move {
                let opts = options().wait(plan.round + Duration::from_secs(10));
                let mut count = 0u64;
                while Instant::now() < until {
                    let guard = locker.acquire(&key, &opts).await?;
                    let at = Instant::now();
                    push(&events, Event::Acquired { waiter, at });
                    count += 1;
                    tokio::time::sleep(hold).await;
                    // Recorded before the release is sent: the next holder cannot be granted
                    // before it.
                    push(
                        &events,
                        Event::Released {
                            waiter,
                            at: Instant::now(),
                        },
                    );
                    guard.release().await?;
                }
                Ok::<_, Error>((waiter, count))
            });
        }
        let mut total = 0;
        while let Some(joined) = set.join_next().await {
            let (waiter, count) = joined.map_err(join_error)??;
            per_waiter[waiter] += count;
            total += count;
        }
        rates.push(rate(total, started.elapsed()));
        let events = std::mem::take(&mut *events.lock().unwrap_or_else(PoisonError::into_inner));
        handoffs.extend(handoff_times(&events));
        tick();
    }
    let mut entry = Entry::measure("handoff", backend, "acquisitions/s", &rates)?;
    entry.tasks = Some(waiters);
    entry.p50_us = percentile_us(&handoffs, 0.5);
    entry.p99_us = percentile_us(&handoffs, 0.99);
    let most = per_waiter.iter().copied().max().unwrap_or(0) as f64;
    let fewest = per_waiter.iter().copied().min().unwrap_or(0).max(1) as f64;
    entry.fairness = Some(most / fewest);
    entry.per_waiter = Some(per_waiter);
    Ok(entry)
}

fn push(events: &Mutex<Vec<Event>>, event: Event) {
    events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(event);
}

/// From each release to the next acquisition when that acquisition is another waiter's.
fn handoff_times(events: &[Event]) -> Vec<Duration> {
    let mut last_release: Option<(usize, Instant)> = None;
    let mut times = Vec::new();
    for event in events {
        match *event {
            Event::Released { waiter, at } => last_release = Some((waiter, at)),
            Event::Acquired { waiter, at } => {
                if let Some((releaser, released)) = last_release.take()
                    && releaser != waiter
                {
                    times.push(at.saturating_duration_since(released));
                }
            }
        }
    }
    times
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Lockwise,
    Floor,
}

/// Which side goes first in round `round`: alternating, so that neither always runs on a
/// warmer (or more tired) machine.
fn sides(round: usize) -> [Side; 2] {
    if round.is_multiple_of(2) {
        [Side::Lockwise, Side::Floor]
    } else {
        [Side::Floor, Side::Lockwise]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_counts_only_acquisitions_by_another_waiter() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let events = [
            Event::Acquired {
                waiter: 0,
                at: at(0),
            },
            Event::Released {
                waiter: 0,
                at: at(1),
            },
            Event::Acquired {
                waiter: 0,
                at: at(2),
            }, // the releaser barged back in
            Event::Released {
                waiter: 0,
                at: at(3),
            },
            Event::Acquired {
                waiter: 1,
                at: at(7),
            },
        ];
        assert_eq!(handoff_times(&events), vec![Duration::from_millis(4)]);
    }
}
