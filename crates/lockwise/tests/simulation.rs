//! R12: deterministic simulation of the real lock client, and of a worker's job lease, against
//! fake servers on virtual time.
//!
//! Each seed builds a current-thread Tokio runtime with a paused clock
//! (`start_paused(true)`: time jumps to the next timer whenever every task waits) and runs,
//! for 16 simulated seconds (4 s TTLs and job leases), then lets what is in flight land:
//!
//! * three real [`Locker`]s, each over its own [`FakeBackend`] (a connection) to one shared
//!   fake lock server with a lease table and a token counter. The clients take the lock, write
//!   to a fake fenced store **only inside [`Guard::run`] and with the guard's token**, then
//!   release or drop the guard. Every call to the server is delayed on the way there and back
//!   (1–50 ms, now and then a partition: a leg held for up to 2 × TTL); the server crashes
//!   at random, forgetting every lease and, half the time, its counter (a restart without
//!   persistence), and refuses calls while it restarts. A write to the store travels with a
//!   delay too, sometimes long (a pause of the writer, or a slow network): it may land after
//!   the writer lost the lock. The server issues tokens like `lua/acquire.lua`:
//!   `max(last + 1, server ms × 1024)`.
//! * two simulated workers over a fake job table (three jobs) that follows
//!   `sql/postgres/queue/*.sql`: claim bumps the attempt and sets the lease, heartbeat and
//!   complete are compare-and-set on (id, attempt, running), a reaper returns expired leases.
//!   A worker runs the handler, heartbeats every third of the lease, stops the handler when a
//!   heartbeat is refused, and cancels it at its local deadline
//!   `claim send + lease − drift(lease)` (moved by each heartbeat that succeeds in time). The
//!   real [`Worker`](lockwise::queue::Worker) needs a database, so this part is a model-level
//!   worker on the same network and clock (the real one's deadline is tested against both
//!   databases in `tests/queue_faults.rs`).
//!
//! **Properties** (checked by ghost bookkeeping, not by the code under test): the store never
//! accepts a write with a token lower than one it accepted, nor one equal to a token it
//! accepted from another grant, nor a write of a grant older than a grant it accepted a write
//! from; two executions of one job never overlap in time; a completion is accepted only from
//! the attempt the row is running.
//!
//! **Mutants**, each of which must be caught within the seed budget: the store accepts any
//! token and `complete` ignores the attempt (`no_fence`), the server counts tokens from 1
//! with no clock floor so a lost counter restarts at 1 (`token_reset`), the worker has no local
//! deadline (`no_local_deadline`).
//!
//! **Determinism.** Everything random comes from splitmix64 streams derived from the seed (one
//! per client connection, worker, store link and the crash schedule), time is Tokio's paused
//! clock, and the trace of a seed is compared with a second run of it. Nothing reads the wall
//! clock except the guard's `CLOCK_BOOTTIME` deadline, which cannot fire: a seed takes
//! milliseconds of real time and the TTL is 4 s. Owner tokens are random but only compared
//! (traces name grants by their order). Retries are linear (the default backoff draws jitter
//! from the thread RNG). Tokio's timer rounds sleeps up to whole milliseconds, so events that
//! fall in the same millisecond run in the scheduler's (deterministic) order; the one thing
//! outside the seed is `tokio::select!`'s random branch order when two branches are ready in
//! the same poll, which [`a_seed_replays_exactly`] checks does not show in the traces.
//!
//! The clients run with the loss check every 2 s and linear retries every 1.5 s (a waiter also
//! wakes when the holder's lease would expire), to keep the number of events per seed, and so
//! the debug-build runtime, small: about 2.5 ms per seed on two cores, 10 000 seeds in ~25 s.
//!
//! **Replay and budget.** `LOCKWISE_SEED=<n>` runs only seed `n` and prints its trace
//! (`LOCKWISE_MUTANT=no_fence|token_reset|no_local_deadline` for a mutant);
//! `LOCKWISE_SEEDS=<count>` sets how many seeds the correct design runs (default 10 000):
//!
//! ```text
//! LOCKWISE_SEED=1234 LOCKWISE_MUTANT=no_fence cargo test -p lockwise --test simulation replay -- --nocapture
//! LOCKWISE_SEEDS=1000000 cargo test --release -p lockwise --test simulation real_design
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lockwise::backend::{Attempt, Backend, ReleaseWatch};
use lockwise::lease::drift;
use lockwise::{Error, FencingToken, LockOptions, Locker, OwnerToken, Retry};
use tokio::time::{Instant, sleep, sleep_until};

