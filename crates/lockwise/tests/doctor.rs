//! `lockwise::doctor`: each check sees the bad condition a test makes on a server it controls
//! (a private Redis or MariaDB started misconfigured, a database, a role, a session of its own
//! on the shared PostgreSQL), and passes on a sound one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::doctor::{Finding, Options, Status, examine};
use lockwise::queue::Queue;
use lockwise_testkit::{
    MariaDbServer, MysqlDatabase, PgBouncer, PgDatabase, PgSchema, PoolMode, RedisServer,
    mysql_url, postgres_url, sql_now,
};
use redis::Commands;

/// The finding of `check`, which must be there.
fn finding<'a>(findings: &'a [Finding], check: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no {check:?} among {findings:#?}"))
}

fn status(findings: &[Finding], check: &str) -> Status {
    finding(findings, check).status
}

fn sound(findings: &[Finding]) {
    let bad: Vec<&Finding> = findings.iter().filter(|f| f.status != Status::Ok).collect();
    assert!(bad.is_empty(), "expected all ok: {bad:#?}");
}

#[tokio::test]
async fn a_sound_redis_passes_every_check() {
    let server = RedisServer::start(&["--appendonly", "yes"]);
    let findings = examine(&server.url(), &Options::default()).await.unwrap();
    assert_eq!(findings.len(), 7, "{findings:#?}");
    sound(&findings);
}

#[tokio::test]
async fn redis_that_evicts_forgets_and_keeps_keys_forever_fails() {
    let server = RedisServer::start(&[
        "--maxmemory-policy",
        "allkeys-lru",
        "--maxmemory",
        "100mb",
        "--appendonly",
        "no",
        "--save",
        "",
    ]);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = conn.set("lockwise:{stuck}", "someone").unwrap();
    let _: () = conn.set_ex("lockwise:{fine}", "someone", 60).unwrap();
    let _: () = conn.set("lockwise:{fine}:fence", "7").unwrap();
    let findings = examine(&server.url(), &Options::default()).await.unwrap();
    assert_eq!(status(&findings, "maxmemory-policy"), Status::Fail);
    assert_eq!(status(&findings, "persistence"), Status::Warn);
    let forever = finding(&findings, "lock keys without TTL");
    assert_eq!(forever.status, Status::Fail, "{forever:?}");
    assert!(forever.reason.contains("lockwise:{stuck}"), "{forever:?}");
    assert!(!forever.reason.contains("fine"), "{forever:?}");
    // Another namespace has no such key.
    let other = examine(&server.url(), &Options::default().namespace("other"))
        .await
        .unwrap();
    assert_eq!(status(&other, "lock keys without TTL"), Status::Ok);
}

#[tokio::test]
async fn a_replica_fails_and_a_primary_with_replicas_warns() {
    let primary = RedisServer::start(&[]);
    let port = primary.port().to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port]);
    let findings = examine(&replica.url(), &Options::default()).await.unwrap();
    assert_eq!(status(&findings, "replication"), Status::Fail);
    // The primary counts the replica once it has synced.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let findings = examine(&primary.url(), &Options::default()).await.unwrap();
        if status(&findings, "replication") == Status::Warn {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            finding(&findings, "replication")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_sound_postgres_passes_every_check() {
    let schema = PgSchema::new("doctor_sound");
    let options = Options::default().namespace(schema.name());
    let findings = examine(schema.url(), &options).await.unwrap();
    assert_eq!(findings.len(), 10, "{findings:#?}");
    // Other tests' sessions come and go on the shared server: only this one's checks.
    for check in [
        "version",
        "synchronous_commit",
        "pooling proxy",
        "grants",
        "jobs past their lease",
        "dead tuples",
        "round trip",
    ] {
        assert_eq!(status(&findings, check), Status::Ok, "{findings:#?}");
    }
}

#[tokio::test]
async fn postgres_commits_that_are_not_durable_warn() {
    let db = PgDatabase::postgres("doctor_commit");
    sql_now(
        &postgres_url(),
        &[format!(
            "ALTER DATABASE \"{}\" SET synchronous_commit = off",
            db.name()
        )],
    );
    let findings = examine(&db.url(), &Options::default()).await.unwrap();
    let commit = finding(&findings, "synchronous_commit");
    assert_eq!(commit.status, Status::Warn, "{commit:?}");
}

#[tokio::test]
async fn a_session_idle_in_a_transaction_with_an_advisory_lock_warns() {
    use sqlx::Connection;
    let db = PgDatabase::postgres("doctor_idle");
    let mut session = sqlx::PgConnection::connect(&db.url()).await.unwrap();
    // A snapshot held too (REPEATABLE READ): the xmin horizon.
    sqlx::raw_sql(
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_advisory_xact_lock(4242, 4242)",
    )
    .execute(&mut session)
    .await
    .unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut session)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let options = Options::default().stale_after(Duration::from_secs(1));
    let findings = examine(&db.url(), &options).await.unwrap();
    for check in ["idle holders", "xmin horizon"] {
        let found = finding(&findings, check);
        assert_eq!(found.status, Status::Warn, "{found:?}");
        assert!(found.reason.contains(&format!("pid {pid}")), "{found:?}");
    }
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut session)
        .await
        .unwrap();
    let findings = examine(&db.url(), &options).await.unwrap();
    let idle = finding(&findings, "idle holders");
    assert!(!idle.reason.contains(&format!("pid {pid}")), "{idle:?}");
}

