//! **The wrong ways, kept for the lab** (`lockwise lab unsafe-release`, `check-then-delete`):
//! each call is one atomic step, and using them to release a lock is the bug the lab shows.

use etcd_client::{DeleteOptions, GetOptions};

use super::EtcdBackend;
use crate::error::Result;
use crate::lease::OwnerToken;

impl EtcdBackend {
    /// The owner of the lock on `key`, read on its own: the `GET` of a check-then-delete.
    pub async fn unchecked_owner(&self, key: &str) -> Result<Option<OwnerToken>> {
        let name = self.name(key);
        let got = self
            .call(|mut client| {
                let name = name.clone();
                async move { client.get(name, None::<GetOptions>).await }
            })
            .await?;
        Ok(got
            .kvs()
            .first()
            .and_then(|kv| std::str::from_utf8(kv.value()).ok())
            .and_then(OwnerToken::from_hex))
    }

    /// Deletes the lock on `key` whoever holds it, like `etcdctl del`; returns the owner of the
    /// lock it removed.
    pub async fn unchecked_delete(&self, key: &str) -> Result<Option<OwnerToken>> {
        let name = self.name(key);
        let deleted = self
            .call(|mut client| {
                let name = name.clone();
                async move {
                    client
                        .delete(name, Some(DeleteOptions::new().with_prev_key()))
                        .await
                }
            })
            .await?;
        Ok(deleted
            .prev_kvs()
            .first()
            .and_then(|kv| std::str::from_utf8(kv.value()).ok())
            .and_then(OwnerToken::from_hex))
    }

    /// **For the lab's clean-up only**: deletes the lock of each key in `keys`, whoever holds
    /// it. (Tokens are revisions: nothing else is stored, and nothing can go back.)
    pub async fn purge(&self, keys: &[impl AsRef<str>]) -> Result<()> {
        for key in keys {
            self.unchecked_delete(key.as_ref()).await?;
        }
        Ok(())
    }
}
