//! One conformance suite, written once and run against every backend: the behaviour a user of
//! lockwise may rely on whatever the backend.
//!
//! These tests use sub-second TTLs; nextest runs them one at a time (`.config/nextest.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lockwise::backend::file::FileBackend;
use lockwise::backend::memory::MemoryBackend;
use lockwise::backend::mysql::MysqlBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::backend::redis::RedisBackend;
use lockwise::backend::{Attempt, Backend, ReleaseWatch};
use lockwise::{Error, LockOptions, Locker, OwnerToken, Retry};
use lockwise_testkit::{MysqlDatabase, PgSchema, RedisNamespace};
use sqlx::Connection;
use tokio::time::{Instant, sleep, timeout};

const MS: Duration = Duration::from_millis(1);

/// How a case reaches a backend: fresh clients, and a way to delete a lock behind its holder.
enum Harness {
    Memory(MemoryBackend),
    File(tempfile::TempDir),
    Redis(RedisNamespace),
    /// Session-scoped advisory locks; "deleting" a lock terminates its holder's session.
    Postgres(PgSchema),
    /// `GET_LOCK`; "deleting" a lock kills its holder's session.
    Mysql(MysqlDatabase),
}

impl Harness {
    fn memory() -> Self {
        Harness::Memory(MemoryBackend::new())
    }

    fn file() -> Self {
        Harness::File(tempfile::tempdir().expect("tempdir"))
    }

    fn redis() -> Self {
        Harness::Redis(RedisNamespace::new("conformance"))
    }

    fn postgres() -> Self {
        Harness::Postgres(PgSchema::new("conformance"))
    }

    fn mysql() -> Self {
        Harness::Mysql(MysqlDatabase::mysql("conformance"))
    }

    async fn my_backend(db: &MysqlDatabase) -> MysqlBackend {
        MysqlBackend::builder(db.url())
            .namespace(db.name())
            .connect()
            .await
            .expect("connect to MariaDB")
    }

    /// How long the server really keeps a lease of `ttl` without renewal: MySQL's
    /// `wait_timeout` counts whole seconds, so its leases last up to a second longer.
    fn server_lease(&self, ttl_ms: u64) -> Duration {
        match self {
            Harness::Mysql(_) => Duration::from_secs(ttl_ms.div_ceil(1_000)),
            _ => Duration::from_millis(ttl_ms),
        }
    }

    async fn pg_backend(schema: &PgSchema) -> PostgresBackend {
        PostgresBackend::builder(schema.url())
            .schema(schema.name())
            .namespace(schema.name())
            .connect()
            .await
            .expect("connect to PostgreSQL")
    }

    /// A new client (its own connection, where the backend has connections).
    async fn locker(&self) -> Locker {
        match self {
            Harness::Memory(m) => Locker::new(m.clone()),
            Harness::File(dir) => Locker::new(FileBackend::open(dir.path()).expect("open dir")),
            Harness::Redis(ns) => Locker::new(
                RedisBackend::builder(ns.url())
                    .prefix(ns.prefix())
                    .connect()
                    .await
                    .expect("connect to Redis"),
            ),
            Harness::Postgres(schema) => Locker::new(Self::pg_backend(schema).await),
            Harness::Mysql(db) => Locker::new(Self::my_backend(db).await),
        }
    }

