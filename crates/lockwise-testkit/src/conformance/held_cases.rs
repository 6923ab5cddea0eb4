//! The cases of who holds what: listing the locks held ([`Locker::held`]) and breaking one
//! ([`Locker::break_lock`]), as `lockwise locks` and `lockwise unlock --force` do.

// A case is a test: a panic is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::backend::HeldLock;
use lockwise::{Error, LockOptions, Locker, Retry};
use tokio::time::{Instant, sleep};

use super::Harness;

const MS: Duration = Duration::from_millis(1);

/// Lists the locks under `prefix` until `done` holds for the listing (a waiter's probe may be
/// between two waits), for up to 3 s; the last listing.
async fn listing(
    locker: &Locker,
    prefix: &str,
    done: impl Fn(&[HeldLock]) -> bool,
) -> Vec<HeldLock> {
    let give_up = Instant::now() + 3_000 * MS;
    loop {
        let held = locker
            .held(prefix)
            .await
            .expect("the backend lists its locks");
        if done(&held) || Instant::now() > give_up {
            return held;
        }
        sleep(50 * MS).await;
    }
}

pub(crate) async fn held_locks_are_listed_with_their_tokens_holders_and_waiters(h: &dyn Harness) {
    let (a, b, c) = (h.locker().await, h.locker().await, h.locker().await);
    let opts = LockOptions::ttl(5_000 * MS);
    let granted = Instant::now();
    let one = a.try_acquire("held:one", &opts).await.unwrap().unwrap();
    let two = a.try_acquire("held:two", &opts).await.unwrap().unwrap();
    let other = a.try_acquire("elsewhere", &opts).await.unwrap().unwrap();
    let waiting = Retry::linear(10_000 * MS);
    let waiter = tokio::spawn(async move {
        b.acquire(
            "held:one",
            &LockOptions::ttl(5_000 * MS)
                .retry(waiting)
                .wait(15_000 * MS),
        )
        .await
    });
    // Named (PostgreSQL) and their holders told (Redis) once the holder's loss check has seen
    // them twice, within two of its intervals.
    let held = listing(&c, "held:", |held| {
        held.len() == 2
            && held[0].waiters.is_none_or(|w| w >= 1)
            && held
                .iter()
                .all(|l| l.holder.host.is_some() || l.holder.session.is_some())
    })
    .await;
    let keys: Vec<&str> = held.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["held:one", "held:two"], "{held:#?}");
    assert_eq!(held[0].token, Some(one.token()), "{held:#?}");
    assert_eq!(held[1].token, Some(two.token()), "{held:#?}");
    let me = std::process::id();
    for lock in &held {
        let h = &lock.holder;
        assert!(h.pid.is_none_or(|pid| pid == me), "{lock:?}");
        assert!(
            h.host.is_some() || h.session.is_some(),
            "a holder with no host and no session: {lock:?}"
        );
        assert!(lock.ttl_left.is_none_or(|t| t <= 5_000 * MS), "{lock:?}");
        let since = granted.elapsed() + 1_000 * MS; // MariaDB's granted ms is the server's
        assert!(lock.held_for.is_none_or(|t| t <= since), "{lock:?}");
    }
    assert!(
        held[0].waiters.is_none_or(|w| w >= 1),
        "the waiter is not counted: {held:#?}"
    );
    assert!(held[1].waiters.is_none_or(|w| w == 0), "{held:#?}");
    // Every lock, whatever its key.
    let all = c.held("").await.unwrap();
    assert!(all.iter().any(|l| l.key == "elsewhere"), "{all:#?}");
    assert!(one.release().await.unwrap());
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the lock once it is released");
    let held = listing(&c, "held:", |held| {
        held.first().map(|l| l.token) == Some(Some(next.token()))
    })
    .await;
    assert_eq!(held[0].token, Some(next.token()), "{held:#?}");
    for guard in [next, two, other] {
        assert!(guard.release().await.unwrap());
    }
    let ours = |l: &HeldLock| l.key.starts_with("held:") || l.key == "elsewhere";
    let held = listing(&c, "", |held| !held.iter().any(ours)).await;
    assert!(!held.iter().any(ours), "{held:#?}");
}

pub(crate) async fn a_broken_lock_is_lost_by_its_holder_and_granted_above_its_token(
    h: &dyn Harness,
) {
    let (a, b, operator) = (h.locker().await, h.locker().await, h.locker().await);
    let holder = a
        .try_acquire("k", &LockOptions::ttl(600 * MS))
        .await
        .unwrap()
        .unwrap();
    let broken_token = holder.token();
    let waiter = tokio::spawn(async move {
        let opts = LockOptions::ttl(5_000 * MS)
            .retry(Retry::linear(100 * MS))
            .wait(5_000 * MS);
        b.acquire("k", &opts).await
    });
    sleep(100 * MS).await;
    let broke_at = Instant::now();
    let broken = operator.break_lock("k").await.unwrap().expect("k was held");
    assert_eq!(broken.key, "k");
    assert_eq!(broken.token, Some(broken_token), "{broken:?}");
    // The holder learns of it: at its next check, within its TTL (600 ms).
    let out = holder.run(sleep(10_000 * MS)).await;
    assert!(matches!(out, Err(Error::LockLost { .. })), "{out:?}");
    assert!(
        broke_at.elapsed() < 600 * MS,
        "lost {:?} after the break",
        broke_at.elapsed()
    );
    // The waiter gets it, with a token above the broken one.
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter gets the broken lock");
    assert!(
        next.token() > broken_token,
        "{:?} after {broken_token:?}",
        next.token()
    );
    assert!(
        !holder.release().await.unwrap(),
        "the broken holder's release changes nothing"
    );
    assert!(!next.is_lost());
    // Nothing held: nothing broken, nothing changed; a key no lock could have is refused.
    assert_eq!(operator.break_lock("nobody").await.unwrap(), None);
    assert!(matches!(
        operator.break_lock("").await,
        Err(Error::InvalidKey { .. })
    ));
    assert!(next.release().await.unwrap());
}
