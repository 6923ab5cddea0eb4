//! Opening a queue from a URL, migrating old stores, and MariaDB's limits and reaper.

use super::*;

/// A connection of the other database is a typed configuration error, not a panic.
#[tokio::test]
async fn enqueue_in_with_the_other_database_s_connection_is_a_config_error() {
    let (_s, pg) = queue("q").await;
    let (_d, my) = my_queue("q").await;
    let mut my_conn = my.mysql_pool().unwrap().acquire().await.unwrap();
    let err = pg
        .enqueue_in(&mut my_conn, Job::new(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );
    let mut pg_conn = pg.postgres_pool().unwrap().acquire().await.unwrap();
    let err = my
        .enqueue_in(&mut pg_conn, Job::new(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );
}

/// `queue::connect` opens and migrates a queue from a postgres://, mysql:// or mariadb:// URL.
#[tokio::test]
async fn connect_opens_a_migrated_queue_from_a_url_on_both_databases() {
    let schema = PgSchema::new("q");
    let options = ConnectOptions::default().queue("q").max_connections(2);
    let pg = lockwise::queue::connect(schema.url(), options.clone().schema(schema.name()))
        .await
        .unwrap();
    assert!(pg.postgres_pool().is_some());
    let id = pg.enqueue(Job::new(json!({}))).await.unwrap();
    assert_eq!(waiting(pg.stats().await.unwrap()), 1);
    let claimed = pg
        .protocol()
        .claim("w", 1, Duration::from_secs(30), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);

    let db = MysqlDatabase::mysql("q");
    for url in [db.url(), db.url().replacen("mysql://", "mariadb://", 1)] {
        let my = lockwise::queue::connect(&url, options.clone())
            .await
            .unwrap();
        assert!(my.mysql_pool().is_some(), "{url}");
        my.enqueue(Job::new(json!({})).key("once")).await.unwrap();
        assert_eq!(waiting(my.stats().await.unwrap()), 1, "{url}");
    }
}

/// A malformed URL, another scheme or a bad schema is a configuration error; a server that
/// does not answer is a backend error within seconds, and no message shows the password.
#[tokio::test]
async fn connect_gives_typed_errors_without_the_password() {
    let options = ConnectOptions::default();
    for url in [
        "not a url",
        "redis://127.0.0.1/",
        "file:///tmp/x",
        "postgres://",
    ] {
        let err = lockwise::queue::connect(url, options.clone())
            .await
            .unwrap_err();
        assert!(
            matches!(err, lockwise::Error::InvalidConfig { .. }),
            "{url}: {err}"
        );
    }
    let err = lockwise::queue::connect(
        &lockwise_testkit::postgres_url(),
        options.clone().schema("Not A Schema"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, lockwise::Error::InvalidConfig { .. }),
        "{err}"
    );

    let port = lockwise_testkit::closed_port();
    for url in [
        format!("postgres://postgres:pw-secret@127.0.0.1:{port}/test"),
        format!("mysql://root:pw-secret@127.0.0.1:{port}/test"),
    ] {
        let start = Instant::now();
        let err = lockwise::queue::connect(&url, options.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, lockwise::Error::Backend { .. }), "{err}");
        assert!(err.is_transient());
        assert!(!format!("{err} {err:?}").contains("pw-secret"), "{err:?}");
        assert!(
            start.elapsed() < Duration::from_secs(6),
            "{:?}",
            start.elapsed()
        );
    }
}

/// `ConnectOptions::migrate(false)` creates nothing: a missing store is `NotMigrated` (and
/// still missing afterwards), an older one is `NotMigrated { outdated: true }`, and a migrated
/// one opens and answers.
#[tokio::test]
async fn connect_without_migrating_creates_nothing_on_both_databases() {
    use lockwise::Error;
    let not_migrated = |r: lockwise::Result<Queue>| match r {
        Err(Error::NotMigrated { outdated, .. }) => outdated,
        other => panic!("expected NotMigrated, got {other:?}"),
    };
    let options = ConnectOptions::default()
        .queue("q")
        .max_connections(2)
        .migrate(false);

    let schema = PgSchema::new("q");
    let pg_options = options.clone().schema(schema.name());
    let pool = PgPoolOptions::new().connect(schema.url()).await.unwrap();
    let schemas = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1";
    for _ in 0..2 {
        let err = lockwise::queue::connect(schema.url(), pg_options.clone()).await;
        assert!(!not_migrated(err));
        let n: i64 = sqlx::query_scalar(schemas)
            .bind(schema.name())
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "the schema was not created");
    }
    let old = format!(
        "CREATE SCHEMA \"{0}\"; CREATE TABLE \"{0}\".queue_migrations (version integer); \
         INSERT INTO \"{0}\".queue_migrations VALUES (1)",
        schema.name()
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let err = lockwise::queue::connect(schema.url(), pg_options.clone()).await;
    assert!(not_migrated(err), "version 1 of 2 is outdated");

    let db = MysqlDatabase::mysql("q");
    let my_pool = sqlx::mysql::MySqlPoolOptions::new()
        .connect(&db.url())
        .await
        .unwrap();
    let tables = "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.tables \
                  WHERE table_schema = DATABASE()";
    for _ in 0..2 {
        let err = lockwise::queue::connect(&db.url(), options.clone()).await;
        assert!(!not_migrated(err));
        let n: i64 = sqlx::query_scalar(tables)
            .fetch_one(&my_pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "no table was created");
    }
    sqlx::raw_sql("CREATE TABLE lockwise_jobs (id BIGINT PRIMARY KEY)")
        .execute(&my_pool)
        .await
        .unwrap();
    let err = lockwise::queue::connect(&db.url(), options.clone()).await;
    assert!(not_migrated(err), "a table without `started` is outdated");
    sqlx::raw_sql("DROP TABLE lockwise_jobs")
        .execute(&my_pool)
        .await
        .unwrap();

    // Once migrated, both open without migrating.
    let migrated = ConnectOptions::default().queue("q").max_connections(2);
    lockwise::queue::connect(&db.url(), migrated.clone())
        .await
        .unwrap();
    let my = lockwise::queue::connect(&db.url(), options.clone())
        .await
        .unwrap();
    assert_eq!(waiting(my.stats().await.unwrap()), 0);
    let other = PgSchema::new("q");
    lockwise::queue::connect(other.url(), migrated.schema(other.name()))
        .await
        .unwrap();
    let pg = lockwise::queue::connect(other.url(), options.schema(other.name()))
        .await
        .unwrap();
    assert_eq!(waiting(pg.stats().await.unwrap()), 0);
}

/// A schema at version 2 (as an older lockwise left it) with jobs in every state migrates to
/// the current version with its jobs carried over: a running job's worker still completes it,
/// and the new states work.
#[tokio::test]
async fn a_version_2_schema_migrates_with_its_jobs_in_flight() {
    let schema = PgSchema::new("q");
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(schema.url())
        .await
        .unwrap();
    let quoted = format!("\"{}\"", schema.name());
    let fill = |sql: &str| {
        sql.replace("{schema}", &quoted)
            .replace("{channel}", "x_jobs")
    };
    let old = format!(
        "{}\n{}\nCREATE TABLE {quoted}.queue_migrations (version integer PRIMARY KEY);\n\
         INSERT INTO {quoted}.queue_migrations VALUES (1), (2);\n\
         INSERT INTO {quoted}.jobs (queue, payload, state, attempt, lease_until, worker)\n\
         VALUES ('q', '{{\"n\": 1}}', 'running', 1, now() + interval '30 seconds', 'old'),\n\
                ('q', '{{\"n\": 2}}', 'available', 0, NULL, NULL),\n\
                ('q', '{{\"n\": 3}}', 'dead', 5, NULL, NULL)",
        fill(include_str!("../../sql/postgres/queue/v1.sql")),
        fill(include_str!("../../sql/postgres/queue/v2.sql")),
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(old))
        .execute(&pool)
        .await
        .unwrap();
    let options = ConnectOptions::default().queue("q").schema(schema.name());
    let outdated = lockwise::queue::connect(schema.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(schema.url(), options)
        .await
        .unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM {quoted}.all_jobs ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let (running, ready, dead) = (JobId(ids[0]), JobId(ids[1]), JobId(ids[2]));
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.running, stats.dead), (1, 1, 1));
    // The old worker's execution still owns its job and completes it.
    assert_eq!(
        q.protocol()
            .heartbeat(&[(running, 1)], Duration::from_secs(30))
            .await
            .unwrap(),
        vec![running]
    );
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    // The new state exists, and the dead letter can still be retried.
    assert!(q.cancel(ready).await.unwrap());
    assert_eq!(
        q.job(ready).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(q.retry(dead).await.unwrap());
    let version: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT max(version) FROM {quoted}.queue_migrations"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(version, 15);
}

/// MariaDB tables of version 2 with jobs in flight migrate to the current version: the running
/// job still completes, and the version-3 features (cancel, key windows) work.
#[tokio::test]
async fn mariadb_tables_of_version_2_migrate_with_their_jobs_in_flight() {
    let db = MysqlDatabase::mysql("q");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&db.url())
        .await
        .unwrap();
    let fill = |sql: &str| sql.replace("{jobs}", "lockwise_jobs");
    for sql in [
        fill(include_str!("../../sql/mysql/queue/v1.sql")),
        fill(include_str!("../../sql/mysql/queue/v2.sql")),
        "INSERT INTO lockwise_jobs (queue, payload, state, attempt, lease_until, worker, \
         idempotency_key) VALUES \
         ('q', '{}', 'running', 1, NOW(6) + INTERVAL 30 SECOND, 'old', NULL), \
         ('q', '{}', 'available', 0, NULL, NULL, 'k')"
            .to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let options = ConnectOptions::default().queue("q");
    let outdated = lockwise::queue::connect(&db.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(&db.url(), options).await.unwrap();
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT CAST(id AS SIGNED) FROM lockwise_jobs ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let (running, keyed) = (JobId(ids[0]), JobId(ids[1]));
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    let same = q
        .enqueue_with_status(Job::new(json!({})).key("k"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (keyed, true));
    let fresh = q
        .enqueue_with_status(Job::new(json!({})).key("k").unique_for(Duration::ZERO))
        .await
        .unwrap();
    assert!(!fresh.duplicate);
    assert!(q.cancel(fresh.id).await.unwrap());
}

/// Tables of version 3, in the server's default case- and accent-insensitive collation, move to
/// the binary collation of version 4 with every job kept: the keyed job still holds its exact
/// key (and only it), a job in flight still completes, and text outside latin1 is unchanged.
#[tokio::test]
async fn mariadb_tables_of_version_3_migrate_to_exact_keys_with_their_jobs() {
    let db = MysqlDatabase::mysql("q");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&db.url())
        .await
        .unwrap();
    let fill = |sql: &str| sql.replace("{jobs}", "lockwise_jobs");
    for sql in [
        fill(include_str!("../../sql/mysql/queue/v1.sql")),
        fill(include_str!("../../sql/mysql/queue/v2.sql")),
        fill(include_str!("../../sql/mysql/queue/v3.sql")),
        "ALTER TABLE lockwise_jobs CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
            .to_owned(),
        "INSERT INTO lockwise_jobs (queue, payload, state, attempt, lease_until, worker, \
         idempotency_key) VALUES \
         ('q', '{\"v\": \"r\u{e9}sum\u{e9} \u{65e5}\u{672c} \u{1f512}\"}', 'running', 1, \
          NOW(6) + INTERVAL 30 SECOND, 'old', NULL), \
         ('q', '{}', 'available', 0, NULL, NULL, 'Abc')"
            .to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
    }
    let options = ConnectOptions::default().queue("q");
    let outdated = lockwise::queue::connect(&db.url(), options.clone().migrate(false)).await;
    assert!(
        matches!(
            outdated,
            Err(lockwise::Error::NotMigrated { outdated: true, .. })
        ),
        "{outdated:?}"
    );
    let q = lockwise::queue::connect(&db.url(), options.clone())
        .await
        .unwrap();
    let collations: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT collation_name FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'lockwise_jobs' \
         AND collation_name IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(collations, vec!["utf8mb4_nopad_bin".to_owned()]);
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT CAST(id AS SIGNED) FROM lockwise_jobs ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let (running, keyed) = (JobId(ids[0]), JobId(ids[1]));
    let job = q.job(running).await.unwrap().unwrap();
    assert_eq!(
        job.payload,
        json!({"v": "r\u{e9}sum\u{e9} \u{65e5}\u{672c} \u{1f512}"})
    );
    assert_eq!(q.protocol().complete(&[(running, 1)]).await.unwrap(), 1);
    let same = q
        .enqueue_with_status(Job::new(json!({})).key("Abc"))
        .await
        .unwrap();
    assert_eq!((same.id, same.duplicate), (keyed, true));
    for other in ["abc", "Abc ", "ABC"] {
        let new = q
            .enqueue_with_status(Job::new(json!({})).key(other))
            .await
            .unwrap();
        assert!(!new.duplicate, "{other:?} was taken for Abc");
    }
    // Migrated once: a second connect sees the latest version and changes nothing.
    lockwise::queue::connect(&db.url(), options.migrate(false))
        .await
        .unwrap();
}

/// A payload larger than a statement can carry on the server is refused before anything is
/// sent (`InvalidJob`, naming `max_allowed_packet`), alone or among other jobs, and nothing of
/// the call is stored; the connection stays usable.
#[tokio::test]
async fn a_payload_over_max_allowed_packet_is_refused_before_anything_is_stored() {
    let (_db, q) = my_queue("q").await;
    let packet: u64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS UNSIGNED)")
        .fetch_one(q.mysql_pool().unwrap())
        .await
        .unwrap();
    let huge = json!({"blob": "x".repeat(usize::try_from(packet).unwrap())});
    let err = q.enqueue(Job::new(huge.clone())).await.unwrap_err();
    assert!(
        matches!(&err, lockwise::Error::InvalidJob { reason } if reason.contains("max_allowed_packet")),
        "{err:?}"
    );
    assert!(err.is_invalid_input());
    let err = q
        .enqueue_many([Job::new(json!({"small": 1})), Job::new(huge)])
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidJob { .. }), "{err:?}");
    assert_eq!(waiting(q.stats().await.unwrap()), 0, "nothing stored");
    // Just under the limit goes, alone.
    let limit = usize::try_from(packet).unwrap() - (16 << 10);
    let fits = json!({"blob": "x".repeat(limit - 20)});
    assert!(fits.to_string().len() <= limit);
    q.enqueue(Job::new(fits)).await.unwrap();
    assert_eq!(waiting(q.stats().await.unwrap()), 1);
}

