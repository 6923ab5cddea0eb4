//! The scenarios, one file each, and the list that registers them.
//!
//! A scenario is a [`Scenario`] description in a file of its own here (`pub(super) static SCENARIO`)
//! plus one name in the `registry!` list below, in the lesson's order.

pub(super) use super::scenario::{Backends, Scenario};

/// The servers `scaling` measures on, whatever the lab's lock backend: the queue's
/// PostgreSQL and a Redis (see [`scaling::redis_url`]).
pub(super) fn scaling_servers(backend: &super::backend::LabBackend, queue_url: &str) -> String {
    format!(
        "PostgreSQL {} (the queue) and Redis {} (the lock-guarded side's lock)",
        lockwise::url::redact_url(queue_url),
        lockwise::url::redact_url(&scaling::redis_url(backend))
    )
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