#[tokio::test]
async fn jobs_past_their_lease_and_a_table_full_of_dead_rows_warn() {
    use lockwise::queue::{ConnectOptions, Job};
    let schema = PgSchema::new("doctor_queue");
    let queue = lockwise::queue::connect(
        schema.url(),
        ConnectOptions::default().queue("q").schema(schema.name()),
    )
    .await
    .unwrap();
    queue
        .enqueue(Job::new(serde_json::json!({})))
        .await
        .unwrap();
    // A worker that claims and is never heard of again.
    let claimed = queue
        .protocol()
        .claim("gone", 1, Duration::from_secs(1), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let options = Options::default()
        .namespace(schema.name())
        .stale_after(Duration::from_millis(500));
    let findings = examine(schema.url(), &options).await.unwrap();
    let past = finding(&findings, "jobs past their lease");
    assert_eq!(past.status, Status::Ok, "{past:?}");
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    let findings = examine(schema.url(), &options).await.unwrap();
    let past = finding(&findings, "jobs past their lease");
    assert_eq!(past.status, Status::Warn, "{past:?}");
    assert!(past.reason.starts_with("1 job(s)"), "{past:?}");
    assert_eq!(
        status(&findings, "dead tuples"),
        Status::Ok,
        "{findings:#?}"
    );
    // 20,000 dead rows that no autovacuum removes.
    let table = format!("\"{}\".filler", schema.name());
    sql_now(
        schema.url(),
        &[
            format!("CREATE TABLE {table} (n int) WITH (autovacuum_enabled = false)"),
            format!("INSERT INTO {table} SELECT generate_series(1, 20000)"),
            format!("DELETE FROM {table}"),
        ],
    );
    // The statistics reach pg_stat_user_tables within a second or so.
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    let dead = loop {
        let findings = examine(schema.url(), &options).await.unwrap();
        let dead = finding(&findings, "dead tuples").clone();
        if dead.status != Status::Ok || std::time::Instant::now() > give_up {
            break dead;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(dead.status, Status::Warn, "{dead:?}");
    assert!(
        dead.reason.contains(".filler has 20000 dead rows"),
        "{dead:?}"
    );
}

#[tokio::test]
async fn a_role_that_cannot_create_the_schema_fails() {
    let db = PgDatabase::postgres("doctor_grants");
    let role = format!("lockwise_doctor_{:08x}", rand::random::<u32>());
    sql_now(&postgres_url(), &[format!("CREATE ROLE {role} LOGIN")]);
    let url = db.url().replacen("postgres@", &format!("{role}@"), 1);
    let findings = examine(&url, &Options::default()).await;
    sql_now(&postgres_url(), &[format!("DROP ROLE IF EXISTS {role}")]);
    let grants = finding(&findings.unwrap(), "grants").clone();
    assert_eq!(grants.status, Status::Fail, "{grants:?}");
    assert!(grants.reason.contains("CREATE"), "{grants:?}");
}

#[tokio::test]
async fn postgres_behind_a_transaction_pooler_warns() {
    let bouncer = PgBouncer::start(PoolMode::Transaction);
    let findings = examine(&bouncer.url_of(&postgres_url()), &Options::default())
        .await
        .unwrap();
    assert_eq!(status(&findings, "pooling proxy"), Status::Warn);
}

#[tokio::test]
async fn mariadb_with_short_timeouts_lazy_flushes_and_small_packets_warns() {
    let server = MariaDbServer::start(&[
        "--wait-timeout=10",
        "--innodb-flush-log-at-trx-commit=2",
        "--max-allowed-packet=1M",
    ]);
    let findings = examine(&server.url(), &Options::default()).await.unwrap();
    for check in [
        "wait_timeout",
        "innodb_flush_log_at_trx_commit",
        "max_allowed_packet",
    ] {
        assert_eq!(status(&findings, check), Status::Warn, "{findings:#?}");
    }
    assert_eq!(status(&findings, "version"), Status::Ok);
}

#[tokio::test]
async fn a_queue_table_that_folds_case_fails_until_migrated() {
    let db = MysqlDatabase::mysql("doctor_collation");
    sql_now(
        &mysql_url(),
        &[format!(
            "CREATE TABLE `{}`.lockwise_jobs (id BIGINT PRIMARY KEY, \
             queue VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci)",
            db.name()
        )],
    );
    let findings = examine(&db.url(), &Options::default()).await.unwrap();
    let collation = finding(&findings, "collation");
    assert_eq!(collation.status, Status::Fail, "{collation:?}");
    assert!(
        collation.reason.contains("utf8mb4_general_ci"),
        "{collation:?}"
    );
    // A sound queue's table.
    let fresh = MysqlDatabase::mysql("doctor_collation_ok");
    let pool = sqlx::MySqlPool::connect(&fresh.url()).await.unwrap();
    Queue::mysql(pool, "q").migrate().await.unwrap();
    let findings = examine(&fresh.url(), &Options::default()).await.unwrap();
    let collation = finding(&findings, "collation");
    assert_eq!(collation.status, Status::Ok, "{collation:?}");
    assert!(collation.reason.contains("byte for byte"), "{collation:?}");
}

#[tokio::test]
async fn embedded_backends_and_bad_urls() {
    let findings = examine("memory:", &Options::default()).await.unwrap();
    assert_eq!(findings.len(), 1);
    assert!(examine("nonsense://x", &Options::default()).await.is_err());
    let closed = format!("redis://127.0.0.1:{}/", lockwise_testkit::closed_port());
    assert!(examine(&closed, &Options::default()).await.is_err());
}
