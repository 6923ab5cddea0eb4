//! The queue's migrations are history: a store that the first migration created, holding jobs
//! in every state, migrates to exactly the schema a fresh store gets (on PostgreSQL its
//! relations, columns, indexes, constraints, functions, triggers and views; on MariaDB its
//! columns with their collations, its indexes and its table options), with every job carried
//! over and usable; and no migration file, which databases may have applied, ever changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use lockwise::queue::{ConnectOptions, Job, JobId, JobState, Queue};
use lockwise_testkit::{MysqlDatabase, PgSchema};
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, MySqlPool, PgPool};

/// Every migration file, as databases may have applied it: its SHA-256 (of the text with LF
/// line ends). A migration is never edited, only followed by a new one, which is pinned here
/// in the change that adds it.
const PINNED: &[(&str, &str)] = &[
    (
        "postgres/queue/v1.sql",
        "6a370995618e382428a61a1f38f104e01e01c0acbf77a4d425966361e3e9951f",
    ),
    (
        "postgres/queue/v2.sql",
        "920a05815228b162c444d78ad791ae9c7c7d5f55ad4f3ce2fdb82b49a58a97d5",
    ),
    (
        "postgres/queue/v3.sql",
        "0f70963d5c82bd301b685418fc3e78778c45c756d2cd8f6775ba92b956c0acd0",
    ),
    (
        "postgres/queue/v4.sql",
        "7ed727df374c9163c0832c45549cb6f396431f2733962d188f01560f456e8964",
    ),
    (
        "postgres/queue/v5.sql",
        "cf5b15f47e7370b0bb87c9042c7be92ae4570e68183081cbe0eef05365e880e8",
    ),
    (
        "postgres/queue/v6.sql",
        "638a078ba78f9a4fd0a8a1b313e471c5f09a39bb7bbb262bf312f8c7b39d6955",
    ),
    (
        "postgres/queue/v7.sql",
        "e568cd37cbf9544d831d2705821e21a65711bf5aa18bf3c256e9bbb88cb25954",
    ),
    (
        "postgres/queue/v8.sql",
        "41ad1477f4bf90cac605a0f04eb8b55d0a4f2a6cf02c8a511694d3e3043cac14",
    ),
    (
        "postgres/queue/v9.sql",
        "a95de5c60b369395b37f7152d8b7ad61964504b4b6a844e312b4d21c5cf2466c",
    ),
    (
        "postgres/queue/v10.sql",
        "0eebb71def7c1dba0d979a762a68c53c65dd79695e9d676ef5933d2725cf1570",
    ),
    (
        "mysql/queue/v1.sql",
        "8366876deabe26f5a38ca21571bba72f778268b983af420828fa8d5da17377ff",
    ),
    (
        "mysql/queue/v2.sql",
        "c544a7a0817a05ad7882bf1de8f2c6c66d6f13bc14272c7b3b4f601c1ced9e5f",
    ),
    (
        "mysql/queue/v3.sql",
        "2b97317cc66f9a6f93230acbdbc4659982fe3bd51fe9d680bf4ae24ebbc8c5ec",
    ),
    (
        "mysql/queue/v4.sql",
        "e13c8283f2548ae6842d669cbd78f6cff98482d0bc47537c38f3b83e918bd5a5",
    ),
];

/// The crate's `sql/` folder.
fn sql_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
}

/// The migration files of `folder` (`postgres/queue`, `mysql/queue`): `v<N>.sql`, by N.
fn migration_files(folder: &str) -> Vec<(u32, String)> {
    let mut files: Vec<(u32, String)> = std::fs::read_dir(sql_dir().join(folder))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter_map(|name| {
            let n = name.strip_prefix('v')?.strip_suffix(".sql")?.parse().ok()?;
            Some((n, format!("{folder}/{name}")))
        })
        .collect();
    files.sort();
    files
}

