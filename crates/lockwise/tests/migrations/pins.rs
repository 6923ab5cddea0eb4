//! Every migration file pinned by its digest, numbered without gaps.

use super::*;

/// No migration file changed since databases may have applied it, none is missing, and each
/// one there is pinned; the versions run from 1 with no gap.
#[test]
pub(super) fn no_migration_file_ever_changes() {
    let mut on_disk = Vec::new();
    for folder in ["postgres/queue", "mysql/queue"] {
        let files = migration_files(folder);
        let numbers: Vec<u32> = files.iter().map(|(n, _)| *n).collect();
        let expected: Vec<u32> = (1..=u32::try_from(files.len()).unwrap()).collect();
        assert_eq!(numbers, expected, "the migrations of {folder}");
        on_disk.extend(files.into_iter().map(|(_, path)| path));
    }
    let pinned: BTreeSet<&str> = PINNED.iter().map(|(path, _)| *path).collect();
    let found: BTreeSet<&str> = on_disk.iter().map(String::as_str).collect();
    assert_eq!(
        found, pinned,
        "a migration file is missing, or a new one is not pinned in PINNED yet"
    );
    for (path, pinned) in PINNED {
        let text = std::fs::read_to_string(sql_dir().join(path)).unwrap();
        let digest = hex::encode(Sha256::digest(text.replace("\r\n", "\n").as_bytes()));
        assert_eq!(
            &digest, pinned,
            "{path} changed: a migration is history (databases ran it as it was); put the \
             change in a new migration"
        );
    }
}

/// When a job of the first version was due, or its lease ran out.
#[derive(Clone, Copy)]
pub(super) enum When {
    Past,
    Future,
}

/// A job as the first version of the store held it, and what it is after the migrations.
pub(super) struct OldJob {
    pub(super) name: &'static str,
    /// The first version's state.
    pub(super) state: &'static str,
    pub(super) priority: i16,
    pub(super) run_at: When,
    pub(super) attempt: i32,
    pub(super) key: Option<&'static str>,
    pub(super) lease_until: Option<When>,
    pub(super) worker: Option<&'static str>,
    pub(super) last_error: Option<&'static str>,
    pub(super) finished: bool,
    /// Its state once migrated.
    pub(super) now: JobState,
}

pub(super) const OLD_JOBS: &[OldJob] = &[
    OldJob {
        name: "ready",
        state: "available",
        priority: 0,
        run_at: When::Past,
        attempt: 0,
        key: None,
        lease_until: None,
        worker: None,
        last_error: None,
        finished: false,
        now: JobState::Ready,
    },
    OldJob {
        name: "keyed",
        state: "available",
        priority: 1,
        run_at: When::Past,
        attempt: 0,
        key: Some("k1"),
        lease_until: None,
        worker: None,
        last_error: None,
        finished: false,
        now: JobState::Ready,
    },
    OldJob {
        name: "scheduled",
        state: "available",
        priority: 0,
        run_at: When::Future,
        attempt: 0,
        key: None,
        lease_until: None,
        worker: None,
        last_error: None,
        finished: false,
        now: JobState::Scheduled,
    },
    OldJob {
        name: "retrying",
        state: "available",
        priority: 0,
        run_at: When::Future,
        attempt: 2,
        key: None,
        lease_until: None,
        worker: Some("old"),
        last_error: Some("boom"),
        finished: false,
        now: JobState::Scheduled,
    },
    OldJob {
        name: "live",
        state: "running",
        priority: 0,
        run_at: When::Past,
        attempt: 1,
        key: None,
        lease_until: Some(When::Future),
        worker: Some("old"),
        last_error: None,
        finished: false,
        now: JobState::Running,
    },
    OldJob {
        name: "expired",
        state: "running",
        priority: 0,
        run_at: When::Past,
        attempt: 1,
        key: None,
        lease_until: Some(When::Past),
        worker: Some("old"),
        last_error: None,
        finished: false,
        now: JobState::Running,
    },
    OldJob {
        name: "done",
        state: "done",
        priority: 0,
        run_at: When::Past,
        attempt: 1,
        key: None,
        lease_until: None,
        worker: Some("old"),
        last_error: None,
        finished: true,
        now: JobState::Done,
    },
    OldJob {
        name: "dead",
        state: "dead",
        priority: 0,
        run_at: When::Past,
        attempt: 5,
        key: None,
        lease_until: None,
        worker: Some("old"),
        last_error: Some("gave up"),
        finished: true,
        now: JobState::Dead,
    },
];

/// The columns [`insert_old_jobs`] fills, in the first version of both stores.
pub(super) const OLD_COLUMNS: &str = "queue, state, priority, run_at, payload, attempt, max_attempts, \
                           idempotency_key, lease_until, worker, last_error, finished_at";
