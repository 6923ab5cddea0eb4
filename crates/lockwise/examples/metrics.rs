//! Metrics: lockwise reports to whatever [`metrics`](https://docs.rs/metrics) recorder the
//! program installs. Here a Prometheus recorder, rendered once after a lock cycle (a service
//! would serve it, with `PrometheusBuilder::with_http_listener`).
//!
//! ```sh
//! cargo run -p lockwise --example metrics
//! ```

use std::time::Duration;

use lockwise::{LockOptions, Locker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ANCHOR: metrics
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    lockwise::metrics::describe(); // help texts and units
    // ANCHOR_END: metrics
    let locker = Locker::connect("memory:").await?;
    let guard = locker
        .acquire("report", &LockOptions::ttl(Duration::from_secs(5)))
        .await?;
    guard.release().await?;
    let page = prometheus.render();
    print!("{page}");
    let granted = r#"lockwise_lock_acquisitions_total{backend="memory",result="granted"} 1"#;
    assert!(page.contains(granted), "no grant counted:\n{page}");
    Ok(())
}
