//! Rosters in Redis: a hash `<prefix>:partition:{<group>}` with `version` and `roster`,
//! replaced by a Lua compare-and-swap (`lua/roster_swap.lua`). A member lock's fencing counter
//! is deleted once the member is out of the roster (`lua/forget_fence.lua`).

use std::sync::LazyLock;

use async_trait::async_trait;
use redis::Script;

use super::roster::RosterStore;
use crate::backend::redis::RedisBackend;
use crate::error::Result;
use crate::lease::OwnerToken;

static SWAP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/roster_swap.lua")));

/// Rosters next to the locks, on the same Redis connection.
#[derive(Debug, Clone)]
pub(crate) struct RedisRosters(pub(crate) RedisBackend);

#[async_trait]
impl RosterStore for RedisRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        let (version, roster): (Option<u64>, Option<String>) = redis::cmd("HMGET")
            .arg(self.0.roster_name(group))
            .arg("version")
            .arg("roster")
            .query_async(&mut self.0.conn())
            .await
            .map_err(|e| self.0.fail("roster load", e))?;
        Ok((version.unwrap_or(0), roster))
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        let stored: i64 = SWAP
            .key(self.0.roster_name(group))
            .arg(expected.to_string())
            .arg(roster)
            .invoke_async(&mut self.0.conn())
            .await
            .map_err(|e| self.0.fail("roster swap", e))?;
        Ok(stored == 1)
    }

    async fn forget_member_lock(&self, key: &str, owner: Option<OwnerToken>) -> Result<()> {
        self.0.forget_fence(key, owner).await.map(drop)
    }

    async fn remove(&self, group: &str) -> Result<()> {
        redis::cmd("DEL")
            .arg(self.0.roster_name(group))
            .query_async::<()>(&mut self.0.conn())
            .await
            .map_err(|e| self.0.fail("roster removal", e))
    }
}
