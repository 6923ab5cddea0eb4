//! The queue on PostgreSQL. The SQL is in `sql/postgres/queue/`; the storage layout is
//! migration 4 (`v4.sql`), designed and measured in `docs/design/queue-layout-v4.md`, and
//! migration 5 (`v5.sql`) addresses the lease segments one by one; migration 6 (`v6.sql`)
//! lets the truncation of a drained segment give up at once instead of waiting for its lock;
//! migration 7 (`v7.sql`) makes a batch's statements cheaper (each lease probed by its id
//! alone, each claimed job deleted from its own ready segment) and has acknowledgements lock
//! leases in the (segment, id) order of heartbeats and hand-backs, so they never deadlock;
//! migration 8 (`v8.sql`) has a truncation let go at once of a segment it finds in use;
//! migration 9 (`v9.sql`) has an acknowledgement look up the segments it was not told before
//! it locks anything, so that it keeps the heartbeat's (segment, id) order; migration 10
//! (`v10.sql`) has a confirmation do the same and lock each segment's rows in id order.
//!
//! # Storage: one table per stage, rings reset by TRUNCATE
//!
//! A job lives in exactly one table at a time and moves between them in one statement each
//! (`DELETE … RETURNING` feeding an `INSERT`): `ready` (due), `scheduled` (delayed, or
//! waiting out a retry's backoff), `leases` (claimed; the attempt number is the fencing token
//! every later statement compares), `done` (finished history, done and cancelled), `dead`
//! (dead letters). Idempotency keys sit in `keys`, across every stage.
//!
//! Why: a queue that updates one row per job in place leaves a dead row version per claim
//! and per completion, and only VACUUM removes them. Under sustained load they pile up faster
//! than autovacuum (one visit a minute by default) clears them, and every claim's index scan
//! wades through them (measured: 494k dead tuples in 90 s, and throughput falling as the
//! backlog grew). Here the per-job deletes happen in `ready` and `leases`, which are
//! LIST-partitioned **rings** (16 segments of 500 ready rows, 32 of 100 leases): a row's
//! segment is a function of a ticket drawn from a sequence by the column's DEFAULT, so
//! enqueueing stays a plain `INSERT` (inside the caller's transaction too). Once the claims
//! have drained a segment the ring's clock has passed, the maintenance (every worker, ten
//! times a second, one at a time) `TRUNCATE`s it: its dead versions go with its files, and
//! its `n_dead_tup` drops to 0, without VACUUM.
//! The confirmation and heartbeats are HOT updates of a lease (no indexed column changes).
//! `done` is insert-only, so it has no dead versions until history is pruned; `stats`
//! counts it from per-10-second sealed counts plus the newest rows, never the whole history.
//! `scheduled`, `dead` and `keys` are written at the rate of delays, failures and keys, not
//! at the job rate. Measured under the load (8 handlers, 1 ms jobs, 4,000 deep): no
//! table above ~1,500 dead tuples in the test, against 22k for the previous layout; two 120 s
//! release runs peaked at 973 and 1,125. At 32 handlers the rings wrap in under a second,
//! faster than the statistics and the truncations follow (2.7–4.8k).
//!
//! The price, and the limits:
//! - every job is written three times (ready, leases, done) instead of once and updated
//!   twice or thrice; the WAL volume is alike, and no dead index entries pile up;
//! - a `TRUNCATE` takes an exclusive lock on its segment for a few milliseconds: a ready
//!   segment's makes the claims wait behind it and replan; a lease segment's, of the
//!   statements of a batch, only those on that segment (see below), and the rarer ones
//!   (heartbeat, failure, hand-back, reap, cancel, which go through the ring's parent). A
//!   lock request that *waits* is queued ahead of every later claim, so the lock is asked
//!   for with NOWAIT, and only after five rounds in a row that left a drained segment does
//!   a round wait (20 ms at most): draining a 100k backlog went from 26k to 28–35k jobs/s.
//!   Lease segments are truncated one per statement, so that the clock does not come round
//!   to a segment that a long truncation of many still holds;
//! - a ring holds 8,000 ready rows (16 × 500) and 3,200 leases (32 × 100) before its clock
//!   comes back to a segment. A backlog deeper than that, a job waiting in a queue nobody
//!   works, or a lease held for many minutes keeps its segment from being truncated: that
//!   segment then gathers dead versions until autovacuum visits it, as any table would;
//! - a transaction kept open after it enqueued holds its segment's lock, and with it that
//!   segment's truncation, until it ends;
//! - finished history is kept until pruned (`delete_finished`, `lockwise queue prune`), as
//!   before.
//!
//! One statement per claim: it acknowledges the finished jobs (leases → done) and moves at
//! most `n` due jobs into leases, locked with `FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE
//! over the claim index of every segment (merged, so the order stays global). LISTEN/NOTIFY
//! wakes idle workers.
//!
//! The statements of every batch name their lease segment: the claim returns each job's
//! segment, which this process remembers by (id, attempt), and the acknowledgement (in the
//! next claim, or `complete`) and the confirmation go to `leases_<k>`, through one branch per
//! segment of v5.sql's functions. PostgreSQL 15 does not prune partitions at run time for
//! an `UPDATE` or `DELETE` with parameters, so through the ring's parent each of them locked
//! and opened every segment, and a truncation waited for every claim in flight. A job whose
//! segment this process does not know (claimed by another process, or before a restart)
//! is first looked up through the parent (v9.sql), so that the acknowledgement still locks
//! segment by segment in ascending order; the rarer statements on a lease (heartbeat,
//! failure, hand-back, reap, cancel) go through the parent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgListener, PgPool};
use sqlx::{AssertSqlSafe, Connection, Row};
use tokio::sync::{Notify, OnceCell};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use super::driver::{ClaimRequest, Driver, FailedAttempt, Insert, insert_all, insert_in};
use super::{
    Claimed, Enqueued, Executor, Job, JobId, JobInfo, JobState, Stats, from_micros, reported_state,
    utc_errors,
};
use crate::db::postgres::{ADVISORY_CLASS, Schema};
use crate::error::{Error, Result};