    /// Removes the lock whoever holds it (an operator's `DEL`, a failover that lost the key,
    /// `pg_terminate_backend` of the holder's session).
    async fn delete_lock(&self, key: &str) {
        match self {
            Harness::Memory(m) => m.force_delete(key),
            Harness::File(dir) => {
                let lease = dir
                    .path()
                    .join(format!("{}.lease", FileBackend::file_stem(key)));
                std::fs::remove_file(lease).expect("remove lease file");
            }
            Harness::Redis(ns) => {
                let name = format!("{}:{{{key}}}", ns.prefix());
                let n: i64 = ::redis::cmd("DEL")
                    .arg(&name)
                    .query(&mut ns.conn())
                    .expect("DEL");
                assert_eq!(n, 1, "{name} should have existed");
            }
            Harness::Postgres(schema) => {
                // Only this test's own holder: the server is shared.
                let (class, half) = Self::pg_backend(schema).await.advisory_key(key);
                let mut conn = sqlx::PgConnection::connect(schema.url())
                    .await
                    .expect("connect");
                let killed: Vec<bool> = sqlx::query_scalar(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
                     AND granted AND classid = $1::int4::oid AND objid = $2::int4::oid",
                )
                .bind(class)
                .bind(half)
                .fetch_all(&mut conn)
                .await
                .expect("terminate");
                assert_eq!(
                    killed,
                    [true],
                    "exactly the holder's session was terminated"
                );
            }
            Harness::Mysql(db) => {
                let name = Self::my_backend(db).await.lock_name_of(key);
                let mut conn = sqlx::MySqlConnection::connect(&db.url())
                    .await
                    .expect("connect");
                let holder: Option<i64> =
                    sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS SIGNED)")
                        .bind(&name)
                        .fetch_one(&mut conn)
                        .await
                        .expect("IS_USED_LOCK");
                let holder = holder.expect("the lock is held");
                sqlx::query(sqlx::AssertSqlSafe(format!("KILL {holder}")))
                    .execute(&mut conn)
                    .await
                    .expect("KILL");
            }
        }
    }
}

fn ttl(ms: u32) -> LockOptions {
    LockOptions::ttl(ms * MS)
}

async fn two_holders_exclude_each_other(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let opts = ttl(5_000);
    let ga = a
        .try_acquire("k", &opts)
        .await
        .unwrap()
        .expect("A gets the free lock");
    assert!(
        b.try_acquire("k", &opts).await.unwrap().is_none(),
        "B must be refused"
    );
    assert!(
        a.try_acquire("k", &opts).await.unwrap().is_none(),
        "not re-entrant either"
    );
    let other = b
        .try_acquire("other", &opts)
        .await
        .unwrap()
        .expect("other keys are free");
    assert!(ga.release().await.unwrap());
    let gb = b
        .try_acquire("k", &opts)
        .await
        .unwrap()
        .expect("B after A released");
    assert!(gb.release().await.unwrap());
    assert!(other.release().await.unwrap());
}

async fn waiting_times_out_with_a_typed_error(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let held = a.try_acquire("k", &ttl(5_000)).await.unwrap().unwrap();
    let start = Instant::now();
    let err = b
        .acquire("k", &ttl(5_000).wait(300 * MS))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WaitTimeout { .. }), "{err:?}");
    assert!(
        start.elapsed() >= 290 * MS && start.elapsed() < 2_000 * MS,
        "{:?}",
        start.elapsed()
    );
    let none = b
        .acquire("k", &ttl(5_000).retry(Retry::none()))
        .await
        .unwrap_err();
    assert!(matches!(none, Error::WaitTimeout { .. }), "{none:?}");
    assert!(held.release().await.unwrap());
}

/// The lesson's exercise 2: A's lease expires, B acquires, A releases — B still holds.
async fn stale_release_leaves_the_new_holders_lock(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a
        .try_acquire("k", &ttl(200).renew(false))
        .await
        .unwrap()
        .unwrap();
    sleep(h.server_lease(200) + 100 * MS).await;
    let gb = b
        .try_acquire("k", &ttl(5_000))
        .await
        .unwrap()
        .expect("A's lease expired");
    assert!(
        !ga.release().await.unwrap(),
        "A's release must report it no longer held the lock"
    );
    assert!(
        gb.is_held().await.unwrap(),
        "B's lock must survive A's release"
    );
    assert!(b.try_acquire("k", &ttl(5_000)).await.unwrap().is_none());
    assert!(gb.release().await.unwrap());
}

async fn stale_extend_fails(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a
        .try_acquire("k", &ttl(200).renew(false))
        .await
        .unwrap()
        .unwrap();
    sleep(h.server_lease(200) + 100 * MS).await;
    let err = ga.extend(5_000 * MS).await.unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err:?}");
    // Extend never re-creates the lock: it is still free.
    let gb = b
        .try_acquire("k", &ttl(5_000))
        .await
        .unwrap()
        .expect("extend re-created it");
    let err = ga.extend(5_000 * MS).await.unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err:?}");
    assert!(gb.is_held().await.unwrap());
    assert!(gb.release().await.unwrap());
}

