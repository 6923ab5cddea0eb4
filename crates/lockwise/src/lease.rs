//! What a grant is made of: owner token, fencing token, and the local deadline.
//!
//! # The local deadline
//!
//! The lock service counts a lease's TTL from the moment *it* granted it; this process can only
//! count from the moment it *sent* the request, which is earlier. Clocks also drift apart a
//! little. So a holder trusts its lease until
//!
//! ```text
//! deadline = sent + ttl − drift(ttl),     drift(ttl) = ttl / 100 + 2 ms
//! ```
//!
//! where `sent` is the monotonic instant just before the acquire (or extend) request left this
//! process. The margin is Redlock's (1 % clock drift plus 2 ms). Past the deadline the holder
//! must assume the lock is gone even if no one told it so; the guard's lost signal fires then.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// The longest key accepted, in bytes (UTF-8).
pub const MAX_KEY_LEN: usize = 512;
/// The shortest TTL accepted.
pub const MIN_TTL: Duration = Duration::from_millis(100);
/// The longest TTL accepted: one day. Longer leases defeat the purpose of a TTL.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A number that strictly increases on every grant of one key, across all holders.
///
/// Pass it to the resource you protect and let the resource reject any token lower than the
/// highest it has seen: that is what makes a lock safe when a holder pauses past its TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token (for backends and for resources that store tokens).
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The raw number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A random 128-bit value that identifies one grant; release and extend compare it before
/// touching the lock, so a holder whose lease expired can never remove its successor's lock.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 16]);

impl OwnerToken {
    /// A fresh token from the operating system's random source.
    pub fn random() -> Self {
        OwnerToken(rand::random())
    }

    /// A token no grant has: for calls made on nobody's behalf.
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) const fn nobody() -> Self {
        OwnerToken([0; 16])
    }

    /// Rebuilds a token from its 32-character lowercase hex form.
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(s, &mut bytes).ok()?;
        Some(OwnerToken(bytes))
    }

    /// The 32-character lowercase hex form stored by the backends.
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({})", self.to_hex())
    }
}

/// Nanoseconds on `CLOCK_BOOTTIME`: a monotonic clock shared by every process of one boot that,
/// unlike `CLOCK_MONOTONIC` (and so [`std::time::Instant`]), keeps counting while the machine is
/// suspended — as a lock server's TTL does.
///
/// The events of `lockwise lab` (the `lockwise_bench::history` checker) are stamped with it.
pub fn boottime_nanos() -> std::io::Result<u64> {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map_err(std::io::Error::from)?;
    let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// The key a lock is stored under when its backend has a namespace: `namespace:key`. Fixed
/// forever (it feeds advisory keys and `GET_LOCK` names), and shared by every place that
/// derives one, so that session and transaction locks under one namespace exclude each other.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn namespaced<'a>(namespace: Option<&str>, key: &'a str) -> std::borrow::Cow<'a, str> {
    match namespace {
        Some(ns) => format!("{ns}:{key}").into(),
        None => key.into(),
    }
}

/// The safety margin subtracted from a TTL; see the [module docs](self).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Checks a key against the documented rules: not empty, at most [`MAX_KEY_LEN`] bytes, no
/// control characters.
pub fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidKey {
            reason: "the key is empty".into(),
        });
    }
    if key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidKey {
            reason: format!(
                "the key is {} bytes long; the limit is {MAX_KEY_LEN}",
                key.len()
            ),
        });
    }
    if key.chars().any(char::is_control) {
        return Err(Error::InvalidKey {
            reason: "the key contains a control character".into(),
        });
    }
    Ok(())
}

/// Checks a TTL against [`MIN_TTL`]..=[`MAX_TTL`].
pub fn validate_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL {
        return Err(Error::InvalidTtl {
            ttl,
            reason: "shorter than the minimum of 100ms",
        });
    }
    if ttl > MAX_TTL {
        return Err(Error::InvalidTtl {
            ttl,
            reason: "longer than the maximum of 24h",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_token_round_trips_through_hex() {
        let t = OwnerToken::random();
        assert_eq!(OwnerToken::from_hex(&t.to_hex()), Some(t));
        assert_eq!(t.to_hex().len(), 32);
        assert_eq!(OwnerToken::from_hex("zz"), None);
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
        assert_eq!(drift(Duration::from_millis(100)), Duration::from_millis(3));
    }

    #[test]
    fn keys_and_ttls_are_validated() {
        assert!(validate_key("orders").is_ok());
        assert!(matches!(validate_key(""), Err(Error::InvalidKey { .. })));
        assert!(validate_key(&"k".repeat(MAX_KEY_LEN)).is_ok());
        assert!(validate_key(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
        assert!(validate_key("a\nb").is_err());
        assert!(validate_ttl(MIN_TTL).is_ok());
        assert!(validate_ttl(MAX_TTL).is_ok());
        assert!(matches!(
            validate_ttl(Duration::ZERO),
            Err(Error::InvalidTtl { .. })
        ));
        assert!(validate_ttl(MAX_TTL + Duration::from_millis(1)).is_err());
    }
}
