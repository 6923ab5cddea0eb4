//! PostgreSQL and MariaDB locks share a few server sessions per backend: many locks cost a
//! few connections, a lock whose renewals stop is let go at its deadline though its session
//! lives on for the others, locks of another TTL take another session, a caller that goes
//! away mid-grant leaves nothing held, and a killed session loses exactly the locks it held.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use lockwise::backend::mysql::MysqlBackend;
use lockwise::backend::postgres::PostgresBackend;
use lockwise::{Guard, LockOptions, Locker, OwnerToken};
use lockwise_testkit::proxy::TcpProxy;
use lockwise_testkit::{PgSchema, mysql_url, sql_now, unique};
use tokio::time::{Instant, sleep, timeout};

const MS: Duration = Duration::from_millis(1);

/// A server of session locks: its backend, with what the tests ask of it.
#[derive(Clone)]
enum Backend {
    Pg(PostgresBackend, String),
    My(MysqlBackend),
}

/// What keeps a server's test state alive (the PostgreSQL schema).
enum Server {
    Pg(PgSchema),
    My(String),
}

impl Server {
    fn postgres() -> Self {
        Server::Pg(PgSchema::new("shared"))
    }

    fn mysql() -> Self {
        Server::My(unique("shared"))
    }

    /// The server's port.
    fn port(&self) -> u16 {
        let url = match self {
            Server::Pg(schema) => schema.url().to_owned(),
            Server::My(_) => mysql_url(),
        };
        url::Url::parse(&url).unwrap().port().unwrap()
    }

    /// A new client, its own sessions.
    async fn backend(&self) -> Backend {
        self.backend_on(None).await
    }

    /// A new client, connected through `port` (a proxy) if given.
    async fn backend_on(&self, port: Option<u16>) -> Backend {
        let via = |url: &str| {
            let mut url = url::Url::parse(url).unwrap();
            if port.is_some() {
                url.set_port(port).unwrap();
            }
            url.to_string()
        };
        match self {
            Server::Pg(schema) => Backend::Pg(
                PostgresBackend::builder(via(schema.url()))
                    .schema(schema.name())
                    .connect()
                    .await
                    .expect("PostgreSQL on 127.0.0.1:5432: run scripts/services"),
                schema.url().to_owned(),
            ),
            Server::My(namespace) => Backend::My(
                MysqlBackend::builder(via(&mysql_url()))
                    .namespace(namespace.as_str())
                    .connect()
                    .await
                    .expect("MariaDB on 127.0.0.1:3306: run scripts/services"),
            ),
        }
    }
}

impl Backend {
    fn locker(&self) -> Locker {
        match self {
            Backend::Pg(b, _) => Locker::new(b.clone()),
            Backend::My(b) => Locker::new(b.clone()),
        }
    }

    /// The server's id of the session holding `key` for `owner`.
    async fn session(&self, key: &str, owner: OwnerToken) -> i64 {
        match self {
            Backend::Pg(b, _) => i64::from(b.session_pid(key, owner).await.expect("held")),
            Backend::My(b) => b.session_id(key, owner).await.expect("held"),
        }
    }

    /// Ends a server session, as an administrator would.
    fn kill(&self, session: i64) {
        match self {
            Backend::Pg(_, url) => sql_now(
                url,
                &[format!("SELECT pg_terminate_backend({session}, 5000)")],
            ),
            Backend::My(_) => sql_now(&mysql_url(), &[format!("KILL {session}")]),
        }
    }
}

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(10))
}

fn keys(n: usize) -> Vec<String> {
    let prefix = unique("k");
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Takes every key at once, each in a task of its own.
async fn take_all(locker: &Locker, keys: &[String]) -> Vec<Guard> {
    join_all(keys.iter().map(|key| {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move { locker.try_acquire(&key, &opts()).await })
    }))
    .await
    .into_iter()
    .map(|r| r.unwrap().unwrap().expect("free"))
    .collect()
}

/// The server's id of the session holding each key.
async fn sessions_of(backend: &Backend, keys: &[String], guards: &[Guard]) -> Vec<i64> {
    let mut sessions = Vec::with_capacity(keys.len());
    for (key, guard) in keys.iter().zip(guards) {
        sessions.push(backend.session(key, guard.owner()).await);
    }
    sessions
}

