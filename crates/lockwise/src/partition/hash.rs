//! The key hash and the two assignments built on it: the lesson's static `hash % N` and
//! rendezvous (highest-random-weight) hashing over named members.
//!
//! # The hash (fixed forever)
//!
//! [`key_hash`] is **FNV-1a, 64 bits**, over the UTF-8 bytes of the key (offset basis
//! `0xcbf29ce484222325`, prime `0x100000001b3`). It never changes between versions or
//! platforms: every process of a group must agree on it, including processes built from other
//! versions of lockwise. Golden vectors in the tests pin it.
//!
//! A rendezvous **weight** mixes the key's and the member's hashes with the SplitMix64
//! finalizer, so that the weights of one key under different members are independent:
//!
//! ```text
//! weight(key, member) = mix(key_hash(key) ^ mix(key_hash(member)))
//! mix(z) = z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27; z *= 0x94d049bb133111eb; z ^ (z >> 31)
//! ```
//!
//! The owner of a key is the member with the highest weight (ties, which need a 64-bit
//! collision, go to the smaller id). When a member leaves, only its keys move (each to the
//! member with its next-highest weight); when one joins, it takes about `1 / (n + 1)` of the
//! keys, from every member alike.

use crate::error::{Error, Result};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of the key's UTF-8 bytes: the stable key hash of lockwise partitioning (see the
/// [module docs](self)).
///
/// ```
/// assert_eq!(lockwise::partition::key_hash(""), 0xcbf29ce484222325);
/// assert_eq!(lockwise::partition::key_hash("a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn key_hash(key: &str) -> u64 {
    key.bytes().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The bit that marks a key space as a set of named keys ([`key_set_id`]), not a count.
pub const NAMED_KEY_SET: u64 = 1 << 63;

/// The key space of a set of named keys, as [`MemberOptions::key_set`](super::MemberOptions::key_set)
/// stores it: [`NAMED_KEY_SET`] with 63 bits of SHA-256 over the distinct keys in byte order,
/// each followed by a newline. The same set gives the same id, in any order and on any version.
///
/// ```
/// use lockwise::partition::hash::{NAMED_KEY_SET, key_set_id};
/// let id = key_set_id(&["eu", "us"]);
/// assert_eq!(id, key_set_id(&["us", "eu", "us"]));
/// assert_ne!(id, key_set_id(&["eu"]));
/// assert!(id & NAMED_KEY_SET != 0);
/// ```
pub fn key_set_id<S: AsRef<str>>(keys: &[S]) -> u64 {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut digest = Sha256::new();
    for key in sorted {
        digest.update(key.as_bytes());
        digest.update(b"\n");
    }
    let bytes = digest.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[..8]);
    NAMED_KEY_SET | (u64::from_be_bytes(first) >> 1)
}

/// The lesson's static partitioning: the index (`0..total`) of the worker that owns `key`,
/// `key_hash(key) % total`. Every key moves when `total` changes; use a
/// [`Group`](super::Group) when workers come and go.
///
/// ```
/// let mine = lockwise::partition::static_owner("order-42", 4)? == 2;
/// # let _ = mine; Ok::<(), lockwise::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidConfig`] when `total` is zero.
pub fn static_owner(key: &str, total: u32) -> Result<u32> {
    if total == 0 {
        return Err(Error::config(
            "a partitioning needs at least one worker (total is 0)",
        ));
    }
    // The remainder is below `total`, a u32.
    Ok(u32::try_from(key_hash(key) % u64::from(total)).unwrap_or(0))
}

/// The SplitMix64 finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The rendezvous weight of `key` under `member` (see the [module docs](self)).
pub fn weight(key: &str, member: &str) -> u64 {
    mix(key_hash(key) ^ mix(key_hash(member)))
}

/// The member that owns `key` among `members` by rendezvous hashing: the one with the highest
/// [`weight`] (the smaller id on a tie). `None` when there are no members.
///
/// ```
/// use lockwise::partition::rendezvous_owner;
/// let members = ["a", "b", "c"];
/// let owner = rendezvous_owner("order-42", &members).unwrap();
/// // Removing another member never moves the key.
/// let rest: Vec<&str> = members.iter().copied().filter(|m| *m == owner || *m == "a").collect();
/// assert_eq!(rendezvous_owner("order-42", &rest), Some(owner));
/// ```
pub fn rendezvous_owner<'a, S: AsRef<str>>(key: &str, members: &'a [S]) -> Option<&'a str> {
    let key = key_hash(key);
    members
        .iter()
        .map(|m| (mix(key ^ mix(key_hash(m.as_ref()))), m.as_ref()))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published FNV-1a 64 test vectors (Fowler, Noll, Vo) and the SplitMix64 finalizer's,
    /// then lockwise's own weights and owners as first computed: if one of these changes,
    /// processes of two versions would disagree on every assignment.
    #[test]
    fn golden_vectors() {
        assert_eq!(key_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(key_hash("foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(
            static_owner("foobar", 7).ok(),
            Some((0x8594_4171_f739_67e8u64 % 7) as u32)
        );
        assert_eq!(mix(0), 0);
        assert_eq!(mix(1), 0x5692_161d_100b_05e5);
        let pinned = [
            (weight("0", "m0"), WEIGHT_0_M0),
            (weight("order-42", "worker-a"), WEIGHT_ORDER42_A),
        ];
        for (got, want) in pinned {
            assert_eq!(got, want, "{got:#x}");
        }
        let members = ["m0", "m1", "m2", "m3"];
        let owners: Vec<&str> = (0..8)
            .map(|k| rendezvous_owner(&k.to_string(), &members).unwrap_or(""))
            .collect();
        assert_eq!(owners, OWNERS_0_TO_7);
    }

    const WEIGHT_0_M0: u64 = 0x5fa4_5147_2ec5_fbbb;
    const WEIGHT_ORDER42_A: u64 = 0x6c12_606f_64b4_8e2c;
    const OWNERS_0_TO_7: [&str; 8] = ["m3", "m2", "m0", "m2", "m0", "m1", "m2", "m0"];

    #[test]
    fn zero_workers_is_an_error_not_a_panic() {
        assert!(matches!(
            static_owner("k", 0),
            Err(Error::InvalidConfig { .. })
        ));
        assert_eq!(rendezvous_owner::<&str>("k", &[]), None);
    }

    /// Only the leaving member's keys move; a joining member takes about 1/(n+1) of the keys.
    #[test]
    fn minimal_movement_and_even_load() {
        let four = ["m0", "m1", "m2", "m3"];
        let five = ["m0", "m1", "m2", "m3", "m4"];
        let keys: Vec<String> = (0..1000).map(|k| k.to_string()).collect();
        let mut load = [0usize; 4];
        let mut moved_on_join = 0;
        for key in &keys {
            let before = rendezvous_owner(key, &four).unwrap_or("");
            let after = rendezvous_owner(key, &five).unwrap_or("");
            if before != after {
                assert_eq!(after, "m4", "a join moves keys only to the new member");
                moved_on_join += 1;
            }
            let without_m2: Vec<&str> = four.iter().copied().filter(|m| *m != "m2").collect();
            let left = rendezvous_owner(key, &without_m2).unwrap_or("");
            if before != "m2" {
                assert_eq!(left, before, "a leave moves only the leaver's keys");
            }
            load[four.iter().position(|m| *m == before).unwrap_or(0)] += 1;
        }
        assert!((150..=250).contains(&moved_on_join), "{moved_on_join}");
        for n in load {
            assert!((200..=300).contains(&n), "{load:?}");
        }
    }
}
