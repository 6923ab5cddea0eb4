//! Rosters in etcd: the key `<prefix>partition/<group>` holds the roster's text, and the key's
//! own `version` (1 when created, one more on every put) is the roster's version, so a
//! compare-and-swap is one transaction that compares it. Nothing else is left behind: a member
//! lock's fencing tokens are revisions, with no counter to forget.

use async_trait::async_trait;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use super::roster::RosterStore;
use crate::backend::etcd::EtcdBackend;
use crate::error::{Error, Result};

/// Rosters next to the locks, on the same etcd client.
#[derive(Debug, Clone)]
pub(crate) struct EtcdRosters(pub(crate) EtcdBackend);

#[async_trait]
impl RosterStore for EtcdRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        let name = self.0.roster_name(group);
        let got = self
            .0
            .call(|mut client| {
                let name = name.clone();
                async move { client.get(name, None).await }
            })
            .await?;
        let Some(kv) = got.kvs().first() else {
            return Ok((0, None));
        };
        let version = u64::try_from(kv.version())
            .map_err(|_| Error::backend_msg("etcd", format!("{name}: a negative version")))?;
        let text = String::from_utf8(kv.value().to_vec())
            .map_err(|_| Error::backend_msg("etcd", format!("{name}: a roster not in UTF-8")))?;
        Ok((version, Some(text)))
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        let name = self.0.roster_name(group);
        let expected = i64::try_from(expected)
            .map_err(|_| Error::config(format!("roster version {expected} out of range")))?;
        // Sent again after a lost answer, a swap that did happen finds the version moved and
        // reports `false`; the caller then reloads and finds its own roster stored.
        let txn = Txn::new()
            .when([Compare::version(name.clone(), CompareOp::Equal, expected)])
            .and_then([TxnOp::put(name, roster, None)]);
        let answer = self
            .0
            .call(|mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await?;
        Ok(answer.succeeded())
    }

    async fn remove(&self, group: &str) -> Result<()> {
        let name = self.0.roster_name(group);
        self.0
            .call(|mut client| {
                let name = name.clone();
                async move { client.delete(name, None).await }
            })
            .await
            .map(drop)
    }
}
