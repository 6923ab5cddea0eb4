//! A holder's link to its server goes bad while a rival's stays healthy (a TCP proxy from the
//! testkit sits on the holder's link only): reliability catalogue R4 and R5.
//!
//! - R5 (Redis): replies held back during acquire and during renewal. A grant that arrives
//!   after its local deadline is never used; a holder whose renewals stall stops its work
//!   before the rival can get the lock.
//! - R4 (PostgreSQL): a holder's write delayed on its link past its TTL reaches the fenced
//!   table after the rival's newer write, and is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockwise::backend::postgres::PostgresBackend;
use lockwise::backend::redis::RedisBackend;
use lockwise::postgres::Store;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::proxy::TcpProxy;
use lockwise_testkit::{PgSchema, RedisNamespace, postgres_url, redis_url, unique};
use tokio::time::Instant;

const ROUNDS: usize = 3;
const TTL: Duration = Duration::from_secs(1);

fn port_of(url: &str) -> u16 {
    url::Url::parse(url).unwrap().port().unwrap()
}

async fn redis_locker(url: &str, prefix: &str) -> Locker {
    Locker::new(
        RedisBackend::builder(url)
            .prefix(prefix)
            .connect()
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_reply_comes_after_the_deadline_is_never_used() {
    let ns = RedisNamespace::new("late-grant");
    let proxy = TcpProxy::start(port_of(&redis_url()));
    let through = format!("redis://127.0.0.1:{}/", proxy.port());
    let holder = redis_locker(&through, ns.prefix()).await;
    let rival = redis_locker(ns.url(), ns.prefix()).await;
    let mut late = 0;
    for round in 0..ROUNDS {
        let key = format!("late-{round}");
        // Each way 700 ms: the reply comes back 1.4 s after the send, past `send + TTL − drift`.
        proxy.delay(Duration::from_millis(700));
        let sent = Instant::now();
        let got = holder.try_acquire(&key, &LockOptions::ttl(TTL)).await;
        let answered = sent.elapsed();
        assert!(answered >= TTL, "the reply was not late ({answered:?})");
        assert!(
            matches!(got, Ok(None)),
            "a grant that came back after {answered:?} was handed out: {got:?}"
        );
        late += 1;
        proxy.delay(Duration::ZERO);
        // The discarded grant is released by its owner token (or expires): the rival gets in.
        let rival_guard = rival
            .acquire(&key, &LockOptions::ttl(TTL).wait(Duration::from_secs(5)))
            .await
            .unwrap();
        rival_guard.release().await.unwrap();
    }
    println!("{late} late grants injected, 0 used");
    assert_eq!(late, ROUNDS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_stall_stops_before_the_rival_gets_in() {
    let ns = RedisNamespace::new("stall");
    let proxy = TcpProxy::start(port_of(&redis_url()));
    let through = format!("redis://127.0.0.1:{}/", proxy.port());
    let holder = redis_locker(&through, ns.prefix()).await;
    let rival = redis_locker(ns.url(), ns.prefix()).await;
    let mut margins = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("stall-{round}");
        let guard = holder
            .try_acquire(&key, &LockOptions::ttl(TTL))
            .await
            .unwrap()
            .unwrap();
        let last_work = Arc::new(Mutex::new(Instant::now()));
        let working = last_work.clone();
        let held_before = proxy.held();
        let run = guard.run(async move {
            loop {
                *working.lock().unwrap() = Instant::now();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        let rival_wait = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            proxy.cut();
            let g = rival
                .acquire(&key, &LockOptions::ttl(TTL).wait(Duration::from_secs(5)))
                .await
                .unwrap();
            (Instant::now(), g)
        };
        let (stopped, (granted, rival_guard)) = tokio::join!(run, rival_wait);
        assert!(stopped.is_err(), "the work was not stopped");
        let last = *last_work.lock().unwrap();
        assert!(
            last < granted,
            "the holder worked {:?} after the rival got the lock",
            last - granted
        );
        margins.push(granted - last);
        proxy.heal();
        assert!(proxy.held() > held_before, "the cut held no traffic");
        rival_guard.release().await.unwrap();
        drop(guard);
    }
    let ms: Vec<String> = margins
        .iter()
        .map(|d| format!("{:.0}", d.as_secs_f64() * 1e3))
        .collect();
    println!(
        "{ROUNDS} stalls injected (link cut); 0 overlaps; the holder's last work came [{}] ms before the rival's grant",
        ms.join(", ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_delayed_past_the_ttl_is_refused_after_the_rivals() {
    let schema = PgSchema::new("delayed");
    let direct = sqlx::PgPool::connect(schema.url()).await.unwrap();
    let store = Store::with_schema(direct.clone(), schema.name()).unwrap();
    store.migrate().await.unwrap();
    let proxy = TcpProxy::start(port_of(&postgres_url()));
    let through = schema.url().replace(
        &format!(":{}/", port_of(&postgres_url())),
        &format!(":{}/", proxy.port()),
    );
    let connect = |url: String| {
        let schema = schema.name().to_owned();
        async move {
            Locker::new(
                PostgresBackend::builder(url)
                    .schema(schema)
                    .connect()
                    .await
                    .unwrap(),
            )
        }
    };
    let holder = connect(through.clone()).await;
    let rival = connect(schema.url().to_owned()).await;
    // No ping before each use: on the slowed link it would cost a round trip of its own.
    let holder_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect(&through)
        .await
        .unwrap();
    let fence_sql_prefix = format!("SELECT \"{}\".fence", schema.name());
    let mut refused = 0;
    for round in 0..ROUNDS {
        let resource = unique("resource");
        let key = format!("delayed-{round}");
        let guard = holder
            .try_acquire(&key, &LockOptions::ttl(TTL))
            .await
            .unwrap()
            .unwrap();
        let stale = guard.token();
        // The holder's link slows past its TTL: its lease ends on the server, the rival takes
        // the lock; meanwhile a write the holder sent is still on its way.
        proxy.delay(Duration::from_millis(1_500));
        let rival_guard = rival
            .acquire(&key, &LockOptions::ttl(TTL).wait(Duration::from_secs(15)))
            .await
            .unwrap();
        // The lease is gone: a shorter delay still keeps the holder's write on its way while
        // the rival writes (200 ms), and the write is one round trip (the simple protocol).
        proxy.delay(Duration::from_millis(700));
        let holder_write = tokio::spawn({
            let sql = format!("{fence_sql_prefix}('{resource}', {})", stale.get());
            let pool = holder_pool.clone();
            async move { sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&pool).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut tx = direct.begin().await.unwrap();
        store
            .fence(&mut tx, &resource, rival_guard.token())
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let late = holder_write.await.unwrap();
        assert!(
            late.is_err(),
            "the delayed write with token {stale} was accepted after {}",
            rival_guard.token()
        );
        assert_eq!(
            store.fenced_token(&resource).await.unwrap(),
            Some(rival_guard.token())
        );
        refused += 1;
        proxy.delay(Duration::ZERO);
        assert!(guard.is_lost());
        rival_guard.release().await.unwrap();
    }
    println!("{refused} delayed stale writes injected; 0 accepted, {refused} refused");
}
