//! The actors: crashes, clients writing through fences, the queue store, reaper and workers.

use super::*;

/// Crashes the lock server now and then: every lease forgotten, the counter too half the time.
pub(super) async fn crasher(world: Arc<World>, mut rng: Rng, end: Instant) {
    loop {
        sleep(rng.micros(Duration::from_secs(2), Duration::from_secs(12))).await;
        if Instant::now() >= end {
            return;
        }
        let loses_counter = rng.chance(50);
        let down = rng.micros(Duration::from_millis(100), Duration::from_millis(1500));
        let mut s = lock(&world.server);
        s.lease = None;
        if loses_counter {
            s.last = 0;
        }
        s.down_until = Some(Instant::now() + down);
        drop(s);
        world.log(format_args!(
            "server crashes ({}), down for {down:?}",
            if loses_counter {
                "counter lost"
            } else {
                "counter kept"
            }
        ));
    }
}

// ----------------------------------------------------------------------------------------------
// The fenced store
// ----------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
pub(super) struct Store {
    /// The highest accepted token and the grant that wrote it.
    pub(super) accepted: Option<(u64, u64)>,
    /// Ghost: the newest grant whose write was accepted.
    pub(super) newest_writer: u64,
}

/// Sends a write with `token` from grant `owner`; it lands after a delay (sometimes long: the
/// writer paused after its check, or the network is slow) and is fenced then.
pub(super) fn send_write(
    world: &Arc<World>,
    rng: &mut Rng,
    client: usize,
    owner: OwnerToken,
    token: u64,
) {
    let delay = if rng.chance(10) {
        rng.micros(TTL / 2, TTL * 2)
    } else {
        rng.micros(Duration::from_millis(1), Duration::from_millis(20))
    };
    let world = world.clone();
    tokio::spawn(async move {
        sleep(delay).await;
        let grant = lock(&world.server).grants[&owner];
        let mut store = lock(&world.store);
        let passes = match store.accepted {
            None => true,
            Some((highest, _)) => !world.design.fence || token >= highest,
        };
        if !passes {
            drop(store);
            world.log(format_args!(
                "store rejects token {token} (grant #{grant}, client {client})"
            ));
            return;
        }
        let bad = match store.accepted {
            Some((highest, _)) if token < highest => {
                Some(format!("store accepted token {token} below {highest}"))
            }
            Some((highest, by)) if token == highest && by != grant => Some(format!(
                "store accepted token {token} from grant #{grant}, already accepted from grant #{by}"
            )),
            _ if grant < store.newest_writer => Some(format!(
                "store accepted a stale write of grant #{grant} after one of grant #{}",
                store.newest_writer
            )),
            _ => None,
        };
        store.accepted = Some((token, grant));
        store.newest_writer = store.newest_writer.max(grant);
        drop(store);
        world.log(format_args!(
            "store accepts token {token} (grant #{grant}, client {client})"
        ));
        if let Some(bad) = bad {
            world.violation(bad);
        }
    });
}

/// A client: take the lock, write a few times inside `run` with the guard's token, release or
/// drop the guard, rest, again.
pub(super) async fn client(world: Arc<World>, id: usize, seed: u64, end: Instant) {
    let mut rng = Rng::new(seed, 100 + id as u64);
    let locker = Locker::new(FakeBackend {
        world: world.clone(),
        client: id,
        rng: Mutex::new(Rng::new(seed, 200 + id as u64)),
    })
    .loss_check(Some(Duration::from_secs(2)));
    let opts = LockOptions::ttl(TTL)
        .retry(Retry::linear(Duration::from_millis(1500)))
        .call_timeout(Duration::from_secs(2));
    while Instant::now() < end {
        let guard = match locker.acquire("k", &opts).await {
            Ok(guard) => guard,
            Err(_) => continue, // transient: the server is restarting
        };
        let (token, owner) = (guard.token().get(), guard.owner());
        world.log(format_args!("client {id} holds token {token}"));
        let writes = rng.range(1, 5);
        let pauses: Vec<Duration> = (0..writes)
            .map(|_| rng.micros(Duration::ZERO, TTL / 2))
            .collect();
        let mut link = Rng::new(rng.next(), 300 + id as u64);
        let world2 = world.clone();
        let outcome = guard
            .run(async move {
                for pause in pauses {
                    sleep(pause).await;
                    send_write(&world2, &mut link, id, owner, token);
                }
            })
            .await;
        if outcome.is_err() {
            world.log(format_args!("client {id} lost token {token}"));
        }
        if rng.chance(50) {
            let _ = guard.release().await;
        } else {
            drop(guard);
        }
        sleep(rng.micros(Duration::ZERO, Duration::from_secs(1))).await;
    }
}

// ----------------------------------------------------------------------------------------------
// The job table and the workers
// ----------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobState {
    Available,
    Running,
    Done,
}

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) state: JobState,
    pub(super) attempt: u32,
    pub(super) lease_until: Instant,
    /// Ghost: the executions so far, `(attempt, start, end)`; `end` is `None` while running.
    pub(super) runs: Vec<(u32, Instant, Option<Instant>)>,
}

/// One round trip to the database for a worker, like [`FakeBackend::call`] (the database does
/// not crash: job rows are durable).
pub(super) async fn db<T>(
    world: &World,
    rng: &Mutex<Rng>,
    op: impl FnOnce(&mut Vec<Row>, Instant) -> T,
) -> T {
    let (there, back) = {
        let mut rng = lock(rng);
        (rng.network(), rng.network())
    };
    sleep(there).await;
    let out = op(&mut lock(&world.queue), Instant::now());
    sleep(back).await;
    out
}

