//! The members of a URL, one channel each, and the one calls go to.
//!
//! etcd-client's own client balances calls over its endpoints, and a member that neither
//! answers nor refuses (cut off by a partition, or frozen) stays in the balance: its channel
//! is connected, so every call has its share of chances to wait there. Here calls stick to one
//! member, as etcd's Go client does, and move to the next one when a call to it fails or does
//! not answer in time; every backend clone moves with them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::sync::OnceCell;

/// One member's endpoint and, once connected, its client.
struct Member {
    endpoint: String,
    client: OnceCell<Client>,
}

/// The members calls may go to, and which one they go to now.
pub(super) struct Members {
    members: Vec<Member>,
    options: ConnectOptions,
    connect_timeout: Duration,
    current: AtomicUsize,
}

impl Members {
    /// The members at `endpoints`, none connected yet.
    pub(super) fn new(
        endpoints: &[String],
        options: ConnectOptions,
        connect_timeout: Duration,
    ) -> Members {
        Members {
            members: endpoints
                .iter()
                .map(|endpoint| Member {
                    endpoint: endpoint.clone(),
                    client: OnceCell::new(),
                })
                .collect(),
            options,
            connect_timeout,
            current: AtomicUsize::new(0),
        }
    }

    /// The member calls go to now: its index and its client, connected on first use, or the
    /// connect error (its credentials refused, or no answer within the connect timeout), after
    /// which the caller moves on with [`failed`](Self::failed).
    pub(super) async fn current(&self) -> (usize, Result<Client, etcd_client::Error>) {
        let index = self.current.load(Ordering::Acquire) % self.members.len().max(1);
        let Some(member) = self.members.get(index) else {
            return (
                index,
                Err(etcd_client::Error::InvalidArgs("no endpoints".into())),
            );
        };
        let client = member
            .client
            .get_or_try_init(|| async {
                let connecting =
                    Client::connect([member.endpoint.as_str()], Some(self.options.clone()));
                tokio::time::timeout(self.connect_timeout, connecting)
                    .await
                    .map_err(|_| {
                        etcd_client::Error::GRpcStatus(tonic::Status::deadline_exceeded(format!(
                            "{} did not answer within {:?}",
                            member.endpoint, self.connect_timeout
                        )))
                    })?
            })
            .await;
        (index, client.cloned())
    }

    /// A call to member `index` failed in a way another member may not: calls move to the
    /// next member, unless another caller has already moved them.
    pub(super) fn failed(&self, index: usize) {
        let next = (index + 1) % self.members.len().max(1);
        let _ = self
            .current
            .compare_exchange(index, next, Ordering::AcqRel, Ordering::Acquire);
    }
}
