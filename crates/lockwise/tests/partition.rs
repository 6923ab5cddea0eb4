//! Partition groups in one process, on memory, Redis and PostgreSQL: one owner per key per
//! generation, minimal movement, handoff without overlap, typed errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockwise::partition::{Group, Member, MemberOptions};
use lockwise::{Error, FencingToken};
use lockwise_testkit::{MysqlDatabase, PgDatabase, RedisNamespace};

const TTL: Duration = Duration::from_secs(1);

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|k| k.to_string()).collect()
}

/// Waits until every member has settled one generation with `n` members; returns it.
async fn settled(members: &[&Member], n: usize) -> FencingToken {
    let start = Instant::now();
    loop {
        let views: Vec<_> = members
            .iter()
            .map(|m| m.assignment().borrow().clone())
            .collect();
        let first = &views[0];
        if views
            .iter()
            .all(|a| a.settled && a.generation == first.generation && a.members.len() == n)
        {
            return first.generation;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no settled generation: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The owner of each key, checking that there is exactly one.
fn owners(members: &[&Member], keys: &[String]) -> HashMap<String, String> {
    let mut owner = HashMap::new();
    for key in keys {
        let who: Vec<&str> = members
            .iter()
            .filter(|m| m.owns(key))
            .map(|m| m.id())
            .collect();
        assert_eq!(who.len(), 1, "key {key} owned by {who:?}");
        owner.insert(key.clone(), who[0].to_owned());
    }
    owner
}

async fn membership_changes(group: Group) {
    let opts = |id: &str| MemberOptions::ttl(TTL).id(id);
    let mut members = Vec::new();
    for i in 0..4 {
        members.push(group.join(&opts(&format!("m{i}"))).await.unwrap());
    }
    let all = keys(1000);
    let refs: Vec<&Member> = members.iter().collect();
    let g1 = settled(&refs, 4).await;
    let before = owners(&refs, &all);
    let mut load: HashMap<&str, usize> = HashMap::new();
    for o in before.values() {
        *load.entry(o.as_str()).or_default() += 1;
    }
    for (m, n) in &load {
        assert!((200..=300).contains(n), "member {m} has {n} keys of 1000");
    }

    // A fifth member takes about 1/5 of the keys, from everyone, and nothing else moves.
    let started = Instant::now();
    let fifth = group.join(&opts("m4")).await.unwrap();
    let mut refs: Vec<&Member> = members.iter().collect();
    refs.push(&fifth);
    let g2 = settled(&refs, 5).await;
    let joined_in = started.elapsed();
    assert!(g2 > g1);
    let after = owners(&refs, &all);
    let moved: Vec<_> = all.iter().filter(|k| before[*k] != after[*k]).collect();
    assert!(moved.iter().all(|k| after[*k] == "m4"));
    assert!(
        (150..=250).contains(&moved.len()),
        "{} keys moved",
        moved.len()
    );

    // A member that leaves hands over only its keys.
    let started = Instant::now();
    let gone = members.remove(1);
    gone.leave().await.unwrap();
    let mut refs: Vec<&Member> = members.iter().collect();
    refs.push(&fifth);
    let g3 = settled(&refs, 4).await;
    let left_in = started.elapsed();
    assert!(g3 > g2);
    let last = owners(&refs, &all);
    let moved_on_leave = all.iter().filter(|k| last[*k] != after[*k]).count();
    assert!(all.iter().all(|k| after[k] == "m1" || last[k] == after[k]));
    println!(
        "join: {} keys moved, settled in {joined_in:?}; leave: {moved_on_leave} keys moved, settled in {left_in:?}",
        moved.len()
    );
}

/// Handlers driven by `run` never work on one key in two members at once, across a join and a
/// leave, and a handler runs for every key.
async fn handoff_without_overlap(group: Group) {
    let working: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let overlaps = Arc::new(Mutex::new(0usize));
    let started = Arc::new(Mutex::new(0usize));
    let spawn = |member: Arc<Member>| {
        let (working, overlaps, started) = (working.clone(), overlaps.clone(), started.clone());
        tokio::spawn(async move {
            let me = member.id().to_owned();
            let _ = member
                .run(keys(200), |key, _generation| {
                    let (working, overlaps, started, me) = (
                        working.clone(),
                        overlaps.clone(),
                        started.clone(),
                        me.clone(),
                    );
                    async move {
                        if working
                            .lock()
                            .unwrap()
                            .insert(key.clone(), me.clone())
                            .is_some()
                        {
                            *overlaps.lock().unwrap() += 1;
                        }
                        *started.lock().unwrap() += 1;
                        // Clears the mark when the handler ends or is cancelled (dropped).
                        let _clear = Clear(working, key);
                        std::future::pending::<()>().await;
                    }
                })
                .await;
        })
    };
    struct Clear(Arc<Mutex<HashMap<String, String>>>, String);
    impl Drop for Clear {
        fn drop(&mut self) {
            self.0.lock().unwrap().remove(&self.1);
        }
    }
    let a = Arc::new(group.join(&MemberOptions::ttl(TTL).id("a")).await.unwrap());
    let b = Arc::new(group.join(&MemberOptions::ttl(TTL).id("b")).await.unwrap());
    let runs = [spawn(a.clone()), spawn(b.clone())];
    settled(&[&a, &b], 2).await;
    let c = Arc::new(group.join(&MemberOptions::ttl(TTL).id("c")).await.unwrap());
    let run_c = spawn(c.clone());
    settled(&[&a, &b, &c], 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(working.lock().unwrap().len(), 200, "every key is worked on");
    for run in runs {
        run.abort();
    }
    drop(run_c);
    assert_eq!(*overlaps.lock().unwrap(), 0);
    assert!(*started.lock().unwrap() >= 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_membership_changes() {
    membership_changes(Group::connect("memory:", "orders").await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_handoff_without_overlap() {
    handoff_without_overlap(Group::connect("memory:", "orders").await.unwrap()).await;
}

/// On `file://` each member connects on its own (as separate processes on one machine would):
/// they share only the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_members_connected_separately_share_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let mut members = Vec::new();
    for i in 0..3 {
        let group = Group::connect(&url, "orders").await.unwrap();
        members.push(
            group
                .join(&MemberOptions::ttl(TTL).id(format!("m{i}")))
                .await
                .unwrap(),
        );
    }
    let refs: Vec<&Member> = members.iter().collect();
    settled(&refs, 3).await;
    assert_eq!(owners(&refs, &keys(300)).len(), 300);
    // A member dropped without `leave` still leaves, in the background: its keys move at once.
    let gone = members.pop().unwrap();
    let started = Instant::now();
    drop(gone);
    let refs: Vec<&Member> = members.iter().collect();
    settled(&refs, 2).await;
    owners(&refs, &keys(300));
    println!(
        "file: a dropped member's keys moved in {:?}",
        started.elapsed()
    );
    let status = Group::connect(&url, "orders")
        .await
        .unwrap()
        .status(Some(300))
        .await
        .unwrap();
    assert_eq!(status.members.len(), 2);
    assert_eq!(
        status.members.iter().filter_map(|m| m.keys).sum::<u64>(),
        300
    );
    // Removing the roster ends every membership.
    Group::connect(&url, "orders")
        .await
        .unwrap()
        .remove()
        .await
        .unwrap();
    let start = Instant::now();
    while !members.iter().all(Member::is_lost) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "members outlived their roster"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_membership_changes() {
    let ns = RedisNamespace::new("partition");
    let backend = lockwise::backend::redis::RedisBackend::builder(ns.url())
        .prefix(ns.prefix())
        .connect()
        .await
        .unwrap();
    membership_changes(Group::on_redis(backend, "orders").unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_membership_changes() {
    let db = PgDatabase::postgres("partition");
    membership_changes(Group::connect(&db.url(), "orders").await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_membership_changes() {
    let db = MysqlDatabase::mysql("partition");
    membership_changes(Group::connect(&db.url(), "orders").await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_handoff_without_overlap() {
    let db = PgDatabase::postgres("partition");
    handoff_without_overlap(Group::connect(&db.url(), "orders").await.unwrap()).await;
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    for name in ["", "has space", "br{ace}", &"x".repeat(201)] {
        let err = Group::connect("memory:", name).await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig { .. }),
            "{name:?}: {err}"
        );
    }
    assert!(matches!(
        Group::connect("ftp://host/x", "g").await.unwrap_err(),
        Error::InvalidConfig { .. }
    ));
    let group = Group::connect("memory:", "g").await.unwrap();
    for id in ["a/b", "has space", "{x}"] {
        let err = group
            .join(&MemberOptions::ttl(TTL).id(id))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidConfig { .. }), "{id:?}: {err}");
    }
    let err = group
        .join(&MemberOptions::ttl(TTL).id(""))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    let err = group
        .join(&MemberOptions::ttl(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidTtl { .. }), "{err}");
    let member = group.join(&MemberOptions::ttl(TTL)).await.unwrap();
    let err = member
        .run(Vec::<String>::new(), |_, _| async {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
}

/// On etcd: the roster is one key, swapped by comparing its version.
#[cfg(feature = "etcd")]
fn etcd_url() -> String {
    format!(
        "{}/{}/",
        lockwise_testkit::etcd_url().trim_end_matches('/'),
        lockwise_testkit::unique("partition")
    )
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_membership_changes() {
    let group = Group::connect(&etcd_url(), "orders").await.unwrap();
    membership_changes(group.clone()).await;
    group.remove().await.unwrap();
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_handoff_without_overlap() {
    let group = Group::connect(&etcd_url(), "orders").await.unwrap();
    handoff_without_overlap(group.clone()).await;
    group.remove().await.unwrap();
}
