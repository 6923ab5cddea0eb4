//! The cases of the conformance suite: the behaviour a user of lockwise may rely on whatever
//! the backend. Each takes a [`Harness`] that builds fresh clients on an isolated store.

// A case is a test: a panic is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::{Error, Guard, LockOptions, Locker, Retry};
use tokio::time::{Instant, sleep, timeout};

use super::Harness;
pub(crate) use super::held_cases::*;
pub(crate) use super::rwlock_cases::*;
pub(crate) use super::semaphore_cases::*;
use crate::flaky::{FlakyBackend, Op};

const MS: Duration = Duration::from_millis(1);

fn ttl(ms: u32) -> LockOptions {
    LockOptions::ttl(ms * MS)
}

/// Two new clients of the harness's store.
async fn two(h: &dyn Harness) -> (Locker, Locker) {
    (h.locker().await, h.locker().await)
}

/// Takes the lock `k`, which must be free.
async fn take(locker: &Locker, opts: LockOptions) -> Guard {
    locker
        .try_acquire("k", &opts)
        .await
        .unwrap()
        .expect("the lock is free")
}

/// A lease that is not renewed.
fn lease(ms: u32) -> LockOptions {
    ttl(ms).renew(false)
}

/// Waits up to `wait_ms` for a lock, trying again every `poll_ms`.
fn polling(poll_ms: u32, wait_ms: u32) -> LockOptions {
    ttl(5_000)
        .retry(Retry::linear(poll_ms * MS))
        .wait(wait_ms * MS)
}

/// Waits up to 15 s but polls only every 10 s: only a release event (or the holder's known
/// expiry) wakes it sooner.
fn on_events() -> LockOptions {
    polling(10_000, 15_000)
}

/// Waits for the lock `k` with `opts` (it must come free in time: `why`), then releases it.
async fn acquire_and_release(locker: &Locker, opts: LockOptions, why: &str) {
    let guard = locker.acquire("k", &opts).await.expect(why);
    assert!(guard.release().await.unwrap());
}

/// A client whose acquire replies arrive `delay` after the server acted, and its wrapper.
async fn late_replies(h: &dyn Harness, delay: Duration) -> (FlakyBackend, Locker) {
    let faulty = flaky(h).await;
    faulty.delay_replies(Op::TryAcquire, delay);
    let locker = Locker::new(faulty.clone());
    (faulty, locker)
}

/// A case that only release events can pass fails loudly on a backend without them: a
/// conformance case never skips.
fn needs_release_events(h: &dyn Harness, case: &str) {
    assert!(
        h.has_release_events(),
        "{case} needs release events (Backend::watch), which this backend lacks"
    );
}

/// A fault-injecting wrapper around a new client of the harness's store.
async fn flaky(h: &dyn Harness) -> FlakyBackend {
    FlakyBackend::wrap(h.locker().await.backend().clone())
}