/// No migration file changed since databases may have applied it, none is missing, and each
/// one there is pinned; the versions run from 1 with no gap.
#[test]
fn no_migration_file_ever_changes() {
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
enum When {
    Past,
    Future,
}

/// A job as the first version of the store held it, and what it is after the migrations.
struct OldJob {
    name: &'static str,
    /// The first version's state.
    state: &'static str,
    priority: i16,
    run_at: When,
    attempt: i32,
    key: Option<&'static str>,
    lease_until: Option<When>,
    worker: Option<&'static str>,
    last_error: Option<&'static str>,
    finished: bool,
    /// Its state once migrated.
    now: JobState,
}

const OLD_JOBS: &[OldJob] = &[
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
const OLD_COLUMNS: &str = "queue, state, priority, run_at, payload, attempt, max_attempts, \
                           idempotency_key, lease_until, worker, last_error, finished_at";

/// The INSERT of [`OLD_JOBS`] into `table`, one row each, with times written `past` (a minute
/// ago) and `future` (an hour ahead) in the server's dialect.
fn insert_old_jobs(table: &str, past: &str, future: &str) -> String {
    let time = |when: When| match when {
        When::Past => past,
        When::Future => future,
    };
    let text = |value: Option<&str>| value.map_or("NULL".to_owned(), |v| format!("'{v}'"));
    let rows: Vec<String> = OLD_JOBS
        .iter()
        .map(|job| {
            format!(
                "('q', '{}', {}, {}, '{{\"n\": \"{}\"}}', {}, 5, {}, {}, {}, {}, {})",
                job.state,
                job.priority,
                time(job.run_at),
                job.name,
                job.attempt,
                text(job.key),
                job.lease_until.map_or("NULL", time),
                text(job.worker),
                text(job.last_error),
                if job.finished { past } else { "NULL" },
            )
        })
        .collect();
    format!(
        "INSERT INTO {table} ({OLD_COLUMNS}) VALUES {}",
        rows.join(", ")
    )
}

/// The ids of [`OLD_JOBS`] by name, from `(id, name)` rows read back from the store.
fn old_ids(rows: Vec<(i64, String)>) -> HashMap<&'static str, JobId> {
    let ids: HashMap<&'static str, JobId> = rows
        .into_iter()
        .map(|(id, name)| {
            let job = OLD_JOBS.iter().find(|j| j.name == name).unwrap();
            (job.name, JobId(id))
        })
        .collect();
    assert_eq!(ids.len(), OLD_JOBS.len());
    ids
}

/// Every job of [`OLD_JOBS`] (ids `ids`) is where it should be in the migrated queue `q`,
/// and each can go on: the live execution still owns its job, the expired lease is reaped,
/// the key still names its job, the dead letter is retried, and the ready jobs are claimed
/// and completed; new ids follow the old ones.
async fn old_jobs_go_on(q: &Queue, ids: &HashMap<&str, JobId>) {
    for job in OLD_JOBS {
        let info = q
            .job(ids[job.name])
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {} is lost", job.name));
        assert_eq!(
            (info.state, info.attempt, &info.payload, info.queue.as_str()),
            (job.now, job.attempt, &json!({ "n": job.name }), "q"),
            "job {}",
            job.name
        );
        assert_eq!(
            info.last_error.as_deref(),
            job.last_error,
            "job {}",
            job.name
        );
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead
        ),
        (2, 2, 2, 1, 1),
        "{stats:?}"
    );

    let live = ids["live"];
    assert_eq!(
        q.protocol()
            .heartbeat(&[(live, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![live]
    );
    assert_eq!(q.protocol().complete(&[(live, 1)]).await.unwrap(), 1);
    assert_eq!(q.protocol().reap().await.unwrap(), 1, "the expired lease");
    assert_eq!(
        q.job(ids["expired"]).await.unwrap().unwrap().state,
        JobState::Ready
    );
    let same = q
        .enqueue_with_status(Job::new(json!({ "n": "again" })).key("k1"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (ids["keyed"], true));
    assert!(q.retry(ids["dead"]).await.unwrap());

    let claimed = q
        .protocol()
        .claim("new", 100, Duration::from_secs(30), &[])
        .await
        .unwrap();
    let attempts: BTreeMap<JobId, i32> = claimed.iter().map(|c| (c.id, c.attempt)).collect();
    assert_eq!(
        attempts.keys().copied().collect::<BTreeSet<_>>(),
        ["ready", "keyed", "expired", "dead"]
            .map(|name| ids[name])
            .into_iter()
            .collect(),
        "{claimed:?}"
    );
    assert_eq!(
        [ids["ready"], ids["keyed"], ids["expired"]].map(|id| attempts[&id]),
        [1, 1, 2]
    );
    assert!(attempts[&ids["dead"]] > 5, "{claimed:?}");
    let running: Vec<(JobId, i32)> = attempts.into_iter().collect();
    let mut confirmed = q.protocol().confirm_started(&running).await.unwrap();
    confirmed.sort();
    assert_eq!(
        confirmed,
        running.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );
    assert_eq!(q.protocol().complete(&running).await.unwrap(), 4);

    let new = q.enqueue(Job::new(json!({ "n": "new" }))).await.unwrap();
    assert!(
        ids.values().all(|old| new.0 > old.0),
        "{new:?} after {ids:?}"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (
            stats.ready,
            stats.scheduled,
            stats.running,
            stats.done,
            stats.dead
        ),
        (1, 2, 0, 6, 0),
        "{stats:?}"
    );
}

/// A store's schema, kind by kind (`relation`, `column`, …): each object by name, with its
/// definition. Names of the store's own schema or table are written `<store>`.
type Catalog = BTreeMap<&'static str, BTreeMap<String, String>>;

/// Panics, naming each object, unless `migrated` and `fresh` are the same catalog; and unless
/// the fresh one has every kind in `required`, so that a query that found nothing cannot pass.
fn assert_same_catalog(migrated: &Catalog, fresh: &Catalog, required: &[&str]) {
    for kind in required {
        assert!(
            fresh.get(kind).is_some_and(|objects| !objects.is_empty()),
            "no {kind} found in the fresh store: {fresh:?}"
        );
    }
    let mut problems = Vec::new();
    let kinds: BTreeSet<&str> = migrated.keys().chain(fresh.keys()).copied().collect();
    let none = BTreeMap::new();
    for kind in kinds {
        let (old, new) = (
            migrated.get(kind).unwrap_or(&none),
            fresh.get(kind).unwrap_or(&none),
        );
        for (name, definition) in new {
            match old.get(name) {
                None => problems.push(format!("{kind} {name}: only in the fresh store")),
                Some(other) if other != definition => problems.push(format!(
                    "{kind} {name} differs: {}",
                    first_difference(other, definition)
                )),
                Some(_) => {}
            }
        }
        for name in old.keys().filter(|name| !new.contains_key(*name)) {
            problems.push(format!("{kind} {name}: only in the migrated store"));
        }
    }
    assert!(
        problems.is_empty(),
        "the migrated store differs from a fresh one:\n{}",
        problems.join("\n")
    );
}

/// The first line where `migrated` and `fresh` differ, both ways.
fn first_difference(migrated: &str, fresh: &str) -> String {
    let (mut old, mut new) = (migrated.lines(), fresh.lines());
    for line in 1.. {
        match (old.next(), new.next()) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => return format!("line {line}: migrated {a:?}, fresh {b:?}"),
        }
    }
    unreachable!()
}

/// What the PostgreSQL catalog says of the objects of the schema `$1`, as `(name,
/// definition)` rows, kind by kind.
const PG_CATALOG: &[(&str, &str)] = &[
    (
        "relation",
        "SELECT c.relname::text,
                format('kind %s, persistence %s, replica identity %s, options %s, partition of %s %s, partitioned by %s, acl %s',
                       c.relkind, c.relpersistence, c.relreplident, c.reloptions,
                       (SELECT p.relname FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
                         WHERE i.inhrelid = c.oid),
                       pg_get_expr(c.relpartbound, c.oid),
                       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,
                       c.relacl)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f', 'c')",
    ),
    (
        "column",
        "SELECT c.relname || '.' || a.attname,
                format('position %s, %s, not null %s, default %s, identity %s, generated %s, collation %s',
                       row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                       format_type(a.atttypid, a.atttypmod), a.attnotnull,
                       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
                       co.collname)
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
           LEFT JOIN pg_collation co ON co.oid = a.attcollation
          WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped
            AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
    ),
    (
        "index",
        "SELECT c.relname::text,
                pg_get_indexdef(c.oid)
                || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
                || coalesce(', partition of ' || (SELECT p.relname FROM pg_inherits h
                                                    JOIN pg_class p ON p.oid = h.inhparent
                                                   WHERE h.inhrelid = c.oid), '')
           FROM pg_index i
           JOIN pg_class c ON c.oid = i.indexrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1",
    ),
    (
        "constraint",
        "SELECT coalesce(c.relname::text, '') || '.' || co.conname,
                co.contype::text || ' ' || pg_get_constraintdef(co.oid)
                || CASE WHEN co.convalidated THEN '' ELSE ' NOT VALID' END
           FROM pg_constraint co
           JOIN pg_namespace n ON n.oid = co.connamespace
           LEFT JOIN pg_class c ON c.oid = co.conrelid
          WHERE n.nspname = $1",
    ),
    (
        "function",
        "SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
                pg_get_functiondef(p.oid) || E'\\n-- acl ' || coalesce(p.proacl::text, 'default')
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = $1",
    ),
    (
        "trigger",
        "SELECT c.relname || '.' || t.tgname,
                pg_get_triggerdef(t.oid) || ' (enabled ' || t.tgenabled::text || ')'
           FROM pg_trigger t
           JOIN pg_class c ON c.oid = t.tgrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND NOT t.tgisinternal",
    ),
    (
        "view",
        "SELECT c.relname::text, pg_get_viewdef(c.oid)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')",
    ),
    (
        "sequence",
        "SELECT c.relname::text,
                format('%s start %s increment %s min %s max %s cache %s cycle %s, owned by %s',
                       format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin,
                       s.seqmax, s.seqcache, s.seqcycle,
                       (SELECT r.relname || '.' || a.attname
                          FROM pg_depend d
                          JOIN pg_class r ON r.oid = d.refobjid
                          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                           AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
           FROM pg_sequence s
           JOIN pg_class c ON c.oid = s.seqrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1",
    ),
    (
        "type",
        "SELECT t.typname::text, t.typtype::text
           FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
          WHERE n.nspname = $1 AND t.typrelid = 0 AND t.typcategory <> 'A'",
    ),
];

/// The catalog of the PostgreSQL schema `schema`.
async fn pg_catalog(pool: &PgPool, schema: &str) -> Catalog {
    let mut catalog = Catalog::new();
    for (kind, sql) in PG_CATALOG {
        let rows: Vec<(String, String)> = sqlx::query_as(*sql)
            .bind(schema)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("the {kind} query: {e}"));
        let objects = catalog.entry(kind).or_default();
        for (name, definition) in rows {
            let previous = objects.insert(
                name.replace(schema, "<store>"),
                definition.replace(schema, "<store>"),
            );
            assert!(previous.is_none(), "two {kind}s {name}");
        }
    }
    catalog
}

/// The migrations recorded as applied in the PostgreSQL schema `quoted`.
async fn pg_applied(pool: &PgPool, quoted: &str) -> Vec<i32> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {quoted}.queue_migrations ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The queue `q` of `schema`, opened as a new process would: `connect` migrates it.
async fn open_pg(schema: &PgSchema) -> Queue {
    lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default().queue("q").schema(schema.name()),
    )
    .await
    .expect("PostgreSQL is not reachable; run scripts/services")
}

/// A PostgreSQL schema as the first migration left it (the migrations table, migration 1 and
/// its row, filled in as the library fills them), holding a job in every state, migrates to
/// the schema a fresh store gets: same relations, columns, indexes, constraints, functions,
/// triggers, views, sequences and types, every migration on disk recorded in both; and every
/// old job is still there and goes on.
#[tokio::test]
async fn a_version_1_postgres_store_with_jobs_migrates_to_the_schema_of_a_fresh_one() {
    let old = PgSchema::new("mig_v1");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(old.url())
        .await
        .expect("PostgreSQL is not reachable; run scripts/services");
    let quoted = format!("\"{}\"", old.name());
    // The channel the library uses for the schema (the payload is the queue name).
    let channel = format!("{}_jobs", old.name());
    let fill = |sql: &str| {
        sql.replace("{channel}", &channel)
            .replace("{schema}", &quoted)
    };
    let version_1 = format!(
        "{}\n{}\nINSERT INTO {quoted}.queue_migrations (version) VALUES (1);\n{};",
        fill(include_str!("../sql/postgres/queue/migrations_table.sql")),
        fill(include_str!("../sql/postgres/queue/v1.sql")),
        insert_old_jobs(
            &format!("{quoted}.jobs"),
            "now() - interval '1 minute'",
            "now() + interval '1 hour'"
        ),
    );
    sqlx::raw_sql(AssertSqlSafe(version_1))
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(pg_applied(&pool, &quoted).await, [1]);
    let ids = old_ids(
        sqlx::query_as(AssertSqlSafe(format!(
            "SELECT id, payload->>'n' FROM {quoted}.jobs"
        )))
        .fetch_all(&pool)
        .await
        .unwrap(),
    );

    let q = open_pg(&old).await;
    let fresh = PgSchema::new("mig_fresh");
    let _fresh_queue = open_pg(&fresh).await;

    let on_disk = migration_files("postgres/queue").len();
    let every: Vec<i32> = (1..=i32::try_from(on_disk).unwrap()).collect();
    assert_eq!(pg_applied(&pool, &quoted).await, every, "migrated store");
    assert_eq!(
        pg_applied(&pool, &format!("\"{}\"", fresh.name())).await,
        every,
        "fresh store"
    );
    assert_same_catalog(
        &pg_catalog(&pool, old.name()).await,
        &pg_catalog(&pool, fresh.name()).await,
        &[
            "relation",
            "column",
            "index",
            "constraint",
            "function",
            "trigger",
            "view",
            "sequence",
        ],
    );

    old_jobs_go_on(&q, &ids).await;
}

/// What MariaDB's information_schema says of the table `?` of the current database, as
/// `(name, definition)` rows, kind by kind.
const MYSQL_CATALOG: &[(&str, &str)] = &[
    (
        "table",
        "SELECT 'options', CAST(CONCAT_WS(' | ', engine, IFNULL(table_collation, '-'),
                                          IFNULL(row_format, '-'), IFNULL(create_options, '-'))
                                AS CHAR)
           FROM information_schema.tables
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
    (
        "column",
        "SELECT CAST(column_name AS CHAR),
                CAST(CONCAT_WS(' | ', ordinal_position, column_type, is_nullable,
                               IFNULL(column_default, 'no default'),
                               IFNULL(character_set_name, '-'), IFNULL(collation_name, '-'),
                               extra, column_key) AS CHAR)
           FROM information_schema.columns
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
    (
        "index",
        "SELECT CAST(CONCAT(index_name, ' #', seq_in_index) AS CHAR),
                CAST(CONCAT_WS(' | ', column_name, non_unique, IFNULL(sub_part, 'whole'),
                               nullable, index_type, IFNULL(collation, '-')) AS CHAR)
           FROM information_schema.statistics
          WHERE table_schema = DATABASE() AND table_name = ?",
    ),
];

/// The catalog of the MariaDB table `table`, with its `SHOW CREATE TABLE` (the counter of
/// AUTO_INCREMENT left out) as kind `create`.
async fn mysql_catalog(pool: &MySqlPool, table: &str) -> Catalog {
    let mut catalog = Catalog::new();
    for (kind, sql) in MYSQL_CATALOG {
        let rows: Vec<(String, String)> = sqlx::query_as(*sql)
            .bind(table)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("the {kind} query: {e}"));
        let objects = catalog.entry(kind).or_default();
        for (name, definition) in rows {
            assert!(objects.insert(name.clone(), definition).is_none(), "{name}");
        }
    }
    let (_, create): (String, String) =
        sqlx::query_as(AssertSqlSafe(format!("SHOW CREATE TABLE `{table}`")))
            .fetch_one(pool)
            .await
            .unwrap();
    let create = create.replace(&format!("`{table}`"), "`<store>`");
    let create = match create.find(" AUTO_INCREMENT=") {
        Some(at) => {
            let rest = &create[at + " AUTO_INCREMENT=".len()..];
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            format!("{}{}", &create[..at], &rest[digits..])
        }
        None => create,
    };
    catalog
        .entry("create")
        .or_default()
        .insert("table".into(), create);
    catalog
}

/// A MariaDB table as the first migration created it, holding a job in every state, migrates
/// to the table a fresh store gets: same columns (type, nullability, default, character set,
/// collation), indexes and table options, each migration's mark present (the columns of 2 and
/// 3, the binary collation of 4); and every old job is still there and goes on.
#[tokio::test]
async fn a_version_1_mariadb_table_with_jobs_migrates_to_the_table_of_a_fresh_one() {
    let db = MysqlDatabase::mysql("mig");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&db.url())
        .await
        .expect("MariaDB is not reachable; run scripts/services");
    for sql in [
        include_str!("../sql/mysql/queue/v1.sql").replace("{jobs}", "old_jobs"),
        insert_old_jobs(
            "old_jobs",
            "NOW(6) - INTERVAL 1 MINUTE",
            "NOW(6) + INTERVAL 1 HOUR",
        ),
    ] {
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let ids = old_ids(
        sqlx::query_as(
            "SELECT CAST(id AS SIGNED), CAST(JSON_VALUE(payload, '$.n') AS CHAR) FROM old_jobs",
        )
        .fetch_all(&pool)
        .await
        .unwrap(),
    );

    let open = |prefix: &'static str| {
        let url = db.url();
        async move {
            lockwise::queue::connect(&url, ConnectOptions::default().queue("q").schema(prefix))
                .await
                .expect("MariaDB is not reachable; run scripts/services")
        }
    };
    let q = open("old").await;
    let _fresh_queue = open("fresh").await;

    let migrated = mysql_catalog(&pool, "old_jobs").await;
    let fresh = mysql_catalog(&pool, "fresh_jobs").await;
    assert_same_catalog(&migrated, &fresh, &["table", "column", "index", "create"]);
    for column in ["started", "released_key"] {
        assert!(fresh["column"].contains_key(column), "{column}: {fresh:?}");
    }
    for (column, definition) in &fresh["column"] {
        let collation = definition.split(" | ").nth(5).unwrap();
        assert!(
            ["-", "utf8mb4_nopad_bin", "utf8mb4_0900_bin"].contains(&collation),
            "{column}: {definition}"
        );
    }

    old_jobs_go_on(&q, &ids).await;
}