async fn fencing_tokens_strictly_increase_across_holders_and_reconnects(h: Harness) {
    let mut last = 0;
    for round in 0..6 {
        let locker = h.locker().await; // a new client, a new connection
        let opts = if round % 2 == 0 {
            ttl(5_000)
        } else {
            ttl(150).renew(false)
        };
        let guard = locker.try_acquire("k", &opts).await.unwrap().unwrap();
        assert!(
            guard.token().get() > last,
            "round {round}: {} after {last}",
            guard.token()
        );
        last = guard.token().get();
        if round % 2 == 0 {
            assert!(guard.release().await.unwrap());
        } else {
            // Let it expire instead (no release, no renewal): the next grant must still be higher.
            std::mem::forget(guard);
            sleep(h.server_lease(150) + 50 * MS).await;
        }
    }
}

async fn expiry_is_honoured(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a
        .try_acquire("k", &ttl(300).renew(false))
        .await
        .unwrap()
        .unwrap();
    sleep(100 * MS).await;
    assert!(
        b.try_acquire("k", &ttl(5_000)).await.unwrap().is_none(),
        "still within the TTL"
    );
    sleep(h.server_lease(300) - 100 * MS + 50 * MS).await;
    let gb = b
        .try_acquire("k", &ttl(5_000))
        .await
        .unwrap()
        .expect("expired after its TTL");
    assert!(
        ga.is_lost(),
        "A's deadline passed, so its lost signal fired"
    );
    assert!(!ga.is_held().await.unwrap());
    assert!(gb.release().await.unwrap());
}

/// With a fallback poll of 10 s, only a release event can wake the waiter within 100 ms.
async fn a_waiter_wakes_on_release_not_by_polling(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a.try_acquire("k", &ttl(20_000)).await.unwrap().unwrap();
    let opts = ttl(5_000)
        .retry(Retry::linear(10_000 * MS))
        .wait(15_000 * MS);
    let waiter = tokio::spawn(async move {
        let g = b.acquire("k", &opts).await;
        (Instant::now(), g)
    });
    sleep(400 * MS).await; // the waiter has tried once and is asleep
    let released_at = Instant::now();
    assert!(ga.release().await.unwrap());
    let (acquired_at, gb) = timeout(5_000 * MS, waiter)
        .await
        .expect("waiter woke")
        .unwrap();
    let gb = gb.expect("waiter acquired");
    let latency = acquired_at - released_at;
    assert!(latency < 100 * MS, "woke {latency:?} after the release");
    assert!(gb.release().await.unwrap());
}

async fn lost_signal_fires_when_the_lock_is_deleted(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a.try_acquire("k", &ttl(600)).await.unwrap().unwrap();
    let deleted_at = Instant::now();
    h.delete_lock("k").await;
    let freed_at = Instant::now();
    // Another client gets it at once (the server freed it), before the holder even knows.
    let gb = b
        .acquire(
            "k",
            &ttl(5_000).retry(Retry::linear(10 * MS)).wait(1_000 * MS),
        )
        .await
        .expect("free after the delete");
    assert!(freed_at.elapsed() < 150 * MS, "{:?}", freed_at.elapsed());
    let out = ga.run(sleep(10_000 * MS)).await;
    assert!(matches!(out, Err(Error::LockLost { .. })), "{out:?}");
    // Found at the next renewal (every ttl/3 = 200 ms).
    assert!(
        deleted_at.elapsed() < 450 * MS,
        "{:?}",
        deleted_at.elapsed()
    );
    assert!(!ga.release().await.unwrap());
    assert!(gb.release().await.unwrap());
}

async fn lost_signal_fires_when_the_lease_expires(h: Harness) {
    let a = h.locker().await;
    let start = Instant::now();
    let ga = a
        .try_acquire("k", &ttl(300).renew(false))
        .await
        .unwrap()
        .unwrap();
    assert!(ga.deadline() <= start + 300 * MS);
    tokio::select! {
        _ = ga.lost() => {}
        _ = sleep(2_000 * MS) => panic!("lost signal did not fire"),
    }
    let at = start.elapsed();
    assert!(at >= 280 * MS && at < 400 * MS, "fired at {at:?}");
}

