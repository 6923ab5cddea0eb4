//! `lockwise queue` across real processes. Every test works in a schema of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lockwise_testkit::stamps;
use lockwise_testkit::{MysqlDatabase, PgBouncer, PgSchema, PoolMode, closed_port};

const BIN: &str = env!("CARGO_BIN_EXE_lockwise");

/// Where a test's queue lives: its own PostgreSQL schema (directly or through a private
/// PgBouncer in transaction pooling mode) or MariaDB database.
enum Db {
    Pg(PgSchema),
    My(MysqlDatabase),
    Bounced(PgBouncer, PgSchema),
}

impl Db {
    fn pg(label: &str) -> Self {
        Db::Pg(PgSchema::new(label))
    }

    fn my(label: &str) -> Self {
        Db::My(MysqlDatabase::mysql(label))
    }

    fn bounced(label: &str) -> Self {
        Db::Bounced(
            PgBouncer::start(PoolMode::Transaction),
            PgSchema::new(label),
        )
    }

    fn url(&self) -> String {
        match self {
            Db::Pg(s) => s.url().to_owned(),
            Db::My(d) => d.url(),
            Db::Bounced(b, s) => b.url_of(s.url()),
        }
    }

    /// The port the URL names.
    fn port(&self) -> u16 {
        url::Url::parse(&self.url())
            .unwrap()
            .port()
            .expect("a port in the URL")
    }

    fn schema(&self) -> &str {
        match self {
            Db::Pg(s) | Db::Bounced(_, s) => s.name(),
            Db::My(_) => "lockwise",
        }
    }
}

fn queue(db: &Db, sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(["queue", sub, "--url", &db.url(), "--schema", db.schema()])
        .args(args)
        .env_remove("LOCKWISE_URL")
        .env_remove("LOCKWISE_SCHEMA");
    c
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn stats(schema: &Db) -> serde_json::Value {
    let out = ok(queue(schema, "stats", &["--queue", "q", "--json"])
        .output()
        .unwrap());
    serde_json::from_str(out.trim()).unwrap()
}

fn wait_for(what: &str, limit: Duration, mut pred: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !pred() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

mod admin;
mod enqueue;
mod errors;
mod handlers;
mod lifecycle;
mod schedule;
mod work;
#[allow(unused_imports)]
use admin::*;
#[allow(unused_imports)]
use enqueue::*;
#[allow(unused_imports)]
use errors::*;
#[allow(unused_imports)]
use handlers::*;
#[allow(unused_imports)]
use lifecycle::*;
#[allow(unused_imports)]
use schedule::*;
#[allow(unused_imports)]
use work::*;

macro_rules! on_databases {
    ($($case:ident),*) => {
        mod postgres { use super::*; $(#[test] fn $case() { super::$case(Db::pg("qcli")) })* }
        mod mariadb { use super::*; $(#[test] fn $case() { super::$case(Db::my("qcli")) })* }
        mod pgbouncer { use super::*; $(#[test] fn $case() { super::$case(Db::bounced("qcli")) })* }
    };
}

on_databases!(
    racing_schedulers_one_killed_enqueue_one_job_per_period,
    pause_and_resume_a_queue_under_a_worker,
    cancel_all_cancels_a_queue_s_waiting_jobs,
    enqueue_prints_the_id_the_handler_sees,
    stats_without_a_queue_lists_every_queue,
    workers_lists_a_running_worker_until_it_stops,
    work_cut_off_from_its_database_gives_up_after_the_documented_bound,
    a_created_store_and_an_empty_queue_are_pointed_out,
    a_cancelled_running_job_is_logged_and_counted_as_cancelled,
    a_failing_handler_stores_its_stderr_and_dies_after_max_attempts,
    a_killed_worker_s_job_is_rescued_and_done_once,
    a_frozen_worker_s_handler_dies_by_the_job_s_deadline,
    a_handler_that_cannot_run_stops_work_before_any_claim,
    read_and_admin_commands_do_not_create_the_store,
    a_large_payload_comes_from_stdin_or_a_file,
    a_handler_error_with_nul_and_invalid_utf8_is_stored,
    a_handler_reads_a_line_and_enqueues_a_follow_up,
    both_databases_refuse_the_same_bad_jobs_with_64,
    messages_say_what_happened,
    enqueue_json_says_whether_the_key_was_a_duplicate,
    jobs_are_shown_listed_cancelled_and_pruned,
    a_key_can_be_unique_for_a_window,
    text_output_escapes_control_characters,
    work_once_drains_the_queue_and_exits_0,
    work_max_jobs_runs_that_many_and_exits_0,
    work_logs_one_line_per_job,
    poll_interval_bounds_how_soon_an_idle_worker_sees_a_job,
    a_timed_out_handler_gets_sigterm_and_its_attempt_fails,
    a_handler_that_ignores_sigterm_is_killed_after_kill_after,
    at_the_end_of_the_grace_a_handler_gets_sigterm_and_its_job_is_handed_back,
    one_worker_works_on_several_queues,
    enqueue_jsonl_adds_every_line_or_none,
    enqueue_jsonl_lines_name_their_own_queues,
    a_closed_stdout_is_exit_74_not_a_panic,
    work_retention_prunes_the_history_while_it_runs
);
