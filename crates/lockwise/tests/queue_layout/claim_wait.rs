//! Migration 14: the claims answer how long each job waited, and keep their grants.

use super::*;

/// A store of version 13 whose administrator took EXECUTE on the claims away from PUBLIC and
/// gave it to one role migrates to version 14: the new claims have exactly those grants, the
/// old functions are gone, and the claim statement of a version-13 process (six columns, by
/// name) still claims.
#[tokio::test]
pub(super) async fn a_version_13_store_s_claims_keep_their_grants_and_old_callers() {
    let schema = store_at("claim_wait", 13).await;
    let quoted = format!("\"{}\"", schema.name());
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(schema.url())
        .await
        .unwrap();
    let claims = [
        format!("{quoted}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])"),
        format!(
            "{quoted}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])"
        ),
    ];
    for claim in &claims {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "REVOKE EXECUTE ON FUNCTION {claim} FROM PUBLIC; \
             GRANT EXECUTE ON FUNCTION {claim} TO pg_monitor"
        )))
        .execute(&pool)
        .await
        .unwrap();
    }

    let q = reopen(&schema).await;
    assert_eq!(version(&pool, &quoted).await, Some(LATEST));
    for claim in &claims {
        let grantees: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END \
               FROM pg_proc p, aclexplode(p.proacl) a \
              WHERE p.oid = '{claim}'::regprocedure AND a.privilege_type = 'EXECUTE' \
                AND a.grantee <> p.proowner"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(grantees, ["pg_monitor"], "{claim}");
    }
    let leftovers: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM pg_proc \
          WHERE pronamespace = '{quoted}'::regnamespace AND proname LIKE 'claim%v9'"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(leftovers, 0);

    let id = q.enqueue(Job::new(json!("old caller"))).await.unwrap();
    let claimed: Vec<(i64, i32)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT claimed_id AS id, claimed_attempt AS attempt \
           FROM {quoted}.claim('q', 10, 30, 'old', '{{}}', '{{}}', '{{}}')"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(claimed, [(id.0, 1)]);
}