async fn renewal_keeps_a_lock_through_work_five_times_its_ttl(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a.try_acquire("k", &ttl(300)).await.unwrap().unwrap();
    let rival = async {
        for _ in 0..10 {
            sleep(150 * MS).await;
            assert!(
                b.try_acquire("k", &ttl(5_000)).await.unwrap().is_none(),
                "renewal failed"
            );
        }
    };
    ga.run(rival)
        .await
        .expect("never lost during 1.5 s of work");
    assert!(ga.is_held().await.unwrap());
    assert!(ga.release().await.unwrap());
}

/// Wraps a backend to inject faults into the small trait, after bsm/redislock's
/// `flakyScripter`: replies to acquire that come back late (after the grant was made), and
/// renewals that hang.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn Backend>,
    /// Delay added after the backend granted or refused, before the reply "arrives".
    reply_delay: Duration,
    granted: Arc<AtomicBool>,
    /// How many of the next extend calls hang forever.
    hanging_extends: AtomicU32,
}

impl Faulty {
    async fn wrap(h: &Harness) -> Self {
        Faulty {
            inner: h.locker().await.backend().clone(),
            reply_delay: Duration::ZERO,
            granted: Arc::default(),
            hanging_extends: AtomicU32::new(0),
        }
    }
}

#[async_trait]
impl Backend for Faulty {
    async fn try_acquire(
        &self,
        key: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> lockwise::Result<Attempt> {
        let attempt = self.inner.try_acquire(key, owner, ttl).await?;
        self.granted
            .store(matches!(attempt, Attempt::Granted(_)), Ordering::SeqCst);
        sleep(self.reply_delay).await;
        Ok(attempt)
    }
    async fn extend(&self, key: &str, owner: OwnerToken, ttl: Duration) -> lockwise::Result<bool> {
        let hang = self
            .hanging_extends
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if hang {
            std::future::pending::<()>().await;
        }
        self.inner.extend(key, owner, ttl).await
    }
    async fn release(&self, key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.inner.release(key, owner).await
    }
    async fn holds(&self, key: &str, owner: OwnerToken) -> lockwise::Result<bool> {
        self.inner.holds(key, owner).await
    }
    async fn watch(&self, key: &str) -> lockwise::Result<ReleaseWatch> {
        self.inner.watch(key).await
    }
}

async fn a_dropped_acquire_leaves_no_lock_behind(h: Harness) {
    let faulty = Faulty {
        reply_delay: 2_000 * MS,
        ..Faulty::wrap(&h).await
    };
    let granted = faulty.granted.clone();
    let slow = Locker::new(faulty);
    let dropped = timeout(300 * MS, slow.try_acquire("k", &ttl(30_000))).await;
    assert!(
        dropped.is_err(),
        "the acquire future was dropped mid-flight"
    );
    assert!(
        granted.load(Ordering::SeqCst),
        "the server had granted the lock"
    );
    // Released by owner token on the runtime at once, long before its 30 s TTL.
    let b = h.locker().await;
    let gb = b
        .acquire(
            "k",
            &ttl(5_000).retry(Retry::linear(20 * MS)).wait(2_000 * MS),
        )
        .await
        .expect("the abandoned grant was released");
    assert!(gb.release().await.unwrap());
}

async fn a_dropped_guard_releases_its_lock(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a.try_acquire("k", &ttl(30_000)).await.unwrap().unwrap();
    let lost = ga.lost_token();
    drop(ga);
    assert!(
        lost.is_cancelled(),
        "work holding the lost token is told to stop"
    );
    let gb = b
        .acquire(
            "k",
            &ttl(5_000).retry(Retry::linear(20 * MS)).wait(2_000 * MS),
        )
        .await
        .expect("released on drop, long before the TTL");
    assert!(gb.release().await.unwrap());
}

async fn bad_input_is_refused_before_anything_is_stored(h: Harness) {
    let a = h.locker().await;
    for key in ["", &"k".repeat(lockwise::MAX_KEY_LEN + 1)] {
        let err = a.try_acquire(key, &ttl(1_000)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidKey { .. }), "{err:?}");
    }
    for bad in [Duration::ZERO, 99 * MS, lockwise::MAX_TTL + MS] {
        let err = a
            .try_acquire("k", &LockOptions::ttl(bad))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidTtl { .. }), "{err:?}");
        assert!(err.is_invalid_input());
    }
    let g = a
        .try_acquire("k", &ttl(1_000))
        .await
        .unwrap()
        .expect("nothing was stored");
    assert_eq!(
        g.token().get(),
        1,
        "no token was consumed by the refused calls"
    );
    let err = g.extend(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::InvalidTtl { .. }));
    assert!(g.is_held().await.unwrap());
    assert!(g.release().await.unwrap());
}

