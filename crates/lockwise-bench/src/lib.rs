//! The tooling of lockwise, out of the product: the measurements behind `lockwise bench`,
//! and the database side and history checker of `lockwise lab`. Nothing here is part of
//! the library's API; it uses the public API of [`lockwise`] and opens its own database
//! connections.
//!
//! # Benches
//!
//! Measuring lockwise against its floor, side by side in one run. A figure alone means little
//! on a shared, noisy machine; a ratio to the raw protocol measured in the same run,
//! alternating sides round by round, means a lot. Each [`Entry`] therefore holds lockwise's
//! figure, its floor's, and their ratio, as the median and range of at least five rounds.
//!
//! - [`lock`]: sequential and concurrent lock cycles against the [`Floor`] (the fewest round
//!   trips a safe cycle takes, issued raw), and a contended handoff between waiters.
//! - [`throughput`], [`sustained`] and [`scaling`]: the queue against the naive SKIP LOCKED
//!   loop, and the lesson's exercise 3.
//! - [`enqueue`]: one producer's bulk enqueue against the same rows inserted raw.
//! - [`ui`]: the dashboard's pages on a large queue against the reads they make.
//! - [`describe`]: the server's version and durability settings, printed with the figures.
//!
//! ```no_run
//! # async fn demo() -> lockwise_bench::Result<()> {
//! use std::time::Duration;
//! use lockwise_bench::{Plan, lock};
//! let entry = lock::sequential("redis://127.0.0.1:6379", Plan::new(5, Duration::from_secs(1)), &|| {}).await?;
//! println!("{} cycles/s, {:.2}× the floor", entry.lockwise.median, entry.ratio.unwrap().median);
//! # Ok(()) }
//! ```
//!
//! # The lab
//!
//! - [`history`]: the checker of recorded histories behind `lockwise lab`'s verdicts;
//! - [`lab`]: the lab's scratch PostgreSQL schema, the fenced data its actors write and the
//!   effects its queue workers record.
//!
//! The SQL is in the crate's `sql/` directory, the Lua in `lua/`.

mod conn;
mod dead_tuples;
pub mod enqueue;
mod error;
mod floor;
pub mod history;
pub mod lab;
mod load;
pub mod lock;
pub mod scaling;
mod server;
mod stats;
pub mod sustained;
pub mod sustained_mysql;
mod throughput;
pub mod ui;

use std::time::Duration;

use serde::Serialize;

pub use error::{Error, Result};
pub use floor::Floor;
pub use server::{ServerInfo, describe};
pub use stats::{Spread, percentile_us};
pub use throughput::throughput;

/// How much a bench measures: `rounds` rounds of `round` per side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// Rounds per side (at least 1; 5 or more for a figure worth reporting).
    pub rounds: usize,
    /// How long one side runs in one round.
    pub round: Duration,
}

impl Plan {
    /// `rounds` rounds (at least 1) of `round` per side.
    pub fn new(rounds: usize, round: Duration) -> Self {
        Plan {
            rounds: rounds.max(1),
            round,
        }
    }
}

/// One figure of a bench, lockwise beside its floor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Entry {
    /// `sequential`, `concurrent` or `handoff`.
    pub bench: String,
    /// `redis`, `postgres` or `mysql`.
    pub backend: String,
    /// What the figures count (`cycles/s`, `acquisitions/s`).
    pub unit: String,
    /// Rounds measured per side.
    pub rounds: usize,
    /// Lockwise's figure over the rounds.
    pub lockwise: Spread,
    /// The floor's figure over the rounds (`None`: the bench has no floor).
    pub floor: Option<Spread>,
    /// Lockwise over the floor, round by round (higher is better; 1.0 is the floor).
    pub ratio: Option<Spread>,
    /// Tasks (or waiters) at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<usize>,
    /// Lockwise's acquire latency (`sequential`) or handoff latency (`handoff`), p50, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    /// The same, p99, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// The floor's acquire round trip, p50, µs (`sequential`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_p50_us: Option<f64>,
    /// The floor's acquire round trip, p99, µs (`sequential`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_p99_us: Option<f64>,
    /// The most acquisitions of one waiter over the fewest (`handoff`; 1.0 is perfectly
    /// fair).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// Acquisitions of each waiter (`handoff`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_waiter: Option<Vec<u64>>,
    /// `lock-guarded`, `skip-locked` or `partitioned` (`scaling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Workers at once (`scaling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Jobs done per second, the median round (`scaling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_per_s: Option<f64>,
    /// The most workers seen inside a job at once (`scaling`): truly in parallel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<usize>,
    /// Round trips to Redis and PostgreSQL per job done, counted (`scaling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trips_per_job: Option<f64>,
    /// Jobs per claim (`scaling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_per_claim: Option<f64>,
    /// WAL bytes written per job (`scaling`, SKIP LOCKED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_bytes_per_job: Option<f64>,
    /// Dead row versions left per job (`scaling`, SKIP LOCKED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_tuples_per_job: Option<f64>,
    /// Jobs enqueued before the drain (`throughput`), or the depth held (`sustained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u64>,
    /// The most dead row versions of any table of the store seen while lockwise ran
    /// (`throughput`, `sustained`; sampled every 200 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_tuples_peak: Option<i64>,
    /// Dead row versions left when lockwise's last run ended (`throughput`, `sustained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_tuples_end: Option<i64>,
    /// The most dead row versions of each table of lockwise's store while it ran, the
    /// highest first; a ring's segments under their ring, `ready_*` (`sustained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_tuples_by_table: Option<Vec<(String, i64)>>,
    /// How long finished jobs were kept, pruned once a second, ms (`sustained` with
    /// `--retention`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<f64>,
    /// The longest InnoDB history list (undo not yet purged, server-wide) seen while lockwise
    /// ran (`sustained` on MariaDB/MySQL; sampled every 500 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_list_peak: Option<i64>,
    /// The same while the floor ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_history_list_peak: Option<i64>,
    /// The most rows lockwise's table held (`sustained` on MariaDB/MySQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_peak: Option<i64>,
    /// The most rows the floor's table held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_rows_peak: Option<i64>,
    /// The most dead row versions of any table seen under the floor (`sustained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_dead_tuples_peak: Option<i64>,
    /// How long each job ran, ms (`sustained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_ms: Option<f64>,
    /// The most jobs/s the handlers alone reach, with no queue at all: as many tasks running
    /// the jobs back to back, in the same process and run (`sustained`). No queue can go
    /// faster than this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<f64>,
    /// Jobs enqueued per round and side (`enqueue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u64>,
    /// Jobs per call or statement (`enqueue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
}

