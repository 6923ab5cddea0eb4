//! A fencing token binds as a BIGINT and reads back from one, on both databases, and a token
//! that does not fit is an error, never a wrapped number.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use lockwise::FencingToken;
use lockwise_testkit::{PgSchema, TestDatabase};

#[tokio::test]
async fn a_token_binds_and_decodes_as_bigint_on_postgres() {
    let schema = PgSchema::new("tokensql");
    let pool = sqlx::PgPool::connect(schema.url()).await.unwrap();
    let token = FencingToken::new(1_839_300_129_712_128);
    let back: FencingToken = sqlx::query_scalar("SELECT $1::bigint")
        .bind(token)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(back, token);
    let too_big = sqlx::query_scalar::<_, i64>("SELECT $1::bigint")
        .bind(FencingToken::new(u64::MAX))
        .fetch_one(&pool)
        .await;
    assert!(too_big.is_err(), "{too_big:?}");
    let negative = sqlx::query_scalar::<_, FencingToken>("SELECT -1::bigint")
        .fetch_one(&pool)
        .await;
    assert!(negative.is_err(), "{negative:?}");
}

#[tokio::test]
async fn a_token_binds_and_decodes_as_bigint_on_mariadb() {
    let db = TestDatabase::mysql("tokensql");
    let pool = sqlx::MySqlPool::connect(&db.url()).await.unwrap();
    let token = FencingToken::new(42);
    let back: FencingToken = sqlx::query_scalar("SELECT CAST(? AS SIGNED)")
        .bind(token)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(back, token);
    let too_big = sqlx::query_scalar::<_, i64>("SELECT CAST(? AS SIGNED)")
        .bind(FencingToken::new(u64::MAX))
        .fetch_one(&pool)
        .await;
    assert!(too_big.is_err(), "{too_big:?}");
}
