//! Distributed locks done right, and the lock-free tools that usually beat them.
//!
//! A distributed lock gives mutual exclusion *most of the time*, never always: a holder that
//! pauses (GC, swapping, a suspended VM) past its TTL still believes it holds the lock while
//! someone else does. So lockwise gives every grant
//!
//! - a random **owner token**: release and extend are compare-and-delete /
//!   compare-and-expire, so a stale holder can never remove its successor's lock;
//! - a **fencing token** that strictly increases per key: hand it to the resource you write,
//!   and let the resource reject older tokens — that is what makes the lock *safe*;
//! - a **local deadline** (`sent + ttl − drift`, see [`lease`]) and a **lost signal** that
//!   fires when renewal fails or the deadline passes, cancelling work run through
//!   [`Guard::run`].
//!
//! Use a lock for efficiency (avoid duplicate work); for correctness rely on a fencing token
//! checked by the resource or a unique constraint.
//!
//! | problem | use |
//! |---|---|
//! | many workers draining a queue | a `SKIP LOCKED` queue, or key partitioning |
//! | a periodic job that should run in one place | a lock (efficiency) or leader election, plus a unique constraint on (job, period) |
//! | never create a duplicate record | a unique constraint |
//! | serial writes to an external resource | a lock *with* a fencing token that the resource checks |
//!
//! # Backends
//!
//! | URL | backend | reach |
//! |---|---|---|
//! | `memory:` | [`backend::memory`] | one process (tests, time under control) |
//! | `file:///dir` | [`backend::file`] | processes on one machine, no server |
//! | `redis://host[:port][/db]`, `rediss://…` | [`backend::redis`] | processes anywhere |
//! | `postgres://user[:password]@host[:port]/db`, `postgresql://…` | [`backend::postgres`] (session-scoped advisory locks) | processes anywhere |
//! | `mysql://user[:password]@host[:port]/db`, `mariadb://…` | [`backend::mysql`] (`GET_LOCK`) | processes anywhere |
//!
//! Every backend passes one conformance suite (`lockwise-testkit`'s `conformance` module); a
//! backend of your own implements the small [`backend::Backend`] trait and can run it too.
//!
//! ```
//! # #[tokio::main] async fn main() -> lockwise::Result<()> {
//! use std::time::Duration;
//! use lockwise::{LockOptions, Locker};
//!
//! let dir = std::env::temp_dir().join(format!("lockwise-doc-{}", std::process::id()));
//! let locker = Locker::connect(&format!("file://{}", dir.display())).await?;
//! let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(5));
//! let guard = locker.acquire("nightly-report", &opts).await?;
//! println!("token {}", guard.token());
//! guard.release().await?;
//! # std::fs::remove_dir_all(dir).ok(); Ok(()) }
//! ```
//!
//! # Modules
//!
//! - the lease core: [`Locker`], [`Guard`], [`LockOptions`] and [`Retry`], [`lease`] (owner
//!   and fencing tokens, the local deadline), [`Error`];
//! - [`backend`]: the small trait and one file per server;
//! - built on [`Locker`]: [`semaphore`] (at most N holders, a fencing token per permit),
//!   [`rwlock`] (many readers or one writer),
//!   [`election`] (leader election), [`partition`] (each worker its own
//!   keys, with live membership) and [`singleton`] (a job once per period, with [`postgres`]);
//! - [`postgres`]: tools for the caller's own transaction (fenced writes, `run_once`,
//!   transaction-scoped locks); [`queue`]: a job queue on PostgreSQL or MariaDB;
//! - [`url`]: backend URLs and password redaction.
//!
//! The tooling lives in a crate of its own, `lockwise-bench`: the measurements behind
//! `lockwise bench` and the history checker behind `lockwise lab`.

pub mod backend;
mod db;
pub mod doctor;
pub mod election;
mod error;
mod gate;
mod guard;
pub mod lease;
mod lease_clock;
mod locker;
mod loss_check;
pub mod metrics;
mod options;
pub mod partition;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub mod queue;
mod renewals;
pub mod rwlock;
pub mod semaphore;
#[cfg(feature = "postgres")]
pub mod singleton;
pub mod url;

pub use election::{Election, Role};
pub use error::{Error, Result};
pub use guard::Guard;
pub use lease::{FencingToken, MAX_KEY_LEN, MAX_TTL, MIN_TTL, OwnerToken};
pub use locker::Locker;
pub use options::{LockOptions, Retry};
pub use rwlock::{ReadGuard, RwLock};
pub use semaphore::{Permit, Semaphore};
#[cfg(feature = "postgres")]
pub use singleton::Singleton;