impl Entry {
    /// An entry with lockwise's and the floor's per-round figures, and their ratio round by
    /// round.
    fn compare(
        bench: &str,
        backend: &str,
        unit: &str,
        ours: &[f64],
        floor: &[f64],
    ) -> Result<Self> {
        let ratios: Vec<f64> = ours
            .iter()
            .zip(floor)
            .map(|(o, f)| if *f > 0.0 { o / f } else { f64::NAN })
            .collect();
        let mut entry = Entry::measure(bench, backend, unit, ours)?;
        entry.floor = Spread::of(floor);
        entry.ratio = Spread::of(&ratios);
        Ok(entry)
    }

    /// An entry of times (unit `ms`, lower is better) beside the floor's, per round; the
    /// ratio is the floor's time over lockwise's (1.0 is the floor, as for rates). `None`
    /// when nothing was measured.
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockwise_bench::Entry;
    /// let ms = Duration::from_millis;
    /// let e = Entry::durations("run", "redis", &[ms(4), ms(6)], &[ms(1), ms(2)]).unwrap();
    /// assert_eq!((e.lockwise.median, e.floor.unwrap().median), (5.0, 1.5));
    /// ```
    pub fn durations(
        bench: &str,
        backend: &str,
        ours: &[Duration],
        floor: &[Duration],
    ) -> Option<Self> {
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        let ours_ms: Vec<f64> = ours.iter().map(ms).collect();
        let floor_ms: Vec<f64> = floor.iter().map(ms).collect();
        let ratios: Vec<f64> = ours_ms
            .iter()
            .zip(&floor_ms)
            .map(|(o, f)| if *o > 0.0 { f / o } else { f64::NAN })
            .collect();
        let mut entry = Entry::measure(bench, backend, "ms", &ours_ms).ok()?;
        entry.floor = Spread::of(&floor_ms);
        entry.ratio = Spread::of(&ratios);
        Some(entry)
    }

    /// An entry with lockwise's figures only.
    fn measure(bench: &str, backend: &str, unit: &str, ours: &[f64]) -> Result<Self> {
        Ok(Entry {
            bench: bench.to_owned(),
            backend: backend.to_owned(),
            unit: unit.to_owned(),
            rounds: ours.len(),
            lockwise: Spread::of(ours)
                .ok_or_else(|| Error::config(format!("the {bench} bench measured nothing")))?,
            floor: None,
            ratio: None,
            tasks: None,
            p50_us: None,
            p99_us: None,
            floor_p50_us: None,
            floor_p99_us: None,
            fairness: None,
            per_waiter: None,
            strategy: None,
            workers: None,
            jobs_per_s: None,
            max_parallel: None,
            round_trips_per_job: None,
            jobs_per_claim: None,
            wal_bytes_per_job: None,
            dead_tuples_per_job: None,
            backlog: None,
            dead_tuples_peak: None,
            dead_tuples_end: None,
            dead_tuples_by_table: None,
            retention_ms: None,
            history_list_peak: None,
            floor_history_list_peak: None,
            rows_peak: None,
            floor_rows_peak: None,
            floor_dead_tuples_peak: None,
            job_ms: None,
            ceiling: None,
            jobs: None,
            batch: None,
        })
    }
}
