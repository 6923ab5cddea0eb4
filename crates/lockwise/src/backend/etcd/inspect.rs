//! Who holds what in etcd: the lock keys under the prefix, their create revisions (the
//! fencing tokens), their session leases' time left and the lengths of their lines of
//! waiters; and breaking a lock by deleting its key.

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp};

use super::EtcdBackend;
use super::line::waiter_prefix;
use crate::backend::{HeldLock, Holder};
use crate::error::Result;
use crate::lease::FencingToken;

impl EtcdBackend {
    pub(super) async fn held_locks(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        let range = self.name(prefix);
        let answer = self
            .call(|mut client| {
                let range = range.clone();
                async move {
                    client
                        .get(range, Some(GetOptions::new().with_prefix()))
                        .await
                }
            })
            .await?;
        let mut held = Vec::with_capacity(answer.kvs().len());
        for kv in answer.kvs() {
            held.push(self.described(kv).await?);
        }
        held.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(held)
    }

    pub(super) async fn break_now(&self, key: &str) -> Result<Option<HeldLock>> {
        let name = self.name(key);
        let answer = self
            .call(|mut client| {
                let name = name.clone();
                async move { client.get(name, None).await }
            })
            .await?;
        let Some(kv) = answer.kvs().first() else {
            return Ok(None);
        };
        let broken = self.described(kv).await?;
        // Only the grant read above: a lock released and granted again meanwhile stays.
        let txn = Txn::new()
            .when([Compare::create_revision(
                name.clone(),
                CompareOp::Equal,
                kv.create_revision(),
            )])
            .and_then([TxnOp::delete(name, None)]);
        Ok(self.txn(txn).await?.succeeded().then_some(broken))
    }

    /// A lock key as a held lock: its create revision is its token, its session lease the
    /// holder's (`session`), and the line of waiters is counted.
    async fn described(&self, kv: &KeyValue) -> Result<HeldLock> {
        let ours = format!("{}lock/", self.inner.prefix);
        let key = String::from_utf8_lossy(kv.key())
            .strip_prefix(&ours)
            .unwrap_or_default()
            .to_owned();
        let lease = kv.lease();
        let ttl_left = if lease == 0 {
            None
        } else {
            let answer = self
                .call(|mut client| async move { client.lease_time_to_live(lease, None).await })
                .await?;
            u64::try_from(answer.ttl()).ok().map(Duration::from_secs)
        };
        let line = waiter_prefix(&self.inner.prefix, &key);
        let waiting = self
            .call(|mut client| {
                let line = line.clone();
                async move {
                    let options = GetOptions::new().with_prefix().with_count_only();
                    client.get(line, Some(options)).await
                }
            })
            .await?;
        Ok(HeldLock {
            key,
            token: u64::try_from(kv.create_revision())
                .ok()
                .map(FencingToken::new),
            holder: Holder {
                session: (lease != 0).then_some(lease),
                ..Holder::default()
            },
            held_for: None,
            ttl_left,
            waiters: u64::try_from(waiting.count()).ok(),
        })
    }
}
