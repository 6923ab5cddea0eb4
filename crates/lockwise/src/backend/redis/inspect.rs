//! Who holds what on Redis: the lock keys under the prefix, each read with its fencing
//! counter, holder record and waiters in one script call (`lua/inspect.lua`); and breaking a
//! lock (`lua/break.lua`).
//!
//! The holder records are written by the loss check, when it sees a lock for the second time
//! (`lua/record.lua`), not by the grant: a grant only notes them in this process's memory, and
//! a lock held for less than the check's interval costs no write.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt};
use redis::Script;

use super::{RedisBackend, Target};
use crate::backend::inspect::{HeldLock, Holder};
use crate::error::{Error, Result};
use crate::lease::{FencingToken, OwnerToken};

static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/inspect.lua")));
static BREAK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/break.lua")));
static RECORD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/record.lua")));

/// The most grants noted and not yet recorded: beyond it (a locker whose loss check is off,
/// holding very many locks), grants go unnamed rather than use more memory.
const MOST_UNRECORDED: usize = 100_000;

/// Grants whose holder record is not written yet, by owner token.
#[derive(Default)]
pub(super) struct Unrecorded(Mutex<HashMap<OwnerToken, Grant>>);

/// A grant noted: its key, token and time, and whether a loss check has seen it.
struct Grant {
    key: String,
    token: u64,
    at: SystemTime,
    seen: bool,
}

impl Grant {
    /// Its holder record: token, time (Unix ms) and holder, tab-separated.
    fn record(&self) -> String {
        let at = self
            .at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let holder = crate::backend::inspect::this_process_encoded();
        format!("{}\t{at}\t{holder}", self.token)
    }
}

impl Unrecorded {
    /// Notes a grant.
    pub(super) fn granted(&self, key: &str, owner: OwnerToken, token: u64) {
        let grant = Grant {
            key: key.to_owned(),
            token,
            at: SystemTime::now(),
            seen: false,
        };
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() < MOST_UNRECORDED {
            map.insert(owner, grant);
        }
    }

    /// Forgets a grant given back.
    pub(super) fn forget(&self, owner: OwnerToken) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&owner);
    }

    /// The key and record of `owner`'s grant if a loss check saw it before (taken); marks it
    /// seen otherwise. So a lock held for less than one check's interval costs no write.
    fn take(&self, owner: OwnerToken) -> Option<(String, String)> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let grant = map.get_mut(&owner)?;
        if !grant.seen {
            grant.seen = true;
            return None;
        }
        let grant = map.remove(&owner)?;
        let record = grant.record();
        Some((grant.key, record))
    }
}

/// How many locks are read at once.
const AT_ONCE: usize = 32;

/// How many names one `SCAN` step asks for.
const SCAN_COUNT: usize = 1_000;

/// What the scripts answer for a held lock: PTTL, the counter, the holder record, waiters.
type Read = Option<(i64, Option<String>, Option<String>, i64)>;

impl RedisBackend {
    /// The record of who holds `key`'s lock (`<prefix>:{<key>}:holder`).
    pub(crate) fn holder_name(&self, key: &str) -> String {
        format!("{}:holder", super::lock_name(&self.inner.prefix, key))
    }

    /// Writes the holder records of the leases the loss check found `held` and had not seen
    /// before. A failure leaves them unnamed; the check's answer stands either way.
    pub(super) async fn record(&self, leases: &[(&str, OwnerToken)], held: &[bool]) {
        let writes = leases
            .iter()
            .zip(held)
            .filter(|(_, held)| **held)
            .filter_map(|((_, owner), _)| Some((*owner, self.inner.unrecorded.take(*owner)?)))
            .map(|(owner, (key, record))| async move {
                RECORD
                    .key(self.lock_name(&key))
                    .key(self.holder_name(&key))
                    .arg(owner.to_hex())
                    .arg(record)
                    .invoke_async::<i64>(&mut self.conn())
                    .await
            });
        for written in futures_util::future::join_all(writes).await {
            if let Err(error) = written {
                tracing::debug!(%error, "writing who holds a lock failed");
            }
        }
    }