/// The MariaDB reaper never waits for a worker's statement on a job: an expired lease that a
/// heartbeat or an acknowledgement in flight holds (here a transaction that locks the row as
/// they do) is left to that statement, the other expired leases are rescued at once, and the
/// one left is rescued at the next round. Before, the reaper's UPDATE waited for the row (up
/// to `innodb_lock_wait_timeout`, 50 s) and could deadlock with an acknowledgement, which
/// locks its rows in id order where the reaper went in lease order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_reaper_skips_a_lease_a_worker_holds_and_rescues_the_rest() {
    let (_db, q) = my_queue("reapskip").await;
    q.enqueue_many((0..2).map(|n| Job::new(json!({ "n": n }))))
        .await
        .unwrap();
    let claimed = q
        .protocol()
        .claim("w", 2, Duration::from_secs(1), &[])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let (held_id, free_id) = (claimed[0].id, claimed[1].id);
    sleep(Duration::from_millis(1_200)).await;
    let pool = q.mysql_pool().unwrap().clone();
    let mut heartbeat = pool.begin().await.unwrap();
    let locked: Vec<u64> =
        sqlx::query_scalar("SELECT id FROM lockwise_jobs WHERE id = ? FOR UPDATE")
            .bind(held_id.0)
            .fetch_all(&mut *heartbeat)
            .await
            .unwrap();
    assert_eq!(locked, vec![held_id.0 as u64], "the job is there");
    let reaped = tokio::time::timeout(Duration::from_secs(5), q.protocol().reap()).await;
    let state = |id| {
        let q = q.clone();
        async move { q.job(id).await.unwrap().unwrap().state }
    };
    let (free, held) = (state(free_id).await, state(held_id).await);
    heartbeat.rollback().await.unwrap();
    let reaped = reaped
        .expect("the reaper waited for the lease a heartbeat holds")
        .unwrap();
    assert_eq!(reaped, 1, "the lease nobody holds is rescued");
    assert_eq!(free, JobState::Ready);
    assert_eq!(held, JobState::Running);
    assert_eq!(
        q.protocol().reap().await.unwrap(),
        1,
        "rescued at the next round"
    );
    assert_eq!(state(held_id).await, JobState::Ready);
}