/// The lock's TTL.
const TTL: Duration = Duration::from_secs(4);
/// A job's lease.
const LEASE: Duration = Duration::from_secs(4);
/// How long one seed runs clients and workers (virtual time).
const RUN: Duration = Duration::from_secs(16);
/// After `RUN`, time for writes and completions still in flight to land.
const DRAIN: Duration = Duration::from_secs(9);
/// The fake server's clock at the start, in Unix milliseconds.
const EPOCH_MS: u64 = 1_700_000_000_000;
const CLIENTS: usize = 3;
const WORKERS: usize = 2;
const JOBS: usize = 3;
/// Seeds the correct design runs by default, and the budget each mutant is caught within.
const SEEDS: u64 = 10_000;

// ----------------------------------------------------------------------------------------------
// Randomness and the world
// ----------------------------------------------------------------------------------------------

/// splitmix64: a seeded stream, small and exact across platforms.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn micros(&mut self, lo: Duration, hi: Duration) -> Duration {
        Duration::from_micros(self.range(lo.as_micros() as u64, hi.as_micros() as u64))
    }

    /// One leg of a round trip: 1–50 ms, or (2 %) a partition that holds it up to 2 × TTL.
    fn network(&mut self) -> Duration {
        if self.chance(2) {
            self.micros(TTL / 4, TTL * 2)
        } else {
            self.micros(Duration::from_millis(1), Duration::from_millis(50))
        }
    }
}

/// Which parts of the real design are on; each `false` is a mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Design {
    fence: bool,
    token_floor: bool,
    local_deadline: bool,
}

const REAL: Design = Design {
    fence: true,
    token_floor: true,
    local_deadline: true,
};

fn mutant(name: &str) -> Design {
    match name {
        "" | "real" => REAL,
        "no_fence" => Design {
            fence: false,
            ..REAL
        },
        "token_reset" => Design {
            token_floor: false,
            ..REAL
        },
        "no_local_deadline" => Design {
            local_deadline: false,
            ..REAL
        },
        other => panic!("unknown mutant {other:?}"),
    }
}

/// Everything the simulated processes share: the servers, the store, and the ghost records.
struct World {
    design: Design,
    start: Instant,
    server: Mutex<LockServer>,
    store: Mutex<Store>,
    queue: Mutex<Vec<Row>>,
    trace: Mutex<Vec<String>>,
    violations: Mutex<Vec<String>>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("design", &self.design)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl World {
    fn log(&self, event: impl fmt::Display) {
        let at = (Instant::now() - self.start).as_micros();
        lock(&self.trace).push(format!("{at:>10}µs {event}"));
    }

    fn violation(&self, what: String) {
        self.log(format_args!("VIOLATION {what}"));
        lock(&self.violations).push(what);
    }

    fn ms(&self, now: Instant) -> u64 {
        EPOCH_MS + (now - self.start).as_millis() as u64
    }
}

// ----------------------------------------------------------------------------------------------
// The fake lock server and the backend (one connection per client)
// ----------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct LockServer {
    /// The live lease: owner, expiry.
    lease: Option<(OwnerToken, Instant)>,
    /// The last token issued; 0 when none or lost in a crash.
    last: u64,
    /// Refuses calls until then (restarting).
    down_until: Option<Instant>,
    /// Ghost: the order of each grant, by owner.
    grants: HashMap<OwnerToken, u64>,
}