    pub(super) async fn held_locks(&self, prefix: &str) -> Result<Vec<HeldLock>> {
        if self.inner.plain {
            return Err(Error::config(
                "a Redis backend on the plain protocol holds bare keys, which cannot be told \
                 from other keys: list the locks of a backend on lockwise's own names",
            ));
        }
        let start = format!("{}:{{", self.inner.prefix);
        let pattern = format!("{start}{}*}}", glob_escaped(prefix));
        let mut keys: Vec<String> = self
            .names(&pattern)
            .await?
            .into_iter()
            .filter_map(|name| Some(name.strip_prefix(&start)?.strip_suffix('}')?.to_owned()))
            .filter(|key| key.starts_with(prefix))
            .collect();
        keys.sort();
        keys.dedup();
        let reads = futures_util::stream::iter(keys)
            .map(|key| async move {
                let read = self.read(&key).await?;
                Ok::<_, Error>(read.map(|read| held(key, read)))
            })
            .buffered(AT_ONCE);
        let held: Vec<Option<HeldLock>> = reads.try_collect().await?;
        Ok(held.into_iter().flatten().collect())
    }

    pub(super) async fn break_now(&self, key: &str) -> Result<Option<HeldLock>> {
        let publish = match self.inner.target {
            Target::Cluster { .. } => "SPUBLISH",
            _ => "PUBLISH",
        };
        let read: Read = BREAK
            .key(self.lock_name(key))
            .key(self.fence_name(key))
            .key(self.holder_name(key))
            .arg(publish)
            .arg(self.channel_name(key))
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("breaking a lock", e))?;
        Ok(read.map(|read| held(key.to_owned(), read)))
    }

    async fn read(&self, key: &str) -> Result<Read> {
        let count = match self.inner.target {
            Target::Cluster { .. } => "SHARDNUMSUB",
            _ => "NUMSUB",
        };
        INSPECT
            .key(self.lock_name(key))
            .key(self.fence_name(key))
            .key(self.holder_name(key))
            .arg(count)
            .arg(self.channel_name(key))
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.fail("reading a lock", e))
    }

    /// The names matching `pattern`: `SCAN` on one server, `KEYS` on every master of a
    /// cluster (redis-rs sends it to each and joins the answers).
    async fn names(&self, pattern: &str) -> Result<Vec<String>> {
        let mut conn = self.conn();
        if let Target::Cluster { .. } = self.inner.target {
            return redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .map_err(|e| self.fail("listing the locks", e));
        }
        let mut names = Vec::new();
        let mut cursor = 0_u64;
        loop {
            let (next, mut batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut conn)
                .await
                .map_err(|e| self.fail("listing the locks", e))?;
            names.append(&mut batch);
            if next == 0 {
                return Ok(names);
            }
            cursor = next;
        }
    }
}

/// A lock as the scripts read it. The holder record counts only when its token is the
/// counter's: otherwise it is an earlier grant's (or the grant came from a client that writes
/// none).
fn held(
    key: String,
    (pttl, counter, record, waiters): (i64, Option<String>, Option<String>, i64),
) -> HeldLock {
    let token = counter.as_deref().and_then(|c| c.parse::<u64>().ok());
    let mut holder = Holder::default();
    let mut held_for = None;
    if let Some(record) = record
        && let Some((fence, rest)) = record.split_once('\t')
        && fence.parse::<u64>().ok() == token
        && let Some((since, who)) = rest.split_once('\t')
    {
        holder = Holder::decode(who);
        held_for = since
            .parse::<u64>()
            .ok()
            .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms))
            .and_then(|at| at.elapsed().ok());
    }
    HeldLock {
        key,
        token: token.map(FencingToken::new),
        holder,
        held_for,
        ttl_left: u64::try_from(pttl).ok().map(Duration::from_millis),
        waiters: u64::try_from(waiters).ok(),
    }
}

/// `text` with `SCAN`'s glob characters escaped, so that it matches itself only.
fn glob_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_matches_itself_only() {
        assert_eq!(glob_escaped("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escaped("orders:"), "orders:");
    }

    #[test]
    fn a_holder_record_counts_only_with_the_counter_s_token() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let record = format!("7\t{}\tweb-1\t42\treport", now - 1_500);
        let lock = held("k".into(), (900, Some("7".into()), Some(record.clone()), 2));
        assert_eq!(lock.token, Some(FencingToken::new(7)));
        assert_eq!(lock.holder.pid, Some(42));
        assert_eq!(lock.holder.name.as_deref(), Some("report"));
        assert!(lock.held_for.unwrap() >= Duration::from_millis(1_400));
        assert_eq!(lock.ttl_left, Some(Duration::from_millis(900)));
        assert_eq!(lock.waiters, Some(2));
        let stale = held("k".into(), (900, Some("8".into()), Some(record), 0));
        assert_eq!(stale.holder, Holder::default());
        assert_eq!(stale.held_for, None);
        // No expiry (PTTL -1): someone else's key, its TTL unknown.
        assert_eq!(held("k".into(), (-1, None, None, 0)).ttl_left, None);
    }
}
