//! Key partitioning with live membership: two members of one group split twelve keys by
//! rendezvous hashing, each working only on its own; when one leaves, the other takes its
//! keys in a newer generation.
//!
//! ```sh
//! cargo run -p lockwise --example partition            # in one process (memory:)
//! cargo run -p lockwise --example partition redis://127.0.0.1/
//! ```
//!
//! The README's partitioning example is the region between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::time::Duration;

use lockwise::partition::{Group, MemberOptions, static_owner};

#[tokio::main]
async fn main() -> lockwise::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory:".to_owned());
    let name = format!("orders-{}", std::process::id());
    let group = Group::connect(&url, &name).await?;
    // The lesson's static form: worker 2 of 4 works on the keys with hash % 4 == 2.
    println!(
        "order-7 belongs to worker {} of 4",
        static_owner("order-7", 4)?
    );
    let a = tokio::spawn(member(group.clone(), "a", Duration::from_millis(1500)));
    let b = tokio::spawn(member(group.clone(), "b", Duration::from_millis(600)));
    let (a, b) = tokio::join!(a, b);
    for done in [a, b] {
        done.map_err(|e| lockwise::Error::InvalidConfig {
            reason: e.to_string(),
        })??;
    }
    // Everyone left: the group's roster can go.
    group.remove().await
}

async fn member(group: Group, name: &'static str, stay: Duration) -> lockwise::Result<()> {
    // ANCHOR: partition
    // Membership is a lock on `<group>/member/<name>`, renewed by the lease core: a member
    // that dies or freezes loses its keys when its lease runs out.
    let member = group
        .join(&MemberOptions::ttl(Duration::from_secs(2)).id(name))
        .await?;
    let keys = (0..12).map(|k| format!("order-{k}"));
    // The handler runs on each key this member owns, is cancelled when the key moves to
    // another member, and starts again when it comes back.
    let work = member.run(keys, |key, generation| async move {
        // The generation is the fencing token of writes made for this key
        // (postgres::Store::fence, RedisBackend::fenced_set).
        println!("{name} works on {key} in generation {generation}");
        std::future::pending::<()>().await // until the key moves
    });
    // ANCHOR_END: partition
    let _ = tokio::time::timeout(stay, work).await;
    println!("{name} leaves");
    member.leave().await
}
