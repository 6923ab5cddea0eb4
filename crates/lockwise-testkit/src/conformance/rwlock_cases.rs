//! The cases of the [`RwLock`]: readers share, a writer excludes them and every other writer,
//! a writer waiting keeps new readers out, and writers' tokens increase.

// A case is a test: a panic is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lockwise::{LockOptions, RwLock};
use tokio::time::{Instant, sleep, timeout};

use super::Harness;

const MS: Duration = Duration::from_millis(1);

async fn rwlock(h: &dyn Harness) -> RwLock {
    RwLock::new(h.locker().await, "rw", 4).unwrap()
}

pub(crate) async fn readers_share_and_a_writer_excludes_them(h: &dyn Harness) {
    let opts = LockOptions::ttl(10_000 * MS);
    let (a, b, w) = (rwlock(h).await, rwlock(h).await, rwlock(h).await);
    let ra = a.try_read(&opts).await.unwrap().expect("a first reader");
    let rb = b.try_read(&opts).await.unwrap().expect("readers share");
    assert_ne!(ra.slot(), rb.slot());
    assert!(
        w.try_write(&opts).await.unwrap().is_none(),
        "a writer while readers read"
    );
    // A writer waits for both readers to leave.
    let waiting = opts.clone().wait(5_000 * MS);
    let writer = tokio::spawn(async move {
        let g = w.write(&waiting).await;
        (Instant::now(), g, w)
    });
    sleep(300 * MS).await;
    assert!(ra.release().await.unwrap());
    sleep(200 * MS).await;
    assert!(!writer.is_finished(), "one reader still reads");
    let left = Instant::now();
    assert!(rb.release().await.unwrap());
    let (at, first, w) = timeout(5_000 * MS, writer)
        .await
        .expect("the writer")
        .unwrap();
    let first = first.expect("the write lock");
    assert!(at >= left, "the writer went in before the last reader left");
    assert!(
        a.try_read(&opts).await.unwrap().is_none(),
        "a reader while a writer writes"
    );
    assert!(b.try_write(&opts).await.unwrap().is_none(), "two writers");
    assert_eq!(first.key(), w.writer_key());
    let token = first.token();
    assert!(first.release().await.unwrap());
    let second = b.try_write(&opts).await.unwrap().expect("free again");
    assert!(second.token() > token, "{} after {token}", second.token());
    assert!(second.release().await.unwrap());
    let again = a.read(&opts.clone().wait(2_000 * MS)).await.unwrap();
    assert!(again.release().await.unwrap());
}

pub(crate) async fn a_waiting_writer_keeps_new_readers_out(h: &dyn Harness) {
    let opts = LockOptions::ttl(10_000 * MS);
    let (a, b, w) = (rwlock(h).await, rwlock(h).await, rwlock(h).await);
    let reading = a.try_read(&opts).await.unwrap().expect("a reader");
    let waiting = opts.clone().wait(5_000 * MS);
    let writer = tokio::spawn(async move { w.write(&waiting).await });
    sleep(300 * MS).await; // the writer holds the writers' lock and waits for the reader
    assert!(
        b.try_read(&opts).await.unwrap().is_none(),
        "a reader got past a waiting writer"
    );
    let late = b.read(&opts.clone().wait(200 * MS)).await;
    assert!(
        matches!(late, Err(lockwise::Error::WaitTimeout { .. })),
        "{late:?}"
    );
    assert!(reading.release().await.unwrap());
    let written = timeout(5_000 * MS, writer)
        .await
        .expect("the writer")
        .unwrap()
        .unwrap();
    assert!(written.release().await.unwrap());
    // Waiting: the timed-out reader's watch (a probe on PostgreSQL and MySQL) may hold the
    // writers' lock for a moment after the writer's release.
    let now_in = b
        .read(&opts.clone().wait(2_000 * MS))
        .await
        .expect("readers again");
    assert!(now_in.release().await.unwrap());
}