/// A grant whose reply arrives after its local deadline is never acted on (and is released).
async fn a_grant_that_arrives_too_late_is_discarded(h: Harness) {
    let faulty = Faulty {
        reply_delay: 400 * MS,
        ..Faulty::wrap(&h).await
    };
    let granted = faulty.granted.clone();
    let late = Locker::new(faulty);
    assert!(late.try_acquire("k", &ttl(300)).await.unwrap().is_none());
    assert!(granted.load(Ordering::SeqCst), "the backend did grant it");
    // The discarded grant is released in the background, at once (long before its TTL).
    let b = h.locker().await;
    let gb = b
        .acquire(
            "k",
            &ttl(5_000).retry(Retry::linear(10 * MS)).wait(1_000 * MS),
        )
        .await
        .expect("nothing left behind");
    assert!(gb.release().await.unwrap());
}

/// A renewal that never answers cannot hide a loss: the deadline timer fires the lost signal.
async fn a_hung_renewal_cannot_hide_a_loss(h: Harness) {
    let faulty = Faulty::wrap(&h).await;
    faulty.hanging_extends.store(u32::MAX, Ordering::SeqCst);
    let a = Locker::new(faulty);
    let start = Instant::now();
    let ga = a.try_acquire("k", &ttl(300)).await.unwrap().unwrap();
    let out = ga.run(sleep(5_000 * MS)).await;
    assert!(matches!(out, Err(Error::LockLost { .. })), "{out:?}");
    let at = start.elapsed();
    assert!(
        at >= 280 * MS && at < 400 * MS,
        "fired at {at:?}, the deadline was ~295 ms"
    );
}

/// A renewal that hangs once times out (well before the next one is due) and is retried, so
/// the lock survives.
async fn a_renewal_that_times_out_is_retried(h: Harness) {
    let faulty = Faulty::wrap(&h).await;
    faulty.hanging_extends.store(1, Ordering::SeqCst);
    let a = Locker::new(faulty);
    let ga = a.try_acquire("k", &ttl(600)).await.unwrap().unwrap();
    ga.run(sleep(1_500 * MS))
        .await
        .expect("the lock survived one hung renewal");
    assert!(ga.is_held().await.unwrap());
    assert!(ga.release().await.unwrap());
}

/// Expiry announces nothing: a waiter comes back when the holder's remaining TTL runs out,
/// not at its (10 s) poll interval.
async fn a_waiter_returns_when_the_holders_ttl_runs_out(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a
        .try_acquire("k", &ttl(500).renew(false))
        .await
        .unwrap()
        .unwrap();
    let start = Instant::now();
    let opts = ttl(5_000)
        .retry(Retry::linear(10_000 * MS))
        .wait(15_000 * MS);
    let gb = b.acquire("k", &opts).await.expect("acquired after expiry");
    let at = start.elapsed();
    assert!(
        at >= 400 * MS && at < h.server_lease(500) + 500 * MS,
        "acquired at {at:?}"
    );
    assert!(!ga.release().await.unwrap());
    assert!(gb.release().await.unwrap());
}

/// The whole documented TTL range works, renewal included at the 100 ms minimum.
async fn ttls_from_the_minimum_to_the_maximum_work(h: Harness) {
    let (a, b) = (h.locker().await, h.locker().await);
    let ga = a
        .try_acquire("k", &LockOptions::ttl(lockwise::MIN_TTL))
        .await
        .unwrap()
        .unwrap();
    ga.run(sleep(500 * MS))
        .await
        .expect("renewed every 33 ms for 5 TTLs");
    assert!(b.try_acquire("k", &ttl(1_000)).await.unwrap().is_none());
    assert!(ga.release().await.unwrap());
    let gmax = a
        .try_acquire("k", &LockOptions::ttl(lockwise::MAX_TTL))
        .await
        .unwrap()
        .unwrap();
    assert!(gmax.deadline() > Instant::now() + lockwise::MAX_TTL - 3_600_000 * MS);
    assert!(gmax.release().await.unwrap());
}

