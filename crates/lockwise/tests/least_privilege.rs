//! The grants docs/cli.md documents are enough: after an administrator ran `migrate`, a user
//! with only those grants takes locks, writes through the fence, runs effects once and works
//! the queue, on PostgreSQL and on MariaDB. (A grant missing from the documented list makes
//! one of these calls fail.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::mysql::MysqlBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::postgres::Store;
use lockwise::queue::{ConnectOptions, Job, Worker};
use lockwise::{LockOptions, Locker};
use lockwise_testkit::{PgSchema, TestDatabase, sql_now, unique};
use tokio_util::sync::CancellationToken;

/// The PostgreSQL grants documented in docs/cli.md, word for word, on `schema` to `role`.
fn documented_grants(schema: &str, role: &str) -> [String; 4] {
    [
        format!("GRANT USAGE ON SCHEMA {schema} TO {role}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"),
        format!("GRANT USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"),
        format!("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role}"),
    ]
}

/// The locks held under `prefix` once one is listed (PostgreSQL names a lock when its
/// holder's loss check has seen it twice), or after 2 s.
async fn listed(locker: &Locker, prefix: &str) -> Vec<lockwise::backend::HeldLock> {
    let give_up = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let held = locker.held(prefix).await.unwrap();
        if !held.is_empty() || std::time::Instant::now() > give_up {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The locks, the fence, run-once and the queue, as whoever `url` logs in as.
async fn everything_works_as(lock_url: &str, queue_url: &str, schema: &str, postgres: bool) {
    let locker = if postgres {
        Locker::new(
            PostgresBackend::builder(lock_url)
                .schema(schema)
                .connect()
                .await
                .unwrap(),
        )
    } else {
        Locker::new(MysqlBackend::connect(lock_url).await.unwrap())
    };
    // Advisory locks and GET_LOCK names are server-wide: a key of this test's own.
    let key = unique("report");
    let guard = locker
        .try_acquire(&key, &LockOptions::ttl(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    // Who holds what, with these grants only.
    let held = listed(&locker, &key).await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].key, key);
    assert_eq!(held[0].token, Some(guard.token()));
    if postgres {
        let pool = sqlx::PgPool::connect(lock_url).await.unwrap();
        let store = Store::with_schema(pool.clone(), schema).unwrap();
        let mut tx = pool.begin().await.unwrap();
        store.fence(&mut tx, "report", guard.token()).await.unwrap();
        tx.commit().await.unwrap();
        let ran = store
            .run_once("scope", "key", |_tx| {
                Box::pin(async { Ok::<_, lockwise::Error>(()) })
            })
            .await
            .unwrap();
        assert_eq!(ran, lockwise::postgres::Once::Done(()));
        let mut tx = pool.begin().await.unwrap();
        let xact = store
            .lock_xact(&mut tx, "invoice", Duration::from_secs(1))
            .await
            .unwrap();
        assert!(xact.is_some());
        tx.commit().await.unwrap();
    }
    assert!(guard.release().await.unwrap());

    let queue = queue_of_three_jobs(queue_url, schema).await;
    let stop = CancellationToken::new();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (counter, stopper) = (done.clone(), stop.clone());
    let report = Worker::new(queue.clone())
        .lease(Duration::from_secs(5))
        .run(
            move |_job| {
                let (counter, stopper) = (counter.clone(), stopper.clone());
                async move {
                    if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == 3 {
                        stopper.cancel();
                    }
                    Ok::<_, String>(())
                }
            },
            stop,
        )
        .await
        .unwrap();
    assert_eq!(report.done, 3);
    let stats = queue.stats().await.unwrap();
    assert_eq!(stats.done, 3, "{stats:?}");
    // A worker's row among the live workers: written, read and removed with these grants.
    let stop = CancellationToken::new();
    let idle = tokio::spawn(
        Worker::new(queue.clone()).run(|_job| async { Ok::<_, String>(()) }, stop.clone()),
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while queue.workers().await.unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "the worker's row never showed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    idle.await.unwrap().unwrap();
    assert!(queue.workers().await.unwrap().is_empty());
    // Pausing, and a periodic schedule's tick, with these grants only.
    assert!(queue.pause().await.unwrap());
    assert!(queue.is_paused().await.unwrap());
    assert!(queue.resume().await.unwrap());
    let every = lockwise::queue::Schedule::every(Duration::from_secs(1)).unwrap();
    let periodic = queue
        .periodic("grants", every, Job::new(serde_json::json!(1)))
        .unwrap();
    assert!(periodic.tick().await.unwrap().is_empty(), "a new schedule");
    if postgres {
        // The maintenance empties a drained ring segment without the TRUNCATE privilege
        // (through the schema's SECURITY DEFINER function), and nothing else.
        let pool = sqlx::PgPool::connect(queue_url).await.unwrap();
        let size = |segment: &str| {
            let sql = format!("SELECT pg_relation_size('{schema}.{segment}')");
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        assert!(
            size("ready_0").await > 0,
            "the three jobs were in segment 0"
        );
        // `wait`: "" for migration 5's form (waits 20 ms for the lock), ", 0" for migration
        // 6's with NOWAIT, which the maintenance calls.
        let truncate = |ring: &'static str, seg: i32, wait: &'static str| {
            let (sql, pool) = (
                format!("SELECT {schema}.truncate_drained($1, $2, 7{wait})"),
                pool.clone(),
            );
            async move {
                sqlx::query_scalar::<_, i32>(sqlx::AssertSqlSafe(sql))
                    .bind(ring)
                    .bind(vec![seg])
                    .fetch_one(&pool)
                    .await
            }
        };
        // A segment is truncated only once its lock is granted, and beside a loaded test run
        // something held a lease segment's lock for longer than the 20 ms wait (2 runs of 7
        // beside `tests/queue_layout.rs`: 0 segments truncated). Each truncation that must
        // happen is tried again for up to 2 s (`eventually`); one that never happens fails
        // the test.
        assert_eq!(eventually(|| truncate("ready", 0, "")).await, 1);
        assert_eq!(size("ready_0").await, 0);
        let refused = truncate("done", 0, "").await;
        assert!(refused.is_err(), "{refused:?}");
        // The ready ring has 16 segments, the lease ring 32.
        let outside = truncate("ready", 16, "").await;
        assert!(outside.is_err(), "{outside:?}");
        assert_eq!(
            eventually(|| truncate("leases", 31, "")).await,
            1,
            "segment 31 is one of the lease ring's"
        );
        assert_eq!(eventually(|| truncate("leases", 30, ", 0")).await, 1);
        pool.close().await;
    }
}

/// Queue `q` of `schema` as whoever `url` logs in as, with three jobs enqueued.
async fn queue_of_three_jobs(url: &str, schema: &str) -> lockwise::queue::Queue {
    let queue = lockwise::queue::connect(url, ConnectOptions::default().queue("q").schema(schema))
        .await
        .unwrap();
    queue
        .enqueue_many((0..3).map(|n| Job::new(serde_json::json!({ "n": n }))))
        .await
        .unwrap();
    queue
}

#[tokio::test]
async fn postgres_works_with_the_documented_grants() {
    let schema = PgSchema::new("leastpriv");
    let admin = schema.url().to_owned();
    let name = schema.name().to_owned();
    // The administrator migrates (locks, fence, run-once and the queue).
    PostgresBackend::builder(admin.as_str())
        .schema(name.as_str())
        .connect()
        .await
        .unwrap();
    lockwise::queue::connect(&admin, ConnectOptions::default().schema(name.as_str()))
        .await
        .unwrap();
    let role = unique("lw_user").replace('-', "_");
    let mut grants = vec![format!("CREATE ROLE {role} LOGIN")];
    grants.extend(documented_grants(&name, &role));
    sql_now(&admin, &grants);
    let as_user = admin.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    assert_ne!(as_user, admin, "the URL names the admin user: {admin}");
    let cleanup = [format!("DROP OWNED BY {role}"), format!("DROP ROLE {role}")];
    let outcome = tokio::spawn({
        let (as_user, name) = (as_user.clone(), name.clone());
        async move { everything_works_as(&as_user, &as_user, &name, true).await }
    })
    .await;
    drop(schema);
    sql_now(&admin, &cleanup);
    outcome.unwrap();
}

#[tokio::test]
async fn mariadb_works_with_the_documented_grants() {
    let db = TestDatabase::mysql("leastpriv");
    let admin = db.url();
    let name = db.name().to_owned();
    MysqlBackend::connect(&admin).await.unwrap();
    lockwise::queue::connect(&admin, ConnectOptions::default())
        .await
        .unwrap();
    let user = unique("lw").replace('-', "_");
    let user = &user[..user.len().min(32)];
    let grants = [
        format!("CREATE USER '{user}'@'%'"),
        format!("CREATE USER '{user}'@'localhost'"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'%'"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'localhost'"),
    ];
    sql_now(&admin, &grants);
    let as_user = admin.replacen("mysql://root@", &format!("mysql://{user}@"), 1);
    assert_ne!(as_user, admin, "the URL names root: {admin}");
    let outcome = tokio::spawn({
        let as_user = as_user.clone();
        async move { everything_works_as(&as_user, &as_user, "lockwise", false).await }
    })
    .await;
    sql_now(
        &admin,
        &[
            format!("DROP USER '{user}'@'%'"),
            format!("DROP USER '{user}'@'localhost'"),
        ],
    );
    outcome.unwrap();
}

/// An application user granted what docs/cli.md documents on a store at version 4 keeps
/// working the queue after an administrator migrates it to the latest version, without
/// granting again: the new lease segments (migration 5), which the batch's statements now
/// name, get the grants of the old ones, and the new functions those of the functions they
/// replace, migration 6's truncation included (here an administrator who also took EXECUTE
/// away from PUBLIC).
#[tokio::test]
async fn postgres_grants_made_at_version_4_still_work_after_the_migrations() {
    let schema = PgSchema::new("privup");
    let admin = schema.url().to_owned();
    let name = schema.name().to_owned();
    let quoted = format!("\"{name}\"");
    let fill = |sql: &str| {
        sql.replace("{schema}", &quoted)
            .replace("{channel}", &format!("{name}_jobs"))
    };
    // The store as version 4 left it; its claim functions reduced to their signatures
    // (migration 5 replaces them).
    let v4 = format!(
        "{}\n{}\n{}\n{}\nCREATE TABLE {quoted}.queue_migrations (version integer PRIMARY KEY);\n\
         INSERT INTO {quoted}.queue_migrations VALUES (1), (2), (3), (4);\n\
         CREATE FUNCTION {quoted}.claim(text, bigint, float8, text, bigint[], integer[]) \
         RETURNS void LANGUAGE sql AS '';\n\
         CREATE FUNCTION {quoted}.claim_any(text[], bigint, float8, text, bigint[], integer[]) \
         RETURNS void LANGUAGE sql AS '';\n\
         CREATE FUNCTION {quoted}.confirm_started(bigint[], integer[]) \
         RETURNS void LANGUAGE sql AS '';",
        fill(include_str!("../sql/postgres/queue/v1.sql")),
        fill(include_str!("../sql/postgres/queue/v2.sql")),
        fill(include_str!("../sql/postgres/queue/v3.sql")),
        fill(include_str!("../sql/postgres/queue/v4.sql")),
    );
    sql_now(&admin, &[v4]);
    let role = unique("lw_user").replace('-', "_");
    sql_now(
        &admin,
        &[
            format!("CREATE ROLE {role} LOGIN"),
            format!("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA {name} FROM PUBLIC"),
        ]
        .into_iter()
        .chain(documented_grants(&name, &role))
        .collect::<Vec<_>>(),
    );
    // The administrator migrates; the next leases go to segment 16, one version 4 lacked.
    lockwise::queue::connect(&admin, ConnectOptions::default().schema(name.as_str()))
        .await
        .unwrap();
    sql_now(
        &admin,
        &[format!("SELECT setval('{quoted}.claim_ticket', 8000)")],
    );
    let as_user = admin.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    let outcome = tokio::spawn({
        let (as_user, name) = (as_user.clone(), name.clone());
        async move {
            let queue = queue_of_three_jobs(&as_user, &name).await;
            let claimed = queue
                .protocol()
                .claim("w", 3, Duration::from_secs(30), &[])
                .await
                .unwrap();
            let jobs: Vec<_> = claimed.iter().map(|j| (j.id, j.attempt)).collect();
            assert_eq!(
                queue.protocol().confirm_started(&jobs).await.unwrap().len(),
                3
            );
            let more = queue
                .protocol()
                .claim("w", 1, Duration::from_secs(30), &jobs)
                .await
                .unwrap();
            assert!(more.is_empty());
            assert_eq!(queue.stats().await.unwrap().done, 3);
            let public: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT has_function_privilege('public', \
                 '{quoted}.ack(bigint[], integer[], smallint[])', 'EXECUTE')"
            )))
            .fetch_one(queue.postgres_pool().unwrap())
            .await
            .unwrap();
            assert!(!public, "PUBLIC may not run the new functions either");
            // The maintenance's truncation, in migration 6's form (NOWAIT).
            let truncated: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT {quoted}.truncate_drained('ready', ARRAY[5], 7, 0)"
            )))
            .fetch_one(queue.postgres_pool().unwrap())
            .await
            .unwrap();
            assert_eq!(truncated, 1, "segment 5 is empty");
            let public: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT has_function_privilege('public', \
                 '{quoted}.truncate_drained(text, integer[], integer, integer)', 'EXECUTE')"
            )))
            .fetch_one(queue.postgres_pool().unwrap())
            .await
            .unwrap();
            assert!(!public, "nor migration 6's");
            // Migration 15's tables, granted as `ready` was.
            assert!(queue.pause().await.unwrap());
            assert!(queue.resume().await.unwrap());
            let every = lockwise::queue::Schedule::every(Duration::from_secs(1)).unwrap();
            let periodic = queue
                .periodic("grants", every, Job::new(serde_json::json!(1)))
                .unwrap();
            assert!(periodic.tick().await.unwrap().is_empty());
        }
    })
    .await;
    drop(schema);
    sql_now(
        &admin,
        &[format!("DROP OWNED BY {role}"), format!("DROP ROLE {role}")],
    );
    outcome.unwrap();
}