/// Each MariaDB database's queue has a reaper lock of its own: while another database's
/// reaper holds its lock (mid-round), this one still rescues its expired leases; while this
/// queue's own lock is held, it skips its round. (The lock was once named after the table
/// alone, which every database's `lockwise_jobs` shared.)
#[tokio::test]
async fn mariadb_reapers_of_two_databases_do_not_share_a_lock() {
    let (_a, mine) = my_queue("reap_a").await;
    let (_b, other) = my_queue("reap_b").await;
    let id = mine.enqueue(Job::new(json!({}))).await.unwrap();
    let claimed = mine
        .protocol()
        .claim("w", 1, Duration::from_millis(200), &[])
        .await
        .unwrap();
    assert_eq!(claimed[0].id, id);
    sleep(Duration::from_millis(400)).await;
    // reap.sql's lock name, on a session of the given queue's database.
    let hold = |q: &Queue| {
        let pool = q.mysql_pool().unwrap().clone();
        async move {
            let mut conn = pool.acquire().await.unwrap();
            let got: Option<i64> = sqlx::query_scalar(
                "SELECT GET_LOCK(CONCAT('lockwise:', MD5(CONCAT_WS('.', DATABASE(), \
                 'lockwise_jobs:reaper'))), 0)",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            assert_eq!(got, Some(1));
            conn
        }
    };
    let mut own = hold(&mine).await;
    assert_eq!(
        mine.protocol().reap().await.unwrap(),
        0,
        "its own reaper lock is held"
    );
    sqlx::query("DO RELEASE_ALL_LOCKS()")
        .execute(&mut *own)
        .await
        .unwrap();
    let _theirs = hold(&other).await;
    assert_eq!(
        mine.protocol().reap().await.unwrap(),
        1,
        "another database's reaper does not stop this one"
    );
}
