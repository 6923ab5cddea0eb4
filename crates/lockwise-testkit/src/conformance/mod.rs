//! The conformance suite, exported so that any [`Backend`](lockwise::backend::Backend) can run
//! it (after river's `riverdrivertest.Exercise`): implement [`Harness`] for your backend, then
//! either run every case in one test with [`exercise`], or get one named test per case with
//! [`conformance_tests!`](crate::conformance_tests).
//!
//! ```no_run
//! use async_trait::async_trait;
//! use lockwise::Locker;
//! use lockwise::backend::memory::MemoryBackend;
//! use lockwise_testkit::conformance::{Harness, exercise};
//!
//! /// One store per test; every `locker()` is a new client of it.
//! struct Mine(MemoryBackend);
//!
//! #[async_trait]
//! impl Harness for Mine {
//!     async fn locker(&self) -> Locker {
//!         Locker::new(self.0.clone())
//!     }
//!     async fn delete_lock(&self, key: &str) {
//!         self.0.force_delete(key);
//!     }
//! }
//!
//! #[tokio::test]
//! async fn my_backend_conforms() {
//!     exercise(|| Mine(MemoryBackend::new())).await;
//! }
//! ```
//!
//! The cases use sub-second TTLs and time what they see: run them one at a time (nextest: a
//! test group with `max-threads = 1`).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use lockwise::Locker;

mod cases;
mod held_cases;
mod rwlock_cases;
mod semaphore_cases;

/// How the suite reaches one backend: fresh clients of one store private to a test, and what
/// the backend supports.
#[async_trait]
pub trait Harness: Send + Sync + 'static {
    /// A new client of the harness's store (its own connection, where the backend has
    /// connections). Every call of one harness reaches the same store; no other harness's.
    async fn locker(&self) -> Locker;

    /// Removes the lock on `key` whoever holds it, behind the holder's back: an operator's
    /// `DEL`, a failover that lost the key, the termination of the holder's session.
    async fn delete_lock(&self, key: &str);

    /// How long the server really keeps a lease of `ttl` without renewal (e.g. rounded up to
    /// whole seconds). Default: exactly `ttl`.
    fn server_lease(&self, ttl: Duration) -> Duration {
        ttl
    }

    /// Whether [`Backend::watch`](lockwise::backend::Backend::watch) wakes waiters when a lock
    /// is released or its holder's lease runs out. The cases that need it fail when this is
    /// `false` (a conformance case never skips). Default: `true`.
    fn has_release_events(&self) -> bool {
        true
    }

    /// Whether fencing tokens may skip values: `true` for a backend that keeps tokens above a
    /// clock (Redis: never below the server's Unix ms × 1024, so a lost counter cannot reissue
    /// a token). Cases then check that tokens strictly increase instead of counting them one by
    /// one. Default: `false`.
    fn tokens_may_skip(&self) -> bool {
        false
    }
}

/// A boxed case future.
type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One case of the suite: a name and the test it runs.
#[derive(Clone, Copy)]
pub struct Case {
    name: &'static str,
    run: for<'a> fn(&'a dyn Harness) -> CaseFuture<'a>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Case").field(&self.name).finish()
    }
}

impl Case {
    /// Its name, also the name of its test in [`conformance_tests!`](crate::conformance_tests).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs it on `harness`; panics when the backend does not conform.
    pub async fn run(&self, harness: &dyn Harness) {
        (self.run)(harness).await;
    }
}

/// Every case, once: the one list behind [`CASES`] and [`conformance_tests!`](crate::conformance_tests).
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_case {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            two_holders_exclude_each_other,
            waiting_times_out_with_a_typed_error,
            stale_release_leaves_the_new_holders_lock,
            stale_extend_fails,
            fencing_tokens_strictly_increase_across_holders_and_reconnects,
            expiry_is_honoured,
            a_waiter_wakes_on_release_not_by_polling,
            still_held_answers_for_each_lease,
            lost_signal_fires_when_the_lock_is_deleted,
            lost_signal_fires_when_the_lease_expires,
            renewal_keeps_a_lock_through_work_five_times_its_ttl,
            a_dropped_acquire_leaves_no_lock_behind,
            a_dropped_guard_releases_its_lock,
            bad_input_is_refused_before_anything_is_stored,
            keys_differing_in_case_accent_or_space_are_distinct_locks,
            ttls_from_the_minimum_to_the_maximum_work,
            a_grant_that_arrives_too_late_is_discarded,
            a_hung_renewal_cannot_hide_a_loss,
            a_hung_renewal_does_not_hold_up_the_next,
            many_waiters_each_get_the_lock_in_turn,
            a_waiter_returns_when_the_holders_ttl_runs_out,
            held_locks_are_listed_with_their_tokens_holders_and_waiters,
            a_broken_lock_is_lost_by_its_holder_and_granted_above_its_token,
            a_semaphore_grants_at_most_its_permits,
            a_semaphore_waiter_gets_a_freed_permit_and_times_out_typed,
            a_frozen_permit_holder_is_fenced,
            readers_share_and_a_writer_excludes_them,
            a_waiting_writer_keeps_new_readers_out,
        }
    };
}

/// Expands the case list as the table of cases or as one test per case.
#[doc(hidden)]
#[macro_export]
macro_rules! __expand_cases {
    ([table] $($case:ident,)*) => {
        &[$($crate::conformance::Case::new(stringify!($case), |h| {
            Box::pin($crate::conformance::cases::$case(h))
        }),)*]
    };
    ([tests $harness:expr] $($case:ident,)*) => {$(
        #[tokio::test]
        async fn $case() {
            $crate::conformance::run_case(stringify!($case), $harness).await
        }
    )*};
}

impl Case {
    const fn new(name: &'static str, run: for<'a> fn(&'a dyn Harness) -> CaseFuture<'a>) -> Self {
        Case { name, run }
    }
}

/// The cases of the suite, in the order [`exercise`] runs them.
pub static CASES: &[Case] = __for_each_case!(table);

/// Runs the case called `name` on `harness` (then drops the harness, which cleans up).
///
/// # Panics
///
/// When the backend does not conform, or no case has that name.
pub async fn run_case(name: &str, harness: impl Harness) {
    let Some(case) = CASES.iter().find(|c| c.name == name) else {
        panic!("no conformance case is called {name:?}");
    };
    case.run(&harness).await;
}

/// Runs every case, each on a fresh harness from `make` and in a task of its own, and panics
/// at the end naming every case that failed (each failure's own message is printed as it
/// happens).
pub async fn exercise<H, F>(make: F)
where
    H: Harness,
    F: Fn() -> H,
{
    let mut failed = Vec::new();
    for case in CASES {
        let harness = make();
        let task = tokio::spawn(async move { case.run(&harness).await });
        if task.await.is_err() {
            failed.push(case.name);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} conformance cases failed: {failed:?}",
        failed.len(),
        CASES.len()
    );
}

/// One `#[tokio::test]` per case, each running [`run_case`] on a fresh harness from
/// `$harness`, so that a failure is reported under the case's name. Invoke it inside a module
/// named after the backend; the crate needs `tokio` (with `macros` and `rt`) as a dependency.
///
/// ```ignore
/// mod memory {
///     lockwise_testkit::conformance_tests!(lockwise_testkit::harness::MemoryHarness::new());
/// }
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::__for_each_case!(tests $harness);
    };
}