/// The rings, as baked into their segment DEFAULTs (v4.sql, and v5.sql for leases):
/// `(ring, segments, rows per segment)`.
const RINGS: [(&str, i64, i64); 2] = [("ready", 16, 500), ("leases", 32, 100)];

/// How often the finished history's counts are sealed (its buckets are 10 s).
const SEAL_EVERY: Duration = Duration::from_secs(5);

/// The versioned migrations of the queue schema.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../sql/postgres/queue/v1.sql")),
    (2, include_str!("../../sql/postgres/queue/v2.sql")),
    (3, include_str!("../../sql/postgres/queue/v3.sql")),
    (4, include_str!("../../sql/postgres/queue/v4.sql")),
    (5, include_str!("../../sql/postgres/queue/v5.sql")),
    (6, include_str!("../../sql/postgres/queue/v6.sql")),
    (7, include_str!("../../sql/postgres/queue/v7.sql")),
    (8, include_str!("../../sql/postgres/queue/v8.sql")),
    (9, include_str!("../../sql/postgres/queue/v9.sql")),
    (10, include_str!("../../sql/postgres/queue/v10.sql")),
];

/// Maintenance rounds in a row that may leave a drained segment of a ring untruncated
/// because its lock was not free at once (NOWAIT) before one round waits for it.
const NOWAIT_ROUNDS: u32 = 5;

/// How long a waiting truncation waits for each segment's lock, in ms: a claim asking for
/// the segment after it waits that long too.
const TRUNCATION_WAIT_MS: i32 = 20;

/// The segments of the lease ring, which v5.sql's functions name one by one.
const LEASE_SEGMENTS: i64 = RINGS[1].1;

/// The most lease segments this process remembers for the jobs it claimed (see
/// [`PgDriver::lease_segments`]).
const MAX_KNOWN_LEASES: usize = 100_000;

/// The newest migration in [`MIGRATIONS`].
const LATEST: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The SQL of one queue schema, with the schema name (and channel) filled in once.
#[derive(Debug)]
struct Statements {
    migrations_table: String,
    migrate_lock: String,
    migration_version: String,
    migration_applied: String,
    migrations_exist: String,
    enqueue: String,
    enqueue_many: String,
    claim: String,
    claim_any: String,
    confirm_started: String,
    complete: String,
    fail: String,
    heartbeat: String,
    hand_back: String,
    reap: String,
    rings: String,
    truncate_drained: String,
    seal_lock: String,
    seal_done: String,
    prune_lock: String,
    stats: String,
    dead: String,
    retry: String,
    delete_finished: String,
    delete_finished_everywhere: String,
    job: String,
    list_waiting: String,
    list_state: String,
    cancel: String,
}

impl Statements {
    fn new(schema: &Schema, channel: &str) -> Self {
        let fill = |template: &str| schema.sql(&template.replace("{channel}", channel)).0;
        macro_rules! sql {
            ($file:literal) => {
                fill(include_str!(concat!("../../sql/postgres/queue/", $file)))
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
                include_str!("../../sql/postgres/queue/heartbeat.sql"),
                "NO KEY UPDATE",
            )),
            hand_back: fill(&locking_leases(
                include_str!("../../sql/postgres/queue/hand_back.sql"),
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
            dead: sql!("dead.sql"),
            retry: sql!("retry.sql"),
            delete_finished: sql!("delete_finished.sql").replace("{of_queue}", "queue = $1"),
            delete_finished_everywhere: sql!("delete_finished.sql")
                .replace("{of_queue}", "$1::text IS NULL"),
            job: format!("{}{}", sql!("job_select.sql"), sql!("job.sql")),
            list_waiting: format!("{}{}", sql!("job_select.sql"), sql!("list_waiting.sql")),
            list_state: format!("{}{}", sql!("job_select.sql"), sql!("list_state.sql")),
            cancel: sql!("cancel.sql"),
        }
    }
}

/// `statement` (heartbeat.sql or hand_back.sql) with its `{locked_leases}`: the leases it
/// names, locked `FOR {mode}` in the one order every statement on several leases uses
/// (locked_leases.sql).
fn locking_leases(statement: &str, mode: &str) -> String {
    let locked = without_comments(include_str!("../../sql/postgres/queue/locked_leases.sql"));
    statement.replace("{locked_leases}", &locked.replace("{mode}", mode))
}

/// The sequence that is the clock of a ring of v4.sql.
fn clock_of(ring: &str) -> &'static str {
    if ring == "ready" {
        "ready_ticket"
    } else {
        "claim_ticket"
    }
}

