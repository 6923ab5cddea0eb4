//! What a member's driver, its handle and its holds share.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::assignment::Assignment;
use crate::guard::Guard;

/// What a member's driver, its handle and its holds share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) group: Arc<str>,
    pub(super) me: Arc<str>,
    pub(super) guard: Guard,
    pub(super) assignment: watch::Sender<Assignment>,
    pub(super) holds: Mutex<Holds>,
    pub(super) released: Notify,
    pub(super) stop: CancellationToken,
}

#[derive(Debug, Default)]
pub(super) struct Holds {
    pub(super) next: u64,
    pub(super) by_id: HashMap<u64, (String, CancellationToken)>,
}

impl Shared {
    pub(super) fn is_lost(&self) -> bool {
        self.guard.is_lost() || self.assignment.borrow().lost
    }

    pub(super) fn owns(&self, key: &str) -> bool {
        !self.is_lost() && self.assignment.borrow().owns(key)
    }

    pub(super) fn holds(&self) -> std::sync::MutexGuard<'_, Holds> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels the holds on keys this member no longer owns, and waits until they are gone.
    pub(super) async fn stop_lost_keys(&self) {
        loop {
            let released = self.released.notified();
            let waiting = {
                let holds = self.holds();
                let mut waiting = false;
                for (key, token) in holds.by_id.values() {
                    if !self.owns(key) {
                        token.cancel();
                        waiting = true;
                    }
                }
                waiting
            };
            if !waiting {
                return;
            }
            tokio::select! {
                () = released => {}
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    /// Waits until every hold is dropped (or the membership is lost anyway).
    pub(super) async fn holds_gone(&self) {
        loop {
            let released = self.released.notified();
            if self.holds().by_id.is_empty() {
                return;
            }
            tokio::select! {
                () = released => {}
                () = self.guard.lost() => return,
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    }

    pub(super) fn mark_lost(&self) {
        self.assignment.send_modify(|a| a.lost = true);
        for (_, token) in self.holds().by_id.values() {
            token.cancel();
        }
    }
}
