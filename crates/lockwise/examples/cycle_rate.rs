//! A quick loop: lock cycles (try_acquire + release, one key, one client, sequential) per
//! second on each backend. `lockwise bench` will measure properly, against the raw floor.
//!
//! ```sh
//! cargo run --release -p lockwise --example cycle_rate [URL…]
//! ```
//! Without URLs: memory, a temporary file directory, and the local Redis, PostgreSQL and
//! MariaDB (`LOCKWISE_REDIS_URL`, `LOCKWISE_POSTGRES_URL`, `LOCKWISE_MYSQL_URL`).

use std::time::{Duration, Instant};

use lockwise::{LockOptions, Locker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("lockwise-cycle-rate-{}", std::process::id()));
    let env =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls = vec![
            "memory:".to_owned(),
            format!("file://{}", dir.display()),
            env("LOCKWISE_REDIS_URL", "redis://127.0.0.1:6379/"),
            env(
                "LOCKWISE_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            env("LOCKWISE_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
        ];
    }
    let opts = LockOptions::ttl(Duration::from_secs(10));
    let key = format!("cycle-rate-{}", std::process::id());
    println!("{:<12} {:>12} {:>12}", "backend", "cycles/s", "µs/cycle");
    for url in &urls {
        let locker = Locker::connect(url).await?;
        for _ in 0..50 {
            let guard = locker.try_acquire(&key, &opts).await?;
            guard.ok_or("the key is held elsewhere")?.release().await?;
        }
        let start = Instant::now();
        let mut cycles = 0u32;
        while start.elapsed() < Duration::from_secs(2) {
            let guard = locker.try_acquire(&key, &opts).await?;
            let guard = guard.ok_or("the key is held elsewhere")?;
            guard.release().await?;
            cycles += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        let scheme = url.split(':').next().unwrap_or(url);
        println!(
            "{scheme:<12} {:>12.0} {:>12.1}",
            f64::from(cycles) / secs,
            secs * 1e6 / f64::from(cycles)
        );
    }
    std::fs::remove_dir_all(dir).ok();
    Ok(())
}
