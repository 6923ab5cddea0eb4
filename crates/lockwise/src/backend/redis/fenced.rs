//! Fenced writes in Redis: a hash per resource holding the value and the token that wrote
//! it, replaced only by a token at least as high (`lua/fenced_set.lua`); and the recovery of
//! a lost fencing counter (`lua/reseed.lua`).

use super::{FENCED_SET, RESEED, RedisBackend};
use crate::error::{Error, Result};
use crate::lease::FencingToken;

impl RedisBackend {
    /// The Redis name of a fenced resource (`<prefix>:fenced:{<resource>}`).
    pub fn fenced_name(&self, resource: &str) -> String {
        format!("{}:fenced:{{{resource}}}", self.inner.prefix)
    }

    /// Writes `value` to the fenced resource with the writer's fencing token, atomically
    /// rejecting a token lower than the highest that has written ([`Error::StaleToken`],
    /// nothing changed). Equal tokens pass: one grant may write many times.
    ///
    /// If the lock's counter was lost (a restart without persistence) a fresh holder gets a
    /// token below what the resource has seen and is refused too; recover with
    /// [`reseed`](Self::reseed) and acquire again.
    ///
    /// # Cancel safety
    ///
    /// The write is one atomic script: dropping the future after it was sent may or may not
    /// have written (never half), and the caller cannot tell; read it back with
    /// [`fenced_get`](Self::fenced_get).
    pub async fn fenced_set(
        &self,
        resource: &str,
        value: &[u8],
        token: FencingToken,
    ) -> Result<()> {
        let (written, current): (i64, String) = FENCED_SET
            .key(self.fenced_name(resource))
            .arg(value)
            .arg(token.get().to_string())
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("fenced set", e))?;
        if written == 1 {
            return Ok(());
        }
        crate::metrics::fenced_write_refused("redis");
        Err(Error::StaleToken {
            resource: resource.to_owned(),
            presented: token,
            current: current.parse().ok().map(FencingToken::new),
        })
    }

    /// The value of a fenced resource and the token that wrote it.
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing.
    pub async fn fenced_get(&self, resource: &str) -> Result<Option<(Vec<u8>, FencingToken)>> {
        let (value, token): (Option<Vec<u8>>, Option<String>) = redis::cmd("HMGET")
            .arg(self.fenced_name(resource))
            .arg("value")
            .arg("token")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("fenced get", e))?;
        Ok(value.zip(token.and_then(|t| t.parse().ok()).map(FencingToken::new)))
    }

    /// Raises the fencing counter of `key` to at least `at_least`, so that the next grant's
    /// token is above it: the recovery after [`Error::StaleToken`] caused by a lost counter.
    /// Never lowers the counter. Returns its value afterwards.
    ///
    /// # Cancel safety
    ///
    /// One atomic script: dropping the future may or may not have raised the counter. Raising
    /// is idempotent, so call it again.
    pub async fn reseed(&self, key: &str, at_least: FencingToken) -> Result<FencingToken> {
        if i64::try_from(at_least.get()).is_err() {
            // INCR would fail on the key from then on.
            return Err(Error::config(format!(
                "cannot re-seed {key:?} to {at_least}: Redis counters stop at i64::MAX"
            )));
        }
        let now: String = RESEED
            .key(self.fence_name(key))
            .arg(at_least.get().to_string())
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("reseed", e))?;
        now.parse().map(FencingToken::new).map_err(|_| {
            Error::backend_msg("redis", format!("fencing counter {now:?} is not a number"))
        })
    }
}