/// A migration with its placeholders filled in: the NOTIFY channel, the bodies of v5.sql's
/// functions (and of their replacements in v7.sql, v9.sql and v10.sql), and the look-up of lease
/// segments.
fn migration_text(text: &str, channel: &str) -> String {
    let ack = include_str!("../../sql/postgres/queue/ack.sql");
    let on = |ids: &str, attempts: &str, segs: &str| {
        ack.replace("{ids}", ids)
            .replace("{attempts}", attempts)
            .replace("{segs}", segs)
    };
    let count = "GET DIAGNOSTICS moved = ROW_COUNT;\ntotal := total + moved;\n";
    let moved = moved();
    let last = (LEASE_SEGMENTS - 1).to_string();
    let segments = without_comments(include_str!("../../sql/postgres/queue/lease_segments.sql"))
        .replace("{last}", &last);
    let segments_of = |ids: &str, attempts: &str, segs: &str| {
        segments
            .replace("{ids}", ids)
            .replace("{attempts}", attempts)
            .replace("{segs}", segs)
    };
    let branches = |ids: &str, attempts: &str, segs: &str| {
        segment_branches(&on(ids, attempts, segs), "", count)
    };
    text.replace("{channel}", channel)
        .replace("{last}", &last)
        .replace("{segments}", &segments_of("$1", "$2", "$3"))
        .replace("{finished_segments}", &segments_of("$5", "$6", "$7"))
        .replace("{ack}", &branches("$1", "$2", "$3"))
        .replace("{ack_finished}", &branches("$5", "$6", "$7"))
        // v9.sql's functions: by the segments they looked up, in their variable `segs`.
        .replace("{ack_of_segs}", &branches("$1", "$2", "segs"))
        .replace("{ack_finished_of_segs}", &branches("$5", "$6", "segs"))
        // v10.sql's function: confirm_locked.sql by the segments it looked up.
        .replace(
            "{confirm_of_segs}",
            &segment_branches(
                &include_str!("../../sql/postgres/queue/confirm_locked.sql")
                    .replace("{ids}", "$1")
                    .replace("{attempts}", "$2")
                    .replace("{segs}", "segs"),
                "RETURN QUERY\n",
                "",
            ),
        )
        .replace(
            "{confirm}",
            &segment_branches(
                include_str!("../../sql/postgres/queue/confirm_started.sql"),
                "RETURN QUERY\n",
                "",
            ),
        )
        .replace(
            "{claim}",
            &include_str!("../../sql/postgres/queue/claim.sql").replace("{moved}", &moved),
        )
        .replace(
            "{claim_any}",
            &include_str!("../../sql/postgres/queue/claim_any.sql").replace("{moved}", &moved),
        )
}

/// The claims' `{moved}`: claim_moved.sql (without its comment) once per ready segment, then
/// `moved`, the union of what they deleted.
fn moved() -> String {
    let one = without_comments(include_str!("../../sql/postgres/queue/claim_moved.sql"));
    let segments = RINGS[0].1;
    let deletes: Vec<String> = (0..segments)
        .map(|k| one.replace("{k}", &k.to_string()))
        .collect();
    let union: Vec<String> = (0..segments)
        .map(|k| format!("SELECT * FROM moved_{k}"))
        .collect();
    format!(
        "{}\nmoved AS (\n    {}\n),",
        deletes.join("\n"),
        union.join("\n    UNION ALL ")
    )
}

