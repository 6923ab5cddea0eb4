//! **The wrong ways, kept for the lab** (`lockwise lab unsafe-release`, `check-then-delete`),
//! and the lab's clean-up.

use super::RedisBackend;
use crate::error::Result;
use crate::lease::OwnerToken;

impl RedisBackend {
    /// **The wrong way, kept for the lab**: the owner of the lock on `key`, read with a plain
    /// `GET` (the first half of a check-then-delete).
    pub async fn unchecked_owner(&self, key: &str) -> Result<Option<OwnerToken>> {
        let owner: Option<String> = redis::cmd("GET")
            .arg(self.lock_name(key))
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("get", e))?;
        Ok(owner.as_deref().and_then(OwnerToken::from_hex))
    }

    /// **The wrong way, kept for the lab**: deletes the lock on `key` whoever holds it, like a
    /// plain `DEL` (sent as `GETDEL`, Redis 6.2 or later, so the lab can tell whose lock it
    /// removed).
    pub async fn unchecked_delete(&self, key: &str) -> Result<Option<OwnerToken>> {
        let owner: Option<String> = redis::cmd("GETDEL")
            .arg(self.lock_name(key))
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("getdel", e))?;
        Ok(owner.as_deref().and_then(OwnerToken::from_hex))
    }

    /// **For the lab's clean-up only**: deletes every trace of each key in `keys`, whoever
    /// holds it: the lock, its fencing counter and the fenced resource of the same name.
    ///
    /// **Warning**: this resets fencing counters. A later grant on a purged key gets a token
    /// that a fenced resource may already have seen, and a live holder silently loses its lock.
    /// Call it only for keys that no holder and no fenced resource will ever use again.
    pub async fn purge(&self, keys: &[impl AsRef<str>]) -> Result<()> {
        for key in keys {
            let key = key.as_ref();
            // One DEL per key: its three names share the hash tag `{key}`, so one cluster slot.
            redis::cmd("DEL")
                .arg(self.lock_name(key))
                .arg(self.fence_name(key))
                .arg(self.fenced_name(key))
                .query_async::<()>(&mut self.conn())
                .await
                .map_err(|e| self.fail("purge", e))?;
        }
        Ok(())
    }
}
