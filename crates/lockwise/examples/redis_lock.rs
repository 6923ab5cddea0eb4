//! A lock on Redis, end to end: wait for it, work under it with the fencing token, check it
//! again before the critical write, release it.
//!
//! ```sh
//! cargo run -p lockwise --example redis_lock            # LOCKWISE_REDIS_URL or redis://127.0.0.1:6379/
//! ```

use std::time::Duration;

use lockwise::{Error, LockOptions, Locker, Retry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url =
        std::env::var("LOCKWISE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let locker = Locker::connect(&url).await?;

    let opts = LockOptions::ttl(Duration::from_secs(10)) // renewed every 10s/3 while held
        .wait(Duration::from_secs(5))
        .retry(Retry::exponential(
            Duration::from_millis(20),
            Duration::from_millis(500),
        ));

    let guard = match locker.acquire("examples:nightly-report", &opts).await {
        Ok(guard) => guard,
        Err(Error::WaitTimeout { .. }) => {
            eprintln!("another instance is producing the report; nothing to do");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let token = guard.token();
    println!("acquired with fencing token {token}");

    // The work is cancelled if the lock is lost (renewal refused, or the deadline passed).
    let rows = guard
        .run(async {
            tokio::time::sleep(Duration::from_millis(200)).await; // build the report
            42
        })
        .await?;

    // Narrow the unsafe window right before the write; the resource should also check `token`.
    if guard.is_held().await? {
        println!("writing {rows} rows with token {token}");
    }
    let released = guard.release().await?;
    println!("released: {released}");
    Ok(())
}
