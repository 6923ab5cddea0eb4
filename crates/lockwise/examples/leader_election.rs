//! Leader election on the embedded file backend: two candidates, one leads; when the leader
//! steps down the other is elected with a larger term.
//!
//! ```sh
//! cargo run -p lockwise --example leader_election
//! ```
//!
//! The README's election example is the region between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::time::Duration;

use lockwise::{Election, LockOptions, Locker, Role};

#[tokio::main]
async fn main() -> lockwise::Result<()> {
    let dir = std::env::temp_dir().join(format!("lockwise-election-{}", std::process::id()));
    let url = format!("file://{}", dir.display());
    let outcome = tokio::try_join!(candidate("A", &url), candidate("B", &url));
    std::fs::remove_dir_all(dir).ok();
    outcome.map(|_| ())
}

async fn candidate(name: &'static str, url: &str) -> lockwise::Result<()> {
    let locker = Locker::connect(url).await?;
    // ANCHOR: election
    // The leader is whoever holds the lock; its term is the fencing token. Losing the lock
    // cancels the leader's task, and the candidate campaigns again.
    let election = Election::new(
        locker,
        "outbox-dispatcher",
        LockOptions::ttl(Duration::from_secs(2)),
    );
    let role = election.role(); // watch: Follower / Leader { term }
    election
        .run(|term| async move {
            println!("{name} leads, term {term}"); // pass `term` to what it writes
            tokio::time::sleep(Duration::from_millis(300)).await; // then steps down
        })
        .await?;
    // ANCHOR_END: election
    assert!(matches!(*role.borrow(), Role::Follower));
    Ok(())
}