pub(crate) async fn two_holders_exclude_each_other(h: &dyn Harness) {
    let (a, b) = two(h).await;
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

pub(crate) async fn waiting_times_out_with_a_typed_error(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let held = take(&a, ttl(5_000)).await;
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
pub(crate) async fn stale_release_leaves_the_new_holders_lock(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, lease(200)).await;
    sleep(h.server_lease(200 * MS) + 100 * MS).await;
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

pub(crate) async fn stale_extend_fails(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, lease(200)).await;
    sleep(h.server_lease(200 * MS) + 100 * MS).await;
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

pub(crate) async fn fencing_tokens_strictly_increase_across_holders_and_reconnects(
    h: &dyn Harness,
) {
    let mut last = 0;
    for round in 0..6 {
        let locker = h.locker().await; // a new client, a new connection
        let opts = if round % 2 == 0 {
            ttl(5_000)
        } else {
            lease(150)
        };
        let guard = take(&locker, opts).await;
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
            sleep(h.server_lease(150 * MS) + 50 * MS).await;
        }
    }
}

pub(crate) async fn expiry_is_honoured(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, lease(300)).await;
    sleep(100 * MS).await;
    assert!(
        b.try_acquire("k", &ttl(5_000)).await.unwrap().is_none(),
        "still within the TTL"
    );
    sleep(h.server_lease(300 * MS) - 100 * MS + 50 * MS).await;
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
pub(crate) async fn a_waiter_wakes_on_release_not_by_polling(h: &dyn Harness) {
    needs_release_events(h, "a_waiter_wakes_on_release_not_by_polling");
    let (a, b) = two(h).await;
    let ga = take(&a, ttl(20_000)).await;
    let opts = on_events();
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

/// The batched ownership check behind the locker's loss check answers lease by lease: a
/// live lease, a deleted one, another owner's and one never granted.
pub(crate) async fn still_held_answers_for_each_lease(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let kept = take(&a, ttl(30_000)).await;
    let gone = b
        .try_acquire("other", &ttl(30_000))
        .await
        .unwrap()
        .expect("free");
    h.delete_lock("other").await;
    let stranger = lockwise::OwnerToken::random();
    let held = a
        .backend()
        .still_held(&[
            ("k", kept.owner()),
            ("other", gone.owner()),
            ("k", stranger),
            ("never", stranger),
        ])
        .await
        .unwrap();
    assert_eq!(held, [true, false, false, false]);
    assert!(a.backend().still_held(&[]).await.unwrap().is_empty());
    assert!(kept.release().await.unwrap());
}

pub(crate) async fn lost_signal_fires_when_the_lock_is_deleted(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, ttl(600)).await;
    let deleted_at = Instant::now();
    h.delete_lock("k").await;
    let freed_at = Instant::now();
    // Another client gets it at once (the server freed it), before the holder even knows.
    let gb = b
        .acquire("k", &polling(10, 1_000))
        .await
        .expect("free after the delete");
    // Bounds with room for a loaded two-core machine (a test of the file backend failed once
    // beside the full test run under CPU steal): what they check is that the lock is free at
    // once and the holder learns of the loss well before its 10 s of work would end.
    assert!(freed_at.elapsed() < 300 * MS, "{:?}", freed_at.elapsed());
    let out = ga.run(sleep(10_000 * MS)).await;
    assert!(matches!(out, Err(Error::LockLost { .. })), "{out:?}");
    // Found at the next renewal (every ttl/3 = 200 ms), and always within one TTL (600 ms).
    assert!(
        deleted_at.elapsed() < 600 * MS,
        "{:?}",
        deleted_at.elapsed()
    );
    assert!(!ga.release().await.unwrap());
    assert!(gb.release().await.unwrap());
}

pub(crate) async fn lost_signal_fires_when_the_lease_expires(h: &dyn Harness) {
    let a = h.locker().await;
    let start = Instant::now();
    let ga = take(&a, lease(300)).await;
    assert!(ga.deadline() <= start + 300 * MS);
    tokio::select! {
        _ = ga.lost() => {}
        _ = sleep(2_000 * MS) => panic!("lost signal did not fire"),
    }
    let at = start.elapsed();
    assert!(at >= 280 * MS && at < 400 * MS, "fired at {at:?}");
}

pub(crate) async fn renewal_keeps_a_lock_through_work_five_times_its_ttl(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, ttl(300)).await;
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

pub(crate) async fn a_dropped_acquire_leaves_no_lock_behind(h: &dyn Harness) {
    let (faulty, slow) = late_replies(h, 2_000 * MS).await;
    let dropped = timeout(300 * MS, slow.try_acquire("k", &ttl(30_000))).await;
    assert!(
        dropped.is_err(),
        "the acquire future was dropped mid-flight"
    );
    assert!(faulty.granted(), "the server had granted the lock");
    // Released by owner token on the runtime at once, long before its 30 s TTL.
    acquire_and_release(
        &h.locker().await,
        polling(20, 2_000),
        "the abandoned grant was released",
    )
    .await;
}

pub(crate) async fn a_dropped_guard_releases_its_lock(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let ga = take(&a, ttl(30_000)).await;
    let lost = ga.lost_token();
    drop(ga);
    assert!(
        lost.is_cancelled(),
        "work holding the lost token is told to stop"
    );
    acquire_and_release(
        &b,
        polling(20, 2_000),
        "released on drop, long before the TTL",
    )
    .await;
}

pub(crate) async fn bad_input_is_refused_before_anything_is_stored(h: &dyn Harness) {
    let a = h.locker().await;
    let before = a.try_acquire("k", &ttl(1_000)).await.unwrap().unwrap();
    let t0 = before.token();
    assert!(before.release().await.unwrap());
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
    if h.tokens_may_skip() {
        assert!(g.token() > t0, "{} after {t0}", g.token());
    } else {
        assert_eq!(
            g.token().get(),
            t0.get() + 1,
            "no token was consumed by the refused calls"
        );
    }
    let err = g.extend(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::InvalidTtl { .. }));
    assert!(g.is_held().await.unwrap());
    assert!(g.release().await.unwrap());
}

/// Keys that differ only in case, accents, Unicode normalisation or a trailing space are
/// different locks (a case-insensitive lock name on the server would make them one).
pub(crate) async fn keys_differing_in_case_accent_or_space_are_distinct_locks(h: &dyn Harness) {
    let a = h.locker().await;
    let keys = [
        "Abc",
        "abc",
        "ABC",
        "Abc ",
        " Abc",
        "r\u{e9}sum\u{e9}",
        "re\u{301}sume\u{301}",
        "resume",
        "stra\u{df}e",
        "strasse",
    ];
    let mut guards = Vec::new();
    for key in keys {
        let g = a
            .try_acquire(key, &ttl(5_000))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key:?} is taken by one of the keys before it"));
        guards.push(g);
    }
    // A new grant of one key is above its own earlier grant (tokens are ordered per key; a
    // backend may count each key apart, so look-alikes' tokens are not compared).
    let first = guards.remove(0);
    let first_token = first.token();
    assert!(first.release().await.unwrap());
    let again = a.try_acquire("Abc", &ttl(5_000)).await.unwrap().unwrap();
    assert!(
        again.token() > first_token,
        "\"Abc\": {first_token} then {}",
        again.token()
    );
    let b = h.locker().await;
    for key in keys {
        assert!(
            b.try_acquire(key, &ttl(5_000)).await.unwrap().is_none(),
            "{key:?} was free to another client"
        );
    }
    assert!(again.release().await.unwrap());
    for g in guards {
        assert!(g.release().await.unwrap());
    }
}