async fn many_locks_share_a_few_sessions(server: Server) {
    let backend = server.backend().await;
    let locker = backend.locker();
    let rival = server.backend().await.locker();
    let keys = keys(40);
    let guards = take_all(&locker, &keys).await;
    let sessions: HashSet<i64> = sessions_of(&backend, &keys, &guards)
        .await
        .into_iter()
        .collect();
    assert!(
        !sessions.is_empty() && sessions.len() <= 3,
        "40 locks on {} sessions",
        sessions.len()
    );
    // Every one held for the server, and excluded for another client.
    for key in &keys {
        assert!(rival.try_acquire(key, &opts()).await.unwrap().is_none());
    }
    let first: Vec<u64> = guards.iter().map(|g| g.token().get()).collect();
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
    // Granted together again (requests of many grants): each key's token above its last.
    let guards = take_all(&locker, &keys).await;
    for ((key, guard), before) in keys.iter().zip(&guards).zip(&first) {
        assert!(
            guard.token().get() > *before,
            "{key}: {} after {before}",
            guard.token()
        );
    }
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
    // A released lock is free for another client at once.
    for key in &keys {
        let guard = rival
            .try_acquire(key, &opts())
            .await
            .unwrap()
            .expect("released");
        assert!(guard.release().await.unwrap());
    }
}

async fn a_lock_left_unrenewed_goes_at_its_deadline(server: Server) {
    let backend = server.backend().await;
    let locker = backend.locker();
    let rival = server.backend().await.locker();
    let [kept, left] = <[String; 2]>::try_from(keys(2)).unwrap();
    let kept_guard = locker
        .try_acquire(&kept, &LockOptions::ttl(600 * MS))
        .await
        .unwrap()
        .unwrap();
    let start = Instant::now();
    let left_guard = locker
        .try_acquire(&left, &LockOptions::ttl(600 * MS).renew(false))
        .await
        .unwrap()
        .unwrap();
    // One after the other, with one TTL: the same session holds both, and the renewals of one
    // keep it.
    assert_eq!(
        backend.session(&kept, kept_guard.owner()).await,
        backend.session(&left, left_guard.owner()).await
    );
    assert!(rival.try_acquire(&left, &opts()).await.unwrap().is_none());
    let taken = loop {
        if let Some(guard) = rival.try_acquire(&left, &opts()).await.unwrap() {
            break guard;
        }
        assert!(
            start.elapsed() < 2_000 * MS,
            "the unrenewed lock was never let go"
        );
        sleep(20 * MS).await;
    };
    let at = start.elapsed();
    assert!(at >= 580 * MS, "let go at {at:?}, before its deadline");
    assert!(left_guard.is_lost());
    assert!(!left_guard.release().await.unwrap());
    assert!(taken.is_held().await.unwrap());
    // The renewed one is still held, through the same session.
    sleep(700 * MS).await;
    assert!(rival.try_acquire(&kept, &opts()).await.unwrap().is_none());
    assert!(kept_guard.is_held().await.unwrap());
    assert!(kept_guard.release().await.unwrap());
    assert!(taken.release().await.unwrap());
}

/// A session's lease is the latest deadline of its locks, so a lock of a short TTL never
/// shares a session with longer ones: a frozen process would keep it that much longer.
async fn locks_of_another_ttl_take_another_session(server: Server) {
    let backend = server.backend().await;
    let locker = backend.locker();
    let [long, short, again] = <[String; 3]>::try_from(keys(3)).unwrap();
    let take = |key: String, ttl: Duration| {
        let locker = locker.clone();
        async move {
            locker
                .try_acquire(&key, &LockOptions::ttl(ttl))
                .await
                .unwrap()
                .expect("free")
        }
    };
    let long_guard = take(long.clone(), 10_000 * MS).await;
    let short_guard = take(short.clone(), 1_000 * MS).await;
    let again_guard = take(again.clone(), 10_000 * MS).await;
    let (long_at, short_at, again_at) = (
        backend.session(&long, long_guard.owner()).await,
        backend.session(&short, short_guard.owner()).await,
        backend.session(&again, again_guard.owner()).await,
    );
    assert_ne!(
        long_at, short_at,
        "a 1 s lock joined a session of 10 s locks"
    );
    assert_eq!(long_at, again_at, "locks of one TTL share their session");
    for guard in [long_guard, short_guard, again_guard] {
        assert!(guard.release().await.unwrap());
    }
    // Once a session holds nothing, a lock of any TTL may use it.
    let short_guard = take(short.clone(), 1_000 * MS).await;
    let long_guard = take(long.clone(), 10_000 * MS).await;
    assert_ne!(
        backend.session(&short, short_guard.owner()).await,
        backend.session(&long, long_guard.owner()).await
    );
    assert!(short_guard.release().await.unwrap());
    assert!(long_guard.release().await.unwrap());
}

