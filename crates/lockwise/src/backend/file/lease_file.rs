//! The `.lease` file: its format, and reading and replacing the key's files.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use super::Paths;
use crate::lease::{OwnerToken, boottime_nanos};

pub(super) const LEASE_HEADER: &str = "lockwise-lease 1";

/// A point on `CLOCK_BOOTTIME` of the current boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Instant {
    pub(super) nanos: u64,
}

impl Instant {
    pub(super) fn now() -> io::Result<Self> {
        Ok(Instant {
            nanos: boottime_nanos()?,
        })
    }

    pub(super) fn plus(self, d: Duration) -> Self {
        let add = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant {
            nanos: self.nanos.saturating_add(add),
        }
    }
}

pub(super) fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            // Without a boot id every lease is treated as from this boot.
            .unwrap_or_else(|_| "unknown".to_owned())
    })
}

/// The content of a `.lease` file: four fields every version reads, then who holds it, for
/// `lockwise locks` (added later: a version that reads only the first four ignores them, and
/// a lease written without them still decodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaseRecord {
    pub(super) owner: OwnerToken,
    pub(super) fence: u64,
    pub(super) expires: Instant,
    pub(super) boot: String,
    pub(super) about: Option<About>,
}

/// Who holds a lease, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct About {
    /// The lock's key (file names are its hash).
    pub(super) key: String,
    pub(super) granted: Instant,
    /// Host, pid and name, tab-separated ([`Holder::encode`](crate::backend::Holder)).
    pub(super) holder: String,
}

impl LeaseRecord {
    pub(super) fn encode(&self) -> String {
        let mut text = format!(
            "{LEASE_HEADER}\nowner {}\nfence {}\nexpires {}\nboot {}\n",
            self.owner.to_hex(),
            self.fence,
            self.expires.nanos,
            self.boot
        );
        if let Some(about) = &self.about {
            text.push_str(&format!(
                "key {}\ngranted {}\nholder {}\n",
                hex::encode(about.key.as_bytes()),
                about.granted.nanos,
                about.holder.replace(['\n', '\r'], " ")
            ));
        }
        text
    }

    pub(super) fn decode(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        if lines.next()? != LEASE_HEADER {
            return None;
        }
        let mut field = |name: &str| {
            lines
                .next()?
                .strip_prefix(name)?
                .strip_prefix(' ')
                .map(str::to_owned)
        };
        Some(LeaseRecord {
            owner: OwnerToken::from_hex(&field("owner")?)?,
            fence: field("fence")?.parse().ok()?,
            expires: Instant {
                nanos: field("expires")?.parse().ok()?,
            },
            boot: field("boot")?,
            about: (|| {
                let key = String::from_utf8(hex::decode(field("key")?).ok()?).ok()?;
                let granted = Instant {
                    nanos: field("granted")?.parse().ok()?,
                };
                Some(About {
                    key,
                    granted,
                    holder: field("holder")?,
                })
            })(),
        })
    }

    /// Live: written in this boot and not yet expired.
    pub(super) fn live_at(&self, now: Instant) -> bool {
        self.boot == boot_id() && self.expires > now
    }
}

/// Reads a lease; an unreadable one counts as expired. That is safe: the lease is replaced
/// without fsync and may come back empty after a power loss, but the `.fence` file's ceiling,
/// written durably *before* a token above it is issued, is at least as high as the lease's
/// token (see [`super::fence`]).
pub(super) fn read_lease(path: &Path) -> io::Result<Option<LeaseRecord>> {
    match fs::read_to_string(path) {
        Ok(text) => {
            let lease = LeaseRecord::decode(&text);
            if lease.is_none() {
                tracing::warn!(path = %path.display(), "unreadable lease file; treating it as expired");
            }
            Ok(lease)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces `path` atomically; with `durable`, the content and the rename reach the disk
/// before this returns.
pub(super) fn replace(paths: &Paths, path: &Path, content: &str, durable: bool) -> io::Result<()> {
    let tmp = paths.tmp();
    let mut f = File::create(&tmp)?;
    f.write_all(content.as_bytes())?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    fs::rename(&tmp, path)?;
    if durable {
        File::open(&paths.dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_records_round_trip_and_reject_garbage() {
        let rec = LeaseRecord {
            owner: OwnerToken::random(),
            fence: 41,
            expires: Instant { nanos: 123 },
            boot: "b".into(),
            about: None,
        };
        assert_eq!(LeaseRecord::decode(&rec.encode()), Some(rec.clone()));
        let about = LeaseRecord {
            about: Some(About {
                key: "orders:42 é".into(),
                granted: Instant { nanos: 100 },
                holder: "web-1\t42\treport".into(),
            }),
            ..rec.clone()
        };
        assert_eq!(LeaseRecord::decode(&about.encode()), Some(about.clone()));
        // What a version without the holder's fields reads: the same lease.
        let old: String = about
            .encode()
            .lines()
            .take(5)
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(LeaseRecord::decode(&old), Some(rec));
        assert_eq!(LeaseRecord::decode("lockwise-lease 1\nowner zz\n"), None);
        assert_eq!(LeaseRecord::decode(""), None);
    }

    #[test]
    fn a_lease_from_another_boot_is_expired() {
        let now = Instant::now().unwrap_or(Instant { nanos: 0 });
        let rec = LeaseRecord {
            owner: OwnerToken::random(),
            fence: 1,
            expires: now.plus(Duration::from_secs(60)),
            boot: "another-boot".into(),
            about: None,
        };
        assert!(!rec.live_at(now));
        let this_boot = LeaseRecord {
            boot: boot_id().to_owned(),
            ..rec
        };
        assert!(this_boot.live_at(now));
    }
}
