//! The inotify watch that wakes waiters when a lease is released or its holder dies.

use tokio::sync::watch;

use super::{FileBackend, io_error};
use crate::backend::ReleaseWatch;
use crate::error::Result;

impl FileBackend {
    /// What [`Backend::watch`](crate::backend::Backend::watch) returns for this backend.
    pub(super) async fn watch_releases(&self, key: &str) -> Result<ReleaseWatch> {
        use futures_util::StreamExt;
        let stem = Self::file_stem(key);
        let (lease_name, held_name) = (format!("{stem}.lease"), format!("{stem}.held"));
        let inotify =
            inotify::Inotify::init().map_err(|e| io_error("cannot start inotify".into(), e))?;
        // A release removes the lease; a holder's death closes its `.held` file, written to.
        inotify
            .watches()
            .add(
                self.dir.as_ref(),
                inotify::WatchMask::DELETE | inotify::WatchMask::CLOSE_WRITE,
            )
            .map_err(|e| io_error(format!("cannot watch {}", self.dir.display()), e))?;
        let mut events = inotify
            .into_event_stream(vec![0u8; 4096])
            .map_err(|e| io_error("cannot read inotify events".into(), e))?;
        let (tx, rx) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if event
                    .name
                    .is_some_and(|n| n == lease_name.as_str() || n == held_name.as_str())
                {
                    tx.send_modify(|n| *n += 1);
                }
            }
        });
        Ok(ReleaseWatch::new(rx, Some(Box::new(AbortOnDrop(task)))))
    }
}

/// Stops the inotify reader when the watch is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
