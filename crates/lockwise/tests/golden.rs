//! Golden vectors: the names and formats lockwise stores are fixed, so that two versions of
//! lockwise running side by side during a rolling deploy exclude each other. A failure here
//! means a change would break that: do not "fix" the vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::file::FileBackend;
use lockwise::backend::redis::RedisBackend;
use lockwise::{LockOptions, Locker};
use lockwise_testkit::{RedisNamespace, RedisServer};

fn opts() -> LockOptions {
    LockOptions::ttl(Duration::from_secs(30))
}

#[test]
fn file_names_are_the_sha256_of_the_key() {
    assert_eq!(
        FileBackend::file_stem("orders:42"),
        "8a5f217ddb0c9f03d16c0db38f2ba1c3afba56ca9be31a6bbb468b7d2e03746c"
    );
    assert_eq!(
        FileBackend::file_stem("héllo wörld"),
        "a1003f7d04a4115711d0b48a2eaf1359ce565d2d2a6fd65098dfcffadeeef59f"
    );
}

#[tokio::test]
async fn file_records_have_the_v1_format() {
    let dir = tempfile::tempdir().unwrap();
    let locker = Locker::new(FileBackend::open(dir.path()).unwrap());
    let guard = locker
        .try_acquire("orders:42", &opts())
        .await
        .unwrap()
        .unwrap();
    let stem = "8a5f217ddb0c9f03d16c0db38f2ba1c3afba56ca9be31a6bbb468b7d2e03746c";
    // The fencing counter's file: every version reads its number as a bound no token issued
    // is above (this one reserves 64 tokens per durable write), and goes above it.
    let fence = std::fs::read_to_string(dir.path().join(format!("{stem}.fence"))).unwrap();
    assert_eq!(fence, "lockwise-fence 1\n64\n");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let issued = std::fs::read_to_string(dir.path().join(format!("{stem}.issued"))).unwrap();
    assert_eq!(
        issued,
        format!(
            "lockwise-issued 1\nboot {}\nceiling {:020}\nlast {:020}\n",
            boot.trim(),
            64,
            1
        )
    );
    let lease = std::fs::read_to_string(dir.path().join(format!("{stem}.lease"))).unwrap();
    let lines: Vec<&str> = lease.lines().collect();
    // Five lines every version reads, then three that `lockwise locks` reads (who holds it),
    // which a version reading only the first five ignores.
    assert_eq!(lines.len(), 8, "{lease}");
    assert_eq!(lines[0], "lockwise-lease 1");
    assert_eq!(lines[1], format!("owner {}", guard.owner().to_hex()));
    assert_eq!(lines[2], "fence 1");
    assert!(
        lines[3]
            .strip_prefix("expires ")
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    assert_eq!(lines[4], format!("boot {}", boot.trim()));
    assert_eq!(lines[5], format!("key {}", hex::encode("orders:42")));
    assert!(
        lines[6]
            .strip_prefix("granted ")
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    let holder: Vec<&str> = lines[7]
        .strip_prefix("holder ")
        .unwrap()
        .split('\t')
        .collect();
    assert_eq!(holder[1], std::process::id().to_string(), "{lease}");
    assert!(guard.release().await.unwrap());
    assert!(
        !dir.path().join(format!("{stem}.lease")).exists(),
        "release removes the lease"
    );
}

/// A lease written by another version (here: by hand, in the v1 format) excludes this one.
#[tokio::test]
async fn a_v1_lease_file_written_by_another_version_excludes() {
    let dir = tempfile::tempdir().unwrap();
    let stem = FileBackend::file_stem("orders:42");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let far = u64::MAX / 2;
    let record = format!(
        "lockwise-lease 1\nowner 00112233445566778899aabbccddeeff\nfence 7\nexpires {far}\nboot {}\n",
        boot.trim()
    );
    std::fs::write(dir.path().join(format!("{stem}.lease")), record).unwrap();
    let locker = Locker::new(FileBackend::open(dir.path()).unwrap());
    assert!(
        locker
            .try_acquire("orders:42", &opts())
            .await
            .unwrap()
            .is_none()
    );

    // The same record from another boot is expired, and the next token is above its fence.
    let stale = format!(
        "lockwise-lease 1\nowner 00112233445566778899aabbccddeeff\nfence 7\nexpires {far}\nboot another-boot\n"
    );
    std::fs::write(dir.path().join(format!("{stem}.lease")), stale).unwrap();
    let guard = locker
        .try_acquire("orders:42", &opts())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(guard.token().get(), 8);
    assert!(guard.release().await.unwrap());
}

/// A fencing counter written by a version that stores its last token there (durably, on every
/// grant) and no `.issued` record: the next token is one above it, and this version's record
/// is not trusted once such a version has written the counter again.
#[tokio::test]
async fn a_fence_file_written_by_another_version_is_a_floor() {
    let dir = tempfile::tempdir().unwrap();
    let stem = FileBackend::file_stem("orders:42");
    let fence = dir.path().join(format!("{stem}.fence"));
    std::fs::write(&fence, "lockwise-fence 1\n7\n").unwrap();
    let locker = Locker::new(FileBackend::open(dir.path()).unwrap());
    let token = |locker: Locker| async move {
        let guard = locker
            .try_acquire("orders:42", &opts())
            .await
            .unwrap()
            .unwrap();
        let token = guard.token().get();
        assert!(guard.release().await.unwrap());
        token
    };
    assert_eq!(token(locker.clone()).await, 8);
    assert_eq!(token(locker.clone()).await, 9);
    // The other version again: it read this version's bound (71) and wrote its token, 72.
    assert_eq!(
        std::fs::read_to_string(&fence).unwrap(),
        "lockwise-fence 1\n71\n"
    );
    std::fs::write(&fence, "lockwise-fence 1\n72\n").unwrap();
    assert_eq!(token(locker).await, 73);
}

#[tokio::test]
async fn redis_names_and_values_are_fixed() {
    let ns = RedisNamespace::new("golden");
    let backend = RedisBackend::builder(ns.url())
        .prefix(ns.prefix())
        .connect()
        .await
        .unwrap();
    let p = ns.prefix();
    assert_eq!(backend.lock_name("orders:42"), format!("{p}:{{orders:42}}"));
    assert_eq!(
        backend.fence_name("orders:42"),
        format!("{p}:{{orders:42}}:fence")
    );
    assert_eq!(
        backend.channel_name("orders:42"),
        format!("{p}:{{orders:42}}:released")
    );
    let locker = Locker::new(backend);
    let guard = locker
        .try_acquire("orders:42", &opts())
        .await
        .unwrap()
        .unwrap();
    let mut conn = ns.conn();
    let owner: String = redis::cmd("GET")
        .arg(format!("{p}:{{orders:42}}"))
        .query(&mut conn)
        .unwrap();
    assert_eq!(owner, guard.owner().to_hex());
    let fence: String = redis::cmd("GET")
        .arg(format!("{p}:{{orders:42}}:fence"))
        .query(&mut conn)
        .unwrap();
    // The first token of a key: the server's clock in Unix ms × 1024 (see lua/acquire.lua).
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    let ceiling = (secs * 1000 + micros / 1000) * 1024;
    assert_eq!(fence, guard.token().to_string());
    assert!(guard.token().get() <= ceiling && guard.token().get() > ceiling - 60_000 * 1024);
    let pttl: i64 = redis::cmd("PTTL")
        .arg(format!("{p}:{{orders:42}}"))
        .query(&mut conn)
        .unwrap();
    assert!(pttl > 29_000 && pttl <= 30_000, "{pttl}");
    assert!(guard.release().await.unwrap());

    // A lock set by another version (same name, any owner) excludes this one.
    let _: () = redis::cmd("SET")
        .arg(format!("{p}:{{orders:42}}"))
        .arg("00112233445566778899aabbccddeeff")
        .arg("PX")
        .arg(30_000)
        .query(&mut conn)
        .unwrap();
    assert!(
        locker
            .try_acquire("orders:42", &opts())
            .await
            .unwrap()
            .is_none()
    );
}

/// Lock and counter share one cluster slot, even for keys that contain braces themselves.
#[test]
fn lock_and_counter_share_a_cluster_slot() {
    let server = RedisServer::start(&["--cluster-enabled", "yes"]);
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut slot = |name: &str| -> i64 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(name)
            .query(&mut conn)
            .unwrap()
    };
    for key in ["orders:42", "a}b", "{x}", "{", "x}{", "plain"] {
        let lock = format!("lockwise:{{{key}}}");
        assert_eq!(slot(&lock), slot(&format!("{lock}:fence")), "key {key:?}");
    }
    assert_ne!(slot("lockwise:{orders:42}"), slot("lockwise:{orders:43}"));
    // Why keys may not start with '}': the tag would be empty.
    assert_ne!(slot("lockwise:{}x}"), slot("lockwise:{}x}:fence"));
}

#[tokio::test]
async fn redis_refuses_keys_whose_hash_tag_would_be_empty() {
    let ns = RedisNamespace::new("golden");
    let backend = RedisBackend::builder(ns.url())
        .prefix(ns.prefix())
        .connect()
        .await
        .unwrap();
    let err = Locker::new(backend)
        .try_acquire("}x", &opts())
        .await
        .unwrap_err();
    assert!(matches!(err, lockwise::Error::InvalidKey { .. }), "{err:?}");
}

/// A lease file that cannot be read (torn by a power loss) counts as expired, and the next
/// token is still above every token issued before, thanks to the durable `.fence` file.
#[tokio::test]
async fn an_unreadable_lease_file_counts_as_expired() {
    let dir = tempfile::tempdir().unwrap();
    let locker = Locker::new(FileBackend::open(dir.path()).unwrap());
    let first = locker.try_acquire("k", &opts()).await.unwrap().unwrap();
    let stem = FileBackend::file_stem("k");
    std::fs::write(dir.path().join(format!("{stem}.lease")), "").unwrap();
    // Another process (the holder's own locker lets its tasks take turns locally).
    let other = Locker::new(FileBackend::open(dir.path()).unwrap());
    let second = other
        .try_acquire("k", &opts())
        .await
        .unwrap()
        .expect("torn lease = free");
    assert!(second.token() > first.token());
    assert!(!first.release().await.unwrap());
    assert!(second.release().await.unwrap());
}
