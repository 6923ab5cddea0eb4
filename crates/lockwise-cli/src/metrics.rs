//! `--metrics-addr`: a Prometheus scrape endpoint on the long-running commands (`run`,
//! `queue work`, `partition`), serving what the library records (see `lockwise::metrics`).

use std::net::SocketAddr;

use crate::exit::Failure;

/// The scrape endpoint's option, flattened into each long-running command.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct MetricsArgs {
    /// Serve Prometheus metrics on this address (any path, e.g. http://127.0.0.1:9464/metrics)
    /// while the command runs
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<SocketAddr>,
}

/// Upper bounds of the histograms' buckets, in seconds: from a loopback round trip to a
/// long job.
#[cfg(feature = "prometheus")]
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 1800.0,
];

impl MetricsArgs {
    /// Whether an endpoint was asked for.
    pub(crate) fn enabled(&self) -> bool {
        self.metrics_addr.is_some()
    }

    /// Starts the endpoint, if one was asked for, on the current runtime: before the command
    /// connects, so that its first grant or claim is counted. A port in use is a usage error.
    #[cfg(feature = "prometheus")]
    pub(crate) fn install(&self) -> Result<(), Failure> {
        let Some(addr) = self.metrics_addr else {
            return Ok(());
        };
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .set_buckets(BUCKETS)
            .and_then(|builder| builder.install())
            .map_err(|e| Failure::usage(format!("--metrics-addr {addr}: {e}")))?;
        lockwise::metrics::describe();
        tracing::info!(%addr, "serving Prometheus metrics");
        Ok(())
    }

    /// Without the `prometheus` feature, `--metrics-addr` is refused.
    #[cfg(not(feature = "prometheus"))]
    pub(crate) fn install(&self) -> Result<(), Failure> {
        match self.metrics_addr {
            None => Ok(()),
            Some(_) => Err(Failure::usage(
                "--metrics-addr: this lockwise was built without the feature prometheus",
            )),
        }
    }
}