/// `complete.sql`: compare-and-set on (id, attempt, running); the mutant ignores the attempt.
pub(super) fn complete(world: &World, rows: &mut [Row], job: usize, attempt: u32, worker: usize) {
    let row = &mut rows[job];
    let matches = !world.design.fence || row.attempt == attempt;
    if row.state == JobState::Running && matches {
        row.state = JobState::Done;
        world.log(format_args!(
            "db completes job {job} attempt {attempt} (worker {worker})"
        ));
        if row.attempt != attempt {
            world.violation(format!(
                "late completion of job {job} attempt {attempt} accepted while attempt {} runs",
                row.attempt
            ));
        }
    } else {
        world.log(format_args!(
            "db refuses completion of job {job} attempt {attempt} (worker {worker})"
        ));
    }
}

/// Rescues expired leases every half lease (`reap.sql`).
pub(super) async fn reaper(world: Arc<World>, mut rng: Rng, end: Instant) {
    sleep(rng.micros(Duration::ZERO, LEASE / 2)).await;
    while Instant::now() < end + DRAIN {
        let now = Instant::now();
        for (job, row) in lock(&world.queue).iter_mut().enumerate() {
            if row.state == JobState::Running && row.lease_until < now {
                row.state = JobState::Available;
                world.log(format_args!(
                    "reaper rescues job {job} attempt {}",
                    row.attempt
                ));
            }
        }
        sleep(LEASE / 2).await;
    }
}

/// How a handler's execution ended.
#[derive(Debug)]
pub(super) enum Ended {
    Finished,
    Deadline,
    Refused,
}

/// A worker: claim one job, run its handler under heartbeats and the local deadline, report.
pub(super) async fn worker(world: Arc<World>, id: usize, seed: u64, end: Instant) {
    let mut rng = Rng::new(seed, 400 + id as u64);
    let net = Mutex::new(Rng::new(seed, 500 + id as u64));
    let margin = drift(LEASE);
    while Instant::now() < end {
        let sent = Instant::now();
        let claimed = db(&world, &net, |rows, now| {
            let job = rows.iter().position(|r| r.state == JobState::Available)?;
            let row = &mut rows[job];
            row.state = JobState::Running;
            row.attempt += 1;
            row.lease_until = now + LEASE;
            Some((job, row.attempt))
        })
        .await;
        let Some((job, attempt)) = claimed else {
            sleep(Duration::from_secs(1)).await;
            continue;
        };
        let deadline = Mutex::new(sent + LEASE - margin);
        if world.design.local_deadline && Instant::now() >= *lock(&deadline) {
            world.log(format_args!(
                "worker {id} drops job {job} attempt {attempt}: claimed too late"
            ));
            continue;
        }
        let start = Instant::now();
        lock(&world.queue)[job].runs.push((attempt, start, None));
        world.log(format_args!(
            "worker {id} starts job {job} attempt {attempt}"
        ));
        let work = rng.micros(Duration::ZERO, LEASE * 3);
        let handler = sleep(work);
        let heartbeats = async {
            loop {
                sleep(LEASE / 3).await;
                let sent = Instant::now();
                let owned = db(&world, &net, |rows, now| {
                    let row = &mut rows[job];
                    let owned = row.state == JobState::Running && row.attempt == attempt;
                    if owned {
                        row.lease_until = now + LEASE;
                    }
                    owned
                })
                .await;
                if !owned {
                    return;
                }
                let mut d = lock(&deadline);
                if Instant::now() < *d {
                    *d = (*d).max(sent + LEASE - margin);
                }
            }
        };
        let local_deadline = async {
            loop {
                let d = *lock(&deadline);
                if Instant::now() >= d {
                    return;
                }
                sleep_until(d).await;
            }
        };
        let ended = tokio::select! {
            biased;
            _ = local_deadline, if world.design.local_deadline => Ended::Deadline,
            _ = heartbeats => Ended::Refused,
            _ = handler => Ended::Finished,
        };
        let stop = Instant::now();
        record_end(&world, job, attempt, start, stop);
        world.log(format_args!(
            "worker {id} ends job {job} attempt {attempt}: {ended:?}"
        ));
        if let Ended::Finished = ended {
            // Acknowledged with a later round trip; it may land after the lease ran out.
            let world = world.clone();
            let delay = if rng.chance(10) {
                rng.micros(LEASE / 2, LEASE * 2)
            } else {
                rng.micros(Duration::from_millis(1), Duration::from_millis(50))
            };
            tokio::spawn(async move {
                sleep(delay).await;
                complete(&world, &mut lock(&world.queue), job, attempt, id);
            });
        }
    }
}

/// Closes an execution and checks it against the other executions of the job.
pub(super) fn record_end(world: &World, job: usize, attempt: u32, start: Instant, stop: Instant) {
    let mut rows = lock(&world.queue);
    let runs = &mut rows[job].runs;
    for run in runs.iter_mut() {
        if run.0 == attempt {
            run.2 = Some(stop);
        }
    }
    let overlap = runs
        .iter()
        .find(|(a, s, e)| *a != attempt && *s < stop && e.is_none_or(|e| start < e));
    if let Some(&(other, _, _)) = overlap {
        drop(rows);
        world.violation(format!(
            "executions of job {job} overlap: attempts {other} and {attempt}"
        ));
    }
}

// ----------------------------------------------------------------------------------------------
// Running seeds
// ----------------------------------------------------------------------------------------------
