//! A semaphore on the embedded file backend: five tasks, two permits; never more than two
//! work at once, and each permit has its own fencing token. Then a read-write lock.
//!
//! ```sh
//! cargo run -p lockwise --example semaphore
//! ```
//!
//! The README's semaphore and read-write lock examples are the regions between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lockwise::{LockOptions, Locker, RwLock, Semaphore};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("lockwise-semaphore-{}", std::process::id()));
    let locker = Locker::connect(&format!("file://{}", dir.display())).await?;
    let (working, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for n in 0..5 {
        let (locker, working, most) = (locker.clone(), working.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            // ANCHOR: semaphore
            // At most two exports at once, across every process on this backend.
            let exports = Semaphore::new(locker, "exports", 2)?;
            let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(30));
            let permit = exports.acquire(&opts).await?; // waits for a free permit
            // Each permit is a lock on one slot (`exports#permit-0`, `-1`): fence on its key.
            println!("task {n}: {} token {}", permit.key(), permit.token());
            permit.run(export(&working, &most)).await?; // cancelled if the permit is lost
            permit.release().await?;
            // ANCHOR_END: semaphore
            Ok::<(), lockwise::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    // ANCHOR: rwlock
    // Many readers at once, or one writer (a writer waiting keeps new readers out).
    let catalog = RwLock::new(locker, "catalog", 16)?; // up to 16 readers at once
    let opts = LockOptions::ttl(Duration::from_secs(10)).wait(Duration::from_secs(5));
    let reader = catalog.read(&opts).await?;
    reader.release().await?;
    let writer = catalog.write(&opts).await?; // once every reader has left
    println!(
        "writing with token {}, fenced on {}",
        writer.token(),
        catalog.writer_key()
    );
    writer.release().await?;
    // ANCHOR_END: rwlock
    std::fs::remove_dir_all(dir).ok();
    let most = most.load(Ordering::SeqCst);
    println!("at most {most} at once");
    assert!(most <= 2, "{most} tasks held a permit at once");
    Ok(())
}

/// The work: counts how many run at once.
async fn export(working: &AtomicUsize, most: &AtomicUsize) {
    let now = working.fetch_add(1, Ordering::SeqCst) + 1;
    most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    working.fetch_sub(1, Ordering::SeqCst);
}