/// `sql` without its comment lines.
fn without_comments(sql: &str) -> String {
    sql.lines()
        .filter(|line| !line.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `statement` (ack.sql or confirm_started.sql, without its comment) once per lease
/// segment, as the branches of a plpgsql `IF` on the variable `k`, the segment: the
/// segment's own table for a known segment, the ring's parent for jobs whose segment is not
/// known (NULL) or not one of the ring's. Each branch is `lead`, the statement, then `after`.
fn segment_branches(statement: &str, lead: &str, after: &str) -> String {
    let body = without_comments(statement);
    let branch = |test: String, leases: String, segment: String| {
        let statement = body
            .replace("{leases}", &leases)
            .replace("{segment}", &segment);
        format!("{test} THEN\n{lead}{statement};\n{after}")
    };
    let mut branches = vec![branch(
        "IF k IS NULL".into(),
        "{schema}.leases".into(),
        "f.seg IS NULL".into(),
    )];
    branches.extend((0..LEASE_SEGMENTS).map(|k| {
        branch(
            format!("ELSIF k = {k}"),
            format!("{{schema}}.leases_{k}"),
            format!("f.seg = {k}"),
        )
    }));
    // A segment outside the ring (a hint from a ring of another size): through the parent.
    let last = branch("ELSE".into(), "{schema}.leases".into(), "f.seg = k".into());
    branches.push(last.replacen("ELSE THEN", "ELSE", 1));
    branches.push("END IF;".into());
    branches.join("\n")
}

/// `sqlx` wants to be told that a prepared, schema-filled statement is safe.
fn q(sql: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(sql.to_owned())
}

/// The queues of one PostgreSQL schema.
#[derive(Debug)]
pub(super) struct PgDriver {
    pool: PgPool,
    schema: Schema,
    /// The schema's plain name, for messages.
    schema_name: String,
    /// The NOTIFY channel of the schema's queues (the payload is the queue name).
    channel: String,
    sql: Statements,
    migrated: OnceCell<()>,
    /// When this process last sealed the finished history's counts.
    sealed: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The lease segment of each job this process claimed and has not finished, by id and
    /// attempt: its confirmation and acknowledgement name that segment's table (v5.sql). A
    /// hint only: a job missing here (claimed by another process, or forgotten past
    /// [`MAX_KNOWN_LEASES`]) goes through the ring's parent, with the same compare-and-set.
    lease_segments: std::sync::Mutex<HashMap<(i64, i32), i16>>,
    /// For each ring of [`RINGS`], the maintenance rounds in a row that left a drained
    /// segment untruncated (see [`PgDriver::truncate_drained_segments`]).
    truncation_misses: [AtomicU32; 2],
}

/// `(id, attempt)` pairs as the two arrays the statements `unnest`.
fn columns(jobs: &[(JobId, i32)]) -> (Vec<i64>, Vec<i32>) {
    jobs.iter().map(|(id, attempt)| (id.0, *attempt)).unzip()
}

/// `values` as an array for `enqueue_many.sql`: all of them, or only the first when they are
/// all equal.
fn shared<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut all: Vec<T> = values.collect();
    if all.windows(2).all(|w| w[0] == w[1]) {
        all.truncate(1);
    }
    all
}

/// Whether segment `seg` of a ring of `segments` segments of `rows_per_segment` rows is one
/// the maintenance leaves alone at `clock` (the ring's last ticket): the segment the clock is
/// in and the one just behind it are still being drained (and a truncation could race a late
/// statistics report), and the two ahead of it are where the next claims (or enqueues) go.
/// The lease ring's clock moves a segment every 5 ms at 20k jobs/s, so an empty segment just
/// ahead of it when the maintenance looked is often written by the time it is locked, and a
/// claim that writes there waits for the truncation.
fn near_the_clock(seg: i32, clock: i64, segments: i64, rows_per_segment: i64) -> bool {
    let current = (clock / rows_per_segment).rem_euclid(segments);
    (i64::from(seg) - current + 1).rem_euclid(segments) <= 3
}

/// How many tickets the clock of a ring of `segments` segments of `rows_per_segment` rows,
/// now at `clock`, draws before it comes back to segment `seg`.
fn until_reused(seg: i32, clock: i64, segments: i64, rows_per_segment: i64) -> i64 {
    let current = (clock / rows_per_segment).rem_euclid(segments);
    let ahead = (i64::from(seg) - current).rem_euclid(segments);
    ahead * rows_per_segment - clock.rem_euclid(rows_per_segment)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PgDriver {
    /// The store in `schema`, whose plain name is `schema_name`.
    pub(super) fn new(pool: PgPool, schema: Schema, schema_name: &str) -> Self {
        let channel = format!("{schema_name}_jobs");
        PgDriver {
            sql: Statements::new(&schema, &channel),
            pool,
            schema,
            schema_name: schema_name.to_owned(),
            channel,
            migrated: OnceCell::new(),
            sealed: std::sync::Mutex::new(None),
            lease_segments: std::sync::Mutex::new(HashMap::new()),
            truncation_misses: Default::default(),
        }
    }

    /// The known lease segments of `jobs`, NULL where unknown.
    fn segments_of(&self, jobs: &[(JobId, i32)]) -> Vec<Option<i16>> {
        let known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        jobs.iter()
            .map(|(id, attempt)| known.get(&(id.0, *attempt)).copied())
            .collect()
    }

    /// Forgets the lease segments of `jobs`, which are finishing; returns them as
    /// [`segments_of`](Self::segments_of) would have.
    fn forget_segments(&self, jobs: &[(JobId, i32)]) -> Vec<Option<i16>> {
        let mut known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        jobs.iter()
            .map(|(id, attempt)| known.remove(&(id.0, *attempt)))
            .collect()
    }

    /// Remembers the lease segments of freshly claimed jobs.
    fn remember_segments(&self, claimed: impl Iterator<Item = ((i64, i32), i16)>) {
        let mut known = self
            .lease_segments
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MAX_KNOWN_LEASES {
            // Jobs lost without a word (rescued, cancelled) are never finished here: start
            // over rather than grow; the forgotten ones take the slower path.
            known.clear();
        }
        known.extend(claimed);
    }

    /// The newest queue migration applied to the schema, `None` when its migrations table is
    /// missing: catalog reads only, no privilege needed and nothing created.
    async fn applied_version(&self, conn: &mut PgConnection) -> Result<Option<i32>> {
        let table = self.schema.sql("{schema}.queue_migrations").0;
        let exists: bool = sqlx::query_scalar(q(&self.sql.migrations_exist))
            .bind(&table)
            .fetch_one(&mut *conn)
            .await?;
        if !exists {
            return Ok(None);
        }
        Ok(sqlx::query_scalar(q(&self.sql.migration_version))
            .fetch_one(&mut *conn)
            .await?)
    }

    async fn apply_migrations(&self, conn: &mut PgConnection) -> Result<()> {
        // Up to date (the usual case): two reads and no DDL, so that a user without CREATE
        // privileges can open a queue an administrator migrated.
        if self.applied_version(conn).await? >= Some(LATEST) {
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        sqlx::query(q(&self.sql.migrate_lock))
            .bind(ADVISORY_CLASS)
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(q(&self.sql.migrations_table))
            .execute(&mut *tx)
            .await?;
        let current: Option<i32> = sqlx::query_scalar(q(&self.sql.migration_version))
            .fetch_one(&mut *tx)
            .await?;
        for (version, text) in MIGRATIONS {
            if current.is_some_and(|c| c >= *version) {
                continue;
            }
            let text = migration_text(text, &self.channel);
            sqlx::raw_sql(self.schema.sql(&text))
                .execute(&mut *tx)
                .await?;
            sqlx::query(q(&self.sql.migration_applied))
                .bind(version)
                .execute(&mut *tx)
                .await?;
            tracing::info!(version, "queue schema migrated");
        }
        tx.commit().await.map_err(Error::from)
    }

    /// Truncates the ring segments that claims and completions have drained, so that their
    /// dead row versions go with their files instead of waiting for VACUUM: every segment
    /// but those [`near_the_clock`], the ones the clock comes back to last first. A segment
    /// is truncated only when it is empty once locked (`truncate_drained` in v8.sql, by one
    /// process at a time; a segment found in use is let go at once). Returns the segments
    /// truncated.
    ///
    /// A lock request that waits holds up every claim behind it, so the lock is asked for
    /// with NOWAIT; only after [`NOWAIT_ROUNDS`] rounds in a row that left a drained segment
    /// of the ring (a ring's claims can keep its segments locked without a pause) does a
    /// round wait, at most [`TRUNCATION_WAIT_MS`] per segment.
    ///
    /// The ready ring's segments go in one statement: every claim reads every ready segment,
    /// so a ready segment's truncation stops them all whatever it does, and one statement is
    /// one stop. The lease ring's go one per statement: a statement holds every segment it
    /// truncated (ACCESS EXCLUSIVE) until it commits, and a truncation costs a few
    /// milliseconds per segment (new files for the table and its index). One statement for
    /// the whole lease ring was measured at 74 ms for 28 segments, 150 ms when it waited for
    /// locks, while the clock moves a segment every 5 ms at 20k jobs/s: it came round to
    /// segments the statement held, and the claims that wrote there waited (sampled in
    /// `pg_locks` during 100k drains: 26 to 105 waits, 0 to 9 since).
    ///
    /// Once `stop` is cancelled no further statement goes out: a stopping worker waits for
    /// the statement in flight only, where a whole round took up to 190 ms at the end of a
    /// 10k drain (every segment drained at once).
    async fn truncate_drained_segments(&self, stop: &CancellationToken) -> Result<u64> {
        if stop.is_cancelled() {
            return Ok(0);
        }
        // One connection for the round: its statements do not queue behind the claims for
        // the pool one by one.
        let mut conn = self.pool.acquire().await?;
        let rows: Vec<(String, i32, i64, i64, bool)> = sqlx::query_as(q(&self.sql.rings))
            .fetch_all(&mut *conn)
            .await?;
        let started = std::time::Instant::now();
        let (mut truncated, mut tried) = (0, 0);
        for (ring, segments, rows_per_segment) in RINGS {
            let mut drained: Vec<(i32, i64)> = rows
                .iter()
                .filter(|(name, seg, bytes, clock, empty)| {
                    let near = near_the_clock(*seg, *clock, segments, rows_per_segment);
                    name == ring && *bytes > 0 && *empty && !near
                })
                .map(|&(_, seg, _, clock, _)| {
                    (seg, until_reused(seg, clock, segments, rows_per_segment))
                })
                .collect();
            if drained.is_empty() {
                continue;
            }
            tried += drained.len();
            drained.sort_by_key(|&(_, rows_away)| std::cmp::Reverse(rows_away));
            let drained: Vec<i32> = drained.into_iter().map(|(seg, _)| seg).collect();
            let misses = &self.truncation_misses[usize::from(ring == "leases")];
            let wait_ms = if misses.load(Relaxed) < NOWAIT_ROUNDS {
                0
            } else {
                TRUNCATION_WAIT_MS
            };
            let per_statement = if ring == "leases" { 1 } else { drained.len() };
            let mut done = 0;
            for group in drained.chunks(per_statement) {
                if stop.is_cancelled() {
                    // Stopped half way: not a miss, the next round of some worker goes on.
                    return Ok(truncated + done as u64);
                }
                let n: i32 = sqlx::query_scalar(q(&self.sql.truncate_drained))
                    .bind(ring)
                    .bind(group)
                    .bind(ADVISORY_CLASS)
                    .bind(wait_ms)
                    .fetch_one(&mut *conn)
                    .await?;
                done += usize::try_from(n).unwrap_or(0);
            }
            if done < drained.len() {
                misses.fetch_add(1, Relaxed);
            } else {
                misses.store(0, Relaxed);
            }
            truncated += done as u64;
        }
        tracing::debug!(tried, truncated, took = ?started.elapsed(), "ring segments");
        Ok(truncated)
    }

    /// Seals the finished history's counts every [`SEAL_EVERY`] (`seal_done.sql`).
    async fn seal_if_due(&self) -> Result<()> {
        let now = tokio::time::Instant::now();
        {
            let mut last = self.sealed.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| now.duration_since(at) < SEAL_EVERY) {
                return Ok(());
            }
            *last = Some(now);
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query(q(&self.sql.seal_lock))
            .execute(&mut *tx)
            .await?;
        sqlx::query(q(&self.sql.seal_done))
            .execute(&mut *tx)
            .await?;
        tx.commit().await.map_err(Error::from)
    }
}

#[async_trait]
impl Insert for PgDriver {
    type Db = sqlx::Postgres;

    /// Arrays are one parameter each: no placeholder limit, only the statement's size.
    const MAX_ROWS: usize = 10_000;
    const MAX_BYTES: usize = 16 << 20;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn insert_many(
        &self,
        conn: &mut PgConnection,
        queue: &str,
        jobs: &[&Job],
        payloads: &[&str],
    ) -> Result<Vec<Option<Enqueued>>> {
        // A column every job shares goes as one element, and keys not at all when no job has
        // one: fewer bytes on the wire (a statement of 1,000 small jobs stays in one TCP
        // write).
        let priorities = shared(jobs.iter().map(|job| job.priority));
        let delays = shared(jobs.iter().map(|job| secs(job.delay)));
        let attempts = shared(jobs.iter().map(|job| job.max_attempts));
        let mut keys: Vec<Option<&str>> = jobs.iter().map(|job| job.key.as_deref()).collect();
        let present: Vec<&str> = keys.iter().flatten().copied().collect();
        if present.is_empty() {
            keys.clear();
        }
        type Answer = (
            Option<Vec<i64>>,
            Option<Vec<i64>>,
            Option<Vec<String>>,
            Option<Vec<i64>>,
        );
        let (ids, inserted, held_keys, held_ids): Answer =
            sqlx::query_as(q(&self.sql.enqueue_many))
                .bind(queue)
                .bind(payloads)
                .bind(&priorities)
                .bind(&delays)
                .bind(&attempts)
                .bind(&keys)
                .bind(&present)
                .fetch_one(&mut *conn)
                .await?;
        let ids = ids.unwrap_or_default();
        if ids.len() != jobs.len() {
            return Err(Error::backend_msg(
                "postgres",
                format!("enqueue of {} jobs drew {} ids", jobs.len(), ids.len()),
            ));
        }
        let inserted: std::collections::HashSet<i64> =
            inserted.unwrap_or_default().into_iter().collect();
        let held: std::collections::HashMap<String, i64> = held_keys
            .unwrap_or_default()
            .into_iter()
            .zip(held_ids.unwrap_or_default())
            .collect();
        Ok(ids
            .into_iter()
            .zip(jobs)
            .map(|(id, job)| {
                if inserted.contains(&id) {
                    return Some(Enqueued {
                        id: JobId(id),
                        duplicate: false,
                    });
                }
                let holder = held.get(job.key.as_deref()?)?;
                Some(Enqueued {
                    id: JobId(*holder),
                    duplicate: true,
                })
            })
            .collect())
    }

    async fn insert(&self, conn: &mut PgConnection, queue: &str, job: &Job) -> Result<Enqueued> {
        let window = job.windowed_key().map(|(_, window)| secs(window));
        for _ in 0..3 {
            let row: Option<(i64, bool)> = sqlx::query_as(q(&self.sql.enqueue))
                .bind(queue)
                .bind(&job.payload)
                .bind(job.priority)
                .bind(secs(job.delay))
                .bind(job.max_attempts)
                .bind(job.key.as_deref())
                .bind(window)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some((id, inserted)) = row {
                return Ok(Enqueued {
                    id: JobId(id),
                    duplicate: !inserted,
                });
            }
            // A concurrent enqueue with the same key committed after this statement's
            // snapshot: look again.
        }
        Err(Error::backend_msg(
            "postgres",
            "enqueue found neither a new nor an existing job",
        ))
    }
}

#[async_trait]
impl Driver for PgDriver {
    async fn migrate(&self) -> Result<()> {
        self.migrated
            .get_or_try_init(|| async {
                let mut conn = self.pool.acquire().await?;
                self.apply_migrations(&mut conn).await
            })
            .await
            .map(|_| ())
    }

    async fn verify_migrated(&self) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        let current = self.applied_version(&mut conn).await?;
        if current.is_none_or(|c| c < LATEST) {
            return Err(Error::NotMigrated {
                store: format!("schema {:?}", self.schema_name),
                outdated: current.is_some(),
            });
        }
        let _ = self.migrated.set(());
        Ok(())
    }

    async fn enqueue_many(&self, queue: &str, jobs: &[Job]) -> Result<Vec<Enqueued>> {
        self.migrate().await?;
        insert_all(self, queue, jobs).await
    }

    async fn enqueue_in(&self, conn: Executor<'_>, queue: &str, job: &Job) -> Result<Enqueued> {
        let conn = conn.postgres()?;
        self.migrate().await?;
        self.insert(conn, queue, job).await
    }

    async fn enqueue_many_in(
        &self,
        conn: Executor<'_>,
        queue: &str,
        jobs: &[Job],
    ) -> Result<Vec<Enqueued>> {
        let conn = conn.postgres()?;
        self.migrate().await?;
        insert_in(self, conn, queue, jobs).await
    }

    async fn claim(&self, request: ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        self.migrate().await?;
        let (ids, attempts) = columns(request.finished);
        let segments = self.forget_segments(request.finished);
        // One queue (the usual case): the claim index's order is the claim's; several: the
        // first ones of each, merged.
        let claim = match request.queues {
            [queue] => sqlx::query(q(&self.sql.claim)).bind(*queue),
            queues => sqlx::query(q(&self.sql.claim_any)).bind(queues),
        };
        let rows = claim
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .bind(secs(request.lease))
            .bind(request.worker)
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_all(&self.pool)
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => {
                // The acknowledgements go out again: keep their segments.
                self.remember_segments(
                    request
                        .finished
                        .iter()
                        .zip(&segments)
                        .filter_map(|((id, attempt), seg)| Some(((id.0, *attempt), (*seg)?))),
                );
                return Err(error.into());
            }
        };
        let claimed = rows
            .iter()
            .map(|row| {
                let job = Claimed {
                    id: JobId(row.try_get("id")?),
                    attempt: row.try_get("attempt")?,
                    max_attempts: row.try_get("max_attempts")?,
                    payload: row.try_get("payload")?,
                    queue: row.try_get("queue")?,
                };
                let seg: i16 = row.try_get("seg")?;
                Ok((job, seg))
            })
            .collect::<Result<Vec<_>>>()?;
        self.remember_segments(
            claimed
                .iter()
                .map(|(job, seg)| ((job.id.0, job.attempt), *seg)),
        );
        Ok(claimed.into_iter().map(|(job, _)| job).collect())
    }

    async fn confirm_started(&self, claimed: &[(JobId, i32)]) -> Result<Vec<JobId>> {
        let (ids, attempts) = columns(claimed);
        let segments = self.segments_of(claimed);
        let started: Vec<i64> = sqlx::query_scalar(q(&self.sql.confirm_started))
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_all(&self.pool)
            .await?;
        Ok(started.into_iter().map(JobId).collect())
    }

    async fn complete(&self, finished: &[(JobId, i32)]) -> Result<u64> {
        self.migrate().await?;
        let (ids, attempts) = columns(finished);
        let segments = self.segments_of(finished);
        let done: i64 = sqlx::query_scalar(q(&self.sql.complete))
            .bind(&ids)
            .bind(&attempts)
            .bind(&segments)
            .fetch_one(&self.pool)
            .await?;
        self.forget_segments(finished);
        Ok(u64::try_from(done).unwrap_or(0))
    }

    async fn fail(&self, failed: FailedAttempt<'_>) -> Result<bool> {
        self.migrate().await?;
        let state: Option<String> = sqlx::query_scalar(q(&self.sql.fail))
            .bind(failed.id.0)
            .bind(failed.attempt)
            .bind(failed.error)
            .bind(secs(failed.retry_in))
            .bind(failed.final_failure)
            .fetch_optional(&self.pool)
            .await?;
        self.forget_segments(&[(failed.id, failed.attempt)]);
        Ok(state.is_some())
    }

    async fn heartbeat(&self, running: &[(JobId, i32)], lease: Duration) -> Result<Vec<JobId>> {
        let (ids, attempts) = columns(running);
        let owned: Vec<i64> = sqlx::query_scalar(q(&self.sql.heartbeat))
            .bind(&ids)
            .bind(&attempts)
            .bind(secs(lease))
            .fetch_all(&self.pool)
            .await?;
        Ok(owned.into_iter().map(JobId).collect())
    }

    async fn hand_back(&self, running: &[(JobId, i32)]) -> Result<u64> {
        let (ids, attempts) = columns(running);
        let back: Vec<i64> = sqlx::query_scalar(q(&self.sql.hand_back))
            .bind(&ids)
            .bind(&attempts)
            .fetch_all(&self.pool)
            .await?;
        self.forget_segments(running);
        Ok(back.len() as u64)
    }

    async fn reap(&self) -> Result<u64> {
        self.migrate().await?;
        let rescued: i64 = sqlx::query_scalar(q(&self.sql.reap))
            .bind(ADVISORY_CLASS)
            .fetch_one(&self.pool)
            .await?;
        if rescued > 0 {
            tracing::warn!(jobs = rescued, "rescued jobs whose lease expired");
        }
        Ok(u64::try_from(rescued).unwrap_or(0))
    }

    async fn stats(&self, queue: &str) -> Result<Stats> {
        self.migrate().await?;
        let row = sqlx::query(q(&self.sql.stats))
            .bind(queue)
            .fetch_one(&self.pool)
            .await?;
        let get = |c: &str| row.try_get::<i64, _>(c).map_err(Error::from);
        Ok(Stats {
            ready: get("ready")?,
            scheduled: get("scheduled")?,
            running: get("running")?,
            done: get("done")?,
            dead: get("dead")?,
            cancelled: get("cancelled")?,
        })
    }

    async fn dead(&self, queue: &str, limit: i64) -> Result<Vec<JobInfo>> {
        self.migrate().await?;
        let rows = sqlx::query(q(&self.sql.dead))
            .bind(queue)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(job_info).collect()
    }

    async fn retry(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        let done = sqlx::query(q(&self.sql.retry))
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_finished(
        &self,
        queue: Option<&str>,
        state: &'static str,
        older_than: Duration,
    ) -> Result<u64> {
        self.migrate().await?;
        // After the seal's row is taken, so that the counts it subtracts are exactly those
        // of the sealed rows it deletes.
        let mut tx = self.pool.begin().await?;
        sqlx::query(q(&self.sql.prune_lock))
            .execute(&mut *tx)
            .await?;
        let sql = match queue {
            Some(_) => &self.sql.delete_finished,
            None => &self.sql.delete_finished_everywhere,
        };
        let deleted: i64 = sqlx::query_scalar(q(sql))
            .bind(queue)
            .bind(state)
            .bind(secs(older_than))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    async fn job(&self, id: JobId) -> Result<Option<JobInfo>> {
        self.migrate().await?;
        let row = sqlx::query(q(&self.sql.job))
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(job_info).transpose()
    }

    async fn list(&self, queue: &str, state: JobState, limit: i64) -> Result<Vec<JobInfo>> {
        self.migrate().await?;
        let rows = match state {
            JobState::Ready | JobState::Scheduled => {
                sqlx::query(q(&self.sql.list_waiting))
                    .bind(queue)
                    .bind(state == JobState::Ready)
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
            _ => {
                sqlx::query(q(&self.sql.list_state))
                    .bind(queue)
                    .bind(state.as_str())
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
        };
        rows.iter().map(job_info).collect()
    }

    async fn cancel(&self, id: JobId) -> Result<bool> {
        self.migrate().await?;
        // A job that moved stage while the statement ran (claimed, failed into its backoff,
        // reaped) is not in the snapshot's view of its new table: look where it is now, and
        // cancel it there.
        for _ in 0..4 {
            let done = sqlx::query(q(&self.sql.cancel))
                .bind(id.0)
                .execute(&self.pool)
                .await?;
            if done.rows_affected() == 1 {
                return Ok(true);
            }
            let unfinished = self.job(id).await?.is_some_and(|job| {
                matches!(
                    job.state,
                    JobState::Ready | JobState::Scheduled | JobState::Running
                )
            });
            if !unfinished {
                return Ok(false);
            }
        }
        Ok(false)
    }

    async fn maintain(&self, stop: &CancellationToken) -> Result<()> {
        self.migrate().await?;
        self.truncate_drained_segments(stop).await?;
        if stop.is_cancelled() {
            return Ok(());
        }
        self.seal_if_due().await
    }

    async fn wake_ups(&self, queues: &[&str], wake: Arc<Notify>, stop: CancellationToken) {
        listen(&self.pool, &self.channel, queues, &wake, &stop).await;
    }

    fn postgres_pool(&self) -> Option<&PgPool> {
        Some(&self.pool)
    }
}

/// A row of `job.sql` or `list_*.sql`.
fn job_info(row: &sqlx::postgres::PgRow) -> Result<JobInfo> {
    let state: String = row.try_get("state")?;
    let time = |column: &str| -> Result<Option<SystemTime>> {
        Ok(row.try_get::<Option<i64>, _>(column)?.map(from_micros))
    };
    Ok(JobInfo {
        id: JobId(row.try_get("id")?),
        queue: row.try_get("queue")?,
        state: reported_state(&state)?,
        priority: row.try_get("priority")?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        key: row.try_get("idempotency_key")?,
        payload: row.try_get("payload")?,
        worker: row.try_get("worker")?,
        created_at: time("created_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        run_at: time("run_us")?.unwrap_or(SystemTime::UNIX_EPOCH),
        finished_at: time("finished_us")?,
        lease_until: time("lease_us")?,
        last_error: row.try_get("last_error")?,
        errors: utc_errors(row.try_get("errors")?),
    })
}

/// Wakes the claim loop on NOTIFY for any of `queues`, and once after every reconnect, until
/// `stop`.
async fn listen(
    pool: &PgPool,
    channel: &str,
    queues: &[&str],
    wake: &Notify,
    stop: &CancellationToken,
) {
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(pool).await?;
            listener.listen(channel).await?;
            wake.notify_one(); // anything enqueued while we were not listening
            loop {
                match listener.try_recv().await? {
                    Some(note) if queues.contains(&note.payload()) => wake.notify_one(),
                    Some(_) => {}
                    None => wake.notify_one(), // reconnected: poll once
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), sqlx::Error>(())
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            result = connected => {
                if let Err(error) = result {
                    tracing::warn!(%error, "LISTEN failed; polling until it is back");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{near_the_clock, until_reused};

    #[test]
    fn the_maintenance_spares_the_segment_behind_the_clock_and_the_two_ahead() {
        let spared = |clock| -> Vec<i32> {
            (0..32)
                .filter(|&seg| near_the_clock(seg, clock, 32, 100))
                .collect()
        };
        assert_eq!(spared(0), [0, 1, 2, 31]);
        assert_eq!(spared(99), [0, 1, 2, 31]);
        assert_eq!(spared(100), [0, 1, 2, 3]);
        assert_eq!(spared(3_050), [0, 29, 30, 31]);
        assert_eq!(spared(3_150), [0, 1, 30, 31]);
        // A fresh ring's sequence (last_value 1) and one that wrapped many times.
        assert_eq!(spared(1), [0, 1, 2, 31]);
        assert_eq!(spared(32 * 100 * 1_000 + 1_000), [9, 10, 11, 12]);
    }

    #[test]
    fn the_segment_just_behind_the_clock_is_the_last_it_comes_back_to() {
        // The clock 50 tickets into segment 1 of 32 segments of 100.
        assert_eq!(until_reused(2, 150, 32, 100), 50);
        assert_eq!(until_reused(5, 150, 32, 100), 350);
        assert_eq!(until_reused(0, 150, 32, 100), 3_050);
        assert_eq!(until_reused(0, 32 * 100 * 7 + 150, 32, 100), 3_050);
        let mut order: Vec<i32> = (3..32).collect();
        order.sort_by_key(|&seg| std::cmp::Reverse(until_reused(seg, 150, 32, 100)));
        assert_eq!(&order[..3], [31, 30, 29]);
    }
}
