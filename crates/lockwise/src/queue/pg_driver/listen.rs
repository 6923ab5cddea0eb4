//! LISTEN/NOTIFY: waking idle workers.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::Notify;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

/// Wakes the claim loop on NOTIFY for any of `queues`, and once after every reconnect, until
/// `stop`.
pub(super) async fn listen(
    pool: &PgPool,
    channel: &str,
    queues: &[&str],
    wake: &Notify,
    stop: &CancellationToken,
) {
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(pool).await?;
            listener.listen(channel).await?;
            wake.notify_one(); // anything enqueued while we were not listening
            loop {
                match listener.try_recv().await? {
                    Some(note) if queues.contains(&note.payload()) => wake.notify_one(),
                    Some(_) => {}
                    None => wake.notify_one(), // reconnected: poll once
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), sqlx::Error>(())
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            result = connected => {
                if let Err(error) = result {
                    tracing::warn!(%error, "LISTEN failed; polling until it is back");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = sleep(Duration::from_secs(1)) => {}
        }
    }
}
