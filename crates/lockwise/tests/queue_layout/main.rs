//! The queue's PostgreSQL storage layout (docs/design/queue-layout-v4.md): a version-3 store
//! with jobs in every state migrates to the latest version with each job carried over,
//! sustained load keeps the dead row versions of every queue table bounded without any
//! VACUUM, the statements of a batch touch only their jobs' lease segment, and a drained
//! segment's truncation never queues behind the claims.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobContext, JobId, JobState, Queue, Worker};
use lockwise_testkit::PgSchema;
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// One job of the version-3 store: its name (also its payload), the columns it is inserted
/// with, and what the new layout must report.
struct OldJob {
    name: &'static str,
    /// `state, attempt, max_attempts, run_at, started, lease_until, worker, finished_at,
    /// idempotency_key, released_key, last_error` as SQL expressions.
    columns: &'static str,
    state: JobState,
    attempt: i32,
}

const OLD_JOBS: &[OldJob] = &[
    OldJob {
        name: "ready",
        columns: "'available', 0, 5, now() - interval '1 minute', true, NULL, NULL, NULL, \
                  NULL, NULL, NULL",
        state: JobState::Ready,
        attempt: 0,
    },
    OldJob {
        name: "delayed",
        columns: "'available', 0, 5, now() + interval '1 hour', true, NULL, NULL, NULL, \
                  NULL, NULL, NULL",
        state: JobState::Scheduled,
        attempt: 0,
    },
    OldJob {
        name: "backoff",
        columns: "'available', 2, 5, now() + interval '1 hour', true, NULL, 'old', NULL, \
                  NULL, NULL, 'boom'",
        state: JobState::Scheduled,
        attempt: 2,
    },
    OldJob {
        name: "live",
        columns: "'running', 1, 5, now() - interval '1 minute', true, \
                  now() + interval '30 seconds', 'old', NULL, NULL, NULL, NULL",
        state: JobState::Running,
        attempt: 1,
    },
    OldJob {
        name: "unconfirmed",
        columns: "'running', 1, 5, now() - interval '1 minute', false, \
                  now() - interval '1 minute', 'old', NULL, NULL, NULL, NULL",
        state: JobState::Running,
        attempt: 1,
    },
    OldJob {
        name: "expired",
        columns: "'running', 2, 5, now() - interval '1 minute', true, \
                  now() - interval '1 minute', 'old', NULL, NULL, NULL, 'boom'",
        state: JobState::Running,
        attempt: 2,
    },
    OldJob {
        name: "done",
        columns: "'done', 1, 5, now() - interval '1 hour', true, NULL, 'old', \
                  now() - interval '1 minute', NULL, NULL, NULL",
        state: JobState::Done,
        attempt: 1,
    },
    OldJob {
        name: "cancelled",
        columns: "'cancelled', 0, 5, now() - interval '1 hour', true, NULL, NULL, \
                  now() - interval '1 minute', NULL, NULL, NULL",
        state: JobState::Cancelled,
        attempt: 0,
    },
    OldJob {
        name: "dead",
        columns: "'dead', 5, 5, now() - interval '1 hour', true, NULL, 'old', \
                  now() - interval '1 minute', NULL, NULL, 'gave up'",
        state: JobState::Dead,
        attempt: 5,
    },
    OldJob {
        name: "keyed",
        columns: "'available', 0, 5, now() - interval '1 minute', true, NULL, NULL, NULL, \
                  'k1', NULL, NULL",
        state: JobState::Ready,
        attempt: 0,
    },
    OldJob {
        name: "released",
        columns: "'done', 1, 5, now() - interval '2 hours', true, NULL, 'old', \
                  now() - interval '1 hour', NULL, 'k2', NULL",
        state: JobState::Done,
        attempt: 1,
    },
];

/// A queue `q` in a fresh schema of its own, opened (migrated) with `connect`.
async fn open(label: &str) -> (PgSchema, Queue) {
    let schema = PgSchema::new(label);
    let q = reopen(&schema).await;
    (schema, q)
}

/// The queue `q` of `schema`, opened as a new process would: `connect` migrates it.
async fn reopen(schema: &PgSchema) -> Queue {
    lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default().queue("q").schema(schema.name()),
    )
    .await
    .expect("PostgreSQL is not reachable; run scripts/services")
}

