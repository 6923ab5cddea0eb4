//! Leader election on the embedded file backend: two candidates, one leads; when the leader
//! steps down the other is elected with a larger term.
//!
//! ```sh
//! cargo run -p lockwise --example leader_election
//! ```

use std::time::Duration;

use lockwise::{Election, LockOptions, Locker};

#[tokio::main]
async fn main() -> lockwise::Result<()> {
    let dir = std::env::temp_dir().join(format!("lockwise-election-{}", std::process::id()));
    let url = format!("file://{}", dir.display());
    let opts = LockOptions::ttl(Duration::from_secs(2));
    let a = Election::new(
        Locker::connect(&url).await?,
        "outbox-dispatcher",
        opts.clone(),
    );
    let b = Election::new(Locker::connect(&url).await?, "outbox-dispatcher", opts);

    // Each leader works for 300 ms, then steps down; the term is its fencing token.
    let lead = |name: &'static str| {
        move |term| async move {
            println!("{name} leads, term {term}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    let (ra, rb) = tokio::join!(a.run(lead("A")), b.run(lead("B")));
    ra?;
    rb?;
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}
