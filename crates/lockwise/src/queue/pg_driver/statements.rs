//! The SQL statements of a queue schema, rendered from `sql/postgres/queue/`.

use sqlx::AssertSqlSafe;

use super::RINGS;
use crate::db::pg_conn::Schema;

/// The SQL of one queue schema, with the schema name (and channel) filled in once.
#[derive(Debug)]
pub(super) struct Statements {
    pub(super) migrations_table: String,
    pub(super) migrate_lock: String,
    pub(super) migration_version: String,
    pub(super) migration_applied: String,
    pub(super) migrations_exist: String,
    pub(super) enqueue: String,
    pub(super) enqueue_many: String,
    pub(super) claim: String,
    pub(super) claim_any: String,
    pub(super) confirm_started: String,
    pub(super) complete: String,
    pub(super) fail: String,
    pub(super) heartbeat: String,
    pub(super) hand_back: String,
    pub(super) reap: String,
    pub(super) rings: String,
    pub(super) truncate_drained: String,
    pub(super) seal_lock: String,
    pub(super) seal_done: String,
    pub(super) prune_lock: String,
    pub(super) stats: String,
    pub(super) queues: String,
    pub(super) worker_seen: String,
    pub(super) worker_gone: String,
    pub(super) workers: String,
    pub(super) done_since: String,
    pub(super) dead: String,
    pub(super) retry: String,
    pub(super) delete_dead: String,
    pub(super) retry_all: String,
    pub(super) run_now: String,
    pub(super) delete_finished: String,
    pub(super) delete_finished_everywhere: String,
    pub(super) retire_history: String,
    pub(super) job: String,
    pub(super) list_waiting: String,
    pub(super) list_state: String,
    pub(super) cancel: String,
    pub(super) cancel_all: String,
    pub(super) retry_cancelled: String,
    pub(super) pause: String,
    pub(super) resume: String,
    pub(super) paused: String,
    pub(super) periodic_ensure: String,
    pub(super) periodic_lock: String,
    pub(super) periodic_advance: String,
}

impl Statements {
    pub(super) fn new(schema: &Schema, channel: &str) -> Self {
        let fill = |template: &str| schema.sql(&template.replace("{channel}", channel)).0;
        macro_rules! sql {
            ($file:literal) => {
                fill(include_str!(concat!("../../../sql/postgres/queue/", $file)))
            };
        }
        Statements {
            migrations_table: sql!("migrations_table.sql"),
            migrate_lock: sql!("migrate_lock.sql"),
            migration_version: sql!("migration_version.sql"),
            migration_applied: sql!("migration_applied.sql"),
            migrations_exist: sql!("migrations_exist.sql"),
            enqueue: sql!("enqueue.sql"),
            enqueue_many: sql!("enqueue_many.sql"),
            claim: sql!("claim_call.sql"),
            claim_any: sql!("claim_any_call.sql"),
            confirm_started: sql!("confirm_call.sql"),
            complete: sql!("complete.sql"),
            fail: sql!("fail.sql"),
            heartbeat: fill(&locking_leases(
                include_str!("../../../sql/postgres/queue/heartbeat.sql"),
                "NO KEY UPDATE",
            )),
            hand_back: fill(&locking_leases(
                include_str!("../../../sql/postgres/queue/hand_back.sql"),
                "UPDATE",
            )),
            reap: sql!("reap.sql"),
            rings: {
                let segment = sql!("rings.sql");
                // The SELECT without the comment above it.
                let body = segment
                    .find("\nSELECT")
                    .map_or(segment.as_str(), |at| &segment[at + 1..]);
                RINGS
                    .iter()
                    .flat_map(|(ring, segments, _)| (0..*segments).map(move |seg| (ring, seg)))
                    .map(|(ring, seg)| {
                        body.replace("{ring}_clock", clock_of(ring))
                            .replace("{ring}", ring)
                            .replace("{seg}", &seg.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join("\nUNION ALL\n")
            },
            truncate_drained: sql!("truncate_drained.sql"),
            seal_lock: sql!("seal_lock.sql"),
            seal_done: sql!("seal_done.sql"),
            prune_lock: sql!("prune_lock.sql"),
            stats: sql!("stats.sql"),
            queues: sql!("queues.sql"),
            worker_seen: sql!("worker_seen.sql"),
            worker_gone: sql!("worker_gone.sql"),
            workers: sql!("workers.sql"),
            done_since: sql!("done_since.sql"),
            dead: sql!("dead.sql"),
            retry: sql!("retry.sql"),
            delete_dead: sql!("delete_dead.sql"),
            retry_all: sql!("retry_all.sql"),
            run_now: sql!("run_now.sql"),
            delete_finished: sql!("delete_finished.sql").replace("{of_queue}", "queue = $1"),
            delete_finished_everywhere: sql!("delete_finished.sql")
                .replace("{of_queue}", "$1::text IS NULL"),
            retire_history: sql!("retire_history.sql"),
            job: format!("{}{}", sql!("job_select.sql"), sql!("job.sql")),
            list_waiting: sql!("list_waiting.sql"),
            list_state: format!("{}{}", sql!("job_select.sql"), sql!("list_state.sql")),
            cancel: sql!("cancel.sql"),
            cancel_all: sql!("cancel_all.sql"),
            retry_cancelled: sql!("retry_cancelled.sql"),
            pause: sql!("pause.sql"),
            resume: sql!("resume.sql"),
            paused: sql!("paused.sql"),
            periodic_ensure: sql!("periodic_ensure.sql"),
            periodic_lock: sql!("periodic_lock.sql"),
            periodic_advance: sql!("periodic_advance.sql"),
        }
    }
}

/// `statement` (heartbeat.sql or hand_back.sql) with its `{locked_leases}`: the leases it
/// names, locked `FOR {mode}` in the one order every statement on several leases uses
/// (locked_leases.sql).
pub(super) fn locking_leases(statement: &str, mode: &str) -> String {
    let locked = without_comments(include_str!(
        "../../../sql/postgres/queue/locked_leases.sql"
    ));
    statement.replace("{locked_leases}", &locked.replace("{mode}", mode))
}

/// The sequence that is the clock of a ring of v4.sql.
pub(super) fn clock_of(ring: &str) -> &'static str {
    if ring == "ready" {
        "ready_ticket"
    } else {
        "claim_ticket"
    }
}

/// `sql` without its comment lines.
pub(super) fn without_comments(sql: &str) -> String {
    sql.lines()
        .filter(|line| !line.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `sqlx` wants to be told that a prepared, schema-filled statement is safe.
pub(super) fn q(sql: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(sql.to_owned())
}
