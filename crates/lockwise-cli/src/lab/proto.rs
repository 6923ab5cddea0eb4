//! What the lab and its actor processes say to each other: one JSON object per line.
//!
//! The lab writes [`Op`]s to an actor's stdin; the actor answers on stdout with the events it
//! lived (stamped with its own pid and `CLOCK_BOOTTIME`), then `done` or `failed`.

use lockwise_bench::history::Event;
use serde::{Deserialize, Serialize};

/// One step for an actor to take.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Op {
    /// Acquire through `Locker` (owner token, fencing token, optional renewal); wait up to
    /// `wait_ms` (0: try once).
    Acquire {
        ttl_ms: u64,
        renew: bool,
        wait_ms: u64,
    },
    /// Acquire with one bare backend call: a lease with no watchdog (check-then-delete).
    RawAcquire { ttl_ms: u64 },
    /// Ask the backend whether the grant still holds the lock; a "no" makes the next
    /// `Enter` abort.
    Check,
    /// Begin the protected work.
    Enter,
    /// End it.
    Exit,
    /// Write `value` to the fenced resource with the grant's token.
    Write { value: String },
    /// Read the fenced resource.
    Read,
    /// Release the grant.
    Release { how: How },
    /// At `at` (boot-time ns), release the raw lease the way `how` says, with `delay_us`
    /// between the check and the delete.
    RaceRelease { at: u64, delay_us: u64, how: Race },
    /// From `from` to `until` (boot-time ns), try to acquire as fast as possible.
    Grab { from: u64, until: u64 },
    /// Enqueue `jobs` jobs.
    Enqueue { jobs: u32, max_attempts: u16 },
    /// Work the queue until it is empty.
    Work {
        batch: u32,
        lease_ms: u64,
        job_ms: u64,
    },
}

/// How a lock is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum How {
    /// Compare-and-delete with the owner token (the library's release).
    Token,
    /// A plain delete of whatever lock is there: the wrong way.
    Del,
}

/// The two releases raced against expiry in check-then-delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Race {
    /// `GET`, compare, then `DEL`: two commands.
    TwoCommands,
    /// The atomic compare-and-delete script.
    Script,
}

/// One line of an actor's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Line {
    /// Something the actor did.
    Event(Event),
    /// The last op is finished.
    Done,
    /// The last op failed.
    Failed(String),
}
