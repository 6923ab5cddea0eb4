//! A locker's guards are renewed by one task of the locker. Shared between runtimes, its
//! guards keep being renewed while that task's runtime runs, and lose their lease, with the
//! lost signal, if it shuts down: never a guard that believes it holds a lock nobody renews.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::{LockOptions, Locker};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn guards_of_a_locker_shared_by_two_runtimes() {
    let (first, second) = (runtime(), runtime());
    let locker = first.block_on(Locker::connect("memory://")).unwrap();
    let opts = LockOptions::ttl(Duration::from_millis(600));
    // The first guard starts the renewal task on the first runtime.
    let on_first = first
        .block_on(locker.try_acquire("on-first", &opts))
        .unwrap()
        .unwrap();
    let on_second = second
        .block_on(locker.try_acquire("on-second", &opts))
        .unwrap()
        .unwrap();
    // Five TTLs: both are renewed.
    std::thread::sleep(Duration::from_secs(3));
    assert!(!on_first.is_lost() && !on_second.is_lost());
    let still: Option<bool> = second.block_on(async {
        Some(on_second.is_held().await.ok()? && on_first.is_held().await.ok()?)
    });
    assert_eq!(still, Some(true));
    drop(first);
    second
        .block_on(async { tokio::time::timeout(Duration::from_secs(1), on_second.lost()).await })
        .expect("the guard kept believing it held a lock nobody renews");
    drop(on_first);
}
