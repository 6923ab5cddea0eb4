//! The cases of the [`Semaphore`]: at most its permits at once, a waiter served when a permit
//! is freed, and a permit holder frozen past its lease fenced by the next holder of its slot.

// A case is a test: a panic is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::{Error, LockOptions, Permit, Retry, Semaphore};
use tokio::time::{Instant, sleep, timeout};

use super::Harness;

const MS: Duration = Duration::from_millis(1);

/// The semaphore `s` with `permits` on a new client of the harness's store.
async fn semaphore(h: &dyn Harness, permits: u32) -> Semaphore {
    Semaphore::new(h.locker().await, "s", permits).unwrap()
}

async fn permit(s: &Semaphore, opts: &LockOptions) -> Permit {
    s.try_acquire(opts)
        .await
        .unwrap()
        .expect("a permit is free")
}

pub(crate) async fn a_semaphore_grants_at_most_its_permits(h: &dyn Harness) {
    let opts = LockOptions::ttl(10_000 * MS);
    let (a, b, c, d) = (
        semaphore(h, 3).await,
        semaphore(h, 3).await,
        semaphore(h, 3).await,
        semaphore(h, 3).await,
    );
    let pa = permit(&a, &opts).await;
    let pb = permit(&b, &opts).await;
    let pc = permit(&c, &opts).await;
    let mut slots = vec![pa.slot(), pb.slot(), pc.slot()];
    slots.sort_unstable();
    assert_eq!(slots, [0, 1, 2], "each permit holds a slot of its own");
    assert_eq!(pb.key(), format!("s#permit-{}", pb.slot()));
    for _ in 0..3 {
        assert!(
            d.try_acquire(&opts).await.unwrap().is_none(),
            "a 4th permit"
        );
    }
    let (slot, token) = (pb.slot(), pb.token());
    assert!(pb.release().await.unwrap());
    let pd = permit(&d, &opts).await;
    assert_eq!(pd.slot(), slot, "the freed slot");
    assert!(pd.token() > token, "{} after {token}", pd.token());
    assert!(d.try_acquire(&opts).await.unwrap().is_none());
    for p in [pa, pc, pd] {
        assert!(p.release().await.unwrap());
    }
    // One client takes every permit: a slot it holds is never granted to it twice.
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(permit(&a, &opts).await);
    }
    assert!(a.try_acquire(&opts).await.unwrap().is_none());
    assert!(b.try_acquire(&opts).await.unwrap().is_none());
    for p in mine {
        assert!(p.release().await.unwrap());
    }
}

pub(crate) async fn a_semaphore_waiter_gets_a_freed_permit_and_times_out_typed(h: &dyn Harness) {
    let (a, b) = (semaphore(h, 2).await, semaphore(h, 2).await);
    let opts = LockOptions::ttl(20_000 * MS);
    let first = permit(&a, &opts).await;
    let second = permit(&a, &opts).await;
    let started = Instant::now();
    let err = b
        .acquire(&opts.clone().wait(300 * MS))
        .await
        .expect_err("both permits are held");
    assert!(matches!(err, Error::WaitTimeout { .. }), "{err:?}");
    let waited = started.elapsed();
    assert!(
        waited >= 300 * MS && waited < 2_000 * MS,
        "gave up after {waited:?}"
    );
    // A waiter that polls only every 10 s is woken by the release.
    let on_events = opts
        .clone()
        .retry(Retry::linear(10_000 * MS))
        .wait(15_000 * MS);
    let waiter = tokio::spawn(async move {
        let p = b.acquire(&on_events).await;
        (Instant::now(), p)
    });
    sleep(400 * MS).await;
    let (slot, token) = (second.slot(), second.token());
    let released_at = Instant::now();
    assert!(second.release().await.unwrap());
    let (acquired_at, p) = timeout(5_000 * MS, waiter)
        .await
        .expect("the waiter woke")
        .unwrap();
    let p = p.expect("the waiter got the freed permit");
    assert_eq!(p.slot(), slot);
    assert!(p.token() > token);
    let latency = acquired_at - released_at;
    assert!(latency < 500 * MS, "woke {latency:?} after the release");
    assert!(p.release().await.unwrap());
    assert!(first.release().await.unwrap());
}

/// A holder whose renewals stop (a frozen process) loses its permit when its lease runs out;
/// the next holder of its slot has a higher token, so a resource that fences on the permit's
/// key refuses the frozen holder, whose late release leaves the new permit alone.
pub(crate) async fn a_frozen_permit_holder_is_fenced(h: &dyn Harness) {
    let (a, b, c) = (
        semaphore(h, 2).await,
        semaphore(h, 2).await,
        semaphore(h, 2).await,
    );
    let frozen = permit(&a, &LockOptions::ttl(300 * MS).renew(false)).await;
    let kept = permit(&b, &LockOptions::ttl(10_000 * MS)).await;
    let waiting = LockOptions::ttl(10_000 * MS).wait(h.server_lease(300 * MS) + 5_000 * MS);
    let next = c
        .acquire(&waiting)
        .await
        .expect("the frozen holder's permit");
    assert_eq!(next.key(), frozen.key(), "the frozen holder's slot");
    assert!(next.token() > frozen.token());
    assert!(frozen.is_lost(), "the frozen holder's deadline has passed");

    // The resource keeps the highest token per permit key and refuses lower ones.
    let mut resource = std::collections::HashMap::new();
    let mut write = |key: &str, token: lockwise::FencingToken| {
        let seen = resource.entry(key.to_owned()).or_insert(token);
        if token < *seen {
            return false;
        }
        *seen = token;
        true
    };
    assert!(write(next.key(), next.token()));
    assert!(write(kept.key(), kept.token()));
    assert!(
        !write(frozen.key(), frozen.token()),
        "the frozen holder's write"
    );

    assert!(!frozen.release().await.unwrap(), "a stale release");
    assert!(next.is_held().await.unwrap(), "the new permit survives it");
    assert!(next.release().await.unwrap());
    assert!(kept.release().await.unwrap());
}