impl LockServer {
    fn live(&self, now: Instant) -> Option<(OwnerToken, Instant)> {
        self.lease.filter(|(_, expiry)| *expiry > now)
    }
}

struct FakeBackend {
    world: Arc<World>,
    client: usize,
    rng: Mutex<Rng>,
}

impl fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FakeBackend(client {})", self.client)
    }
}

impl FakeBackend {
    /// One round trip: the request travels, the server applies `op` atomically (or refuses
    /// while restarting), the answer travels back. Dropped on the way, the request is lost;
    /// dropped on the way back, it was applied and the answer is lost.
    async fn call<T>(&self, op: impl FnOnce(&mut LockServer, Instant) -> T) -> lockwise::Result<T> {
        let (there, back) = {
            let mut rng = lock(&self.rng);
            (rng.network(), rng.network())
        };
        sleep(there).await;
        let now = Instant::now();
        let out = {
            let mut server = lock(&self.world.server);
            if server.down_until.is_some_and(|until| now < until) {
                None
            } else {
                Some(op(&mut server, now))
            }
        };
        sleep(back).await;
        out.ok_or_else(|| Error::Backend {
            backend: "sim",
            message: "connection refused: the server is restarting".into(),
            source: None,
        })
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn try_acquire(
        &self,
        _key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> lockwise::Result<Attempt> {
        let world = self.world.clone();
        let client = self.client;
        self.call(move |s, now| {
            if let Some((_, expiry)) = s.live(now) {
                return Attempt::Held {
                    expires_in: Some(expiry - now),
                };
            }
            let token = if world.design.token_floor {
                (s.last + 1).max(world.ms(now) * 1024)
            } else {
                s.last + 1
            };
            s.last = token;
            s.lease = Some((owner, now + ttl));
            let grant = s.grants.len() as u64 + 1;
            s.grants.insert(owner, grant);
            world.log(format_args!(
                "server grants #{grant} token {token} to client {client}"
            ));
            Attempt::Granted(FencingToken::new(token))
        })
        .await
    }

    async fn extend(&self, _key: &str, owner: OwnerToken, ttl: Duration) -> lockwise::Result<bool> {
        self.call(move |s, now| match s.live(now) {
            Some((o, _)) if o == owner => {
                s.lease = Some((owner, now + ttl));
                true
            }
            _ => false,
        })
        .await
    }

    async fn release(&self, _key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.call(move |s, now| match s.live(now) {
            Some((o, _)) if o == owner => {
                s.lease = None;
                true
            }
            _ => false,
        })
        .await
    }

    async fn holds(&self, _key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.call(move |s, now| s.live(now).is_some_and(|(o, _)| o == owner))
            .await
    }

    async fn watch(&self, _key: &str) -> lockwise::Result<ReleaseWatch> {
        Ok(ReleaseWatch::none())
    }
}

/// Crashes the lock server now and then: every lease forgotten, the counter too half the time.
async fn crasher(world: Arc<World>, mut rng: Rng, end: Instant) {
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
struct Store {
    /// The highest accepted token and the grant that wrote it.
    accepted: Option<(u64, u64)>,
    /// Ghost: the newest grant whose write was accepted.
    newest_writer: u64,
}

/// Sends a write with `token` from grant `owner`; it lands after a delay (sometimes long: the
/// writer paused after its check, or the network is slow) and is fenced then.
fn send_write(world: &Arc<World>, rng: &mut Rng, client: usize, owner: OwnerToken, token: u64) {
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
async fn client(world: Arc<World>, id: usize, seed: u64, end: Instant) {
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
enum JobState {
    Available,
    Running,
    Done,
}

#[derive(Debug, Clone)]
struct Row {
    state: JobState,
    attempt: u32,
    lease_until: Instant,
    /// Ghost: the executions so far, `(attempt, start, end)`; `end` is `None` while running.
    runs: Vec<(u32, Instant, Option<Instant>)>,
}

/// One round trip to the database for a worker, like [`FakeBackend::call`] (the database does
/// not crash: job rows are durable).
async fn db<T>(world: &World, rng: &Mutex<Rng>, op: impl FnOnce(&mut Vec<Row>, Instant) -> T) -> T {
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
fn complete(world: &World, rows: &mut [Row], job: usize, attempt: u32, worker: usize) {
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
async fn reaper(world: Arc<World>, mut rng: Rng, end: Instant) {
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
enum Ended {
    Finished,
    Deadline,
    Refused,
}

/// A worker: claim one job, run its handler under heartbeats and the local deadline, report.
async fn worker(world: Arc<World>, id: usize, seed: u64, end: Instant) {
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
fn record_end(world: &World, job: usize, attempt: u32, start: Instant, stop: Instant) {
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

/// What one seed did.
#[derive(Debug)]
struct Outcome {
    trace: Vec<String>,
    violations: Vec<String>,
}

/// Runs one seed on a fresh paused runtime.
fn simulate(seed: u64, design: Design) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let world = rt.block_on(async {
        let start = Instant::now();
        let world = Arc::new(World {
            design,
            start,
            server: Mutex::default(),
            store: Mutex::default(),
            queue: Mutex::new(vec![
                Row {
                    state: JobState::Available,
                    attempt: 0,
                    lease_until: start,
                    runs: Vec::new(),
                };
                JOBS
            ]),
            trace: Mutex::default(),
            violations: Mutex::default(),
        });
        let end = start + RUN;
        tokio::spawn(crasher(world.clone(), Rng::new(seed, 1), end));
        tokio::spawn(reaper(world.clone(), Rng::new(seed, 2), end));
        for id in 0..CLIENTS {
            tokio::spawn(client(world.clone(), id, seed, end));
        }
        for id in 0..WORKERS {
            tokio::spawn(worker(world.clone(), id, seed, end));
        }
        sleep_until(end + DRAIN).await;
        world
    });
    drop(rt); // stops every task still waiting
    let trace = std::mem::take(&mut *lock(&world.trace));
    let violations = std::mem::take(&mut *lock(&world.violations));
    Outcome { trace, violations }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

fn replay_hint(seed: u64, name: &str) -> String {
    format!(
        "LOCKWISE_SEED={seed} LOCKWISE_MUTANT={name} cargo test -p lockwise --test simulation replay -- --nocapture"
    )
}

/// Runs `seeds` on every core (each seed on its own runtime, so the outcome of a seed does
/// not depend on the threads) and returns what `keep` keeps of each, in seed order.
fn run_seeds<T: Send>(
    seeds: std::ops::Range<u64>,
    design: Design,
    keep: impl Fn(u64, Outcome) -> T + Sync,
) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8)) as u64;
    let mut results: Vec<(u64, T)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                let keep = &keep;
                scope.spawn(move || {
                    seeds
                        .filter(|seed| seed % threads == t)
                        .map(|seed| (seed, keep(seed, simulate(seed, design))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a simulation thread panicked"))
            .collect()
    });
    results.sort_by_key(|(seed, _)| *seed);
    results.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn real_design_has_no_violation() {
    if std::env::var_os("LOCKWISE_SEED").is_some() {
        return; // a replay was asked for: see `replay`
    }
    let seeds = env_u64("LOCKWISE_SEEDS").unwrap_or(SEEDS);
    let started = std::time::Instant::now();
    let results = run_seeds(0..seeds, REAL, |seed, outcome| {
        let grants = outcome
            .trace
            .iter()
            .filter(|e| e.contains("server grants"))
            .count();
        let failure = (!outcome.violations.is_empty()).then(|| {
            format!(
                "seed {seed} violated {:?}\nreplay: {}\n{}",
                outcome.violations,
                replay_hint(seed, "real"),
                outcome.trace.join("\n")
            )
        });
        (grants, outcome.trace.len(), failure)
    });
    let grants: usize = results.iter().map(|r| r.0).sum();
    let events: usize = results.iter().map(|r| r.1).sum();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.2.as_ref()).collect();
    println!(
        "{seeds} seeds, {} violations, {grants} grants, {events} events, in {:.2?}",
        failures.len(),
        started.elapsed()
    );
    if let Some(first) = failures.first() {
        panic!("{} seeds failed; the first: {first}", failures.len());
    }
    assert!(
        grants as u64 > seeds,
        "the clients hardly ever got the lock"
    );
}

/// A mutant is caught within the seed budget, once for each kind of violation in `kinds`,
/// and its first failing seed replays exactly.
fn caught(name: &str, kinds: &[&str]) {
    let started = std::time::Instant::now();
    let design = mutant(name);
    let mut first: Vec<Option<(u64, Outcome)>> = kinds.iter().map(|_| None).collect();
    for seed in 0..SEEDS {
        if first.iter().all(Option::is_some) {
            break;
        }
        let outcome = simulate(seed, design);
        let hits: Vec<bool> = kinds
            .iter()
            .map(|k| outcome.violations.iter().any(|v| v.contains(k)))
            .collect();
        if let Some(i) = (0..kinds.len()).find(|&i| hits[i] && first[i].is_none()) {
            for j in i + 1..kinds.len() {
                if hits[j] && first[j].is_none() {
                    first[j] = Some((seed, simulate(seed, design)));
                }
            }
            first[i] = Some((seed, outcome));
        }
    }
    for (kind, found) in kinds.iter().zip(&first) {
        let Some((seed, outcome)) = found else {
            panic!("mutant {name} not caught ({kind:?}) in {SEEDS} seeds");
        };
        println!(
            "mutant {name}: {kind:?} first at seed {seed}: {:?}\n  replay: {}",
            outcome.violations,
            replay_hint(*seed, name)
        );
        let again = simulate(*seed, design);
        assert_eq!(
            again.trace, outcome.trace,
            "seed {seed} did not replay exactly"
        );
        assert_eq!(again.violations, outcome.violations);
    }
    println!("mutant {name}: all caught in {:.2?}", started.elapsed());
}

#[test]
fn mutant_without_fence_check_is_caught() {
    caught("no_fence", &["below", "late completion"]);
}

#[test]
fn mutant_with_token_reset_to_1_is_caught() {
    caught("token_reset", &["already accepted from grant"]);
}

#[test]
fn mutant_without_local_job_deadline_is_caught() {
    caught("no_local_deadline", &["overlap"]);
}

/// The same seed gives the same trace, event for event, whether it runs alone or among
/// other seeds on other threads (`LOCKWISE_REPLAY_SEEDS`, default 100, sets how many seeds are
/// compared); different seeds differ.
#[test]
fn a_seed_replays_exactly() {
    let seeds = env_u64("LOCKWISE_REPLAY_SEEDS").unwrap_or(100);
    let first = run_seeds(0..seeds, REAL, |_, outcome| outcome.trace);
    for (seed, trace) in (0..seeds).zip(&first) {
        assert!(trace.len() > 10, "seed {seed}: too little happened");
        let again = simulate(seed, REAL);
        assert_eq!(&again.trace, trace, "seed {seed} did not replay exactly");
    }
    assert_ne!(first[0], first[1]);
}

/// `LOCKWISE_SEED=<n> [LOCKWISE_MUTANT=<name>]`: runs that seed and prints its trace; fails
/// when the real design violates a property there. Does nothing without `LOCKWISE_SEED`.
#[test]
fn replay() {
    let Some(seed) = env_u64("LOCKWISE_SEED") else {
        return;
    };
    let name = std::env::var("LOCKWISE_MUTANT").unwrap_or_default();
    let outcome = simulate(seed, mutant(&name));
    println!("{}", outcome.trace.join("\n"));
    println!("violations: {:?}", outcome.violations);
    if mutant(&name) == REAL {
        assert!(outcome.violations.is_empty());
    }
}
