//! A lock on Redis, end to end: wait for it, work under it with the fencing token, check it
//! again before the critical write, write through a fenced value, release it.
//!
//! ```sh
//! cargo run -p lockwise --example redis_lock            # LOCKWISE_REDIS_URL or redis://127.0.0.1:6379/
//! ```
//!
//! The README's library examples are the regions between `ANCHOR` lines (checked by
//! `tests/readme.rs`).

use std::time::Duration;

use lockwise::backend::redis::RedisBackend;
use lockwise::{Error, LockOptions, Locker, Retry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url =
        std::env::var("LOCKWISE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    // Its own prefix, kept between runs: fencing counters must never go back.
    let redis = RedisBackend::builder(&url)
        .prefix("lockwise-examples")
        .connect()
        .await?;
    report(Locker::new(redis.clone()), &redis).await
}

async fn report(locker: Locker, redis: &RedisBackend) -> Result<(), Error> {
    // ANCHOR: lock
    // Or Locker::connect("redis://127.0.0.1:6379/"), file:///dir, postgres://…, mysql://…
    let opts = LockOptions::ttl(Duration::from_secs(10)) // renewed every 10s/3 while held
        .wait(Duration::from_secs(5)) // for `acquire`; `try_acquire` tries once
        .retry(Retry::exponential(
            Duration::from_millis(20),
            Duration::from_millis(500),
        ));

    let guard = match locker.acquire("nightly-report", &opts).await {
        Ok(guard) => guard,
        Err(Error::WaitTimeout { .. }) => return Ok(()), // another instance is on it
        Err(e) => return Err(e),
    };
    let token = guard.token(); // FencingToken: strictly increasing, pass it to the resource

    // The work is cancelled if the lock is lost (renewal refused, or the deadline passed):
    // Err(Error::LockLost).
    let rows = guard.run(build_report()).await?;

    // Narrow the unsafe window right before the write; the resource should also check `token`.
    if guard.is_held().await? {
        println!("writing {rows} rows with token {token}");
    }
    let released = guard.release().await?; // false if the lease had already expired
    // ANCHOR_END: lock
    println!("released: {released}");

    // ANCHOR: fenced-set
    // Redis: the value and the token that wrote it, stored together by one script; an older
    // token is refused with Error::StaleToken.
    redis
        .fenced_set("nightly-report", b"42 rows", token)
        .await?;
    // ANCHOR_END: fenced-set
    Ok(())
}

async fn build_report() -> u32 {
    tokio::time::sleep(Duration::from_millis(200)).await;
    42
}
