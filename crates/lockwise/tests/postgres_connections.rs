//! What lockwise's PostgreSQL connections look like to the server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::LockOptions;
use lockwise::backend::postgres::PostgresBackend;
use lockwise_testkit::PgSchema;

/// The `application_name` of the session holding a lock taken through `url`.
async fn application_name(schema: &PgSchema, url: &str) -> String {
    let backend = PostgresBackend::builder(url)
        .schema(schema.name())
        .connect()
        .await
        .unwrap();
    let locker = lockwise::Locker::new(backend.clone());
    let guard = locker
        .try_acquire("app", &LockOptions::ttl(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    let pid = backend.session_pid("app", guard.owner()).await.unwrap();
    let pool = sqlx::PgPool::connect(schema.url()).await.unwrap();
    let name: String =
        sqlx::query_scalar("SELECT application_name FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_one(&pool)
            .await
            .unwrap();
    guard.release().await.unwrap();
    name
}

#[tokio::test]
async fn application_name_is_kept_and_marked() {
    let schema = PgSchema::new("appname");
    assert_eq!(application_name(&schema, schema.url()).await, "lockwise");
    let sep = if schema.url().contains('?') { '&' } else { '?' };
    let named = format!("{}{sep}application_name=billing", schema.url());
    assert_eq!(
        application_name(&schema, &named).await,
        "billing (lockwise)"
    );
}
