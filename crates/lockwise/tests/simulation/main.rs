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

mod actors;
mod runs;
mod world;
#[allow(unused_imports)]
use actors::*;
#[allow(unused_imports)]
use runs::*;
#[allow(unused_imports)]
use world::*;
