//! The scenarios, one file each, and the list that registers them.
//!
//! A scenario is a [`Scenario`] description in its own file (`pub(super) static SCENARIO`)
//! plus one name in the `registry!` list below, in the lesson's order.

use std::future::Future;
use std::pin::Pin;

use super::engine::Lab;
use super::error::LabResult;
use super::report::Report;

/// What a scenario is and how to run it.
#[derive(Debug)]
pub(super) struct Scenario {
    /// Its name on the command line and in the JSON (`expiry`).
    pub(super) name: &'static str,
    /// What it shows, for its banner.
    pub(super) title: &'static str,
    /// Its exercise in the lesson, when it is one.
    pub(super) exercise: Option<u8>,
    /// One line for `lockwise lab --help`.
    pub(super) about: &'static str,
    /// The lock backends on which it can make its point.
    pub(super) backends: Backends,
    /// Runs only when named: a long run for the reliability catalogue, not part of the tour
    /// that `lockwise lab` gives without a scenario.
    pub(super) on_demand: bool,
    /// Runs it: adds its variants to the report (or says why it did not run).
    pub(super) run: for<'a> fn(&'a Lab, &'a mut Report) -> Running<'a>,
}

/// A scenario on its way (a boxed future, so that scenarios fit in one list).
pub(super) type Running<'a> = Pin<Box<dyn Future<Output = LabResult<()>> + 'a>>;

/// The lock backends on which a scenario can make its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Backends {
    /// Every one.
    All,
    /// Those whose locks any process can delete (file, Redis); a session's lock (PostgreSQL,
    /// MariaDB) can only be released by its own session.
    Leases,
}

/// The servers `scaling` measures on, whatever the lab's lock backend: the queue's
/// PostgreSQL and a Redis (see [`scaling::redis_url`]).
pub(super) fn scaling_servers(backend: &super::backend::LabBackend, queue_url: &str) -> String {
    format!(
        "PostgreSQL {} (the queue) and Redis {} (the lock-guarded side's lock)",
        lockwise::url::redact_url(queue_url),
        lockwise::url::redact_url(&scaling::redis_url(backend))
    )
}

impl Scenario {
    /// The banner line of its report.
    pub(super) fn banner(&self) -> String {
        match self.exercise {
            Some(n) => format!("{}: {} (lesson exercise {n})", self.name, self.title),
            None => format!("{}: {}", self.name, self.title),
        }
    }
}

/// Declares each scenario's module and lists its `SCENARIO` in [`ALL`], in the given order.
macro_rules! registry {
    ($($module:ident),+ $(,)?) => {
        $(mod $module;)+

        /// Every scenario, in the lesson's order.
        pub(super) static ALL: &[&Scenario] = &[$(&$module::SCENARIO),+];
    };
}

registry![
    expiry,
    unsafe_release,
    check_then_delete,
    fencing,
    pauses,
    partition,
    queue_crash,
    scaling
];