/// How many segments `truncate` truncated, called again every 50 ms for up to 2 s while it
/// truncates none.
async fn eventually<F, Fut>(truncate: F) -> i32
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<i32, sqlx::Error>>,
{
    for _ in 0..40 {
        let got = truncate().await.unwrap();
        if got > 0 {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    0
}

/// A schema made before the table of who holds what existed, used by a role that may not
/// create it: locks are taken all the same, listed without their keys; once an administrator
/// connects, the table exists with the grants of `fence`, and the role's locks are named.
#[tokio::test]
async fn postgres_locks_of_a_schema_older_than_the_holder_table() {
    let schema = PgSchema::new("privholder");
    let admin = schema.url().to_owned();
    let name = schema.name().to_owned();
    let admin_backend = || {
        PostgresBackend::builder(admin.as_str())
            .schema(name.as_str())
            .connect()
    };
    drop(admin_backend().await.unwrap());
    let role = unique("lw_user").replace('-', "_");
    sql_now(
        &admin,
        &[
            format!("DROP TABLE \"{name}\".lock_holder"),
            format!("CREATE ROLE {role} LOGIN"),
        ]
        .into_iter()
        .chain(documented_grants(&name, &role))
        .collect::<Vec<_>>(),
    );
    let as_user = admin.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    let user_locker = || {
        let (as_user, name) = (as_user.clone(), name.clone());
        async move {
            Locker::new(
                PostgresBackend::builder(as_user.as_str())
                    .schema(name.as_str())
                    .connect()
                    .await
                    .unwrap(),
            )
        }
    };
    let opts = LockOptions::ttl(Duration::from_secs(10));
    let key = unique("report");
    let outcome = tokio::spawn({
        let (admin_backend, user_locker) = (admin_backend(), user_locker());
        async move {
            let locker = user_locker.await;
            let guard = locker.try_acquire(&key, &opts).await.unwrap().unwrap();
            // Its loss check has seen it long since, and had nowhere to write.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(locker.held(&key).await.unwrap().is_empty());
            let unnamed = locker.held("").await.unwrap();
            assert!(
                unnamed
                    .iter()
                    .any(|l| l.key.starts_with("<advisory lock") && l.token.is_none()),
                "{unnamed:?}"
            );
            assert!(guard.release().await.unwrap());
            // The administrator connects: the table is made, with the grants of `fence`.
            drop(admin_backend.await.unwrap());
            let locker = Locker::new(
                PostgresBackend::builder(as_user.as_str())
                    .schema(name.as_str())
                    .connect()
                    .await
                    .unwrap(),
            );
            let guard = locker.try_acquire(&key, &opts).await.unwrap().unwrap();
            let held = listed(&locker, &key).await;
            assert_eq!(held.len(), 1, "{held:?}");
            assert_eq!(held[0].token, Some(guard.token()));
            assert!(guard.release().await.unwrap());
        }
    })
    .await;
    drop(schema);
    sql_now(
        &admin,
        &[format!("DROP OWNED BY {role}"), format!("DROP ROLE {role}")],
    );
    outcome.unwrap();
}