/// A grant whose reply arrives after its local deadline is never acted on (and is released).
pub(crate) async fn a_grant_that_arrives_too_late_is_discarded(h: &dyn Harness) {
    let (faulty, late) = late_replies(h, 400 * MS).await;
    assert!(late.try_acquire("k", &ttl(300)).await.unwrap().is_none());
    assert!(faulty.granted(), "the backend did grant it");
    // The discarded grant is released in the background, at once (long before its TTL).
    acquire_and_release(&h.locker().await, polling(10, 1_000), "nothing left behind").await;
}

/// A renewal that never answers cannot hide a loss: the deadline timer fires the lost signal.
pub(crate) async fn a_hung_renewal_cannot_hide_a_loss(h: &dyn Harness) {
    let faulty = flaky(h).await;
    faulty.hang_next(Op::Extend, u32::MAX);
    let a = Locker::new(faulty);
    let start = Instant::now();
    let ga = take(&a, ttl(300)).await;
    let out = ga.run(sleep(5_000 * MS)).await;
    assert!(matches!(out, Err(Error::LockLost { .. })), "{out:?}");
    let at = start.elapsed();
    assert!(
        at >= 280 * MS && at < 400 * MS,
        "fired at {at:?}, the deadline was ~295 ms"
    );
}

/// A renewal that never answers does not hold up the next one, which is sent on schedule and
/// keeps the lock.
pub(crate) async fn a_hung_renewal_does_not_hold_up_the_next(h: &dyn Harness) {
    let faulty = flaky(h).await;
    faulty.hang_next(Op::Extend, 1);
    let a = Locker::new(faulty);
    let ga = take(&a, ttl(600)).await;
    ga.run(sleep(1_500 * MS))
        .await
        .expect("the lock survived one hung renewal");
    assert!(ga.is_held().await.unwrap());
    assert!(ga.release().await.unwrap());
}

/// Expiry announces nothing: a waiter comes back when the holder's remaining TTL runs out,
/// not at its (10 s) poll interval.
pub(crate) async fn a_waiter_returns_when_the_holders_ttl_runs_out(h: &dyn Harness) {
    needs_release_events(h, "a_waiter_returns_when_the_holders_ttl_runs_out");
    let (a, b) = two(h).await;
    let ga = take(&a, lease(500)).await;
    let start = Instant::now();
    let opts = on_events();
    let gb = b.acquire("k", &opts).await.expect("acquired after expiry");
    let at = start.elapsed();
    assert!(
        at >= 400 * MS && at < h.server_lease(500 * MS) + 500 * MS,
        "acquired at {at:?}"
    );
    assert!(!ga.release().await.unwrap());
    assert!(gb.release().await.unwrap());
}

/// The whole documented TTL range works, renewal included at the 100 ms minimum.
///
/// At the minimum a renewal is due every 33 ms, and on a loaded machine (the full test run
/// beside other tests, CPU taken by the host) one can come too late: the lock is then lost
/// and says so (`LockLost`), as it must. So the 5-TTL run is tried up to three times, and one
/// of them must keep the lock throughout.
pub(crate) async fn ttls_from_the_minimum_to_the_maximum_work(h: &dyn Harness) {
    let (a, b) = two(h).await;
    let mut lost = 0;
    loop {
        let ga = take(&a, LockOptions::ttl(lockwise::MIN_TTL)).await;
        match ga.run(sleep(500 * MS)).await {
            Ok(()) => {
                assert!(b.try_acquire("k", &ttl(1_000)).await.unwrap().is_none());
                assert!(ga.release().await.unwrap());
                break;
            }
            Err(Error::LockLost { .. }) if lost < 2 => {
                lost += 1;
                let _ = ga.release().await;
                sleep(300 * MS).await; // past the lease, whatever the backend last stored
            }
            Err(e) => panic!("renewed every 33 ms for 5 TTLs, {} tries: {e:?}", lost + 1),
        }
    }
    let gmax = take(&a, LockOptions::ttl(lockwise::MAX_TTL)).await;
    assert!(gmax.deadline() > Instant::now() + lockwise::MAX_TTL - 3_600_000 * MS);
    assert!(gmax.release().await.unwrap());
}

/// Many clients waiting on one key each get it in turn (waking never stalls).
pub(crate) async fn many_waiters_each_get_the_lock_in_turn(h: &dyn Harness) {
    needs_release_events(h, "many_waiters_each_get_the_lock_in_turn");
    let holder = h.locker().await;
    let first = take(&holder, ttl(5_000)).await;
    let mut waiters = Vec::new();
    for _ in 0..6 {
        let locker = h.locker().await;
        waiters.push(tokio::spawn(async move {
            let opts = on_events();
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
