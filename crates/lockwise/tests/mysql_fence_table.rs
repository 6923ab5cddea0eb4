//! The MariaDB counter table: created as Aria without transactions (no redo-log flush per
//! grant), an InnoDB table left by an earlier version converted at connect with its rows, and
//! InnoDB kept where durable tokens are asked for or the user may not `ALTER`. (`GET_LOCK`
//! names are server-wide: each test locks its database's name.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::mysql::MysqlBackend;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::{TestDatabase, sql_now, unique};
use sqlx::Connection;

/// The table's engine and create options, as the server reports them.
async fn engine(url: &str) -> (String, String) {
    let mut conn = sqlx::MySqlConnection::connect(url).await.unwrap();
    sqlx::query_as(
        "SELECT ENGINE, CREATE_OPTIONS FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'lockwise_fence'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

/// The table as lockwise 0.x created it, with `key`'s counter far above the clock floor.
fn innodb_table_with_a_high_token(url: &str, key: &str, high: u64) {
    let old = include_str!("../sql/mysql/fence.sql").replace("{engine}", "InnoDB");
    sql_now(
        url,
        &[
            old,
            format!(
                "INSERT INTO lockwise_fence VALUES (X'{}', {high})",
                hex(key)
            ),
        ],
    );
}

fn hex(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(10))
}

#[tokio::test]
async fn a_new_table_is_aria_without_transactions() {
    let db = TestDatabase::mysql("fencearia");
    let key = db.name();
    let locker = Locker::new(MysqlBackend::connect(&db.url()).await.unwrap());
    let (engine, options) = engine(&db.url()).await;
    assert_eq!(engine, "Aria");
    assert!(options.contains("transactional=0"), "{options}");
    let mut last = 0;
    for _ in 0..50 {
        let guard = locker.try_acquire(key, &opts()).await.unwrap().unwrap();
        assert!(guard.token().get() > last, "{} after {last}", guard.token());
        last = guard.token().get();
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn an_innodb_table_is_converted_and_keeps_its_counters() {
    let db = TestDatabase::mysql("fenceconv");
    let key = db.name();
    let high = u64::MAX / 4;
    innodb_table_with_a_high_token(&db.url(), db.name(), high);
    let locker = Locker::new(MysqlBackend::connect(&db.url()).await.unwrap());
    assert_eq!(engine(&db.url()).await.0, "Aria");
    let guard = locker.try_acquire(key, &opts()).await.unwrap().unwrap();
    assert_eq!(guard.token().get(), high + 1);
}

#[tokio::test]
async fn durable_tokens_keep_innodb() {
    let db = TestDatabase::mysql("fencedur");
    let key = db.name();
    let durable = || {
        MysqlBackend::builder(db.url())
            .durable_tokens(true)
            .connect()
    };
    let locker = Locker::new(durable().await.unwrap());
    assert_eq!(engine(&db.url()).await.0, "InnoDB");
    let guard = locker.try_acquire(key, &opts()).await.unwrap().unwrap();
    let first = guard.token();
    guard.release().await.unwrap();
    // Another durable process leaves it as it is; a default one converts it, and the
    // counters go on.
    durable().await.unwrap();
    assert_eq!(engine(&db.url()).await.0, "InnoDB");
    let locker = Locker::new(MysqlBackend::connect(&db.url()).await.unwrap());
    assert_eq!(engine(&db.url()).await.0, "Aria");
    let next = locker.try_acquire(key, &opts()).await.unwrap().unwrap();
    assert!(next.token() > first, "{} after {first}", next.token());
}

#[tokio::test]
async fn a_user_who_may_not_alter_keeps_the_innodb_table_and_its_tokens() {
    let db = TestDatabase::mysql("fencepriv");
    let admin = db.url();
    let high = u64::MAX / 4;
    innodb_table_with_a_high_token(&admin, db.name(), high);
    let user = unique("lw").replace('-', "_");
    let user = &user[..user.len().min(32)];
    let name = db.name();
    sql_now(
        &admin,
        &[
            format!("CREATE USER '{user}'@'%'"),
            format!("CREATE USER '{user}'@'localhost'"),
            format!("GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'%'"),
            format!("GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'localhost'"),
        ],
    );
    let as_user = admin.replacen("mysql://root@", &format!("mysql://{user}@"), 1);
    assert_ne!(as_user, admin, "the URL names root: {admin}");
    let key = name.to_owned();
    let outcome = tokio::spawn(async move {
        let key = key.as_str();
        let locker = Locker::new(MysqlBackend::connect(&as_user).await.unwrap());
        let guard = locker.try_acquire(key, &opts()).await.unwrap().unwrap();
        guard.token().get()
    })
    .await;
    let kept = engine(&admin).await.0;
    sql_now(
        &admin,
        &[
            format!("DROP USER '{user}'@'%'"),
            format!("DROP USER '{user}'@'localhost'"),
        ],
    );
    assert_eq!(outcome.unwrap(), high + 1);
    assert_eq!(kept, "InnoDB");
}