/// Many clients waiting on one key each get it in turn (waking never stalls).
async fn many_waiters_each_get_the_lock_in_turn(h: Harness) {
    let holder = h.locker().await;
    let first = holder.try_acquire("k", &ttl(5_000)).await.unwrap().unwrap();
    let mut waiters = Vec::new();
    for _ in 0..6 {
        let locker = h.locker().await;
        waiters.push(tokio::spawn(async move {
            let opts = ttl(5_000)
                .retry(Retry::linear(10_000 * MS))
                .wait(15_000 * MS);
            let guard = locker.acquire("k", &opts).await.expect("got its turn");
            sleep(30 * MS).await;
            assert!(guard.release().await.unwrap());
        }));
    }
    sleep(300 * MS).await;
    let start = Instant::now();
    assert!(first.release().await.unwrap());
    for w in waiters {
        timeout(10_000 * MS, w)
            .await
            .expect("every waiter got the lock")
            .unwrap();
    }
    assert!(start.elapsed() < 5_000 * MS, "{:?}", start.elapsed());
}

macro_rules! conformance {
    ($($backend:ident),*) => {$(
        mod $backend {
            use super::*;
            #[tokio::test] async fn two_holders_exclude_each_other() { super::two_holders_exclude_each_other(Harness::$backend()).await }
            #[tokio::test] async fn waiting_times_out_with_a_typed_error() { super::waiting_times_out_with_a_typed_error(Harness::$backend()).await }
            #[tokio::test] async fn stale_release_leaves_the_new_holders_lock() { super::stale_release_leaves_the_new_holders_lock(Harness::$backend()).await }
            #[tokio::test] async fn stale_extend_fails() { super::stale_extend_fails(Harness::$backend()).await }
            #[tokio::test] async fn fencing_tokens_strictly_increase_across_holders_and_reconnects() { super::fencing_tokens_strictly_increase_across_holders_and_reconnects(Harness::$backend()).await }
            #[tokio::test] async fn expiry_is_honoured() { super::expiry_is_honoured(Harness::$backend()).await }
            #[tokio::test] async fn a_waiter_wakes_on_release_not_by_polling() { super::a_waiter_wakes_on_release_not_by_polling(Harness::$backend()).await }
            #[tokio::test] async fn lost_signal_fires_when_the_lock_is_deleted() { super::lost_signal_fires_when_the_lock_is_deleted(Harness::$backend()).await }
            #[tokio::test] async fn lost_signal_fires_when_the_lease_expires() { super::lost_signal_fires_when_the_lease_expires(Harness::$backend()).await }
            #[tokio::test] async fn renewal_keeps_a_lock_through_work_five_times_its_ttl() { super::renewal_keeps_a_lock_through_work_five_times_its_ttl(Harness::$backend()).await }
            #[tokio::test] async fn a_dropped_acquire_leaves_no_lock_behind() { super::a_dropped_acquire_leaves_no_lock_behind(Harness::$backend()).await }
            #[tokio::test] async fn a_dropped_guard_releases_its_lock() { super::a_dropped_guard_releases_its_lock(Harness::$backend()).await }
            #[tokio::test] async fn bad_input_is_refused_before_anything_is_stored() { super::bad_input_is_refused_before_anything_is_stored(Harness::$backend()).await }
            #[tokio::test] async fn ttls_from_the_minimum_to_the_maximum_work() { super::ttls_from_the_minimum_to_the_maximum_work(Harness::$backend()).await }
            #[tokio::test] async fn a_grant_that_arrives_too_late_is_discarded() { super::a_grant_that_arrives_too_late_is_discarded(Harness::$backend()).await }
            #[tokio::test] async fn a_hung_renewal_cannot_hide_a_loss() { super::a_hung_renewal_cannot_hide_a_loss(Harness::$backend()).await }
            #[tokio::test] async fn a_renewal_that_times_out_is_retried() { super::a_renewal_that_times_out_is_retried(Harness::$backend()).await }
            #[tokio::test] async fn many_waiters_each_get_the_lock_in_turn() { super::many_waiters_each_get_the_lock_in_turn(Harness::$backend()).await }
            #[tokio::test] async fn a_waiter_returns_when_the_holders_ttl_runs_out() { super::a_waiter_returns_when_the_holders_ttl_runs_out(Harness::$backend()).await }
        }
    )*};
}

conformance!(memory, file, redis, postgres, mysql);