async fn a_grant_whose_caller_went_away_is_given_back(server: Server) {
    let backend = server.backend().await;
    let locker = backend.locker();
    let rival = server.backend().await.locker();
    let keys = keys(64);
    // Callers that give up at every moment of their grant, all at once.
    let cut = join_all(keys.iter().enumerate().map(|(i, key)| {
        let (locker, key) = (locker.clone(), key.clone());
        tokio::spawn(async move {
            let limit = Duration::from_micros(25 * i as u64);
            match timeout(limit, locker.try_acquire(&key, &opts())).await {
                Ok(granted) => {
                    let guard = granted.unwrap().expect("free");
                    assert!(guard.release().await.unwrap());
                    false
                }
                Err(_) => true,
            }
        })
    }))
    .await;
    let cut = cut.into_iter().filter(|c| *c.as_ref().unwrap()).count();
    assert!(cut > 0, "no caller went away mid-grant");
    // Nothing stays held: the grants nobody took were given back.
    let start = Instant::now();
    for key in &keys {
        let guard = loop {
            if let Some(guard) = rival.try_acquire(key, &opts()).await.unwrap() {
                break guard;
            }
            assert!(start.elapsed() < 3_000 * MS, "{key} stayed held");
            sleep(20 * MS).await;
        };
        assert!(guard.release().await.unwrap());
    }
    // And the backend goes on granting.
    let guards = take_all(&locker, &keys).await;
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
}

async fn a_killed_session_loses_its_locks_and_no_others(server: Server) {
    let backend = server.backend().await;
    let locker = backend.locker();
    let rival = server.backend().await.locker();
    let keys = keys(12);
    let guards = take_all(&locker, &keys).await;
    let sessions = sessions_of(&backend, &keys, &guards).await;
    let victim = sessions[0];
    backend.kill(victim);
    for ((key, guard), session) in keys.iter().zip(&guards).zip(&sessions) {
        if *session == victim {
            timeout(2_000 * MS, guard.lost())
                .await
                .expect("a lock of the killed session never signalled its loss");
            let taken = rival
                .try_acquire(key, &opts())
                .await
                .unwrap()
                .expect("free");
            assert!(taken.release().await.unwrap());
        } else {
            assert!(!guard.is_lost(), "a lock of another session was lost");
            assert!(rival.try_acquire(key, &opts()).await.unwrap().is_none());
        }
    }
    // The backend grants again, on a session that lives.
    let again = locker
        .try_acquire(&keys[0], &opts())
        .await
        .unwrap()
        .expect("free");
    assert!(again.is_held().await.unwrap());
    assert!(again.release().await.unwrap());
    for guard in guards {
        let _ = guard.release().await;
    }
}

/// A session that holds nothing outlives its last lease (it is kept for the next lock), and
/// the next lock on it sets the lease again: cut off from its holder, the session ends within
/// the lease and the lock goes with it. (On MariaDB, setting the lease is a statement of its
/// own, so a session keeps its last lease while locks come and go, and gets the server's
/// idle lifetime back once it has stayed free for a while.)
async fn a_free_session_outlives_its_lease_and_the_next_lock_sets_it(server: Server) {
    let proxy = TcpProxy::start(server.port());
    let backend = server.backend_on(Some(proxy.port())).await;
    let locker = backend.locker();
    let rival = server.backend().await.locker();
    let key = unique("rest");
    let ttl = LockOptions::ttl(1_000 * MS);
    let mut first = None;
    for _ in 0..3 {
        let guard = locker.try_acquire(&key, &ttl).await.unwrap().expect("free");
        let session = backend.session(&key, guard.owner()).await;
        assert_eq!(*first.get_or_insert(session), session);
        assert!(guard.release().await.unwrap());
    }
    // Longer than the 1 s lease: the server has not ended the free session.
    sleep(1_800 * MS).await;
    let guard = locker.try_acquire(&key, &ttl).await.unwrap().expect("free");
    assert_eq!(
        Some(backend.session(&key, guard.owner()).await),
        first,
        "the free session did not outlive its last lease"
    );
    // Cut off: its renewals never arrive, and the server ends the session at the lease.
    proxy.cut();
    let cut = Instant::now();
    let taken = loop {
        if let Some(taken) = rival.try_acquire(&key, &opts()).await.unwrap() {
            break taken;
        }
        assert!(
            cut.elapsed() < 4_000 * MS,
            "the lock outlived its cut-off session's lease"
        );
        sleep(50 * MS).await;
    };
    assert!(proxy.held() > 0, "no renewal crossed the cut");
    assert!(taken.token() > guard.token());
    assert!(taken.release().await.unwrap());
    proxy.heal();
    drop(guard);
}

macro_rules! on_both {
    ($($case:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Server::postgres()).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Server::mysql()).await;
                }
            )*
        }
    };
}

on_both!(
    many_locks_share_a_few_sessions,
    a_lock_left_unrenewed_goes_at_its_deadline,
    locks_of_another_ttl_take_another_session,
    a_grant_whose_caller_went_away_is_given_back,
    a_killed_session_loses_its_locks_and_no_others,
    a_free_session_outlives_its_lease_and_the_next_lock_sets_it,
);