/// A schema as migration `version` left it, built from the migration files (each recorded as
/// the library records it), as a process of that version would have left it.
async fn store_at(label: &str, version: usize) -> PgSchema {
    const FILES: [&str; 13] = [
        include_str!("../../sql/postgres/queue/v1.sql"),
        include_str!("../../sql/postgres/queue/v2.sql"),
        include_str!("../../sql/postgres/queue/v3.sql"),
        include_str!("../../sql/postgres/queue/v4.sql"),
        include_str!("../../sql/postgres/queue/v5.sql"),
        include_str!("../../sql/postgres/queue/v6.sql"),
        include_str!("../../sql/postgres/queue/v7.sql"),
        include_str!("../../sql/postgres/queue/v8.sql"),
        include_str!("../../sql/postgres/queue/v9.sql"),
        include_str!("../../sql/postgres/queue/v10.sql"),
        include_str!("../../sql/postgres/queue/v11.sql"),
        include_str!("../../sql/postgres/queue/v12.sql"),
        include_str!("../../sql/postgres/queue/v13.sql"),
    ];
    let schema = PgSchema::new(label);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(schema.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", schema.name());
    let channel = format!("{}_jobs", schema.name());
    let fill = |sql: &str| {
        sql.replace("{channel}", &channel)
            .replace("{schema}", &quoted)
    };
    let mut sql = fill(include_str!(
        "../../sql/postgres/queue/migrations_table.sql"
    ));
    for (n, text) in FILES.iter().enumerate().take(version) {
        sql.push_str(&format!(
            "\n{}\nINSERT INTO {quoted}.queue_migrations (version) VALUES ({});\n",
            fill(text),
            n + 1
        ));
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&pool)
        .await
        .unwrap();
    schema
}

/// What the statements of this version need of a store that an older process (played by this
/// one, on a store it was told is up to date) works: `flush_stats` (v12.sql) as a no-op, and
/// claims that answer how long each job waited (v14.sql), here always 0, and the tables of
/// paused queues and periodic schedules (v15.sql). [`without_shim`] puts the store back as it
/// was before a new process migrates it.
fn with_shim(quoted: &str) -> String {
    let mut sql = format!(
        "CREATE FUNCTION {quoted}.flush_stats() RETURNS void LANGUAGE sql AS ''; \
         CREATE TABLE {quoted}.paused (queue text PRIMARY KEY, \
                                       paused_at timestamptz NOT NULL DEFAULT now()); \
         CREATE TABLE {quoted}.periodic (name text PRIMARY KEY, queue text NOT NULL, \
                                         last_period bigint, \
                                         updated_at timestamptz NOT NULL DEFAULT now());"
    );
    for (name, queues) in [("claim", "text"), ("claim_any", "text[]")] {
        let args = format!("{queues}, bigint, float8, text, bigint[], integer[], smallint[]");
        sql.push_str(&format!(
            "ALTER FUNCTION {quoted}.{name}({args}) RENAME TO {name}_unshimmed; \
             CREATE FUNCTION {quoted}.{name}({args}) \
             RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb, \
                            claimed_attempt integer, claimed_max_attempts integer, \
                            claimed_seg smallint, claimed_waited float8) \
             LANGUAGE sql AS $$ SELECT c.*, 0::float8 \
                 FROM {quoted}.{name}_unshimmed($1, $2, $3, $4, $5, $6, $7) c $$;"
        ));
    }
    sql
}

fn without_shim(quoted: &str) -> String {
    let mut sql = format!(
        "DROP FUNCTION {quoted}.flush_stats(); DROP TABLE {quoted}.paused, {quoted}.periodic;"
    );
    for (name, queues) in [("claim", "text"), ("claim_any", "text[]")] {
        let args = format!("{queues}, bigint, float8, text, bigint[], integer[], smallint[]");
        sql.push_str(&format!(
            "DROP FUNCTION {quoted}.{name}({args}); \
             ALTER FUNCTION {quoted}.{name}_unshimmed({args}) RENAME TO {name};"
        ));
    }
    sql
}

/// The newest migration of the queue schema: the version of a store once opened.
const LATEST: i64 = 15;

/// The latest migration applied to the schema `quoted`.
async fn version(pool: &PgPool, quoted: &str) -> Option<i64> {
    scalar_i64(
        pool,
        format!("SELECT max(version)::bigint FROM {quoted}.queue_migrations"),
    )
    .await
}

async fn scalar_i64(pool: &PgPool, sql: String) -> Option<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .unwrap()
}

mod claim_wait;
mod history;
mod load;
mod lock_order;
mod segments;
mod v3_upgrade;
#[allow(unused_imports)]
use claim_wait::*;
#[allow(unused_imports)]
use history::*;
#[allow(unused_imports)]
use load::*;
#[allow(unused_imports)]
use lock_order::*;
#[allow(unused_imports)]
use segments::*;
#[allow(unused_imports)]
use v3_upgrade::*;
