//! The floor on etcd: a put-if-absent transaction on a lease granted once (kept alive in the
//! background, as a raw user of etcd's `concurrency.Session` would), and a delete that
//! compares the owner.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use lockwise::url::EtcdUrl;

use crate::error::{Error, Result};

/// A client, its lease and the keep-alive task behind it.
#[derive(Clone)]
pub(super) struct EtcdFloor {
    client: Client,
    lease: i64,
    _keep: std::sync::Arc<AbortOnDrop>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl EtcdFloor {
    pub(super) async fn connect(url: &str, shown: &str) -> Result<EtcdFloor> {
        let url = EtcdUrl::parse(url)?;
        let mut options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(3));
        if let Some((user, password)) = &url.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        let mut client = Client::connect(url.endpoints.clone(), Some(options))
            .await
            .map_err(|e| Error::etcd(format!("cannot connect to {shown}"), e))?;
        // The bench's locks are 30 s; the lease is renewed every 10 s while the floor lives.
        let lease = client
            .lease_grant(31, None)
            .await
            .map_err(|e| Error::etcd("lease grant failed", e))?
            .id();
        let mut keeper = client.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                if keeper.lease_keep_alive(lease).await.is_err() {
                    return;
                }
            }
        });
        Ok(EtcdFloor {
            client,
            lease,
            _keep: std::sync::Arc::new(AbortOnDrop(task)),
        })
    }

    pub(super) async fn try_acquire(&mut self, key: &str, owner: &str) -> Result<bool> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                owner,
                Some(PutOptions::new().with_lease(self.lease)),
            )]);
        let answer = self
            .client
            .txn(txn)
            .await
            .map_err(|e| Error::etcd("put-if-absent failed", e))?;
        Ok(answer.succeeded())
    }

    pub(super) async fn release(&mut self, key: &str, owner: &str) -> Result<bool> {
        let txn = Txn::new()
            .when([Compare::value(key, CompareOp::Equal, owner)])
            .and_then([TxnOp::delete(key, None)]);
        let answer = self
            .client
            .txn(txn)
            .await
            .map_err(|e| Error::etcd("compare-and-delete failed", e))?;
        Ok(answer.succeeded())
    }
}
